"""The nemesis against broker processes: the same seeded schedules and the same claims as
`kafkactor.testing.nemesis`, on three `kafkactor broker` processes and a real ZooKeeper.

`run_process_schedule(seed, seconds)` starts a cluster with `kafkactor.server.launcher` in a
fresh directory, creates the topic over the wire, runs librdkafka producers with acks=all
(`WireWorkload`) while `ProcessNemesis` applies `generate_schedule(seed, seconds,
power_loss=False)` to the processes, heals everything, measures the recovery, stops the
cluster cleanly (`launcher.down`) and then judges the brokers' data dirs offline
(`kafkactor.testing.disk_verdict`). The faults, as `ProcessTarget` maps them:

- kill: SIGKILL (`launcher.kill`), a crash; the page cache survives.
- power-loss: never drawn; a killed process on a live OS keeps its page cache.
- restart: `launcher.restart`, a new process (it serves once the old session has expired).
- expire-session: the broker's registration session is closed from outside: a twin connection
  with its id and password (ZooKeeper derives the password from the id) takes it over and
  closes it, and the broker registers again with a new session.
- isolate / heal: SIGSTOP / SIGCONT (`launcher.pause`, `resume`): a paused broker, like a
  long GC pause; it answers nobody, and its session expires if the pause outlasts it.
- reassignments and preferred elections: through Kafka 2.8's admin znodes,
  `/admin/reassign_partitions` and `/admin/preferred_replica_election`, which the controller
  processes and deletes (what `kafka-reassign-partitions.sh --zookeeper` and
  `kafka-preferred-replica-election.sh` write).

docs/nemesis.md ("The process target") tells what differs from the in-process runs.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient

from kafkactor.actors.controller import zk_data
from kafkactor.server import launcher
from kafkactor.server.cluster_files import ClusterError, ClusterLayout, ClusterState
from kafkactor.server.cluster_status import BrokerState, broker_state, own_zookeeper
from kafkactor.server.zookeeper import LocalZooKeeper
from kafkactor.testing.disk_verdict import PartitionEnd, check_data_dirs
from kafkactor.testing.nemesis import (
    BROKERS,
    RECOVERY_SESSIONS,
    SAFE_TOPIC_CONFIG,
    SESSION_TIMEOUT_MS,
    TOPIC,
    UNSAFE_TOPIC_CONFIG,
    Nemesis,
    apply_schedule,
    nemesis_config,
)
from kafkactor.testing.process_zookeeper import ZooKeeperView
from kafkactor.testing.read_back import wait_for
from kafkactor.testing.schedule import Action, Schedule, generate_schedule
from kafkactor.testing.verdict import ScheduleResult
from kafkactor.testing.wire_workload import WireWorkload, create_topic

ZOOKEEPER_TICK_MS = 200  # sessions of 0.4 to 4 s; expiry checked every tick
SETTLE_STABLE_S = 1.0  # every HW and ISR unchanged this long: settled
START_TIMEOUT_S = 60.0
CONTROLLED_SHUTDOWN_BACKOFF_MS = 300  # Kafka's is 5000: only `down` waits on it
ZK_TIMEOUT_S = 5.0
# ZooKeeper derives a session's password from its id (`ZooKeeperServer.generatePasswd`:
# `new java.util.Random(id ^ superSecret).nextBytes(byte[16])`).
_ZOOKEEPER_SUPER_SECRET = 0xB3415C00

_QUIET = logging.getLogger("kafkactor.testing.process_nemesis.kazoo")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def zookeeper_session_password(session_id: int) -> bytes:
    """The password ZooKeeper gave session `session_id`: `java.util.Random(id ^ 0xB3415C00)`'s
    first 16 bytes, as its `ZooKeeperServer.generatePasswd` makes (and checks) them."""
    mask = (1 << 48) - 1
    seed = (session_id ^ _ZOOKEEPER_SUPER_SECRET ^ 0x5DEECE66D) & mask
    password = bytearray()
    while len(password) < 16:
        seed = (seed * 0x5DEECE66D + 0xB) & mask
        word = seed >> 16  # Random.next(32); nextBytes takes its bytes low first
        for _ in range(min(4, 16 - len(password))):
            password.append(word & 0xFF)
            word >>= 8
    return bytes(password)


def missing() -> str | None:
    """Why process schedules cannot run here (None: they can)."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (pip install 'kafkactor[test]')"
    available = LocalZooKeeper.available()
    return None if available else f"no ZooKeeper: {available.reason}"


