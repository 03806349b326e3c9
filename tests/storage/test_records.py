"""Record batches (magic 2): round trips, byte-for-byte agreement with kafka-python, corruption.

kafka-python is the independent implementation: its builder must produce exactly our bytes, its
reader must accept ours field for field, and we must read what it writes. Where it differs from
Apache Kafka (noted below) we follow Kafka.
"""

from __future__ import annotations

import contextlib
import importlib
import pickle
import re
import struct
import tracemalloc
import warnings
from collections.abc import Sequence
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkactor.storage import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CorruptRecordError,
    Record,
    RecordBatch,
    StorageError,
    StoredRecord,
    TimestampType,
    TruncatedBatchError,
    UnsupportedCompressionError,
    batch_size_at,
    build_batch,
    build_value_batch,
    iter_batches,
)

# kafka-python ships no type information; importlib keeps this file type-checked whether or not
# the mypy configuration ignores kafka's missing stubs (its objects are `Any` either way). Its
# package import loads protocol schemas through deprecated importlib.resources calls: not ours.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    kp_default: Any = importlib.import_module("kafka.record.default_records")
    kp_memory: Any = importlib.import_module("kafka.record.memory_records")
    kp_util: Any = importlib.import_module("kafka.record.util")
    kp_crc32c: Any = importlib.import_module("kafka.record._crc32c")  # pure-Python CRC-32C

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header, written out independently
ATTRIBUTES_AT = 21  # the CRC covers bytes 21 .. end
INT64_MAX = 2**63 - 1


# --------------------------------------------------------------------------------------------
# Helpers: kafka-python as the reference, and hand-made bytes for crafted corruption


def kp_build(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    leader_epoch: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """The batch as kafka-python's DefaultRecordBatchBuilder writes it."""
    builder = kp_default.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=2**31 - 1,
    )
    for offset_delta, record in enumerate(records):
        appended = builder.append(
            offset_delta, record.timestamp_ms, record.key, record.value, list(record.headers)
        )
        assert appended is not None
    return with_offset_and_epoch(bytes(builder.build()), base_offset, leader_epoch)


def with_offset_and_epoch(data: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """kafka-python writes baseOffset 0 and partitionLeaderEpoch 0, as a producer does (Kafka's
    own producer writes epoch -1); the broker assigns both. They lie outside the CRC, so stamp
    them here as a broker would."""
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


def kp_batches(data: bytes) -> list[Any]:
    """kafka-python's reading of a buffer of batches, each CRC-checked."""
    memory_records = kp_memory.MemoryRecords(data)
    batches = []
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        batches.append(batch)
    assert memory_records.valid_bytes() == len(data)
    return batches


def kp_record_tuples(batch: Any) -> list[tuple[Any, ...]]:
    return [
        (r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in batch
    ]


def stored_tuples(batch: RecordBatch) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records()]


def kp_varint(value: int) -> bytes:
    """kafka-python's zigzag varint encoder, independent of ours."""
    out = bytearray()
    kp_util.encode_varint(value, out.append)
    return bytes(out)


def nullable(data: bytes | None) -> bytes:
    return kp_varint(-1) if data is None else kp_varint(len(data)) + data


def raw_record(
    *,
    offset_delta: int = 0,
    timestamp_delta: int = 0,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers: bytes = kp_varint(0),
    length: int | None = None,
    extra: bytes = b"",
) -> bytes:
    """One record from raw parts; ``headers`` is the encoded header count and headers."""
    body = (
        b"\x00"
        + kp_varint(timestamp_delta)
        + kp_varint(offset_delta)
        + nullable(key)
        + nullable(value)
        + headers
        + extra
    )
    return kp_varint(len(body) if length is None else length) + body


def raw_batch(
    records: bytes,
    *,
    count: int,
    last_offset_delta: int | None = None,
    base_offset: int = 0,
    attributes: int = 0,
    magic: int = 2,
) -> bytes:
    """A batch around raw record bytes, with a correct length and CRC (whatever the records)."""
    last_delta = count - 1 if last_offset_delta is None else last_offset_delta
    header = bytearray(
        HEADER.pack(
            base_offset,
            RECORD_BATCH_OVERHEAD - 12 + len(records),
            -1,
            magic,
            0,
            attributes,
            last_delta,
            1000,
            1000,
            -1,
            -1,
            -1,
            count,
        )
    )
    return recrc(bytes(header) + records)


def recrc(data: bytes) -> bytes:
    """``data`` with its CRC recomputed, so that only the structure under test is wrong."""
    out = bytearray(data)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[ATTRIBUTES_AT:])))
    return bytes(out)


SAMPLE = [
    Record(b"key-1", b"value-1", 1_700_000_000_000),
    Record(None, b"no key", 1_700_000_000_005, (("trace", b"abc"), ("trace", None))),
    Record(b"k", None, 1_699_999_999_990),  # earlier than the first: negative delta
]


# --------------------------------------------------------------------------------------------
# Round trips


