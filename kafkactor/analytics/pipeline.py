"""`analyze`: event logs in, Parquet tables, a Markdown report and PNG plots out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from kafkactor.analytics.digest import read_digest, summary
from kafkactor.analytics.load import LoadedLog, read_events
from kafkactor.analytics.plots import draw_plots
from kafkactor.analytics.progress import ProgressDisplay
from kafkactor.analytics.report import write_report
from kafkactor.analytics.session import spark_session
from kafkactor.analytics.tables import EVENT_TABLES, TABLES, corrupt_lines
from kafkactor.trace.inputs import Inputs, resolve_inputs

UNCOALESCED = frozenset({"trace_hops"})
"""Tables that can be as large as the log (one row per trace), written in parallel; every
other table is small and written as one file."""


@dataclass(frozen=True)
class AnalysisResult:
    """What one analysis wrote, where, and the key numbers of its report."""

    out_dir: Path
    report: Path  # <out>/report.md
    tables: dict[str, Path]  # table name -> Parquet directory <out>/<name>.parquet
    plots: tuple[Path, ...]  # <out>/plots/*.png
    events: int  # lines parsed as events
    corrupt_lines: int  # lines set aside (<out>/corrupt_lines.parquet)
    summary: dict[str, Any]  # the key numbers the report states (JSON-able)


def _table(name: str, log: LoadedLog, events: DataFrame) -> DataFrame:
    if name == "corrupt_lines":
        return corrupt_lines(log.parsed)
    return EVENT_TABLES[name](events)


def write_table(frame: DataFrame, path: Path, *, coalesce: bool) -> Path:
    """Write `frame` as Parquet at `path`, replacing what was there; one file if `coalesce`."""
    if coalesce:
        frame = frame.coalesce(1)
    frame.write.mode("overwrite").parquet(str(path))
    return path


@contextlib.contextmanager
def _progress(spark: SparkSession, show: bool) -> Iterator[ProgressDisplay | None]:
    if not show:
        yield None
        return
    with ProgressDisplay(spark.sparkContext) as display:
        yield display


def _phase(display: ProgressDisplay | None, text: str) -> None:
    if display is not None:
        display.phase = text


def analyze(
    inputs: Inputs,
    out_dir: str | Path,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    plots: bool = True,
    progress: bool = False,
) -> AnalysisResult:
    """Analyse event logs: every table of `TABLES` as `<out_dir>/<name>.parquet`,
    `<out_dir>/report.md` and (if `plots`) `<out_dir>/plots/*.png`.

    `inputs`: files, directories (every *.jsonl, *.json and *.log directly inside) or globs;
    FileNotFoundError naming the input when one matches nothing, before Spark starts. Uses
    `spark` if given and leaves it running; else starts a session on `master` (None:
    local[*]) and stops it at the end (an already active session is used and left running).
    The lines are parsed once, with an explicit schema, and cached; corrupt lines are set
    aside and counted, never raised. `progress` shows Spark's progress on stderr.
    """
    paths = resolve_inputs(inputs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Stop only a session started here: not a given one, nor one already active (a test's).
    own_session = spark is None and SparkSession.getActiveSession() is None
    session = spark if spark is not None else spark_session(master)
    log: LoadedLog | None = None
    try:
        with _progress(session, progress) as display:
            _phase(display, "reading the log")
            log = read_events(session, paths)
            counts = log.counts()
            events = log.events
            tables: dict[str, Path] = {}
            for name in TABLES:
                _phase(display, name)
                tables[name] = write_table(
                    _table(name, log, events),
                    out / f"{name}.parquet",
                    coalesce=name not in UNCOALESCED,
                )
            _phase(display, "summarising")
            digest = read_digest(session, tables, paths, counts)
            _phase(display, "plotting")
            drawn = draw_plots(digest, out / "plots") if plots else {}
            report = write_report(digest, drawn, out)
    finally:
        if log is not None:
            log.unpersist()
        if own_session:
            session.stop()
    return AnalysisResult(
        out_dir=out,
        report=report,
        tables=tables,
        plots=tuple(drawn.values()),
        events=counts.events,
        corrupt_lines=counts.corrupt_lines,
        summary=summary(digest),
    )
