"""The produce path: 3 brokers in one process, acks 1 and all, batches of 1 to 100 records.

Measures a closed-loop producer's records/s, requests/s and latency per configuration (acks x
batch size x tracing) and in-flight level, and the actor messages per second it takes, against
the baseline measured in the same process: the raw Pykka tell rate (one thread telling a trivial
actor), with Pykka's ``queue.Queue`` inbox and the ``queue.SimpleQueue`` kafkactor's actors use,
plus a ping-pong between two actors (one message in flight: every delivery a thread wake-up),
and the same ping-pong through two ``TracedActor``s with tracing off (the runtime's own cost
per hop over it).
The ratio printed is the acks=all 100-record configuration's messages/s over that ceiling; the
goal is acks=all 100-record batches at >= 150,000 records/s with p99 < 50 ms, tracing off.

The system: a fresh ``Cluster(3)`` per probe (empty logs, nothing carried over), topic ``bench``
with 6 partitions, replication factor 3, ``min_insync_replicas=2``, leaders spread round-robin.
The producer (no retries, 30 s timeout) is driven by the main thread: at most ``in-flight``
requests outstanding (a semaphore released by each request's done-callback, which records the
completion time), each ``send_batch`` of 1, 10 or 100 prebuilt 100-byte values to the next
partition in turn. Building the batch is client work on the sending thread, inside the latency.
Each probe runs ``--warmup`` s, then a window of ``--duration`` s, then waits for what is out.

Per probe, over the window: records/s and requests/s completed; p50 / p99 / max latency of the
requests sent in it; gap ms, the longest time without a completion; msgs/req, every
``Directory.tell`` per completed request (the directory's ``tell`` wrapped by a counter); CPU
us/req (process CPU, all threads: 1e6 / that bounds requests/s under one GIL); errors (failed or
unanswered: the exit code is then 1); event B/req with tracing on (JSON lines to a temporary
file); msgs/wake with ``--wakeups``: messages the actors handled per wake-up, a wake-up being
a take from an empty mailbox, where the actor's thread blocks until the next message arrives
(the mailboxes then count in Python, which costs a little: hence opt-in). Per configuration
the table shows the level with the highest records/s among those with p99 < 50 ms and no
errors (else the highest records/s, marked ``!``). With ``--quick`` tracing on runs only at
that level. The ceilings are measured at the start and the end; the best counts.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import queue
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import _harness as h
import pykka

from kafkactor.actors.runtime import Directory, TracedActor, handles
from kafkactor.messages import message
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster

TOPIC, PARTITIONS, VALUE_BYTES = "bench", 6, 100
P99_LIMIT_MS = 50.0
GOAL_RECORDS_PER_S, GOAL_ACKS, GOAL_BATCH = 150_000, -1, 100
DRAIN_S = 10.0


@dataclass(slots=True)
class ProbeResult:
    acks: int
    batch: int
    tracing: bool
    in_flight: int
    window_s: float
    completed: int
    records_per_s: float
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    max_gap_ms: float
    messages_per_request: float
    cpu_us_per_request: float
    errors: int  # failed + unanswered
    first_error: str
    trace_bytes_per_request: float
    messages_per_wakeup: float  # 0.0: not counted (no --wakeups)

    @property
    def qualifies(self) -> bool:
        return self.errors == 0 and self.completed > 0 and self.p99_ms < P99_LIMIT_MS


def count_tells(directory: Directory) -> itertools.count[int]:
    """Wrap the directory's `tell` with a counter (advanced in C, no lock needed)."""
    counter = itertools.count()
    tell, advance = directory.tell, counter.__next__

    def counting_tell(address: str, message: Any) -> bool:
        advance()
        return tell(address, message)

    directory.tell = counting_tell  # type: ignore[method-assign]
    return counter


