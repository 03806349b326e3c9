"""Opening a partition's log from what is on disk: Kafka's ``LogLoader`` (Kafka 3.x).

Loading a log directory, as Kafka's ``LogLoader.load`` does:

- remove what an interrupted operation left behind (``.deleted`` / ``.cleaned`` files, the
  indexes of a ``.swap`` segment, an index or time index without its log);
- open every segment found, rebuilding a segment whose ``.index`` or ``.timeindex`` is missing
  or corrupt (after a clean shutdown both are sound and nothing is rebuilt);
- complete an interrupted swap (a cleaner's ``.swap`` segment replaces those it covers);
- unless the log was shut down cleanly, recover the segments from the recovery point on (every
  batch re-checked, indexes rebuilt, an invalid or partial tail truncated, later segments
  removed);
- load the leader epoch cache from ``leader-epoch-checkpoint`` (rebuilt from the batch headers
  when that file is missing or corrupt) and cut it to the offsets the log holds;
- rebuild the idempotent producers' state, with their open transactions, from the batch
  headers of every segment (and each transaction marker's one record). Kafka reloads it from
  its latest ``.snapshot`` file and the batches after it; no snapshot is written here, so every
  open reads every header (the other records are not read). The aborted-transaction index
  (``.txnindex``) of each recovered segment, and of one whose index is corrupt, is rebuilt on
  the way, as Kafka's segment recovery does.

``LogLoader.load`` returns what it found as a ``LoadedLog`` (Kafka's ``LoadedLogOffsets``, plus
the segments, the epoch cache and the producer state); the ``Log`` takes it from there.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkactor import tracing
from kafkactor.storage.checkpoint import CheckpointError
from kafkactor.storage.config import LogConfig
from kafkactor.storage.errors import InvalidLogFileError, StorageError
from kafkactor.storage.leader_epoch import LeaderEpochCache, LeaderEpochCheckpoint
from kafkactor.storage.log_segments import LogSegments
from kafkactor.storage.producer_batches import read_producer_batches
from kafkactor.storage.producer_state import ProducerStateManager
from kafkactor.storage.record_batch import iter_batches
from kafkactor.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from kafkactor.storage.transaction_index import TXN_INDEX_SUFFIX, AbortedTxn

__all__ = ["LEADER_EPOCH_CHECKPOINT", "LoadedLog", "LogLoader", "parse_base_offset"]

_log = tracing.get_logger("kafkactor.storage")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
"""The file, in a log's directory, that keeps its leader epoch cache."""


def parse_base_offset(path: Path) -> int:
    """The base offset in a segment file name (`00000000000000001234.log` -> 1234)."""
    stem = path.name.split(".", 1)[0]
    if len(stem) != 20 or not (stem.isascii() and stem.isdigit()):
        raise InvalidLogFileError(
            f"{path}: a segment file is named <20-digit base offset>{LOG_SUFFIX} or {INDEX_SUFFIX}"
        )
    return int(stem)


def _next_offset_of_file(path: Path, base_offset: int) -> int:
    """One past the last offset of the whole batches in a segment file (base when none)."""
    next_offset = base_offset
    data = path.read_bytes()
    with contextlib.suppress(StorageError):
        for batch in iter_batches(data, verify_crc=False):
            next_offset = batch.next_offset
    return next_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadedLog:
    """What loading found: the segments, oldest first, and where the log stands."""

    segments: LogSegments
    log_start_offset: int
    recovery_point: int
    leader_epochs: LeaderEpochCache
    recovered_bytes_truncated: int
    """Bytes that recovery cut off (an invalid or partial tail, and the segments after it)."""
    producer_state: ProducerStateManager
    """The idempotent producers' state, rebuilt from the recovered segments."""
    empty_directory: bool = False
    """The directory held no file: a new log (so no `partition.metadata` either)."""


