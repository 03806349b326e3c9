"""Helpers for the analytics tests: the recorded run, the log read back in Python, the tables.

Everything the tests expect of `kafkactor.analytics` is computed here a second way, in plain
Python over the JSON lines themselves, so a table is checked against the log and not against
another Spark query.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOPIC = "events"
PARTITIONS = 3

# The tables of the contract, their columns in order, and the Spark type of those it fixes
# (None: the contract leaves the type open).
TABLE_COLUMNS: dict[str, list[tuple[str, str | None]]] = {
    "event_counts": [("event", "string"), ("count", "bigint")],
    "latency": [
        ("request", "string"),
        ("fetcher", "string"),
        ("acks", "int"),
        ("outcome", "string"),
        ("count", "bigint"),
        ("mean_ms", "double"),
        ("p50_ms", "double"),
        ("p90_ms", "double"),
        ("p99_ms", "double"),
        ("max_ms", "double"),
    ],
    "api_requests": [
        ("api", "string"),
        ("api_key", "int"),
        ("api_version", "int"),
        ("requests", "bigint"),
        ("responses", "bigint"),
        ("unanswered", "bigint"),
        ("no_response_bytes", "bigint"),
        ("mean_ms", "double"),
        ("p50_ms", "double"),
        ("p99_ms", "double"),
        ("max_ms", "double"),
    ],
    "client_requests": [
        ("client_id", "string"),
        ("requests", "bigint"),
        ("responses", "bigint"),
        ("unanswered", "bigint"),
        ("mean_ms", "double"),
        ("p50_ms", "double"),
        ("p99_ms", "double"),
        ("max_ms", "double"),
    ],
    "bad_requests": [
        ("reason", "string"),
        ("count", "bigint"),
        ("brokers", "array<int>"),
        ("first_ts_ms", "bigint"),
        ("last_ts_ms", "bigint"),
    ],
    "purgatory_timeline": [
        ("broker", "int"),
        ("purgatory", "string"),
        ("window_start_ms", "bigint"),
        ("watched", "bigint"),
        ("completed", "bigint"),
        ("expired", "bigint"),
        ("max_delayed", "bigint"),
        ("purged", "bigint"),
    ],
    "transactions": [
        ("outcome", "string"),
        ("cause", "string"),
        ("count", "bigint"),
        ("per_s", "double"),
        ("mean_ms", "double"),
        ("p50_ms", "double"),
        ("p99_ms", "double"),
        ("max_ms", "double"),
        ("mean_partitions", "double"),
        ("first_ts_ms", "bigint"),
        ("last_ts_ms", "bigint"),
    ],
    "txn_rate": [
        ("window_start_ms", "bigint"),
        ("committed", "bigint"),
        ("aborted", "bigint"),
        ("commit_p50_ms", "double"),
        ("commit_p99_ms", "double"),
    ],
    "timer_lateness": [
        ("broker", "int"),
        ("count", "bigint"),
        ("mean_ms", "double"),
        ("p50_ms", "double"),
        ("p99_ms", "double"),
        ("max_ms", "double"),
    ],
    "hw_lag": [
        ("topic", "string"),
        ("partition", "int"),
        ("leader", "int"),
        ("follower", "int"),
        ("samples", "bigint"),
        ("mean_lag", None),
        ("p99_lag", None),
        ("max_lag", None),
    ],
    "timeline": [
        ("ts_ms", "bigint"),
        ("event", "string"),
        ("broker", "int"),
        ("topic", "string"),
        ("partition", "int"),
        ("detail", "string"),
    ],
    "mailbox_delay": [
        ("actor_type", "string"),
        ("count", "bigint"),
        ("mean_ms", "double"),
        ("p50_ms", "double"),
        ("p99_ms", "double"),
        ("max_ms", "double"),
    ],
    "trace_hops": [
        ("trace_id", "string"),
        ("hops", "bigint"),
        ("actors", "bigint"),
        ("duration_ms", "bigint"),
        ("root", "string"),
    ],
    "corrupt_lines": [("file", "string"), ("line", "string")],
}

TIMELINE_EVENTS = frozenset(
    {
        "broker.start",
        "broker.stop",
        "broker.crash",
        "cluster.broker_killed",
        "cluster.broker_restarted",
        "cluster.broker_isolated",
        "cluster.broker_healed",
        "cluster.session_expired",
        "controller.elected",
        "controller.resign",
        "controller.leader_elected",
        "controller.isr_changed",
        "partition.isr_shrink",
        "partition.isr_expand",
        "partition.become_leader",
    }
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class RecordedRun:
    """What the recorded topology did, as the test itself counted it."""

    path: Path  # the JSON-lines event log
    acks_all: int  # acks=all sends, every one acknowledged
    acks_one: int  # acks=1 sends, every one acknowledged
    acks_zero: int  # acks=0 sends (no response)
    polls: int  # consumer polls
    invalid_acks: int  # the acks value of the one refused request (INVALID_REQUIRED_ACKS)
    expired_partition: int  # the partition of the one acks=all send that timed out
    victim: int  # the broker killed
    victim_partition: int  # the partition it led, which moved to another broker
    expiry_ms: int  # its timeout
    leaders: dict[int, int]  # partition -> leader before the kill
    replicas: dict[int, tuple[int, ...]]  # partition -> replicas


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every line of a log, parsed (the recorded log has no damaged line)."""
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def exact_percentile(values: Sequence[float], q: float) -> float:
    """Spark SQL's exact `percentile`: linear interpolation between the closest ranks (numpy's
    default), at position q x (n - 1) of the sorted values."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    lower, upper = math.floor(position), math.ceil(position)
    if lower == upper:
        return float(ordered[lower])
    fraction = position - lower
    return (1 - fraction) * ordered[lower] + fraction * ordered[upper]


def stats(values: Sequence[float], quantiles: Iterable[tuple[str, float]]) -> dict[str, float]:
    """count, mean, max and the named exact percentiles of `values`."""
    out: dict[str, float] = {
        "count": len(values),
        "mean": sum(values) / len(values),
        "max": float(max(values)),
    }
    for name, q in quantiles:
        out[name] = exact_percentile(values, q)
    return out


def grouped(
    events: Iterable[dict[str, Any]],
    key: Callable[[dict[str, Any]], Any],
    value: Callable[[dict[str, Any]], float],
) -> dict[Any, list[float]]:
    groups: dict[Any, list[float]] = defaultdict(list)
    for event in events:
        groups[key(event)].append(value(event))
    return dict(groups)


def named(events: Iterable[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("event") in names]


def counts(events: Iterable[dict[str, Any]]) -> Counter[str]:
    return Counter(e["event"] for e in events)


def actor_type(address: str) -> str:
    """An address's path with ids removed: broker/1/partition/events-0 -> partition,
    broker/2/purgatory/fetch -> purgatory/fetch, client/producer-3 -> producer."""
    parts = address.split("/")
    if parts[0] == "broker":
        parts = parts[2:]
    elif parts[0] == "client":
        parts = parts[1:]
    if parts[:1] == ["partition"]:
        return "partition"  # the rest is the topic-partition
    return re.sub(r"-[0-9]+$", "", "/".join(p for p in parts if not p.isdigit()))
