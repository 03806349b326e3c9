"""Reading magic-2 record batches: Kafka's ``DefaultRecordBatch`` and ``MemoryRecords`` iteration.

A log reads batches in two levels so that it can scan cheaply: ``iter_batches`` (Kafka's
``MemoryRecords.batches()``) checks each batch's header and CRC (one ``struct`` unpack and one
hardware CRC-32C per batch) and hands out zero-copy ``RecordBatch`` views (Kafka's
``DefaultRecordBatch``); only ``RecordBatch.records()`` / ``validate_records()`` (or
``deep=True``) walk the varint-framed records (Kafka's ``DefaultRecord.readFrom``), strictly;
a compressed batch's records are decompressed first (``kafkactor.storage.compression``) and
walked the same way, while its bytes stay as the producer compressed them.
``stamped_chunks`` / ``RecordBatch.restamp`` are a leader's offset and epoch assignment.
The format itself, and building batches, is ``kafkactor.storage.records``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final, NoReturn

import crc32c

from kafkactor.storage.compression import MAX_DECOMPRESSED_SIZE, CompressionType, decompress
from kafkactor.storage.errors import (
    CorruptRecordError,
    TruncatedBatchError,
    UnsupportedCompressionError,
)
from kafkactor.storage.records import (
    _ATTRIBUTES_OFFSET,
    _CODEC_MASK,
    _CONTROL_MASK,
    _INT32_MAX,
    _INT64_MAX,
    _MIN_BATCH_LENGTH,
    _TIMESTAMP_TYPE_MASK,
    _TRANSACTIONAL_MASK,
    LOG_OVERHEAD,
    MAGIC,
    MAX_BATCH_SIZE,
    RECORD_BATCH_OVERHEAD,
    BytesLike,
    Headers,
    StoredRecord,
    TimestampType,
    _check_range,
)

__all__ = [
    "RecordBatch",
    "batch_size_at",
    "iter_batches",
    "log_append_time_chunks",
    "stamped_chunks",
]

_UINT32_MAX: Final = 2**32 - 1
_UINT64_MAX: Final = 2**64 - 1

# Defined here, not imported, so that ``_PREFIX.unpack_from(...)`` and the like compile to a
# method call without a bound-method object (CPython does not do that for imported names).
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
# baseOffset, batchLength, partitionLeaderEpoch: the fields before the magic byte
_STAMPED_PREFIX = struct.Struct(">qii")
_STAMPED_PREFIX_SIZE: Final = 16
assert _STAMPED_PREFIX.size == _STAMPED_PREFIX_SIZE
# The header from the attributes on (what the CRC covers of it), as `records._TAIL`.
_CRC_COVERED_HEADER = struct.Struct(">hiqqqhii")
# baseOffset .. crc, as `records._HEAD`
_UNCOVERED_HEADER = struct.Struct(">qiibI")
assert _UNCOVERED_HEADER.size == _ATTRIBUTES_OFFSET
assert _UNCOVERED_HEADER.size + _CRC_COVERED_HEADER.size == RECORD_BATCH_OVERHEAD
assert _HEADER.size == RECORD_BATCH_OVERHEAD

_BASE_OFFSET_OFFSET: Final = 0
_PARTITION_LEADER_EPOCH_OFFSET: Final = 12

# The smallest record: length, attributes, timestampDelta, offsetDelta, keyLength, valueLength
# and headerCount, one byte each.
_MIN_RECORD_SIZE: Final = 7
_MAX_VARINT_BYTES: Final = 5
_MAX_VARLONG_BYTES: Final = 10
_MAX_CODEC: Final = int(max(CompressionType))


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
    bytes (a compressed batch's records included), ``UnsupportedCompressionError`` for a codec
    id Kafka does not define (5-7); each carries the position of the batch at fault.
    """
    view = _as_byte_view(buf)
    end = len(view)
    _check_range("start_position", start_position, 0, end)
    # Records in `bytes` are walked where they are; anything else is copied per batch first.
    whole = buf if isinstance(buf, bytes) else None
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
        batch = RecordBatch._at(
            view[position : position + size], position, verify_crc, deep and whole is None
        )
        if deep and whole is not None:
            batch._validate_records_in(whole, position)
        yield batch
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

    def __init__(
        self,
        data: BytesLike,
        *,
        verify_crc: bool = True,
        deep: bool = False,
        _found_at: int = -1,
    ) -> None:
        if _found_at >= 0:  # from `_at`: exactly the bytes of a batch, its size checked
            self._init(
                data if isinstance(data, memoryview) else _as_byte_view(data),
                _found_at,
                verify_crc,
                deep,
            )
            return
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
        # (through the constructor, not cls.__new__: mypyc compiles this module)
        return cls(view, verify_crc=verify_crc, deep=deep, _found_at=position)

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
        """Bits 0-2 of the attributes: a ``CompressionType`` id (0-4) once validated."""
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
        """Decode every record (decompressing first if need be); raises ``CorruptRecordError``
        if the framing is inconsistent or the compressed records do not decompress."""
        if self._header[5] & _CODEC_MASK:
            return self._walk_decompressed(materialize=True)
        return self._walk(self._buffer.tobytes(), RECORD_BATCH_OVERHEAD, materialize=True)

    def validate_records(self) -> None:
        """Walk every record's framing without keeping the records (what ``deep=True`` does)."""
        header = self._header
        if header[5] & _CODEC_MASK:
            self._walk_decompressed(materialize=False)
            return
        data = self._buffer.tobytes()
        if _framing_is_plain(data, RECORD_BATCH_OVERHEAD, len(data), header[12], header[6]):
            return
        # the careful reader: it names what is wrong
        self._walk(data, RECORD_BATCH_OVERHEAD, materialize=False)

    def _validate_records_in(self, data: bytes, start: int) -> None:
        """``validate_records``, reading the records from ``data`` (which holds this batch at
        ``start``) instead of a copy of the batch: the leader's check of every produce."""
        header = self._header
        if header[5] & _CODEC_MASK:
            self._walk_decompressed(materialize=False)
            return
        first = start + RECORD_BATCH_OVERHEAD
        end = start + header[1] + LOG_OVERHEAD
        if not _framing_is_plain(data, first, end, header[12], header[6]):
            self._walk(self._buffer.tobytes(), RECORD_BATCH_OVERHEAD, materialize=False)

    def _walk_decompressed(self, *, materialize: bool) -> list[StoredRecord]:
        """A compressed batch's records, walked as strictly as any in their decompressed bytes.

        An error there names the codec and otherwise reads as for an uncompressed batch, with
        byte positions counted in the decompressed records."""
        header = self._header
        codec = header[5] & _CODEC_MASK
        data = decompress(codec, self._buffer[RECORD_BATCH_OVERHEAD:], position=self._position)
        if not materialize and _framing_is_plain(data, 0, len(data), header[12], header[6]):
            return []
        try:
            return self._walk(data, 0, materialize=materialize)
        except CorruptRecordError as error:
            name = CompressionType(codec).name.lower()
            raise CorruptRecordError(
                f"in the decompressed {name} records: {error.message}", self._position
            ) from error

    def _walk(self, data: bytes, start: int, *, materialize: bool) -> list[StoredRecord]:
        """The records framed in ``data`` from ``start`` to its end."""
        reader = _RecordReader(data, start, self._position)
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