class LogLoader:
    """Kafka's `LogLoader`: loads and recovers one log directory, once, for a `Log`.

    `new_segment(base_offset)` opens (or creates) the segment at that base offset in
    `directory`, as the log opens all its segments. `clean_shutdown=True` (the LogManager saw
    the clean shutdown marker) skips recovery: everything found is taken as flushed. On any
    error the segments opened so far are closed and the error propagates.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        new_segment: Callable[[int], LogSegment],
        recovery_point: int,
        *,
        clean_shutdown: bool,
    ) -> None:
        self.dir = directory
        self.config = config
        self._new_segment = new_segment
        self._requested_recovery_point = recovery_point
        self._clean_shutdown = clean_shutdown
        self._log_segments = LogSegments()
        self._segments = self._log_segments.by_base
        self._bases = self._log_segments.bases
        self.recovered_bytes_truncated = 0
        self._truncated_on_load: dict[int, int] = {}  # segments rebuilt while loading
        self._recovered: set[int] = set()  # segments whose .txnindex is rebuilt
        self._found_segments = False
        self._recovery_point = 0
        self._log_start_offset = 0

    def load(self) -> LoadedLog:
        """Load the directory's segments, recover them, load the leader epoch cache and
        rebuild the producer state."""
        if not os.listdir(self.dir):  # a new log: nothing to clean up, load or recover
            self._log_segments.add(self._new_segment(0))
            return LoadedLog(
                segments=self._log_segments,
                log_start_offset=0,
                recovery_point=0,
                leader_epochs=LeaderEpochCache(
                    LeaderEpochCheckpoint(self.dir / LEADER_EPOCH_CHECKPOINT), []
                ),
                recovered_bytes_truncated=0,
                producer_state=ProducerStateManager(),
                empty_directory=True,
            )
        try:
            self._load_segments()
            if self._clean_shutdown:
                self._recovery_point = self.log_end_offset
            else:
                # before anything reads the torn tail
                self._recover_from(self._requested_recovery_point)
            self._log_start_offset = self._bases[0]
            epochs = self._load_leader_epochs()
            producers = self._load_producer_state()
        except BaseException:
            for segment in self._segments.values():
                segment.close()
            raise
        return LoadedLog(
            segments=self._log_segments,
            log_start_offset=self._log_start_offset,
            recovery_point=self._recovery_point,
            leader_epochs=epochs,
            recovered_bytes_truncated=self.recovered_bytes_truncated,
            producer_state=producers,
        )

    def _load_producer_state(self) -> ProducerStateManager:
        producers = ProducerStateManager()
        for base in self._bases:
            segment = self._segments[base]
            batches = read_producer_batches(segment.log_path, segment.size)
            aborted = [
                completed.aborted_txn()
                for completed in producers.update_from_batches(batches)
                if completed.is_aborted
            ]
            rebuild = base in self._recovered
            if not rebuild:
                try:
                    segment.txn_index.sanity_check()
                except StorageError as error:
                    _log.warning("log.index_corrupt", dir=str(self.dir), error=str(error))
                    rebuild = True
            if rebuild and aborted != _existing_entries(segment):
                segment.txn_index.reset(aborted)
        return producers

    # -- the segments found so far (Kafka's LogSegments) ---------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._log_segments.active.next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments.values())

    # -- loading and recovery ------------------------------------------------------------------

    def _load_segments(self) -> None:
        self._remove_temporary_files()
        swaps: list[Path] = []
        for path in sorted(self.dir.iterdir()):
            if (
                path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
                and not path.with_suffix(LOG_SUFFIX).exists()
            ):
                path.unlink()  # an index without its log: Kafka deletes it
            elif path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                swaps.append(path)
        for path in sorted(self.dir.glob("*" + LOG_SUFFIX)):
            base = parse_base_offset(path)
            segment = self._new_segment(base)
            existed = segment.index_existed and segment.time_index_existed
            if not existed or not self._indexes_are_sane(segment):
                self._truncated_on_load[base] = segment.recover()
                self._recovered.add(base)
            self._log_segments.add(segment)
        for swap in swaps:
            self._complete_swap(swap)
        self._found_segments = bool(self._segments)
        if not self._segments:
            self._log_segments.add(self._new_segment(0))

    def _remove_temporary_files(self) -> None:
        for path in self.dir.iterdir():
            if path.name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
                path.unlink(missing_ok=True)
            elif path.name.endswith(
                tuple(s + SWAP_SUFFIX for s in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX))
            ):
                path.unlink()  # the indexes of a swapped segment are rebuilt from its log

    def _indexes_are_sane(self, segment: LogSegment) -> bool:
        sane = True
        for index in (segment.index, segment.time_index):
            try:
                index.sanity_check()
            except StorageError as error:
                _log.warning("log.index_corrupt", dir=str(self.dir), error=str(error))
                index.truncate()
                sane = False
        return sane

    def _complete_swap(self, swap: Path) -> None:
        # A cleaner's replacement segment that was renamed to .swap but not swapped in: finish
        # the swap (drop the segments it replaces, rename it into place), as Kafka does.
        target = swap.with_name(swap.name[: -len(SWAP_SUFFIX)])
        base = parse_base_offset(target)
        end = _next_offset_of_file(swap, base)
        for old_base in [b for b in self._bases if base <= b < max(end, base + 1)]:
            self._log_segments.remove(old_base).delete()  # the segments the swap replaces
        swap.rename(target)
        segment = self._new_segment(base)
        segment.recover()
        self._recovered.add(base)
        self._log_segments.add(segment)

    def _recover_from(self, recovery_point: int) -> None:
        first = self._log_segments.floor_index(recovery_point)
        bases = self._bases[max(first, 0) :]
        truncated_before = self.recovered_bytes_truncated
        for position, base in enumerate(bases):
            segment = self._segments[base]
            # A segment rebuilt while loading (missing or corrupt index) was recovered already;
            # if that cut its tail, the later, unflushed segments cannot be trusted either.
            truncated = self._truncated_on_load.pop(base, None)
            self._recovered.add(base)
            if truncated is None:
                truncated = segment.recover()
            if truncated:
                self.recovered_bytes_truncated += truncated
                _log.warning(
                    "log.recovery_truncated",
                    dir=str(self.dir),
                    segment=base,
                    bytes=truncated,
                )
                for later in bases[position + 1 :]:
                    self._log_segments.remove(later).delete()
                break
        self._log_segments.active.resize_indexes(self.config.max_index_size)
        self._recovery_point = min(recovery_point, self.log_end_offset)
        if not self._found_segments:
            return  # a new log: nothing was there to recover
        _log.info(
            "log.recovered",
            dir=str(self.dir),
            log_end_offset=self.log_end_offset,
            segments=len(bases),
            bytes_truncated=self.recovered_bytes_truncated - truncated_before,
        )

    def _load_leader_epochs(self) -> LeaderEpochCache:
        checkpoint = LeaderEpochCheckpoint(self.dir / LEADER_EPOCH_CHECKPOINT)
        problem: dict[str, str] = {}
        try:
            if checkpoint.path.exists() or self.size_in_bytes == 0:
                cache = LeaderEpochCache(checkpoint, checkpoint.read())
            else:
                problem = {"reason": "missing"}
        except CheckpointError as error:
            problem = {"reason": "corrupt", "error": str(error)}
        if problem:
            cache = self._rebuild_leader_epochs(checkpoint)
            _log.warning(
                "log.leader_epochs_rebuilt", dir=str(self.dir), entries=len(cache), **problem
            )
        # The checkpoint was written when the epochs were assigned, so it may describe offsets
        # that recovery cut off, or that a power loss took before they reached the disk.
        cache.truncate_from_end(self.log_end_offset)
        cache.truncate_from_start(self._log_start_offset)
        return cache

    def _rebuild_leader_epochs(self, checkpoint: LeaderEpochCheckpoint) -> LeaderEpochCache:
        """The epochs stamped in the batches, from their headers (the segments were recovered)."""
        scratch = LeaderEpochCache()
        for base in self._bases:
            for header in self._segments[base].iter_headers():
                if header.leader_epoch > scratch.latest_epoch:
                    scratch.assign(header.leader_epoch, header.base_offset)
        cache = LeaderEpochCache(checkpoint, scratch.entries)
        cache.flush()
        return cache


def _existing_entries(segment: LogSegment) -> list[AbortedTxn] | None:
    try:
        return segment.txn_index.entries
    except StorageError:
        return None  # corrupt: rewritten
