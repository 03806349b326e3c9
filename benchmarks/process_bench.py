"""Brokers as processes: what running each broker in a process of its own costs and buys.

Each run starts two fresh clusters of 3 brokers, one after the other, tracing off in both:
**processes** (``kafkactor.server.launcher.up``: a ZooKeeper from Debian's ``zookeeper``
package, Java, and three ``kafkactor broker`` processes, in a temporary directory, with the
launcher's ``server.properties`` (``docs/processes.md``), event logs off and
``controlled.shutdown.retry.backoff.ms`` pinned to its 1000) and **in-process**
(``Cluster(3, listen="127.0.0.1")`` in this process, on the embedded ZooKeeper model). Both
use ``zookeeper.session.timeout.ms`` = ``--session-timeout-ms`` (2000) and kafkactor's defaults
for the rest of the broker; the real ZooKeeper ticks every 200 ms (``tickTime``, as
``tests/processes/conftest.py`` runs it), so a session expires 2.0 to 2.2 s after the server
last heard from the broker.

1. **Throughput.** One confluent-kafka ``Producer``, librdkafka's defaults for everything
   (acks=all is set, and is librdkafka's default anyway), sends ``--records`` 100-byte values,
   no key, to a topic of 3 partitions, RF 3, ``min.insync.replicas=2``: the producer loop of
   ``wire_bench`` (``wire_bench.produce_records``: one record per partition and a flush first,
   then timed from the first ``produce()`` to the last delivery report; per-record latency from
   ``produce()`` to its report, p50 / p99 by ``_harness.percentile``). Records/s, MB/s of
   values, and the ratio processes / in-process, per run. The producer runs in a spawned child
   process for both clusters (``wire_bench.Clients``'s child, started once before anything is
   timed, and made to exit with this process): a real client never shares the brokers'
   interpreter, and here librdkafka's callbacks would take the GIL from the in-process brokers
   and slow that side down for a reason that is not the brokers'. So both sides pay the same
   hop to the client and only the brokers differ: one interpreter for three, or one each.
2. **Memory.** VmRSS (``/proc/<pid>/status``) of each broker process once it serves (idle,
   before any topic) and after the throughput run; against the in-process cluster's growth:
   this process's RSS after the cluster ran the same load minus its RSS just before the
   cluster was made (after ``gc.collect()`` and glibc's ``malloc_trim(0)``, so that less of
   what a previous run freed counts as room), divided by 3; a later run still reuses some of
   it, so run 1's figure is shown as well. A broker process also holds an interpreter and
   every import; the in-process figure does not. ZooKeeper's RSS (a JVM, ``-Xmx256m``) after
   the load is shown on its own, for context.
3. **Failover after SIGKILL.** On the process cluster, a second producer (a thread of the
   same child, librdkafka's defaults) sends ``--rate`` records/s, paced, so that failover and
   not overload is measured, to a topic like the first; once every partition has
   acknowledgements, the leader of the first partition not led by the controller is SIGKILLed
   (``launcher.kill``). Measured from the kill: its registration ``/brokers/ids/<id>`` deleted
   (its session expired; a ZooKeeper watch's notification), the partition's state znode
   naming another leader (the znode's ``mtime``: ZooKeeper's clock, which is this machine's),
   and the first record acknowledged on that partition after that write (the client's view;
   the child stamps each delivery report with ``time.monotonic()``, one clock system-wide on
   Linux; an acknowledgement before the write can only be one of the old leader's last
   answers). A session expires once the server has not heard from the broker for the session
   timeout, rounded up to the next tick; kazoo pings after a third of it without traffic, so
   the expiry comes 2/3 to 1 session timeout (+ a tick) after the kill. Failover ~ session
   timeout + election; with Kafka's default session timeout, 18 s (Kafka 2.5 on; 6 s before),
   add about 16 s to these figures. The killed broker is restarted after each measurement and
   waited for back in every ISR.
4. **Controlled shutdown.** Then SIGTERM (``launcher.stop``) to the broker other than the
   controller that leads the most partitions (the controller when no other leads any):
   measured from the call (the signal follows within milliseconds), every partition it led
   naming another leader in ZooKeeper (the last state ``mtime``), the process's exit (polled
   every 5 ms), and the first record acknowledged on each moved partition of the paced topic
   after its move (the last of them). ``controlled.shutdown.retry.backoff.ms`` is 1000, as
   ``kafkactor cluster`` sets it (Kafka's is 5000): a retry would show as a second more.
   Partitions whose ISR still names the broker after its exit are noted: acks=all there waits
   until the leader drops it (``replica.lag.time.max.ms``, 10 s), and so does every partition
   that shares a produce request with them.

Each run's process cluster is thrown away (its brokers SIGKILLed, then ``launcher.down``)
before the next starts; ``--runs`` repeats the whole, each figure the median with the min-max
range over the runs (ratios per run). Nothing started here outlives the script: each cluster is
thrown away in a ``finally``, and a guard process (``_process_guard.py``, detached like the
brokers, watching a pipe from this process) takes down whatever is left when the script dies
without its ``finally`` (a SIGKILL, or the kill of its process group). Failed deliveries, a
failover or a shutdown that did not complete make the exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import math
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import _harness as h
import wire_bench
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from kafkactor import Cluster
from kafkactor.actors.controller import zk_data
from kafkactor.common import PartitionLeaderState
from kafkactor.server import launcher, processes
from kafkactor.server.cluster_files import ClusterLayout
from kafkactor.server.zookeeper import LocalZooKeeper, quiet_kazoo_client

VALUE_BYTES = wire_bench.VALUE_BYTES
BROKERS, PARTITIONS, REPLICATION_FACTOR, MIN_ISR = 3, 3, 3, 2
TOPIC_CONFIG = {"min.insync.replicas": str(MIN_ISR)}
LISTEN = "127.0.0.1"
THROUGHPUT_TOPIC, PACED_TOPIC = "throughput", "paced"
TOPICS = (THROUGHPUT_TOPIC, PACED_TOPIC)
ZOOKEEPER_TICK_MS = 200
KAFKA_SESSION_TIMEOUT_MS = 18_000  # zookeeper.session.timeout.ms, Kafka 2.5 on
SHUTDOWN_BACKOFF_MS = 1000  # controlled.shutdown.retry.backoff.ms: kafkactor cluster's (Kafka 5000)
SETTINGS = {
    "kafkactor.event.log.enable": "false",  # tracing off, as in the in-process cluster
    "controlled.shutdown.retry.backoff.ms": str(SHUTDOWN_BACKOFF_MS),
}
WAIT_S = 30.0  # the longest wait for a failover, a first ack, a restarted broker's ISR
POLL_S = 0.005
STOP_S = 30.0  # SIGTERM to SIGKILL, as `kafkactor cluster stop` waits
CLIENT_STALL_MS = 5000  # a client-visible wait this much longer than the move is noted
WARM_ACKS = 20  # paced acknowledgements per partition before a fault
GUARD = Path(__file__).resolve().with_name("_process_guard.py")
GUARD_EXIT_S = 60.0

clock = time.monotonic  # system-wide on Linux: the clients' child reports on the same clock
Report = tuple[int, float, str]  # a delivery report: partition, clock(), error name or ""


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Memory:
    broker_idle_kib: tuple[int, ...]  # each broker process once it serves, before any topic
    broker_loaded_kib: tuple[int, ...]  # each after the throughput run
    zookeeper_kib: int  # the JVM, after the throughput run
    in_process_before_kib: int  # this process before Cluster(...)
    in_process_after_kib: int  # ... after the cluster ran the same load
    in_process_per_broker_kib: float  # (after - before) / 3


@dataclass(frozen=True, slots=True)
class Failover:
    topic_partition: str
    victim: int
    controller: int
    new_leader: int
    expired_ms: float  # SIGKILL -> the victim's registration gone (its session expired)
    elected_ms: float  # SIGKILL -> the partition's state names another leader (znode mtime)
    first_ack_ms: float  # SIGKILL -> the first record acknowledged on the partition after that
    error: str


@dataclass(frozen=True, slots=True)
class Shutdown:
    broker: int
    controller: bool  # whether the broker was the controller
    led: tuple[str, ...]  # the partitions it led when signalled
    new_leaders: tuple[int, ...]  # of each, the leader after the move (-1: none)
    isr_after_exit: tuple[str, ...]  # partitions whose ISR still named it once it had exited
    moved_ms: float  # SIGTERM -> the last of them names another leader (znode mtime)
    exit_ms: float  # SIGTERM -> the process gone
    first_ack_ms: float  # SIGTERM -> an ack on every moved paced partition after its move
    outcome: str  # launcher.stop's line: "stopped (SIGTERM; ...)" or "killed (SIGKILL) ..."
    error: str


@dataclass(frozen=True, slots=True)
class RunResult:
    run: int
    processes: wire_bench.ProduceResult
    in_process: wire_bench.ProduceResult
    memory: Memory
    failover: Failover
    shutdown: Shutdown
    paced_reports: int  # delivery reports of the paced producer
    paced_failures: int  # ... that were errors (final: librdkafka gave up)
    paced_first_failure: str
    pids: tuple[int, ...]  # every process the run started: brokers (restarts too), ZooKeeper

    @property
    def errors(self) -> int:
        return (
            self.processes.errors
            + self.in_process.errors
            + self.paced_failures
            + (1 if self.failover.error else 0)
            + (1 if self.shutdown.error else 0)
        )


def ms(seconds: float) -> float:
    return seconds * 1000


# --------------------------------------------------------------------------------------------
# The clients' side: run in the clients' spawned child
# --------------------------------------------------------------------------------------------


def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Create `names` (3 partitions, RF 3, min ISR 2) through a confluent-kafka AdminClient."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(n, PARTITIONS, REPLICATION_FACTOR, config=TOPIC_CONFIG) for n in names]
    for future in admin.create_topics(topics).values():
        future.result(WAIT_S)


class PacedProducer:
    """A producer sending `rate` records/s of `value` (librdkafka's defaults: acks=all) from a
    thread of the clients' child until stopped, keeping its delivery reports (partition, clock(),
    error name or "") until they are drained."""

    def __init__(self, bootstrap: str, topic: str, rate: float, value: bytes) -> None:
        self._reports: list[Report] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # log_level 2: the refused connections to a killed broker are expected, not printed
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "log_level": 2})
        self._thread = threading.Thread(
            target=self._run, args=(topic, 1.0 / rate, value), name="paced", daemon=True
        )
        self._thread.start()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        report = (msg.partition() or 0, clock(), "" if err is None else err.name())
        with self._lock:
            self._reports.append(report)

    def _run(self, topic: str, interval: float, value: bytes) -> None:
        due = clock()
        while not self._stopping.is_set():
            if clock() >= due:
                with contextlib.suppress(BufferError):  # the local queue full: the next turn
                    self._producer.produce(topic, value, on_delivery=self._delivered)
                    due += interval
            self._producer.poll(max(0.0, min(0.005, due - clock())))
        self._producer.flush(WAIT_S)

    def drain(self) -> list[Report]:
        with self._lock:
            reports, self._reports = self._reports, []
        return reports

    def stop(self) -> list[Report]:
        """Stop sending, wait for what is in flight; the reports not drained yet."""
        self._stopping.set()
        self._thread.join(WAIT_S + 10)
        return self.drain()


_PACED: dict[str, PacedProducer] = {}  # the clients' child's paced producer, while it runs


def paced_start(bootstrap: str, topic: str, rate: float, value: bytes) -> None:
    _PACED["load"] = PacedProducer(bootstrap, topic, rate, value)


def paced_reports() -> list[Report]:
    return _PACED["load"].drain()


def paced_stop() -> list[Report]:
    return _PACED.pop("load").stop()


def exit_with_parent(parent: int) -> None:
    """In the clients' child: exit once `parent` is gone (a SIGKILLed benchmark leaves no child
    behind, its paced producer sending to brokers that are no more)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


