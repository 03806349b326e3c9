"""Kafka record batches, magic 2, byte for byte as Apache Kafka writes them.

This is the on-disk (and on-wire) format of Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``.
A batch is a 61-byte big-endian header followed by its records::

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

Reading is split in two levels so that a log can scan cheaply: ``iter_batches`` checks each
batch's header and CRC (one ``struct`` unpack and one hardware CRC-32C per batch) and hands out
zero-copy ``RecordBatch`` views; only ``RecordBatch.records()`` / ``validate_records()`` (or
``deep=True``) walk the varint-framed records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final, NoReturn

import crc32c

from kafkactor.storage.errors import (
    CorruptRecordError,
    TruncatedBatchError,
    UnsupportedCompressionError,
)

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
    "RecordBatch",
    "StoredRecord",
    "TimestampType",
    "batch_size_at",
    "build_batch",
    "iter_batches",
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

_INT16_MAX: Final = 2**15 - 1
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1
_UINT32_MAX: Final = 2**32 - 1
_UINT64_MAX: Final = 2**64 - 1

_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_MASK: Final = 0x08
_TRANSACTIONAL_MASK: Final = 0x10
_CONTROL_MASK: Final = 0x20

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_HEAD = struct.Struct(">qiibI")  # baseOffset .. crc: the part the CRC does not cover
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount: the header part the CRC covers
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
assert _HEAD.size + _TAIL.size == RECORD_BATCH_OVERHEAD

_BASE_OFFSET_OFFSET: Final = 0
_PARTITION_LEADER_EPOCH_OFFSET: Final = 12
_ATTRIBUTES_OFFSET: Final = _HEAD.size  # 21: where the CRC-covered bytes start

_MIN_BATCH_LENGTH: Final = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD  # 49
# The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength, valueLength
# and headerCount, one byte each.
_MIN_RECORD_SIZE: Final = 7
_MAX_VARINT_BYTES: Final = 5
_MAX_VARLONG_BYTES: Final = 10


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


# Zigzag varints of -8192..8191 (one or two bytes), the values a record's framing mostly holds.
_SMALL_ZIGZAG_MIN = -8192
_SMALL_ZIGZAG = tuple(_varint(value) for value in range(_SMALL_ZIGZAG_MIN, -_SMALL_ZIGZAG_MIN))


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
) -> bytes:
    """Encode ``records`` as one uncompressed magic-2 batch, as Kafka's MemoryRecordsBuilder does.

    Record ``i`` gets offset ``base_offset + i``. The batch's baseTimestamp is the *first*
    record's timestamp (every record stores its delta from it, possibly negative) and its
    maxTimestamp the largest one; for ``LOG_APPEND_TIME`` the records keep their create-time
    deltas and maxTimestamp is ``log_append_time_ms``, which readers report for every record.
    Raises ``ValueError`` for an empty list, an out-of-range field or an invalid producer state,
    and ``TypeError`` (from ``Record``) for fields of the wrong type.
    """
    _check_batch_arguments(records, base_offset, leader_epoch)
    _check_producer_state(producer_id, producer_epoch, base_sequence, is_transactional)
    timestamp_type = TimestampType(timestamp_type)
    max_timestamp = _max_timestamp(records, timestamp_type, log_append_time_ms)
    body = _encode_records(records)
    batch_length = _MIN_BATCH_LENGTH + len(body)
    if batch_length > _INT32_MAX:
        raise ValueError(f"the batch would be {batch_length} bytes long, more than an int32")
    count = len(records)

    attributes = _TIMESTAMP_TYPE_MASK if timestamp_type is LOG_APPEND_TIME else 0
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    tail = _TAIL.pack(
        attributes,
        count - 1,
        records[0].timestamp_ms,  # baseTimestamp
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c.crc32c(body, crc32c.crc32c(tail))
    head = _HEAD.pack(base_offset, batch_length, leader_epoch, MAGIC, crc)
    return b"".join((head, tail, body))


# --------------------------------------------------------------------------------------------
# Reading


def _as_byte_view(buf: BytesLike) -> memoryview:
    view = memoryview(buf)
    if view.ndim != 1 or view.format != "B":
        view = view.cast("B")
    return view.toreadonly()


def batch_size_at(
    buf: BytesLike, position: int = 0, max_batch_size: int = MAX_BATCH_SIZE
) -> int | None:
    """Size in bytes of the batch starting at ``position``, read from its 12-byte prefix alone.

    Returns ``None`` when fewer than 12 bytes remain (the end of the buffer, or a partial
    prefix: compare ``position`` with the buffer's length to tell them apart). Raises
    ``CorruptRecordError`` when the declared length is below a bare header (61 bytes in all) or
    above ``max_batch_size``. Does not check that the whole batch is present.
    """
    if len(buf) - position < LOG_OVERHEAD:
        return None
    _, batch_length = _PREFIX.unpack_from(buf, position)
    if batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch length {batch_length} is smaller than a batch header ({_MIN_BATCH_LENGTH})",
            position,
        )
    size: int = batch_length + LOG_OVERHEAD
    if size > max_batch_size:
        raise CorruptRecordError(
            f"batch size {size} exceeds the largest allowed batch ({max_batch_size})", position
        )
    return size


def iter_batches(
    buf: BytesLike,
    start_position: int = 0,
    *,
    max_batch_size: int = MAX_BATCH_SIZE,
    verify_crc: bool = True,
    deep: bool = False,
) -> Iterator[RecordBatch]:
    """Yield the batches of ``buf`` from ``start_position`` on, in order, each one validated.

    Each batch's header is checked (length, magic, codec, counts and offsets consistent) and,
    unless ``verify_crc`` is false, its CRC-32C; ``deep=True`` also walks every record's framing
    (what log recovery needs). The batches are zero-copy views: do not mutate ``buf`` while
    they are in use. Batches before a bad one are yielded first, then the error is raised:
    ``TruncatedBatchError`` when the buffer ends inside a batch, ``CorruptRecordError`` for bad
    bytes, ``UnsupportedCompressionError`` for a compressed batch; each carries the position of
    the batch at fault.
    """
    view = _as_byte_view(buf)
    end = len(view)
    _check_range("start_position", start_position, 0, end)
    position = start_position
    while position < end:
        size = batch_size_at(view, position, max_batch_size)
        if size is None:
            raise TruncatedBatchError(
                f"{end - position} bytes remain, fewer than a batch's {LOG_OVERHEAD}-byte prefix",
                position,
            )
        if size > end - position:
            raise TruncatedBatchError(
                f"batch of {size} bytes but only {end - position} bytes remain", position
            )
        yield RecordBatch._at(view[position : position + size], position, verify_crc, deep)
        position += size


class RecordBatch:
    """A validated, read-only view of one magic-2 record batch (Kafka's ``DefaultRecordBatch``).

    The header fields are decoded once; records are decoded only by ``records()``. Build one
    from the bytes of exactly one batch with ``RecordBatch(data)``, or get them from
    ``iter_batches``. ``position`` is where the batch starts in the buffer it was read from.
    """

    __slots__ = ("_buffer", "_header", "_position")

    _buffer: memoryview
    _header: tuple[int, ...]
    _position: int

    def __init__(self, data: BytesLike, *, verify_crc: bool = True, deep: bool = False) -> None:
        view = _as_byte_view(data)
        size = batch_size_at(view, 0)
        if size is None or size > len(view):
            raise TruncatedBatchError(
                f"{len(view)} bytes do not hold the whole batch ({size or 'unknown'} bytes)", 0
            )
        if size < len(view):
            raise CorruptRecordError(f"{len(view) - size} bytes follow the batch", 0)
        self._init(view, 0, verify_crc, deep)

    @classmethod
    def _at(cls, view: memoryview, position: int, verify_crc: bool, deep: bool) -> RecordBatch:
        """A batch over ``view`` (exactly its bytes, size already checked) found at ``position``."""
        batch = cls.__new__(cls)
        batch._init(view, position, verify_crc, deep)
        return batch

    def _init(self, view: memoryview, position: int, verify_crc: bool, deep: bool) -> None:
        header = _HEADER.unpack_from(view)
        _check_header(view, header, position, verify_crc)
        self._buffer = view
        self._header = header
        self._position = position
        if deep:
            self.validate_records()

    # -- header fields ---------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Byte offset of this batch in the buffer it was read from (0 when built directly)."""
        return self._position

    @property
    def base_offset(self) -> int:
        return self._header[0]

    @property
    def batch_length(self) -> int:
        """The batchLength field: bytes after it to the end of the batch."""
        return self._header[1]

    @property
    def size_in_bytes(self) -> int:
        """The whole batch, including the 12-byte baseOffset + batchLength prefix."""
        return self._header[1] + LOG_OVERHEAD

    @property
    def leader_epoch(self) -> int:
        """The partitionLeaderEpoch field."""
        return self._header[2]

    @property
    def magic(self) -> int:
        return self._header[3]

    @property
    def crc(self) -> int:
        return self._header[4]

    @property
    def attributes(self) -> int:
        return self._header[5]

    @property
    def compression_codec(self) -> int:
        """Bits 0-2 of the attributes; always 0 (none) for a batch that passed validation."""
        return self._header[5] & _CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self._header[5] & _TIMESTAMP_TYPE_MASK else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self._header[5] & _TRANSACTIONAL_MASK)

    @property
    def is_control_batch(self) -> bool:
        return bool(self._header[5] & _CONTROL_MASK)

    @property
    def last_offset_delta(self) -> int:
        return self._header[6]

    @property
    def last_offset(self) -> int:
        return self._header[0] + self._header[6]

    @property
    def next_offset(self) -> int:
        return self._header[0] + self._header[6] + 1

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp (Kafka's ``firstTimestamp`` / ``baseTimestamp``)."""
        return self._header[7]

    @property
    def max_timestamp(self) -> int:
        return self._header[8]

    @property
    def producer_id(self) -> int:
        return self._header[9]

    @property
    def producer_epoch(self) -> int:
        return self._header[10]

    @property
    def base_sequence(self) -> int:
        return self._header[11]

    @property
    def record_count(self) -> int:
        return self._header[12]

    @property
    def buffer(self) -> memoryview:
        """The batch's raw bytes (read-only, zero-copy view of the buffer it was read from)."""
        return self._buffer

    def __len__(self) -> int:
        return self._header[12]

    def __repr__(self) -> str:
        return (
            f"RecordBatch(position={self._position}, offsets=[{self.base_offset}, "
            f"{self.last_offset}], leader_epoch={self.leader_epoch}, "
            f"records={self.record_count}, size={self.size_in_bytes})"
        )

    # -- records ---------------------------------------------------------------------------

    def records(self) -> list[StoredRecord]:
        """Decode every record; raises ``CorruptRecordError`` if the framing is inconsistent."""
        return self._walk(materialize=True)

    def validate_records(self) -> None:
        """Walk every record's framing without keeping the records (what ``deep=True`` does)."""
        header = self._header
        data = self._buffer.tobytes()
        if _framing_is_plain(data, RECORD_BATCH_OVERHEAD, header[12], header[6]):
            return
        self._walk(materialize=False)  # the careful reader: it names what is wrong

    def _walk(self, *, materialize: bool) -> list[StoredRecord]:
        reader = _RecordReader(self._buffer.tobytes(), RECORD_BATCH_OVERHEAD, self._position)
        header = self._header
        base_offset, last_offset_delta, base_timestamp = header[0], header[6], header[7]
        log_append_time = header[8] if header[5] & _TIMESTAMP_TYPE_MASK else None
        records: list[StoredRecord] = []
        previous_delta = -1
        for index in range(header[12]):
            if reader.pos == reader.batch_end:
                reader.fail(f"batch declares {header[12]} records but holds only {index}")
            offset_delta, timestamp_delta, key, value, headers = reader.record(materialize)
            if not previous_delta < offset_delta <= last_offset_delta:
                reader.fail(
                    f"record offset delta {offset_delta} is not in ({previous_delta}, "
                    f"{last_offset_delta}]"
                )
            previous_delta = offset_delta
            if materialize:
                timestamp = (
                    base_timestamp + timestamp_delta if log_append_time is None else log_append_time
                )
                records.append(
                    StoredRecord(base_offset + offset_delta, timestamp, key, value, headers)
                )
        if reader.pos != reader.batch_end:
            reader.fail(
                f"{reader.batch_end - reader.pos} bytes remain after the "
                f"{header[12]} records the batch declares"
            )
        return records

    # -- re-stamping -----------------------------------------------------------------------

    def restamp(self, *, base_offset: int | None = None, leader_epoch: int | None = None) -> bytes:
        """This batch's bytes with a new baseOffset and/or partitionLeaderEpoch; CRC still valid.

        What a leader does on append (assign offsets, stamp its epoch). The CRC covers only the
        bytes from attributes (offset 21) to the end, so baseOffset (0-7) and
        partitionLeaderEpoch (12-15) can be rewritten without recomputing it: Kafka's
        ``DefaultRecordBatch.setLastOffset`` and ``setPartitionLeaderEpoch`` write those fields
        in place and leave the CRC alone (only ``setMaxTimestamp`` recomputes it).
        """
        out = bytearray(self._buffer)
        if base_offset is not None:
            _check_range("base_offset", base_offset, 0, _INT64_MAX - self.last_offset_delta)
            _INT64.pack_into(out, _BASE_OFFSET_OFFSET, base_offset)
        if leader_epoch is not None:
            _check_range("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
            _INT32.pack_into(out, _PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        return bytes(out)


def stamp_batches(
    buf: bytearray, batches: Sequence[RecordBatch], base_offset: int, leader_epoch: int
) -> int:
    """Assign consecutive offsets from `base_offset` and the leader epoch to batches in place.

    `batches` are views returned by `iter_batches` over the same bytes as `buf` (their
    `position` locates each in `buf`). The CRCs stay valid (see `RecordBatch.restamp`). This is
    a leader's append without a copy per batch. Returns the offset after the last batch.
    """
    _check_range("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
    offset = base_offset
    for batch in batches:
        _check_range("base_offset", offset, 0, _INT64_MAX - batch.last_offset_delta)
        _INT64.pack_into(buf, batch.position + _BASE_OFFSET_OFFSET, offset)
        _INT32.pack_into(buf, batch.position + _PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        offset += batch.last_offset_delta + 1
    return offset


def _check_header(
    view: memoryview, header: tuple[int, ...], position: int, verify_crc: bool
) -> None:
    """Everything about a batch that can be checked without walking its records."""
    base_offset, _, _, magic, crc, attributes, last_offset_delta = header[:7]
    count = header[12]

    def fail(message: str) -> NoReturn:
        raise CorruptRecordError(message, position)

    if magic != MAGIC:
        fail(f"magic byte is {magic}; only message format v2 batches are supported")
    if verify_crc:
        computed = crc32c.crc32c(view[_ATTRIBUTES_OFFSET:])
        if computed != crc:
            fail(f"CRC-32C mismatch: stored {crc:#010x}, computed {computed:#010x}")
    codec = attributes & _CODEC_MASK
    if codec:
        raise UnsupportedCompressionError(codec, position)
    if count < 0:
        fail(f"negative record count {count}")
    if last_offset_delta < 0:
        fail(f"negative last offset delta {last_offset_delta}")
    if count > last_offset_delta + 1:
        fail(f"{count} records do not fit in {last_offset_delta + 1} offsets")
    if count * _MIN_RECORD_SIZE > len(view) - RECORD_BATCH_OVERHEAD:
        fail(f"{count} records cannot fit in {len(view) - RECORD_BATCH_OVERHEAD} bytes")
    if not 0 <= base_offset <= _INT64_MAX - last_offset_delta:
        fail(f"offsets [{base_offset}, {base_offset} + {last_offset_delta}] are out of range")


def _framing_is_plain(  # noqa: PLR0911, PLR0912 - one flat loop: the produce hot path
    data: bytes, pos: int, count: int, last_offset_delta: int
) -> bool:
    """Whether ``count`` records from ``pos`` to the end of ``data`` are well framed, on the
    common path only: every varint of one or two bytes and no headers.

    True means valid. False means "not decided here" (a longer varint, a header, or anything
    wrong); the careful ``_RecordReader`` then checks again and names the problem. This loop
    is the leader's per-record check on every produce, so it avoids calls and objects.
    """
    end = len(data)
    previous = -1
    for _ in range(count):
        if pos + 2 > end:
            return False
        byte = data[pos]  # record length
        if byte < 0x80:
            raw, pos = byte, pos + 1
        elif data[pos + 1] < 0x80:
            raw, pos = (byte & 0x7F) | (data[pos + 1] << 7), pos + 2
        else:
            return False
        if raw & 1:
            return False
        record_end = pos + (raw >> 1)
        if record_end > end or record_end - pos < 6:  # the smallest record has 6 bytes
            return False
        pos += 1  # attributes
        for field in range(4):  # timestamp delta, offset delta, key length, value length
            byte = data[pos]
            if byte < 0x80:
                raw, pos = byte, pos + 1
            elif pos + 1 < record_end and data[pos + 1] < 0x80:
                raw, pos = (byte & 0x7F) | (data[pos + 1] << 7), pos + 2
            else:
                return False
            value = (raw >> 1) ^ -(raw & 1)
            if field == 1:
                if not previous < value <= last_offset_delta:
                    return False
                previous = value
            elif field >= 2:
                if value < -1:
                    return False
                if value > 0:
                    pos += value
            if pos >= record_end:
                return False
        if data[pos] != 0 or pos + 1 != record_end:  # no headers, and nothing left over
            return False
        pos = record_end
    return pos == end


class _RecordReader:
    """A cursor over one batch's record bytes that turns every framing error into
    ``CorruptRecordError`` (Kafka's ``DefaultRecord.readFrom``, strict about lengths)."""

    __slots__ = ("batch_end", "batch_position", "data", "end", "pos")

    def __init__(self, data: bytes, start: int, batch_position: int) -> None:
        self.data = data
        self.pos = start
        self.end = len(data)  # the current limit: the record being read, or the batch
        self.batch_end = len(data)
        self.batch_position = batch_position

    def fail(self, message: str) -> NoReturn:
        raise CorruptRecordError(message, self.batch_position)

    def _unsigned(self, max_bytes: int) -> int:
        data, pos, end = self.data, self.pos, self.end
        result = 0
        shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                self.fail(f"varint at byte {pos} of the batch runs past the end of its record")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return result
            shift += 7
        self.fail(f"varint at byte {self.pos} of the batch is longer than {max_bytes} bytes")

    def _short(self) -> int | None:
        """A zigzag value of one or two bytes (below 8192: the common cases), else None."""
        pos = self.pos
        if pos + 1 >= self.end:
            return None
        data = self.data
        byte = data[pos]
        if byte < 0x80:
            self.pos = pos + 1
            return (byte >> 1) ^ -(byte & 1)
        second = data[pos + 1]
        if second < 0x80:
            self.pos = pos + 2
            raw = (byte & 0x7F) | (second << 7)
            return (raw >> 1) ^ -(raw & 1)
        return None

    def varint(self) -> int:
        """A zigzag int32: at most 5 bytes, and no bits beyond the 32nd (Java would drop them)."""
        short = self._short()
        if short is not None:
            return short
        raw = self._unsigned(_MAX_VARINT_BYTES)
        if raw > _UINT32_MAX:
            self.fail(f"varint ending at byte {self.pos} of the batch overflows 32 bits")
        return (raw >> 1) ^ -(raw & 1)

    def varlong(self) -> int:
        """A zigzag int64: at most 10 bytes, and no bits beyond the 64th."""
        short = self._short()
        if short is not None:
            return short
        raw = self._unsigned(_MAX_VARLONG_BYTES)
        if raw > _UINT64_MAX:
            self.fail(f"varlong ending at byte {self.pos} of the batch overflows 64 bits")
        return (raw >> 1) ^ -(raw & 1)

    def nullable_bytes(self, what: str, keep: bool) -> bytes | None:
        """A varint length (-1 for null) and that many bytes; ``None`` also when not kept."""
        length = self.varint()
        if length < 0:
            if length != -1:
                self.fail(f"{what} length {length} is negative and not -1 (null)")
            return None
        start = self.pos
        if length > self.end - start:
            self.fail(f"{what} of {length} bytes runs past the end of its record")
        self.pos = start + length
        return self.data[start : self.pos] if keep else None

    def header(self) -> tuple[str, bytes | None]:
        key_length = self.varint()
        start = self.pos
        if not 0 <= key_length <= self.end - start:
            self.fail(f"header key length {key_length} is negative or overruns its record")
        self.pos = start + key_length
        try:
            key = self.data[start : self.pos].decode("utf-8")
        except UnicodeDecodeError as error:
            self.fail(f"header key is not valid UTF-8: {error}")
        return key, self.nullable_bytes("header value", keep=True)

    def record(self, keep: bool) -> tuple[int, int, bytes | None, bytes | None, Headers]:
        """One record: (offset delta, timestamp delta, key, value, headers)."""
        length = self.varint()
        if not 0 <= length <= self.batch_end - self.pos:
            self.fail(
                f"record length {length} at byte {self.pos} is negative or overruns the batch "
                f"({self.batch_end - self.pos} bytes left)"
            )
        record_end = self.pos + length
        self.end = record_end
        if self.pos >= record_end:
            self.fail("record has no attributes byte")
        self.pos += 1  # record attributes: unused by Kafka, ignored as Kafka does
        timestamp_delta = self.varlong()
        offset_delta = self.varint()
        key = self.nullable_bytes("key", keep)
        value = self.nullable_bytes("value", keep)
        header_count = self.varint()
        # Each header takes at least two bytes (its two length varints).
        if not 0 <= 2 * header_count <= record_end - self.pos:
            self.fail(f"header count {header_count} is negative or too large for its record")
        headers = tuple(self.header() for _ in range(header_count))
        if self.pos != record_end:
            self.fail(
                f"record declares {length} bytes but its fields end {record_end - self.pos} short"
            )
        self.end = self.batch_end
        return offset_delta, timestamp_delta, key, value, headers
