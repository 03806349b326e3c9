"""Helpers for the controller integration tests: clusters on ZooKeeper, controller views, load.

Nothing here sleeps to wait for the system: waits poll a condition against a deadline
(`wait_until`), ask an actor through its mailbox with a timeout, or wait on a Future with one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pykka
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from kafkactor.actors.controller import zk_data
from kafkactor.actors.runtime import Client, addresses
from kafkactor.clients import ProduceError, Producer
from kafkactor.common import PartitionLeaderState
from kafkactor.messages.replication import MetadataRequest, MetadataResponse, PartitionMetadata
from kafkactor.testing import Cluster
from tests.replication.support import FAST, WAIT_S, EventLog, wait_until

SESSION_TIMEOUT_MS = 600  # the embedded ZooKeeper expires a crashed broker's session this fast
# A failover (session expiry, election, LeaderAndIsr) must be done this long after a crash.
FAILOVER_BOUND_S = SESSION_TIMEOUT_MS / 1000 + 1.5


def embedded_cluster(brokers: int = 3, *, session_timeout_ms: int = SESSION_TIMEOUT_MS) -> Cluster:
    """A (not yet started) cluster on the embedded ZooKeeper, with fast ISR shrinking."""
    return Cluster(
        brokers, zookeeper="embedded", session_timeout_ms=session_timeout_ms, config=FAST
    )


# -- controllers -------------------------------------------------------------------------------


def controller_view(cluster: Cluster, broker: int) -> dict[str, Any] | None:
    """A live broker's controller actor's `describe()`, through its mailbox (None: not running)."""
    ref = cluster.directory.resolve(addresses.controller(broker))
    if not isinstance(ref, pykka.ActorRef):
        return None
    try:
        view: dict[str, Any] = ref.proxy().describe().get(timeout=WAIT_S)
    except pykka.ActorDeadError:
        return None
    return view


def controller_views(cluster: Cluster) -> dict[int, dict[str, Any]]:
    """`describe()` of the controller actor of every live broker."""
    views = {}
    for broker in cluster.live_brokers():
        view = controller_view(cluster, broker)
        if view is not None:
            views[broker] = view
    return views


def acting_controllers(cluster: Cluster) -> list[int]:
    """The brokers whose controller actor says it is the controller."""
    return sorted(b for b, view in controller_views(cluster).items() if view["is_controller"])


def settled_controller(cluster: Cluster, *, min_epoch: int = 0) -> int:
    """Wait until one controller acts, in the epoch `/controller_epoch` holds (> `min_epoch`
    if given), with every live broker in its view; return its broker id."""

    def settled() -> int | None:
        in_zookeeper = cluster.controller_id()
        if in_zookeeper is None or cluster.current_controller_epoch() <= min_epoch:
            return None
        views = controller_views(cluster)
        acting = [b for b, v in views.items() if v["is_controller"]]
        if acting != [in_zookeeper]:
            return None
        view = views[in_zookeeper]
        if view["epoch"] != cluster.current_controller_epoch():
            return None
        if view["live_brokers"] != cluster.live_brokers():
            return None
        return in_zookeeper

    controller = wait_until(settled, message="exactly one settled controller")
    assert controller is not None
    return controller


def replica_manager_epoch(cluster: Cluster, broker: int) -> int:
    """The controller epoch a broker's replica manager has accepted."""
    ref = cluster.directory.resolve(addresses.replica_manager(broker))
    assert isinstance(ref, pykka.ActorRef), f"broker {broker} has no replica manager"
    epoch: int = ref.proxy().describe().get(timeout=WAIT_S)["controller_epoch"]
    return epoch


def deposed_controller_actions(
    events: EventLog, since: int, broker: int, epoch: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """What `broker`'s controller (of `epoch`) did after event `since`, up to its resignation
    (every event but the messages it received), and the resignation event itself."""
    resign: dict[str, Any] = wait_until(
        lambda: events.named("controller.resign", broker=broker, epoch=epoch),
        message=f"the controller of epoch {epoch} to resign",
    )[0]
    mine = [e for e in events.all()[since:] if e.get("actor") == addresses.controller(broker)]
    keys: tuple[str, ...] = ("event", "msg_type", "to", "error", "reason")
    acted: list[dict[str, Any]] = [
        {k: e[k] for k in keys if k in e}
        for e in mine[: mine.index(resign)]
        if e["event"] != "msg.recv"
    ]
    return acted, resign


class ControllerSampler:
    """Asks every live controller actor, over and over on a thread, what it thinks it is.

    Each sample is {broker: (is_controller, epoch)}. The samples are not atomic across actors,
    but epochs are unique to one election, so two samples saying "controller in epoch e" from
    two brokers mean two controllers in one epoch, whatever the interleaving.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.samples: list[dict[int, tuple[bool, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="controller-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sample = {}
            for broker in self.cluster.broker_ids:
                view = controller_view(self.cluster, broker)
                if view is not None:
                    sample[broker] = (bool(view["is_controller"]), int(view["epoch"]))
            self.samples.append(sample)
            self._stop.wait(0.002)

    def same_epoch_controllers(self) -> list[tuple[int, list[int]]]:
        """(epoch, brokers) for every epoch in which two brokers ever said they were controller."""
        claims: dict[int, set[int]] = {}
        for sample in self.samples:
            for broker, (is_controller, epoch) in sample.items():
                if is_controller:
                    claims.setdefault(epoch, set()).add(broker)
        return sorted((e, sorted(b)) for e, b in claims.items() if len(b) > 1)

    def __enter__(self) -> ControllerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)


def expire_real_session(hosts: str, client: Any) -> None:
    """Expire a kazoo client's session on a real server: a second connection with the same
    session id and password takes the session over (the server drops the first connection)
    and closes it; the first client's reconnect is then told the session expired (LOST)."""
    lost = threading.Event()

    def on_state(state: str) -> None:
        if state == KazooState.LOST:
            lost.set()

    client.add_listener(on_state)
    try:
        session_id, password = client.client_id
        intruder = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=WAIT_S)
        intruder.start(timeout=WAIT_S)
        intruder.stop()
        intruder.close()
        assert lost.wait(WAIT_S), f"session {session_id:#x} did not expire"
    finally:
        client.remove_listener(on_state)


