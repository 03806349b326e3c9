"""Kafka's record format, magic 2: the records and how a batch of them is built.

This models Kafka's ``DefaultRecord`` (one record's encoding) and ``MemoryRecordsBuilder`` (a
batch built from records), writing the on-disk (and on-wire) format of ``DefaultRecordBatch``
byte for byte as Apache Kafka does. A batch is a 61-byte big-endian header followed by its
records::

    offset  size  field                 notes
         0     8  baseOffset            offset of the first record
         8     4  batchLength           bytes after this field to the end of the batch
        12     4  partitionLeaderEpoch  -1 when not yet assigned by a leader
        16     1  magic                 always 2 here
        17     4  crc                   CRC-32C of bytes 21 .. end (attributes to end)
        21     2  attributes            bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
        23     4  lastOffsetDelta       last offset minus base offset
        27     8  baseTimestamp         timestamp of the first record (Kafka: "firstTimestamp")
        35     8  maxTimestamp          largest record timestamp, or the log-append time
        43     8  producerId            -1 unless idempotent / transactional
        51     2  producerEpoch         -1 unless idempotent / transactional
        53     4  baseSequence          -1 unless idempotent / transactional
        57     4  recordCount
        61     .  records

and each record is::

    length varint | attributes int8 (unused, 0) | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1: null) | key | valueLength varint (-1: null) | value |
    headerCount varint | (headerKeyLength varint | utf-8 key | headerValueLength varint | value)*

Varints are zigzag-encoded base-128 integers, as protobuf's ``sint32`` / ``sint64``: at most 5
bytes for a varint (32 bits), 10 for a varlong (64 bits).

The values here are the records (``Record`` as a producer gives it, ``StoredRecord`` as a
reader gets it back), the format's constants and header layout, and ``build_batch``.
Reading and validating batches is ``kafkactor.storage.record_batch``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

import crc32c

from kafkactor.storage.compression import CompressionType, compress

__all__ = [
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAX_BATCH_SIZE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "BytesLike",
    "Record",
    "StoredRecord",
    "TimestampType",
    "build_batch",
    "build_value_batch",
]

BytesLike = bytes | bytearray | memoryview
Headers = tuple[tuple[str, bytes | None], ...]

MAGIC: Final = 2
LOG_OVERHEAD: Final = 12
"""Bytes before ``batchLength`` counts: baseOffset (8) and batchLength itself (4)."""
RECORD_BATCH_OVERHEAD: Final = 61
"""Size of the batch header, i.e. of a batch with no records."""
MAX_BATCH_SIZE: Final = LOG_OVERHEAD + 0x7FFF_FFFF
"""Largest batch the format can describe (batchLength is an int32)."""

NO_PARTITION_LEADER_EPOCH: Final = -1
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_TIMESTAMP: Final = -1


class TimestampType(IntEnum):
    """Bit 3 of the batch attributes: who set the timestamps (Kafka's ``TimestampType``)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


CREATE_TIME: Final = TimestampType.CREATE_TIME
LOG_APPEND_TIME: Final = TimestampType.LOG_APPEND_TIME

# The names below with a leading underscore are the format's layout, shared with
# ``record_batch`` (the reader) and with no one outside this package.
_INT16_MAX: Final = 2**15 - 1
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1

_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_MASK: Final = 0x08
_TRANSACTIONAL_MASK: Final = 0x10
_CONTROL_MASK: Final = 0x20

_HEAD = struct.Struct(">qiibI")  # baseOffset .. crc: the part the CRC does not cover
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount: the header part the CRC covers
assert _HEAD.size + _TAIL.size == RECORD_BATCH_OVERHEAD

_ATTRIBUTES_OFFSET: Final = _HEAD.size  # 21: where the CRC-covered bytes start

_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a producer hands it to the log (Kafka's ``SimpleRecord``).

    ``key`` and ``value`` are nullable byte strings; ``timestamp_ms`` is the create time in epoch
    milliseconds (``NO_TIMESTAMP``, -1, when the producer gave none); ``headers`` are
    ``(str key, nullable bytes value)`` pairs in order, duplicates allowed, as Kafka's headers.
    """

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: Headers = ()

    def __post_init__(self) -> None:
        _check_nullable_bytes("key", self.key)
        _check_nullable_bytes("value", self.value)
        if type(self.timestamp_ms) is not int:
            raise TypeError(f"timestamp_ms must be an int, not {type(self.timestamp_ms).__name__}")
        if not isinstance(self.headers, tuple):
            raise TypeError(f"headers must be a tuple of pairs, not {type(self.headers).__name__}")
        for header in self.headers:
            if not (isinstance(header, tuple) and len(header) == 2 and isinstance(header[0], str)):
                raise TypeError(f"each header must be a (str, bytes | None) pair, not {header!r}")
            _check_nullable_bytes("header value", header[1])


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record read back from a batch, with the absolute offset the log assigned it.

    ``timestamp_ms`` is what Kafka reports to consumers: the record's create time, or the
    batch's ``maxTimestamp`` when the batch uses ``LOG_APPEND_TIME``.
    """

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers

    def to_record(self) -> Record:
        """The record without its offset, e.g. to append it to another log."""
        return Record(self.key, self.value, self.timestamp_ms, self.headers)


def _check_nullable_bytes(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bytes):
        raise TypeError(f"{name} must be bytes or None, not {type(value).__name__}")


# --------------------------------------------------------------------------------------------
# Writing


_ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))


