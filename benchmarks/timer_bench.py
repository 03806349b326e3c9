"""Benchmark kafkactor's hierarchical timing wheel against heapq timers on a purgatory workload.

Run it as ``.venv/bin/python benchmarks/timer_bench.py`` (``--help`` lists the options). All
timers run in the same process, on the same operation sequence, and the script prints a table of
ns per step and bytes per pending task, then checks three performance targets.

Contenders
----------
- ``wheel``: kafkactor's `Timer` (Kafka's SystemTimer over a hierarchical timing wheel). It is
  thread-safe: `add` may be called from any thread and takes the timer's lock once, because in a
  broker the request-handler threads add delayed operations while the ExpirationReaper thread
  advances the clock.
- ``heap``: `HeapTimer`, a heapq timer with lazy cancellation and periodic compaction, the way
  asyncio's event loop keeps its timer handles. It has NO lock: asyncio's loop is
  single-threaded, so it gives a weaker guarantee than the wheel.
- ``heap+lock``: `LockedHeapTimer`, the same heap made thread-safe the cheapest defensible way,
  i.e. the role of Java's DelayQueue, the locked priority queue that Kafka's timing wheel replaced
  in the purgatory. One `threading.Lock` guards `add` and `advance` (the operations that change
  the heap); `advance` first peeks at the heap's head without the lock and returns at once when
  nothing is due, exactly as the wheel's `advance_clock` does; cancellation stays an unlocked
  flag. Why it is here: ``heap`` vs ``wheel`` compares unequal guarantees. A heap that replaced
  the wheel in the broker would have to be thread-safe too, so ``heap+lock`` is the
  like-for-like baseline, and ``heap`` the lower bound of what a heap costs without threads.

Workload (purgatory-shaped)
---------------------------
For each N in 1e3, 1e4, 1e5, 1e6 (CLI ``--sizes`` to override, ``--quick`` = 1e3,1e4,1e5):

- Standing population: prefill N pending tasks. Their timeouts are spread uniformly over
  [W + 1000, 30000] ms, where W is the number of measured steps (default W = 15000, i.e. 15 s of
  simulated time): a purgatory's long-pending requests whose deadlines lie beyond the measured
  window. Why: with one arrival per 1 ms step and timeouts of at most 30 s, a truly steady
  pending population cannot exceed ~30k, so for larger N the standing tasks must not all fall due
  inside the window, else the per-step work (expiries) grows with N for any timer and hides the
  data structure's cost.
- Then W steps; each step: (1) add one new task with a timeout uniform in [1, 30000] ms; (2) with
  probability 0.95 complete one pending task early: cancel a task chosen uniformly at random
  among all tasks still pending (keep a list of handles with swap-remove; if the chosen one
  already ran, just drop it and do not retry); with probability 0.05 cancel nothing (that task is
  "left to expire"); (3) advance the clock by 1 ms and expire what is due.
- Same random seed and the same operation sequence for every timer (the random numbers are
  precomputed once per N, outside the timed region). Only the W steps are timed
  (``time.perf_counter_ns``), not the prefill. Each timer's measurement runs 3 times per N (fresh
  prefill each time; ``--runs``), interleaved (wheel, heap, heap+lock, then again), and the
  median ns/step is reported. gc is disabled during the timed loop (``gc.disable``/
  ``gc.enable``), after a ``gc.collect()``, for every timer alike. All operations run on one
  thread: the locks are taken uncontended, so the figures are the price of the guarantee, not of
  contention.
- Sanity check per N: all timers ran the same number of tasks during the steps and have the
  same pending count at the end (checked; a benchmark whose timers disagree is wrong, so a
  mismatch aborts it).
- Memory: a separate pass per N for the wheel and the heap with tracemalloc: the N prefill task
  objects (and the tasks the steps will add) are created BEFORE tracemalloc starts, so the task
  objects themselves are excluded; then tracemalloc starts, they are all added to a fresh timer,
  1000 steps run, and tracemalloc's peak / N is reported as bytes per pending task (the timer's
  own overhead per task). gc is off in this pass too, so the figure also counts what completed
  entries leave behind until a collection. ``heap+lock`` is not measured separately: it stores
  exactly the heap's entries (its heap evolves identically, compactions included) and its lock
  is one object per timer, so its B/task is the heap's; skipping the pass saves run time.

Harness choices, identical for every timer: task objects are created before the timed region
(creating the request object is the purgatory's cost, not the timer's); the handle list is
preallocated so the loop itself allocates nothing; time comes from a plain counter. The wheel's
`Timer` reads it through a minimal `Clock` (`StepClock`) rather than `ManualClock`, whose
`advance` (a lock plus a listener-list copy, ~0.3 us) is harness overhead the heaps would not
pay.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import itertools
import json
import platform
import random
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from kafkactor.timer import Timer, TimerTask

MAX_TIMEOUT_MS = 30_000
STANDING_MARGIN_MS = 1_000
DEFAULT_STEPS = 15_000
EARLY_COMPLETION_PROBABILITY = 0.95
DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)
QUICK_SIZES = (1_000, 10_000, 100_000)
DEFAULT_RUNS = 3
DEFAULT_SEED = 20_240_611
MEMORY_STEPS = 1_000
WHEEL_TICK_MS = 1
WHEEL_SIZE = 20
# asyncio's rule: compact once more than this many entries are cancelled and they are the majority
COMPACT_MIN_CANCELLED = 100

# Targets
LARGE_N = 100_000
SMALL_N = 1_000
LARGE_N_MAX_RATIO = 1.0
SMALL_N_MAX_RATIO = 1.3
MAX_WHEEL_GROWTH = 2.0


# --------------------------------------------------------------------------------------------
# Tasks and timers
# --------------------------------------------------------------------------------------------


class FireCounter:
    """How many tasks have run; shared by every task of one measurement."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class Cancellable(Protocol):
    """What the workload needs of a task handle: a way to complete it early."""

    def cancel(self) -> None: ...


