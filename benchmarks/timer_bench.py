"""kafkactor's hierarchical timing wheel against heapq timers, on a purgatory-shaped workload.

Measures ns per 1 ms step and bytes per pending task of three timers on the same operation
sequence, in one process; the ratios wheel/heap and wheel/(heap+lock) are the result.

- ``wheel``: kafkactor's `Timer` (Kafka's SystemTimer over a timing wheel; thread-safe).
- ``heap``: a heapq timer with lazy cancellation and asyncio's compaction rule, no lock (the
  lower bound of what a heap costs without threads).
- ``heap+lock``: the same heap with a `threading.Lock` in add and advance and the wheel's
  lock-free "nothing due" peek: the like-for-like baseline, in the role of the DelayQueue
  that Kafka's wheel replaced. Cancellation stays an unlocked flag (this favours the heap).

Workload, per standing population N (``--sizes``): N tasks prefilled with timeouts uniform in
[W + 1 s, 30 s] (beyond the measured window, so per-step expiries do not grow with N), then
W steps (``--steps``): add one task (timeout U[1, 30000] ms); with p = 0.95 cancel a uniformly
chosen pending task (a request completed early); advance 1 ms. The random sequence is drawn
once per N and shared; task objects are built before timing; gc is off in the timed loop; the
timers are interleaved run by run (``--runs``; median with min-max). All timers must run and
leave pending the same counts (else the benchmark is wrong and stops). Memory: tracemalloc's
peak over a fresh timer taking min(N, --memory-cap) tasks and ``--memory-steps`` steps, per
task (task objects excluded); heap+lock stores exactly the heap's entries, so it is not
measured apart. Targets: wheel <= heap(+lock) at N >= 1e5, within 1.3x at N = 1e3, and the
wheel's ns/step growing < 2x from the smallest to the largest N.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import _harness as h

from kafkactor.timer import Timer, TimerTask

MAX_TIMEOUT_MS = 30_000
STANDING_MARGIN_MS = 1_000
CANCEL_PROBABILITY = 0.95
COMPACT_MIN_CANCELLED = 100  # asyncio's rule: compact past this many, when half are dead
LARGE_N, SMALL_N = 100_000, 1_000


class Fired:
    """How many tasks of one measurement have run."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class WheelTask(TimerTask):
    __slots__ = ("_fired",)

    def __init__(self, delay_ms: int, fired: Fired) -> None:
        super().__init__(delay_ms)
        self._fired = fired

    def run(self) -> None:
        self._fired.count += 1


class HeapTask:
    """A task for `HeapTimer`: its live heap entry (None once run or cancelled)."""

    __slots__ = ("_entry", "_fired", "_timer", "delay_ms")
    _timer: HeapTimer

    def __init__(self, delay_ms: int, fired: Fired) -> None:
        self.delay_ms = delay_ms
        self._entry: tuple[int, int, HeapTask] | None = None
        self._fired = fired

    def run(self) -> None:
        self._fired.count += 1

    def cancel(self) -> None:
        if self._entry is not None:
            self._entry = None
            self._timer._cancelled += 1


class HeapTimer:
    """``(deadline, seq, task)`` entries in a heapq; cancelled entries stay until popped or
    compacted away (asyncio's scheme)."""

    __slots__ = ("_cancelled", "_heap", "_next_seq", "now_ms")

    def __init__(self) -> None:
        self.now_ms = 0
        self._heap: list[tuple[int, int, HeapTask]] = []
        self._cancelled = 0
        self._next_seq: Callable[[], int] = itertools.count().__next__

    @property
    def size(self) -> int:
        return len(self._heap) - self._cancelled

    def add(self, task: HeapTask) -> None:
        if task._entry is not None:  # re-added while pending: the old entry is dead
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

    def _compaction_due(self) -> bool:
        return self._cancelled > COMPACT_MIN_CANCELLED and self._cancelled * 2 > len(self._heap)

    def advance(self, now_ms: int) -> None:
        self.now_ms = now_ms
        heap = self._heap
        if self._compaction_due():
            live = [entry for entry in heap if entry[2]._entry is entry]
            heapq.heapify(live)
            heap[:] = live
            self._cancelled = 0
        while heap and heap[0][0] <= now_ms:
            entry = heapq.heappop(heap)
            task = entry[2]
            if task._entry is entry:
                task._entry = None
                task.run()
            else:
                self._cancelled -= 1


