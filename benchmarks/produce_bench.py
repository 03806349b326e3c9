"""Benchmark the produce path: 3 brokers in one process, acks 1 and all, batches of 1 to 100.

Run it as ``.venv/bin/python benchmarks/produce_bench.py`` (``--help`` lists the options;
``--quick`` is a ~1 minute version). It measures, for every (acks x batch size x tracing)
configuration and every in-flight level, a closed-loop producer's records/s, requests/s and
latency; picks per configuration the highest-throughput level whose p99 stays under 50 ms;
measures the raw Pykka tell rate in the same run as the ceiling; and checks the goal
(acks=all 100-record batches at >= 100,000 records/s with p99 < 50 ms, tracing off).

The system
----------
``Cluster(3)``: brokers 1..3 on one `Directory`, each with its reaper, produce and fetch
purgatories, replica manager, partition actors and replica fetchers (every actor is a thread).
One topic ``bench``: 6 partitions, replication factor 3, ``min_insync_replicas=2``
(``LogConfig``, otherwise defaults: 1 GiB segments, so no roll during a probe), leaders spread
round-robin over the brokers (partition p is led by broker p mod 3 + 1). A fresh cluster and
topic for every probe, so every probe starts on empty logs and no state (fetcher partition
lists, purgatory watchers, page cache dirtiness of earlier logs) leaks from one to the next.
The data dirs are temporary (under ``/tmp``); ``Cluster.stop`` (a clean shutdown of every
broker: logs flushed) runs after every probe, in a ``finally``, and removes them. Setup and
teardown times are printed per probe; neither is inside the window.

Workload
--------
One producer (``cluster.producer(acks=1 or -1, timeout_ms=30000)``, no retries) driven by the
main thread in a closed loop: at most ``in-flight`` requests outstanding (a
``threading.Semaphore`` acquired before each send and released by the request's done-callback),
each request ``send_batch("bench", values, partition=k)`` with k round-robin over the 6
partitions: one ProduceRequest carrying one batch of 1, 10 or 100 records with 100-byte values
(random bytes, prebuilt once; null keys). The producer builds the batch bytes
(``build_batch``: record framing, CRC) on every call, on the sending thread: that is client
cost, and it is inside both the measured latency and the CPU per request. The Futures resolve
on actor threads (the one that delivers the response to the producer's client); the
done-callback records the completion time (``perf_counter_ns``) and whether it failed, so that
little harness work runs on the actor threads too. Each probe runs ``--warmup`` seconds (0.5;
``--quick`` 0.25) before a measured window of ``--duration`` seconds (5; ``--quick`` 1.5); then
the loop stops sending and waits (at most ``DRAIN_S``) for the outstanding requests.

In-flight levels: ``--in-flight`` (default 1, 8, 16 and 32). With ``--quick`` (or
``--traced-levels best``) tracing on runs only the level picked for the same configuration
with tracing off; otherwise every level runs in both tracing modes.

Tracing off is ``tracing.configure(stream=<os.devnull>, enabled=False)`` (hot paths skip
building events); tracing on is ``tracing.configure(path=<temporary file>)``: every hop and
state change written as a JSON line; the file is flushed at both ends of the window to count
the event bytes per request, and deleted after the probe. At the end the event sink is closed
and the enabled flag put back as it was before the run.

Measured per probe (over the window)
------------------------------------
- records/s, requests/s: requests *completed* in the window (their records) per second.
- p50 / p99 / max latency: send (before ``send_batch``, so batch building is included) to
  the done-callback, for every request *sent* in the window (waited for after the window, so a
  stalled request shows); nearest-rank percentiles. ``gap ms``: the longest time in the window
  without any completion (a stall of the whole pipeline shows here).
- msgs/req: every ``Directory.tell`` in the window (the cluster's directory's ``tell`` is
  replaced on the instance by a counting wrapper) per completed request: the request and its
  response, the partition actor's append and the snapshots it sends to the purgatories, the
  follower fetches and their responses, follower appends, delayed-produce completions, ...
  Self-ticks sent straight to an actor ref (the reaper's timer ticks) are not counted.
- CPU us/req: ``time.process_time()`` over the window per completed request (all threads:
  the client, the actors, the harness callback). Python threads share one GIL: 1e6 / (CPU
  us/req) bounds requests/s whatever the number of cores (time in the kernel aside). The line
  printed per probe also gives the CPU as a share of one core and the kernel's share of it
  (``os.times``: thread wake-ups, GIL hand-offs and file writes are system time).
- errors: failed requests (``ProduceError`` or any other exception) plus requests still
  unanswered after the drain; any error makes the exit code 1.
- event B/req (tracing on): bytes of JSON lines written in the window per completed request.

Per configuration the table shows the in-flight level with the highest records/s among those
with p99 < 50 ms and no errors (if none qualifies, the highest records/s, marked ``!``).

Ceiling: the raw Pykka tell rate
--------------------------------
A trivial ``pykka.ThreadingActor`` whose ``on_receive`` counts and sets an Event after N
messages (``--ceiling-messages``, 200,000; ``--quick`` 50,000); one thread tells it N prebuilt
messages (``ref.tell``), timed from the first tell to the Event; messages/s = N / that time.
Measured at the start and the end of the run (other load on the machine shows as a
difference); the best is the ceiling. The same with the inbox kafkactor's actors use
(``queue.SimpleQueue`` instead of Pykka's ``queue.Queue``) is printed as well. The sender
runs ahead of the actor there, which drains its inbox without sleeping in between, so that is
a throughput ceiling with no thread wake-ups. A produce request is a chain of hops, each
waking another thread: the same actors bouncing one message between two of them (N / 10 hops,
the ping-pong lines) show what one hop costs when every delivery is a wake-up. Ratio: actor
messages per second in the acks=all 100-record configuration (tracing off, the picked level:
msgs/req x requests/s) against the raw Pykka ceiling (and against the other two).

Results: one table (rows acks x batch x tracing) after a line per probe as it runs, the
ceiling lines, and ``[PASS]`` / ``[FAIL]`` for the goal. ``--json [PATH]`` also writes every
probe (default ``benchmarks/results/produce_bench.json``; ``benchmarks/results/`` is
gitignored). The exit code is 0 whether the goal is met or not (this is a measurement), 1 when
any request failed or went unanswered.
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import json
import math
import os
import platform
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import pykka

from kafkactor import tracing
from kafkactor.actors.runtime import Directory
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster

BROKERS = 3
TOPIC = "bench"
PARTITIONS = 6
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
VALUE_BYTES = 100
TIMEOUT_MS = 30_000
ACKS = (1, -1)
BATCH_SIZES = (1, 10, 100)
DEFAULT_IN_FLIGHT = (1, 8, 16, 32)
QUICK_IN_FLIGHT = (1, 16, 32)

DEFAULT_DURATION_S = 5.0
QUICK_DURATION_S = 1.5
DEFAULT_WARMUP_S = 0.5
QUICK_WARMUP_S = 0.25
DRAIN_S = 10.0  # after the window, wait at most this long for the outstanding requests
DEFAULT_CEILING_MESSAGES = 200_000
QUICK_CEILING_MESSAGES = 50_000

P99_LIMIT_MS = 50.0
GOAL_RECORDS_PER_S = 100_000
GOAL_ACKS = -1
GOAL_BATCH = 100

DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "produce_bench.json"
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class ProbeResult:
    """One closed-loop run of one configuration at one in-flight level."""

    acks: int
    batch: int
    tracing: bool
    in_flight: int
    window_s: float
    sent: int  # requests sent over the whole probe (warm-up and drain included)
    completed: int  # requests completed in the window
    records_per_s: float
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    max_gap_ms: float
    latency_samples: int  # requests sent in the window (their latencies)
    messages: int  # Directory.tell calls in the window
    messages_per_request: float
    cpu_s: float
    cpu_us_per_request: float
    sys_fraction: float  # share of the CPU time spent in the kernel (os.times)
    failed: int
    unanswered: int
    first_error: str
    trace_bytes: int
    trace_bytes_per_request: float
    setup_s: float
    teardown_s: float

    @property
    def errors(self) -> int:
        return self.failed + self.unanswered

    @property
    def qualifies(self) -> bool:
        """p99 under the limit and no errors: a candidate for the configuration's figure."""
        return self.errors == 0 and self.completed > 0 and self.p99_ms < P99_LIMIT_MS

    @property
    def messages_per_s(self) -> float:
        return self.messages / self.window_s if self.window_s > 0 else 0.0