class WheelTask(TimerTask):
    """A kafkactor timer task that counts its run."""

    __slots__ = ("_fired",)

    def __init__(self, delay_ms: int, fired: FireCounter) -> None:
        super().__init__(delay_ms)
        self._fired = fired

    def run(self) -> None:
        self._fired.count += 1


HeapEntry = tuple[int, int, "HeapTask"]


class HeapTask:
    """A task for `HeapTimer`, shaped like `TimerTask`: `delay_ms`, `run()`, O(1) `cancel()`.

    `_entry` is the heap entry that will run the task; an entry whose task no longer points at it
    is cancelled (lazily: it stays in the heap until popped or compacted away).
    """

    __slots__ = ("_entry", "_fired", "_timer", "delay_ms")

    _timer: HeapTimer  # set by HeapTimer.add; only read while `_entry` is set

    def __init__(self, delay_ms: int, fired: FireCounter) -> None:
        self.delay_ms = delay_ms
        self._entry: HeapEntry | None = None
        self._fired = fired

    def run(self) -> None:
        self._fired.count += 1

    def cancel(self) -> None:
        """Flag the task's entry as cancelled and count it; a no-op when not pending.

        No lock, even on a `LockedHeapTimer` (see there).
        """
        if self._entry is not None:
            self._entry = None
            self._timer._cancelled += 1

    @property
    def is_pending(self) -> bool:
        return self._entry is not None


