"""`kafkactor cluster status`: each broker's process, its registration, whether it is the
controller and what it leads, read from `/proc`, the state file and ZooKeeper."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.server import processes
from kafkactor.server.cluster_files import HOST, BrokerRecord, ClusterLayout, ClusterState
from kafkactor.server.zookeeper import LocalZooKeeper, LocalZooKeeperError, quiet_kazoo_client

__all__ = [
    "BrokerState",
    "BrokerStatus",
    "ClusterStatus",
    "ZooKeeperStatus",
    "broker_state",
    "format_status",
    "own_zookeeper",
    "read_controller",
    "status",
]

BrokerState = Literal["running", "paused", "stopped", "dead"]
ZooKeeperState = Literal["running", "paused", "stopped", "dead", "external"]
READ_TIMEOUT_S = 3.0
LISTED_LEADERSHIPS = 8  # format_status names this many, then "..."


def own_zookeeper(layout: ClusterLayout) -> LocalZooKeeper:
    """The directory's own ZooKeeper, as the last `up` set it up (a fresh one if none did)."""
    try:
        return LocalZooKeeper.attach(layout.zookeeper_dir)
    except LocalZooKeeperError:
        return LocalZooKeeper(layout.zookeeper_dir)


def broker_state(layout: ClusterLayout, record: BrokerRecord) -> BrokerState:
    """The broker's state: "running"; "paused" (SIGSTOPped); "stopped" (by `stop` or `down`,
    or never started); "dead" (killed, crashed, or its pid now names another program)."""
    state = processes.process_state(record.pid, str(layout.properties(record.broker_id)))
    if state != "dead":
        return state
    return "stopped" if record.stopped or record.pid is None else "dead"


@dataclass(frozen=True)
class BrokerStatus:
    """One broker as `status` finds it. `registered` is None when ZooKeeper could not be read;
    `leaderships` are the partitions ("orders-0") whose state znode names it leader."""

    broker_id: int
    pid: int | None
    state: BrokerState
    port: int
    registered: bool | None
    controller: bool
    leaderships: tuple[str, ...]
    host: str = HOST


@dataclass(frozen=True)
class ZooKeeperStatus:
    """The cluster's ZooKeeper: its process ("external" when the directory does not own it)
    and whether it answers a client."""

    connect: str
    pid: int | None
    state: ZooKeeperState
    answers: bool


@dataclass(frozen=True)
class ClusterStatus:
    root: Path
    zookeeper: ZooKeeperStatus
    brokers: tuple[BrokerStatus, ...]
    controller: int | None  # None: no controller, or ZooKeeper could not be read


@dataclass(frozen=True)
class _Znodes:
    registered: frozenset[int]
    controller: int | None
    leaderships: dict[int, list[tuple[str, int]]]


@contextlib.contextmanager
def _client(connect: str) -> Iterator[KazooClient | None]:
    client = quiet_kazoo_client(connect, session_timeout_s=10.0)
    try:
        try:
            client.start(timeout=READ_TIMEOUT_S)
        except Exception:
            yield None
            return
        yield client
    finally:
        client.stop()
        client.close()


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def _controller(client: KazooClient) -> int | None:
    try:
        data, _ = client.get(zk_data.CONTROLLER)
        return zk_data.decode_controller(data)
    except (NoNodeError, zk_data.MalformedZnodeError):
        return None


def read_controller(connect: str) -> int | None:
    """The controller's broker id, or None (none elected, or ZooKeeper does not answer)."""
    with _client(connect) as client:
        if client is None:
            return None
        try:
            return _controller(client)
        except KazooException:
            return None


