"""Kafka's TestPurgatoryPerformance through kafkactor's actors: the highest sustained rate.

Measures, per latency case, the highest rate of delayed operations (ops/s) the purgatory
actor sustains, with tracing off and on; the baseline is the untraced run of the same search in
the same process, and the ratio on/off is printed per case. The goals printed: 50,000 ops/s
with tracing off in every case, and tracing on at >= 50% of that in every case.

Workload (Kafka's test): Poisson arrivals at the probe's rate; each operation's completion
latency log-normal from its median and 75th percentile (``sigma = ln(p75 / p50) / 0.674490``),
whole ms; timeout 200 ms: an operation whose latency is below it is completed by an event at
send + latency, the others expire. Latency cases (``--latency``): p50 20 / p75 60 ms (~8%
expire) and 200 / 400 ms (~50%).

Keys, Kafka's model by default: every operation watches ``--keys`` 3 keys drawn from a space of
``--key-space-size`` 100, so watcher lists are shared: the completion event of an operation is
a ``KeyChanged`` of its first key that re-checks every operation watching that key, and the
completed operation stays in its other keys' lists until the purge (every 1000 completions)
drops it. The key's value counts the events of that key in planned completion order, and the
operation awaits its own count (``AwaitValue``), so each event completes the operation it is
for. (Kafka's test completes operations directly, not through a key; the actors only complete
through keys.) ``--own-key``: each operation watches one key of its own (no sharing, no purge).

Through the actors on a real clock: a `Directory`, a `Timer` whose expirations the
`ReaperActor` delivers, and a `PurgatoryActor`, fresh per probe. A generator thread sends the
prebuilt ``DelayOperation`` requests at their arrival times through a client that records each
response as it arrives (no Future per operation: Kafka counts down a latch); a completer thread
tells each ``KeyChanged`` at its due time.

Per probe: target rate (operations / last planned arrival, Kafka's targetRate), achieved rate
(sent / generator time), answers per second in [start + 250 ms, generator end] against those
due in that window, process CPU per operation, lateness p50 / p99 (answer - intended answer
time), the outstanding count at the end against Little's law + 100 ms of arrivals, purged
watcher entries. Sustained: achieved >= 95% of target, answers >= 95% of those due, backlog
within bound. A probe past the bound + 1 s of arrivals is aborted.

Search (per latency case and tracing mode): probes of ``--duration`` s from ``--start-rate``,
doubling while sustained, then bisection to 10%, at most ``--max-probes``; the best rate is
re-run (``--confirm``) because a probe near the ceiling can pass by luck, and a failure moves
the answer down. ``--runs`` repeats each search: the rate is the median with the min-max range.

Past the ceiling (``--overload``, 1.5 by default; 0 skips it): per latency case, with tracing
off, one probe at that multiple of the highest sustained rate with the edge's mailbox bound
(`Directory.edge_mailbox_limit`, the default 500: the generator waits while the purgatory's
mailbox is full) and, as the baseline in the same process, one with no bound. Printed: answers
per second while the generator runs, against the ceiling, and how late they came. The goal
printed: with the bound, answers keep coming at >= 90% of the ceiling (the system degrades:
answers come late; it does not collapse).
"""

from __future__ import annotations

import argparse
import collections
import gc
import heapq
import itertools
import math
import random
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import _harness as h

from kafkactor import tracing
from kafkactor.actors.purgatory import ExpirationDelivery, Purgatory, PurgatoryActor, ReaperActor
from kafkactor.actors.runtime import Client, Directory
from kafkactor.actors.runtime.directory import EDGE_MAILBOX_LIMIT
from kafkactor.messages import Envelope
from kafkactor.messages.purgatory import AwaitValue, DelayOperation, KeyChanged, OperationResult
from kafkactor.timer import SystemClock, Timer

