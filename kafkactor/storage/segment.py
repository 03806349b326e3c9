"""One log segment: a `.log` file of record batches, its sparse `.index` and `.timeindex`."""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafkactor.storage.errors import CorruptRecordError, StorageError, TruncatedBatchError
from kafkactor.storage.index import OffsetIndex
from kafkactor.storage.record_batch import RecordBatch, batch_size_at, iter_batches
from kafkactor.storage.records import LOG_OVERHEAD, MAX_BATCH_SIZE, NO_TIMESTAMP, BytesLike
from kafkactor.storage.time_index import OffsetAndTimestamp, TimeIndex, TimestampOffset
from kafkactor.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# The header fields a log needs without decoding a batch: base offset, batch length, partition
# leader epoch, magic, last offset delta, max timestamp (the rest of the 61-byte header is
# skipped).
_HEADER = struct.Struct(">qiib4x2xi8xq")
_MAX_RELATIVE_OFFSET = 2**31 - 1
_MAX_IOV = 1024  # buffers per pwritev (Linux's IOV_MAX)
# Walking batch headers reads the file in chunks: a small first read (an index entry is at most
# ~index_interval_bytes before the target), then larger ones.
_FIRST_SCAN_CHUNK = 4 * 1024
# Headers of the batches appended in this process, kept per segment so that finding the batch of
# a recent offset (every fetch, every high-watermark position) needs no file read.
_TAIL_HEADERS = 4096
_SCAN_CHUNK = 64 * 1024
_RECOVERY_CHUNK = 4 * 1024 * 1024  # bytes read at a time by recovery


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset zero-padded to 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


class _Recovery:
    """What recovering one segment has established so far."""

    def __init__(self, segment: LogSegment, deep: bool) -> None:
        self.segment = segment
        self.deep = deep
        self.last_offset = segment.base_offset - 1
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max = segment.base_offset  # the last offset of the batch holding it
        self.first_timestamp: int | None = None
        self.since_entry = 0

    def scan(self, chunk: bytes, position: int, at_eof: bool) -> tuple[int, bool]:
        """Take the valid batches at the start of `chunk` (found at file `position`).

        Returns the bytes taken and whether recovery must stop there: an invalid or
        out-of-order batch, or a partial one at the end of the file. A batch cut by the end of
        a chunk that is not the end of the file is left for the next chunk.
        """
        segment = self.segment
        taken = 0
        try:
            for batch in iter_batches(chunk, max_batch_size=segment.max_batch_size, deep=self.deep):
                if batch.base_offset <= self.last_offset or (
                    batch.last_offset - segment.base_offset > _MAX_RELATIVE_OFFSET
                ):
                    return taken, True
                if batch.max_timestamp > self.max_timestamp:
                    self.max_timestamp = batch.max_timestamp
                    self.offset_of_max = batch.last_offset
                # Appends index once per append, recovery once per batch: a sparse index may
                # fill up here, and lookups stay correct without more entries.
                if self.since_entry > segment.index_interval_bytes:
                    if not segment.index.is_full:
                        segment.index.append(batch.last_offset, position + batch.position)
                    if not segment.time_index.is_full:
                        segment.time_index.maybe_append(self.max_timestamp, self.offset_of_max)
                    self.since_entry = 0
                if self.first_timestamp is None:
                    self.first_timestamp = batch.max_timestamp
                self.last_offset = batch.last_offset
                self.since_entry += batch.size_in_bytes
                taken = batch.position + batch.size_in_bytes
        except TruncatedBatchError:
            return taken, at_eof
        except CorruptRecordError:  # a compressed batch propagates: it is not damage
            return taken, True
        return taken, False


def _header_in(buf: BytesLike, offset: int, position: int) -> BatchHeader:
    base, length, epoch, _magic, last_delta, max_ts = _HEADER.unpack_from(buf, offset)
    return BatchHeader(position, base, length + LOG_OVERHEAD, base + last_delta, max_ts, epoch)


