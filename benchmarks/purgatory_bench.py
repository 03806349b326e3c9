"""Benchmark the delayed-operation purgatory through the actors: Kafka's TestPurgatoryPerformance.

Run it as ``.venv/bin/python benchmarks/purgatory_bench.py`` (``--help`` lists the options;
``--quick`` is a ~1 minute version). It finds, for each latency case with tracing off and on,
the highest request rate the actor system sustains, prints a table per case, checks the goal
(25,000 operations per second sustained with tracing off), and profiles the hot path.

Workload (the facts of Kafka's ``TestPurgatoryPerformance``)
------------------------------------------------------------
- Operations arrive as a Poisson process at the target rate (exponential inter-arrival times).
- Each operation has a completion latency drawn from a log-normal distribution given by its
  median and 75th percentile: ``mu = ln(median)``, ``sigma = (ln(p75) - ln(median)) / 0.674490``
  (0.674490 is the 75th percentile point of N(0, 1)); samples are truncated to whole ms.
- The timeout is 200 ms. An operation whose latency is below the timeout is completed by an
  event at ``send time + latency``; the others are left to expire.
- Two latency cases: median 20 ms / p75 60 ms (~8% expire) and median 200 / p75 400 (~50%).

Through the actors, on a real `SystemClock`: a `Directory`, a `Timer` whose executor is the
Reaper's `ExpirationDelivery`, a `ReaperActor` advancing the timer (200 ms poll) and a
`PurgatoryActor`, all fresh for every probe. Each operation has its own key; the request is
``DelayOperation(operation=AwaitValue(key, 1), keys=(key,), timeout_ms=200)``. A generator
thread sends the requests at their Poisson times through a `RecordingClient` (a `Client` that
sends each request under its operation's index as correlation id and records each response as
it arrives, when and how it ended: no Future per operation, as Kafka's test counts completions
down a latch). A
completer thread keeps a heap of due times and sends ``KeyChanged(key, 1)`` to the purgatory at
each operation's completion time (a bare `Directory.tell`, as from outside the actor system).
Request and event messages are built before a probe starts, so the timed path begins at
`Client.send_request` and `Directory.tell` (building a request is the producer's cost, not the
purgatory's); the harness's own per-operation work (a time read, two list stores, a deque
append) is measured with the rest and shows in the generator/completer CPU columns.

Measured per probe
------------------
- target: the realised rate of the probe's arrival plan (operations / last arrival offset, as
  Kafka's ``targetRate``); achieved: operations sent / (generator end - start) (``actualRate``).
  A generator that falls 50% behind its plan gives up (the probe fails).
- compl/s: responses (completed + expired) arriving in the window [start + 250 ms, generator
  end] per second. In that window every operation's answer is due within the run, so in a
  steady state compl/s equals the arrival rate; c/due compares it with the answers *due* in the
  same window (each operation's intended response time: send + latency, or send + 200 ms), so
  the Poisson noise of a short probe cannot fail it.
- CPU: ``time.process_time()`` over the probe, and per thread (generator, completer, purgatory
  actor, reaper actor, main/sampler) through ``time.pthread_getcpuclockid``; us/op is the
  process CPU per operation sent. Python threads share one GIL, so 1e6 / (us/op) is a hard
  ceiling on the rate, whatever the number of cores.
- gc%: time in cyclic-gc collections (``gc.callbacks``, per generation in the JSON) as a share
  of the probe. The prebuilt plan and everything alive before the probe are moved out of the
  collector's sight with ``gc.freeze()``, so only what the system allocates is scanned.
- lateness p50 / p99: response time minus intended response time (the completion event's time,
  or the timeout for an operation that expires), over every answered operation.
- pending over time: sampled every 100 ms, the client's count of operations sent and not yet
  answered (shown as a sparkline), the purgatory's ``num_delayed`` (the `Purgatory` object is
  fetched once through a proxy; reading ``len`` of its dict from the sampler thread is atomic
  under the GIL), and the purgatory actor's mailbox depth (``actor_inbox.qsize()``).
- err / unans: error responses, and operations still unanswered when the probe closed (the
  drain waits up to 200 ms + 1 s after the generator ends).
- sustained: achieved >= 95% of target AND compl/s >= 95% of the answers due in the window AND
  the backlog is not growing: the outstanding count at the end of generation is at most the
  Little's-law in-flight count ``rate x mean(min(latency, 200 ms))`` plus 100 ms of arrivals.
  A probe whose outstanding count passes that plus 1 s of arrivals is aborted (runaway).

Search: per (latency case x tracing), probes of ``--duration`` seconds (default 3) start at
``--start-rate`` and double while sustained, then bisect between the highest sustained and the
lowest failed rate until they are within 10% or ``--max-probes`` probes are spent; if the start
rate fails, the rate halves. Near the ceiling a probe can pass by luck, so the best rate is run
again (at most ``--confirm`` re-runs per search): a failure moves the answer down to the highest
rate below it that never failed, and the bisection goes on while probes remain. Tracing off is
``tracing.configure(stream=<os.devnull>, enabled=False)``; tracing on writes JSON lines to a
temporary file on disk (its size per operation is reported). One extra probe per latency case
runs at the goal rate, tracing off.

Profile (``--profile-rate``, default 5000/s): (1) one live probe at that fixed rate with the
purgatory actor's thread under cProfile (installed through ``threading.setprofile`` before the
actor starts), reported per operation; (2) the hot path driven synchronously on one thread (the
actor objects are created but not started, their mailboxes drained by hand), timed stage by
stage without a profiler, with tracing off and on, then under cProfile; (3) microbenchmarks of
the pieces (envelope, ids, ``replace``, Future, mailbox queues, timer add/cancel, one trace
event, ``Purgatory.watched``), to show where the time of one operation goes.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import dataclasses
import gc
import heapq
import itertools
import json
import math
import os
import platform
import pstats
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType
from typing import IO, Any

from kafkactor import tracing
from kafkactor.actors.purgatory import (
    DelayedAwaitValue,
    ExpirationDelivery,
    Purgatory,
    PurgatoryActor,
    ReaperActor,
)
from kafkactor.actors.runtime import Client, Directory
from kafkactor.actors.runtime.hops import log_send
from kafkactor.messages import Envelope
from kafkactor.messages.purgatory import AwaitValue, DelayOperation, KeyChanged, OperationResult
from kafkactor.timer import Clock, ManualClock, SystemClock, Timer, TimerTask

# The actors' mailbox: queue.SimpleQueue (TracedActor) or Pykka's default queue.Queue.
Mailbox = queue.Queue[Any] | queue.SimpleQueue[Any]

TIMEOUT_MS = 200
P75_Z = 0.674490  # the 75th percentile point of N(0, 1)
PURGATORY = "broker/1/purgatory/produce"
REAPER = "broker/1/reaper"
BROKER = 1

SAMPLE_S = 0.1  # pending sampling period
WARMUP_S = TIMEOUT_MS / 1000 + 0.05  # completion window starts here (every answer due in-run)
SUSTAIN_FRACTION = 0.95
BACKLOG_SLACK_S = 0.1  # outstanding may exceed Little's law by this much of arrivals
RUNAWAY_S = 1.0  # ... and a probe is aborted past this much
GENERATOR_GIVE_UP = 1.5  # the generator stops at this multiple of the planned duration
DRAIN_S = 1.0  # after generation, wait at most this long past the timeout for answers
COMPLETER_POLL_S = 0.001
SLEEP_MIN_S = 0.0002  # the generator sleeps only when this far ahead of its plan

GOAL_RATE = 25_000
DEFAULT_DURATION_S = 3.0
QUICK_DURATION_S = 1.5
DEFAULT_START_RATE = 2_000
QUICK_START_RATE = 3_000  # leaves --quick's few probes room for a bisection step
DEFAULT_MAX_PROBES = 8
QUICK_MAX_PROBES = 5
DEFAULT_CONFIRM = 3
QUICK_CONFIRM = 1
BISECT_PRECISION = 0.10
MIN_RATE = 100
MAX_RATE = 200_000
DEFAULT_PROFILE_RATE = 5_000
DEFAULT_SEED = 20_240_611
SYNC_OPS = 20_000
WATCHED_KEYS = 1_000
QUICK_SYNC_OPS = 5_000


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyCase:
    """A log-normal completion latency given by its median and 75th percentile (ms)."""

    median_ms: float
    p75_ms: float

    @property
    def name(self) -> str:
        return f"p50={self.median_ms:g}ms p75={self.p75_ms:g}ms"

    @property
    def mu(self) -> float:
        return math.log(self.median_ms)

    @property
    def sigma(self) -> float:
        return (math.log(self.p75_ms) - math.log(self.median_ms)) / P75_Z


CASES = (LatencyCase(20, 60), LatencyCase(200, 400))


@dataclass(slots=True)
class Plan:
    """One probe's operations: arrival offsets, latencies, and their prebuilt messages."""

    rate: float  # nominal
    offsets_s: list[float]  # arrival time of each operation after the start
    latencies_ms: list[int]
    requests: list[DelayOperation]
    events: list[KeyChanged | None]  # None: the operation is left to expire

    @property
    def n(self) -> int:
        return len(self.offsets_s)

    @property
    def target_rate(self) -> float:
        """The realised rate of the plan (Kafka's targetRate)."""
        return self.n / self.offsets_s[-1] if self.offsets_s and self.offsets_s[-1] > 0 else 0.0

    def littles_in_flight(self) -> int:
        """Little's law: operations outstanding in a steady state at the target rate."""
        return round(self.target_rate * self.mean_in_flight_s)

    @property
    def mean_in_flight_s(self) -> float:
        """Mean time an operation should stay outstanding: mean(min(latency, timeout))."""
        if not self.latencies_ms:
            return 0.0
        return statistics.fmean(min(lat, TIMEOUT_MS) for lat in self.latencies_ms) / 1000


