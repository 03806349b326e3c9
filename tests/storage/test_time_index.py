"""The time index (`.timeindex`, Kafka 0.10.1, KIP-33) and finding an offset by timestamp.

TimeIndex on its own (Kafka's file format, the append rule, lookups, truncation, what a crash
leaves, corrupt files), then through a segment and a log: ListOffsets by timestamp across
segments, truncation, a lost or damaged `.timeindex` rebuilt on open, and retention by time and
`segment.ms` after a restart. Every expected answer is checked against a brute-force scan of
the records read back from the log. Time moves only through a ManualClock.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import shutil
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.build_info import compiled_modules
from kafkactor.storage.config import LogConfig
from kafkactor.storage.index import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetError,
    IndexOffsetOverflowError,
)
from kafkactor.storage.log import Log
from kafkactor.storage.record_batch import iter_batches
from kafkactor.storage.records import (
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    Record,
    StoredRecord,
    build_batch,
)
from kafkactor.storage.segment import LogSegment, segment_file_name
from kafkactor.storage.time_index import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
    TimeIndex,
    TimestampOffset,
)
from kafkactor.timer import ManualClock

BASE = 1000
TS = 1_700_000_000_000
ENTRY = struct.Struct(">qi")  # Kafka's entry layout, written out independently of the module


def raw_entries(*pairs: tuple[int, int]) -> bytes:
    """Time index file bytes for (timestamp, relative offset) pairs."""
    return b"".join(ENTRY.pack(ts, rel) for ts, rel in pairs)


def entries_of(index: TimeIndex) -> list[TimestampOffset]:
    return [index.entry(n) for n in range(index.entries)]


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "00000000000000001000.timeindex"


@pytest.fixture
def index(path: pathlib.Path) -> Iterator[TimeIndex]:
    idx = TimeIndex(path, BASE, max_index_size=120)  # room for 10 entries, 9 before a roll
    yield idx
    idx.close()


# Timestamps 100, 200, 300, 400 at absolute offsets 1005, 1010, 1010, 1030.
SAMPLE = [(100, 1005), (200, 1010), (300, 1010), (400, 1030)]


def fill(index: TimeIndex, pairs: Sequence[tuple[int, int]]) -> None:
    for timestamp, offset in pairs:
        assert index.maybe_append(timestamp, offset)


# --------------------------------------------------------------------------------------------
# TimeIndex: creation and file format


def test_a_new_time_index_is_preallocated_and_empty(path: pathlib.Path) -> None:
    idx = TimeIndex(path, BASE, max_index_size=125)  # rounded down to 120
    assert os.path.getsize(path) == 120
    assert idx.max_entries == 10
    assert (idx.entries, idx.size_in_bytes) == (0, 0)
    assert not idx.is_full
    assert idx.last_entry == TimestampOffset(NO_TIMESTAMP, BASE)
    assert idx.lookup(TS) == (NO_TIMESTAMP, BASE)
    idx.close()
    assert os.path.getsize(path) == 0


def test_entries_are_written_in_kafkas_format(index: TimeIndex, path: pathlib.Path) -> None:
    fill(index, SAMPLE)
    index.close()
    assert path.read_bytes() == raw_entries((100, 5), (200, 10), (300, 10), (400, 30))
    # Bytes spelled out: timestamp 100 as 8 bytes, then relative offset 5 as 4, big-endian.
    assert path.read_bytes()[:12] == bytes([0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 5])


# --------------------------------------------------------------------------------------------
# TimeIndex: the append rule


def test_only_a_larger_timestamp_is_appended(index: TimeIndex) -> None:
    assert not index.maybe_append(NO_TIMESTAMP, BASE)  # no timestamp: nothing to index
    assert index.maybe_append(100, 1005)
    assert not index.maybe_append(100, 1005)  # the same entry again (a second roll or close)
    assert not index.maybe_append(100, 1009)  # an equal timestamp at a later offset
    assert index.maybe_append(101, 1009)
    assert index.maybe_append(150, 1009)  # a larger timestamp at the same offset: Kafka's rule
    assert entries_of(index) == [(100, 1005), (101, 1009), (150, 1009)]


def test_entries_that_break_the_rules_are_refused(index: TimeIndex) -> None:
    fill(index, SAMPLE)
    with pytest.raises(IndexOffsetError, match="below the last entry's timestamp 400"):
        index.maybe_append(399, 1040)
    with pytest.raises(IndexOffsetError, match="below the last offset 1030"):
        index.maybe_append(500, 1029)
    assert index.entries == 4
    with TimeIndex(path_next(index), BASE, 120) as other:
        with pytest.raises(IndexOffsetError, match="below the base offset"):
            other.maybe_append(100, BASE - 1)
        with pytest.raises(IndexOffsetOverflowError, match="does not fit in 4 bytes"):
            other.maybe_append(100, BASE + 2**31)


def path_next(index: TimeIndex) -> pathlib.Path:
    return index.path.with_name("00000000000000001000.other.timeindex")


def test_the_last_slot_is_kept_for_the_roll_entry(index: TimeIndex) -> None:
    fill(index, [(100 + i, BASE + i) for i in range(9)])
    assert index.is_full  # 9 of 10: the last slot is the roll's
    with pytest.raises(IndexFullError, match="9 of 10 entries"):
        index.maybe_append(500, BASE + 20)
    assert index.maybe_append(500, BASE + 20, skip_full_check=True)
    assert index.last_entry == (500, BASE + 20)
    assert index.entries == 10


def test_a_time_index_with_room_for_no_entry_still_takes_roll_entries(
    path: pathlib.Path,
) -> None:
    # segment.index.bytes may be as small as one 8-byte offset index entry
    with TimeIndex(path, BASE, max_index_size=8) as idx:
        assert (idx.max_entries, idx.is_full) == (0, True)
        assert idx.maybe_append(100, BASE, skip_full_check=True)
        assert idx.maybe_append(200, BASE + 3, skip_full_check=True)
    with TimeIndex(path, BASE, max_index_size=8) as again:
        again.sanity_check()
        assert entries_of(again) == [(100, BASE), (200, BASE + 3)]
    with pytest.raises(ValueError, match="max index size"):
        TimeIndex(path, BASE, max_index_size=-12)


# --------------------------------------------------------------------------------------------
# TimeIndex: lookups


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (NO_TIMESTAMP, (NO_TIMESTAMP, BASE)),
        (99, (NO_TIMESTAMP, BASE)),  # before the first entry: the segment's start
        (100, (100, 1005)),  # exactly the first entry
        (199, (100, 1005)),  # between entries: the largest timestamp <= the target
        (300, (300, 1010)),
        (399, (300, 1010)),
        (400, (400, 1030)),  # exactly the last
        (2**62, (400, 1030)),  # beyond every entry
    ],
)
def test_lookup_answers_the_largest_timestamp_at_or_below_the_target(
    index: TimeIndex, target: int, expected: tuple[int, int]
) -> None:
    fill(index, SAMPLE)
    assert index.lookup(target) == expected


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3)), max_size=30),
    targets=st.lists(st.integers(-2, 1600), max_size=20),
)
def test_lookup_matches_a_scan_of_the_entries(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[int, int]],
    targets: list[int],
) -> None:
    path = tmp_path_factory.mktemp("prop") / "00000000000000001000.timeindex"
    with TimeIndex(path, BASE, max_index_size=12 * 64) as idx:
        timestamp, offset = NO_TIMESTAMP, BASE
        for rise, advance in steps:  # timestamps that sometimes stay put, offsets that grow
            timestamp, offset = timestamp + rise, offset + advance
            idx.maybe_append(timestamp, offset)
        entries = entries_of(idx)
        assert all(a.timestamp < b.timestamp for a, b in itertools.pairwise(entries))
        for target in targets:
            below = [e for e in entries if e.timestamp <= target]
            assert idx.lookup(target) == (below[-1] if below else (NO_TIMESTAMP, BASE))


# --------------------------------------------------------------------------------------------
# TimeIndex: truncation and reopening


@pytest.mark.parametrize(
    ("offset", "kept"),
    [(BASE, 0), (1005, 0), (1006, 1), (1010, 1), (1011, 3), (1030, 3), (1031, 4)],
)
def test_truncate_to_removes_entries_at_or_past_the_offset(
    index: TimeIndex, path: pathlib.Path, offset: int, kept: int
) -> None:
    fill(index, SAMPLE)
    index.truncate_to(offset)
    assert entries_of(index) == [TimestampOffset(ts, o) for ts, o in SAMPLE[:kept]]
    assert os.path.getsize(path) == 120  # removed slots are zeroed in place
    assert path.read_bytes() == raw_entries(*((ts, o - BASE) for ts, o in SAMPLE[:kept])).ljust(
        120, b"\0"
    )
    crashed = path.with_name("crashed.timeindex")
    shutil.copyfile(path, crashed)  # what a crash before the next trim leaves
    with TimeIndex(crashed, BASE, 120) as reopened:
        reopened.sanity_check()
        assert entries_of(reopened) == entries_of(index)


def test_truncate_removes_everything_and_appends_start_over(index: TimeIndex) -> None:
    fill(index, SAMPLE)
    index.truncate()
    assert index.last_entry == (NO_TIMESTAMP, BASE)
    assert index.maybe_append(50, BASE)  # a lower timestamp than before is fine now


def test_a_closed_index_reopens_with_its_entries(index: TimeIndex, path: pathlib.Path) -> None:
    fill(index, SAMPLE)
    index.close()
    assert os.path.getsize(path) == 48  # trimmed
    with TimeIndex(path, BASE, max_index_size=120) as reopened:
        reopened.sanity_check()
        assert os.path.getsize(path) == 120  # preallocated again for appends
        assert entries_of(reopened) == [TimestampOffset(ts, o) for ts, o in SAMPLE]
        assert reopened.maybe_append(500, 1040)


def test_every_bit_of_a_timestamp_is_read_back(path: pathlib.Path) -> None:
    # low halves with the top bit set, high halves of every size, offsets up to 2**31 - 1
    timestamps = [2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40 + 2**31 + 7, TS, 2**63 - 1]
    relative = [0, 1, 2**16, 2**31 - 3, 2**31 - 2, 2**31 - 2, 2**31 - 1]
    path.write_bytes(raw_entries(*zip(timestamps, relative, strict=True)))
    with TimeIndex(path, BASE, max_index_size=120) as idx:
        idx.sanity_check()
        assert entries_of(idx) == [
            TimestampOffset(ts, BASE + rel) for ts, rel in zip(timestamps, relative, strict=True)
        ]
        assert idx.lookup(2**32 - 2) == (2**31, BASE + 1)


def test_a_single_zero_entry_survives_a_trim(path: pathlib.Path) -> None:
    with TimeIndex(path, BASE, 120) as idx:
        assert idx.maybe_append(0, BASE)  # timestamp 0 at the base offset: twelve zero bytes
    with TimeIndex(path, BASE, 120) as reopened:
        assert entries_of(reopened) == [(0, BASE)]


# --------------------------------------------------------------------------------------------
# TimeIndex: corrupt files


@pytest.mark.parametrize(
    ("content", "loaded", "reason"),
    [
        (raw_entries((100, 5), (200, 10)) + b"\1\2\3", 2, "length 27 is not a multiple of 12"),
        (raw_entries((100, 5), (100, 10)), 1, "timestamp 100, not above the previous"),
        (raw_entries((100, 5), (300, 10), (200, 20)), 2, "timestamp 200, not above"),
        (raw_entries((100, 5), (200, 4)), 1, "offset 1004, below the previous entry's offset"),
        (raw_entries((-5, 5)), 0, "negative timestamp -5"),
        (raw_entries((100, -1)), 0, "negative relative offset -1"),
        # a zero slot (which looks like padding) followed by more data
        (raw_entries((100, 5), (0, 0), (300, 20)), 1, "offset 1000, below the previous"),
    ],
)
def test_corrupt_files_fail_the_sanity_check(
    path: pathlib.Path, content: bytes, loaded: int, reason: str
) -> None:
    path.write_bytes(content)
    with TimeIndex(path, BASE, max_index_size=120) as idx:
        assert idx.entries == loaded  # the valid leading entries still answer lookups
        with pytest.raises(CorruptIndexError, match=reason) as raised:
            idx.sanity_check()
        assert raised.value.path == path
        assert path.read_bytes() == content  # left as found
        idx.truncate()  # what a rebuild starts with: the file is sound again
        idx.sanity_check()
        assert path.read_bytes() == bytes(120)


def test_sanity_check_sees_a_file_changed_under_the_index(
    index: TimeIndex, path: pathlib.Path
) -> None:
    fill(index, SAMPLE)
    index.sanity_check()
    os.truncate(path, 40)
    with pytest.raises(CorruptIndexError, match="length 40 is not a multiple of 12"):
        index.sanity_check()


# --------------------------------------------------------------------------------------------
# A segment's time index


def open_segment(directory: Path, base: int = 0, *, interval: int = 0) -> LogSegment:
    return LogSegment(
        directory, base, index_interval_bytes=interval, max_index_size=1200, created_ms=0
    )


def records(offset: int, timestamps: Sequence[int]) -> list[Record]:
    return [Record(b"k", b"value-%d" % (offset + i), ts) for i, ts in enumerate(timestamps)]


def batch(offset: int, timestamps: Sequence[int]) -> bytes:
    return build_batch(records(offset, timestamps), offset, 0)


def append(segment: LogSegment, data: bytes) -> None:
    batches = list(iter_batches(data))
    segment.append(
        data,
        largest_offset=batches[-1].last_offset,
        max_timestamp=max(b.max_timestamp for b in batches),
    )


def stored(segment: LogSegment) -> list[StoredRecord]:
    data = segment.read(segment.base_offset, 10**9)
    assert data is not None
    return [r for b in iter_batches(data[0]) for r in b.records()]


def first_at_or_after(
    found: Sequence[StoredRecord], timestamp: int, start: int = 0
) -> OffsetAndTimestamp | None:
    """The brute-force answer: the first record in offset order reaching `timestamp`."""
    for record in found:
        if record.offset >= start and record.timestamp_ms >= timestamp:
            return OffsetAndTimestamp(record.offset, record.timestamp_ms)
    return None


# Batches of record timestamps (offsets run on from 0), out of order within and across batches.
UNORDERED = [
    [TS + 50, TS + 10, TS + 30],
    [TS + 20, TS + 5],
    [TS + 80, TS + 60, TS + 90, TS + 70],
    [TS + 40],
    [TS + 90, TS + 100, TS + 95],
    [TS + 15, TS + 99],
]


def fill_segment(segment: LogSegment, timestamp_batches: Sequence[Sequence[int]]) -> None:
    offset = segment.next_offset
    for timestamps in timestamp_batches:
        append(segment, batch(offset, timestamps))
        offset += len(timestamps)


def test_appends_index_the_largest_timestamp_so_far_at_the_offset_index_cadence(
    tmp_path: Path,
) -> None:
    segment = open_segment(tmp_path)  # interval 0: an entry with every append but the first
    try:
        fill_segment(segment, UNORDERED)
        # Appends 2..6 offer (max so far, last offset of the batch holding it); only the
        # offers whose timestamp rises are written.
        assert entries_of(segment.time_index) == [
            (TS + 50, 2),  # append 2: the max is still the first batch's
            (TS + 90, 8),  # append 3
            (TS + 100, 12),  # append 5 (append 4 offered TS + 90 again)
        ]
        assert segment.index.entries == 5
        assert segment.max_timestamp == TS + 100
        assert segment.largest_timestamp_and_offset() == (TS + 100, 12)
    finally:
        segment.close()


def test_a_multi_batch_append_indexes_the_batch_holding_the_max(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    try:
        append(segment, batch(0, [TS]))
        # one append of three batches (a follower's): the middle one holds the max
        append(segment, batch(1, [TS + 1]) + batch(2, [TS + 9, TS + 3]) + batch(4, [TS + 2]))
        assert entries_of(segment.time_index) == [(TS + 9, 3)]
        assert segment.find_offset_by_timestamp(TS + 5) == (2, TS + 9)
        assert segment.find_offset_by_timestamp(TS + 2) == (2, TS + 9)  # offset 2 before 4
    finally:
        segment.close()


@pytest.mark.parametrize("interval", [0, 100, 10**6])
def test_find_offset_by_timestamp_in_a_segment_matches_a_scan(
    tmp_path: Path, interval: int
) -> None:
    segment = open_segment(tmp_path, interval=interval)
    try:
        fill_segment(segment, UNORDERED)
        found = stored(segment)
        for target in range(TS - 2, TS + 103):
            assert segment.find_offset_by_timestamp(target) == first_at_or_after(found, target)
            for start in (3, 9, 14):
                assert segment.find_offset_by_timestamp(target, start) == first_at_or_after(
                    found, target, start
                )
        assert segment.find_offset_by_timestamp(TS + 101) is None
        # the answer is a record, not its batch: offsets 5-8 hold TS + 80, 60, 90, 70
        assert segment.find_offset_by_timestamp(TS + 85) == (7, TS + 90)
        assert segment.find_offset_by_timestamp(TS + 100) == (11, TS + 100)
    finally:
        segment.close()


def test_a_log_append_time_batch_reports_its_append_time(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    try:
        append(segment, batch(0, [TS, TS + 1]))
        stamped = build_batch(
            records(2, [TS - 500, TS - 400]),
            2,
            0,
            timestamp_type=LOG_APPEND_TIME,
            log_append_time_ms=TS + 50,
        )
        append(segment, stamped)
        assert segment.find_offset_by_timestamp(TS + 2) == (2, TS + 50)
        assert segment.find_offset_by_timestamp(TS + 51) is None
    finally:
        segment.close()


def test_a_segment_reopened_without_recovery_takes_its_max_from_the_time_index(
    tmp_path: Path,
) -> None:
    segment = open_segment(tmp_path, interval=10**6)  # no entry from the appends
    fill_segment(segment, UNORDERED)
    assert segment.time_index.entries == 0
    segment.close()  # appends the segment's largest timestamp
    assert (tmp_path / segment_file_name(0, ".timeindex")).read_bytes() == raw_entries(
        (TS + 100, 12)
    )
    reopened = open_segment(tmp_path, interval=10**6)
    try:
        assert reopened.time_index_existed
        assert reopened.max_timestamp == TS + 100
        assert reopened.retention_timestamp() == TS + 100
        assert reopened.find_offset_by_timestamp(TS + 96) == (11, TS + 100)
    finally:
        reopened.close()


def test_recovery_rebuilds_the_time_index_ending_with_the_max(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    fill_segment(segment, UNORDERED)
    segment.close()
    expected = entries_of(segment.time_index)
    assert expected[-1] == (TS + 100, 12)
    (tmp_path / segment_file_name(0, ".timeindex")).write_bytes(b"garbage")
    reopened = open_segment(tmp_path)
    try:
        with pytest.raises(CorruptIndexError):
            reopened.time_index.sanity_check()
        assert reopened.recover() == 0
        reopened.time_index.sanity_check()
        assert entries_of(reopened.time_index) == expected
        assert reopened.max_timestamp == TS + 100
    finally:
        reopened.close()


def test_truncation_cuts_the_time_index_and_finds_the_new_max(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    try:
        fill_segment(segment, UNORDERED)
        segment.truncate_to(9)  # offsets 9.. go (the batch of TS + 40 and the later ones)
        assert entries_of(segment.time_index) == [(TS + 50, 2), (TS + 90, 8)]
        assert segment.largest_timestamp_and_offset() == (TS + 90, 8)
        segment.truncate_to(5)  # the batch holding TS + 90 goes too
        assert entries_of(segment.time_index) == [(TS + 50, 2)]
        assert segment.max_timestamp == TS + 50
        assert segment.find_offset_by_timestamp(TS + 60) is None
        append(segment, batch(5, [TS + 55]))
        assert segment.find_offset_by_timestamp(TS + 51) == (5, TS + 55)
        assert segment.max_timestamp == TS + 55
    finally:
        segment.close()


def test_delete_removes_the_time_index_too(tmp_path: Path) -> None:
    segment = open_segment(tmp_path)
    fill_segment(segment, UNORDERED[:2])
    segment.delete()
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------------
# A log: ListOffsets by timestamp


CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=60, retention_ms=-1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "events-0"


def open_log(
    log_dir: Path,
    clock: ManualClock,
    config: LogConfig = CONFIG,
    *,
    clean_shutdown: bool = False,
    recovery_point: int = 0,
) -> Log:
    return Log(log_dir, config, recovery_point, clock, clean_shutdown=clean_shutdown)


def read_all(log: Log) -> list[StoredRecord]:
    found: list[StoredRecord] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10**9).records
        batches = list(iter_batches(data))
        found.extend(r for b in batches for r in b.records())
        offset = batches[-1].next_offset
    return found


# Appends of record timestamps: they rise overall but go back within and across batches and
# across segments (a segment of 400 bytes holds about four of these batches).
TIMESTAMPS = [
    [TS + (37 * i) % 101 + 3 * i, TS + (53 * i) % 89 + 3 * i, TS + (71 * i) % 97 + 3 * i]
    for i in range(40)
]


def written(log: Log, timestamp_batches: Sequence[Sequence[int]] = TIMESTAMPS) -> None:
    for timestamps in timestamp_batches:
        log.append_as_leader(records(log.log_end_offset, timestamps), leader_epoch=0)


def check_every_target(log: Log) -> None:
    found = read_all(log)
    start = log.log_start_offset
    top = max(r.timestamp_ms for r in found)
    for target in range(min(r.timestamp_ms for r in found) - 2, top + 3):
        assert log.fetch_offset_by_timestamp(target) == first_at_or_after(found, target, start)
    assert log.fetch_offset_by_timestamp(top + 1) is None
    assert log.fetch_offset_by_timestamp(0) == (start, found[0].timestamp_ms)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (start, NO_TIMESTAMP)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (log.log_end_offset, NO_TIMESTAMP)


@pytest.fixture
def log(log_dir: Path, clock: ManualClock) -> Iterator[Log]:
    opened = open_log(log_dir, clock)
    written(opened)
    yield opened
    opened.close()


def test_offsets_by_timestamp_across_segments(log: Log) -> None:
    assert log.num_segments >= 5
    check_every_target(log)


def test_the_answer_unpacks_as_offset_then_timestamp(log: Log) -> None:
    found = log.fetch_offset_by_timestamp(TS)
    assert found is not None
    offset, timestamp = found
    assert (offset, timestamp) == (found.offset, found.timestamp)
    with pytest.raises(ValueError, match="invalid timestamp -3"):
        log.fetch_offset_by_timestamp(-3)


def test_an_empty_log_has_no_offset_for_a_timestamp(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    try:
        assert log.fetch_offset_by_timestamp(TS) is None
        assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (0, NO_TIMESTAMP)
        assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (0, NO_TIMESTAMP)
        log.append_as_leader(records(0, [NO_TIMESTAMP, NO_TIMESTAMP]), leader_epoch=0)
        assert log.fetch_offset_by_timestamp(0) is None  # no record carries a timestamp
        assert log.segments[0].time_index.entries == 0
    finally:
        log.close()


def test_offsets_by_timestamp_after_truncation(log: Log) -> None:
    cut = log.segments[2].base_offset + 2
    log.truncate_to(cut)
    assert log.log_end_offset <= cut
    check_every_target(log)
    written(log, [[TS + 1, TS + 500, TS - 7]])
    check_every_target(log)


def test_offsets_by_timestamp_skip_records_below_the_log_start(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=400, index_interval_bytes=60, retention_bytes=1500)
    log = open_log(log_dir, clock, config)
    try:
        written(log)
        assert log.delete_old_segments() > 0
        assert log.log_start_offset > 0
        check_every_target(log)
        log.truncate_fully_and_start_at(log.log_end_offset + 5)
        assert log.fetch_offset_by_timestamp(0) is None
        assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == (
            log.log_end_offset,
            NO_TIMESTAMP,
        )
    finally:
        log.close()


@pytest.mark.skipif(
    "kafkactor.storage.log" in compiled_modules(),
    reason="a compiled Log calls LogSegment's method natively: a patch of the class cannot see it",
)
def test_only_segments_reaching_the_target_are_searched(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    searched: list[int] = []
    original = LogSegment.find_offset_by_timestamp

    def spy(
        segment: LogSegment, timestamp: int, starting_offset: int = 0
    ) -> OffsetAndTimestamp | None:
        searched.append(segment.base_offset)
        return original(segment, timestamp, starting_offset)

    monkeypatch.setattr(LogSegment, "find_offset_by_timestamp", spy)
    segments = log.segments
    target = segments[3].max_timestamp
    reaching = [s.base_offset for s in segments if s.max_timestamp >= target]
    assert log.fetch_offset_by_timestamp(target) is not None
    assert searched == reaching[:1]
    assert log.fetch_offset_by_timestamp(max(s.max_timestamp for s in segments) + 1) is None
    assert searched == reaching[:1]  # no segment reaches it: none is read


# --------------------------------------------------------------------------------------------
# A log: restarts, crashes, a lost or damaged .timeindex


def time_index_files(log_dir: Path) -> dict[str, bytes]:
    return {
        name: (log_dir / name).read_bytes()
        for name in sorted(os.listdir(log_dir))
        if name.endswith(".timeindex")
    }


def all_time_entries(log: Log) -> list[list[TimestampOffset]]:
    return [entries_of(s.time_index) for s in log.segments]


def test_a_clean_restart_reuses_every_time_index(
    log: Log, log_dir: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    maxima = [s.max_timestamp for s in log.segments]
    log.flush()
    log.close()
    entries = all_time_entries(log)  # with the entry the close added to the active segment
    files = time_index_files(log_dir)
    assert len(files) == len(entries)
    # every closed segment's last entry is its largest timestamp
    assert [e[-1].timestamp for e in entries] == maxima
    recovered: list[int] = []
    original = LogSegment.recover

    def spy(segment: LogSegment, *, deep: bool = False) -> int:
        recovered.append(segment.base_offset)
        return original(segment, deep=deep)

    monkeypatch.setattr(LogSegment, "recover", spy)
    reopened = open_log(log_dir, clock, clean_shutdown=True)
    try:
        assert recovered == []  # nothing rebuilt
        assert all_time_entries(reopened) == entries
        assert [s.max_timestamp for s in reopened.segments] == maxima
        check_every_target(reopened)
    finally:
        reopened.close()
    assert time_index_files(log_dir) == files


@pytest.mark.parametrize("damage", ["delete", "garbage", "torn", "disorder"])
@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_a_lost_or_damaged_time_index_is_rebuilt_on_open(
    log: Log, log_dir: Path, clock: ManualClock, damage: str, clean_shutdown: bool
) -> None:
    log.flush()
    end = log.log_end_offset
    log.crash()
    entries = all_time_entries(log)
    for name in list(time_index_files(log_dir))[::2]:  # every other segment's
        path = log_dir / name
        if damage == "delete":
            path.unlink()
        elif damage == "garbage":
            path.write_bytes(bytes(range(1, 41)))
        elif damage == "torn":  # a length that is not a whole number of entries
            with path.open("ab") as file:
                file.write(b"\1\2\3")
        else:  # entries whose timestamps go backwards
            path.write_bytes(raw_entries((TS + 500, 0), (TS + 100, 1)))
    reopened = open_log(log_dir, clock, clean_shutdown=clean_shutdown, recovery_point=end)
    try:
        assert reopened.recovered_bytes_truncated == 0
        for segment in reopened.segments:
            segment.time_index.sanity_check()
        assert all_time_entries(reopened) == entries
        check_every_target(reopened)
    finally:
        reopened.close()


def test_a_power_loss_keeps_the_time_index_in_step(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    written(log, TIMESTAMPS[:20])
    log.flush()
    written(log, TIMESTAMPS[20:])  # each roll flushes the segment it closes
    point = log.recovery_point
    assert point < log.log_end_offset
    log.crash(lose_unflushed=True)  # the active segment is cut, its time index with it
    reopened = open_log(log_dir, clock, clean_shutdown=True)
    try:
        assert reopened.log_end_offset == point
        check_every_target(reopened)
    finally:
        reopened.close()


def test_retention_by_time_after_a_restart_uses_the_time_index(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(index_interval_bytes=10**6, retention_ms=10_000)
    log = open_log(log_dir, clock, config)
    # The first segment's largest timestamp is in its last append, which adds no entry: only
    # the roll writes it to the time index.
    written(log, [[TS], [TS + 1000], [TS + 5000, TS + 10]])
    log.roll()
    written(log, [[TS + 20_000]])
    log.flush()
    log.close()
    assert (log_dir / segment_file_name(0, ".timeindex")).read_bytes() == raw_entries(
        (TS + 5000, 3)
    )
    clock.set(TS + 15_000)  # exactly retention_ms after the first segment's largest timestamp
    reopened = open_log(log_dir, clock, config, clean_shutdown=True)
    try:
        assert reopened.segments[0].retention_timestamp() == TS + 5000
        assert reopened.delete_old_segments() == 0
        clock.advance(1)
        assert reopened.delete_old_segments() == 1
        assert reopened.log_start_offset == 4
        assert not (log_dir / segment_file_name(0, ".timeindex")).exists()
        assert reopened.fetch_offset_by_timestamp(TS) == (4, TS + 20_000)
    finally:
        reopened.close()


def test_segment_ms_rolls_after_a_restart(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(segment_ms=60_000, retention_ms=-1)
    log = open_log(log_dir, clock, config)
    written(log, [[TS + 100], [TS + 200]])
    log.close()
    clock.advance(10**6)  # the roll counts from the first batch's timestamp, not the clock
    reopened = open_log(log_dir, clock, config, clean_shutdown=True)
    try:
        written(reopened, [[TS + 60_099]])
        assert reopened.num_segments == 1
        written(reopened, [[TS + 60_100]])
        assert [s.base_offset for s in reopened.segments] == [0, 3]
        assert reopened.segments[0].max_timestamp == TS + 60_099
    finally:
        reopened.close()
    again = open_log(log_dir, clock, config, clean_shutdown=True)
    try:
        assert [s.max_timestamp for s in again.segments] == [TS + 60_099, TS + 60_100]
        assert again.fetch_offset_by_timestamp(TS + 60_100) == (3, TS + 60_100)
    finally:
        again.close()


def test_tiny_indexes_keep_working(log_dir: Path, clock: ManualClock) -> None:
    # segment.index.bytes of 20: one offset index entry per segment, no time index slot
    config = LogConfig(segment_bytes=10**6, index_interval_bytes=0, max_index_size=20)
    log = open_log(log_dir, clock, config)
    written(log, TIMESTAMPS[:12])
    assert log.num_segments > 2
    log.close()
    reopened = open_log(log_dir, clock, config)  # recovery, then the active index resized
    try:
        check_every_target(reopened)
        written(reopened, TIMESTAMPS[12:15])
        check_every_target(reopened)
    finally:
        reopened.close()


def test_leftover_time_index_files_are_removed_on_open(log: Log, log_dir: Path) -> None:
    log.close()
    orphan = log_dir / segment_file_name(10**6, ".timeindex")  # a time index without its log
    orphan.write_bytes(raw_entries((TS, 0)))
    swapped = log_dir / (segment_file_name(0, ".timeindex") + ".swap")  # of a cleaner's swap
    swapped.write_bytes(raw_entries((TS, 0)))
    deleted = log_dir / (segment_file_name(3, ".timeindex") + ".deleted")
    deleted.write_bytes(b"")
    reopened = open_log(log_dir, ManualClock(TS), clean_shutdown=True)
    try:
        assert not orphan.exists() and not swapped.exists() and not deleted.exists()
        check_every_target(reopened)
    finally:
        reopened.close()
