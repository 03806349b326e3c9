"""Kafka's DelayedProduce: an acks=all produce waiting for the ISR to reach its offsets."""

from __future__ import annotations

from kafkactor.actors.purgatory import PurgatoryActor, RequestOperation
from kafkactor.actors.replication.request_log import log_produce_response
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.partition import AppendResult
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    PartitionSnapshot,
    ProducePartitionResult,
    ProducePartitionStatus,
    ProduceResponse,
    ProduceSpec,
)


def produce_status(topic: str, partition: int, answer: Response | None) -> ProducePartitionStatus:
    """A partition's part of a produce, from its append's answer: the offset the ISR must reach
    (the last appended offset + 1) with the offsets to report, or the error."""
    if isinstance(answer, AppendResult) and answer.error_code is ErrorCode.NONE:
        return ProducePartitionStatus(
            topic=topic,
            partition=partition,
            required_offset=answer.last_offset + 1,
            base_offset=answer.first_offset,
            log_start_offset=answer.log_start_offset,
            log_append_time_ms=answer.log_append_time_ms,
        )
    if isinstance(answer, AppendResult):  # refused: a LogValidator refusal names its records
        return ProducePartitionStatus(
            topic=topic,
            partition=partition,
            error_code=answer.error_code,
            log_start_offset=answer.log_start_offset,
            record_errors=answer.record_errors,
            error_message=answer.error_message,
        )
    error = getattr(answer, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return ProducePartitionStatus(topic=topic, partition=partition, error_code=error)


def produce_result(status: ProducePartitionStatus) -> ProducePartitionResult:
    """The answer of a partition that is not waited for (acks 0 or 1, or an error)."""
    return ProducePartitionResult(
        topic=status.topic,
        partition=status.partition,
        error_code=status.error_code,
        base_offset=status.base_offset,
        log_start_offset=status.log_start_offset,
        log_append_time_ms=status.log_append_time_ms,
        record_errors=status.record_errors,
        error_message=status.error_message,
    )


def delay_produce(
    reply_to: str,
    correlation_id: int,
    statuses: tuple[ProducePartitionStatus, ...],
    *,
    received_ms: int,
    timeout_ms: int,
) -> DelayOperation:
    """The produce purgatory's operation for an acks=-1 produce: it answers `reply_to` once the
    ISR reaches every waiting partition's offset, or at the timeout."""
    return DelayOperation(
        reply_to=reply_to,
        correlation_id=correlation_id,
        operation=ProduceSpec(partitions=statuses, received_ms=received_ms),
        keys=tuple(str(TopicPartition.of(s)) for s in statuses if s.error_code is ErrorCode.NONE),
        timeout_ms=max(0, timeout_ms),
    )


def replica_gone_error(snapshot: PartitionSnapshot | None) -> ErrorCode:
    """What a delayed operation on a replica that stopped answers: NOT_LEADER_FOR_PARTITION
    while the broker's metadata still names the partition (the replica moved to other
    brokers), UNKNOWN_TOPIC_OR_PARTITION otherwise (its topic was deleted), as Kafka's
    `ReplicaManager.getPartitionOrError` tells them apart."""
    if snapshot is not None and snapshot.still_known:
        return ErrorCode.NOT_LEADER_FOR_PARTITION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def check_enough_replicas_reach_offset(
    snapshot: PartitionSnapshot | None, required_offset: int
) -> tuple[bool, ErrorCode]:
    """Kafka's `Partition.checkEnoughReplicasReachOffset`, judged from a snapshot.

    (done, error): done with NONE once the HW passed `required_offset` with at least
    `min.insync.replicas` in the ISR, with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
    below that meanwhile; done with an error when the replica is gone or no longer leads.
    """
    if snapshot is None or not snapshot.exists:
        return True, replica_gone_error(snapshot)
    if not snapshot.is_leader:
        return True, ErrorCode.NOT_LEADER_FOR_PARTITION
    if snapshot.high_watermark.offset >= required_offset:
        if len(snapshot.isr) >= snapshot.min_insync_replicas:
            return True, ErrorCode.NONE
        return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return False, ErrorCode.NONE


class DelayedProduce(RequestOperation):
    """Kafka's DelayedProduce: an acks=-1 produce waiting for the ISR to reach its offsets.

    Completes when every partition either reached its required offset (HW past the last
    appended offset) or failed (not leader, unknown partition, ISR below min.insync.replicas
    after the append); partitions still waiting at the timeout get REQUEST_TIMED_OUT.
    """

    def __init__(self, actor: PurgatoryActor, request: DelayOperation) -> None:
        super().__init__(actor, request)
        spec = request.operation
        assert isinstance(spec, ProduceSpec)
        self.spec = spec
        self.snapshots: dict[str, PartitionSnapshot] = getattr(actor, "snapshots", {})
        self.errors: dict[str, ErrorCode] = {}
        self.pending: dict[str, ProducePartitionStatus] = {}
        for status in spec.partitions:
            key = str(TopicPartition.of(status))
            if status.error_code is ErrorCode.NONE:
                self.pending[key] = status
            else:
                self.errors[key] = status.error_code

    def try_complete(self) -> bool:
        pending = self.pending
        snapshots = self.snapshots
        for key in list(pending):
            done, error = check_enough_replicas_reach_offset(
                snapshots.get(key), pending[key].required_offset
            )
            if done:
                del pending[key]
                self.errors[key] = error
        if pending:
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        results = []
        for status in self.spec.partitions:
            if status.error_code is not ErrorCode.NONE:  # refused before the wait: as it came
                results.append(produce_result(status))
                continue
            key = str(TopicPartition.of(status))
            error = self.errors.get(key, ErrorCode.REQUEST_TIMED_OUT)
            results.append(
                ProducePartitionResult(
                    topic=status.topic,
                    partition=status.partition,
                    error_code=error,
                    base_offset=status.base_offset if error is ErrorCode.NONE else -1,
                    log_append_time_ms=status.log_append_time_ms if error is ErrorCode.NONE else -1,
                    log_start_offset=status.log_start_offset if error is ErrorCode.NONE else -1,
                )
            )
        self._log_response(results)
        self.respond(
            ProduceResponse(correlation_id=self.request.correlation_id, partitions=tuple(results))
        )

    def on_abort(self, error_code: ErrorCode) -> None:
        self._log_response(
            [
                ProducePartitionResult(topic=s.topic, partition=s.partition, error_code=error_code)
                for s in self.spec.partitions
            ]
        )

    def _log_response(self, results: list[ProducePartitionResult]) -> None:
        log_produce_response(
            self.actor,
            acks=-1,
            correlation_id=self.request.correlation_id,
            results=results,
            received_ms=self.spec.received_ms,
            waited=self.deadline_ms >= 0,
            expired=self.expired,
            trace=self.trace,
            completed_by=self.completion,
        )