def build_plan(
    case: LatencyCase, rate: float, duration_s: float, seed: int, key_prefix: str = "op-"
) -> Plan:
    """Poisson arrivals at `rate` for `duration_s`, log-normal latencies, one key each."""
    rng = random.Random(f"{seed}:{case.median_ms}:{case.p75_ms}:{rate}:{duration_s}")
    n = max(1, round(rate * duration_s))
    offsets: list[float] = []
    t = 0.0
    for _ in range(n):
        t += rng.expovariate(rate)
        offsets.append(t)
    mu, sigma = case.mu, case.sigma
    latencies = [int(math.exp(rng.gauss(mu, sigma))) for _ in range(n)]
    requests: list[DelayOperation] = []
    events: list[KeyChanged | None] = []
    for i, latency in enumerate(latencies):
        key = f"{key_prefix}{i}"
        requests.append(
            DelayOperation(
                operation=AwaitValue(key=key, at_least=1), keys=(key,), timeout_ms=TIMEOUT_MS
            )
        )
        events.append(KeyChanged(key=key, value=1) if latency < TIMEOUT_MS else None)
    return Plan(rate, offsets, latencies, requests, events)


def expected_expired_fraction(case: LatencyCase) -> float:
    """P(latency >= timeout) for the case's log-normal distribution."""
    z = (math.log(TIMEOUT_MS) - case.mu) / case.sigma
    return 0.5 * math.erfc(z / math.sqrt(2))


# --------------------------------------------------------------------------------------------
# The system under test and the harness threads
# --------------------------------------------------------------------------------------------

UNANSWERED, COMPLETED, EXPIRED, ERROR = 0, 1, 2, 3


class Recorder:
    """Where each operation's answer is written, by the `RecordingClient` as it arrives.

    Operation i travels under correlation id i + 1. Every slot is written by one thread (the
    purgatory actor's, which sends the responses), so plain list stores suffice.
    """

    def __init__(self, n: int) -> None:
        self.sent_at = [0.0] * n
        self.done_at = [0.0] * n
        self.kind = bytearray(n)
        self.answered = 0

    def record(self, response: Any) -> None:
        i = response.correlation_id - 1
        self.done_at[i] = time.perf_counter()
        if isinstance(response, OperationResult):
            self.kind[i] = EXPIRED if response.expired else COMPLETED
        else:
            self.kind[i] = ERROR
        self.answered += 1


class RecordingClient(Client):
    """The bench's edge of the actor system: each request goes out under its operation's
    index as correlation id, and each response is recorded as it arrives, with no Future per
    operation. Kafka's TestPurgatoryPerformance counts completions down a latch; a
    `concurrent.futures.Future` (with its Condition) per operation cost about a fifth of the
    process's time at 25,000/s, all of it harness.
    """

    def __init__(self, name: str, directory: Directory, clock: Clock) -> None:
        super().__init__(name, directory, clock)
        self.recorder = Recorder(0)
        self.sent = 0

    def send_op(self, address: str, request: Any, i: int) -> None:
        self.sent += 1
        if not self.send_request(address, request, i + 1):
            raise RuntimeError(f"no actor at {address}")

    def tell(self, message: Any) -> None:
        payload = message.payload if isinstance(message, Envelope) else message
        if tracing.is_enabled():
            super().tell(message)  # the msg.recv event
        self.recorder.record(payload)

    @property
    def pending(self) -> int:
        """Operations sent and not yet answered."""
        return self.sent - self.recorder.answered


class Generator(threading.Thread):
    """Sends the plan's requests at their arrival times; hands each due completion on."""

    def __init__(
        self,
        plan: Plan,
        *,
        client: RecordingClient,
        completions: collections.deque[tuple[float, int]],
        start: float,
        give_up_at: float,
    ) -> None:
        super().__init__(name="bench-generator", daemon=True)
        self.plan = plan
        self.client = client
        self.completions = completions
        self.start_at = start
        self.give_up_at = give_up_at
        self.abort = False
        self.sent = 0
        self.end_at = start
        self.cpu_s = 0.0

    def run(self) -> None:
        perf = time.perf_counter
        sleep = time.sleep
        send = self.client.send_op
        sent_at = self.client.recorder.sent_at
        push = self.completions.append
        requests = self.plan.requests
        latencies = self.plan.latencies_ms
        start = self.start_at
        give_up_at = self.give_up_at
        sent = 0
        for i, offset in enumerate(self.plan.offsets_s):
            now = perf()
            due = start + offset
            if due - now > SLEEP_MIN_S:
                sleep(due - now)
                now = perf()
            if now > give_up_at or self.abort:
                break
            sent_at[i] = now
            send(PURGATORY, requests[i], i)
            latency = latencies[i]
            if latency < TIMEOUT_MS:
                push((now + latency / 1000, i))
            sent += 1
        self.sent = sent
        self.end_at = perf()
        self.cpu_s = time.thread_time()


class Completer(threading.Thread):
    """Sends each operation's `KeyChanged` at its completion time (a heap of due times)."""

    def __init__(
        self,
        plan: Plan,
        directory: Directory,
        completions: collections.deque[tuple[float, int]],
        generator: Generator,
    ) -> None:
        super().__init__(name="bench-completer", daemon=True)
        self.events = plan.events
        self.directory = directory
        self.completions = completions
        self.generator = generator
        self.stop_now = False
        self.sent = 0
        self.max_late_s = 0.0
        self.cpu_s = 0.0

    def run(self) -> None:
        perf = time.perf_counter
        sleep = time.sleep
        tell = self.directory.tell
        events = self.events
        incoming = self.completions
        heap: list[tuple[float, int]] = []
        sent = 0
        max_late = 0.0
        while not self.stop_now:
            while incoming:
                heapq.heappush(heap, incoming.popleft())
            now = perf()
            while heap and heap[0][0] <= now:
                due, i = heapq.heappop(heap)
                max_late = max(max_late, now - due)
                tell(PURGATORY, events[i])
                sent += 1
            if not heap and not incoming and not self.generator.is_alive():
                break
            wait = heap[0][0] - perf() if heap else COMPLETER_POLL_S
            sleep(min(max(wait, 0.0), COMPLETER_POLL_S))
        self.sent = sent
        self.max_late_s = max_late
        self.cpu_s = time.thread_time()