@dataclass(slots=True)
class ConfigResult:
    """A configuration's probes and the level picked for the table."""

    acks: int
    batch: int
    tracing: bool
    probes: list[ProbeResult] = field(default_factory=list)

    @property
    def best(self) -> ProbeResult | None:
        """Highest records/s with p99 < limit and no errors; else highest records/s."""
        qualified = [p for p in self.probes if p.qualifies]
        pool = qualified or self.probes
        return max(pool, key=lambda p: p.records_per_s, default=None)

    @property
    def best_qualifies(self) -> bool:
        best = self.best
        return best is not None and best.qualifies


@dataclass(slots=True)
class CeilingResult:
    """Raw tells per second: from one thread to one trivial actor ("tell"), or bounced
    between two actors with one message in flight ("ping-pong")."""

    kind: str
    inbox: str
    messages: int
    seconds: float
    cpu_s: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


# --------------------------------------------------------------------------------------------
# Harness pieces
# --------------------------------------------------------------------------------------------


class TraceSink:
    """Tracing off (to os.devnull) or on (JSON lines to a temporary file on disk)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._devnull: IO[bytes] = open(os.devnull, "wb")  # noqa: SIM115 - closed in close()
        self.path: Path | None = None

    def off(self) -> None:
        tracing.configure(stream=self._devnull, enabled=False)

    def on(self) -> None:
        fd, name = tempfile.mkstemp(prefix="produce-trace-", suffix=".jsonl", dir=self.directory)
        os.close(fd)
        self.path = Path(name)
        tracing.configure(path=self.path, enabled=True)

    def size(self) -> int:
        """Bytes written so far (flushed first); 0 when off."""
        if self.path is None:
            return 0
        tracing.flush()
        return self.path.stat().st_size

    def finish(self) -> None:
        """Tracing off again, the event file (if any) removed."""
        self.off()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None

    def close(self) -> None:
        self.finish()
        tracing.close()
        self._devnull.close()


class TellCounter:
    """Counts every `Directory.tell` by replacing the method on the directory instance.

    `itertools.count` is advanced in C under the GIL: no lock needed. Reading it advances it
    too, so `read` corrects for its own reads.
    """

    def __init__(self, directory: Directory) -> None:
        self._counter = itertools.count()
        self._reads = 0
        original = directory.tell
        advance = self._counter.__next__

        def counting_tell(address: str, message: Any) -> bool:
            advance()
            return original(address, message)

        directory.tell = counting_tell  # type: ignore[method-assign]

    def read(self) -> int:
        value = next(self._counter) - self._reads
        self._reads += 1
        return value


class Recorder:
    """Completion times, written by the requests' done-callbacks (on actor threads).

    `list.append` is atomic under the GIL; the semaphore release lets the sender go on.
    """

    def __init__(self, semaphore: threading.Semaphore) -> None:
        self.release = semaphore.release
        self.sent_ns: list[int] = []
        self.done: list[tuple[int, int]] = []  # (sent_ns, done_ns)
        self.failures: list[BaseException] = []

    def callback(self, sent_ns: int, future: Future[Any]) -> None:
        done_ns = time.perf_counter_ns()
        error = future.exception()
        if error is not None:
            self.failures.append(error)
        self.done.append((sent_ns, done_ns))
        self.release()


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """Nearest-rank percentile of an ascending sequence (0 when empty)."""
    if not sorted_values:
        return 0
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


# --------------------------------------------------------------------------------------------
# One probe
# --------------------------------------------------------------------------------------------


def run_probe(
    acks: int,
    batch: int,
    in_flight: int,
    *,
    trace: bool,
    args: argparse.Namespace,
    sink: TraceSink,
) -> ProbeResult:
    """A fresh cluster and topic, a closed loop of `in_flight` requests, measured (see top)."""
    values = [os.urandom(VALUE_BYTES) for _ in range(batch)]
    partitions = list(range(PARTITIONS))
    gc.collect()
    setup_started = time.perf_counter()
    cluster = Cluster(BROKERS)
    counter = TellCounter(cluster.directory)
    semaphore = threading.Semaphore(in_flight)
    recorder = Recorder(semaphore)
    teardown_s = 0.0
    try:
        if trace:
            sink.on()
        cluster.start()
        cluster.create_topic(
            TOPIC,
            partitions=PARTITIONS,
            replication_factor=REPLICATION_FACTOR,
            config=LogConfig(min_insync_replicas=MIN_INSYNC_REPLICAS),
        )
        producer = cluster.producer(acks=acks, timeout_ms=TIMEOUT_MS)
        setup_s = time.perf_counter() - setup_started

        send = producer.send_batch
        acquire = semaphore.acquire
        perf_ns = time.perf_counter_ns
        callback = recorder.callback
        sent_ns = recorder.sent_ns
        partial = functools.partial

        start_ns = perf_ns()
        window_start_target = start_ns + round(args.warmup * NS_PER_S)
        end_target = window_start_target + round(args.duration * NS_PER_S)
        window_start_ns = 0
        messages0 = cpu0 = trace0 = 0.0
        times0 = os.times()
        k = 0
        now = start_ns
        while now < end_target:
            if not acquire(timeout=(end_target - now) / NS_PER_S):
                break  # every request in flight is stuck: the window ends on time anyway
            now = perf_ns()
            if not window_start_ns and now >= window_start_target:
                trace0 = sink.size()
                messages0 = counter.read()
                cpu0 = time.process_time()
                times0 = os.times()
                window_start_ns = now = perf_ns()
            if now >= end_target:
                semaphore.release()
                break
            future = send(TOPIC, values, partition=partitions[k % PARTITIONS])
            sent_ns.append(now)
            future.add_done_callback(partial(callback, now))
            k += 1
        window_end_ns = perf_ns()
        messages1 = counter.read()
        cpu1 = time.process_time()
        times1 = os.times()
        trace1 = sink.size()
        if not window_start_ns:  # the warm-up never ended (stuck): an empty window
            window_start_ns = window_end_ns
            messages0, cpu0, trace0, times0 = messages1, cpu1, trace1, times1

        # Drain: take back every permit (each in-flight request's callback returns one).
        drain_deadline = time.perf_counter() + DRAIN_S
        returned = 0
        while returned < in_flight:
            if not semaphore.acquire(timeout=max(0.0, drain_deadline - time.perf_counter())):
                break
            returned += 1
        unanswered = in_flight - returned
        failures = list(recorder.failures)  # not those the teardown answers (counted above)
    finally:
        teardown_started = time.perf_counter()
        try:
            cluster.stop()  # closes the producer, removes the data dir
        finally:
            teardown_s = time.perf_counter() - teardown_started
            sink.finish()

    window_s = (window_end_ns - window_start_ns) / NS_PER_S
    done = list(recorder.done)
    completed_times = sorted(d for _, d in done if window_start_ns <= d <= window_end_ns)
    completed = len(completed_times)
    latencies = sorted(d - s for s, d in done if window_start_ns <= s <= window_end_ns)
    edges = [window_start_ns, *completed_times, window_end_ns]
    max_gap_ns = max((b - a for a, b in itertools.pairwise(edges)), default=0)
    messages = int(messages1 - messages0)
    cpu_s = cpu1 - cpu0
    trace_bytes = int(trace1 - trace0)
    user_s = times1.user - times0.user
    sys_s = times1.system - times0.system
    return ProbeResult(
        acks=acks,
        batch=batch,
        tracing=trace,
        in_flight=in_flight,
        window_s=window_s,
        sent=k,
        completed=completed,
        records_per_s=completed * batch / window_s if window_s > 0 else 0.0,
        requests_per_s=completed / window_s if window_s > 0 else 0.0,
        p50_ms=percentile(latencies, 0.50) / NS_PER_MS,
        p99_ms=percentile(latencies, 0.99) / NS_PER_MS,
        max_ms=(latencies[-1] if latencies else 0) / NS_PER_MS,
        max_gap_ms=max_gap_ns / NS_PER_MS,
        latency_samples=len(latencies),
        messages=messages,
        messages_per_request=messages / completed if completed else 0.0,
        cpu_s=cpu_s,
        cpu_us_per_request=cpu_s / completed * 1e6 if completed else 0.0,
        sys_fraction=sys_s / (user_s + sys_s) if user_s + sys_s > 0 else 0.0,
        failed=len(failures),
        unanswered=unanswered,
        first_error=repr(failures[0]) if failures else "",
        trace_bytes=trace_bytes,
        trace_bytes_per_request=trace_bytes / completed if completed else 0.0,
        setup_s=setup_s,
        teardown_s=teardown_s,
    )


# --------------------------------------------------------------------------------------------
# The ceiling: raw Pykka tells
# --------------------------------------------------------------------------------------------


class CountingActor(pykka.ThreadingActor):
    """Counts messages; sets `done` after `expected` of them. Pykka's default inbox."""

    def __init__(self, expected: int, done: threading.Event) -> None:
        super().__init__()
        self.left = expected
        self.done = done

    def on_receive(self, message: Any) -> None:
        self.left -= 1
        if self.left == 0:
            self.done.set()


