"""Fixtures of the client tests: a captured event log and started clusters (no ZooKeeper).

Every cluster is stopped in the fixture's teardown, so no broker, actor or temp dir outlives
its test. Without ZooKeeper the leaders stay where `create_topic` put them: partition `p`
of a topic is led by broker `p % 3 + 1`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactor.testing import Cluster
from tests.replication.support import FAST, STICKY_ISR, EventLog, captured_events


@pytest.fixture(autouse=True)
def events() -> Iterator[EventLog]:
    """Each test writes its events to its own stream; tracing is restored as found afterwards."""
    with captured_events() as events:
        yield events


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
