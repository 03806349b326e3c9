"""`analyze` over a small hand-written log of transactions: `transactions` and `txn_rate`
against the same numbers computed in Python from the lines, the txn-marker purgatory beside
the produce purgatory, the report's section, its plot and the summary; and a log without
transactions saying so.

The log is written here, line by line (the events of docs/events.md as the transaction
coordinator logs them), so that every case is in it: commits over three seconds, aborts of
every cause, a transaction over no partition, the coordinator's other transaction events
(which the tables ignore), and the txn-marker purgatory's watch, completion and expiry. One
analysis (plots on) per module, on the test session's SparkSession.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafkactor.analytics import AnalysisResult, analyze
from kafkactor.analytics.digest import Digest, summary
from kafkactor.analytics.load import LogCounts
from kafkactor.analytics.report import render_report, summary_lines
from tests.analytics.support import PNG_MAGIC, TABLE_COLUMNS, exact_percentile, named

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

START_MS = 1_700_000_000_000
TXN_TABLES = ("transactions", "txn_rate")
QUANTILES = (("p50", 0.5), ("p99", 0.99))

# (ms after the start, committed, cause, duration ms, partitions)
COMPLETED: tuple[tuple[int, bool, str, int, int], ...] = (
    *((10 + 40 * i, True, "client", 5 + 3 * i, 2) for i in range(10)),  # second 0
    *((1_100 + 90 * i, True, "client", 20 + i * i, 3) for i in range(8)),  # second 1
    (1_500, False, "client", 12, 2),
    (1_700, False, "client", 30, 1),
    (1_800, False, "timeout", 60_000, 4),
    (2_300, False, "timeout", 60_050, 4),
    (2_400, False, "fenced", 700, 1),
    (2_600, False, "init", 0, 0),  # open, over no partition, when its producer restarted
    (2_950, True, "client", 250, 6),  # second 2
)
MARKER_BROKER = 1


def _txn_log() -> list[dict[str, Any]]:
    """The log's events, in time order."""
    common = {"schema": 1, "level": "info"}
    coordinator = {"actor": "broker/1/transaction-coordinator", "broker": 1}
    events: list[dict[str, Any]] = []
    for n, (at, committed, cause, duration, partitions) in enumerate(COMPLETED):
        tid = f"txn-{n % 4}"
        txn = {**common, **coordinator, "transactional_id": tid, "producer_id": 1000 + n % 4}
        events.append(
            {
                **txn,
                "ts_ms": START_MS + at,
                "event": "txn.transition",
                "producer_epoch": 0,
                "from_state": "PrepareCommit" if committed else "PrepareAbort",
                "to_state": "CompleteCommit" if committed else "CompleteAbort",
                "partitions": partitions,
            }
        )
        events.append(
            {
                **txn,
                "ts_ms": START_MS + at,
                "event": "txn.completed",
                "committed": committed,
                "cause": cause,
                "duration_ms": duration,
                "partitions": partitions,
            }
        )
    purgatory = {**common, "broker": MARKER_BROKER, "actor": "broker/1/purgatory/txn-marker"}
    events += [
        {**purgatory, "ts_ms": START_MS + 5, "event": "purgatory.watch",
         "purgatory": "txn-marker", "operation_id": 1, "keys": ["txn-0"], "delayed": 1},
        {**purgatory, "ts_ms": START_MS + 8, "event": "purgatory.complete",
         "purgatory": "txn-marker", "key": "txn-0", "completed": 1, "delayed": 0},
        {**purgatory, "ts_ms": START_MS + 1_050, "event": "purgatory.watch",
         "purgatory": "txn-marker", "operation_id": 2, "keys": ["txn-1"], "delayed": 1},
        {**purgatory, "ts_ms": START_MS + 1_060, "event": "purgatory.watch",
         "purgatory": "txn-marker", "operation_id": 3, "keys": ["txn-2"], "delayed": 2},
        {**purgatory, "ts_ms": START_MS + 1_900, "event": "purgatory.expire",
         "purgatory": "txn-marker", "operation_id": 2, "delayed": 1},
        {**common, "ts_ms": START_MS + 20, "event": "purgatory.watch", "broker": 2,
         "actor": "broker/2/purgatory/produce", "purgatory": "Produce", "operation_id": 1,
         "keys": ["events-0"], "delayed": 1},
    ]  # fmt: skip
    return sorted(events, key=lambda e: e["ts_ms"])


