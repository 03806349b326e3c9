"""LeaderEpochCache and its checkpoint file: the behaviours of Kafka's LeaderEpochFileCache.

Assigning epochs, answering OffsetsForLeaderEpoch, truncating from either end, persisting to
`leader-epoch-checkpoint` and refusing a malformed file. Most tests use a cache backed by a real
checkpoint file and check that the file always says what the cache says.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.storage import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    CheckpointError,
    EpochEntry,
    LeaderEpochCache,
    LeaderEpochCheckpoint,
    StorageError,
)

E = EpochEntry
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "leader-epoch-checkpoint"


@pytest.fixture
def checkpoint(path: pathlib.Path) -> LeaderEpochCheckpoint:
    return LeaderEpochCheckpoint(path)


@pytest.fixture
def cache(checkpoint: LeaderEpochCheckpoint) -> LeaderEpochCache:
    return LeaderEpochCache(checkpoint)


def entries(cache: LeaderEpochCache) -> tuple[EpochEntry, ...]:
    """The cache's entries (a call, so a type checker does not carry them across changes)."""
    return cache.entries


def on_disk(path: pathlib.Path) -> list[EpochEntry]:
    return LeaderEpochCheckpoint(path).read()


def three_epochs(cache: LeaderEpochCache) -> None:
    """Epoch 2 wrote offsets 6-7, epoch 3 offsets 8-10, epoch 4 from offset 11 on."""
    for epoch, start in ((2, 6), (3, 8), (4, 11)):
        assert cache.assign(epoch, start)
    assert entries(cache) == (E(2, 6), E(3, 8), E(4, 11))


# --------------------------------------------------------------------------------------------
# assign


def test_an_empty_cache_has_no_epoch(cache: LeaderEpochCache, path: pathlib.Path) -> None:
    assert entries(cache) == ()
    assert cache.latest_epoch == UNDEFINED_EPOCH == -1
    assert cache.earliest_entry is None
    assert cache.latest_entry is None
    assert len(cache) == 0
    assert not path.exists()


def test_an_assigned_epoch_reads_back(cache: LeaderEpochCache, path: pathlib.Path) -> None:
    assert cache.assign(2, 10)
    assert entries(cache) == (E(2, 10),)
    assert cache.latest_epoch == 2
    assert cache.end_offset_for(2, 11) == (2, 11)
    assert on_disk(path) == [E(2, 10)]


def test_epochs_accumulate_as_leaders_change(cache: LeaderEpochCache, path: pathlib.Path) -> None:
    for epoch in range(1, 11):
        assert cache.assign(epoch, epoch * 10)
    assert cache.latest_epoch == 10
    assert cache.earliest_entry == E(1, 10)
    assert cache.latest_entry == E(10, 100)
    assert len(cache) == 10
    # each epoch ends where the next one starts; the latest at the log end
    for epoch in range(1, 10):
        assert cache.end_offset_for(epoch, 105) == (epoch, (epoch + 1) * 10)
    assert cache.end_offset_for(10, 105) == (10, 105)
    assert on_disk(path) == list(cache.entries)


