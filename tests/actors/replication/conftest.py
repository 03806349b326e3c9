"""Fixtures of the DelayedFetch / DelayedProduce tests driven without actors (test_delayed's
Harness): the logs a test opens, closed after it, and the harness over them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactor.storage import Log
from tests.actors.replication.test_delayed import Harness


@pytest.fixture
def logs() -> Iterator[dict[str, Log]]:
    opened: dict[str, Log] = {}
    yield opened
    for log in opened.values():
        log.close()


@pytest.fixture
def h(logs: dict[str, Log]) -> Harness:
    return Harness(logs)