def process_settings(session_timeout_ms: int, *, events: bool) -> dict[str, str]:
    """The brokers' properties: `nemesis_config`'s scaled replica timeouts, a short controlled
    shutdown backoff (only `down` meets it), and the event log on only when it is kept."""
    replica = nemesis_config(session_timeout_ms).replica
    return {
        "replica.lag.time.max.ms": str(replica.replica_lag_time_max_ms),
        "replica.fetch.wait.max.ms": str(replica.replica_fetch_wait_max_ms),
        "replica.fetch.backoff.ms": str(replica.replica_fetch_backoff_ms),
        "replica.socket.timeout.ms": str(replica.replica_socket_timeout_ms),
        "replica.high.watermark.checkpoint.interval.ms": str(
            replica.high_watermark_checkpoint_interval_ms
        ),
        "controlled.shutdown.retry.backoff.ms": str(CONTROLLED_SHUTDOWN_BACKOFF_MS),
        "kafkactor.event.log.enable": "true" if events else "false",
    }


class ProcessTarget(ZooKeeperView):
    """The `FaultTarget` of a cluster of broker processes kept in `root`: roles read from
    ZooKeeper and admin changes written to its admin znodes (`ZooKeeperView`), faults sent to
    the processes (see the module doc). `last` says what the last
    fault did to a process ("broker 2 pid 1234 killed (SIGKILL)")."""

    def __init__(self, root: Path, zookeeper_connect: str, session_timeout_ms: int) -> None:
        self.layout = ClusterLayout.of(root)
        self.zookeeper_hosts = zookeeper_connect.partition("/")[0]
        self.session_timeout_s = session_timeout_ms / 1000
        self.broker_ids: list[int] = sorted(ClusterState.read(self.layout).brokers)
        self.last: str | None = None
        self._isolated: set[int] = set()
        self.zk = KazooClient(hosts=zookeeper_connect, timeout=10.0, logger=_QUIET)
        self.zk.start(timeout=ZK_TIMEOUT_S)

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()

    # -- what the cluster is doing ---------------------------------------------------------

    def state(self, broker_id: int) -> BrokerState:
        state = ClusterState.read(self.layout)
        return broker_state(self.layout, state.record(self.layout, broker_id))

    def live_brokers(self) -> list[int]:
        """The brokers whose process runs, paused or not (a paused one is still there)."""
        return [b for b in self.broker_ids if self.state(b) in ("running", "paused")]

    def registered(self, broker_id: int) -> bool:
        return self.zk.exists(zk_data.broker_path(broker_id)) is not None

    # -- faults ----------------------------------------------------------------------------

    def kill_broker(self, broker_id: int, *, lose_unflushed: bool = False) -> None:
        if lose_unflushed:
            raise ValueError("a process cannot lose its page cache: no power losses here")
        self.last = str(launcher.kill(self.layout.root, broker_id))

    def stop_broker(self, broker_id: int, *, controlled: bool = False) -> bool:
        """SIGTERM: the broker asks the controller for a controlled shutdown itself
        (`controlled.shutdown.enable`), then exits; SIGKILL when it takes too long. Whether
        its leaderships all moved is in its own event log, not known here (True)."""
        self.last = str(launcher.stop(self.layout.root, broker_id))
        return True

    def restart_broker(self, broker_id: int) -> object:
        """Start the broker again; one still isolated (its pause not healed yet) is paused
        again once it serves, as an isolated broker stays isolated in-process."""
        serving = launcher.restart(self.layout.root, broker_id, timeout_s=START_TIMEOUT_S)
        self.last = f"{serving}"
        if broker_id in self._isolated:
            launcher.pause(self.layout.root, broker_id)
            self.last += ", paused again (SIGSTOP): still isolated"
        return serving

    def expire_session(self, broker_id: int) -> None:
        """Expire the broker's registration session: a twin connection with its id (the
        registration's `ephemeralOwner`) and password takes it over and closes it."""
        stat = self.zk.exists(zk_data.broker_path(broker_id))
        if stat is None:
            raise ClusterError(f"broker {broker_id} is not registered: no session to expire")
        session_id = stat.ephemeralOwner
        twin = KazooClient(
            hosts=self.zookeeper_hosts,
            client_id=(session_id, zookeeper_session_password(session_id)),
            timeout=self.session_timeout_s,
            logger=_QUIET,
        )
        try:
            twin.start(timeout=ZK_TIMEOUT_S)
            took_over = twin.client_id is not None and twin.client_id[0] == session_id
        finally:
            twin.stop()
            twin.close()
        if not took_over:
            raise ClusterError(f"broker {broker_id}: session {session_id:#x} not taken over")
        self.last = f"broker {broker_id} session {session_id:#x} expired"

    def isolate_broker(self, broker_id: int) -> None:
        self.last = str(launcher.pause(self.layout.root, broker_id))
        self._isolated.add(broker_id)

    def heal_broker(self, broker_id: int) -> None:
        self._isolated.discard(broker_id)
        current = self.state(broker_id)
        if current == "paused":
            self.last = str(launcher.resume(self.layout.root, broker_id))
        else:
            self.last = f"broker {broker_id} is {current}: nothing to resume"