def _read_znodes(client: KazooClient) -> _Znodes:
    leaderships: dict[int, list[tuple[str, int]]] = {}
    for topic in _children(client, zk_data.BROKER_TOPICS):
        for partition in _children(client, f"{zk_data.topic_path(topic)}/partitions"):
            if not partition.isdigit():
                continue
            path = zk_data.partition_state_path(topic, int(partition))
            try:
                data, _ = client.get(path)
                state = zk_data.decode_partition_state(topic, int(partition), data)
            except (NoNodeError, zk_data.MalformedZnodeError):
                continue
            leaderships.setdefault(state.leader, []).append((topic, int(partition)))
    registered = frozenset(
        int(child) for child in _children(client, zk_data.BROKER_IDS) if child.isdigit()
    )
    return _Znodes(registered, _controller(client), leaderships)


def _zookeeper_status(layout: ClusterLayout, state: ClusterState) -> ZooKeeperStatus:
    if state.zookeeper_external:
        return ZooKeeperStatus(state.zookeeper_connect, None, "external", answers=False)
    try:
        server = LocalZooKeeper.attach(layout.zookeeper_dir)
    except LocalZooKeeperError:
        return ZooKeeperStatus(state.zookeeper_connect, None, "stopped", answers=False)
    pid = server.pid
    current = server.state()
    if current == "dead":
        crashed = server.pid_path.exists()  # `stop` removes the pid file
        return ZooKeeperStatus(
            state.zookeeper_connect, None, "dead" if crashed else "stopped", answers=False
        )
    return ZooKeeperStatus(state.zookeeper_connect, pid, current, answers=False)


def status(root: str | Path) -> ClusterStatus:
    """The cluster kept in `root`, as its processes and ZooKeeper show it now."""
    layout = ClusterLayout.of(root)
    state = ClusterState.read(layout)
    zookeeper = _zookeeper_status(layout, state)
    znodes = None
    if zookeeper.state in ("running", "external"):
        with _client(state.zookeeper_connect) as client:
            if client is not None:
                with contextlib.suppress(KazooException):
                    znodes = _read_znodes(client)
    zookeeper = ZooKeeperStatus(
        zookeeper.connect, zookeeper.pid, zookeeper.state, answers=znodes is not None
    )
    brokers = []
    for record in sorted(state.brokers.values(), key=lambda r: r.broker_id):
        led = sorted(znodes.leaderships.get(record.broker_id, [])) if znodes else []
        brokers.append(
            BrokerStatus(
                broker_id=record.broker_id,
                pid=record.pid,
                state=broker_state(layout, record),
                port=record.port,
                registered=None if znodes is None else record.broker_id in znodes.registered,
                controller=znodes is not None and znodes.controller == record.broker_id,
                leaderships=tuple(f"{topic}-{partition}" for topic, partition in led),
            )
        )
    controller = znodes.controller if znodes is not None else None
    return ClusterStatus(layout.root, zookeeper, tuple(brokers), controller)


def format_status(cluster: ClusterStatus) -> list[str]:
    """One line for ZooKeeper, then one per broker:
    `broker 2  pid 1234  running  127.0.0.1:9093  registered  controller  leads 4: orders-0 ...`.
    """
    zk = cluster.zookeeper
    answers = "answers" if zk.answers else "does not answer"
    lines = [f"zookeeper  pid {zk.pid or '-'}  {zk.state}  {zk.connect}  {answers}"]
    for broker in cluster.brokers:
        parts = [
            f"broker {broker.broker_id}",
            f"pid {broker.pid or '-'}",
            broker.state,
            f"{broker.host}:{broker.port}",
        ]
        if broker.registered is None:
            parts.append("registration unknown")
        else:
            parts.append("registered" if broker.registered else "not registered")
        if broker.controller:
            parts.append("controller")
        led = broker.leaderships
        if led:
            names = " ".join(led[:LISTED_LEADERSHIPS]) + (
                " ..." if len(led) > LISTED_LEADERSHIPS else ""
            )
            parts.append(f"leads {len(led)}: {names}")
        elif broker.registered is not None:
            parts.append("leads 0")
        lines.append("  ".join(parts))
    return lines
