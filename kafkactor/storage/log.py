"""A partition's log, Kafka's ``Log``: appends, reads, truncation, rolls, flushes and retention.

The log is an ordered run of segments in ``<topic>-<partition>/``. Opening one from disk
(finding its segments, recovering them, loading its leader epoch cache) is
``kafkactor.storage.log_loader`` (Kafka's ``LogLoader``); this module is the log from then on.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kafkactor import tracing
from kafkactor.storage.checkpoint import TopicPartition
from kafkactor.storage.compression import CompressionType
from kafkactor.storage.config import LogConfig
from kafkactor.storage.errors import (
    InvalidAppendOffsetError,
    InvalidLogDirectoryError,
    LogClosedError,
    LogStartOffsetOutOfRangeError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kafkactor.storage.leader_epoch import EpochEntry
from kafkactor.storage.log_info import LogAppendInfo, LogOffsetMetadata, LogReadResult
from kafkactor.storage.log_loader import LogLoader
from kafkactor.storage.log_validator import (
    recompressed,
    target_codec,
    validate_batches,
    validate_records,
)
from kafkactor.storage.partition_metadata import PartitionMetadataFile
from kafkactor.storage.producer_batches import StoredProducerBatch, read_producer_batches
from kafkactor.storage.producer_state import DuplicateBatch, ProducerStateManager
from kafkactor.storage.record_batch import (
    RecordBatch,
    iter_batches,
    log_append_time_chunks,
    stamped_chunks,
)
from kafkactor.storage.records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    BytesLike,
    Record,
    build_batch,
)
from kafkactor.storage.segment import BatchHeader, LogSegment
from kafkactor.storage.time_index import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, OffsetAndTimestamp
from kafkactor.storage.transaction_index import collect_aborted_transactions
from kafkactor.storage.transactions import AppendOrigin, CompletedTxn
from kafkactor.timer import Clock, Scheduler, SystemClock

_log = tracing.get_logger("kafkactor.storage")

_MAX_RELATIVE_OFFSET = 2**31 - 1
_T = TypeVar("_T")


def _is_ascii_number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def parse_topic_partition(directory: Path) -> TopicPartition:
    """`<topic>-<partition>` as Kafka names a partition's directory."""
    topic, sep, partition = directory.name.rpartition("-")
    if not sep or not topic or not _is_ascii_number(partition):
        raise InvalidLogDirectoryError(
            f"{directory}: a log directory is named <topic>-<partition>, e.g. events-0"
        )
    return TopicPartition(topic=topic, partition=int(partition))


def _duplicate_append(
    duplicate: DuplicateBatch, batches: list[RecordBatch], log_append_time: bool
) -> LogAppendInfo:
    """The answer to a producer's retry: the original batch's offsets, nothing written. On a
    LogAppendTime log the original batch's max timestamp is its append time."""
    return LogAppendInfo(
        first_offset=duplicate.first_offset,
        last_offset=duplicate.last_offset,
        max_timestamp=duplicate.max_timestamp,
        record_count=sum(batch.record_count for batch in batches),
        batch_count=len(batches),
        size_in_bytes=0,
        duplicate=True,
        log_append_time=duplicate.max_timestamp if log_append_time else NO_TIMESTAMP,
    )


def _stored_headers(
    batches: list[RecordBatch],
    position: int,
    first: int,
    leader_epoch: int | None,
    append_time: int,
) -> list[BatchHeader]:
    """The headers `batches` will have in a segment from file `position` on: restamped with
    offsets from `first` and the leader's epoch (and, when `append_time` is not NO_TIMESTAMP,
    that max timestamp), or (a follower's, no epoch) as they are."""
    headers = []
    offset = first
    for batch in batches:
        size = batch.size_in_bytes
        if leader_epoch is None:
            base, epoch = batch.base_offset, batch.leader_epoch
        else:
            base, epoch = offset, leader_epoch
        last = base + batch.last_offset_delta
        max_timestamp = batch.max_timestamp if append_time == NO_TIMESTAMP else append_time
        headers.append(BatchHeader(position, base, size, last, max_timestamp, epoch))
        position += size
        offset = last + 1
    return headers


