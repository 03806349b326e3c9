"""What the group coordinator's pure core answers, and what it asks its actor shell to do.

Every request handler returns the client's answer when it has one, and an `Effects` naming
the rest as plain values: parked JoinGroups and SyncGroups it answers now, DelayedHeartbeat
and DelayedJoin deadlines to schedule, and group metadata to append to `__consumer_offsets`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkactor.actors.coordinator.group_metadata import (
    NO_GENERATION,
    NO_LEADER,
    GroupMetadata,
    GroupMetadataSnapshot,
    JoinGroupMember,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.member_metadata import MemberMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode

INVALID_OFFSET = -1  # OffsetFetch's offset for a partition without a committed offset
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """The broker settings the group coordinator reads (Kafka's GroupConfig and OffsetConfig).

    - `group.min.session.timeout.ms` 6000 and `group.max.session.timeout.ms` 1,800,000
      (Kafka 2.x defaults): a JoinGroup outside answers INVALID_SESSION_TIMEOUT.
    - `group.initial.rebalance.delay.ms` 3000 (KIP-134): how long the first rebalance of an
      Empty group waits for more members, extended while new ones arrive, up to the
      rebalance timeout.
    - `offset.metadata.max.bytes` 4096: a longer metadata string answers
      OFFSET_METADATA_TOO_LARGE.
    - `offsets.topic.num.partitions` 50: a group belongs to partition
      `abs(hash(group id)) % 50` of `__consumer_offsets`, whose leader coordinates it.
    """

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    offset_metadata_max_bytes: int = 4096
    offsets_topic_partitions: int = 50


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResult:
    """Kafka's `JoinGroupResult`: the JoinGroup answer. Only the leader's lists the members
    (with their metadata for the chosen protocol); an error answer has generation -1."""

    member_id: str
    error: ErrorCode = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResult:
    """Kafka's `SyncGroupResult`: the member's assignment (empty on error)."""

    error: ErrorCode = ErrorCode.NONE
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatDeadline:
    """A DelayedHeartbeat for the "Heartbeat" purgatory, keyed by (group, member): when it
    falls due, call `on_heartbeat_expired` with these values. It replaces the member's
    previous one (an expiry naming an older deadline is ignored anyway). `pending` marks the
    deadline of a member id handed out with MEMBER_ID_REQUIRED and not yet used."""

    group_id: str
    member_id: str
    deadline_ms: int
    pending: bool = False


@dataclass(frozen=True, slots=True)
class JoinDeadline:
    """A DelayedJoin for the "Rebalance" purgatory, keyed by group: watch it (try it at once,
    Kafka's tryCompleteElseWatch, with `try_complete_join`) and call `on_join_expired` when
    `deadline_ms` passes. `initial` marks Kafka's InitialDelayedJoin, which only its deadline
    completes."""

    group_id: str
    deadline_ms: int
    initial: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Effects:
    """What the actor shell must do besides answering the request at hand.

    - `join_answers` / `sync_answers`: parked JoinGroups / SyncGroups answered now, by the
      member id they were parked under.
    - `heartbeats`: DelayedHeartbeats to schedule (each replaces its member's previous one).
    - `cancelled_heartbeats`: members whose DelayedHeartbeat completes now (they left).
    - `join_deadline`: a DelayedJoin to watch in the "Rebalance" purgatory.
    - `check_join`: the group's DelayedJoin may complete now (Kafka's checkAndComplete on its
      key): call `try_complete_join`.
    - `group_writes`: group metadata to append to `__consumer_offsets`; once appended (or
      failed) call `complete_group_write` with it.
    """

    group_id: str = ""
    join_answers: Mapping[str, JoinGroupResult] = field(default_factory=dict)
    sync_answers: Mapping[str, SyncGroupResult] = field(default_factory=dict)
    heartbeats: tuple[HeartbeatDeadline, ...] = ()
    cancelled_heartbeats: tuple[str, ...] = ()
    join_deadline: JoinDeadline | None = None
    check_join: bool = False
    group_writes: tuple[GroupMetadataSnapshot, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.join_answers
            or self.sync_answers
            or self.heartbeats
            or self.cancelled_heartbeats
            or self.join_deadline
            or self.check_join
            or self.group_writes
        )


NO_EFFECTS = Effects()


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    """A JoinGroup's outcome: `result` answers it now; None parks it under `member_id` (a new
    member's freshly generated id) until `Effects.join_answers` answers it."""

    member_id: str
    result: JoinGroupResult | None
    effects: Effects = NO_EFFECTS


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    """A SyncGroup's outcome: `result` answers it now; None parks it under the member's id
    until `Effects.sync_answers` answers it (when the leader's assignment is stored)."""

    result: SyncGroupResult | None
    effects: Effects = NO_EFFECTS


@dataclass(frozen=True, slots=True)
class HeartbeatOutcome:
    """A Heartbeat's answer (Kafka answers a heartbeat with an error code only)."""

    error: ErrorCode
    effects: Effects = NO_EFFECTS


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """A member a LeaveGroup names (Kafka's `MemberIdentity`, LeaveGroup v3+): its member
    id, and for a static member its group instance id (the member id may then be "")."""

    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    """One member's LeaveGroup result, under the identity the request gave."""

    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveOutcome:
    """A LeaveGroup's answer: a top-level error, and one result per member named, in the
    request's order (LeaveGroup v3+)."""

    error: ErrorCode
    members: tuple[LeaveMemberResult, ...]
    effects: Effects = NO_EFFECTS

    @property
    def errors(self) -> dict[str, ErrorCode]:
        """The members' errors by member id (for requests naming members by id alone)."""
        return {m.member_id: m.error for m in self.members}


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitWrite:
    """Offsets to append to `__consumer_offsets` for an OffsetCommit: once appended (or
    failed) call `complete_offset_write` with it to get the commit's answer. `too_large`
    are the partitions refused for their metadata size (not written)."""

    group_id: str
    member_id: str
    generation_id: int
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    too_large: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitOutcome:
    """An OffsetCommit's outcome: `errors` answers it now, or `write` must be appended first."""

    errors: Mapping[TopicPartition, ErrorCode] | None
    write: OffsetCommitWrite | None = None
    effects: Effects = NO_EFFECTS


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchPartition:
    """One partition of an OffsetFetch answer: offset -1 and metadata "" when none is
    committed."""

    offset: int = INVALID_OFFSET
    leader_epoch: int | None = None
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class GroupTombstones:
    """A deleted group (DeleteGroups), or deleted offsets (OffsetDelete): these partitions'
    offsets get tombstones in `__consumer_offsets`, and the group's metadata too when
    `metadata` (a group gone Dead that had a generation)."""

    group_id: str
    partitions: tuple[TopicPartition, ...]
    metadata: bool = True


@dataclass(frozen=True, slots=True)
class DeleteGroupsOutcome:
    """A DeleteGroups answer, group by group, and the tombstones the deleted groups need."""

    errors: Mapping[str, ErrorCode]
    tombstones: tuple[GroupTombstones, ...] = ()


class EffectsBuilder:
    """Collects the effects of one call into the core (internal to the coordinator package).
    A later heartbeat schedule or cancel of the same member replaces an earlier one."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.joins: dict[str, JoinGroupResult] = {}
        self.syncs: dict[str, SyncGroupResult] = {}
        self.heartbeats: dict[str, HeartbeatDeadline] = {}
        self.cancelled: dict[str, None] = {}
        self.join_deadline: JoinDeadline | None = None
        self.check_join = False
        self.writes: list[GroupMetadataSnapshot] = []

    def heartbeat(self, deadline: HeartbeatDeadline) -> None:
        self.cancelled.pop(deadline.member_id, None)
        self.heartbeats[deadline.member_id] = deadline

    def cancel(self, member_id: str) -> None:
        self.heartbeats.pop(member_id, None)
        self.cancelled[member_id] = None

    def build(self) -> Effects:
        return Effects(
            group_id=self.group_id,
            join_answers=self.joins,
            sync_answers=self.syncs,
            heartbeats=tuple(self.heartbeats.values()),
            cancelled_heartbeats=tuple(self.cancelled),
            join_deadline=self.join_deadline,
            check_join=self.check_join,
            group_writes=tuple(self.writes),
        )


def schedule_heartbeat(
    group: GroupMetadata,
    member: MemberMetadata,
    timeout_ms: int,
    now_ms: int,
    b: EffectsBuilder,
) -> None:
    """Kafka's completeAndScheduleNextExpiration: a new deadline replaces the member's
    current one, whose expiry is then stale."""
    member.heartbeat_deadline_ms = now_ms + timeout_ms
    b.heartbeat(HeartbeatDeadline(group.group_id, member.member_id, now_ms + timeout_ms))


def append_error(
    error: ErrorCode, *, too_large: ErrorCode, timed_out: ErrorCode | None = None
) -> ErrorCode:
    """What a coordinator answers when its append to `__consumer_offsets` failed with `error`
    (Kafka's storeOffsets and storeGroup): the partition has no leader or too few replicas:
    COORDINATOR_NOT_AVAILABLE; it is led elsewhere or its disk failed: NOT_COORDINATOR; the
    record was too large: `too_large`; a timeout: `timed_out` when given; else `error`."""
    if error in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if timed_out is not None and error is ErrorCode.REQUEST_TIMED_OUT:
        return timed_out
    if error in (
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_FETCH_SIZE,
    ):
        return too_large
    return error


def group_append_error(error: ErrorCode) -> ErrorCode:
    """How Kafka's storeGroup answers a failed append of group metadata."""
    return append_error(
        error,
        too_large=ErrorCode.UNKNOWN_SERVER_ERROR,
        timed_out=ErrorCode.REBALANCE_IN_PROGRESS,
    )