ROUND_TRIP_CASES = {
    "null key and value": [Record(None, None, 0)],
    "empty key and value": [Record(b"", b"", 1)],
    "headers": [Record(b"k", b"v", 5, (("a", b"1"), ("b", None), ("a", b""), ("", b"x")))],
    "unicode header keys": [Record(b"k", b"v", 5, (("ключ", b"1"), ("🔑", b"2"), ("é", None)))],
    "no timestamp": [Record(b"k", b"v", -1), Record(b"k", b"v", 10)],
    "out of order timestamps": SAMPLE,
    "binary bytes": [Record(bytes(range(256)), bytes(range(255, -1, -1)), 7)],
}


@pytest.mark.parametrize("records", ROUND_TRIP_CASES.values(), ids=ROUND_TRIP_CASES.keys())
def test_round_trip(records: list[Record]) -> None:
    data = build_batch(records, 42, 3)
    [batch] = iter_batches(data, deep=True)
    assert [r.to_record() for r in batch.records()] == records
    assert [r.offset for r in batch.records()] == list(range(42, 42 + len(records)))
    assert (batch.base_offset, batch.last_offset, batch.next_offset) == (
        42,
        41 + len(records),
        42 + len(records),
    )
    assert batch.leader_epoch == 3
    assert batch.record_count == len(batch) == len(records)
    assert batch.size_in_bytes == len(data) == batch.batch_length + 12
    assert batch.base_timestamp == records[0].timestamp_ms
    assert batch.max_timestamp == max(r.timestamp_ms for r in records)
    assert bytes(batch.buffer) == data


def test_round_trip_large_value() -> None:
    value = bytes(range(256)) * 4096  # 1 MiB
    records = [Record(b"big", value, 1), Record(None, value[:1000], 2)]
    [batch] = iter_batches(build_batch(records, 0), deep=True)
    assert [r.to_record() for r in batch.records()] == records


def test_round_trip_many_records() -> None:
    records = [
        Record(str(i).encode(), b"v" * (i % 50), 1_000 + i % 97, (("i", str(i).encode()),))
        for i in range(10_000)
    ]
    data = build_batch(records, 1_000_000, 9)
    [batch] = iter_batches(data, deep=True)
    stored = batch.records()
    assert [r.to_record() for r in stored] == records
    assert stored[-1].offset == batch.last_offset == 1_009_999


def test_default_leader_epoch_and_producer_fields_are_none_values() -> None:
    [batch] = iter_batches(build_batch(SAMPLE, 0))
    assert batch.leader_epoch == -1
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_transactional
    assert not batch.is_control_batch
    assert batch.compression_codec == 0
    assert batch.magic == 2


def test_offsets_up_to_int64_max() -> None:
    base = INT64_MAX - 2
    [batch] = iter_batches(build_batch(SAMPLE, base), deep=True)
    assert batch.last_offset == INT64_MAX
    assert [r.offset for r in batch.records()] == [base, base + 1, INT64_MAX]
    [theirs] = kp_batches(build_batch(SAMPLE, base))
    assert [r.offset for r in theirs] == [base, base + 1, INT64_MAX]
    with pytest.raises(ValueError, match="base_offset"):
        build_batch(SAMPLE, base + 1)


def test_extreme_timestamps_round_trip() -> None:
    records = [Record(None, b"a", -1), Record(None, b"b", INT64_MAX - 1), Record(None, b"c", 0)]
    [batch] = iter_batches(build_batch(records, 0), deep=True)
    assert [r.timestamp_ms for r in batch.records()] == [-1, INT64_MAX - 1, 0]
    with pytest.raises(ValueError, match="timestamp delta"):
        build_batch([Record(None, b"a", -1), Record(None, b"b", INT64_MAX)], 0)


def test_log_append_time_reports_the_append_time_for_every_record() -> None:
    data = build_batch(SAMPLE, 10, timestamp_type=LOG_APPEND_TIME, log_append_time_ms=5_000)
    [batch] = iter_batches(data, deep=True)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert batch.attributes & 0x08
    assert batch.max_timestamp == 5_000
    assert batch.base_timestamp == SAMPLE[0].timestamp_ms  # still the first create time
    assert {r.timestamp_ms for r in batch.records()} == {5_000}
    [theirs] = kp_batches(data)
    assert theirs.timestamp_type == 1
    assert {r.timestamp for r in theirs} == {5_000}


