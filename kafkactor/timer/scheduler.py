"""Kafka's KafkaScheduler: named one-shot and periodic background tasks on a small thread pool."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kafkactor import tracing
from kafkactor.timer.clock import Clock, ManualClock, SystemClock
from kafkactor.timer.system_timer import Timer
from kafkactor.timer.task import TimerTask

_log = tracing.get_logger("kafkactor.scheduler")

# Set while a pool thread runs a task: a shutdown() from inside a task cannot wait for itself.
_in_task = threading.local()

# How long the driving thread waits for a bucket before looking again (it is woken at once when
# an earlier bucket arrives or the scheduler shuts down, so this only bounds idle polling).
_DRIVER_POLL_MS = 500


class SchedulerNotRunningError(RuntimeError):
    """Raised when a task is scheduled on a scheduler that is not started or already shut down."""


class ScheduledTask(TimerTask):
    """One named task of a `Scheduler`: runs `fn` after `delay_ms`, then every `period_ms`.

    Periodic tasks run at a fixed rate (Kafka's scheduleAtFixedRate) but never overlap
    themselves: the next run is planned when one finishes, and periods missed while it ran late
    are skipped rather than run back to back.
    """

    __slots__ = ("_cancelled", "_scheduler", "due_ms", "fn", "name", "period_ms", "runs")

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        name: str,
        fn: Callable[[], object],
        delay_ms: int,
        period_ms: int | None,
        due_ms: int,
    ) -> None:
        super().__init__(delay_ms)
        self._scheduler = scheduler
        self.name = name
        self.fn = fn
        self.period_ms = period_ms
        self.due_ms = due_ms
        self.runs = 0
        self._cancelled = False

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        """Stop future runs (a run already under way finishes)."""
        self._cancelled = True
        super().cancel()
        self._scheduler._forget(self)

    def run(self) -> None:
        # Called by the timer on the driving thread: hand the work to the pool.
        self._scheduler._submit(self)

    def _execute(self) -> None:
        _in_task.active = True
        try:
            self.fn()
        except Exception:
            _log.exception("scheduler.task_error", task=self.name)
        finally:
            _in_task.active = False
            self.runs += 1
            self._scheduler._after_run(self)


class Scheduler:
    """Kafka's `KafkaScheduler`: runs named tasks once or periodically on `threads` pool threads.

    Time comes from the injected clock. On a SystemClock a driving thread advances an internal
    `Timer`; on a ManualClock due tasks are handed to the pool whenever the clock is advanced, so
    tests control time without sleeping. An exception in a task is logged (event
    `scheduler.task_error`) and does not stop the scheduler or later runs of a periodic task.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        threads: int = 1,
        thread_name_prefix: str = "kafkactor-scheduler",
    ) -> None:
        if threads < 1:
            raise ValueError(f"a scheduler needs at least one thread, got {threads}")
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._threads = threads
        self._prefix = thread_name_prefix
        self._timer = Timer(self._clock)
        self._lock = threading.Lock()
        self._tasks: set[ScheduledTask] = set()
        self._pool: ThreadPoolExecutor | None = None
        self._driver: threading.Thread | None = None
        self._running = False

    @property
    def is_started(self) -> bool:
        return self._running

    @property
    def clock(self) -> Clock:
        return self._clock

    def startup(self) -> Scheduler:
        with self._lock:
            if self._running:
                raise RuntimeError("the scheduler is already started")
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix=self._prefix)
            self._running = True
        if isinstance(self._clock, ManualClock):
            self._clock.add_listener(self._on_clock_moved)
        else:
            self._driver = threading.Thread(
                target=self._drive, name=f"{self._prefix}-timer", daemon=True
            )
            self._driver.start()
        return self

    def schedule(
        self,
        name: str,
        fn: Callable[[], object],
        delay_ms: int = 0,
        period_ms: int | None = None,
    ) -> ScheduledTask:
        """Run `fn` after `delay_ms`, and then every `period_ms` when given (> 0)."""
        if period_ms is not None and period_ms <= 0:
            raise ValueError(f"period_ms must be positive, got {period_ms} for task {name!r}")
        now = self._clock.now_ms()
        task = ScheduledTask(
            self,
            name=name,
            fn=fn,
            delay_ms=max(delay_ms, 0),
            period_ms=period_ms,
            due_ms=now + max(delay_ms, 0),
        )
        with self._lock:
            if not self._running:
                raise SchedulerNotRunningError(f"cannot schedule {name!r}: scheduler not running")
            self._tasks.add(task)
        self._timer.add_at(task, task.due_ms)  # the same clock read as due_ms
        return task

    def shutdown(self) -> None:
        """Cancel every pending and periodic task and wait for running ones to finish.

        Called from inside one of its own tasks, it does not wait for the pool (that would wait
        for itself); the pool's threads end once their current tasks finish.
        """
        with self._lock:
            if not self._running:
                return
            self._running = False
            tasks = list(self._tasks)
            pool, self._pool = self._pool, None
        for task in tasks:
            task.cancel()
        if isinstance(self._clock, ManualClock):
            self._clock.remove_listener(self._on_clock_moved)
        self._timer.wakeup()
        if self._driver is not None:
            self._driver.join()
            self._driver = None
        if pool is not None:
            pool.shutdown(wait=not getattr(_in_task, "active", False))

    def __enter__(self) -> Scheduler:
        return self if self._running else self.startup()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- internals -------------------------------------------------------------------------

    def _drive(self) -> None:
        while self._running:
            self._timer.advance_clock(_DRIVER_POLL_MS)

    def _on_clock_moved(self, _now_ms: int) -> None:
        while self._timer.advance_clock(0):
            pass

    def _submit(self, task: ScheduledTask) -> None:
        # Runs on the timer's expiring thread with the timer's lock held: take no scheduler lock
        # here (rescheduling takes the scheduler lock, then the timer's).
        pool = self._pool
        if pool is None or task.is_cancelled:
            return
        try:
            pool.submit(task._execute)
        except RuntimeError:  # the pool shut down after we read it: the task is cancelled anyway
            return

    def _after_run(self, task: ScheduledTask) -> None:
        if task.period_ms is None:
            self._forget(task)
            return
        with self._lock:
            if not self._keeps(task):
                return
            now = self._clock.now_ms()
            next_due = task.due_ms + task.period_ms
            if next_due <= now:  # ran late: skip the periods already missed
                next_due += ((now - next_due) // task.period_ms + 1) * task.period_ms
            task.due_ms = next_due
        self._timer.add_at(task, next_due)  # absolute: a clock move since `now` changes nothing
        with self._lock:
            stopped = not self._keeps(task)
        if stopped:  # shut down or cancelled while we re-added it: take it out again
            TimerTask.cancel(task)

    def _keeps(self, task: ScheduledTask) -> bool:
        # caller holds self._lock
        return self._running and not task.is_cancelled

    def _forget(self, task: ScheduledTask) -> None:
        with self._lock:
            self._tasks.discard(task)
