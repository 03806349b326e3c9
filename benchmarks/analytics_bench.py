"""The event-log analytics (`kafkactor analyze`), and what tracing costs the produce path.

Part 1 measures events per second through the whole analysis (Spark) against the baseline run
in the same process on the same file: one Python thread reading it line by line, ``orjson.loads``
per line and a ``Counter`` by event type (the least any analysis must do); the ratio is Spark's
events/s over the baseline's. Part 2 measures the produce path's records/s with tracing on
against off (the baseline); the cost is 1 - on/off, the goal at most 30%.

The base log: a real topology run for ``--topology-seconds`` with tracing to a file: ``Cluster(3)``
on the embedded ZooKeeper, topic ``events`` (3 partitions, RF 3, min ISR 2), an acks=all and an
acks=1 producer (closed loops of 10-record batches, 4 in flight) and a consumer long-polling every
partition. Each log measured (``--sizes`` events) is the base log's lines copied until the size is
reached exactly; copy k XORs the first four hex digits of every trace and span id with k (traces
stay whole and apart) and shifts ``ts_ms`` by k x (the base log's span + 1 s).

Part 1: the SparkSession start (``--master``) and one warm-up ``analyze`` of the base log are
printed, not tabled; then per size ``analyze(log, tmp, spark=session, plots=True)`` (read, every
table written as Parquet, the report, the PNG plots), checked: as many events as lines, no corrupt
line, the ``event_counts`` table equal to the baseline's counts. ``--skip-analysis`` (the default
of ``--smoke``: the JVM start alone outlasts a smoke run) measures the baseline only.

Part 2: ``produce_bench.run_probe`` (a fresh 3-broker cluster per probe): acks=all, 100-record
batches, 32 in flight, tracing off and on alternated ``--runs`` times, so drift hits both alike.
The exit code is 1 when an analysis counted wrong or a produce request failed.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _harness as h
import orjson
import produce_bench

from kafkactor import tracing
from kafkactor.clients import Producer
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster

TOPIC, PARTITIONS, BATCH, IN_FLIGHT = "events", 3, 10, 4
PROBE_ACKS, PROBE_BATCH, PROBE_IN_FLIGHT = -1, 100, 32
GOAL_MAX_COST = 0.30
MB = 1 << 20
# One match per id field (its first four hex digits) or per ts_ms value, in orjson's rendering.
_REWRITE = re.compile(
    rb'("(?:trace_id|span_id|parent_span_id)":")([0-9a-f]{4})(?=[0-9a-f]{12}")|("ts_ms":)(\d+)'
)


def produce_loop(producer: Producer, stop: threading.Event, acked: Counter[int]) -> None:
    """A closed loop of BATCH-record batches, IN_FLIGHT outstanding, round-robin partitions."""
    slots = threading.Semaphore(IN_FLIGHT)
    values = [b"value-%03d" % i for i in range(BATCH)]

    def done(future: Future[Any]) -> None:
        if future.exception() is None:
            acked[producer.acks] += BATCH
        slots.release()

    for sent in itertools.count():
        if stop.is_set():
            break
        if slots.acquire(timeout=0.1):
            producer.send_batch(TOPIC, values, partition=sent % PARTITIONS).add_done_callback(done)
    for _ in range(IN_FLIGHT):  # every answer in (bounded by the request timeout)
        slots.acquire(timeout=10)


def record_base_log(path: Path, seconds: float) -> str:
    """Run the topology for `seconds` with tracing to `path`; a line describing it."""
    acked: Counter[int] = Counter()
    consumed = 0
    with tracing.configured(path=path), Cluster(3, session_timeout_ms=2000) as cluster:
        config = LogConfig(min_insync_replicas=2)
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=config)
        stop = threading.Event()
        threads = [
            threading.Thread(
                target=produce_loop,
                args=(cluster.producer(acks=acks, timeout_ms=5000), stop, acked),
                daemon=True,
            )
            for acks in (-1, 1)
        ]
        consumer = cluster.consumer(max_wait_ms=200)
        consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                consumed += len(consumer.poll(200))
        finally:
            stop.set()
            for thread in threads:
                thread.join(15)
    return f"acked records by acks {dict(acked)}, {consumed:,} consumed"


def replicate(base: bytes, target: int, out: Path) -> None:
    """Write exactly `target` lines: copies of `base` with ids rewritten and times shifted."""
    lines = base.count(b"\n")
    stamps = [int(m) for m in re.findall(rb'"ts_ms":(\d+)', base)]
    span_ms = max(stamps) - min(stamps) if stamps else 0
    with out.open("wb") as sink:
        for k in range(math.ceil(target / lines)):

            def rewrite(match: re.Match[bytes], k: int = k) -> bytes:
                if match.group(1) is not None:
                    return match.group(1) + b"%04x" % (int(match.group(2), 16) ^ k)
                return match.group(3) + b"%d" % (int(match.group(4)) + k * (span_ms + 1000))

            copy = base if k == 0 else _REWRITE.sub(rewrite, base)
            left = target - k * lines
            if left < lines:  # the last copy, cut short at a line end
                copy = b"\n".join(copy.split(b"\n")[:left]) + b"\n"
            sink.write(copy)


def python_baseline(path: Path) -> tuple[float, Counter[str]]:
    """One thread: orjson.loads per line, counted by event type. (seconds, counts)"""
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    with path.open("rb") as lines:
        for line in lines:
            try:
                counts[orjson.loads(line)["event"]] += 1
            except (orjson.JSONDecodeError, KeyError, TypeError):
                counts["<corrupt>"] += 1
    return time.perf_counter() - started, counts


@dataclass(slots=True)
class SizeResult:
    events: int
    file_mb: float
    baseline_events_per_s: float
    wall_s: float = math.nan  # analyze(), NaN when skipped
    events_per_s: float = math.nan
    ratio: float = math.nan  # Spark events/s / baseline events/s
    check: str = "-"  # "ok", or what the analysis got wrong


def measure_size(spark: Any, base: bytes, size: int, work: Path) -> SizeResult:
    log = work / f"events-{size}.jsonl"
    replicate(base, size, log)
    baseline_s, counts = python_baseline(log)
    result = SizeResult(size, log.stat().st_size / MB, size / baseline_s)
    if spark is not None:
        from kafkactor.analytics import analyze

        out = Path(tempfile.mkdtemp(prefix=f"analysis-{size}-", dir=work))
        started = time.perf_counter()
        analysis = analyze(log, out, spark=spark, plots=True)
        result.wall_s = time.perf_counter() - started
        rows = spark.read.parquet(str(analysis.tables["event_counts"])).collect()
        counted = {row["event"]: row["count"] for row in rows}
        shutil.rmtree(out, ignore_errors=True)
        result.events_per_s = size / result.wall_s
        result.ratio = result.events_per_s / result.baseline_events_per_s
        result.check = "ok"
        if analysis.events != size or analysis.corrupt_lines or counted != dict(counts):
            result.check = (
                f"WRONG: {analysis.events} events, {analysis.corrupt_lines} corrupt, counts"
                f" {'match' if counted == dict(counts) else 'differ'}"
            )
    log.unlink()
    return result


def run_analysis(args: argparse.Namespace, base_path: Path, work: Path) -> list[SizeResult]:
    spark = None
    if not args.skip_analysis:
        from kafkactor.analytics import analyze, spark_session

        started = time.perf_counter()
        spark = spark_session(args.master)
        print(f"SparkSession start ({args.master}): {time.perf_counter() - started:.2f} s")
        started = time.perf_counter()
        analyze(base_path, Path(tempfile.mkdtemp(prefix="warmup-", dir=work)), spark=spark)
        print(f"warm-up analyze of the base log: {time.perf_counter() - started:.2f} s", flush=True)
    try:
        base = base_path.read_bytes()
        results = [measure_size(spark, base, size, work) for size in args.sizes]
    finally:
        if spark is not None:
            spark.stop()
    head = ["events", "file MB", "analyze s", "events/s", "baseline ev/s", "ratio", "check"]
    rows = [
        [f"{r.events:,}", f"{r.file_mb:.1f}", h.num(r.wall_s, ".2f"), h.num(r.events_per_s),
         f"{r.baseline_events_per_s:,.0f}", h.num(r.ratio, ".2f"), r.check]
        for r in results
    ]  # fmt: skip
    note = "analyze s: read, tables to Parquet, report, PNGs; baseline: one Python thread,"
    note += " orjson.loads per line + Counter; ratio = Spark events/s / baseline events/s"
    print(h.table(head, rows, [note]))
    return results


def run_tracing_cost(args: argparse.Namespace) -> dict[str, Any]:
    """Off, on, off, on, ... probes: the throughput with tracing on against off."""
    print(
        f"\n== Tracing cost: acks=all, {PROBE_BATCH}-record batches, in-flight {PROBE_IN_FLIGHT},"
        f" {args.probe_warmup:g} s warm-up + {args.probe_duration:g} s per probe, x {args.runs}"
    )
    probes = []
    for trace_on in [False, True] * args.runs:
        probe = produce_bench.run_probe(
            PROBE_ACKS,
            PROBE_BATCH,
            PROBE_IN_FLIGHT,
            trace_on=trace_on,
            warmup_s=args.probe_warmup,
            duration_s=args.probe_duration,
        )
        probes.append(probe)
        print(" ", h.pairs(produce_bench.PROBE_HEAD, produce_bench.probe_cells(probe)), flush=True)
    off = h.Spread.of(p.records_per_s for p in probes if not p.tracing)
    on = h.Spread.of(p.records_per_s for p in probes if p.tracing)
    cost = 1 - h.ratio(on.median, off.median)
    passed = cost <= GOAL_MAX_COST
    print(h.table(["tracing", "records/s"], [["off", off.format()], ["on", on.format()]]))
    print(
        f"[{'PASS' if passed else 'FAIL'}] goal: tracing costs at most {GOAL_MAX_COST:.0%} of the"
        f" produce throughput: on/off = {1 - cost:.2f}, it costs {cost:.1%}"
    )
    errors = sum(p.errors for p in probes)
    return {"probes": probes, "off": off, "on": on, "cost": cost, "errors": errors}


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    p = h.parser(
        "analytics_bench",
        "kafkactor analyze against plain Python; tracing's cost.",
        "off/on tracing probe pairs (2)",
    )
    p.add_argument("--sizes", type=h.int_list, help="log sizes in events (1e5,1e6; --quick 1e5)")
    p.add_argument("--master", default="local[2]", help="Spark master (local[2])")
    p.add_argument("--topology-seconds", type=float, help="seconds of the base log's run (3)")
    p.add_argument("--probe-duration", type=float, help="seconds per tracing probe (3)")
    p.add_argument("--probe-warmup", type=float, help="warm-up seconds per probe (0.5)")
    p.add_argument("--skip-tracing", action="store_true", help="part 1 only")
    p.add_argument("--skip-analysis", action="store_true", default=None, help="no Spark")
    p.add_argument("--dir", type=Path, help="where the logs go (removed at the end)")
    args = h.fill(
        p.parse_args(argv),
        sizes=((100_000, 1_000_000), (100_000,), (2_000,)),
        topology_seconds=(3.0, 2.0, 0.5),
        probe_duration=(3.0, 1.5, 0.3),
        probe_warmup=(0.5, 0.5, 0.1),
        runs=(2, 2, 1),
        skip_analysis=(False, False, True),
    )
    h.header(f"sizes {', '.join(f'{s:,}' for s in args.sizes)}; master {args.master}")
    work = Path(tempfile.mkdtemp(prefix="kafkactor-analytics-bench-", dir=args.dir))
    results: dict[str, Any] = {}
    try:
        base_path = work / "base.jsonl"
        ran = record_base_log(base_path, args.topology_seconds)
        lines = base_path.read_bytes().count(b"\n")
        print(f"base log: {lines:,} events from {args.topology_seconds:g} s of 3 brokers; {ran}")
        if not args.skip_tracing:  # before Spark starts: no JVM beside the probes
            results["tracing_cost"] = run_tracing_cost(args)
        print("\n== Analysis: events/s through kafkactor.analytics.analyze", flush=True)
        results["analysis"] = run_analysis(args, base_path, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    h.finish(args, started, results)
    wrong = [r for r in results["analysis"] if r.check not in ("ok", "-")]
    if wrong or results.get("tracing_cost", {}).get("errors"):
        print("an analysis counted wrong or a produce request failed", file=sys.stderr)
        for probe in results.get("tracing_cost", {}).get("probes", []):
            if probe.errors:  # what failed, for whoever reads the exit
                first = probe.first_error or "none failed: unanswered after the drain"
                print(f"  {probe.errors} errors, the first: {first}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
