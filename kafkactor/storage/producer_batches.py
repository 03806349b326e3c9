"""The producer fields of the batches in a segment file, read from their headers: what the
producer state is rebuilt from when a log opens or is truncated (Kafka replays the batches
after its latest producer snapshot; no snapshot is written here, so every batch is read).

Only the 61-byte headers are read, in 1 MiB chunks, except for a control batch, whose one
record says whether it commits or aborts (and by which coordinator epoch).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkactor.storage.control_batch import EndTransactionMarker, end_txn_marker
from kafkactor.storage.errors import StorageError
from kafkactor.storage.record_batch import RecordBatch
from kafkactor.storage.records import (
    _CONTROL_MASK,
    _TRANSACTIONAL_MASK,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
)

__all__ = ["StoredProducerBatch", "read_producer_batches"]

# baseOffset, batchLength, (partitionLeaderEpoch, magic, crc skipped), attributes,
# lastOffsetDelta, (baseTimestamp skipped), maxTimestamp, producerId, producerEpoch,
# baseSequence, (recordCount skipped): the whole 61-byte header
_HEADER = struct.Struct(">qi4x1x4xhi8xqqhi4x")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_SCAN_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class StoredProducerBatch:
    """The producer fields of one batch header read from a segment file (and, for a control
    batch, its marker: None when it holds no COMMIT or ABORT record)."""

    position: int
    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_control_batch: bool = False
    is_transactional: bool = False
    end_txn_marker: EndTransactionMarker | None = None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def _marker_at(
    fd: int, chunk: bytes, at: int, position: int, size: int
) -> EndTransactionMarker | None:
    data = chunk[at : at + size] if at + size <= len(chunk) else os.pread(fd, size, position)
    try:
        return end_txn_marker(RecordBatch(data, verify_crc=False))
    except StorageError:
        return None  # a marker whose record cannot be read ends nothing


def read_producer_batches(path: Path, size: int) -> Iterator[StoredProducerBatch]:
    """The batches with a producer id among the first `size` bytes of a segment file: data
    batches and transaction markers.

    The file was recovered (or written by this process), so the batches are trusted. Stops at a
    partial batch.
    """
    if size < _HEADER.size:
        return  # an empty segment (whose file a new log may not have created yet)
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        chunk = b""
        chunk_start = 0
        while position + _HEADER.size <= size:
            at = position - chunk_start
            if at + _HEADER.size > len(chunk):
                chunk = os.pread(fd, min(_SCAN_CHUNK, size - position), position)
                chunk_start, at = position, 0
                if len(chunk) < _HEADER.size:
                    return
            base, length, attributes, delta, max_ts, pid, epoch, sequence = _HEADER.unpack_from(
                chunk, at
            )
            batch_size = length + LOG_OVERHEAD
            if batch_size < _HEADER.size or position + batch_size > size:
                return
            if pid >= 0:
                control = bool(attributes & _CONTROL_MASK)
                marker = _marker_at(fd, chunk, at, position, batch_size) if control else None
                yield StoredProducerBatch(
                    position,
                    base,
                    delta,
                    max_ts,
                    pid,
                    epoch,
                    sequence,
                    control,
                    bool(attributes & _TRANSACTIONAL_MASK),
                    marker,
                )
            position += batch_size
    finally:
        os.close(fd)
