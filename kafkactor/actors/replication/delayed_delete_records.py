"""Kafka's DelayedDeleteRecords (KIP-107): a DeleteRecords waiting for every replica's log start
offset to reach what its leader deleted up to; and the replica manager's side of the request
(Kafka's `ReplicaManager.deleteRecords`): the orders to the leader partitions and what becomes
of their answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kafkactor.actors.purgatory import PurgatoryActor, RequestOperation
from kafkactor.actors.replication.delayed_produce import replica_gone_error
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.delete_records import (
    INVALID_LOW_WATERMARK,
    DeleteRecordsOnLeader,
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsSpec,
    DeleteRecordsStatus,
    DescribeLogDirsRequest,
    RecordsDeleted,
)
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import PartitionSnapshot

__all__ = [  # the replica manager takes the request types from here too
    "DelayedDeleteRecords",
    "DeleteRecordsPlan",
    "DeleteRecordsRequest",
    "DescribeLogDirsRequest",
    "delete_records_outcome",
    "plan_delete_records",
]

# Kafka's Topic.isInternal: the topics whose records a client may not delete
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state"})


class DeleteRecordsPlan:
    """What a replica manager does with a DeleteRecordsRequest (Kafka's
    `deleteRecordsOnLocalLog`): the partitions refused at once (an internal topic, a partition
    this broker does not lead or know) and the orders to the leader partitions' actors."""

    def __init__(self) -> None:
        self.refused: dict[str, DeleteRecordsStatus] = {}
        self.orders: dict[str, tuple[str, DeleteRecordsOnLeader]] = {}


def plan_delete_records(
    request: DeleteRecordsRequest,
    leader_address: Callable[[str, int], str | None],
    leader_error: Callable[[str, int], ErrorCode],
) -> DeleteRecordsPlan:
    """`leader_address(topic, partition)`: the local leader partition's actor, or None, and
    then `leader_error` says why (NOT_LEADER_FOR_PARTITION, UNKNOWN_TOPIC_OR_PARTITION)."""
    plan = DeleteRecordsPlan()
    for part in request.partitions:
        key = str(TopicPartition.of(part))
        if part.topic in INTERNAL_TOPICS:
            error = ErrorCode.INVALID_TOPIC_EXCEPTION
        else:
            address = leader_address(part.topic, part.partition)
            if address is not None:
                plan.orders[key] = (
                    address,
                    DeleteRecordsOnLeader(
                        topic=part.topic, partition=part.partition, offset=part.offset
                    ),
                )
                continue
            error = leader_error(part.topic, part.partition)
        plan.refused[key] = DeleteRecordsStatus(
            topic=part.topic, partition=part.partition, error_code=error
        )
    return plan


def delete_records_outcome(
    request: DeleteRecordsRequest,
    plan: DeleteRecordsPlan,
    answers: Mapping[str, Response],
) -> DeleteRecordsResponse | DelayOperation:
    """The answer now, or the DelayedDeleteRecords to hand to the DeleteRecords purgatory
    when a partition's low watermark has not yet reached what its leader deleted up to
    (Kafka's `delayedDeleteRecordsRequired`)."""
    statuses = []
    for part in request.partitions:
        key = str(TopicPartition.of(part))
        refused = plan.refused.get(key)
        answer = answers.get(key)
        if refused is not None:
            statuses.append(refused)
        elif isinstance(answer, RecordsDeleted):
            statuses.append(
                DeleteRecordsStatus(
                    topic=part.topic,
                    partition=part.partition,
                    required_offset=answer.requested_offset,
                    low_watermark=answer.low_watermark,
                    error_code=answer.error_code,
                )
            )
        else:  # the partition could not be reached (stopped meanwhile)
            statuses.append(
                DeleteRecordsStatus(
                    topic=part.topic,
                    partition=part.partition,
                    error_code=getattr(answer, "error_code", ErrorCode.NOT_LEADER_FOR_PARTITION),
                )
            )
    if any(
        s.error_code is ErrorCode.NONE and s.low_watermark < s.required_offset for s in statuses
    ):
        return DelayOperation(
            reply_to=request.reply_to,
            correlation_id=request.correlation_id,
            operation=DeleteRecordsSpec(partitions=tuple(statuses)),
            keys=tuple(
                str(TopicPartition.of(s)) for s in statuses if s.error_code is ErrorCode.NONE
            ),
            timeout_ms=max(0, request.timeout_ms),
        )
    return DeleteRecordsResponse(
        correlation_id=request.correlation_id,
        partitions=tuple(_result(s, s.error_code, s.low_watermark) for s in statuses),
    )