class LockedHeapTimer(HeapTimer):
    """`HeapTimer` with a lock in add and advance, and a lock-free peek when nothing is due."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()

    def add(self, task: HeapTask) -> None:
        with self._lock:
            HeapTimer.add(self, task)

    def advance(self, now_ms: int) -> None:
        heap = self._heap
        if (not heap or heap[0][0] > now_ms) and not self._compaction_due():
            self.now_ms = now_ms
            return
        with self._lock:
            HeapTimer.advance(self, now_ms)


class StepClock:
    """A `Clock` read from a plain attribute (ManualClock's lock and listeners are harness
    cost the heaps would not pay)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0

    def now_ms(self) -> int:
        return self.now

    def wait(self, condition: threading.Condition, timeout_ms: int) -> None:
        return None


TaskT = TypeVar("TaskT", bound=Cancellable)


@dataclass(frozen=True, slots=True)
class Driver(Generic[TaskT]):
    add: Callable[[TaskT], None]
    tick: Callable[[int], object]  # move time to the given ms, run what is due
    pending: Callable[[], int]


@dataclass(frozen=True, slots=True)
class Contender(Generic[TaskT]):
    name: str
    new_task: Callable[[int, Fired], TaskT]
    new_driver: Callable[[], Driver[TaskT]]


def wheel_driver() -> Driver[WheelTask]:
    clock = StepClock()
    timer = Timer(clock, tick_ms=1, wheel_size=20)
    expire = timer.advance_clock

    def tick(now_ms: int) -> None:
        clock.now = now_ms
        expire(0)

    return Driver(timer.add, tick, lambda: timer.size)


def heap_driver(cls: type[HeapTimer]) -> Callable[[], Driver[HeapTask]]:
    def new() -> Driver[HeapTask]:
        timer = cls()
        return Driver(timer.add, timer.advance, lambda: timer.size)

    return new


WHEEL = Contender("wheel", WheelTask, wheel_driver)
HEAP = Contender("heap", HeapTask, heap_driver(HeapTimer))
HEAP_LOCK = Contender("heap+lock", HeapTask, heap_driver(LockedHeapTimer))
CONTENDERS: tuple[Contender[Any], ...] = (WHEEL, HEAP, HEAP_LOCK)


@dataclass(frozen=True, slots=True)
class Workload:
    n: int
    prefill: list[int]  # timeouts of the standing tasks
    delays: list[int]  # timeout of each step's new task
    picks: list[int]  # per step: index into the live handles to cancel, or -1


def build_workload(n: int, steps: int, seed: int) -> Workload:
    rng = random.Random(f"{seed}:{n}:{steps}")
    prefill = [rng.randint(steps + STANDING_MARGIN_MS, MAX_TIMEOUT_MS) for _ in range(n)]
    return Workload(n, prefill, *draw_steps(rng, n, steps))


def draw_steps(rng: random.Random, live: int, steps: int) -> tuple[list[int], list[int]]:
    delays: list[int] = []
    picks: list[int] = []
    for _ in range(steps):
        delays.append(rng.randint(1, MAX_TIMEOUT_MS))
        live += 1
        if rng.random() < CANCEL_PROBABILITY:
            picks.append(rng.randrange(live))
            live -= 1
        else:
            picks.append(-1)
    return delays, picks