def test_header_layout_written_out_by_hand() -> None:
    """Every header field at its documented place, and the CRC by a second CRC-32C."""
    data = build_batch(
        SAMPLE,
        7,
        5,
        producer_id=123,
        producer_epoch=4,
        base_sequence=77,
        is_transactional=True,
    )
    fields = HEADER.unpack_from(data)
    assert (
        fields
        == (
            7,  # baseOffset
            len(data) - 12,  # batchLength
            5,  # partitionLeaderEpoch
            2,  # magic
            kp_crc32c.crc(data[ATTRIBUTES_AT:]),  # crc
            0x10,  # attributes: transactional, create time, no compression
            2,  # lastOffsetDelta
            SAMPLE[0].timestamp_ms,  # baseTimestamp: the first record's
            SAMPLE[1].timestamp_ms,  # maxTimestamp
            123,
            4,
            77,
            3,  # recordCount
        )
    )
    # The first record, byte by byte: length, attributes, timestampDelta 0, offsetDelta 0, key,
    # value, no headers.
    first = b"\x00\x00\x00" + nullable(b"key-1") + nullable(b"value-1") + b"\x00"
    assert data[61 : 61 + 1 + len(first)] == kp_varint(len(first)) + first


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"records": []}, "at least one record"),
        ({"base_offset": -1}, "base_offset"),
        ({"leader_epoch": 2**31}, "leader_epoch"),
        ({"records": [Record(None, b"", -2)]}, "timestamp_ms"),
        ({"is_transactional": True}, "producer id"),
        ({"producer_id": 5}, "producer epoch"),
        ({"producer_id": 5, "producer_epoch": 1}, "sequence"),
        ({"producer_epoch": 2**15}, "producer_epoch"),
        ({"timestamp_type": LOG_APPEND_TIME}, "log_append_time_ms"),
        ({"log_append_time_ms": 5}, "LOG_APPEND_TIME"),
    ],
)
def test_build_rejects_invalid_arguments(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"records": SAMPLE, "base_offset": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        build_batch(**arguments)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Record("text", b"v", 0),  # type: ignore[arg-type]
        lambda: Record(b"k", bytearray(b"v"), 0),  # type: ignore[arg-type]
        lambda: Record(b"k", b"v", 1.5),  # type: ignore[arg-type]
        lambda: Record(b"k", b"v", 0, [("h", b"v")]),  # type: ignore[arg-type]
        lambda: Record(b"k", b"v", 0, ((b"h", b"v"),)),  # type: ignore[arg-type]
        lambda: Record(b"k", b"v", 0, (("h", "v"),)),  # type: ignore[arg-type]
    ],
)
def test_record_rejects_wrong_types(make: Any) -> None:
    with pytest.raises(TypeError):
        make()


# --------------------------------------------------------------------------------------------
# Agreement with kafka-python


PRODUCER_CASES = {
    "plain": {},
    "idempotent": {"producer_id": 123_456_789, "producer_epoch": 4, "base_sequence": 77},
    "transactional": {
        "producer_id": 9,
        "producer_epoch": 0,
        "base_sequence": 2**31 - 2,
        "transactional": True,
    },
}


@pytest.mark.parametrize("producer", PRODUCER_CASES.values(), ids=PRODUCER_CASES.keys())
@pytest.mark.parametrize(
    "records", ROUND_TRIP_CASES.values(), ids=[f"records={k}" for k in ROUND_TRIP_CASES]
)
@pytest.mark.parametrize(("base_offset", "leader_epoch"), [(0, 0), (1_234, -1), (2**40, 17)])
def test_same_bytes_as_kafka_python(
    producer: dict[str, Any], records: list[Record], base_offset: int, leader_epoch: int
) -> None:
    ours = build_batch(
        records,
        base_offset,
        leader_epoch,
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        is_transactional=producer.get("transactional", False),
    )
    theirs = kp_build(records, base_offset=base_offset, leader_epoch=leader_epoch, **producer)
    assert ours == theirs


def test_same_bytes_as_kafka_python_memory_records_builder() -> None:
    # MemoryRecordsBuilder must start at offset 0: for magic 2 it writes the absolute offset it
    # is given as each record's offsetDelta and leaves baseOffset 0 (Kafka's builder writes the
    # base offset in the header and deltas from it).
    builder = kp_memory.MemoryRecordsBuilder(
        magic=2,
        compression_type=0,
        batch_size=2**20,
        offset=0,
        producer_id=55,
        producer_epoch=2,
        base_sequence=10,
    )
    for record in SAMPLE:
        builder.append(record.timestamp_ms, record.key, record.value, list(record.headers))
    builder.close()
    theirs = with_offset_and_epoch(bytes(builder.buffer()), 300, 8)
    ours = build_batch(SAMPLE, 300, 8, producer_id=55, producer_epoch=2, base_sequence=10)
    assert ours == theirs


