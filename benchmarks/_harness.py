"""What every benchmark script shares: the command line, run sizes, statistics, tables, JSON
output and the tracing sinks. The scripts import it as ``_harness`` (they run from this folder).

Run sizes: each script has a full run (the default), ``--quick`` (shorter, still meaningful)
and ``--smoke`` (the smallest run that exercises every code path; its figures mean nothing:
the test suite runs it). `fill` picks a script's per-size defaults for the options left unset.

Statistics: `percentile` is `statistics.quantiles` (inclusive method, so it never reaches
beyond the data); on empty input it is NaN, for one value that value. `Spread` is the median
with the min-max range of repeated runs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any

from kafkactor import build_info, tracing

DEFAULT_SEED = 20_240_611
RESULTS = Path(__file__).resolve().parent / "results"  # gitignored


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def parser(name: str, description: str, runs: str | None = None) -> argparse.ArgumentParser:
    """An argument parser with the common options: --quick / --smoke, --seed, --json, and
    --runs when the script repeats something (`runs` says what; left None for `fill`).

    ``--json`` alone writes ``benchmarks/results/<name>.json``; ``--json PATH`` writes PATH.
    """
    parser = argparse.ArgumentParser(prog=f"{name}.py", description=description)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="a shorter run")
    size.add_argument(
        "--smoke", action="store_true", help="the smallest run (checks that it works; no figures)"
    )
    if runs is not None:
        parser.add_argument("--runs", type=positive_int, help=f"{runs} (median, min-max)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument(
        "--json",
        type=Path,
        nargs="?",
        const=RESULTS / f"{name}.json",
        metavar="PATH",
        help=f"also write the results as JSON (default path {RESULTS.name}/{name}.json)",
    )
    return parser


def fill(args: argparse.Namespace, **defaults: tuple[Any, Any, Any]) -> argparse.Namespace:
    """Set each option still None to its (full, quick, smoke) default for the run size."""
    pick = 2 if args.smoke else 1 if args.quick else 0
    for name, values in defaults.items():
        if getattr(args, name, None) is None:
            setattr(args, name, values[pick])
    return args


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (``1e5`` allowed)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a whole number >= 1: {text!r}")
    return int(value)


def int_list(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated whole numbers >= 1, such as ``1e3,1e4,250000``."""
    values = tuple(positive_int(part.strip()) for part in text.split(",") if part.strip())
    if not values:
        raise argparse.ArgumentTypeError(f"an empty list: {text!r}")
    return values


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def percentile(values: Iterable[float], pct: int) -> float:
    """The `pct`-th percentile (1..99) of `values`: NaN when empty, the value when one."""
    data = sorted(values)
    if not 1 <= pct <= 99:
        raise ValueError(f"percentile {pct} is not in 1..99")
    if not data:
        return math.nan
    if len(data) == 1:
        return float(data[0])
    return statistics.quantiles(data, n=100, method="inclusive")[pct - 1]


@dataclass(frozen=True, slots=True)
class Spread:
    """Repeated measurements: the median, with the lowest and highest run."""

    median: float
    low: float
    high: float
    runs: tuple[float, ...]

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread:
        runs = tuple(values)
        if not runs:
            return cls(math.nan, math.nan, math.nan, ())
        return cls(statistics.median(runs), min(runs), max(runs), runs)

    def format(self, spec: str = ",.0f") -> str:
        """``median (low-high)``; just the median for a single run."""
        if len(self.runs) <= 1:
            return num(self.median, spec)
        return f"{self.median:{spec}} ({self.low:{spec}}-{self.high:{spec}})"


def repeat(runs: int, measure: Callable[[], float]) -> Spread:
    """Call `measure` `runs` times; the spread of what it returned."""
    return Spread.of(measure() for _ in range(runs))


def num(value: float, spec: str = ",.0f") -> str:
    """`value` formatted, or "-" when it is NaN (not measured)."""
    return "-" if math.isnan(value) else format(value, spec)


def ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is 0."""
    return numerator / denominator if denominator else math.nan


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then keep the cyclic collector off inside the block (as it was after)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def header(*lines: str) -> None:
    """The interpreter, machine and kafkactor build, then the benchmark's own parameter lines."""
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}) on "
        f"{platform.platform()}, {os.cpu_count()} CPUs; kafkactor {build_info.describe()}"
    )
    for line in lines:
        print(line)
    print(flush=True)


def table(head: Sequence[str], rows: Iterable[Sequence[object]], notes: Sequence[str] = ()) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned."""
    cells = [[str(cell) for cell in row] for row in [head, *rows]]
    widths = [max(len(row[k]) for row in cells) for k in range(len(head))]
    lines = [
        "  ".join(
            cell.ljust(width) if k == 0 else cell.rjust(width)
            for k, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
    return "\n".join([*lines, *notes])


def pairs(head: Sequence[str], cells: Sequence[object]) -> str:
    """One table row as ``title=value`` pairs (a progress line that needs no alignment)."""
    return " ".join(f"{title}={cell}" for title, cell in zip(head, cells, strict=True))


def jsonable(value: Any) -> Any:
    """Dataclasses, paths, tuples and NaN made fit for JSON."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def finish(args: argparse.Namespace, started: float, results: dict[str, Any]) -> None:
    """Print the wall time; with --json, write the parameters and `results` there."""
    wall_s = time.perf_counter() - started
    print(f"\ntotal wall time {wall_s:.1f} s")
    if args.json is None:
        return
    document = {
        "python": sys.version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "build": build_info.describe(),
        "parameters": {key: value for key, value in vars(args).items() if key != "json"},
        **results,
        "wall_time_s": wall_s,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(jsonable(document), indent=2) + "\n")
    print(f"results written to {args.json}")


# --------------------------------------------------------------------------------------------
# Tracing: off (the baseline) or on (JSON lines to a temporary file)
# --------------------------------------------------------------------------------------------


class TraceFile:
    """Where a traced run's events go; `size` is 0 for an untraced run."""

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def size(self) -> int:
        """Bytes of events written so far (flushed first)."""
        if self.path is None:
            return 0
        tracing.flush()
        return self.path.stat().st_size


@contextlib.contextmanager
def traced(on: bool, directory: Path | None = None) -> Iterator[TraceFile]:
    """Tracing off (``enabled=False``, hot paths build no events) or on, every event a JSON
    line in a temporary file under `directory`, removed after; tracing is put back as found."""
    if not on:
        with open(os.devnull, "wb") as devnull, tracing.configured(stream=devnull, enabled=False):
            yield TraceFile(None)
        return
    fd, name = tempfile.mkstemp(prefix="bench-trace-", suffix=".jsonl", dir=directory)
    os.close(fd)
    path = Path(name)
    try:
        with tracing.configured(path=path):
            yield TraceFile(path)
    finally:
        path.unlink(missing_ok=True)
