"""LogManager: loading and recovering a data dir, clean shutdown, periodic upkeep."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkactor.storage import (
    CLEAN_SHUTDOWN_FILE,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    DataDirectoryInUseError,
    InvalidLogDirectoryError,
    LogConfig,
    LogManager,
    LogManagerConfig,
    OffsetCheckpoint,
    Record,
    TopicPartition,
    iter_batches,
)
from kafkactor.timer import ManualClock, Scheduler

TP = TopicPartition(topic="events", partition=0)
OTHER = TopicPartition(topic="audit", partition=3)
SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=64, retention_ms=10_000)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def scheduler(clock: ManualClock) -> Iterator[Scheduler]:
    scheduler = Scheduler(clock).startup()
    yield scheduler
    scheduler.shutdown()


def manager_for(
    data_dir: Path, scheduler: Scheduler, clock: ManualClock, **config: int
) -> LogManager:
    return LogManager(
        data_dir,
        scheduler,
        LogManagerConfig(default_log_config=SMALL, **config),
        clock=clock,
    )


def fill(manager: LogManager, tp: TopicPartition, count: int, timestamp_ms: int) -> None:
    log = manager.get_or_create_log(tp)
    for i in range(count):
        log.append_as_leader([Record(None, b"value-%d" % i, timestamp_ms)], leader_epoch=0)


def values(manager: LogManager, tp: TopicPartition) -> list[bytes | None]:
    """Every value in the log (a read returns one segment's batches, as Kafka's fetch does)."""
    log = manager.get_log(tp)
    assert log is not None
    found: list[bytes | None] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(iter_batches(log.read(offset, 10**9).records))
        found.extend(r.value for batch in batches for r in batch.records())
        offset = batches[-1].next_offset
    return found


def crash(manager: LogManager) -> None:
    """Drop a manager as a killed process would: no flush, no checkpoint, no marker."""
    for log in manager.all_logs().values():
        log.close()
    manager._release_directory_lock()


def test_clean_shutdown_checkpoints_marks_and_skips_recovery_on_restart(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock).startup()
    fill(manager, TP, 30, clock.now_ms())
    fill(manager, OTHER, 5, clock.now_ms())
    manager.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert OffsetCheckpoint(tmp_path / RECOVERY_POINT_CHECKPOINT).read() == {TP: 30, OTHER: 5}

    restarted = manager_for(tmp_path, scheduler, clock).startup()
    assert restarted.had_clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on is unclean
    assert values(restarted, TP) == [b"value-%d" % i for i in range(30)]
    assert values(restarted, OTHER) == [b"value-%d" % i for i in range(5)]
    log = restarted.get_log(TP)
    assert log is not None
    assert log.recovered_bytes_truncated == 0
    restarted.shutdown()


def test_after_a_crash_logs_are_recovered_from_their_recovery_points(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock).startup()
    fill(manager, TP, 30, clock.now_ms())
    log = manager.get_log(TP)
    assert log is not None
    log.flush()
    manager.checkpoint_recovery_points()
    active = log.segments[-1].log_path
    crash(manager)
    with active.open("ab") as torn:  # half a batch written when the process died
        torn.write(b"\x00" * 7 + b"\x01\x02")

    restarted = manager_for(tmp_path, scheduler, clock).startup()
    assert not restarted.had_clean_shutdown
    recovered = restarted.get_log(TP)
    assert recovered is not None
    assert recovered.recovered_bytes_truncated == 9
    assert values(restarted, TP) == [b"value-%d" % i for i in range(30)]
    recovered.append_as_leader([Record(None, b"after", 0)], leader_epoch=1)
    assert recovered.log_end_offset == 31
    restarted.shutdown()


def test_a_data_dir_is_locked_against_a_second_manager(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    first = manager_for(tmp_path, scheduler, clock).startup()
    with pytest.raises(DataDirectoryInUseError, match="in use"):
        manager_for(tmp_path, scheduler, clock).startup()
    first.shutdown()
    manager_for(tmp_path, scheduler, clock).startup().shutdown()  # free again


def test_a_directory_that_is_not_a_partition_is_a_typed_error(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    (tmp_path / "not_a_partition").mkdir()
    with pytest.raises(InvalidLogDirectoryError, match="not_a_partition"):
        manager_for(tmp_path, scheduler, clock).startup()
    (tmp_path / "not_a_partition").rmdir()
    manager_for(tmp_path, scheduler, clock).startup().shutdown()  # the lock was released


def test_a_malformed_recovery_checkpoint_names_the_file(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_text("0\n1\nevents zero 12\n")
    with pytest.raises(CheckpointError, match=RECOVERY_POINT_CHECKPOINT):
        manager_for(tmp_path, scheduler, clock).startup()


def test_retention_deletes_old_segments_of_every_log(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock).startup()
    fill(manager, TP, 40, clock.now_ms() - 60_000)  # older than retention_ms
    log = manager.get_log(TP)
    assert log is not None
    segments_before = log.num_segments
    assert segments_before > 2
    assert manager.cleanup_logs() == segments_before - 1  # all but the active segment
    assert log.log_start_offset == log.segments[0].base_offset > 0
    manager.shutdown()


def test_flush_job_flushes_only_logs_past_their_flush_interval(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = LogManager(
        tmp_path,
        scheduler,
        LogManagerConfig(default_log_config=SMALL),
        clock=clock,
        topic_configs={"events": LogConfig(flush_interval_ms=500)},
    )
    manager.startup()
    fill(manager, TP, 3, clock.now_ms())
    fill(manager, OTHER, 3, clock.now_ms())
    flushed = manager.get_log(TP)
    unflushed = manager.get_log(OTHER)
    assert flushed is not None
    assert unflushed is not None
    clock.advance(499)
    manager.flush_dirty_logs()
    assert flushed.recovery_point == 0
    clock.advance(1)
    manager.flush_dirty_logs()
    assert flushed.recovery_point == 3
    assert unflushed.recovery_point == 0  # no flush_interval_ms: only flushed on shutdown
    manager.shutdown()


def run_when_scheduled(
    manager: LogManager, name: str
) -> tuple[threading.Event, Callable[[], object]]:
    """Wrap one of the manager's periodic jobs so the test can wait for its run."""
    ran = threading.Event()
    job: Callable[[], object] = getattr(manager, name)

    def wrapper() -> object:
        result = job()
        ran.set()
        return result

    setattr(manager, name, wrapper)
    return ran, job