class CountingInbox(queue.SimpleQueue[Any]):
    """The TracedActor mailbox (a SimpleQueue) counting its takes, and those that find it empty
    (the actor's thread then blocks: the next message is a wake-up). Installed by --wakeups."""

    takes = itertools.count()  # advanced in C: no lock needed
    wakeups = itertools.count()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        next(CountingInbox.takes)
        if self.empty():
            next(CountingInbox.wakeups)
        return super().get(block, timeout)

    @staticmethod
    def install() -> Any:
        """Give every TracedActor started from now on this mailbox, and so a thread of its own
        (a wake-up is a thread's: actors on a dispatcher have none); returns what to restore."""
        original = vars(TracedActor)["_create_actor_inbox"]
        TracedActor._create_actor_inbox = _counting_inbox  # type: ignore[method-assign,assignment]
        return original

    @staticmethod
    def counts() -> tuple[int, int]:
        """(takes, wake-ups) so far; each read advances both by one, which the caller subtracts."""
        return next(CountingInbox.takes), next(CountingInbox.wakeups)


def _counting_inbox(actor: TracedActor) -> CountingInbox:
    return CountingInbox()


def run_probe(
    acks: int, batch: int, in_flight: int, *, trace_on: bool, warmup_s: float, duration_s: float
) -> ProbeResult:
    """A fresh cluster, a closed loop of `in_flight` requests, measured over the window."""
    counting = TracedActor._create_actor_inbox is _counting_inbox
    values = [os.urandom(VALUE_BYTES) for _ in range(batch)]
    slots = threading.Semaphore(in_flight)
    done: list[tuple[int, int]] = []  # (sent ns, done ns): list.append is atomic
    failures: list[BaseException] = []

    def callback(sent_ns: int, future: Future[Any]) -> None:
        done.append((sent_ns, time.perf_counter_ns()))
        if future.exception() is not None:
            failures.append(future.exception())  # type: ignore[arg-type]
        slots.release()

    with h.traced(trace_on) as trace:
        cluster = Cluster(3)
        tells = count_tells(cluster.directory)
        try:
            cluster.start()
            config = LogConfig(min_insync_replicas=2)
            cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=config)
            # retried: a leader ZooKeeper names may not have its LeaderAndIsr yet (as Kafka's
            # producer retries NOT_LEADER_FOR_PARTITION)
            send = cluster.producer(acks=acks, timeout_ms=30_000, retries=10).send_batch
            now = time.perf_counter_ns()
            window_start, end = now + int(warmup_s * 1e9), now + int((warmup_s + duration_s) * 1e9)
            before: tuple[int, float, int, int] | None = None
            for k in itertools.count():
                if not slots.acquire(timeout=max(0, end - now) / 1e9):
                    break  # every request in flight is stuck: the window ends on time anyway
                now = time.perf_counter_ns()
                if before is None and now >= window_start:
                    before = (next(tells), time.process_time(), trace.size(), now)
                    taken = CountingInbox.counts()
                if now >= end:
                    slots.release()
                    break
                future = send(TOPIC, values, partition=k % PARTITIONS)
                future.add_done_callback(functools.partial(callback, now))
            after = (next(tells), time.process_time(), trace.size(), time.perf_counter_ns())
            taken_after = CountingInbox.counts()
            if before is None:  # a warm-up that never ended: an empty window
                before, taken = after, taken_after
            drain_until = time.perf_counter() + DRAIN_S
            returned = sum(
                slots.acquire(timeout=max(0.0, drain_until - time.perf_counter()))
                for _ in range(in_flight)
            )
            unanswered, failed = in_flight - returned, list(failures)
        finally:
            cluster.stop()
    start_ns, end_ns = before[3], after[3]
    window_s = (end_ns - start_ns) / 1e9
    finished = sorted(d for _, d in done if start_ns <= d <= end_ns)
    latencies = [(d - s) / 1e6 for s, d in done if start_ns <= s <= end_ns]
    gaps = [b - a for a, b in itertools.pairwise([start_ns, *finished, end_ns])]
    completed = len(finished)
    return ProbeResult(
        acks, batch, trace_on, in_flight, window_s, completed,
        h.ratio(completed * batch, window_s), h.ratio(completed, window_s),
        h.percentile(latencies, 50), h.percentile(latencies, 99), max(latencies, default=0.0),
        max(gaps) / 1e6, h.ratio(after[0] - before[0] - 1, completed),
        h.ratio(after[1] - before[1], completed) * 1e6, len(failed) + unanswered,
        repr(failed[0]) if failed else "", h.ratio(after[2] - before[2], completed),
        h.ratio(taken_after[0] - taken[0] - 1, taken_after[1] - taken[1] - 1) if counting else 0.0,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# The ceiling: raw Pykka tells
# --------------------------------------------------------------------------------------------


class CountingActor(pykka.ThreadingActor):
    """Counts messages; sets `done` after `expected`. Tells each on to `peer` when it has one
    (the ping-pong)."""

    def __init__(self, expected: int, done: threading.Event) -> None:
        super().__init__()
        self.left, self.done = expected, done
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


class SimpleQueueActor(CountingActor):
    """The same with the inbox kafkactor's `TracedActor` uses."""

    @staticmethod
    def _create_actor_inbox() -> pykka._actor.ActorInbox:
        return queue.SimpleQueue()


@dataclass(frozen=True, slots=True)
class Ceiling:
    kind: str  # "tell" or "ping-pong"
    inbox: str
    messages: int
    rate: float


def measure_ceiling(kind: str, actor: type[CountingActor], messages: int) -> Ceiling:
    """`messages` told from this thread to one actor, or bounced between two (one in flight)."""
    done = threading.Event()
    if kind == "tell":
        refs = [actor.start(messages, done)]
        payloads = [("tick", i) for i in range(messages)]
    else:
        messages |= 1  # odd: the first actor handles the last hop
        refs = [actor.start((messages + 1) // 2, done) for _ in range(2)]
        refs[0].tell(refs[1])
        refs[1].tell(refs[0])
        payloads = [("ball", 0)]
    try:
        started = time.perf_counter()
        for payload in payloads:
            refs[0].tell(payload)
        if not done.wait(60):
            sys.exit(f"the {kind} ceiling did not finish")
        seconds = time.perf_counter() - started
    finally:
        for ref in refs:
            ref.stop()
    inbox = "queue.SimpleQueue" if actor is SimpleQueueActor else "queue.Queue"
    return Ceiling(kind, inbox, messages, messages / seconds)


RUNTIME = "TracedActor, tracing off"


@message
class Ball:
    """The message two `Bouncer`s pass back and forth."""

    left: int = 0


class Bouncer(TracedActor):
    """kafkactor's actor runtime in a ping-pong: `TracedActor.send` through a `Directory`."""

    def __init__(
        self, address: str, peer: str, directory: Directory, done: threading.Event
    ) -> None:
        super().__init__(address, directory)
        self.peer, self.done = peer, done

    @handles(Ball)
    def _on_ball(self, ball: Ball) -> None:
        if ball.left <= 1:
            self.done.set()
        else:
            self.send(self.peer, Ball(left=ball.left - 1))


def measure_traced_ping_pong(messages: int) -> Ceiling:
    """The ping-pong through `TracedActor`s with tracing off: the runtime's cost per hop over
    the raw Pykka ping-pong (same inbox, one message in flight)."""
    done, directory = threading.Event(), Directory()
    refs = [Bouncer.start("a", "b", directory, done), Bouncer.start("b", "a", directory, done)]
    try:
        with h.traced(False):
            started = time.perf_counter()
            directory.tell("a", Ball(left=messages))
            if not done.wait(60):
                sys.exit("the TracedActor ping-pong did not finish")
            seconds = time.perf_counter() - started
    finally:
        for ref in refs:
            ref.stop()
    return Ceiling("ping-pong", RUNTIME, messages, messages / seconds)


def measure_ceilings(messages: int) -> list[Ceiling]:
    return [
        *(
            measure_ceiling(kind, actor, messages if kind == "tell" else max(1, messages // 10))
            for kind in ("tell", "ping-pong")
            for actor in (CountingActor, SimpleQueueActor)
        ),
        measure_traced_ping_pong(max(1, messages // 10)),
    ]


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

PROBE_HEAD = ["acks", "batch", "trace", "inflt", "records/s", "requests/s", "p50 ms", "p99 ms"]
PROBE_HEAD += ["max ms", "gap ms", "msgs/req", "CPU us/req", "errors", "event B/req", "msgs/wake"]


def probe_cells(p: ProbeResult, mark: str = "") -> list[object]:
    return [
        "all" if p.acks == -1 else p.acks, p.batch, "on" if p.tracing else "off",
        f"{p.in_flight}{mark}", h.num(p.records_per_s), h.num(p.requests_per_s),
        h.num(p.p50_ms, ".1f"), h.num(p.p99_ms, ".1f"), f"{p.max_ms:.1f}", f"{p.max_gap_ms:.1f}",
        h.num(p.messages_per_request, ".1f"), h.num(p.cpu_us_per_request), p.errors,
        h.num(p.trace_bytes_per_request) if p.tracing else "-",
        h.num(p.messages_per_wakeup, ".2f") if p.messages_per_wakeup else "-",
    ]  # fmt: skip


def pick(probes: Sequence[ProbeResult]) -> ProbeResult:
    """The highest records/s with p99 under the limit and no errors; else the highest."""
    return max([p for p in probes if p.qualifies] or probes, key=lambda p: p.records_per_s)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser("produce_bench", "The produce path against the raw Pykka tell rate.")
    p.add_argument("--duration", type=float, help="measured seconds per probe (5; --quick 1.5)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per probe (0.5; --quick 0.25)")
    p.add_argument("--in-flight", type=h.int_list, help="in-flight levels (1,8,16,32)")
    p.add_argument("--traced-levels", choices=("all", "best"), help="tracing on at every level")
    p.add_argument("--ceiling-messages", type=h.positive_int, help="raw tells (200,000)")
    p.add_argument("--acks", type=lambda t: tuple(int(a) for a in t.split(",")), default=(1, -1))
    p.add_argument("--batches", type=h.int_list, default=(1, 10, 100), help="records per batch")
    p.add_argument("--wakeups", action="store_true", help="count messages per actor wake-up")
    args = h.fill(
        p.parse_args(argv),
        duration=(5.0, 1.5, 0.3),
        warmup=(0.5, 0.25, 0.1),
        in_flight=((1, 8, 16, 32), (1, 16, 32), (8,)),
        traced_levels=("all", "best", "best"),
        ceiling_messages=(200_000, 50_000, 2_000),
    )
    if set(args.acks) - {1, -1}:
        p.error("--acks are 1 and/or -1")
    if args.smoke:
        args.acks, args.batches = (-1,), (GOAL_BATCH,)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    h.header(
        f"3 brokers in one process; topic {TOPIC}: {PARTITIONS} partitions, RF 3, min ISR 2;"
        f" fresh cluster per probe; {VALUE_BYTES}-byte values; closed loop",
        f"probes: {args.warmup:g} s warm-up + {args.duration:g} s window; in-flight"
        f" {','.join(map(str, args.in_flight))}; tracing on at {args.traced_levels} level(s)",
    )
    ceilings = measure_ceilings(args.ceiling_messages)
    # after the ceilings and restored before the next: their TracedActor ping-pong keeps the
    # real mailbox
    real_inbox = CountingInbox.install() if args.wakeups else None
    picked: dict[tuple[int, int, bool], ProbeResult] = {}
    probes: list[ProbeResult] = []
    for trace_on, acks, batch in itertools.product((False, True), args.acks, args.batches):
        levels = args.in_flight
        if trace_on and args.traced_levels == "best":
            levels = (picked[acks, batch, False].in_flight,)
        config_probes = []
        for in_flight in levels:
            probe = run_probe(acks, batch, in_flight, trace_on=trace_on, warmup_s=args.warmup,
                              duration_s=args.duration)  # fmt: skip
            print(" ", h.pairs(PROBE_HEAD, probe_cells(probe)), probe.first_error[:120], flush=True)
            config_probes.append(probe)
        probes += config_probes
        picked[acks, batch, trace_on] = pick(config_probes)
    if real_inbox is not None:
        TracedActor._create_actor_inbox = real_inbox  # type: ignore[method-assign]
    ceilings += measure_ceilings(args.ceiling_messages)

    print(
        f"\n== Per configuration: the in-flight level picked (p99 < {P99_LIMIT_MS:g} ms, '!' none)"
    )
    order = sorted(picked, key=lambda key: (-key[0], key[1], key[2]))
    rows = [probe_cells(picked[key], "" if picked[key].qualifies else "!") for key in order]
    print(h.table(PROBE_HEAD, rows))
    best: dict[tuple[str, str], Ceiling] = {}
    for c in ceilings:
        key = (c.kind, c.inbox)
        if key not in best or c.rate > best[key].rate:
            best[key] = c
    print()
    for (kind, inbox), c in best.items():
        runs = ", ".join(f"{x.rate:,.0f}" for x in ceilings if (x.kind, x.inbox) == (kind, inbox))
        print(f"ceiling: {kind} ({inbox}): best {c.rate:,.0f} msgs/s; runs (start, end): {runs}")
    raw, traced = best.get(("ping-pong", "queue.SimpleQueue")), best.get(("ping-pong", RUNTIME))
    if raw is not None and traced is not None:
        print(
            f"a hop through the actor runtime (tracing off): {1e6 / traced.rate:.1f} us against"
            f" {1e6 / raw.rate:.1f} us raw; runtime / raw rate {traced.rate / raw.rate:.2f}"
        )
    goal = picked.get((GOAL_ACKS, GOAL_BATCH, False))
    summary: dict[str, Any] = {}
    if goal is not None:
        messages_per_s = goal.messages_per_request * goal.requests_per_s
        ratios = {f"{k}/{i}": messages_per_s / c.rate for (k, i), c in best.items()}
        print(
            f"acks=all {GOAL_BATCH}-record batches, tracing off, in-flight {goal.in_flight}:"
            f" {messages_per_s:,.0f} actor messages/s = "
            + ", ".join(f"{r:.1%} of the {name} rate" for name, r in ratios.items())
        )
        passed = goal.qualifies and goal.records_per_s >= GOAL_RECORDS_PER_S
        print(
            f"[{'PASS' if passed else 'FAIL'}] goal: >= {GOAL_RECORDS_PER_S:,} records/s with p99 <"
            f" {P99_LIMIT_MS:g} ms: {goal.records_per_s:,.0f} records/s, p99 {goal.p99_ms:.1f} ms"
        )
        summary = {"messages_per_s": messages_per_s, "ratios": ratios, "goal_passed": passed}
    h.finish(args, started, {"probes": probes, "ceilings": ceilings, "summary": summary})
    errors = sum(p.errors for p in probes)
    if errors:
        print(f"{errors} request(s) failed or went unanswered", file=sys.stderr)
        for p in probes:
            if p.errors:
                first = p.first_error or "none failed: unanswered after the drain"
                print(
                    f"  acks={p.acks} batch={p.batch} tracing={p.tracing} in-flight"
                    f" {p.in_flight}: {p.errors}; first error: {first}",
                    file=sys.stderr,
                )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