@dataclass(frozen=True)
class TxnAnalysis:
    events: list[dict[str, Any]]
    result: AnalysisResult
    tables: dict[str, list[dict[str, Any]]]
    schemas: dict[str, list[tuple[str, str]]]


@pytest.fixture(scope="module")
def txn(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TxnAnalysis]:
    root = tmp_path_factory.mktemp("txn")
    events = _txn_log()
    log = root / "txn.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    result = analyze(log, root / "out", spark=spark, plots=True)
    tables, schemas = {}, {}
    for name in (*TXN_TABLES, "purgatory_timeline"):
        frame = spark.read.parquet(str(result.tables[name]))
        schemas[name] = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
        tables[name] = [row.asDict() for row in frame.collect()]
    yield TxnAnalysis(events, result, tables, schemas)


def _close(actual: float | None, expected: float | None) -> bool:
    if expected is None:
        return actual is None
    return actual is not None and actual == pytest.approx(expected, rel=1e-9, abs=1e-9)


def _expected(completed: list[dict[str, Any]]) -> dict[str, Any]:
    durations = [float(e["duration_ms"]) for e in completed]
    stamps = [e["ts_ms"] for e in completed]
    span_ms = max(stamps) - min(stamps)
    out: dict[str, Any] = {
        "count": len(completed),
        "per_s": len(completed) * 1000 / span_ms if span_ms else None,
        "mean_ms": sum(durations) / len(durations),
        "max_ms": max(durations),
        "mean_partitions": sum(e["partitions"] for e in completed) / len(completed),
        "first_ts_ms": min(stamps),
        "last_ts_ms": max(stamps),
    }
    for name, q in QUANTILES:
        out[f"{name}_ms"] = exact_percentile(durations, q)
    return out


def test_the_transaction_tables_have_the_contract_columns(txn: TxnAnalysis) -> None:
    assert txn.result.corrupt_lines == 0
    assert txn.result.events == len(txn.events)
    for name in TXN_TABLES:
        assert txn.schemas[name] == TABLE_COLUMNS[name], name


def test_transactions_per_outcome_and_cause_with_their_totals(txn: TxnAnalysis) -> None:
    completed = named(txn.events, "txn.completed")
    outcome = {True: "committed", False: "aborted"}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {("all", "all"): completed}
    for e in completed:
        groups.setdefault((outcome[e["committed"]], e["cause"]), []).append(e)
        groups.setdefault((outcome[e["committed"]], "all"), []).append(e)
    rows = txn.tables["transactions"]
    # committed first, then aborted, then every transaction; each outcome's total first, then
    # its causes, the most frequent first
    assert [(r["outcome"], r["cause"]) for r in rows] == [
        ("committed", "all"),
        ("committed", "client"),
        ("aborted", "all"),
        ("aborted", "client"),
        ("aborted", "timeout"),
        ("aborted", "fenced"),
        ("aborted", "init"),
        ("all", "all"),
    ]
    for row in rows:
        expected = _expected(groups[(row["outcome"], row["cause"])])
        for column, value in expected.items():
            assert _close(row[column], value), (column, row, expected)
    commits = [float(e["duration_ms"]) for e in completed if e["committed"]]
    (committed,) = [r for r in rows if (r["outcome"], r["cause"]) == ("committed", "all")]
    assert committed["count"] == 19
    assert committed["p99_ms"] == pytest.approx(exact_percentile(commits, 0.99))
    assert committed["p50_ms"] < committed["p99_ms"] <= committed["max_ms"] == 250.0


