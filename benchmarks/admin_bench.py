"""Partition administration through the controller: CreatePartitions, then a reassignment.

Both parts run Kafka 2.8's ZooKeeper-mode paths: brokers in one process on the embedded
ZooKeeper, the elected controller doing the work (``docs/controller.md``), default broker
settings, tracing off. Times are ``time.perf_counter`` wall clock; every figure is the median
(min-max) of ``--runs`` runs.

Part 1, CreatePartitions to the first acknowledged produce on the new partition. One
``Cluster(3, listen="127.0.0.1")``, one acks=all in-process producer (``cluster.producer``,
retries 10 after Kafka's 100 ms backoff). Per run a topic with 1 partition, replication factor
3, is created and produced to twice on partition 0 (the producer then has its metadata); the
second produce is "existing p0", the baseline of one acknowledged produce. Then, clock started:
the topic grows to 2 partitions, and the producer sends one 100-byte record to partition 1
and waits for its acknowledgement (the producer learns of partition 1 by a metadata refresh;
an UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER answer would be retried). Split: "call" is the
grow call alone, "produce" the send after it. The baseline measured in the same run, right
before or after (alternating): the same with a brand-new topic instead (create a 1-partition
RF 3 topic, then the first acknowledged produce to it). The ratio is grow-to-first-ack over
create-to-first-ack. Two paths, on the same cluster and producer:

- in-process: ``Cluster.create_partitions`` / ``Cluster.create_topic``, which write
  ``/brokers/topics/<t>`` and return once every partition has an acting leader;
- wire: kafkactor's ``AdminClient`` CreatePartitions / CreateTopics over TCP to the
  controller, answered when the broker's metadata cache has the leaders (its topic purgatory).

What dominates a first ack is the followers, not the controller: a follower that already
fetches from the new partition's leader has a fetch in its long poll (up to
``replica.fetch.wait.max.ms``, 500 ms) that does not name the new partition, so the acks=all
produce waits for the next fetch, as in Kafka. Whether that happens depends on which brokers
already follow which: the spread of a run is wide by nature.

Part 2, a reassignment of a partition holding ``--fill-mib`` MiB under an acks=all load. Per
run a fresh ``Cluster(4)``: a topic with one partition on brokers (1, 2, 3),
``min.insync.replicas=2``, filled with 1 KiB records (batches of 256, 8 in flight, acks=all).
A load thread then sends one 100-byte record every 1/``--rate`` s: an open loop (a send is
not held back by a slow answer; acks=all, retries 50, ``--retry-backoff-ms``), each latency from the
send's scheduled time to its acknowledgement, so a stall counts in every send it holds up (a
closed loop would show it once). After a "before" window of ``--window`` s,
``reassign_partitions`` moves the partition to (2, 3, 4) and ``wait_for_reassignments`` waits
until the controller lists it no more (it asks every 50 ms: the resolution of the time); the
load then stops. Reported: the reassignment's time; MiB moved (what broker 4's new replica
holds when it completes) and MiB/s; produce latency p50 / p99 of the records scheduled before
the reassignment and of those scheduled during it, and p99 during over p99 before (the
baseline: the same load on the same partition just before); records acknowledged, and lost:
every acknowledged offset (fill and load) read back from each of the three new replicas' logs
once they have caught up, a record missing or different on any of them counted (must be 0;
the exit code is then 1).

The leader moves from broker 1 to 2 at the reassignment's end: the sends then in flight to
broker 1 are answered NOT_LEADER_FOR_PARTITION and retried. The in-process producer waits each
retry's backoff on its one sender thread, one after another, so k sends failed together are
resent about k x ``--retry-backoff-ms`` apart (Kafka's producer backs each batch off on its
own): with Kafka's 100 ms default that, not the copy, makes most of the p99 during.
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import _harness as h

from kafkactor.admin import AdminClient
from kafkactor.clients import Producer, RecordMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.storage import iter_batches
from kafkactor.testing import Cluster

VALUE = b"v" * 100
FILL_RECORD_BYTES, FILL_BATCH, FILL_IN_FLIGHT = 1024, 256, 8
MIB = 1024 * 1024
WAIT_S = 30.0  # any single produce or admin call
MOVE_TIMEOUT_S = 900.0
READ_CHUNK = 4 * MIB
ORIGIN, TARGET = (1, 2, 3), (2, 3, 4)


# --------------------------------------------------------------------------------------------
# Part 1: CreatePartitions to the first acknowledged produce
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrowRun:
    """One run of part 1 on one path, in milliseconds (NaN when it failed)."""

    grow_to_ack_ms: float
    grow_call_ms: float
    grow_produce_ms: float
    create_to_ack_ms: float
    create_call_ms: float
    create_produce_ms: float
    existing_ms: float
    error: str = ""


@dataclass(frozen=True, slots=True)
class GrowResult:
    path: str
    runs: tuple[GrowRun, ...]
    summary: dict[str, h.Spread]  # a Spread per GrowRun field, and "ratio"

    @property
    def errors(self) -> int:
        return sum(1 for run in self.runs if run.error)


def timed_first_ack(
    call: Callable[[], object], producer: Producer, topic: str, partition: int
) -> tuple[float, float]:
    """(call ms, produce ms): `call`, then one acks=all send to `topic`-`partition`."""
    started = time.perf_counter()
    call()
    called = time.perf_counter()
    producer.send(topic, VALUE, partition=partition).result(WAIT_S)
    return (called - started) * 1e3, (time.perf_counter() - called) * 1e3


def grow_run(
    cluster: Cluster,
    producer: Producer,
    k: int,
    path: str,
    grow: Callable[[str], object],
    create: Callable[[str], object],
) -> GrowRun:
    grown, fresh = f"grow-{path}-{k}", f"fresh-{path}-{k}"
    try:
        cluster.create_topic(grown, 1, 3)
        producer.send(grown, VALUE, partition=0).result(WAIT_S)  # the producer knows it now
        started = time.perf_counter()
        producer.send(grown, VALUE, partition=0).result(WAIT_S)
        existing_ms = (time.perf_counter() - started) * 1e3
        grow_first = k % 2 == 0  # which goes first alternates
        if grow_first:
            grow_call, grow_produce = timed_first_ack(lambda: grow(grown), producer, grown, 1)
        create_call, create_produce = timed_first_ack(lambda: create(fresh), producer, fresh, 0)
        if not grow_first:
            grow_call, grow_produce = timed_first_ack(lambda: grow(grown), producer, grown, 1)
    except Exception as error:  # reported, and the exit code is 1
        return GrowRun(*(math.nan,) * 7, error=f"{type(error).__name__}: {error}")
    return GrowRun(
        grow_to_ack_ms=grow_call + grow_produce,
        grow_call_ms=grow_call,
        grow_produce_ms=grow_produce,
        create_to_ack_ms=create_call + create_produce,
        create_call_ms=create_call,
        create_produce_ms=create_produce,
        existing_ms=existing_ms,
    )


def summarize_grows(path: str, runs: Sequence[GrowRun]) -> GrowResult:
    names = [name for name in GrowRun.__slots__ if name.endswith("_ms")]
    good = [run for run in runs if not run.error]
    summary = {name: h.Spread.of(getattr(run, name) for run in good) for name in names}
    summary["ratio"] = h.Spread.of(h.ratio(r.grow_to_ack_ms, r.create_to_ack_ms) for r in good)
    return GrowResult(path, tuple(runs), summary)


def run_grows(args: argparse.Namespace) -> list[GrowResult]:
    results = []
    with Cluster(3, listen="127.0.0.1") as cluster:
        producer = cluster.producer(acks=-1, retries=10)
        with AdminClient(cluster.bootstrap_servers, timeout_s=WAIT_S) as admin:
            paths: dict[str, tuple[Callable[[str], object], Callable[[str], object]]] = {
                "in-process": (
                    lambda t: cluster.create_partitions(t, 2),
                    lambda t: cluster.create_topic(t, 1, 3),
                ),
                "wire": (
                    lambda t: admin.create_partitions(t, 2),
                    lambda t: admin.create_topic(t, 1, 3, {}),
                ),
            }
            for path in args.paths:
                grow, create = paths[path]
                runs = [
                    grow_run(cluster, producer, k, path, grow, create) for k in range(args.runs)
                ]
                results.append(summarize_grows(path, runs))
                for run in runs:
                    if run.error:
                        print(f"  {path} run failed: {run.error}", file=sys.stderr)
    return results


def grow_table(results: Sequence[GrowResult]) -> str:
    head = (
        "path",
        "grow->ack ms",
        "grow call",
        "produce",
        "create->ack ms",
        "create call",
        "produce",
        "existing p0 ms",
        "grow/create",
        "errors",
    )
    rows = []
    for result in results:
        s = result.summary
        rows.append(
            (
                result.path,
                s["grow_to_ack_ms"].format(",.1f"),
                s["grow_call_ms"].format(",.1f"),
                s["grow_produce_ms"].format(",.1f"),
                s["create_to_ack_ms"].format(",.1f"),
                s["create_call_ms"].format(",.1f"),
                s["create_produce_ms"].format(",.1f"),
                s["existing_ms"].format(",.2f"),
                s["ratio"].format(".2f"),
                result.errors,
            )
        )
    notes = (
        "grow: 1 -> 2 partitions, RF 3, then the first acks=all produce to partition 1; create:",
        "a new 1-partition RF 3 topic, then its first acks=all produce; existing p0: one produce",
        "to the old partition. grow/create: grow->ack over create->ack, per run.",
    )
    return h.table(head, rows, notes)


# --------------------------------------------------------------------------------------------
# Part 2: a reassignment under an acks=all load
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MoveRun:
    """One reassignment of a partition holding `fill_mib` MiB, under load."""

    fill_mib: float
    moved_mib: float
    reassign_s: float
    mib_per_s: float
    before_p50_ms: float
    before_p99_ms: float
    during_p50_ms: float
    during_p99_ms: float
    p99_ratio: float
    before_acks: int
    during_acks: int
    acked: int  # every acknowledged record, fill and load
    lost: int  # acknowledged, and missing or different on a new replica
    failed: int  # load sends that failed after their retries
    error: str = ""


@dataclass
class Load:
    """acks=all sends of one 100-byte record each, `rate` a second, from its own thread: an
    open loop (a slow answer does not delay the next send), so a stall shows in every send it
    holds up. A latency runs from the send's scheduled time to its acknowledgement."""

    producer: Producer
    topic: str
    rate: float
    stop: threading.Event = field(default_factory=threading.Event)
    sent: list[tuple[float, float]] = field(default_factory=list)  # (scheduled at, ms) per ack
    acked: dict[int, bytes] = field(default_factory=dict)  # offset -> value
    failed: int = 0  # sends failed after their retries
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        interval, pending = 1.0 / self.rate, []
        scheduled = time.perf_counter()
        for n in itertools.count():
            pause = scheduled - time.perf_counter()
            if self.stop.wait(pause) if pause > 0 else self.stop.is_set():
                break
            value = b"load-%010d-" % n
            value += VALUE[len(value) :]
            future = self.producer.send(self.topic, value, partition=0)
            future.add_done_callback(functools.partial(self._answered, scheduled, value))
            pending.append(future)
            scheduled += interval
        wait_futures(pending, timeout=WAIT_S * 2)

    def _answered(self, scheduled: float, value: bytes, done: Future[RecordMetadata]) -> None:
        ms = (time.perf_counter() - scheduled) * 1e3
        with self._lock:
            if done.exception() is not None:
                self.failed += 1
                return
            self.sent.append((scheduled, ms))
            self.acked[done.result().offset] = value

    def window(self, start: float, end: float) -> list[float]:
        """Latencies of the acknowledged sends scheduled in [start, end)."""
        with self._lock:
            return [ms for at, ms in self.sent if start <= at < end]


