"""The logs of one data directory: opening and recovering them, and their periodic upkeep."""

from __future__ import annotations

import fcntl
import functools
import os
import threading
from collections.abc import Collection, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

from kafkactor import tracing
from kafkactor.storage.checkpoint import OffsetCheckpoint, TopicPartition
from kafkactor.storage.config import LogConfig
from kafkactor.storage.errors import StorageError
from kafkactor.storage.log import Log, parse_topic_partition
from kafkactor.storage.log_cleaner import CleanerStats, LogCleaner
from kafkactor.storage.log_cleaner_manager import (
    CLEANER_OFFSET_CHECKPOINT,
    LogCleanerManager,
    LogCleaningAbortedError,
)
from kafkactor.timer import Clock, ScheduledTask, Scheduler, SystemClock

_log = tracing.get_logger("kafkactor.storage")

__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "DataDirectoryInUseError",
    "LogManager",
    "LogManagerConfig",
]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


class DataDirectoryInUseError(StorageError):
    """Another LogManager (in this or another process) holds the data directory's lock."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LogManagerConfig:
    """The broker-level log settings of Kafka's LogManager (`log.*` broker configs)."""

    default_log_config: LogConfig = field(default_factory=LogConfig)
    retention_check_interval_ms: int = 5 * 60 * 1000  # log.retention.check.interval.ms
    flush_check_interval_ms: int = 1000  # log.flush.scheduler.interval.ms (Kafka: Long.Max)
    recovery_point_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    # log.flush.start.offset.checkpoint.interval.ms
    log_start_offset_checkpoint_interval_ms: int = 60_000
    # log.cleaner.threads: 0 turns compaction off (Kafka's log.cleaner.enable=false); one
    # cleaner at most here, run on the scheduler
    cleaner_threads: int = 1
    cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms: how often compaction is tried

    def __post_init__(self) -> None:
        if self.cleaner_threads not in (0, 1):
            raise ValueError(f"cleaner_threads must be 0 or 1, got {self.cleaner_threads}")
        if self.cleaner_backoff_ms < 1:
            raise ValueError(f"cleaner_backoff_ms must be positive, got {self.cleaner_backoff_ms}")