def test_txn_rate_per_second(txn: TxnAnalysis) -> None:
    rows = txn.tables["txn_rate"]
    assert [r["window_start_ms"] for r in rows] == [START_MS, START_MS + 1000, START_MS + 2000]
    for row in rows:
        second = [
            e
            for e in named(txn.events, "txn.completed")
            if e["ts_ms"] - e["ts_ms"] % 1000 == row["window_start_ms"]
        ]
        commits = [float(e["duration_ms"]) for e in second if e["committed"]]
        assert row["committed"] == len(commits), row
        assert row["aborted"] == len(second) - len(commits), row
        for name, q in QUANTILES:
            assert _close(row[f"commit_{name}_ms"], exact_percentile(commits, q)), (name, row)
    assert [(r["committed"], r["aborted"]) for r in rows] == [(10, 0), (8, 3), (1, 3)]


def test_the_txn_marker_purgatory_is_beside_the_others(txn: TxnAnalysis) -> None:
    table = {
        (r["broker"], r["purgatory"], r["window_start_ms"]): r
        for r in txn.tables["purgatory_timeline"]
    }
    first = table[(MARKER_BROKER, "txn-marker", START_MS)]
    assert (first["watched"], first["completed"], first["expired"]) == (1, 1, 0)
    second = table[(MARKER_BROKER, "txn-marker", START_MS + 1000)]
    assert (second["watched"], second["expired"], second["max_delayed"]) == (2, 1, 2)
    assert (2, "Produce", START_MS) in table
    text = txn.result.report.read_text(encoding="utf-8")
    assert "| 1 | txn-marker | 2 | 3 | 1 | 1 | 0 | 2 |" in text
    assert "| 2 | Produce |" in text
    assert txn.result.summary["purgatory"]["txn-marker"]["expired"] == 1


def test_report_plot_and_summary_show_the_transactions(txn: TxnAnalysis) -> None:
    text = txn.result.report.read_text(encoding="utf-8")
    section = text.split("## Transactions", 1)[1].split("\n## ", 1)[0]
    assert "Table `transactions.parquet`." in section
    assert "25 transactions completed (19 committed, 6 aborted)" in section
    assert "| committed | 19 |" in section and "| aborted | 6 |" in section
    for cause, count in (("client", 2), ("timeout", 2), ("fenced", 1), ("init", 1)):
        assert f"| {cause} | {count} |" in section, cause
    assert "![transactions per second](plots/transactions.png)" in section
    plot = txn.result.out_dir / "plots" / "transactions.png"
    assert plot in txn.result.plots
    assert plot.read_bytes()[: len(PNG_MAGIC)] == PNG_MAGIC

    numbers = txn.result.summary["transactions"]
    commits = [
        float(e["duration_ms"]) for e in named(txn.events, "txn.completed") if e["committed"]
    ]
    assert numbers["transactions"] == 25
    assert (numbers["committed"], numbers["aborted"]) == (19, 6)
    assert numbers["per_s"] == pytest.approx(25 * 1000 / (2_950 - 10))
    assert numbers["commit_p50_ms"] == pytest.approx(exact_percentile(commits, 0.5))
    assert numbers["commit_p99_ms"] == pytest.approx(exact_percentile(commits, 0.99))
    assert numbers["aborts_by_cause"] == {"client": 2, "timeout": 2, "fenced": 1, "init": 1}
    (line,) = [x for x in summary_lines(txn.result.summary) if x.startswith("transactions")]
    assert line.startswith("transactions 25 (8.50/s): committed 19, commit p50 / p99 ")
    assert line.endswith("aborted 6 (client 2, fenced 1, init 1, timeout 2)")


@pytest.mark.timeout(60)
def test_a_log_without_transactions_says_so(tmp_path: Path) -> None:
    """No txn.completed: the section says there were no transactions, no plot, no numbers."""
    digest = Digest(inputs=("x.jsonl",), counts=LogCounts(0, 0, None, None), rows={}, totals={})
    text = render_report(digest, {}, tmp_path)
    section = text.split("## Transactions", 1)[1].split("\n## ", 1)[0]
    assert "No `txn.completed` events: no transactions, none in this log." in section
    assert "![" not in section
    assert summary(digest)["transactions"] is None
    assert "transactions: none in this log" in summary_lines(summary(digest))
