"""Log: appends as leader and follower, reads, rolls, truncation, flush, retention, recovery.

Every test runs on a real directory (tmp_path) with a ManualClock and small segments, and checks
both what the log answers and what is on disk.
"""

from __future__ import annotations

import itertools
import os
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import crc32c
import pytest

from kafkactor.common import TopicPartition
from kafkactor.storage.config import LogConfig
from kafkactor.storage.errors import (
    CorruptRecordError,
    InvalidAppendOffsetError,
    InvalidLogDirectoryError,
    InvalidLogFileError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TruncatedBatchError,
    UnsupportedCompressionError,
)
from kafkactor.storage.log import Log
from kafkactor.storage.log_loader import LEADER_EPOCH_CHECKPOINT
from kafkactor.storage.record_batch import RecordBatch, iter_batches
from kafkactor.storage.records import NO_TIMESTAMP, Record, StoredRecord, build_batch
from kafkactor.storage.segment import segment_file_name
from kafkactor.timer import ManualClock
from tests.replication.support import EventLog, captured_events

TS = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=100)
ATTRIBUTES_AT = 21  # the CRC-32C covers the batch from its attributes to its end
CRC_AT = 17
MAX_RELATIVE = 2**31 - 1


# --------------------------------------------------------------------------------------------
# Helpers


def value_of(offset: int, size: int = 40) -> bytes:
    """The value stored at `offset` by these tests: it names the offset, padded to `size`."""
    return (b"value-%d-" % offset).ljust(size, b".")


def records_at(offset: int, count: int, *, size: int = 40, ts: int = TS) -> list[Record]:
    return [Record(b"key-%d" % (offset + i), value_of(offset + i, size), ts) for i in range(count)]


def batch_at(offset: int, count: int = 3, *, size: int = 40, ts: int = TS) -> bytes:
    return build_batch(records_at(offset, count, size=size, ts=ts), offset, leader_epoch=0)


def recrc(data: bytes) -> bytes:
    out = bytearray(data)
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[ATTRIBUTES_AT:])))
    return bytes(out)


def open_log(
    directory: Path,
    clock: ManualClock,
    config: LogConfig = SMALL,
    recovery_point: int = 0,
    *,
    clean_shutdown: bool = False,
) -> Log:
    return Log(directory, config, recovery_point, clock, clean_shutdown=clean_shutdown)


def append_records(log: Log, count: int, *, size: int = 40, ts: int = TS) -> None:
    """One leader append of `count` records whose values name their offsets."""
    offset = log.log_end_offset
    info = log.append_as_leader(records_at(offset, count, size=size, ts=ts), leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (offset, offset + count - 1)


def decode(data: bytes) -> list[StoredRecord]:
    return [record for batch in iter_batches(data, deep=True) for record in batch.records()]


def read_all(log: Log) -> list[StoredRecord]:
    """Every record from the log start to the end, through `read` (one segment per read)."""
    found: list[StoredRecord] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10**9).records
        if not data:
            break
        batches = list(iter_batches(data, deep=True))
        found.extend(r for batch in batches for r in batch.records())
        offset = batches[-1].next_offset
    return found


def offsets(log: Log) -> list[int]:
    return [r.offset for r in read_all(log)]


def check_values(log: Log) -> None:
    """Every record read back holds the value that names its offset."""
    for record in read_all(log):
        assert record.value is not None
        assert record.value.startswith(b"value-%d-" % record.offset), record


def log_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".log"))


def disk_batches(directory: Path) -> list[RecordBatch]:
    """Every batch in the segment files, strictly validated (a partial batch raises)."""
    return [
        batch
        for name in log_files(directory)
        for batch in iter_batches((directory / name).read_bytes(), deep=True)
    ]


def index_entries(log: Log) -> list[list[tuple[int, int]]]:
    return [
        [segment.index.entry(n) for n in range(segment.index.entries)] for segment in log.segments
    ]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "events-0"


@pytest.fixture
def log(log_dir: Path, clock: ManualClock) -> Iterator[Log]:
    opened = open_log(log_dir, clock)
    yield opened
    opened.close()


def fill_segments(log: Log, appends: int, count: int = 3, size: int = 40) -> None:
    for _ in range(appends):
        append_records(log, count, size=size)


# --------------------------------------------------------------------------------------------
# A new log


def test_a_new_log_is_empty_with_one_segment(log: Log, log_dir: Path) -> None:
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (0, 0, 0)
    assert log.num_segments == 1
    result = log.read(0, 1000)
    assert result.records == b""
    assert result.fetch_offset_metadata.offset == 0
    assert log.topic_partition == TopicPartition(topic="events", partition=0)
    # An empty new log creates no file (nor holds a descriptor) until its first write...
    log.flush()
    assert os.listdir(log_dir) == []
    append_records(log, 1)
    # ... which creates the segment's three files together.
    assert sorted(os.listdir(log_dir)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]


def test_a_new_log_closed_unwritten_reopens_empty(log_dir: Path, clock: ManualClock) -> None:
    opened = open_log(log_dir, clock)
    opened.roll()
    opened.close()
    assert os.listdir(log_dir) == []
    again = open_log(log_dir, clock)
    assert (again.log_start_offset, again.log_end_offset, again.num_segments) == (0, 0, 1)
    append_records(again, 2)
    again.close()
    assert offsets(open_log(log_dir, clock)) == [0, 1]


# --------------------------------------------------------------------------------------------
# Appends


def test_leader_appends_read_back_record_for_record(log: Log) -> None:
    appended = [
        [Record(b"k", b"v", TS)],
        [Record(None, b"no key", TS + 1), Record(b"k2", None, TS + 2)],
        [Record(b"h", b"with headers", TS + 3, (("a", b"1"), ("a", None), ("b", b"")))],
        [Record(b"", b"", TS + 4)] * 5,
    ]
    infos = [log.append_as_leader(records, leader_epoch=7) for records in appended]
    flat = [record for records in appended for record in records]
    assert [r.to_record() for r in read_all(log)] == flat
    assert [r.offset for r in read_all(log)] == list(range(len(flat)))
    assert [(i.first_offset, i.last_offset, i.record_count, i.batch_count) for i in infos] == [
        (0, 0, 1, 1),
        (1, 2, 2, 1),
        (3, 3, 1, 1),
        (4, 8, 5, 1),
    ]
    assert [i.max_timestamp for i in infos] == [TS, TS + 2, TS + 3, TS + 4]
    assert log.log_end_offset == 9
    batches = disk_batches(log.dir)
    assert [b.leader_epoch for b in batches] == [7] * 4
    assert [i.size_in_bytes for i in infos] == [b.size_in_bytes for b in batches]


def test_an_empty_append_is_refused(log: Log) -> None:
    with pytest.raises(ValueError):
        log.append_as_leader([], leader_epoch=0)
    with pytest.raises(ValueError):
        log.append_as_leader(b"", leader_epoch=0)
    with pytest.raises(ValueError):
        log.append_as_follower(b"")
    assert log.log_end_offset == 0