class Log:
    """Kafka's `Log`: one partition replica's data as segments in `<topic>-<partition>/`.

    Opening a log loads its segments and recovers the ones at or past `recovery_point` (every
    batch's CRC and structure re-checked, indexes rebuilt, an invalid or partial tail truncated
    and any later segments removed). `clean_shutdown=True` (the LogManager saw the clean
    shutdown marker) skips that. The log's leader epoch cache is then read from
    `leader-epoch-checkpoint` (rebuilt from the batch headers when that file is missing or
    corrupt) and cut to the offsets the log holds, and the idempotent producers' state is
    rebuilt from the batch headers (`producer_state`). That loading is `LogLoader`'s.
    `log_start_offset` is the one the LogManager's `log-start-offset-checkpoint` kept (a
    DeleteRecords may have moved it inside the first segment): the log starts at the larger of
    it and the first segment's base, never past the log end. All methods are thread-safe.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig | None = None,
        recovery_point: int = 0,
        clock: Clock | None = None,
        scheduler: Scheduler | None = None,
        *,
        clean_shutdown: bool = False,
        log_start_offset: int = 0,
    ) -> None:
        self.dir = Path(directory)
        self.topic_partition = parse_topic_partition(self.dir)
        self.config = config if config is not None else LogConfig()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._scheduler = scheduler
        self._lock = threading.RLock()
        self._closed = False
        self._unflushed_records = 0
        self.last_flush_ms = self.clock.now_ms()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._truncations = 0
        loaded = LogLoader(
            self.dir, self.config, self._new_segment, recovery_point, clean_shutdown=clean_shutdown
        ).load()
        self._log_segments = loaded.segments
        # the map and the sorted list themselves: the hot path reads them without a call
        self._segments = loaded.segments.by_base
        self._bases = loaded.segments.bases
        self.recovered_bytes_truncated = loaded.recovered_bytes_truncated
        self._recovery_point = loaded.recovery_point
        self._log_start_offset = loaded.log_start_offset
        self._epochs = loaded.leader_epochs
        checkpointed = min(log_start_offset, self._active.next_offset)
        if checkpointed > self._log_start_offset:  # a DeleteRecords inside the first segment
            self._log_start_offset = checkpointed
            self._epochs.truncate_from_start(checkpointed)
        self._producers = loaded.producer_state
        for base in self._bases[:-1]:  # only the active segment's index keeps preallocated room
            self._segments[base].trim_index()
        self._roll_jitter_ms = self._random_segment_jitter()
        # KIP-516: the id of the topic this log was written for, as its directory records it
        self.partition_metadata = PartitionMetadataFile(self.dir)
        self.topic_id: uuid.UUID | None = (
            None if loaded.empty_directory else self.partition_metadata.read()
        )
        # A topic id assigned but not yet in `partition.metadata` (`_maybe_flush_metadata_file`),
        # and the lock its writers take: not the log's, so appends never wait on its fsync.
        self._unflushed_topic_id: uuid.UUID | None = None
        self._metadata_lock = threading.Lock()

    # -- segments ------------------------------------------------------------------------------

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.max_index_size,
            created_ms=self.clock.now_ms(),
            # an empty new log creates its files at its first write (LogSegment's defer_files)
            defer_files=base_offset == 0,
        )  # recovery bounds batches by the format only: a lowered max_message_bytes loses nothing

    def _random_segment_jitter(self) -> int:
        """Kafka's `randomSegmentJitter`: how much sooner than `segment.ms` the active segment
        rolls by time, drawn when it becomes active, below `segment.jitter.ms` and
        `segment.ms`."""
        jitter = self.config.segment_jitter_ms
        if jitter == 0:
            return 0
        return random.randrange(min(jitter, self.config.segment_ms))

    def update_config(self, config: LogConfig) -> LogConfig:
        """Kafka's `Log.updateConfig` (a dynamic topic config): from now on appends, rolls,
        new segments' indexes, retention and the cleaner read `config`; returns the old one."""
        with self._lock:
            old, self.config = self.config, config
        return old

    @property
    def _active(self) -> LogSegment:
        return self._segments[self._bases[-1]]

    @property
    def segments(self) -> list[LogSegment]:
        """The segments, oldest first (for inspection; do not mutate)."""
        with self._lock:
            return [self._segments[base] for base in self._bases]

    @property
    def num_segments(self) -> int:
        return len(self._bases)

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments.values())

    # -- offsets -------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        """The offset the next append gets (LEO).

        Read without the lock (it is on every hot path); a reader that catches a truncation
        removing segments half-way reads again under the lock."""
        try:
            return self._active.next_offset
        except (IndexError, KeyError):
            with self._lock:
                return self._active.next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        with self._lock:
            active = self._active
            return LogOffsetMetadata(
                offset=active.next_offset,
                segment_base_offset=active.base_offset,
                position=active.size,
            )

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    def maybe_increment_log_start_offset(
        self, offset: int, reason: str, *, high_watermark: int | None = None
    ) -> bool:
        """Move the log start offset up to `offset` (Kafka's `maybeIncrementLogStartOffset`);
        returns whether it moved. It never moves back, and never past `high_watermark` (the
        partition's, given by the caller; the log end when None): that raises
        `LogStartOffsetOutOfRangeError` with Kafka's message. Reads below the new start are
        out of range and ListOffsets' earliest answers it at once; the segments wholly below it
        go at the next retention pass (`delete_old_segments`), as in Kafka. `reason` names why
        (Kafka's `LogStartOffsetIncrementReason`: `ClientRecordDeletion` for DeleteRecords,
        `LeaderOffsetIncremented` for a follower following its leader).
        """
        with self._lock:
            self._check_open()
            end = self.log_end_offset
            bound = end if high_watermark is None else min(high_watermark, end)
            if offset > bound:
                raise LogStartOffsetOutOfRangeError(offset, str(self.topic_partition), bound)
            if offset <= self._log_start_offset:
                return False
            self._log_start_offset = offset
            self._epochs.truncate_from_start(offset)
            self._producers.on_log_start_offset(offset)
            _log.info(
                "log.start_offset_incremented",
                dir=str(self.dir),
                log_start_offset=offset,
                reason=reason,
            )
            return True

    @property
    def first_segment_base_offset(self) -> int:
        """The base offset of the oldest segment: the log start offset unless a DeleteRecords
        (or a follower's leader) moved it inside that segment."""
        with self._lock:
            return self._bases[0]

    @property
    def recovery_point(self) -> int:
        """Every offset below this is flushed to disk; recovery starts here after a crash."""
        return self._recovery_point

    # -- appends -------------------------------------------------------------------------------

    def append_as_leader(
        self,
        records: Sequence[Record] | BytesLike,
        leader_epoch: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append records as the partition leader, assigning offsets from the log end.

        `records` is a list of `Record`s (built into one batch) or the bytes of one or more
        batches from a producer (validated, then re-stamped with offsets and the leader epoch).
        Batches of an idempotent producer are checked against the producer state first
        (`ProducerStateManager.validate_leader_append`): a retry of a batch already in the log
        is answered with its offsets (`LogAppendInfo.duplicate`) and nothing is written. Only
        `origin=AppendOrigin.COORDINATOR` may append transaction markers (control batches).
        """
        self._maybe_flush_metadata_file()
        with self._lock:
            self._check_open()
            first = self.log_end_offset
            config = self.config
            now = self.clock.now_ms()  # the append time, and what timestamps are checked by
            if isinstance(records, bytes | bytearray | memoryview):
                # Untrusted producer bytes: every record's framing is checked (Kafka's
                # LogValidator walks the records of an uncompressed batch too), where they are.
                # The write then restamps each batch's first 16 bytes and sends the rest of
                # the producer's bytes as they came: no copy of the records.
                batches = self._validated(records, deep=True)
                validate_batches(
                    batches,
                    str(self.topic_partition),
                    config,
                    now,
                    from_client=origin is AppendOrigin.CLIENT,
                )
                codec = target_codec(config)
                if codec is not None:
                    batches = [recompressed(batch, codec) or batch for batch in batches]
                duplicate = self._producers.validate_leader_append(batches, origin)
                if duplicate is not None:
                    return _duplicate_append(duplicate, batches, config.log_append_time)
                if config.log_append_time:
                    # Kafka's setMaxTimestamp(LOG_APPEND_TIME, now): the header is rewritten
                    # and its CRC recomputed; the records are still not copied.
                    chunks, end = log_append_time_chunks(batches, first, leader_epoch, now)
                    append_time = now
                else:
                    chunks, end = stamped_chunks(batches, first, leader_epoch)
                    append_time = NO_TIMESTAMP
                info = self._append(
                    chunks, batches, first, end - 1, leader_epoch, append_time=append_time
                )
                offset = first
                stamped = None if append_time == NO_TIMESTAMP else append_time
                for batch in batches:  # their views still hold the producer's base offsets
                    last = offset + batch.last_offset_delta
                    completed = self._producers.update(batch, offset, last, stamped)
                    if completed is not None:
                        self._index_completed(completed)
                    offset = last + 1
                return info
            if not records:
                raise ValueError("an append needs at least one record")
            validate_records(records, str(self.topic_partition), config, now, first)
            codec = target_codec(config)
            compression = codec if codec is not None else CompressionType.NONE
            if config.log_append_time:
                built = build_batch(
                    records,
                    first,
                    leader_epoch,
                    timestamp_type=LOG_APPEND_TIME,
                    log_append_time_ms=now,
                    compression=compression,
                )
            else:
                built = build_batch(records, first, leader_epoch, compression=compression)
            return self._append(
                [built],
                [RecordBatch(built, verify_crc=False)],
                first,
                first + len(records) - 1,
                leader_epoch,
                append_time=now if config.log_append_time else NO_TIMESTAMP,
            )

    def append_as_follower(self, records: BytesLike) -> LogAppendInfo:
        """Append a leader's batches as they are; their offsets must start at or past the LEO.

        The leader epoch cache learns each epoch newer than its latest from the batches, and the
        producer state takes the idempotent producers' batches and the transaction markers,
        unvalidated (an aborted transaction is indexed as the leader did).
        """
        self._maybe_flush_metadata_file()
        with self._lock:
            self._check_open()
            # The leader validated every record; like Kafka's follower we check CRC and headers.
            batches = self._validated(records, deep=False)
            expected = self.log_end_offset
            for batch in batches:
                if batch.base_offset < expected:
                    raise InvalidAppendOffsetError(
                        f"{self.topic_partition}: batch at offset {batch.base_offset} does not "
                        f"follow offset {expected - 1}"
                    )
                expected = batch.last_offset + 1
            info = self._append(
                [records],
                batches,
                batches[0].base_offset,
                batches[-1].last_offset,
                None,
                append_time=NO_TIMESTAMP,
            )
            for completed in self._producers.update_from_batches(batches):
                self._index_completed(completed)
            return info

    def _index_completed(self, completed: CompletedTxn) -> None:
        """An aborted transaction's marker was just appended: index it in its segment."""
        if completed.is_aborted:
            self._active.txn_index.append(completed.aborted_txn())

    def _validated(self, records: BytesLike, *, deep: bool) -> list[RecordBatch]:
        batches = list(iter_batches(records, deep=deep))
        if not batches:
            raise ValueError("an append needs at least one record batch")
        return batches

    def _append(
        self,
        chunks: list[BytesLike],
        batches: list[RecordBatch],
        first: int,
        last: int,
        leader_epoch: int | None,
        *,
        append_time: int,
    ) -> LogAppendInfo:
        """Write validated batches, whose bytes are `chunks` back to back; `leader_epoch` is
        the leader's (the batches are stored with offsets from `first` and that epoch), None
        for a follower (stored as they are). `append_time` is the max timestamp a
        LogAppendTime leader stamped into every batch, else NO_TIMESTAMP."""
        size = 0
        for batch in batches:
            size += batch.size_in_bytes
            if batch.size_in_bytes > self.config.max_message_bytes:
                raise RecordTooLargeError(
                    f"{self.topic_partition}: batch of {batch.size_in_bytes} bytes exceeds "
                    f"max_message_bytes={self.config.max_message_bytes}"
                )
        # As in Kafka, the epoch is recorded before the records are written: the checkpoint
        # may then run ahead of the log after a crash (cut back on open), never behind it.
        if leader_epoch is None:
            for batch in batches:
                if batch.leader_epoch > self._epochs.latest_epoch:
                    self._epochs.assign(batch.leader_epoch, batch.base_offset)
        elif leader_epoch >= 0:
            self._epochs.assign(leader_epoch, first)
        if append_time == NO_TIMESTAMP:
            max_timestamp = max(batch.max_timestamp for batch in batches)
        else:
            max_timestamp = append_time
        records = sum(batch.record_count for batch in batches)
        segment = self._maybe_roll(size, first, last, max_timestamp)
        segment.append_batches(
            chunks,
            _stored_headers(batches, segment.size, first, leader_epoch, append_time),
            largest_offset=last,
            max_timestamp=max_timestamp,
        )
        self._unflushed_records += records
        limit = self.config.flush_interval_messages
        if limit is not None and self._unflushed_records >= limit:
            self.flush()
        return LogAppendInfo(
            first_offset=first,
            last_offset=last,
            max_timestamp=max_timestamp,
            record_count=records,
            batch_count=len(batches),
            size_in_bytes=size,
            log_append_time=append_time,
        )

    def _maybe_roll(
        self, size: int, first_offset: int, last_offset: int, max_timestamp: int
    ) -> LogSegment:
        segment = self._active
        if segment.size == 0:
            reason = None
        elif segment.size + size > self.config.segment_bytes:
            reason = "segment_bytes"
        elif (
            self._time_waited_for_roll(segment, max_timestamp)
            >= self.config.max_segment_ms - self._roll_jitter_ms
        ):
            reason = "segment_ms"
        elif segment.index.is_full:
            reason = "index_full"
        elif last_offset - segment.base_offset > _MAX_RELATIVE_OFFSET:
            reason = "offset_overflow"
        else:
            reason = None
        if reason is None:
            if segment.size == 0 and first_offset != segment.base_offset:
                # an empty active segment whose base no longer matches (follower gap): replace it
                self._log_segments.remove(segment.base_offset).delete()
                segment = self._new_segment(first_offset)
                self._log_segments.add(segment)
                if len(self._bases) == 1:
                    self._log_start_offset = first_offset
                    self._epochs.truncate_from_start(first_offset)
            return segment
        _log.info("log.roll", dir=str(self.dir), reason=reason, new_base_offset=first_offset)
        return self._roll(first_offset)

    def _time_waited_for_roll(self, segment: LogSegment, max_timestamp: int) -> int:
        # Kafka's rule: the incoming batches' max timestamp against the segment's first batch
        # timestamp when both exist (so replayed old data does not roll on every append), else
        # the log's clock against the segment's creation time.
        first = segment.first_batch_timestamp()
        if first is not None and max_timestamp >= 0:
            return max_timestamp - first
        return self.clock.now_ms() - segment.created_ms

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (an empty active one is kept)."""
        with self._lock:
            self._check_open()
            if self._active.size == 0:
                return self._active
            return self._roll(self.log_end_offset)

    def _roll(self, base_offset: int) -> LogSegment:
        old = self._active
        new = self._new_segment(base_offset)
        self._log_segments.add(new)
        self._roll_jitter_ms = self._random_segment_jitter()
        old.trim_index()
        # Kafka flushes the finished segment right after a roll, asynchronously: an append must
        # not wait for an fsync. Without a scheduler the flush happens here.
        self._in_background("flush-log", lambda: self._flush_quietly(base_offset))
        return new

    def _in_background(self, name: str, task: Callable[[], None]) -> None:
        """Run `task` on the scheduler (named `name`), or here when there is none running."""
        if self._scheduler is not None and self._scheduler.is_started:
            self._scheduler.schedule(name, task)
        else:
            task()

    def _flush_quietly(self, offset: int) -> None:
        with contextlib.suppress(LogClosedError):
            self.flush(offset)

    # -- reads ---------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> LogReadResult:
        """Whole batches from the one holding `start_offset`, never reaching `max_offset`.

        `max_offset` is exclusive (consumers pass the high watermark). Raises
        `OffsetOutOfRangeError` outside [log start offset, log end offset].
        """
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        with self._lock:
            self._check_open()
            end = self.log_end_offset
            if start_offset < self._log_start_offset or start_offset > end:
                raise OffsetOutOfRangeError(start_offset, self._log_start_offset, end)
            if start_offset == end:
                return LogReadResult(
                    records=b"", fetch_offset_metadata=self.log_end_offset_metadata
                )
            for base in self._bases[max(self._log_segments.floor_index(start_offset), 0) :]:
                segment = self._segments[base]
                found = segment.read(
                    start_offset, max_bytes, max_offset, min_one_batch=min_one_batch
                )
                if found is not None:
                    data, position = found
                    metadata = LogOffsetMetadata(
                        offset=start_offset, segment_base_offset=base, position=position
                    )
                    return LogReadResult(records=data, fetch_offset_metadata=metadata)
            return LogReadResult(records=b"", fetch_offset_metadata=self.log_end_offset_metadata)

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Where `offset` sits (Kafka's convertToOffsetMetadata), e.g. for the high watermark."""
        with self._lock:
            self._check_open()
            end = self.log_end_offset
            if offset >= end:
                return self.log_end_offset_metadata
            if offset < self._log_start_offset:
                raise OffsetOutOfRangeError(offset, self._log_start_offset, end)
            for base in self._bases[max(self._log_segments.floor_index(offset), 0) :]:
                header = self._segments[base].find_batch(offset)  # no data is read
                if header is not None:
                    return LogOffsetMetadata(
                        offset=offset, segment_base_offset=base, position=header.position
                    )
            return self.log_end_offset_metadata

    def fetch_offset_by_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """ListOffsets against this log (Kafka's `fetchOffsetByTimestamp`).

        `EARLIEST_TIMESTAMP` (-2) answers the log start offset and `LATEST_TIMESTAMP` (-1) the
        log end offset, both with timestamp -1. Any other target (>= 0) answers the first record
        at or past the log start whose timestamp is >= it, searching only the segments whose
        largest timestamp reaches it (through their time indexes); None when no record is that
        late. Bounding the answer by the high watermark is the caller's, as in Kafka.
        """
        if timestamp < 0 and timestamp not in (EARLIEST_TIMESTAMP, LATEST_TIMESTAMP):
            raise ValueError(f"invalid timestamp {timestamp} for a ListOffsets lookup")
        with self._lock:
            self._check_open()
            if timestamp == EARLIEST_TIMESTAMP:
                return OffsetAndTimestamp(self._log_start_offset, NO_TIMESTAMP)
            if timestamp == LATEST_TIMESTAMP:
                return OffsetAndTimestamp(self.log_end_offset, NO_TIMESTAMP)
            for base in self._bases:
                segment = self._segments[base]
                if segment.max_timestamp >= timestamp:
                    found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
                    if found is not None:
                        return found
            return None

    # -- truncation, flush, retention ----------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or past `offset` (a follower cutting a suffix its leader lacks).

        A batch holding `offset` is removed whole, so the new log end is `offset`, or that
        batch's base offset when the cut fell inside it. The leader epochs starting at or past
        the new log end are forgotten, and the producer state is rebuilt from the remaining log
        when a producer's batch was removed. An offset below the log start empties the log and
        starts it there (see `truncate_fully_and_start_at`); one at or past the log end changes
        nothing. Returns whether anything was removed.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset ({offset})")
        with self._lock:
            self._check_open()
            if offset >= self.log_end_offset:
                return False
            self._truncations += 1
            if offset < self._log_start_offset or offset < self._bases[0]:
                self._truncate_fully_and_start_at(offset)
                return True
            for base in [b for b in self._bases if b > offset]:
                self._log_segments.remove(base).delete()
            active = self._active
            cut = active.find_batch(offset)
            active.truncate_to(offset)
            new_end = offset if cut is None or cut.base_offset >= offset else cut.base_offset
            active.set_log_end(new_end)
            self._recovery_point = min(self._recovery_point, self.log_end_offset)
            self._epochs.truncate_from_end(new_end)
            self._producers.truncate_to(new_end, self._stored_producer_batches)
            _log.info(
                "log.truncated",
                dir=str(self.dir),
                offset=offset,
                log_end=new_end,
                log_end_offset=new_end,
            )
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Remove every segment and start an empty log at `offset` (truncateFullyAndStartAt).

        The log start, log end and recovery point all become `offset`, wherever it lies against
        the old log: what a follower does when the leader's log starts past its own log end, or
        when nothing it holds can be kept. The leader epoch cache is cleared.
        """
        if offset < 0:
            raise ValueError(f"cannot start a log at a negative offset ({offset})")
        with self._lock:
            self._check_open()
            self._truncations += 1
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for base in list(self._bases):
            self._log_segments.remove(base).delete()
        self._log_segments.add(self._new_segment(offset))
        self._log_start_offset = offset
        self._recovery_point = offset
        self._epochs.clear()
        self._producers.clear()
        _log.info("log.truncated_fully", dir=str(self.dir), log_start_offset=offset)

    def flush(self, offset: int | None = None) -> None:
        """Fsync every segment holding offsets below `offset` (default: the log end).

        The fsyncs run outside the log's lock, on duplicated file descriptors, so appends and
        reads go on meanwhile and a segment deleted in between is harmless.
        """
        self._maybe_flush_metadata_file()
        with self._lock:
            self._check_open()
            target = self.log_end_offset if offset is None else offset
            if target <= self._recovery_point:
                return
            truncations = self._truncations
            first = max(self._log_segments.floor_index(self._recovery_point), 0)
            segments = [self._segments[base] for base in self._bases[first:] if base < target]
            fds = [fd for segment in segments for fd in segment.dup_fds()]
        try:
            for fd in fds:
                os.fsync(fd)
        finally:
            for fd in fds:
                os.close(fd)
        with self._lock:
            if self._truncations != truncations:
                return  # truncated meanwhile: what is now below `target` may not be on disk
            self._recovery_point = max(self._recovery_point, min(target, self.log_end_offset))
            self._unflushed_records = 0
            self.last_flush_ms = self.clock.now_ms()
        _log.info("log.flush", dir=str(self.dir), log_end_offset=target, segments=len(segments))

    def delete_old_segments(self) -> int:
        """Apply retention; returns the number of segments deleted.

        Only whole, inactive segments are deleted, oldest first: first those wholly below the
        log start offset (a DeleteRecords moved it past them: Kafka's
        `deleteLogStartOffsetBreachedSegments`, whatever the cleanup policy), then by age and by
        size; the log start offset moves to the first remaining segment when that is later.
        A log whose `cleanup.policy` lacks `delete` (compact only) keeps every other segment,
        as Kafka's `deleteOldSegments`.
        """
        with self._lock:
            self._check_open()
            deleted = self._delete_log_start_offset_breached()
            if self.config.delete:
                deleted += self._delete_expired_by_age() + self._delete_beyond_size()
            if deleted:
                self._log_start_offset = max(self._log_start_offset, self._bases[0])
                self._epochs.truncate_from_start(self._log_start_offset)
                self._producers.on_log_start_offset(self._log_start_offset)
                _log.info(
                    "log.retention",
                    dir=str(self.dir),
                    segments_deleted=deleted,
                    log_start_offset=self._log_start_offset,
                )
            return deleted

    def _delete_log_start_offset_breached(self) -> int:
        deleted = 0
        while len(self._bases) > 1 and self._bases[1] <= self._log_start_offset:
            self._log_segments.remove(self._bases[0]).delete()
            deleted += 1
        return deleted

    def _delete_expired_by_age(self) -> int:
        if self.config.retention_ms < 0:
            return 0
        horizon = self.clock.now_ms() - self.config.retention_ms
        deleted = 0
        while len(self._bases) > 1:
            oldest = self._segments[self._bases[0]]
            if oldest.retention_timestamp() >= horizon:
                break
            self._log_segments.remove(oldest.base_offset).delete()
            deleted += 1
        return deleted

    def _delete_beyond_size(self) -> int:
        if self.config.retention_bytes < 0:
            return 0
        excess = self.size_in_bytes - self.config.retention_bytes
        deleted = 0
        while len(self._bases) > 1:
            oldest = self._segments[self._bases[0]]
            if excess - oldest.size < 0:
                break
            excess -= oldest.size
            self._log_segments.remove(oldest.base_offset).delete()
            deleted += 1
        return deleted

    # -- compaction (the log cleaner's side: kafkactor.storage.log_cleaner) ----------------------

    @property
    def truncations(self) -> int:
        """How many truncations the log has seen: a clean built meanwhile is not swapped in."""
        return self._truncations

    def read_segments(self, reader: Callable[[list[LogSegment]], _T]) -> _T:
        """`reader(segments)` under the log's lock, the segments oldest first (the last one
        active): the cleaner's consistent view of them. `reader` must not keep using the
        segments after it returns; it opens its own descriptors to read their files later."""
        with self._lock:
            self._check_open()
            return reader([self._segments[base] for base in self._bases])

    def replace_segments(
        self,
        new_segment: LogSegment,
        old_segments: Sequence[LogSegment],
        expected_truncations: int,
        swap_files: Callable[[], None],
    ) -> bool:
        """Put a cleaned segment in place of `old_segments` (Kafka's `replaceSegments`).

        Under the lock: unless the log was closed or truncated since the cleaner read it
        (`expected_truncations`) or one of `old_segments` has left it (retention), call
        `swap_files()` (the cleaner's crash-safe renames) and then replace the segments in the
        segment map. The old segments' files may have been renamed but are not closed: the
        caller closes and removes them. Returns False, touching nothing, when the log changed.
        """
        with self._lock:
            if (
                self._closed
                or self._truncations != expected_truncations
                or any(self._segments.get(old.base_offset) is not old for old in old_segments)
                or not old_segments
                or new_segment.base_offset != old_segments[0].base_offset
                or old_segments[-1].base_offset == self._bases[-1]  # never the active segment
            ):
                return False
            swap_files()
            for old in old_segments:
                self._log_segments.remove(old.base_offset)
            self._log_segments.add(new_segment)
            return True

    # -- leader epochs -------------------------------------------------------------------------

    @property
    def leader_epochs(self) -> tuple[EpochEntry, ...]:
        """The leader epoch cache's entries, oldest epoch first."""
        with self._lock:
            return self._epochs.entries

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch this log knows (UNDEFINED_EPOCH when none)."""
        with self._lock:
            return self._epochs.latest_epoch

    def check_or_set_topic_id(self, topic_id: uuid.UUID) -> bool:
        """Kafka 2.8's `Partition.checkOrSetTopicId`: False when the directory records another
        topic's id; otherwise True, writing `partition.metadata` first if it records none."""
        with self._lock:
            if self.topic_id is None:
                self.topic_id = self._unflushed_topic_id = topic_id
                self._in_background("flush-metadata-file", self._maybe_flush_metadata_file)
            return self.topic_id == topic_id

    def _maybe_flush_metadata_file(self) -> None:
        """Write `partition.metadata` if a topic id is recorded but not yet written (Kafka's
        `maybeFlushMetadataFile`): on the scheduler right after the id is assigned, and before
        the first append and on close, so no record reaches the disk without its topic id."""
        if self._unflushed_topic_id is None:
            return
        with self._metadata_lock:
            topic_id = self._unflushed_topic_id
            if topic_id is None or self._closed:
                return
            self.partition_metadata.write(topic_id)
            self._unflushed_topic_id = None

    def assign_leader_epoch(self, epoch: int) -> bool:
        """Record that leader epoch `epoch` starts at the log end; returns whether it was new.

        What a replica becoming leader does at once (Kafka 2.1+), before any record of its
        epoch arrives, so OffsetsForLeaderEpoch answers for its epoch right away. An epoch at or
        below the latest known changes nothing.
        """
        with self._lock:
            self._check_open()
            return self._epochs.assign(epoch, self.log_end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: `(epoch, end offset)` for a requested epoch, against the LEO.

        See `LeaderEpochCache.end_offset_for`.
        """
        with self._lock:
            return self._epochs.end_offset_for(epoch, self.log_end_offset)

    # -- idempotent producers ------------------------------------------------------------------

    @property
    def producer_state(self) -> ProducerStateManager:
        """The idempotent producers' state (for inspection; do not mutate)."""
        return self._producers

    # -- transactions (the producer state's open transactions, the segments' .txnindex) --------

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's high watermark is now `high_watermark` (call it whenever it moves,
        and when the partition learns it): transactions completed below it become stable."""
        with self._lock:
            self._producers.on_high_watermark(high_watermark)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction that is open or whose marker the HW
        has not passed, at least the log start (Kafka's firstUnstableOffset); None if none."""
        if self._producers.transactions.is_empty:  # the common case, without the lock
            return None
        with self._lock:
            first = self._producers.first_unstable_offset
            return None if first is None else max(first, self._log_start_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO (Kafka's lastStableOffset): the first unstable offset when it is below
        `high_watermark`, else the high watermark. read_committed consumers read below it."""
        first = self.first_unstable_offset
        return high_watermark if first is None or first >= high_watermark else first

    def collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int
    ) -> list[tuple[int, int]]:
        """`(producer id, first offset)` of the aborted transactions overlapping
        [start_offset, upper_bound_offset), from the `.txnindex` of the segment holding
        `start_offset` on: what a read_committed fetch answers (Kafka's
        collectAbortedTransactions)."""
        with self._lock:
            self._check_open()
            first = max(self._log_segments.floor_index(start_offset), 0)
            indexes = [self._segments[base].txn_index for base in self._bases[first:]]
            found = collect_aborted_transactions(indexes, start_offset, upper_bound_offset)
        return [(txn.producer_id, txn.first_offset) for txn in found]

    def _stored_producer_batches(self) -> list[StoredProducerBatch]:
        return [
            batch
            for segment in (self._segments[base] for base in self._bases)
            for batch in read_producer_batches(segment.log_path, segment.size)
        ]

    # -- lifecycle -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.dir}: the log is closed")

    def close(self) -> None:
        """Close every segment (trimming indexes). Does not flush: call `flush()` first."""
        self._maybe_flush_metadata_file()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for segment in self._segments.values():
                segment.close()

    def crash(self, *, lose_unflushed: bool = False) -> None:
        """Close the log as a crashed broker would: no flush, nothing written on the way out.

        A killed process leaves what it wrote in the page cache, so a plain crash keeps every
        append. `lose_unflushed=True` models an OS crash or power loss: the segment files lose
        every batch at or past the recovery point (what was never fsynced). The segment holding
        it is cut before its first batch reaching the recovery point (its index cut to match),
        and the later segments are deleted. Checkpoint files stay as written: they were fsynced.
        """
        with self._lock:
            if self._closed:
                return
            if lose_unflushed:
                self._lose_unflushed()
            self.close()

    def _lose_unflushed(self) -> None:
        point = self._recovery_point
        holding = max(self._log_segments.floor_index(point), 0)
        for base in self._bases[holding + 1 :]:
            self._log_segments.remove(base).delete()
        self._active.truncate_to(point)  # the index entries past the cut go with the bytes

    def delete(self) -> None:
        """Close the log and remove its directory."""
        with self._lock:
            self.close()
            for segment in self._segments.values():
                segment.delete()
            for leftover in self.dir.iterdir():
                leftover.unlink()
            self.dir.rmdir()

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, start={self._log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._bases)})"
        )
