"""How kafkactor scales with partitions, and how fast ``kafkactor serve`` starts.

**Scale.** For each size (``--sizes``, total partitions, default 100, 1,000, 3,000 and
10,000) a fresh interpreter (``_scale_size.py``: threads, memory and CPU never carry over)
starts ``Cluster(3)`` on the embedded ZooKeeper, tracing off, and creates the partitions at
RF 3, ``--topic-partitions`` per topic (1,000: 10,000 partitions are 10 topics). Measured per
size (``_scale_size.py`` has the details):

- creation: from the first ``create_topic`` call until every partition has a leader in
  ZooKeeper and every replica's actor answers naming it (the leader's saying it leads), in
  total and per partition, and as a multiple of the 1,000-partition row (linear: 10x);
- threads (``threading.active_count()``; per broker: / 3), resident memory (VmRSS), and the
  idle CPU (``time.process_time()`` over ``--idle-s`` s of nothing, % of one core);
- acks=all produce latency, p50 / p99 of ``--produces`` sequential single-record sends through
  the in-process producer, spread over the partitions; p99 over the baseline's p99.

The baseline, in the same run: the same child with ``--baseline`` (10) partitions. A size
that fails or passes ``--deadline-s`` is a row that says so (the child is killed with its
process group), never a hang. Each size runs ``--runs`` times: median (min-max).

**Runtimes.** ``--runtime threads|dispatcher|both``: each child gets
``KAFKACTOR_ACTOR_RUNTIME`` set to it, and reports the runtime its brokers run on (a build
without the dispatcher runtime runs threads whatever the variable says: its dispatcher rows
are skipped, saying so). With threads every partition replica has a thread of its own, so
sizes above ``THREADS_CAP`` are skipped for it unless ``--sizes`` names them.

**Start-up.** ``kafkactor serve --brokers N`` (``--startup-brokers``, 1 and 3) from spawn to
its ``bootstrap.servers=`` line ("ready") and to a new confluent-kafka producer's first
acknowledged record (acks=all, an auto-created topic of RF N): median (min-max) of
``--startup-runs`` spawns (``_serve_startup.py``).

The issue's goals are printed beside the figures as met / not met. Exit code 1 when the
baseline or a start-up run failed (nothing to compare with); a size that fails is a finding,
reported in its row.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _harness as h
import _serve_startup

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BROKERS = 3
SIZES = (100, 1_000, 3_000, 10_000)
THREADS_CAP = 1_000  # threads: larger sizes only when --sizes names them
LINEAR_AT = 1_000  # creation times are compared with this size's
KILL_GRACE_S = 10.0
MIB = 1024

GOAL_CREATE_MS = 1.0  # per partition, at 10,000
GOAL_GROWTH = 12.0  # creation of 10,000 over 1,000
GOAL_THREADS_PER_BROKER = 36  # "a few dozen"
GOAL_RSS_MIB = 1024.0
GOAL_IDLE_PCT = 5.0
GOAL_P99_RATIO = 1.5
GOAL_SERVE_S = 0.3  # kafkactor serve --brokers 3, spawn to first ack
GOAL_AT = 10_000


@dataclass(frozen=True, slots=True)
class SizeRun:
    """One child's measurements (`result`: what it printed; empty when it printed none)."""

    runtime: str
    partitions: int
    status: str  # "ok", or why not
    result: dict[str, Any]
    stop_s: float

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def get(self, *path: str) -> float:
        value: Any = self.result
        for key in path:
            value = value.get(key, math.nan) if isinstance(value, dict) else math.nan
        return float(value) if isinstance(value, int | float) else math.nan


