"""A consumer group as its coordinator holds it (Kafka's GroupMetadata), with its committed
offsets; its states are `group_state`'s."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kafkactor.actors.coordinator.group_state import GroupState, IllegalGroupStateError
from kafkactor.actors.coordinator.member_metadata import (
    MemberMetadata,
    MemberSummary,
    Protocol,
)
from kafkactor.actors.coordinator.subscribed_topics import subscribed_topics
from kafkactor.common import TopicPartition

NO_STATE = ""  # DescribeGroups' state when the coordinator cannot answer for the group
NO_PROTOCOL_TYPE = ""
NO_PROTOCOL = ""  # DescribeGroups' protocol for a group that is not Stable
NO_LEADER = ""  # JoinGroup's leader id in an error answer
NO_GENERATION = -1  # JoinGroup's generation in an error answer (and a simple consumer's commits)


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetAndMetadata:
    """Kafka's `OffsetAndMetadata`: a committed position in a partition, with the client's
    metadata string, the leader epoch it was read in (KIP-320) and when it was committed.
    `expire_timestamp_ms` is only set by v1 OffsetCommits (expiry is not built)."""

    offset: int
    leader_epoch: int | None = None
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One member in the leader's JoinGroup answer: its id and its metadata for the chosen
    protocol, which the leader's assignor reads."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberSnapshot:
    """One member as Kafka's GroupMetadataValue stores it in `__consumer_offsets`."""

    member_id: str
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 0
    session_timeout_ms: int = 0
    subscription: bytes = b""  # the member's metadata for the group's protocol
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataSnapshot:
    """A group as Kafka's GroupMetadataValue stores it in `__consumer_offsets`: what a
    completed rebalance (or a group becoming Empty) appends, and what loading reads back.
    A snapshot without members is an Empty group."""

    group_id: str
    generation_id: int = 0
    protocol_type: str = NO_PROTOCOL_TYPE
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp_ms: int | None = None
    members: tuple[MemberSnapshot, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """Kafka's `GroupSummary`: a group as DescribeGroups shows it."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


EMPTY_GROUP = GroupSummary(NO_STATE, NO_PROTOCOL_TYPE, NO_PROTOCOL, ())
DEAD_GROUP = GroupSummary(GroupState.DEAD.value, NO_PROTOCOL_TYPE, NO_PROTOCOL, ())


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """Kafka's `GroupOverview`: a group as ListGroups shows it."""

    group_id: str
    protocol_type: str
    state: str


class GroupMetadata:
    """Kafka's `GroupMetadata`: a group's members, state, generation, protocol and leader, and
    the offsets it has committed.

    `members` keeps join order, which is where a departing leader's successor comes from
    (Kafka takes the first key of a hash map). `pending_members` (KIP-394) holds the ids
    handed out with MEMBER_ID_REQUIRED, each with the deadline of its pending heartbeat:
    the member must rejoin with its id before then. `static_members` (KIP-345) maps each
    static member's group instance id to its current member id; a request naming the
    instance id with another member id is fenced (`is_static_member_fenced`). Pure state: it
    has no clock, every method that stamps a time takes `now_ms`.
    """

    def __init__(
        self, group_id: str, state: GroupState = GroupState.EMPTY, now_ms: int | None = None
    ) -> None:
        self.group_id = group_id
        self._state = state
        self.current_state_timestamp_ms: int | None = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: dict[str, int] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        # a member joined during the first rebalance: the initial delay may be extended
        self.new_member_added = False
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        # the members' topics as of the generation (KIP-496); None: not known, every topic
        self.subscribed_topics: frozenset[str] | None = None

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
            f"protocol_type={self.protocol_type!r}, state={self._state.value}, "
            f"members={list(self.members)})"
        )

    # -- state -----------------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        return self._state

    def is_in(self, *states: GroupState) -> bool:
        return self._state in states

    @property
    def can_rebalance(self) -> bool:
        return self._state in GroupState.PREPARING_REBALANCE.valid_previous_states

    def transition_to(self, state: GroupState, now_ms: int | None = None) -> None:
        """Move to `state`; IllegalGroupStateError unless the current state may precede it."""
        if self._state not in state.valid_previous_states:
            allowed = ", ".join(sorted(s.value for s in state.valid_previous_states))
            raise IllegalGroupStateError(
                f"group {self.group_id} should be in one of {{{allowed}}} before moving to "
                f"{state.value}, but it is {self._state.value}"
            )
        self._state = state
        if now_ms is not None:
            self.current_state_timestamp_ms = now_ms

    # -- members ---------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: MemberMetadata, *, awaiting_join: bool = False) -> None:
        """Add a member (the first one also sets the group's protocol type); the first member
        of a leaderless group leads it."""
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError(
                f"member protocol type {member.protocol_type!r} is not the group's "
                f"{self.protocol_type!r}"
            )
        if not self.supports_protocols(member.protocol_type, member.protocols):
            raise ValueError(f"member {member.member_id} shares no protocol with the group")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        member.awaiting_join = awaiting_join

    def remove(self, member_id: str) -> MemberMetadata | None:
        """Remove a member (a static one with its instance id); a departing leader is
        succeeded by the oldest remaining member."""
        member = self.members.pop(member_id, None)
        instance = None if member is None else member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        return member

    # -- static members (KIP-345) ----------------------------------------------------------------

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def static_member_id(self, group_instance_id: str) -> str:
        """The current member id of a static member; KeyError for an unknown instance id."""
        return self.static_members[group_instance_id]

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """Kafka's `isStaticMemberFenced`: the instance id is a known static member's, but
        under another member id (a stale or duplicate instance)."""
        return (
            group_instance_id is not None
            and group_instance_id in self.static_members
            and self.static_members[group_instance_id] != member_id
        )

    def replace_static_member(
        self, old_member_id: str, new_member_id: str, group_instance_id: str
    ) -> MemberMetadata:
        """Kafka's `replaceGroupInstance`: the static member `old_member_id` continues as
        `new_member_id`, with everything else (assignment, protocols, timeouts, its place in
        join order, the leadership) unchanged. The caller answers whatever the old id had
        parked (FENCED_INSTANCE_ID) before this clears the member's rebalance flags."""
        member = self.members[old_member_id]
        self.members = {
            (new_member_id if mid == old_member_id else mid): m for mid, m in self.members.items()
        }
        member.member_id = new_member_id
        member.awaiting_join = False
        member.awaiting_sync = False
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def update_member(
        self, member: MemberMetadata, protocols: Sequence[Protocol], *, awaiting_join: bool
    ) -> None:
        """A known member's new protocols, and whether its JoinGroup is now parked."""
        member.supported_protocols = list(protocols)
        member.awaiting_join = awaiting_join

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined: keep it if it did, else promote any
        member that did. False when the group has no leader or no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join:
                self.leader_id = member_id
                return True
        return False

    @property
    def not_yet_rejoined_members(self) -> dict[str, MemberMetadata]:
        """The members whose JoinGroup is not parked in the current rebalance."""
        return {mid: m for mid, m in self.members.items() if not m.awaiting_join}

    @property
    def num_awaiting(self) -> int:
        return sum(1 for member in self.members.values() if member.awaiting_join)

    def all_members_joined(self) -> bool:
        """Kafka's `hasAllMembersJoined`: every member has rejoined and no member id handed
        out with MEMBER_ID_REQUIRED is still to come back."""
        return self.num_awaiting == len(self.members) and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among the members (0 without members)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- pending members (KIP-394) ---------------------------------------------------------------

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members and not self.has(member_id)

    def add_pending_member(self, member_id: str, deadline_ms: int) -> None:
        self.pending_members[member_id] = deadline_ms

    def remove_pending_member(self, member_id: str) -> None:
        self.pending_members.pop(member_id, None)

    # -- protocols -------------------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        members = iter(self.members.values())
        first = next(members, None)
        if first is None:
            return set()
        common = first.protocols
        for member in members:
            common &= member.protocols
        return common

    def select_protocol(self) -> str:
        """The group's protocol: each member votes for its preferred protocol among those every
        member supports, and the most votes win. Ties go to the protocol voted for first, in
        join order (Kafka leaves them to hash order)."""
        if not self.members:
            raise IllegalGroupStateError(
                f"cannot select a protocol for empty group {self.group_id}"
            )
        candidates = self.candidate_protocols()
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda protocol: votes[protocol])

    def supports_protocols(self, protocol_type: str, protocols: Collection[str]) -> bool:
        """Whether a member with this protocol type and these protocols may join: an Empty group
        takes any non-empty type with at least one protocol; otherwise the type must be the
        group's and one of the protocols must be supported by every member."""
        if self._state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        if not self.members:
            return bool(protocols)
        candidates = self.candidate_protocols()
        return any(protocol in candidates for protocol in protocols)

    # -- generations -----------------------------------------------------------------------------

    def init_next_generation(self, now_ms: int | None = None) -> None:
        """Start the next generation: with members, select the protocol and await the leader's
        assignment (CompletingRebalance); without, become Empty with no protocol."""
        if self.num_awaiting != len(self.members):
            raise IllegalGroupStateError(
                f"group {self.group_id}: members {sorted(self.not_yet_rejoined_members)} "
                "have not rejoined"
            )
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.subscribed_topics = subscribed_topics(self)

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        """Every member with its metadata for the chosen protocol: the leader's JoinGroup answer."""
        if self._state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise IllegalGroupStateError(
                f"cannot list member metadata of group {self.group_id} in {self._state.value}"
            )
        protocol = self._protocol()
        return tuple(
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(protocol))
            for m in self.members.values()
        )

    def _protocol(self) -> str:
        if self.protocol_name is None:
            raise IllegalGroupStateError(f"group {self.group_id} has no protocol")
        return self.protocol_name

    def summary(self) -> GroupSummary:
        """DescribeGroups: members with metadata and assignment only when Stable."""
        protocol_type = self.protocol_type or NO_PROTOCOL_TYPE
        if self._state is GroupState.STABLE:
            protocol = self._protocol()
            members = tuple(m.summary(protocol) for m in self.members.values())
            return GroupSummary(self._state.value, protocol_type, protocol, members)
        members = tuple(m.summary_no_metadata() for m in self.members.values())
        return GroupSummary(self._state.value, protocol_type, NO_PROTOCOL, members)

    def overview(self) -> GroupOverview:
        return GroupOverview(
            self.group_id, self.protocol_type or NO_PROTOCOL_TYPE, self._state.value
        )

    def snapshot(self, assignment: Mapping[str, bytes]) -> GroupMetadataSnapshot:
        """What the group's metadata record in `__consumer_offsets` holds, with `assignment`
        (every member must have one) as the members' assignments."""
        members = []
        if self.members:
            protocol = self._protocol()
            for member in self.members.values():
                if member.member_id not in assignment:
                    raise IllegalGroupStateError(
                        f"member {member.member_id} of group {self.group_id} has no assignment"
                    )
                members.append(
                    MemberSnapshot(
                        member_id=member.member_id,
                        group_instance_id=member.group_instance_id,
                        client_id=member.client_id,
                        client_host=member.client_host,
                        rebalance_timeout_ms=member.rebalance_timeout_ms,
                        session_timeout_ms=member.session_timeout_ms,
                        subscription=member.metadata(protocol),
                        assignment=assignment[member.member_id],
                    )
                )
        return GroupMetadataSnapshot(
            group_id=self.group_id,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type or NO_PROTOCOL_TYPE,
            protocol_name=self.protocol_name,
            leader_id=self.leader_id,
            current_state_timestamp_ms=self.current_state_timestamp_ms,
            members=tuple(members),
        )

    @classmethod
    def from_snapshot(cls, snapshot: GroupMetadataSnapshot) -> GroupMetadata:
        """A group as loaded from its metadata record: Stable with the stored members (each
        supporting only the group's protocol, with its stored assignment), Empty without."""
        state = GroupState.STABLE if snapshot.members else GroupState.EMPTY
        group = cls(snapshot.group_id, state, snapshot.current_state_timestamp_ms)
        group.generation_id = snapshot.generation_id
        group.protocol_type = snapshot.protocol_type or None
        group.protocol_name = snapshot.protocol_name
        group.leader_id = snapshot.leader_id
        if snapshot.members and snapshot.protocol_name is None:
            raise IllegalGroupStateError(f"group {snapshot.group_id} has members but no protocol")
        for stored in snapshot.members:
            member = MemberMetadata(
                member_id=stored.member_id,
                group_instance_id=stored.group_instance_id,
                client_id=stored.client_id,
                client_host=stored.client_host,
                rebalance_timeout_ms=stored.rebalance_timeout_ms,
                session_timeout_ms=stored.session_timeout_ms,
                protocol_type=snapshot.protocol_type,
                supported_protocols=[(snapshot.protocol_name or "", stored.subscription)],
                assignment=stored.assignment,
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        if group.leader_id is None or group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        group.subscribed_topics = subscribed_topics(group)
        return group

    # -- offsets ---------------------------------------------------------------------------------

    def initialize_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Offsets read back from `__consumer_offsets` (loading)."""
        self.offsets.update(offsets)

    def prepare_offset_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Offsets being appended: pending until the append completes or fails."""
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        """An offset's append completed: it becomes the committed offset, unless its pending
        commit was dropped meanwhile (the partition's offsets were removed)."""
        if tp in self.pending_offset_commits:
            self.offsets[tp] = offset
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        """An offset's append failed: drop it from the pending commits (a later pending commit
        of the same partition stays)."""
        if self.pending_offset_commits.get(tp) == offset:
            del self.pending_offset_commits[tp]

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self.offsets.get(tp)

    def has_pending_offset_commit(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def remove_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Forget these partitions' offsets (pending ones too); returns the committed ones."""
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            offset = self.offsets.pop(tp, None)
            if offset is not None:
                removed[tp] = offset
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))
