"""LogSegment: one `.log` file of record batches and its sparse `.index`.

Appends and reads, the index built one entry per `index_interval_bytes`, truncation, recovery
of a damaged file (CRC, structure, offset order, torn tail) and reopening existing files.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest

from kafkactor.storage.errors import StorageError, UnsupportedCompressionError
from kafkactor.storage.record_batch import iter_batches
from kafkactor.storage.records import NO_TIMESTAMP, Record, StoredRecord, build_batch
from kafkactor.storage.segment import LogSegment, segment_file_name

BASE = 100
TS = 1_700_000_000_000
CREATED_MS = 5_000
ATTRIBUTES_AT = 21  # the CRC-32C covers the batch from its attributes to its end
CRC_AT = 17


def value_of(offset: int, size: int = 40) -> bytes:
    """A record value that names its offset, padded to `size` bytes."""
    return (b"value-%d-" % offset).ljust(size, b".")


def records_at(base_offset: int, count: int, *, size: int = 40, ts: int = TS) -> list[Record]:
    return [
        Record(b"key-%d" % (base_offset + i), value_of(base_offset + i, size), ts + i)
        for i in range(count)
    ]


def batch_at(base_offset: int, count: int = 3, *, size: int = 40, ts: int = TS) -> bytes:
    return build_batch(records_at(base_offset, count, size=size, ts=ts), base_offset)


def open_segment(
    directory: Path,
    base: int = BASE,
    *,
    interval: int = 100,
    max_index_size: int = 1024,
) -> LogSegment:
    return LogSegment(
        directory,
        base,
        index_interval_bytes=interval,
        max_index_size=max_index_size,
        created_ms=CREATED_MS,
    )


def append(segment: LogSegment, data: bytes) -> None:
    """Append `data` (one or more batches) as a Log does: with its largest offset and timestamp."""
    batches = list(iter_batches(data))
    segment.append(
        data,
        largest_offset=batches[-1].last_offset,
        max_timestamp=max(batch.max_timestamp for batch in batches),
    )


def decode(data: bytes) -> list[StoredRecord]:
    return [record for batch in iter_batches(data, deep=True) for record in batch.records()]


def expected_records(batches: list[bytes]) -> list[StoredRecord]:
    return decode(b"".join(batches))


def index_entries(segment: LogSegment) -> list[tuple[int, int]]:
    return [segment.index.entry(n) for n in range(segment.index.entries)]


def recrc(data: bytes) -> bytes:
    out = bytearray(data)
    struct.pack_into(">I", out, CRC_AT, crc32c.crc32c(bytes(out[ATTRIBUTES_AT:])))
    return bytes(out)


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[LogSegment]:
    seg = open_segment(tmp_path)
    yield seg
    seg.close()


def fill(segment: LogSegment, spec: list[tuple[int, int]]) -> list[bytes]:
    """Append one batch per (base offset, record count); return the batches' bytes."""
    batches = [batch_at(base, count) for base, count in spec]
    for data in batches:
        append(segment, data)
    return batches


# Offsets 100..102, 103..107, 108, 109..112: four batches of different sizes.
SPEC = [(100, 3), (103, 5), (108, 1), (109, 4)]


def positions(batches: list[bytes]) -> list[int]:
    result, position = [], 0
    for data in batches:
        result.append(position)
        position += len(data)
    return result


# --------------------------------------------------------------------------------------------
# Files and an empty segment


def test_files_are_named_by_the_20_digit_base_offset(tmp_path: Path) -> None:
    assert segment_file_name(1234, ".log") == "00000000000000001234.log"
    assert segment_file_name(0, ".index") == "00000000000000000000.index"
    assert segment_file_name(2**63 - 1, ".log") == "09223372036854775807.log"
    seg = open_segment(tmp_path, 1234)
    try:
        assert seg.log_path == tmp_path / "00000000000000001234.log"
        assert seg.index.path == tmp_path / "00000000000000001234.index"
        assert seg.log_path.exists() and seg.index.path.exists()
    finally:
        seg.close()


