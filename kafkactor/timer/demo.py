"""A small purgatory-shaped workload on a real-time Timer: what `kafkactor demo` runs for now."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkactor.timer.clock import SystemClock
from kafkactor.timer.system_timer import Timer
from kafkactor.timer.task import TimerTask


@dataclass(slots=True)
class TimerDemoStats:
    """What the timer demo observed."""

    added: int = 0
    completed_early: int = 0
    expired: int = 0
    lateness_ms: list[int] = field(default_factory=list)
    max_levels: int = 0
    max_pending: int = 0

    def lateness_percentile(self, q: float) -> int:
        if not self.lateness_ms:
            return 0
        ordered = sorted(self.lateness_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _DelayedRequest(TimerTask):
    """A stand-in for a delayed produce request: it expires unless completed first."""

    __slots__ = ("_clock", "_stats", "due_ms")

    def __init__(self, delay_ms: int, clock: SystemClock, stats: TimerDemoStats) -> None:
        super().__init__(delay_ms)
        self._clock = clock
        self._stats = stats
        self.due_ms = clock.now_ms() + delay_ms

    def run(self) -> None:
        self._stats.expired += 1
        self._stats.lateness_ms.append(self._clock.now_ms() - self.due_ms)


def run_timer_demo(
    *,
    duration_s: float = 3.0,
    requests_per_s: int = 2000,
    max_timeout_ms: int = 1500,
    early_fraction: float = 0.9,
    seed: int = 7,
    on_progress: Callable[[float, TimerDemoStats, Timer], None] | None = None,
) -> TimerDemoStats:
    """Feed a Timer with delayed requests for `duration_s`, completing most of them early.

    A reaper thread advances the timer (as Kafka's ExpirationReaper does, with a 200 ms poll);
    the calling thread adds requests and completes (cancels) a random pending one for
    `early_fraction` of arrivals. Returns the counts and expiry lateness.
    """
    clock = SystemClock()
    timer = Timer(clock)
    stats = TimerDemoStats()
    rng = random.Random(seed)
    stop = threading.Event()

    def reap() -> None:
        while not stop.is_set():
            timer.advance_clock(200)

    reaper = threading.Thread(target=reap, name="demo-expiration-reaper", daemon=True)
    reaper.start()
    pending: list[_DelayedRequest] = []
    start = clock.now_ms()
    end = start + int(duration_s * 1000)
    next_report = start
    interval_s = 1.0 / requests_per_s
    try:
        while clock.now_ms() < end:
            request = _DelayedRequest(rng.randint(1, max_timeout_ms), clock, stats)
            timer.add(request)
            pending.append(request)
            stats.added += 1
            if rng.random() < early_fraction and pending:
                victim = pending.pop(rng.randrange(len(pending)))
                if victim.is_pending:
                    victim.cancel()
                    stats.completed_early += 1
            stats.max_pending = max(stats.max_pending, timer.size)
            stats.max_levels = max(stats.max_levels, len(timer.wheel.levels()))
            now = clock.now_ms()
            if on_progress is not None and now >= next_report:
                on_progress((now - start) / 1000.0, stats, timer)
                next_report = now + 500
            stop.wait(interval_s)
        # let everything still pending expire
        drain_deadline = clock.now_ms() + max_timeout_ms + 500
        while timer.size and clock.now_ms() < drain_deadline:
            stop.wait(0.05)
    finally:
        stop.set()
        timer.wakeup()
        reaper.join()
    return stats