def test_leader_append_of_producer_bytes_assigns_offsets_and_epoch(log: Log) -> None:
    append_records(log, 4)
    producer = build_batch([Record(None, b"p0", TS), Record(None, b"p1", TS)], base_offset=0)
    producer += build_batch([Record(None, b"p2", TS)], base_offset=0)  # producers send base 0
    info = log.append_as_leader(producer, leader_epoch=3)
    assert (info.first_offset, info.last_offset, info.batch_count, info.record_count) == (
        4,
        6,
        2,
        3,
    )
    stored = disk_batches(log.dir)[1:]
    assert [(b.base_offset, b.last_offset, b.leader_epoch) for b in stored] == [
        (4, 5, 3),
        (6, 6, 3),
    ]
    tail = decode(log.read(4, 10**6).records)
    assert [(r.offset, r.value) for r in tail] == [(4, b"p0"), (5, b"p1"), (6, b"p2")]
    assert log.log_end_offset == 7


def test_a_produce_request_of_more_batches_than_one_vectored_write_takes_lands_whole(
    log: Log,
) -> None:
    # A leader writes each batch as two buffers (its restamped prefix, then the producer's
    # bytes); the kernel takes at most 1,024 buffers per call, so 600 batches need two calls.
    producer = b"".join(
        build_batch([Record(None, b"v%d" % n, TS)], base_offset=0) for n in range(600)
    )
    info = log.append_as_leader(producer, leader_epoch=2)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 599, 600)
    assert info.size_in_bytes == len(producer)
    stored = disk_batches(log.dir)
    assert [(b.base_offset, b.leader_epoch) for b in stored] == [(n, 2) for n in range(600)]
    records = decode(log.read(0, 10**7).records)
    assert [(r.offset, r.value) for r in records] == [(n, b"v%d" % n) for n in range(600)]
    assert os.path.getsize(log.segments[0].log_path) == len(producer)


def test_follower_appends_keep_the_leaders_offsets_including_gaps(log: Log) -> None:
    info = log.append_as_follower(batch_at(0, 5))
    assert (info.first_offset, info.last_offset) == (0, 4)
    info = log.append_as_follower(batch_at(10, 5))
    assert (info.first_offset, info.last_offset) == (10, 14)
    assert log.log_end_offset == 15
    assert offsets(log) == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    check_values(log)
    # Several batches in one append, the first right at the log end.
    info = log.append_as_follower(batch_at(15, 2) + batch_at(20, 1))
    assert (info.first_offset, info.last_offset, info.batch_count) == (15, 20, 2)
    assert log.log_end_offset == 21


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(batch_at(4, 2), id="overlapping the log end"),
        pytest.param(batch_at(0, 2), id="from the start again"),
        pytest.param(batch_at(5, 2) + batch_at(6, 2), id="second batch going back"),
        pytest.param(batch_at(8, 2) + batch_at(5, 2), id="second batch below the first"),
    ],
)
def test_follower_offsets_going_backwards_are_refused(log: Log, data: bytes) -> None:
    log.append_as_follower(batch_at(0, 5))
    before = log.size_in_bytes
    with pytest.raises(InvalidAppendOffsetError):
        log.append_as_follower(data)
    assert (log.log_end_offset, log.size_in_bytes) == (5, before)
    assert offsets(log) == [0, 1, 2, 3, 4]


def damaged(data: bytes) -> bytes:
    out = bytearray(data)
    out[-2] ^= 0x40  # a byte of the last record: only the CRC notices
    return bytes(out)


def compressed(data: bytes, codec: int = 1) -> bytes:
    out = bytearray(data)
    struct.pack_into(">h", out, ATTRIBUTES_AT, codec)
    return recrc(bytes(out))


@pytest.mark.parametrize("leader", [True, False], ids=["leader", "follower"])
@pytest.mark.parametrize(
    ("make", "error"),
    [
        pytest.param(lambda: damaged(batch_at(2, 2)), CorruptRecordError, id="bad crc"),
        pytest.param(
            lambda: batch_at(2, 2) + damaged(batch_at(4, 1)), CorruptRecordError, id="2nd bad"
        ),
        pytest.param(lambda: batch_at(2, 2)[:-5], TruncatedBatchError, id="truncated"),
        pytest.param(lambda: b"\x00" * 30, CorruptRecordError, id="garbage"),
        # codec ids Kafka does not define (1-4 are read: tests/storage/test_compression.py)
        pytest.param(lambda: compressed(batch_at(2, 2), 5), UnsupportedCompressionError, id="5"),
        pytest.param(lambda: compressed(batch_at(2, 2), 7), UnsupportedCompressionError, id="7"),
    ],
)
def test_bad_bytes_are_refused_whole(
    log: Log, leader: bool, make: Callable[[], bytes], error: type[Exception]
) -> None:
    data = make()
    append_records(log, 2)
    before = log.size_in_bytes
    with pytest.raises(error):
        if leader:
            log.append_as_leader(data, leader_epoch=0)
        else:
            log.append_as_follower(data)
    assert (log.log_end_offset, log.size_in_bytes) == (2, before)
    assert os.path.getsize(log.dir / "00000000000000000000.log") == before


def test_a_leader_walks_every_record_of_producer_bytes(log: Log) -> None:
    out = bytearray(batch_at(0, 2))
    out[61] += 2  # the first record's length varint, one larger; the CRC is made valid again
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(recrc(bytes(out)), leader_epoch=0)
    assert log.log_end_offset == 0


@pytest.mark.parametrize("leader", [True, False], ids=["leader", "follower"])
def test_a_batch_above_max_message_bytes_is_refused(
    log_dir: Path, clock: ManualClock, leader: bool
) -> None:
    big = batch_at(0, 1, size=300)
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, max_message_bytes=len(big))
    log = open_log(log_dir, clock, config)
    try:
        if leader:
            log.append_as_leader(big, leader_epoch=0)  # exactly the limit: accepted
        else:
            log.append_as_follower(big)
        too_big = batch_at(1, 1, size=301)
        with pytest.raises(RecordTooLargeError):
            if leader:
                log.append_as_leader(too_big, leader_epoch=0)
            else:
                log.append_as_follower(too_big)
        assert log.log_end_offset == 1
    finally:
        log.close()


def test_a_record_list_above_max_message_bytes_is_refused(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, max_message_bytes=200)
    log = open_log(log_dir, clock, config)
    try:
        with pytest.raises(RecordTooLargeError):
            log.append_as_leader([Record(None, b"x" * 500, TS)], leader_epoch=0)
    finally:
        log.close()