@pytest.mark.parametrize(
    ("job", "interval_key"),
    [
        ("checkpoint_recovery_points", "recovery_point_checkpoint_interval_ms"),
        ("cleanup_logs", "retention_check_interval_ms"),
        ("flush_dirty_logs", "flush_check_interval_ms"),
    ],
)
def test_periodic_jobs_run_on_the_scheduler_at_their_interval(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock, job: str, interval_key: str
) -> None:
    manager = manager_for(tmp_path, scheduler, clock, **{interval_key: 10_000})
    ran, _ = run_when_scheduled(manager, job)
    manager.startup()
    clock.advance(9_999)
    assert not ran.wait(0.05)
    clock.advance(1)
    assert ran.wait(5)
    manager.shutdown()


def test_scheduled_checkpoint_writes_recovery_points(
    tmp_path: Path, scheduler: Scheduler, clock: ManualClock
) -> None:
    manager = manager_for(tmp_path, scheduler, clock, recovery_point_checkpoint_interval_ms=100)
    ran, _ = run_when_scheduled(manager, "checkpoint_recovery_points")
    manager.startup()
    fill(manager, TP, 4, clock.now_ms())
    log = manager.get_log(TP)
    assert log is not None
    log.flush()
    clock.advance(100)
    assert ran.wait(5)
    assert OffsetCheckpoint(tmp_path / RECOVERY_POINT_CHECKPOINT).read() == {TP: 4}
    manager.shutdown()
