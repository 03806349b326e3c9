"""Fixtures of the actor runtime's tests: actors a test starts are stopped by its teardown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from kafkactor.actors.runtime import TracedActor

WAIT_S = 5.0  # a generous bound for anything that must happen


class Actors:
    """Starts actors for one test and stops them all (in reverse order) afterwards."""

    def __init__(self) -> None:
        self.refs: list[pykka.ActorRef[Any]] = []

    def start(self, actor_class: type[TracedActor], *args: Any, **kwargs: Any) -> Any:
        ref = actor_class.start(*args, **kwargs)
        self.refs.append(ref)
        return ref

    def stop_all(self) -> None:
        for ref in reversed(self.refs):
            if ref.is_alive():
                ref.stop(block=True, timeout=WAIT_S)
        ours = {id(ref) for ref in self.refs}
        if any(id(ref) in ours for ref in pykka.ActorRegistry.get_all()):
            pykka.ActorRegistry.stop_all(block=True, timeout=WAIT_S)  # the last resort


@pytest.fixture
def actors() -> Iterator[Actors]:
    started = Actors()
    try:
        yield started
    finally:
        started.stop_all()
        assert not any(ref.is_alive() for ref in started.refs)