def test_kafka_python_reads_every_field_of_ours() -> None:
    data = build_batch(SAMPLE, 2**50, 12, producer_id=77, producer_epoch=3, base_sequence=1000)
    [ours] = iter_batches(data)
    [theirs] = kp_batches(data)
    assert (
        theirs.magic,
        theirs.base_offset,
        theirs.last_offset,
        theirs.next_offset,
        theirs.leader_epoch,
        theirs.size_in_bytes,
        theirs.crc,
        theirs.attributes,
        theirs.compression_type,
        theirs.timestamp_type,
        theirs.is_transactional,
        theirs.is_control_batch,
        theirs.first_timestamp,
        theirs.max_timestamp,
        theirs.producer_id,
        theirs.producer_epoch,
        theirs.base_sequence,
        theirs.records_count,
    ) == (
        ours.magic,
        ours.base_offset,
        ours.last_offset,
        ours.next_offset,
        ours.leader_epoch,
        ours.size_in_bytes,
        ours.crc,
        ours.attributes,
        ours.compression_codec,
        ours.timestamp_type,
        ours.is_transactional,
        ours.is_control_batch,
        ours.base_timestamp,
        ours.max_timestamp,
        ours.producer_id,
        ours.producer_epoch,
        ours.base_sequence,
        ours.record_count,
    )
    assert kp_record_tuples(theirs) == stored_tuples(ours)


def test_we_read_a_buffer_of_kafka_python_batches() -> None:
    chunks = [
        kp_build(SAMPLE, base_offset=0, leader_epoch=1),
        kp_build(ROUND_TRIP_CASES["headers"], base_offset=3, leader_epoch=1),
        kp_build(ROUND_TRIP_CASES["unicode header keys"], base_offset=4, leader_epoch=2),
    ]
    data = b"".join(chunks)
    ours = list(iter_batches(data, deep=True))
    assert [b.position for b in ours] == [0, len(chunks[0]), len(chunks[0]) + len(chunks[1])]
    assert [b.base_offset for b in ours] == [0, 3, 4]
    assert [stored_tuples(b) for b in ours] == [kp_record_tuples(b) for b in kp_batches(data)]


headers_strategy = st.lists(
    st.tuples(
        st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
        st.none() | st.binary(max_size=16),
    ),
    max_size=4,
).map(tuple)
timestamps = st.one_of(
    st.integers(min_value=1_600_000_000_000, max_value=1_800_000_000_000),
    st.integers(min_value=-1, max_value=INT64_MAX - 1),
)
records_strategy = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=40),
        value=st.none() | st.binary(max_size=300),
        timestamp_ms=timestamps,
        headers=headers_strategy,
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_strategy,
    base_offset=st.integers(min_value=0, max_value=INT64_MAX - 30),
    leader_epoch=st.integers(min_value=-1, max_value=2**31 - 1),
)
def test_property_round_trip_and_kafka_python_agreement(
    records: list[Record], base_offset: int, leader_epoch: int
) -> None:
    data = build_batch(records, base_offset, leader_epoch)
    [batch] = iter_batches(data, deep=True)
    assert [r.to_record() for r in batch.records()] == records
    assert data == kp_build(records, base_offset=base_offset, leader_epoch=leader_epoch)
    [theirs] = kp_batches(data)
    assert kp_record_tuples(theirs) == stored_tuples(batch)


# --------------------------------------------------------------------------------------------
# Re-stamping: what the leader does to a producer's batch


def test_restamp_keeps_the_crc_and_equals_a_batch_built_with_those_values() -> None:
    produced = build_batch(SAMPLE, 0, producer_id=8, producer_epoch=1, base_sequence=5)
    [batch] = iter_batches(produced)
    stamped = batch.restamp(base_offset=2**40 + 3, leader_epoch=7)
    assert stamped[17:] == produced[17:]  # CRC and everything it covers untouched
    assert stamped == build_batch(
        SAMPLE, 2**40 + 3, 7, producer_id=8, producer_epoch=1, base_sequence=5
    )
    [again] = iter_batches(stamped, deep=True)
    assert (again.base_offset, again.leader_epoch) == (2**40 + 3, 7)
    [theirs] = kp_batches(stamped)
    assert [r.offset for r in theirs] == [2**40 + 3, 2**40 + 4, 2**40 + 5]
    assert theirs.leader_epoch == 7


def test_restamp_one_field_at_a_time() -> None:
    [batch] = iter_batches(build_batch(SAMPLE, 10, 2))
    [only_offset] = iter_batches(batch.restamp(base_offset=99))
    assert (only_offset.base_offset, only_offset.leader_epoch) == (99, 2)
    [only_epoch] = iter_batches(batch.restamp(leader_epoch=-1))
    assert (only_epoch.base_offset, only_epoch.leader_epoch) == (10, -1)
    assert batch.restamp() == bytes(batch.buffer)


def test_restamp_rejects_out_of_range_values() -> None:
    [batch] = iter_batches(build_batch(SAMPLE, 0))
    with pytest.raises(ValueError, match="base_offset"):
        batch.restamp(base_offset=INT64_MAX - 1)  # last offset would overflow
    with pytest.raises(ValueError, match="base_offset"):
        batch.restamp(base_offset=-5)
    with pytest.raises(ValueError, match="leader_epoch"):
        batch.restamp(leader_epoch=2**31)
    assert batch.restamp(base_offset=INT64_MAX - 2)[:8] == struct.pack(">q", INT64_MAX - 2)


# --------------------------------------------------------------------------------------------
# Views and helpers