def test_a_new_segment_is_empty(segment: LogSegment) -> None:
    assert segment.size == 0
    assert segment.next_offset == BASE
    assert segment.max_timestamp == -1
    assert segment.rolling_timestamp() == CREATED_MS
    assert segment.headers() == []
    assert segment.find_batch(BASE) is None
    assert segment.read(BASE, 1000) is None
    assert not segment.index_existed


# --------------------------------------------------------------------------------------------
# Appends and reads


def test_appended_batches_read_back_record_for_record(segment: LogSegment) -> None:
    batches = fill(segment, SPEC)
    found = segment.read(BASE, 10**6)
    assert found is not None
    data, position = found
    assert position == 0
    assert data == b"".join(batches)
    assert decode(data) == expected_records(batches)
    assert [r.offset for r in decode(data)] == list(range(100, 113))
    assert segment.size == sum(map(len, batches))
    assert segment.next_offset == 113
    assert os.path.getsize(segment.log_path) == segment.size


def test_a_read_starts_at_the_batch_holding_the_offset(segment: LogSegment) -> None:
    batches = fill(segment, SPEC)
    starts = positions(batches)
    for n, (base, count) in enumerate(SPEC):
        for offset in range(base, base + count):
            found = segment.read(offset, 10**6)
            assert found is not None, offset
            data, position = found
            assert position == starts[n], offset
            assert data == b"".join(batches[n:]), offset
            header = segment.find_batch(offset)
            assert header is not None
            assert (header.position, header.base_offset, header.last_offset) == (
                starts[n],
                base,
                base + count - 1,
            )


def test_a_read_past_the_last_batch_finds_nothing(segment: LogSegment) -> None:
    fill(segment, SPEC)
    assert segment.read(113, 10**6) is None
    assert segment.read(10**9, 10**6) is None
    assert segment.find_batch(113) is None


def test_a_read_inside_a_gap_of_offsets_starts_at_the_next_batch(segment: LogSegment) -> None:
    batches = fill(segment, [(100, 3), (110, 3)])
    for offset in range(103, 110):
        found = segment.read(offset, 10**6)
        assert found == (batches[1], len(batches[0])), offset


def test_max_bytes_stops_at_whole_batches_but_returns_the_first_whole(
    segment: LogSegment,
) -> None:
    batches = fill(segment, SPEC)
    sizes = [len(b) for b in batches]
    # Smaller than the first batch: the first batch comes back whole anyway (KIP-74).
    assert segment.read(BASE, 1) == (batches[0], 0)
    assert segment.read(BASE, 0) == (batches[0], 0)
    # ... unless the caller does not want that.
    assert segment.read(BASE, sizes[0] - 1, min_one_batch=False) == (b"", 0)
    assert segment.read(BASE, sizes[0], min_one_batch=False) == (batches[0], 0)
    # Exactly two batches, and one byte short of them.
    assert segment.read(BASE, sizes[0] + sizes[1]) == (batches[0] + batches[1], 0)
    assert segment.read(BASE, sizes[0] + sizes[1] - 1) == (batches[0], 0)
    # From the second batch on, the first one returned is the second.
    assert segment.read(104, 1) == (batches[1], sizes[0])


def test_max_offset_leaves_out_every_batch_reaching_it(segment: LogSegment) -> None:
    batches = fill(segment, SPEC)  # 100..102, 103..107, 108, 109..112
    starts = positions(batches)
    assert segment.read(BASE, 10**6, max_offset=113) == (b"".join(batches), 0)
    assert segment.read(BASE, 10**6, max_offset=109) == (b"".join(batches[:3]), 0)
    # 103..107 straddles 105: left out, with everything after it.
    assert segment.read(BASE, 10**6, max_offset=105) == (batches[0], 0)
    assert segment.read(BASE, 10**6, max_offset=103) == (batches[0], 0)
    # The first batch itself reaches max_offset: nothing, even though it would be "min one".
    assert segment.read(BASE, 10**6, max_offset=102) == (b"", 0)
    assert segment.read(BASE, 10**6, max_offset=BASE) == (b"", 0)
    assert segment.read(104, 10**6, max_offset=107) == (b"", starts[1])