def _result(
    status: DeleteRecordsStatus, error: ErrorCode, low: int
) -> DeleteRecordsPartitionResult:
    return DeleteRecordsPartitionResult(
        topic=status.topic,
        partition=status.partition,
        low_watermark=low if error is ErrorCode.NONE else INVALID_LOW_WATERMARK,
        error_code=error,
    )


def low_watermark_reached(
    snapshot: PartitionSnapshot | None, required_offset: int
) -> tuple[bool, ErrorCode, int]:
    """Kafka's DelayedDeleteRecords check of one partition, from its latest snapshot:
    (done, error, low watermark). Done with NONE once the low watermark reached
    `required_offset`; done with an error when the replica is gone or no longer leads."""
    if snapshot is None or not snapshot.exists:
        return True, replica_gone_error(snapshot), INVALID_LOW_WATERMARK
    if not snapshot.is_leader:
        return True, ErrorCode.NOT_LEADER_FOR_PARTITION, INVALID_LOW_WATERMARK
    if snapshot.low_watermark >= required_offset:
        return True, ErrorCode.NONE, snapshot.low_watermark
    return False, ErrorCode.NONE, snapshot.low_watermark


class DelayedDeleteRecords(RequestOperation):
    """Kafka's DelayedDeleteRecords: a DeleteRecords whose leaders moved their log start
    offsets, waiting until every partition's low watermark (the smallest log start offset over
    its live replicas) reaches it, or until one no longer leads. At the timeout the partitions
    still waiting answer REQUEST_TIMED_OUT with the low watermark they had when the leader
    applied the deletion, as Kafka's do."""

    def __init__(self, actor: PurgatoryActor, request: DelayOperation) -> None:
        super().__init__(actor, request)
        spec = request.operation
        assert isinstance(spec, DeleteRecordsSpec)
        self.spec = spec
        self.snapshots: dict[str, PartitionSnapshot] = getattr(actor, "snapshots", {})
        self.done: dict[str, tuple[ErrorCode, int]] = {}
        self.pending: dict[str, DeleteRecordsStatus] = {}
        for status in spec.partitions:
            key = str(TopicPartition.of(status))
            if status.error_code is ErrorCode.NONE:
                self.pending[key] = status
            else:
                self.done[key] = (status.error_code, INVALID_LOW_WATERMARK)

    def try_complete(self) -> bool:
        for key in list(self.pending):
            reached, error, low = low_watermark_reached(
                self.snapshots.get(key), self.pending[key].required_offset
            )
            if reached:
                del self.pending[key]
                self.done[key] = (error, low)
        if self.pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        results = []
        for status in self.spec.partitions:
            key = str(TopicPartition.of(status))
            error, low = self.done.get(key, (ErrorCode.REQUEST_TIMED_OUT, status.low_watermark))
            if error is ErrorCode.REQUEST_TIMED_OUT:  # Kafka keeps the low watermark it had
                results.append(
                    DeleteRecordsPartitionResult(
                        topic=status.topic,
                        partition=status.partition,
                        low_watermark=low,
                        error_code=error,
                    )
                )
            else:
                results.append(_result(status, error, low))
        self.respond(
            DeleteRecordsResponse(
                correlation_id=self.request.correlation_id, partitions=tuple(results)
            )
        )