def test_batches_are_read_only_views_and_accept_any_bytes_like() -> None:
    first, second = build_batch(SAMPLE, 0), build_batch(SAMPLE, 3, 1)
    data = first + second
    for buffer in (data, bytearray(data), memoryview(data)):
        batches = list(iter_batches(buffer))
        assert [b.position for b in batches] == [0, len(first)]
        assert [bytes(b.buffer) for b in batches] == [first, second]
        assert all(b.buffer.readonly for b in batches)
    [from_second] = iter_batches(data, len(first))
    assert (from_second.position, from_second.base_offset) == (len(first), 3)
    assert list(iter_batches(data, len(data))) == []
    with pytest.raises(ValueError, match="start_position"):
        list(iter_batches(data, len(data) + 1))


def test_record_batch_from_exactly_one_batch() -> None:
    data = build_batch(SAMPLE, 5)
    batch = RecordBatch(data, deep=True)
    assert (batch.position, batch.base_offset, len(batch.records())) == (0, 5, 3)
    with pytest.raises(CorruptRecordError, match="follow the batch"):
        RecordBatch(data + b"\x00")
    with pytest.raises(TruncatedBatchError):
        RecordBatch(data[:-1])
    with pytest.raises(TruncatedBatchError):
        RecordBatch(data[:5])


def test_batch_size_at_reads_only_the_prefix() -> None:
    data = build_batch(SAMPLE, 0)
    assert batch_size_at(data) == len(data)
    assert batch_size_at(data[:12]) == len(data)  # the rest need not be there
    assert batch_size_at(data[:11]) is None
    assert batch_size_at(data, len(data)) is None
    assert batch_size_at(data + data, len(data)) == len(data)
    with pytest.raises(CorruptRecordError, match="exceeds"):
        batch_size_at(data, max_batch_size=len(data) - 1)
    too_short = bytearray(data)
    struct.pack_into(">i", too_short, 8, 48)
    with pytest.raises(CorruptRecordError, match="smaller than a batch header"):
        batch_size_at(too_short)


def test_stored_record_repr_and_equality() -> None:
    [batch] = iter_batches(build_batch([Record(b"k", b"v", 3)], 9))
    assert batch.records() == [StoredRecord(9, 3, b"k", b"v", ())]
    assert "offsets=[9, 9]" in repr(batch)


def test_errors_pickle_with_their_fields() -> None:
    errors: list[StorageError] = [
        CorruptRecordError("bad", 17),
        TruncatedBatchError("short", 99),
        UnsupportedCompressionError(3, 12),
    ]
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert str(copy) == str(error)
        assert copy.position == error.position  # type: ignore[attr-defined]
    assert "lz4" in str(errors[2])
    assert isinstance(errors[1], CorruptRecordError)
    assert not isinstance(errors[2], CorruptRecordError)


# --------------------------------------------------------------------------------------------
# Corruption


def corrupt_error(data: bytes, **kwargs: Any) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        list(iter_batches(data, **kwargs))
    return info.value


def test_flipping_any_byte_covered_by_the_crc_is_detected() -> None:
    data = build_batch(SAMPLE, 100, 4)
    for index in range(ATTRIBUTES_AT, len(data)):
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[index] ^= mask
            error = corrupt_error(bytes(damaged))
            assert type(error) is CorruptRecordError, index
            assert "CRC" in str(error), index
            assert error.position == 0


def test_flipping_crc_bytes_is_detected() -> None:
    data = build_batch(SAMPLE, 100, 4)
    for index in range(17, 21):
        damaged = bytearray(data)
        damaged[index] ^= 0x10
        assert "CRC" in str(corrupt_error(bytes(damaged)))


def test_base_offset_and_leader_epoch_are_outside_the_crc() -> None:
    damaged = bytearray(build_batch(SAMPLE, 100, 4))
    damaged[7] ^= 0x01  # base offset 100 -> 101
    damaged[15] ^= 0x02  # leader epoch 4 -> 6
    [batch] = iter_batches(bytes(damaged))
    assert (batch.base_offset, batch.leader_epoch) == (101, 6)


@pytest.mark.parametrize("magic", [0, 1, 3, -1])
def test_wrong_magic(magic: int) -> None:
    damaged = bytearray(build_batch(SAMPLE, 0))
    struct.pack_into(">b", damaged, 16, magic)
    error = corrupt_error(bytes(damaged))
    assert type(error) is CorruptRecordError
    assert "magic" in str(error)


def test_truncation_at_every_length() -> None:
    chunks = [build_batch(SAMPLE[:1], 0), build_batch(SAMPLE, 1), build_batch(SAMPLE[1:], 4)]
    data = b"".join(chunks)
    starts = [0, len(chunks[0]), len(chunks[0]) + len(chunks[1])]
    for cut in range(1, len(data)):
        complete = [s for s, c in zip(starts, chunks, strict=True) if s + len(c) <= cut]
        if cut in starts:
            assert [b.position for b in iter_batches(data[:cut])] == complete
            continue
        yielded = []
        with pytest.raises(TruncatedBatchError) as info:
            for batch in iter_batches(data[:cut], deep=True):
                yielded.append(batch.position)
        assert yielded == complete, cut
        assert info.value.position == max(s for s in starts if s < cut), cut


