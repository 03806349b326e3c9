"""Fixtures of the replication integration tests: a captured event log and started clusters.

Every cluster a test gets is stopped in the fixture's teardown (it is used as a context
manager), so no broker, actor or temp dir outlives its test. These clusters run without
ZooKeeper (`zookeeper=None`): the data path under a fixed assignment, where leaders never
move. The controller and failover are tested in tests/controller.
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
