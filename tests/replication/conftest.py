"""Fixtures of the replication integration tests: a captured event log and started clusters.

Every cluster a test gets is stopped in the fixture's teardown (it is used as a context
manager), so no broker, actor or temp dir outlives its test. These clusters run without
ZooKeeper (`zookeeper=None`): the data path under a fixed assignment, where leaders never
move. The controller and failover are tested in tests/controller.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest

from kafkactor import tracing
from kafkactor.actors.cluster import Cluster
from tests.replication.support import FAST, STICKY_ISR, EventLog


@pytest.fixture(autouse=True)
def events() -> Iterator[EventLog]:
    """Each test writes its events to its own stream; tracing is restored as found afterwards."""
    state = tracing._state  # other test modules configure tracing too
    with state.lock:
        saved = (state.sink, state.owned_sink, state.enabled, state.clock)
        state.owned_sink = False  # configure() must not close a file someone else opened
    stream = io.BytesIO()
    tracing.configure(stream=stream)
    yield EventLog(stream, tracing.flush)
    with state.lock:
        if state.owned_sink and state.sink is not None:
            state.sink.close()
        state.sink, state.owned_sink, state.enabled, state.clock = saved


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """Three brokers on the real clock that drop a silent follower from the ISR in ~0.4-0.6 s."""
    with Cluster(3, config=FAST, zookeeper=None) as started:
        yield started


@pytest.fixture
def sticky_cluster() -> Iterator[Cluster]:
    """Three brokers on the real clock whose ISR keeps a dead follower for 10 s."""
    with Cluster(3, config=STICKY_ISR, zookeeper=None) as started:
        yield started