class System:
    """A fresh broker-side actor system: Directory, Timer, Reaper, Purgatory, and a Client."""

    def __init__(self) -> None:
        self.clock = SystemClock()
        self.directory = Directory()
        self.timer = Timer(
            self.clock, executor=ExpirationDelivery(self.directory, REAPER, self.clock, BROKER)
        )
        before = set(threading.enumerate())
        self.reaper = ReaperActor.start(REAPER, self.directory, self.timer, self.clock, BROKER)
        self.purgatory_ref = PurgatoryActor.start(
            PURGATORY, self.directory, self.timer, self.clock, BROKER
        )
        self.client = RecordingClient("bench", self.directory, self.clock)
        # the Purgatory object, fetched once through the actor's mailbox
        self.purgatory: Purgatory = self.purgatory_ref.proxy().purgatory.get()
        started = [t for t in threading.enumerate() if t not in before]
        self.actor_threads = {
            "purgatory": next(t for t in started if t.name.startswith("PurgatoryActor")),
            "reaper": next(t for t in started if t.name.startswith("ReaperActor")),
        }
        inbox = self.purgatory_ref.actor_inbox
        self.inbox: Mailbox | None = (
            inbox if isinstance(inbox, queue.Queue | queue.SimpleQueue) else None
        )

    def mailbox_depth(self) -> int:
        return self.inbox.qsize() if self.inbox is not None else -1

    def thread_cpu(self) -> dict[str, float]:
        return {name: thread_cpu_s(thread) for name, thread in self.actor_threads.items()}

    def stop(self) -> None:
        self.timer.shutdown()
        self.reaper.stop(timeout=10)
        self.purgatory_ref.stop(timeout=30)
        self.client.close()


def thread_cpu_s(thread: threading.Thread) -> float:
    """CPU seconds a live thread of this process has used (nan where it cannot be read)."""
    ident = thread.ident
    if ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return math.nan
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ProcessLookupError):
        return math.nan


class GcWatch:
    """Counts cyclic-gc collections per generation, their wall time and what they freed
    (Kafka's test reports its GC too)."""

    def __init__(self) -> None:
        self.by_generation = [[0, 0.0, 0] for _ in range(3)]  # collections, seconds, collected
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            entry = self.by_generation[min(info["generation"], 2)]
            entry[0] += 1
            entry[1] += time.perf_counter() - self._started
            entry[2] += info["collected"]

    @property
    def collections(self) -> int:
        return sum(int(entry[0]) for entry in self.by_generation)

    @property
    def time_s(self) -> float:
        return sum(entry[1] for entry in self.by_generation)

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self)


# --------------------------------------------------------------------------------------------
# One probe
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Sample:
    t_s: float  # since the start
    outstanding: int  # operations sent and not yet answered
    delayed: int  # purgatory.num_delayed
    mailbox: int  # purgatory actor's inbox depth


@dataclass(slots=True)
class ProbeResult:
    case: str
    tracing: bool
    rate: float  # nominal
    target_rate: float
    achieved_rate: float
    completion_rate: float
    completion_ratio: float  # answers in the window / answers due in the window
    planned: int
    sent: int
    completed: int
    expired: int
    errors: int
    unanswered: int
    events_sent: int
    duration_s: float  # generator start to end
    wall_s: float  # the whole probe, setup and drain included
    cpu_s: float
    cpu_us_per_op: float
    thread_cpu_s: dict[str, float]
    gc_collections: int
    gc_s: float
    gc_by_generation: list[list[float]]  # per generation: collections, seconds, objects freed
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    completer_max_late_ms: float
    outstanding_end: int
    backlog_bound: int
    max_outstanding: int
    max_delayed: int
    max_mailbox: int
    aborted: bool
    trace_bytes_per_op: float
    sustained: bool
    why: str
    samples: list[Sample] = field(default_factory=list)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return math.nan
    k = min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


