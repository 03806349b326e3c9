"""Kafka's hierarchical timing wheel."""

from __future__ import annotations

import threading

from kafkactor.timer.delay_queue import BucketQueue
from kafkactor.timer.task import TaskCounter, TimerTaskEntry, TimerTaskList


class TimingWheel:
    """Kafka's `TimingWheel`: `wheel_size` buckets of `tick_ms` each, spanning `interval` ms.

    `add` puts an entry into the bucket of its expiration in O(1), or hands it to an overflow wheel
    (created on demand, with this wheel's interval as its tick and this wheel's current time as its
    start) when it lies beyond this wheel's interval. A bucket is reused across rounds: it enters
    the queue again only when its expiration changes. The wheel's `current_time_ms` only moves
    through `advance_clock`, which the timer calls with the expiration of each bucket it flushes;
    so "already expired" is judged against that (lagging) time. Not thread-safe on its own: the
    `Timer` serialises access with the lock it shares with the buckets.
    """

    __slots__ = (
        "_buckets",
        "_counter",
        "_lock",
        "_overflow",
        "_queue",
        "current_time_ms",
        "interval_ms",
        "tick_ms",
        "wheel_size",
    )

    def __init__(
        self,
        tick_ms: int,
        wheel_size: int,
        start_ms: int,
        *,
        task_counter: TaskCounter | None = None,
        queue: BucketQueue | None = None,
        lock: threading.RLock | None = None,
    ) -> None:
        if tick_ms < 1 or wheel_size < 2:
            raise ValueError(f"tick_ms must be >= 1 and wheel_size >= 2 ({tick_ms}, {wheel_size})")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self.interval_ms = tick_ms * wheel_size
        self._counter = task_counter if task_counter is not None else TaskCounter()
        self._queue = queue if queue is not None else BucketQueue()
        self._lock = lock if lock is not None else threading.RLock()
        self._buckets = [TimerTaskList(self._counter, self._lock) for _ in range(wheel_size)]
        self.current_time_ms = start_ms - (start_ms % tick_ms)
        self._overflow: TimingWheel | None = None

    @property
    def overflow_wheel(self) -> TimingWheel | None:
        """The next coarser level, or None until an entry first needed it."""
        return self._overflow

    @property
    def buckets(self) -> tuple[TimerTaskList, ...]:
        return tuple(self._buckets)

    @property
    def queue(self) -> BucketQueue:
        return self._queue

    def add(self, entry: TimerTaskEntry) -> bool:
        """Insert `entry`; False when it is cancelled or already expired (the caller runs it)."""
        task = entry.task
        if task is None or task._entry is not entry:
            return False  # cancelled
        expiration = entry.expiration_ms
        current = self.current_time_ms
        tick = self.tick_ms
        if expiration < current + tick:
            return False
        # Every level's current time is this level's time floored to that level's tick (advance
        # and overflow creation keep it so), hence the level whose round holds the expiration is
        # the first where the expiration's virtual id is less than a round ahead of the clock's.
        size = self.wheel_size
        wheel = self
        while expiration // tick - current // tick >= size:
            overflow = wheel._overflow
            wheel = overflow if overflow is not None else wheel._add_overflow_wheel()
            tick = wheel.tick_ms
        virtual_id = expiration // tick
        bucket = wheel._buckets[virtual_id % size]
        if entry.list is not None:
            entry.remove()
        bucket._entries[entry] = True
        entry.list = bucket
        self._counter.value += 1
        bucket_expiration = virtual_id * tick
        if bucket.expiration_ms != bucket_expiration:
            bucket.expiration_ms = bucket_expiration
            self._queue.offer(bucket)
        return True

    def _add_overflow_wheel(self) -> TimingWheel:
        with self._lock:
            if self._overflow is None:
                self._overflow = TimingWheel(
                    tick_ms=self.interval_ms,
                    wheel_size=self.wheel_size,
                    start_ms=self.current_time_ms,
                    task_counter=self._counter,
                    queue=self._queue,
                    lock=self._lock,
                )
            return self._overflow

    def advance_clock(self, time_ms: int) -> None:
        """Move this wheel's and every coarser wheel's time up to `time_ms` (tick-aligned)."""
        wheel: TimingWheel | None = self
        while wheel is not None and time_ms >= wheel.current_time_ms + wheel.tick_ms:
            wheel.current_time_ms = time_ms - (time_ms % wheel.tick_ms)
            time_ms = wheel.current_time_ms
            wheel = wheel._overflow

    def levels(self) -> list[TimingWheel]:
        """This wheel and every overflow wheel above it, finest first."""
        result: list[TimingWheel] = []
        wheel: TimingWheel | None = self
        while wheel is not None:
            result.append(wheel)
            wheel = wheel._overflow
        return result

    def __repr__(self) -> str:
        return (
            f"TimingWheel(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, "
            f"current_time_ms={self.current_time_ms}, levels={len(self.levels())})"
        )
