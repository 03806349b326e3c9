"""Which compacted log to clean next, and how far each is clean: Kafka's ``LogCleanerManager``.

A compacted log is a clean section (cleaned before, each key at most once) followed by a dirty
section; the first dirty offset of every log is kept in the data directory's
``cleaner-offset-checkpoint`` (Kafka's file and format, written after each cleaning). The dirty
section ends at the first uncleanable offset: the active segment's base offset, or earlier, the
base of the first dirty segment holding a record younger than ``min.compaction.lag.ms``.

The log to clean is the one with the highest dirty ratio, cleanable bytes over the log's bytes
(Kafka's ``LogToClean.cleanableRatio``), among the compacted logs whose ratio is above their
``min.cleanable.dirty.ratio``. A checkpointed offset outside the log (below its start, or past
its end after a truncation) starts the dirty section at the log start again, as Kafka does when
it is below; so does a truncation this process saw since the log was last chosen (Kafka cuts the
checkpoint when its LogManager truncates a log instead).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkactor import tracing
from kafkactor.storage.checkpoint import CheckpointError, OffsetCheckpoint, TopicPartition
from kafkactor.storage.errors import StorageError
from kafkactor.storage.log import Log
from kafkactor.storage.segment import LogSegment

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "LogCleanerManager",
    "LogCleaningAbortedError",
    "LogToClean",
    "LogView",
    "SegmentInfo",
    "cleanable_offsets",
    "describe_segments",
]

_log = tracing.get_logger("kafkactor.storage")

CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
"""The file, in a data directory, holding each compacted log's first dirty offset."""


class LogCleaningAbortedError(StorageError):
    """A cleaning that stopped before its end (Kafka's ``LogCleaningAbortedException``).

    The log was truncated, closed, deleted or lost a segment to retention while it was being
    cleaned, or the cleaning was aborted; the groups of segments swapped in before stay, and
    the first dirty offset does not move.
    """


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What the cleaner needs of one segment, read under its log's lock."""

    segment: LogSegment
    base_offset: int
    end_offset: int
    """The next segment's base offset (the log end for the active one): offsets are below it."""
    size: int
    index_bytes: int
    time_index_bytes: int
    largest_timestamp: int
    """Kafka's ``largestTimestamp``: the largest record timestamp, else the file's mtime."""
    last_modified_ms: int
    """Kafka's ``lastModified``: the `.log` file's mtime (the cleaner sets it on what it writes)."""
    first_batch_timestamp: int = -1
    """The first batch's max timestamp (-1: none), what `max.compaction.lag.ms` counts from."""


@dataclass(frozen=True, slots=True)
class LogView:
    """A log's segments as one moment saw them (the last one active)."""

    segments: list[SegmentInfo]
    truncations: int
    log_end_offset: int
    producer_last_sequences: dict[int, int]
    first_unstable_offset: int | None = None
    """Where the log's earliest open (or unreplicated) transaction starts: never cleaned."""

    @property
    def inactive(self) -> list[SegmentInfo]:
        return self.segments[:-1]

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset

    @property
    def active_base(self) -> int:
        return self.segments[-1].base_offset


def describe_segments(log: Log) -> LogView:
    """`log`'s segments, truncation count and producers' last sequences, read together."""

    def read(segments: list[LogSegment]) -> LogView:
        log_end = segments[-1].next_offset
        ends = [segment.base_offset for segment in segments[1:]] + [log_end]
        infos = [
            SegmentInfo(
                segment=segment,
                base_offset=segment.base_offset,
                end_offset=end,
                size=segment.size,
                index_bytes=segment.index.size_in_bytes,
                time_index_bytes=segment.time_index.size_in_bytes,
                largest_timestamp=segment.retention_timestamp(),
                last_modified_ms=os.stat(segment.log_path).st_mtime_ns // 1_000_000,
                first_batch_timestamp=_or_none(segment.first_batch_timestamp()),
            )
            for segment, end in zip(segments, ends, strict=True)
        ]
        producers = {pid: e.last_sequence for pid, e in log.producer_state.producers.items()}
        return LogView(infos, log.truncations, log_end, producers, log.first_unstable_offset)

    return log.read_segments(read)