class TraceSink:
    """Tracing off (to os.devnull) or on (JSON lines to a temporary file on disk)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._devnull: IO[bytes] = open(os.devnull, "wb")  # noqa: SIM115 - closed in close()
        self.path: Path | None = None

    def off(self) -> None:
        tracing.configure(stream=self._devnull, enabled=False)

    def switch(self, *, on: bool) -> None:
        if on:
            self.on()
        else:
            self.off()

    def on(self) -> None:
        fd, name = tempfile.mkstemp(prefix="purgatory-trace-", suffix=".jsonl", dir=self.directory)
        os.close(fd)
        self.path = Path(name)
        tracing.configure(path=self.path, enabled=True)

    def finish(self) -> int:
        """Bytes written since `on` (0 when off); tracing ends up off, the file removed."""
        size = 0
        if self.path is not None:
            tracing.flush()
            size = self.path.stat().st_size
        self.off()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None
        return size

    def close(self) -> None:
        self.off()
        tracing.close()
        self._devnull.close()


@dataclass(slots=True)
class Run:
    """What one drive of the system measured (raw; `summarise` turns it into a result)."""

    generator: Generator
    completer: Completer
    start: float
    closed: float  # answers after this (the shutdown's) are not counted
    samples: list[Sample]
    outstanding_end: int
    aborted: bool
    cpu_s: float
    threads: dict[str, float]
    gc_collections: int
    gc_s: float
    gc_by_generation: list[list[float]]


def run_probe(
    case: LatencyCase,
    rate: float,
    duration_s: float,
    *,
    trace: bool,
    sink: TraceSink,
    seed: int,
    profile_purgatory: cProfile.Profile | None = None,
) -> ProbeResult:
    """Run one probe of `duration_s` at `rate` and measure it (see the module docstring)."""
    probe_started = time.perf_counter()
    plan = build_plan(case, rate, duration_s, seed)
    recorder = Recorder(plan.n)
    sink.switch(on=trace)
    if profile_purgatory is not None:
        install_thread_profiler(profile_purgatory, "PurgatoryActor")
    try:
        system = System()
    finally:
        if profile_purgatory is not None:
            threading.setprofile(None)
    system.client.recorder = recorder
    gc.collect()
    gc.freeze()  # the prebuilt plan and the harness are not the system's garbage to scan
    try:
        run = drive(system, plan, recorder, duration_s)
    finally:
        gc.unfreeze()
        system.stop()
        trace_bytes = sink.finish()
    return summarise(
        case,
        plan,
        recorder,
        run,
        trace=trace,
        trace_bytes=trace_bytes,
        wall_s=time.perf_counter() - probe_started,
    )


def drive(system: System, plan: Plan, recorder: Recorder, duration_s: float) -> Run:
    """Start the generator and the completer, sample until answered (or given up), measure."""
    completions: collections.deque[tuple[float, int]] = collections.deque()
    samples: list[Sample] = []
    aborted = False
    runaway = plan.littles_in_flight() + round(plan.target_rate * RUNAWAY_S) + 10
    with GcWatch() as gc_watch:
        actor_cpu_0 = system.thread_cpu()
        main_cpu_0 = time.thread_time()
        cpu_0 = time.process_time()
        start = time.perf_counter() + 0.01
        generator = Generator(
            plan,
            client=system.client,
            completions=completions,
            start=start,
            give_up_at=start + duration_s * GENERATOR_GIVE_UP,
        )
        completer = Completer(plan, system.directory, completions, generator)
        generator.start()
        completer.start()
        next_sample = start
        while generator.is_alive():
            next_sample += SAMPLE_S
            time.sleep(max(0.0, next_sample - time.perf_counter()))
            sample = take_sample(system, start)
            samples.append(sample)
            if sample.outstanding > runaway and not aborted:
                aborted = True
                generator.abort = True
        generator.join()
        outstanding_end = system.client.pending
        drain_until = generator.end_at + TIMEOUT_MS / 1000 + DRAIN_S
        while time.perf_counter() < drain_until and (
            system.client.pending > 0 or completer.is_alive()
        ):
            completer.stop_now = aborted
            next_sample += SAMPLE_S
            time.sleep(max(0.0, min(next_sample, drain_until) - time.perf_counter()))
            samples.append(take_sample(system, start))
        completer.stop_now = True
        completer.join()
        closed = time.perf_counter()
        cpu_s = time.process_time() - cpu_0
        main_cpu = time.thread_time() - main_cpu_0
        actor_cpu_1 = system.thread_cpu()
    threads = {
        "generator": generator.cpu_s,
        "completer": completer.cpu_s,
        "purgatory": actor_cpu_1["purgatory"] - actor_cpu_0["purgatory"],
        "reaper": actor_cpu_1["reaper"] - actor_cpu_0["reaper"],
        "main": main_cpu,
    }
    return Run(
        generator=generator,
        completer=completer,
        start=start,
        closed=closed,
        samples=samples,
        outstanding_end=outstanding_end,
        aborted=aborted,
        cpu_s=cpu_s,
        threads=threads,
        gc_collections=gc_watch.collections,
        gc_s=gc_watch.time_s,
        gc_by_generation=[list(map(float, entry)) for entry in gc_watch.by_generation],
    )


def take_sample(system: System, start: float) -> Sample:
    return Sample(
        t_s=time.perf_counter() - start,
        outstanding=system.client.pending,
        delayed=system.purgatory.num_delayed,
        mailbox=system.mailbox_depth(),
    )


def summarise(
    case: LatencyCase,
    plan: Plan,
    recorder: Recorder,
    run: Run,
    *,
    trace: bool,
    trace_bytes: int,
    wall_s: float,
) -> ProbeResult:
    """Counts, rates, lateness and the sustained verdict of one probe."""
    generator, completer, start, closed = run.generator, run.completer, run.start, run.closed
    samples, outstanding_end, aborted, cpu_s = (
        run.samples,
        run.outstanding_end,
        run.aborted,
        run.cpu_s,
    )
    bound = plan.littles_in_flight() + round(plan.target_rate * BACKLOG_SLACK_S) + 10
    sent = generator.sent
    duration = max(generator.end_at - start, 1e-9)
    window_start, window_end = start + WARMUP_S, generator.end_at
    window = window_end - window_start
    counts = [0, 0, 0, 0]
    lateness: list[float] = []
    answered_in_window = due_in_window = 0
    for i in range(sent):
        kind = recorder.kind[i]
        done_at = recorder.done_at[i]
        if kind != UNANSWERED and done_at > closed:
            kind = UNANSWERED  # answered by the shutdown, after the measurement
        counts[kind] += 1
        intended = recorder.sent_at[i] + min(plan.latencies_ms[i], TIMEOUT_MS) / 1000
        if window_start <= intended <= window_end:
            due_in_window += 1
        if kind in (COMPLETED, EXPIRED):
            lateness.append((done_at - intended) * 1000)
            if window_start <= done_at <= window_end:
                answered_in_window += 1
    lateness.sort()
    completion_rate = answered_in_window / window if window > 0 else 0.0
    completion_ratio = answered_in_window / due_in_window if due_in_window else 0.0
    achieved = sent / duration
    target = plan.target_rate
    reasons: list[str] = []
    if aborted:
        reasons.append("runaway backlog")
    if achieved < SUSTAIN_FRACTION * target:
        reasons.append(f"sent {achieved / target:.0%} of target")
    if completion_ratio < SUSTAIN_FRACTION:
        reasons.append(f"answered {completion_ratio:.0%} of due")
    if outstanding_end > bound:
        reasons.append(f"backlog {outstanding_end}>{bound}")
    during = [s for s in samples if s.t_s <= duration] or samples
    return ProbeResult(
        case=case.name,
        tracing=trace,
        rate=plan.rate,
        target_rate=target,
        achieved_rate=achieved,
        completion_rate=completion_rate,
        completion_ratio=completion_ratio,
        planned=plan.n,
        sent=sent,
        completed=counts[COMPLETED],
        expired=counts[EXPIRED],
        errors=counts[ERROR],
        unanswered=counts[UNANSWERED],
        events_sent=completer.sent,
        duration_s=duration,
        wall_s=wall_s,
        cpu_s=cpu_s,
        cpu_us_per_op=cpu_s / sent * 1e6 if sent else math.nan,
        thread_cpu_s=run.threads,
        gc_collections=run.gc_collections,
        gc_s=run.gc_s,
        gc_by_generation=run.gc_by_generation,
        lateness_p50_ms=percentile(lateness, 0.50),
        lateness_p99_ms=percentile(lateness, 0.99),
        lateness_max_ms=lateness[-1] if lateness else math.nan,
        completer_max_late_ms=completer.max_late_s * 1000,
        outstanding_end=outstanding_end,
        backlog_bound=bound,
        max_outstanding=max((s.outstanding for s in during), default=0),
        max_delayed=max((s.delayed for s in during), default=0),
        max_mailbox=max((s.mailbox for s in during), default=0),
        aborted=aborted,
        trace_bytes_per_op=trace_bytes / sent if sent else 0.0,
        sustained=not reasons,
        why="; ".join(reasons),
        samples=samples,
    )


# --------------------------------------------------------------------------------------------
# The search for the highest sustained rate
# --------------------------------------------------------------------------------------------


def nice_rate(rate: float) -> int:
    """Round a probe rate to 2 significant digits (3 above 10k) so the table reads well."""
    digits = 3 if rate >= 10_000 else 2
    magnitude = 10 ** max(0, math.floor(math.log10(rate)) - digits + 1)
    return max(MIN_RATE, int(round(rate / magnitude) * magnitude))


@dataclass(slots=True)
class SearchResult:
    case: str
    tracing: bool
    probes: list[ProbeResult]
    best: float | None  # highest sustained target rate (nominal), None when none sustained
    lowest_failed: float | None
    confirmed: bool  # `best` sustained again on a re-run with another seed


def search(
    case: LatencyCase,
    *,
    trace: bool,
    args: argparse.Namespace,
    sink: TraceSink,
    report: Callable[[ProbeResult], None],
) -> SearchResult:
    """Doubling, then bisection, then confirmation, for the highest sustained rate (see the
    module docstring)."""
    probes: list[ProbeResult] = []
    tried: dict[int, list[bool]] = {}

    def probe(rate: int) -> bool:
        result = run_probe(
            case, rate, args.duration, trace=trace, sink=sink, seed=args.seed + len(probes)
        )
        probes.append(result)
        tried.setdefault(rate, []).append(result.sustained)
        report(result)
        return result.sustained

    regular = confirmations = 0
    while True:
        failed_rates = [rate for rate, outcomes in tried.items() if not all(outcomes)]
        lowest_failed = min(failed_rates, default=None)
        best = max(
            (
                rate
                for rate, outcomes in tried.items()
                if all(outcomes) and (lowest_failed is None or rate < lowest_failed)
            ),
            default=None,
        )
        rate = next_rate(args.start_rate, best, lowest_failed)
        if rate is not None and rate not in tried and regular < args.max_probes:
            regular += 1
            probe(rate)
        elif best is not None and len(tried[best]) < 2 and confirmations < args.confirm:
            # near the ceiling a probe can pass by luck: run the best rate again; a failure
            # moves the answer down to the highest rate below it that never failed
            confirmations += 1
            probe(best)
        else:
            break
    confirmed = best is not None and len(tried[best]) >= 2
    return SearchResult(case.name, trace, probes, best, lowest_failed, confirmed)


def next_rate(start: float, best: int | None, lowest_failed: int | None) -> int | None:
    """Double from the best, halve from the lowest failure, or bisect between them."""
    if best is None and lowest_failed is None:
        return nice_rate(start)
    if lowest_failed is None:
        assert best is not None
        return nice_rate(best * 2) if best * 2 <= MAX_RATE else None
    if best is None:
        rate = nice_rate(lowest_failed / 2)
        return rate if rate < lowest_failed else None
    if lowest_failed <= best * (1 + BISECT_PRECISION):
        return None
    mid = nice_rate(math.sqrt(best * lowest_failed))
    return mid if best < mid < lowest_failed else None


# --------------------------------------------------------------------------------------------
# Profiling
# --------------------------------------------------------------------------------------------


def install_thread_profiler(profiler: cProfile.Profile, thread_prefix: str) -> None:
    """Enable `profiler` in the next thread whose name starts with `thread_prefix`.

    `threading.setprofile` installs a hook in every thread started after it; the hook, on its
    first call in the chosen thread, removes itself and enables the cProfile profiler there
    (a cProfile profiler only profiles the thread that enabled it).
    """

    def hook(_frame: FrameType, _event: str, _arg: object) -> None:
        sys.setprofile(None)
        if threading.current_thread().name.startswith(thread_prefix):
            profiler.enable()

    threading.setprofile(hook)


@dataclass(slots=True)
class FunctionCost:
    name: str
    calls_per_op: float
    own_us_per_op: float  # tottime
    total_us_per_op: float  # cumtime


HOT_FUNCTIONS = (
    ("_actor_loop_running", "pykka actor loop (everything on the actor thread)"),
    ("get", "mailbox get (actor side)"),
    ("_handle_receive", "pykka _handle_receive"),
    ("on_receive", "TracedActor.on_receive"),
    ("_dispatch", "TracedActor._dispatch"),
    ("_on_delay", "PurgatoryActor._on_delay"),
    ("__init__@purgatory", "DelayedAwaitValue/DelayedOperation __init__"),
    ("try_complete_else_watch", "Purgatory.try_complete_else_watch"),
    ("add@system_timer", "Timer.add"),
    ("_on_key_changed", "PurgatoryActor._on_key_changed"),
    ("check_and_complete", "Purgatory.check_and_complete"),
    ("_on_expired", "PurgatoryActor._on_expired"),
    ("force_complete", "DelayedOperation.force_complete"),
    ("_mark_completed", "DelayedOperation._mark_completed"),
    ("cancel", "TimerTask.cancel"),
    ("on_complete", "DelayedAwaitValue.on_complete"),
    ("reply", "TracedActor.reply"),
    ("replace", "dataclasses.replace"),
    ("send", "TracedActor.send"),
    ("new_envelope", "hops.new_envelope"),
    ("new_id", "tracing.new_id"),
    ("trace_context", "TracedActor.trace_context"),
    ("tell@directory", "Directory.tell"),
    ("tell@client", "Client.tell (response path)"),
    ("record", "Recorder.record (the bench's)"),
    ("log_recv", "hops.log_recv"),
    ("log_send", "hops.log_send"),
    ("meth", "structlog bound logger method (tracing on)"),
)


def function_costs(stats: pstats.Stats, ops: int) -> list[FunctionCost]:
    """Per-operation cost of the named hot functions, from a cProfile run over `ops` ops."""
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw = stats.stats  # type: ignore[attr-defined]
    costs: list[FunctionCost] = []
    for spec, label in HOT_FUNCTIONS:
        name, _, where = spec.partition("@")
        matches = [
            value
            for (filename, _line, func), value in raw.items()
            if func == name and (not where or Path(filename).stem == where)
        ]
        if not matches:
            continue
        calls = sum(m[1] for m in matches)
        own = sum(m[2] for m in matches)
        total = max(m[3] for m in matches)
        costs.append(FunctionCost(label, calls / ops, own / ops * 1e6, total / ops * 1e6))
    return costs


def top_functions(stats: pstats.Stats, ops: int, limit: int) -> list[FunctionCost]:
    """The functions with the most own time, per operation."""
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw = stats.stats  # type: ignore[attr-defined]
    ranked = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:limit]
    return [
        FunctionCost(
            f"{func} ({Path(filename).name}:{line})" if line else func,
            value[1] / ops,
            value[2] / ops * 1e6,
            value[3] / ops * 1e6,
        )
        for (filename, line, func), value in ranked
    ]


@dataclass(slots=True)
class StageCost:
    name: str
    us_per_op: float
    note: str = ""


def drain(inbox: Mailbox, actor: PurgatoryActor) -> int:
    """Handle every message in an unstarted actor's mailbox on this thread."""
    handled = 0
    while True:
        try:
            envelope = inbox.get_nowait()
        except queue.Empty:
            return handled
        actor.on_receive(envelope.message)
        handled += 1


