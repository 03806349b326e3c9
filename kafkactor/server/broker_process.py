"""`kafkactor broker --config FILE`: one broker in this process, its peers in others (Kafka's
`kafka.Kafka` main and `KafkaServer`).

The broker is the same `Broker` the in-process `Cluster` runs; what differs is around it:
- its ZooKeeper is a real one (`zookeeper.connect`), through kazoo;
- its `Directory` resolves the addresses of other brokers' actors to the inter-broker
  `NetworkClient`, which finds them through their registrations in ZooKeeper (their
  inter-broker listener's endpoint) and speaks Kafka's inter-broker APIs to them, over TLS
  and logged in by SASL when that listener asks for it (`security.inter_broker`);
- topics are created through ZooKeeper (`AdminZkClient`), and their configs read from it
  (`ZkTopicConfigs`), since no other process shares this one's memory;
- SIGTERM (or SIGINT) stops it cleanly after a controlled shutdown; SIGKILL is a crash.

The process keeps one ZooKeeper session of its own for those reads and writes, beside the
broker's registration session, so neither waits for the other.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from kazoo.exceptions import NoNodeError

from kafkactor import tracing, zk_model
from kafkactor.actors.broker import Broker
from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.admin_zk import AdminZkClient
from kafkactor.actors.controller.topic_configs import ZkTopicConfigs
from kafkactor.actors.runtime import Directory
from kafkactor.network.network_client import NetworkClient, NetworkClientConfig
from kafkactor.server.config import ConfigError, KafkaConfig
from kafkactor.server.security_properties import SecuritySettingError, check_store_files

__all__ = ["BrokerProcess", "main"]


class BrokerProcess:
    """One broker of a multi-process cluster, assembled from a `KafkaConfig` (see module doc).

    `start()` returns once the broker serves (its listener bound, registered in ZooKeeper);
    `stop(controlled=True)` asks the controller to move its leaderships first.
    """

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.directory = Directory()
        self.zk: Any = None  # the process's own session: topic admin, configs, peers
        self.network: NetworkClient | None = None
        self.broker: Broker | None = None

    def start(self) -> BrokerProcess:
        config = self.config
        if config.event_log_enable:
            tracing.configure(path=config.event_log)
        _ensure_chroot(config.zookeeper_connect, config.zookeeper_session_timeout_ms)
        self.zk = zk_model.connect(
            config.zookeeper_connect,
            session_timeout_ms=config.zookeeper_session_timeout_ms,
            timeout_s=config.zookeeper_connection_timeout_ms / 1000,
        )
        self.network = NetworkClient(
            config.broker_id,
            self.directory,
            self._endpoint,
            config=NetworkClientConfig(request_timeout_ms=config.request_timeout_ms),
            security=config.security.inter_broker if config.security is not None else None,
        ).start()
        self.directory.remote = self.network.remote
        defaults = config.log_config
        self.broker = Broker(
            config.broker_id,
            Path(config.log_dirs),
            self.directory,
            config=config.broker,
            topic_configs=ZkTopicConfigs(lambda: self.zk, defaults),
            zookeeper=self._connect_broker_session,
            listener=config.socket_server,
            advertised=_advertised(config),
            admin=AdminZkClient(
                lambda: self.zk, defaults=defaults, timeout_s=config.request_timeout_ms / 1000
            ),
            security=config.security,
        )
        self.broker.start()
        return self

    def _connect_broker_session(self) -> Any:
        return zk_model.connect(
            self.config.zookeeper_connect,
            session_timeout_ms=self.config.zookeeper_session_timeout_ms,
            timeout_s=self.config.zookeeper_connection_timeout_ms / 1000,
        )

    def _endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """Where broker `broker_id`'s inter-broker listener is, from its registration (a
        registration without listener names: its host and port); None: not registered."""
        try:
            data, _ = self.zk.get(zk_data.broker_path(broker_id))
            registration = zk_data.BrokerRegistration.decode(broker_id, data)
        except (NoNodeError, zk_data.MalformedZnodeError):
            return None
        security = self.config.security
        listener = security.inter_broker.listener if security is not None else "PLAINTEXT"
        found = registration.endpoint(listener)
        if found is not None or registration.listeners:
            return found
        if registration.port < 0:
            return None
        return registration.host, registration.port

    @property
    def endpoint(self) -> tuple[str, int]:
        assert self.broker is not None
        return self.broker.endpoint

    def stop(self, *, controlled: bool = True) -> bool:
        """Stop the broker: after a controlled shutdown when `controlled` (and enabled), then
        cleanly. Returns whether the controlled shutdown left no leadership here."""
        moved = False
        config = self.config
        if self.broker is not None:
            if controlled and config.controlled_shutdown_enable:
                moved = self.broker.controlled_shutdown(
                    retries=config.controlled_shutdown_max_retries,
                    backoff_ms=config.controlled_shutdown_retry_backoff_ms,
                    timeout_s=config.request_timeout_ms / 1000,
                )
            self.broker.shutdown()
        if self.network is not None:
            self.network.close()
        if self.zk is not None:
            with contextlib.suppress(Exception):
                self.zk.stop()
                self.zk.close()
        return moved


def _advertised(config: KafkaConfig) -> tuple[str, int] | None:
    """`advertised.listeners` when it differs from `listeners` (None: register the listener,
    with the port it bound when it asked for any free one)."""
    advertised = config.advertised_listeners
    if advertised == config.listeners:
        return None
    return advertised.host, advertised.port


def _ensure_chroot(connect: str, session_timeout_ms: int) -> None:
    """Create the chroot of `host:port,.../chroot` if missing, as Kafka's brokers do."""
    hosts, slash, chroot = connect.partition("/")
    if not slash or not chroot.strip("/"):
        return
    client = zk_model.connect(hosts, session_timeout_ms=session_timeout_ms)
    try:
        client.ensure_path("/" + chroot.strip("/"))
    finally:
        client.stop()
        client.close()


def main(config_path: str) -> int:
    """Run one broker until SIGTERM / SIGINT; 2 for a bad config, 1 when it cannot start."""
    try:
        config = KafkaConfig.from_file(config_path)
        check_store_files(config.security_properties)
    except ConfigError as error:
        print(f"kafkactor broker: {error}", file=sys.stderr)
        return 2
    except SecuritySettingError as error:
        print(f"kafkactor broker: {config_path}: {error.setting!r}: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"kafkactor broker: {config_path}: {error.strerror or error}", file=sys.stderr)
        return 2
    stopping = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    process = BrokerProcess(config)
    try:
        process.start()
    except Exception as error:
        print(f"kafkactor broker {config.broker_id}: cannot start: {error}", file=sys.stderr)
        process.stop(controlled=False)
        return 1
    host, port = process.endpoint
    if config.ignored:
        print(
            f"kafkactor broker {config.broker_id}: ignored (no meaning here):"
            f" {', '.join(config.ignored)}",
            flush=True,
        )
    print(
        f"kafkactor broker {config.broker_id}: serving on {host}:{port}"
        f" (zookeeper {config.zookeeper_connect})",
        flush=True,
    )
    while not stopping.wait(1.0):
        tracing.flush()  # the event log is at most a second behind, for `kafkactor trace`
    print(f"kafkactor broker {config.broker_id}: stopping", flush=True)
    moved = process.stop(controlled=True)
    print(
        f"kafkactor broker {config.broker_id}: stopped"
        f" (controlled shutdown {'moved every leadership' if moved else 'incomplete or off'})",
        flush=True,
    )
    return 0
