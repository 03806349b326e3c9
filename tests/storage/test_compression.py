"""Compressed record batches: Kafka's four codecs, framed as Kafka frames them, and bounded.

A compressed batch goes through the log as the producer compressed it: the leader decompresses
its records to validate them, stores and serves the bytes unchanged (header restamped), and
readers decompress again. kafka-python is the independent implementation: gzip natively (its
own gzip, Python's zlib), snappy through its own xerial framing code (over cramjam's raw snappy
when python-snappy is missing), lz4 and zstd only when its optional codec packages are here.
"""

from __future__ import annotations

import importlib
import os
import struct
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cramjam
import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkactor.clients.completed_fetch import read_fetched
from kafkactor.messages.replication import FetchPartitionData
from kafkactor.storage import (
    MAX_DECOMPRESSED_SIZE,
    CompressionType,
    CorruptRecordError,
    Log,
    LogConfig,
    Record,
    RecordBatch,
    StoredRecord,
    UnsupportedCompressionError,
    build_batch,
    compress,
    decompress,
    iter_batches,
)
from kafkactor.timer import ManualClock

# kafka-python ships no type information (see test_records.py); its import warns about
# deprecated importlib.resources calls that are not ours.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    kp_codec: Any = importlib.import_module("kafka.codec")
    kp_default: Any = importlib.import_module("kafka.record.default_records")
    kp_memory: Any = importlib.import_module("kafka.record.memory_records")

GZIP, SNAPPY, LZ4, ZSTD = (
    CompressionType.GZIP,
    CompressionType.SNAPPY,
    CompressionType.LZ4,
    CompressionType.ZSTD,
)
CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
CODEC_IDS = [codec.name.lower() for codec in CODECS]

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 61-byte batch header, written out independently
HEADER_SIZE = 61
ATTRIBUTES_AT = 21  # the CRC-32C covers the batch from its attributes to its end
CRC_AT = 17
TS = 1_700_000_000_000
MiB = 1024 * 1024
XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


# --------------------------------------------------------------------------------------------
# Helpers


def sample(count: int = 60, *, size: int = 80) -> list[Record]:
    """Compressible records with what the framing must carry: null keys and values, headers,
    timestamps going back and forth."""
    records = []
    for i in range(count):
        key = None if i % 7 == 3 else b"user-%d" % (i % 5)
        value = None if i % 11 == 5 else (b'{"event": "click", "n": %d}' % i).ljust(size, b" ")
        headers: tuple[tuple[str, bytes | None], ...] = (
            (("trace", b"t-%d" % i), ("none", None)) if i % 4 == 0 else ()
        )
        records.append(Record(key, value, TS + (i * 37) % 500 - 100, headers))
    return records


def expected(records: Sequence[Record], base_offset: int) -> list[StoredRecord]:
    return [
        StoredRecord(base_offset + i, r.timestamp_ms, r.key, r.value, r.headers)
        for i, r in enumerate(records)
    ]


def records_section(records: Sequence[Record]) -> bytes:
    """The uncompressed records of a batch: what a codec compresses."""
    return build_batch(records, 0)[HEADER_SIZE:]


def with_records_section(
    batch: bytes,
    payload: bytes,
    *,
    codec: int,
    count: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """`batch`'s header over `payload` as its records, `codec` in its attributes (and
    optionally another record count / last offset delta), batchLength and CRC recomputed."""
    fields = list(HEADER.unpack_from(batch))
    fields[1] = HEADER_SIZE - 12 + len(payload)
    fields[5] = (fields[5] & ~0x07) | codec
    if count is not None:
        fields[12] = count
    if last_offset_delta is not None:
        fields[6] = last_offset_delta
    out = bytearray(HEADER.pack(*fields) + payload)
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[ATTRIBUTES_AT:])))
    return bytes(out)


def open_log(directory: Path, config: LogConfig | None = None, **kwargs: Any) -> Log:
    return Log(directory, config or LogConfig(), 0, ManualClock(TS), **kwargs)


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = open_log(tmp_path / "events-0", LogConfig(max_message_bytes=64 * MiB))
    yield opened
    opened.close()


def xerial_blocks(stream: bytes) -> list[bytes]:
    """The raw snappy blocks of a xerial stream, parsed here independently."""
    assert stream[:16] == XERIAL_HEADER
    blocks, position = [], 16
    while position < len(stream):
        (length,) = struct.unpack_from(">i", stream, position)
        blocks.append(stream[position + 4 : position + 4 + length])
        position += 4 + length
    assert position == len(stream)
    return blocks


