"""Fixtures of the process tests: a real ZooKeeper and three `kafkactor broker` processes,
started by `kafkactor.server.launcher` exactly as `kafkactor cluster up` starts them.

One cluster serves both modules (package scope: starting ZooKeeper and three broker
processes, and stopping them, took seconds per module); each test leaves every broker running
(a test that stops one starts it again), so the next finds the cluster whole. Sessions and ISR
lag are short, so failures are noticed in a second or two, and a controlled shutdown that
cannot move every leadership retries quickly. The internal topics have 5 partitions, not 50:
every broker a test stops, kills or restarts moves, reopens and catches up its share of them.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.common import PartitionLeaderState
from kafkactor.server import launcher
from kafkactor.server.cluster_status import status
from kafkactor.server.zookeeper import LocalZooKeeper
from tests.replication.support import wait_until

SESSION_TIMEOUT_MS = 2_000
SETTINGS = {
    "replica.lag.time.max.ms": "1500",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "replica.socket.timeout.ms": "2000",
    "request.timeout.ms": "5000",
    "controlled.shutdown.retry.backoff.ms": "300",
    "group.initial.rebalance.delay.ms": "0",
    # every broker stopped, killed or restarted moves, loads and catches up its share of the
    # internal topics; at Kafka's 50 partitions each (RF 3), those dwarfed the test topics
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.num.partitions": "5",
}
ZOOKEEPER_TICK_MS = 200  # sessions of 0.4 to 4 s


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    available = LocalZooKeeper.available()
    if available:
        return
    for item in items:
        if "tests/processes/" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason=f"no ZooKeeper: {available}"))


@dataclass
class ProcessCluster:
    """A started `kafkactor cluster` directory and a ZooKeeper client to read its state."""

    root: Path
    bootstrap_servers: str
    zk: KazooClient

    def state(self, topic: str, partition: int) -> PartitionLeaderState:
        data, _ = self.zk.get(zk_data.partition_state_path(topic, partition))
        return zk_data.decode_partition_state(topic, partition, data)

    def controller(self) -> int:
        """The elected controller (-1 between a controller's death and the next election)."""
        try:
            data, _ = self.zk.get(zk_data.CONTROLLER)
        except NoNodeError:
            return -1
        return zk_data.decode_controller(data)

    def registered(self) -> list[int]:
        return sorted(int(b) for b in self.zk.get_children(zk_data.BROKER_IDS))

    def event_logs(self) -> list[Path]:
        return sorted(self.root.glob("broker-*/events.jsonl"))

    def whole(self) -> None:
        """Wait until every broker runs and is registered (after a test restarted one)."""
        wait_until(lambda: self.registered() == [1, 2, 3], timeout_s=30, message="3 registered")
        assert all(b.state == "running" for b in status(self.root).brokers)


@pytest.fixture(scope="package")
def process_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    root = tmp_path_factory.mktemp("kc")
    started = launcher.up(
        root,
        3,
        settings=SETTINGS,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
    )
    zk = KazooClient(hosts=started.zookeeper_connect, timeout=5.0)  # with its chroot
    try:
        zk.start(timeout=10)
        yield ProcessCluster(root, started.bootstrap_servers, zk)
    finally:
        zk.stop()
        zk.close()
        launcher.down(root, timeout_s=20)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:100]
    return f"{name}-{uuid.uuid4().hex[:8]}"
