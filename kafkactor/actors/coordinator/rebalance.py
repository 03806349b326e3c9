"""The rebalance protocol of Kafka's GroupCoordinator, on one group: JoinGroup, SyncGroup,
Heartbeat and LeaveGroup, and what the DelayedJoin and DelayedHeartbeat do."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadata,
    GroupMetadataSnapshot,
)
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.member_metadata import (
    UNKNOWN_MEMBER_ID,
    MemberMetadata,
    Protocol,
    generate_member_id,
)
from kafkactor.actors.coordinator.results import (
    Effects,
    EffectsBuilder,
    GroupConfig,
    HeartbeatDeadline,
    HeartbeatOutcome,
    JoinDeadline,
    JoinGroupResult,
    JoinOutcome,
    LeaveMemberResult,
    LeaveOutcome,
    MemberIdentity,
    SyncGroupResult,
    SyncOutcome,
    group_append_error,
    schedule_heartbeat,
)
from kafkactor.actors.coordinator.static_membership import StaticMembership
from kafkactor.messages.errors import ErrorCode

_EMPTY = GroupState.EMPTY
_PREPARING = GroupState.PREPARING_REBALANCE
_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


@dataclass(frozen=True, slots=True)
class Joiner:
    """The member a JoinGroup describes (`group_instance_id` None: a dynamic member)."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[Protocol]
    group_instance_id: str | None = None


@dataclass(slots=True)
class _JoinTimer:
    """A group's outstanding DelayedJoin (Kafka's InitialDelayedJoin when `initial`)."""

    initial: bool
    delay_ms: int
    remaining_ms: int = 0