def lz4_frame(data: bytes, *, block_linked: bool) -> bytes:
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=block_linked)
    compressor.compress(data)
    return bytes(compressor.finish())


@cache
def bomb(codec: CompressionType, size: int) -> bytes:
    """A valid stream of `codec` that decompresses to at least `size` zero bytes: one stream of
    16 MiB repeated (gzip members, lz4 and zstd frames, xerial blocks concatenate)."""
    zeros = bytes(16 * MiB)
    copies = -(-size // len(zeros))
    if codec is SNAPPY:
        block = bytes(cramjam.snappy.compress_raw(zeros))
        return XERIAL_HEADER + (struct.pack(">i", len(block)) + block) * copies
    if codec is LZ4:
        return lz4_frame(zeros, block_linked=False) * copies
    return compress(codec, zeros) * copies


# kafka-python --------------------------------------------------------------------------------

# python-snappy's two functions that kafka-python's xerial framing calls, from cramjam: the
# framing (what Kafka's wire format is about) stays kafka-python's own code.
CRAMJAM_SNAPPY = SimpleNamespace(
    compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
    decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
)
KAFKA_PYTHON_HAS = {
    GZIP: kp_codec.has_gzip,
    SNAPPY: kp_codec.has_snappy,
    LZ4: kp_codec.has_lz4,
    ZSTD: kp_codec.has_zstd,
}
KAFKA_PYTHON_NEEDS = {LZ4: "lz4", ZSTD: "zstandard"}


def use_kafka_python_codec(codec: CompressionType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make kafka-python able to (de)compress `codec`, or skip saying why it cannot."""
    if KAFKA_PYTHON_HAS[codec]():
        return
    if codec is SNAPPY:
        monkeypatch.setattr(kp_codec, "snappy", CRAMJAM_SNAPPY)
        assert kp_codec.has_snappy()
        return
    pytest.skip(
        f"kafka-python reads and writes {codec.name.lower()} only with the "
        f"{KAFKA_PYTHON_NEEDS[codec]} package, which is not installed (nor a kafkactor dependency)"
    )


def kp_build(records: Sequence[Record], codec: CompressionType) -> bytes:
    builder = kp_default.DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=2**31 - 1,
    )
    for offset_delta, record in enumerate(records):
        appended = builder.append(
            offset_delta, record.timestamp_ms, record.key, record.value, list(record.headers)
        )
        assert appended is not None
    return bytes(builder.build())


def kp_read(data: bytes) -> list[tuple[Any, ...]]:
    """kafka-python's reading of a buffer of batches: every record, every CRC checked."""
    memory_records = kp_memory.MemoryRecords(data)
    out: list[tuple[Any, ...]] = []
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch.validate_crc()
        out.extend(
            (r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers))
            for r in batch
        )
    return out


def as_tuples(records: Sequence[StoredRecord]) -> list[tuple[Any, ...]]:
    return [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in records]


# --------------------------------------------------------------------------------------------
# Through the log


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_round_trip_through_the_log(tmp_path: Path, codec: CompressionType) -> None:
    records = sample()
    directory = tmp_path / "events-0"
    log = open_log(directory)
    log.append_as_leader(build_batch(sample(3), 0), leader_epoch=7)
    produced = build_batch(records, 0, compression=codec)
    assert RecordBatch(produced).compression_codec == codec

    info = log.append_as_leader(produced, leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.record_count) == (3, 62, 60)

    read = log.read(3, 2 * MiB).records
    # Stored and served as produced: only baseOffset and the leader epoch (outside the CRC)
    # were stamped; the compressed records are the producer's bytes.
    assert read == RecordBatch(produced).restamp(base_offset=3, leader_epoch=7)
    assert read[HEADER_SIZE:] == produced[HEADER_SIZE:]
    [batch] = iter_batches(read, deep=True)
    assert (batch.compression_codec, batch.base_offset, batch.leader_epoch) == (codec, 3, 7)
    assert batch.records() == expected(records, 3)
    # The in-process consumer reads its records out of the fetched (compressed) batch.
    fetched = FetchPartitionData(topic="events", partition=0, records=read)
    consumed = read_fetched(fetched, 10, 0).records
    assert [(r.offset, r.key, r.value) for r in consumed] == [
        (r.offset, r.key, r.value) for r in expected(records, 3)[7:]
    ]

    # A restart without a clean shutdown recovers the segment: the batch survives as it was.
    log.crash()
    reopened = open_log(directory)
    try:
        assert reopened.log_end_offset == 63
        assert reopened.read(3, 2 * MiB).records == read
    finally:
        reopened.close()


def test_one_produce_of_batches_with_every_codec(log: Log) -> None:
    records = sample(50)
    chunks = [records[i : i + 10] for i in range(0, 50, 10)]
    produced = b"".join(
        build_batch(chunk, 0, compression=codec)
        for chunk, codec in zip(chunks, CompressionType, strict=True)
    )
    info = log.append_as_leader(produced, leader_epoch=2)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 49, 5)
    batches = list(iter_batches(log.read(0, 2 * MiB).records, deep=True))
    assert [b.compression_codec for b in batches] == list(CompressionType)
    assert [r for b in batches for r in b.records()] == expected(records, 0)


