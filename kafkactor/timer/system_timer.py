"""Kafka's SystemTimer: a hierarchical timing wheel driven by a queue of buckets."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kafkactor import tracing
from kafkactor.timer.clock import Clock
from kafkactor.timer.delay_queue import BucketQueue
from kafkactor.timer.task import TaskCounter, TimerTask, TimerTaskEntry
from kafkactor.timer.wheel import TimingWheel

TaskExecutor = Callable[[TimerTask], object]

_log = tracing.get_logger("kafkactor.timer")


def run_inline(task: TimerTask) -> None:
    """The default executor: run the task on the thread that expired it; an error is logged."""
    try:
        task.run()
    except Exception:
        _log.exception("timer.task_error", task=type(task).__name__)


class Timer:
    """Kafka's `SystemTimer`: schedule `TimerTask`s, expire them as the clock advances.

    `add` is O(1) and safe from any thread. `advance_clock` is called by one driving thread (a
    broker's Reaper): it flushes every bucket whose expiration has passed, running due tasks
    through the executor and moving the rest of an expired overflow bucket to finer wheels.
    A task whose expiration is not after the clock's current time runs at once on `add`.

    The executor is any callable taking the expired task (default: run it inline on the advancing
    thread). It is called with the timer's lock held, so it should hand off or be quick; a task's
    `run()` may add to or cancel in the same timer.
    """

    def __init__(
        self,
        clock: Clock,
        tick_ms: int = 1,
        wheel_size: int = 20,
        executor: TaskExecutor | None = None,
    ) -> None:
        self._clock = clock
        self._executor: TaskExecutor = executor if executor is not None else run_inline
        self._lock = threading.RLock()
        self._bucket_arrived = threading.Condition(self._lock)
        self._counter = TaskCounter()
        self._wakeup_pending = False
        self._shut_down = False
        self._waiting = False
        self._queue = BucketQueue(on_offer=self._wake_waiter)
        self._wheel = TimingWheel(
            tick_ms=tick_ms,
            wheel_size=wheel_size,
            start_ms=clock.now_ms(),
            task_counter=self._counter,
            queue=self._queue,
            lock=self._lock,
        )

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def executor(self) -> TaskExecutor:
        """What runs expired tasks (given at construction; `run_inline` by default)."""
        return self._executor

    @property
    def wheel(self) -> TimingWheel:
        """The finest wheel (level 0); its `levels()` lists every level created so far."""
        return self._wheel

    @property
    def size(self) -> int:
        """The number of pending tasks: added, not yet run, not cancelled."""
        return self._counter.value

    @property
    def queued_buckets(self) -> int:
        """How many buckets sit in the clock-driving queue (bounded by the wheels' bucket count)."""
        return len(self._queue)

    def add(self, task: TimerTask) -> None:
        """Schedule `task` to run `task.delay_ms` from now (now or in the past: run at once)."""
        now = self._clock.now_ms()
        self._insert(task, now + task.delay_ms, now)

    def add_at(self, task: TimerTask, expiration_ms: int) -> None:
        """Schedule `task` to run at the absolute time `expiration_ms` on the timer's clock.

        Periodic schedules use this so that time passing while they re-plan cannot push their
        grid back.
        """
        self._insert(task, expiration_ms, self._clock.now_ms())

    def _insert(self, task: TimerTask, expiration_ms: int, now_ms: int) -> None:
        with self._lock:
            entry = TimerTaskEntry(task, expiration_ms)
            if expiration_ms <= now_ms or not self._wheel.add(entry):
                self._run_unless_cancelled(entry)

    def advance_clock(self, timeout_ms: int) -> bool:
        """Expire everything due; True when at least one bucket was flushed.

        When nothing is due, waits up to `timeout_ms` for the earliest bucket (a SystemClock);
        a ManualClock never waits. The wait ends early, returning False, when a new bucket is
        queued before anything falls due, or when `wakeup()` was called (also just before).
        """
        queue = self._queue
        if timeout_ms <= 0:
            # Fast path without the lock: nothing is due (reading the heap's head is atomic).
            heap = queue._heap
            if not heap or heap[0][0] > self._clock.now_ms():
                return False
        with self._lock:
            if self._shut_down:
                return False
            bucket = queue.poll(self._clock.now_ms())
            if bucket is None:
                head = queue.peek_expiration()
                now = self._clock.now_ms()
                wait_ms = timeout_ms if head is None else min(timeout_ms, head - now)
                if not self._wakeup_pending:
                    self._waiting = True
                    try:
                        self._clock.wait(self._bucket_arrived, wait_ms)
                    finally:
                        self._waiting = False
                self._wakeup_pending = False
                bucket = queue.poll(self._clock.now_ms())
                if bucket is None:
                    return False
            wheel = self._wheel
            reinsert = self._reinsert
            while bucket is not None:
                wheel.advance_clock(bucket.expiration_ms)
                bucket.flush(reinsert)
                bucket = queue.poll(self._clock.now_ms())
            return True

    def _wake_waiter(self) -> None:
        # called with the lock held whenever a bucket is queued
        if self._waiting:
            self._bucket_arrived.notify_all()

    @property
    def is_shutdown(self) -> bool:
        return self._shut_down

    def shutdown(self) -> None:
        """Stop expiring: `advance_clock` returns False at once from now on. Pending tasks stay
        unrun; their owners answer them on their own shutdown."""
        with self._lock:
            self._shut_down = True
            self._wakeup_pending = True
            self._bucket_arrived.notify_all()

    def wakeup(self) -> None:
        """End the current or the next wait in `advance_clock` early.

        The request is remembered until a wait consumes it, so a driving thread that checks a stop
        flag and then calls `advance_clock` cannot miss a wakeup sent in between.
        """
        with self._lock:
            self._wakeup_pending = True
            self._bucket_arrived.notify_all()

    def _reinsert(self, entry: TimerTaskEntry) -> None:
        if not self._wheel.add(entry):
            self._run_unless_cancelled(entry)

    def _run_unless_cancelled(self, entry: TimerTaskEntry) -> None:
        task = entry.task
        if task is not None and task._entry is entry:
            task._entry = None
            self._executor(task)

    def __repr__(self) -> str:
        return f"Timer(size={self.size}, wheel={self._wheel!r})"
