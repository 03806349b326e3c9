"""TxnOffsetCommit and the completion of a transaction's offsets, as Kafka 2.8's group
coordinator decides them (GroupCoordinator.handleTxnCommitOffsets / doTxnCommitOffsets,
GroupMetadataManager.storeOffsets with a producer id and handleTxnCompletion), on the
`GroupCoordinatorCore`'s groups and its `TxnOffsetCommits`. Pure: no clock, no log."""

from __future__ import annotations

from collections.abc import Mapping

from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_metadata import GroupMetadata, OffsetAndMetadata
from kafkactor.actors.coordinator.group_offsets import offset_append_error
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.member_metadata import UNKNOWN_MEMBER_ID
from kafkactor.actors.coordinator.txn_offsets import TxnCommitOutcome, TxnOffsetCommitWrite
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode

__all__ = [
    "complete_txn_offset_write",
    "handle_txn_commit_offsets",
    "handle_txn_completion",
]


def handle_txn_commit_offsets(  # noqa: PLR0911, PLR0917 - Kafka's handleTxnCommitOffsets
    core: GroupCoordinatorCore,
    group_id: str,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    now_ms: int,
    *,
    member_id: str = UNKNOWN_MEMBER_ID,
    generation_id: int = -1,
    group_instance_id: str | None = None,
) -> TxnCommitOutcome:
    """A TxnOffsetCommit. The group's status is checked as for an OffsetCommit (NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS; the empty group id is INVALID_GROUP_ID here), a group not
    known is created Empty, and the v3+ fields (KIP-447) are checked when given: a fenced
    static instance FENCED_INSTANCE_ID, a member id the group does not have UNKNOWN_MEMBER_ID,
    a generation other than the group's ILLEGAL_GENERATION. Any group state takes the commit
    (no session is renewed). Accepted offsets are pending for the producer from now on; the
    write is to be appended as one transactional batch of the producer."""

    def answer(error: ErrorCode) -> TxnCommitOutcome:
        return TxnCommitOutcome(dict.fromkeys(offsets, error))

    error = core._status_error(group_id)  # Kafka's validateGroupStatus
    if error is not None:
        return answer(error)
    if producer_id < 0 or producer_epoch < 0:  # no transaction to belong to (docs/coordinator.md)
        return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    group = core.groups.get(group_id)
    if group is None:
        group = core.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
    if group.state is GroupState.DEAD:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if group.is_static_member_fenced(member_id, group_instance_id):
        return answer(ErrorCode.FENCED_INSTANCE_ID)
    if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
        return answer(ErrorCode.UNKNOWN_MEMBER_ID)
    if generation_id >= 0 and generation_id != group.generation_id:
        return answer(ErrorCode.ILLEGAL_GENERATION)
    limit = core.config.offset_metadata_max_bytes
    valid = {tp: o for tp, o in offsets.items() if len(o.metadata) <= limit}
    if not valid:
        return answer(ErrorCode.OFFSET_METADATA_TOO_LARGE)
    core.txn_offsets.prepare(group_id, producer_id, valid)
    write = TxnOffsetCommitWrite(
        group_id=group_id,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        offsets=valid,
        too_large=tuple(tp for tp in offsets if tp not in valid),
    )
    return TxnCommitOutcome(None, write)


def complete_txn_offset_write(
    core: GroupCoordinatorCore, write: TxnOffsetCommitWrite, error: ErrorCode, log_offset: int
) -> dict[TopicPartition, ErrorCode]:
    """The transactional batch of `write` was appended at `log_offset` (error NONE) or failed
    with `error` (its offsets stop being pending: the producer retries). Returns the
    TxnOffsetCommit's answer, partition by partition, with Kafka's mapping of append errors
    (a fenced producer's INVALID_PRODUCER_EPOCH / PRODUCER_FENCED passes through)."""
    txn = core.txn_offsets
    if error is ErrorCode.NONE:
        group = core.groups.get(write.group_id)
        current = () if group is None else list(group.offsets)
        won = txn.on_append(write.group_id, write.producer_id, write.offsets, log_offset, current)
        if won:  # its marker came first (and committed)
            stamp = next(iter(won.values())).commit_timestamp_ms
            _commit(core, write.group_id, won, stamp)
    else:
        txn.fail(write.group_id, write.producer_id, write.offsets)
    code = ErrorCode.NONE if error is ErrorCode.NONE else offset_append_error(error)
    answer = dict.fromkeys(write.offsets, code)
    answer.update(dict.fromkeys(write.too_large, ErrorCode.OFFSET_METADATA_TOO_LARGE))
    return answer


def handle_txn_completion(
    core: GroupCoordinatorCore, producer_id: int, partition: int, committed: bool, now_ms: int
) -> list[str]:
    """A transaction marker of `producer_id` is written to `__consumer_offsets` partition
    `partition` (Kafka's handleTxnCompletion): in every group of that partition, the
    producer's pending offsets become committed (`committed`) or are dropped. A group no
    longer in the cache (deleted while the transaction was open) comes back Empty with the
    committed offsets, as the next load of the partition would find it. Nothing happens for
    a partition this broker does not lead (its new leader loads the marker from the log).
    Returns the groups completed."""
    if partition not in core.owned_partitions:
        return []
    groups = core.txn_offsets.groups_of(
        producer_id, lambda group_id: core.partition_for(group_id) == partition
    )
    for group_id in groups:
        group = core.groups.get(group_id)
        current = () if group is None else list(group.offsets)
        won = core.txn_offsets.complete(group_id, producer_id, committed, current)
        if won:
            _commit(core, group_id, won, now_ms)
    return groups


def _commit(
    core: GroupCoordinatorCore,
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    now_ms: int,
) -> None:
    """A transaction's offsets become the group's committed ones (the group, deleted while the
    transaction was open, comes back Empty)."""
    group = core.groups.get(group_id)
    if group is None:
        group = core.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms)
    group.initialize_offsets(offsets)
