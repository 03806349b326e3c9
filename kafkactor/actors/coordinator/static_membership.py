"""Static membership (KIP-345) in Kafka's GroupCoordinator, on one group: a known group instance
id that joins again with member id "" (the instance restarted) takes its old member id's place,
without a rebalance when the group is Stable and its chosen protocol stays."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadata,
    GroupMetadataSnapshot,
)
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.member_metadata import UNKNOWN_MEMBER_ID, Protocol
from kafkactor.actors.coordinator.results import (
    EffectsBuilder,
    JoinGroupResult,
    SyncGroupResult,
    group_append_error,
    schedule_heartbeat,
)
from kafkactor.messages.errors import ErrorCode

_COMPLETING = GroupState.COMPLETING_REBALANCE
_STABLE = GroupState.STABLE
_DEAD = GroupState.DEAD


@dataclass(frozen=True, slots=True)
class StaticRejoin:
    """A static member that rejoined a Stable group under a new member id, waiting for the
    group metadata naming that id to be appended (Kafka's storeGroup callback in
    updateStaticMemberAndRebalance): what to answer it, and what to restore if the append
    fails."""

    snapshot: GroupMetadataSnapshot
    group_instance_id: str
    old_member_id: str
    new_member_id: str
    old_protocols: tuple[Protocol, ...]
    leader_id: str | None


class StaticMembership:
    """Kafka 2.8's updateStaticMemberAndRebalance and the completion of its append. It keeps
    each group's rejoins waiting for their group metadata to be appended."""

    def __init__(self) -> None:
        self._static_rejoins: dict[str, list[StaticRejoin]] = {}  # by group id

    def rejoin(
        self,
        group: GroupMetadata,
        protocols: Sequence[Protocol],
        *,
        instance: str,
        new_member_id: str,
        now_ms: int,
        b: EffectsBuilder,
    ) -> bool:
        """Kafka 2.8's updateStaticMemberAndRebalance: a known group instance id joins with
        member id "" (the instance restarted). It takes over its old member id's place under
        `new_member_id`: the old id's parked requests answer FENCED_INSTANCE_ID and its later
        ones too. In a Stable group whose selected protocol the new protocols do not change,
        there is no rebalance: the group metadata naming the new id is appended, then the
        join is answered with the current generation and the current leader (the old leader
        id when the instance led, so that it does not assign again) and the member syncs to
        get the old id's assignment. Otherwise the group rebalances (CompletingRebalance:
        the leader may have assigned to the old id) or the rebalance under way takes it.
        True when the caller must prepare that rebalance."""
        old_member_id = group.static_member_id(instance)
        leader_id = group.leader_id
        old = group.get(old_member_id)
        if old.awaiting_join:
            b.joins[old_member_id] = JoinGroupResult(
                member_id=old_member_id, error=ErrorCode.FENCED_INSTANCE_ID
            )
        if old.awaiting_sync:
            b.syncs[old_member_id] = SyncGroupResult(error=ErrorCode.FENCED_INSTANCE_ID)
        b.cancel(old_member_id)  # its DelayedHeartbeat would find no such member anyway
        old_protocols = tuple(old.supported_protocols)
        member = group.replace_static_member(old_member_id, new_member_id, instance)
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)
        group.update_member(member, protocols, awaiting_join=True)
        if group.state is _STABLE and group.select_protocol() == group.protocol_name:
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            snapshot = group.snapshot(assignment)
            rejoin = StaticRejoin(
                snapshot, instance, old_member_id, new_member_id, old_protocols, leader_id
            )
            self._static_rejoins.setdefault(group.group_id, []).append(rejoin)
            b.writes.append(snapshot)
            return False
        return group.is_in(_STABLE, _COMPLETING)

    def take(self, snapshot: GroupMetadataSnapshot) -> StaticRejoin | None:
        """The rejoin whose group metadata `snapshot` is, if one waits for it."""
        waiting = self._static_rejoins.get(snapshot.group_id)
        if not waiting:
            return None
        for i, rejoin in enumerate(waiting):
            if rejoin.snapshot == snapshot:
                del waiting[i]
                if not waiting:
                    del self._static_rejoins[snapshot.group_id]
                return rejoin
        return None

    def forget(self, group_id: str) -> None:
        """Drop the group's waiting rejoins (the group left this coordinator)."""
        self._static_rejoins.pop(group_id, None)

    def complete(
        self,
        group: GroupMetadata,
        rejoin: StaticRejoin,
        error: ErrorCode,
        now_ms: int,
        b: EffectsBuilder,
    ) -> None:
        """The append of a static member's new id completed: answer its JoinGroup, or on
        failure give the instance its old member id back and answer the error."""
        if group.state is _DEAD:
            return
        new_id = rejoin.new_member_id
        member = group.members.get(new_id)
        if error is ErrorCode.NONE:
            # answered now only while the group is still Stable; a rebalance that started
            # meanwhile answers it with its new generation (Kafka answers it either way)
            if member is not None and member.awaiting_join and group.state is _STABLE:
                member.awaiting_join = False
                b.joins[new_id] = JoinGroupResult(
                    member_id=new_id,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader_id=rejoin.leader_id or "",
                )
            return
        if member is None or group.static_members.get(rejoin.group_instance_id) != new_id:
            return  # it left, or the instance moved on again, meanwhile
        parked = member.awaiting_join
        group.update_member(member, rejoin.old_protocols, awaiting_join=False)
        old = group.replace_static_member(new_id, rejoin.old_member_id, rejoin.group_instance_id)
        b.cancel(new_id)
        schedule_heartbeat(group, old, old.session_timeout_ms, now_ms, b)
        if parked:
            b.joins[new_id] = JoinGroupResult(
                member_id=UNKNOWN_MEMBER_ID,
                error=group_append_error(error),
                generation_id=group.generation_id,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader_id=rejoin.leader_id or "",
            )
