"""Re-writing record batches without some of their records: Kafka's ``MemoryRecords.filterTo``.

The log cleaner passes each batch of a segment through a filter (``RecordFilter``, Kafka's
``MemoryRecords.RecordFilter``) and writes what ``filter_batches`` returns, as Kafka does:

- a batch the filter deletes outright (``BatchRetention.DELETE``) is skipped unread;
- a batch whose records are all kept is copied byte for byte;
- a batch that loses some records is rebuilt (``rebuild_batch``) as Kafka's
  ``buildRetainedRecordsInto`` does: the same base offset, last offset delta (so the producer's
  last sequence is kept), partition leader epoch, producer id / epoch / base sequence,
  timestamp type and flags, and the same compression codec (the records are compressed again
  with it); each kept record keeps its offset and timestamp, the batch's first timestamp
  becomes the first kept record's (the log-append time for a ``LOG_APPEND_TIME`` batch) and
  its max timestamp the largest kept one;
- a batch that loses every record is dropped (``DELETE_EMPTY``), unless the filter asks to
  keep it (``RETAIN_EMPTY``, for an idempotent producer's last batch): then only its header is
  written (``empty_batch_header``, Kafka's ``DefaultRecordBatch.writeEmptyHeader``), with no
  records, no codec, first timestamp -1, and its offsets, max timestamp and producer fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

import crc32c

from kafkactor.storage.compression import CompressionType, compress
from kafkactor.storage.record_batch import RecordBatch
from kafkactor.storage.records import (
    _CODEC_MASK,
    _CONTROL_MASK,
    _HEAD,
    _MIN_BATCH_LENGTH,
    _TAIL,
    _TIMESTAMP_TYPE_MASK,
    _TRANSACTIONAL_MASK,
    MAGIC,
    NO_TIMESTAMP,
    BytesLike,
    StoredRecord,
    _encode_record,
)

__all__ = [
    "BatchRetention",
    "FilterResult",
    "RecordFilter",
    "empty_batch_header",
    "filter_batches",
    "rebuild_batch",
]

_KEPT_FLAGS = _TIMESTAMP_TYPE_MASK | _TRANSACTIONAL_MASK | _CONTROL_MASK


class BatchRetention(Enum):
    """What to do with a batch before its records are looked at (Kafka's ``BatchRetention``)."""

    DELETE = "delete"  # drop the batch, records unread
    RETAIN_EMPTY = "retain_empty"  # keep at least its header, even with no record left
    DELETE_EMPTY = "delete_empty"  # drop it if no record is left


class RecordFilter(Protocol):
    """Kafka's ``MemoryRecords.RecordFilter``: which batches and records a re-write keeps."""

    def check_batch_retention(self, batch: RecordBatch) -> BatchRetention: ...

    def should_retain_record(self, batch: RecordBatch, record: StoredRecord) -> bool: ...


@dataclass(slots=True)
class FilterResult:
    """What ``filter_batches`` wrote (Kafka's ``FilterResult``): the kept batches' bytes, the
    counts for the cleaner's statistics, and the output's last offset and max timestamp."""

    output: bytes = b""
    messages_read: int = 0
    bytes_read: int = 0
    messages_retained: int = 0
    bytes_retained: int = 0
    last_offset: int = -1  # of the output's last batch (-1: nothing written)
    max_timestamp: int = NO_TIMESTAMP


def filter_batches(batches: Iterable[RecordBatch], record_filter: RecordFilter) -> FilterResult:
    """Re-write `batches` keeping what `record_filter` keeps (see the module docstring)."""
    result = FilterResult()
    out: list[BytesLike] = []
    for batch in batches:
        result.bytes_read += batch.size_in_bytes
        retention = record_filter.check_batch_retention(batch)
        if retention is BatchRetention.DELETE:
            continue
        records = batch.records()
        result.messages_read += len(records)
        kept = [record for record in records if record_filter.should_retain_record(batch, record)]
        if kept:
            written: BytesLike = (
                batch.buffer if len(kept) == len(records) else rebuild_batch(batch, kept)
            )
            result.messages_retained += len(kept)
        elif retention is BatchRetention.RETAIN_EMPTY:
            written = empty_batch_header(batch)
        else:
            continue
        out.append(written)
        result.bytes_retained += len(written)
        result.last_offset = batch.last_offset  # kept either way: the last offset delta stays
        result.max_timestamp = max(result.max_timestamp, _max_timestamp(batch, kept))
    result.output = b"".join(out)
    return result


def _max_timestamp(batch: RecordBatch, kept: Sequence[StoredRecord]) -> int:
    if not kept or batch.attributes & _TIMESTAMP_TYPE_MASK:
        return batch.max_timestamp  # an empty header keeps it; log-append time is the batch's
    return max(record.timestamp_ms for record in kept)


def rebuild_batch(batch: RecordBatch, kept: Sequence[StoredRecord]) -> bytes:
    """`batch` holding only `kept` (some of its records, in order), as Kafka rebuilds it."""
    if not kept:
        raise ValueError("a rebuilt batch needs at least one record; see empty_batch_header")
    base_offset = batch.base_offset
    base_timestamp = kept[0].timestamp_ms
    parts: list[bytes] = []
    for record in kept:
        _encode_record(
            parts,
            record.to_record(),
            record.offset - base_offset,
            record.timestamp_ms - base_timestamp,
        )
    body = b"".join(parts)
    codec = batch.compression_codec
    if codec:
        body = compress(CompressionType(codec), body)
    max_timestamp = _max_timestamp(batch, kept)
    return _batch(
        batch,
        body,
        codec=codec,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        count=len(kept),
    )


def empty_batch_header(batch: RecordBatch) -> bytes:
    """The header of `batch` with no records (Kafka's ``DefaultRecordBatch.writeEmptyHeader``):
    what a cleaner keeps of an idempotent producer's last batch once every record is gone."""
    return _batch(
        batch, b"", codec=0, base_timestamp=NO_TIMESTAMP, max_timestamp=batch.max_timestamp, count=0
    )


def _batch(
    batch: RecordBatch,
    body: bytes,
    *,
    codec: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
) -> bytes:
    attributes = (codec & _CODEC_MASK) | (batch.attributes & _KEPT_FLAGS)
    tail = _TAIL.pack(
        attributes,
        batch.last_offset_delta,
        base_timestamp,
        max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        count,
    )
    crc = crc32c.crc32c(body, crc32c.crc32c(tail))
    head = _HEAD.pack(
        batch.base_offset, _MIN_BATCH_LENGTH + len(body), batch.leader_epoch, MAGIC, crc
    )
    return b"".join((head, tail, body))
