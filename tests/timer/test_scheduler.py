"""Scheduler (Kafka's KafkaScheduler): named one-shot and periodic tasks on a small thread pool.

Most tests drive a ManualClock: `clock.advance(ms)` hands every due task to the pool on the
calling thread, and the test waits (with a timeout) for the effect. To know that everything due
has *finished* (including the rescheduling a periodic task does after its run), `advance` below
schedules a marker task due at the new time and waits for it: on a one-thread pool, tasks run in
the order they fell due, so the marker runs last.
"""

from __future__ import annotations

import contextlib
import io
import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import kafkactor.timer.scheduler as scheduler_module
from kafkactor import tracing
from kafkactor.timer import ManualClock, ScheduledTask, Scheduler, SystemClock, Timer
from kafkactor.timer.scheduler import SchedulerNotRunningError


@contextlib.contextmanager
def captured_events() -> Iterator[list[dict[str, Any]]]:
    """kafkactor's events logged inside the block (its own chain: structlog's capture_logs
    does not see them)."""
    stream = io.BytesIO()
    events: list[dict[str, Any]] = []
    with tracing.configured(stream=stream):
        yield events
    events.extend(json.loads(line) for line in stream.getvalue().splitlines())


# Bound for waits on other threads: generous, it only matters when something is broken.
WAIT_S = 5.0
# How long a negative check ("has not returned yet") looks: a broken shutdown returns at once.
NOT_YET_S = 0.2


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


@pytest.fixture
def scheduler(clock: ManualClock) -> Iterator[Scheduler]:
    scheduler = Scheduler(clock, threads=1).startup()
    try:
        yield scheduler
    finally:
        scheduler.shutdown()


def advance(scheduler: Scheduler, clock: ManualClock, ms: int) -> None:
    """Move `clock` by `ms` and wait until every task due by then has run and been rescheduled.

    Needs a one-thread pool (the marker is submitted after every task that fell due before it,
    and runs after they finished).
    """
    done = threading.Event()
    scheduler.schedule("test-sync-marker", done.set, delay_ms=ms)
    clock.advance(ms)
    assert done.wait(WAIT_S), "the sync marker did not run: the scheduler is stuck"


def run_recorder(clock: ManualClock) -> tuple[queue.Queue[int], Callable[[], None]]:
    """A task body that puts the clock's time of each run on a queue."""
    runs: queue.Queue[int] = queue.Queue()

    def fn() -> None:
        runs.put(clock.now_ms())

    return runs, fn


def drain(runs: queue.Queue[int]) -> list[int]:
    items: list[int] = []
    while True:
        try:
            items.append(runs.get_nowait())
        except queue.Empty:
            return items


def pending(task: ScheduledTask) -> bool:
    """Whether `task` sits in the timer (a function, so that mypy does not narrow a property)."""
    return task.is_pending


def is_running(scheduler: Scheduler) -> bool:
    return scheduler.is_started


def run_in_thread(fn: Callable[[], object], name: str) -> tuple[threading.Thread, threading.Event]:
    """Start `fn` on a daemon thread; the event is set when it returns."""
    returned = threading.Event()

    def body() -> None:
        fn()
        returned.set()

    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread, returned


# -- one-shot tasks ----------------------------------------------------------------------------


