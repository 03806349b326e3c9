"""A Log's leader epoch cache, full truncation, and power loss (`crash(lose_unflushed=True)`).

Every test runs on a real directory with a ManualClock and checks what the log answers as well
as what `leader-epoch-checkpoint` and the segment files hold.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkactor.storage import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCheckpoint,
    Log,
    LogClosedError,
    LogConfig,
    LogManager,
    LogManagerConfig,
    OffsetOutOfRangeError,
    Record,
    RecordTooLargeError,
    TopicPartition,
    build_batch,
    iter_batches,
)
from kafkactor.storage.segment import segment_file_name
from kafkactor.timer import ManualClock, Scheduler
from tests.replication.support import EventLog, captured_events
from tests.storage.held_scheduler import HeldScheduler

TS = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=4096, index_interval_bytes=100)
TINY = LogConfig(segment_bytes=700, index_interval_bytes=100)  # three batches of 3 a segment
# Four segments of three batches: retention keeps the last two.
RETAINED = LogConfig(segment_bytes=700, index_interval_bytes=100, retention_bytes=1000)
E = EpochEntry
UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


# --------------------------------------------------------------------------------------------
# Helpers


def records_at(offset: int, count: int) -> list[Record]:
    """`count` records whose values name their offsets, from `offset` on."""
    return [Record(b"k", (b"value-%d-" % (offset + i)).ljust(40, b"."), TS) for i in range(count)]


def lead(log: Log, epoch: int, appends: int = 1, count: int = 3) -> None:
    """`appends` leader appends of `count` records each, in `epoch`."""
    for _ in range(appends):
        log.append_as_leader(records_at(log.log_end_offset, count), leader_epoch=epoch)


def batch(offset: int, epoch: int, count: int = 3) -> bytes:
    """A leader's batch as a follower fetches it: offsets and epoch already stamped."""
    return build_batch(records_at(offset, count), offset, leader_epoch=epoch)


def offsets(log: Log) -> list[int]:
    found: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 10**9).records
        if not data:
            break
        batches = list(iter_batches(data, deep=True))
        for read in batches:
            for record in read.records():
                assert record.value is not None
                assert record.value.startswith(b"value-%d-" % record.offset)
                found.append(record.offset)
        offset = batches[-1].next_offset
    return found


def epochs(log: Log) -> tuple[EpochEntry, ...]:
    """The log's epoch entries (a call, so a type checker does not carry them across changes)."""
    return log.leader_epochs


def checkpoint_text(log_dir: Path) -> str:
    return (log_dir / LEADER_EPOCH_CHECKPOINT).read_text()


def segment_names(log_dir: Path) -> list[str]:
    return sorted(name for name in os.listdir(log_dir) if name.endswith(".log"))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "events-0"


@pytest.fixture
def opened(log_dir: Path, clock: ManualClock) -> Iterator[Callable[..., Log]]:
    """Opens logs on `log_dir` (keyword arguments go to `Log`) and closes them at the end."""
    logs: list[Log] = []

    def open_log(
        config: LogConfig = SMALL,
        *,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        scheduler: Scheduler | None = None,
    ) -> Log:
        log = Log(
            log_dir,
            config,
            recovery_point,
            clock,
            scheduler,
            clean_shutdown=clean_shutdown,
        )
        logs.append(log)
        return log

    yield open_log
    for log in logs:
        log.close()


@pytest.fixture
def log(opened: Callable[..., Log]) -> Log:
    return opened()


@pytest.fixture
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


# --------------------------------------------------------------------------------------------
# Appends record epochs


def test_a_new_log_knows_no_epoch(log: Log, log_dir: Path, events: EventLog) -> None:
    assert epochs(log) == ()
    assert log.latest_epoch == UNDEFINED_EPOCH
    assert log.end_offset_for_epoch(0) == UNDEFINED
    assert not (log_dir / LEADER_EPOCH_CHECKPOINT).exists()
    assert events.named("log.leader_epochs_rebuilt") == []


