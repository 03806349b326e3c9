"""Timer (Kafka's SystemTimer) under concurrency: many threads add and cancel while one advances.

In Kafka, request handler threads add delayed operations to a purgatory's timer while one Reaper
thread advances its clock; completion (cancel) races with expiry. Each task here records, under
its own lock, every run and the clock's time right after a cancel() returned, so a race can be
judged afterwards: a cancel racing with expiry may legitimately lose, but nothing runs twice,
nothing runs early, nothing is lost, and a task cancelled before its deadline never runs.
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from kafkactor.timer import Clock, ManualClock, SystemClock, Timer, TimerTask

# Bound for waits on other threads: generous, it only matters when something is broken.
WAIT_S = 10.0


class TrackedTask(TimerTask):
    """Records its runs and its first completed cancel, each with the clock's time."""

    def __init__(self, delay_ms: int, clock: Clock, due_ms: int) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.due_ms = due_ms
        self.lock = threading.Lock()
        self.run_times: list[int] = []
        self.cancelled_at_ms: int | None = None  # clock read after the first cancel() returned
        self.on_run: Callable[[], None] | None = None

    def run(self) -> None:
        now = self.clock.now_ms()
        with self.lock:
            self.run_times.append(now)
        if self.on_run is not None:
            self.on_run()

    def cancel_and_record(self) -> None:
        # Not under self.lock: cancel() takes the timer's lock, and run() holds the timer's lock
        # when it takes self.lock.
        self.cancel()
        now = self.clock.now_ms()
        with self.lock:
            if self.cancelled_at_ms is None:
                self.cancelled_at_ms = now


class Crew:
    """Threads that are always joined, and whose exceptions fail the test."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def add(self, name: str, body: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                body()
            except BaseException as error:
                self.errors.append(error)
                raise

        self.threads.append(threading.Thread(target=guarded, name=name, daemon=True))

    def alive(self) -> bool:
        return any(thread.is_alive() for thread in self.threads)

    @contextmanager
    def running(self, on_exit: Callable[[], None] = lambda: None) -> Iterator[None]:
        for thread in self.threads:
            thread.start()
        try:
            yield
        finally:
            on_exit()
            for thread in self.threads:
                thread.join(WAIT_S)
        assert not self.alive(), "a thread did not end"
        assert self.errors == []


@contextmanager
def fine_grained_thread_switching() -> Iterator[None]:
    """Switch threads every 20 µs instead of 5 ms, so races get a chance to interleave."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(2e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def test_adds_and_cancels_from_many_threads_while_the_clock_advances() -> None:
    producers, tasks_per_producer = 4, 5_000
    clock = ManualClock(1_000_000)
    timer = Timer(clock, tick_ms=1, wheel_size=20)
    start = threading.Barrier(producers + 1, timeout=WAIT_S)
    made: list[list[TrackedTask]] = [[] for _ in range(producers)]
    crew = Crew()

    def producer(index: int) -> None:
        rng = random.Random(1_000 + index)
        mine = made[index]
        start.wait()
        for _ in range(tasks_per_producer):
            delay = rng.randint(1, 5_000)
            added_at = clock.now_ms()  # read right before add, from the timer's clock
            task = TrackedTask(delay, clock, due_ms=added_at + delay)
            mine.append(task)
            timer.add(task)
            roll = rng.random()
            if roll < 0.15:  # a recent task: usually still pending, racing with the clock
                mine[rng.randrange(max(0, len(mine) - 20), len(mine))].cancel_and_record()
            elif roll < 0.25:  # any of mine: may have run already, or been cancelled already
                mine[rng.randrange(len(mine))].cancel_and_record()

    for index in range(producers):
        crew.add(f"producer-{index}", partial(producer, index))

    rng = random.Random(7)
    advances = 0
    with fine_grained_thread_switching(), crew.running(on_exit=start.abort):
        start.wait()
        while crew.alive():
            clock.advance(rng.randint(1, 50))
            timer.advance_clock(0)
            advances += 1
    ran_while_adding = sum(1 for mine in made for task in mine if task.run_times)

    clock.advance(10_000)  # past every deadline
    while timer.advance_clock(0):
        pass

    tasks = [task for mine in made for task in mine]
    assert len(tasks) == producers * tasks_per_producer
    never_cancelled = cancelled_early = cancelled_late_and_ran = 0
    for task in tasks:
        runs = len(task.run_times)
        assert runs <= 1, f"ran {runs} times (due {task.due_ms}): {task.run_times}"
        if runs:
            assert task.run_times[0] >= task.due_ms, "ran before its deadline"
        if task.cancelled_at_ms is None:
            never_cancelled += 1
            assert runs == 1, f"never cancelled but ran {runs} times (due {task.due_ms})"
        elif task.cancelled_at_ms < task.due_ms:
            cancelled_early += 1
            assert runs == 0, "cancelled before its deadline but ran"
        elif runs:
            cancelled_late_and_ran += 1  # cancel at or after the deadline: may lose the race
    assert timer.size == 0
    # The scenario really mixed things up (else the assertions above prove little).
    assert advances > 100
    assert ran_while_adding > 1_000
    assert never_cancelled > 10_000
    assert cancelled_early > 500
    assert cancelled_late_and_ran > 100


def test_many_producers_and_one_reaper_on_the_system_clock() -> None:
    producers, tasks_per_producer = 4, 2_000
    total = producers * tasks_per_producer
    clock = SystemClock()
    timer = Timer(clock, tick_ms=1, wheel_size=20)
    start = threading.Barrier(producers, timeout=WAIT_S)
    made: list[list[TrackedTask]] = [[] for _ in range(producers)]
    all_ran = threading.Condition()
    ran = [0]
    stop = threading.Event()

    def count_run() -> None:
        with all_ran:
            ran[0] += 1
            if ran[0] >= total:
                all_ran.notify_all()

    def reaper() -> None:
        while not stop.is_set():
            timer.advance_clock(200)

    def producer(index: int) -> None:
        rng = random.Random(2_000 + index)
        start.wait()
        for _ in range(tasks_per_producer):
            delay = rng.randint(0, 100)
            added_at = clock.now_ms()  # read right before add, from the timer's clock
            task = TrackedTask(delay, clock, due_ms=added_at + delay)
            task.on_run = count_run
            made[index].append(task)
            timer.add(task)

    def stop_reaper() -> None:
        stop.set()
        timer.wakeup()

    reaping = Crew()
    reaping.add("reaper", reaper)
    producing = Crew()
    for index in range(producers):
        producing.add(f"producer-{index}", partial(producer, index))
    with reaping.running(on_exit=stop_reaper):
        with producing.running():  # joins the producers (the barrier has a timeout)
            pass
        with all_ran:
            finished = all_ran.wait_for(lambda: ran[0] >= total, timeout=WAIT_S)
        assert finished, f"only {ran[0]} of {total} tasks ran"

    tasks = [task for mine in made for task in mine]
    assert len(tasks) == total
    assert ran[0] == total
    for task in tasks:
        assert len(task.run_times) == 1, f"ran {len(task.run_times)} times (due {task.due_ms})"
        # At most one tick (1 ms) early relative to the system clock.
        assert task.run_times[0] >= task.due_ms - 1, f"ran at {task.run_times[0]}"
    assert timer.size == 0
