"""Benchmark the event-log analytics (`kafkactor analyze`) and what tracing costs the produce path.

Run it as ``.venv/bin/python benchmarks/analytics_bench.py`` (``--help`` lists the options;
``--quick`` is a ~1.5 minute version: 1e5 events only, short probes). Two parts, one run.

Part 1: events per second through the whole analysis
----------------------------------------------------
The base log: a real topology run once, for ``--topology-seconds`` (4; ``--quick`` 2), with
tracing to a file: ``Cluster(3)`` on the embedded ZooKeeper, topic ``events`` (3 partitions,
RF 3, ``min_insync_replicas=2``), an acks=all and an acks=1 producer (each a closed loop of
10-record batches, 4 in flight, round-robin over the partitions) and a consumer long-polling
all partitions on the main thread.

The logs measured: for each size in ``--sizes`` (1e5 and 1e6; ``--quick`` 1e5), the base log's
lines copied until the size is reached exactly (the last copy cut short). Copy k rewrites every
``trace_id``, ``span_id`` and ``parent_span_id`` (16 hex digits; ``""`` stays ``""``) by XORing
its first four digits with k, a bijection per copy, so each copy's traces stay whole and apart
from the other copies'; and shifts every ``ts_ms`` by k x (the base log's time span + 1 s), so
the copies follow each other in time and never share a one-second window.

Measured: the SparkSession start (``kafkactor.analytics.spark_session(--master)``, default
``local[2]``) on its own; one warm-up ``analyze`` of the base log (class loading, first code
generation: printed, not in the table); then per size one ``analyze(log, <temp dir>,
spark=session, plots=True)``: wall time (reading, every table written as Parquet, report.md,
the PNG plots) and events/s = events / wall time. The analysis is checked: ``result.events``
must equal the size, ``corrupt_lines`` 0, and the ``event_counts`` table the baseline's counts.

The baseline, in the same run over the same file: one Python thread reading it line by line,
``orjson.loads`` per line and a ``Counter`` by event type (no tables, no percentiles, no
plots: the least any analysis must do). The ratio printed is Spark's events/s over the
baseline's. With two cores, Spark can win only on the wide work (grouping, sorting,
percentiles), not on the parse alone.

Part 2: what tracing costs the produce path
-------------------------------------------
``benchmarks/produce_bench.py``'s ``run_probe`` (a fresh 3-broker cluster per probe, 6
partitions RF 3): acks=all, 100-record batches, 32 requests in flight, ``--probe-duration``
seconds (3; ``--quick`` 1.5) after a warm-up, tracing off (``enabled=False``) and on (every hop
and state change written as a JSON line to a temporary file), alternated off, on, off, on
(``--rounds`` pairs, 2) so drift on the machine hits both alike. Throughput: records/s
completed in the window, averaged per mode. Cost = 1 - on / off. Goal: tracing costs at most
30% of the throughput; ``[PASS]`` / ``[FAIL]`` is printed.

Results: the tables, the verdict, and with ``--json [PATH]`` every number (default
``benchmarks/results/analytics_bench.json``; ``benchmarks/results/`` is gitignored). The exit
code is 0 whether the goal is met or not (this is a measurement), 1 when an analysis counted
wrong or a produce request failed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from kafkactor import tracing
from kafkactor.clients import Producer
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from produce_bench import (
    ROW_HEADER,
    ProbeResult,
    TraceSink,
    format_row,
    run_probe,
)
from produce_bench import parse_args as produce_args

TOPIC = "events"
PARTITIONS = 3
BATCH = 10
IN_FLIGHT = 4
DEFAULT_SIZES = (100_000, 1_000_000)
QUICK_SIZES = (100_000,)
DEFAULT_TOPOLOGY_S = 3.0
QUICK_TOPOLOGY_S = 2.0
DEFAULT_MASTER = "local[2]"

PROBE_ACKS = -1
PROBE_BATCH = 100
PROBE_IN_FLIGHT = 32
DEFAULT_PROBE_S = 3.0
QUICK_PROBE_S = 1.5
DEFAULT_ROUNDS = 2
GOAL_MAX_COST = 0.30  # tracing may cost at most this share of the throughput

DEFAULT_JSON = Path(__file__).resolve().parent / "results" / "analytics_bench.json"
MB = 1 << 20

# One match per id field (its first four hex digits) or per ts_ms value, in orjson's compact
# rendering; the look-ahead insists on a whole 16-digit id.
_REWRITE = re.compile(
    rb'("(?:trace_id|span_id|parent_span_id)":")([0-9a-f]{4})(?=[0-9a-f]{12}")|("ts_ms":)(\d+)'
)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class BaseLog:
    lines: int
    bytes: int
    span_ms: int
    seconds: float
    acked: dict[int, int]  # records acknowledged per acks setting
    consumed: int


@dataclass(slots=True)
class SizeResult:
    events: int
    file_mb: float
    build_s: float  # writing the replicated log
    wall_s: float  # analyze()
    events_per_s: float
    analyzed_events: int
    corrupt_lines: int
    tables: int
    plots: int
    baseline_s: float
    baseline_events_per_s: float
    ratio: float  # Spark events/s / baseline events/s
    counts_match: bool  # event_counts table == the baseline's counts

    @property
    def correct(self) -> bool:
        return self.analyzed_events == self.events and self.corrupt_lines == 0 and self.counts_match


# --------------------------------------------------------------------------------------------
# The base log: a real topology
# --------------------------------------------------------------------------------------------


def _produce_loop(producer: Producer, stop: threading.Event, acked: Counter[int]) -> None:
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
        if not slots.acquire(timeout=0.1):
            continue
        producer.send_batch(TOPIC, values, partition=sent % PARTITIONS).add_done_callback(done)
    for _ in range(IN_FLIGHT):  # every answer in (bounded by the request timeout)
        slots.acquire(timeout=10)


def record_base_log(path: Path, seconds: float) -> BaseLog:
    """Run the topology for `seconds` with tracing to `path`; the file is closed after."""
    tracing.configure(path=path)
    acked: Counter[int] = Counter()
    consumed = 0
    started = time.perf_counter()
    try:
        with Cluster(3, session_timeout_ms=2000) as cluster:
            cluster.create_topic(
                TOPIC,
                partitions=PARTITIONS,
                replication_factor=3,
                config=LogConfig(min_insync_replicas=2),
            )
            stop = threading.Event()
            threads = [
                threading.Thread(
                    target=_produce_loop,
                    args=(cluster.producer(acks=acks, timeout_ms=5000), stop, acked),
                    name=f"bench-producer-acks{acks}",
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
    finally:
        tracing.flush()
        tracing.close()
    elapsed = time.perf_counter() - started
    data = path.read_bytes()
    stamps = [int(m) for m in re.findall(rb'"ts_ms":(\d+)', data)]
    return BaseLog(
        lines=data.count(b"\n"),
        bytes=len(data),
        span_ms=max(stamps) - min(stamps) if stamps else 0,
        seconds=elapsed,
        acked=dict(acked),
        consumed=consumed,
    )


def replicate(base: bytes, span_ms: int, target: int, out: Path) -> None:
    """Write exactly `target` lines: copies of `base` with ids rewritten and times shifted."""
    lines = base.count(b"\n")
    if lines == 0:
        raise ValueError("the base log is empty")
    copies = math.ceil(target / lines)
    with out.open("wb") as sink:
        for k in range(copies):
            shift = k * (span_ms + 1000)

            def rewrite(match: re.Match[bytes], k: int = k, shift: int = shift) -> bytes:
                if match.group(1) is not None:
                    return match.group(1) + b"%04x" % (int(match.group(2), 16) ^ k)
                return match.group(3) + b"%d" % (int(match.group(4)) + shift)

            copy = base if k == 0 else _REWRITE.sub(rewrite, base)
            left = target - k * lines
            if left < lines:  # the last copy, cut short at a line end
                cut = 0
                for _ in range(left):
                    cut = copy.index(b"\n", cut) + 1
                copy = copy[:cut]
            sink.write(copy)


# --------------------------------------------------------------------------------------------
# Part 1: the analysis against the in-process baseline
# --------------------------------------------------------------------------------------------


def python_baseline(path: Path) -> tuple[float, Counter[str]]:
    """One thread: orjson.loads per line, counted by event type. (seconds, counts)"""
    counts: Counter[str] = Counter()
    loads = orjson.loads
    started = time.perf_counter()
    with path.open("rb") as lines:
        for line in lines:
            try:
                counts[loads(line)["event"]] += 1
            except (orjson.JSONDecodeError, KeyError, TypeError):
                counts["<corrupt>"] += 1
    return time.perf_counter() - started, counts


def measure_size(spark: Any, base: bytes, base_log: BaseLog, size: int, work: Path) -> SizeResult:
    from kafkactor.analytics import analyze

    log = work / f"events-{size}.jsonl"
    started = time.perf_counter()
    replicate(base, base_log.span_ms, size, log)
    build_s = time.perf_counter() - started
    file_mb = log.stat().st_size / MB
    out = Path(tempfile.mkdtemp(prefix=f"analysis-{size}-", dir=work))
    try:
        started = time.perf_counter()
        result = analyze(log, out, spark=spark, plots=True)
        wall_s = time.perf_counter() - started
        rows = spark.read.parquet(str(result.tables["event_counts"])).collect()
        table = {row["event"]: row["count"] for row in rows}
        tables, plots = len(result.tables), len(result.plots)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    baseline_s, counts = python_baseline(log)
    log.unlink()
    events_per_s = size / wall_s if wall_s > 0 else 0.0
    baseline_rate = size / baseline_s if baseline_s > 0 else 0.0
    return SizeResult(
        events=size,
        file_mb=file_mb,
        build_s=build_s,
        wall_s=wall_s,
        events_per_s=events_per_s,
        analyzed_events=result.events,
        corrupt_lines=result.corrupt_lines,
        tables=tables,
        plots=plots,
        baseline_s=baseline_s,
        baseline_events_per_s=baseline_rate,
        ratio=events_per_s / baseline_rate if baseline_rate else 0.0,
        counts_match=table == dict(counts),
    )


SIZE_HEADER = (
    f"{'events':>10}{'file MB':>9}{'wall s':>8}{'events/s':>11}{'tables':>7}{'plots':>6}"
    f"{'baseline s':>11}{'baseline ev/s':>14}{'ratio':>7}  check"
)


def format_size(r: SizeResult) -> str:
    check = (
        "ok"
        if r.correct
        else f"WRONG: {r.analyzed_events} events, {r.corrupt_lines} corrupt, "
        f"counts {'match' if r.counts_match else 'differ'}"
    )
    return (
        f"{r.events:>10,}{r.file_mb:>9.1f}{r.wall_s:>8.2f}{r.events_per_s:>11,.0f}"
        f"{r.tables:>7}{r.plots:>6}{r.baseline_s:>11.2f}{r.baseline_events_per_s:>14,.0f}"
        f"{r.ratio:>7.2f}  {check}"
    )


def run_analysis(
    args: argparse.Namespace, base_path: Path, base_log: BaseLog, work: Path
) -> dict[str, Any]:
    from kafkactor.analytics import analyze, spark_session

    base = base_path.read_bytes()
    started = time.perf_counter()
    spark = spark_session(args.master)
    spark_start_s = time.perf_counter() - started
    print(f"SparkSession start ({args.master}): {spark_start_s:.2f} s", flush=True)
    results: list[SizeResult] = []
    try:
        warm_out = Path(tempfile.mkdtemp(prefix="analysis-warmup-", dir=work))
        started = time.perf_counter()
        warm = analyze(base_path, warm_out, spark=spark, plots=True)
        warmup_s = time.perf_counter() - started
        shutil.rmtree(warm_out, ignore_errors=True)
        print(
            f"warm-up analyze of the base log ({warm.events:,} events, "
            f"{base_log.bytes / MB:.1f} MB): {warmup_s:.2f} s (not in the table)",
            flush=True,
        )
        print(SIZE_HEADER)
        for size in args.sizes:
            result = measure_size(spark, base, base_log, size, work)
            results.append(result)
            print(format_size(result), flush=True)
    finally:
        spark.stop()
    print(
        "columns: wall s is analyze() with plots on (read, tables to Parquet, report, PNGs); "
        "baseline: one Python thread, orjson.loads per line + Counter by event; ratio = Spark "
        "events/s / baseline events/s"
    )
    return {
        "master": args.master,
        "spark_start_s": spark_start_s,
        "warmup_s": warmup_s,
        "sizes": [{**asdict(r), "correct": r.correct} for r in results],
    }


# --------------------------------------------------------------------------------------------
# Part 2: the cost of tracing
# --------------------------------------------------------------------------------------------


def run_tracing_cost(args: argparse.Namespace, work: Path) -> tuple[bool, dict[str, Any]]:
    """off, on, off, on, ... probes; returns (errors seen, summary)."""
    probe_args = produce_args(
        ["--duration", str(args.probe_duration), "--warmup", str(args.probe_warmup)]
    )
    sink = TraceSink(work)
    probes: list[ProbeResult] = []
    print(
        f"\n== Tracing cost: acks=all, {PROBE_BATCH}-record batches, in-flight "
        f"{PROBE_IN_FLIGHT}, {args.probe_warmup:g} s warm-up + {args.probe_duration:g} s "
        f"window per probe, off/on alternated x {args.rounds}"
    )
    print(ROW_HEADER, flush=True)
    try:
        for trace in [False, True] * args.rounds:
            probe = run_probe(
                PROBE_ACKS,
                PROBE_BATCH,
                PROBE_IN_FLIGHT,
                trace=trace,
                args=probe_args,
                sink=sink,
            )
            probes.append(probe)
            print(format_row(probe), flush=True)
    finally:
        sink.close()
    off = [p.records_per_s for p in probes if not p.tracing]
    on = [p.records_per_s for p in probes if p.tracing]
    off_mean = sum(off) / len(off)
    on_mean = sum(on) / len(on)
    ratio = on_mean / off_mean if off_mean else 0.0
    cost = 1 - ratio
    passed = off_mean > 0 and cost <= GOAL_MAX_COST
    event_bytes = [p.trace_bytes_per_request for p in probes if p.tracing]
    print(
        f"records/s tracing off {', '.join(f'{r:,.0f}' for r in off)} (mean {off_mean:,.0f}); "
        f"on {', '.join(f'{r:,.0f}' for r in on)} (mean {on_mean:,.0f}); on/off = "
        f"{ratio:.2f}; {sum(event_bytes) / len(event_bytes):,.0f} event bytes per request"
    )
    print(
        f"[{'PASS' if passed else 'FAIL'}] goal: tracing costs at most {GOAL_MAX_COST:.0%} of "
        f"the produce throughput (acks=all, {PROBE_BATCH}-record batches, in-flight "
        f"{PROBE_IN_FLIGHT}): it costs {cost:.1%}"
    )
    errors = any(p.errors for p in probes)
    return errors, {
        "probes": [asdict(p) for p in probes],
        "off_records_per_s": off_mean,
        "on_records_per_s": on_mean,
        "on_off_ratio": ratio,
        "cost": cost,
        "goal_max_cost": GOAL_MAX_COST,
        "goal_passed": passed,
    }


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(float(part)) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes are numbers like 1e5, not {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be >= 1, got {text!r}")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "kafkactor analyze: events/s through the whole analysis (Spark) against a plain "
            "Python pass, and the produce throughput with tracing on against off."
        )
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"1e5 events only, {QUICK_PROBE_S:g} s probes, a {QUICK_TOPOLOGY_S:g} s base log",
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        metavar="N[,N...]",
        help="log sizes in events (1e5,1e6; --quick 1e5)",
    )
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (local[2])")
    parser.add_argument(
        "--topology-seconds",
        type=float,
        help=f"seconds of the real run behind the base log ({DEFAULT_TOPOLOGY_S:g}; --quick "
        f"{QUICK_TOPOLOGY_S:g})",
    )
    parser.add_argument(
        "--probe-duration",
        type=float,
        help=f"measured seconds per tracing probe ({DEFAULT_PROBE_S:g}; --quick {QUICK_PROBE_S:g})",
    )
    parser.add_argument(
        "--probe-warmup", type=float, default=0.5, help="warm-up seconds per probe (0.5)"
    )
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="off/on probe pairs (2)")
    parser.add_argument(
        "--skip-tracing", action="store_true", help="part 1 only (no tracing-cost probes)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the logs and analysis output go (removed at the end)",
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
    if args.sizes is None:
        args.sizes = QUICK_SIZES if args.quick else DEFAULT_SIZES
    if args.topology_seconds is None:
        args.topology_seconds = QUICK_TOPOLOGY_S if args.quick else DEFAULT_TOPOLOGY_S
    if args.probe_duration is None:
        args.probe_duration = QUICK_PROBE_S if args.quick else DEFAULT_PROBE_S
    if args.topology_seconds <= 0 or args.probe_duration <= 0 or args.probe_warmup < 0:
        parser.error("--topology-seconds and --probe-duration must be > 0, --probe-warmup >= 0")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Both parts; 0 whether or not the goal is met, 1 on a wrong count or failed requests."""
    started = time.perf_counter()
    args = parse_args(argv)
    print(
        f"Python {platform.python_version()} on {platform.platform()}, {os.cpu_count()} CPUs; "
        f"sizes {', '.join(f'{s:,}' for s in args.sizes)}; master {args.master}",
        flush=True,
    )
    was_enabled = tracing.is_enabled()
    work = Path(tempfile.mkdtemp(prefix="kafkactor-analytics-bench-", dir=args.dir))
    document: dict[str, Any] = {
        "python": sys.version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "parameters": {
            key: (str(value) if isinstance(value, Path) else value)
            for key, value in vars(args).items()
        },
    }
    failed = False
    try:
        base_path = work / "base.jsonl"
        base_log = record_base_log(base_path, args.topology_seconds)
        print(
            f"base log: {base_log.lines:,} events, {base_log.bytes / MB:.1f} MB, spanning "
            f"{base_log.span_ms / 1000:.1f} s, from {base_log.seconds:.1f} s of a 3-broker "
            f"topology (acked records by acks: {base_log.acked}; {base_log.consumed:,} "
            "consumed)",
            flush=True,
        )
        document["base_log"] = asdict(base_log)
        if not args.skip_tracing:  # before Spark starts: no JVM beside the probes
            errors, document["tracing_cost"] = run_tracing_cost(args, work)
            failed |= errors
        print("\n== Analysis: events/s through kafkactor.analytics.analyze", flush=True)
        document["analysis"] = run_analysis(args, base_path, base_log, work)
        failed |= not all(size["correct"] for size in document["analysis"]["sizes"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if was_enabled:
            tracing.enable()
        else:
            tracing.disable()
    wall_s = time.perf_counter() - started
    print(f"\ntotal wall time {wall_s:.1f} s")
    if args.json is not None:
        document["wall_time_s"] = wall_s
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {args.json}")
    if failed:
        print("an analysis counted wrong or a produce request failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
