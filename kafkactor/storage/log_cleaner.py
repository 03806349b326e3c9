"""Log compaction: Kafka's ``LogCleaner`` / ``Cleaner`` (0.9-era, on magic-2 batches).

A compacted log (``cleanup.policy=compact``) keeps, for every key, at least its latest record.
Cleaning one log (`LogCleaner.clean`), as Kafka's ``Cleaner.doClean``:

1. **Offset map.** Read the dirty section, [first dirty offset, first uncleanable offset), and
   map every key to the offset of its latest record there (``buildOffsetMap``). The map is an
   exact dict (Kafka's ``SkimpyOffsetMap`` is a fixed-size table of key hashes): the whole dirty
   section is mapped in one pass. The next first dirty offset is one past the map's last offset.
2. **Groups.** The inactive segments from the log start up to that offset are grouped, in order,
   into runs whose `.log`, `.index` and `.timeindex` sizes each fit `segment.bytes` /
   `segment.index.bytes` and whose offsets fit one segment (``groupSegmentsBySize``).
3. **Copy.** Each group is copied into one new segment, `<base>.log.cleaned` (and indexes),
   keeping a record unless the map holds a later offset for its key, or it is a tombstone (null
   value) whose segment is past the delete horizon, or it has no key (``shouldRetainRecord``).
   Batches are re-written as ``MemoryRecords.filterTo`` does (`record_filter`): offsets never
   change, a batch that lost records keeps its base offset and last offset delta, a batch that
   lost all is dropped, except an idempotent producer's last batch, kept as an empty header so
   its sequence survives (Kafka's ``RETAIN_EMPTY``); codecs are kept.
4. **Swap**, crash-safe in Kafka's order (``Log.replaceSegments``): the `.cleaned` files, flushed,
   are renamed `.swap`; the old segments' files are renamed `.deleted`; the `.swap` suffix is
   dropped; the old files are removed. `LogLoader` finishes whatever a crash interrupted: it
   removes `.cleaned` and `.deleted` files and completes a `.swap`.

**Tombstones** are kept while a segment's last-modified time is after the delete horizon: the
last-modified time of the last segment of the clean section minus `delete.retention.ms`
(Kafka's ``deleteHorizonMs``). Kafka keeps a cleaned segment's original mtime; here a cleaned
segment holding dirty data gets the cleaning time, on the log's clock (the time its data entered
the clean section, which Kafka's documentation says the retention counts from), and one made
only of clean segments keeps the mtime of its last one. A segment cleaned for the first time
keeps its tombstones, as Kafka's do in practice (they are newer than every clean segment).

**Transactions** (Kafka's rules, ``CleanedTransactionMetadata``): the dirty section ends at the
first unstable offset too (`cleanable_offsets`); an aborted transaction's records, found through
the `.txnindex` files, are neither mapped nor kept; committed transactional records are
compacted by key like any other; markers are always kept (Kafka removes one once its
transaction's records are gone and `delete.retention.ms` passed), and with them the entries of
the cleaned segments' aborted-transaction indexes.

**Locking.** The map and the cleaned segments are built outside the log's lock, from the old
segments' files (inactive segments are never appended to); only the swap takes the lock.
Kafka 0.9's optimistic check guards it: a log truncated, closed or shortened by retention
meanwhile is not swapped, and the cleaning stops with `LogCleaningAbortedError`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkactor import tracing
from kafkactor.storage.cleaned_transactions import CleanedTransactions
from kafkactor.storage.errors import StorageError, TruncatedBatchError
from kafkactor.storage.log import Log
from kafkactor.storage.log_cleaner_manager import (
    LogCleaningAbortedError,
    LogView,
    SegmentInfo,
    cleanable_offsets,
    describe_segments,
)
from kafkactor.storage.producer_state import increment_sequence
from kafkactor.storage.record_batch import RecordBatch, batch_size_at, iter_batches
from kafkactor.storage.record_filter import BatchRetention, filter_batches
from kafkactor.storage.records import StoredRecord
from kafkactor.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from kafkactor.storage.transaction_index import TXN_INDEX_SUFFIX

__all__ = ["SWAP_STEPS", "CleanerStats", "LogCleaner", "OffsetMap", "group_segments_by_size"]

_log = tracing.get_logger("kafkactor.storage")

_IO_BUFFER = 1024 * 1024  # bytes read at a time (Kafka's log.cleaner.io.buffer.size is 512 KiB)
_MAX_RELATIVE_OFFSET: Final = 2**31 - 1

SWAP_STEPS: Final = ("cleaned", "swap", "deleted", "swapped", "done")
"""The points of a group's swap that `LogCleaner`'s `on_swap_step` hook sees, in order:
the `.cleaned` files are complete; renamed `.swap`; one old segment renamed `.deleted` (once per
old segment); the `.swap` suffix dropped; the old files removed."""


class OffsetMap:
    """Kafka's ``OffsetMap``: the latest offset of every key in the dirty section, and the
    last offset mapped (``latestOffset``). Exact, unbounded (Kafka hashes keys into a
    fixed buffer, ``log.cleaner.dedupe.buffer.size``)."""

    __slots__ = ("_offsets", "latest_offset")

    def __init__(self) -> None:
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key] = offset

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, -1 when it is not in the map."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)

    def __len__(self) -> int:
        return len(self._offsets)


@dataclass(slots=True)
class CleanerStats:
    """Kafka's ``CleanerStats``: what one cleaning of one log read and wrote."""

    first_dirty_offset: int
    end_offset: int = 0  # the next first dirty offset (one past the last offset mapped)
    delete_horizon_ms: int = 0
    map_messages_read: int = 0
    map_bytes_read: int = 0
    keys_mapped: int = 0
    messages_read: int = 0
    bytes_read: int = 0
    messages_written: int = 0
    bytes_written: int = 0
    invalid_messages_read: int = 0  # records without a key: dropped
    segments_read: int = 0
    segments_written: int = 0  # one per group