# --------------------------------------------------------------------------------------------
# The benchmark's side
# --------------------------------------------------------------------------------------------


class Clients(wire_bench.Clients):
    """wire_bench's clients' child (spawned, started once), which exits with this process."""

    def __init__(self) -> None:
        self.pool = ProcessPoolExecutor(
            1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=exit_with_parent,
            initargs=(os.getpid(),),
        )


class PacedLoad:
    """The clients' child's `PacedProducer`, seen from here: its delivery reports, gathered."""

    def __init__(
        self, clients: wire_bench.Clients, bootstrap: str, topic: str, rate: float, value: bytes
    ) -> None:
        self._clients = clients
        clients.run(paced_start, bootstrap, topic, rate, value)
        self.reports: list[Report] = []
        self._running = True

    def wait(self, found: Callable[[Sequence[Report]], float], timeout_s: float) -> float:
        """The first non-NaN `found(reports)`, fetching new reports; NaN after `timeout_s`."""
        deadline = clock() + timeout_s
        while True:
            if self._running:
                self.reports += self._clients.run(paced_reports)
            result = found(self.reports)
            if not math.isnan(result) or not self._running or clock() >= deadline:
                return result
            time.sleep(POLL_S * 4)  # the reports carry their own times: this adds no error

    def warm(self, timeout_s: float) -> bool:
        """Whether every partition acknowledged WARM_ACKS records within `timeout_s`."""

        def all_warm(reports: Sequence[Report]) -> float:
            counts = Counter(p for p, _, error in reports if not error)
            return 1.0 if all(counts[p] >= WARM_ACKS for p in range(PARTITIONS)) else math.nan

        return not math.isnan(self.wait(all_warm, timeout_s))

    def first_ack(self, partition: int, after: float, timeout_s: float = WAIT_S) -> float:
        """When (clock()) the first record on `partition` acknowledged after `after` was."""

        def first(reports: Sequence[Report]) -> float:
            return next(
                (t for p, t, error in reports if p == partition and not error and t > after),
                math.nan,
            )

        return self.wait(first, timeout_s)

    def failures(self) -> list[str]:
        return [error for _, _, error in self.reports if error]

    def close(self) -> None:
        if self._running:
            self._running = False
            self.reports += self._clients.run(paced_stop)


