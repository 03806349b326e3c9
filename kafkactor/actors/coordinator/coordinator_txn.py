"""The group coordinator's actor shell, its transactional half: TxnOffsetCommit, whose offsets
go to `__consumer_offsets` as one transactional batch of the producer, and the replica
manager's TxnOffsetsCompleted once a transaction's marker is written there."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkactor.actors.coordinator.coordinator_admin import GroupAdminHandlers
from kafkactor.actors.coordinator.group_metadata import OffsetAndMetadata
from kafkactor.actors.coordinator.offsets_store import offset_records
from kafkactor.actors.coordinator.txn_offset_commit import (
    complete_txn_offset_write,
    handle_txn_commit_offsets,
    handle_txn_completion,
)
from kafkactor.actors.coordinator.txn_offsets import TxnOffsetCommitWrite
from kafkactor.actors.runtime import handles
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.transaction import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnOffsetsCompleted,
    TxnPartitionError,
)
from kafkactor.storage import build_batch

__all__ = ["TxnOffsetHandlers"]

TXN_BASE_SEQUENCE = 0  # Kafka's storeOffsets writes the batch with base sequence 0


class TxnOffsetHandlers(GroupAdminHandlers):
    """The handlers of Kafka's transactional offset commits in `GroupCoordinatorActor`
    (which derives from this class and owns the core and the appends)."""

    def _append_batch(
        self,
        partition: int,
        batch: bytes,
        done: Callable[[ErrorCode, int], None],
        *,
        transactional_id: str | None = None,
    ) -> None:
        raise NotImplementedError  # the actor's: append a batch, acks=-1, as the coordinator

    @handles(TxnOffsetCommitRequest)
    def _on_txn_commit(self, request: TxnOffsetCommitRequest) -> None:
        now = self.clock.now_ms()
        offsets = {
            TopicPartition(topic=p.topic, partition=p.partition): OffsetAndMetadata(
                offset=p.offset,
                leader_epoch=None if p.leader_epoch < 0 else p.leader_epoch,
                metadata=p.metadata or "",
                commit_timestamp_ms=now,
            )
            for p in request.partitions
        }
        outcome = handle_txn_commit_offsets(
            self.core,
            request.group_id,
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            offsets,
            now,
            member_id=request.member_id,
            generation_id=request.generation_id,
            group_instance_id=request.group_instance_id,
        )
        if outcome.errors is not None:
            self.reply(request, _response(outcome.errors))
            return
        write = outcome.write
        assert write is not None
        trace = self.trace_context  # the request's, to answer in after the append

        def appended(
            error: ErrorCode, log_offset: int, write: TxnOffsetCommitWrite = write
        ) -> None:
            answer = complete_txn_offset_write(self.core, write, error, log_offset)
            self.reply(request, _response(answer), trace=trace)

        batch = build_batch(
            offset_records(write.group_id, write.offsets, now),
            0,
            producer_id=write.producer_id,
            producer_epoch=write.producer_epoch,
            base_sequence=TXN_BASE_SEQUENCE,
            is_transactional=True,
        )
        partition = self.core.partition_for(write.group_id)
        self._append_batch(partition, batch, appended, transactional_id=write.transactional_id)

    @handles(TxnOffsetsCompleted)
    def _on_txn_completed(self, event: TxnOffsetsCompleted) -> None:
        handle_txn_completion(
            self.core, event.producer_id, event.partition, event.committed, self.clock.now_ms()
        )


def _response(errors: Mapping[TopicPartition, ErrorCode]) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        partitions=tuple(
            TxnPartitionError(topic=tp.topic, partition=tp.partition, error_code=error)
            for tp, error in errors.items()
        )
    )