def _or_none(timestamp: int | None) -> int:
    return -1 if timestamp is None else timestamp


def max_compaction_delay(
    view: LogView, first_dirty: int, now_ms: int, max_compaction_lag_ms: int
) -> int:
    """Kafka's ``maxCompactionDelay`` (KIP-354): how long past `max.compaction.lag.ms` the
    oldest dirty inactive segment's first batch is; 0 when none is past it."""
    dirty = [
        info.first_batch_timestamp
        for info in _from_floor(view.inactive, first_dirty)
        if info.first_batch_timestamp > 0
    ]
    if not dirty:
        return 0
    clean_until = now_ms - max(max_compaction_lag_ms, 0)
    return max(0, clean_until - min(dirty))


def cleanable_offsets(
    view: LogView, checkpointed: int | None, now_ms: int, min_compaction_lag_ms: int
) -> tuple[int, int]:
    """The dirty section to clean: [first dirty offset, first uncleanable offset).

    Kafka's ``LogCleanerManager.cleanableOffsets``: the dirty section ends at the active
    segment, the first unstable offset (a transaction still open, or whose marker is not
    replicated yet, is never cleaned) and the first segment within `min.compaction.lag.ms`.
    """
    start = view.log_start_offset
    first_dirty = checkpointed if checkpointed is not None else start
    if not start <= first_dirty <= view.log_end_offset:
        first_dirty = start  # below the start (retention) or past the end (a truncation)
    first_uncleanable = view.active_base
    if view.first_unstable_offset is not None:
        first_uncleanable = min(first_uncleanable, view.first_unstable_offset)
    if min_compaction_lag_ms > 0:
        horizon = now_ms - min_compaction_lag_ms
        for info in _from_floor(view.inactive, first_dirty):
            if info.largest_timestamp > horizon:
                first_uncleanable = info.base_offset
                break
    return first_dirty, first_uncleanable


def _from_floor(infos: list[SegmentInfo], offset: int) -> list[SegmentInfo]:
    """The segments from the one holding `offset` on (Kafka's ``logSegments(offset, ...)``)."""
    first = 0
    for i, info in enumerate(infos):
        if info.base_offset <= offset:
            first = i
    return infos[first:]


@dataclass(frozen=True, slots=True)
class LogToClean:
    """Kafka's ``LogToClean``: one compacted log's clean and cleanable bytes, and its dirty
    section [first dirty offset, first uncleanable offset)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int = 0
    """How long past `max.compaction.lag.ms` its oldest dirty record is (0: not yet)."""

    @property
    def needs_compaction_now(self) -> bool:
        """Kafka's ``needCompactionNow``: cleaned whatever its dirty ratio (KIP-354)."""
        return self.max_compaction_delay_ms > 0

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        """Kafka's dirty ratio: cleanable bytes over the log's bytes (0 for an empty log)."""
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @classmethod
    def of(cls, log: Log, checkpointed: int | None, now_ms: int) -> LogToClean:
        view = describe_segments(log)
        first_dirty, first_uncleanable = cleanable_offsets(
            view, checkpointed, now_ms, log.config.min_compaction_lag_ms
        )
        inactive = view.inactive
        clean = sum(info.size for info in inactive if info.base_offset < first_dirty)
        upper = max(first_dirty, first_uncleanable)
        cleanable = sum(
            info.size for info in _from_floor(inactive, first_dirty) if info.base_offset < upper
        )
        delay = max_compaction_delay(view, first_dirty, now_ms, log.config.max_compaction_lag_ms)
        return cls(
            log.topic_partition, log, first_dirty, first_uncleanable, clean, cleanable, delay
        )


