"""The offset APIs of Kafka's GroupCoordinator, on one group the coordinator has already found
and validated: an OffsetCommit's checks and its offsets staged as pending (handleCommitOffsets,
GroupMetadataManager.storeOffsets), the completion of their append, and OffsetFetch
(handleFetchOffsets, GroupMetadataManager.getOffsets)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadata,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.group_state import GroupState, IllegalGroupStateError
from kafkactor.actors.coordinator.results import (
    CommitOutcome,
    Effects,
    EffectsBuilder,
    OffsetCommitWrite,
    OffsetFetchPartition,
    append_error,
    schedule_heartbeat,
)
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode


def offset_append_error(error: ErrorCode) -> ErrorCode:
    """How Kafka's storeOffsets answers a failed append of committed offsets."""
    return append_error(error, too_large=ErrorCode.INVALID_COMMIT_OFFSET_SIZE)


def refused_commit(
    group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata], error: ErrorCode
) -> CommitOutcome:
    """An OffsetCommit answered `error` for every partition, with nothing to append."""
    return CommitOutcome(dict.fromkeys(offsets, error), None, Effects(group_id=group_id))


def commit_offsets(
    group: GroupMetadata,
    member_id: str,
    generation_id: int,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    now_ms: int,
    *,
    metadata_max_bytes: int,
    group_instance_id: str | None = None,
) -> CommitOutcome:
    """Kafka's doCommitOffsets: a member commits in the current generation (which also renews
    its session), refused while the group awaits its assignment; generation -1 with member ""
    is accepted while the group is Empty; a fenced static instance answers FENCED_INSTANCE_ID."""
    group_id = group.group_id

    def answer(error: ErrorCode) -> CommitOutcome:
        return refused_commit(group_id, offsets, error)

    if group.state is GroupState.DEAD:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if group.is_static_member_fenced(member_id, group_instance_id):
        return answer(ErrorCode.FENCED_INSTANCE_ID)
    b = EffectsBuilder(group_id)
    if generation_id >= 0 or group.state is not GroupState.EMPTY:
        member = group.members.get(member_id)
        if member is None:
            return answer(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return answer(ErrorCode.ILLEGAL_GENERATION)
        if group.state is GroupState.COMPLETING_REBALANCE:
            return answer(ErrorCode.REBALANCE_IN_PROGRESS)
        if not group.is_in(GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            raise IllegalGroupStateError(f"commit to group {group_id} in {group.state.value}")
        # while preparing a rebalance the commit is still taken: the heartbeat's
        # REBALANCE_IN_PROGRESS tells the member to rejoin
        schedule_heartbeat(group, member, member.session_timeout_ms, now_ms, b)
    limit = metadata_max_bytes
    return _store_offsets(group, member_id, generation_id, offsets, b.build(), limit=limit)


def _store_offsets(
    group: GroupMetadata,
    member_id: str,
    generation_id: int,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    effects: Effects,
    *,
    limit: int,
) -> CommitOutcome:
    valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
    too_large = tuple(tp for tp in offsets if tp not in valid)
    if not valid:
        errors = dict.fromkeys(offsets, ErrorCode.OFFSET_METADATA_TOO_LARGE)
        return CommitOutcome(errors, None, effects)
    group.prepare_offset_commit(valid)
    write = OffsetCommitWrite(
        group_id=group.group_id,
        member_id=member_id,
        generation_id=generation_id,
        offsets=valid,
        too_large=too_large,
    )
    return CommitOutcome(None, write, effects)


def complete_offset_commit(
    group: GroupMetadata | None, write: OffsetCommitWrite, error: ErrorCode
) -> dict[TopicPartition, ErrorCode]:
    """The append of `write` completed with `error`: its offsets are committed (or dropped
    from the pending ones). Returns the OffsetCommit's answer, partition by partition."""
    if group is not None and group.state is not GroupState.DEAD:
        for tp, offset in write.offsets.items():
            if error is ErrorCode.NONE:
                group.on_offset_commit_append(tp, offset)
            else:
                group.fail_pending_offset_write(tp, offset)
    code = ErrorCode.NONE if error is ErrorCode.NONE else offset_append_error(error)
    answer = dict.fromkeys(write.offsets, code)
    answer.update(dict.fromkeys(write.too_large, ErrorCode.OFFSET_METADATA_TOO_LARGE))
    return answer


def fetch_offsets(
    group: GroupMetadata, partitions: Sequence[TopicPartition] | None, *, require_stable: bool
) -> dict[TopicPartition, OffsetFetchPartition]:
    """OffsetFetch on a live group: `partitions` (None: every partition with a committed
    offset); -1 for one without, UNSTABLE_OFFSET_COMMIT with `require_stable` (KIP-447) for
    one with a commit in flight."""
    answer = {}
    for tp in list(group.offsets) if partitions is None else partitions:
        offset = group.offset(tp)
        if require_stable and group.has_pending_offset_commit(tp):
            answer[tp] = OffsetFetchPartition(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        elif offset is None:
            answer[tp] = OffsetFetchPartition()
        else:
            answer[tp] = OffsetFetchPartition(
                offset=offset.offset, leader_epoch=offset.leader_epoch, metadata=offset.metadata
            )
    return answer