def test_restamp_keeps_a_compressed_batch_valid() -> None:
    produced = build_batch(sample(), 0, compression=ZSTD)
    restamped = RecordBatch(produced).restamp(base_offset=2**40, leader_epoch=9)
    batch = RecordBatch(restamped, deep=True)  # the CRC still holds
    assert restamped[HEADER_SIZE:] == produced[HEADER_SIZE:]
    assert batch.records() == expected(sample(), 2**40)


# --------------------------------------------------------------------------------------------
# Kafka's framing of each codec


def test_snappy_is_written_in_xerial_blocks_of_32_kib() -> None:
    """What Kafka's Java producer writes (snappy-java's SnappyOutputStream)."""
    records = sample(1500)  # ~150 KiB of records: several blocks
    section = records_section(records)
    stream = build_batch(records, 0, compression=SNAPPY)[HEADER_SIZE:]
    blocks = xerial_blocks(stream)
    decoded = [bytes(cramjam.snappy.decompress_raw(block)) for block in blocks]
    assert len(blocks) == -(-len(section) // (32 * 1024)) > 1
    assert all(len(part) == 32 * 1024 for part in decoded[:-1])
    assert b"".join(decoded) == section


@pytest.mark.parametrize("framing", ["xerial", "raw", "xerial, little-endian header"])
def test_both_snappy_framings_are_read(log: Log, framing: str) -> None:
    """Java clients write xerial blocks, librdkafka one raw snappy block; Kafka reads both (some
    producers write the xerial version fields little-endian: they are not checked)."""
    records = sample(1500)
    section = records_section(records)
    if framing == "raw":
        payload = bytes(cramjam.snappy.compress_raw(section))
    else:
        payload = compress(SNAPPY, section)
        if framing.endswith("little-endian header"):
            payload = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + payload[16:]
    data = with_records_section(build_batch(records, 0), payload, codec=SNAPPY)
    assert RecordBatch(data, deep=True).records() == expected(records, 0)
    log.append_as_leader(data, leader_epoch=0)
    assert log.read(0, 2 * MiB).records[HEADER_SIZE:] == payload


def test_lz4_is_one_frame_of_independent_64_kib_blocks() -> None:
    """Kafka's Lz4BlockOutputStream: no content size or content checksum, independent blocks
    (the only kind Kafka's Lz4BlockInputStream reads), 64 KiB maximum block size."""
    stream = build_batch(sample(), 0, compression=LZ4)[HEADER_SIZE:]
    assert stream[:4] == b"\x04\x22\x4d\x18"
    flg, bd = stream[4], stream[5]
    assert flg >> 6 == 1  # version
    assert flg & 0x20  # block independence
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert bd == 0x40  # 64 KiB blocks


def test_an_lz4_frame_of_dependent_blocks_is_corrupt() -> None:
    records = sample(1500)
    payload = lz4_frame(records_section(records), block_linked=True)
    data = with_records_section(build_batch(records, 0), payload, codec=LZ4)
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        RecordBatch(data).records()


def test_zstd_without_content_size_gzip_members_and_zstd_frames_are_read() -> None:
    """zstd-jni's streaming writer leaves the content size out of the frame header; Java's
    GZIPInputStream reads concatenated members, zstd-jni concatenated frames."""
    records = sample(30)
    section = records_section(records)
    compressor = cramjam.zstd.Compressor()
    compressor.compress(section)
    streamed = bytes(compressor.finish())
    assert not streamed[4] & 0xC0  # frame header descriptor: no frame content size
    half = len(section) // 2
    for codec, payload in [
        (ZSTD, streamed),
        (ZSTD, compress(ZSTD, section[:half]) + compress(ZSTD, section[half:])),
        (GZIP, compress(GZIP, section[:half]) + compress(GZIP, section[half:])),
    ]:
        data = with_records_section(build_batch(records, 0), payload, codec=codec)
        assert RecordBatch(data, deep=True).records() == expected(records, 0)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_compress_and_decompress_round_trip(codec: CompressionType) -> None:
    for data in [b"", b"x", bytes(range(256)) * 1000, os.urandom(100_000)]:
        assert decompress(codec, compress(codec, data)) == data
    assert compress(CompressionType.NONE, b"abc") == decompress(0, b"abc") == b"abc"


# --------------------------------------------------------------------------------------------
# kafka-python, both ways


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_kafka_python_reads_our_compressed_batches(
    codec: CompressionType, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_kafka_python_codec(codec, monkeypatch)
    records = sample()
    data = build_batch(records, 40, 3, compression=codec) + build_batch(
        records[:5], 100, 3, compression=codec
    )
    assert kp_read(data) == as_tuples(expected(records, 40) + expected(records[:5], 100))


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_we_read_kafka_pythons_compressed_batches(
    codec: CompressionType, monkeypatch: pytest.MonkeyPatch, log: Log
) -> None:
    use_kafka_python_codec(codec, monkeypatch)
    records = sample()
    theirs = kp_build(records, codec)
    [batch] = iter_batches(theirs, deep=True)
    assert batch.compression_codec == codec  # kafka-python did compress (it may decline)
    assert batch.records() == expected(records, 0)
    log.append_as_leader(build_batch(sample(2), 0), leader_epoch=1)
    log.append_as_leader(theirs, leader_epoch=1)
    [_, stored] = iter_batches(log.read(0, 2 * MiB).records, deep=True)
    assert stored.records() == expected(records, 2)
    assert stored.buffer.tobytes()[HEADER_SIZE:] == theirs[HEADER_SIZE:]


# --------------------------------------------------------------------------------------------
# Refused: corrupt, too large once decompressed, inconsistent, unknown codec


def garbage(payload: bytes) -> bytes:
    return bytes((b * 73 + 41) % 256 for b in payload)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(garbage, id="garbage"),
        pytest.param(lambda payload: payload[:-9], id="truncated"),
        pytest.param(lambda payload: payload[: len(payload) // 2] + b"\xff" * 9, id="cut"),
        pytest.param(lambda payload: b"", id="empty"),
    ],
)
def test_corrupt_compressed_records_with_a_valid_crc(
    codec: CompressionType, damage: Callable[[bytes], bytes], log: Log
) -> None:
    records = sample(200)
    good = build_batch(records, 0, compression=codec)
    payload = damage(good[HEADER_SIZE:])
    bad = with_records_section(good, payload, codec=codec)
    # Header and CRC are fine: what a follower and recovery check passes ...
    assert len(list(iter_batches(good + bad))) == 2
    # ... but the records do not decompress.
    with pytest.raises(CorruptRecordError) as info:
        for batch in iter_batches(good + bad, deep=True):
            batch.records()
    assert info.value.position == len(good)
    assert f"{codec.name.lower()}" in str(info.value)
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(good + bad, leader_epoch=0)
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_a_decompression_bomb_is_corrupt(codec: CompressionType, log: Log) -> None:
    payload = bomb(codec, MAX_DECOMPRESSED_SIZE + 1)
    data = with_records_section(build_batch(sample(1), 0), payload, codec=codec)
    [batch] = iter_batches(data)  # the header is fine
    with pytest.raises(CorruptRecordError, match=f"more than {MAX_DECOMPRESSED_SIZE} bytes"):
        batch.records()
    with pytest.raises(CorruptRecordError, match=f"more than {MAX_DECOMPRESSED_SIZE} bytes"):
        log.append_as_leader(data, leader_epoch=0)
    assert (log.log_end_offset, log.size_in_bytes) == (0, 0)


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
def test_decompress_stops_at_its_bound(codec: CompressionType) -> None:
    data = bytes(range(256)) * 400
    stream = compress(codec, data)
    assert decompress(codec, stream, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError, match=f"more than {len(data) - 1} bytes") as info:
        decompress(codec, stream, max_size=len(data) - 1, position=99)
    assert info.value.position == 99


def test_a_snappy_block_cannot_declare_more_than_it_holds() -> None:
    # A raw snappy block declaring 200 MiB in six bytes: refused before anything is allocated.
    lying = bytes([0x80, 0x80, 0x80, 0x64]) + b"\x00\x00"
    with pytest.raises(CorruptRecordError, match="declares 209715200, more than it can hold"):
        decompress(SNAPPY, lying)
    with pytest.raises(CorruptRecordError, match="declares"):
        decompress(SNAPPY, XERIAL_HEADER + struct.pack(">i", len(lying)) + lying)


@pytest.mark.timeout(120)
def test_a_bomb_takes_no_more_memory_than_the_bound(tmp_path: Path) -> None:
    """In a fresh process (its peak RSS is its own): bombs of four times the bound cost at most
    the bound, plus slack, in resident memory."""
    script = textwrap.dedent(
        f"""
        import resource
        from kafkactor.storage import CompressionType, CorruptRecordError, decompress
        from tests.storage.test_compression import bomb

        bombs = [(c, bomb(c, {4 * MAX_DECOMPRESSED_SIZE})) for c in list(CompressionType)[1:]]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        for codec, payload in bombs:
            try:
                decompress(codec, payload)
            except CorruptRecordError as error:
                assert "more than" in str(error), error
            else:
                raise AssertionError(codec)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    growth = int(done.stdout.split()[-1])
    assert growth < MAX_DECOMPRESSED_SIZE + 64 * MiB


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_IDS)
@pytest.mark.parametrize(
    ("count", "message"),
    [
        (4, "declares 4 records but holds only 3"),
        (2, "remain after the 2 records the batch declares"),
    ],
)
def test_record_count_disagreeing_with_the_decompressed_records(
    codec: CompressionType, count: int, message: str, log: Log
) -> None:
    records = sample(3)
    payload = compress(codec, records_section(records))
    data = with_records_section(
        build_batch(records, 0), payload, codec=codec, count=count, last_offset_delta=count - 1
    )
    with pytest.raises(CorruptRecordError, match=f"decompressed {codec.name.lower()} records"):
        RecordBatch(data).records()
    with pytest.raises(CorruptRecordError, match=message):
        RecordBatch(data, deep=True)
    with pytest.raises(CorruptRecordError, match=message):
        log.append_as_leader(data, leader_epoch=0)
    assert log.log_end_offset == 0


def test_a_compressed_batch_cannot_declare_more_records_than_the_bound_holds() -> None:
    batch = build_batch(sample(1), 0, compression=GZIP)
    count = MAX_DECOMPRESSED_SIZE // 7 + 1
    data = with_records_section(
        batch, batch[HEADER_SIZE:], codec=GZIP, count=count, last_offset_delta=count
    )
    with pytest.raises(CorruptRecordError, match=f"{count} records cannot fit"):
        list(iter_batches(data))  # from the header alone


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_an_unknown_codec_is_unsupported(codec: int, log: Log) -> None:
    good = build_batch(sample(3), 0)
    unknown = with_records_section(good, good[HEADER_SIZE:], codec=codec)
    with pytest.raises(UnsupportedCompressionError) as info:
        list(iter_batches(good + unknown))
    assert (info.value.codec, info.value.position) == (codec, len(good))
    with pytest.raises(UnsupportedCompressionError):
        log.append_as_leader(unknown, leader_epoch=0)
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"whatever", position=5)
    with pytest.raises(ValueError, match="not a valid CompressionType"):
        compress(codec, b"whatever")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid CompressionType"):
        build_batch(sample(3), 0, compression=codec)  # type: ignore[arg-type]


def test_codec_ids_are_kafkas() -> None:
    assert [(c.name, int(c)) for c in CompressionType] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]
    assert (GZIP, SNAPPY, LZ4, ZSTD) == (
        kp_default.DefaultRecordBase.CODEC_GZIP,
        kp_default.DefaultRecordBase.CODEC_SNAPPY,
        kp_default.DefaultRecordBase.CODEC_LZ4,
        kp_default.DefaultRecordBase.CODEC_ZSTD,
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    index=st.integers(min_value=0),
    mask=st.integers(min_value=1, max_value=255),
    cut=st.booleans(),
)
def test_damaged_compressed_records_raise_only_corruption(
    codec: CompressionType, index: int, mask: int, cut: bool
) -> None:
    """Damage anywhere in the compressed records (CRC recomputed) reaches the decompressor and
    the record walker: a typed error, or a batch that happens to read."""
    good = build_batch(sample(20), 0, compression=codec)
    payload = bytearray(good[HEADER_SIZE:])
    index %= len(payload)
    payload[index] ^= mask
    if cut:
        del payload[index:]
    data = with_records_section(good, bytes(payload), codec=codec)
    try:
        for batch in iter_batches(data, deep=True):
            batch.records()
    except CorruptRecordError:
        pass
