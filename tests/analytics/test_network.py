"""`analyze` over a small hand-written log of wire traffic: `api_requests`, `client_requests`
and `bad_requests` against the same numbers computed in Python from the lines, the report's
sections and the summary.

The log is written here, line by line, so that every case is in it whatever a real run
happens to do: requests answered, answered with no bytes (acks=0), never answered, a response
whose request is not in the log, a client that sent no client id, an ApiVersions request newer
than the broker (KIP-511), bad frames on two brokers, and `latency_ms` as a fraction
(`network.response`) beside whole milliseconds (`produce.response`) in one column. One
analysis (no plots) per module, on the test session's SparkSession.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from kafkactor.analytics import AnalysisResult, analyze
from kafkactor.analytics.digest import Digest, summary
from kafkactor.analytics.load import LogCounts
from kafkactor.analytics.report import render_report, summary_lines
from tests.analytics.support import TABLE_COLUMNS, exact_percentile, named

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

START_MS = 1_700_000_000_000
NETWORK_TABLES = ("api_requests", "client_requests", "bad_requests")
QUANTILES = (("p50", 0.5), ("p99", 0.99))

# (broker, api key, api, version, client id, latency ms or None: no response, response bytes)
REQUESTS: tuple[tuple[int, int, str, int, str | None, float | None, int], ...] = (
    *((1, 0, "PRODUCE", 8, "producer-a", ms, 64) for ms in (1.5, 2.25, 10.0, 3.0, 100.125)),
    *((2, 0, "PRODUCE", 8, "producer-b", ms, 0) for ms in (0.5, 0.75)),  # acks=0
    (1, 0, "PRODUCE", 7, "producer-b", 12.5, 64),
    (1, 1, "FETCH", 11, "consumer-a", 500.0, 301),
    (2, 1, "FETCH", 11, "consumer-a", 499.5, 301),
    (1, 1, "FETCH", 11, "consumer-a", None, 0),  # a long poll the log ends before
    (1, 18, "API_VERSIONS", 3, None, 0.25, 79),  # no client id
    (1, 18, "API_VERSIONS", 4, "producer-a", 0.875, 20),  # newer than served: answered in v0
)
ORPHAN_RESPONSE = (2, 3, "METADATA", 8, 4.0, 142)  # its request is before the log starts
BAD_FRAMES = (
    (1, "an unknown api key: api key 99 version 0", 99, 0, 10),
    (2, "an unknown api key: api key 99 version 0", 99, 0, 10),
    (1, "a 6-byte frame is shorter than a request header", -1, -1, 6),
)


def _wire_log() -> list[dict[str, Any]]:
    """The log's events, in time order (one millisecond apart)."""
    clock = count(START_MS)
    traces = (f"{n:016x}" for n in count(0xA000))
    common = {"schema": 1, "level": "info"}
    events: list[dict[str, Any]] = [
        {**common, "event": "network.listening", "broker": b, "host": "127.0.0.1", "port": 9092 + b}
        for b in (1, 2)
    ]
    for n, (broker, key, api, version, client, latency, size) in enumerate(REQUESTS):
        trace_id, connection = next(traces), f"127.0.0.1:909{broker + 2}-{n}-127.0.0.1:5{n:04d}"
        header = {
            "broker": broker,
            "connection": connection,
            "api_key": key,
            "api": api,
            "api_version": version,
            "correlation_id": n + 1,
            "trace_id": trace_id,
        }
        events.append(
            {**common, **header, "event": "network.request", "client_id": client, "bytes": 40}
        )
        if latency is not None:
            events.append(
                {
                    **common,
                    **header,
                    "event": "network.response",
                    "bytes": size,
                    "latency_ms": latency,
                }
            )
    broker, key, api, version, latency, size = ORPHAN_RESPONSE
    events.append(
        {
            **common,
            "event": "network.response",
            "broker": broker,
            "connection": "127.0.0.1:9094-99-127.0.0.1:50099",
            "api_key": key,
            "api": api,
            "api_version": version,
            "correlation_id": 99,
            "bytes": size,
            "latency_ms": latency,
            "trace_id": next(traces),
        }
    )
    for n, (broker, reason, key, version, size) in enumerate(BAD_FRAMES):
        connection = f"127.0.0.1:909{broker + 2}-{50 + n}-127.0.0.1:6{n:04d}"
        where = {"broker": broker, "connection": connection}
        events.append(
            {
                **common,
                **where,
                "event": "network.bad_request",
                "api_key": key,
                "api_version": version,
                "bytes": size,
                "reason": reason,
            }
        )
        events.append(
            {
                **common,
                **where,
                "event": "network.connection_closed",
                "reason": reason,
                "unanswered": 0,
            }
        )
    events.append(  # whole milliseconds, in the column network.response fills with fractions
        {
            **common,
            "event": "produce.response",
            "actor": "broker/1/replica-manager",
            "broker": 1,
            "trace_id": next(traces),
            "parent_span_id": "",
            "acks": 1,
            "partitions": 1,
            "error_codes": [0],
            "outcome": "completed",
            "latency_ms": 7,
            "waited": False,
            "correlation_id": 1,
        }
    )
    for event in events:
        event["ts_ms"] = next(clock)
    return events