def test_a_leader_append_records_its_epoch(log: Log, log_dir: Path) -> None:
    lead(log, 3, appends=2)
    assert epochs(log) == (E(3, 0),)
    assert checkpoint_text(log_dir) == "0\n1\n3 0\n"
    lead(log, 5)  # a new leader's first append starts its epoch
    lead(log, 5)
    assert epochs(log) == (E(3, 0), E(5, 6))
    assert log.latest_epoch == 5
    assert checkpoint_text(log_dir) == "0\n2\n3 0\n5 6\n"
    assert log.end_offset_for_epoch(3) == (3, 6)
    assert log.end_offset_for_epoch(5) == (5, 12)


def test_a_leader_append_of_producer_bytes_records_its_epoch(log: Log) -> None:
    produced = build_batch(records_at(0, 2), 0) + build_batch(records_at(0, 2), 0)
    lead(log, 1)
    info = log.append_as_leader(produced, leader_epoch=4)
    assert (info.first_offset, info.last_offset) == (3, 6)
    assert epochs(log) == (E(1, 0), E(4, 3))


def test_an_append_without_an_epoch_records_none(log: Log, log_dir: Path) -> None:
    lead(log, -1)
    log.append_as_follower(batch(3, -1))
    assert epochs(log) == ()
    assert not (log_dir / LEADER_EPOCH_CHECKPOINT).exists()


def test_a_stale_leader_epoch_is_not_recorded(log: Log) -> None:
    lead(log, 4)
    lead(log, 2)  # appended, but epoch 2 cannot start after epoch 4
    assert log.log_end_offset == 6
    assert epochs(log) == (E(4, 0),)


def test_a_follower_learns_epochs_from_the_batches_it_copies(log: Log, log_dir: Path) -> None:
    log.append_as_follower(batch(0, 1))
    log.append_as_follower(batch(3, 1) + batch(6, 2) + batch(9, 2) + batch(12, 4))
    assert epochs(log) == (E(1, 0), E(2, 6), E(4, 12))
    log.append_as_follower(batch(15, -1) + batch(18, 3))  # no epoch; an older epoch
    assert epochs(log) == (E(1, 0), E(2, 6), E(4, 12))
    log.append_as_follower(batch(21, 7))
    assert epochs(log) == (E(1, 0), E(2, 6), E(4, 12), E(7, 21))
    assert checkpoint_text(log_dir) == "0\n4\n1 0\n2 6\n4 12\n7 21\n"
    assert log.end_offset_for_epoch(3) == (2, 12)  # an epoch this replica never saw
    assert log.end_offset_for_epoch(7) == (7, 24)