def child_env(runtime: str) -> dict[str, str]:
    """This environment, the runtime selected, this tree first on the path."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "KAFKACTOR_ACTOR_RUNTIME": runtime, "PYTHONPATH": path}


def dispatcher_available() -> bool:
    """Whether this build has the dispatcher runtime (the broker setting `actor.runtime`)."""
    from kafkactor.actors.broker import BrokerConfig

    return "runtime" in {f.name for f in dataclasses.fields(BrokerConfig)}


def parse_lines(stdout: str) -> tuple[dict[str, Any], dict[str, Any], float]:
    """The child's last progress, its result ({} if none) and its stop time (NaN if none)."""
    progress: dict[str, Any] = {}
    result: dict[str, Any] = {}
    stop_s = math.nan
    for line in stdout.splitlines():
        kind, _, body = line.partition(" ")
        with contextlib.suppress(json.JSONDecodeError):
            if kind == "progress":
                progress = json.loads(body)
            elif kind == "result":
                result = json.loads(body)
            elif kind == "stopped":
                stop_s = float(json.loads(body)["stop_s"])
    return progress, result, stop_s


def run_size(runtime: str, partitions: int, args: argparse.Namespace, root: Path) -> SizeRun:
    """One size in a fresh interpreter, killed with its process group past its deadline."""
    data_dir = Path(tempfile.mkdtemp(prefix=f"{runtime}-{partitions}-", dir=root))
    command = [
        sys.executable, str(HERE / "_scale_size.py"), "--partitions", str(partitions),
        "--topic-partitions", str(args.topic_partitions), "--produces", str(args.produces),
        "--idle-s", str(args.idle_s), "--deadline-s", str(args.deadline_s),
        "--data-dir", str(data_dir),
    ]  # fmt: skip
    wait_s = args.deadline_s + args.idle_s + 120  # its own deadline covers the creation only
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,  # held open while we live: the child exits when it closes
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(runtime),
        start_new_session=True,
    )
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(target=lambda: out.extend(process.stdout or ()), daemon=True),
        threading.Thread(target=lambda: err.extend(process.stderr or ()), daemon=True),
    ]
    for reader in readers:
        reader.start()
    killed = False
    try:
        process.wait(wait_s)
    except subprocess.TimeoutExpired:
        killed = True
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever it left running
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdin is not None:
            process.stdin.close()
        for reader in readers:
            reader.join(KILL_GRACE_S)
        shutil.rmtree(data_dir, ignore_errors=True)
    stdout, stderr = "".join(out), "".join(err)
    progress, result, stop_s = parse_lines(stdout)
    if result and result.get("error"):
        status = f"failed: {result['error']}"
    elif result:
        status = "ok"
    elif killed:
        status = f"killed after {wait_s:g} s in {progress.get('stage', 'start-up')}"
    else:
        last = [line for line in stderr.splitlines() if line.strip()][-1:]
        status = f"exit {process.returncode}: {last[0] if last else 'no result'}"
    return SizeRun(runtime, partitions, status, result or progress, stop_s)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

SIZE_HEAD = [
    "runtime", "partitions", "create s", "ms/partition", "x 1000 row", "threads", "per broker",
    "RSS MiB", "idle CPU %", "p50 ms", "p99 ms", "p99/base", "status",
]  # fmt: skip


def spread(values: Iterable[float], spec: str) -> str:
    finite = [v for v in values if not math.isnan(v)]
    return h.Spread.of(finite).format(spec) if finite else "-"


def median(values: Iterable[float]) -> float:
    return h.Spread.of(v for v in values if not math.isnan(v)).median