def _uvarint(value: int) -> bytes:
    """Base-128, least significant group first, high bit = more bytes follow."""
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint(value: int) -> bytes:
    """Zigzag (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) then base-128; for int32 and int64 alike."""
    return _uvarint((value << 1) ^ (value >> 63))


_NULL_LENGTH: Final = _varint(-1)
_ZERO_ATTRIBUTES: Final = b"\x00"


def _append_nullable(parts: list[bytes], data: bytes | None) -> None:
    if data is None:
        parts.append(_NULL_LENGTH)
    else:
        parts.append(_varint(len(data)))
        parts.append(data)


def _encode_record(
    parts: list[bytes], record: Record, offset_delta: int, timestamp_delta: int
) -> None:
    """Append one record's framing and fields to ``parts`` (DefaultRecord.writeTo)."""
    body = [_ZERO_ATTRIBUTES, _varint(timestamp_delta), _varint(offset_delta)]
    _append_nullable(body, record.key)
    _append_nullable(body, record.value)
    body.append(_varint(len(record.headers)))
    for header_key, header_value in record.headers:
        encoded_key = header_key.encode("utf-8")
        body.append(_varint(len(encoded_key)))
        body.append(encoded_key)
        _append_nullable(body, header_value)
    parts.append(_varint(sum(map(len, body))))
    parts.extend(body)


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")


def _check_timestamp(name: str, value: int) -> None:
    # Kafka's MemoryRecordsBuilder: "Invalid negative timestamp" unless it is NO_TIMESTAMP.
    _check_range(name, value, NO_TIMESTAMP, _INT64_MAX)


def _check_producer_state(
    producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
) -> None:
    """The checks of Kafka's MemoryRecordsBuilder.validateProducerState."""
    _check_range("producer_id", producer_id, -(2**63), _INT64_MAX)
    _check_range("producer_epoch", producer_epoch, -(2**15), _INT16_MAX)
    _check_range("base_sequence", base_sequence, -(2**31), _INT32_MAX)
    if is_transactional and producer_id == NO_PRODUCER_ID:
        raise ValueError("a transactional batch needs a producer id")
    if producer_id != NO_PRODUCER_ID:
        if producer_epoch == NO_PRODUCER_EPOCH:
            raise ValueError("a batch with a producer id needs a producer epoch")
        if base_sequence < 0:
            raise ValueError("a batch with a producer id needs a non-negative base sequence")


