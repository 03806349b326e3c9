"""Pykka's actor registry behind kafkactor's actors: an ordered set, so that starting and
stopping tens of thousands of actors costs O(1) each, with Pykka's registry API unchanged."""

from __future__ import annotations

from typing import Any

import pykka
import pytest

from kafkactor.actors.runtime import TracedActor  # noqa: F401 - importing it installs the set
from kafkactor.actors.runtime.registry import RegisteredRefs, install

pytestmark = pytest.mark.timeout(30)


class Echo(pykka.ThreadingActor):
    def on_receive(self, message: object) -> object:
        return message


def test_pykka_registry_holds_a_registered_refs_set() -> None:
    registry: Any = pykka.ActorRegistry  # its list, typed as a list
    assert isinstance(registry._actor_refs, RegisteredRefs)
    install()  # idempotent
    assert isinstance(registry._actor_refs, RegisteredRefs)


def test_started_and_stopped_actors_come_and_go_in_order() -> None:
    before = pykka.ActorRegistry.get_all()
    refs = [Echo.start() for _ in range(5)]
    try:
        assert pykka.ActorRegistry.get_all()[len(before) :] == refs  # registration order
        assert pykka.ActorRegistry.get_by_urn(refs[2].actor_urn) is refs[2]
        assert pykka.ActorRegistry.get_by_class(Echo) == refs
        refs[2].stop()
        assert refs[2] not in pykka.ActorRegistry.get_all()
        assert pykka.ActorRegistry.get_by_class(Echo) == [refs[0], refs[1], refs[3], refs[4]]
        assert refs[3].ask("still here") == "still here"
    finally:
        for ref in refs:
            ref.stop()
    assert pykka.ActorRegistry.get_by_class(Echo) == []
    pykka.ActorRegistry.unregister(refs[0])  # twice: a no-op, as in Pykka


def test_the_set_answers_what_a_list_would() -> None:
    refs = RegisteredRefs(["a", "b"])
    refs.append("c")
    assert "b" in refs and "z" not in refs
    refs.remove("b")
    assert list(refs) == ["a", "c"] and refs[:] == ["a", "c"] and refs[-1] == "c"
    assert len(refs) == 2
    with pytest.raises(ValueError, match="not registered"):
        refs.remove("b")