class HeapTimer:
    """A heapq timer with lazy cancellation and periodic compaction (asyncio's scheme).

    Entries are ``(deadline_ms, seq, task)`` tuples; `seq` keeps equal deadlines in insertion
    order and keeps tuple comparison from ever reaching the task. Cancelling only flags the task
    and counts the dead entry; when more than `COMPACT_MIN_CANCELLED` entries are dead and they
    are more than half of the heap, `advance` rebuilds the heap without them.
    """

    __slots__ = ("_cancelled", "_heap", "_next_seq", "now_ms")

    def __init__(self, now_ms: int = 0) -> None:
        self.now_ms = now_ms
        self._heap: list[HeapEntry] = []
        self._cancelled = 0
        self._next_seq: Callable[[], int] = itertools.count().__next__

    @property
    def size(self) -> int:
        """Pending tasks: entries in the heap that are not cancelled."""
        return len(self._heap) - self._cancelled

    def add(self, task: HeapTask) -> None:
        """Schedule `task` to run `task.delay_ms` after the current time (at once if not after)."""
        if task._entry is not None:  # re-added while pending: its old entry is now dead
            task._timer._cancelled += 1
        deadline = self.now_ms + task.delay_ms
        if deadline <= self.now_ms:
            task._entry = None
            task.run()
            return
        entry = (deadline, self._next_seq(), task)
        task._entry = entry
        task._timer = self
        heapq.heappush(self._heap, entry)

    def advance(self, now_ms: int) -> bool:
        """Move time to `now_ms` and run every task due by then; True when any entry was popped."""
        self.now_ms = now_ms
        heap = self._heap
        cancelled = self._cancelled
        if cancelled > COMPACT_MIN_CANCELLED and cancelled * 2 > len(heap):
            self._compact()
        if not heap or heap[0][0] > now_ms:
            return False
        pop = heapq.heappop
        while heap and heap[0][0] <= now_ms:
            entry = pop(heap)
            task = entry[2]
            if task._entry is entry:
                task._entry = None
                task.run()
            else:
                self._cancelled -= 1
        return True

    def _compact(self) -> None:
        """Drop every cancelled entry and restore the heap invariant."""
        live = [entry for entry in self._heap if entry[2]._entry is entry]
        heapq.heapify(live)
        self._heap[:] = live
        self._cancelled = 0


class LockedHeapTimer(HeapTimer):
    """`HeapTimer` made thread-safe the cheapest defensible way: the role of Java's DelayQueue.

    One `threading.Lock` is taken in `add` and in `advance`, the operations that change the heap,
    so request threads may add while a reaper thread advances. `advance` first peeks at the
    heap's head without the lock and, when nothing is due and no compaction is owed, only moves
    the time and returns: the same lock-free fast path as the wheel's ``advance_clock(0)``
    (reading ``heap[0]`` is atomic under the GIL; a task added just after the peek runs on the
    next advance, as with the wheel). The compaction test is repeated there so that the heap
    evolves exactly as `HeapTimer`'s does, compactions included.

    Cancellation stays `HeapTask.cancel`: a flag set plus an increment of the cancelled count,
    WITHOUT the lock. This favours the baseline, if anything: under real concurrency that
    unlocked ``+= 1`` can race with `advance`'s own updates of the count, so the count (and with
    it `size` and the compaction trigger) may drift. This benchmark runs on one thread, where it
    is exact.
    """

    __slots__ = ("_lock",)

    def __init__(self, now_ms: int = 0) -> None:
        super().__init__(now_ms)
        self._lock = threading.Lock()

    def add(self, task: HeapTask) -> None:
        """`HeapTimer.add` under the lock."""
        with self._lock:
            HeapTimer.add(self, task)

    def advance(self, now_ms: int) -> bool:
        """`HeapTimer.advance` under the lock, unless a lock-free peek shows nothing to do."""
        heap = self._heap
        cancelled = self._cancelled
        if (not heap or heap[0][0] > now_ms) and not (
            cancelled > COMPACT_MIN_CANCELLED and cancelled * 2 > len(heap)
        ):
            self.now_ms = now_ms
            return False
        with self._lock:
            return HeapTimer.advance(self, now_ms)


class StepClock:
    """A `kafkactor.timer.Clock` whose time is a plain attribute set by the benchmark loop."""

    __slots__ = ("now",)

    def __init__(self, now_ms: int = 0) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def wait(self, condition: threading.Condition, timeout_ms: int) -> None:
        return None


# --------------------------------------------------------------------------------------------
# Contenders: one task type and one timer driver per timer implementation
# --------------------------------------------------------------------------------------------

TaskT = TypeVar("TaskT", bound=Cancellable)


@dataclass(frozen=True, slots=True)
class Driver(Generic[TaskT]):
    """A fresh timer seen through the operations the workload uses."""

    add: Callable[[TaskT], None]
    tick: Callable[[int], object]  # set time to the given ms and expire what is due
    pending: Callable[[], int]


@dataclass(frozen=True, slots=True)
class Contender(Generic[TaskT]):
    """A timer implementation: how to make its tasks and a fresh timer to run them."""

    name: str
    new_task: Callable[[int, FireCounter], TaskT]
    new_driver: Callable[[], Driver[TaskT]]