def test_absurd_batch_length_is_refused_without_a_huge_allocation() -> None:
    damaged = bytearray(build_batch(SAMPLE, 0))
    struct.pack_into(">i", damaged, 8, 0x7FFF_FFFF)
    data = build_batch(SAMPLE, 0) + bytes(damaged)
    tracemalloc.start()
    try:
        truncated = corrupt_error(data)
        limited = corrupt_error(data, max_batch_size=2**20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    # The format allows it but the buffer ends first: a (possibly torn) tail.
    assert isinstance(truncated, TruncatedBatchError)
    assert truncated.position == len(data) // 2
    # Beyond the configured maximum: corruption, whatever follows.
    assert type(limited) is CorruptRecordError
    assert limited.position == len(data) // 2


@pytest.mark.parametrize("batch_length", [-(2**31), -12, 0, 48])
def test_batch_length_smaller_than_a_header(batch_length: int) -> None:
    damaged = bytearray(build_batch(SAMPLE, 0))
    struct.pack_into(">i", damaged, 8, batch_length)
    error = corrupt_error(bytes(damaged))
    assert type(error) is CorruptRecordError
    assert "smaller than a batch header" in str(error)


@pytest.mark.parametrize("codec", range(5, 8))  # unassigned ids; 1-4: test_compression.py
def test_compressed_batch_is_unsupported_not_corrupt(codec: int) -> None:
    plain = build_batch(SAMPLE, 0)
    compressed = bytearray(build_batch(SAMPLE, 3))
    struct.pack_into(">h", compressed, ATTRIBUTES_AT, codec)
    with pytest.raises(UnsupportedCompressionError) as info:
        list(iter_batches(plain + recrc(bytes(compressed))))
    assert (info.value.codec, info.value.position) == (codec, len(plain))
    assert f"codec id {codec}" in str(info.value)


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=200))
def test_garbage_raises_only_storage_errors(garbage: bytes) -> None:
    for verify_crc in (True, False):
        try:
            for batch in iter_batches(garbage, verify_crc=verify_crc, deep=True):
                batch.records()
        except (CorruptRecordError, UnsupportedCompressionError):
            pass


@settings(max_examples=200, deadline=None)
@given(
    index=st.integers(min_value=0),
    mask=st.integers(min_value=1, max_value=255),
    insert=st.booleans(),
)
def test_damaged_record_framing_raises_only_corruption(index: int, mask: int, insert: bool) -> None:
    """With the CRC recomputed, damage anywhere reaches the record walker, which must still
    answer with a typed error (or read a batch that happens to be valid)."""
    damaged = bytearray(build_batch(SAMPLE, 0))
    index %= len(damaged)
    if insert:
        damaged.insert(max(index, 61), mask)
        struct.pack_into(">i", damaged, 8, len(damaged) - 12)
    else:
        damaged[index] ^= mask
    try:
        for batch in iter_batches(recrc(bytes(damaged)), deep=True):
            assert len(batch.records()) == batch.record_count
    except (CorruptRecordError, UnsupportedCompressionError):
        pass


ONE = raw_record()
PADDING = b"\x00" * 6
CRAFTED = {
    "record length overruns the batch": (raw_record(length=100), 1, None, "overruns the batch"),
    "record length negative": (raw_record(length=-3), 1, None, "record length -3"),
    "record length shorter than its fields": (
        raw_record(length=5),
        1,
        None,
        "value of 1 bytes runs past the end of its record",
    ),
    "record length longer than its fields": (
        raw_record(extra=b"\x00\x00") + ONE,
        2,
        None,
        "declares 9 bytes",
    ),
    "fewer records than the count": (raw_record(value=b"x" * 20), 2, None, "holds only 1"),
    "more records than the count": (
        ONE + raw_record(offset_delta=1),
        1,
        1,
        "bytes remain after the 1 records",
    ),
    "offset deltas not increasing": (ONE + ONE, 2, None, "offset delta 0 is not in (0, 1]"),
    "offset delta beyond lastOffsetDelta": (
        raw_record(offset_delta=3),
        1,
        2,
        "offset delta 3 is not in (-1, 2]",
    ),
    "varint longer than 5 bytes": (
        b"\x80\x80\x80\x80\x80\x00" + ONE[1:],
        1,
        None,
        "longer than 5 bytes",
    ),
    "varint overflowing 32 bits": (b"\xff\xff\xff\xff\x7f" + ONE[1:], 1, None, "overflows 32 bits"),
    "varlong longer than 10 bytes": (
        kp_varint(17) + b"\x00" + b"\x80" * 10 + b"\x00" + b"\x00\x01\x02v\x00",
        1,
        None,
        "longer than 10 bytes",
    ),
    "varlong overflowing 64 bits": (
        kp_varint(16) + b"\x00" + b"\x80" * 9 + b"\x02" + b"\x00\x01\x02v\x00",
        1,
        None,
        "overflows 64 bits",
    ),
    "key length -2": (ONE[:4] + kp_varint(-2) + ONE[5:], 1, None, "key length -2"),
    "key overruns its record": (
        raw_record(key=b"abc")[:4] + b"\x7e" + b"abc\x02v\x00",
        1,
        None,
        "key of 63 bytes runs past",
    ),
    "negative header count": (raw_record(headers=kp_varint(-1)), 1, None, "header count -1"),
    "header count too large": (raw_record(headers=kp_varint(50)), 1, None, "header count 50"),
    "negative header key length": (
        raw_record(headers=kp_varint(1) + kp_varint(-1) + nullable(None)),
        1,
        None,
        "header key length -1",
    ),
    "header key not utf-8": (
        raw_record(headers=kp_varint(1) + nullable(b"\xff\xfe") + nullable(None)),
        1,
        None,
        "not valid UTF-8",
    ),
    # (padded so that the header's cheap "enough bytes for the count" check passes)
    "varint cut off by the record end": (
        kp_varint(2) + b"\x00\x80" + PADDING,
        1,
        None,
        "runs past the end of its record",
    ),
    "record without attributes": (kp_varint(0) + PADDING, 1, None, "no attributes byte"),
}