def test_max_timestamp_and_rolling_timestamp(segment: LogSegment) -> None:
    append(segment, batch_at(100, 2, ts=TS + 50))  # max timestamp TS + 51
    append(segment, batch_at(102, 2, ts=TS + 500))  # TS + 501
    append(segment, batch_at(104, 2, ts=TS))  # older than the others: TS + 1
    assert segment.max_timestamp == TS + 501
    assert segment.rolling_timestamp() == TS + 51  # the first batch's max timestamp


def test_rolling_timestamp_without_timestamps_is_the_creation_time(segment: LogSegment) -> None:
    append(segment, build_batch([Record(None, b"x", NO_TIMESTAMP)] * 2, BASE))
    assert segment.max_timestamp == NO_TIMESTAMP
    assert segment.rolling_timestamp() == CREATED_MS


def test_an_offset_beyond_the_32_bit_relative_range_is_refused(segment: LogSegment) -> None:
    fill(segment, [(100, 1)])
    size = segment.size
    too_far = batch_at(BASE + 2**31, 1)
    with pytest.raises(StorageError, match="does not fit"):
        append(segment, too_far)
    assert segment.size == size
    assert os.path.getsize(segment.log_path) == size
    # The last offset that still fits.
    append(segment, batch_at(BASE + 2**31 - 1, 1))
    assert segment.next_offset == BASE + 2**31


# --------------------------------------------------------------------------------------------
# The index


def expected_index(batches: list[bytes], interval: int) -> list[tuple[int, int]]:
    """Kafka's rule, one append per batch: an entry (last offset, start position) for an append
    that comes after more than `interval` bytes were written since the previous entry."""
    entries, since, position = [], 0, 0
    for data in batches:
        if since > interval:
            entries.append((list(iter_batches(data))[-1].last_offset, position))
            since = 0
        position += len(data)
        since += len(data)
    return entries


def test_one_index_entry_per_interval_bytes(segment: LogSegment) -> None:
    batches = fill(segment, [(100 + 3 * i, 1 + i % 3) for i in range(30)])
    entries = index_entries(segment)
    assert entries == expected_index(batches, interval=100)
    assert len(entries) >= 10
    for offset, position in entries:  # every entry points at the batch ending at its offset
        assert segment.header_at(position).last_offset == offset


def test_an_index_interval_of_zero_indexes_every_append_but_the_first(tmp_path: Path) -> None:
    seg = open_segment(tmp_path, interval=0)
    try:
        batches = fill(seg, [(100, 1), (101, 1), (102, 2), (104, 1)])
        starts = positions(batches)
        assert index_entries(seg) == [(101, starts[1]), (103, starts[2]), (104, starts[3])]
    finally:
        seg.close()


def test_a_multi_batch_append_is_indexed_at_its_start_with_its_largest_offset(
    tmp_path: Path,
) -> None:
    seg = open_segment(tmp_path, interval=0)
    try:
        first = batch_at(100, 2)
        pair = batch_at(102, 2) + batch_at(104, 3)
        append(seg, first)
        append(seg, pair)
        assert index_entries(seg) == [(106, len(first))]
        for offset in range(102, 104):
            header = seg.find_batch(offset)
            assert header is not None and header.position == len(first)
        header = seg.find_batch(105)
        assert header is not None and header.base_offset == 104
    finally:
        seg.close()


def test_trim_index_shrinks_the_file_to_its_entries(segment: LogSegment) -> None:
    fill(segment, [(100 + 3 * i, 3) for i in range(10)])
    assert os.path.getsize(segment.index.path) == 1024  # preallocated
    segment.trim_index()
    assert os.path.getsize(segment.index.path) == 8 * segment.index.entries