@dataclass(frozen=True)
class WireAnalysis:
    events: list[dict[str, Any]]
    result: AnalysisResult
    tables: dict[str, list[dict[str, Any]]]
    schemas: dict[str, list[tuple[str, str]]]


@pytest.fixture(scope="module")
def wire(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireAnalysis]:
    root = tmp_path_factory.mktemp("wire")
    events = _wire_log()
    log = root / "wire.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    result = analyze(log, root / "out", spark=spark, plots=False)
    tables, schemas = {}, {}
    for name in (*NETWORK_TABLES, "latency"):
        frame = spark.read.parquet(str(result.tables[name]))
        schemas[name] = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
        tables[name] = [row.asDict() for row in frame.collect()]
    yield WireAnalysis(events, result, tables, schemas)


def _close(actual: float | None, expected: float | None) -> bool:
    if expected is None:
        return actual is None
    return actual is not None and actual == pytest.approx(expected, rel=1e-9, abs=1e-9)


def _joined(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each request with its response (by broker and trace id), and responses alone."""
    responses = {(e["broker"], e["trace_id"]): e for e in named(events, "network.response")}
    rows = []
    for request in named(events, "network.request"):
        response = responses.pop((request["broker"], request["trace_id"]), None)
        rows.append({"request": request, "response": response})
    rows += [{"request": None, "response": response} for response in responses.values()]
    return rows


def _expected(rows: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [r["response"]["latency_ms"] for r in rows if r["response"] is not None]
    out: dict[str, Any] = {
        "requests": sum(r["request"] is not None for r in rows),
        "responses": len(latencies),
        "unanswered": sum(r["request"] is not None and r["response"] is None for r in rows),
        "mean_ms": sum(latencies) / len(latencies) if latencies else None,
        "max_ms": max(latencies) if latencies else None,
    }
    for name, q in QUANTILES:
        out[f"{name}_ms"] = exact_percentile(latencies, q) if latencies else None
    return out


def _check(row: dict[str, Any], expected: dict[str, Any]) -> None:
    for column in ("requests", "responses", "unanswered"):
        assert row[column] == expected[column], (column, row, expected)
    for column in ("mean_ms", "p50_ms", "p99_ms", "max_ms"):
        assert _close(row[column], expected[column]), (column, row, expected)


def test_the_network_tables_have_the_contract_columns(wire: WireAnalysis) -> None:
    for name in NETWORK_TABLES:
        assert wire.schemas[name] == TABLE_COLUMNS[name], name


def test_fractional_and_whole_latencies_read_as_one_double_column(wire: WireAnalysis) -> None:
    assert wire.result.corrupt_lines == 0
    assert wire.result.events == len(wire.events)
    (produce,) = wire.tables["latency"]
    assert (produce["request"], produce["count"], produce["max_ms"]) == ("produce", 1, 7.0)


def test_api_requests_per_api_and_version(wire: WireAnalysis) -> None:
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for row in _joined(wire.events):
        event = row["request"] or row["response"]
        groups.setdefault((event["api"], event["api_key"], event["api_version"]), []).append(row)
    table = {(r["api"], r["api_key"], r["api_version"]): r for r in wire.tables["api_requests"]}
    assert list(table) == sorted(table, key=lambda k: (k[1], k[2]))  # by api key, version
    assert set(table) == set(groups)
    for key, rows in groups.items():
        _check(table[key], _expected(rows))
        empty = sum(r["response"] is not None and r["response"]["bytes"] == 0 for r in rows)
        assert table[key]["no_response_bytes"] == empty, key
    assert table[("PRODUCE", 0, 8)]["no_response_bytes"] == 2  # the acks=0 requests
    assert table[("FETCH", 1, 11)]["unanswered"] == 1  # the long poll
    assert table[("METADATA", 3, 8)]["requests"] == 0  # a response alone
    assert table[("API_VERSIONS", 18, 4)]["responses"] == 1  # KIP-511: logged as asked


def test_client_requests_per_client_id(wire: WireAnalysis) -> None:
    groups: dict[str | None, list[dict[str, Any]]] = {}
    for row in _joined(wire.events):
        client = row["request"]["client_id"] if row["request"] is not None else None
        groups.setdefault(client, []).append(row)
    rows = wire.tables["client_requests"]
    assert [r["client_id"] for r in rows] == ["consumer-a", "producer-a", "producer-b", None]
    table = {r["client_id"]: r for r in rows}
    assert set(table) == set(groups)
    for client, joined in groups.items():
        _check(table[client], _expected(joined))
    # no client id: the ApiVersions request that sent none, and the response alone
    assert (table[None]["requests"], table[None]["responses"]) == (1, 2)


def test_bad_requests_by_reason(wire: WireAnalysis) -> None:
    bad = named(wire.events, "network.bad_request")
    rows = wire.tables["bad_requests"]
    assert [(r["reason"], r["count"]) for r in rows] == [
        ("an unknown api key: api key 99 version 0", 2),
        ("a 6-byte frame is shorter than a request header", 1),
    ]
    for row in rows:
        same = [e for e in bad if e["reason"] == row["reason"]]
        assert row["brokers"] == sorted({e["broker"] for e in same})
        assert row["first_ts_ms"] == min(e["ts_ms"] for e in same)
        assert row["last_ts_ms"] == max(e["ts_ms"] for e in same)


def test_report_and_summary_show_the_wire_traffic(wire: WireAnalysis) -> None:
    text = wire.result.report.read_text(encoding="utf-8")
    for title in ("## Wire requests by API", "## Wire requests by client", "## Bad requests"):
        assert title in text, title
    assert "| PRODUCE | 0 | 8 | 7 | 7 | 0 | 2 |" in text
    assert "| consumer-a | 3 | 2 | 1 |" in text
    assert "| an unknown api key: api key 99 version 0 | 2 | 1, 2 |" in text
    assert "3 frames could not be served" in text
    network = wire.result.summary["network"]
    assert {k: network[k] for k in ("requests", "responses", "unanswered", "bad_requests")} == {
        "requests": len(REQUESTS),
        "responses": len(REQUESTS),  # one unanswered, one response alone
        "unanswered": 1,
        "bad_requests": len(BAD_FRAMES),
    }
    assert network["clients"] == 4
    lines = summary_lines(wire.result.summary)
    assert any(line.startswith(f"wire requests {len(REQUESTS)} (1 unanswered)") for line in lines)
    assert any("PRODUCE v8" in line for line in lines), lines


@pytest.mark.timeout(60)
def test_a_log_without_wire_traffic_says_so(tmp_path: Path) -> None:
    """The report of a log with no network.* events has the sections, each saying so."""
    digest = Digest(inputs=("x.jsonl",), counts=LogCounts(0, 0, None, None), rows={}, totals={})
    text = render_report(digest, {}, tmp_path)
    assert "No `network.request` or `network.response` events" in text
    assert "No `network.bad_request` events" in text
    assert summary(digest)["network"] is None
    assert "wire requests: none in this log" in summary_lines(summary(digest))