def test_lowering_max_message_bytes_loses_nothing_on_recovery(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    append_records(log, 1, size=2000)
    append_records(log, 2)
    log.close()
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, max_message_bytes=200)
    log = open_log(log_dir, clock, config)
    try:
        assert log.recovered_bytes_truncated == 0
        assert offsets(log) == [0, 1, 2]
        check_values(log)
    finally:
        log.close()


def test_flush_interval_messages_flushes_after_that_many_records(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, flush_interval_messages=5)
    log = open_log(log_dir, clock, config)
    try:
        append_records(log, 3)
        assert log.recovery_point == 0
        append_records(log, 1)
        assert log.recovery_point == 0
        append_records(log, 1)
        assert log.recovery_point == 5
        append_records(log, 4)
        assert log.recovery_point == 5
        append_records(log, 2)
        assert log.recovery_point == 11
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# Reads


def test_reads_start_at_the_batch_holding_the_offset(log: Log) -> None:
    for count in (3, 1, 4, 2):
        append_records(log, count)  # batches 0..2, 3, 4..7, 8..9
    starts = {0: 0, 3: 3, 4: 4, 8: 8}
    for offset in range(10):
        batch_base = max(b for b in starts if b <= offset)
        records = decode(log.read(offset, 10**6).records)
        assert records[0].offset == batch_base, offset
        assert [r.offset for r in records] == list(range(batch_base, 10))
    check_values(log)


def test_read_metadata_names_the_segment_and_position(log: Log) -> None:
    fill_segments(log, 40)
    assert log.num_segments > 2
    for offset in range(0, log.log_end_offset, 7):
        result = log.read(offset, 1)
        first = next(iter_batches(result.records))
        segment = [s for s in log.segments if s.base_offset <= offset][-1]
        header = segment.find_batch(offset)
        assert header is not None
        assert result.fetch_offset_metadata.offset == offset
        assert result.fetch_offset_metadata.segment_base_offset == segment.base_offset
        assert result.fetch_offset_metadata.position == header.position
        assert first.base_offset == header.base_offset
    end = log.log_end_offset_metadata
    assert (end.offset, end.segment_base_offset, end.position) == (
        log.log_end_offset,
        log.segments[-1].base_offset,
        log.segments[-1].size,
    )


def test_a_read_at_the_log_end_is_empty(log: Log) -> None:
    append_records(log, 3)
    result = log.read(3, 10**6)
    assert result.records == b""
    assert result.fetch_offset_metadata == log.log_end_offset_metadata


@pytest.mark.parametrize("offset", [4, 5, 1000, 2**62, -1])
def test_a_read_outside_the_log_is_out_of_range(log: Log, offset: int) -> None:
    append_records(log, 3)
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(offset, 10**6)
    assert (info.value.offset, info.value.log_start_offset, info.value.log_end_offset) == (
        offset,
        0,
        3,
    )


def test_a_read_inside_a_gap_returns_the_next_batch(log: Log) -> None:
    log.append_as_follower(batch_at(0, 5))
    log.append_as_follower(batch_at(10, 5))
    for offset in range(5, 10):
        assert [r.offset for r in decode(log.read(offset, 10**6).records)] == list(range(10, 15))
    # A gap across a segment boundary.
    log.roll()
    log.append_as_follower(batch_at(30, 2))
    assert log.num_segments == 2
    for offset in range(15, 30):
        assert [r.offset for r in decode(log.read(offset, 10**6).records)] == [30, 31]
    assert log.read(32, 10).records == b""


def test_max_offset_is_exclusive_and_straddling_batches_are_left_out(log: Log) -> None:
    for count in (3, 3, 3):
        append_records(log, count)  # 0..2, 3..5, 6..8

    def read_offsets(start: int, max_offset: int) -> list[int]:
        return [r.offset for r in decode(log.read(start, 10**6, max_offset).records)]

    assert read_offsets(0, 9) == list(range(9))
    assert read_offsets(0, 6) == list(range(6))
    assert read_offsets(0, 5) == [0, 1, 2]  # 3..5 reaches 5: left out whole
    assert read_offsets(0, 3) == [0, 1, 2]
    assert read_offsets(0, 2) == []  # even the first batch
    assert read_offsets(0, 0) == []
    assert read_offsets(4, 6) == [3, 4, 5]
    assert read_offsets(4, 5) == []
    assert read_offsets(6, 6) == []


def test_max_bytes_returns_whole_batches_and_always_the_first(log: Log) -> None:
    for count in (3, 3, 3):
        append_records(log, count)
    sizes = [b.size_in_bytes for b in disk_batches(log.dir)]

    def read_offsets(start: int, max_bytes: int, *, min_one: bool = True) -> list[int]:
        data = log.read(start, max_bytes, min_one_batch=min_one).records
        return [r.offset for r in decode(data)]

    assert read_offsets(0, 1) == [0, 1, 2]
    assert read_offsets(0, 0) == [0, 1, 2]
    assert read_offsets(0, sizes[0] - 1, min_one=False) == []
    assert read_offsets(0, sizes[0] + sizes[1] - 1) == [0, 1, 2]
    assert read_offsets(0, sizes[0] + sizes[1]) == list(range(6))
    assert read_offsets(0, sum(sizes)) == list(range(9))
    assert read_offsets(5, 1) == [3, 4, 5]
    assert len(log.read(0, sizes[0] + sizes[1]).records) == sizes[0] + sizes[1]


def test_a_read_returns_one_segment_at_most(log: Log) -> None:
    append_records(log, 2)
    log.roll()
    append_records(log, 2)
    assert [r.offset for r in decode(log.read(0, 10**6).records)] == [0, 1]
    assert [r.offset for r in decode(log.read(2, 10**6).records)] == [2, 3]


# --------------------------------------------------------------------------------------------
# Rolling


def test_segment_bytes_rolls_when_the_append_would_not_fit(
    log_dir: Path, clock: ManualClock
) -> None:
    one = len(batch_at(0, 1, size=100))
    config = LogConfig(segment_bytes=3 * one, index_interval_bytes=100)
    log = open_log(log_dir, clock, config)
    try:
        for _ in range(3):
            append_records(log, 1, size=100)
        assert log.num_segments == 1  # exactly full: no roll yet
        assert log.segments[0].size == 3 * one
        append_records(log, 1, size=100)
        assert [s.base_offset for s in log.segments] == [0, 3]
        # A batch larger than segment_bytes still goes into a segment of its own.
        append_records(log, 1, size=4 * one)
        append_records(log, 1, size=100)
        assert [s.base_offset for s in log.segments] == [0, 3, 4, 5]
        assert log_files(log_dir) == [segment_file_name(b, ".log") for b in (0, 3, 4, 5)]
        assert offsets(log) == list(range(6))
        check_values(log)
    finally:
        log.close()


