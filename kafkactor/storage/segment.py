"""One log segment: a `.log` file of record batches and its sparse `.index`."""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkactor.storage.errors import CorruptRecordError, StorageError, TruncatedBatchError
from kafkactor.storage.index import OffsetIndex
from kafkactor.storage.record_batch import batch_size_at, iter_batches
from kafkactor.storage.records import LOG_OVERHEAD, MAX_BATCH_SIZE, BytesLike

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# The header fields a log needs without decoding a batch: base offset, batch length, partition
# leader epoch, magic, last offset delta, max timestamp (the rest of the 61-byte header is
# skipped).
_HEADER = struct.Struct(">qiib4x2xi8xq")
_MAX_RELATIVE_OFFSET = 2**31 - 1
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
        self.max_timestamp = -1
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
                # Appends index once per append, recovery once per batch: a sparse index may
                # fill up here, and lookups stay correct without more entries.
                if self.since_entry > segment.index_interval_bytes and not segment.index.is_full:
                    segment.index.append(batch.last_offset, position + batch.position)
                    self.since_entry = 0
                if self.first_timestamp is None:
                    self.first_timestamp = batch.max_timestamp
                self.max_timestamp = max(self.max_timestamp, batch.max_timestamp)
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
    """Kafka's `LogSegment`: batches appended to `<base>.log`, indexed in `<base>.index`.

    The segment trusts its bytes for reads (they were validated when appended or recovered) and
    validates every batch in `recover()`. Not thread-safe: its `Log` serialises access.
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
    ) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.index_interval_bytes = index_interval_bytes
        self.max_batch_size = max_batch_size
        self.created_ms = created_ms
        self._index_existed = (directory / segment_file_name(base_offset, INDEX_SUFFIX)).exists()
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.index = OffsetIndex(
            directory / segment_file_name(base_offset, INDEX_SUFFIX),
            base_offset,
            max_index_size,
        )
        self._bytes_since_index_entry = 0
        self._next_offset: int | None = base_offset if self.size == 0 else None
        self._max_timestamp: int | None = -1 if self.size == 0 else None
        self._rolling_timestamp: int | None = None
        self._closed = False
        # The headers of the last batches appended in this process, contiguous up to the end
        # of the file (between _TAIL_HEADERS and twice that many), with their last offsets.
        self._tail: list[BatchHeader] = []
        self._tail_lasts: list[int] = []

    # -- state -------------------------------------------------------------------------------

    @property
    def index_existed(self) -> bool:
        """Whether the index file was already there when the segment was opened."""
        return self._index_existed

    @property
    def next_offset(self) -> int:
        """One past the last offset stored (the base offset when empty)."""
        if self._next_offset is None:
            self._next_offset = self._read_next_offset()
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """The largest batch max timestamp in the segment (-1 when empty)."""
        if self._max_timestamp is None:
            self._max_timestamp = max(
                (header.max_timestamp for header in self.headers()), default=-1
            )
        return self._max_timestamp

    def retention_timestamp(self) -> int:
        """What `retention.ms` compares: the largest batch timestamp, or, when no batch carries
        one, the file's last-modified time (Kafka's fallback)."""
        largest = self.max_timestamp
        if largest >= 0:
            return largest
        return os.fstat(self._fd).st_mtime_ns // 1_000_000

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
        if largest_offset - self.base_offset > _MAX_RELATIVE_OFFSET:
            raise StorageError(f"offset {largest_offset} does not fit segment {self.base_offset}")
        if not data:
            return
        if self._bytes_since_index_entry > self.index_interval_bytes:
            self.index.append(largest_offset, self.size)
            self._bytes_since_index_entry = 0
        written = os.pwrite(self._fd, data, self.size)
        if written != len(data):
            raise StorageError(f"short write to {self.log_path}: {written} of {len(data)} bytes")
        self._remember_headers(data, self.size)
        if self.size == 0 and self._rolling_timestamp is None and max_timestamp >= 0:
            self._rolling_timestamp = max_timestamp
        self.size += len(data)
        self._bytes_since_index_entry += len(data)
        self._next_offset = largest_offset + 1
        if self._max_timestamp is not None:
            self._max_timestamp = max(self._max_timestamp, max_timestamp)

    def _remember_headers(self, data: BytesLike, position: int) -> None:
        tail, lasts = self._tail, self._tail_lasts
        at, end = 0, len(data)
        while at + _HEADER.size <= end:
            header = _header_in(data, at, position + at)
            tail.append(header)
            lasts.append(header.last_offset)
            at += header.size_in_bytes
        if len(tail) > 2 * _TAIL_HEADERS:
            del tail[:_TAIL_HEADERS]
            del lasts[:_TAIL_HEADERS]

    def _forget_headers(self) -> None:
        self._tail = []
        self._tail_lasts = []

    def flush(self) -> None:
        os.fsync(self._fd)
        self.index.flush()

    def dup_fds(self) -> list[int]:
        """Duplicates of the log and index file descriptors, for an fsync outside the log lock.

        The caller closes them. An fsync through a duplicate stays safe when the segment is
        closed or deleted meanwhile.
        """
        return [os.dup(self._fd), self.index.dup_fd()]

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; return the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        self._forget_headers()
        self.index.truncate_to(offset)
        os.ftruncate(self._fd, found.position)
        self.size = found.position
        self._bytes_since_index_entry = 0
        self._next_offset = None
        self._max_timestamp = None
        if self.size == 0:
            self._rolling_timestamp = None
        return removed

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
        """Re-read every batch, checking its CRC and header, and rebuild the index.

        As Kafka's `LogSegment.recover`: the CRC covers every record byte, and records were
        validated when the leader appended them. `deep=True` also walks each record's framing.
        Truncates the file at the first batch that is partial, invalid or out of offset order;
        returns the number of bytes truncated.
        """
        self.index.truncate()
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
        self._max_timestamp = state.max_timestamp
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
        """Shrink the index file to its entries (done when the segment stops being active)."""
        self.index.trim_to_valid_size()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.index.close()
        os.close(self._fd)

    def delete(self) -> None:
        """Close and remove both files, through a `.deleted` rename as Kafka does."""
        self.close()
        for path in (self.log_path, self.index.path):
            doomed = path.with_name(path.name + DELETED_SUFFIX)
            try:
                path.rename(doomed)
            except FileNotFoundError:
                continue
            doomed.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