TIMEOUT_MS = 200
P75_Z = 0.674490  # the 75th percentile point of N(0, 1)
PURGATORY, REAPER, BROKER = "broker/1/purgatory/produce", "broker/1/reaper", 1
NEVER = 1 << 62  # the awaited value of an operation left to expire
SAMPLE_S = 0.1
WARMUP_S = TIMEOUT_MS / 1000 + 0.05  # from here on every answer is due within the run
SUSTAIN = 0.95
BACKLOG_SLACK_S, RUNAWAY_S, DRAIN_S = 0.1, 1.0, 1.0
GOAL_RATE = 50_000
GOAL_ON_OFF = 0.5  # tracing on at least this share of tracing off
GOAL_OVERLOAD = 0.9  # past the ceiling, answers per second at least this share of it
MAX_RATE = 200_000
BISECT_PRECISION = 0.10
UNANSWERED, COMPLETED, EXPIRED, ERROR = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class LatencyCase:
    median_ms: float
    p75_ms: float

    @property
    def name(self) -> str:
        return f"p50={self.median_ms:g}ms p75={self.p75_ms:g}ms"

    @property
    def sigma(self) -> float:
        return math.log(self.p75_ms / self.median_ms) / P75_Z

    def expired_fraction(self) -> float:
        z = math.log(TIMEOUT_MS / self.median_ms) / self.sigma
        return 0.5 * math.erfc(z / math.sqrt(2))


@dataclass(slots=True)
class Plan:
    """One probe's operations, their messages built before it starts."""

    offsets_s: list[float]  # arrival time after the start
    latencies_ms: list[int]
    requests: list[DelayOperation]
    events: list[KeyChanged | None]  # None: left to expire

    @property
    def target_rate(self) -> float:
        return len(self.offsets_s) / self.offsets_s[-1]

    def in_flight(self, extra_s: float) -> int:
        """Little's law at the target rate, plus `extra_s` of arrivals."""
        mean_s = statistics.fmean(min(lat, TIMEOUT_MS) for lat in self.latencies_ms) / 1000
        return round(self.target_rate * (mean_s + extra_s)) + 10


def build_plan(case: LatencyCase, rate: float, args: argparse.Namespace, seed: int) -> Plan:
    rng = random.Random(f"{seed}:{case.name}:{rate}:{args.duration}")
    n = max(2, round(rate * args.duration))
    offsets = list(itertools.accumulate(rng.expovariate(rate) for _ in range(n)))
    mu, sigma = math.log(case.median_ms), case.sigma
    latencies = [int(math.exp(rng.gauss(mu, sigma))) for _ in range(n)]
    keys: list[tuple[str, ...]]
    if args.own_key:
        keys = [(f"op-{i}",) for i in range(n)]
    else:
        space = range(args.key_space_size)
        keys = [tuple(f"key-{k}" for k in rng.sample(space, args.keys)) for _ in range(n)]
    awaited = [NEVER] * n
    events: list[KeyChanged | None] = [None] * n
    counts: collections.Counter[str] = collections.Counter()
    for _, i in sorted((offsets[i] + lat / 1000, i) for i, lat in enumerate(latencies)):
        if latencies[i] < TIMEOUT_MS:
            key = keys[i][0]
            counts[key] += 1
            awaited[i] = counts[key]
            events[i] = KeyChanged(key=key, value=counts[key])
    requests = [
        DelayOperation(
            operation=AwaitValue(key=keys[i][0], at_least=awaited[i]),
            keys=keys[i],
            timeout_ms=TIMEOUT_MS,
        )
        for i in range(n)
    ]
    return Plan(offsets, latencies, requests, events)