class Guard:
    """`_process_guard.py ROOT`, detached, reading a pipe from this process: when this process
    exits, however, it takes down every cluster left under ROOT and removes ROOT."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(GUARD), str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,  # not the caller's pipes: a test waits for their end
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a kill of this process group does not reach it
            cwd=GUARD.parent,
        )

    def release(self) -> None:
        """Close the pipe (as this process's exit would) and wait for the guard's cleanup."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(GUARD_EXIT_S)


def rss_kib(pid: int) -> int:
    """The process's resident set (VmRSS, KiB); 0 when it has none (gone, a zombie)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def give_back_memory() -> None:
    """Collect, then hand the C heap's free pages back to the OS (glibc's malloc_trim)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def wait_for(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> bool:
    deadline = clock() + timeout_s
    while not condition():
        if clock() >= deadline:
            return False
        time.sleep(POLL_S * 4)
    return True


class Running:
    """A started process cluster: its directory, its pids, a ZooKeeper client (its chroot)."""

    def __init__(self, started: launcher.ClusterUp, zk: KazooClient) -> None:
        self.root = started.root
        self.bootstrap_servers = started.bootstrap_servers
        self.zookeeper_pid = started.zookeeper_pid or 0
        self.pids = {b.broker_id: b.pid for b in started.brokers}
        self.started_pids = [self.zookeeper_pid, *self.pids.values()]
        self.zk = zk

    def state(self, topic: str, partition: int) -> tuple[PartitionLeaderState, float]:
        """The partition's state znode, and its last write (mtime, seconds since the epoch)."""
        data, stat = self.zk.get(zk_data.partition_state_path(topic, partition))
        return zk_data.decode_partition_state(topic, partition, data), stat.mtime / 1000

    def leader(self, topic: str, partition: int) -> int:
        return self.state(topic, partition)[0].leader

    def controller(self) -> int:
        data, _ = self.zk.get(zk_data.CONTROLLER)
        return zk_data.decode_controller(data)

    def create_topic(self, clients: wire_bench.Clients, topic: str) -> None:
        """Create `topic` through the clients' child; return once each partition has a leader."""
        clients.run(create_topics, self.bootstrap_servers, [topic])
        if not wait_for(lambda: self.has_leaders(topic)):
            raise RuntimeError(f"topic {topic} has no leaders {WAIT_S:g} s after its creation")

    def has_leaders(self, topic: str) -> bool:
        try:
            return all(self.leader(topic, p) > 0 for p in range(PARTITIONS))
        except NoNodeError:
            return False

    def in_every_isr(self, broker_id: int) -> bool:
        return all(broker_id in self.state(t, p)[0].isr for t in TOPICS for p in range(PARTITIONS))

    def restart(self, broker_id: int) -> None:
        serving = launcher.restart(self.root, broker_id)
        self.pids[broker_id] = serving.pid
        self.started_pids.append(serving.pid)

    def marker(self, broker_id: int) -> str:
        """What the broker's command line holds (its properties file): how processes knows it."""
        return str(ClusterLayout.of(self.root).properties(broker_id))


@contextlib.contextmanager
def process_cluster(root: Path, session_timeout_ms: int) -> Iterator[Running]:
    """`launcher.up` in `root`; thrown away after, whatever happened (a failed `up` stops what
    it started itself)."""
    try:
        started = launcher.up(
            root,
            BROKERS,
            settings=SETTINGS,
            session_timeout_ms=session_timeout_ms,
            zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
        )
        zk = quiet_kazoo_client(started.zookeeper_connect)
        try:
            zk.start(timeout=WAIT_S)
            yield Running(started, zk)
        finally:
            zk.stop()
            zk.close()
    finally:
        if (root / "cluster.json").exists():
            throw_away(root)
    shutil.rmtree(root, ignore_errors=True)  # only once down: else the guard tries again


def throw_away(root: Path) -> None:
    """SIGKILL every broker, then `down` (ZooKeeper). Not `down` alone: its controlled
    shutdowns of the last brokers, whose leaderships have nowhere to go, retry for seconds."""
    for broker_id in range(1, BROKERS + 1):
        with contextlib.suppress(launcher.ClusterError):  # not running (stopped, never started)
            launcher.kill(root, broker_id)
    launcher.down(root, timeout_s=STOP_S)


def wall_minus_clock() -> float:
    """time.time() - clock(): turns ZooKeeper's mtimes (wall clock) into clock() readings."""
    return time.time() - clock()


def measure_failover(cluster: Running, load: PacedLoad) -> Failover:
    """SIGKILL the leader of the first paced partition that the controller does not lead."""
    controller = cluster.controller()
    leaders = {p: cluster.leader(PACED_TOPIC, p) for p in range(PARTITIONS)}
    choices = [p for p in range(PARTITIONS) if leaders[p] != controller]
    if not choices:
        return Failover("", -1, controller, -1, math.nan, math.nan, math.nan,
                        "the controller leads every partition")  # fmt: skip
    partition = choices[0]
    victim = leaders[partition]
    name = f"{PACED_TOPIC}-{partition}"
    expired = [math.nan]

    def registration_changed(event: WatchedEvent) -> None:  # kazoo's event thread
        if event.type == EventType.DELETED:
            expired[0] = clock()

    if cluster.zk.exists(zk_data.broker_path(victim), watch=registration_changed) is None:
        return Failover(name, victim, controller, -1, math.nan, math.nan, math.nan,
                        f"broker {victim} is not registered")  # fmt: skip
    offset = wall_minus_clock()
    killed = clock()
    launcher.kill(cluster.root, victim)
    elected, new_leader = math.nan, -1
    while math.isnan(elected) and clock() - killed < WAIT_S:
        state, written = cluster.state(PACED_TOPIC, partition)
        if state.leader not in (victim, -1):
            elected, new_leader = written - offset, state.leader
        else:
            time.sleep(POLL_S)
    error = (
        "" if not math.isnan(elected) else f"no new leader of {name} {WAIT_S:g} s after the kill"
    )
    acked = load.first_ack(partition, elected) if not error else math.nan
    if not error and math.isnan(acked):
        error = f"nothing acknowledged on {name} {WAIT_S:g} s after its election"
    cluster.restart(victim)
    if not wait_for(lambda: cluster.in_every_isr(victim)):
        error = error or f"the restarted broker {victim} not back in every ISR in {WAIT_S:g} s"
    return Failover(
        name, victim, controller, new_leader,
        ms(expired[0] - killed), ms(elected - killed), ms(acked - killed), error,
    )  # fmt: skip


def measure_shutdown(cluster: Running, load: PacedLoad) -> Shutdown:
    """SIGTERM the non-controller broker leading the most partitions (see the module doc)."""
    controller = cluster.controller()
    leaders = {(t, p): cluster.leader(t, p) for t in TOPICS for p in range(PARTITIONS)}
    counts = Counter(b for b in leaders.values() if b > 0)
    broker = min(counts, key=lambda b: (b == controller, -counts[b], b))
    led = sorted(tp for tp, b in leaders.items() if b == broker)
    names = tuple(f"{t}-{p}" for t, p in led)
    pid, marker = cluster.pids[broker], cluster.marker(broker)
    outcome: list[str] = []
    stopper = threading.Thread(
        target=lambda: outcome.append(str(launcher.stop(cluster.root, broker, timeout_s=STOP_S))),
        name="sigterm",
        daemon=True,
    )
    offset = wall_minus_clock()
    signalled = clock()
    stopper.start()
    moved: dict[tuple[str, int], float] = {}
    new_leaders: dict[tuple[str, int], int] = {}
    exited = math.nan
    deadline = signalled + STOP_S + WAIT_S
    while (len(moved) < len(led) or math.isnan(exited)) and clock() < deadline:
        for tp in led:
            if tp not in moved:
                state, written = cluster.state(*tp)
                if state.leader not in (broker, -1):
                    moved[tp], new_leaders[tp] = written - offset, state.leader
        if math.isnan(exited) and processes.process_state(pid, marker) == "dead":
            exited = clock()
        time.sleep(POLL_S)
    stopper.join(STOP_S + WAIT_S)
    lingering = tuple(
        f"{t}-{p}"
        for t in TOPICS
        for p in range(PARTITIONS)
        if broker in cluster.state(t, p)[0].isr
    )
    errors = []
    if len(moved) < len(led):
        errors.append(f"{len(led) - len(moved)} of {len(led)} partitions got no other leader")
    if math.isnan(exited):
        errors.append("the process did not exit")
    paced = [(p, moved[(t, p)]) for t, p in led if t == PACED_TOPIC and (t, p) in moved]
    acks = [load.first_ack(p, after) for p, after in paced]
    if any(math.isnan(a) for a in acks):
        errors.append("a moved paced partition acknowledged nothing after its move")
    return Shutdown(
        broker, broker == controller, names, tuple(new_leaders.get(tp, -1) for tp in led),
        lingering,
        ms(max(moved.values()) - signalled) if len(moved) == len(led) else math.nan,
        ms(exited - signalled),
        ms(max(acks) - signalled) if acks else math.nan,
        outcome[0] if outcome else "launcher.stop did not return",
        "; ".join(errors),
    )  # fmt: skip


def in_process_run(
    args: argparse.Namespace, clients: wire_bench.Clients, value: bytes, data_dir: Path
) -> tuple[wire_bench.ProduceResult, int, int]:
    """The throughput against Cluster(3) in this process; this process's RSS before and after."""
    give_back_memory()
    before = rss_kib(os.getpid())
    cluster = Cluster(
        BROKERS, data_dir=data_dir, listen=LISTEN, session_timeout_ms=args.session_timeout_ms
    )
    try:
        cluster.start()
        cluster.create_topic(THROUGHPUT_TOPIC, PARTITIONS, REPLICATION_FACTOR, TOPIC_CONFIG)
        config = {"bootstrap.servers": cluster.bootstrap_servers}
        produced = clients.run(
            wire_bench.produce_records,
            config, THROUGHPUT_TOPIC, "all", args.records, value, "in-process",
        )  # fmt: skip
        after = rss_kib(os.getpid())
    finally:
        cluster.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return produced, before, after


def measure_run(
    run: int, args: argparse.Namespace, clients: wire_bench.Clients, value: bytes, root: Path
) -> RunResult:
    """In-process first (this process's RSS is measured before anything else of the run)."""
    in_process, before, after = in_process_run(args, clients, value, root / f"in-process-{run}")
    with process_cluster(root / f"processes-{run}", args.session_timeout_ms) as cluster:
        idle = tuple(rss_kib(cluster.pids[b]) for b in sorted(cluster.pids))
        cluster.create_topic(clients, THROUGHPUT_TOPIC)  # as the in-process cluster has it
        config = {"bootstrap.servers": cluster.bootstrap_servers}
        produced = clients.run(
            wire_bench.produce_records,
            config, THROUGHPUT_TOPIC, "all", args.records, value, "processes",
        )  # fmt: skip
        memory = Memory(
            idle,
            tuple(rss_kib(cluster.pids[b]) for b in sorted(cluster.pids)),
            rss_kib(cluster.zookeeper_pid),
            before,
            after,
            (after - before) / BROKERS,
        )
        cluster.create_topic(clients, PACED_TOPIC)
        load = PacedLoad(clients, cluster.bootstrap_servers, PACED_TOPIC, args.rate, value)
        try:
            if not load.warm(WAIT_S):
                raise RuntimeError(
                    f"the paced producer got no acks on every partition in {WAIT_S:g} s"
                )
            failover = measure_failover(cluster, load)
            shutdown = measure_shutdown(cluster, load)
        finally:
            load.close()
        failures = load.failures()
        pids = tuple(cluster.started_pids)
    return RunResult(
        run, produced, in_process, memory, failover, shutdown, len(load.reports), len(failures),
        failures[0] if failures else "", pids,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

MIB = 1024


def spread(values: Iterable[float], spec: str = ",.0f") -> str:
    return h.Spread.of(values).format(spec)


def throughput_table(runs: Sequence[RunResult]) -> tuple[list[str], list[list[object]]]:
    head = ["cluster (one confluent-kafka producer, acks=all)", "records/s", "MB/s",
            "p50 ms", "p99 ms", "errors"]  # fmt: skip
    rows: list[list[object]] = []
    for label, results in (
        ("3 broker processes + ZooKeeper (Java)", [r.processes for r in runs]),
        ("3 brokers in one process (embedded ZooKeeper)", [r.in_process for r in runs]),
    ):
        rows.append([
            label,
            spread(p.records_per_s for p in results),
            spread((p.records_per_s * VALUE_BYTES / 1e6 for p in results), ",.2f"),
            spread((p.p50_ms for p in results), ",.1f"),
            spread((p.p99_ms for p in results), ",.1f"),
            sum(p.errors for p in results),
        ])  # fmt: skip
    pairs = [(r.processes, r.in_process) for r in runs]
    rows.append([
        "processes / in-process",
        spread((h.ratio(a.records_per_s, b.records_per_s) for a, b in pairs), ".2f"),
        spread((h.ratio(a.records_per_s, b.records_per_s) for a, b in pairs), ".2f"),
        spread((h.ratio(a.p50_ms, b.p50_ms) for a, b in pairs), ".2f"),
        spread((h.ratio(a.p99_ms, b.p99_ms) for a, b in pairs), ".2f"),
        "",
    ])  # fmt: skip
    return head, rows


def memory_table(runs: Sequence[RunResult]) -> tuple[list[str], list[list[object]]]:
    m = [r.memory for r in runs]

    def mean(values: Sequence[int]) -> float:
        return sum(values) / len(values) / MIB if values else math.nan

    def row(label: str, values: Iterable[float], spec: str = ",.1f") -> list[object]:
        return [label, spread(values, spec)]

    rows = [
        row("broker process, serving, before any topic (mean of 3)",
            (mean(x.broker_idle_kib) for x in m)),
        row("broker process, after the load (mean of 3)", (mean(x.broker_loaded_kib) for x in m)),
        *(row(f"  broker {k + 1}", (x.broker_loaded_kib[k] / MIB for x in m))
          for k in range(BROKERS)),
        row("  growth: after the load - serving",
            (mean(x.broker_loaded_kib) - mean(x.broker_idle_kib) for x in m)),
        row("in-process cluster: growth of this process / 3",
            (x.in_process_per_broker_kib / MIB for x in m)),
        row("  first run (this process at its smallest)",
            (x.in_process_per_broker_kib / MIB for x in m[:1])),
        row("  this process before the cluster", (x.in_process_before_kib / MIB for x in m)),
        row("broker process / in-process broker (x)",
            (h.ratio(mean(x.broker_loaded_kib), x.in_process_per_broker_kib / MIB) for x in m)),
        row("ZooKeeper (Java, -Xmx256m), after the load", (x.zookeeper_kib / MIB for x in m)),
    ]  # fmt: skip
    return ["resident memory (VmRSS)", "MiB"], rows


def failover_table(runs: Sequence[RunResult]) -> tuple[list[str], list[list[object]]]:
    head = ["SIGKILL of a partition's leader (not the controller)", "ms"]
    f = [r.failover for r in runs]
    rows: list[list[object]] = [
        ["kill -> registration gone (session expired)", spread(x.expired_ms for x in f)],
        ["kill -> new leader in ZooKeeper", spread(x.elected_ms for x in f)],
        ["  election: new leader - registration gone",
         spread(x.elected_ms - x.expired_ms for x in f)],
        ["kill -> first ack on the partition (client)", spread(x.first_ack_ms for x in f)],
        ["  client: first ack - new leader", spread(x.first_ack_ms - x.elected_ms for x in f)],
    ]  # fmt: skip
    return head, rows


def shutdown_table(runs: Sequence[RunResult]) -> tuple[list[str], list[list[object]]]:
    head = ["SIGTERM (controlled shutdown) of a leading broker", "ms"]
    s = [r.shutdown for r in runs]
    rows: list[list[object]] = [
        ["SIGTERM -> every partition it led has another leader", spread(x.moved_ms for x in s)],
        ["SIGTERM -> process exit", spread(x.exit_ms for x in s)],
        ["SIGTERM -> first ack on each moved paced partition (client)",
         spread(x.first_ack_ms for x in s)],
        ["partitions it led", spread(len(x.led) for x in s)],
    ]  # fmt: skip
    return head, rows


def notes(runs: Sequence[RunResult], args: argparse.Namespace) -> dict[str, list[str]]:
    """The lines under each table: what was chosen, and whatever looks odd."""
    session = args.session_timeout_ms
    said: dict[str, list[str]] = {"throughput": [], "memory": [], "failover": [], "shutdown": []}
    said["failover"].append(
        f"zookeeper.session.timeout.ms={session}, tickTime {ZOOKEEPER_TICK_MS} ms: a session"
        f" expires {session}-{session + ZOOKEEPER_TICK_MS} ms after the broker's last ping"
        f" (pings every {session // 3} ms when idle); with Kafka's default"
        f" {KAFKA_SESSION_TIMEOUT_MS} ms, add {KAFKA_SESSION_TIMEOUT_MS - session:,} ms"
    )
    for r in runs:
        run, f, s = f"run {r.run + 1}", r.failover, r.shutdown
        for produced in (r.processes, r.in_process):
            if produced.errors:
                said["throughput"].append(
                    f"{run} {produced.client}: {produced.errors} failed: {produced.first_error}"
                )
        said["failover"].append(
            f"{run}: {f.topic_partition} of broker {f.victim} (controller {f.controller})"
            f" -> broker {f.new_leader}"
        )
        if f.elected_ms > session + 1000:
            said["failover"].append(f"{run}: a new leader later than the session timeout + 1 s")
        if f.first_ack_ms - f.elected_ms > CLIENT_STALL_MS:
            said["failover"].append(
                f"{run}: the client's first ack {f.first_ack_ms - f.elected_ms:,.0f} ms after"
                " the new leader"
            )
        moves = ", ".join(f"{tp} -> {b}" for tp, b in zip(s.led, s.new_leaders, strict=True))
        controller = " (the controller)" if s.controller else ""
        said["shutdown"].append(f"{run}: broker {s.broker}{controller}: {moves}; {s.outcome}")
        if s.moved_ms > s.exit_ms:
            said["shutdown"].append(f"{run}: leaderships moved only after the process exited")
        if s.isr_after_exit:
            said["shutdown"].append(
                f"{run}: after its exit, broker {s.broker} was still in the ISR of"
                f" {', '.join(s.isr_after_exit)}: acks=all there waits until its leader drops it"
                " (replica.lag.time.max.ms)"
            )
        if s.first_ack_ms > CLIENT_STALL_MS:
            said["shutdown"].append(
                f"{run}: the client waited {s.first_ack_ms:,.0f} ms for an ack on a moved partition"
            )
        for name, error in (("failover", f.error), ("shutdown", s.error)):
            if error:
                said[name].append(f"{run}: {error}")
        if r.paced_failures:
            said["failover"].append(
                f"{run}: the paced producer: {r.paced_failures} of {r.paced_reports} records"
                f" failed: {r.paced_first_failure}"
            )
    before = [r.memory.in_process_before_kib / MIB for r in runs]
    if len(before) > 1:
        said["memory"].append(
            f"this process before the in-process cluster: {before[0]:.1f} MiB in run 1,"
            f" {before[-1]:.1f} MiB in run {len(before)}: a later run partly reuses memory that"
            " an earlier cluster freed, so its growth is smaller; run 1's is the fairest"
        )
    return said


def progress_line(r: RunResult) -> str:
    head = ["run", "proc/s", "inproc/s", "ratio", "brokerMiB", "inprocMiB", "expired_ms",
            "elected_ms", "ack_ms", "moved_ms", "exit_ms", "errors"]  # fmt: skip
    cells = [
        r.run + 1, h.num(r.processes.records_per_s), h.num(r.in_process.records_per_s),
        h.num(h.ratio(r.processes.records_per_s, r.in_process.records_per_s), ".2f"),
        f"{sum(r.memory.broker_loaded_kib) / BROKERS / MIB:.1f}",
        f"{r.memory.in_process_per_broker_kib / MIB:.1f}", h.num(r.failover.expired_ms),
        h.num(r.failover.elected_ms), h.num(r.failover.first_ack_ms),
        h.num(r.shutdown.moved_ms), h.num(r.shutdown.exit_ms), r.errors,
    ]  # fmt: skip
    return h.pairs(head, cells)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "process_bench",
        "3 broker processes against 3 brokers in one process: acks=all throughput, memory,"
        " failover after SIGKILL, controlled shutdown.",
        "runs, each on fresh clusters (5)",
    )
    p.add_argument("--records", type=h.positive_int, help="records in the throughput (200,000)")
    p.add_argument(
        "--rate", type=h.positive_int, default=1000, help="paced records/s in the faults (1,000)"
    )
    p.add_argument(
        "--session-timeout-ms",
        type=h.positive_int,
        default=2000,
        help="zookeeper.session.timeout.ms of both clusters (2000; 400..4000 with 200 ms ticks)",
    )
    return h.fill(p.parse_args(argv), records=(200_000, 50_000, 2_000), runs=(5, 3, 1))


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    available = LocalZooKeeper.available()
    if not available:
        print(f"process_bench: no ZooKeeper to run: {available.reason}", file=sys.stderr)
        return 2
    value = random.Random(args.seed).randbytes(VALUE_BYTES)
    root = Path(tempfile.mkdtemp(prefix="process-bench-"))
    guard = Guard(root)
    clients = Clients()
    runs: list[RunResult] = []
    try:
        versions = clients.run(wire_bench.client_versions)  # the child starts before any timing
        h.header(
            f"{BROKERS} broker processes (kafkactor.server.launcher, {available.reason}) against"
            f" Cluster({BROKERS}, listen={LISTEN!r}) in this process; fresh clusters per run;"
            f" {args.runs} run(s)",
            f"topics: {PARTITIONS} partitions, RF {REPLICATION_FACTOR}, min ISR {MIN_ISR};"
            f" {args.records:,} records of {VALUE_BYTES} B; zookeeper.session.timeout.ms"
            f" {args.session_timeout_ms}, tickTime {ZOOKEEPER_TICK_MS} ms;"
            f" controlled.shutdown.retry.backoff.ms {SHUTDOWN_BACKOFF_MS}; event logs off",
            f"{versions}, librdkafka's defaults (acks=all); the producers in child processes;"
            f" faults under {args.rate:,} records/s",
        )
        with h.traced(False):
            for run in range(args.runs):
                result = measure_run(run, args, clients, value, root)
                print(" ", progress_line(result), flush=True)
                runs.append(result)
    finally:
        clients.close()
        guard.release()
    said = notes(runs, args)
    tables = {
        "throughput": throughput_table(runs),
        "memory": memory_table(runs),
        "failover": failover_table(runs),
        "shutdown": shutdown_table(runs),
    }
    titles = {
        "throughput": "Throughput, acks=all, RF 3",
        "memory": "Memory per broker",
        "failover": "Failover after SIGKILL",
        "shutdown": "Controlled shutdown (SIGTERM)",
    }
    extra = {
        "throughput": ["MB/s of record values; ratios per run (both clusters in the same run)"],
        "memory": ["a broker process holds an interpreter and its imports; the growth does not"],
    }
    for name, (head, rows) in tables.items():
        print(f"\n== {titles[name]}: median (min-max) of {args.runs} run(s)")
        print(h.table(head, rows, [*extra.get(name, []), *said.get(name, [])]))
    summary = {
        name: [dict(zip(head, row, strict=True)) for row in rows]
        for name, (head, rows) in tables.items()
    }
    h.finish(args, started, {"runs": runs, "summary": summary, "notes": said})
    errors = sum(r.errors for r in runs)
    if errors:
        print(f"{errors} error(s): failed deliveries, failovers, shutdowns", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
