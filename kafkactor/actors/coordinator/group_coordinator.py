"""The request handling of Kafka's GroupCoordinator (classic protocol, as in Kafka 2.8), as pure
methods: no threads, no clock, no purgatory and no log of its own."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kafkactor.actors.coordinator.group_metadata import (
    DEAD_GROUP,
    EMPTY_GROUP,
    GroupMetadata,
    GroupMetadataSnapshot,
    GroupOverview,
    GroupSummary,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.group_offsets import (
    commit_offsets,
    complete_offset_commit,
    fetch_offsets,
    refused_commit,
)
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.member_metadata import (
    UNKNOWN_MEMBER_ID,
    Protocol,
    random_suffix,
)
from kafkactor.actors.coordinator.offset_delete import OffsetDeleteOutcome, delete_offsets
from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.rebalance import Joiner, Rebalancer
from kafkactor.actors.coordinator.results import (
    CommitOutcome,
    DeleteGroupsOutcome,
    Effects,
    EffectsBuilder,
    GroupConfig,
    GroupTombstones,
    HeartbeatOutcome,
    JoinGroupResult,
    JoinOutcome,
    LeaveMemberResult,
    LeaveOutcome,
    MemberIdentity,
    OffsetCommitWrite,
    OffsetFetchPartition,
    SyncGroupResult,
    SyncOutcome,
    schedule_heartbeat,
)
from kafkactor.actors.coordinator.txn_offsets import TxnOffsetCommits
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode


class GroupCoordinatorCore:
    """Kafka's `GroupCoordinator` (with the group and offset cache of its
    GroupMetadataManager) as pure logic: the groups this broker coordinates, the JoinGroup /
    SyncGroup / Heartbeat / LeaveGroup rebalance protocol, and OffsetCommit / OffsetFetch /
    OffsetDelete / DescribeGroups / ListGroups / DeleteGroups.

    It has no clock (every handler takes `now_ms`), no purgatory and no log. What Kafka does
    through those, the results name as `Effects` for an actor shell to carry out: parked
    requests answered later, DelayedJoin deadlines for the "Rebalance" purgatory (completion
    check `try_complete_join`, expiry `on_join_expired`), DelayedHeartbeat deadlines for the
    "Heartbeat" purgatory (`on_heartbeat_expired`), and records to append to
    `__consumer_offsets` (then `complete_group_write` / `complete_offset_write`).

    A group lives in partition `partition_for(group_id)` of `__consumer_offsets`. Requests
    for a group of a partition not in `owned_partitions` answer NOT_COORDINATOR, and
    COORDINATOR_LOAD_IN_PROGRESS between `begin_loading` and `finish_loading`.

    With `owned_partitions` given, the core also tells "not mine" from "not told yet": a
    partition this broker has heard nothing of (no LeaderAndIsr and no metadata naming it,
    `known_partitions`) answers COORDINATOR_LOAD_IN_PROGRESS, not NOT_COORDINATOR. A client
    only comes here because some broker's metadata named this one as the partition's leader,
    and the controller's LeaderAndIsr to this broker may still be on its way (docs/coordinator.md,
    "The load window").
    """

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        owned_partitions: Iterable[int] | None = None,
        member_id_suffix: Callable[[], str] = random_suffix,
    ) -> None:
        self.config = config if config is not None else GroupConfig()
        self.groups: dict[str, GroupMetadata] = {}
        self.active = True  # False: every request answers COORDINATOR_NOT_AVAILABLE
        self.owned_partitions: set[int] = (
            set(range(self.config.offsets_topic_partitions))
            if owned_partitions is None
            else set(owned_partitions)
        )
        self.loading_partitions: set[int] = set()
        # the partitions this broker was told of (None: every one, when all are owned)
        self.known_partitions: set[int] | None = None if owned_partitions is None else set()
        self.rebalancer = Rebalancer(self.config, member_id_suffix)
        self.txn_offsets = TxnOffsetCommits()  # pending transactional offsets (txn_offset_commit)

    def partition_for(self, group_id: str) -> int:
        """The `__consumer_offsets` partition of a group."""
        return partition_for(group_id, self.config.offsets_topic_partitions)

    def group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def _status_error(self, group_id: str, *, empty_id_allowed: bool = False) -> ErrorCode | None:
        """Kafka's validateGroupStatus. The offset APIs, DescribeGroups and DeleteGroups accept
        the empty group id; the membership APIs do not."""
        if not group_id and not empty_id_allowed:
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        partition = self.partition_for(group_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            known = self.known_partitions
            if known is not None and partition not in known:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # not told yet: ask again
            return ErrorCode.NOT_COORDINATOR
        return None

    # -- the rebalance protocol ------------------------------------------------------------------

    def handle_join_group(  # noqa: PLR0917 - Kafka's handleJoinGroup, field by field
        self,
        group_id: str,
        member_id: str,
        protocol_type: str,
        protocols: Sequence[Protocol],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        now_ms: int,
        *,
        require_known_member_id: bool,
        group_instance_id: str | None = None,
    ) -> JoinOutcome:
        """A JoinGroup. Member id "" is a new member: it gets an id (client id + "-" + UUID)
        and, with `require_known_member_id` (JoinGroup v4+, KIP-394), MEMBER_ID_REQUIRED to
        rejoin with it. Otherwise the join is parked until the rebalance answers it, except
        for a follower of a settled group rejoining with unchanged protocols.

        With `group_instance_id` (JoinGroup v5+, KIP-345) the member is static: its id is the
        instance id + "-" + UUID, it never gets MEMBER_ID_REQUIRED, and a known instance
        joining with member id "" replaces its old member id, without a rebalance when the
        group is Stable and the chosen protocol stays (`StaticMembership.rejoin`). A join
        naming the instance with a member id other than its current one answers
        FENCED_INSTANCE_ID."""

        def answer(error: ErrorCode) -> JoinOutcome:
            result = JoinGroupResult(member_id=member_id, error=error)
            return JoinOutcome(member_id, result, Effects(group_id=group_id))

        error = self._status_error(group_id)
        if error is not None:
            return answer(error)
        config = self.config
        if not config.min_session_timeout_ms <= session_timeout_ms <= config.max_session_timeout_ms:
            return answer(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(group_id)
        if group is None:
            # a group is created by a new member's join; a known member of none is unknown
            if member_id != UNKNOWN_MEMBER_ID:
                return answer(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
        joiner = Joiner(
            member_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            list(protocols),
            group_instance_id,
        )
        return self.rebalancer.join(
            group, joiner, now_ms, require_known_member_id=require_known_member_id
        )

    def try_complete_join(self, group_id: str, now_ms: int) -> Effects | None:
        """The DelayedJoin's completion check (Kafka's tryCompleteJoin). None while a known
        member has not rejoined, a member id handed out has not come back, or the initial
        delay runs. Otherwise the DelayedJoin is complete and the Effects (possibly empty)
        answer every parked JoinGroup of the new generation."""
        return self.rebalancer.try_complete_join(group_id, self.groups.get(group_id), now_ms)

    def on_join_expired(self, group_id: str, now_ms: int) -> Effects:
        """The DelayedJoin's deadline passed. An initial delay during which new members joined
        is extended (by at most the configured delay, within the rebalance timeout);
        otherwise the members that did not rejoin are dropped and the join phase completes."""
        return self.rebalancer.on_join_expired(group_id, self.groups.get(group_id), now_ms)

    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        now_ms: int,
        *,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        group_instance_id: str | None = None,
    ) -> SyncOutcome:
        """A SyncGroup. In CompletingRebalance it is parked; the leader's (`assignments` by
        member id, an empty one for a member it left out) also names the group metadata to
        append, and `complete_group_write` answers every parked SyncGroup. In Stable it
        answers the member's current assignment."""
        error = self._status_error(group_id)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            error = ErrorCode.REBALANCE_IN_PROGRESS  # the rebalance must start over
        group = self.groups.get(group_id)
        if error is None and group is None:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is not None:
            return SyncOutcome(SyncGroupResult(error=error), Effects(group_id=group_id))
        assert group is not None
        return self.rebalancer.sync(
            group,
            generation_id,
            member_id,
            assignments,
            now_ms,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            group_instance_id=group_instance_id,
        )

    def complete_group_write(
        self, snapshot: GroupMetadataSnapshot, error: ErrorCode, now_ms: int
    ) -> Effects:
        """The append of `snapshot` (from `Effects.group_writes`) completed with `error`. For
        a leader's assignment, if the group still completes that generation: on success the
        assignments go out and the group is Stable; on failure every parked SyncGroup gets
        the error and the group rebalances. For a static member's new id (a rejoin without
        rebalance): on success its JoinGroup is answered; on failure the instance gets its
        old member id back and the JoinGroup the error. Otherwise nothing happens."""
        group = self.groups.get(snapshot.group_id)
        return self.rebalancer.complete_group_write(group, snapshot, error, now_ms)

    def handle_heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        now_ms: int,
        *,
        group_instance_id: str | None = None,
    ) -> HeartbeatOutcome:
        """A Heartbeat: a fresh session for a known member of the current generation, answered
        REBALANCE_IN_PROGRESS while the group prepares a rebalance (the member should rejoin);
        FENCED_INSTANCE_ID for a static instance whose member id has been replaced."""
        error = self._status_error(group_id)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return HeartbeatOutcome(ErrorCode.NONE)  # still loading: answer blindly
        if error is not None:
            return HeartbeatOutcome(error)
        group = self.groups.get(group_id)
        if group is None:
            return HeartbeatOutcome(ErrorCode.UNKNOWN_MEMBER_ID)
        return self.rebalancer.heartbeat(group, member_id, generation_id, now_ms, group_instance_id)

    def on_heartbeat_expired(
        self, group_id: str, member_id: str, deadline_ms: int, now_ms: int, *, pending: bool = False
    ) -> Effects:
        """A DelayedHeartbeat fell due; ignored unless `deadline_ms` is the member's current
        one. A pending member id is forgotten. A member whose session ran out (or a new
        member whose join timeout did) leaves, and the group rebalances (or, while preparing
        a rebalance, may complete its join phase). A member waiting in the rebalance stays."""
        group = self.groups.get(group_id)
        if group is None:
            return Effects(group_id=group_id)
        return self.rebalancer.on_heartbeat_expired(group, member_id, deadline_ms, now_ms, pending)

    def handle_leave_group(
        self, group_id: str, members: Sequence[str | MemberIdentity], now_ms: int
    ) -> LeaveOutcome:
        """A LeaveGroup of one member (v0-v2) or several (v3+), each named by member id or
        (static members) by `MemberIdentity` with its group instance id: each leaves at once
        and the group rebalances without it (the last one leaving makes the group Empty)."""
        identities = [m if isinstance(m, MemberIdentity) else MemberIdentity(m) for m in members]
        error = self._status_error(group_id)
        if error is not None:
            return LeaveOutcome(error, (), Effects(group_id=group_id))
        group = self.groups.get(group_id)
        if group is None:
            results = tuple(
                LeaveMemberResult(m.member_id, m.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
                for m in identities
            )
            return LeaveOutcome(ErrorCode.NONE, results, Effects(group_id=group_id))
        return self.rebalancer.leave(group, identities, now_ms)

    # -- offsets ---------------------------------------------------------------------------------

    def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        now_ms: int,
        *,
        group_instance_id: str | None = None,
    ) -> CommitOutcome:
        """An OffsetCommit. A member commits in the current generation (which also renews its
        session), refused while the group awaits its assignment; generation -1 with member ""
        is a consumer outside group management, accepted while the group is Empty. A static
        instance whose member id has been replaced answers FENCED_INSTANCE_ID (OffsetCommit
        v7+). Accepted offsets stay pending until `complete_offset_write`."""

        error = self._status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return refused_commit(group_id, offsets, error)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:  # a generation this group never had
                return refused_commit(group_id, offsets, ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
        return commit_offsets(
            group,
            member_id,
            generation_id,
            offsets,
            now_ms,
            metadata_max_bytes=self.config.offset_metadata_max_bytes,
            group_instance_id=group_instance_id,
        )

    def complete_offset_write(
        self, write: OffsetCommitWrite, error: ErrorCode = ErrorCode.NONE, log_offset: int = -1
    ) -> dict[TopicPartition, ErrorCode]:
        """The append of `write` completed with `error` (at `log_offset`, -1: not known): its
        offsets are committed (or dropped from the pending ones). Returns the OffsetCommit's
        answer, partition by partition."""
        if error is ErrorCode.NONE:
            for tp in write.offsets:
                self.txn_offsets.record_commit(write.group_id, tp, log_offset)
        return complete_offset_commit(self.groups.get(write.group_id), write, error)

    def handle_fetch_offsets(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchPartition]]:
        """An OffsetFetch of `partitions` (None: every partition with a committed offset), in
        any group state. A partition without one answers offset -1; with `require_stable`
        (KIP-447) one with a commit in flight, or a transaction's offset pending (even for a
        group deleted meanwhile), answers UNSTABLE_OFFSET_COMMIT."""
        error = self._status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            found = {tp: OffsetFetchPartition() for tp in partitions or ()}
        else:
            found = fetch_offsets(group, partitions, require_stable=require_stable)
        for tp in [tp for tp in found if require_stable]:  # a transaction's offset pending
            if self.txn_offsets.has_pending(group_id, tp):
                found[tp] = OffsetFetchPartition(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        return ErrorCode.NONE, found

    def handle_delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], now_ms: int
    ) -> OffsetDeleteOutcome:
        """OffsetDelete (KIP-496): the offsets of an Empty group, or of topics a consumer
        group's members do not subscribe to, go (`offset_delete.delete_offsets`); the
        outcome's tombstones are to be appended. The group's status is checked first, the
        empty group id included (INVALID_GROUP_ID: OffsetDelete is not an offset API that
        accepts it in Kafka)."""
        error = self._status_error(group_id)
        if error is not None:
            return OffsetDeleteOutcome(error)
        pending = self.txn_offsets.has_any(group_id)
        outcome = delete_offsets(self.groups.get(group_id), partitions, now_ms, txn_pending=pending)
        if outcome.group_removed:
            del self.groups[group_id]
            self.txn_offsets.positions.pop(group_id, None)
        return outcome

    # -- DescribeGroups, ListGroups, DeleteGroups ------------------------------------------------

    def handle_describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """DescribeGroups for one group: members with their metadata and assignment when
        Stable; an unknown group is described as Dead."""
        error = self._status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return error, EMPTY_GROUP
        group = self.groups.get(group_id)
        return ErrorCode.NONE, DEAD_GROUP if group is None else group.summary()

    def handle_list_groups(
        self, states: Collection[str] = ()
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        """Every group here (those in `states` when given, KIP-518), answered
        COORDINATOR_LOAD_IN_PROGRESS with the groups known so far while a partition loads."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading_partitions else ErrorCode.NONE
        )
        groups = [g for g in self.groups.values() if not states or g.state.value in states]
        return error, [group.overview() for group in groups]

    def handle_delete_groups(self, group_ids: Iterable[str], now_ms: int) -> DeleteGroupsOutcome:
        """DeleteGroups: an Empty group goes (Dead), with its offsets, which the outcome's
        tombstones name, and its metadata unless it never had a generation (Kafka's
        cleanupGroupMetadata: a group that only stored offsets has no metadata record); one
        with members answers NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND."""
        errors: dict[str, ErrorCode] = {}
        tombstones = []
        for group_id in group_ids:
            error = self._status_error(group_id, empty_id_allowed=True)
            group = self.groups.get(group_id)
            if error is not None:
                errors[group_id] = error
            elif group is None or group.state is GroupState.DEAD:
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                group.transition_to(GroupState.DEAD, now_ms)
                removed = group.remove_all_offsets()
                del self.groups[group_id]
                self.txn_offsets.positions.pop(group_id, None)  # pending offsets stay
                metadata = group.generation_id > 0
                if removed or metadata:
                    tombstones.append(GroupTombstones(group_id, tuple(removed), metadata))
                errors[group_id] = ErrorCode.NONE
        return DeleteGroupsOutcome(errors, tuple(tombstones))

    # -- loading and unloading (leadership of `__consumer_offsets` partitions) -------------------

    def learn_partitions(self, partitions: Iterable[int]) -> None:
        """This broker has heard of these `__consumer_offsets` partitions (its metadata shows
        them, or the controller told it of their leadership): from now on, one it does not own
        answers NOT_COORDINATOR."""
        if self.known_partitions is not None:
            self.known_partitions.update(partitions)

    def begin_loading(self, partition: int) -> None:
        """This broker now leads `partition` of `__consumer_offsets` and reads it back: its
        groups answer COORDINATOR_LOAD_IN_PROGRESS until `finish_loading`."""
        self.learn_partitions((partition,))
        self.loading_partitions.add(partition)

    def finish_loading(self, partition: int) -> None:
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)

    def load_group(
        self,
        group_id: str,
        snapshot: GroupMetadataSnapshot | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        now_ms: int,
    ) -> Effects:
        """A group read back from `__consumer_offsets`: its last metadata record (None for a
        group that only committed offsets) and its committed offsets. Its members get fresh
        sessions. A group already known here is kept as it is (Kafka's addGroup)."""
        b = EffectsBuilder(group_id)
        if group_id in self.groups:
            return b.build()
        if snapshot is not None and snapshot.group_id != group_id:
            raise ValueError(f"the snapshot of group {snapshot.group_id} loaded as {group_id}")
        group = (
            GroupMetadata(group_id, GroupState.EMPTY, now_ms)
            if snapshot is None
            else GroupMetadata.from_snapshot(snapshot)
        )
        group.initialize_offsets(offsets)
        self.groups[group_id] = group
        for member in group.members.values():
            schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)
        return b.build()

    def resign(self, partition: int, now_ms: int) -> list[Effects]:
        """This broker no longer leads `partition` of `__consumer_offsets`: its groups go, and
        their parked JoinGroups and SyncGroups answer NOT_COORDINATOR so that the clients
        look for the new coordinator."""
        self.learn_partitions((partition,))
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        unloaded = []
        self.txn_offsets.unload(lambda group_id: self.partition_for(group_id) == partition)
        for group_id in [g for g in self.groups if self.partition_for(g) == partition]:
            unloaded.append(self.rebalancer.unload(self.groups.pop(group_id), now_ms))
        return unloaded