class RecordingClient(Client):
    """Sends operation i under correlation id i + 1 and records each answer on arrival."""

    def __init__(self, directory: Directory, n: int) -> None:
        super().__init__("bench", directory, SystemClock())
        self.sent_at = [0.0] * n
        self.done_at = [0.0] * n
        self.kind = bytearray(n)
        self.sent = self.answered = 0

    def send_op(self, request: DelayOperation, i: int) -> None:
        self.sent_at[i] = time.perf_counter()
        self.sent += 1
        if not self.send_request(PURGATORY, request, i + 1):
            raise RuntimeError(f"no actor at {PURGATORY}")

    def tell(self, message: Any) -> None:
        payload = message.payload if isinstance(message, Envelope) else message
        if tracing.is_enabled():
            super().tell(message)  # the msg.recv event
        i = payload.correlation_id - 1
        self.done_at[i] = time.perf_counter()
        if isinstance(payload, OperationResult):
            self.kind[i] = EXPIRED if payload.expired else COMPLETED
        else:
            self.kind[i] = ERROR
        self.answered += 1


class Generator(threading.Thread):
    """Sends the requests at their arrival times; hands each completion on to the completer."""

    def __init__(self, plan: Plan, client: RecordingClient, start: float, give_up: float) -> None:
        super().__init__(name="bench-generator", daemon=True)
        self.plan, self.client, self.start_at, self.give_up = plan, client, start, give_up
        self.due: collections.deque[tuple[float, int]] = collections.deque()
        self.abort = False
        self.end_at = start

    def run(self) -> None:
        perf, sleep, send, push = (
            time.perf_counter,
            time.sleep,
            self.client.send_op,
            self.due.append,
        )
        latencies, requests = self.plan.latencies_ms, self.plan.requests
        for i, offset in enumerate(self.plan.offsets_s):
            now = perf()
            if self.start_at + offset - now > 0.0002:
                sleep(self.start_at + offset - now)
                now = perf()
            if now > self.give_up or self.abort:
                break
            send(requests[i], i)
            if latencies[i] < TIMEOUT_MS:
                push((now + latencies[i] / 1000, i))
        self.end_at = perf()


class Completer(threading.Thread):
    """Tells each operation's `KeyChanged` at its due time (a heap of due times)."""

    def __init__(self, plan: Plan, directory: Directory, generator: Generator) -> None:
        super().__init__(name="bench-completer", daemon=True)
        self.events, self.directory, self.generator = plan.events, directory, generator
        self.stop_now = False

    def run(self) -> None:
        perf, tell, incoming = time.perf_counter, self.directory.tell, self.generator.due
        heap: list[tuple[float, int]] = []
        while not self.stop_now:
            while incoming:
                heapq.heappush(heap, incoming.popleft())
            while heap and heap[0][0] <= perf():
                tell(PURGATORY, self.events[heapq.heappop(heap)[1]])
            if not heap and not incoming and not self.generator.is_alive():
                return
            time.sleep(min(max(heap[0][0] - perf(), 0.0) if heap else 0.001, 0.001))


@dataclass(slots=True)
class ProbeResult:
    case: str
    tracing: bool
    rate: float
    target_rate: float
    achieved_rate: float
    answered_ratio: float  # answers in the window / answers due in it
    answer_rate: float  # answers in the window / its length
    cpu_us_per_op: float
    sent: int
    completed: int
    expired: int
    errors: int
    unanswered: int
    lateness_p50_ms: float
    lateness_p99_ms: float
    outstanding_end: int
    backlog_bound: int
    purged_per_op: float
    trace_bytes_per_op: float
    edge_limit: int | None  # the directory's edge mailbox bound in this probe
    why: str  # empty when sustained

    @property
    def sustained(self) -> bool:
        return not self.why


