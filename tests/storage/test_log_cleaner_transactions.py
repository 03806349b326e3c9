"""Compaction of transactional data, Kafka's rules (LogCleanerTest's transaction cases): the
first unstable offset bounds the cleaning, aborted records go, committed ones are compacted by
key like any other, markers and the aborted-transaction index stay."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.storage import (
    AppendOrigin,
    Log,
    LogCleaner,
    LogConfig,
    Record,
    build_batch,
    build_control_batch,
    iter_batches,
)
from kafkactor.timer import ManualClock

pytestmark = pytest.mark.timeout(60)

TS = 1_700_000_000_000
COMPACT = LogConfig(segment_bytes=100_000, index_interval_bytes=100, cleanup_policy="compact")
P, Q = 7000, 7001
Entry = tuple[int, bytes | None, bytes | None]


class Writer:
    """Appends to one log as producers and their coordinator do."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.sequences: dict[int, int] = {}

    def plain(self, key: bytes, value: bytes) -> int:
        return self.log.append_as_leader([Record(key, value, TS)], 0).first_offset

    def txn(self, pid: int, key: bytes, value: bytes) -> int:
        seq = self.sequences.get(pid, 0)
        self.sequences[pid] = seq + 1
        data = build_batch(
            [Record(key, value, TS)],
            0,
            producer_id=pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
        return self.log.append_as_leader(data, 0).first_offset

    def end(self, pid: int, *, committed: bool) -> int:
        data = build_control_batch(
            committed=committed,
            producer_id=pid,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=TS,
        )
        return self.log.append_as_leader(data, 0, origin=AppendOrigin.COORDINATOR).first_offset

    def replicated(self) -> None:
        """The HW reaches the log end, and the active segment is rolled (cleanable)."""
        self.log.on_high_watermark(self.log.log_end_offset)
        self.log.roll()


def entries(log: Log) -> list[Entry]:
    found: list[Entry] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(iter_batches(log.read(offset, 10**9).records))
        if not batches:
            break
        found.extend(
            (r.offset, r.key, r.value)
            for batch in batches
            if not batch.is_control_batch
            for r in batch.records()
        )
        offset = batches[-1].next_offset
    return found


def marker_offsets(log: Log) -> list[int]:
    found: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(iter_batches(log.read(offset, 10**9).records))
        if not batches:
            break
        found.extend(batch.base_offset for batch in batches if batch.is_control_batch)
        offset = batches[-1].next_offset
    return found


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = Log(tmp_path / "compacted-0", COMPACT, clock=ManualClock(TS))
    yield opened
    opened.close()


def clean(log: Log) -> None:
    LogCleaner().clean(log, TS)


def test_aborted_records_are_removed_and_do_not_supersede_their_key(log: Log) -> None:
    w = Writer(log)
    w.plain(b"k", b"committed")  # 0
    w.txn(P, b"k", b"aborted")  # 1
    w.txn(P, b"other", b"aborted")  # 2
    w.end(P, committed=False)  # 3
    w.plain(b"tail", b"x")  # 4
    w.replicated()
    clean(log)
    assert entries(log) == [(0, b"k", b"committed"), (4, b"tail", b"x")]
    assert marker_offsets(log) == [3]  # the marker stays (see docs/storage.md)


def test_committed_transactional_records_are_compacted_by_key(log: Log) -> None:
    w = Writer(log)
    w.txn(P, b"k", b"v1")  # 0
    w.txn(P, b"j", b"j1")  # 1
    w.end(P, committed=True)  # 2
    w.plain(b"k", b"v2")  # 3
    w.replicated()
    clean(log)
    assert entries(log) == [(1, b"j", b"j1"), (3, b"k", b"v2")]
    assert marker_offsets(log) == [2]


def test_nothing_at_or_past_the_first_unstable_offset_is_cleaned(log: Log) -> None:
    w = Writer(log)
    w.plain(b"a", b"a1")  # 0
    w.plain(b"a", b"a2")  # 1
    w.plain(b"b", b"b1")  # 2
    w.txn(P, b"b", b"open")  # 3: P's transaction stays open
    w.plain(b"b", b"b2")  # 4
    w.plain(b"a", b"a3")  # 5
    w.replicated()
    assert log.first_unstable_offset == 3
    clean(log)
    # below 3 compacted among themselves; nothing from 3 on is mapped or removed
    assert entries(log) == [
        (1, b"a", b"a2"),
        (2, b"b", b"b1"),
        (3, b"b", b"open"),
        (4, b"b", b"b2"),
        (5, b"a", b"a3"),
    ]


def test_an_unreplicated_marker_keeps_its_transaction_uncleaned(log: Log) -> None:
    w = Writer(log)
    w.plain(b"k", b"first")  # 0
    w.txn(P, b"k", b"aborted")  # 1
    w.end(P, committed=False)  # 2
    w.plain(b"k", b"last")  # 3
    log.on_high_watermark(2)  # the abort marker is not replicated yet
    log.roll()
    clean(log)
    assert [e[0] for e in entries(log)] == [0, 1, 3]  # only [0, 1) was cleanable
    log.on_high_watermark(log.log_end_offset)
    clean(log)
    assert entries(log) == [(3, b"k", b"last")]


def test_the_aborted_index_survives_cleaning_and_a_restart(log: Log, tmp_path: Path) -> None:
    w = Writer(log)
    w.txn(P, b"k", b"p")  # 0
    w.txn(Q, b"k", b"q")  # 1
    w.end(P, committed=False)  # 2
    w.end(Q, committed=True)  # 3
    w.plain(b"k", b"plain")  # 4
    w.replicated()
    before = log.collect_aborted_transactions(0, log.log_end_offset)
    assert before == [(P, 0)]
    clean(log)
    assert entries(log) == [(4, b"k", b"plain")]
    assert log.collect_aborted_transactions(0, log.log_end_offset) == before
    log.flush()
    log.close()
    reopened = Log(log.dir, COMPACT, log.log_end_offset, ManualClock(TS), clean_shutdown=True)
    try:
        assert reopened.collect_aborted_transactions(0, reopened.log_end_offset) == before
        reopened.on_high_watermark(reopened.log_end_offset)
        assert reopened.first_unstable_offset is None
    finally:
        reopened.close()


def test_an_aborted_transaction_spanning_segments_is_removed_from_each(log: Log) -> None:
    w = Writer(log)
    w.plain(b"k", b"kept")  # 0
    w.txn(P, b"k", b"a1")  # 1
    log.roll()
    w.txn(P, b"j", b"a2")  # 2
    w.plain(b"j", b"kept")  # 3
    log.roll()
    w.txn(P, b"k", b"a3")  # 4
    w.end(P, committed=False)  # 5
    w.replicated()
    assert log.collect_aborted_transactions(0, 6) == [(P, 1)]
    clean(log)
    assert entries(log) == [(0, b"k", b"kept"), (3, b"j", b"kept")]
    assert marker_offsets(log) == [5]


def test_an_aborted_batch_that_is_its_producers_last_stays_as_an_empty_header(
    log: Log, tmp_path: Path
) -> None:
    w = Writer(log)
    w.txn(P, b"k", b"aborted")  # 0: P's last data batch, sequence 0
    w.end(P, committed=False)  # 1
    w.plain(b"k", b"plain")  # 2
    w.replicated()
    clean(log)
    assert entries(log) == [(2, b"k", b"plain")]
    (header,) = [
        batch
        for batch in iter_batches(log.read(0, 10**9).records)
        if batch.producer_id == P and not batch.is_control_batch
    ]
    assert (header.base_offset, header.record_count, header.base_sequence) == (0, 0, 0)
    # the producer's next sequence still follows on, after a restart too
    log.flush()
    log.close()
    reopened = Log(log.dir, COMPACT, log.log_end_offset, ManualClock(TS), clean_shutdown=True)
    try:
        again = Writer(reopened)
        again.sequences[P] = 1
        assert again.txn(P, b"k", b"next") == 3
    finally:
        reopened.close()