class ProcessNemesis(Nemesis):
    """A `Nemesis` on a `ProcessTarget`: each step's line says what was done to the process,
    and a partition is healthy when ZooKeeper names a registered leader, its ISR is every
    replica, and every replica's process runs (not paused) and is registered."""

    def __init__(
        self,
        target: ProcessTarget,
        topic: str,
        partitions: int,
        *,
        healthy_timeout_s: float,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            target, topic, partitions, healthy_timeout_s=healthy_timeout_s, progress=progress
        )
        self.target = target

    def _act(self, action: Action, broker: int) -> str:
        self.target.last = None
        outcome = super()._act(action, broker)
        return self.target.last or outcome

    def _partition_healthy(self, partition: int, at_least: dict[int, int]) -> bool:
        target = self.target
        leader, isr = target.partition_state(self.topic, partition)
        replicas = target.replicas(self.topic, partition)
        if leader not in replicas or set(isr) != set(replicas):
            return False
        return all(target.state(r) == "running" and target.registered(r) for r in replicas)


# -- one schedule ----------------------------------------------------------------------------


def run_process_schedule(
    seed: int,
    seconds: float,
    *,
    unsafe: bool = False,
    events_dir: Path | str | None = None,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    partitions: int = 3,
    producers: int = 2,
    in_flight: int = 8,
    rate: float = 100.0,
    power_loss: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ScheduleResult:
    """Run the schedule of `seed` (without power losses) for about `seconds` against a fresh
    cluster of broker processes and check it (see the module doc).

    The cluster's directory is made under `events_dir` when given, and kept there, with every
    broker's event log and output, when the schedule fails (for the control: when it found
    loss); otherwise it is made in a temp dir and removed. Errors of the run itself land in
    `ScheduleResult.error`; the cluster is stopped in every case.
    """
    if power_loss:
        raise ValueError("process schedules have no power losses: a process's page cache survives")
    schedule = generate_schedule(
        seed,
        seconds,
        session_timeout_ms=session_timeout_ms,
        partitions=partitions,
        power_loss=False,
        unsafe=unsafe,
    )
    result = ScheduleResult(seed=seed, unsafe=unsafe, schedule=schedule.describe())
    result.notes.append("no power losses in this schedule (a killed process keeps its page cache)")
    problem = missing()
    if problem is not None:
        result.error = problem
        return result
    mode = "unsafe" if unsafe else "safe"
    name = f"nemesis-processes-{mode}-seed{seed}"
    if events_dir is not None:
        root = Path(events_dir) / name
        shutil.rmtree(root, ignore_errors=True)
        scratch = root
    else:
        scratch = Path(tempfile.mkdtemp(prefix="kafkactor-nemesis-"))
        root = scratch / name
    started = time.monotonic()
    try:
        _run(
            schedule,
            result,
            root,
            events=events_dir is not None,
            producers=producers,
            in_flight=in_flight,
            rate=rate,
            progress=progress,
        )
    except Exception as error:
        result.error = repr(error)
    result.elapsed_s = time.monotonic() - started
    interesting = bool(result.lost) if unsafe else not result.ok
    if events_dir is not None and (interesting or result.error is not None):
        result.events_path = root
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _up(root: Path, schedule: Schedule, *, events: bool) -> launcher.ClusterUp:
    return launcher.up(
        root,
        BROKERS,
        settings=process_settings(schedule.session_timeout_ms, events=events),
        session_timeout_ms=schedule.session_timeout_ms,
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
        timeout_s=START_TIMEOUT_S,
    )


def _run(
    schedule: Schedule,
    result: ScheduleResult,
    root: Path,
    *,
    events: bool,
    producers: int,
    in_flight: int,
    rate: float,
    progress: Callable[[str], None] | None,
) -> None:
    session_s = schedule.session_timeout_ms / 1000
    up = _up(root, schedule, events=events)
    stopped: list[launcher.ProcessAction] | None = None
    try:
        target = ProcessTarget(root, up.zookeeper_connect, schedule.session_timeout_ms)
        try:
            nemesis = ProcessNemesis(
                target,
                TOPIC,
                schedule.partitions,
                healthy_timeout_s=RECOVERY_SESSIONS * session_s,
                progress=progress,
            )
            create_topic(
                up.bootstrap_servers,
                TOPIC,
                schedule.partitions,
                BROKERS,
                UNSAFE_TOPIC_CONFIG if schedule.unsafe else SAFE_TOPIC_CONFIG,
                timeout_s=START_TIMEOUT_S,
            )
            if nemesis.await_healthy(START_TIMEOUT_S) is None:
                raise RuntimeError(f"topic {TOPIC} has no full ISR {START_TIMEOUT_S:.0f}s on")
            workload = WireWorkload(
                up.bootstrap_servers,
                TOPIC,
                schedule.partitions,
                seed=schedule.seed,
                producers=producers,
                acks=1 if schedule.unsafe else -1,
                in_flight=in_flight,
                rate=rate,
            ).start()
            acked = apply_schedule(nemesis, schedule, result, workload.stop)
            ends = _settle(target, up.bootstrap_servers, schedule.partitions, 3 * session_s)
            everyone = frozenset(target.broker_ids)
            if not all(end.isr == everyone for end in ends):
                result.notes.append(f"not settled (full ISRs, HWs still) in {3 * session_s:.0f}s")
        finally:
            target.close()
        stopped = launcher.down(root)
    finally:
        if stopped is None:  # the run failed: stop whatever runs
            _down(root)
    for action in stopped:
        if "SIGKILL" in action.action:
            result.notes.append(f"{action}: its checkpoints may be stale")
    layout = ClusterLayout.of(root)
    verdict = check_data_dirs(
        {b: layout.data_dir(b) for b in target.broker_ids},
        TOPIC,
        schedule.partitions,
        acked,
        dict(enumerate(ends)),
    )
    result.lost, result.divergent = verdict.lost, verdict.divergent
    result.duplicates = verdict.duplicates
    result.notes.extend(verdict.notes)


def _down(root: Path) -> None:
    try:
        launcher.down(root)
    except Exception:  # the state file could not be read: stop the ZooKeeper at least
        own_zookeeper(ClusterLayout.of(root)).stop()


def _settle(
    target: ProcessTarget, bootstrap_servers: str, partitions: int, timeout_s: float
) -> list[PartitionEnd]:
    """Wait (at most `timeout_s`) until every partition's ISR is every replica and its leader
    and ISR (ZooKeeper) and high watermark (a client's ListOffsets) have not changed for
    `SETTLE_STABLE_S`; what they were last (None where they could not be read)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "kafkactor-nemesis-check",
            "enable.auto.commit": False,
            "logger": _QUIET,
        }
    )

    def read() -> list[PartitionEnd]:
        ends = []
        for p in range(partitions):
            leader: int | None
            try:
                leader, isr = target.partition_state(TOPIC, p)
                in_sync: frozenset[int] | None = frozenset(isr)
            except Exception:
                leader, in_sync = None, None
            try:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(TOPIC, p), timeout=2.0, cached=False
                )
                high_watermark: int | None = int(high)
            except Exception:
                high_watermark = None
            ends.append(PartitionEnd(leader, in_sync, high_watermark))
        return ends

    last: list[list[PartitionEnd]] = [read()]
    since = [time.monotonic()]

    def settled() -> bool:
        now = read()
        if now != last[0]:
            last[0], since[0] = now, time.monotonic()
            return False
        everyone = frozenset(target.broker_ids)
        full = all(end.isr == everyone and end.high_watermark is not None for end in now)
        return full and time.monotonic() - since[0] >= SETTLE_STABLE_S

    try:
        wait_for(settled, timeout_s, poll_s=0.2)
    finally:
        consumer.close()
    return last[0]