# --------------------------------------------------------------------------------------------
# Truncation


def test_truncate_into_a_batch_removes_the_batch_whole(segment: LogSegment) -> None:
    batches = fill(segment, [(100 + 4 * i, 4) for i in range(12)])  # 100..147
    starts = positions(batches)
    removed = segment.truncate_to(122)  # inside 120..123
    assert removed == sum(map(len, batches[5:]))
    assert segment.size == starts[5]
    assert os.path.getsize(segment.log_path) == starts[5]
    assert segment.next_offset == 120
    assert all(offset < 122 for offset, _ in index_entries(segment))
    found = segment.read(BASE, 10**6)
    assert found is not None
    assert decode(found[0]) == expected_records(batches[:5])
    # Appending continues where the data now ends.
    append(segment, batch_at(120, 2))
    assert segment.next_offset == 122
    found = segment.read(120, 10**6)
    assert found is not None and [r.offset for r in decode(found[0])] == [120, 121]


def test_truncate_at_a_batch_boundary(segment: LogSegment) -> None:
    batches = fill(segment, SPEC)
    assert segment.truncate_to(108) == len(batches[2]) + len(batches[3])
    assert segment.next_offset == 108
    assert segment.headers()[-1].last_offset == 107


def test_truncate_past_the_end_removes_nothing(segment: LogSegment) -> None:
    batches = fill(segment, SPEC)
    assert segment.truncate_to(113) == 0
    assert segment.truncate_to(10**6) == 0
    assert segment.size == sum(map(len, batches))
    assert segment.next_offset == 113


def test_truncate_to_the_base_empties_the_segment(segment: LogSegment) -> None:
    batches = fill(segment, SPEC)
    assert segment.truncate_to(BASE) == sum(map(len, batches))
    assert segment.size == 0
    assert segment.next_offset == BASE
    assert segment.index.entries == 0
    assert segment.max_timestamp == -1
    assert segment.rolling_timestamp() == CREATED_MS


def test_truncate_recomputes_the_max_timestamp(segment: LogSegment) -> None:
    append(segment, batch_at(100, 2, ts=TS))
    append(segment, batch_at(102, 2, ts=TS + 1000))
    assert segment.max_timestamp == TS + 1001
    segment.truncate_to(102)
    assert segment.max_timestamp == TS + 1


# --------------------------------------------------------------------------------------------
# Recovery


def reopened(seg: LogSegment, **kwargs: int) -> LogSegment:
    seg.close()
    return open_segment(seg.log_path.parent, seg.base_offset, **kwargs)


def test_recover_rebuilds_the_index_the_appends_built(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    batches = fill(seg, [(100 + 3 * i, 1 + i % 3) for i in range(30)])
    entries = index_entries(seg)
    seg.close()
    (tmp_path / segment_file_name(BASE, ".index")).unlink()
    seg = open_segment(tmp_path)
    try:
        assert not seg.index_existed
        assert seg.recover() == 0
        assert index_entries(seg) == entries
        assert seg.next_offset == 100 + 3 * 29 + 1 + 29 % 3
        assert seg.max_timestamp == max(b.max_timestamp for b in iter_batches(b"".join(batches)))
        found = seg.read(BASE, 10**6)
        assert found is not None and found[0] == b"".join(batches)
    finally:
        seg.close()


def damaged_tail_cases() -> dict[str, bytes]:
    whole = batch_at(113, 2)
    bad_crc = bytearray(whole)
    bad_crc[-1] ^= 0x01
    return {
        "zeros": bytes(100),
        "random": bytes((i * 73 + 11) % 256 for i in range(150)),
        "short prefix": whole[:7],
        "half a batch": whole[: len(whole) // 2],
        "all but one byte": whole[:-1],
        "bad crc": bytes(bad_crc),
        "bad magic": recrc(whole[:16] + b"\x01" + whole[17:]),
        "length below a header": struct.pack(">qi", 113, 10) + bytes(60),
        "offset going backwards": batch_at(110, 2),
        "offset below the segment base": batch_at(50, 2),
        "offset beyond the relative range": batch_at(BASE + 2**31, 1),
    }


@pytest.mark.parametrize("case", sorted(damaged_tail_cases()))
def test_recover_truncates_a_damaged_tail(tmp_path: Path, case: str) -> None:
    seg = open_segment(tmp_path)
    batches = fill(seg, SPEC)
    good = sum(map(len, batches))
    garbage = damaged_tail_cases()[case]
    if case == "offset below the segment base":
        # A batch below the segment's base is only wrong as the segment's first batch.
        seg.truncate_to(BASE)
        batches, good = [], 0
    with seg.log_path.open("ab") as file:
        file.write(garbage)
    seg = reopened(seg)
    try:
        assert seg.recover() == len(garbage)
        assert seg.size == good
        assert os.path.getsize(seg.log_path) == good
        assert seg.next_offset == (113 if batches else BASE)
        found = seg.read(BASE, 10**6)
        if batches:
            assert found is not None and found[0] == b"".join(batches)
        else:
            assert found is None
        assert seg.recover() == 0  # recovering again finds nothing more
    finally:
        seg.close()


@pytest.mark.parametrize("victim", range(4))
def test_recover_keeps_exactly_the_batches_before_a_corrupt_one(
    tmp_path: Path, victim: int
) -> None:
    seg = open_segment(tmp_path, interval=0)
    batches = fill(seg, SPEC)
    starts = positions(batches)
    seg.close()
    with (tmp_path / segment_file_name(BASE, ".log")).open("r+b") as file:
        file.seek(starts[victim] + len(batches[victim]) - 3)  # a byte of the last record
        byte = file.read(1)
        file.seek(-1, os.SEEK_CUR)
        file.write(bytes([byte[0] ^ 0xFF]))
    seg = open_segment(tmp_path, interval=0)
    try:
        assert seg.recover() == sum(map(len, batches[victim:]))
        assert seg.size == starts[victim]
        assert seg.next_offset == (SPEC[victim][0])
        assert all(position < starts[victim] for _, position in index_entries(seg))
        if victim:
            found = seg.read(BASE, 10**6)
            assert found is not None and found[0] == b"".join(batches[:victim])
    finally:
        seg.close()


def test_recover_refuses_a_compressed_batch_rather_than_truncating_it(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    fill(seg, SPEC)
    compressed = bytearray(batch_at(113, 2))
    struct.pack_into(">h", compressed, ATTRIBUTES_AT, 5)  # a codec id Kafka does not define
    with seg.log_path.open("ab") as file:
        file.write(recrc(bytes(compressed)))
    seg = reopened(seg)
    try:
        size = seg.size
        with pytest.raises(UnsupportedCompressionError):
            seg.recover()
        assert os.path.getsize(seg.log_path) == size  # nothing was cut
    finally:
        seg.close()


def bad_framing(data: bytes) -> bytes:
    """`data` with its first record's length varint off by one and the CRC made valid again."""
    out = bytearray(data)
    out[61] += 2  # a zigzag varint: +2 is a length one larger
    return recrc(bytes(out))


def test_deep_recovery_also_checks_the_record_framing(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    batches = fill(seg, SPEC)
    crafted = bad_framing(batch_at(113, 2))
    with seg.log_path.open("ab") as file:
        file.write(crafted)
    seg = reopened(seg)
    try:
        assert seg.recover() == 0  # the CRC is valid: a shallow recovery keeps the batch
        assert seg.recover(deep=True) == len(crafted)
        assert seg.size == sum(map(len, batches))
    finally:
        seg.close()


def test_recovery_reads_large_files_across_chunks(tmp_path: Path) -> None:
    """Batches straddling recovery's read chunks (a few MiB), one larger than a chunk, and a
    damaged batch far into the file: recovery keeps exactly the batches before the damage."""
    seg = open_segment(tmp_path, max_index_size=8 * 4096)
    batches = [build_batch([Record(None, bytes(150_001), TS)], BASE)]
    batches.append(build_batch([Record(None, bytes(5 * 2**20), TS)], BASE + 1))
    while sum(map(len, batches)) < 11 * 2**20:
        batches.append(build_batch([Record(None, bytes(170_003), TS)], BASE + len(batches)))
    for data in batches:
        append(seg, data)
    entries = index_entries(seg)
    seg.close()
    (tmp_path / segment_file_name(BASE, ".index")).unlink()
    seg = open_segment(tmp_path, max_index_size=8 * 4096)
    try:
        assert seg.recover() == 0
        assert index_entries(seg) == entries  # positions in the file, not in a read chunk
    finally:
        seg.close()
    starts = positions(batches)
    victim = next(n for n, start in enumerate(starts) if start > 9 * 2**20)
    with (tmp_path / segment_file_name(BASE, ".log")).open("r+b") as file:
        file.seek(starts[victim] + len(batches[victim]) - 1)
        file.write(b"\x01")
    seg = open_segment(tmp_path, max_index_size=8 * 4096)
    try:
        assert seg.recover() == sum(map(len, batches[victim:]))
        assert seg.size == starts[victim]
        assert seg.next_offset == BASE + victim
        assert [h.position for h in seg.headers()] == starts[:victim]
    finally:
        seg.close()


def test_recover_after_truncation_keeps_the_index_consistent(segment: LogSegment) -> None:
    fill(segment, [(100 + 2 * i, 2) for i in range(40)])
    segment.truncate_to(151)
    entries = index_entries(segment)
    assert segment.recover() == 0
    assert index_entries(segment) == entries


# --------------------------------------------------------------------------------------------
# Reopening existing files


def test_a_reopened_segment_computes_its_state_from_the_files(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    append(seg, batch_at(100, 2, ts=TS + 7))
    append(seg, batch_at(102, 5, ts=TS + 900))
    append(seg, batch_at(107, 1, ts=TS))
    whole = seg.read(BASE, 10**6)
    entries = index_entries(seg)
    seg = reopened(seg)
    try:
        assert seg.index_existed
        assert seg.size == os.path.getsize(seg.log_path)
        assert seg.next_offset == 108
        assert seg.max_timestamp == TS + 904
        assert seg.rolling_timestamp() == TS + 8
        assert index_entries(seg) == entries
        assert seg.read(BASE, 10**6) == whole
        append(seg, batch_at(108, 1))
        assert seg.next_offset == 109
    finally:
        seg.close()


def write_torn_tail(tmp_path: Path, keep: int) -> tuple[LogSegment, list[bytes]]:
    """A reopened segment holding SPEC's batches and the first `keep` bytes of one more."""
    seg = open_segment(tmp_path)
    batches = fill(seg, SPEC)
    with seg.log_path.open("ab") as file:
        file.write(batch_at(113, 4)[:keep])
    return reopened(seg), batches


@pytest.mark.parametrize("keep", [20, 200])
def test_a_torn_tail_is_ignored_by_scans_before_recovery(tmp_path: Path, keep: int) -> None:
    seg, _ = write_torn_tail(tmp_path, keep)
    try:
        assert [h.base_offset for h in seg.headers()] == [100, 103, 108, 109]
        assert seg.next_offset == 113
        assert seg.max_timestamp == TS + 4
    finally:
        seg.close()


@pytest.mark.parametrize("keep", [20, 200])
def test_a_read_never_returns_a_torn_tail(tmp_path: Path, keep: int) -> None:
    seg, batches = write_torn_tail(tmp_path, keep)
    try:
        assert seg.read(109, 10**6) == (batches[3], sum(map(len, batches[:3])))
    finally:
        seg.close()


def test_close_is_idempotent_and_delete_removes_both_files(tmp_path: Path) -> None:
    seg = open_segment(tmp_path)
    fill(seg, SPEC)
    seg.close()
    seg.close()
    seg.delete()
    assert sorted(os.listdir(tmp_path)) == []