def run_probe(
    case: LatencyCase,
    rate: float,
    args: argparse.Namespace,
    *,
    trace_on: bool,
    seed: int,
    edge_limit: int | None = EDGE_MAILBOX_LIMIT,
) -> ProbeResult:
    """A fresh actor system driven at `rate` for ``args.duration`` seconds, measured."""
    plan = build_plan(case, rate, args, seed)
    with h.traced(trace_on) as trace:
        clock, directory = SystemClock(), Directory(edge_mailbox_limit=edge_limit)
        timer = Timer(clock, executor=ExpirationDelivery(directory, REAPER, clock, BROKER))
        reaper = ReaperActor.start(REAPER, directory, timer, clock, BROKER)
        actor = PurgatoryActor.start(PURGATORY, directory, timer, clock, BROKER)
        purgatory: Purgatory = actor.proxy().purgatory.get()
        client = RecordingClient(directory, len(plan.requests))
        gc.collect()
        gc.freeze()  # the prebuilt plan is not the system's garbage to scan
        try:
            start = time.perf_counter() + 0.01
            generator = Generator(plan, client, start, start + args.duration * 1.5)
            completer = Completer(plan, directory, generator)
            runaway, cpu0 = plan.in_flight(RUNAWAY_S), time.process_time()
            generator.start()
            completer.start()
            while generator.is_alive():
                generator.join(SAMPLE_S)
                generator.abort |= client.sent - client.answered > runaway
            outstanding_end = client.sent - client.answered
            drain_until = generator.end_at + TIMEOUT_MS / 1000 + DRAIN_S
            while time.perf_counter() < drain_until and (
                client.sent > client.answered or completer.is_alive()
            ):
                completer.stop_now = generator.abort
                time.sleep(0.01)
            completer.stop_now = True
            completer.join()
            closed, cpu_s = time.perf_counter(), time.process_time() - cpu0
            trace_bytes = trace.size()
        finally:
            gc.unfreeze()
            timer.shutdown()
            reaper.stop(timeout=10)
            actor.stop(timeout=30)
            client.close()
    done = (closed, outstanding_end, cpu_s, purgatory.purged, trace_bytes)
    return summarise(
        case, rate, plan, client, generator, done, traced=trace_on, edge_limit=edge_limit
    )


def summarise(
    case: LatencyCase,
    rate: float,
    plan: Plan,
    client: RecordingClient,
    generator: Generator,
    done: tuple[float, int, float, int, int],
    *,
    traced: bool,
    edge_limit: int | None,
) -> ProbeResult:
    """Counts, rates, lateness and the verdict; `done`: the time the probe closed, the
    outstanding count at the generator's end, CPU seconds, entries purged, trace bytes."""
    start, end, aborted = generator.start_at, generator.end_at, generator.abort
    closed, outstanding_end, cpu_s, purged, trace_bytes = done
    sent = max(client.sent, 1)
    counts = [0, 0, 0, 0]
    lateness: list[float] = []
    answered = due = 0
    for i in range(client.sent):
        kind = client.kind[i] if client.done_at[i] <= closed else UNANSWERED
        counts[kind] += 1
        intended = client.sent_at[i] + min(plan.latencies_ms[i], TIMEOUT_MS) / 1000
        due += start + WARMUP_S <= intended <= end
        if kind in (COMPLETED, EXPIRED):
            lateness.append((client.done_at[i] - intended) * 1000)
            answered += start + WARMUP_S <= client.done_at[i] <= end
    achieved, bound = client.sent / max(end - start, 1e-9), plan.in_flight(BACKLOG_SLACK_S)
    reasons = ["runaway backlog"] if aborted else []
    if achieved < SUSTAIN * plan.target_rate:
        reasons.append(f"sent {achieved / plan.target_rate:.0%} of target")
    if answered < SUSTAIN * due:
        reasons.append(f"answered {h.ratio(answered, due):.0%} of due")
    if outstanding_end > bound:
        reasons.append(f"backlog {outstanding_end}>{bound}")
    window = max(end - start - WARMUP_S, 1e-9)
    return ProbeResult(
        case.name, traced, rate, plan.target_rate, achieved, h.ratio(answered, due),
        answered / window, cpu_s / sent * 1e6, client.sent, counts[COMPLETED],
        counts[EXPIRED], counts[ERROR], counts[UNANSWERED], h.percentile(lateness, 50),
        h.percentile(lateness, 99), outstanding_end, bound, purged / sent, trace_bytes / sent,
        edge_limit, "; ".join(reasons),
    )  # fmt: skip


