"""DelayedProduce and DelayedFetch, and the purgatory actor that judges them by snapshots."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kafkactor.actors.base import handles
from kafkactor.actors.directory import Directory
from kafkactor.actors.purgatory import PurgatoryActor, RequestOperation
from kafkactor.actors.request_log import log_fetch_response, log_produce_response
from kafkactor.messages import ErrorCode
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionData,
    FetchResponse,
    FetchSpec,
    OffsetPosition,
    PartitionSnapshot,
    ProducePartitionResult,
    ProducePartitionStatus,
    ProduceResponse,
    ProduceSpec,
    partition_key,
)
from kafkactor.storage import Log, LogClosedError, OffsetOutOfRangeError, StorageError
from kafkactor.timer import Clock, Timer


def check_enough_replicas_reach_offset(
    snapshot: PartitionSnapshot | None, required_offset: int
) -> tuple[bool, ErrorCode]:
    """Kafka's `Partition.checkEnoughReplicasReachOffset`, judged from a snapshot.

    (done, error): done with NONE once the HW passed `required_offset` with at least
    `min.insync.replicas` in the ISR, with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank
    below that meanwhile; done with an error when the replica is gone or no longer leads.
    """
    if snapshot is None or not snapshot.exists:
        return True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
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
            key = partition_key(status.topic, status.partition)
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
            key = partition_key(status.topic, status.partition)
            error = self.errors.get(key, ErrorCode.REQUEST_TIMED_OUT)
            results.append(
                ProducePartitionResult(
                    topic=status.topic,
                    partition=status.partition,
                    error_code=error,
                    base_offset=status.base_offset if error is ErrorCode.NONE else -1,
                    log_append_time_ms=-1,
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
        )


class DelayedFetch(RequestOperation):
    """Kafka's DelayedFetch: a fetch waiting for `min_bytes` or its max wait.

    Completes at once when a partition is unknown or no longer led here (cases A and B), when
    a fetch offset and the readable end are on different segments (case C), or once the bytes
    between the fetch offsets and the readable ends (each capped at its partition's fetch
    size) reach `min_bytes` (case D). Consumers read up to the high watermark, followers up
    to the log end. On completion, whatever is there is read and returned.
    """

    def __init__(self, actor: PurgatoryActor, request: DelayOperation) -> None:
        super().__init__(actor, request)
        spec = request.operation
        assert isinstance(spec, FetchSpec)
        self.spec = spec
        self.snapshots: dict[str, PartitionSnapshot] = getattr(actor, "snapshots", {})
        self.logs: Mapping[str, Log] = getattr(actor, "logs", {})
        self.from_consumer = spec.replica_id == CONSUMER_REPLICA_ID
        self.keys = [partition_key(p.topic, p.partition) for p in spec.partitions]
        self._fetch_positions: dict[str, OffsetPosition] = {}

    def _readable_end(self, snapshot: PartitionSnapshot) -> OffsetPosition:
        return snapshot.high_watermark if self.from_consumer else snapshot.log_end

    def try_complete(self) -> bool:
        accumulated = 0
        for key, wanted in zip(self.keys, self.spec.partitions, strict=True):
            snapshot = self.snapshots.get(key)
            if snapshot is None or not snapshot.exists or not snapshot.is_leader:
                return self.force_complete()  # cases A and B
            end = self._readable_end(snapshot)
            offset = wanted.fetch_offset
            if offset > snapshot.log_end.offset or offset < snapshot.log_start_offset:
                return self.force_complete()  # out of range: answer with the error now
            if offset >= end.offset:
                continue
            position = self._fetch_position(key, offset)
            if position is None:
                return self.force_complete()
            if position.segment_base_offset != end.segment_base_offset:
                return self.force_complete()  # case C
            accumulated += min(end.position - position.position, wanted.max_bytes)
        if accumulated >= self.spec.min_bytes:
            return self.force_complete()  # case D
        return False

    def _fetch_position(self, key: str, offset: int) -> OffsetPosition | None:
        position = self._fetch_positions.get(key)
        if position is not None:
            return position
        log = self.logs.get(key)
        if log is None:
            return None
        try:
            metadata = log.offset_metadata(offset)
        except StorageError:
            return None
        position = OffsetPosition(
            offset=metadata.offset,
            segment_base_offset=metadata.segment_base_offset,
            position=metadata.position,
        )
        self._fetch_positions[key] = position
        return position

    def on_complete(self) -> None:
        partitions = tuple(
            self._read(key, wanted)
            for key, wanted in zip(self.keys, self.spec.partitions, strict=True)
        )
        self._log_response(partitions)
        self.respond(
            FetchResponse(correlation_id=self.request.correlation_id, partitions=partitions)
        )

    def on_abort(self, error_code: ErrorCode) -> None:
        self._log_response(
            [
                FetchPartitionData(topic=p.topic, partition=p.partition, error_code=error_code)
                for p in self.spec.partitions
            ]
        )

    def _log_response(self, partitions: Sequence[FetchPartitionData]) -> None:
        log_fetch_response(
            self.actor,
            replica_id=self.spec.replica_id,
            correlation_id=self.request.correlation_id,
            partitions=partitions,
            received_ms=self.spec.received_ms,
            waited=self.deadline_ms >= 0,
            expired=self.expired,
            trace=self.trace,
        )

    def _read(self, key: str, wanted: FetchPartition) -> FetchPartitionData:
        snapshot = self.snapshots.get(key)
        log = self.logs.get(key)

        def failed(error: ErrorCode) -> FetchPartitionData:
            return FetchPartitionData(
                topic=wanted.topic,
                partition=wanted.partition,
                error_code=error,
                high_watermark=snapshot.high_watermark.offset if snapshot else -1,
                log_end_offset=snapshot.log_end.offset if snapshot else -1,
                log_start_offset=snapshot.log_start_offset if snapshot else -1,
            )

        if snapshot is None or not snapshot.exists or log is None:
            return failed(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not snapshot.is_leader:
            return failed(ErrorCode.NOT_LEADER_FOR_PARTITION)
        max_offset = snapshot.high_watermark.offset if self.from_consumer else None
        try:
            if max_offset is not None and wanted.fetch_offset >= max_offset:
                if wanted.fetch_offset > log.log_end_offset:
                    raise OffsetOutOfRangeError(
                        wanted.fetch_offset, log.log_start_offset, log.log_end_offset
                    )
                records = b""
            else:
                records = log.read(wanted.fetch_offset, wanted.max_bytes, max_offset).records
        except OffsetOutOfRangeError as error:
            # the log's own bounds, not the snapshot's: retention may have moved the start since
            return replace(
                failed(ErrorCode.OFFSET_OUT_OF_RANGE),
                log_start_offset=error.log_start_offset,
                log_end_offset=error.log_end_offset,
            )
        except LogClosedError:
            return failed(ErrorCode.NOT_LEADER_FOR_PARTITION)
        except StorageError:
            return failed(ErrorCode.KAFKA_STORAGE_ERROR)
        return FetchPartitionData(
            topic=wanted.topic,
            partition=wanted.partition,
            error_code=ErrorCode.NONE,
            high_watermark=snapshot.high_watermark.offset,
            log_end_offset=snapshot.log_end.offset,
            log_start_offset=snapshot.log_start_offset,
            records=records,
        )


class ReplicaPurgatoryActor(PurgatoryActor):
    """A broker's produce or fetch purgatory on the replication data path.

    Keeps the latest `PartitionSnapshot` of every partition led here (its partitions publish
    them on every LEO, HW, ISR or leadership change) and re-checks the operations watching a
    partition when its snapshot arrives; DelayedProduce and DelayedFetch decide from those
    snapshots. Fetches read the partitions' logs (thread-safe) through `logs`, keyed by
    `<topic>-<partition>`.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock | None = None,
        broker: int | None = None,
        *,
        name: str = "Produce",
        purge_interval: int = 1000,
        logs: Mapping[str, Log] | None = None,
    ) -> None:
        super().__init__(
            address, directory, timer, clock, broker, name=name, purge_interval=purge_interval
        )
        self.snapshots: dict[str, PartitionSnapshot] = {}
        self.logs: Mapping[str, Log] = logs if logs is not None else {}

    @handles(PartitionSnapshot)
    def _on_snapshot(self, snapshot: PartitionSnapshot) -> None:
        self.snapshots[snapshot.key] = snapshot
        completed = self.purgatory.check_and_complete(snapshot.key)
        self.purgatory.maybe_purge()
        if completed:
            self.log_event(
                "purgatory.complete",
                purgatory=self.purgatory.name,
                key=snapshot.key,
                completed=completed,
                delayed=self.purgatory.num_delayed,
                cause=type(snapshot).__name__,
            )

    def describe(self) -> dict[str, Any]:
        return {
            "delayed": self.purgatory.num_delayed,
            "watched_keys": self.purgatory.keys,
            "partitions": len(self.snapshots),
        }


ReplicaPurgatoryActor.register_operation(ProduceSpec, DelayedProduce)
ReplicaPurgatoryActor.register_operation(FetchSpec, DelayedFetch)
