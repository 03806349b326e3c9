"""The log start offset a DeleteRecords moves (KIP-107): Log.maybe_increment_log_start_offset,
the retention pass that deletes the segments below it, and LogManager's
log-start-offset-checkpoint that keeps it across a restart."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.storage import (
    LOG_START_OFFSET_CHECKPOINT,
    Log,
    LogConfig,
    LogManager,
    LogManagerConfig,
    LogStartOffsetOutOfRangeError,
    OffsetCheckpoint,
    OffsetOutOfRangeError,
    Record,
    TopicPartition,
    iter_batches,
)
from kafkactor.storage.time_index import EARLIEST_TIMESTAMP
from kafkactor.timer import ManualClock, Scheduler
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition(topic="events", partition=0)
OTHER = TopicPartition(topic="audit", partition=1)
# about three one-record batches a segment
SMALL = LogConfig(segment_bytes=200, index_interval_bytes=64)


def filled(directory: Path, count: int, config: LogConfig = SMALL) -> Log:
    log = Log(directory, config, clock=ManualClock(1_000))
    for i in range(count):
        log.append_as_leader([Record(b"k", b"value-%02d" % i + b"." * 30, 0)], leader_epoch=0)
    return log


def first_value(log: Log) -> bytes | None:
    batch = next(iter_batches(log.read(log.log_start_offset, 10**6).records))
    return next(iter(batch.records())).value


def test_the_start_moves_forward_only_and_never_past_the_high_watermark(tmp_path: Path) -> None:
    log = filled(tmp_path / "events-0", 10)
    assert log.maybe_increment_log_start_offset(4, "ClientRecordDeletion", high_watermark=8)
    assert log.log_start_offset == 4
    assert not log.maybe_increment_log_start_offset(2, "ClientRecordDeletion", high_watermark=8)
    assert log.log_start_offset == 4
    with pytest.raises(LogStartOffsetOutOfRangeError) as refused:
        log.maybe_increment_log_start_offset(9, "ClientRecordDeletion", high_watermark=8)
    assert str(refused.value) == (
        "Cannot increment the log start offset to 9 of partition events-0 since it is larger "
        "than the high watermark 8"
    )
    with pytest.raises(LogStartOffsetOutOfRangeError):  # without a HW: the log end bounds it
        log.maybe_increment_log_start_offset(11, "LeaderOffsetIncremented")
    assert log.maybe_increment_log_start_offset(10, "LeaderOffsetIncremented")
    assert log.log_start_offset == log.log_end_offset == 10
    log.close()


def test_reads_below_the_start_are_out_of_range_and_earliest_answers_it(tmp_path: Path) -> None:
    log = filled(tmp_path / "events-0", 10)
    log.maybe_increment_log_start_offset(5, "ClientRecordDeletion")
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 10**6)
    assert first_value(log) == b"value-05" + b"." * 30
    found = log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP)
    assert found is not None
    assert found.offset == 5
    log.close()


def test_segments_wholly_below_the_start_go_at_the_next_retention_pass(tmp_path: Path) -> None:
    # a compacted topic keeps them from retention by age and size, not from this
    log = filled(
        tmp_path / "events-0",
        12,
        dataclasses.replace(SMALL, segment_bytes=300, cleanup_policy="compact"),
    )
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    start = bases[2] + 1  # inside the third segment
    log.maybe_increment_log_start_offset(start, "ClientRecordDeletion")
    assert [s.base_offset for s in log.segments] == bases  # nothing deleted yet
    assert log.delete_old_segments() == 2
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.log_start_offset == start  # not moved back to the segment's base
    assert first_value(log) == b"value-%02d" % start + b"." * 30
    log.close()


def test_the_leader_epochs_below_the_start_are_forgotten(tmp_path: Path) -> None:
    log = Log(tmp_path / "events-0", SMALL)
    for epoch in range(3):
        log.append_as_leader([Record(None, b"x" * 40, 0)] * 2, leader_epoch=epoch)
    assert [e.start_offset for e in log.leader_epochs] == [0, 2, 4]
    log.maybe_increment_log_start_offset(3, "ClientRecordDeletion")
    assert [(e.epoch, e.start_offset) for e in log.leader_epochs] == [(1, 3), (2, 4)]
    log.close()


@pytest.fixture
def scheduler() -> Iterator[Scheduler]:
    scheduler = Scheduler(ManualClock(1_000)).startup()
    yield scheduler
    scheduler.shutdown()


def manager(data_dir: Path, scheduler: Scheduler) -> LogManager:
    # the records' timestamps (0) are not past retention on this clock
    config = LogManagerConfig(default_log_config=SMALL)
    return LogManager(data_dir, scheduler, config, clock=scheduler.clock).startup()


def fill(log: Log, count: int) -> None:
    for i in range(count):
        log.append_as_leader([Record(None, b"value-%02d" % i + b"." * 30, 0)], leader_epoch=0)


def test_the_checkpoint_keeps_a_moved_start_across_a_clean_restart(
    tmp_path: Path, scheduler: Scheduler
) -> None:
    first = manager(tmp_path, scheduler)
    moved, untouched = first.get_or_create_log(TP), first.get_or_create_log(OTHER)
    fill(moved, 10)
    fill(untouched, 10)
    moved.maybe_increment_log_start_offset(
        moved.segments[1].base_offset + 1, "ClientRecordDeletion"
    )
    start = moved.log_start_offset
    first.shutdown()
    # Kafka's format, and only the log whose start lies inside its first segment
    text = (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_text()
    assert text == f"0\n1\nevents 0 {start}\n"

    again = manager(tmp_path, scheduler)
    log = again.get_log(TP)
    assert log is not None
    assert log.log_start_offset == start
    with pytest.raises(OffsetOutOfRangeError):
        log.read(start - 1, 10**6)
    other = again.get_log(OTHER)
    assert other is not None
    assert other.log_start_offset == 0
    again.shutdown()


def test_a_crashed_broker_keeps_the_start_its_last_checkpoint_wrote(
    tmp_path: Path, scheduler: Scheduler
) -> None:
    first = manager(tmp_path, scheduler)
    log = first.get_or_create_log(TP)
    fill(log, 10)
    log.maybe_increment_log_start_offset(7, "ClientRecordDeletion")
    first.checkpoint_log_start_offsets()
    log.maybe_increment_log_start_offset(8, "ClientRecordDeletion")  # never checkpointed
    first.crash()
    again = manager(tmp_path, scheduler)
    reopened = again.get_log(TP)
    assert reopened is not None
    assert reopened.log_start_offset == 7
    again.shutdown()


def test_once_retention_deleted_the_segments_below_it_no_entry_is_needed(
    tmp_path: Path, scheduler: Scheduler
) -> None:
    first = manager(tmp_path, scheduler)
    log = first.get_or_create_log(TP)
    fill(log, 10)
    base = log.segments[2].base_offset
    log.maybe_increment_log_start_offset(base, "ClientRecordDeletion")
    first.cleanup_logs()
    first.checkpoint_log_start_offsets()
    assert OffsetCheckpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT).read() == {}
    first.shutdown()
    again = manager(tmp_path, scheduler)
    reopened = again.get_log(TP)
    assert reopened is not None
    assert reopened.log_start_offset == base
    again.shutdown()


def test_a_deleted_log_leaves_the_checkpoint(tmp_path: Path, scheduler: Scheduler) -> None:
    first = manager(tmp_path, scheduler)
    log = first.get_or_create_log(TP)
    fill(log, 10)
    log.maybe_increment_log_start_offset(5, "ClientRecordDeletion")
    first.checkpoint_log_start_offsets()
    first.delete_log(TP)
    assert OffsetCheckpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT).read() == {}
    recreated = first.get_or_create_log(TP)  # the topic created again starts at 0
    fill(recreated, 3)
    first.shutdown()
    again = manager(tmp_path, scheduler)
    reopened = again.get_log(TP)
    assert reopened is not None
    assert reopened.log_start_offset == 0
    again.shutdown()


def test_a_checkpoint_past_the_log_end_starts_the_log_at_its_end(tmp_path: Path) -> None:
    # a power loss took records the checkpoint's start had passed: the start stays in the log
    log = filled(tmp_path / "events-0", 5)
    log.flush()
    log.close()
    reopened = Log(tmp_path / "events-0", SMALL, log_start_offset=9)
    assert reopened.log_start_offset == reopened.log_end_offset == 5
    reopened.close()


def test_the_checkpoint_is_written_on_its_schedule(tmp_path: Path, scheduler: Scheduler) -> None:
    clock = scheduler.clock
    assert isinstance(clock, ManualClock)
    config = LogManagerConfig(default_log_config=SMALL, log_start_offset_checkpoint_interval_ms=100)
    manager = LogManager(tmp_path, scheduler, config, clock=clock).startup()
    log = manager.get_or_create_log(TP)
    fill(log, 10)
    log.maybe_increment_log_start_offset(5, "ClientRecordDeletion")
    checkpoint = OffsetCheckpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT)
    clock.advance(99)
    assert not checkpoint.path.exists()
    clock.advance(1)
    wait_until(lambda: checkpoint.path.exists() and checkpoint.read() == {TP: 5})
    manager.shutdown()