SYNC_CHUNK = 500  # operations per batch of the synchronous path (a live-like pending count)


@dataclass(slots=True)
class SyncReport:
    """The synchronous hot path, timed and profiled, with tracing off or on."""

    tracing: bool
    ops: int
    stages: list[StageCost]
    functions: list[FunctionCost]
    top: list[FunctionCost]
    trace_bytes_per_op: float


def sync_hot_path(ops: int, seed: int, *, trace: bool, sink: TraceSink) -> SyncReport:
    """The hot path on one thread: stage timings (no profiler), then the same under cProfile.

    See `SyncPath`. The profiled pass runs on a second, fresh path (same sizes) so that the
    unprofiled timings are not disturbed; harness setup stays outside the profiler. With
    `trace`, events go to a temporary file as in the live tracing-on probes.
    """
    timed_path = SyncPath(ops, seed)
    profiled_path = SyncPath(ops, seed + 1)
    total = timed_path.completing.n + timed_path.expiring.n
    gc.collect()
    gc.freeze()  # as in the live probes: the prebuilt requests are not the system's garbage
    try:
        sink.switch(on=trace)
        timed_path.run()
        trace_bytes = sink.finish()
        sink.switch(on=trace)
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            profiled_path.run()
        finally:
            profiler.disable()
    finally:
        gc.unfreeze()
        sink.finish()
    stats = pstats.Stats(profiler)
    return SyncReport(
        tracing=trace,
        ops=total,
        stages=timed_path.stage_costs(),
        functions=function_costs(stats, total),
        top=top_functions(stats, total, 15),
        trace_bytes_per_op=trace_bytes / total,
    )


COMPLETED_STAGES = (
    ("Client.send_request -> Directory.tell -> mailbox put", "generator"),
    ("mailbox get (get_nowait)", "actor"),
    ("on_receive(DelayOperation): dispatch, new op, try_complete_else_watch, Timer.add", "actor"),
    ("KeyChanged: Directory.tell -> mailbox put", "completer"),
    ("mailbox get (get_nowait)", "actor"),
    ("on_receive(KeyChanged): check_and_complete, cancel, reply -> Client -> Recorder", "actor"),
)
EXPIRED_STAGES = (
    ("Client.send_request -> Directory.tell -> mailbox put", "generator"),
    ("mailbox get (get_nowait)", "actor"),
    ("on_receive(DelayOperation): dispatch, new op, try_complete_else_watch, Timer.add", "actor"),
    ("Timer.advance_clock: ExpirationDelivery -> Envelope -> mailbox put", "reaper"),
    ("mailbox get (get_nowait)", "actor"),
    ("on_receive(OperationsExpired): expire, reply -> Client -> Recorder", "actor"),
)