def fill_value(offset: int) -> bytes:
    head = b"fill-%010d-" % offset
    return head + b"f" * (FILL_RECORD_BYTES - len(head))


def fill(producer: Producer, topic: str, records: int) -> None:
    """`records` 1 KiB records in batches, a few batches in flight; they land at offsets
    0..records-1 (checked: `fill_value(offset)` is then what each offset holds)."""
    slots = threading.Semaphore(FILL_IN_FLIGHT)
    futures: list[Future[list[RecordMetadata]]] = []
    for first in range(0, records, FILL_BATCH):
        slots.acquire()
        batch = [fill_value(o) for o in range(first, min(first + FILL_BATCH, records))]
        future = producer.send_batch(topic, batch, partition=0)
        future.add_done_callback(lambda _: slots.release())
        futures.append(future)
    offsets = [m.offset for f in futures for m in f.result(WAIT_S * 4)]
    if offsets != list(range(records)):
        raise RuntimeError(f"the fill landed at offsets other than 0..{records - 1}")


def missing_on(cluster: Cluster, broker: int, topic: str, fill_end: int, load: Load) -> set[int]:
    """The acknowledged offsets (fill: 0..fill_end-1, and the load's) that `broker`'s replica
    does not hold with the acknowledged value, read from its log."""
    log = cluster.brokers[broker].log_manager.get_log(TopicPartition(topic=topic, partition=0))
    wanted = set(range(fill_end)) | set(load.acked)
    if log is None:
        return wanted
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, READ_CHUNK).records
        if not data:
            break
        for batch in iter_batches(data):
            for record in batch.records():
                o = record.offset
                expected = fill_value(o) if o < fill_end else load.acked.get(o)
                if expected is not None and record.value == expected:
                    wanted.discard(o)
            offset = batch.next_offset
    return wanted