def new_wheel_driver() -> Driver[WheelTask]:
    """A fresh kafkactor `Timer` (tick 1 ms, 20 buckets per level) on a `StepClock` at 0."""
    clock = StepClock(0)
    timer = Timer(clock, tick_ms=WHEEL_TICK_MS, wheel_size=WHEEL_SIZE)
    expire = timer.advance_clock

    def tick(now_ms: int) -> None:
        clock.now = now_ms
        expire(0)

    return Driver(add=timer.add, tick=tick, pending=lambda: timer.size)


def new_heap_driver() -> Driver[HeapTask]:
    """A fresh `HeapTimer` at time 0."""
    timer = HeapTimer(0)
    return Driver(add=timer.add, tick=timer.advance, pending=lambda: timer.size)


def new_locked_heap_driver() -> Driver[HeapTask]:
    """A fresh `LockedHeapTimer` at time 0."""
    timer = LockedHeapTimer(0)
    return Driver(add=timer.add, tick=timer.advance, pending=lambda: timer.size)


WHEEL: Contender[WheelTask] = Contender("wheel", WheelTask, new_wheel_driver)
HEAP: Contender[HeapTask] = Contender("heap", HeapTask, new_heap_driver)
HEAP_LOCK: Contender[HeapTask] = Contender("heap+lock", HeapTask, new_locked_heap_driver)


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Workload:
    """The precomputed random operation sequence for one N, shared by every timer."""

    n: int
    steps: int
    prefill_delays: list[int]
    step_delays: list[int]
    # per step: index into the handle list (after that step's add) to cancel, or -1 for none
    picks: list[int]


def build_workload(n: int, steps: int, seed: int) -> Workload:
    """Draw the prefill timeouts, the step timeouts and the early-completion picks for `n`."""
    rng = random.Random(f"{seed}:{n}:{steps}")
    low = steps + STANDING_MARGIN_MS
    if low > MAX_TIMEOUT_MS:
        raise ValueError(f"{steps} steps leave no room for standing timeouts <= {MAX_TIMEOUT_MS}")
    prefill = [rng.randint(low, MAX_TIMEOUT_MS) for _ in range(n)]
    step_delays: list[int] = []
    picks: list[int] = []
    live = n
    for _ in range(steps):
        step_delays.append(rng.randint(1, MAX_TIMEOUT_MS))
        live += 1
        if rng.random() < EARLY_COMPLETION_PROBABILITY:
            picks.append(rng.randrange(live))
            live -= 1
        else:
            picks.append(-1)
    return Workload(n, steps, prefill, step_delays, picks)


def run_steps(
    driver: Driver[TaskT],
    step_tasks: Sequence[TaskT],
    picks: Sequence[int],
    handles: list[TaskT],
    live: int,
) -> None:
    """Run one step per task: add it, maybe cancel a random pending task, advance 1 ms.

    `handles[:live]` are the tasks that may still be pending; `handles` must have room for
    `len(step_tasks)` more, so the loop never allocates.
    """
    add = driver.add
    tick = driver.tick
    for task, pick, now_ms in zip(step_tasks, picks, range(1, len(step_tasks) + 1), strict=True):
        add(task)
        handles[live] = task
        live += 1
        if pick >= 0:
            live -= 1
            victim = handles[pick]
            handles[pick] = handles[live]
            victim.cancel()
        tick(now_ms)


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepRun:
    """One timed run of the W steps."""

    ns_per_step: float
    fired: int  # tasks run during the steps
    pending: int  # pending tasks after the steps


def time_steps(contender: Contender[TaskT], workload: Workload) -> StepRun:
    """Prefill a fresh timer, then time the workload's steps (gc off, after a collection)."""
    gc.collect()
    fired = FireCounter()
    new_task = contender.new_task
    prefill = [new_task(delay, fired) for delay in workload.prefill_delays]
    step_tasks = [new_task(delay, fired) for delay in workload.step_delays]
    handles = prefill + step_tasks  # preallocated; positions past the live prefix are scratch
    driver = contender.new_driver()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        add = driver.add
        for task in prefill:
            add(task)
        fired_before = fired.count
        gc.collect()
        start = time.perf_counter_ns()
        run_steps(driver, step_tasks, workload.picks, handles, workload.n)
        elapsed = time.perf_counter_ns() - start
    finally:
        if was_enabled:
            gc.enable()
    return StepRun(elapsed / workload.steps, fired.count - fired_before, driver.pending())