class SimpleQueueCountingActor(CountingActor):
    """The same with the inbox kafkactor's `TracedActor` uses (`queue.SimpleQueue`)."""

    @staticmethod
    def _create_actor_inbox() -> pykka._actor.ActorInbox:
        return queue.SimpleQueue()


class PingPongActor(pykka.ThreadingActor):
    """Tells each message it gets back to its peer until `expected` have been handled."""

    def __init__(self, expected: int, done: threading.Event) -> None:
        super().__init__()
        self.left = expected
        self.done = done
        self.peer: pykka.ActorRef[Any] | None = None

    def on_receive(self, message: Any) -> None:
        if isinstance(message, pykka.ActorRef):
            self.peer = message
            return
        self.left -= 1
        if self.left <= 0:
            self.done.set()
        elif self.peer is not None:
            self.peer.tell(message)


class SimpleQueuePingPongActor(PingPongActor):
    """The same with the `queue.SimpleQueue` inbox."""

    @staticmethod
    def _create_actor_inbox() -> pykka._actor.ActorInbox:
        return queue.SimpleQueue()


def inbox_name(actor_class: type[pykka.ThreadingActor]) -> str:
    simple = (SimpleQueueCountingActor, SimpleQueuePingPongActor)
    return "queue.SimpleQueue" if issubclass(actor_class, simple) else "queue.Queue"