def size_rows(
    runs: dict[tuple[str, int], list[SizeRun]], baseline: int
) -> tuple[list[list[object]], list[dict[str, Any]]]:
    rows: list[list[object]] = []
    summary: list[dict[str, Any]] = []
    for (runtime, partitions), group in runs.items():
        ok = [r for r in group if r.ok]
        base = [r for r in runs.get((runtime, baseline), []) if r.ok]
        linear = [r for r in runs.get((runtime, LINEAR_AT), []) if r.ok]
        base_p99 = median(r.get("produce", "p99_ms") for r in base)
        linear_s = median(r.get("create_s") for r in linear)
        statuses = sorted({r.status for r in group})
        status = "ok" if statuses == ["ok"] else "; ".join(statuses)
        if ok and len(ok) < len(group):
            status = f"{len(ok)} of {len(group)} ok: {status}"
        ran = {r.result.get("runtime", runtime) for r in ok}
        name = runtime if ran <= {runtime} else f"{runtime} (ran {', '.join(sorted(ran))})"
        cells = {
            "create_s": [r.get("create_s") for r in ok],
            "ms_per_partition": [1000 * r.get("create_s") / partitions for r in ok],
            "x_linear": [h.ratio(r.get("create_s"), linear_s) for r in ok],
            "threads": [r.get("threads") for r in ok],
            "threads_per_broker": [r.get("threads") / BROKERS for r in ok],
            "rss_mib": [r.get("rss_kib") / MIB for r in ok],
            "idle_cpu_pct": [r.get("idle_cpu_pct") for r in ok],
            "p50_ms": [r.get("produce", "p50_ms") for r in ok],
            "p99_ms": [r.get("produce", "p99_ms") for r in ok],
            "p99_ratio": [h.ratio(r.get("produce", "p99_ms"), base_p99) for r in ok],
        }
        specs = [",.2f", ".3f", ".2f", ",.0f", ",.0f", ",.0f", ".1f", ".1f", ".1f", ".2f"]
        rows.append([name, f"{partitions:,}", *(spread(v, s) for v, s in
                     zip(cells.values(), specs, strict=True)), status])  # fmt: skip
        summary.append({
            "runtime": runtime, "partitions": partitions, "status": status,
            **{key: median(values) for key, values in cells.items()},
        })  # fmt: skip
    return rows, summary


def footnoted(rows: Sequence[list[object]]) -> tuple[list[list[object]], list[str]]:
    """Rows with each status other than "ok" moved to a note under the table ([1], ...)."""
    out: list[list[object]] = []
    notes: list[str] = []
    for row in rows:
        status = str(row[-1])
        if status == "ok":
            out.append(list(row))
            continue
        notes.append(f"[{len(notes) + 1}] {row[0]}, {row[1]} partitions: {status}")
        word = status.split(":", 1)[0].split(" ", 1)[0]
        out.append([*row[:-1], f"{word} [{len(notes)}]"])
    return out, notes


def skipped_rows(skipped: Sequence[tuple[str, int, str]]) -> list[list[object]]:
    return [[runtime, f"{n:,}", *["-"] * (len(SIZE_HEAD) - 3), why] for runtime, n, why in skipped]


STARTUP_HEAD = ["kafkactor serve", "runtime", "spawn->ready s", "spawn->first ack s",
                "ready->ack s", "SIGTERM->exit s", "errors"]  # fmt: skip


def startup_rows(startups: Sequence[_serve_startup.Startup]) -> list[list[object]]:
    groups: dict[tuple[int, str], list[_serve_startup.Startup]] = {}
    for s in startups:
        groups.setdefault((s.brokers, s.runtime), []).append(s)
    return [
        [f"--brokers {brokers}", runtime, spread((s.ready_s for s in group), ".3f"),
         spread((s.first_ack_s for s in group), ".3f"),
         spread((s.first_ack_s - s.ready_s for s in group), ".3f"),
         spread((s.exit_s for s in group), ".2f"), sum(1 for s in group if s.error)]
        for (brokers, runtime), group in sorted(groups.items())
    ]  # fmt: skip


def verdict(value: float, goal: float) -> str:
    return "not measured" if math.isnan(value) else "met" if value <= goal else "not met"