def wait_for_end(cluster: Cluster, topic: str, end: int) -> None:
    """Until each new replica's log reaches `end` (bounded: a lagging one then shows losses)."""
    deadline, pause = time.monotonic() + WAIT_S, threading.Event()
    while time.monotonic() < deadline:
        try:
            ends = [cluster.describe_partition(topic, 0, broker=b).log_end_offset for b in TARGET]
        except Exception:  # a replica not there yet
            ends = [0]
        if min(ends) >= end:
            return
        pause.wait(0.05)


def producer_for_load(cluster: Cluster, args: argparse.Namespace) -> Producer:
    return cluster.producer(acks=-1, retries=50, retry_backoff_ms=args.retry_backoff_ms)


def move_run(args: argparse.Namespace) -> MoveRun:
    topic = "moved"
    fill_records = max(1, int(args.fill_mib * MIB) // FILL_RECORD_BYTES)
    with Cluster(4) as cluster:
        cluster.create_topic(topic, assignments={0: ORIGIN}, config={"min.insync.replicas": "2"})
        fill(cluster.producer(acks=-1, retries=10), topic, fill_records)
        gc.collect()  # the fill's garbage, not collected inside the windows
        load = Load(producer_for_load(cluster, args), topic, args.rate)
        warm = load.producer.send(topic, VALUE, partition=0).result(WAIT_S)  # metadata first
        load.acked[warm.offset] = VALUE
        thread = threading.Thread(target=load.run, name="admin-bench-load", daemon=True)
        error = ""
        began = time.perf_counter()
        thread.start()
        try:
            load.stop.wait(args.window)
            moved_at = time.perf_counter()
            results = cluster.reassign_partitions({(topic, 0): TARGET})
            code, message = results[(topic, 0)]
            if code is not ErrorCode.NONE:
                raise RuntimeError(f"reassignment refused: {code.name} {message}")
            cluster.wait_for_reassignments([(topic, 0)], timeout_s=MOVE_TIMEOUT_S)
            done_at = time.perf_counter()
        except Exception as failure:
            error = f"{type(failure).__name__}: {failure}"
            done_at = math.nan
        finally:
            load.stop.set()
            thread.join(WAIT_S * 3)
        moved_bytes = math.nan
        if not error:
            new = cluster.brokers[TARGET[-1]].log_manager.get_log(
                TopicPartition(topic=topic, partition=0)
            )
            moved_bytes = float(new.size_in_bytes) if new is not None else math.nan
        end = max(load.acked, default=fill_records - 1) + 1
        wait_for_end(cluster, topic, end)
        lost: set[int] = set()
        for broker in TARGET:
            lost |= missing_on(cluster, broker, topic, fill_records, load)
    reassign_s = done_at - moved_at if not error else math.nan
    before, during = load.window(began, moved_at), load.window(moved_at, done_at)
    before_p99, during_p99 = h.percentile(before, 99), h.percentile(during, 99)
    return MoveRun(
        fill_mib=fill_records * FILL_RECORD_BYTES / MIB,
        moved_mib=moved_bytes / MIB,
        reassign_s=reassign_s,
        mib_per_s=h.ratio(moved_bytes / MIB, reassign_s),
        before_p50_ms=h.percentile(before, 50),
        before_p99_ms=before_p99,
        during_p50_ms=h.percentile(during, 50),
        during_p99_ms=during_p99,
        p99_ratio=h.ratio(during_p99, before_p99),
        before_acks=len(before),
        during_acks=len(during),
        acked=fill_records + len(load.acked),
        lost=len(lost),
        failed=load.failed,
        error=error,
    )


def move_line(run: MoveRun) -> str:
    """One run as a progress line."""
    if run.error:
        return f"failed: {run.error}"
    return (
        f"{run.reassign_s:.2f} s for {run.moved_mib:.1f} MiB ({run.mib_per_s:.1f} MiB/s),"
        f" p99 {run.before_p99_ms:.1f} -> {run.during_p99_ms:.1f} ms,"
        f" {run.acked:,} acked, {run.lost} lost, {run.failed} failed"
    )


def move_table(runs: Sequence[MoveRun]) -> str:
    def spread(name: str, spec: str) -> str:
        return h.Spread.of(getattr(run, name) for run in runs if not run.error).format(spec)

    head = (
        "fill MiB",
        "reassign s",
        "MiB moved",
        "MiB/s",
        "p50 before ms",
        "p99 before",
        "p50 during",
        "p99 during",
        "p99 during/before",
        "acks before",
        "acks during",
        "lost",
        "failed",
    )
    row = (
        spread("fill_mib", ",.0f"),
        spread("reassign_s", ",.2f"),
        spread("moved_mib", ",.1f"),
        spread("mib_per_s", ",.1f"),
        spread("before_p50_ms", ",.2f"),
        spread("before_p99_ms", ",.1f"),
        spread("during_p50_ms", ",.2f"),
        spread("during_p99_ms", ",.1f"),
        spread("p99_ratio", ",.1f"),
        spread("before_acks", ",.0f"),
        spread("during_acks", ",.0f"),
        sum(run.lost for run in runs),
        sum(run.failed for run in runs),
    )
    notes = (
        f"(1, 2, 3) -> {TARGET}, min.insync.replicas 2; acks=all 100-byte records at a fixed rate;",
        "lost: acknowledged records missing or different on a new replica (all runs);",
        "failed: load sends failed after their retries (all runs).",
    )
    return h.table(head, [row], notes)


# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "admin_bench",
        "Controller admin paths: CreatePartitions to first ack; reassignment under load.",
        "runs of each part (part 1: 5, --quick 3; part 2: 3, --quick 2)",
    )
    p.add_argument("--fill-mib", type=float, help="MiB in the moved partition (100; --quick 20)")
    p.add_argument("--window", type=float, help="load seconds before the reassignment (5; 3)")
    p.add_argument("--rate", type=float, help="load sends per second in part 2 (200)")
    p.add_argument(
        "--retry-backoff-ms", type=int, default=100, help="part 2 load's retry backoff (100)"
    )
    p.add_argument("--parts", type=h.int_list, default=(1, 2), help="parts to run (1,2)")
    p.add_argument("--no-wire", action="store_true", help="part 1 in-process only")
    args = h.fill(
        p.parse_args(argv),
        fill_mib=(100.0, 20.0, 1.0),
        window=(5.0, 3.0, 1.0),
        rate=(200.0, 200.0, 200.0),
    )
    if args.runs is None:
        args.move_runs = 1 if args.smoke else 2 if args.quick else 3
        h.fill(args, runs=(5, 3, 1))
    else:
        args.move_runs = args.runs
    args.paths = ("in-process",) if args.no_wire else ("in-process", "wire")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    h.header(
        "Brokers in one process on the embedded ZooKeeper, default broker settings, tracing off;"
        f" parts {','.join(map(str, args.parts))}; part 1: {args.runs} run(s),"
        f" part 2: {args.move_runs} run(s) of {args.fill_mib:g} MiB",
        "command: benchmarks/admin_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
    )
    results: dict[str, Any] = {}
    errors = 0
    with h.traced(False):
        if 1 in args.parts:
            print("Part 1: CreatePartitions to the first acknowledged produce (3 brokers)")
            grows = run_grows(args)
            print(grow_table(grows), flush=True)
            results["add_partitions"] = grows
            errors += sum(g.errors for g in grows)
        if 2 in args.parts:
            print("\nPart 2: reassignment of a partition under acks=all load (4 brokers)")
            moves = []
            for k in range(args.move_runs):
                run = move_run(args)
                print(f"  run {k + 1}: {move_line(run)}", flush=True)
                moves.append(run)
            print(move_table(moves), flush=True)
            results["reassignments"] = moves
            errors += sum(1 for run in moves if run.error or run.lost)
    h.finish(args, started, results)
    if errors:
        print(f"{errors} run(s) failed or lost acknowledged records", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
