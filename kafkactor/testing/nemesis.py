"""A Jepsen-style checker: a seeded fault schedule against a 3-broker cluster under load.

`run_schedule(seed, seconds)` starts a `Cluster` (3 brokers, embedded ZooKeeper, a topic with
RF 3 and min ISR 2), runs producers with acks=all while it applies `generate_schedule(seed,
seconds)`, heals everything, measures how long the cluster takes to have a live leader and a
full ISR for every partition, and then checks the claim: no acknowledged record lost, no
replicas diverging below the high watermark. `unsafe=True` runs the control (acks=1, min ISR 1,
unclean leader election on), where the checker must find loss. `docs/nemesis.md` explains it.

The schedule and the verdict are pure (`kafkactor.testing.schedule`, `.verdict`); this module
is the shell that runs them against a live cluster. It prints nothing: `progress` receives a
line per step, and the `kafkactor nemesis` command prints.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.testing.cluster import Cluster
from kafkactor.testing.nemesis_admin import AdminTarget, AssignmentChanges
from kafkactor.testing.read_back import check_after, wait_for
from kafkactor.testing.schedule import (
    ASSIGNMENT_CHANGES,
    FAULTS,
    Action,
    Role,
    Schedule,
    Step,
    generate_schedule,
)
from kafkactor.testing.verdict import (
    Ack,
    ScheduleResult,
)
from kafkactor.testing.workload import Workload

TOPIC = "nemesis"
BROKERS = 3
SESSION_TIMEOUT_MS = 2000
KAFKA_SESSION_TIMEOUT_MS = 6000  # zookeeper.session.timeout.ms in Kafka 0.9
SAFE_TOPIC_CONFIG = {"min.insync.replicas": "2"}
UNSAFE_TOPIC_CONFIG = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
RECOVERY_SESSIONS = 10  # recovery after healing must take at most this many session timeouts
_UNBOUND = frozenset(
    {Action.AWAIT_HEALTHY, Action.HEAL_ALL, Action.PREFERRED_ELECTION, Action.RESTORE}
)


def nemesis_config(session_timeout_ms: int = SESSION_TIMEOUT_MS) -> BrokerConfig:
    """Kafka's replica timeouts scaled by the factor that scales its session timeout (6 s in
    Kafka 0.9, 2 s here: 1/3), so that their ratios stay Kafka's. A follower down for less
    than `replica.lag.time.max.ms` stays in the ISR even after its session expired, as in
    Kafka (10 s > 6 s): the case of a fast restart with a stale high watermark (KIP-101).

    | setting | Kafka | at 2 s sessions |
    |---|---|---|
    | replica.lag.time.max.ms | 10000 | 3333 |
    | replica.fetch.wait.max.ms | 500 | 166 |
    | replica.fetch.backoff.ms | 1000 | 333 |
    | replica.socket.timeout.ms | 30000 | 10000 |
    | replica.high.watermark.checkpoint.interval.ms | 5000 | 1666 |
    """

    def scaled(kafka_ms: int) -> int:
        return max(1, kafka_ms * session_timeout_ms // KAFKA_SESSION_TIMEOUT_MS)

    return BrokerConfig(
        replica=ReplicaManagerConfig(
            replica_lag_time_max_ms=scaled(10_000),
            replica_fetch_wait_max_ms=scaled(500),
            replica_fetch_backoff_ms=scaled(1000),
            replica_socket_timeout_ms=scaled(30_000),
            high_watermark_checkpoint_interval_ms=scaled(5000),
        )
    )


def _pause(seconds: float) -> None:
    """Wait out a schedule delay (the schedule's own time, not a wait for the system)."""
    threading.Event().wait(max(0.0, seconds))


def partition_healthy(
    cluster: Cluster, topic: str, partition: int, at_least: dict[int, int]
) -> bool:
    """A live leader acts as one; the ISR in ZooKeeper is every replica; every replica is
    alive, follows that leader in its epoch, and holds at least what the leader held when
    this wait first saw it (so a restarted replica has fetched again)."""
    leader = cluster.leader(topic, partition)
    live = cluster.live_brokers()
    if leader not in live:
        return False
    led = cluster.describe_partition(topic, partition, broker=leader)
    if not led.is_leader:
        return False
    at_least.setdefault(partition, led.log_end_offset)
    replicas = cluster.replicas(topic, partition)
    if set(cluster.isr(topic, partition)) != set(replicas) or not set(replicas) <= set(live):
        return False
    for replica in replicas:
        if replica == leader:
            continue
        follower = cluster.describe_partition(topic, partition, broker=replica)
        if (follower.leader, follower.leader_epoch) != (leader, led.leader_epoch):
            return False
        if follower.log_end_offset < at_least[partition]:
            return False
    return True


# -- applying a schedule -----------------------------------------------------------------------


class FaultTarget(AdminTarget, Protocol):
    """The cluster a `Nemesis` acts on: the in-process `Cluster`, or a cluster of broker
    processes (`kafkactor.testing.process_nemesis.ProcessTarget`). Its admin side
    (`AdminTarget`): `reassign_partitions`, `wait_for_reassignments`, `elect_leaders`."""

    @property
    def broker_ids(self) -> Sequence[int]: ...

    def live_brokers(self) -> list[int]: ...

    def leader(self, topic: str, partition: int) -> int: ...

    def controller_id(self) -> int | None: ...

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]: ...

    def kill_broker(self, broker_id: int, *, lose_unflushed: bool = False) -> None: ...

    def stop_broker(self, broker_id: int, *, controlled: bool = False) -> bool: ...

    def restart_broker(self, broker_id: int) -> object: ...

    def expire_session(self, broker_id: int) -> None: ...

    def isolate_broker(self, broker_id: int) -> None: ...

    def heal_broker(self, broker_id: int) -> None: ...


