"""Brokers that share nothing but ZooKeeper and TCP, in one test process.

Each broker has a `Directory` of its own, so the only way its actors reach another broker's is
the inter-broker `NetworkClient` over loopback: exactly the wiring of a broker process
(`kafkactor.server.broker_process`), without the seconds a process takes to start. ZooKeeper
is the embedded model (one `EmbeddedZooKeeper`, a session per broker), so sessions can be
expired at once.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kazoo.exceptions import NoNodeError

from kafkactor.actors.broker import Broker, BrokerConfig
from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.admin_zk import AdminZkClient
from kafkactor.actors.controller.topic_configs import ZkTopicConfigs
from kafkactor.actors.runtime import Directory
from kafkactor.clients import Producer
from kafkactor.network.network_client import NetworkClient, NetworkClientConfig
from kafkactor.network.socket_server import SocketServerConfig
from kafkactor.zk_model import EmbeddedZooKeeper
from tests.replication.support import wait_until

SESSION_TIMEOUT_MS = 600


class SplitBroker:
    """One broker with its own Directory and network client (a broker process's wiring)."""

    def __init__(
        self,
        cluster: SplitCluster,
        broker_id: int,
        port: int = 0,
        *,
        host: str = "127.0.0.1",
        advertised: tuple[str, int] | None = None,
    ) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.directory = Directory()
        self.network = NetworkClient(
            broker_id,
            self.directory,
            cluster.endpoint,
            config=NetworkClientConfig(request_timeout_ms=cluster.request_timeout_ms),
        ).start()
        self.directory.remote = self.network.remote
        self.broker = Broker(
            broker_id,
            cluster.data_dir / f"broker-{broker_id}",
            self.directory,
            config=cluster.config,
            topic_configs=ZkTopicConfigs(lambda: cluster.zk),
            zookeeper=cluster.connect,
            listener=SocketServerConfig(host=host, port=port),
            advertised=advertised,
            admin=cluster.admin,
        ).start()

    @property
    def port(self) -> int:
        return self.broker.endpoint[1]

    def kill(self) -> None:
        """A crash: the broker stops as a crashed process would, its connections drop."""
        self.broker.kill()
        self.network.close()

    def stop(self, *, controlled: bool = False) -> bool:
        moved = False
        if controlled:
            moved = self.broker.controlled_shutdown(retries=3, backoff_ms=100, timeout_s=5.0)
        self.broker.shutdown()
        self.network.close()
        return moved


class SplitCluster:
    """N `SplitBroker`s (ids 1..N) on one embedded ZooKeeper."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        config: BrokerConfig | None = None,
        request_timeout_ms: int = 5_000,
    ) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="kafkactor-split-"))
        self.config = config if config is not None else BrokerConfig()
        self.request_timeout_ms = request_timeout_ms
        self.zookeeper = EmbeddedZooKeeper(tick_ms=SESSION_TIMEOUT_MS // 2)
        self.zk: Any = self.connect()
        self.admin = AdminZkClient(lambda: self.zk, timeout_s=10.0)
        self.brokers: dict[int, SplitBroker] = {}
        self.count = brokers

    def connect(self) -> Any:
        return self.zookeeper.connect(SESSION_TIMEOUT_MS)

    def endpoint(self, broker_id: int) -> tuple[str, int] | None:
        try:
            data, _ = self.zk.get(zk_data.broker_path(broker_id))
        except NoNodeError:
            return None
        registration = zk_data.BrokerRegistration.decode(broker_id, data)
        return registration.host, registration.port

    def start(self) -> SplitCluster:
        for broker_id in range(1, self.count + 1):
            self.brokers[broker_id] = SplitBroker(self, broker_id)
        wait_until(
            lambda: self.controller() is not None and len(self.admin.registered_brokers()) == 3,
            message="every broker registered and a controller elected",
        )
        return self

    def restart(self, broker_id: int) -> SplitBroker:
        port = self.brokers[broker_id].port
        self.brokers[broker_id] = SplitBroker(self, broker_id, port)
        return self.brokers[broker_id]

    def controller(self) -> int | None:
        try:
            data, _ = self.zk.get(zk_data.CONTROLLER)
        except NoNodeError:
            return None
        return zk_data.decode_controller(data)

    def state(self, topic: str, partition: int) -> Any:
        data, _ = self.zk.get(zk_data.partition_state_path(topic, partition))
        return zk_data.decode_partition_state(topic, partition, data)

    def producer(self, broker_id: int, **options: Any) -> Producer:
        """An in-process producer on `broker_id`'s Directory: it reaches that broker only."""
        return Producer(self.brokers[broker_id].directory, lambda: [broker_id], **options)

    def close(self) -> None:
        for broker in self.brokers.values():
            if broker.broker.alive:
                broker.stop()
            else:
                broker.network.close()
        self.zk.stop()
        self.zk.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


@contextmanager
def split_cluster(brokers: int = 3, **options: Any) -> Iterator[SplitCluster]:
    cluster = SplitCluster(brokers, **options)
    try:
        yield cluster.start()
    finally:
        cluster.close()