def memory_per_task(contender: Contender[TaskT], workload: Workload, n: int, steps: int) -> float:
    """tracemalloc peak / n while a fresh timer takes `n` tasks and runs `steps` steps.

    The task objects are created before tracing starts, so only the timer's own allocations
    (entries, buckets, heap slots, deadline ints) are counted.
    """
    gc.collect()
    fired = FireCounter()
    new_task = contender.new_task
    prefill = [new_task(delay, fired) for delay in workload.prefill_delays[:n]]
    step_tasks = [new_task(delay, fired) for delay in workload.step_delays[:steps]]
    picks = memory_picks(workload, n, steps)
    handles = prefill + step_tasks
    was_enabled = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    try:
        driver = contender.new_driver()
        add = driver.add
        for task in prefill:
            add(task)
        run_steps(driver, step_tasks, picks, handles, n)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        if was_enabled:
            gc.enable()
    return peak / n


def memory_picks(workload: Workload, n: int, steps: int) -> list[int]:
    """The workload's picks for the first `steps` steps, rescaled to a population of `n`."""
    if n == workload.n:
        return workload.picks[:steps]
    rng = random.Random(f"memory:{n}:{steps}")
    picks: list[int] = []
    live = n
    for pick in workload.picks[:steps]:
        live += 1
        if pick >= 0:
            picks.append(rng.randrange(live))
            live -= 1
        else:
            picks.append(-1)
    return picks


@dataclass(frozen=True, slots=True)
class SizeResult:
    """Everything measured for one N."""

    n: int
    wheel_ns_per_step: float
    heap_ns_per_step: float
    heap_lock_ns_per_step: float
    ratio: float  # wheel / heap (asyncio-style, no lock)
    ratio_heap_lock: float  # wheel / heap+lock (thread-safe, as the wheel is)
    wheel_runs_ns: list[float]
    heap_runs_ns: list[float]
    heap_lock_runs_ns: list[float]
    memory_n: int
    wheel_bytes_per_task: float
    heap_bytes_per_task: float  # also heap+lock's: same entries, the lock is per timer
    fired: int
    pending_after: int


class BenchmarkMismatchError(AssertionError):
    """The timers disagreed on the same workload: the benchmark (or a timer) is wrong."""


def check_agreement(n: int, runs: dict[str, list[StepRun]]) -> tuple[int, int]:
    """Every run of every timer fired and left pending the same counts; return them."""
    outcomes = {(run.fired, run.pending) for per_timer in runs.values() for run in per_timer}
    if len(outcomes) != 1:
        detail = {name: [(r.fired, r.pending) for r in rs] for name, rs in runs.items()}
        raise BenchmarkMismatchError(f"N={n}: timers disagree (fired, pending): {detail}")
    return outcomes.pop()


def measure_size(
    n: int, *, steps: int, seed: int, runs: int, memory_cap: int | None, memory_steps: int
) -> SizeResult:
    """Time every timer `runs` times (interleaved per run) and measure memory for one N.

    Memory is measured for the wheel and the heap only: heap+lock holds the heap's very entries
    (its lock is one object per timer), so its bytes per task are the heap's.
    """
    workload = build_workload(n, steps, seed)
    step_runs: dict[str, list[StepRun]] = {c.name: [] for c in (WHEEL, HEAP, HEAP_LOCK)}
    for _ in range(runs):
        step_runs[WHEEL.name].append(time_steps(WHEEL, workload))
        step_runs[HEAP.name].append(time_steps(HEAP, workload))
        step_runs[HEAP_LOCK.name].append(time_steps(HEAP_LOCK, workload))
    fired, pending = check_agreement(n, step_runs)
    wheel_ns = [run.ns_per_step for run in step_runs[WHEEL.name]]
    heap_ns = [run.ns_per_step for run in step_runs[HEAP.name]]
    heap_lock_ns = [run.ns_per_step for run in step_runs[HEAP_LOCK.name]]
    memory_n = n if memory_cap is None else min(n, memory_cap)
    mem_steps = min(memory_steps, steps)
    wheel_bytes = memory_per_task(WHEEL, workload, memory_n, mem_steps)
    heap_bytes = memory_per_task(HEAP, workload, memory_n, mem_steps)
    wheel_median = statistics.median(wheel_ns)
    heap_median = statistics.median(heap_ns)
    heap_lock_median = statistics.median(heap_lock_ns)
    return SizeResult(
        n=n,
        wheel_ns_per_step=wheel_median,
        heap_ns_per_step=heap_median,
        heap_lock_ns_per_step=heap_lock_median,
        ratio=wheel_median / heap_median,
        ratio_heap_lock=wheel_median / heap_lock_median,
        wheel_runs_ns=wheel_ns,
        heap_runs_ns=heap_ns,
        heap_lock_runs_ns=heap_lock_ns,
        memory_n=memory_n,
        wheel_bytes_per_task=wheel_bytes,
        heap_bytes_per_task=heap_bytes,
        fired=fired,
        pending_after=pending,
    )