def test_segment_bytes_keeps_every_segment_within_the_limit(log: Log) -> None:
    fill_segments(log, 80)
    assert log.num_segments > 3
    assert all(s.size <= SMALL.segment_bytes for s in log.segments)
    # Each segment was rolled because the next batch did not fit.
    size_at = {b.base_offset: b.size_in_bytes for b in disk_batches(log.dir)}
    segments = log.segments
    for old, new in itertools.pairwise(segments):
        assert old.size + size_at[new.base_offset] > SMALL.segment_bytes
    assert offsets(log) == list(range(240))


def test_segment_ms_rolls_after_that_long_since_the_first_batch(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, segment_ms=1000)
    log = open_log(log_dir, clock, config)
    try:
        append_records(log, 1, ts=clock.now_ms())
        clock.advance(999)
        append_records(log, 1, ts=clock.now_ms())
        assert log.num_segments == 1
        clock.advance(2)  # 1001 ms after the first batch's timestamp
        append_records(log, 1, ts=clock.now_ms())
        assert [s.base_offset for s in log.segments] == [0, 2]
        # The new segment counts from its own first batch.
        clock.advance(999)
        append_records(log, 1, ts=clock.now_ms())
        assert log.num_segments == 2
    finally:
        log.close()


def test_segment_ms_counts_from_creation_without_timestamps(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, segment_ms=1000)
    log = open_log(log_dir, clock, config)
    try:
        clock.advance(500)
        append_records(log, 1, ts=NO_TIMESTAMP)
        clock.advance(499)
        append_records(log, 1, ts=NO_TIMESTAMP)
        assert log.num_segments == 1
        clock.advance(2)  # 1001 ms after the segment was created
        append_records(log, 1, ts=NO_TIMESTAMP)
        assert log.num_segments == 2
    finally:
        log.close()


def test_a_full_index_rolls(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=10**6, index_interval_bytes=0, max_index_size=32)
    log = open_log(log_dir, clock, config)
    try:
        for _ in range(5):  # the first append adds no entry, the next four fill the index
            append_records(log, 1)
        assert log.num_segments == 1
        assert log.segments[0].index.is_full
        append_records(log, 1)
        assert [s.base_offset for s in log.segments] == [0, 5]
        assert offsets(log) == list(range(6))
    finally:
        log.close()


def test_offsets_beyond_a_32_bit_relative_offset_roll(log: Log, log_dir: Path) -> None:
    log.append_as_follower(batch_at(0, 2))
    log.append_as_follower(batch_at(MAX_RELATIVE - 2, 3))  # last offset exactly 2**31 - 1
    assert log.num_segments == 1
    far = MAX_RELATIVE + 5
    log.append_as_follower(batch_at(far, 2))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log_files(log_dir) == [segment_file_name(0, ".log"), segment_file_name(far, ".log")]
    assert log.log_end_offset == far + 2
    # A batch whose first offset fits but whose last does not rolls too.
    log2_base = far + MAX_RELATIVE - 1
    log.append_as_follower(batch_at(log2_base, 3))
    assert [s.base_offset for s in log.segments] == [0, far, log2_base]
    assert [r.offset for r in decode(log.read(far + 2, 10**6).records)] == [
        log2_base,
        log2_base + 1,
        log2_base + 2,
    ]


def test_roll_starts_a_segment_at_the_log_end_and_flushes_the_old_one(
    log: Log, log_dir: Path
) -> None:
    assert log.roll() is log.segments[0]  # an empty active segment is kept
    append_records(log, 3)
    new = log.roll()
    assert new.base_offset == 3
    assert log.recovery_point == 3
    assert log.roll() is new
    assert log_files(log_dir) == [segment_file_name(0, ".log"), segment_file_name(3, ".log")]
    # The old segment's index is trimmed to its entries.
    assert os.path.getsize(log_dir / segment_file_name(0, ".index")) == 8 * (
        log.segments[0].index.entries
    )
    append_records(log, 2)
    assert offsets(log) == [0, 1, 2, 3, 4]


def test_truncate_before_a_first_segment_created_by_a_follower_gap(log: Log) -> None:
    log.append_as_follower(batch_at(5, 3))
    assert [s.base_offset for s in log.segments] == [5]
    log.truncate_to(2)
    assert log.log_end_offset == 2
    append_records(log, 1)
    assert offsets(log) == [2]


def test_a_follower_gap_replaces_an_empty_active_segment(log: Log, log_dir: Path) -> None:
    append_records(log, 3)
    log.roll()  # empty segment at 3
    log.append_as_follower(batch_at(20, 2))
    assert [s.base_offset for s in log.segments] == [0, 20]
    assert log_files(log_dir) == [segment_file_name(0, ".log"), segment_file_name(20, ".log")]
    assert not (log_dir / segment_file_name(3, ".index")).exists()


# --------------------------------------------------------------------------------------------
# Truncation


def five_batches(log: Log) -> None:
    for _ in range(5):
        append_records(log, 3)  # 0..2, 3..5, 6..8, 9..11, 12..14


def test_truncate_into_a_batch_removes_the_whole_batch(log: Log) -> None:
    five_batches(log)
    assert log.truncate_to(7)
    assert log.log_end_offset == 6
    assert offsets(log) == list(range(6))
    append_records(log, 2)
    assert offsets(log) == list(range(8))
    check_values(log)


def test_truncate_at_a_batch_boundary(log: Log) -> None:
    five_batches(log)
    assert log.truncate_to(9)
    assert log.log_end_offset == 9
    assert offsets(log) == list(range(9))
    assert [b.base_offset for b in disk_batches(log.dir)] == [0, 3, 6]


def test_truncate_into_a_gap_sets_the_log_end_to_the_target(log: Log) -> None:
    log.append_as_follower(batch_at(0, 5))
    log.append_as_follower(batch_at(10, 5))
    assert log.truncate_to(7)
    assert log.log_end_offset == 7
    assert offsets(log) == [0, 1, 2, 3, 4]
    assert log.read(7, 100).records == b""
    log.append_as_follower(batch_at(7, 2))
    assert offsets(log) == [0, 1, 2, 3, 4, 7, 8]


def test_truncate_into_the_gap_a_truncation_left_moves_the_log_end(log: Log) -> None:
    log.append_as_follower(batch_at(0, 5))
    log.append_as_follower(batch_at(10, 5))
    log.truncate_to(12)  # cuts batch 10..14 whole: the end is 10, the data ends at 4
    assert log.log_end_offset == 10
    assert log.truncate_to(7)
    assert log.log_end_offset == 7
    log.append_as_follower(batch_at(7, 2))
    assert offsets(log) == [0, 1, 2, 3, 4, 7, 8]


def test_truncate_into_a_gap_between_segments(log: Log, log_dir: Path) -> None:
    log.append_as_follower(batch_at(0, 5))
    log.roll()
    log.append_as_follower(batch_at(10, 5))
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.truncate_to(8)
    assert log.log_end_offset == 8
    assert log_files(log_dir) == [segment_file_name(0, ".log")]
    assert offsets(log) == [0, 1, 2, 3, 4]
    append_records(log, 1)
    assert offsets(log) == [0, 1, 2, 3, 4, 8]