def stamped_chunks(
    batches: Sequence[RecordBatch], base_offset: int, leader_epoch: int
) -> tuple[list[BytesLike], int]:
    """The bytes of `batches` with consecutive offsets from `base_offset` and the leader epoch,
    as chunks to write back to back; also the offset after the last batch.

    Per batch, its first 16 bytes (baseOffset, batchLength, partitionLeaderEpoch) re-packed and
    a zero-copy view of the rest. The CRCs stay valid (see `RecordBatch.restamp`). This is a
    leader's append without a copy of the producer's bytes.
    """
    _check_range("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
    chunks: list[BytesLike] = []
    offset = base_offset
    for batch in batches:
        _check_range("base_offset", offset, 0, _INT64_MAX - batch.last_offset_delta)
        chunks.append(_STAMPED_PREFIX.pack(offset, batch.batch_length, leader_epoch))
        chunks.append(batch.buffer[_STAMPED_PREFIX_SIZE:])
        offset += batch.last_offset_delta + 1
    return chunks, offset


def log_append_time_chunks(
    batches: Sequence[RecordBatch], base_offset: int, leader_epoch: int, now_ms: int
) -> tuple[list[BytesLike], int]:
    """`stamped_chunks` for a `message.timestamp.type=LogAppendTime` log: also the timestamp
    type bit of the attributes set and maxTimestamp `now_ms`, with the CRC-32C recomputed, as
    Kafka's `DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, now)` does.

    Per batch, its whole 61-byte header re-packed and a zero-copy view of its records. The
    records are not rewritten (they keep their timestamp deltas, and baseTimestamp stays the
    first record's): readers report maxTimestamp for every record of such a batch. The CRC
    covers the records, so they are read once to compute it.
    """
    _check_range("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
    _check_timestamp_range(now_ms)
    chunks: list[BytesLike] = []
    offset = base_offset
    for batch in batches:
        _check_range("base_offset", offset, 0, _INT64_MAX - batch.last_offset_delta)
        header = batch._header
        covered = _CRC_COVERED_HEADER.pack(
            header[5] | _TIMESTAMP_TYPE_MASK,
            header[6],  # lastOffsetDelta
            header[7],  # baseTimestamp
            now_ms,  # maxTimestamp
            header[9],
            header[10],
            header[11],
            header[12],
        )
        records = batch.buffer[RECORD_BATCH_OVERHEAD:]
        crc = crc32c.crc32c(records, crc32c.crc32c(covered))
        chunks.append(_UNCOVERED_HEADER.pack(offset, header[1], leader_epoch, MAGIC, crc) + covered)
        chunks.append(records)
        offset += batch.last_offset_delta + 1
    return chunks, offset


def _check_timestamp_range(timestamp: int) -> None:
    _check_range("log append time", timestamp, 0, _INT64_MAX)


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
    if codec > _MAX_CODEC:
        raise UnsupportedCompressionError(codec, position)
    if count < 0:
        fail(f"negative record count {count}")
    if last_offset_delta < 0:
        fail(f"negative last offset delta {last_offset_delta}")
    if count > last_offset_delta + 1:
        fail(f"{count} records do not fit in {last_offset_delta + 1} offsets")
    # A compressed batch's records can take under 7 bytes each, but not once decompressed.
    room = MAX_DECOMPRESSED_SIZE if codec else len(view) - RECORD_BATCH_OVERHEAD
    if count * _MIN_RECORD_SIZE > room:
        fail(f"{count} records cannot fit in {room} bytes")
    if not 0 <= base_offset <= _INT64_MAX - last_offset_delta:
        fail(f"offsets [{base_offset}, {base_offset} + {last_offset_delta}] are out of range")


def _framing_is_plain(  # noqa: PLR0911, PLR0912 - one flat loop: the produce hot path
    data: bytes, pos: int, end: int, count: int, last_offset_delta: int
) -> bool:
    """Whether ``count`` records from ``pos`` to ``end`` in ``data`` are well framed, on the
    common path only: every varint of one or two bytes and no headers.

    True means valid. False means "not decided here" (a longer varint, a header, or anything
    wrong); the careful ``_RecordReader`` then checks again and names the problem. This loop
    is the leader's per-record check on every produce, so it avoids calls and objects.
    """
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
