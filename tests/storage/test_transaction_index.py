"""The aborted-transaction index (`.txnindex`): Kafka's TransactionIndexTest and the index cases
of LogTest (appended on abort by leaders and followers, collected across segments, truncated,
deleted and rebuilt with the log)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.storage import (
    AbortedTxn,
    AppendOrigin,
    Log,
    LogConfig,
    Record,
    TransactionIndex,
    build_batch,
    build_control_batch,
)
from kafkactor.storage.transaction_index import CorruptTransactionIndexError
from kafkactor.timer import ManualClock

pytestmark = pytest.mark.timeout(60)

TS = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=400, index_interval_bytes=100)
ENTRY = struct.Struct(">hqqqq")


def txn(pid: int, seq: int, count: int = 1) -> bytes:
    records = [Record(b"k%d" % i, b"v" * 20, TS) for i in range(count)]
    return build_batch(
        records, 0, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
    )


def end(log: Log, pid: int, committed: bool) -> int:
    data = build_control_batch(
        committed=committed, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=TS
    )
    return log.append_as_leader(data, 0, origin=AppendOrigin.COORDINATOR).first_offset


def append(log: Log, data: bytes) -> int:
    return log.append_as_leader(data, 0).first_offset


def index_files(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.txnindex"))}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Iterator[Log]:
    opened = Log(tmp_path / "t-0", SMALL, 0, clock)
    yield opened
    opened.close()


def interleaved(log: Log) -> list[AbortedTxn]:
    """Three producers' transactions across several segments: 1 and 3 aborted, 2 committed."""
    append(log, txn(1, 0))  # 0
    append(log, txn(2, 0))  # 1
    append(log, txn(1, 1, 2))  # 2-3
    append(log, txn(3, 0))  # 4
    first_abort = end(log, 1, committed=False)  # 5: LSO then is producer 2's first offset, 1
    end(log, 2, committed=True)  # 6
    append(log, txn(3, 1))  # 7
    second_abort = end(log, 3, committed=False)  # 8: nothing else open, LSO 9
    assert (first_abort, second_abort) == (5, 8)
    return [AbortedTxn(1, 0, 5, 1), AbortedTxn(3, 4, 8, 9)]