def test_truncate_across_segments_deletes_the_later_ones(log: Log, log_dir: Path) -> None:
    fill_segments(log, 60)
    assert log.num_segments >= 3
    cut = log.segments[1].base_offset + 4
    log.truncate_to(cut)
    assert log.num_segments == 2
    assert log_files(log_dir) == [segment_file_name(s.base_offset, ".log") for s in log.segments]
    # two .log, two .index and two .timeindex files, and the leader epoch checkpoint
    assert len(os.listdir(log_dir)) == 7
    assert offsets(log) == list(range(log.log_end_offset))
    assert log.log_end_offset == cut - cut % 3  # batches of 3 from offset 0
    check_values(log)


def test_truncate_below_the_log_start_restarts_the_log_there(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_bytes=0)
    log = open_log(log_dir, clock, config)
    try:
        fill_segments(log, 60)
        log.delete_old_segments()
        start = log.log_start_offset
        assert start > 10
        assert log.truncate_to(5)
        assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (5, 5, 5)
        assert log_files(log_dir) == [segment_file_name(5, ".log")]
        append_records(log, 2)
        assert offsets(log) == [5, 6]
        check_values(log)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(4, 100)
    finally:
        log.close()


@pytest.mark.parametrize("target", [15, 16, 1000])
def test_truncate_at_or_past_the_log_end_does_nothing(log: Log, target: int) -> None:
    five_batches(log)
    size = log.size_in_bytes
    assert not log.truncate_to(target)
    assert (log.log_end_offset, log.size_in_bytes) == (15, size)


def test_truncate_to_a_negative_offset_is_refused(log: Log) -> None:
    five_batches(log)
    with pytest.raises(ValueError):
        log.truncate_to(-1)


def test_truncate_lowers_the_recovery_point(log: Log) -> None:
    five_batches(log)
    log.flush()
    assert log.recovery_point == 15
    log.truncate_to(9)
    assert log.recovery_point == 9


def test_truncate_removes_index_entries_past_the_cut(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=10**6, index_interval_bytes=0)
    log = open_log(log_dir, clock, config)
    try:
        for _ in range(20):
            append_records(log, 2)
        log.truncate_to(21)
        entries = index_entries(log)[0]
        assert entries and all(offset < 21 for offset, _ in entries)
        for offset in range(20):
            assert decode(log.read(offset, 1).records)[0].offset == offset - offset % 2
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# Flush


def test_flush_moves_the_recovery_point_to_the_log_end(log: Log) -> None:
    five_batches(log)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 15
    append_records(log, 2)
    assert log.recovery_point == 15
    log.flush(16)
    assert log.recovery_point == 16
    log.flush(10)  # never backwards
    assert log.recovery_point == 16
    log.flush()
    assert log.recovery_point == 17


# --------------------------------------------------------------------------------------------
# Retention


@pytest.mark.parametrize(("extra", "deleted"), [(0, 2), (1, 1)])
def test_retention_by_size_deletes_the_oldest_segments(
    log_dir: Path, clock: ManualClock, extra: int, deleted: int
) -> None:
    bases, _ = written_log(log_dir, clock)
    sizes = [(log_dir / segment_file_name(b, ".log")).stat().st_size for b in bases]
    assert len(sizes) >= 4
    # The excess over the limit is exactly the two oldest segments, or one byte less.
    limit = sum(sizes) - sizes[0] - sizes[1] + extra
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_bytes=limit)
    log = open_log(log_dir, clock, config)
    try:
        assert log.delete_old_segments() == deleted
        assert log.log_start_offset == bases[deleted]
        assert log_files(log_dir) == [segment_file_name(b, ".log") for b in bases[deleted:]]
        assert not any((log_dir / segment_file_name(b, ".index")).exists() for b in bases[:deleted])
        with pytest.raises(OffsetOutOfRangeError):
            log.read(bases[deleted] - 1, 100)
        assert offsets(log) == list(range(bases[deleted], log.log_end_offset))
        check_values(log)
        assert log.delete_old_segments() == 0
    finally:
        log.close()


def test_retention_by_size_never_deletes_the_active_segment(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_bytes=0)
    log = open_log(log_dir, clock, config)
    try:
        fill_segments(log, 60)
        active = log.segments[-1].base_offset
        assert log.delete_old_segments() >= 3
        assert [s.base_offset for s in log.segments] == [active]
        assert log.log_start_offset == active
        assert log.delete_old_segments() == 0
    finally:
        log.close()


def test_retention_by_age_deletes_segments_older_than_retention_ms(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_ms=10_000)
    log = open_log(log_dir, clock, config)
    try:
        for step in range(3):  # three segments whose newest batches are TS, TS+1000, TS+2000
            append_records(log, 2, ts=TS + 1000 * step)
            append_records(log, 2, ts=TS + 1000 * step - 50)
            log.roll()
        append_records(log, 1, ts=TS)  # the active segment, as old as the first
        bases = [s.base_offset for s in log.segments]
        clock.advance(10_000)
        assert log.delete_old_segments() == 0  # exactly retention_ms old: kept
        clock.advance(1)
        assert log.delete_old_segments() == 1
        assert log.log_start_offset == bases[1]
        clock.advance(1500)
        assert log.delete_old_segments() == 1
        assert log.log_start_offset == bases[2]
        clock.advance(10**6)
        assert log.delete_old_segments() == 1  # all expired, but never the active segment
        assert [s.base_offset for s in log.segments] == [bases[3]]
        assert log_files(log_dir) == [segment_file_name(bases[3], ".log")]
        assert offsets(log) == [bases[3]]
    finally:
        log.close()


def test_retention_ms_of_minus_one_keeps_everything(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_ms=-1)
    log = open_log(log_dir, clock, config)
    try:
        fill_segments(log, 60)
        clock.advance(10**12)
        assert log.delete_old_segments() == 0
        assert log.log_start_offset == 0
    finally:
        log.close()


def test_segments_without_timestamps_expire_by_their_file_time(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_ms=60_000)
    log = open_log(log_dir, clock, config)
    try:
        append_records(log, 2, ts=NO_TIMESTAMP)
        log.roll()
        append_records(log, 2, ts=NO_TIMESTAMP)
        first = log_dir / segment_file_name(0, ".log")
        os.utime(first, ns=(TS * 1_000_000, TS * 1_000_000))  # last modified at TS
        clock.advance(1000)  # before the fix, segments without timestamps expired at once
        assert log.delete_old_segments() == 0
        clock.advance(59_000)
        assert log.delete_old_segments() == 0  # exactly retention_ms after its last write
        clock.advance(1)
        assert log.delete_old_segments() == 1
        assert log.log_start_offset == 2
        assert not first.exists()
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# Closing and reopening