def measure_tells(actor_class: type[CountingActor], messages: int) -> CeilingResult:
    """One thread tells `messages` prebuilt messages; timed from the first tell to the last
    message handled."""
    done = threading.Event()
    ref = actor_class.start(messages, done)
    try:
        payloads = [("tick", i) for i in range(messages)]
        tell = ref.tell
        gc.collect()
        cpu0 = time.process_time()
        started = time.perf_counter()
        for payload in payloads:
            tell(payload)
        if not done.wait(60):
            raise RuntimeError(f"the counting actor did not receive {messages} messages")
        seconds = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        ref.stop()
    return CeilingResult("tell", inbox_name(actor_class), messages, seconds, cpu_s)


def measure_ping_pong(actor_class: type[PingPongActor], hops: int) -> CeilingResult:
    """One message bounced between two actors: `hops` deliveries, each a thread wake-up."""
    hops |= 1  # odd: the first actor handles the last hop (the odd ones), then sets `done`
    done = threading.Event()
    first = actor_class.start((hops + 1) // 2, done)
    second = actor_class.start((hops + 1) // 2, done)  # would run out one hop later
    try:
        first.tell(second)
        second.tell(first)
        gc.collect()
        cpu0 = time.process_time()
        started = time.perf_counter()
        first.tell("ball")
        if not done.wait(60):
            raise RuntimeError(f"the ping-pong did not reach {hops} hops")
        seconds = time.perf_counter() - started
        cpu_s = time.process_time() - cpu0
    finally:
        first.stop()
        second.stop()
    return CeilingResult("ping-pong", inbox_name(actor_class), hops, seconds, cpu_s)


def measure_ceilings(messages: int) -> list[CeilingResult]:
    hops = max(1, messages // 10)
    return [
        measure_tells(CountingActor, messages),
        measure_tells(SimpleQueueCountingActor, messages),
        measure_ping_pong(PingPongActor, hops),
        measure_ping_pong(SimpleQueuePingPongActor, hops),
    ]


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def acks_name(acks: int) -> str:
    return "all" if acks == -1 else str(acks)


def fmt_int(value: float) -> str:
    return f"{value:,.0f}"


ROW_HEADER = (
    f"{'acks':>4}{'batch':>6}{'trace':>6}{'inflt':>6}{'records/s':>11}{'requests/s':>11}"
    f"{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}{'gap ms':>8}{'msgs/req':>9}{'CPU us/req':>11}"
    f"{'errors':>7}{'event B/req':>12}"
)


def format_row(p: ProbeResult, mark: str = "") -> str:
    return (
        f"{acks_name(p.acks):>4}{p.batch:>6}{'on' if p.tracing else 'off':>6}"
        f"{str(p.in_flight) + mark:>6}{fmt_int(p.records_per_s):>11}"
        f"{fmt_int(p.requests_per_s):>11}{p.p50_ms:>8.1f}{p.p99_ms:>8.1f}{p.max_ms:>8.1f}"
        f"{p.max_gap_ms:>8.1f}{p.messages_per_request:>9.1f}{p.cpu_us_per_request:>11.0f}"
        f"{p.errors:>7}"
        f"{fmt_int(p.trace_bytes_per_request) if p.tracing else '-':>12}"
    )


def format_ceiling(c: CeilingResult) -> str:
    unit = "tells" if c.kind == "tell" else "hops"
    return (
        f"{fmt_int(c.rate)} {unit}/s ({c.messages:,} in {c.seconds * 1000:.0f} ms, "
        f"{c.cpu_s / c.messages * 1e6:.2f} us CPU each)"
    )


def best_ceiling(ceilings: Sequence[CeilingResult], kind: str, inbox: str) -> CeilingResult:
    """The fastest run of one kind and inbox."""
    runs = [c for c in ceilings if (c.kind, c.inbox) == (kind, inbox)]
    return max(runs, key=lambda c: c.rate)


def ceiling_runs(ceilings: Sequence[CeilingResult], kind: str, inbox: str) -> str:
    runs = [c for c in ceilings if (c.kind, c.inbox) == (kind, inbox)]
    return ", ".join(fmt_int(c.rate) for c in runs)


def print_header(args: argparse.Namespace) -> None:
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}) on "
        f"{platform.platform()}, {os.cpu_count()} CPUs, GIL switch interval "
        f"{sys.getswitchinterval() * 1000:g} ms"
    )
    print(
        f"{BROKERS} brokers in one process; topic {TOPIC}: {PARTITIONS} partitions, RF "
        f"{REPLICATION_FACTOR}, min ISR {MIN_INSYNC_REPLICAS}; fresh cluster per probe; "
        f"{VALUE_BYTES}-byte values; closed loop, round-robin over the partitions"
    )
    print(
        f"probes: {args.warmup:g} s warm-up + {args.duration:g} s window; in-flight levels "
        f"{', '.join(map(str, args.in_flight))}; tracing on at "
        + ("the level picked with tracing off" if args.traced_levels == "best" else "every level")
    )
    print(
        "columns: inflt in-flight requests; records/s, requests/s completed in the window; "
        "p50/p99/max latency of requests sent in the window (batch building included); gap ms "
        "longest time without a completion; msgs/req Directory.tell per request; CPU us/req "
        "process CPU per request; errors failed + unanswered; event B/req trace bytes",
        flush=True,
    )


