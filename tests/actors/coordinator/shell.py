"""A stand-in for the coordinator's actor shell, for tests of the pure core.

It does with `Effects` what the actor will: parks JoinGroups and SyncGroups and delivers their
answers, keeps the "Rebalance" purgatory's DelayedJoin and the "Heartbeat" purgatory's
DelayedHeartbeats as deadlines on a ManualClock, tries a DelayedJoin as soon as it is watched
and whenever the core says `check_join` (Kafka's tryCompleteElseWatch / checkAndComplete), and
appends group metadata and offsets at once (or holds them when `hold_writes`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadata,
    GroupMetadataSnapshot,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.member_metadata import Protocol
from kafkactor.actors.coordinator.results import (
    CommitOutcome,
    Effects,
    GroupConfig,
    HeartbeatDeadline,
    JoinDeadline,
    JoinGroupResult,
    LeaveOutcome,
    MemberIdentity,
    OffsetCommitWrite,
    SyncGroupResult,
)
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode
from kafkactor.timer import ManualClock

GROUP = "group"
CLIENT_ID = "consumer-1"
PROTOCOL_TYPE = "consumer"
PROTOCOLS: list[Protocol] = [("range", b"range-meta")]
SESSION_MS = 10_000
REBALANCE_MS = 30_000
TEST_CONFIG = GroupConfig(initial_rebalance_delay_ms=0)


@dataclass
class JoinCall:
    """A JoinGroup sent through the shell: answered now or later (like Kafka's test futures)."""

    group_id: str
    member_id: str
    answer: JoinGroupResult | None = None

    @property
    def done(self) -> bool:
        return self.answer is not None

    @property
    def result(self) -> JoinGroupResult:
        assert self.answer is not None, f"the JoinGroup of {self.member_id or 'a new member'} waits"
        return self.answer


@dataclass
class SyncCall:
    """A SyncGroup sent through the shell: answered now or when the leader's assignment is."""

    group_id: str
    member_id: str
    answer: SyncGroupResult | None = None

    @property
    def done(self) -> bool:
        return self.answer is not None

    @property
    def result(self) -> SyncGroupResult:
        assert self.answer is not None, f"the SyncGroup of {self.member_id} waits"
        return self.answer


@dataclass
class Shell:
    """The actor shell's part, driven by hand."""

    core: GroupCoordinatorCore = field(
        default_factory=lambda: GroupCoordinatorCore(TEST_CONFIG, member_id_suffix=_counter())
    )
    clock: ManualClock = field(default_factory=lambda: ManualClock(1_000))
    hold_writes: bool = False
    parked_joins: dict[tuple[str, str], JoinCall] = field(default_factory=dict)
    parked_syncs: dict[tuple[str, str], SyncCall] = field(default_factory=dict)
    join_deadlines: dict[str, JoinDeadline] = field(default_factory=dict)
    heartbeat_deadlines: dict[tuple[str, str], HeartbeatDeadline] = field(default_factory=dict)
    held_group_writes: list[GroupMetadataSnapshot] = field(default_factory=list)
    held_offset_writes: list[OffsetCommitWrite] = field(default_factory=list)

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    def group(self, group_id: str = GROUP) -> GroupMetadata:
        group = self.core.group(group_id)
        assert group is not None, f"no group {group_id}"
        return group

    def state(self, group_id: str = GROUP) -> GroupState:
        return self.group(group_id).state

    # -- requests --------------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        group_id: str = GROUP,
        *,
        protocols: Sequence[Protocol] = PROTOCOLS,
        protocol_type: str = PROTOCOL_TYPE,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        client_id: str = CLIENT_ID,
        require_known: bool = False,
        instance: str | None = None,
    ) -> JoinCall:
        outcome = self.core.handle_join_group(
            group_id,
            member_id,
            protocol_type,
            protocols,
            session_ms,
            rebalance_ms,
            client_id,
            "/127.0.0.1",
            self.now,
            require_known_member_id=require_known,
            group_instance_id=instance,
        )
        call = JoinCall(group_id, outcome.member_id, outcome.result)
        if outcome.result is None:
            self.parked_joins[(group_id, outcome.member_id)] = call
        self.apply(outcome.effects)
        self.settle()
        return call

    def sync(
        self,
        member_id: str,
        generation_id: int,
        assignments: Mapping[str, bytes] | None = None,
        group_id: str = GROUP,
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        instance: str | None = None,
    ) -> SyncCall:
        outcome = self.core.handle_sync_group(
            group_id,
            generation_id,
            member_id,
            assignments or {},
            self.now,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            group_instance_id=instance,
        )
        call = SyncCall(group_id, member_id, outcome.result)
        if outcome.result is None:
            self.parked_syncs[(group_id, member_id)] = call
        self.apply(outcome.effects)
        self.settle()
        return call

    def heartbeat(
        self,
        member_id: str,
        generation_id: int,
        group_id: str = GROUP,
        *,
        instance: str | None = None,
    ) -> ErrorCode:
        outcome = self.core.handle_heartbeat(
            group_id, member_id, generation_id, self.now, group_instance_id=instance
        )
        self.apply(outcome.effects)
        self.settle()
        return outcome.error

    def leave(self, *members: str | MemberIdentity, group_id: str = GROUP) -> LeaveOutcome:
        """A LeaveGroup naming members by id, or by `MemberIdentity` (static members)."""
        outcome = self.core.handle_leave_group(group_id, members, self.now)
        self.apply(outcome.effects)
        self.settle()
        return outcome

    def commit(
        self,
        offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
        member_id: str = "",
        generation_id: int = -1,
        group_id: str = GROUP,
        *,
        instance: str | None = None,
    ) -> CommitOutcome:
        """An OffsetCommit; with writes not held, `errors` is the answer after the append."""
        full = {
            tp: o if isinstance(o, OffsetAndMetadata) else offset(o, self.now)
            for tp, o in offsets.items()
        }
        outcome = self.core.handle_commit_offsets(
            group_id, member_id, generation_id, full, self.now, group_instance_id=instance
        )
        self.apply(outcome.effects)
        if outcome.write is not None:
            if self.hold_writes:
                self.held_offset_writes.append(outcome.write)
            else:
                errors = self.core.complete_offset_write(outcome.write)
                outcome = CommitOutcome(errors, outcome.write, outcome.effects)
        self.settle()
        return outcome

    # -- the purgatories -------------------------------------------------------------------------

    def apply(self, effects: Effects) -> None:
        group_id = effects.group_id
        for member_id, join_result in effects.join_answers.items():
            join = self.parked_joins.pop((group_id, member_id), None)
            assert join is not None, f"no parked JoinGroup of {member_id} to answer"
            join.answer = join_result
        for member_id, sync_result in effects.sync_answers.items():
            sync = self.parked_syncs.pop((group_id, member_id), None)
            assert sync is not None, f"no parked SyncGroup of {member_id} to answer"
            sync.answer = sync_result
        for member_id in effects.cancelled_heartbeats:
            self.heartbeat_deadlines.pop((group_id, member_id), None)
        for deadline in effects.heartbeats:
            self.heartbeat_deadlines[(deadline.group_id, deadline.member_id)] = deadline
        for snapshot in effects.group_writes:
            if self.hold_writes:
                self.held_group_writes.append(snapshot)
            else:
                self.apply(self.core.complete_group_write(snapshot, ErrorCode.NONE, self.now))
        if effects.join_deadline is not None:
            self.join_deadlines[group_id] = effects.join_deadline
            self._try_join(group_id)  # tryCompleteElseWatch
        if effects.check_join and group_id in self.join_deadlines:
            self._try_join(group_id)  # checkAndComplete

    def _try_join(self, group_id: str) -> None:
        effects = self.core.try_complete_join(group_id, self.now)
        if effects is not None:
            del self.join_deadlines[group_id]
            self.apply(effects)

    def complete_held_group_write(self, error: ErrorCode = ErrorCode.NONE) -> None:
        self.apply(self.core.complete_group_write(self.held_group_writes.pop(0), error, self.now))

    def _next_due(self, until_ms: int) -> JoinDeadline | HeartbeatDeadline | None:
        due: list[JoinDeadline | HeartbeatDeadline] = [
            d for d in self.join_deadlines.values() if d.deadline_ms <= until_ms
        ]
        due += [d for d in self.heartbeat_deadlines.values() if d.deadline_ms <= until_ms]
        return min(due, key=lambda d: d.deadline_ms, default=None)

    def settle(self) -> None:
        """Fire every deadline already due (a zero delay expires at once)."""
        self.advance(0)

    def advance(self, ms: int) -> None:
        """Move the clock `ms` on, firing each deadline passed, earliest first."""
        target = self.now + ms
        while (due := self._next_due(target)) is not None:
            self.clock.set(max(self.now, due.deadline_ms))
            if isinstance(due, JoinDeadline):
                del self.join_deadlines[due.group_id]
                self.apply(self.core.on_join_expired(due.group_id, self.now))
            else:
                del self.heartbeat_deadlines[(due.group_id, due.member_id)]
                self.apply(
                    self.core.on_heartbeat_expired(
                        due.group_id, due.member_id, due.deadline_ms, self.now, pending=due.pending
                    )
                )
        self.clock.set(target)

    # -- scenarios -------------------------------------------------------------------------------

    def stable_group(self, size: int, group_id: str = GROUP) -> tuple[list[str], int]:
        """A Stable group of `size` members (the first leads): (member ids, generation)."""
        first = self.join(group_id=group_id).result
        members = [first.member_id]
        generation = first.generation_id
        self.sync(members[0], generation, {members[0]: b"a0"}, group_id)
        for _ in range(1, size):
            new = self.join(group_id=group_id)
            rejoins = [self.join(member_id, group_id) for member_id in members]
            members.append(new.member_id)
            generation = new.result.generation_id
            assert all(r.result.generation_id == generation for r in rejoins)
        if size > 1:
            assignment = {m: f"a{i}".encode() for i, m in enumerate(members)}
            for member_id in members:
                self.sync(member_id, generation, assignment, group_id)
        assert self.state(group_id) is GroupState.STABLE
        return members, generation


def offset(value: int, now_ms: int = 0, metadata: str = "") -> OffsetAndMetadata:
    return OffsetAndMetadata(offset=value, metadata=metadata, commit_timestamp_ms=now_ms)


def tp(topic: str = "topic", partition: int = 0) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def _counter() -> Callable[[], str]:
    """Member id suffixes 1, 2, 3... instead of UUIDs, so ids read consumer-1-1, consumer-1-2."""
    counter = itertools.count(1)
    return lambda: str(next(counter))