def test_a_refused_append_records_no_epoch(opened: Callable[..., Log]) -> None:
    log = opened(LogConfig(segment_bytes=4096, max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append_as_follower(batch(0, 6, count=5))
    assert epochs(log) == ()


def test_a_follower_starting_past_an_empty_log_moves_its_epochs_there(log: Log) -> None:
    assert log.assign_leader_epoch(3)  # led briefly at offset 0, wrote nothing
    log.append_as_follower(batch(100, 3))  # the new leader's log starts at 100
    assert log.log_start_offset == 100
    assert epochs(log) == (E(3, 100),)
    assert log.end_offset_for_epoch(2) == (2, 100)


# --------------------------------------------------------------------------------------------
# A new leader's epoch, OffsetsForLeaderEpoch


def test_a_new_leader_records_its_epoch_at_the_log_end_at_once(log: Log, log_dir: Path) -> None:
    lead(log, 1, appends=2)
    assert log.assign_leader_epoch(2)
    assert epochs(log) == (E(1, 0), E(2, 6))
    assert checkpoint_text(log_dir) == "0\n2\n1 0\n2 6\n"
    assert log.end_offset_for_epoch(1) == (1, 6)  # a follower of epoch 1 must stop at 6
    assert log.end_offset_for_epoch(2) == (2, 6)
    assert not log.assign_leader_epoch(2)
    assert not log.assign_leader_epoch(1)
    lead(log, 2)  # its appends do not move where the epoch started
    assert epochs(log) == (E(1, 0), E(2, 6))
    assert log.end_offset_for_epoch(2) == (2, 9)  # the latest epoch ends at the log end


def test_end_offsets_for_every_kind_of_epoch(log: Log) -> None:
    log.append_as_follower(batch(0, 2) + batch(3, 4) + batch(6, 6))
    assert log.end_offset_for_epoch(UNDEFINED_EPOCH) == UNDEFINED
    assert log.end_offset_for_epoch(1) == (1, 0)  # below the first: ends where it starts
    assert log.end_offset_for_epoch(2) == (2, 3)
    assert log.end_offset_for_epoch(3) == (2, 3)  # unknown: the epoch below it answers
    assert log.end_offset_for_epoch(6) == (6, 9)
    assert log.end_offset_for_epoch(7) == UNDEFINED


def test_a_closed_log_refuses_a_new_epoch(log: Log) -> None:
    log.close()
    with pytest.raises(LogClosedError):
        log.assign_leader_epoch(1)


# --------------------------------------------------------------------------------------------
# Truncation


def test_truncation_forgets_the_epochs_past_the_new_log_end(log: Log, log_dir: Path) -> None:
    log.append_as_follower(batch(0, 1) + batch(3, 1) + batch(6, 2) + batch(9, 3))
    assert log.truncate_to(10)  # inside epoch 3's batch: the whole batch goes
    assert log.log_end_offset == 9
    assert epochs(log) == (E(1, 0), E(2, 6))
    assert log.truncate_to(7)
    assert log.log_end_offset == 6
    assert epochs(log) == (E(1, 0),)
    assert checkpoint_text(log_dir) == "0\n1\n1 0\n"
    assert not log.truncate_to(100)  # past the log end: nothing changes
    assert epochs(log) == (E(1, 0),)
    log.append_as_follower(batch(6, 5))  # the new leader's records follow
    assert epochs(log) == (E(1, 0), E(5, 6))


def test_truncation_keeps_an_epoch_started_before_the_cut(log: Log) -> None:
    log.append_as_follower(batch(0, 1) + batch(3, 2) + batch(6, 2))
    assert log.truncate_to(6)
    assert epochs(log) == (E(1, 0), E(2, 3))
    assert log.end_offset_for_epoch(2) == (2, 6)


def test_truncation_below_the_log_start_clears_the_epochs(
    opened: Callable[..., Log], log_dir: Path, events: EventLog
) -> None:
    log = opened(TINY)
    log.append_as_follower(batch(100, 1))
    assert log.log_start_offset == 100
    assert log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)
    assert epochs(log) == ()
    assert checkpoint_text(log_dir) == "0\n0\n"
    (event,) = events.named("log.truncated_fully")
    assert event["log_start_offset"] == 50


def truncate_fully_case(log: Log, offset: int) -> None:
    """Epochs 1 and 2 over offsets 0-17 in several segments, then a full truncation."""
    lead(log, 1, appends=3)
    lead(log, 2, appends=3)
    assert log.num_segments > 1
    log.truncate_fully_and_start_at(offset)


@pytest.mark.parametrize(
    "offset",
    [0, 4, 9, 17, 18, 40],
    ids=["at-the-start", "inside", "at-an-epoch", "last-offset", "at-the-end", "past-the-end"],
)
def test_truncate_fully_and_start_at_any_offset(
    opened: Callable[..., Log], log_dir: Path, events: EventLog, offset: int
) -> None:
    log = opened(TINY)
    truncate_fully_case(log, offset)
    assert log.log_start_offset == log.log_end_offset == log.recovery_point == offset
    assert epochs(log) == ()
    assert log.latest_epoch == UNDEFINED_EPOCH
    assert log.num_segments == 1
    # a log that starts again at 0 is a new log: its segment's file waits for a write
    assert segment_names(log_dir) == ([segment_file_name(offset, ".log")] if offset else [])
    assert checkpoint_text(log_dir) == "0\n0\n"
    assert log.read(offset, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(offset + 1, 1000)
    (event,) = events.named("log.truncated_fully")
    assert event == {**event, "dir": str(log_dir), "log_start_offset": offset}
    # a follower goes on from there, learning the leader's epoch
    log.append_as_follower(batch(offset, 7))
    assert offsets(log) == [offset, offset + 1, offset + 2]
    assert epochs(log) == (E(7, offset),)


def test_a_log_truncated_fully_reopens_where_it_restarted(
    opened: Callable[..., Log], log_dir: Path
) -> None:
    log = opened(TINY)
    truncate_fully_case(log, 40)
    log.append_as_follower(batch(40, 3))
    log.flush()
    log.close()
    log = opened(TINY)
    assert (log.log_start_offset, log.log_end_offset) == (40, 43)
    assert epochs(log) == (E(3, 40),)


def test_truncate_fully_refuses_a_negative_offset_and_a_closed_log(log: Log) -> None:
    lead(log, 1)
    with pytest.raises(ValueError, match="negative"):
        log.truncate_fully_and_start_at(-1)
    assert log.log_end_offset == 3
    assert epochs(log) == (E(1, 0),)
    log.close()
    with pytest.raises(LogClosedError):
        log.truncate_fully_and_start_at(0)


# --------------------------------------------------------------------------------------------
# Retention


def test_retention_moves_the_first_epoch_to_the_new_log_start(
    opened: Callable[..., Log], log_dir: Path
) -> None:
    log = opened(RETAINED)
    lead(log, 1, appends=4)  # offsets 0-11
    lead(log, 2, appends=4)  # offsets 12-23
    lead(log, 3, appends=4)  # offsets 24-35
    assert epochs(log) == (E(1, 0), E(2, 12), E(3, 24))
    assert log.delete_old_segments() == 2
    start = log.log_start_offset
    assert start == 18  # inside epoch 2
    assert epochs(log) == (E(2, start), E(3, 24))
    assert checkpoint_text(log_dir) == f"0\n2\n2 {start}\n3 24\n"
    assert log.end_offset_for_epoch(1) == (1, start)


def test_retention_at_an_epoch_boundary_drops_the_older_epoch(
    opened: Callable[..., Log],
) -> None:
    log = opened(RETAINED)
    lead(log, 1, appends=6)  # offsets 0-17: segments 0 and 9
    lead(log, 2, appends=6)  # offsets 18-35: segments 18 and 27
    assert [s.base_offset for s in log.segments] == [0, 9, 18, 27]
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 18
    assert epochs(log) == (E(2, 18),)
    assert log.end_offset_for_epoch(1) == (1, 18)


# --------------------------------------------------------------------------------------------
# Reopening


def test_reopening_restores_the_epochs_from_the_checkpoint(
    opened: Callable[..., Log], log_dir: Path, events: EventLog
) -> None:
    log = opened()
    log.append_as_follower(batch(0, 1) + batch(3, 4) + batch(6, 4) + batch(9, 9))
    log.flush()
    log.close()
    for clean_shutdown in (False, True):
        log = opened(clean_shutdown=clean_shutdown)
        assert epochs(log) == (E(1, 0), E(4, 3), E(9, 9))
        assert log.end_offset_for_epoch(4) == (4, 9)
        log.close()
    assert events.named("log.leader_epochs_rebuilt") == []


def test_the_checkpoint_is_what_a_reopened_log_believes(
    opened: Callable[..., Log], log_dir: Path
) -> None:
    log = opened()
    log.append_as_follower(batch(0, 1) + batch(3, 4))
    log.close()
    # Entries the batches alone would not give: the file is read, not rebuilt.
    LeaderEpochCheckpoint(log_dir / LEADER_EPOCH_CHECKPOINT).write([E(0, 0), E(5, 2)])
    log = opened()
    assert epochs(log) == (E(0, 0), E(5, 2))


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_missing_or_corrupt_checkpoint_is_rebuilt_from_the_batches(
    opened: Callable[..., Log], log_dir: Path, events: EventLog, damage: str
) -> None:
    log = opened(TINY)
    log.append_as_follower(batch(0, 1) + batch(3, -1) + batch(6, 2))
    lead(log, 2, appends=2)
    lead(log, 5, appends=3)
    log.roll()
    log.append_as_follower(batch(log.log_end_offset, 8))
    expected = (E(1, 0), E(2, 6), E(5, 15), E(8, 24))
    assert epochs(log) == expected
    assert log.num_segments > 2
    log.close()
    path = log_dir / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    else:
        path.write_text("0\n4\n1 0\n2 6\n5 x\n8 24\n")
    log = opened(TINY)
    assert epochs(log) == expected
    assert checkpoint_text(log_dir) == "0\n4\n1 0\n2 6\n5 15\n8 24\n"  # written again
    (event,) = events.named("log.leader_epochs_rebuilt")
    assert event["dir"] == str(log_dir)
    assert event["reason"] == damage
    assert event["entries"] == 4
    if damage == "corrupt":
        assert f"{path}, line 5" in event["error"]
    log.close()
    opened(TINY).close()  # the rewritten file is read the next time
    assert len(events.named("log.leader_epochs_rebuilt")) == 1


def test_a_rebuilt_cache_starts_at_the_log_start(opened: Callable[..., Log], log_dir: Path) -> None:
    log = opened(RETAINED)
    lead(log, 1, appends=4)  # offsets 0-11
    lead(log, 2, appends=8)  # offsets 12-35
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == 18
    log.close()
    (log_dir / LEADER_EPOCH_CHECKPOINT).unlink()
    log = opened(RETAINED)
    assert log.log_start_offset == 18
    assert epochs(log) == (E(2, 18),)


def test_a_checkpoint_older_than_retention_is_cut_to_the_log_start(
    opened: Callable[..., Log], log_dir: Path
) -> None:
    log = opened(RETAINED)
    lead(log, 1, appends=4)  # offsets 0-11
    lead(log, 2, appends=8)  # offsets 12-35
    path = log_dir / LEADER_EPOCH_CHECKPOINT
    before = path.read_bytes()
    assert log.delete_old_segments() == 2
    log.close()
    path.write_bytes(before)  # the crash came after the segments went, before the checkpoint
    log = opened(RETAINED)
    assert epochs(log) == (E(2, 18),)
    assert checkpoint_text(log_dir) == "0\n1\n2 18\n"


def test_a_log_without_records_is_not_rebuilt(
    opened: Callable[..., Log], log_dir: Path, events: EventLog
) -> None:
    opened().close()  # a new log, closed unwritten, leaves no segment file
    assert segment_names(log_dir) == []
    (log_dir / segment_file_name(0, ".log")).touch()  # an empty one, as a roll leaves
    log = opened()
    assert epochs(log) == ()
    assert events.named("log.leader_epochs_rebuilt") == []


def test_recovery_cutting_a_torn_tail_cuts_the_epochs(
    opened: Callable[..., Log], log_dir: Path
) -> None:
    log = opened()
    log.append_as_follower(batch(0, 1) + batch(3, 2))
    log.close()
    segment = log_dir / segment_file_name(0, ".log")
    data = segment.read_bytes()
    segment.write_bytes(data[:-5])  # the write of epoch 2's batch was torn
    log = opened()
    assert log.log_end_offset == 3
    assert epochs(log) == (E(1, 0),)
    assert checkpoint_text(log_dir) == "0\n1\n1 0\n"


def test_an_epoch_assigned_without_records_is_gone_after_a_restart(
    opened: Callable[..., Log],
) -> None:
    log = opened()
    lead(log, 1)
    log.assign_leader_epoch(2)  # the new leader crashed before anything was appended
    log.close()
    log = opened()
    assert epochs(log) == (E(1, 0),)


# --------------------------------------------------------------------------------------------
# Power loss


def test_a_power_loss_loses_what_was_not_flushed(opened: Callable[..., Log], log_dir: Path) -> None:
    log = opened()
    lead(log, 1, appends=3)  # offsets 0-8
    log.flush()
    flushed_size = (log_dir / segment_file_name(0, ".log")).stat().st_size
    lead(log, 2, appends=2)  # offsets 9-14, never flushed
    assert log.recovery_point == 9
    assert epochs(log) == (E(1, 0), E(2, 9))
    log.crash(lose_unflushed=True)
    assert (log_dir / segment_file_name(0, ".log")).stat().st_size == flushed_size
    assert checkpoint_text(log_dir) == "0\n2\n1 0\n2 9\n"  # fsynced when written: it stays
    log = opened(recovery_point=9)
    assert log.log_end_offset == 9
    assert offsets(log) == list(range(9))
    assert epochs(log) == (E(1, 0),)
    assert checkpoint_text(log_dir) == "0\n1\n1 0\n"
    assert log.end_offset_for_epoch(2) == UNDEFINED
    lead(log, 3)  # the log goes on from the flushed point
    assert offsets(log) == list(range(12))
    assert epochs(log) == (E(1, 0), E(3, 9))


def test_a_plain_crash_keeps_every_append(opened: Callable[..., Log]) -> None:
    log = opened()
    lead(log, 1, appends=3)
    log.flush()
    lead(log, 2, appends=2)
    log.crash()
    log = opened(recovery_point=9)
    assert log.log_end_offset == 15
    assert offsets(log) == list(range(15))
    assert epochs(log) == (E(1, 0), E(2, 9))


def test_a_power_loss_after_everything_was_flushed_loses_nothing(
    opened: Callable[..., Log],
) -> None:
    log = opened()
    lead(log, 1, appends=3)
    log.flush()
    log.crash(lose_unflushed=True)
    log = opened(recovery_point=9)
    assert offsets(log) == list(range(9))
    assert epochs(log) == (E(1, 0),)


def test_a_power_loss_removes_the_segments_rolled_since_the_flush(
    opened: Callable[..., Log], log_dir: Path
) -> None:
    scheduler = HeldScheduler()
    log = opened(TINY, scheduler=scheduler)
    lead(log, 1, appends=5)  # offsets 0-14 in segments 0 (0-8) and 9 (9-14)
    assert "flush-log" in scheduler.held  # the roll's flush never ran
    assert log.recovery_point == 0
    log.flush(13)  # a flush that reached offset 12, inside segment 9's batch 12-14
    assert log.recovery_point == 13
    lead(log, 2, appends=6)  # offsets 15-32, in three more segments
    assert [s.base_offset for s in log.segments] == [0, 9, 18, 27]
    log.crash(lose_unflushed=True)
    assert segment_names(log_dir) == [segment_file_name(b, ".log") for b in (0, 9)]
    assert sorted(name for name in os.listdir(log_dir) if name.endswith(".index")) == [
        segment_file_name(b, ".index") for b in (0, 9)
    ]
    # whole batches survive: the one holding offset 13 reached the recovery point and went
    data = (log_dir / segment_file_name(9, ".log")).read_bytes()
    assert [b.base_offset for b in iter_batches(data)] == [9]
    # opened without recovery, the cut index still places every offset
    log = opened(TINY, clean_shutdown=True)
    assert log.log_end_offset == 12
    assert offsets(log) == list(range(12))
    assert [log.read(o, 1).records[:8] for o in range(12)] == [
        int.to_bytes(o - o % 3, 8, "big") for o in range(12)
    ]
    assert epochs(log) == (E(1, 0),)


def test_a_crashed_log_is_closed(log: Log) -> None:
    lead(log, 1)
    log.crash(lose_unflushed=True)
    log.crash()  # a second crash does nothing
    with pytest.raises(LogClosedError):
        lead(log, 1)


def test_a_log_manager_power_loss_cuts_every_log(tmp_path: Path, clock: ManualClock) -> None:
    config = LogManagerConfig(default_log_config=SMALL)
    events_tp, audit_tp = (
        TopicPartition(topic="events", partition=0),
        TopicPartition(topic="audit", partition=3),
    )
    with Scheduler(clock) as scheduler:
        manager = LogManager(tmp_path, scheduler, config, clock=clock).startup()
        events_log = manager.get_or_create_log(events_tp)
        audit_log = manager.get_or_create_log(audit_tp)
        lead(events_log, 1, appends=2)
        events_log.flush()
        lead(events_log, 2)
        lead(audit_log, 4)
        manager.crash(lose_unflushed=True)
        manager = LogManager(tmp_path, scheduler, config, clock=clock).startup()
        try:
            reopened_events = manager.get_log(events_tp)
            reopened_audit = manager.get_log(audit_tp)
            assert reopened_events is not None
            assert reopened_audit is not None
            assert offsets(reopened_events) == list(range(6))
            assert epochs(reopened_events) == (E(1, 0),)
            assert reopened_audit.log_end_offset == 0
            assert epochs(reopened_audit) == ()
        finally:
            manager.shutdown()


def test_a_log_manager_crash_without_power_loss_keeps_every_append(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogManagerConfig(default_log_config=SMALL)
    tp = TopicPartition(topic="events", partition=0)
    with Scheduler(clock) as scheduler:
        manager = LogManager(tmp_path, scheduler, config, clock=clock).startup()
        log = manager.get_or_create_log(tp)
        lead(log, 1, appends=2)
        manager.crash()
        manager = LogManager(tmp_path, scheduler, config, clock=clock).startup()
        try:
            reopened = manager.get_log(tp)
            assert reopened is not None
            assert offsets(reopened) == list(range(6))
            assert epochs(reopened) == (E(1, 0),)
        finally:
            manager.shutdown()