# --------------------------------------------------------------------------------------------
# Targets and report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetResult:
    """One performance target: PASS, FAIL or N/A (the sizes needed were not measured)."""

    name: str
    status: str
    detail: str


def sci(n: int) -> str:
    """`n` as ``1e5`` when it is a power of ten, else as digits."""
    digits = str(n)
    if digits.startswith("1") and set(digits[1:]) <= {"0"} and n >= 10:
        return f"1e{len(digits) - 1}"
    return digits


def fmt_runs(values: Sequence[float]) -> str:
    """Run times as a compact list."""
    return "/".join(f"{value:.0f}" for value in values)


@dataclass(frozen=True, slots=True)
class Baseline:
    """A heap contender the wheel is judged against in targets 1 and 2."""

    tag: str  # "a" or "b", suffixed to the target number
    name: str
    guarantee: str
    ns_per_step: Callable[[SizeResult], float]
    ratio: Callable[[SizeResult], float]  # wheel / this baseline


BASELINES = (
    Baseline(
        "a", HEAP.name, "asyncio-style, no lock", lambda r: r.heap_ns_per_step, lambda r: r.ratio
    ),
    Baseline(
        "b",
        HEAP_LOCK.name,
        "thread-safe, as the wheel is",
        lambda r: r.heap_lock_ns_per_step,
        lambda r: r.ratio_heap_lock,
    ),
)


def ratio_label(baseline: Baseline) -> str:
    """``wheel/heap``, or ``wheel/(heap+lock)`` when the name is compound."""
    name = baseline.name
    return f"wheel/({name})" if "+" in name else f"wheel/{name}"


def evaluate_targets(results: Sequence[SizeResult]) -> list[TargetResult]:
    """Check the three targets against the measured sizes; 1 and 2 against each baseline."""
    by_n = {result.n: result for result in results}
    targets: list[TargetResult] = []

    large = [r for r in results if r.n >= LARGE_N]
    for base in BASELINES:
        label = ratio_label(base)
        name = (
            f"1{base.tag}. wheel no slower than {base.name} ({base.guarantee}) at "
            f"N >= {sci(LARGE_N)} ({label} <= {LARGE_N_MAX_RATIO})"
        )
        if large:
            ok = all(base.ratio(r) <= LARGE_N_MAX_RATIO for r in large)
            detail = ", ".join(f"N={r.n}: {base.ratio(r):.2f}" for r in large)
            targets.append(TargetResult(name, "PASS" if ok else "FAIL", detail))
        else:
            targets.append(TargetResult(name, "N/A", f"no N >= {LARGE_N} measured"))

    small = by_n.get(SMALL_N)
    for base in BASELINES:
        label = ratio_label(base)
        name = (
            f"2{base.tag}. wheel within {SMALL_N_MAX_RATIO}x of {base.name} ({base.guarantee}) "
            f"at N = {sci(SMALL_N)} ({label} <= {SMALL_N_MAX_RATIO})"
        )
        if small is not None:
            ok = base.ratio(small) <= SMALL_N_MAX_RATIO
            detail = (
                f"wheel {small.wheel_ns_per_step:.0f} ns, {base.name} "
                f"{base.ns_per_step(small):.0f} ns, {label} {base.ratio(small):.2f}"
            )
            targets.append(TargetResult(name, "PASS" if ok else "FAIL", detail))
        else:
            targets.append(TargetResult(name, "N/A", f"N={SMALL_N} not measured"))

    name = f"3. wheel ns/step grows < {MAX_WHEEL_GROWTH}x from smallest to largest N"
    if len(results) >= 2:
        first, last = min(results, key=lambda r: r.n), max(results, key=lambda r: r.n)
        growth = last.wheel_ns_per_step / first.wheel_ns_per_step
        detail = (
            f"N={first.n}: {first.wheel_ns_per_step:.0f} ns -> N={last.n}: "
            f"{last.wheel_ns_per_step:.0f} ns, growth {growth:.2f}x"
        )
        targets.append(TargetResult(name, "PASS" if growth < MAX_WHEEL_GROWTH else "FAIL", detail))
    else:
        targets.append(TargetResult(name, "N/A", "needs at least two sizes"))
    return targets