def goal_rows(
    summary: Sequence[dict[str, Any]],
    startups: Sequence[_serve_startup.Startup],
    baseline: int,
) -> list[list[object]]:
    """Each goal against the 10,000 row, or else the largest size that ran (said so)."""
    rows: list[list[object]] = []
    for runtime in dict.fromkeys(s["runtime"] for s in summary):
        ran = [
            s for s in summary
            if s["runtime"] == runtime and s["partitions"] != baseline and s["status"] == "ok"
        ]  # fmt: skip
        row = max(ran, key=lambda s: s["partitions"], default={})
        size = int(row.get("partitions", GOAL_AT))
        short = "" if size == GOAL_AT else f" ({GOAL_AT:,} not run)"
        for label, key, goal, spec in (
            (f"creation <= {GOAL_CREATE_MS:g} ms/partition", "ms_per_partition",
             GOAL_CREATE_MS, ".3f"),
            (f"creation <= {GOAL_GROWTH:g}x the {LINEAR_AT:,} row", "x_linear", GOAL_GROWTH, ".2f"),
            (f"threads per broker <= {GOAL_THREADS_PER_BROKER}", "threads_per_broker",
             GOAL_THREADS_PER_BROKER, ",.0f"),
            (f"RSS <= {GOAL_RSS_MIB:,.0f} MiB", "rss_mib", GOAL_RSS_MIB, ",.0f"),
            (f"idle CPU <= {GOAL_IDLE_PCT:g}% of a core", "idle_cpu_pct", GOAL_IDLE_PCT, ".1f"),
            (f"acks=all p99 <= {GOAL_P99_RATIO:g}x the baseline", "p99_ratio",
             GOAL_P99_RATIO, ".2f"),
        ):  # fmt: skip
            value = float(row.get(key, math.nan))
            if key == "x_linear" and size <= LINEAR_AT:
                value = math.nan  # growth beyond the 1,000 row: nothing larger ran
            met = verdict(value, goal)
            rows.append([f"{runtime}, {size:,} partitions: {label}", h.num(value, spec),
                         met if met == "not measured" else met + short])  # fmt: skip
    for runtime in dict.fromkeys(s.runtime for s in startups):
        acked = median(s.first_ack_s for s in startups if s.brokers == 3 and s.runtime == runtime)
        rows.append([f"{runtime}: serve --brokers 3, spawn->first ack <= {GOAL_SERVE_S:g} s",
                     h.num(acked, ".3f"), verdict(acked, GOAL_SERVE_S)])  # fmt: skip
    return rows


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "scale_bench",
        "Partitions 100 -> 10,000 at RF 3 on 3 brokers in one process (creation, threads,"
        " RSS, idle CPU, acks=all p50/p99), and kafkactor serve's spawn to first ack.",
        "repeats of each size (1)",
    )
    p.add_argument("--sizes", type=h.int_list, help="total partitions (100,1000,3000,10000)")
    p.add_argument(
        "--runtime",
        choices=("threads", "dispatcher", "both"),
        help="actor runtime(s): KAFKACTOR_ACTOR_RUNTIME of each child (both, when built)",
    )
    p.add_argument("--baseline", type=h.positive_int, default=10, help="baseline partitions (10)")
    p.add_argument(
        "--topic-partitions", type=h.positive_int, default=1000, help="per topic (1,000)"
    )
    p.add_argument("--produces", type=h.positive_int, help="acks=all sends per size (300)")
    p.add_argument("--idle-s", type=float, help="idle CPU window, s (5)")
    p.add_argument("--deadline-s", type=float, help="creation deadline per size, s (600)")
    p.add_argument("--startup-runs", type=h.positive_int, help="spawns of serve per case (5)")
    p.add_argument("--startup-brokers", type=h.int_list, help="serve's --brokers (1,3)")
    part = p.add_mutually_exclusive_group()
    part.add_argument("--startup-only", action="store_true", help="only kafkactor serve")
    part.add_argument("--no-startup", action="store_true", help="no kafkactor serve")
    args = p.parse_args(argv)
    args.sizes_given = args.sizes is not None
    return h.fill(
        args,
        sizes=(SIZES, (100, 1_000, 3_000), (10,)),  # smoke: the baseline alone
        produces=(300, 200, 20),
        idle_s=(5.0, 3.0, 0.5),
        deadline_s=(600.0, 300.0, 60.0),
        startup_runs=(5, 3, 1),
        startup_brokers=((1, 3), (1, 3), (1,)),
        runs=(1, 1, 1),
    )