def test_assigning_the_latest_epoch_again_changes_nothing(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    assert cache.assign(2, 6)
    path.unlink()
    assert not cache.assign(2, 6)  # the same entry: nothing to write
    assert not cache.assign(2, 7)  # a later offset of a known epoch: the start stays
    assert not cache.assign(2, 5)  # an earlier one too: an epoch is assigned once
    assert entries(cache) == (E(2, 6),)
    assert not path.exists(), "an assignment that changed nothing rewrote the checkpoint"


def test_assigning_an_older_epoch_changes_nothing(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    three_epochs(cache)
    before = path.read_bytes()
    assert not cache.assign(3, 20)  # known, not the latest
    assert not cache.assign(1, 20)  # older than any known: a stale leader
    assert not cache.assign(0, 0)
    assert entries(cache) == (E(2, 6), E(3, 8), E(4, 11))
    assert path.read_bytes() == before


def test_a_new_epoch_at_an_earlier_start_offset_replaces_the_entries_from_there(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    three_epochs(cache)
    assert cache.assign(5, 11)  # at the start of epoch 4: epoch 4 wrote nothing left
    assert entries(cache) == (E(2, 6), E(3, 8), E(5, 11))
    assert cache.assign(6, 9)  # inside epoch 3: epoch 5 starts past it and goes
    assert entries(cache) == (E(2, 6), E(3, 8), E(6, 9))
    assert cache.assign(7, 8)
    assert entries(cache) == (E(2, 6), E(7, 8))
    assert cache.assign(8, 0)  # below every entry: only the new one is left
    assert entries(cache) == (E(8, 0),)
    assert on_disk(path) == [E(8, 0)]


def test_a_new_epoch_past_the_latest_start_is_appended(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    assert cache.assign(9, 12)
    assert entries(cache) == (E(2, 6), E(3, 8), E(4, 11), E(9, 12))


@pytest.mark.parametrize(("epoch", "offset"), [(-1, 0), (0, -1), (-5, -5)])
def test_assigning_a_negative_epoch_or_offset_is_refused(
    cache: LeaderEpochCache, path: pathlib.Path, epoch: int, offset: int
) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        cache.assign(epoch, offset)
    assert entries(cache) == ()
    assert not path.exists()


@pytest.mark.parametrize(
    "entries",
    [
        [E(2, 6), E(2, 8)],
        [E(3, 6), E(2, 8)],
        [E(2, 8), E(3, 6)],
        [E(-1, 0)],
        [E(0, -1)],
    ],
)
def test_a_cache_refuses_entries_out_of_order(entries: list[EpochEntry]) -> None:
    with pytest.raises(ValueError, match=r"increase|decrease|>= 0"):
        LeaderEpochCache(None, entries)


def test_a_cache_without_a_checkpoint_lives_in_memory(tmp_path: pathlib.Path) -> None:
    cache = LeaderEpochCache()
    three_epochs(cache)
    cache.truncate_from_end(9)
    cache.clear()
    cache.flush()
    assert entries(cache) == ()
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------------------------
# end_offset_for (OffsetsForLeaderEpoch)


def test_an_empty_cache_answers_undefined_for_every_epoch(cache: LeaderEpochCache) -> None:
    assert cache.end_offset_for(UNDEFINED_EPOCH, 0) == UNDEFINED
    assert cache.end_offset_for(0, 0) == UNDEFINED
    assert cache.end_offset_for(7, 100) == UNDEFINED


def test_an_undefined_epoch_request_answers_undefined(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 20) == UNDEFINED


def test_the_latest_epoch_ends_at_the_log_end(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    assert cache.end_offset_for(4, 20) == (4, 20)
    assert cache.end_offset_for(4, 11) == (4, 11)
    assert cache.end_offset_for(4, 25) == (4, 25)  # the log end as given: it grows


def test_an_earlier_epoch_ends_where_the_next_one_starts(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    assert cache.end_offset_for(2, 20) == (2, 8)
    assert cache.end_offset_for(3, 20) == (3, 11)


def test_an_unknown_epoch_between_entries_answers_the_one_below_it(
    cache: LeaderEpochCache,
) -> None:
    for epoch, start in ((1, 0), (3, 10), (6, 20)):
        cache.assign(epoch, start)
    assert cache.end_offset_for(2, 30) == (1, 10)
    assert cache.end_offset_for(4, 30) == (3, 20)
    assert cache.end_offset_for(5, 30) == (3, 20)


def test_an_epoch_below_the_first_ends_where_the_first_starts(cache: LeaderEpochCache) -> None:
    cache.assign(5, 11)
    cache.assign(6, 12)
    assert cache.end_offset_for(4, 13) == (4, 11)
    assert cache.end_offset_for(0, 13) == (0, 11)


def test_an_epoch_above_the_latest_answers_undefined(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    assert cache.end_offset_for(5, 20) == UNDEFINED
    assert cache.end_offset_for(1000, 20) == UNDEFINED


# --------------------------------------------------------------------------------------------
# truncate_from_end (the log was truncated)


@pytest.mark.parametrize(
    ("end_offset", "kept"),
    [
        (12, [E(2, 6), E(3, 8), E(4, 11)]),  # past the latest start: every epoch keeps records
        (11, [E(2, 6), E(3, 8)]),  # at the latest start: epoch 4 has no record left
        (9, [E(2, 6), E(3, 8)]),  # between entries: epoch 3 keeps offset 8
        (8, [E(2, 6)]),  # at an entry's start
        (7, [E(2, 6)]),
        (6, []),  # at the first start: nothing is left
        (3, []),  # before every entry
        (0, []),
    ],
)
def test_truncate_from_end(
    cache: LeaderEpochCache, path: pathlib.Path, end_offset: int, kept: list[EpochEntry]
) -> None:
    three_epochs(cache)
    changed = cache.truncate_from_end(end_offset)
    assert entries(cache) == tuple(kept)
    assert changed == (len(kept) < 3)
    assert on_disk(path) == kept


def test_truncate_from_end_at_an_undefined_offset_changes_nothing(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    three_epochs(cache)
    path.unlink()
    assert not cache.truncate_from_end(UNDEFINED_EPOCH_OFFSET)
    assert entries(cache) == (E(2, 6), E(3, 8), E(4, 11))
    assert not path.exists()


def test_truncate_from_end_of_an_empty_cache_changes_nothing(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    assert not cache.truncate_from_end(5)
    assert not path.exists()


def test_the_latest_epoch_falls_back_after_truncation(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    cache.truncate_from_end(9)
    assert cache.latest_epoch == 3
    assert cache.end_offset_for(3, 9) == (3, 9)  # now the latest: it ends at the log end
    assert cache.end_offset_for(4, 9) == UNDEFINED
    assert cache.assign(4, 9)  # a leader of epoch 4 may write again from the new end
    assert entries(cache) == (E(2, 6), E(3, 8), E(4, 9))


# --------------------------------------------------------------------------------------------
# truncate_from_start (the log start moved up)


@pytest.mark.parametrize(
    ("start_offset", "kept"),
    [
        (3, [E(2, 6), E(3, 8), E(4, 11)]),  # before every entry
        (6, [E(2, 6), E(3, 8), E(4, 11)]),  # at the first start
        (7, [E(2, 7), E(3, 8), E(4, 11)]),  # inside the first epoch: it starts later
        (8, [E(3, 8), E(4, 11)]),  # at an entry's start: epoch 2 has no record left
        (9, [E(3, 9), E(4, 11)]),  # between entries
        (11, [E(4, 11)]),  # at the latest start
        (15, [E(4, 15)]),  # past it: the latest epoch is kept, from the new start
    ],
)
def test_truncate_from_start(
    cache: LeaderEpochCache, path: pathlib.Path, start_offset: int, kept: list[EpochEntry]
) -> None:
    three_epochs(cache)
    changed = cache.truncate_from_start(start_offset)
    assert entries(cache) == tuple(kept)
    assert changed == (kept != [E(2, 6), E(3, 8), E(4, 11)])
    assert on_disk(path) == kept


def test_truncate_from_start_at_an_undefined_offset_changes_nothing(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    three_epochs(cache)
    path.unlink()
    assert not cache.truncate_from_start(UNDEFINED_EPOCH_OFFSET)
    assert not cache.truncate_from_start(6)
    assert entries(cache) == (E(2, 6), E(3, 8), E(4, 11))
    assert not path.exists()


def test_truncate_from_start_of_an_empty_cache_changes_nothing(
    cache: LeaderEpochCache, path: pathlib.Path
) -> None:
    assert not cache.truncate_from_start(5)
    assert entries(cache) == ()
    assert not path.exists()


def test_answers_after_truncating_from_start(cache: LeaderEpochCache) -> None:
    three_epochs(cache)
    cache.truncate_from_start(9)
    assert cache.end_offset_for(2, 20) == (2, 9)  # below the first: ends where it starts
    assert cache.end_offset_for(3, 20) == (3, 11)


# --------------------------------------------------------------------------------------------
# clear


def test_clear_forgets_every_entry(cache: LeaderEpochCache, path: pathlib.Path) -> None:
    three_epochs(cache)
    assert cache.clear()
    assert entries(cache) == ()
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.end_offset_for(4, 20) == UNDEFINED
    assert path.read_text() == "0\n0\n"
    assert not cache.clear()
    assert cache.assign(1, 30)  # any epoch may start again
    assert on_disk(path) == [E(1, 30)]


# --------------------------------------------------------------------------------------------
# The checkpoint file


def test_the_checkpoint_is_kafkas_text(cache: LeaderEpochCache, path: pathlib.Path) -> None:
    three_epochs(cache)
    assert path.read_text() == "0\n3\n2 6\n3 8\n4 11\n"


def test_entries_persist_between_instances(cache: LeaderEpochCache, path: pathlib.Path) -> None:
    three_epochs(cache)
    cache.truncate_from_start(7)
    again = LeaderEpochCache(LeaderEpochCheckpoint(path), LeaderEpochCheckpoint(path).read())
    assert again.entries == (E(2, 7), E(3, 8), E(4, 11))
    assert again.end_offset_for(3, 20) == (3, 11)


def test_round_trip_of_no_entries(checkpoint: LeaderEpochCheckpoint, path: pathlib.Path) -> None:
    checkpoint.write([])
    assert path.read_text() == "0\n0\n"
    assert checkpoint.read() == []


def test_a_missing_file_reads_as_no_entries(checkpoint: LeaderEpochCheckpoint) -> None:
    assert checkpoint.read() == []


def test_reads_windows_line_ends_and_a_missing_final_line_end(
    checkpoint: LeaderEpochCheckpoint, path: pathlib.Path
) -> None:
    path.write_bytes(b"0\r\n2\r\n1 0\r\n4 17")
    assert checkpoint.read() == [E(1, 0), E(4, 17)]


def test_two_epochs_at_one_offset_are_read(
    checkpoint: LeaderEpochCheckpoint, path: pathlib.Path
) -> None:
    # Kafka 2.x's truncateFromStart can leave an epoch that wrote nothing in the file.
    path.write_text("0\n2\n1 5\n2 5\n")
    assert checkpoint.read() == [E(1, 5), E(2, 5)]


def test_the_largest_values_round_trip(checkpoint: LeaderEpochCheckpoint) -> None:
    checkpoint.write([E(0, 0), E(2**31 - 1, 2**63 - 1)])
    assert checkpoint.read() == [E(0, 0), E(2**31 - 1, 2**63 - 1)]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([E(-1, 0)], "invalid leader epoch -1"),
        ([E(2**31, 0)], "invalid leader epoch"),
        ([E(0, -1)], "invalid start offset -1"),
        ([E(0, 2**63)], "invalid start offset"),
        ([E(2, 0), E(1, 5)], "epochs must strictly increase"),
        ([E(1, 5), E(2, 4)], "start offsets must not decrease"),
    ],
)
def test_write_refuses_invalid_entries_before_touching_the_file(
    checkpoint: LeaderEpochCheckpoint,
    path: pathlib.Path,
    entries: list[EpochEntry],
    message: str,
) -> None:
    checkpoint.write([E(3, 7)])
    with pytest.raises(ValueError, match=message):
        checkpoint.write(entries)
    assert checkpoint.read() == [E(3, 7)]
    assert os.listdir(path.parent) == [path.name]


def test_a_write_leaves_no_temporary_file(
    cache: LeaderEpochCache, path: pathlib.Path, checkpoint: LeaderEpochCheckpoint
) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("0\n1\n9 9")  # what a write interrupted by a crash leaves
    assert checkpoint.read() == []  # ignored by a read
    three_epochs(cache)
    cache.truncate_from_end(9)
    assert os.listdir(path.parent) == [path.name]
    assert checkpoint.read() == [E(2, 6), E(3, 8)]


def test_a_write_is_durable_then_atomic(
    checkpoint: LeaderEpochCheckpoint, path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, ...]] = []
    tmp = path.with_name(path.name + ".tmp")
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            events.append(("fsync", "dir"))
        else:
            events.append(("fsync", "file", tmp.read_text()))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("replace", os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    checkpoint.write([E(1, 0)])
    # the first write has no older file to protect: atomic, not fsynced (the loader rebuilds
    # a checkpoint an OS crash lost from the batches)
    assert events == [("replace", os.fspath(tmp), os.fspath(path))]
    events.clear()
    checkpoint.write([E(1, 0), E(2, 5)])
    assert events == [
        ("fsync", "file", "0\n2\n1 0\n2 5\n"),  # the whole new file reaches the disk first
        ("replace", os.fspath(tmp), os.fspath(path)),
        ("fsync", "dir"),  # then the rename is made durable
    ]


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        (b"", 1, "empty"),
        (b"\xff\n", 1, "not valid UTF-8"),
        (b"x\n0\n", 1, "version 'x' is not a decimal integer"),
        (b"1\n0\n", 1, "unsupported version 1"),
        (b"0\n", 2, "missing the entry count line"),
        (b"0\nmany\n", 2, "entry count 'many' is not a decimal integer"),
        (b"0\n-1\n", 2, "negative entry count -1"),
        (b"0\n2\n1 0\n", 2, "announces 2 entries but the file has 1"),
        (b"0\n1\n1 0\n2 5\n", 4, "unexpected line after the 1 entries"),
        (b"0\n1\n1\n", 3, "expected 2 fields .* found 1"),
        (b"0\n1\n1 0 7\n", 3, "expected 2 fields .* found 3"),
        (b"0\n1\n1  0\n", 3, "found 3"),  # a double space
        (b"0\n1\n1\t0\n", 3, "found 1"),
        (b"0\n1\none 0\n", 3, "epoch 'one' is not a decimal integer"),
        (b"0\n1\n1 zero\n", 3, "start offset 'zero' is not a decimal integer"),
        (b"0\n1\n1 +5\n", 3, "start offset '\\+5' is not a decimal integer"),
        (b"0\n1\n-1 0\n", 3, "negative epoch -1"),
        (b"0\n1\n1 -5\n", 3, "negative start offset -5"),
        (b"0\n1\n2147483648 0\n", 3, "epoch 2147483648 is out of range"),
        (b"0\n1\n1 9223372036854775808\n", 3, "start offset 9223372036854775808 is out of"),
        (b"0\n3\n1 0\n3 5\n3 9\n", 5, "epoch 3 does not follow epoch 3 of line 4"),
        (b"0\n2\n4 0\n2 5\n", 4, "epoch 2 does not follow epoch 4 of line 3"),
        (b"0\n3\n1 0\n2 9\n3 7\n", 5, "start offset 7 is below start offset 9 of line 4"),
        (b"0\n2\n1 0\n\xff 5\n", 4, "not valid UTF-8"),
    ],
)
def test_a_malformed_checkpoint_names_the_file_and_the_line(
    checkpoint: LeaderEpochCheckpoint, path: pathlib.Path, content: bytes, line: int, reason: str
) -> None:
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=reason) as raised:
        checkpoint.read()
    error = raised.value
    assert isinstance(error, StorageError)
    assert (error.path, error.line) == (path, line)
    assert f"{path}, line {line}: " in str(error)


# --------------------------------------------------------------------------------------------
# Property: any sequence of changes keeps the entries ordered and the file in step

operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("from_end"), st.integers(-1, 60), st.just(0)),
        st.tuples(st.just("from_start"), st.integers(-1, 60), st.just(0)),
        st.tuples(st.just("clear"), st.just(0), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(ops=operations)
def test_any_changes_keep_the_entries_ordered_and_persisted(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]]
) -> None:
    path = tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(LeaderEpochCheckpoint(path))
    for kind, a, b in ops:
        before = cache.entries
        if kind == "assign":
            changed = cache.assign(a, b)
            assert changed == (a > (before[-1].epoch if before else -1))
            if changed:
                assert cache.entries[-1] == E(a, b)
                assert cache.entries[:-1] == tuple(e for e in before if e.start_offset < b)
        elif kind == "from_end":
            cache.truncate_from_end(a)
            assert all(e.start_offset < a for e in cache.entries) or a < 0
        elif kind == "from_start":
            cache.truncate_from_start(a)
            assert all(e.start_offset >= a for e in cache.entries) or not before
        else:
            cache.clear()
        entries = cache.entries
        assert all(x.epoch < y.epoch for x, y in itertools.pairwise(entries))
        assert all(x.start_offset < y.start_offset for x, y in itertools.pairwise(entries))
        if path.exists():
            assert LeaderEpochCheckpoint(path).read() == list(entries)
        else:
            assert entries == ()