class LogManager:
    """Kafka's `LogManager` for one data directory.

    On `startup()` it locks the directory, opens every `<topic>-<partition>` log in it and
    recovers them from the recovery points in `recovery-point-offset-checkpoint`, or skips
    recovery when the previous shutdown was clean (`.kafka_cleanshutdown` present); each log
    starts where `log-start-offset-checkpoint` says when a DeleteRecords moved its start inside
    its first segment. It then schedules retention, flushing of logs older than their
    `flush_interval_ms`, the recovery-point and log-start-offset checkpoints and, unless
    `cleaner_threads` is 0, compaction of the logs with `cleanup.policy=compact`
    (`clean_logs`, Kafka's cleaner thread) on the given Scheduler.
    `shutdown()` stops a cleaning in progress, flushes, checkpoints, closes every log and
    leaves the clean-shutdown marker.
    """

    def __init__(
        self,
        data_dir: Path,
        scheduler: Scheduler,
        config: LogManagerConfig | None = None,
        clock: Clock | None = None,
        topic_configs: MutableMapping[str, LogConfig] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.scheduler = scheduler
        self.config = config if config is not None else LogManagerConfig()
        self.clock: Clock = clock if clock is not None else SystemClock()
        # per-topic configs, shared with the broker (a mapping that may read them elsewhere,
        # such as ZooKeeper, on a miss); the default config for topics it does not name
        self._topic_configs: MutableMapping[str, LogConfig] = (
            topic_configs if topic_configs is not None else {}
        )
        self._logs: dict[TopicPartition, Log] = {}
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._tasks: list[ScheduledTask] = []
        self._checkpoint = OffsetCheckpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT)
        self._start_checkpoint = OffsetCheckpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        self.had_clean_shutdown = False
        self.cleaner = LogCleaner()
        self.cleaner_manager = LogCleanerManager(self.data_dir, self.all_logs)

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> LogManager:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._acquire_directory_lock()
        try:
            self._load_logs()
        except BaseException:
            self._release_directory_lock()
            raise
        interval = self.config
        self._tasks = [
            self.scheduler.schedule(
                "kafka-log-retention",
                self.cleanup_logs,
                delay_ms=interval.retention_check_interval_ms,
                period_ms=interval.retention_check_interval_ms,
            ),
            self.scheduler.schedule(
                "kafka-log-flusher",
                self.flush_dirty_logs,
                delay_ms=interval.flush_check_interval_ms,
                period_ms=interval.flush_check_interval_ms,
            ),
            self.scheduler.schedule(
                "kafka-recovery-point-checkpoint",
                self.checkpoint_recovery_points,
                delay_ms=interval.recovery_point_checkpoint_interval_ms,
                period_ms=interval.recovery_point_checkpoint_interval_ms,
            ),
            self.scheduler.schedule(
                "kafka-log-start-offset-checkpoint",
                self.checkpoint_log_start_offsets,
                delay_ms=interval.log_start_offset_checkpoint_interval_ms,
                period_ms=interval.log_start_offset_checkpoint_interval_ms,
            ),
        ]
        if interval.cleaner_threads:
            self._tasks.append(
                self.scheduler.schedule(
                    "kafka-log-cleaner",
                    self.clean_logs,
                    delay_ms=interval.cleaner_backoff_ms,
                    period_ms=interval.cleaner_backoff_ms,
                )
            )
        return self

    def _load_logs(self) -> None:
        marker = self.data_dir / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        recovery_points = self._checkpoint.read()
        log_start_offsets = self._start_checkpoint.read()
        for directory in sorted(p for p in self.data_dir.iterdir() if p.is_dir()):
            tp = parse_topic_partition(directory)
            self._logs[tp] = Log(
                directory,
                self.config_for(tp.topic),
                recovery_point=recovery_points.get(tp, 0),
                clock=self.clock,
                scheduler=self.scheduler,
                clean_shutdown=self.had_clean_shutdown,
                log_start_offset=log_start_offsets.get(tp, 0),
            )
        _log.info(
            "log_manager.loaded",
            data_dir=str(self.data_dir),
            logs=len(self._logs),
            clean_shutdown=self.had_clean_shutdown,
        )
        # From here on a crash is not a clean shutdown.
        marker.unlink(missing_ok=True)

    def shutdown(self) -> None:
        """Stop the periodic jobs, flush and checkpoint every log, close them, mark clean."""
        self._stop_cleaning()
        with self._lock:
            if self._lock_fd is None:
                return
            self._cancel_tasks()
            for log in self._logs.values():
                log.flush()
            self.checkpoint_recovery_points()
            self.checkpoint_log_start_offsets()
            for log in self._logs.values():
                log.close()
            marker = self.data_dir / CLEAN_SHUTDOWN_FILE
            marker.touch()
            _fsync_directory(self.data_dir)
            self._logs.clear()
            self._release_directory_lock()

    def crash(self, *, lose_unflushed: bool = False) -> None:
        """Stop as a killed process would: no flush, no checkpoint, no clean-shutdown marker.

        The periodic jobs stop and the files are closed (what was written stays, as in the
        page cache of a crashed process); the next `startup()` recovers from the recovery
        points. `lose_unflushed=True` models an OS crash or power loss instead: every log also
        loses what it had not fsynced (see `Log.crash`).
        """
        self._stop_cleaning()
        with self._lock:
            if self._lock_fd is None:
                return
            self._cancel_tasks()
            for log in self._logs.values():
                log.crash(lose_unflushed=lose_unflushed)
            self._logs.clear()
            self._release_directory_lock()

    def _stop_cleaning(self) -> None:
        # Outside the manager's lock: the cleaning being waited for may need it to finish.
        with self._lock:
            for task in self._tasks:
                if task.name == "kafka-log-cleaner":
                    task.cancel()
        self.cleaner_manager.abort_cleaning()

    def _cancel_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        self._tasks = []

    def _acquire_directory_lock(self) -> None:
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirectoryInUseError(
                f"{self.data_dir} is in use by another log manager"
            ) from None
        self._lock_fd = fd

    def _release_directory_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    # -- logs ----------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.config.default_log_config)

    def update_topic_config(
        self, topic: str, config: LogConfig, *, except_for: Collection[TopicPartition] = ()
    ) -> None:
        """Kafka's `LogManager.updateTopicConfig`: logs of `topic` created from now on get
        `config`, and so does every one already open but those in `except_for` (served by a
        partition actor, which swaps its own log's config)."""
        with self._lock:
            self._topic_configs[topic] = config
            logs = [
                log for tp, log in self._logs.items() if tp.topic == topic and tp not in except_for
            ]
        for log in logs:
            log.update_config(config)

    def get_log(self, tp: TopicPartition) -> Log | None:
        with self._lock:
            return self._logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """The log of `tp`, created empty (in `<topic>-<partition>/`) when it does not exist."""
        with self._lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if config is not None:
                self._topic_configs[tp.topic] = config
            log = Log(
                self.data_dir / f"{tp.topic}-{tp.partition}",
                self.config_for(tp.topic),
                clock=self.clock,
                scheduler=self.scheduler,
            )
            self._logs[tp] = log
            _log.info(
                "log_manager.created",
                data_dir=str(self.data_dir),
                topic=tp.topic,
                partition=tp.partition,
            )
            return log

    def delete_log(self, tp: TopicPartition) -> None:
        with self._lock:
            log = self._logs.pop(tp, None)
        if log is not None:
            self.cleaner_manager.abort_cleaning(tp)  # it writes files in the directory
            log.delete()
            self.checkpoint_log_start_offsets()  # a topic created again starts at 0
            if log.config.compact:
                self.cleaner_manager.update_checkpoints()  # drops its first dirty offset

    def all_logs(self) -> dict[TopicPartition, Log]:
        with self._lock:
            return dict(self._logs)

    # -- periodic upkeep -----------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        return sum(log.delete_old_segments() for log in self.all_logs().values())

    def clean_logs(self) -> list[CleanerStats]:
        """Compact the filthiest compacted logs, one after the other, while one's dirty ratio is
        above its `min.cleanable.dirty.ratio` (each log once a run); returns what each cleaning
        did. Kafka's cleaner thread, run every `cleaner_backoff_ms` on the Scheduler."""
        now = self.clock.now_ms()
        done: list[CleanerStats] = []
        tried: set[TopicPartition] = set()
        manager = self.cleaner_manager
        while (to_clean := manager.grab_filthiest_compacted_log(now, skip=tried)) is not None:
            tp = to_clean.topic_partition
            tried.add(tp)
            end_offset: int | None = None
            try:
                stats = self.cleaner.clean(
                    to_clean.log,
                    now,
                    to_clean.first_dirty_offset,
                    check_done=functools.partial(manager.check_cleaning_aborted, tp),
                )
                if stats is not None:
                    end_offset = stats.end_offset
                    done.append(stats)
            except LogCleaningAbortedError as error:
                _log.info(
                    "log_cleaner.aborted", topic=tp.topic, partition=tp.partition, reason=str(error)
                )
            except (StorageError, OSError) as error:  # tried again at the next run
                _log.warning(
                    "log_cleaner.failed", topic=tp.topic, partition=tp.partition, error=str(error)
                )
            finally:
                manager.done_cleaning(tp, end_offset)
        return done

    def flush_dirty_logs(self) -> None:
        """Flush every log whose last flush is older than its `flush_interval_ms`."""
        now = self.clock.now_ms()
        for log in self.all_logs().values():
            interval = log.config.flush_interval_ms
            if interval is not None and now - log.last_flush_ms >= interval:
                log.flush()

    def checkpoint_recovery_points(self) -> None:
        """Write every log's recovery point to `recovery-point-offset-checkpoint`."""
        with self._lock:
            self._checkpoint.write({tp: log.recovery_point for tp, log in self._logs.items()})

    def checkpoint_log_start_offsets(self) -> None:
        """Write `log-start-offset-checkpoint`: Kafka's `checkpointLogStartOffsetsInDir`, only
        the logs whose start lies past their first segment's base (a DeleteRecords moved it;
        every other log starts at its first segment anyway)."""
        with self._lock:
            self._start_checkpoint.write(
                {
                    tp: log.log_start_offset
                    for tp, log in self._logs.items()
                    if log.log_start_offset > log.first_segment_base_offset
                }
            )


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