def test_one_shot_task_runs_once_at_its_delay_and_not_before(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    runs, fn = run_recorder(clock)
    task = scheduler.schedule("once", fn, delay_ms=100)
    advance(scheduler, clock, 99)
    assert drain(runs) == []
    assert task.runs == 0
    assert pending(task)
    advance(scheduler, clock, 1)
    assert drain(runs) == [1_100]
    assert task.runs == 1
    assert not pending(task)
    advance(scheduler, clock, 10_000)
    assert drain(runs) == []
    assert task.runs == 1


def test_one_shot_task_with_delay_zero_runs_without_moving_the_clock(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    ran = threading.Event()
    scheduler.schedule("now", ran.set, delay_ms=0)
    assert ran.wait(WAIT_S)
    assert clock.now_ms() == 1_000


def test_negative_delay_runs_at_once(scheduler: Scheduler) -> None:
    ran = threading.Event()
    scheduler.schedule("overdue", ran.set, delay_ms=-50)
    assert ran.wait(WAIT_S)


def test_cancelled_one_shot_task_never_runs(scheduler: Scheduler, clock: ManualClock) -> None:
    runs, fn = run_recorder(clock)
    task = scheduler.schedule("cancelled", fn, delay_ms=10)
    task.cancel()
    assert task.is_cancelled
    assert not pending(task)
    advance(scheduler, clock, 100)
    assert drain(runs) == []
    assert task.runs == 0


# -- periodic tasks ----------------------------------------------------------------------------


def test_periodic_task_runs_at_delay_then_every_period(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    runs, fn = run_recorder(clock)
    task = scheduler.schedule("periodic", fn, delay_ms=10, period_ms=5)
    for _ in range(40):  # one millisecond at a time, each run finished before moving on
        advance(scheduler, clock, 1)
    assert drain(runs) == [1_010, 1_015, 1_020, 1_025, 1_030, 1_035, 1_040]
    assert task.runs == 7
    assert pending(task)  # the next run (1_045) is planned


def test_periodic_task_runs_each_period_when_advanced_a_period_at_a_time(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    runs, fn = run_recorder(clock)
    scheduler.schedule("periodic", fn, delay_ms=100, period_ms=250)
    advance(scheduler, clock, 100)
    for _ in range(5):
        advance(scheduler, clock, 250)
    assert drain(runs) == [1_100, 1_350, 1_600, 1_850, 2_100, 2_350]


def test_periodic_task_skips_the_periods_it_missed(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # Documented: fixed rate, but periods missed (here: by one big jump of the clock) are skipped
    # rather than run back to back; the next run stays on the original grid.
    runs, fn = run_recorder(clock)
    scheduler.schedule("periodic", fn, delay_ms=10, period_ms=10)
    advance(scheduler, clock, 35)  # due at 1_010, 1_020, 1_030: runs once
    assert drain(runs) == [1_035]
    advance(scheduler, clock, 4)
    assert drain(runs) == []
    advance(scheduler, clock, 1)
    assert drain(runs) == [1_040]


def test_cancel_stops_further_runs_of_a_periodic_task(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    runs, fn = run_recorder(clock)
    task = scheduler.schedule("periodic", fn, delay_ms=10, period_ms=10)
    advance(scheduler, clock, 10)
    advance(scheduler, clock, 10)
    assert drain(runs) == [1_010, 1_020]
    task.cancel()
    assert task.is_cancelled
    assert not pending(task)
    for _ in range(10):
        advance(scheduler, clock, 10)
    assert drain(runs) == []
    assert task.runs == 2


def test_cancel_from_inside_the_run_stops_a_periodic_task(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    holder: list[ScheduledTask] = []
    runs, record = run_recorder(clock)

    def fn() -> None:
        record()
        holder[0].cancel()

    holder.append(scheduler.schedule("self-cancelling", fn, delay_ms=10, period_ms=10))
    for _ in range(5):
        advance(scheduler, clock, 10)
    assert drain(runs) == [1_010]


# -- errors --------------------------------------------------------------------------------------


def test_failing_periodic_task_is_logged_and_keeps_its_schedule(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    runs, record = run_recorder(clock)

    def boom() -> None:
        record()
        raise RuntimeError("task failure")

    with captured_events() as logs:
        task = scheduler.schedule("boom", boom, delay_ms=10, period_ms=10)
        for _ in range(3):
            advance(scheduler, clock, 10)
    assert drain(runs) == [1_010, 1_020, 1_030]
    assert task.runs == 3
    assert pending(task)
    errors = [event for event in logs if event["event"] == "scheduler.task_error"]
    assert len(errors) == 3
    for event in errors:
        assert event["task"] == "boom"
        assert event["level"] == "error"
        assert "RuntimeError: task failure" in event["exception"]  # logged with its traceback


def test_failing_task_does_not_stop_the_scheduler(scheduler: Scheduler, clock: ManualClock) -> None:
    def boom() -> None:
        raise ValueError("one-shot failure")

    with captured_events() as logs:
        scheduler.schedule("first", boom, delay_ms=5)
        advance(scheduler, clock, 5)
    assert [event["task"] for event in logs if event["event"] == "scheduler.task_error"] == [
        "first"
    ]
    assert is_running(scheduler)
    runs, fn = run_recorder(clock)
    scheduler.schedule("second", fn, delay_ms=5)
    advance(scheduler, clock, 5)
    assert drain(runs) == [1_010]


# -- lifecycle -----------------------------------------------------------------------------------


def test_schedule_before_startup_raises(clock: ManualClock) -> None:
    scheduler = Scheduler(clock)
    assert not is_running(scheduler)
    with pytest.raises(SchedulerNotRunningError):
        scheduler.schedule("early", lambda: None, delay_ms=0)


def test_schedule_after_shutdown_raises(clock: ManualClock) -> None:
    scheduler = Scheduler(clock).startup()
    scheduler.shutdown()
    assert not is_running(scheduler)
    with pytest.raises(SchedulerNotRunningError):
        scheduler.schedule("late", lambda: None, delay_ms=0)
    with pytest.raises(SchedulerNotRunningError):
        scheduler.schedule("late-periodic", lambda: None, delay_ms=10, period_ms=10)


def test_startup_twice_raises(scheduler: Scheduler) -> None:
    with pytest.raises(RuntimeError):
        scheduler.startup()


def test_shutdown_twice_and_shutdown_without_startup_are_fine(clock: ManualClock) -> None:
    never_started = Scheduler(clock)
    never_started.shutdown()
    scheduler = Scheduler(clock).startup()
    scheduler.shutdown()
    scheduler.shutdown()
    assert not is_running(scheduler)


def test_shutdown_waits_for_a_running_task(scheduler: Scheduler) -> None:
    started = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def blocking() -> None:
        started.set()
        release.wait(WAIT_S)
        finished.set()

    scheduler.schedule("blocking", blocking, delay_ms=0)
    assert started.wait(WAIT_S)
    finished_when_shutdown_returned: list[bool] = []

    def shut_down() -> None:
        scheduler.shutdown()
        finished_when_shutdown_returned.append(finished.is_set())

    thread, returned = run_in_thread(shut_down, "shutdown")
    try:
        assert not returned.wait(NOT_YET_S), "shutdown returned while a task was running"
    finally:
        release.set()
        thread.join(WAIT_S)
    assert returned.is_set()
    assert finished_when_shutdown_returned == [True]


def test_shutdown_stops_periodic_tasks(scheduler: Scheduler, clock: ManualClock) -> None:
    runs, fn = run_recorder(clock)
    task = scheduler.schedule("periodic", fn, delay_ms=10, period_ms=10)
    advance(scheduler, clock, 10)
    assert drain(runs) == [1_010]
    scheduler.shutdown()
    assert not pending(task)
    for _ in range(10):
        clock.advance(10)  # due tasks would be handed to the pool on this thread, right here
    assert drain(runs) == []
    assert task.runs == 1


def test_shutdown_during_a_periodic_run_plans_no_further_run(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    started = threading.Event()
    release = threading.Event()
    runs: queue.Queue[int] = queue.Queue()

    def blocking() -> None:
        runs.put(clock.now_ms())
        started.set()
        release.wait(WAIT_S)

    task = scheduler.schedule("periodic", blocking, delay_ms=10, period_ms=10)
    clock.advance(10)
    assert started.wait(WAIT_S)
    thread, returned = run_in_thread(scheduler.shutdown, "shutdown")
    try:
        assert not returned.wait(NOT_YET_S)
    finally:
        release.set()
        thread.join(WAIT_S)
    assert returned.is_set()
    assert task.runs == 1
    assert not pending(task)  # the run that finished during shutdown planned no next run
    for _ in range(5):
        clock.advance(10)
    assert drain(runs) == [1_010]


def test_two_threads_run_two_blocking_tasks_concurrently(clock: ManualClock) -> None:
    release = threading.Event()
    started = [threading.Event(), threading.Event()]
    finished = [threading.Event(), threading.Event()]

    def blocking(index: int) -> Callable[[], None]:
        def fn() -> None:
            started[index].set()
            release.wait(4 * WAIT_S)  # longer than the test waits for the other task to start
            finished[index].set()

        return fn

    scheduler = Scheduler(clock, threads=2).startup()
    try:
        scheduler.schedule("a", blocking(0), delay_ms=10)
        scheduler.schedule("b", blocking(1), delay_ms=10)
        clock.advance(10)
        # Both started while neither was released: they run side by side.
        assert started[0].wait(WAIT_S)
        assert started[1].wait(WAIT_S)
        assert not finished[0].is_set()
        assert not finished[1].is_set()
    finally:
        release.set()
        scheduler.shutdown()


@pytest.mark.parametrize("period_ms", [0, -1])
def test_period_must_be_positive(scheduler: Scheduler, period_ms: int) -> None:
    with pytest.raises(ValueError):
        scheduler.schedule("bad", lambda: None, delay_ms=10, period_ms=period_ms)


@pytest.mark.parametrize("threads", [0, -1])
def test_threads_must_be_at_least_one(clock: ManualClock, threads: int) -> None:
    with pytest.raises(ValueError):
        Scheduler(clock, threads=threads)


def test_context_manager_starts_and_shuts_down(clock: ManualClock) -> None:
    runs, fn = run_recorder(clock)
    with Scheduler(clock) as scheduler:
        assert is_running(scheduler)
        task = scheduler.schedule("periodic", fn, delay_ms=10, period_ms=10)
        advance(scheduler, clock, 10)
        assert drain(runs) == [1_010]
    assert not is_running(scheduler)
    assert not pending(task)
    clock.advance(100)
    assert drain(runs) == []
    with pytest.raises(SchedulerNotRunningError):
        scheduler.schedule("late", fn)


def test_context_manager_accepts_a_started_scheduler(clock: ManualClock) -> None:
    already_started = Scheduler(clock).startup()
    with already_started as scheduler:
        assert scheduler is already_started
        assert is_running(scheduler)
    assert not is_running(already_started)


# -- real time -----------------------------------------------------------------------------------


def test_periodic_task_on_the_system_clock() -> None:
    clock = SystemClock()
    run_times: list[int] = []
    third_run = threading.Event()

    def tick() -> None:
        run_times.append(clock.now_ms())
        if len(run_times) == 3:
            third_run.set()

    scheduler = Scheduler(clock).startup()
    try:
        scheduled_at = clock.now_ms()
        scheduler.schedule("tick", tick, delay_ms=20, period_ms=20)
        assert third_run.wait(WAIT_S), f"only {len(run_times)} runs"
    finally:
        started = time.monotonic()
        scheduler.shutdown()
        shutdown_s = time.monotonic() - started
    # A liveness bound, not a performance claim: shutdown wakes the driving thread.
    assert shutdown_s < 1.0
    # Never early: run k is due at scheduled_at + 20 + 20 * k at the earliest.
    for k, ran_at in enumerate(run_times[:3]):
        assert ran_at >= scheduled_at + 20 + 20 * k


class WaitSignallingClock(SystemClock):
    """A SystemClock that tells the test when a thread is about to wait on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait(self, condition: threading.Condition, timeout_ms: int) -> None:
        # Called with the condition's lock held: a notify can only arrive once we really wait.
        self.waiting.set()
        super().wait(condition, timeout_ms)


def test_shutdown_wakes_an_idle_driving_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # With the idle poll made far longer than the bound, only a wakeup can end the driver's wait.
    monkeypatch.setattr(scheduler_module, "_DRIVER_POLL_MS", 30_000)
    clock = WaitSignallingClock()
    scheduler = Scheduler(clock).startup()
    try:
        assert clock.waiting.wait(WAIT_S), "the driving thread never waited"
    finally:
        started = time.monotonic()
        scheduler.shutdown()
        shutdown_s = time.monotonic() - started
    assert shutdown_s < 1.0


def test_shutdown_is_prompt_when_the_driver_is_between_its_check_and_its_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Regression (lost wakeup): the driving thread checks `_running` outside the timer's lock.
    # Pause it exactly where a preemption can leave it, having seen `_running == True` and about
    # to enter Timer.advance_clock, and let it go on once shutdown has sent its wakeup. The
    # wakeup must still end the (here 30 s) idle wait.
    monkeypatch.setattr(scheduler_module, "_DRIVER_POLL_MS", 30_000)
    in_window = threading.Event()
    wakeup_sent = threading.Event()
    original_advance = Timer.advance_clock
    original_wakeup = Timer.wakeup

    def gated_advance(self: Timer, timeout_ms: int) -> bool:
        if threading.current_thread().name == "lost-wakeup-timer" and not in_window.is_set():
            in_window.set()
            wakeup_sent.wait(WAIT_S)
        return original_advance(self, timeout_ms)

    def signalling_wakeup(self: Timer) -> None:
        original_wakeup(self)
        wakeup_sent.set()

    monkeypatch.setattr(Timer, "advance_clock", gated_advance)
    monkeypatch.setattr(Timer, "wakeup", signalling_wakeup)
    scheduler = Scheduler(SystemClock(), thread_name_prefix="lost-wakeup").startup()
    try:
        assert in_window.wait(WAIT_S)
    finally:
        started = time.monotonic()
        scheduler.shutdown()
        shutdown_s = time.monotonic() - started
    assert shutdown_s < 1.0, f"shutdown took {shutdown_s:.3f} s: the driver missed its wakeup"


class PoolGatedClock(ManualClock):
    """A ManualClock on which the pool thread's first read (once armed) waits for `gate`."""

    def __init__(self, start_ms: int, pool_prefix: str) -> None:
        super().__init__(start_ms)
        self.pool_prefix = pool_prefix
        self.armed = False
        self.pool_waiting = threading.Event()
        self.gate = threading.Event()

    def now_ms(self) -> int:
        waiting = self.armed and not self.pool_waiting.is_set()
        if waiting and threading.current_thread().name.startswith(self.pool_prefix):
            self.pool_waiting.set()
            self.gate.wait(WAIT_S)
        return super().now_ms()


def test_rescheduling_and_expiry_at_the_same_moment_do_not_deadlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Regression (lock-order inversion): a periodic task re-planning on the pool thread (its
    # first clock read is under the scheduler's lock) while the advancing thread expires another
    # task (ScheduledTask.run is called under the timer's lock) must not deadlock.
    clock = PoolGatedClock(0, pool_prefix="deadlock-pool")
    original_run = ScheduledTask.run

    def expiring(task: ScheduledTask) -> None:
        if threading.current_thread().name == "deadlock-advancer":
            clock.gate.set()  # the advancer holds the timer's lock: let the pool thread go on
        original_run(task)

    monkeypatch.setattr(ScheduledTask, "run", expiring)
    scheduler = Scheduler(clock, threads=1, thread_name_prefix="deadlock-pool").startup()
    other_ran = threading.Event()
    deadlocked = False
    try:
        scheduler.schedule("periodic", lambda: None, delay_ms=10, period_ms=100)
        scheduler.schedule("other", other_ran.set, delay_ms=20)
        clock.armed = True
        clock.advance(10)  # the periodic task runs, then re-plans on the pool thread...
        assert clock.pool_waiting.wait(WAIT_S)
        # ...while another thread moves the clock and expires "other" at the same moment.
        advancer = threading.Thread(
            target=clock.advance, args=(10,), name="deadlock-advancer", daemon=True
        )
        advancer.start()
        advancer.join(2.0)
        deadlocked = advancer.is_alive()
        if deadlocked:
            # Break the deadlock so the pool thread can end: release the scheduler's lock (a
            # plain Lock, releasable from any thread) that the pool thread holds.
            scheduler._lock.release()
            advancer.join(WAIT_S)
        assert other_ran.wait(WAIT_S)
    finally:
        clock.gate.set()
        scheduler.shutdown()
    assert not deadlocked, "the advancing thread and the pool thread deadlocked"


class PausingClock(ManualClock):
    """A ManualClock on which the pool thread's first read (once armed) pauses after reading."""

    def __init__(self, start_ms: int, pool_prefix: str) -> None:
        super().__init__(start_ms)
        self.pool_prefix = pool_prefix
        self.armed = False
        self.pool_read = threading.Event()
        self.resume_pool = threading.Event()

    def now_ms(self) -> int:
        now = super().now_ms()
        pausing = self.armed and not self.pool_read.is_set()
        if pausing and threading.current_thread().name.startswith(self.pool_prefix):
            self.pool_read.set()
            self.resume_pool.wait(WAIT_S)
        return now


def test_clock_moving_while_a_periodic_task_replans_does_not_postpone_its_next_run() -> None:
    # Regression: re-planning with a delay relative to one clock read, which the timer added to a
    # second read, pushed the run due at 1_020 to 1_030 (and so lost a run) when the clock moved
    # between the two reads.
    clock = PausingClock(1_000, pool_prefix="replan-pool")
    run_times: queue.Queue[int] = queue.Queue()
    scheduler = Scheduler(clock, threads=1, thread_name_prefix="replan-pool").startup()
    try:
        # The task body reads the clock past the pause: only the scheduler's own read pauses.
        scheduler.schedule(
            "periodic", lambda: run_times.put(ManualClock.now_ms(clock)), delay_ms=10, period_ms=10
        )
        clock.armed = True
        clock.advance(10)  # runs at 1_010; its rescheduling reads the clock (1_010) and pauses...
        assert clock.pool_read.wait(WAIT_S)
        clock.advance(10)  # ...while the clock reaches 1_020, when the next run is due
        clock.resume_pool.set()
        advance(scheduler, clock, 0)  # the rescheduling has finished
        for _ in range(15):
            advance(scheduler, clock, 1)
    finally:
        clock.resume_pool.set()
        scheduler.shutdown()
    # Due at 1_010, 1_020, 1_030: the run due at 1_020 happens once the task is re-added (the
    # clock is already there, or a tick further), not a period later.
    times = drain(run_times)
    assert times[0] == 1_010
    assert len(times) == 3, times
    assert 1_020 <= times[1] < 1_030
    assert times[2] == 1_030


class CallerPausingClock(ManualClock):
    """A ManualClock on which one named thread's first read (once armed) pauses after reading."""

    def __init__(self, start_ms: int, thread_name: str) -> None:
        super().__init__(start_ms)
        self.thread_name = thread_name
        self.armed = False
        self.caller_read = threading.Event()
        self.resume_caller = threading.Event()

    def now_ms(self) -> int:
        now = super().now_ms()
        pausing = self.armed and not self.caller_read.is_set()
        if pausing and threading.current_thread().name == self.thread_name:
            self.caller_read.set()
            self.resume_caller.wait(WAIT_S)
        return now


def test_clock_moving_while_a_periodic_task_is_scheduled_keeps_it_on_its_grid() -> None:
    clock = CallerPausingClock(1_000, thread_name="schedule-caller")
    run_times: queue.Queue[int] = queue.Queue()
    scheduler = Scheduler(clock, threads=1).startup()
    scheduled: list[ScheduledTask] = []
    try:
        clock.armed = True
        caller, returned = run_in_thread(
            lambda: scheduled.append(
                scheduler.schedule(
                    "periodic",
                    lambda: run_times.put(ManualClock.now_ms(clock)),
                    delay_ms=10,
                    period_ms=10,
                )
            ),
            "schedule-caller",
        )
        assert clock.caller_read.wait(WAIT_S)  # schedule() read 1_000: the task is due at 1_010
        clock.advance(10)  # the clock reaches 1_010 before schedule() hands the task to the timer
        clock.resume_caller.set()
        caller.join(WAIT_S)
        assert returned.is_set()
        assert len(scheduled) == 1
        for _ in range(25):
            advance(scheduler, clock, 1)
    finally:
        clock.resume_caller.set()
        scheduler.shutdown()
    # Due at 1_010 (by the task's own record), then every 10 ms.
    assert drain(run_times) == [1_010, 1_020, 1_030]


def test_shutdown_from_inside_a_task_stops_the_scheduler_without_waiting_for_itself() -> None:
    clock = ManualClock(0)
    scheduler = Scheduler(clock, threads=1).startup()
    finished = threading.Event()

    def stop_from_inside() -> None:
        scheduler.shutdown()
        finished.set()

    with captured_events() as events:
        scheduler.schedule("stopper", stop_from_inside, delay_ms=10)
        scheduler.schedule("periodic", lambda: None, delay_ms=20, period_ms=10)
        clock.advance(10)
        assert finished.wait(WAIT_S)
    assert not scheduler.is_started
    assert [e for e in events if e["event"] == "scheduler.task_error"] == []
    with pytest.raises(SchedulerNotRunningError):
        scheduler.schedule("late", lambda: None)