class SyncPath:
    """The real purgatory actor object (not started) and a real Client, on this thread.

    Messages reach the actor's pykka inbox through the Directory as in the live system; each
    stage takes them out and calls `on_receive` by hand, so every hop but the thread switch
    is the live one. Operations go in chunks of `SYNC_CHUNK` (so a few hundred are pending, as
    in the live probes), half completed by a `KeyChanged`, half left to expire; time is a
    `ManualClock` pushed past the timeout for the expiring half (no sleeping). Each stage's
    time is summed over the chunks.
    """

    def __init__(self, ops: int, seed: int) -> None:
        half = max(SYNC_CHUNK, ops // 2)
        self.completing = build_plan(CASES[0], 1000.0, half / 1000, seed, key_prefix="done-")
        self.expiring = build_plan(CASES[0], 1000.0, half / 1000, seed, key_prefix="expire-")
        self.clock = ManualClock(0)
        self.directory = Directory()
        self.delivery = ExpirationDelivery(self.directory, REAPER, self.clock, BROKER)
        self.timer = Timer(self.clock, executor=self.delivery)
        self.actor = PurgatoryActor(PURGATORY, self.directory, self.timer, self.clock, BROKER)
        inbox = self.actor.actor_inbox
        assert isinstance(inbox, queue.Queue | queue.SimpleQueue)
        self.inbox: Mailbox = inbox
        self.directory.register(PURGATORY, self.actor.actor_ref)
        self.client = RecordingClient("sync", self.directory, self.clock)
        self.recorders = (Recorder(self.completing.n), Recorder(self.expiring.n))
        self.events = [KeyChanged(key=r.operation.key, value=1) for r in self.completing.requests]
        self.messages: list[Any] = []
        self.completed_ns = [0] * len(COMPLETED_STAGES)
        self.expired_ns = [0] * len(EXPIRED_STAGES)

    def send_requests(self, plan: Plan, recorder: Recorder, lo: int, hi: int) -> None:
        client = self.client
        client.recorder = recorder
        send = client.send_op
        requests = plan.requests
        for i in range(lo, hi):
            send(PURGATORY, requests[i], i)

    def take(self) -> None:
        get = self.inbox.get_nowait
        self.messages = [get().message for _ in range(self.inbox.qsize())]

    def receive_all(self) -> None:
        on_receive = self.actor.on_receive
        for message in self.messages:
            on_receive(message)

    def send_events(self, lo: int, hi: int) -> None:
        tell = self.directory.tell
        events = self.events
        for i in range(lo, hi):
            tell(PURGATORY, events[i])

    def expire(self) -> None:
        self.clock.advance(TIMEOUT_MS + 1)
        with self.delivery.batch():  # as the Reaper advances the timer
            while self.timer.advance_clock(0):
                pass

    def run(self) -> None:
        perf = time.perf_counter_ns
        for lo in range(0, self.completing.n, SYNC_CHUNK):
            hi = min(lo + SYNC_CHUNK, self.completing.n)
            stages: list[Callable[[], object]] = [
                partial(self.send_requests, self.completing, self.recorders[0], lo, hi),
                self.take,
                self.receive_all,
                partial(self.send_events, lo, hi),
                self.take,
                self.receive_all,
            ]
            for k, stage in enumerate(stages):
                started = perf()
                stage()
                self.completed_ns[k] += perf() - started
        for lo in range(0, self.expiring.n, SYNC_CHUNK):
            hi = min(lo + SYNC_CHUNK, self.expiring.n)
            stages = [
                partial(self.send_requests, self.expiring, self.recorders[1], lo, hi),
                self.take,
                self.receive_all,
                self.expire,
                self.take,
                self.receive_all,
            ]
            for k, stage in enumerate(stages):
                started = perf()
                stage()
                self.expired_ns[k] += perf() - started
        self.timer.shutdown()
        self.client.close()
        self.check()

    def check(self) -> None:
        for recorder, want in zip(self.recorders, (COMPLETED, EXPIRED), strict=True):
            wrong = sum(1 for kind in recorder.kind if kind != want)
            if wrong:
                raise AssertionError(f"sync hot path: {wrong} operations did not end {want}")

    def stage_costs(self) -> list[StageCost]:
        costs = [
            StageCost(name, ns / self.completing.n / 1000, note)
            for (name, note), ns in zip(COMPLETED_STAGES, self.completed_ns, strict=True)
        ]
        costs += [
            StageCost(name, ns / self.expiring.n / 1000, note)
            for (name, note), ns in zip(EXPIRED_STAGES, self.expired_ns, strict=True)
        ]
        return costs


class PlainEnvelope:
    """What an envelope costs without frozen-dataclass construction (for comparison only)."""

    __slots__ = ("parent_span_id", "payload", "sender", "sent_ms", "span_id", "trace_id")

    def __init__(
        self,
        *,
        payload: object,
        trace_id: str,
        span_id: str,
        parent_span_id: str,
        sender: str,
        sent_ms: int,
    ) -> None:
        self.payload = payload
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.sender = sender
        self.sent_ms = sent_ms


def micro(label: str, fn: Callable[[], object], n: int) -> StageCost:
    """ns of one call of `fn`, best of 3 batches of `n`."""
    best = math.inf
    for _ in range(3):
        started = time.perf_counter_ns()
        for _ in itertools.repeat(None, n):
            fn()
        best = min(best, (time.perf_counter_ns() - started) / n)
    return StageCost(label, best / 1000)


def micro_pieces(n: int) -> list[StageCost]:
    """Microbenchmarks of the pieces every operation pays for, on one thread."""
    gc.collect()
    clock = SystemClock()
    key = "op-1"
    request = DelayOperation(operation=AwaitValue(key=key, at_least=1), keys=(key,), timeout_ms=200)
    stamped = dataclasses.replace(request, reply_to="client/x", correlation_id=7)
    span = "0123456789abcdef"
    directory = Directory()
    timer = Timer(clock)
    actor = PurgatoryActor(PURGATORY, directory, timer, clock, BROKER)
    q: queue.Queue[int] = queue.Queue()
    counter = itertools.count()
    result = OperationResult(operation_id=1, expired=False)

    def queue_put_get() -> None:
        q.put(1)
        q.get_nowait()

    simple: queue.SimpleQueue[int] = queue.SimpleQueue()

    def simple_put_get() -> None:
        simple.put(1)
        simple.get_nowait()

    def envelope() -> None:
        Envelope(
            payload=stamped,
            trace_id=span,
            span_id=span,
            parent_span_id="",
            sender="client/x",
            sent_ms=0,
        )

    def plain_envelope() -> None:
        PlainEnvelope(
            payload=stamped,
            trace_id=span,
            span_id=span,
            parent_span_id="",
            sender="client/x",
            sent_ms=0,
        )

    ref = actor.actor_ref
    actor_inbox = actor.actor_inbox
    assert isinstance(actor_inbox, queue.Queue | queue.SimpleQueue)
    inbox: Mailbox = actor_inbox

    def actor_tell_get() -> None:
        ref.tell(1)
        inbox.get_nowait()

    def future_roundtrip() -> None:
        f: Future[Any] = Future()
        f.add_done_callback(lambda _f: None)
        f.set_result(result)

    def timer_add_cancel() -> None:
        task = TimerTask(200)
        timer.add(task)
        task.cancel()

    def new_operation() -> None:
        DelayedAwaitValue(actor, stamped)

    def replace_response() -> None:
        dataclasses.replace(result, correlation_id=7)

    pieces = [
        micro("an empty call (the loop's own overhead, included in every row)", lambda: None, n),
        micro("tracing.new_id() (64-bit hex id)", tracing.new_id, n),
        micro("itertools.count() next (a cheaper id)", counter.__next__, n),
        micro("Envelope(...) (frozen slotted dataclass, 6 keyword fields)", envelope, n),
        micro("the same 6 keyword fields in a plain __slots__ class", plain_envelope, n),
        micro(
            "dataclasses.replace(DelayOperation, reply_to, correlation_id)",
            lambda: dataclasses.replace(request, reply_to="client/x", correlation_id=7),
            n,
        ),
        micro("dataclasses.replace(OperationResult, correlation_id)", replace_response, n),
        micro("KeyChanged(key, value)", lambda: KeyChanged(key=key, value=1), n),
        micro("threading.Lock()", threading.Lock, n),
        micro("DelayedAwaitValue(actor, request) (2 Locks, id)", new_operation, n),
        micro("concurrent.futures.Future() alone", Future, n),
        micro("Future(): add_done_callback + set_result", future_roundtrip, n),
        micro("queue.Queue put + get_nowait (Pykka default inbox)", queue_put_get, n),
        micro("queue.SimpleQueue put + get_nowait (C; fits pykka's ActorInbox)", simple_put_get, n),
        micro(
            "ActorRef.tell + inbox get_nowait (pykka's is_alive, Envelope, put)", actor_tell_get, n
        ),
        micro("Timer.add + TimerTask.cancel", timer_add_cancel, n),
        micro("SystemClock.now_ms()", clock.now_ms, n),
        micro("tracing.is_enabled()", tracing.is_enabled, n),
    ]
    timer.shutdown()
    return pieces


def tracing_pieces(n: int, sink: TraceSink) -> list[StageCost]:
    """What tracing on adds: one event, and the `watched` count `_on_delay` logs per request."""
    clock = SystemClock()
    timer = Timer(clock)
    actor = PurgatoryActor(PURGATORY, Directory(), timer, clock, BROKER)
    span = "0123456789abcdef"
    envelope = Envelope(
        payload=KeyChanged(key="k", value=1),
        trace_id=span,
        span_id=span,
        parent_span_id="",
        sender="x",
        sent_ms=0,
    )
    pieces: list[StageCost] = []
    sink.on()
    try:
        pieces.append(
            micro(
                "one msg.send event (hops.log_send) rendered to the trace file",
                partial(log_send, envelope, to=PURGATORY, broker=BROKER),
                n // 4,
            )
        )
    finally:
        sink.finish()
    for i in range(WATCHED_KEYS):
        watch_key = f"watched-{i}"
        operation = DelayedAwaitValue(
            actor,
            DelayOperation(
                operation=AwaitValue(key=watch_key, at_least=1),
                keys=(watch_key,),
                timeout_ms=TIMEOUT_MS,
            ),
        )
        actor.purgatory.try_complete_else_watch(operation, [watch_key])
    pieces.append(
        micro(
            f"Purgatory.watched with {WATCHED_KEYS} keys watched (tracing on: once per request)",
            lambda: actor.purgatory.watched,
            max(10, n // 100),
        )
    )
    timer.shutdown()
    return pieces


@dataclass(slots=True)
class ProfileReport:
    rate: int
    live: ProbeResult
    live_functions: list[FunctionCost]
    live_top: list[FunctionCost]
    sync_off: SyncReport
    sync_on: SyncReport
    pieces: list[StageCost]


def profile(args: argparse.Namespace, sink: TraceSink) -> ProfileReport:
    """The live probe with the purgatory thread under cProfile, then the synchronous path."""
    case = CASES[0]
    profiler = cProfile.Profile()
    live = run_probe(
        case,
        args.profile_rate,
        args.duration,
        trace=False,
        sink=sink,
        seed=args.seed,
        profile_purgatory=profiler,
    )
    live_stats = pstats.Stats(profiler)
    ops = max(1, live.sent)
    sync_off = sync_hot_path(args.sync_ops, args.seed, trace=False, sink=sink)
    sync_on = sync_hot_path(args.sync_ops, args.seed, trace=True, sink=sink)
    sink.off()
    micro_n = 20_000 if args.sync_ops >= SYNC_OPS else 5_000
    return ProfileReport(
        rate=args.profile_rate,
        live=live,
        live_functions=function_costs(live_stats, ops),
        live_top=top_functions(live_stats, ops, 15),
        sync_off=sync_off,
        sync_on=sync_on,
        pieces=micro_pieces(micro_n) + tracing_pieces(micro_n, sink),
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[int], width: int = 16) -> str:
    """`values` resampled to `width` columns (max per column), scaled to the row's maximum."""
    if not values:
        return ""
    columns = min(width, len(values))
    peaks = [
        max(values[len(values) * c // columns : max(len(values) * (c + 1) // columns, 1)])
        for c in range(columns)
    ]
    top = max(peaks)
    if top <= 0:
        return SPARKS[0] * columns
    return "".join(SPARKS[min(len(SPARKS) - 1, v * len(SPARKS) // (top + 1))] for v in peaks)


def fmt_rate(rate: float) -> str:
    return f"{rate:,.0f}"


def fmt_best(rate: float | None) -> str:
    return "none" if rate is None else fmt_rate(rate)


def format_gc(r: ProbeResult) -> str:
    """Collections, time and objects freed per generation."""
    return ", ".join(
        f"gen{g}: {count:.0f} x {seconds / count * 1000 if count else 0:.2f} ms (freed {freed:.0f})"
        for g, (count, seconds, freed) in enumerate(r.gc_by_generation)
    )


def format_probe_row(r: ProbeResult) -> str:
    t = r.thread_cpu_s
    threads = "/".join(
        f"{t[name]:.1f}" for name in ("generator", "completer", "purgatory", "reaper", "main")
    )
    outstanding = [s.outstanding for s in r.samples if s.t_s <= r.duration_s]
    return (
        f"{fmt_rate(r.rate):>8}{fmt_rate(r.target_rate):>9}{fmt_rate(r.achieved_rate):>9}"
        f"{fmt_rate(r.completion_rate):>9}{r.completion_ratio:>6.0%}"
        f"{r.cpu_s:>6.1f}{r.cpu_us_per_op:>7.0f}  {threads:<20}"
        f"{r.completed:>7}{r.expired:>7}{r.errors:>4}{r.unanswered:>6}"
        f"{r.gc_s / r.duration_s:>5.0%}"
        f"{r.lateness_p50_ms:>7.1f}{r.lateness_p99_ms:>8.1f}"
        f"  {sparkline(outstanding)} {max(outstanding, default=0):>6} {r.outstanding_end:>6}"
        f"/{r.backlog_bound:<6}{r.max_mailbox:>6}"
        f"{'  ' + format(r.trace_bytes_per_op, '.0f') if r.tracing else '':>6}"
        f"  {'yes' if r.sustained else 'NO: ' + r.why}"
    )


PROBE_HEADER = (
    f"{'rate':>8}{'target':>9}{'achieved':>9}{'compl/s':>9}{'c/due':>6}"
    f"{'CPU s':>6}{'us/op':>7}  {'gen/cmp/purg/reap/main':<20}"
    f"{'compl':>7}{'expir':>7}{'err':>4}{'unans':>6}{'gc%':>5}{'p50ms':>7}{'p99ms':>8}"
    f"  {'outstanding (100 ms)':<16} {'max':>6} {'end':>6}/{'bound':<6}{'mbox':>6}"
    f"{'B/op':>6}  sustained"
)


def print_search(result: SearchResult) -> None:
    print(
        f"\n== {result.case}, tracing {'ON (file)' if result.tracing else 'off'}: "
        f"highest sustained {fmt_best(result.best)}/s"
        + (" (confirmed by a re-run)" if result.confirmed else " (not confirmed)")
        + (f" (lowest failed {fmt_rate(result.lowest_failed)}/s)" if result.lowest_failed else "")
    )
    print(PROBE_HEADER)
    for probe in sorted(result.probes, key=lambda p: p.rate):
        print(format_probe_row(probe))


def print_profile(report: ProfileReport) -> None:
    live = report.live
    ops = max(1, live.sent)
    print(
        f"\n== Profile at a fixed {fmt_rate(report.rate)}/s ({live.case}, tracing off, "
        f"{live.duration_s:.1f} s, {live.sent} ops, sustained: "
        f"{'yes' if live.sustained else 'NO: ' + live.why})"
    )
    print(
        "CPU per operation by thread (us/op; the purgatory thread ran under cProfile, which"
        " inflates it):"
    )
    for name, seconds in live.thread_cpu_s.items():
        print(f"  {name:<10}{seconds / ops * 1e6:>8.1f}")
    print(f"  {'process':<10}{live.cpu_us_per_op:>8.1f}")
    print(f"  {'gc':<10}{live.gc_s / ops * 1e6:>8.1f}   {format_gc(live)}")
    print(
        "\nPurgatory actor thread, cProfile (wall-clock us per operation: idle mailbox waits are"
        " in Queue.get's lock acquire; a GIL wait is charged to the function it interrupted):"
    )
    print(f"  {'function':<58}{'calls/op':>9}{'own us':>8}{'cum us':>8}")
    for cost in report.live_functions:
        print(
            f"  {cost.name:<58}{cost.calls_per_op:>9.2f}{cost.own_us_per_op:>8.2f}"
            f"{cost.total_us_per_op:>8.2f}"
        )
    print("  top own time:")
    for cost in report.live_top:
        print(f"  {cost.name[:58]:<58}{cost.calls_per_op:>9.2f}{cost.own_us_per_op:>8.2f}")

    off, on = report.sync_off, report.sync_on
    print(
        f"\nThe hot path on one thread, no profiler ({off.ops} ops in chunks of {SYNC_CHUNK}, half"
        " completed by an event, half expired; us per operation; the thread each stage runs on"
        " in the live system):"
    )
    print(f"    {'stage':<84}{'off':>7}{'on':>8}  thread (tracing off / on to a file)")
    half = len(COMPLETED_STAGES)
    totals: dict[str, tuple[float, float]] = {}
    for title, lo, hi in (("completed by an event", 0, half), ("expired", half, 2 * half)):
        print(f"  {title}:")
        for stage_off, stage_on in zip(off.stages[lo:hi], on.stages[lo:hi], strict=True):
            print(
                f"    {stage_off.name:<84}{stage_off.us_per_op:>7.2f}{stage_on.us_per_op:>8.2f}"
                f"  {stage_off.note}"
            )
        total_off = sum(stage.us_per_op for stage in off.stages[lo:hi])
        total_on = sum(stage.us_per_op for stage in on.stages[lo:hi])
        totals[title] = (total_off, total_on)
        print(
            f"    {'total':<84}{total_off:>7.2f}{total_on:>8.2f}  => {1e6 / total_off:,.0f} /"
            f" {1e6 / total_on:,.0f} ops/s on one GIL"
        )
    for case in CASES:
        p_expired = expected_expired_fraction(case)
        mixed = [
            (1 - p_expired) * totals["completed by an event"][k] + p_expired * totals["expired"][k]
            for k in (0, 1)
        ]
        print(
            f"  {case.name} ({p_expired:.0%} expire): {mixed[0]:.1f} / {mixed[1]:.1f} us/op of"
            f" system work => ceiling {1e6 / mixed[0]:,.0f} / {1e6 / mixed[1]:,.0f} ops/s before"
            " any harness work, thread switch or GIL hand-off"
        )
    print(f"  tracing on wrote {on.trace_bytes_per_op:.0f} bytes per operation")
    print("\nSame path under cProfile, tracing off (per operation):")
    print(f"  {'function':<58}{'calls/op':>9}{'own us':>8}{'cum us':>8}")
    for cost in off.functions:
        print(
            f"  {cost.name:<58}{cost.calls_per_op:>9.2f}{cost.own_us_per_op:>8.2f}"
            f"{cost.total_us_per_op:>8.2f}"
        )
    for sync in (off, on):
        print(f"  top own time, tracing {'on' if sync.tracing else 'off'}:")
        for cost in sync.top:
            print(f"  {cost.name[:58]:<58}{cost.calls_per_op:>9.2f}{cost.own_us_per_op:>8.2f}")
    print("\nPieces (us per call, best of 3):")
    for piece in report.pieces:
        print(f"  {piece.name:<70}{piece.us_per_op:>7.3f}")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Kafka's TestPurgatoryPerformance through kafkactor's actors: the highest sustained"
            " rate per latency case, tracing off and on, and a profile of the hot path."
        )
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=(
            f"~1 minute: {QUICK_DURATION_S} s probes from {QUICK_START_RATE:,}/s, at most"
            f" {QUICK_MAX_PROBES} per search (+{QUICK_CONFIRM} confirmation)"
        ),
    )
    parser.add_argument("--duration", type=float, default=None, help="seconds per probe (3)")
    parser.add_argument(
        "--start-rate", type=float, default=None, help="first probe rate (2000; --quick 3000)"
    )
    parser.add_argument(
        "--max-probes", type=int, default=None, help="probes per search (8; --quick 5)"
    )
    parser.add_argument(
        "--confirm",
        type=int,
        default=None,
        help="re-runs of the best rate to confirm it (3; --quick 1)",
    )
    parser.add_argument(
        "--profile-rate",
        type=int,
        default=DEFAULT_PROFILE_RATE,
        help="fixed rate of the profiled probe (5000/s)",
    )
    parser.add_argument(
        "--sync-ops", type=int, default=None, help="operations of the synchronous hot path"
    )
    parser.add_argument("--no-profile", action="store_true", help="skip the profile")
    parser.add_argument("--no-goal-probe", action="store_true", help="skip the goal-rate probes")
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the tracing-on event files go (removed after each probe)",
    )
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    args = parser.parse_args(argv)
    if args.duration is None:
        args.duration = QUICK_DURATION_S if args.quick else DEFAULT_DURATION_S
    if args.max_probes is None:
        args.max_probes = QUICK_MAX_PROBES if args.quick else DEFAULT_MAX_PROBES
    if args.start_rate is None:
        args.start_rate = QUICK_START_RATE if args.quick else DEFAULT_START_RATE
    if args.confirm is None:
        args.confirm = QUICK_CONFIRM if args.quick else DEFAULT_CONFIRM
    if args.sync_ops is None:
        args.sync_ops = QUICK_SYNC_OPS if args.quick else SYNC_OPS
    if args.duration <= WARMUP_S + 0.5:
        parser.error(f"--duration must be above {WARMUP_S + 0.5} s")
    if args.max_probes < 1:
        parser.error("--max-probes must be >= 1")
    return args


def print_header(args: argparse.Namespace) -> None:
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}) on "
        f"{platform.platform()}, {os.cpu_count()} CPUs, GIL switch interval "
        f"{sys.getswitchinterval() * 1000:g} ms"
    )
    print(
        f"probes of {args.duration:g} s; start {fmt_rate(args.start_rate)}/s, doubling then "
        f"bisection to {BISECT_PRECISION:.0%}, at most {args.max_probes} probes per search; "
        f"timeout {TIMEOUT_MS} ms; seed {args.seed}"
    )
    for case in CASES:
        print(
            f"  {case.name}: mu={case.mu:.3f} sigma={case.sigma:.3f}, expected expired "
            f"{expected_expired_fraction(case):.1%}"
        )
    print(
        f"sustained = achieved >= {SUSTAIN_FRACTION:.0%} of target, answers >= "
        f"{SUSTAIN_FRACTION:.0%} of those due in [start+{WARMUP_S * 1000:.0f} ms, end], "
        f"outstanding at the end <= Little's law + {BACKLOG_SLACK_S * 1000:.0f} ms of arrivals"
    )
    print(
        "columns: rate nominal; target realised by the plan; c/due answered/due in the window;"
        " CPU s process; us/op process CPU per op; gen/cmp/purg/reap/main CPU s per thread;"
        " err error responses; unans unanswered at the close; gc% time in gc; p50ms/p99ms"
        " lateness vs intended; outstanding sparkline (max per column), max, end vs bound;"
        " mbox max mailbox depth; B/op trace bytes per op (tracing on)",
        flush=True,
    )


def write_json(
    path: Path,
    args: argparse.Namespace,
    *,
    searches: Sequence[SearchResult],
    goal_probes: Sequence[ProbeResult],
    profile_report: ProfileReport | None,
    wall_s: float,
) -> None:
    document = {
        "python": sys.version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "parameters": {
            "duration_s": args.duration,
            "start_rate": args.start_rate,
            "max_probes": args.max_probes,
            "confirm": args.confirm,
            "timeout_ms": TIMEOUT_MS,
            "cases": [asdict(case) for case in CASES],
            "sustain_fraction": SUSTAIN_FRACTION,
            "backlog_slack_s": BACKLOG_SLACK_S,
            "goal_rate": GOAL_RATE,
            "profile_rate": args.profile_rate,
            "seed": args.seed,
        },
        "searches": [asdict(s) for s in searches],
        "goal_probes": [asdict(p) for p in goal_probes],
        "profile": asdict(profile_report) if profile_report is not None else None,
        "wall_time_s": wall_s,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


def print_summary(searches: Sequence[SearchResult], goal_probes: Sequence[ProbeResult]) -> None:
    """The table per search, the goal-rate probes, the highest rates and the goal verdict."""
    for result in searches:
        print_search(result)
    if goal_probes:
        print(f"\n== At the goal rate, {fmt_rate(GOAL_RATE)}/s, tracing off")
        print(PROBE_HEADER)
        for probe in goal_probes:
            print(f"{format_probe_row(probe)}   [{probe.case}]")

    print("\n== Highest sustained rate (ops/s)")
    print(f"{'latency case':<26}{'tracing off':>14}{'tracing on':>14}")
    for case in CASES:
        row = {s.tracing: s.best for s in searches if s.case == case.name}
        cells = [fmt_best(row.get(t)) for t in (False, True)]
        print(f"{case.name:<26}" + "".join(f"{cell:>14}" for cell in cells))
    off = [s.best or 0.0 for s in searches if not s.tracing]
    ceiling = min(off) if off else 0.0
    status = "PASS" if ceiling >= GOAL_RATE else "FAIL"
    print(
        f"\n[{status}] goal: {fmt_rate(GOAL_RATE)} operations/s sustained with tracing off, in"
        f" every latency case: highest sustained {fmt_rate(ceiling)}/s"
        f" ({ceiling / GOAL_RATE:.0%} of the goal)"
    )
    for probe in goal_probes:
        print(
            f"       one probe at {fmt_rate(GOAL_RATE)}/s, {probe.case}: "
            + ("sustained" if probe.sustained else f"not sustained ({probe.why})")
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the searches, the goal probes and the profile; 0 even when the goal fails."""
    started = time.perf_counter()
    args = parse_args(argv)
    print_header(args)
    sink = TraceSink(args.trace_dir)
    searches: list[SearchResult] = []
    goal_probes: list[ProbeResult] = []
    profile_report: ProfileReport | None = None

    def progress(result: ProbeResult) -> None:
        print(
            f"  probe {result.case} tracing {'on ' if result.tracing else 'off'} "
            f"{fmt_rate(result.rate):>7}/s: achieved {fmt_rate(result.achieved_rate)}/s, "
            f"compl {result.completion_ratio:.0%} of due, CPU {result.cpu_us_per_op:.0f} us/op, "
            f"end outstanding {result.outstanding_end}/{result.backlog_bound} -> "
            f"{'sustained' if result.sustained else 'NO: ' + result.why} "
            f"({result.wall_s:.1f} s)",
            flush=True,
        )

    try:
        for trace in (False, True):
            for case in CASES:
                searches.append(search(case, trace=trace, args=args, sink=sink, report=progress))
        if not args.no_goal_probe:
            for case in CASES:
                goal = run_probe(
                    case, GOAL_RATE, args.duration, trace=False, sink=sink, seed=args.seed
                )
                progress(goal)
                goal_probes.append(goal)
        if not args.no_profile:
            profile_report = profile(args, sink)
    finally:
        sink.close()

    print_summary(searches, goal_probes)
    if profile_report is not None:
        print_profile(profile_report)
    wall_s = time.perf_counter() - started
    print(f"\ntotal wall time {wall_s:.1f} s")
    if args.json is not None:
        write_json(
            args.json,
            args,
            searches=searches,
            goal_probes=goal_probes,
            profile_report=profile_report,
            wall_s=wall_s,
        )
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
