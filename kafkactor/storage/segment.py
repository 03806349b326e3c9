"""One log segment: a `.log` file of record batches and its sparse `.index`."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kafkactor.storage.errors import CorruptRecordError, StorageError
from kafkactor.storage.index import OffsetIndex
from kafkactor.storage.records import LOG_OVERHEAD, MAX_BATCH_SIZE, RecordBatch, batch_size_at

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# The header fields a log needs without decoding a batch: base offset, batch length, magic,
# last offset delta, max timestamp (the rest of the 61-byte header is skipped).
_HEADER = struct.Struct(">qi4xb4x2xi8xq")
_MAX_RELATIVE_OFFSET = 2**31 - 1


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset zero-padded to 20 digits, then the suffix."""
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The parts of a stored batch's header that placing, reading and truncating need."""

    position: int
    base_offset: int
    size_in_bytes: int
    last_offset: int
    max_timestamp: int


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

    def rolling_timestamp(self) -> int:
        """What `segment.ms` counts from: the first batch's max timestamp, else creation time."""
        if self._rolling_timestamp is None:
            first = next(iter(self.headers()), None)
            if first is None or first.max_timestamp < 0:
                return self.created_ms
            self._rolling_timestamp = first.max_timestamp
        return self._rolling_timestamp

    # -- writing -----------------------------------------------------------------------------

    def append(self, data: bytes, *, largest_offset: int, max_timestamp: int) -> None:
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
        if self.size == 0 and self._rolling_timestamp is None and max_timestamp >= 0:
            self._rolling_timestamp = max_timestamp
        self.size += len(data)
        self._bytes_since_index_entry += len(data)
        self._next_offset = largest_offset + 1
        if self._max_timestamp is not None:
            self._max_timestamp = max(self._max_timestamp, max_timestamp)

    def flush(self) -> None:
        os.fsync(self._fd)
        self.index.flush()

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= `offset`; return the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        self.index.truncate_to(offset)
        os.ftruncate(self._fd, found.position)
        self.size = found.position
        self._bytes_since_index_entry = 0
        self._next_offset = None
        self._max_timestamp = None
        if self.size == 0:
            self._rolling_timestamp = None
        return removed

    def recover(self) -> int:
        """Re-read every batch, checking CRC and structure, and rebuild the index.

        Truncates the file at the first batch that is partial, invalid or out of offset order;
        returns the number of bytes truncated.
        """
        self.index.truncate()
        file_size = os.fstat(self._fd).st_size
        position = 0
        last_offset = self.base_offset - 1
        max_timestamp = -1
        first_timestamp: int | None = None
        since_entry = 0
        while position < file_size:
            batch = self._valid_batch_at(position, file_size, last_offset)
            if batch is None:
                break
            if since_entry > self.index_interval_bytes:
                self.index.append(batch.last_offset, position)
                since_entry = 0
            if first_timestamp is None:
                first_timestamp = batch.max_timestamp
            max_timestamp = max(max_timestamp, batch.max_timestamp)
            last_offset = batch.last_offset
            position += batch.size_in_bytes
            since_entry += batch.size_in_bytes
        if position < file_size:
            os.ftruncate(self._fd, position)
        self.size = position
        self._bytes_since_index_entry = since_entry
        self._next_offset = last_offset + 1
        self._max_timestamp = max_timestamp
        self._rolling_timestamp = (
            first_timestamp if first_timestamp is not None and first_timestamp >= 0 else None
        )
        return file_size - position

    def _valid_batch_at(
        self, position: int, file_size: int, last_offset: int
    ) -> RecordBatch | None:
        prefix = os.pread(self._fd, LOG_OVERHEAD, position)
        try:
            size = batch_size_at(prefix, 0, self.max_batch_size)
        except CorruptRecordError:
            return None
        if size is None or position + size > file_size:
            return None
        try:
            batch = RecordBatch(os.pread(self._fd, size, position), deep=True)
        except CorruptRecordError:  # a compressed batch is not damage: that error propagates
            return None
        if batch.base_offset <= last_offset or (
            batch.last_offset - self.base_offset > _MAX_RELATIVE_OFFSET
        ):
            return None
        return batch

    # -- reading -----------------------------------------------------------------------------

    def header_at(self, position: int) -> BatchHeader:
        raw = os.pread(self._fd, _HEADER.size, position)
        if len(raw) < _HEADER.size:
            raise StorageError(f"{self.log_path}: no batch header at position {position}")
        base, length, _magic, last_delta, max_ts = _HEADER.unpack(raw)
        return BatchHeader(position, base, length + LOG_OVERHEAD, base + last_delta, max_ts)

    def headers(self, start_position: int = 0) -> list[BatchHeader]:
        """The headers of every whole batch from `start_position` on.

        Stops at a partial batch (a torn write that recovery has not truncated yet), as Kafka's
        reads of a segment do.
        """
        result = []
        position = start_position
        while position + _HEADER.size <= self.size:
            header = self.header_at(position)
            if header.size_in_bytes < _HEADER.size or position + header.size_in_bytes > self.size:
                break
            result.append(header)
            position += header.size_in_bytes
        return result

    def find_batch(self, offset: int) -> BatchHeader | None:
        """The first batch whose last offset is >= `offset` (Kafka's translateOffset)."""
        _, position = self.index.lookup(offset)
        while position < self.size:
            header = self.header_at(position)
            if header.last_offset >= offset:
                return header
            position += header.size_in_bytes
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
        """
        first = self.find_batch(start_offset)
        if first is None:
            return None
        start = end = first.position
        header: BatchHeader | None = first
        while header is not None:
            if max_offset is not None and header.last_offset >= max_offset:
                break
            if end - start + header.size_in_bytes > max_bytes and not (
                min_one_batch and end == start
            ):
                break
            end += header.size_in_bytes
            header = self.header_at(end) if end < self.size else None
        data = os.pread(self._fd, end - start, start) if end > start else b""
        return data, start

    def _read_next_offset(self) -> int:
        last_entry_offset, position = self.index.lookup(2**63 - 1)
        del last_entry_offset
        headers = self.headers(position)
        return headers[-1].last_offset + 1 if headers else self.base_offset

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