@pytest.mark.parametrize(
    ("records", "count", "last_delta", "message"), CRAFTED.values(), ids=CRAFTED.keys()
)
def test_crafted_record_structure_is_caught_by_deep_validation(
    records: bytes, count: int, last_delta: int | None, message: str
) -> None:
    data = raw_batch(records, count=count, last_offset_delta=last_delta)
    [batch] = iter_batches(data)  # header and CRC are fine
    with pytest.raises(CorruptRecordError, match=re.escape(message)) as info:
        batch.records()
    assert type(info.value) is CorruptRecordError
    with pytest.raises(CorruptRecordError):
        batch.validate_records()
    error = corrupt_error(build_batch(SAMPLE, 0) + data, deep=True)
    assert error.position == len(build_batch(SAMPLE, 0))


def test_crafted_valid_batch_is_accepted() -> None:
    """The crafting helpers themselves produce a readable batch when nothing is wrong."""
    records = ONE + raw_record(offset_delta=1, key=b"k", headers=kp_varint(1) + nullable(b"h") * 2)
    [batch] = iter_batches(raw_batch(records, count=2), deep=True)
    assert stored_tuples(batch) == [
        (0, 1000, None, b"v", ()),
        (1, 1000, b"k", b"v", (("h", b"h"),)),
    ]


# Each case is valid in every other respect (enough record bytes for the count, and so on), so
# that only the check named fails.
HEADER_LEVEL = {
    "negative record count": (ONE, {"count": -1, "last_offset_delta": 0}, "negative record count"),
    "more records than offsets": (
        ONE * 3,
        {"count": 3, "last_offset_delta": 1},
        "3 records do not fit in 2 offsets",
    ),
    "more records than bytes": (
        ONE,
        {"count": 2, "last_offset_delta": 5},
        "2 records cannot fit in 8 bytes",
    ),
    "negative last offset delta": (
        ONE,
        {"count": 0, "last_offset_delta": -1},
        "negative last offset delta",
    ),
    "negative base offset": (
        ONE,
        {"count": 1, "last_offset_delta": 0, "base_offset": -1},
        "out of range",
    ),
    "last offset overflows": (
        ONE,
        {"count": 1, "last_offset_delta": 1, "base_offset": INT64_MAX},
        "out of range",
    ),
}


@pytest.mark.parametrize(
    ("records", "fields", "message"), HEADER_LEVEL.values(), ids=HEADER_LEVEL.keys()
)
def test_inconsistent_header_is_caught_without_walking_records(
    records: bytes, fields: dict[str, int], message: str
) -> None:
    error = corrupt_error(raw_batch(records, **fields))
    assert type(error) is CorruptRecordError
    assert message in str(error)
    assert error.position == 0


def test_verify_crc_false_skips_only_the_crc() -> None:
    damaged = bytearray(build_batch(SAMPLE, 0))
    damaged[damaged.index(b"value-1")] ^= 0x20  # inside the first record's value
    [batch] = iter_batches(bytes(damaged), verify_crc=False, deep=True)
    assert batch.records()[0].value == b"Value-1"
    assert "CRC" in str(corrupt_error(bytes(damaged)))


# -- the leader's fast framing check agrees with the careful reader ---------------------------


_plain_records = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=40),
        value=st.none() | st.binary(max_size=300),
        timestamp_ms=st.integers(min_value=0, max_value=20_000),
        headers=st.just(())
        | st.lists(
            st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=2
        ).map(tuple),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_plain_records, data=st.data())