def runtimes_of(args: argparse.Namespace, available: bool) -> tuple[list[str], list[str]]:
    """The runtimes to run, and notes on those left out."""
    if args.runtime is None:
        wanted = ["threads", "dispatcher"] if available and not args.smoke else []
        wanted = wanted or ["dispatcher" if available else "threads"]
    else:
        wanted = ["threads", "dispatcher"] if args.runtime == "both" else [args.runtime]
    if available or "dispatcher" not in wanted:
        return wanted, []
    note = "dispatcher: not in this build (no actor.runtime broker setting): skipped"
    return [r for r in wanted if r != "dispatcher"], [note]


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    runtimes, notes = runtimes_of(args, dispatcher_available())
    h.header(
        f"Cluster({BROKERS}) in one process, embedded ZooKeeper, RF 3, tracing off; a fresh"
        f" interpreter per size; runtimes {', '.join(runtimes) or 'none'}; {args.runs} run(s)",
        f"sizes {', '.join(f'{n:,}' for n in args.sizes)} partitions ({args.topic_partitions:,}"
        f" per topic), baseline {args.baseline}; {args.produces} acks=all sends; idle"
        f" {args.idle_s:g} s; deadline {args.deadline_s:g} s per size",
        f"kafkactor serve --brokers {','.join(map(str, args.startup_brokers))}:"
        f" {args.startup_runs} spawn(s) each",
        *notes,
    )
    runs: dict[tuple[str, int], list[SizeRun]] = {}
    skipped: list[tuple[str, int, str]] = []
    startups: list[_serve_startup.Startup] = []
    root = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    try:
        for runtime in runtimes if not args.startup_only else []:
            for partitions in dict.fromkeys([args.baseline, *args.sizes]):
                if runtime == "threads" and partitions > THREADS_CAP and not args.sizes_given:
                    why = f"skipped: threads above {THREADS_CAP:,} only if --sizes names it"
                    skipped.append((runtime, partitions, why))
                    continue
                for _ in range(args.runs):
                    run = run_size(runtime, partitions, args, root)
                    print(" ", h.pairs(["runtime", "partitions", "status", "create_s"],
                          [runtime, partitions, run.status, f"{run.get('create_s'):.2f}"]),
                          flush=True)  # fmt: skip
                    runs.setdefault((runtime, partitions), []).append(run)
        for runtime in runtimes if not args.no_startup else []:
            for brokers in args.startup_brokers:
                for _ in range(args.startup_runs):
                    startup = _serve_startup.spawn_to_first_ack(
                        brokers, runtime, child_env(runtime), args.deadline_s
                    )
                    print(" ", startup, flush=True)
                    startups.append(startup)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows, summary = size_rows(runs, args.baseline)
    if rows or skipped:
        print(f"\n== Partitions at RF 3, {BROKERS} brokers in one process: median (min-max) of"
              f" {args.runs} run(s)")  # fmt: skip
        shown, said = footnoted([*rows, *skipped_rows(skipped)])
        print(h.table(SIZE_HEAD, shown, [
            f"create: first create_topic call -> every leader in ZooKeeper and every replica's"
            f" actor acting; x 1000 row: create s over the {LINEAR_AT:,} row's (linear: 10x at"
            f" 10,000); p99/base: over the {args.baseline}-partition baseline's p99",
            *said,
        ]))  # fmt: skip
    if startups:
        print(f"\n== kafkactor serve: median (min-max) of {args.startup_runs} spawn(s)")
        print(h.table(STARTUP_HEAD, startup_rows(startups), [
            "ready: the bootstrap.servers= line; first ack: a new confluent-kafka producer,"
            " acks=all, one record to an auto-created topic of RF = --brokers",
            *(f"{s.runtime} --brokers {s.brokers}: {s.error}" for s in startups if s.error),
        ]))  # fmt: skip
    goals = goal_rows(summary, startups, args.baseline)
    print("\n== The issue's goals")
    print(h.table(["goal", "measured", ""], goals))
    h.finish(args, started, {
        "sizes": [dataclasses.asdict(r) for group in runs.values() for r in group],
        "skipped": [{"runtime": r, "partitions": n, "why": w} for r, n, w in skipped],
        "summary": summary,
        "startups": startups,
        "goals": [dict(zip(["goal", "measured", "met"], g, strict=True)) for g in goals],
    })  # fmt: skip
    failed_base = [r for rt in runtimes for r in runs.get((rt, args.baseline), []) if not r.ok]
    failed_startups = [s for s in startups if s.error]
    return 1 if failed_base or failed_startups else 0


if __name__ == "__main__":
    sys.exit(main())
