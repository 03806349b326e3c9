"""Kafka's DelayedFetch: a fetch waiting for enough bytes, or for its max wait to pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kafkactor.actors.purgatory import PurgatoryActor, RequestOperation
from kafkactor.actors.replication.list_offsets import READ_COMMITTED
from kafkactor.actors.replication.request_log import log_fetch_response
from kafkactor.actors.replication.storage_failures import StorageFailure, log_storage_error
from kafkactor.common import LogOffsetMetadata, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    CONSUMER_REPLICA_ID,
)
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    AbortedTransaction,
    FetchPartition,
    FetchPartitionData,
    FetchResponse,
    FetchSpec,
    PartitionSnapshot,
)
from kafkactor.storage import (
    Log,
    LogClosedError,
    OffsetOutOfRangeError,
    StorageError,
    batch_size_at,
    iter_batches,
)


class DelayedFetch(RequestOperation):
    """Kafka's DelayedFetch: a fetch waiting for `min_bytes` or its max wait.

    Completes at once when a partition is unknown or no longer led here (cases A and B), when
    a fetch offset and the readable end are on different segments (case C), or once the bytes
    between the fetch offsets and the readable ends (each capped at its partition's fetch
    size) reach `min_bytes` (case D). Consumers read up to the high watermark (read_committed
    ones up to the last stable offset, Kafka's FetchTxnCommitted, and are told the aborted
    transactions in what they read), followers up to the log end. On completion, whatever is
    there is read and returned, with the partition's last stable offset.
    """

    def __init__(self, actor: PurgatoryActor, request: DelayOperation) -> None:
        super().__init__(actor, request)
        spec = request.operation
        assert isinstance(spec, FetchSpec)
        self.spec = spec
        self.snapshots: dict[str, PartitionSnapshot] = getattr(actor, "snapshots", {})
        self.logs: Mapping[str, Log] = getattr(actor, "logs", {})
        # key -> (snapshot, the answer with nothing to read it gave): shared by the actor's
        # fetches, so that a partition idle for many fetches builds its answer once
        self.idle_answers: dict[str, tuple[PartitionSnapshot, FetchPartitionData]] = getattr(
            actor, "idle_answers", {}
        )
        self.from_consumer = spec.replica_id == CONSUMER_REPLICA_ID
        self.read_committed = self.from_consumer and spec.isolation_level == READ_COMMITTED
        keys = request.keys  # the replica manager's: each partition's str(tp), in order
        if len(keys) != len(spec.partitions):
            keys = tuple(str(TopicPartition.of(p)) for p in spec.partitions)
        self.keys = keys
        self._fetch_positions: dict[str, LogOffsetMetadata] = {}

    def _readable_end(self, snapshot: PartitionSnapshot) -> LogOffsetMetadata:
        if self.read_committed:
            return snapshot.stable_end
        return snapshot.high_watermark if self.from_consumer else snapshot.log_end

    def try_complete(self) -> bool:
        accumulated = 0
        for key, wanted in zip(self.keys, self.spec.partitions, strict=True):
            snapshot = self.snapshots.get(key)
            if (
                snapshot is None
                or not snapshot.exists
                or not snapshot.is_leader
                or _epoch_error(wanted, snapshot) is not None  # another epoch: tell it now
            ):
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

    def _fetch_position(self, key: str, offset: int) -> LogOffsetMetadata | None:
        position = self._fetch_positions.get(key)
        if position is not None:
            return position
        log = self.logs.get(key)
        if log is None:
            return None
        try:
            metadata = log.offset_metadata(offset)
        except (StorageError, OSError):  # answered at once: the read says what failed
            return None
        position = LogOffsetMetadata(
            offset=metadata.offset,
            segment_base_offset=metadata.segment_base_offset,
            position=metadata.position,
        )
        self._fetch_positions[key] = position
        return position

    def on_complete(self) -> None:
        # KIP-74: partitions are read in request order, each within its own max_bytes and what
        # the response's max_bytes leaves. A partition whose own limit the response's leaves
        # intact gets its first batch whole, as before; once the response's limit binds, only
        # while no partition has returned data yet (the response then stays within max_bytes
        # but for one batch, which a fetcher must get to make progress)
        left = self.spec.max_bytes
        read: list[FetchPartitionData] = []
        for key, wanted in zip(self.keys, self.spec.partitions, strict=True):
            whole = left >= wanted.max_bytes or left == self.spec.max_bytes
            data = self._nothing_new(key, wanted) or self._read(
                key, wanted, budget=left, first=whole
            )
            left = max(0, left - len(data.records))
            read.append(data)
        partitions = tuple(read)
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
            completed_by=self.completion,
        )

    def _read(
        self, key: str, wanted: FetchPartition, *, budget: int, first: bool
    ) -> FetchPartitionData:
        snapshot = self.snapshots.get(key)
        log = self.logs.get(key)

        def failed(error: ErrorCode) -> FetchPartitionData:
            return _answer(wanted, snapshot, error)

        offline = key in self.spec.offline  # its log could not be opened (Kafka's Offline)
        if offline or snapshot is None or not snapshot.exists or log is None:
            return failed(
                ErrorCode.KAFKA_STORAGE_ERROR if offline else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        leader_error = (
            ErrorCode.NOT_LEADER_FOR_PARTITION
            if not snapshot.is_leader
            else _epoch_error(wanted, snapshot)
        )
        if leader_error is not None:
            return failed(leader_error)
        max_offset = self._readable_end(snapshot).offset if self.from_consumer else None
        aborted: tuple[AbortedTransaction, ...] = ()
        try:
            if max_offset is not None and wanted.fetch_offset >= max_offset:
                if wanted.fetch_offset > log.log_end_offset:
                    raise OffsetOutOfRangeError(
                        wanted.fetch_offset, log.log_start_offset, log.log_end_offset
                    )
                records = b""
            else:
                records = log.read(
                    wanted.fetch_offset,
                    min(wanted.max_bytes, budget),
                    max_offset,
                    min_one_batch=first,
                ).records
                if self.read_committed and records:
                    aborted = tuple(
                        AbortedTransaction(producer_id=producer_id, first_offset=first_offset)
                        for producer_id, first_offset in log.collect_aborted_transactions(
                            wanted.fetch_offset, _next_offset(records)
                        )
                    )
        except OffsetOutOfRangeError as error:
            # the log's own bounds, not the snapshot's: retention may have moved the start since
            return replace(
                failed(ErrorCode.OFFSET_OUT_OF_RANGE),
                log_start_offset=error.log_start_offset,
                log_end_offset=error.log_end_offset,
            )
        except LogClosedError:
            return failed(ErrorCode.NOT_LEADER_FOR_PARTITION)
        except (StorageError, OSError) as error:  # a file it could not open or read (EMFILE)
            log_storage_error(
                self.actor,
                "partition.storage_error",
                topic=wanted.topic,
                partition=wanted.partition,
                failure=StorageFailure.of(error),
                operation="read",
            )
            return failed(ErrorCode.KAFKA_STORAGE_ERROR)
        return _answer(wanted, snapshot, ErrorCode.NONE, records, aborted)

    def _nothing_new(self, key: str, wanted: FetchPartition) -> FetchPartitionData | None:
        """The answer of a partition this leader leads, fetched at its readable end (an idle
        follower's fetch at the log end, a consumer's at the HW): no records, the snapshot's
        offsets, without reading the log; the answer built for the same snapshot before, if
        any (answers are immutable). None when the fetch is anything else: `_read` answers."""
        snapshot = self.snapshots.get(key)
        if (
            snapshot is None
            or not snapshot.exists
            or not snapshot.is_leader
            or key not in self.logs
            or _epoch_error(wanted, snapshot) is not None
            or wanted.fetch_offset != self._readable_end(snapshot).offset
        ):
            return None
        cached = self.idle_answers.get(key)
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        data = _answer(wanted, snapshot, ErrorCode.NONE)
        self.idle_answers[key] = (snapshot, data)
        return data


def _next_offset(records: bytes) -> int:
    """The offset after the last batch of `records` (whole batches, as a log read returns):
    the upper bound of the range whose aborted transactions a read_committed fetch lists."""
    position, last = 0, 0
    while (size := batch_size_at(records, position)) is not None:
        last = position
        position += size
    (batch,) = iter_batches(memoryview(records)[last:position], verify_crc=False)
    return batch.last_offset + 1


def _answer(
    wanted: FetchPartition,
    snapshot: PartitionSnapshot | None,
    error: ErrorCode,
    records: bytes = b"",
    aborted: tuple[AbortedTransaction, ...] = (),
) -> FetchPartitionData:
    """A partition's fetch answer: `error`, the snapshot's offsets (-1 without one), and the
    records read (with, read_committed, the aborted transactions they overlap)."""
    return FetchPartitionData(
        topic=wanted.topic,
        partition=wanted.partition,
        error_code=error,
        high_watermark=snapshot.high_watermark.offset if snapshot else -1,
        log_end_offset=snapshot.log_end.offset if snapshot else -1,
        log_start_offset=snapshot.log_start_offset if snapshot else -1,
        records=records,
        last_stable_offset=snapshot.stable_end.offset if snapshot else -1,
        aborted_transactions=aborted,
    )


def _epoch_error(wanted: FetchPartition, snapshot: PartitionSnapshot) -> ErrorCode | None:
    """KIP-320: a fetcher that names a leader epoch older than the leader's is fenced
    (FENCED_LEADER_EPOCH: its metadata is stale); a newer one means this leader has not yet
    learned of its epoch (UNKNOWN_LEADER_EPOCH). None when it names none or the current one."""
    epoch = wanted.current_leader_epoch
    if epoch < 0 or epoch == snapshot.leader_epoch:
        return None
    if epoch < snapshot.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH
