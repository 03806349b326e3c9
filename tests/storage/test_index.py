"""OffsetIndex: Kafka's on-disk format, lookups, ordering rules, truncation, crash-left files."""

from __future__ import annotations

import bisect
import os
import pathlib
import pickle
import shutil
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.storage.errors import StorageError
from kafkactor.storage.index import (
    CorruptIndexError,
    IndexFullError,
    IndexOffsetError,
    IndexOffsetOverflowError,
    OffsetIndex,
)

BASE = 1000
ENTRY = struct.Struct(">ii")  # Kafka's entry layout, written out independently of the module


def raw_entries(*pairs: tuple[int, int]) -> bytes:
    """Index file bytes for (relative offset, position) pairs."""
    return b"".join(ENTRY.pack(rel, pos) for rel, pos in pairs)


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "00000000000000001000.index"


@pytest.fixture
def index(path: pathlib.Path) -> Iterator[OffsetIndex]:
    idx = OffsetIndex(path, BASE, max_index_size=80)  # room for 10 entries
    yield idx
    idx.close()


def fill(index: OffsetIndex, pairs: list[tuple[int, int]]) -> None:
    for offset, position in pairs:
        index.append(offset, position)


# Absolute offsets 1005, 1010, 1020, 1030 at positions 100, 250, 400, 900.
SAMPLE = [(1005, 100), (1010, 250), (1020, 400), (1030, 900)]


# --------------------------------------------------------------------------------------------
# Creation and file format


def test_new_index_is_preallocated_and_empty(path: pathlib.Path) -> None:
    idx = OffsetIndex(path, BASE, max_index_size=83)  # rounded down to 80
    assert os.path.getsize(path) == 80
    assert idx.max_entries == 10
    assert idx.entries == 0
    assert idx.size_in_bytes == 0
    assert not idx.is_full
    assert idx.last_offset == BASE
    idx.close()
    assert os.path.getsize(path) == 0


@pytest.mark.parametrize("size", [0, 7, -8])
def test_max_index_size_must_hold_one_entry(path: pathlib.Path, size: int) -> None:
    with pytest.raises(ValueError, match="max index size"):
        OffsetIndex(path, BASE, max_index_size=size)


def test_default_max_index_size_is_kafkas_10_mib(path: pathlib.Path) -> None:
    with OffsetIndex(path, BASE) as idx:
        assert idx.max_entries == 10 * 1024 * 1024 // 8
        assert os.path.getsize(path) == 10 * 1024 * 1024


def test_entries_are_written_in_kafkas_format(index: OffsetIndex, path: pathlib.Path) -> None:
    fill(index, SAMPLE)
    index.close()
    assert path.read_bytes() == raw_entries((5, 100), (10, 250), (20, 400), (30, 900))
    # Bytes spelled out: relative offset 5 then position 100, both 4-byte big-endian.
    assert path.read_bytes()[:8] == bytes([0, 0, 0, 5, 0, 0, 0, 100])


# --------------------------------------------------------------------------------------------
# Lookups


def test_lookup_on_an_empty_index_returns_the_segment_start(index: OffsetIndex) -> None:
    assert index.lookup(0) == (BASE, 0)
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 10**9) == (BASE, 0)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (0, (BASE, 0)),  # far before the base offset
        (BASE, (BASE, 0)),  # before the first entry
        (1004, (BASE, 0)),  # just before the first entry
        (1005, (1005, 100)),  # exactly the first entry
        (1009, (1005, 100)),  # between entries
        (1010, (1010, 250)),  # exactly a middle entry
        (1029, (1020, 400)),
        (1030, (1030, 900)),  # exactly the last entry
        (1031, (1030, 900)),  # after the last entry
        (BASE + 2**40, (1030, 900)),  # far beyond the relative-offset range
    ],
)
def test_lookup(index: OffsetIndex, target: int, expected: tuple[int, int]) -> None:
    fill(index, SAMPLE)
    assert index.lookup(target) == expected


def test_lookup_on_a_full_index(index: OffsetIndex) -> None:
    fill(index, [(BASE + 10 * i + 1, 100 * i) for i in range(10)])
    assert index.is_full
    assert index.lookup(BASE) == (BASE, 0)
    assert index.lookup(BASE + 1) == (BASE + 1, 0)
    assert index.lookup(BASE + 55) == (BASE + 51, 500)
    assert index.lookup(BASE + 91) == (BASE + 91, 900)
    assert index.lookup(BASE + 10_000) == (BASE + 91, 900)


def test_lookup_of_an_entry_at_the_base_offset(index: OffsetIndex) -> None:
    index.append(BASE, 0)
    assert index.entries == 1
    assert index.lookup(BASE - 1) == (BASE, 0)
    assert index.lookup(BASE) == (BASE, 0)


def test_entry_and_last_offset(index: OffsetIndex) -> None:
    fill(index, SAMPLE)
    assert [index.entry(n) for n in range(index.entries)] == SAMPLE
    assert index.last_offset == 1030
    assert index.size_in_bytes == 32
    for n in (-1, 4):
        with pytest.raises(IndexError, match="4 entries"):
            index.entry(n)


# --------------------------------------------------------------------------------------------
# Append rules


def test_offsets_must_strictly_increase(index: OffsetIndex) -> None:
    fill(index, SAMPLE)
    for offset in (1030, 1029, BASE):
        with pytest.raises(IndexOffsetError, match="not above the last offset 1030"):
            index.append(offset, 1000)
    assert index.entries == 4
    index.append(1031, 900)  # equal positions are allowed
    assert index.last_offset == 1031


def test_positions_must_not_decrease(index: OffsetIndex) -> None:
    fill(index, SAMPLE)
    with pytest.raises(IndexOffsetError, match="below the last entry's position 900"):
        index.append(1040, 899)
    assert index.entries == 4


def test_offset_below_the_base_offset(index: OffsetIndex) -> None:
    with pytest.raises(IndexOffsetError, match="below the base offset 1000"):
        index.append(BASE - 1, 0)


def test_relative_offset_must_fit_in_four_bytes(index: OffsetIndex) -> None:
    with pytest.raises(IndexOffsetOverflowError, match="does not fit in 4 bytes"):
        index.append(BASE + 2**31, 0)
    assert index.entries == 0
    index.append(BASE + 2**31 - 1, 0)  # the largest relative offset
    assert index.lookup(BASE + 2**31 + 5) == (BASE + 2**31 - 1, 0)
    assert issubclass(IndexOffsetOverflowError, IndexOffsetError)


@pytest.mark.parametrize("position", [-1, 2**31])
def test_position_must_fit_in_four_bytes(index: OffsetIndex, position: int) -> None:
    with pytest.raises(IndexOffsetError, match="positions must be in"):
        index.append(BASE + 1, position)
    assert index.entries == 0


def test_index_full(index: OffsetIndex, path: pathlib.Path) -> None:
    fill(index, [(BASE + i, i) for i in range(10)])
    assert index.is_full
    with pytest.raises(IndexFullError, match=r"full index .*10 of 10 entries"):
        index.append(BASE + 10, 10)
    assert index.entries == 10
    assert os.path.getsize(path) == 80  # the preallocated file was exactly big enough


def test_errors_are_storage_errors_and_pickle(path: pathlib.Path) -> None:
    for cls in (IndexFullError, IndexOffsetError, CorruptIndexError):
        assert issubclass(cls, StorageError)
    err = CorruptIndexError(path, "bad")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.reason, str(copy)) == (path, "bad", str(err))


# --------------------------------------------------------------------------------------------
# Truncation


@pytest.mark.parametrize(
    ("offset", "kept"),
    [
        (BASE, []),  # before the first entry: everything goes
        (1005, []),  # exactly the first entry
        (1006, SAMPLE[:1]),
        (1010, SAMPLE[:1]),  # exactly a middle entry: it goes too
        (1015, SAMPLE[:2]),  # between entries
        (1030, SAMPLE[:3]),
        (1031, SAMPLE),  # after the last entry: nothing goes
        (BASE + 10**6, SAMPLE),
    ],
)
def test_truncate_to(
    index: OffsetIndex, path: pathlib.Path, offset: int, kept: list[tuple[int, int]]
) -> None:
    fill(index, SAMPLE)
    index.truncate_to(offset)
    assert [index.entry(n) for n in range(index.entries)] == kept
    assert index.last_offset == (kept[-1][0] if kept else BASE)
    assert os.path.getsize(path) == 80  # the preallocation is kept
    index.append(1100, 5000)  # appends continue after the kept entries
    assert index.lookup(1100) == (1100, 5000)


def test_truncate_removes_everything(index: OffsetIndex) -> None:
    fill(index, SAMPLE)
    index.truncate()
    assert index.entries == 0
    assert index.lookup(1030) == (BASE, 0)
    index.append(1001, 0)
    assert index.entries == 1


def test_truncated_entries_do_not_come_back_after_a_crash(
    index: OffsetIndex, path: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    fill(index, SAMPLE)
    index.truncate_to(1010)
    crashed = tmp_path / "crashed.index"
    shutil.copyfile(path, crashed)  # the file as a crash right now would leave it
    with OffsetIndex(crashed, BASE, max_index_size=80) as reopened:
        assert reopened.entries == 1
        assert reopened.entry(0) == (1005, 100)
        reopened.sanity_check()


# --------------------------------------------------------------------------------------------
# File size management and reopening


def test_trim_shrinks_the_file_and_reopening_restores_the_entries(
    index: OffsetIndex, path: pathlib.Path
) -> None:
    fill(index, SAMPLE)
    index.trim_to_valid_size()
    assert os.path.getsize(path) == 32
    assert not index.is_full  # the capacity is the configured one, not the file length
    index.append(1040, 950)  # the file grows past the trimmed length
    index.close()
    assert os.path.getsize(path) == 40
    with OffsetIndex(path, BASE, max_index_size=80) as reopened:
        assert os.path.getsize(path) == 80  # preallocated again for appends
        assert [reopened.entry(n) for n in range(5)] == [*SAMPLE, (1040, 950)]
        assert reopened.entries == 5
        assert reopened.last_offset == 1040
        assert reopened.lookup(1035) == (1030, 900)
        reopened.sanity_check()
        reopened.append(1050, 1000)
    with OffsetIndex(path, BASE, max_index_size=80) as again:
        assert again.entries == 6


def test_reopening_keeps_entries_beyond_a_smaller_max_size(path: pathlib.Path) -> None:
    with OffsetIndex(path, BASE, max_index_size=80) as idx:
        fill(idx, SAMPLE)
    with OffsetIndex(path, BASE, max_index_size=16) as small:
        assert small.entries == 4
        assert small.is_full
        assert os.path.getsize(path) == 32  # never resized below its entries
        assert small.lookup(1030) == (1030, 900)


def test_reopening_a_trimmed_index_holding_only_the_base_entry(path: pathlib.Path) -> None:
    with OffsetIndex(path, BASE, max_index_size=80) as idx:
        idx.append(BASE, 0)
    assert path.read_bytes() == bytes(8)
    with OffsetIndex(path, BASE, max_index_size=80) as reopened:
        assert reopened.entries == 1
        assert reopened.entry(0) == (BASE, 0)


def test_reopening_a_crash_left_preallocated_file(
    index: OffsetIndex, path: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    fill(index, SAMPLE)
    crashed = tmp_path / "crashed.index"
    shutil.copyfile(path, crashed)  # untrimmed: 4 entries then 6 zero slots
    assert os.path.getsize(crashed) == 80
    with OffsetIndex(crashed, BASE, max_index_size=80) as reopened:
        assert reopened.entries == 4
        assert [reopened.entry(n) for n in range(4)] == SAMPLE
        reopened.sanity_check()
        reopened.append(1040, 1000)
        assert reopened.entries == 5


def test_crash_left_file_whose_last_entry_has_zero_bytes(
    index: OffsetIndex, path: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    # An entry ending in zero bytes (position 0) must not be mistaken for padding.
    index.append(BASE, 0)
    index.append(BASE + 256, 0)
    crashed = tmp_path / "crashed.index"
    shutil.copyfile(path, crashed)
    with OffsetIndex(crashed, BASE, max_index_size=80) as reopened:
        assert [reopened.entry(n) for n in range(reopened.entries)] == [(BASE, 0), (BASE + 256, 0)]


def test_crash_left_file_without_entries_loads_empty(
    index: OffsetIndex, path: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    crashed = tmp_path / "crashed.index"
    shutil.copyfile(path, crashed)  # 80 zero bytes
    with OffsetIndex(crashed, BASE, max_index_size=80) as reopened:
        assert reopened.entries == 0
        reopened.sanity_check()
        reopened.append(BASE, 0)  # so the segment can index its first batch again


def test_resize_keeps_entries(index: OffsetIndex, path: pathlib.Path) -> None:
    fill(index, SAMPLE)
    index.resize(203)
    assert os.path.getsize(path) == 200
    assert index.max_entries == 10
    index.resize(32)
    assert os.path.getsize(path) == 32
    with pytest.raises(ValueError, match="4 entries need 32"):
        index.resize(31)
    assert index.entries == 4
    assert os.path.getsize(path) == 32


def test_flush_fsyncs_the_index_file(
    index: OffsetIndex, path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[bytes] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.pread(fd, 16, 0))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    fill(index, SAMPLE[:2])
    index.flush()
    assert synced == [raw_entries((5, 100), (10, 250))]


def test_close_is_idempotent_and_lookups_survive_it(index: OffsetIndex) -> None:
    fill(index, SAMPLE)
    index.flush()
    index.close()
    index.close()
    assert index.closed
    assert index.lookup(1012) == (1010, 250)
    with pytest.raises(ValueError, match="closed"):
        index.append(1040, 1000)


def test_delete(index: OffsetIndex, path: pathlib.Path) -> None:
    fill(index, SAMPLE)
    index.delete()
    assert not path.exists()
    index.delete()  # a missing file is fine
    index.close()


def test_rename_to(index: OffsetIndex, path: pathlib.Path) -> None:
    fill(index, SAMPLE[:2])
    deleted = path.with_name(path.name + ".deleted")
    index.rename_to(deleted)
    assert index.path == deleted
    assert not path.exists()
    index.append(1020, 400)  # the open file followed the rename
    index.close()
    assert deleted.read_bytes() == raw_entries((5, 100), (10, 250), (20, 400))


# --------------------------------------------------------------------------------------------
# Corrupt files


@pytest.mark.parametrize(
    ("content", "loaded", "reason"),
    [
        (raw_entries((5, 100), (10, 250)) + b"\0\0\0", 2, "length 19 is not a multiple of 8"),
        (raw_entries((5, 100), (5, 250)), 1, "offset 1005, not above the previous"),
        (raw_entries((5, 100), (10, 250), (7, 300)), 2, "offset 1007, not above the previous"),
        (raw_entries((5, 100), (10, 50)), 1, "position 50, below the previous"),
        (raw_entries((-3, 100)), 0, "negative relative offset -3"),
        (raw_entries((5, -1)), 0, "negative position -1"),
        # a zero slot (which looks like padding) followed by more data
        (raw_entries((5, 100), (0, 0), (20, 400)), 1, "offset 1000, not above the previous"),
    ],
)
def test_corrupt_files_fail_the_sanity_check(
    path: pathlib.Path, content: bytes, loaded: int, reason: str
) -> None:
    path.write_bytes(content)
    with OffsetIndex(path, BASE, max_index_size=80) as idx:
        assert idx.entries == loaded  # the valid leading entries still answer lookups
        with pytest.raises(CorruptIndexError, match=reason) as raised:
            idx.sanity_check()
        assert str(path) in str(raised.value)
        assert raised.value.path == path
        assert path.read_bytes() == content  # a corrupt file is left as found
        assert idx.lookup(BASE + 5) == ((BASE + 5, 100) if loaded else (BASE, 0))
    # close() trims the file to the valid entries, as after any close


@pytest.mark.parametrize("keep_entries", [True, False])
def test_truncation_repairs_a_corrupt_file(path: pathlib.Path, keep_entries: bool) -> None:
    # The segment's recovery truncates the index and rebuilds it from the log.
    path.write_bytes(raw_entries((5, 100), (10, 250), (7, 300)) + b"\x01\x02\x03")
    with OffsetIndex(path, BASE, max_index_size=80) as idx:
        if keep_entries:
            idx.truncate_to(BASE + 10**6)  # removes nothing, but drops the garbage after
            assert idx.entries == 2
        else:
            idx.truncate()
            assert idx.entries == 0
        idx.sanity_check()
        assert os.path.getsize(path) == 80
        expected = raw_entries((5, 100), (10, 250)) if keep_entries else b""
        assert path.read_bytes() == expected.ljust(80, b"\0")
        idx.append(1040, 1000)
        crashed = path.with_suffix(".crashed")
        shutil.copyfile(path, crashed)
    with OffsetIndex(crashed, BASE, max_index_size=80) as reopened:
        reopened.sanity_check()
        assert reopened.entries == (3 if keep_entries else 1)
        assert reopened.last_offset == 1040


def test_sanity_check_sees_a_file_changed_under_the_index(
    index: OffsetIndex, path: pathlib.Path
) -> None:
    fill(index, SAMPLE)
    index.sanity_check()
    os.truncate(path, 30)
    with pytest.raises(CorruptIndexError, match="length 30 is not a multiple of 8"):
        index.sanity_check()
    os.truncate(path, 24)
    with pytest.raises(CorruptIndexError, match="shorter than its 4 entries"):
        index.sanity_check()


# --------------------------------------------------------------------------------------------
# Property: lookups agree with a plain reference


@settings(max_examples=200, deadline=None)
@given(
    base=st.integers(min_value=0, max_value=2**40),
    steps=st.lists(
        st.tuples(st.integers(min_value=1, max_value=2**20), st.integers(0, 10_000)),
        max_size=60,
    ),
    targets=st.lists(st.integers(min_value=-10, max_value=2**26), max_size=40),
    reopen=st.booleans(),
)
def test_lookup_matches_a_reference(
    tmp_path_factory: pytest.TempPathFactory,
    base: int,
    steps: list[tuple[int, int]],
    targets: list[int],
    reopen: bool,
) -> None:
    path = tmp_path_factory.mktemp("prop") / "x.index"
    offsets: list[int] = []
    positions: list[int] = []
    offset, position = base - 1, 0
    for offset_step, position_step in steps:
        offset += offset_step
        position += position_step
        offsets.append(offset)
        positions.append(position)
    idx = OffsetIndex(path, base, max_index_size=8 * 64)
    fill(idx, list(zip(offsets, positions, strict=True)))
    if reopen:
        shutil.copyfile(path, path.with_suffix(".copy"))  # untrimmed, as a crash leaves it
        idx.close()
        idx = OffsetIndex(path.with_suffix(".copy"), base, max_index_size=8 * 64)
        idx.sanity_check()
    if reopen and list(zip(offsets, positions, strict=True)) == [(base, 0)]:
        # A lone (base, 0) entry in preallocated zeros reads back as no entry (same lookups).
        assert idx.entries == 0
    else:
        assert idx.entries == len(offsets)
    probes = [base + t for t in targets] + offsets + [o - 1 for o in offsets]
    for target in probes:
        slot = bisect.bisect_right(offsets, target) - 1
        expected = (offsets[slot], positions[slot]) if slot >= 0 else (base, 0)
        assert idx.lookup(target) == expected
    idx.close()