def test_fast_framing_check_never_accepts_what_the_careful_reader_rejects(
    records: list[Record], data: st.DataObject
) -> None:
    from kafkactor.storage.record_batch import _framing_is_plain

    batch = bytearray(build_batch(records, 0))
    if _framing_is_plain(
        bytes(batch), RECORD_BATCH_OVERHEAD, len(batch), len(records), len(records) - 1
    ):
        assert RecordBatch(bytes(batch), verify_crc=False).records()  # the careful reader agrees
    flips = data.draw(st.lists(st.integers(RECORD_BATCH_OVERHEAD, len(batch) - 1), max_size=3))
    for at in flips:
        batch[at] = data.draw(st.integers(0, 255))
    mutated = bytes(batch)
    if _framing_is_plain(
        mutated, RECORD_BATCH_OVERHEAD, len(mutated), len(records), len(records) - 1
    ):
        RecordBatch(mutated, verify_crc=False).records()  # must not raise
    else:  # undecided here: the careful reader either accepts or names the problem
        with contextlib.suppress(CorruptRecordError):
            RecordBatch(mutated, verify_crc=False).records()


def test_the_fast_framing_check_accepts_plain_records_and_defers_the_rest() -> None:
    from kafkactor.storage.record_batch import _framing_is_plain

    plain = [Record(None, b"v" * 100, 1_000 + i) for i in range(200)]
    keyed = [Record(b"k%d" % i, None, 1_000) for i in range(5)]
    for records in (plain, keyed):
        data = build_batch(records, 0)
        assert _framing_is_plain(
            data, RECORD_BATCH_OVERHEAD, len(data), len(records), len(records) - 1
        )
    with_header = [Record(None, b"v", 0, (("h", b"x"),))]
    far_timestamp = [Record(None, b"v", 0), Record(None, b"v", 10_000_000)]
    for records in (with_header, far_timestamp):
        data = build_batch(records, 0)
        assert not _framing_is_plain(
            data, RECORD_BATCH_OVERHEAD, len(data), len(records), len(records) - 1
        )
        assert len(RecordBatch(data).records()) == len(records)  # the careful reader accepts
    # wrong record count: deferred (the careful reader then reports it)
    data = build_batch(plain[:3], 0)
    assert not _framing_is_plain(data, RECORD_BATCH_OVERHEAD, len(data), 4, 3)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(_plain_records, min_size=2, max_size=3),
    data=st.data(),
)
def test_records_checked_in_place_get_the_verdict_of_a_copied_batch(
    batches: list[list[Record]], data: st.DataObject
) -> None:
    """A leader walks the records of a produce request's bytes where they are, each batch up
    to its own end; a batch's framing can never borrow bytes from the next one."""
    buffer = bytearray(b"".join(build_batch(records, 0) for records in batches))
    flips = data.draw(st.lists(st.integers(0, len(buffer) - 1), max_size=3))
    for at in flips:
        buffer[at] = data.draw(st.integers(0, 255))

    def verdict(buf: bytes | bytearray) -> tuple[list[int], str | None]:
        seen: list[int] = []
        try:
            for batch in iter_batches(buf, verify_crc=False, deep=True):
                seen.append(batch.position)
        except (CorruptRecordError, UnsupportedCompressionError) as error:
            return seen, f"{error.position}: {error}"
        return seen, None

    in_place = verdict(bytes(buffer))  # bytes: walked where they are
    copied = verdict(buffer)  # a bytearray: each batch copied first
    assert in_place == copied


# -- bare values: build_value_batch ----------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1, max_size=40),
    timestamp_ms=st.sampled_from([NO_TIMESTAMP, 0, 1_700_000_000_000, 2**63 - 1]),
)
def test_a_value_batch_is_the_batch_of_the_same_records(
    values: list[bytes | None], timestamp_ms: int
) -> None:
    expected = build_batch([Record(None, v, timestamp_ms) for v in values], 0)
    assert build_value_batch(values, timestamp_ms) == expected


@pytest.mark.parametrize(
    "values",
    [
        [b"x" * 8191, b"y" * 8192, b"z" * 100_000],  # value lengths past the varint table
        [b"v"] * 8200,  # offset deltas past the varint table
    ],
)
def test_a_value_batch_past_the_small_varints_is_the_batch_of_the_same_records(
    values: list[bytes],
) -> None:
    now = 1_700_000_000_000
    batch = build_value_batch(values, now)
    assert batch == build_batch([Record(None, v, now) for v in values], 0)
    assert [r.value for r in RecordBatch(batch).records()] == values


@pytest.mark.parametrize(
    ("values", "timestamp_ms", "error"),
    [
        ([], 0, ValueError),
        (["text"], 0, TypeError),
        ([b"ok", bytearray(b"no")], 0, TypeError),
        ([b"ok"], -2, ValueError),
        ([b"ok"], 1.5, TypeError),
    ],
)
def test_a_value_batch_refuses_what_a_record_refuses(
    values: list[Any], timestamp_ms: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        build_value_batch(values, timestamp_ms)