def print_table(configs: Sequence[ConfigResult]) -> None:
    print(
        f"\n== Per configuration: the in-flight level with the highest records/s and p99 < "
        f"{P99_LIMIT_MS:g} ms ('!' = no level qualified: the highest records/s)"
    )
    print(ROW_HEADER)
    order = {False: 0, True: 1}
    for config in sorted(configs, key=lambda c: (-c.acks, c.batch, order[c.tracing])):
        best = config.best
        if best is not None:
            print(format_row(best, "" if config.best_qualifies else "!"))


def find_config(
    configs: Sequence[ConfigResult], acks: int, batch: int, trace: bool
) -> ConfigResult | None:
    for config in configs:
        if (config.acks, config.batch, config.tracing) == (acks, batch, trace):
            return config
    return None


def print_verdict(
    configs: Sequence[ConfigResult], ceilings: Sequence[CeilingResult]
) -> tuple[bool, dict[str, Any]]:
    """Ceiling lines, the ratio and the goal; returns (passed, summary for JSON)."""
    lines = (
        ("tell", "queue.Queue", "ceiling: raw Pykka tells from one thread (queue.Queue inbox)"),
        ("tell", "queue.SimpleQueue", "  the same, SimpleQueue inbox (kafkactor's actors)"),
        ("ping-pong", "queue.Queue", "  ping-pong, one message between 2 actors (queue.Queue)"),
        ("ping-pong", "queue.SimpleQueue", "  ping-pong, SimpleQueue inbox"),
    )
    print()
    for kind, inbox, title in lines:
        best_run = best_ceiling(ceilings, kind, inbox)
        print(
            f"{title:<60} best {format_ceiling(best_run)}; runs (start, end): "
            f"{ceiling_runs(ceilings, kind, inbox)}"
        )
    ceiling = best_ceiling(ceilings, "tell", "queue.Queue")
    simple = best_ceiling(ceilings, "tell", "queue.SimpleQueue")
    hops = best_ceiling(ceilings, "ping-pong", "queue.SimpleQueue")
    config = find_config(configs, GOAL_ACKS, GOAL_BATCH, False)
    best = config.best if config is not None else None
    summary: dict[str, Any] = {
        "ceiling_tells_per_s": ceiling.rate,
        "simple_queue_tells_per_s": simple.rate,
        "ping_pong_hops_per_s": hops.rate,
    }
    if best is None:
        print(f"[FAIL] goal: acks=all {GOAL_BATCH}-record batches: not measured")
        summary["goal_passed"] = False
        return False, summary
    ratio = best.messages_per_s / ceiling.rate if ceiling.rate else 0.0
    print(
        f"acks=all {GOAL_BATCH}-record batches, tracing off, in-flight {best.in_flight}: "
        f"{fmt_int(best.messages_per_s)} actor messages/s "
        f"({best.messages_per_request:.1f}/req x {fmt_int(best.requests_per_s)} req/s) = "
        f"{ratio:.1%} of the raw Pykka tell rate "
        f"({best.messages_per_s / simple.rate if simple.rate else 0:.1%} of the SimpleQueue"
        f" tell rate, {best.messages_per_s / hops.rate if hops.rate else 0:.1%} of the"
        " SimpleQueue ping-pong rate)"
    )
    passed = best.qualifies and best.records_per_s >= GOAL_RECORDS_PER_S
    print(
        f"[{'PASS' if passed else 'FAIL'}] goal: acks=all {GOAL_BATCH}-record batches >= "
        f"{GOAL_RECORDS_PER_S:,} records/s with p99 < {P99_LIMIT_MS:g} ms (tracing off): "
        f"{fmt_int(best.records_per_s)} records/s at in-flight {best.in_flight}, p99 "
        f"{best.p99_ms:.1f} ms ({best.records_per_s / GOAL_RECORDS_PER_S:.0%} of the goal"
        + ("" if best.qualifies else "; no in-flight level had p99 under the limit")
        + ")"
    )
    summary.update(
        goal_passed=passed,
        goal_records_per_s=best.records_per_s,
        goal_p99_ms=best.p99_ms,
        goal_in_flight=best.in_flight,
        goal_messages_per_s=best.messages_per_s,
        goal_ratio_to_ceiling=ratio,
    )
    return passed, summary