class Nemesis:
    """Applies a schedule's steps to a live cluster: it resolves roles to brokers, binds them
    to the step's name, and keeps a line per step (`applied`) and per oddity (`notes`).

    The health check (`_partition_healthy`) is the in-process `Cluster`'s; a subclass for
    another kind of `FaultTarget` overrides it."""

    def __init__(
        self,
        cluster: FaultTarget,
        topic: str,
        partitions: int,
        *,
        healthy_timeout_s: float,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.healthy_timeout_s = healthy_timeout_s
        self.progress = progress
        self.bound: dict[str, int] = {}
        self.isolated: set[int] = set()
        self.applied: list[str] = []
        self.notes: list[str] = []
        self.started = time.monotonic()
        self._episode = 0
        self._episode_brokers: set[int] = set()
        self._last_healthy = True  # the last AWAIT_HEALTHY succeeded
        self.heal_all_s = 0.0
        self.assignments = AssignmentChanges(
            cluster, topic, partitions, timeout_s=healthy_timeout_s, notes=self.notes
        )

    def run(self, steps: Collection[Step]) -> None:
        for step in steps:
            _pause(step.after_s)
            self.apply(step)

    def _say(self, text: str) -> None:
        line = f"t={time.monotonic() - self.started:6.2f}s {text}"
        self.applied.append(line)
        if self.progress is not None:
            self.progress(line)

    def apply(self, step: Step) -> None:
        if step.episode != self._episode:
            self._episode, self._episode_brokers = step.episode, set()
        try:
            outcome = self._apply(step)
        except Exception as error:  # a fault the cluster refused: noted, the run goes on
            outcome = f"FAILED: {error!r}"
            self.notes.append(f"{step.describe()}: {error!r}")
        self._say(f"{step.action} {step.target()}".rstrip() + f": {outcome}")

    def _unbound(self, step: Step) -> str:
        """A step that hits no broker: a wait, HEAL_ALL, an election, a restore."""
        if step.action is Action.AWAIT_HEALTHY:
            return self._await_step()
        if step.action is Action.HEAL_ALL:
            return self.heal_all()
        if step.action is Action.PREFERRED_ELECTION:
            return self.assignments.elect_preferred(step.partition)
        assert step.action is Action.RESTORE and step.partition is not None
        return self.assignments.restore(step.partition)

    def _apply(self, step: Step) -> str:
        if step.action in _UNBOUND:
            return self._unbound(step)
        broker = self._resolve(step)
        if broker is None:
            if step.action in (Action.RESTART, Action.HEAL):
                return "nothing to do (its fault was skipped)"
            self.notes.append(f"{step.describe()}: no broker in that role")
            return "skipped: no broker in that role"
        if step.action is Action.POWER_LOSS and not self._last_healthy:
            self.notes.append(f"{step.describe()}: skipped, the cluster was not healthy")
            return f"skipped on broker {broker}: the cluster was not healthy"
        if step.action in FAULTS or step.action in ASSIGNMENT_CHANGES:
            self.bound[step.name] = broker
            self._episode_brokers.add(broker)
        if step.action in ASSIGNMENT_CHANGES:
            assert step.partition is not None
            return self.assignments.change(step.action, step.partition, broker)
        return self._act(step.action, broker)

    def _await_step(self) -> str:
        took = self.await_healthy()
        self._last_healthy = took is not None
        if took is None:
            self.notes.append(f"not healthy within {self.healthy_timeout_s:.0f}s")
            return "NOT HEALTHY (the next power loss is skipped)"
        return f"healthy after {took:.2f}s"

    def _act(self, action: Action, broker: int) -> str:
        cluster = self.cluster
        if action is Action.KILL:
            cluster.kill_broker(broker)
        elif action is Action.POWER_LOSS:
            cluster.kill_broker(broker, lose_unflushed=True)
        elif action is Action.SHUTDOWN:
            moved = cluster.stop_broker(broker, controlled=True)
            return f"broker {broker}" + ("" if moved else " (still leading: stopped anyway)")
        elif action is Action.RESTART:
            if broker in cluster.live_brokers():
                return f"broker {broker} is running"
            cluster.restart_broker(broker)
        elif action is Action.EXPIRE_SESSION:
            cluster.expire_session(broker)
        elif action is Action.ISOLATE:
            cluster.isolate_broker(broker)
            self.isolated.add(broker)
        elif action is Action.HEAL:
            cluster.heal_broker(broker)
            self.isolated.discard(broker)
        return f"broker {broker}"

    def _resolve(self, step: Step) -> int | None:
        """The broker the step's role names now, if it is alive (None: nobody)."""
        cluster, live = self.cluster, set(self.cluster.live_brokers())
        if step.role is Role.BOUND or step.action in (Action.RESTART, Action.HEAL):
            broker = self.bound.get(step.name)
            if step.action in (Action.RESTART, Action.HEAL):
                return broker
            return broker if broker in live else None
        free = live - self._episode_brokers
        if step.role is Role.LEADER:
            assert step.partition is not None
            leader = cluster.leader(self.topic, step.partition)
            return leader if leader in free else None
        if step.role is Role.CONTROLLER:
            controller = cluster.controller_id()
            return controller if controller in free else None
        if step.role is Role.FOLLOWER:
            assert step.partition is not None
            leader = cluster.leader(self.topic, step.partition)
            replicas = cluster.replicas(self.topic, step.partition)
            candidates = sorted(r for r in replicas if r in free and r != leader)
        else:
            candidates = sorted(free)
        return candidates[step.pick % len(candidates)] if candidates else None

    def heal_all(self) -> str:
        """Heal every isolated broker, restart every dead one, then put back the replicas of
        a partition whose reassignment the last episode left (and wait for it: `heal_all_s`
        is how long it all took; a restart waits for the old ZooKeeper session to expire)."""
        started, done = time.monotonic(), []
        for broker in sorted(self.isolated):
            self.cluster.heal_broker(broker)
            done.append(f"healed {broker}")
        self.isolated.clear()
        for broker in self.cluster.broker_ids:
            if broker not in self.cluster.live_brokers():
                self.cluster.restart_broker(broker)
                done.append(f"restarted {broker}")
        restored = self.assignments.restore_all()
        if restored:
            done.append(restored)
        self.heal_all_s = time.monotonic() - started
        return ", ".join(done) or "everything was up"

    # -- health ----------------------------------------------------------------------------

    def _partition_healthy(self, partition: int, at_least: dict[int, int]) -> bool:
        """`partition_healthy` of the nemesis's topic."""
        if not isinstance(self.cluster, Cluster):
            raise NotImplementedError("a Nemesis on another FaultTarget checks health itself")
        return partition_healthy(self.cluster, self.topic, partition, at_least)

    def await_healthy(self, timeout_s: float | None = None) -> float | None:
        """Wait until every partition is healthy (`_partition_healthy`); the time it took, or
        None if `timeout_s` (default: `healthy_timeout_s`) passed first."""
        started = time.monotonic()
        at_least: dict[int, int] = {}

        def healthy() -> bool:
            try:
                return all(self._partition_healthy(p, at_least) for p in range(self.partitions))
            except Exception:  # mid-fault, any read can fail: not healthy yet
                return False

        limit = self.healthy_timeout_s if timeout_s is None else timeout_s
        if not wait_for(healthy, limit):
            return None
        return time.monotonic() - started


def run_schedule(
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
    power_loss: bool = True,
    progress: Callable[[str], None] | None = None,
) -> ScheduleResult:
    """Run the schedule of `seed` for about `seconds` against a fresh cluster and check it.

    `unsafe` runs the control: acks=1 producers, min ISR 1, unclean leader election on.
    `power_loss=False` leaves power losses out of the schedule. With `events_dir`, the run's event
    log is written there and kept only if the schedule fails (`ScheduleResult.ok` false; for
    the control, if it found loss). Errors of the run itself land in `ScheduleResult.error`.
    """
    schedule = generate_schedule(
        seed,
        seconds,
        session_timeout_ms=session_timeout_ms,
        partitions=partitions,
        power_loss=power_loss,
        unsafe=unsafe,
    )
    result = ScheduleResult(seed=seed, unsafe=unsafe, schedule=schedule.describe())
    if not power_loss:
        result.notes.append("no power losses in this schedule")
    events_path = None
    if events_dir is not None:
        mode = "unsafe" if unsafe else "safe"
        events_path = Path(events_dir) / f"nemesis-{mode}-seed{seed}.jsonl"
        events_path.unlink(missing_ok=True)
    started = time.monotonic()
    with tracing.configured(path=events_path, enabled=events_path is not None):
        try:
            _run(
                schedule,
                result,
                producers=producers,
                in_flight=in_flight,
                rate=rate,
                progress=progress,
            )
        except Exception as error:
            result.error = repr(error)
    result.elapsed_s = time.monotonic() - started
    if events_path is not None:
        interesting = bool(result.lost) if unsafe else not result.ok
        if interesting or result.error is not None:
            result.events_path = events_path
        else:
            events_path.unlink(missing_ok=True)
    return result


def _run(
    schedule: Schedule,
    result: ScheduleResult,
    *,
    producers: int,
    in_flight: int,
    rate: float,
    progress: Callable[[str], None] | None,
) -> None:
    session_s = schedule.session_timeout_ms / 1000
    with Cluster(
        BROKERS,
        zookeeper="embedded",
        session_timeout_ms=schedule.session_timeout_ms,
        config=nemesis_config(schedule.session_timeout_ms),
    ) as cluster:
        cluster.create_topic(
            TOPIC,
            partitions=schedule.partitions,
            replication_factor=BROKERS,
            config=UNSAFE_TOPIC_CONFIG if schedule.unsafe else SAFE_TOPIC_CONFIG,
        )
        workload = Workload(
            cluster,
            TOPIC,
            schedule.partitions,
            seed=schedule.seed,
            producers=producers,
            acks=1 if schedule.unsafe else -1,
            in_flight=in_flight,
            rate=rate,
        ).start()
        nemesis = Nemesis(
            cluster,
            TOPIC,
            schedule.partitions,
            healthy_timeout_s=RECOVERY_SESSIONS * session_s,
            progress=progress,
        )
        acked = apply_schedule(nemesis, schedule, result, workload.stop)
        check_after(cluster, TOPIC, schedule.partitions, acked, result, settle_s=3 * session_s)


def apply_schedule(
    nemesis: Nemesis,
    schedule: Schedule,
    result: ScheduleResult,
    stop_workload: Callable[[], tuple[list[Ack], dict[bytes, str], int]],
) -> list[Ack]:
    """Run the schedule's steps (they end with HEAL_ALL), measure the recovery, then stop the
    workload (`stop_workload`: acknowledged, failed value -> error, unanswered) and fill
    `result` with what happened; returns the acknowledged records."""
    try:
        nemesis.run(schedule.steps)  # ends with HEAL_ALL
        healed = nemesis.await_healthy()
        if healed is not None:  # counted from the start of HEAL_ALL: restarts included
            result.recovery_s = healed + nemesis.heal_all_s
        result.liveness_ok = healed is not None
        if not result.liveness_ok:
            nemesis.notes.append(
                f"no live leader and full ISR for every partition within "
                f"{RECOVERY_SESSIONS} session timeouts of healing"
            )
    finally:
        acked, failed, result.unanswered = stop_workload()
        result.applied, result.notes = nemesis.applied, result.notes + nemesis.notes
    result.acked, result.failed = len(acked), len(failed)
    result.failed_codes = dict(Counter(failed.values()).most_common())
    return acked