def _write_chunks(fd: int, chunks: Sequence[BytesLike], position: int) -> int:
    """Write `chunks` back to back at `position`: one pwrite, or pwritev in groups of at most
    `_MAX_IOV` buffers (the kernel's limit). Returns the bytes written (short only on error)."""
    if len(chunks) == 1:
        return os.pwrite(fd, chunks[0], position)
    written = 0
    for start in range(0, len(chunks), _MAX_IOV):
        group = chunks[start : start + _MAX_IOV]
        done = os.pwritev(fd, group, position + written)
        written += done
        if done != sum(len(chunk) for chunk in group):
            break
    return written


def _headers_in(data: BytesLike, position: int) -> list[BatchHeader]:
    """The headers of the (validated) batches in `data`, to be stored at file `position`."""
    headers: list[BatchHeader] = []
    at, end = 0, len(data)
    while at + _HEADER.size <= end:
        header = _header_in(data, at, position + at)
        headers.append(header)
        at += header.size_in_bytes
    return headers


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The parts of a stored batch's header that placing, reading and truncating need."""

    position: int
    base_offset: int
    size_in_bytes: int
    last_offset: int
    max_timestamp: int
    leader_epoch: int  # the partitionLeaderEpoch field (-1: none was stamped)


class LogSegment:
    """Kafka's `LogSegment`: batches appended to `<base>.log`, indexed in `<base>.index` (offsets
    to positions) and `<base>.timeindex` (timestamps to offsets, KIP-33).

    The segment trusts its bytes for reads (they were validated when appended or recovered) and
    validates every batch in `recover()`, which rebuilds both indexes. Its largest timestamp
    (retention by time) is kept in memory while it is appended to and written to the time index
    when it stops being active or is closed, so after a restart it is the time index's last
    entry (Kafka's `maxTimestampSoFar`). Not thread-safe: its `Log` serialises access.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        max_batch_size: int = MAX_BATCH_SIZE,
        file_suffix: str = "",
        defer_files: bool = False,
    ) -> None:
        # `file_suffix` follows each file's name: the log cleaner writes a `.cleaned` segment
        self.base_offset = base_offset
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.index_interval_bytes = index_interval_bytes
        self.max_batch_size = max_batch_size
        self.created_ms = created_ms
        index_path = directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix)
        time_index_path = directory / (
            segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix
        )
        self.txn_index = TransactionIndex(
            directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix),
            base_offset,
        )  # its file appears with the segment's first aborted transaction
        # `defer_files`: a new log's first segment creates its files when something is first
        # written (Kafka's lazy indexes, and the log file too), so that an empty replica holds no
        # descriptor and costs no file creation; one found on disk is opened as ever. Without
        # its log file a segment has no index worth keeping (the loader deletes such files).
        deferred = defer_files and not self.log_path.exists()
        self._index_existed = not deferred and index_path.exists()
        self._time_index_existed = not deferred and time_index_path.exists()
        self._log_fd: int | None = (
            None if deferred else os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        )
        try:
            self.size = 0 if self._log_fd is None else os.fstat(self._log_fd).st_size
            self.index = OffsetIndex(index_path, base_offset, max_index_size, defer_create=deferred)
            try:
                self.time_index = TimeIndex(
                    time_index_path, base_offset, max_index_size, defer_create=deferred
                )
            except BaseException:
                self.index.close()
                raise
        except BaseException:
            if self._log_fd is not None:
                os.close(self._log_fd)
            raise
        self._bytes_since_index_entry = 0
        self._next_offset: int | None = base_offset if self.size == 0 else None
        # The largest batch max timestamp and the last offset of its batch; None: not read yet
        # (it is the time index's last entry, see `largest_timestamp_and_offset`).
        self._max: TimestampOffset | None = (
            TimestampOffset(NO_TIMESTAMP, base_offset) if self.size == 0 else None
        )
        self._rolling_timestamp: int | None = None
        self._closed = False
        # The headers of the last batches appended in this process, contiguous up to the end
        # of the file (between _TAIL_HEADERS and twice that many), with their last offsets.
        self._tail: list[BatchHeader] = []
        self._tail_lasts: list[int] = []

    # -- state -------------------------------------------------------------------------------

    @property
    def _fd(self) -> int:
        """The log file's descriptor; a deferred file is created here, on first use."""
        fd = self._log_fd
        if fd is None:
            if self._closed:
                raise StorageError(f"segment {self.log_path} is closed")
            fd = self._log_fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            # the indexes come with it, so a segment has all its files or none
            self.index.create_file()
            self.time_index.create_file()
        return fd

    @property
    def index_existed(self) -> bool:
        """Whether the index file was already there when the segment was opened."""
        return self._index_existed

    @property
    def time_index_existed(self) -> bool:
        """Whether the time index file was already there when the segment was opened."""
        return self._time_index_existed

    @property
    def next_offset(self) -> int:
        """One past the last offset stored (the base offset when empty)."""
        if self._next_offset is None:
            self._next_offset = self._read_next_offset()
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp in the segment (-1 when none carries one)."""
        return self.largest_timestamp_and_offset().timestamp

    def largest_timestamp_and_offset(self) -> TimestampOffset:
        """The largest batch max timestamp and the last offset of the batch holding it.

        `(-1, base_offset)` when no batch carries a timestamp. Kept up to date by appends,
        truncation and recovery; a segment opened without recovery reads it from its time
        index's last entry, which its last roll or close wrote (Kafka's `maxTimestampSoFar`).
        """
        if self._max is None:
            self._max = self.time_index.last_entry
        return self._max

    def retention_timestamp(self) -> int:
        """What `retention.ms` compares: the largest batch timestamp (Kafka's
        `largestTimestamp`), or, when no batch carries one, the file's last-modified time."""
        largest = self.max_timestamp
        if largest >= 0:
            return largest
        if self._log_fd is None:
            return self.created_ms  # no file yet
        return os.fstat(self._log_fd).st_mtime_ns // 1_000_000

    def rolling_timestamp(self) -> int:
        """What `segment.ms` counts from: the first batch's max timestamp, else creation time."""
        first = self.first_batch_timestamp()
        return self.created_ms if first is None else first

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp, or None when empty or the batch carries none."""
        if self._rolling_timestamp is None:
            first = next(self.iter_headers(), None)
            if first is None or first.max_timestamp < 0:
                return None
            self._rolling_timestamp = first.max_timestamp
        return self._rolling_timestamp

    # -- writing -----------------------------------------------------------------------------

    def append(self, data: BytesLike, *, largest_offset: int, max_timestamp: int) -> None:
        """Append validated batches (`data`) whose last offset is `largest_offset`."""
        self.append_batches(
            [data],
            _headers_in(data, self.size),
            largest_offset=largest_offset,
            max_timestamp=max_timestamp,
        )

    def append_batches(
        self,
        chunks: Sequence[BytesLike],
        headers: list[BatchHeader],
        *,
        largest_offset: int,
        max_timestamp: int,
    ) -> None:
        """Append validated batches whose bytes are `chunks` written back to back (one
        `os.pwritev` per 1,024 chunks) and whose `headers` say what they hold, at their
        positions in this file (from `size` on). A leader's append writes the producer's bytes
        this way, restamped prefixes between views of the rest, without joining them first."""
        if largest_offset - self.base_offset > _MAX_RELATIVE_OFFSET:
            raise StorageError(f"offset {largest_offset} does not fit segment {self.base_offset}")
        if not headers:
            return
        size = headers[-1].position + headers[-1].size_in_bytes - self.size
        largest = self.largest_timestamp_and_offset()
        for header in headers:
            if header.max_timestamp > largest.timestamp:
                largest = TimestampOffset(header.max_timestamp, header.last_offset)
        # A full index (a log rolls first; the cleaner's merged segments may fill one) takes no
        # more entries, as in recovery: lookups stay correct with a sparser index.
        if self._bytes_since_index_entry > self.index_interval_bytes and not self.index.is_full:
            self.index.append(largest_offset, self.size)
            # A full time index (only the roll's slot left) gets no more entries: lookups
            # stay correct with a sparser index (Kafka would roll the segment instead).
            if not self.time_index.is_full:
                self.time_index.maybe_append(largest.timestamp, largest.offset)
            self._bytes_since_index_entry = 0
        written = _write_chunks(self._fd, chunks, self.size)
        if written != size:
            raise StorageError(f"short write to {self.log_path}: {written} of {size} bytes")
        self._remember_headers(headers)
        if self.size == 0 and self._rolling_timestamp is None and max_timestamp >= 0:
            self._rolling_timestamp = max_timestamp
        self.size += size
        self._bytes_since_index_entry += size
        self._next_offset = largest_offset + 1
        self._max = largest

    def _remember_headers(self, headers: list[BatchHeader]) -> None:
        tail, lasts = self._tail, self._tail_lasts
        for header in headers:
            tail.append(header)
            lasts.append(header.last_offset)
        if len(tail) > 2 * _TAIL_HEADERS:
            del tail[:_TAIL_HEADERS]
            del lasts[:_TAIL_HEADERS]

    def _forget_headers(self) -> None:
        self._tail = []
        self._tail_lasts = []

    def flush(self) -> None:
        if self._log_fd is None:
            return  # nothing written: no file to sync
        os.fsync(self._log_fd)
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def dup_fds(self) -> list[int]:
        """Duplicates of the log and both index file descriptors, for an fsync outside the log
        lock.

        The caller closes them. An fsync through a duplicate stays safe when the segment is
        closed or deleted meanwhile.
        """
        if self._log_fd is None:
            return []  # nothing written: no file to sync
        fds = [os.dup(self._log_fd), self.index.dup_fd()]  # the indexes come with the log file
        try:
            fds.append(self.time_index.dup_fd())
            txn_fd = self.txn_index.dup_fd()
            if txn_fd is not None:
                fds.append(txn_fd)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; return the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        self.txn_index.truncate_to(offset)
        self._forget_headers()
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        os.ftruncate(self._fd, found.position)
        self.size = found.position
        self._bytes_since_index_entry = 0
        self._next_offset = None
        self._max = self._read_largest_timestamp()
        if self.size == 0:
            self._rolling_timestamp = None
        return removed

    def _read_largest_timestamp(self) -> TimestampOffset:
        """The time index's last entry, or a larger timestamp stored after it (Kafka's
        `readLargestTimestamp`): after a truncation, the batches past the last entry's."""
        largest = self.time_index.last_entry
        _, position = self.index.lookup(largest.offset)
        for header in self.iter_headers(position):
            if header.max_timestamp > largest.timestamp:
                largest = TimestampOffset(header.max_timestamp, header.last_offset)
        return largest

    def set_log_end(self, offset: int) -> None:
        """Report `offset` as the next offset, at or past the end of the stored batches.

        After a truncation into a gap of offsets Kafka keeps the truncation offset as the log
        end, so a follower's next append may start there.
        """
        self._next_offset = None
        stored_end = self.next_offset
        if offset < stored_end:
            raise ValueError(f"log end {offset} is before the stored data's end {stored_end}")
        self._next_offset = offset

    def recover(self, *, deep: bool = False) -> int:
        """Re-read every batch, checking its CRC and header, and rebuild both indexes.

        As Kafka's `LogSegment.recover`: the CRC covers every record byte, and records were
        validated when the leader appended them. `deep=True` also walks each record's framing.
        Truncates the file at the first batch that is partial, invalid or out of offset order;
        returns the number of bytes truncated. As in Kafka, the time index ends with the entry
        of the segment's largest timestamp.
        """
        if self._log_fd is None:
            return 0  # a deferred segment has no file, so nothing to recover
        self.index.truncate()
        self.time_index.truncate()
        self._forget_headers()
        file_size = os.fstat(self._fd).st_size
        state = _Recovery(self, deep)
        position = 0
        while position < file_size:
            chunk = os.pread(self._fd, min(_RECOVERY_CHUNK, file_size - position), position)
            at_eof = position + len(chunk) >= file_size
            consumed, stop = state.scan(chunk, position, at_eof)
            if consumed == 0 and not stop:
                # the next batch is larger than a chunk: read it whole
                try:
                    size = batch_size_at(chunk, 0, self.max_batch_size)
                except CorruptRecordError:
                    size = None
                if size is None or position + size > file_size:
                    break
                whole = os.pread(self._fd, size, position)
                consumed, stop = state.scan(whole, position, at_eof=True)
            position += consumed
            if stop or consumed == 0:
                break
        if position < file_size:
            os.ftruncate(self._fd, position)
        self.size = position
        self._bytes_since_index_entry = state.since_entry
        self._next_offset = state.last_offset + 1
        self._max = TimestampOffset(state.max_timestamp, state.offset_of_max)
        self.time_index.maybe_append(state.max_timestamp, state.offset_of_max, skip_full_check=True)
        first = state.first_timestamp
        self._rolling_timestamp = first if first is not None and first >= 0 else None
        return file_size - position

    # -- reading -----------------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader:
        raw = os.pread(self._fd, _HEADER.size, position)
        if len(raw) < _HEADER.size:
            raise StorageError(f"{self.log_path}: no batch header at position {position}")
        return _header_in(raw, 0, position)

    def iter_headers(self, start_position: int = 0) -> Iterator[BatchHeader]:
        """The headers of every whole batch from `start_position` on, read in chunks.

        Stops at a partial batch (a torn write that recovery has not truncated yet), as Kafka's
        reads of a segment do.
        """
        position = start_position
        size = self.size
        chunk = b""
        chunk_start = position
        chunk_size = _FIRST_SCAN_CHUNK
        while position + _HEADER.size <= size:
            offset_in_chunk = position - chunk_start
            if offset_in_chunk + _HEADER.size > len(chunk):
                chunk = os.pread(self._fd, chunk_size, position)
                chunk_size = _SCAN_CHUNK
                chunk_start = position
                offset_in_chunk = 0
                if len(chunk) < _HEADER.size:
                    return
            header = _header_in(chunk, offset_in_chunk, position)
            if header.size_in_bytes < _HEADER.size or position + header.size_in_bytes > size:
                return
            yield header
            position += header.size_in_bytes

    def headers(self, start_position: int = 0) -> list[BatchHeader]:
        """The headers of every whole batch from `start_position` on."""
        return list(self.iter_headers(start_position))

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is >= `offset` (Kafka's translateOffset)."""
        tail = self._tail
        if tail and offset >= tail[0].base_offset:  # a recent batch: no file read
            found = bisect.bisect_left(self._tail_lasts, offset)
            return tail[found] if found < len(tail) else None
        _, position = self.index.lookup(offset)
        for header in self.iter_headers(position):
            if header.last_offset >= offset:
                return header
        return None

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> OffsetAndTimestamp | None:
        """The first record at or past `starting_offset` whose timestamp is >= `timestamp`.

        Kafka's `findOffsetByTimestamp`: the time index gives the offset to start from (no
        earlier record reaches the entry's timestamp), the offset index its position; batch
        headers are then scanned for the first batch whose max timestamp reaches the target,
        and that batch's records for the first one that does. Timestamps need not increase
        from record to record. None when no record here qualifies.
        """
        entry = self.time_index.lookup(timestamp)
        _, position = self.index.lookup(max(entry.offset, starting_offset))
        for header in self.iter_headers(position):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            data = os.pread(self._fd, header.size_in_bytes, header.position)
            for record in RecordBatch(data, verify_crc=False).records():
                if record.timestamp_ms >= timestamp and record.offset >= starting_offset:
                    return OffsetAndTimestamp(record.offset, record.timestamp_ms)
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        *,
        min_one_batch: bool = True,
    ) -> tuple[bytes, int] | None:
        """Whole batches from the one holding `start_offset`: (bytes, start position).

        None when no batch here reaches `start_offset`. Batches with an offset >= `max_offset`
        are left out; at most `max_bytes`, except that the first batch is returned whole when
        `min_one_batch` (Kafka's KIP-74, so one oversized batch cannot stall a consumer).
        One read of the file, whose batch headers are then walked in memory.
        """
        first = self.find_batch(start_offset)
        if first is None:
            return None
        start = first.position
        limit = max(max_bytes, first.size_in_bytes) if min_one_batch else max_bytes
        data = os.pread(self._fd, min(limit, self.size - start), start)
        end = 0
        available = len(data)
        unpack_from = _HEADER.unpack_from
        while end + _HEADER.size <= available:
            base, length, _epoch, _magic, last_delta, _ts = unpack_from(data, end)
            batch_size = length + LOG_OVERHEAD
            if end + batch_size > available:
                break
            if max_offset is not None and base + last_delta >= max_offset:
                break
            if end + batch_size > max_bytes and not (min_one_batch and end == 0):
                break
            end += batch_size
        return data[:end], start

    def _read_next_offset(self) -> int:
        _, position = self.index.lookup(2**63 - 1)
        last: BatchHeader | None = None
        for last in self.iter_headers(position):  # noqa: B007 - the last one is wanted
            pass
        return last.last_offset + 1 if last is not None else self.base_offset

    # -- files -------------------------------------------------------------------------------

    def trim_index(self) -> None:
        """What a segment does when it stops being active (Kafka's `onBecomeInactiveSegment`):
        append its largest timestamp to the time index, then shrink both index files to their
        entries."""
        self._append_largest_timestamp()
        self.index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        """Preallocate both index files to `size` bytes (the active segment's, after loading);
        never below their entries (a tiny time index may hold its roll entries past `size`)."""
        for index in (self.index, self.time_index):
            index.resize(max(size, index.size_in_bytes))

    def _append_largest_timestamp(self) -> None:
        # Into the slot the time index keeps for it; a no-op when the last entry has it already.
        if self._max is not None and self._log_fd is not None:  # no file yet: nothing written
            self.time_index.maybe_append(
                self._max.timestamp, self._max.offset, skip_full_check=True
            )

    def close(self) -> None:
        """Write the largest timestamp to the time index, trim both indexes, close the files."""
        if self._closed:
            return
        self._closed = True
        try:
            self._append_largest_timestamp()
        finally:
            try:
                self.index.close()
                self.time_index.close()
                self.txn_index.close()
            finally:
                fd, self._log_fd = self._log_fd, None
                if fd is not None:
                    os.close(fd)

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the three files from `old_suffix` to `new_suffix` (Kafka's
        `changeFileSuffixes`: `.cleaned` to `.swap` to none, or none to `.deleted`).

        The open descriptors follow the files, so the segment stays readable throughout.
        """

        def renamed(path: Path) -> Path:
            if not path.name.endswith(old_suffix):
                raise StorageError(f"{path} does not end with {old_suffix!r}")
            return path.with_name(path.name[: len(path.name) - len(old_suffix)] + new_suffix)

        target = renamed(self.log_path)
        if self._log_fd is not None:
            os.replace(self.log_path, target)
        self.log_path = target
        self.index.rename_to(renamed(self.index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))

    def delete(self) -> None:
        """Close and remove the three files, through a `.deleted` rename as Kafka does."""
        self.close()
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            doomed = (
                path
                if path.name.endswith(DELETED_SUFFIX)
                else path.with_name(path.name + DELETED_SUFFIX)
            )
            try:
                path.rename(doomed)
            except FileNotFoundError:
                continue
            doomed.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