def _max_timestamp(
    records: Sequence[Record], timestamp_type: TimestampType, log_append_time_ms: int | None
) -> int:
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        if log_append_time_ms is None:
            raise ValueError("a LOG_APPEND_TIME batch needs log_append_time_ms")
        _check_timestamp("log_append_time_ms", log_append_time_ms)
        return log_append_time_ms
    if log_append_time_ms is not None:
        raise ValueError("log_append_time_ms is only meaningful for LOG_APPEND_TIME batches")
    # Kafka starts from NO_TIMESTAMP and keeps the largest record timestamp; timestamps are
    # already known to be >= NO_TIMESTAMP, so the largest one is the answer.
    return max(record.timestamp_ms for record in records)


def _check_batch_arguments(records: Sequence[Record], base_offset: int, leader_epoch: int) -> None:
    if not records:
        raise ValueError("a record batch needs at least one record")
    count = len(records)
    _check_range("number of records", count, 1, _INT32_MAX)
    _check_range("base_offset", base_offset, 0, _INT64_MAX - (count - 1))
    _check_range("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
    for record in records:
        _check_timestamp("timestamp_ms", record.timestamp_ms)


# Zigzag varints of -8192..8191 (one or two bytes), the values a record's framing mostly holds:
# `_varint` of each, written out for two bytes at most (a third of the time, made at import)
_SMALL_ZIGZAG_MIN = -8192
_SMALL_ZIGZAG = tuple(
    _ONE_BYTE[zigzag] if zigzag < 0x80 else bytes(((zigzag & 0x7F) | 0x80, zigzag >> 7))
    for zigzag in ((v << 1) ^ (v >> 63) for v in range(_SMALL_ZIGZAG_MIN, -_SMALL_ZIGZAG_MIN))
)


def _encode_records(records: Sequence[Record]) -> bytes:
    """The records part of a batch: record ``i`` has offset delta ``i`` and its timestamp's
    delta from the first record's."""
    base_timestamp = records[0].timestamp_ms
    parts: list[bytes] = []
    small = _SMALL_ZIGZAG
    low, high = _SMALL_ZIGZAG_MIN, -_SMALL_ZIGZAG_MIN
    for offset_delta, record in enumerate(records):
        timestamp_delta = record.timestamp_ms - base_timestamp
        if timestamp_delta > _INT64_MAX:  # only NO_TIMESTAMP first, then a timestamp near 2**63
            raise ValueError(f"timestamp delta {timestamp_delta} does not fit a varlong")
        key, value = record.key, record.value
        key_length = -1 if key is None else len(key)
        value_length = -1 if value is None else len(value)
        if (
            not record.headers
            and low <= timestamp_delta < high
            and offset_delta < high
            and key_length < high
            and value_length < high
        ):
            # the common record: every varint from the table, no headers
            body = b"".join(
                (
                    _ZERO_ATTRIBUTES,
                    small[timestamp_delta - low],
                    small[offset_delta - low],
                    small[key_length - low],
                    key or b"",
                    small[value_length - low],
                    value or b"",
                    b"\x00",
                )
            )
            parts.append(_varint(len(body)))
            parts.append(body)
        else:
            _encode_record(parts, record, offset_delta, timestamp_delta)
    return b"".join(parts)


def build_batch(
    records: Sequence[Record],
    base_offset: int,
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    timestamp_type: TimestampType = CREATE_TIME,
    log_append_time_ms: int | None = None,
    compression: CompressionType = CompressionType.NONE,
) -> bytes:
    """Encode ``records`` as one magic-2 batch, as Kafka's MemoryRecordsBuilder does.

    Record ``i`` gets offset ``base_offset + i``. The batch's baseTimestamp is the *first*
    record's timestamp (every record stores its delta from it, possibly negative) and its
    maxTimestamp the largest one; for ``LOG_APPEND_TIME`` the records keep their create-time
    deltas and maxTimestamp is ``log_append_time_ms``, which readers report for every record.
    With a ``compression`` codec the records (everything after the 61-byte header) are
    compressed as Kafka's Java producer frames them (``kafkactor.storage.compression``) and
    the codec is set in the attributes; as in Kafka, even when that does not make them smaller.
    Raises ``ValueError`` for an empty list, an out-of-range field, an invalid producer state
    or an unknown codec, and ``TypeError`` (from ``Record``) for fields of the wrong type.
    """
    _check_batch_arguments(records, base_offset, leader_epoch)
    _check_producer_state(producer_id, producer_epoch, base_sequence, is_transactional)
    timestamp_type = TimestampType(timestamp_type)
    max_timestamp = _max_timestamp(records, timestamp_type, log_append_time_ms)
    body = _encode_records(records)
    if compression:
        body = compress(compression, body)  # ValueError for an unknown codec
    attributes = compression | (_TIMESTAMP_TYPE_MASK if timestamp_type is LOG_APPEND_TIME else 0)
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    tail = _TAIL.pack(
        attributes,
        len(records) - 1,
        records[0].timestamp_ms,  # baseTimestamp
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    return _framed(base_offset, leader_epoch, tail, body)


def _framed(base_offset: int, leader_epoch: int, tail: bytes, body: bytes) -> bytes:
    """The batch: the head (with the CRC-32C of what follows it), ``tail`` and ``body``."""
    batch_length = _MIN_BATCH_LENGTH + len(body)
    if batch_length > _INT32_MAX:
        raise ValueError(f"the batch would be {batch_length} bytes long, more than an int32")
    crc = crc32c.crc32c(body, crc32c.crc32c(tail))
    head = _HEAD.pack(base_offset, batch_length, leader_epoch, MAGIC, crc)
    return b"".join((head, tail, body))


def build_value_batch(values: Sequence[bytes | None], timestamp_ms: int) -> bytes:
    """The batch ``build_batch`` makes of ``Record(None, value, timestamp_ms)`` for each value
    (base offset 0, no producer id, uncompressed), byte for byte, without a ``Record`` per
    value: what a producer sends for bare values.

    Raises ``TypeError`` for a value that is not bytes or None, as ``Record`` does, and
    ``ValueError`` for no values or a timestamp out of range.
    """
    if not values:
        raise ValueError("a record batch needs at least one record")
    _check_range("number of records", len(values), 1, _INT32_MAX)
    if type(timestamp_ms) is not int:
        raise TypeError(f"timestamp_ms must be an int, not {type(timestamp_ms).__name__}")
    _check_timestamp("timestamp_ms", timestamp_ms)
    parts: list[bytes] = []
    small = _SMALL_ZIGZAG
    low, high = _SMALL_ZIGZAG_MIN, -_SMALL_ZIGZAG_MIN
    zero_delta, null_key = small[-low], small[-1 - low]
    for offset_delta, value in enumerate(values):
        if value is None:
            value_length = -1
        elif isinstance(value, bytes):
            value_length = len(value)
        else:
            raise TypeError(f"value must be bytes or None, not {type(value).__name__}")
        if offset_delta < high and value_length < high:  # the table path of _encode_records
            body = b"".join(
                (
                    _ZERO_ATTRIBUTES,
                    zero_delta,  # timestamp delta: every record has the batch's timestamp
                    small[offset_delta - low],
                    null_key,
                    small[value_length - low],
                    value or b"",
                    b"\x00",
                )
            )
            parts.append(_varint(len(body)))
            parts.append(body)
        else:
            _encode_record(parts, Record(None, value, timestamp_ms), offset_delta, 0)
    count = len(values)
    tail = _TAIL.pack(
        0, count - 1, timestamp_ms, timestamp_ms, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE,
        count,
    )  # fmt: skip
    return _framed(0, NO_PARTITION_LEADER_EPOCH, tail, b"".join(parts))
