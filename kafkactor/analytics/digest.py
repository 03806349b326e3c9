"""What the report, the plots and the command print: read back from the Parquet written.

The small tables come back whole; the large ones (traces, the timeline, corrupt lines, client
ids, bad-request reasons) as their totals, distributions and first rows. `summary` turns a
digest into the JSON-able key numbers of `AnalysisResult.summary`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from kafkactor.analytics.load import LogCounts
from kafkactor.analytics.tables import TIMELINE_EVENTS
from kafkactor.analytics.transactions import transaction_summary

WHOLE_TABLES = (
    "event_counts",
    "latency",
    "api_requests",
    "purgatory_timeline",
    "transactions",
    "txn_rate",
    "timer_lateness",
    "hw_lag",
    "mailbox_delay",
)
"""Tables small enough to bring to the driver whole (rows per type, group or second)."""

TIMELINE_ROWS = 200
"""Timeline rows the report lists; the table has them all."""

CORRUPT_SAMPLES = 10
"""Corrupt lines the report quotes."""

LISTED_ROWS = 50
"""Rows the report lists of the tables that grow with what clients send (`client_requests`:
one row per client id, `bad_requests`: one per reason); the tables have them all."""

ROOT_TYPES = 15
"""Root message types the report counts traces of."""


@dataclass(frozen=True)
class Digest:
    """The analysis as the driver sees it: rows of the small tables, summaries of the rest."""

    inputs: tuple[str, ...]
    counts: LogCounts
    rows: dict[str, list[dict[str, Any]]]  # whole tables, the timeline's first rows, samples
    totals: dict[str, int]  # rows in each table
    traces: dict[str, Any] = field(default_factory=dict)  # trace_hops distribution
    hops_histogram: list[tuple[int, int]] = field(default_factory=list)  # (hops, traces)
    roots: list[tuple[str, int]] = field(default_factory=list)  # (root message type, traces)
    bad_requests: int = 0  # network.bad_request events (the bad_requests table's count total)


def _records(frame: DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    if limit is not None:
        frame = frame.limit(limit)
    return [row.asDict() for row in frame.collect()]


def _trace_stats(traces: DataFrame) -> dict[str, Any]:
    hops = sf.percentile("hops", [0.5, 0.9, 0.99])
    duration = sf.percentile("duration_ms", [0.5, 0.99])
    row = traces.agg(
        sf.count(sf.lit(1)).alias("traces"),
        hops.alias("hops"),
        sf.max("hops").alias("hops_max"),
        sf.max("actors").alias("actors_max"),
        duration.alias("duration"),
        sf.max("duration_ms").alias("duration_max"),
    ).first()
    if row is None or not row["traces"]:
        return {"traces": 0}
    return {
        "traces": int(row["traces"]),
        "hops_p50": row["hops"][0],
        "hops_p90": row["hops"][1],
        "hops_p99": row["hops"][2],
        "hops_max": int(row["hops_max"]),
        "actors_max": int(row["actors_max"]),
        "duration_p50_ms": row["duration"][0],
        "duration_p99_ms": row["duration"][1],
        "duration_max_ms": int(row["duration_max"]),
    }


def read_digest(
    spark: SparkSession, tables: Mapping[str, Path], inputs: Sequence[str], counts: LogCounts
) -> Digest:
    """Read the written tables back and keep what the report and the plots need."""
    frames = {name: spark.read.parquet(str(path)) for name, path in tables.items()}
    rows = {name: _records(frames[name]) for name in WHOLE_TABLES if name in frames}
    totals = {name: len(records) for name, records in rows.items()}
    for name in ("timeline", "trace_hops", "corrupt_lines"):
        if name in frames:
            totals[name] = frames[name].count()
    if "timeline" in frames:
        # one file, written in time order (ties in line order): read as it is, not re-sorted
        rows["timeline"] = _records(frames["timeline"], TIMELINE_ROWS)
    if "corrupt_lines" in frames:
        rows["corrupt_lines"] = _records(frames["corrupt_lines"], CORRUPT_SAMPLES)
    for name in ("client_requests", "bad_requests"):
        if name in frames:  # written in report order: read as they are
            rows[name] = _records(frames[name], LISTED_ROWS)
            totals[name] = frames[name].count()
    bad_requests = 0
    if totals.get("bad_requests"):
        total = frames["bad_requests"].agg(sf.sum("count").alias("events")).first()
        bad_requests = int(total["events"]) if total is not None else 0
    traces: dict[str, Any] = {"traces": 0}
    histogram: list[tuple[int, int]] = []
    roots: list[tuple[str, int]] = []
    if "trace_hops" in frames and totals["trace_hops"]:
        hops = frames["trace_hops"]
        traces = _trace_stats(hops)
        histogram = [
            (int(row["hops"]), int(row["count"]))
            for row in hops.groupBy("hops").count().orderBy("hops").collect()
        ]
        roots = [
            (str(row["root"]), int(row["count"]))
            for row in hops.groupBy(sf.coalesce("root", sf.lit("(no send)")).alias("root"))
            .count()
            .orderBy(sf.desc("count"), "root")
            .limit(ROOT_TYPES)
            .collect()
        ]
    return Digest(
        inputs=tuple(inputs),
        counts=counts,
        rows=rows,
        totals=totals,
        traces=traces,
        hops_histogram=histogram,
        roots=roots,
        bad_requests=bad_requests,
    )


def _purgatory_totals(windows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = {}
    for window in windows:
        entry = totals.setdefault(
            str(window["purgatory"]),
            {"watched": 0, "completed": 0, "expired": 0, "purged": 0, "peak_delayed": 0},
        )
        for key in ("watched", "completed", "expired", "purged"):
            entry[key] += int(window[key] or 0)
        entry["peak_delayed"] = max(entry["peak_delayed"], int(window["max_delayed"] or 0))
    return totals


def _latency_key(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        key: row[key]
        for key in ("request", "fetcher", "acks", "outcome", "count", "p50_ms", "p99_ms", "max_ms")
    }


def _network(digest: Digest) -> dict[str, Any] | None:
    """Wire requests in total and per API and version; None when the log has no network.*
    request, response or bad request."""
    apis = digest.rows.get("api_requests", [])
    if not apis and not digest.bad_requests:
        return None
    return {
        "requests": sum(int(r["requests"]) for r in apis),
        "responses": sum(int(r["responses"]) for r in apis),
        "unanswered": sum(int(r["unanswered"]) for r in apis),
        "bad_requests": digest.bad_requests,
        "clients": digest.totals.get("client_requests", 0),
        "apis": [
            {
                key: row[key]
                for key in ("api", "api_version", "requests", "p50_ms", "p99_ms", "max_ms")
            }
            for row in apis
        ],
    }


def summary(digest: Digest) -> dict[str, Any]:
    """The key numbers the report states, JSON-able (None where the log has none)."""
    counts = digest.counts
    rows = digest.rows
    span_s = (
        (counts.last_ts_ms - counts.first_ts_ms) / 1000
        if counts.first_ts_ms is not None and counts.last_ts_ms is not None
        else None
    )
    timer = rows.get("timer_lateness", [])
    lags = rows.get("hw_lag", [])
    mailboxes = rows.get("mailbox_delay", [])
    worst_lag = max(lags, key=lambda r: r["max_lag"] or 0, default=None)
    worst_mailbox = max(mailboxes, key=lambda r: r["p99_ms"] or 0.0, default=None)
    timeline_counts: dict[str, int] = {}
    for row in rows.get("event_counts", []):
        if row["event"] in TIMELINE_EVENTS:
            timeline_counts[row["event"]] = int(row["count"])
    return {
        "inputs": list(digest.inputs),
        "events": counts.events,
        "corrupt_lines": counts.corrupt_lines,
        "first_ts_ms": counts.first_ts_ms,
        "last_ts_ms": counts.last_ts_ms,
        "span_s": span_s,
        "event_types": len(rows.get("event_counts", [])),
        "latency": [_latency_key(row) for row in rows.get("latency", [])],
        "network": _network(digest),
        "purgatory": _purgatory_totals(rows.get("purgatory_timeline", [])),
        "transactions": transaction_summary(rows.get("transactions", [])),
        "timer_lateness": (
            {
                "expired": sum(int(r["count"]) for r in timer),
                "p99_ms_worst_broker": max(float(r["p99_ms"]) for r in timer),
                "max_ms": max(float(r["max_ms"]) for r in timer),
            }
            if timer
            else None
        ),
        "hw_lag": (
            {
                "max_lag": int(worst_lag["max_lag"]),
                "topic": worst_lag["topic"],
                "partition": worst_lag["partition"],
                "leader": worst_lag["leader"],
                "follower": worst_lag["follower"],
            }
            if worst_lag is not None
            else None
        ),
        "timeline": {"events": digest.totals.get("timeline", 0), "by_event": timeline_counts},
        "mailbox_delay": (
            {
                "worst_actor_type": worst_mailbox["actor_type"],
                "p99_ms": worst_mailbox["p99_ms"],
                "max_ms": worst_mailbox["max_ms"],
            }
            if worst_mailbox is not None
            else None
        ),
        "traces": dict(digest.traces),
    }