def nice_rate(rate: float) -> int:
    """`rate` to 2 significant digits (3 from 10,000), so the table reads well."""
    magnitude = 10 ** max(0, math.floor(math.log10(rate)) - (2 if rate >= 10_000 else 1))
    return max(100, int(round(rate / magnitude) * magnitude))


def next_rate(start: float, best: int | None, failed: int | None) -> int | None:
    """Double from the best, halve from the lowest failure, or bisect between them."""
    if best is None:
        rate = nice_rate(start if failed is None else failed / 2)
        return rate if failed is None or rate < failed else None
    if failed is None:
        return nice_rate(best * 2) if best * 2 <= MAX_RATE else None
    mid = nice_rate(math.sqrt(best * failed))
    return mid if failed > best * (1 + BISECT_PRECISION) and best < mid < failed else None


def search(
    case: LatencyCase, args: argparse.Namespace, *, trace_on: bool, seed: int
) -> tuple[int, list[ProbeResult]]:
    """The highest sustained rate (0 if none) and every probe run to find it."""
    probes: list[ProbeResult] = []
    tried: dict[int, list[bool]] = {}
    regular = confirmations = 0
    while True:
        failed = min((r for r, ok in tried.items() if not all(ok)), default=None)
        good = [r for r, ok in tried.items() if all(ok) and (failed is None or r < failed)]
        best = max(good, default=None)
        rate = next_rate(args.start_rate, best, failed)
        if rate is not None and rate not in tried and regular < args.max_probes:
            regular += 1
        elif best is not None and len(tried[best]) < 2 and confirmations < args.confirm:
            rate, confirmations = best, confirmations + 1
        else:
            return best or 0, probes
        probe = run_probe(case, rate, args, trace_on=trace_on, seed=seed + len(probes))
        probes.append(probe)
        tried.setdefault(rate, []).append(probe.sustained)
        mode = f"{case.name}, tracing {'on' if trace_on else 'off'}"
        print(f"  {h.pairs(PROBE_HEAD, probe_cells(probe))}   ({mode})", flush=True)


PROBE_HEAD = ["rate", "target", "achieved", "c/due", "us/op", "compl", "expir", "err", "unans"]
PROBE_HEAD += ["p50 ms", "p99 ms", "end/bound", "purged/op", "trace B/op", "sustained"]


def probe_cells(p: ProbeResult) -> list[str]:
    return [
        f"{p.rate:,.0f}", f"{p.target_rate:,.0f}", f"{p.achieved_rate:,.0f}",
        h.num(p.answered_ratio, ".0%"), f"{p.cpu_us_per_op:.0f}", str(p.completed),
        str(p.expired), str(p.errors), str(p.unanswered), h.num(p.lateness_p50_ms, ".1f"),
        h.num(p.lateness_p99_ms, ".1f"), f"{p.outstanding_end}/{p.backlog_bound}",
        f"{p.purged_per_op:.2f}",
        f"{p.trace_bytes_per_op:.0f}", "yes" if p.sustained else "NO: " + p.why,
    ]  # fmt: skip