def test_an_abort_writes_kafkas_34_byte_entry_in_its_segment(log: Log) -> None:
    expected = interleaved(log)
    assert log.num_segments > 1
    files = index_files(log.dir)
    entries = [
        ENTRY.unpack(data[i : i + 34])
        for data in files.values()
        for i in (0, 34)[: len(data) // 34]
    ]
    assert entries == [
        (0, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in expected
    ]
    for name, data in files.items():  # each entry in the segment holding its marker
        base = int(name.split(".")[0])
        assert all(base <= ENTRY.unpack(data[i : i + 34])[3] for i in range(0, len(data), 34))


def test_a_commit_indexes_nothing(log: Log) -> None:
    append(log, txn(1, 0))
    end(log, 1, committed=True)
    assert index_files(log.dir) == {}
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []


@pytest.mark.parametrize(
    ("start", "upper", "expected"),
    [
        (0, 10, [(1, 0), (3, 4)]),
        (0, 1, [(1, 0)]),  # producer 3's starts at 4
        (5, 10, [(1, 0), (3, 4)]),  # 1's marker is at 5: still overlapping
        (6, 10, [(3, 4)]),
        (9, 10, []),
    ],
)
def test_collecting_aborted_transactions_overlapping_a_range(
    log: Log, start: int, upper: int, expected: list[tuple[int, int]]
) -> None:
    interleaved(log)
    assert log.collect_aborted_transactions(start, upper) == expected


def test_a_follower_indexes_the_same_aborted_transactions(log: Log, tmp_path: Path) -> None:
    interleaved(log)
    follower = Log(tmp_path / "t-1", LogConfig(index_interval_bytes=100), 0, ManualClock(TS))
    try:
        while follower.log_end_offset < log.log_end_offset:  # a segment per read
            follower.append_as_follower(log.read(follower.log_end_offset, 1 << 20).records)
        assert follower.collect_aborted_transactions(0, 10) == [(1, 0), (3, 4)]
    finally:
        follower.close()


def test_truncation_drops_the_entries_of_removed_markers(log: Log) -> None:
    interleaved(log)
    log.truncate_to(8)  # producer 3's abort marker goes
    assert log.collect_aborted_transactions(0, 10) == [(1, 0)]
    log.truncate_to(5)
    assert log.collect_aborted_transactions(0, 10) == []
    assert index_files(log.dir) == {}


def test_truncating_fully_and_retention_delete_the_index_files(log: Log) -> None:
    interleaved(log)
    log.on_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(9, "ClientRecordDeletion")
    log.delete_old_segments()
    assert all(
        int(name.split(".")[0]) >= log.first_segment_base_offset for name in index_files(log.dir)
    )
    log.truncate_fully_and_start_at(20)
    assert index_files(log.dir) == {}


def test_the_index_is_rebuilt_when_its_segment_is_recovered(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, SMALL, 0, clock)
    interleaved(log)
    before = index_files(directory)
    log.crash()
    for path in directory.glob("*.txnindex"):
        path.unlink()
    reopened = Log(directory, SMALL, 0, clock)  # unclean: recovery from offset 0
    try:
        assert index_files(directory) == before
        assert reopened.collect_aborted_transactions(0, 10) == [(1, 0), (3, 4)]
    finally:
        reopened.close()


def test_a_corrupt_index_is_rebuilt_even_after_a_clean_shutdown(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, SMALL, 0, clock)
    interleaved(log)
    log.flush()
    before = index_files(directory)
    log.close()
    damaged = directory / next(iter(before))
    damaged.write_bytes(damaged.read_bytes() + b"\x00\x01\x02")
    reopened = Log(directory, SMALL, log.log_end_offset, clock, clean_shutdown=True)
    try:
        assert index_files(directory) == before
    finally:
        reopened.close()


def test_an_index_without_its_segment_is_removed(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "t-0"
    Log(directory, SMALL, 0, clock).close()
    stray = directory / "00000000000000000500.txnindex"
    stray.write_bytes(AbortedTxn(1, 500, 501, 502).encode())
    Log(directory, SMALL, 0, clock).close()
    assert not stray.exists()


# --------------------------------------------------------------------------------------------
# TransactionIndex alone (TransactionIndexTest)


def test_entries_must_follow_one_another(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    index.append(AbortedTxn(1, 0, 10, 11))
    with pytest.raises(ValueError, match="must increase"):
        index.append(AbortedTxn(2, 5, 10, 11))
    index.close()
    assert TransactionIndex(index.path, 0).entries == [AbortedTxn(1, 0, 10, 11)]


def test_no_entries_no_file_and_a_bad_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, 100)
    assert index.entries == [] and not path.exists()
    path.write_bytes(AbortedTxn(1, 0, 50, 51).encode())  # a marker before the segment's base
    with pytest.raises(CorruptTransactionIndexError, match="less than"):
        TransactionIndex(path, 100).sanity_check()
    path.write_bytes(b"\x00\x05" + bytes(32))
    with pytest.raises(CorruptTransactionIndexError, match="version"):
        TransactionIndex(path, 100).sanity_check()


def test_the_search_stops_at_an_entry_whose_lso_reaches_the_upper_bound(tmp_path: Path) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 7, 9, 10))
    assert index.collect(0, 6) == ([AbortedTxn(1, 0, 5, 6)], True)
    assert index.collect(0, 20) == ([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 7, 9, 10)], False)
    index.close()


def test_a_power_loss_takes_an_unflushed_abort_and_its_entry(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "t-0"
    log = Log(directory, SMALL, 0, clock)
    append(log, txn(1, 0))
    log.flush()
    end(log, 1, committed=False)  # never fsynced
    assert log.collect_aborted_transactions(0, 2) == [(1, 0)]
    log.crash(lose_unflushed=True)
    reopened = Log(directory, SMALL, log.recovery_point, clock)
    try:
        assert reopened.log_end_offset == 1
        assert reopened.collect_aborted_transactions(0, 2) == []
        reopened.on_high_watermark(1)
        assert reopened.first_unstable_offset == 0  # open again, until the marker is rewritten
    finally:
        reopened.close()