@dataclass(slots=True)
class _CleanFilter:
    """The record filter of one source segment (Kafka's ``logCleanerFilter``)."""

    offsets: OffsetMap
    retain_deletes: bool
    producer_last_sequences: dict[int, int]
    stats: CleanerStats
    transactions: CleanedTransactions
    aborted: bool = False  # the batch being filtered is an aborted transaction's

    def check_batch_retention(self, batch: RecordBatch) -> BatchRetention:
        # An aborted transaction's batch goes; an idempotent producer's last batch stays, if
        # only as a header, so that its next sequence still follows on (Kafka 0.11+).
        self.aborted = self.transactions.on_batch_read(batch)
        last = increment_sequence(batch.base_sequence, batch.last_offset_delta)
        if batch.producer_id >= 0 and self.producer_last_sequences.get(batch.producer_id) == last:
            return BatchRetention.RETAIN_EMPTY
        return BatchRetention.DELETE if self.aborted else BatchRetention.DELETE_EMPTY

    def should_retain_record(self, batch: RecordBatch, record: StoredRecord) -> bool:
        if self.aborted:
            return False
        if batch.is_control_batch or record.offset > self.offsets.latest_offset:
            return True
        if record.key is None:
            self.stats.invalid_messages_read += 1
            return False
        latest = self.offsets.get(record.key)
        superseded = latest >= 0 and record.offset < latest
        obsolete_delete = not self.retain_deletes and record.value is None
        return not superseded and not obsolete_delete


@dataclass(frozen=True, slots=True)
class _Cleaning:
    """One cleaning of one log: what every group of it shares."""

    log: Log
    view: LogView
    offsets: OffsetMap
    first_dirty: int
    now_ms: int
    stats: CleanerStats
    check: Callable[[], None]