def run_steps(
    driver: Driver[TaskT], tasks: Sequence[TaskT], picks: Sequence[int], handles: list[TaskT]
) -> None:
    """Per step: add its task, cancel the picked live task (swap-remove), advance 1 ms.
    `handles` holds the live tasks first and has room for every step's (no allocation)."""
    add, tick = driver.add, driver.tick
    live = len(handles) - len(tasks)
    for now_ms, (task, pick) in enumerate(zip(tasks, picks, strict=True), start=1):
        add(task)
        handles[live] = task
        live += 1
        if pick >= 0:
            live -= 1
            victim = handles[pick]
            handles[pick] = handles[live]
            victim.cancel()
        tick(now_ms)


def prepared(
    contender: Contender[TaskT], prefill: Sequence[int], delays: Sequence[int]
) -> tuple[Fired, list[TaskT], list[TaskT]]:
    fired = Fired()
    standing = [contender.new_task(delay, fired) for delay in prefill]
    return fired, standing, [contender.new_task(delay, fired) for delay in delays]


def time_steps(contender: Contender[TaskT], w: Workload) -> tuple[float, int, int]:
    """Prefill a fresh timer, time the steps: (ns per step, tasks fired, pending after)."""
    fired, standing, tasks = prepared(contender, w.prefill, w.delays)
    driver = contender.new_driver()
    with h.gc_paused():
        for task in standing:
            driver.add(task)
        started = time.perf_counter_ns()
        run_steps(driver, tasks, w.picks, standing + tasks)
        elapsed = time.perf_counter_ns() - started
    return elapsed / len(tasks), fired.count, driver.pending()


def bytes_per_task(contender: Contender[TaskT], w: Workload, n: int, steps: int) -> float:
    """tracemalloc peak / n: a fresh timer takes n standing tasks and runs `steps` steps."""
    delays, picks = w.delays[:steps], w.picks[:steps]
    if n != w.n:  # the picks index a population of n
        delays, picks = draw_steps(random.Random(f"memory:{n}:{steps}"), n, steps)
    _, standing, tasks = prepared(contender, w.prefill[:n], delays)
    handles = standing + tasks
    with h.gc_paused():
        tracemalloc.start()
        try:
            driver = contender.new_driver()
            for task in standing:
                driver.add(task)
            run_steps(driver, tasks, picks, handles)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    return peak / n


@dataclass(frozen=True, slots=True)
class SizeResult:
    n: int
    ns_per_step: dict[str, h.Spread]  # by contender
    wheel_vs_heap: float  # median ratios
    wheel_vs_heap_lock: float
    bytes_per_task: dict[str, float]  # wheel and heap (heap+lock's is the heap's)
    memory_n: int
    fired: int
    pending: int


def measure_size(n: int, args: argparse.Namespace) -> SizeResult:
    """Every timer `args.runs` times (interleaved), then the memory pass, for one N."""
    workload = build_workload(n, args.steps, args.seed)
    outcomes: dict[str, list[tuple[float, int, int]]] = {}
    for _ in range(args.runs):
        for contender in CONTENDERS:
            outcomes.setdefault(contender.name, []).append(time_steps(contender, workload))
    counts = {(fired, pending) for runs_ in outcomes.values() for _, fired, pending in runs_}
    if len(counts) != 1:
        sys.exit(f"N={n}: the timers disagree on (fired, pending): {counts}")
    spreads = {name: h.Spread.of(ns for ns, _, _ in runs_) for name, runs_ in outcomes.items()}
    memory_n = n if args.memory_cap is None else min(n, args.memory_cap)
    mem_steps = min(args.memory_steps, args.steps)
    memory = {c.name: bytes_per_task(c, workload, memory_n, mem_steps) for c in CONTENDERS[:2]}
    wheel = spreads[WHEEL.name].median
    return SizeResult(
        n,
        spreads,
        wheel / spreads[HEAP.name].median,
        wheel / spreads[HEAP_LOCK.name].median,
        memory,
        memory_n,
        *counts.pop(),
    )