class Rebalancer:
    """Kafka's GroupCoordinator membership logic (doJoinGroup, doSyncGroup, the heartbeat and
    leave handling, prepareRebalance, onCompleteJoin, onExpireHeartbeat) applied to a group
    the coordinator has already found and validated. It keeps each group's outstanding
    DelayedJoin: whether it is the initial delay, and how much of that may still be added."""

    def __init__(self, config: GroupConfig, member_id_suffix: Callable[[], str]) -> None:
        self.config = config
        self._join_timers: dict[str, _JoinTimer] = {}
        self.static = StaticMembership()
        self._member_id_suffix = member_id_suffix

    # -- JoinGroup -------------------------------------------------------------------------------

    def join(
        self, group: GroupMetadata, joiner: Joiner, now_ms: int, *, require_known_member_id: bool
    ) -> JoinOutcome:
        b = EffectsBuilder(group.group_id)
        member_id = joiner.member_id
        result: JoinGroupResult | None
        if group.state is _DEAD:
            # the group just left this coordinator: the client finds the new one and rejoins
            result = JoinGroupResult(member_id=member_id, error=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif not group.supports_protocols(joiner.protocol_type, {n for n, _ in joiner.protocols}):
            result = JoinGroupResult(
                member_id=member_id, error=ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            )
        elif member_id == UNKNOWN_MEMBER_ID:
            instance = joiner.group_instance_id
            member_id = generate_member_id(joiner.client_id, instance, self._member_id_suffix)
            if instance is not None and group.has_static_member(instance):
                if self.static.rejoin(
                    group,
                    joiner.protocols,
                    instance=instance,
                    new_member_id=member_id,
                    now_ms=now_ms,
                    b=b,
                ):
                    self._prepare_rebalance(group, now_ms, b)
                result = None
            else:
                # KIP-394's round trip is for dynamic members only (KafkaApis asks for it
                # only without a group instance id)
                require_known = require_known_member_id and instance is None
                result = self._join_new(
                    group, joiner, member_id, now_ms, b, require_known=require_known
                )
        else:
            result = self._join_known(group, joiner, now_ms, b)
        if group.state is _PREPARING:
            b.check_join = True
        return JoinOutcome(member_id, result, b.build())

    def _join_new(
        self,
        group: GroupMetadata,
        joiner: Joiner,
        member_id: str,
        now_ms: int,
        b: EffectsBuilder,
        *,
        require_known: bool,
    ) -> JoinGroupResult | None:
        if require_known:
            # KIP-394: the id is pending until the member rejoins with it, within its session
            deadline = now_ms + joiner.session_timeout_ms
            group.add_pending_member(member_id, deadline)
            b.heartbeat(HeartbeatDeadline(group.group_id, member_id, deadline, pending=True))
            return JoinGroupResult(member_id=member_id, error=ErrorCode.MEMBER_ID_REQUIRED)
        self._add_member_and_rebalance(group, joiner, member_id, now_ms, b)
        return None

    def _join_known(  # noqa: PLR0911 - one flat chain of checks, as Kafka's doJoinGroup
        self, group: GroupMetadata, joiner: Joiner, now_ms: int, b: EffectsBuilder
    ) -> JoinGroupResult | None:
        member_id = joiner.member_id
        instance = joiner.group_instance_id
        if group.is_pending_member(member_id):
            if instance is not None:
                # a pending id is never a static member's: Kafka fails such a join with an
                # IllegalStateException, which its client sees as UNKNOWN_SERVER_ERROR
                return JoinGroupResult(member_id=member_id, error=ErrorCode.UNKNOWN_SERVER_ERROR)
            self._add_member_and_rebalance(group, joiner, member_id, now_ms, b)
            return None
        if group.is_static_member_fenced(member_id, instance):
            # the instance id has moved on to another member id: this is a stale instance
            return JoinGroupResult(member_id=member_id, error=ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        unknown_instance = instance is not None and not group.has_static_member(instance)
        if member is None or unknown_instance or group.state is _EMPTY:
            return JoinGroupResult(member_id=member_id, error=ErrorCode.UNKNOWN_MEMBER_ID)
        unchanged = member.matches(joiner.protocols)
        if group.state is _COMPLETING and unchanged:
            return self._join_result(group, member_id)  # it missed its answer: send it again
        if group.state is _STABLE and unchanged and not group.is_leader(member_id):
            return self._join_result(group, member_id)
        # preparing a rebalance, changed protocols, or the leader (which rejoins to rebalance
        # for changes its metadata does not show, e.g. new partitions): park it and rebalance
        group.update_member(member, joiner.protocols, awaiting_join=True)
        self._maybe_prepare_rebalance(group, now_ms, b)
        return None

    def _join_result(self, group: GroupMetadata, member_id: str) -> JoinGroupResult:
        """The current generation's JoinGroup answer; only the leader's lists the members."""
        return JoinGroupResult(
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=group.current_member_metadata() if group.is_leader(member_id) else (),
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, joiner: Joiner, member_id: str, now_ms: int, b: EffectsBuilder
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=joiner.group_instance_id,
            client_id=joiner.client_id,
            client_host=joiner.client_host,
            rebalance_timeout_ms=joiner.rebalance_timeout_ms,
            session_timeout_ms=joiner.session_timeout_ms,
            protocol_type=joiner.protocol_type,
            supported_protocols=joiner.protocols,
            is_new=True,
        )
        if group.state is _PREPARING and group.generation_id == 0:
            group.new_member_added = True  # the initial rebalance delay may be extended
        group.add(member, awaiting_join=True)
        # a new member cannot heartbeat before its JoinGroup is answered, and a client that
        # gave up and retried would leave it behind: it has the new-member join timeout
        schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms, now_ms, b)
        group.remove_pending_member(member_id)
        self._maybe_prepare_rebalance(group, now_ms, b)

    # -- the rebalance ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance(
        self, group: GroupMetadata, now_ms: int, b: EffectsBuilder
    ) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, now_ms, b)

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int, b: EffectsBuilder) -> None:
        if group.state is _COMPLETING:
            self._reset_and_propagate_error(group, ErrorCode.REBALANCE_IN_PROGRESS, now_ms, b)
        if group.state is _EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            timer = _JoinTimer(True, delay, max(group.rebalance_timeout_ms - delay, 0))
        else:
            timer = _JoinTimer(False, group.rebalance_timeout_ms)
        group.transition_to(_PREPARING, now_ms)
        self._watch_join(group, timer, now_ms, b)

    def _watch_join(
        self, group: GroupMetadata, timer: _JoinTimer, now_ms: int, b: EffectsBuilder
    ) -> None:
        self._join_timers[group.group_id] = timer
        b.join_deadline = JoinDeadline(group.group_id, now_ms + timer.delay_ms, timer.initial)

    def try_complete_join(
        self, group_id: str, group: GroupMetadata | None, now_ms: int
    ) -> Effects | None:
        timer = self._join_timers.get(group_id)
        if timer is None or group is None or group.state is _DEAD:
            self._join_timers.pop(group_id, None)
            return Effects(group_id=group_id)  # nothing left to complete
        if timer.initial or not group.all_members_joined():
            return None
        del self._join_timers[group_id]
        b = EffectsBuilder(group_id)
        self._complete_join(group, now_ms, b)
        return b.build()

    def on_join_expired(self, group_id: str, group: GroupMetadata | None, now_ms: int) -> Effects:
        timer = self._join_timers.pop(group_id, None)
        b = EffectsBuilder(group_id)
        if timer is None or group is None:
            return b.build()
        if timer.initial and group.new_member_added and timer.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, timer.remaining_ms)
            remaining = max(timer.remaining_ms - timer.delay_ms, 0)
            self._watch_join(group, _JoinTimer(True, delay, remaining), now_ms, b)
        else:
            self._complete_join(group, now_ms, b)
        return b.build()

    def forget_join(self, group_id: str) -> bool:
        """Drop the group's DelayedJoin (the group left this coordinator); True if it had one."""
        return self._join_timers.pop(group_id, None) is not None

    def _complete_join(self, group: GroupMetadata, now_ms: int, b: EffectsBuilder) -> None:
        """Kafka's onCompleteJoin: drop the members that did not rejoin and start the next
        generation, answering every parked JoinGroup."""
        for member_id, member in list(group.not_yet_rejoined_members.items()):
            if not member.is_static_member:
                self._remove_heartbeat_for_leaving_member(member, b)
                group.remove(member_id)
        if group.state is _DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined (only static members can stay without rejoining): wait again
            self._watch_join(group, _JoinTimer(False, group.rebalance_timeout_ms), now_ms, b)
            return
        group.init_next_generation(now_ms)
        if group.state is _EMPTY:
            b.writes.append(group.snapshot({}))
            return
        for member in group.members.values():
            if member.awaiting_join:
                member.awaiting_join = False
                b.joins[member.member_id] = self._join_result(group, member.member_id)
            schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)
            member.is_new = False

    def _reset_and_propagate_error(
        self, group: GroupMetadata, error: ErrorCode, now_ms: int, b: EffectsBuilder
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now_ms, b)

    def _propagate_assignment(
        self, group: GroupMetadata, error: ErrorCode, now_ms: int, b: EffectsBuilder
    ) -> None:
        """Answer every parked SyncGroup, and give each member answered a fresh session."""
        ok = error is ErrorCode.NONE
        for member in group.members.values():
            if member.awaiting_sync:
                member.awaiting_sync = False
                b.syncs[member.member_id] = SyncGroupResult(
                    error=error,
                    assignment=member.assignment,
                    protocol_type=group.protocol_type if ok else None,
                    protocol_name=group.protocol_name if ok else None,
                )
                schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)

    # -- SyncGroup -------------------------------------------------------------------------------

    def sync(  # noqa: PLR0911 - one flat chain of checks, as Kafka's doSyncGroup
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        assignments: Mapping[str, bytes],
        now_ms: int,
        *,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None = None,
    ) -> SyncOutcome:
        def answer(error: ErrorCode) -> SyncOutcome:
            return SyncOutcome(SyncGroupResult(error=error), Effects(group_id=group.group_id))

        if group.state is _DEAD:
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return answer(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.state is _EMPTY:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is _PREPARING:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        b = EffectsBuilder(group.group_id)
        if group.state is _COMPLETING:
            member.awaiting_sync = True
            if group.is_leader(member_id):
                full = {mid: assignments.get(mid, b"") for mid in group.members}
                b.writes.append(group.snapshot(full))
            return SyncOutcome(None, b.build())
        # Stable: the member's current assignment
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)
        result = SyncGroupResult(
            assignment=member.assignment,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
        )
        return SyncOutcome(result, b.build())

    def complete_group_write(
        self,
        group: GroupMetadata | None,
        snapshot: GroupMetadataSnapshot,
        error: ErrorCode,
        now_ms: int,
    ) -> Effects:
        b = EffectsBuilder(snapshot.group_id)
        rejoin = self.static.take(snapshot)
        if rejoin is not None:
            if group is not None:
                self.static.complete(group, rejoin, error, now_ms, b)
            return b.build()
        if group is None or group.state is not _COMPLETING:
            return b.build()
        if group.generation_id != snapshot.generation_id:
            return b.build()
        if error is not ErrorCode.NONE:
            self._reset_and_propagate_error(group, group_append_error(error), now_ms, b)
            self._maybe_prepare_rebalance(group, now_ms, b)
            return b.build()
        stored = {member.member_id: member.assignment for member in snapshot.members}
        for member in group.members.values():
            member.assignment = stored.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE, now_ms, b)
        group.transition_to(_STABLE, now_ms)
        return b.build()

    # -- heartbeats ------------------------------------------------------------------------------

    def heartbeat(  # noqa: PLR0911 - one flat chain of checks, as Kafka's handleHeartbeat
        self,
        group: GroupMetadata,
        member_id: str,
        generation_id: int,
        now_ms: int,
        group_instance_id: str | None = None,
    ) -> HeartbeatOutcome:
        if group.state is _DEAD:
            return HeartbeatOutcome(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return HeartbeatOutcome(ErrorCode.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None:
            return HeartbeatOutcome(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return HeartbeatOutcome(ErrorCode.ILLEGAL_GENERATION)
        if group.state is _EMPTY:
            return HeartbeatOutcome(ErrorCode.UNKNOWN_MEMBER_ID)
        b = EffectsBuilder(group.group_id)
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)
        if group.state is _PREPARING:
            return HeartbeatOutcome(ErrorCode.REBALANCE_IN_PROGRESS, b.build())
        return HeartbeatOutcome(ErrorCode.NONE, b.build())

    def on_heartbeat_expired(
        self, group: GroupMetadata, member_id: str, deadline_ms: int, now_ms: int, pending: bool
    ) -> Effects:
        b = EffectsBuilder(group.group_id)
        if group.state is _DEAD:
            return b.build()
        if pending:
            if group.pending_members.get(member_id) == deadline_ms and not group.has(member_id):
                group.remove_pending_member(member_id)
                b.check_join = group.state is _PREPARING
            return b.build()
        member = group.members.get(member_id)
        if member is None or member.heartbeat_deadline_ms != deadline_ms or member.is_leaving:
            return b.build()
        member.heartbeat_deadline_ms = None
        if not member.has_satisfied_heartbeat:
            self._remove_member_and_update_group(group, member, now_ms, b)
        return b.build()

    def _remove_heartbeat_for_leaving_member(
        self, member: MemberMetadata, b: EffectsBuilder
    ) -> None:
        member.is_leaving = True
        member.heartbeat_deadline_ms = None
        b.cancel(member.member_id)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int, b: EffectsBuilder
    ) -> None:
        member_id = member.member_id
        if member.awaiting_join:
            # so that a client still waiting retries its JoinGroup from scratch
            member.awaiting_join = False
            b.joins[member_id] = JoinGroupResult(
                member_id=UNKNOWN_MEMBER_ID, error=ErrorCode.UNKNOWN_MEMBER_ID
            )
        if member.awaiting_sync:
            # kafkactor's own: Kafka drops the parked SyncGroup of a removed member unanswered
            member.awaiting_sync = False
            b.syncs[member_id] = SyncGroupResult(error=ErrorCode.UNKNOWN_MEMBER_ID)
        group.remove(member_id)
        if group.is_in(_STABLE, _COMPLETING):
            self._maybe_prepare_rebalance(group, now_ms, b)
        elif group.state is _PREPARING:
            b.check_join = True

    # -- LeaveGroup ------------------------------------------------------------------------------

    def leave(
        self, group: GroupMetadata, members: Sequence[MemberIdentity], now_ms: int
    ) -> LeaveOutcome:
        """Kafka's handleLeaveGroup, member by member: a static member may be named by its
        group instance id alone (member id ""); naming it with a member id other than its
        current one is FENCED_INSTANCE_ID."""
        if group.state is _DEAD:
            return LeaveOutcome(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, (), Effects(group_id=group.group_id)
            )
        b = EffectsBuilder(group.group_id)
        results = [
            LeaveMemberResult(
                m.member_id, m.group_instance_id, self._leave_one(group, m, now_ms, b)
            )
            for m in members
        ]
        return LeaveOutcome(ErrorCode.NONE, tuple(results), b.build())

    def _leave_one(
        self, group: GroupMetadata, leaving: MemberIdentity, now_ms: int, b: EffectsBuilder
    ) -> ErrorCode:
        member_id, instance = leaving.member_id, leaving.group_instance_id
        if member_id != UNKNOWN_MEMBER_ID and group.is_static_member_fenced(member_id, instance):
            return ErrorCode.FENCED_INSTANCE_ID
        if group.is_pending_member(member_id):
            if instance is not None:  # Kafka: IllegalStateException (no static id is pending)
                return ErrorCode.UNKNOWN_SERVER_ERROR
            group.remove_pending_member(member_id)
            b.cancel(member_id)
            b.check_join = b.check_join or group.state is _PREPARING
            return ErrorCode.NONE
        if instance is not None and group.has_static_member(instance):
            member = group.get(group.static_member_id(instance))
        else:
            found = group.members.get(member_id)
            if found is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            member = found
        self._remove_heartbeat_for_leaving_member(member, b)
        self._remove_member_and_update_group(group, member, now_ms, b)
        return ErrorCode.NONE

    # -- unloading -------------------------------------------------------------------------------

    def unload(self, group: GroupMetadata, now_ms: int) -> Effects:
        """Kafka's onGroupUnloaded: the group is Dead here; its parked requests answer
        NOT_COORDINATOR and its DelayedJoin and DelayedHeartbeats complete."""
        b = EffectsBuilder(group.group_id)
        group.transition_to(_DEAD, now_ms)
        b.check_join = self.forget_join(group.group_id)
        self.static.forget(group.group_id)
        for member in group.members.values():
            if member.awaiting_join:
                member.awaiting_join = False
                b.joins[member.member_id] = JoinGroupResult(
                    member_id=member.member_id, error=ErrorCode.NOT_COORDINATOR
                )
            if member.awaiting_sync:
                member.awaiting_sync = False
                b.syncs[member.member_id] = SyncGroupResult(error=ErrorCode.NOT_COORDINATOR)
            b.cancel(member.member_id)
        for member_id in group.pending_members:
            b.cancel(member_id)
        return b.build()