def parse_latency(text: str) -> tuple[LatencyCase, ...]:
    """``20:60,200:400``: p50:p75 pairs in ms."""
    try:
        pairs = [part.split(":") for part in text.split(",") if part.strip()]
        return tuple(LatencyCase(float(p50), float(p75)) for p50, p75 in pairs)
    except ValueError:
        raise argparse.ArgumentTypeError(f"latency cases are p50:p75 pairs, not {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    p = h.parser(
        "purgatory_bench", "Kafka's TestPurgatoryPerformance via actors.", "searches per case (1)"
    )
    p.add_argument("--latency", type=parse_latency, help="p50:p75 cases in ms (20:60,200:400)")
    p.add_argument("--keys", type=h.positive_int, default=3, help="keys per operation (3)")
    p.add_argument("--key-space-size", type=h.positive_int, default=100, help="keys in all (100)")
    p.add_argument("--own-key", action="store_true", help="each operation its own one key")
    p.add_argument("--tracing", choices=("off", "on", "both"), default="both")
    p.add_argument("--duration", type=float, help="seconds per probe (3; --quick 1.5)")
    p.add_argument("--start-rate", type=float, help="first probe's rate (2000; --quick 3000)")
    p.add_argument("--max-probes", type=h.positive_int, help="probes per search (8; --quick 5)")
    p.add_argument("--confirm", type=int, help="re-runs of the best rate (3; --quick 1)")
    p.add_argument(
        "--overload",
        type=float,
        default=1.5,
        help="probe past the ceiling at this multiple of it, bounded and not (1.5; 0: skip)",
    )
    default_cases = (LatencyCase(20, 60), LatencyCase(200, 400))
    args = h.fill(
        p.parse_args(argv),
        latency=(default_cases, default_cases, default_cases[:1]),
        duration=(3.0, 1.5, 0.8),
        start_rate=(2_000, 3_000, 1_000),
        max_probes=(8, 5, 1),
        confirm=(3, 1, 0),
        runs=(1, 1, 1),
    )
    if args.duration <= WARMUP_S + 0.5:
        p.error(f"--duration must be above {WARMUP_S + 0.5} s")
    if args.own_key:
        args.keys = 1
    elif args.keys > args.key_space_size:
        p.error("--keys must be at most --key-space-size")
    model = "one key of its own" if args.own_key else f"{args.keys} of {args.key_space_size} keys"
    h.header(
        f"each operation watches {model}; timeout {TIMEOUT_MS} ms; probes of {args.duration:g} s"
        f" from {args.start_rate:,.0f}/s, at most {args.max_probes} (+{args.confirm} to confirm)"
        f" per search; {args.runs} search(es) each; seed {args.seed}",
        *(f"  {c.name}: {c.expired_fraction():.1%} expire" for c in args.latency),
        f"sustained: achieved >= {SUSTAIN:.0%} of target, answers >= {SUSTAIN:.0%} of those due,"
        f" outstanding at the end <= Little's law + {BACKLOG_SLACK_S * 1000:.0f} ms of arrivals",
    )
    modes = {"off": (False,), "on": (True,), "both": (False, True)}[args.tracing]
    best: dict[tuple[str, bool], h.Spread] = {}
    probes: list[ProbeResult] = []
    for trace_on in modes:
        for case in args.latency:
            rates = []
            for run in range(args.runs):
                seed = args.seed + 1000 * run
                rate, run_probes = search(case, args, trace_on=trace_on, seed=seed)
                rates.append(rate)
                probes += run_probes
            best[case.name, trace_on] = h.Spread.of(rates)
    overloads = overload_probes(args, best, seed=args.seed + 500) if False in modes else []
    print(f"\n== Every probe ({model})")
    rows = [[p.case, "on" if p.tracing else "off", *probe_cells(p)] for p in probes]
    print(h.table(["case", "tracing", *PROBE_HEAD], rows))
    print(f"\n== Highest sustained rate, ops/s ({model}; median (min-max) of {args.runs} run(s))")
    rows = []
    for case in args.latency:
        off, on = best.get((case.name, False)), best.get((case.name, True))
        on_off = f"{on.median / off.median:.2f}" if on and off and off.median else "-"
        rows.append([case.name, off.format() if off else "-", on.format() if on else "-", on_off])
    print(h.table(["latency case", "tracing off", "tracing on", "on/off"], rows))
    untraced = [s.median for (_, on), s in best.items() if not on]
    ratios = [
        on.median / off.median
        for (name, traced), on in best.items()
        if traced and (off := best.get((name, False))) is not None and off.median
    ]
    print()
    if untraced:
        low = min(untraced)
        print_goal(
            low >= GOAL_RATE,
            f"{GOAL_RATE:,} ops/s with tracing off in every case",
            f"{low:,.0f}/s ({low / GOAL_RATE:.0%} of the goal)",
        )
    if ratios:
        low = min(ratios)
        print_goal(
            low >= GOAL_ON_OFF,
            f"tracing on >= {GOAL_ON_OFF:.0%} of tracing off in every case",
            f"{low:.2f}",
        )
    if overloads:
        print_overloads(overloads, best)
    summary = [{"case": c, "tracing": t, "rate": s} for (c, t), s in best.items()]
    document = {"model": model, "best": summary, "probes": probes, "overload": overloads}
    h.finish(args, started, document)
    return 0