def write_json(
    path: Path,
    args: argparse.Namespace,
    *,
    configs: Sequence[ConfigResult],
    ceilings: Sequence[CeilingResult],
    summary: dict[str, Any],
    wall_s: float,
) -> None:
    def probe_dict(p: ProbeResult) -> dict[str, Any]:
        return {**asdict(p), "errors": p.errors, "qualifies": p.qualifies}

    document = {
        "python": sys.version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "parameters": {
            "brokers": BROKERS,
            "partitions": PARTITIONS,
            "replication_factor": REPLICATION_FACTOR,
            "min_insync_replicas": MIN_INSYNC_REPLICAS,
            "value_bytes": VALUE_BYTES,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "in_flight": list(args.in_flight),
            "traced_levels": args.traced_levels,
            "ceiling_messages": args.ceiling_messages,
            "p99_limit_ms": P99_LIMIT_MS,
            "goal_records_per_s": GOAL_RECORDS_PER_S,
        },
        "configurations": [
            {
                "acks": c.acks,
                "batch": c.batch,
                "tracing": c.tracing,
                "picked_in_flight": c.best.in_flight if c.best is not None else None,
                "picked_qualifies": c.best_qualifies,
                "probes": [probe_dict(p) for p in c.probes],
            }
            for c in configs
        ],
        "ceilings": [{**asdict(c), "rate": c.rate} for c in ceilings],
        "summary": summary,
        "wall_time_s": wall_s,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_levels(text: str) -> tuple[int, ...]:
    try:
        levels = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"in-flight levels are integers, not {text!r}") from None
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError(f"in-flight levels must be >= 1, got {text!r}")
    return levels