def format_table(results: Sequence[SizeResult]) -> str:
    """The results table, with a footnote when memory was measured below N."""
    header = (
        f"{'N':<9}{'wheel ns/step':>14}{'heap ns/step':>14}{'heap+lock ns/step':>19}"
        f"{'wheel/heap':>12}{'wheel/(heap+lock)':>19}"
        f"{'wheel B/task':>14}{'heap B/task':>13}{'fired':>8}{'pending':>10}"
    )
    lines = [header]
    capped = [r for r in results if r.memory_n != r.n]
    for r in results:
        mark = "*" if r.memory_n != r.n else " "
        lines.append(
            f"{r.n:<9}{r.wheel_ns_per_step:>14.0f}{r.heap_ns_per_step:>14.0f}"
            f"{r.heap_lock_ns_per_step:>19.0f}{r.ratio:>12.2f}{r.ratio_heap_lock:>19.2f}"
            f"{r.wheel_bytes_per_task:>13.1f}{mark}{r.heap_bytes_per_task:>12.1f}{mark}"
            f"{r.fired:>8}{r.pending_after:>10}"
        )
    lines.append(
        "ns/step: median of the runs; fired/pending: tasks run during the steps / pending after"
        " (identical for all three timers)."
    )
    lines.append("B/task: tracemalloc peak / N (the timer's overhead; task objects excluded).")
    lines.append(
        "heap B/task is heap+lock's too (not measured separately, to save run time): the same"
        " heap entries, and a lock is one object per timer, no memory per task."
    )
    if capped:
        lines.append(
            "* memory measured with "
            + ", ".join(f"{r.memory_n} tasks for N={r.n}" for r in capped)
            + " (--memory-cap) to bound the run time."
        )
    return "\n".join(lines)


def parse_sizes(text: str) -> tuple[int, ...]:
    """Parse a comma-separated list of sizes such as ``1e3,1e4,250000``."""
    sizes: list[int] = []
    for part in text.split(","):
        value = float(part.strip())
        if value < 1 or value != int(value):
            raise argparse.ArgumentTypeError(f"not a positive whole size: {part!r}")
        sizes.append(int(value))
    return tuple(sizes)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=(
            "kafkactor timing wheel vs a heapq timer, without and with a lock, on a"
            " purgatory-shaped workload."
        )
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument(
        "--sizes",
        type=parse_sizes,
        default=DEFAULT_SIZES,
        help="comma-separated standing populations N (default 1e3,1e4,1e5,1e6)",
    )
    sizes.add_argument(
        "--quick", action="store_true", help="N = 1e3,1e4,1e5 (a shorter run than the default)"
    )
    parser.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help="measured 1 ms steps W (default 15000)"
    )
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS, help="timed runs per timer")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument(
        "--memory-cap",
        type=int,
        default=None,
        metavar="N",
        help="measure memory with at most this many tasks (default: the full N)",
    )
    parser.add_argument(
        "--memory-steps",
        type=int,
        default=MEMORY_STEPS,
        help="steps run in the memory pass (default 1000)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = QUICK_SIZES
    if args.steps < 1 or args.steps + STANDING_MARGIN_MS > MAX_TIMEOUT_MS:
        parser.error(f"--steps must be in [1, {MAX_TIMEOUT_MS - STANDING_MARGIN_MS}]")
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    return args


def print_header(args: argparse.Namespace) -> None:
    """Python version and the benchmark parameters."""
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}) on "
        f"{platform.platform()}"
    )
    print(
        f"sizes N={', '.join(str(n) for n in args.sizes)}; steps W={args.steps} (1 ms each); "
        f"runs={args.runs} (median); seed={args.seed}"
    )
    print(
        f"standing timeouts U[{args.steps + STANDING_MARGIN_MS}, {MAX_TIMEOUT_MS}] ms; "
        f"new timeouts U[1, {MAX_TIMEOUT_MS}] ms; early completion p={EARLY_COMPLETION_PROBABILITY}"
    )
    print(
        f"wheel: kafkactor Timer tick_ms={WHEEL_TICK_MS} wheel_size={WHEEL_SIZE} (thread-safe); "
        f"heap: heapq, lazy cancel, compaction at >{COMPACT_MIN_CANCELLED} and >50% cancelled "
        "(no lock, asyncio-style)"
    )
    print(
        "heap+lock: the same heap, thread-safe: a threading.Lock in add and advance (lock-free"
        " peek when nothing is due, as the wheel does), unlocked cancel"
    )
    cap = "full N" if args.memory_cap is None else f"min(N, {args.memory_cap})"
    print(f"memory: tracemalloc peak over {cap} tasks + {args.memory_steps} steps")
    print(flush=True)


