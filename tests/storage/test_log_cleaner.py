"""Log compaction: LogCleaner, LogCleanerManager, the crash-safe swap, and the LogManager's part.

Every test runs on a real directory (tmp_path) with a ManualClock and small segments, rolled by
hand where the segment boundaries matter, and checks both what the log answers and what is on
disk (also after reopening it through the ordinary loader).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkactor.actors.controller.zk_data import log_config_from, topic_config_overrides
from kafkactor.storage import (
    CLEANER_OFFSET_CHECKPOINT,
    SWAP_STEPS,
    CleanerStats,
    CompressionType,
    InvalidRecordError,
    Log,
    LogCleaner,
    LogCleanerManager,
    LogCleaningAbortedError,
    LogConfig,
    LogManager,
    LogManagerConfig,
    LogToClean,
    OffsetCheckpoint,
    Record,
    RecordBatch,
    RecordError,
    StoredRecord,
    TopicPartition,
    build_batch,
    iter_batches,
)
from kafkactor.storage.log_cleaner import group_segments_by_size
from kafkactor.storage.log_cleaner_manager import describe_segments
from kafkactor.storage.record_filter import empty_batch_header, rebuild_batch
from kafkactor.timer import ManualClock, Scheduler

TS = 1_700_000_000_000
DAY_MS = 86_400_000
TP = TopicPartition(topic="compacted", partition=0)
# Segments are rolled by hand: segment_bytes only bounds the cleaner's groups (a round below
# takes about 410 bytes: two rounds fit one group, three do not).
COMPACT = LogConfig(segment_bytes=1000, index_interval_bytes=100, cleanup_policy="compact")

Entry = tuple[int, bytes | None, bytes | None]  # offset, key, value


class SimulatedCrash(BaseException):
    """Raised from the swap hook: the process dies there."""


# --------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "compacted-0"


def open_log(directory: Path, clock: ManualClock, config: LogConfig = COMPACT) -> Log:
    return Log(directory, config, clock=clock)


def put(log: Log, key: bytes | None, value: bytes | None, clock: ManualClock) -> int:
    """One leader append of one record; its offset."""
    return log.append_as_leader([Record(key, value, clock.now_ms())], leader_epoch=0).first_offset


def round_of(log: Log, n: int, clock: ManualClock, *, roll: bool = True) -> None:
    """Round `n`: four updates of the hot keys, then a key of its own (so every segment ends
    with a record that survives cleaning); then a roll."""
    for i in range(4):
        put(log, b"hot-%d" % (i % 2), b"round-%d-%d" % (n, i), clock)
    put(log, b"marker-%d" % n, b"round-%d" % n, clock)
    if roll:
        log.roll()


def read_all(log: Log) -> list[StoredRecord]:
    """Every record from the log start to its end (a read returns one segment's batches)."""
    found: list[StoredRecord] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(iter_batches(log.read(offset, 10**9).records, deep=True))
        if not batches:
            break
        found.extend(record for batch in batches for record in batch.records())
        offset = batches[-1].next_offset
    return found


def entries(log: Log) -> list[Entry]:
    return [(r.offset, r.key, r.value) for r in read_all(log)]


def compacted(history: list[Entry], end: int) -> list[Entry]:
    """What cleaning [log start, end) keeps: below `end`, the latest record of each key."""
    latest = {key: offset for offset, key, _ in history if offset < end}
    return [e for e in history if e[0] >= end or latest[e[1]] == e[0]]


def latest_values(history: list[Entry]) -> dict[bytes | None, bytes | None]:
    return {key: value for _, key, value in history}


def segment_bases(log: Log) -> list[int]:
    return [segment.base_offset for segment in log.segments]


def leftovers(directory: Path) -> list[str]:
    suffixes = (".cleaned", ".swap", ".deleted")
    return sorted(name for name in os.listdir(directory) if name.endswith(suffixes))


def crashing_at(call: int) -> tuple[Callable[[str], None], list[str]]:
    """A swap hook that raises SimulatedCrash on its `call`-th call; and the steps it saw."""
    seen: list[str] = []

    def hook(step: str) -> None:
        seen.append(step)
        if len(seen) == call + 1:
            raise SimulatedCrash(step)

    return hook, seen


def disk_batches(log: Log) -> list[RecordBatch]:
    return [
        batch
        for segment in log.segments
        for batch in iter_batches(segment.log_path.read_bytes(), deep=True)
    ]


# --------------------------------------------------------------------------------------------
# What cleaning keeps


def test_the_latest_record_of_each_key_is_kept_at_its_offset(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    for n in range(6):
        round_of(log, n, clock)
    round_of(log, 6, clock, roll=False)  # the active segment
    before = read_all(log)
    history = [(r.offset, r.key, r.value) for r in before]
    active_base = segment_bases(log)[-1]
    end = log.log_end_offset

    stats = LogCleaner().clean(log, clock.now_ms())

    assert stats is not None
    assert stats.end_offset == active_base
    assert stats.keys_mapped == 2 + 6  # two hot keys and six markers
    assert entries(log) == compacted(history, active_base)
    # every kept record is the original one: offset, key, value, timestamp and headers
    kept = {r.offset: r for r in before}
    assert all(kept[r.offset] == r for r in read_all(log))
    assert (log.log_start_offset, log.log_end_offset) == (0, end)
    assert latest_values(entries(log)) == latest_values(history)
    assert (stats.messages_read, stats.messages_written) == (30, 8)
    assert stats.bytes_written < stats.bytes_read
    log.close()
    reopened = open_log(log_dir, clock)
    try:
        assert entries(reopened) == compacted(history, active_base)
        assert leftovers(log_dir) == []
    finally:
        reopened.close()


def test_the_active_segment_is_never_touched(log_dir: Path, clock: ManualClock) -> None:
    log = open_log(log_dir, clock)
    try:
        for n in range(3):
            round_of(log, n, clock)
        for n in range(3, 5):  # duplicates of the hot keys in the active segment stay
            round_of(log, n, clock, roll=False)
        active = log.segments[-1]
        active_bytes = active.log_path.read_bytes()
        history = entries(log)

        stats = LogCleaner().clean(log, clock.now_ms())

        assert stats is not None and stats.end_offset == active.base_offset
        assert log.segments[-1] is active
        assert active.log_path.read_bytes() == active_bytes
        assert entries(log) == compacted(history, active.base_offset)
        assert [e for e in entries(log) if e[0] >= active.base_offset] == history[15:]
        # a log that is all active segment has nothing to clean
        assert LogCleaner().clean(log, clock.now_ms(), stats.end_offset) is None
    finally:
        log.close()


def test_tombstones_stay_until_delete_retention_ms_after_their_segment_was_cleaned(
    log_dir: Path, clock: ManualClock
) -> None:
    retention = 10_000
    config = LogConfig(
        segment_bytes=600,  # six records of 78 bytes fit; no two segments share a group
        index_interval_bytes=100,
        cleanup_policy="compact",
        delete_retention_ms=retention,
    )
    log = open_log(log_dir, clock, config)
    cleaner = LogCleaner()
    first_dirty = 0
    filler = iter(range(10**6))

    def new_segment_and_clean() -> CleanerStats:
        """A segment of fresh keys becomes dirty, and the log is cleaned from the checkpoint."""
        nonlocal first_dirty
        for _ in range(5):
            put(log, b"filler-%d" % next(filler), b"x", clock)
        log.roll()
        stats = cleaner.clean(log, clock.now_ms(), first_dirty)
        assert stats is not None
        first_dirty = stats.end_offset
        return stats

    def tombstone_kept() -> bool:
        return any(key == b"gone" and value is None for _, key, value in entries(log))

    try:
        put(log, b"gone", b"alive", clock)
        for _ in range(4):
            put(log, b"filler-%d" % next(filler), b"x", clock)
        log.roll()
        tombstone = put(log, b"gone", None, clock)
        new_segment_and_clean()  # the tombstone's segment enters the clean section now
        assert tombstone_kept()
        assert (tombstone, b"gone", b"alive") not in entries(log)
        assert [e for e in entries(log) if e[1] == b"gone"] == [(tombstone, b"gone", None)]

        clock.advance(retention - 1)
        new_segment_and_clean()  # a segment cleaned retention - 1 ms after the tombstone's
        stats = new_segment_and_clean()
        assert stats.delete_horizon_ms == TS - 1
        assert tombstone_kept()

        clock.advance(1)
        new_segment_and_clean()  # ... and one cleaned delete.retention.ms after it
        stats = new_segment_and_clean()
        assert stats.delete_horizon_ms == TS
        assert not tombstone_kept()
        assert all(key != b"gone" for _, key, _ in entries(log))
    finally:
        log.close()


def test_records_without_a_key_are_refused_by_a_compacted_log(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    keyless = "Compacted topic cannot accept message without key in topic partition"
    try:
        with pytest.raises(InvalidRecordError, match=keyless) as refused:
            log.append_as_leader([Record(b"k", b"v", TS), Record(None, b"v", TS)], 0)
        assert [e.batch_index for e in refused.value.record_errors] == [1]
        producer_bytes = build_batch([Record(b"k", b"v", TS), Record(None, b"v", TS)], 0)
        with pytest.raises(InvalidRecordError, match=keyless) as refused:
            log.append_as_leader(producer_bytes, 0)
        assert refused.value.record_errors == (RecordError(1, f"{keyless} {log.topic_partition}."),)
        assert log.log_end_offset == 0
        # a follower takes what its leader wrote; the cleaner drops a keyless record
        log.append_as_follower(producer_bytes)
        put(log, b"k", b"later", clock)
        log.roll()
        stats = LogCleaner().clean(log, clock.now_ms())
        assert stats is not None and stats.invalid_messages_read == 1
        assert entries(log) == [(2, b"k", b"later")]
    finally:
        log.close()
    delete_policy = open_log(log_dir.with_name("plain-0"), clock, LogConfig())
    try:
        delete_policy.append_as_leader([Record(None, b"v", TS)], 0)  # only compaction needs keys
        with pytest.raises(ValueError, match="not compacted"):
            LogCleaner().clean(delete_policy, clock.now_ms())
    finally:
        delete_policy.close()


def test_a_batch_keeps_its_offsets_and_header_fields_when_it_loses_records(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    try:
        records = [
            Record(b"a", b"a0", TS + 1),
            Record(b"b", b"b0", TS + 2),
            Record(b"c", b"c0", TS),
        ]
        data = build_batch(records, 0, producer_id=9, producer_epoch=2, base_sequence=0)
        log.append_as_leader(data, leader_epoch=3)
        put(log, b"a", b"a1", clock)  # supersedes the batch's first record
        put(log, b"c", b"c1", clock)  # ... and its last
        log.roll()
        original = disk_batches(log)[0]

        assert LogCleaner().clean(log, clock.now_ms()) is not None

        rebuilt = disk_batches(log)[0]
        assert [(r.offset, r.key) for r in rebuilt.records()] == [(1, b"b")]
        assert (rebuilt.base_offset, rebuilt.last_offset_delta) == (0, 2)
        assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (9, 2, 0)
        assert rebuilt.leader_epoch == original.leader_epoch == 3
        assert (rebuilt.base_timestamp, rebuilt.max_timestamp) == (TS + 2, TS + 2)
        assert rebuilt.record_count == 1
        assert rebuilt.buffer.tobytes() == rebuild_batch(original, original.records()[1:2])
    finally:
        log.close()


def test_an_idempotent_producers_last_batch_stays_as_an_empty_header(
    log_dir: Path, clock: ManualClock
) -> None:
    def produce(key: bytes, value: bytes, sequence: int) -> None:
        records = [Record(key, value, clock.now_ms())]
        data = build_batch(records, 0, producer_id=5, producer_epoch=0, base_sequence=sequence)
        log.append_as_leader(data, leader_epoch=0)

    log = open_log(log_dir, clock)
    try:
        produce(b"k", b"v0", 0)  # superseded, not the producer's last batch: dropped
        produce(b"k", b"v1", 1)  # superseded, and the producer's last batch: an empty header
        put(log, b"k", b"v2", clock)  # a plain producer's record supersedes both
        log.roll()

        assert LogCleaner().clean(log, clock.now_ms()) is not None

        batches = disk_batches(log)
        assert [(b.base_offset, b.record_count) for b in batches] == [(1, 0), (2, 1)]
        empty = batches[0]
        assert (empty.producer_id, empty.base_sequence, empty.compression_codec) == (5, 1, 0)
        assert (empty.base_timestamp, empty.max_timestamp) == (-1, TS)
        assert empty.buffer.tobytes() == empty_batch_header(empty)
        assert entries(log) == [(2, b"k", b"v2")]
        log.close()
        log = open_log(log_dir, clock)
        producer = log.producer_state.entry(5)
        assert producer is not None and producer.last_sequence == 1
        produce(b"k", b"v3", 2)  # the producer's next sequence still follows on
    finally:
        log.close()


@pytest.mark.parametrize(
    "codec",
    [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD],
)
def test_compressed_batches_are_rewritten_with_their_codec_and_stay_readable(
    log_dir: Path, clock: ManualClock, codec: CompressionType
) -> None:
    log = open_log(log_dir, clock)
    try:
        for n in range(3):
            records = [
                Record(b"key-%d" % i, b"value-%d-%d" % (n, i) * 8, TS + n) for i in range(n, 6)
            ]
            log.append_as_leader(build_batch(records, 0, compression=codec), leader_epoch=0)
            log.roll()
        history = entries(log)

        stats = LogCleaner().clean(log, clock.now_ms())

        assert stats is not None
        assert entries(log) == compacted(history, segment_bases(log)[-1])
        assert latest_values(entries(log)) == latest_values(history)
        batches = disk_batches(log)
        assert [(b.base_offset, b.last_offset_delta, b.record_count) for b in batches] == [
            (0, 5, 1),  # key-0 only here: the rest is in later batches
            (6, 4, 1),  # key-1
            (11, 3, 4),  # the last batch: kept whole
        ]
        assert all(batch.compression_codec == codec for batch in batches)
        log.close()
        log = open_log(log_dir, clock)
        assert entries(log) == compacted(history, 15)
    finally:
        log.close()


def test_min_compaction_lag_leaves_young_segments_dirty(log_dir: Path, clock: ManualClock) -> None:
    config = LogConfig(
        segment_bytes=1500,
        index_interval_bytes=100,
        cleanup_policy="compact",
        min_compaction_lag_ms=60_000,
    )
    log = open_log(log_dir, clock, config)
    try:
        round_of(log, 0, clock)
        clock.advance(60_000)
        round_of(log, 1, clock)  # younger than the lag when cleaned
        history = entries(log)
        second = segment_bases(log)[1]

        stats = LogCleaner().clean(log, clock.now_ms())

        assert stats is not None and stats.end_offset == second
        assert entries(log) == compacted(history, second)
        clock.advance(60_000)  # round 1 is now exactly min.compaction.lag.ms old
        stats = LogCleaner().clean(log, clock.now_ms(), stats.end_offset)
        assert stats is not None and stats.end_offset == segment_bases(log)[-1]
    finally:
        log.close()


def test_segments_are_grouped_by_size_into_one_cleaned_segment(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    try:
        for n in range(6):
            round_of(log, n, clock)
        view = describe_segments(log)
        sizes = [info.size for info in view.inactive]
        assert all(334 <= size <= 500 for size in sizes)  # two fit 1000 bytes, three do not
        groups = group_segments_by_size(view.inactive, 1000, 10**6, view.active_base)
        assert [[info.base_offset for info in g] for g in groups] == [[0, 5], [10, 15], [20, 25]]
        # the index budget and the 32-bit relative offsets bound a group too
        assert len(group_segments_by_size(view.inactive, 10**6, 0, view.active_base)) == 6
        far = group_segments_by_size(view.inactive, 10**6, 10**6, 2**31 + 5)
        assert [[info.base_offset for info in g] for g in far] == [[0, 5, 10, 15, 20], [25]]
        LogCleaner().clean(log, clock.now_ms())
        assert segment_bases(log) == [0, 10, 20, 30]  # cleaned: far smaller than 1000 bytes
        stats = LogCleaner().clean(log, clock.now_ms())  # a second pass merges them
        assert stats is not None and stats.segments_written == 1
        assert segment_bases(log) == [0, 30]
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# The crash-safe swap


def crash_scenario(directory: Path, clock: ManualClock) -> tuple[Log, list[Entry]]:
    """Six rolled rounds (three groups of two segments) and an active one."""
    log = open_log(directory, clock)
    for n in range(6):
        round_of(log, n, clock)
    round_of(log, 6, clock, roll=False)
    log.flush()
    return log, entries(log)


STEPS_PER_GROUP = ["cleaned", "swap", "deleted", "deleted", "swapped", "done"]
CRASH_POINTS = [(g, step) for g in range(3) for step in range(len(STEPS_PER_GROUP))]


def test_the_swap_steps_come_in_kafkas_order(tmp_path: Path, clock: ManualClock) -> None:
    steps: list[str] = []
    log, _ = crash_scenario(tmp_path / "c-0", clock)
    try:
        LogCleaner(on_swap_step=steps.append).clean(log, clock.now_ms())
    finally:
        log.close()
    assert steps == STEPS_PER_GROUP * 3
    assert set(steps) == set(SWAP_STEPS)


@pytest.mark.parametrize(("group", "step"), CRASH_POINTS)
def test_a_crash_at_any_step_of_the_swap_loses_and_duplicates_nothing(
    tmp_path: Path, clock: ManualClock, group: int, step: int
) -> None:
    directory = tmp_path / "c-0"
    log, history = crash_scenario(directory, clock)
    active_base = segment_bases(log)[-1]
    hook, seen = crashing_at(group * len(STEPS_PER_GROUP) + step)
    with pytest.raises(SimulatedCrash):
        LogCleaner(on_swap_step=hook).clean(log, clock.now_ms())
    log.crash()  # no flush, nothing written on the way out

    reopened = open_log(directory, clock)
    try:
        # Groups cover [0, 10), [10, 20), [20, 30). From its `.swap` rename on, a group is in.
        swapped_end = 10 * seen.count("swap")
        expected = [
            e for e in history if e[0] >= swapped_end or e in compacted(history, active_base)
        ]
        assert entries(reopened) == expected
        offsets = [e[0] for e in entries(reopened)]
        assert offsets == sorted(set(offsets))  # nothing duplicated
        assert latest_values(entries(reopened)) == latest_values(history)
        assert leftovers(directory) == []
        assert reopened.log_end_offset == history[-1][0] + 1
        assert seen == STEPS_PER_GROUP * group + STEPS_PER_GROUP[: step + 1]
        # the next cleaning finishes the job
        LogCleaner().clean(reopened, clock.now_ms())
        assert entries(reopened) == compacted(history, active_base)
    finally:
        reopened.close()


def test_a_swap_whose_output_ends_before_its_last_old_segment_brings_that_segment_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Kafka's loader drops the segments a `.swap` overlaps, from its base to its last offset.
    A crash after the `.swap` rename, when every record of a group's last segment is superseded
    later on, leaves that segment: its stale records come back (nothing is lost or duplicated)
    until the next cleaning, which the unchanged first dirty offset makes happen."""
    directory = tmp_path / "c-0"
    log = open_log(directory, clock)
    for n in range(2):
        round_of(log, n, clock)  # segments [0, 5) and [5, 10): one group
    for i in range(5, 10):  # every key of the group's last segment, once more
        put(log, b"marker-1" if i == 9 else b"hot-%d" % (i % 2), b"later-%d" % i, clock)
    log.roll()
    history = entries(log)
    hook, _ = crashing_at(1)  # at "swap"
    with pytest.raises(SimulatedCrash):
        LogCleaner(on_swap_step=hook).clean(log, clock.now_ms())
    log.crash()
    reopened = open_log(directory, clock)
    try:
        survivors = compacted(history, 15)
        # the group [0, 10) swapped in, its last segment back; the group [10, 15) never cleaned
        swapped = [e for e in survivors if e[0] < 5]
        assert swapped == [(4, b"marker-0", b"round-0")]
        stale = [e for e in history if 5 <= e[0] < 10]
        assert entries(reopened) == swapped + stale + [e for e in history if e[0] >= 10]
        LogCleaner().clean(reopened, clock.now_ms())
        assert entries(reopened) == survivors
    finally:
        reopened.close()


def test_a_log_truncated_during_a_cleaning_is_not_swapped(
    log_dir: Path, clock: ManualClock
) -> None:
    log = open_log(log_dir, clock)
    try:
        for n in range(3):
            round_of(log, n, clock)
        round_of(log, 3, clock, roll=False)

        def truncate_meanwhile(step: str) -> None:
            if step == "cleaned":
                log.truncate_to(17)

        history = entries(log)
        with pytest.raises(LogCleaningAbortedError, match="changed"):
            LogCleaner(on_swap_step=truncate_meanwhile).clean(log, clock.now_ms())
        assert entries(log) == history[:17]
        assert leftovers(log_dir) == []
    finally:
        log.close()


def test_an_aborted_cleaning_stops_at_its_next_check_and_moves_no_checkpoint(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "compacted-0", clock)
    try:
        for n in range(4):
            round_of(log, n, clock)
        history = entries(log)
        manager = LogCleanerManager(tmp_path, lambda: {TP: log})
        assert manager.grab_filthiest_compacted_log(clock.now_ms()) is not None
        assert manager.grab_filthiest_compacted_log(clock.now_ms()) is None  # in progress
        waiter = threading.Thread(target=manager.abort_cleaning, args=(TP,))
        waiter.start()  # Kafka's abortCleaning: returns once the cleaning has stopped
        for _ in range(500):
            try:
                manager.check_cleaning_aborted(TP)
            except LogCleaningAbortedError:
                break
            time.sleep(0.01)
        check = functools.partial(manager.check_cleaning_aborted, TP)
        with pytest.raises(LogCleaningAbortedError, match="aborted"):
            LogCleaner().clean(log, clock.now_ms(), check_done=check)
        assert waiter.is_alive()
        manager.done_cleaning(TP, 20)  # an aborted cleaning records no offset
        waiter.join(5)
        assert not waiter.is_alive()
        assert manager.all_cleaner_checkpoints() == {}
        assert entries(log) == history
        assert leftovers(tmp_path / "compacted-0") == []
        assert manager.grab_filthiest_compacted_log(clock.now_ms()) is not None  # again
    finally:
        log.close()


# --------------------------------------------------------------------------------------------
# Restart


def test_indexes_time_index_and_epochs_stay_consistent_across_a_restart(
    log_dir: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=1500, index_interval_bytes=0, cleanup_policy="compact")
    log = open_log(log_dir, clock, config)
    for epoch in range(3):
        for i in range(12):
            clock.advance(10)
            log.append_as_leader(
                [Record(b"k-%d" % (i % 5), b"e%d-%d" % (epoch, i), clock.now_ms())], epoch
            )
            if i % 4 == 3:
                log.roll()
    put(log, b"active", b"x", clock)
    epochs = log.leader_epochs
    LogCleaner().clean(log, clock.now_ms())
    cleaned = read_all(log)
    log.close()

    for clean_shutdown in (True, False):
        log = Log(log_dir, config, clock=clock, clean_shutdown=clean_shutdown)
        try:
            assert read_all(log) == cleaned
            assert log.leader_epochs == epochs
            assert log.end_offset_for_epoch(1) == (1, epochs[2].start_offset)
            for segment in log.segments:
                segment.index.sanity_check()
                segment.time_index.sanity_check()
            for record in cleaned:  # by offset, and by timestamp: the first record that late
                first = log.read(record.offset, 1).records
                assert next(iter_batches(first)).last_offset >= record.offset
                found = log.fetch_offset_by_timestamp(record.timestamp_ms)
                assert found is not None
                assert found.offset == min(
                    r.offset for r in cleaned if r.timestamp_ms >= record.timestamp_ms
                )
            assert log.fetch_offset_by_timestamp(clock.now_ms() + 1) is None
        finally:
            log.close()


# --------------------------------------------------------------------------------------------
# The LogManager's part: the cleaner checkpoint, the dirty ratio, retention


@pytest.fixture
def scheduler(clock: ManualClock) -> Iterator[Scheduler]:
    scheduler = Scheduler(clock).startup()
    yield scheduler
    scheduler.shutdown()


def manager_for(
    data_dir: Path, scheduler: Scheduler, clock: ManualClock, **topics: LogConfig
) -> LogManager:
    config = LogManagerConfig(
        default_log_config=LogConfig(segment_bytes=1000, index_interval_bytes=100),
        cleaner_backoff_ms=15_000,
    )
    return LogManager(data_dir, scheduler, config, clock=clock, topic_configs=topics).startup()


def test_a_compacted_topic_keeps_the_last_value_per_key_across_cleaning_and_restart(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock, compacted=COMPACT)
    log = manager.get_or_create_log(TP)
    for n in range(4):
        round_of(log, n, clock)
    round_of(log, 4, clock, roll=False)
    history = entries(log)

    stats = manager.clean_logs()

    assert [s.end_offset for s in stats] == [20]
    checkpoint = OffsetCheckpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert checkpoint.read() == {TP: 20}
    assert manager.clean_logs() == []  # nothing dirty below the active segment
    manager.shutdown()

    manager = manager_for(tmp_path, scheduler, clock, compacted=COMPACT)
    try:
        log = manager.get_or_create_log(TP)
        assert entries(log) == compacted(history, 20)
        assert latest_values(entries(log)) == latest_values(history)
        assert manager.cleaner_manager.all_cleaner_checkpoints() == {TP: 20}
        round_of(log, 5, clock)  # the old active segment and this round: dirty now
        history = entries(log)
        (second,) = manager.clean_logs()
        assert (second.first_dirty_offset, second.end_offset) == (20, 30)
        assert checkpoint.read() == {TP: 30}
        assert latest_values(entries(log)) == latest_values(history)
    finally:
        manager.shutdown()


def test_the_dirtiest_log_above_its_ratio_is_cleaned_first(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    strict = LogConfig(segment_bytes=1000, cleanup_policy="compact", min_cleanable_dirty_ratio=1.0)
    manager = manager_for(tmp_path, scheduler, clock, compacted=COMPACT, strict=strict)
    try:
        log = manager.get_or_create_log(TP)
        never = manager.get_or_create_log(TopicPartition(topic="strict", partition=0))
        plain = manager.get_or_create_log(TopicPartition(topic="plain", partition=0))
        for target in (log, never, plain):
            for n in range(4):
                round_of(target, n, clock)
        # never cleaned yet: all of it is dirty (ratio 1.0), which is not above 1.0
        assert LogToClean.of(never, None, clock.now_ms()).cleanable_ratio == 1.0
        assert [s.first_dirty_offset for s in manager.clean_logs()] == [0]
        assert manager.cleaner_manager.all_cleaner_checkpoints() == {TP: 20}

        round_of(log, 4, clock)  # 5 dirty records after 8 clean ones: below half the bytes
        to_clean = LogToClean.of(log, 20, clock.now_ms())
        sizes = [info.size for info in describe_segments(log).inactive]
        assert (to_clean.clean_bytes, to_clean.cleanable_bytes) == (sum(sizes[:-1]), sizes[-1])
        assert to_clean.cleanable_ratio < 0.5
        assert manager.clean_logs() == []
        assert manager.cleaner_manager.dirtiest_ratio == 1.0  # the strict log, never cleaned

        round_of(log, 5, clock)  # now above it
        assert LogToClean.of(log, 20, clock.now_ms()).cleanable_ratio > 0.5
        assert [(s.first_dirty_offset, s.end_offset) for s in manager.clean_logs()] == [(20, 30)]
        assert plain.num_segments == 5 and never.num_segments == 5  # untouched
    finally:
        manager.shutdown()


def test_the_cleaner_runs_every_backoff_interval(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    config = LogManagerConfig(cleaner_backoff_ms=15_000)
    manager = LogManager(
        tmp_path, scheduler, config, clock=clock, topic_configs={"compacted": COMPACT}
    )
    ran = threading.Event()
    clean_logs = manager.clean_logs

    def wrapper() -> list[CleanerStats]:
        done = clean_logs()
        ran.set()
        return done

    manager.clean_logs = wrapper  # type: ignore[method-assign]
    manager.startup()
    try:
        log = manager.get_or_create_log(TP)
        for n in range(3):
            round_of(log, n, clock)
        clock.advance(14_999)
        assert not ran.wait(0.05)
        clock.advance(1)
        assert ran.wait(5)  # on a scheduler thread
        assert OffsetCheckpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {TP: 15}
    finally:
        manager.shutdown()


def test_retention_deletes_no_segment_of_a_compact_only_log(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    def short_retention(policy: str) -> LogConfig:
        return LogConfig(segment_bytes=1000, retention_ms=1000, cleanup_policy=policy)

    manager = manager_for(
        tmp_path,
        scheduler,
        clock,
        compacted=short_retention("compact"),
        both=short_retention("delete,compact"),
    )
    try:
        compact_only = manager.get_or_create_log(TP)
        both = manager.get_or_create_log(TopicPartition(topic="both", partition=0))
        for target in (compact_only, both):
            for n in range(3):
                round_of(target, n, clock)
        clock.advance(10_000)
        assert manager.cleanup_logs() == 3  # both's three old segments, none of the other
        assert compact_only.num_segments == 4 and compact_only.log_start_offset == 0
        assert both.num_segments == 1 and both.log_start_offset == 15
        assert both.config.cleanup_policy == "compact,delete"
    finally:
        manager.shutdown()


def test_a_truncated_log_is_cleaned_again_from_its_start(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock, compacted=COMPACT)
    try:
        log = manager.get_or_create_log(TP)
        for n in range(4):
            round_of(log, n, clock)
        assert [s.end_offset for s in manager.clean_logs()] == [20]
        log.truncate_to(12)  # a follower's truncation, into the clean section
        for n in range(4, 7):
            round_of(log, n, clock)  # new records at 12.. below the old checkpoint
        (stats,) = manager.clean_logs()
        assert stats.first_dirty_offset == 0
        assert manager.cleaner_manager.all_cleaner_checkpoints() == {TP: stats.end_offset}
        keys = [key for _, key, _ in entries(log)]
        assert len(keys) == len(set(keys))  # each key once: the new records were deduplicated
    finally:
        manager.shutdown()


def test_a_deleted_log_leaves_the_cleaner_checkpoint(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock, compacted=COMPACT, other=COMPACT)
    try:
        other = TopicPartition(topic="other", partition=0)
        for tp in (TP, other):
            log = manager.get_or_create_log(tp)
            for n in range(2):
                round_of(log, n, clock)
        manager.clean_logs()
        assert manager.cleaner_manager.all_cleaner_checkpoints() == {TP: 10, other: 10}
        manager.delete_log(other)
        assert manager.cleaner_manager.all_cleaner_checkpoints() == {TP: 10}
    finally:
        manager.shutdown()


# --------------------------------------------------------------------------------------------
# Configuration


def test_cleanup_policy_is_checked_and_written_one_way() -> None:
    assert LogConfig().cleanup_policy == "delete"
    assert (LogConfig().compact, LogConfig().delete) == (False, True)
    both = LogConfig(cleanup_policy="delete, compact")
    assert (both.cleanup_policy, both.compact, both.delete) == ("compact,delete", True, True)
    assert both == LogConfig(cleanup_policy="compact,delete")
    for bad in ("", "compacted", "compact,compact", "delete;compact"):
        with pytest.raises(ValueError, match="cleanup_policy"):
            LogConfig(cleanup_policy=bad)
    with pytest.raises(ValueError, match="min_cleanable_dirty_ratio"):
        LogConfig(min_cleanable_dirty_ratio=1.5)
    with pytest.raises(ValueError, match="delete_retention_ms"):
        LogConfig(delete_retention_ms=-1)
    with pytest.raises(ValueError, match="min_compaction_lag_ms"):
        LogConfig(min_compaction_lag_ms=-1)
    assert LogConfig().delete_retention_ms == DAY_MS


def test_compaction_settings_go_by_kafkas_topic_config_names() -> None:
    config = log_config_from(
        {
            "cleanup.policy": "compact",
            "delete.retention.ms": "1000",
            "min.cleanable.dirty.ratio": "0.25",
            "min.compaction.lag.ms": "60000",
        }
    )
    assert config == LogConfig(
        cleanup_policy="compact",
        delete_retention_ms=1000,
        min_cleanable_dirty_ratio=0.25,
        min_compaction_lag_ms=60_000,
    )
    assert log_config_from(topic_config_overrides(config)) == config
    with pytest.raises(ValueError, match=r"min\.cleanable\.dirty\.ratio"):
        log_config_from({"min.cleanable.dirty.ratio": "half"})
    with pytest.raises(ValueError, match=r"cleanup\.policy.*compact, delete"):
        log_config_from({"cleanup.policy": "shred"})