def overload_probes(
    args: argparse.Namespace, best: dict[tuple[str, bool], h.Spread], *, seed: int
) -> list[ProbeResult]:
    """Per latency case, tracing off: a probe at ``--overload`` x the ceiling with the edge's
    mailbox bound, then one without (the baseline)."""
    if args.overload <= 0:
        return []
    probes = []
    for case in args.latency:
        ceiling = best[case.name, False].median
        if not ceiling:
            continue
        rate = nice_rate(ceiling * args.overload)
        for limit in (EDGE_MAILBOX_LIMIT, None):
            probe = run_probe(case, rate, args, trace_on=False, seed=seed, edge_limit=limit)
            probes.append(probe)
            bound = f"edge mailbox bound {limit}" if limit else "no edge mailbox bound"
            cells = h.pairs(PROBE_HEAD, probe_cells(probe))
            print(f"  {cells}   ({case.name}, past the ceiling, {bound})", flush=True)
    return probes


def print_overloads(probes: list[ProbeResult], best: dict[tuple[str, bool], h.Spread]) -> None:
    """The table past the ceiling, and the goal: answers keep coming with the bound."""
    print("\n== Past the ceiling, tracing off: answers/s while the generator runs")
    head = ["latency case", "edge bound", "target/s", "sent/s", "answers/s", "of ceiling"]
    head += ["vs none", "late p50 ms", "late p99 ms", "unanswered", "runaway"]
    unbounded = {p.case: p.answer_rate for p in probes if p.edge_limit is None}
    rows, shares = [], []
    for p in probes:
        share = p.answer_rate / best[p.case, False].median
        versus = "-"
        if p.edge_limit is not None:
            shares.append(share)
            versus = h.num(h.ratio(p.answer_rate, unbounded.get(p.case, math.nan)), ".2f")
        rows.append([
            p.case, str(p.edge_limit or "none"), f"{p.target_rate:,.0f}",
            f"{p.achieved_rate:,.0f}", f"{p.answer_rate:,.0f}", f"{share:.0%}", versus,
            h.num(p.lateness_p50_ms, ".0f"), h.num(p.lateness_p99_ms, ".0f"),
            str(p.unanswered), "yes" if "runaway" in p.why else "no",
        ])  # fmt: skip
    print(h.table(head, rows, notes=[
        "vs none: answers/s with the bound / without it, in the same run (the baseline)",
        "unanswered: still unanswered when the probe closed (generator end + 1.2 s)",
    ]))  # fmt: skip
    print()
    if shares:
        low = min(shares)
        print_goal(
            low >= GOAL_OVERLOAD,
            f"past the ceiling, answers/s >= {GOAL_OVERLOAD:.0%} of it with the edge bound",
            f"{low:.0%}",
        )


def print_goal(met: bool, goal: str, measured: str) -> None:
    print(f"[{'PASS' if met else 'FAIL'}] goal {goal}: {measured}")


if __name__ == "__main__":
    sys.exit(main())
