"""Fault schedules for the nemesis: seeded, pure, and checked against the fault model.

A `Schedule` is a list of `Step`s, each run `after_s` seconds after the previous one finished.
Fault steps name their target by role (the leader of a partition, the controller, a follower,
any live broker), resolved against the live cluster when the step runs, and bind the broker
they hit to a name; recovery steps (restart, heal) act on a bound name. So a seed always gives
the same schedule, while the brokers it hits depend on what the cluster did.

The fault model (`validate_schedule` checks it):
- every fault is recovered within its episode, except the last episode's, which the final
  HEAL_ALL recovers (so the recovery time measured after it is that of a real fault);
- at most two brokers are down at a time;
- a power loss (a broker whose unflushed data is lost) comes right after an AWAIT_HEALTHY, with
  no other broker down or isolated, nothing else happens until that broker is restarted, and
  an AWAIT_HEALTHY follows the restart: the replica that lost data is never the last one
  standing (Kafka before KIP-966 loses acknowledged records there too);
- an admin change of a partition's replicas (one dropped, or their order changed) comes with
  no broker down or isolated, one at a time, and is restored within its episode or by
  HEAL_ALL: with min ISR 2 the two replicas left can take acks=all, and the end-of-run checks
  see every partition on all three brokers again.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum


class Action(StrEnum):
    """What a step does."""

    KILL = "kill"  # a crash: actors stop, nothing flushed; the page cache survives
    # a clean stop (SIGTERM): Kafka's controlled shutdown moves its leaderships first
    SHUTDOWN = "controlled-shutdown"
    POWER_LOSS = "power-loss"  # a crash that also loses what was not fsynced
    RESTART = "restart"
    EXPIRE_SESSION = "expire-session"  # the broker's ZooKeeper session expires
    ISOLATE = "isolate"  # fetches to and from the broker are dropped; its session stays up
    HEAL = "heal"
    # admin changes (KIP-455 reassignments; ElectLeaders), run while the load runs:
    DROP_REPLICA = "drop-replica"  # reassign the partition without this replica (RF 3 -> 2)
    REORDER = "reorder-replicas"  # reassign the same replicas with this one first (preferred)
    RESTORE = "restore-replicas"  # reassign back to the original replicas, waited for
    PREFERRED_ELECTION = "preferred-election"  # of `partition`, or of every partition
    AWAIT_HEALTHY = "await-healthy"  # wait (bounded) for full ISRs and caught-up replicas
    HEAL_ALL = "heal-all"  # heal every isolated broker, restart every dead one


class Role(StrEnum):
    """Which broker a fault step hits, resolved against the live cluster when it runs."""

    LEADER = "leader"  # the leader of `partition`
    CONTROLLER = "controller"
    FOLLOWER = "follower"  # a live replica of `partition` that does not lead it
    ANY = "any"  # any live broker not bound in this episode
    BOUND = "bound"  # the broker bound to `name` earlier in the episode


class EpisodeKind(StrEnum):
    """A fault and its recovery."""

    KILL_LEADER = "kill-leader"
    KILL_CONTROLLER = "kill-controller"
    KILL_FOLLOWER = "kill-follower"
    EXPIRE_SESSION = "expire-session"
    ISOLATE = "isolate"
    ISOLATED_LEADER_CRASH = "isolated-leader-crash"
    KILL_TWO = "kill-two"
    ISOLATE_ONE_CRASH_TWO = "isolate-one-crash-two"
    RESTARTED_FOLLOWER_LEADS = "restarted-follower-leads"
    POWER_LOSS = "power-loss"
    CONTROLLED_SHUTDOWN = "controlled-shutdown"
    PREFERRED_ELECTION = "preferred-election"
    REASSIGNMENT = "reassignment"


FAULTS = frozenset(
    {Action.KILL, Action.POWER_LOSS, Action.SHUTDOWN, Action.EXPIRE_SESSION, Action.ISOLATE}
)
DOWN = frozenset({Action.KILL, Action.POWER_LOSS, Action.SHUTDOWN})
ASSIGNMENT_CHANGES = frozenset({Action.DROP_REPLICA, Action.REORDER})
_RECOVERIES = frozenset({Action.RESTART, Action.HEAL, Action.RESTORE})
_MAX_MISSES = 4  # a schedule ends after this many episodes too long for the time left

SAFE_KINDS: dict[EpisodeKind, float] = {  # kind -> weight
    EpisodeKind.KILL_LEADER: 3,
    EpisodeKind.KILL_CONTROLLER: 1.5,
    EpisodeKind.KILL_FOLLOWER: 1.5,
    EpisodeKind.EXPIRE_SESSION: 1.5,
    EpisodeKind.ISOLATE: 1.5,
    EpisodeKind.ISOLATED_LEADER_CRASH: 1.5,
    EpisodeKind.KILL_TWO: 1.5,
    EpisodeKind.ISOLATE_ONE_CRASH_TWO: 1,
    EpisodeKind.RESTARTED_FOLLOWER_LEADS: 2,
    EpisodeKind.POWER_LOSS: 2,
    EpisodeKind.CONTROLLED_SHUTDOWN: 1.5,
    EpisodeKind.PREFERRED_ELECTION: 1.5,
    EpisodeKind.REASSIGNMENT: 1.5,
}
# The unsafe control needs faults that move leadership away from data only the old leader had.
UNSAFE_KINDS: dict[EpisodeKind, float] = {
    EpisodeKind.KILL_LEADER: 2,
    EpisodeKind.ISOLATED_LEADER_CRASH: 3,
    EpisodeKind.KILL_TWO: 1,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One timed step: `action` on the broker `role` resolves to (or `name` is bound to)."""

    after_s: float  # run this long after the previous step finished
    action: Action
    role: Role | None = None
    partition: int | None = None  # for LEADER, FOLLOWER and the admin changes
    pick: int = 0  # which of several candidates (sorted by broker id), modulo their number
    name: str = ""  # the broker a fault binds, or a recovery acts on
    episode: int = 0

    def target(self) -> str:
        if self.role is None:
            return f"p{self.partition}" if self.partition is not None else ""
        if self.role is Role.BOUND:
            where = f"(p{self.partition})" if self.partition is not None else ""
            return self.name + where
        where = f"(p{self.partition})" if self.partition is not None else ""
        return f"{self.role}{where}={self.name}"

    def describe(self) -> str:
        target = self.target()
        return f"+{self.after_s:.2f}s {self.action}" + (f" {target}" if target else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A seeded fault schedule: its steps, and one label per episode."""

    seed: int
    seconds: float
    session_timeout_ms: int
    partitions: int
    unsafe: bool
    power_loss: bool
    steps: tuple[Step, ...]
    episodes: tuple[str, ...]

    def describe(self) -> str:
        """The episodes, one label each: `kill-leader(p1) fast 0.9s; isolate ...`."""
        return "; ".join(self.episodes)

    def planned_seconds(self) -> float:
        """The sum of the steps' delays (AWAIT_HEALTHY and restarts take extra time)."""
        return sum(step.after_s for step in self.steps)


@dataclass(frozen=True, slots=True)
class _Timing:
    """Random delays, scaled by the ZooKeeper session timeout."""

    rng: random.Random
    session_s: float

    def restart(self) -> tuple[str, float]:
        """fast (before the old session expires: KIP-380's case) or slow (after)."""
        if self.rng.random() < 0.5:
            return "fast", round(self.rng.uniform(0.15, 0.7) * self.session_s, 2)
        return "slow", round(self.rng.uniform(1.3, 2.2) * self.session_s, 2)

    def hold(self) -> float:
        """How long an isolation lasts: below the replica lag time (5/3 of a session timeout,
        Kafka's ratio) or above it."""
        return round(self.rng.uniform(0.4, 3.0) * self.session_s, 2)

    def gap(self) -> float:
        return round(self.rng.uniform(0.25, 0.8) * self.session_s, 2)


_Episode = tuple[list[Step], str]


def _kill_and_restart(
    n: int, t: _Timing, role: Role, partition: int | None, action: Action = Action.KILL
) -> _Episode:
    speed, delay = t.restart()
    name = f"{n}a"
    pick = t.rng.randrange(6)
    steps = [
        Step(after_s=0, action=action, role=role, partition=partition, pick=pick, name=name),
        Step(after_s=delay, action=Action.RESTART, role=Role.BOUND, name=name),
    ]
    where = f"(p{partition})" if partition is not None else ""
    verb = {Action.POWER_LOSS: "power-loss", Action.SHUTDOWN: "controlled-shutdown"}.get(
        action, "kill"
    )
    return steps, f"{verb} {role}{where}, {speed} restart {delay:.2f}s"


def _episode_kill_leader(n: int, t: _Timing, partitions: int) -> _Episode:
    return _kill_and_restart(n, t, Role.LEADER, t.rng.randrange(partitions))


def _episode_kill_controller(n: int, t: _Timing, partitions: int) -> _Episode:
    return _kill_and_restart(n, t, Role.CONTROLLER, None)


def _episode_kill_follower(n: int, t: _Timing, partitions: int) -> _Episode:
    return _kill_and_restart(n, t, Role.FOLLOWER, t.rng.randrange(partitions))


def _episode_controlled_shutdown(n: int, t: _Timing, partitions: int) -> _Episode:
    """A rolling restart's step: a leader, the controller or any broker stops cleanly (its
    leaderships move first, while it still serves), then starts again."""
    role = t.rng.choice([Role.LEADER, Role.CONTROLLER, Role.ANY])
    partition = t.rng.randrange(partitions) if role is Role.LEADER else None
    return _kill_and_restart(n, t, role, partition, Action.SHUTDOWN)


def _episode_expire_session(n: int, t: _Timing, partitions: int) -> _Episode:
    role = t.rng.choice([Role.LEADER, Role.CONTROLLER, Role.ANY])
    partition = t.rng.randrange(partitions) if role is Role.LEADER else None
    step = Step(
        after_s=0,
        action=Action.EXPIRE_SESSION,
        role=role,
        partition=partition,
        pick=t.rng.randrange(6),
        name=f"{n}a",
    )
    where = f"(p{partition})" if partition is not None else ""
    return [step], f"expire-session {role}{where}"


def _episode_isolate(n: int, t: _Timing, partitions: int) -> _Episode:
    role = t.rng.choice([Role.LEADER, Role.FOLLOWER, Role.CONTROLLER])
    partition = t.rng.randrange(partitions) if role is not Role.CONTROLLER else None
    hold, name = t.hold(), f"{n}a"
    steps = [
        Step(
            after_s=0,
            action=Action.ISOLATE,
            role=role,
            partition=partition,
            pick=t.rng.randrange(6),
            name=name,
        ),
        Step(after_s=hold, action=Action.HEAL, role=Role.BOUND, name=name),
    ]
    where = f"(p{partition})" if partition is not None else ""
    return steps, f"isolate {role}{where} {hold:.2f}s"


def _episode_isolated_leader_crash(n: int, t: _Timing, partitions: int) -> _Episode:
    """The leader is cut off (its ISR shrinks, or its acks=all requests wait), then crashes."""
    partition, name = t.rng.randrange(partitions), f"{n}a"
    hold = t.hold()
    speed, delay = t.restart()
    heal_first = t.rng.random() < 0.5
    steps = [
        Step(after_s=0, action=Action.ISOLATE, role=Role.LEADER, partition=partition, name=name),
        Step(after_s=hold, action=Action.KILL, role=Role.BOUND, name=name),
    ]
    recover = [
        Step(after_s=0, action=Action.HEAL, role=Role.BOUND, name=name),
        Step(after_s=delay, action=Action.RESTART, role=Role.BOUND, name=name),
    ]
    if not heal_first:  # restart while still isolated, heal a little later
        recover = [
            replace(recover[1], after_s=delay),
            Step(after_s=t.hold() / 2, action=Action.HEAL, role=Role.BOUND, name=name),
        ]
    label = (
        f"isolate leader(p{partition}) {hold:.2f}s then kill it, {speed} restart {delay:.2f}s"
        + ("" if heal_first else " before heal")
    )
    return steps + recover, label


def _episode_kill_two(n: int, t: _Timing, partitions: int) -> _Episode:
    partition = t.rng.randrange(partitions)
    first, second = f"{n}a", f"{n}b"
    speed_a, delay_a = t.restart()
    speed_b, delay_b = t.restart()
    steps = [
        Step(after_s=0, action=Action.KILL, role=Role.LEADER, partition=partition, name=first),
        Step(
            after_s=0,
            action=Action.KILL,
            role=Role.FOLLOWER,
            partition=partition,
            pick=t.rng.randrange(6),
            name=second,
        ),
    ]
    restarts = sorted([(delay_a, first), (delay_b, second)])
    previous = 0.0
    for delay, name in restarts:
        steps.append(
            Step(
                after_s=round(delay - previous, 2),
                action=Action.RESTART,
                role=Role.BOUND,
                name=name,
            )
        )
        previous = delay
    return steps, (
        f"kill leader(p{partition}) and a follower, restarts {speed_a} {delay_a:.2f}s "
        f"and {speed_b} {delay_b:.2f}s"
    )


def _episode_restarted_follower_leads(n: int, t: _Timing, partitions: int) -> _Episode:
    """A follower comes back fast (still in the ISR, with the high watermark it checkpointed)
    and the leader crashes right after: KIP-101's first case, where Kafka 0.9 truncated the
    follower to its stale high watermark and then elected it."""
    partition, follower, leader = t.rng.randrange(partitions), f"{n}a", f"{n}b"
    delay = round(t.rng.uniform(0.15, 0.7) * t.session_s, 2)
    right_after = round(t.rng.uniform(0.0, 0.1), 2)
    speed, leader_delay = t.restart()
    steps = [
        Step(
            after_s=0,
            action=Action.KILL,
            role=Role.FOLLOWER,
            partition=partition,
            pick=t.rng.randrange(6),
            name=follower,
        ),
        Step(after_s=delay, action=Action.RESTART, role=Role.BOUND, name=follower),
        Step(
            after_s=right_after,
            action=Action.KILL,
            role=Role.LEADER,
            partition=partition,
            name=leader,
        ),
        Step(after_s=leader_delay, action=Action.RESTART, role=Role.BOUND, name=leader),
    ]
    return steps, (
        f"kill follower(p{partition}), fast restart {delay:.2f}s, then kill the leader "
        f"{right_after:.2f}s later, {speed} restart {leader_delay:.2f}s"
    )


def _episode_isolate_one_crash_two(n: int, t: _Timing, partitions: int) -> _Episode:
    isolated, first, second = f"{n}a", f"{n}b", f"{n}c"
    pick = t.rng.randrange(6)
    speed, delay = t.restart()
    heal_after = round(t.rng.uniform(0.0, 1.0) * t.session_s, 2)
    steps = [
        Step(after_s=0, action=Action.ISOLATE, role=Role.ANY, pick=pick, name=isolated),
        Step(after_s=0.1, action=Action.KILL, role=Role.ANY, name=first),
        Step(after_s=0, action=Action.KILL, role=Role.ANY, name=second),
        Step(after_s=delay, action=Action.RESTART, role=Role.BOUND, name=first),
        Step(after_s=0, action=Action.RESTART, role=Role.BOUND, name=second),
        Step(after_s=heal_after, action=Action.HEAL, role=Role.BOUND, name=isolated),
    ]
    return steps, (
        f"isolate one broker, crash the two others, {speed} restart {delay:.2f}s, "
        f"heal {heal_after:.2f}s later"
    )


def _episode_power_loss(n: int, t: _Timing, partitions: int) -> _Episode:
    role = t.rng.choice([Role.LEADER, Role.FOLLOWER, Role.CONTROLLER])
    partition = t.rng.randrange(partitions) if role is not Role.CONTROLLER else None
    steps, label = _kill_and_restart(n, t, role, partition, Action.POWER_LOSS)
    await_healthy = Step(after_s=0, action=Action.AWAIT_HEALTHY)
    return [await_healthy, *steps, await_healthy], label


def _episode_reassignment(n: int, t: _Timing, partitions: int) -> _Episode:
    """A reassignment in flight while the load runs (KIP-455): the leader or a follower of p
    is dropped from its replicas (RF 3 -> 2: the two left stay an ISR of min ISR 2, and the
    dropped replica's log is deleted), and after a delay it is added back: rebuilt from the
    leader while records keep coming, until it joins the ISR and the reassignment completes."""
    role = t.rng.choice([Role.LEADER, Role.FOLLOWER])
    partition, name = t.rng.randrange(partitions), f"{n}a"
    pick, delay = t.rng.randrange(6), t.hold()
    steps = [
        Step(
            after_s=0,
            action=Action.DROP_REPLICA,
            role=role,
            partition=partition,
            pick=pick,
            name=name,
        ),
        Step(after_s=delay, action=Action.RESTORE, role=Role.BOUND, partition=partition, name=name),
    ]
    return steps, f"reassign p{partition}: drop its {role}, add it back {delay:.2f}s later"


def _episode_preferred_election(n: int, t: _Timing, partitions: int) -> _Episode:
    """A reassignment that only reorders p's replicas (a follower first), then a preferred
    election moves p's leadership to it; later the order is restored and every partition's
    preferred replica elected again (leaderships moved by earlier faults come back too)."""
    partition, name = t.rng.randrange(partitions), f"{n}a"
    pick = t.rng.randrange(6)
    elect_after = round(t.rng.uniform(0.0, 0.2) * t.session_s, 2)
    hold = t.hold()
    steps = [
        Step(
            after_s=0,
            action=Action.REORDER,
            role=Role.FOLLOWER,
            partition=partition,
            pick=pick,
            name=name,
        ),
        Step(after_s=elect_after, action=Action.PREFERRED_ELECTION, partition=partition),
        Step(after_s=hold, action=Action.RESTORE, role=Role.BOUND, partition=partition, name=name),
        Step(after_s=0, action=Action.PREFERRED_ELECTION),
    ]
    return steps, (
        f"reorder p{partition} (a follower first), preferred election {elect_after:.2f}s later, "
        f"order restored {hold:.2f}s on, then every preferred leader elected"
    )


_EPISODES: dict[EpisodeKind, Callable[[int, _Timing, int], _Episode]] = {
    EpisodeKind.KILL_LEADER: _episode_kill_leader,
    EpisodeKind.KILL_CONTROLLER: _episode_kill_controller,
    EpisodeKind.KILL_FOLLOWER: _episode_kill_follower,
    EpisodeKind.EXPIRE_SESSION: _episode_expire_session,
    EpisodeKind.ISOLATE: _episode_isolate,
    EpisodeKind.ISOLATED_LEADER_CRASH: _episode_isolated_leader_crash,
    EpisodeKind.KILL_TWO: _episode_kill_two,
    EpisodeKind.ISOLATE_ONE_CRASH_TWO: _episode_isolate_one_crash_two,
    EpisodeKind.RESTARTED_FOLLOWER_LEADS: _episode_restarted_follower_leads,
    EpisodeKind.POWER_LOSS: _episode_power_loss,
    EpisodeKind.CONTROLLED_SHUTDOWN: _episode_controlled_shutdown,
    EpisodeKind.PREFERRED_ELECTION: _episode_preferred_election,
    EpisodeKind.REASSIGNMENT: _episode_reassignment,
}


def generate_schedule(
    seed: int,
    seconds: float,
    *,
    session_timeout_ms: int = 2000,
    partitions: int = 3,
    power_loss: bool = True,
    unsafe: bool = False,
) -> Schedule:
    """A fault schedule for about `seconds` of faults; the same arguments give the same one.

    Episodes (a fault and its recovery) follow each other with a gap between them, after a
    warm-up, for as long as they fit in `seconds` (at least one; a few episodes too long for
    the time left are drawn again); a HEAL_ALL ends it, and recovers the last episode. Restart
    delays are fast (shorter than the session timeout) or slow (longer). `unsafe` draws only
    from faults that move leadership (`UNSAFE_KINDS`); `power_loss=False` leaves power losses
    out (a Cluster whose `kill_broker` cannot lose unflushed data).
    """
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    rng = random.Random(seed)
    timing = _Timing(rng, session_timeout_ms / 1000)
    weights = dict(UNSAFE_KINDS if unsafe else SAFE_KINDS)
    if not power_loss:
        weights.pop(EpisodeKind.POWER_LOSS, None)
    kinds = sorted(weights)
    episodes: list[_Episode] = []
    elapsed = 0.0
    delay = round(rng.uniform(0.5, 1.0) * timing.session_s, 2)  # warm-up: the load starts
    misses = 0  # episodes drawn that did not fit in the time left
    while misses < _MAX_MISSES:
        kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        number = len(episodes) + 1
        episode, label = _EPISODES[kind](number, timing, partitions)
        episode = [replace(step, episode=number) for step in episode]
        episode[0] = replace(episode[0], after_s=delay)
        length = sum(step.after_s for step in episode)
        if episodes and elapsed + length > seconds:
            misses += 1
            continue
        episodes.append((episode, label))
        elapsed += length
        delay = timing.gap()
    # The last episode's recovery is the HEAL_ALL, so the recovery time measured after it is
    # that of a real fault.
    last, label = episodes[-1]
    recoveries = [i for i, step in enumerate(last) if step.action in _RECOVERIES]
    if recoveries:
        heal_after = last[recoveries[0]].after_s
        episodes[-1] = (last[: recoveries[0]], f"{label} (heal-all recovers it)")
    else:
        heal_after = delay
    steps = [step for episode, _ in episodes for step in episode]
    steps.append(Step(after_s=heal_after, action=Action.HEAL_ALL, episode=len(episodes)))
    labels = [label for _, label in episodes]
    return Schedule(
        seed=seed,
        seconds=seconds,
        session_timeout_ms=session_timeout_ms,
        partitions=partitions,
        unsafe=unsafe,
        power_loss=power_loss,
        steps=tuple(steps),
        episodes=tuple(labels),
    )


class _Validator:
    """Walks a schedule and keeps what breaks the fault model."""

    def __init__(self, max_down: int) -> None:
        self.max_down = max_down
        self.problems: list[str] = []
        self.down: set[str] = set()
        self.isolated: set[str] = set()
        self.bound: set[str] = set()
        self.power_lost: str | None = None  # restarted, not yet followed by AWAIT_HEALTHY
        self.awaiting_restart: str | None = None  # power lost, not restarted yet
        self.changed: set[str] = set()  # assignment changes not restored yet

    def step(self, step: Step, where: str, previous: Step | None) -> None:
        if step.after_s < 0:
            self.problems.append(f"{where}: negative delay")
        new_episode = previous is not None and step.episode != previous.episode
        out_now = self.down | self.isolated | self.changed
        if new_episode and step.action is not Action.HEAL_ALL and out_now:
            out = sorted(out_now)
            self.problems.append(f"{where}: {out} not recovered by their episode")
        waiting = self.awaiting_restart
        restarts = step.action is Action.HEAL_ALL or (
            step.action is Action.RESTART and step.name == waiting
        )
        if waiting is not None and not restarts:
            self.problems.append(f"{where}: runs while {waiting} is down from a power loss")
        if self.power_lost is not None and step.action is not Action.AWAIT_HEALTHY:
            self.problems.append(f"{where}: a power-lost broker restarted without AWAIT_HEALTHY")
        self.power_lost = None
        if step.action in FAULTS:
            self.fault(step, where, previous)
        elif step.action in ASSIGNMENT_CHANGES:
            self.change(step, where)
        elif step.action is Action.RESTORE:
            if step.name not in self.changed:
                self.problems.append(f"{where}: restores {step.name}, which changed nothing")
            self.changed.discard(step.name)
        elif step.action is Action.RESTART:
            self.restart(step, where)
        elif step.action is Action.HEAL:
            if step.name not in self.isolated:
                self.problems.append(f"{where}: heals {step.name}, which is not isolated")
            self.isolated.discard(step.name)
        elif step.action is Action.HEAL_ALL:
            self.down.clear()
            self.isolated.clear()
            self.changed.clear()
            self.awaiting_restart = None

    def fault(self, step: Step, where: str, previous: Step | None) -> None:
        if step.role is Role.BOUND and step.name not in self.bound:
            self.problems.append(f"{where}: {step.name} is not bound")
        self.bound.add(step.name)
        if step.action is Action.POWER_LOSS:
            if previous is None or previous.action is not Action.AWAIT_HEALTHY:
                self.problems.append(f"{where}: a power loss must follow AWAIT_HEALTHY")
            if self.down or self.isolated:
                out = sorted(self.down | self.isolated)
                self.problems.append(f"{where}: a power loss while {out} are out")
            self.awaiting_restart = step.name
        if step.action in DOWN:
            self.down.add(step.name)
            if len(self.down) > self.max_down:
                self.problems.append(f"{where}: {len(self.down)} brokers down at once")
        elif step.action is Action.ISOLATE:
            self.isolated.add(step.name)

    def change(self, step: Step, where: str) -> None:
        """A replica dropped or the replicas reordered: only with every broker up and
        connected (the replicas left must form an ISR of 2), one change at a time."""
        if self.down or self.isolated:
            out = sorted(self.down | self.isolated)
            self.problems.append(f"{where}: an assignment change while {out} are out")
        if self.changed:
            self.problems.append(f"{where}: a change while {sorted(self.changed)} is not restored")
        self.bound.add(step.name)
        self.changed.add(step.name)

    def restart(self, step: Step, where: str) -> None:
        if step.name not in self.down:
            self.problems.append(f"{where}: restarts {step.name}, which is not down")
        self.down.discard(step.name)
        if step.name == self.awaiting_restart:
            self.awaiting_restart, self.power_lost = None, step.name


def validate_schedule(steps: Sequence[Step], *, max_down: int = 2) -> list[str]:
    """What in `steps` breaks the fault model (module docstring); [] when nothing does."""
    validator = _Validator(max_down)
    previous: Step | None = None
    for index, step in enumerate(steps):
        validator.step(step, f"step {index} ({step.describe()})", previous)
        previous = step
    if not steps or steps[-1].action is not Action.HEAL_ALL:
        validator.problems.append("the schedule does not end with HEAL_ALL")
    if any(step.action is Action.HEAL_ALL for step in steps[:-1]):
        validator.problems.append("HEAL_ALL before the end")
    return validator.problems


def parse_seeds(text: str) -> list[int]:
    """Seeds from `A-B` (inclusive), `A,B,C`, or a mix (`1-3,7`), in order, without repeats."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise ValueError(f"an empty seed in {text!r}")
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(f"not a seed or a range A-B: {part!r}") from None
        if last < first:
            raise ValueError(f"an empty range: {part!r}")
        seeds.extend(s for s in range(first, last + 1) if s not in seeds)
    return seeds