def targets(results: Sequence[SizeResult]) -> list[str]:
    """PASS / FAIL / N/A lines for the three targets."""
    lines: list[str] = []
    large = [r for r in results if r.n >= LARGE_N]
    small = [r for r in results if r.n == SMALL_N]
    for name, get in (("heap", "wheel_vs_heap"), ("heap+lock", "wheel_vs_heap_lock")):
        for rows, limit, what in ((large, 1.0, f"N >= {LARGE_N}"), (small, 1.3, f"N = {SMALL_N}")):
            values = ", ".join(f"N={r.n}: {getattr(r, get):.2f}" for r in rows)
            status = "N/A" if not rows else "FAIL"
            if rows and all(getattr(r, get) <= limit for r in rows):
                status = "PASS"
            lines.append(f"[{status}] wheel/{name} <= {limit} at {what}: {values or '-'}")
    if len(results) >= 2:
        first, last = results[0], results[-1]
        growth = last.ns_per_step[WHEEL.name].median / first.ns_per_step[WHEEL.name].median
        status = "PASS" if growth < 2.0 else "FAIL"
        lines.append(
            f"[{status}] wheel ns/step grows < 2x from N={first.n} to N={last.n}: {growth:.2f}x"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    p = h.parser(
        "timer_bench", "The timing wheel against heapq timers.", "timed runs per timer (3)"
    )
    p.add_argument("--sizes", type=h.int_list, help="standing populations N (1e3,1e4,1e5,1e6)")
    p.add_argument("--steps", type=h.positive_int, help="measured 1 ms steps W (15000)")
    p.add_argument(
        "--memory-cap", type=h.positive_int, help="at most this many tasks in the memory pass"
    )
    p.add_argument("--memory-steps", type=h.positive_int, help="steps of the memory pass (1000)")
    args = h.fill(
        p.parse_args(argv),
        sizes=((1_000, 10_000, 100_000, 1_000_000), (1_000, 10_000, 100_000), (1_000, 10_000)),
        steps=(15_000, 15_000, 500),
        runs=(3, 3, 1),
        memory_steps=(1_000, 1_000, 100),
    )
    if args.steps + STANDING_MARGIN_MS > MAX_TIMEOUT_MS:
        p.error(f"--steps must be at most {MAX_TIMEOUT_MS - STANDING_MARGIN_MS}")
    args.sizes = tuple(sorted(args.sizes))
    h.header(
        f"N = {', '.join(map(str, args.sizes))}; {args.steps} steps of 1 ms; {args.runs} run(s)"
        f" per timer, interleaved; seed {args.seed}",
        f"standing timeouts U[{args.steps + STANDING_MARGIN_MS}, {MAX_TIMEOUT_MS}] ms, new ones"
        f" U[1, {MAX_TIMEOUT_MS}] ms; cancel p={CANCEL_PROBABILITY}; wheel tick 1 ms x 20",
    )
    results = []
    for n in args.sizes:
        result = measure_size(n, args)
        results.append(result)
        print(
            f"N={n}: {result.fired} fired, {result.pending} pending, all timers agree", flush=True
        )
    rows = [
        [
            r.n,
            *(r.ns_per_step[c.name].format() for c in CONTENDERS),
            f"{r.wheel_vs_heap:.2f}",
            f"{r.wheel_vs_heap_lock:.2f}",
            f"{r.bytes_per_task[WHEEL.name]:.1f}" + ("*" if r.memory_n != r.n else ""),
            f"{r.bytes_per_task[HEAP.name]:.1f}" + ("*" if r.memory_n != r.n else ""),
        ]
        for r in results
    ]
    head = ["N", "wheel ns/step", "heap ns/step", "heap+lock ns/step", "wheel/heap"]
    head += ["wheel/(heap+lock)", "wheel B/task", "heap B/task"]
    print()
    print(
        h.table(
            head,
            rows,
            [
                "ns/step: median (min-max) of the runs; ratios of the medians; B/task: tracemalloc"
                " peak / N, task objects excluded (heap+lock's equals the heap's).",
                *(["* memory measured with --memory-cap tasks"] if args.memory_cap else []),
            ],
        )
    )
    print()
    print("\n".join(targets(results)))
    h.finish(args, started, {"results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