class LogCleaner:
    """Kafka's ``LogCleaner`` and ``Cleaner``: compacts one log at a time (module docstring).

    `clean(log, now_ms)` cleans a compacted log once, whatever its dirty ratio; choosing which
    log to clean, and keeping the first dirty offsets, is `LogCleanerManager`'s. `on_swap_step`
    is called with each name of `SWAP_STEPS` as a swap reaches it (tests raise there to model a
    crash). Holds no state between calls.
    """

    def __init__(
        self,
        *,
        io_buffer_size: int = _IO_BUFFER,
        on_swap_step: Callable[[str], None] | None = None,
    ) -> None:
        if io_buffer_size < 1:
            raise ValueError(f"io_buffer_size must be positive, got {io_buffer_size}")
        self.io_buffer_size = io_buffer_size
        self._step = on_swap_step if on_swap_step is not None else _no_step

    def clean(
        self,
        log: Log,
        now_ms: int,
        first_dirty_offset: int | None = None,
        *,
        check_done: Callable[[], None] | None = None,
    ) -> CleanerStats | None:
        """Clean `log`'s dirty section, from `first_dirty_offset` (default: the log start).

        Returns None when there is nothing to clean (no inactive segment holds a dirty
        offset). Raises `LogCleaningAbortedError` when the log changed under the cleaning or
        `check_done` (called between chunks) raised it; the groups already swapped stay.
        """
        if not log.config.compact:
            raise ValueError(f"{log.topic_partition} is not compacted (cleanup.policy=compact)")
        check = check_done if check_done is not None else _no_check
        try:
            view = describe_segments(log)
        except StorageError as error:  # closed
            raise LogCleaningAbortedError(str(error)) from error
        first_dirty, first_uncleanable = cleanable_offsets(
            view, first_dirty_offset, now_ms, log.config.min_compaction_lag_ms
        )
        dirty = [
            info
            for info in view.inactive
            if info.base_offset < first_uncleanable and info.end_offset > first_dirty
        ]
        if not dirty:
            return None
        stats = CleanerStats(first_dirty_offset=first_dirty)
        aborted = log.collect_aborted_transactions(dirty[0].base_offset, first_uncleanable)
        transactions = CleanedTransactions(aborted)
        offsets = self._build_offset_map(
            dirty, first_dirty, first_uncleanable, stats, check, transactions=transactions
        )
        end = max(offsets.latest_offset + 1, first_dirty)
        if end == first_dirty:
            return None
        stats.end_offset = end
        stats.keys_mapped = len(offsets)
        clean_section = [info for info in view.inactive if info.base_offset < first_dirty]
        stats.delete_horizon_ms = (
            clean_section[-1].last_modified_ms - log.config.delete_retention_ms
            if clean_section
            else 0
        )
        to_clean = [info for info in view.inactive if info.base_offset < end]
        cleaning = _Cleaning(log, view, offsets, first_dirty, now_ms, stats, check)
        for group in group_segments_by_size(
            to_clean, log.config.segment_bytes, log.config.max_index_size, first_uncleanable
        ):
            self._clean_group(cleaning, group)
        _log.info(
            "log_cleaner.cleaned",
            dir=str(log.dir),
            first_dirty_offset=first_dirty,
            end_offset=end,
            bytes_read=stats.bytes_read,
            bytes_written=stats.bytes_written,
            messages_read=stats.messages_read,
            messages_written=stats.messages_written,
        )
        return stats

    # -- the offset map ------------------------------------------------------------------------

    def _build_offset_map(
        self,
        dirty: list[SegmentInfo],
        start: int,
        stop: int,
        stats: CleanerStats,
        check: Callable[[], None],
        *,
        transactions: CleanedTransactions,
    ) -> OffsetMap:
        """The keys of [start, stop); an aborted transaction's records are not mapped."""
        offsets = OffsetMap()
        for info in dirty:
            for batches in self._read_batches(info, check):
                for batch in batches:
                    if batch.base_offset >= stop:  # the first unstable offset: mapped no further
                        return offsets
                    stats.map_bytes_read += batch.size_in_bytes
                    aborted = transactions.on_batch_read(batch)
                    if batch.last_offset < start:
                        continue
                    if not batch.is_control_batch and not aborted:
                        for record in batch.records():
                            stats.map_messages_read += 1
                            if record.key is not None and record.offset >= start:
                                offsets.put(record.key, record.offset)
                    offsets.update_latest_offset(batch.last_offset)
        return offsets

    # -- copying a group -----------------------------------------------------------------------

    def _clean_group(self, cleaning: _Cleaning, group: list[SegmentInfo]) -> None:
        log, stats, check = cleaning.log, cleaning.stats, cleaning.check
        base = group[0].base_offset
        old = [info.segment for info in group]
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):  # a leftover
            (log.dir / (segment_file_name(base, suffix) + CLEANED_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment(
            log.dir,
            base,
            index_interval_bytes=log.config.index_interval_bytes,
            max_index_size=log.config.max_index_size,
            created_ms=cleaning.now_ms,
            file_suffix=CLEANED_SUFFIX,
        )
        swapped = False
        # aborted transactions go only below the cleaning's end, at most the first unstable
        # offset: their markers are replicated (see docs/storage.md)
        transactions = CleanedTransactions(
            log.collect_aborted_transactions(base, cleaning.stats.end_offset)
        )
        try:
            any_dirty = False
            for info in group:
                is_dirty = info.end_offset > cleaning.first_dirty
                any_dirty = any_dirty or is_dirty
                retain_deletes = is_dirty or info.last_modified_ms > stats.delete_horizon_ms
                record_filter = _CleanFilter(
                    cleaning.offsets,
                    retain_deletes,
                    cleaning.view.producer_last_sequences,
                    stats,
                    transactions,
                )
                stats.segments_read += 1
                for batches in self._read_batches(info, check):
                    result = filter_batches(batches, record_filter)
                    stats.messages_read += result.messages_read
                    stats.bytes_read += result.bytes_read
                    stats.messages_written += result.messages_retained
                    stats.bytes_written += result.bytes_retained
                    if result.output:
                        cleaned.append(
                            result.output,
                            largest_offset=result.last_offset,
                            max_timestamp=result.max_timestamp,
                        )
            cleaned.trim_index()
            # markers are kept, so each aborted transaction's entry stays with its marker
            cleaned.txn_index.reset(
                [entry for old_segment in old for entry in old_segment.txn_index.entries]
            )
            modified_ms = cleaning.now_ms if any_dirty else group[-1].last_modified_ms
            os.utime(cleaned.log_path, ns=(modified_ms * 1_000_000, modified_ms * 1_000_000))
            cleaned.flush()
            check()
            self._step("cleaned")
            swapped = log.replace_segments(
                cleaned,
                old,
                cleaning.view.truncations,
                lambda: self._swap_files(log.dir, cleaned, old),
            )
            if not swapped:
                raise LogCleaningAbortedError(
                    f"{log.topic_partition} changed while segments {base}.. were being cleaned"
                )
        except LogCleaningAbortedError:
            cleaned.delete()
            raise
        except BaseException:
            if not swapped:
                cleaned.close()  # the files stay as they are: the next open sorts them out
            raise
        stats.segments_written += 1
        for segment in old:
            segment.delete()  # closed, and its `.deleted` files removed
        self._step("done")

    def _swap_files(self, directory: Path, cleaned: LogSegment, old: list[LogSegment]) -> None:
        """Kafka's crash-safe sequence, run under the log's lock by `Log.replace_segments`."""
        cleaned.change_file_suffixes(CLEANED_SUFFIX, SWAP_SUFFIX)
        _fsync_directory(directory)
        self._step("swap")  # from here on, an open completes the swap
        for segment in old:
            segment.change_file_suffixes("", DELETED_SUFFIX)
            self._step("deleted")
        cleaned.change_file_suffixes(SWAP_SUFFIX, "")
        _fsync_directory(directory)
        self._step("swapped")

    # -- reading a segment ---------------------------------------------------------------------

    def _read_batches(
        self, info: SegmentInfo, check: Callable[[], None]
    ) -> Iterator[list[RecordBatch]]:
        """The batches of a segment's file, a buffer at a time, through a descriptor of its own
        (the log may close or delete the segment meanwhile: then the cleaning is aborted)."""
        try:
            fd = os.open(info.segment.log_path, os.O_RDONLY)
        except FileNotFoundError as error:
            raise LogCleaningAbortedError(f"{error.filename} is gone") from error
        try:
            position = 0
            while position < info.size:
                check()
                data = os.pread(fd, min(self.io_buffer_size, info.size - position), position)
                batches = _whole_batches(data)
                if not batches:  # one batch larger than the buffer: read it whole
                    size = batch_size_at(data)
                    if size is None or position + size > info.size:
                        raise LogCleaningAbortedError(f"{info.segment.log_path} was cut short")
                    data = os.pread(fd, size, position)
                    batches = _whole_batches(data)
                    if not batches:
                        raise LogCleaningAbortedError(f"{info.segment.log_path} was cut short")
                yield batches
                position += batches[-1].position + batches[-1].size_in_bytes
        finally:
            os.close(fd)


def group_segments_by_size(
    segments: list[SegmentInfo], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[SegmentInfo]]:
    """Runs of consecutive segments, each run to be cleaned into one segment (Kafka's
    ``groupSegmentsBySize``): their log bytes within `max_size`, offset index and time index
    bytes each within `max_index_size`, and their offsets within one segment's 2**31 - 1."""
    groups: list[list[SegmentInfo]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size, index_size, time_size = (
            group[0].size,
            group[0].index_bytes,
            group[0].time_index_bytes,
        )
        while rest:
            following = rest[0]
            # the next segment's last offset, bounded by the segment after it (Kafka's estimate)
            last = (rest[1].base_offset if len(rest) > 1 else first_uncleanable) - 1
            if (
                log_size + following.size > max_size
                or index_size + following.index_bytes > max_index_size
                or time_size + following.time_index_bytes > max_index_size
                or last - group[0].base_offset > _MAX_RELATIVE_OFFSET
            ):
                break
            group.append(rest.pop(0))
            log_size += following.size
            index_size += following.index_bytes
            time_size += following.time_index_bytes
        groups.append(group)
    return groups


def _whole_batches(data: bytes) -> list[RecordBatch]:
    batches: list[RecordBatch] = []
    with contextlib.suppress(TruncatedBatchError):
        batches.extend(iter_batches(data))  # CRC-checked: a damaged batch is not re-written
    return batches


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_step(_name: str) -> None:
    return None


def _no_check() -> None:
    return None
