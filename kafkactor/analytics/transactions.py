"""The transaction tables: completed transactions by outcome and cause, and per second.

Both read the transaction coordinator's `txn.completed` events (docs/events.md): one per
transaction that reached CompleteCommit or CompleteAbort, with `committed`, `cause` ("client":
EndTxn, "timeout": the coordinator aborted it, "fenced": a newer producer epoch, "init":
InitProducerId aborted it) and `duration_ms` (from the transaction's start to its completion).
The txn-marker purgatory needs no table of its own: its `purgatory.*` events carry the
purgatory name "txn-marker" and join the others in `purgatory_timeline`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

TXN_WINDOW_MS = 1000
"""The window of `txn_rate`: one row per second with a completed transaction."""

ALL = "all"
"""The outcome or cause of a `transactions` row that adds up every outcome or cause."""

TXN_PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p99", 0.99))
"""The percentiles of a transaction's `duration_ms` (commit latency, abort latency)."""


def _completed(events: DataFrame) -> DataFrame:
    """The `txn.completed` events: outcome ("committed", "aborted"), cause, duration, partitions."""
    outcome = (
        sf.when(sf.col("committed"), sf.lit("committed"))
        .when(~sf.col("committed"), sf.lit("aborted"))
        .otherwise(sf.lit("unknown"))
    )
    return events.filter(sf.col("event") == "txn.completed").select(
        outcome.alias("outcome"),
        sf.coalesce(sf.col("cause"), sf.lit("unknown")).alias("cause"),
        sf.col("duration_ms").cast("double").alias("duration_ms"),
        sf.col("partitions").cast("long").alias("partitions"),
        sf.col("ts_ms"),
    )


def _per_second(count: Column, first: Column, last: Column) -> Column:
    """count / (last - first) seconds; null when they are the same millisecond."""
    span_ms = last - first
    return sf.when(span_ms > 0, count * sf.lit(1000.0) / span_ms).cast("double")


def transactions(events: DataFrame) -> DataFrame:
    """Completed transactions per outcome and cause (`txn.completed`), with a row per outcome
    for all its causes (cause "all") and one for every transaction (outcome and cause "all"):
    count, the rate (count over the time from the group's first completion to its last),
    duration statistics (exact percentiles of `duration_ms`: the commit latency of committed
    transactions, how long aborted ones lasted), mean partitions, first and last `ts_ms`."""
    duration = sf.col("duration_ms")
    exact = sf.percentile(duration, [fraction for _, fraction in TXN_PERCENTILES])
    first, last = sf.min("ts_ms").cast("long"), sf.max("ts_ms").cast("long")
    grouped = (
        _completed(events)
        .rollup("outcome", "cause")
        .agg(
            sf.grouping("outcome").alias("_all_outcomes"),
            sf.grouping("cause").alias("_all_causes"),
            sf.count(sf.lit(1)).alias("count"),
            _per_second(sf.count(sf.lit(1)), first, last).alias("per_s"),
            sf.avg(duration).alias("mean_ms"),
            *(exact[i].alias(f"{name}_ms") for i, (name, _) in enumerate(TXN_PERCENTILES)),
            sf.max(duration).alias("max_ms"),
            sf.avg(sf.col("partitions")).alias("mean_partitions"),
            first.alias("first_ts_ms"),
            last.alias("last_ts_ms"),
        )
    )
    outcome_rank = (
        sf.when(sf.col("_all_outcomes") == 1, 3)
        .when(sf.col("outcome") == "committed", 0)
        .when(sf.col("outcome") == "aborted", 1)
        .otherwise(2)
    )
    return (
        grouped.filter(sf.col("count") > 0)
        .orderBy(outcome_rank, sf.desc("_all_causes"), sf.desc("count"), "cause")
        .select(
            sf.when(sf.col("_all_outcomes") == 1, sf.lit(ALL))
            .otherwise(sf.col("outcome"))
            .alias("outcome"),
            sf.when(sf.col("_all_causes") == 1, sf.lit(ALL))
            .otherwise(sf.col("cause"))
            .alias("cause"),
            "count",
            "per_s",
            "mean_ms",
            *(f"{name}_ms" for name, _ in TXN_PERCENTILES),
            "max_ms",
            "mean_partitions",
            "first_ts_ms",
            "last_ts_ms",
        )
    )


def txn_rate(events: DataFrame, window_ms: int = TXN_WINDOW_MS) -> DataFrame:
    """Per second with a completed transaction: how many committed and aborted, and the p50 /
    p99 `duration_ms` of the committed ones (null in a second without a commit)."""
    completed = _completed(events)
    committed = sf.col("outcome") == "committed"
    commit_duration = sf.when(committed, sf.col("duration_ms"))
    exact = sf.percentile(commit_duration, [fraction for _, fraction in TXN_PERCENTILES])
    window_start = sf.col("ts_ms") - sf.pmod(sf.col("ts_ms"), sf.lit(window_ms))
    return (
        completed.groupBy(window_start.cast("long").alias("window_start_ms"))
        .agg(
            sf.count_if(committed).alias("committed"),
            sf.count_if(sf.col("outcome") == "aborted").alias("aborted"),
            *(exact[i].alias(f"commit_{name}_ms") for i, (name, _) in enumerate(TXN_PERCENTILES)),
        )
        .orderBy("window_start_ms")
    )


def _row(rows: Sequence[Mapping[str, Any]], outcome: str, cause: str) -> Mapping[str, Any] | None:
    return next((r for r in rows if (r["outcome"], r["cause"]) == (outcome, cause)), None)


def transaction_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The key numbers (JSON-able) of the `transactions` rows; None without transactions."""
    every = _row(rows, ALL, ALL)
    if every is None:
        return None
    committed = _row(rows, "committed", ALL)
    aborted = _row(rows, "aborted", ALL)
    return {
        "transactions": int(every["count"]),
        "per_s": every["per_s"],
        "committed": int(committed["count"]) if committed else 0,
        "aborted": int(aborted["count"]) if aborted else 0,
        "commit_p50_ms": committed["p50_ms"] if committed else None,
        "commit_p99_ms": committed["p99_ms"] if committed else None,
        "commit_max_ms": committed["max_ms"] if committed else None,
        "aborts_by_cause": {
            str(r["cause"]): int(r["count"])
            for r in rows
            if r["outcome"] == "aborted" and r["cause"] != ALL
        },
    }