# -- ZooKeeper reads ---------------------------------------------------------------------------


def state_znode(cluster: Cluster, topic: str, partition: int) -> tuple[PartitionLeaderState, Any]:
    """The partition's state znode: decoded, and its ZnodeStat."""
    data, stat = cluster._zk.get(zk_data.partition_state_path(topic, partition))
    return zk_data.decode_partition_state(topic, partition, data), stat


def registered_brokers(cluster: Cluster) -> list[int]:
    return sorted(int(c) for c in cluster._zk.get_children(zk_data.BROKER_IDS))


def partition_without(cluster: Cluster, topic: str, partitions: int, broker: int) -> int:
    """A partition of `topic` with no replica on `broker`."""
    for p in range(partitions):
        if broker not in cluster.replicas(topic, p):
            return p
    raise AssertionError(f"every partition of {topic} has a replica on broker {broker}")


def partition_metadata(cluster: Cluster, broker: int, topic: str) -> dict[int, PartitionMetadata]:
    """What a broker's metadata cache answers a MetadataRequest for `topic`."""
    client = Client(f"metadata-probe-{broker}-{time.monotonic_ns()}", cluster.directory)
    try:
        response = client.call(
            addresses.replica_manager(broker), MetadataRequest(topics=(topic,)), WAIT_S
        )
    finally:
        client.close()
    assert isinstance(response, MetadataResponse), response
    (found,) = response.topics
    return {p.partition: p for p in found.partitions}


# -- reading a partition -----------------------------------------------------------------------


def read_partition(cluster: Cluster, topic: str, partition: int) -> dict[int, bytes | None]:
    """Every record from offset 0 up to the leader's high watermark, by offset (a consumer)."""
    high_watermark = cluster.describe_partition(topic, partition).high_watermark
    consumer = cluster.consumer(max_wait_ms=100)
    consumer.assign([(topic, partition)])
    found: dict[int, bytes | None] = {}

    def read_to_high_watermark() -> bool:
        for record in consumer.poll(100):
            found[record.offset] = record.value
        return consumer.position(topic, partition) >= high_watermark

    wait_until(read_to_high_watermark, message=f"{topic}-{partition} read up to {high_watermark}")
    return found


# -- load --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ack:
    value: bytes
    offset: int
    at: float  # time.monotonic() when the acknowledgement arrived


@dataclass
class NumberedLoad:
    """A thread sending numbered records one at a time, each after the previous one's answer.

    `acked` holds every acknowledged record with its offset; `failed` the error codes of sends
    the producer gave up on (after its retries).
    """

    producer: Producer
    topic: str
    partition: int
    prefix: str = "record"
    acked: list[Ack] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            value = f"{self.prefix}-{number}".encode()
            future = self.producer.send(self.topic, value, partition=self.partition)
            try:
                metadata = future.result(3 * WAIT_S)
            except ProduceError as error:
                self.failed.append(error.error_code.name)
            except Exception as error:  # a timeout or anything else: a send that was not acked
                self.failed.append(repr(error))
            else:
                self.acked.append(Ack(value, metadata.offset, time.monotonic()))
            number += 1

    def acked_after(self, moment: float) -> int:
        return sum(1 for ack in list(self.acked) if ack.at > moment)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(4 * WAIT_S)
            assert not self._thread.is_alive(), "the load thread did not stop"


@contextmanager
def numbered_load(
    producer: Producer, topic: str, partition: int, prefix: str = "record"
) -> Iterator[NumberedLoad]:
    """Run a `NumberedLoad` for the duration of the block (stopped, and joined, after it)."""
    load = NumberedLoad(producer, topic, partition, prefix)
    load._thread = threading.Thread(target=load._run, name=f"load-{topic}-{partition}", daemon=True)
    load._thread.start()
    try:
        yield load
    finally:
        load.stop()