class LogCleanerManager:
    """Kafka's ``LogCleanerManager`` for one data directory: the cleaner checkpoint and the
    choice of the filthiest compacted log.

    `logs()` returns the data directory's logs (the LogManager's). A log being cleaned is "in
    progress" until `done_cleaning`; `abort_cleaning` makes the cleaning of a log stop at its
    next check (`check_cleaning_aborted`) and waits until it has. Thread-safe.
    """

    def __init__(self, data_dir: Path, logs: Callable[[], Mapping[TopicPartition, Log]]) -> None:
        self.checkpoint = OffsetCheckpoint(Path(data_dir) / CLEANER_OFFSET_CHECKPOINT)
        self._logs = logs
        self._lock = threading.Condition()
        self._in_progress: set[TopicPartition] = set()
        self._aborted: set[TopicPartition] = set()
        self._truncations: dict[TopicPartition, int] = {}  # each log's, when last chosen
        self.dirtiest_ratio = 0.0
        """The highest dirty ratio the last choice saw (Kafka's ``max-dirty-percent`` / 100)."""

    def all_cleaner_checkpoints(self) -> dict[TopicPartition, int]:
        """The first dirty offsets in `cleaner-offset-checkpoint` (none when it is unreadable:
        cleaning a log again from its start is always safe)."""
        with self._lock:
            try:
                return self.checkpoint.read()
            except CheckpointError as error:
                _log.warning("log_cleaner.checkpoint_unreadable", error=str(error))
                return {}

    def grab_filthiest_compacted_log(
        self, now_ms: int, skip: Collection[TopicPartition] = ()
    ) -> LogToClean | None:
        """The compacted log with the highest dirty ratio above its `min.cleanable.dirty.ratio`,
        or with dirty records older than its `max.compaction.lag.ms` (not in progress, not in
        `skip`), now marked in progress; None when there is none."""
        with self._lock:
            compacted = {
                tp: log
                for tp, log in self._logs().items()
                if log.config.compact and tp not in self._in_progress and tp not in skip
            }
            last_clean = self.all_cleaner_checkpoints() if compacted else {}
            candidates = []
            for tp, log in compacted.items():
                checkpointed = last_clean.get(tp)
                if self._truncations.setdefault(tp, log.truncations) != log.truncations:
                    checkpointed = None  # truncated since: the offset may be past new records
                try:
                    candidate = LogToClean.of(log, checkpointed, now_ms)
                except StorageError:  # closed meanwhile
                    continue
                if candidate.total_bytes > 0:
                    candidates.append(candidate)
            self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
            cleanable = [
                c
                for c in candidates
                if (c.needs_compaction_now and c.cleanable_bytes > 0)
                or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
            ]
            if not cleanable:
                return None
            filthiest = max(cleanable, key=lambda c: c.cleanable_ratio)
            self._in_progress.add(filthiest.topic_partition)
            self._truncations[filthiest.topic_partition] = filthiest.log.truncations
            return filthiest

    def check_cleaning_aborted(self, tp: TopicPartition) -> None:
        """Raise `LogCleaningAbortedError` when the cleaning of `tp` was aborted."""
        with self._lock:
            if tp in self._aborted:
                raise LogCleaningAbortedError(f"the cleaning of {tp} was aborted")

    def abort_cleaning(self, tp: TopicPartition | None = None) -> None:
        """Stop the cleaning of `tp` (of every log: None) and wait until it has stopped."""
        with self._lock:
            targets = set(self._in_progress) if tp is None else {tp} & self._in_progress
            self._aborted |= targets
            while targets & self._in_progress:
                self._lock.wait()

    def done_cleaning(self, tp: TopicPartition, end_offset: int | None) -> None:
        """The cleaning of `tp` ended; unless it was aborted, record `end_offset` (the next first
        dirty offset; None when nothing was cleaned) in the checkpoint."""
        with self._lock:
            aborted = tp in self._aborted
            self._aborted.discard(tp)
            self._in_progress.discard(tp)
            self._lock.notify_all()
            if end_offset is not None and not aborted:
                self.update_checkpoints({tp: end_offset})

    def update_checkpoints(self, update: Mapping[TopicPartition, int] | None = None) -> None:
        """Rewrite the checkpoint with `update`, dropping the logs that are gone."""
        with self._lock:
            logs = self._logs()
            offsets = {tp: o for tp, o in self.all_cleaner_checkpoints().items() if tp in logs}
            offsets.update(update or {})
            self.checkpoint.write(offsets)