def parse_acks(text: str) -> tuple[int, ...]:
    try:
        acks = tuple(dict.fromkeys(int(part) for part in text.split(",") if part.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"acks are integers, not {text!r}") from None
    if not acks or any(a not in ACKS for a in acks):
        raise argparse.ArgumentTypeError(f"acks must be among {ACKS}, got {text!r}")
    return acks


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "kafkactor's produce path: 3 brokers, 6 partitions RF 3, acks 1/all, batches of 1,"
            " 10 and 100 records, tracing off/on, against the raw Pykka tell rate."
        )
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=(
            f"~1 minute: {QUICK_WARMUP_S:g} s + {QUICK_DURATION_S:g} s probes, in-flight "
            f"{','.join(map(str, QUICK_IN_FLIGHT))}, tracing on only at the level picked with"
            f" tracing off, {QUICK_CEILING_MESSAGES:,} ceiling messages"
        ),
    )
    parser.add_argument(
        "--duration",
        type=float,
        help=f"measured seconds per probe ({DEFAULT_DURATION_S:g}; --quick {QUICK_DURATION_S:g})",
    )
    parser.add_argument(
        "--warmup",
        type=float,
        help=f"warm-up seconds per probe ({DEFAULT_WARMUP_S:g}; --quick {QUICK_WARMUP_S:g})",
    )
    parser.add_argument(
        "--in-flight",
        type=parse_levels,
        metavar="N[,N...]",
        help=(
            f"in-flight levels ({','.join(map(str, DEFAULT_IN_FLIGHT))}; --quick "
            f"{','.join(map(str, QUICK_IN_FLIGHT))})"
        ),
    )
    parser.add_argument(
        "--traced-levels",
        choices=("all", "best"),
        help="tracing on at every level, or only the one picked with tracing off (all; --quick"
        " best)",
    )
    parser.add_argument(
        "--ceiling-messages",
        type=int,
        help=f"messages of the raw tell ceiling ({DEFAULT_CEILING_MESSAGES:,}; --quick "
        f"{QUICK_CEILING_MESSAGES:,})",
    )
    parser.add_argument(
        "--acks",
        type=parse_acks,
        metavar="A[,A...]",
        default=ACKS,
        help="acks settings to run (1,-1)",
    )
    parser.add_argument(
        "--batches",
        type=parse_levels,
        metavar="N[,N...]",
        default=BATCH_SIZES,
        help="records per batch to run (1,10,100)",
    )
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the tracing-on event files go (removed after each probe)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=DEFAULT_JSON,
        metavar="PATH",
        help=f"also write results as JSON (default path {DEFAULT_JSON})",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    if args.duration is None:
        args.duration = QUICK_DURATION_S if quick else DEFAULT_DURATION_S
    if args.warmup is None:
        args.warmup = QUICK_WARMUP_S if quick else DEFAULT_WARMUP_S
    if args.in_flight is None:
        args.in_flight = QUICK_IN_FLIGHT if quick else DEFAULT_IN_FLIGHT
    if args.traced_levels is None:
        args.traced_levels = "best" if quick else "all"
    if args.ceiling_messages is None:
        args.ceiling_messages = QUICK_CEILING_MESSAGES if quick else DEFAULT_CEILING_MESSAGES
    if args.duration <= 0 or args.warmup < 0:
        parser.error("--duration must be > 0 and --warmup >= 0")
    if args.ceiling_messages < 1:
        parser.error("--ceiling-messages must be >= 1")
    return args