def write_json(
    path: Path,
    args: argparse.Namespace,
    results: Sequence[SizeResult],
    targets: Sequence[TargetResult],
    wall_s: float,
) -> None:
    """Write the parameters, results and targets to `path` (parents created)."""
    document = {
        "python": sys.version,
        "platform": platform.platform(),
        "parameters": {
            "sizes": list(args.sizes),
            "steps": args.steps,
            "runs": args.runs,
            "seed": args.seed,
            "max_timeout_ms": MAX_TIMEOUT_MS,
            "standing_timeout_range_ms": [args.steps + STANDING_MARGIN_MS, MAX_TIMEOUT_MS],
            "early_completion_probability": EARLY_COMPLETION_PROBABILITY,
            "wheel_tick_ms": WHEEL_TICK_MS,
            "wheel_size": WHEEL_SIZE,
            "memory_cap": args.memory_cap,
            "memory_steps": args.memory_steps,
            "contenders": {
                WHEEL.name: "kafkactor.timer.Timer: thread-safe (one lock per add)",
                HEAP.name: "HeapTimer: heapq, lazy cancel + compaction, no lock (asyncio-style)",
                HEAP_LOCK.name: (
                    "LockedHeapTimer: HeapTimer with a threading.Lock in add and advance"
                    " (lock-free peek when nothing is due), unlocked cancel"
                ),
            },
            "heap_lock_bytes_per_task": (
                "not measured: equal to heap_bytes_per_task (same heap entries; the lock is one"
                " object per timer, no memory per task)"
            ),
        },
        "results": [asdict(result) for result in results],
        "targets": [asdict(target) for target in targets],
        "wall_time_s": wall_s,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the table and targets; 0 even when a target fails."""
    started = time.perf_counter()
    args = parse_args(argv)
    print_header(args)
    results: list[SizeResult] = []
    for n in args.sizes:
        size_started = time.perf_counter()
        result = measure_size(
            n,
            steps=args.steps,
            seed=args.seed,
            runs=args.runs,
            memory_cap=args.memory_cap,
            memory_steps=args.memory_steps,
        )
        results.append(result)
        print(
            f"N={n}: sanity OK, all three timers fired {result.fired} and left "
            f"{result.pending_after} pending; ns/step runs: wheel {fmt_runs(result.wheel_runs_ns)},"
            f" heap {fmt_runs(result.heap_runs_ns)}, heap+lock "
            f"{fmt_runs(result.heap_lock_runs_ns)} ({time.perf_counter() - size_started:.1f} s)",
            flush=True,
        )
    print()
    print(format_table(results))
    print()
    targets = evaluate_targets(results)
    for target in targets:
        print(f"[{target.status}] {target.name}: {target.detail}")
    wall_s = time.perf_counter() - started
    print(f"\ntotal wall time {wall_s:.1f} s")
    if args.json is not None:
        write_json(args.json, args, results, targets, wall_s)
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