def test_a_closed_log_refuses_every_operation(log: Log) -> None:
    append_records(log, 2)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        append_records(log, 1)
    with pytest.raises(LogClosedError):
        log.append_as_follower(batch_at(2, 1))
    with pytest.raises(LogClosedError):
        log.read(0, 100)
    with pytest.raises(LogClosedError):
        log.truncate_to(1)
    with pytest.raises(LogClosedError):
        log.flush()
    with pytest.raises(LogClosedError):
        log.roll()
    with pytest.raises(LogClosedError):
        log.delete_old_segments()


def test_reopen_after_close_preserves_everything(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    fill_segments(log, 50)
    log.append_as_follower(batch_at(log.log_end_offset + 7, 2))
    records = read_all(log)
    bases = [s.base_offset for s in log.segments]
    entries = index_entries(log)
    end = log.log_end_offset
    log.flush()
    log.close()
    for recovery_point in (0, end):
        log = open_log(log_dir, clock, recovery_point=recovery_point)
        try:
            assert log.recovered_bytes_truncated == 0
            assert [s.base_offset for s in log.segments] == bases
            assert (log.log_start_offset, log.log_end_offset) == (0, end)
            assert read_all(log) == records
            assert index_entries(log) == entries
            assert log.recovery_point == recovery_point
        finally:
            log.close()
    log = open_log(log_dir, clock)
    try:
        append_records(log, 2)
        assert offsets(log)[-2:] == [end, end + 1]
    finally:
        log.close()


def test_reopen_after_retention_starts_at_the_first_segment(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=4096, index_interval_bytes=100, retention_bytes=4096)
    log = open_log(log_dir, clock, config)
    fill_segments(log, 60)
    log.delete_old_segments()
    start, end = log.log_start_offset, log.log_end_offset
    log.close()
    log = open_log(log_dir, clock, config)
    try:
        assert (log.log_start_offset, log.log_end_offset) == (start, end)
        assert offsets(log) == list(range(start, end))
    finally:
        log.close()


def flip_byte_in_last_record(directory: Path) -> int:
    """Damage the last batch of the last segment where only its CRC notices; return the size."""
    path = directory / log_files(directory)[-1]
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x40
    path.write_bytes(bytes(data))
    return len(data)


def test_a_clean_shutdown_skips_recovery(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    fill_segments(log, 10)
    log.flush()
    log.close()
    size = flip_byte_in_last_record(log_dir)
    log = open_log(log_dir, clock, clean_shutdown=True)
    try:
        assert log.recovered_bytes_truncated == 0
        assert log.log_end_offset == 30
        assert log.segments[-1].size == size  # the damage went unnoticed
        assert log.recovery_point == 30
    finally:
        log.close()
    # Without the clean-shutdown marker the same files are recovered.
    log = open_log(log_dir, clock)
    try:
        assert log.recovered_bytes_truncated > 0
        assert log.log_end_offset == 27
    finally:
        log.close()


def test_segments_before_the_recovery_point_are_not_reread(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    fill_segments(log, 60)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    log.flush()
    log.close()
    first = log_dir / segment_file_name(0, ".log")
    data = bytearray(first.read_bytes())
    data[-2] ^= 0x40  # the first segment's last batch
    first.write_bytes(bytes(data))
    log = open_log(log_dir, clock, recovery_point=bases[1])
    try:
        assert log.recovered_bytes_truncated == 0
        assert log.log_end_offset == end
    finally:
        log.close()
    log = open_log(log_dir, clock, recovery_point=0)
    try:
        assert log.recovered_bytes_truncated > 0
        assert [s.base_offset for s in log.segments] == [0]
        assert log.log_end_offset == bases[1] - 3
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# Recovery of damaged files


def written_log(log_dir: Path, clock: ManualClock, appends: int = 60) -> tuple[list[int], int]:
    """A flushed, closed log of `appends` batches of 3 records; its segment bases and end."""
    log = open_log(log_dir, clock)
    fill_segments(log, appends)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    log.flush()
    log.close()
    return bases, end


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(bytes(64), id="zeros"),
        pytest.param(bytes(range(256)) * 3, id="bytes"),
        pytest.param(b"\x00" * 8 + b"\x7f\xff\xff\xff", id="huge length"),
        pytest.param(batch_at(10**6, 2)[:-9], id="partial batch"),
        pytest.param(batch_at(3, 2), id="old offsets"),
    ],
)
def test_garbage_after_the_last_batch_is_truncated(
    log_dir: Path, clock: ManualClock, garbage: bytes
) -> None:
    bases, end = written_log(log_dir, clock)
    last = log_dir / segment_file_name(bases[-1], ".log")
    size = last.stat().st_size
    with last.open("ab") as file:
        file.write(garbage)
    log = open_log(log_dir, clock)
    try:
        assert log.recovered_bytes_truncated == len(garbage)
        assert last.stat().st_size == size
        assert log.log_end_offset == end
        assert offsets(log) == list(range(end))
        append_records(log, 2)
        assert offsets(log)[-3:] == [end - 1, end, end + 1]
        check_values(log)
    finally:
        log.close()
    assert len(disk_batches(log_dir)) == 61


def batch_spans(path: Path) -> list[tuple[int, int, int]]:
    """(position, size, base offset) of every batch in a segment file."""
    return [(b.position, b.size_in_bytes, b.base_offset) for b in iter_batches(path.read_bytes())]


def scribble(path: Path, rng: random.Random) -> tuple[int, int]:
    """Overwrite random bytes inside the CRC-covered part of one middle batch of `path`.

    Returns (position, base offset) of that batch: recovery must keep exactly the batches before
    it (the base offset and leader epoch are not covered by the CRC, so the garbage avoids them).
    """
    spans = batch_spans(path)
    position, size, base = spans[rng.randrange(1, len(spans) - 1)]
    start = position + ATTRIBUTES_AT + rng.randrange(0, size - ATTRIBUTES_AT - 8)
    length = rng.randrange(1, min(64, position + size - start) + 1)
    data = bytearray(path.read_bytes())
    original = bytes(data[start : start + length])
    garbage = original
    while garbage == original:
        garbage = rng.randbytes(length)
    data[start : start + length] = garbage
    path.write_bytes(bytes(data))
    return position, base


@pytest.mark.parametrize("seed", range(8))
def test_garbage_in_the_middle_of_the_active_segment_keeps_what_precedes_it(
    log_dir: Path, clock: ManualClock, seed: int
) -> None:
    bases, _ = written_log(log_dir, clock, appends=50)
    active = log_dir / segment_file_name(bases[-1], ".log")
    position, base = scribble(active, random.Random(seed))
    log = open_log(log_dir, clock)
    try:
        assert active.stat().st_size == position
        assert log.log_end_offset == base
        assert offsets(log) == list(range(base))
        check_values(log)
    finally:
        log.close()
    assert disk_batches(log_dir)[-1].next_offset == base


@pytest.mark.parametrize("seed", range(8))
def test_garbage_in_an_older_segment_removes_every_later_segment(
    log_dir: Path, clock: ManualClock, seed: int
) -> None:
    bases, _ = written_log(log_dir, clock, appends=80)
    assert len(bases) >= 4
    victim = log_dir / segment_file_name(bases[1], ".log")
    position, base = scribble(victim, random.Random(seed))
    log = open_log(log_dir, clock)
    try:
        assert log_files(log_dir) == [segment_file_name(b, ".log") for b in bases[:2]]
        assert victim.stat().st_size == position
        assert log.log_end_offset == base
        assert offsets(log) == list(range(base))
        assert [s.base_offset for s in log.segments] == bases[:2]
        append_records(log, 1)
        assert offsets(log)[-1] == base
    finally:
        log.close()
    assert sorted(os.listdir(log_dir)) == sorted(
        [
            segment_file_name(b, suffix)
            for b in bases[:2]
            for suffix in (".log", ".index", ".timeindex")
        ]
        + [LEADER_EPOCH_CHECKPOINT]
    )


def test_garbage_in_an_older_segment_without_its_index_removes_the_later_ones(
    log_dir: Path, clock: ManualClock
) -> None:
    bases, _ = written_log(log_dir, clock, appends=80)
    victim = log_dir / segment_file_name(bases[1], ".log")
    _, base = scribble(victim, random.Random(0))
    (log_dir / segment_file_name(bases[1], ".index")).unlink()
    log = open_log(log_dir, clock)
    try:
        assert log.log_end_offset == base
        assert log.recovered_bytes_truncated > 0
        assert [s.base_offset for s in log.segments] == bases[:2]
    finally:
        log.close()


def test_a_torn_last_batch_is_cut_back_to_the_batch_before(
    log_dir: Path, clock: ManualClock
) -> None:
    bases, end = written_log(log_dir, clock)
    last = log_dir / segment_file_name(bases[-1], ".log")
    spans = batch_spans(last)
    os.truncate(last, spans[-1][0] + spans[-1][1] - 1)
    log = open_log(log_dir, clock)
    try:
        assert log.recovered_bytes_truncated == spans[-1][1] - 1
        assert log.log_end_offset == end - 3
        assert offsets(log) == list(range(end - 3))
    finally:
        log.close()


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_a_deleted_index_is_rebuilt(
    log_dir: Path, clock: ManualClock, clean_shutdown: bool
) -> None:
    log = open_log(log_dir, clock)
    fill_segments(log, 60)
    entries = index_entries(log)
    records = read_all(log)
    log.flush()
    log.close()
    assert len(entries) >= 3 and all(entries)
    for name in os.listdir(log_dir):
        if name.endswith(".index"):
            (log_dir / name).unlink()
    log = open_log(log_dir, clock, recovery_point=10**9, clean_shutdown=clean_shutdown)
    try:
        assert index_entries(log) == entries
        assert read_all(log) == records
        for offset in range(0, log.log_end_offset, 5):
            assert decode(log.read(offset, 1).records)[0].offset == offset - offset % 3
    finally:
        log.close()
    assert all(
        (log_dir / segment_file_name(b, ".index")).stat().st_size == 8 * len(e)
        for b, e in zip([s.base_offset for s in log.segments], entries, strict=True)
    )


def test_a_corrupt_index_is_rebuilt(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    fill_segments(log, 60)
    entries = index_entries(log)
    log.flush()
    log.close()
    index = log_dir / segment_file_name(0, ".index")
    data = bytearray(index.read_bytes())
    data[0:8] = struct.pack(">ii", 10**6, 10**6)  # an entry above the next one
    index.write_bytes(bytes(data))
    log = open_log(log_dir, clock, clean_shutdown=True)
    try:
        assert index_entries(log) == entries
        assert offsets(log) == list(range(180))
    finally:
        log.close()


def test_an_index_without_its_log_is_deleted(log_dir: Path, clock: ManualClock) -> None:
    bases, end = written_log(log_dir, clock)
    orphan = log_dir / segment_file_name(end + 100, ".index")
    orphan.write_bytes(struct.pack(">ii", 1, 0))
    log = open_log(log_dir, clock)
    try:
        assert not orphan.exists()
        assert [s.base_offset for s in log.segments] == bases
        assert log.log_end_offset == end
    finally:
        log.close()


@pytest.mark.parametrize(
    "leftover",
    [
        "00000000000000000000.log.deleted",
        "00000000000000000000.index.deleted",
        "00000000000000000999.log.deleted",
        "00000000000000000000.log.cleaned",
        "00000000000000000000.index.cleaned",
        "00000000000000000000.index.swap",
    ],
)
def test_leftover_temporary_files_are_removed(
    log_dir: Path, clock: ManualClock, leftover: str
) -> None:
    bases, end = written_log(log_dir, clock)
    (log_dir / leftover).write_bytes(batch_at(0, 1))
    log = open_log(log_dir, clock)
    try:
        assert not (log_dir / leftover).exists()
        assert [s.base_offset for s in log.segments] == bases
        assert offsets(log) == list(range(end))
    finally:
        log.close()


def write_swap(log_dir: Path, base: int, kept: list[int]) -> None:
    """A cleaner's replacement for segment `base`: only the records at offsets `kept`."""
    data = b"".join(batch_at(offset, 1) for offset in kept)
    (log_dir / (segment_file_name(base, ".log") + ".swap")).write_bytes(data)


def test_a_swap_file_replaces_the_segment_it_was_cleaned_from(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    fill_segments(log, 3)
    log.flush()
    log.close()
    write_swap(log_dir, 0, [0, 4, 8])
    log = open_log(log_dir, clock)
    try:
        assert offsets(log) == [0, 4, 8]
        check_values(log)
        assert sorted(os.listdir(log_dir)) == [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            LEADER_EPOCH_CHECKPOINT,
        ]
    finally:
        log.close()


def test_a_swap_file_leaves_the_later_segments_alone(log_dir: Path, clock: ManualClock) -> None:
    bases, end = written_log(log_dir, clock)
    assert len(bases) >= 3
    write_swap(log_dir, 0, [0, bases[1] - 1])
    log = open_log(log_dir, clock)
    try:
        assert [s.base_offset for s in log.segments] == bases
        assert offsets(log) == [0, bases[1] - 1, *range(bases[1], end)]
    finally:
        log.close()


def test_a_log_filled_by_multi_batch_appends_reopens(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_bytes=10**6, index_interval_bytes=0, max_index_size=80)
    log = open_log(log_dir, clock, config)
    for offset in range(0, 60, 2):
        log.append_as_follower(batch_at(offset, 1) + batch_at(offset + 1, 1))
    assert log.num_segments > 1
    log.close()
    log = open_log(log_dir, clock, config)
    try:
        assert offsets(log) == list(range(60))
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# Names


@pytest.mark.parametrize(
    "name",
    [
        "foo.log",
        "123.log",
        "0000000000000000000x.log",
        "-0000000000000000001.log",
        "0000000000000000000\u00b2.log",  # a superscript two: str.isdigit, but not int()
        "\u0660" * 20 + ".log",  # Arabic-Indic zeros: int() reads them as 0
    ],
)
def test_a_log_file_with_a_bad_name_is_an_invalid_log_file(
    log_dir: Path, clock: ManualClock, name: str
) -> None:
    written_log(log_dir, clock, appends=2)
    (log_dir / name).write_bytes(b"")
    with pytest.raises(InvalidLogFileError):
        open_log(log_dir, clock)


@pytest.mark.parametrize(
    "name",
    [
        "events",
        "events-",
        "-0",
        "events-x",
        "events-1a",
        "events-+1",
        "events-\u00b2",
        "events-\u0663",
    ],
)
def test_a_directory_with_a_bad_name_is_an_invalid_log_directory(
    tmp_path: Path, clock: ManualClock, name: str
) -> None:
    with pytest.raises(InvalidLogDirectoryError):
        open_log(tmp_path / name, clock)


@pytest.mark.parametrize("name", ["my-topic-3", "a-0", "events-12"])
def test_a_topic_name_may_contain_dashes(tmp_path: Path, clock: ManualClock, name: str) -> None:
    log = open_log(tmp_path / name, clock)
    try:
        topic, partition = name.rsplit("-", 1)
        assert log.topic_partition == TopicPartition(topic=topic, partition=int(partition))
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# A seeded random walk against a model


def test_random_operations_agree_with_a_model(log_dir: Path, clock: ManualClock) -> None:
    """Appends (leader, follower with gaps), truncations, rolls, flushes and reopens, checked
    after every step against a model of which offsets hold which value."""
    rng = random.Random(1234)
    log = open_log(log_dir, clock)
    model: dict[int, bytes] = {}
    batches: list[tuple[int, int]] = []  # (base, last) of every batch, in order
    end = 0
    try:
        for step in range(400):
            op = rng.choice(["leader"] * 4 + ["follower"] * 3 + ["truncate", "roll", "reopen"])
            if op == "leader":
                count, size = rng.randint(1, 4), rng.randint(10, 200)
                append_records(log, count, size=size)
                batches.append((end, end + count - 1))
                model.update({o: value_of(o, size) for o in range(end, end + count)})
                end += count
            elif op == "follower":
                base = end + rng.choice([0, 0, 1, 5])
                count, size = rng.randint(1, 4), rng.randint(10, 200)
                log.append_as_follower(batch_at(base, count, size=size))
                batches.append((base, base + count - 1))
                model.update({o: value_of(o, size) for o in range(base, base + count)})
                end = base + count
            elif op == "truncate" and end:
                target = rng.randint(max(0, end - 20), end + 2)
                log.truncate_to(target)
                if target < end:
                    straddling = [b for b, last in batches if b < target <= last]
                    batches = [(b, last) for b, last in batches if last < target]
                    end = straddling[0] if straddling else target  # a batch goes whole
                    model = {o: v for o, v in model.items() if o < end}
            elif op == "roll":
                log.roll()
            elif op == "reopen":
                active_base = log.segments[-1].base_offset
                if rng.random() < 0.5:
                    log.flush()
                log.close()
                clean = rng.random() < 0.3
                log = open_log(
                    log_dir, clock, recovery_point=rng.randint(0, end), clean_shutdown=clean
                )
                # A log end set inside a gap by truncation is not stored: reopening puts the end
                # right after the last batch (or at the active segment's base when it is empty).
                end = max(batches[-1][1] + 1 if batches else 0, active_base)
                assert log.recovered_bytes_truncated == 0
            assert log.log_end_offset == end, (step, op)
            if step % 10 == 0 or op == "reopen":
                found = read_all(log)
                assert {r.offset: r.value for r in found} == model, (step, op)
                assert [(b.base_offset, b.last_offset) for b in disk_batches(log_dir)] == batches
    finally:
        log.close()


def test_replayed_old_records_do_not_roll_a_segment_per_append(
    log_dir: Path, clock: ManualClock
) -> None:
    # Kafka's segment.ms compares the incoming batch's timestamp with the segment's first
    # batch, so mirrored data two weeks old fills segments normally.
    two_weeks_ago = clock.now_ms() - 14 * 24 * 3600 * 1000
    log = open_log(log_dir, clock, LogConfig(segment_ms=60_000))
    for _ in range(50):
        append_records(log, 1, ts=two_weeks_ago)
    assert log.num_segments == 1
    append_records(log, 1, ts=two_weeks_ago + 60_000)  # a minute of data later: time to roll
    assert log.num_segments == 2
    log.close()


def test_a_negative_max_bytes_is_a_value_error(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    append_records(log, 3)
    with pytest.raises(ValueError, match="max_bytes"):
        log.read(0, -1)
    log.close()


def test_offset_metadata_locates_an_offset_and_clamps_at_the_log_end(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    for _ in range(40):  # several segments of 3-record batches
        append_records(log, 3)
    assert log.num_segments > 2
    second = log.segments[1]
    inside = second.base_offset + 4  # in the segment's second batch
    metadata = log.offset_metadata(inside)
    assert metadata.offset == inside
    assert metadata.segment_base_offset == second.base_offset
    assert metadata.position == second.find_batch(inside).position  # type: ignore[union-attr]
    assert metadata.position > 0
    assert log.offset_metadata(log.log_end_offset) == log.log_end_offset_metadata
    assert log.offset_metadata(10**9) == log.log_end_offset_metadata
    log.close()


@pytest.fixture
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


def test_recovery_and_flushes_are_logged(
    log_dir: Path, clock: ManualClock, events: EventLog
) -> None:
    log = open_log(log_dir, clock)  # a new log: nothing to recover, nothing logged
    assert events.named("log.recovered") == []
    fill_segments(log, 10)
    log.flush()
    (flushed,) = events.named("log.flush")
    assert flushed["log_end_offset"] == 30
    assert flushed["segments"] == len(log.segments)
    log.close()
    flip_byte_in_last_record(log_dir)

    log = open_log(log_dir, clock)  # no clean-shutdown marker: recovered, the tail cut
    try:
        (recovered,) = events.named("log.recovered")
        assert recovered["dir"] == str(log_dir)
        assert recovered["log_end_offset"] == log.log_end_offset == 27
        assert recovered["bytes_truncated"] == log.recovered_bytes_truncated > 0
        assert len(events.named("log.recovery_truncated")) == 1
    finally:
        log.close()
    open_log(log_dir, clock, clean_shutdown=True).close()  # a clean start recovers nothing
    assert len(events.named("log.recovered")) == 1