def run_all(
    args: argparse.Namespace,
    sink: TraceSink,
    report: Callable[[ProbeResult], None],
) -> list[ConfigResult]:
    """Tracing off for every configuration and level, then tracing on."""
    configs: list[ConfigResult] = []
    for trace in (False, True):
        for acks in args.acks:
            for batch in args.batches:
                config = ConfigResult(acks=acks, batch=batch, tracing=trace)
                configs.append(config)
                levels: Sequence[int] = args.in_flight
                if trace and args.traced_levels == "best":
                    untraced = find_config(configs, acks, batch, False)
                    picked = untraced.best if untraced is not None else None
                    levels = (picked.in_flight,) if picked is not None else args.in_flight
                for in_flight in levels:
                    probe = run_probe(acks, batch, in_flight, trace=trace, args=args, sink=sink)
                    config.probes.append(probe)
                    report(probe)
    return configs


def main(argv: Sequence[str] | None = None) -> int:
    """Run every probe and the ceilings; 0 whether or not the goal is met, 1 on errors."""
    started = time.perf_counter()
    args = parse_args(argv)
    print_header(args)
    was_enabled = tracing.is_enabled()
    sink = TraceSink(args.trace_dir)
    sink.off()
    ceilings: list[CeilingResult] = []
    configs: list[ConfigResult] = []

    def progress(p: ProbeResult) -> None:
        line = format_row(p)
        busy = p.cpu_s / p.window_s if p.window_s > 0 else 0.0
        extra = (
            f"  (CPU {busy:.0%} of a core, {p.sys_fraction:.0%} of it in the "
            f"kernel; setup {p.setup_s * 1000:.0f} ms, teardown {p.teardown_s * 1000:.0f} ms)"
        )
        if p.errors:
            extra += f"  {p.failed} failed, {p.unanswered} unanswered: {p.first_error[:120]}"
        print(line + extra, flush=True)

    try:
        ceilings.extend(measure_ceilings(args.ceiling_messages))
        print(
            "ceiling at the start: "
            + "; ".join(f"{c.kind} {c.inbox} {fmt_int(c.rate)}/s" for c in ceilings),
            flush=True,
        )
        print(ROW_HEADER)
        configs = run_all(args, sink, progress)
        ceilings.extend(measure_ceilings(args.ceiling_messages))
    finally:
        sink.close()
        if was_enabled:
            tracing.enable()
        else:
            tracing.disable()

    print_table(configs)
    _, summary = print_verdict(configs, ceilings)
    errors = sum(p.errors for c in configs for p in c.probes)
    wall_s = time.perf_counter() - started
    print(f"\ntotal wall time {wall_s:.1f} s")
    if args.json is not None:
        write_json(
            args.json, args, configs=configs, ceilings=ceilings, summary=summary, wall_s=wall_s
        )
        print(f"results written to {args.json}")
    if errors:
        print(f"{errors} request(s) failed or went unanswered", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
