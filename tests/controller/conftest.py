"""Fixtures of the controller integration tests: captured events, clusters on ZooKeeper.

The event log is the replication tests' `events` fixture (autouse: every test writes its
tracing events to its own stream). `real_zookeeper` is the ZooKeeper conformance suite's
session-scoped server (Debian's ZooKeeper 3.8 on a free loopback port, run by
`kafkactor.server.zookeeper.LocalZooKeeper`; the tests that use it skip when java or the
package is missing). Every cluster is stopped in the fixture teardown.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactor.testing import Cluster
from tests.controller.support import embedded_cluster, settled_controller
from tests.replication.conftest import events
from tests.zk_conformance.conftest import real_zookeeper

__all__ = ["cluster", "events", "real_zookeeper"]


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """Three brokers on the embedded ZooKeeper: a crashed broker's session expires in 0.6 s;
    a silent follower leaves the ISR after ~0.4-0.6 s. Yielded once the controller has seen
    every broker register (`Cluster.start` waits only for the registrations themselves)."""
    with embedded_cluster() as started:
        settled_controller(started)
        yield started
