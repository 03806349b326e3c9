"""`analyze` over the log of a real run: every table against the run's own counts and against
the same numbers computed in Python from the JSON lines; the report and the plots.

One analysis (plots on) per module; each table is read back once.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafkactor.analytics import AnalysisResult, analyze
from tests.analytics.support import (
    PNG_MAGIC,
    TABLE_COLUMNS,
    TIMELINE_EVENTS,
    TOPIC,
    RecordedRun,
    actor_type,
    counts,
    grouped,
    named,
    read_events,
    stats,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LATENCY_QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
DELAY_QUANTILES = (("p50", 0.5), ("p99", 0.99))


@dataclass(frozen=True)
class Analysis:
    run: RecordedRun
    result: AnalysisResult
    events: list[dict[str, Any]]  # the log, parsed in Python
    tables: dict[str, list[dict[str, Any]]]  # each table's rows
    schemas: dict[str, list[tuple[str, str]]]  # each table's (column, Spark type)


@pytest.fixture(scope="module")
def analysis(
    spark: Any, recorded_run: RecordedRun, tmp_path_factory: pytest.TempPathFactory
) -> Analysis:
    out = tmp_path_factory.mktemp("analysis") / "out"
    result = analyze(recorded_run.path, out, spark=spark, plots=True)
    tables, schemas = {}, {}
    for name, path in result.tables.items():
        frame = spark.read.parquet(str(path))
        schemas[name] = [(f.name, f.dataType.simpleString()) for f in frame.schema.fields]
        tables[name] = [row.asDict() for row in frame.collect()]
    return Analysis(recorded_run, result, read_events(recorded_run.path), tables, schemas)


def close(actual: float | None, expected: float) -> bool:
    return actual is not None and actual == pytest.approx(expected, rel=1e-9, abs=1e-9)


def assert_stats(row: dict[str, Any], expected: dict[str, float], suffix: str = "_ms") -> None:
    assert row["count" if "count" in row else "samples"] == expected["count"], row
    for name in ("mean", "max", *(k for k in expected if k.startswith("p"))):
        assert close(row[name + suffix], expected[name]), (name, row, expected)


# -- shape -----------------------------------------------------------------------------------


def test_every_table_is_written_as_parquet_with_the_contract_columns(analysis: Analysis) -> None:
    result = analysis.result
    assert set(result.tables) == set(TABLE_COLUMNS)
    for name, path in result.tables.items():
        assert path == result.out_dir / f"{name}.parquet" and path.is_dir()
        assert [c for c, _ in analysis.schemas[name]] == [c for c, _ in TABLE_COLUMNS[name]]
        types = dict(analysis.schemas[name])
        for column, spark_type in TABLE_COLUMNS[name]:
            if spark_type is not None:
                assert types[column] == spark_type, (name, column, types[column])


def test_every_line_of_a_clean_log_is_an_event(analysis: Analysis) -> None:
    assert analysis.result.events == len(analysis.events)
    assert analysis.result.corrupt_lines == 0
    assert analysis.tables["corrupt_lines"] == []
    json.dumps(analysis.result.summary)  # JSON-able


def test_event_counts_equal_the_lines_of_each_type(analysis: Analysis) -> None:
    table = {row["event"]: row["count"] for row in analysis.tables["event_counts"]}
    assert len(table) == len(analysis.tables["event_counts"])  # one row per type
    assert table == dict(counts(analysis.events))


# -- the new events themselves ----------------------------------------------------------------


def test_the_log_has_a_request_event_per_send_and_a_response_per_answer(analysis: Analysis) -> None:
    run, events = analysis.run, analysis.events
    requests = named(events, "produce.request")
    responses = named(events, "produce.response")
    assert Counter(e["acks"] for e in requests) == {
        -1: run.acks_all + 1,
        1: run.acks_one,
        0: run.acks_zero,
        run.invalid_acks: 1,
    }
    assert Counter((e["acks"], e["outcome"]) for e in responses) == {
        (-1, "completed"): run.acks_all,
        (-1, "expired"): 1,
        (1, "completed"): run.acks_one,
        (run.invalid_acks, "error"): 1,
    }
    by_request = {(e["trace_id"], e["correlation_id"]): e for e in requests}
    received = {  # when each replica manager took a produce request out of its mailbox
        (e["trace_id"], e["actor"]): e["ts_ms"]
        for e in named(events, "msg.recv")
        if e["msg_type"] == "ProduceRequest"
    }
    for response in responses:
        request = by_request[(response["trace_id"], response["correlation_id"])]
        assert (response["acks"], response["partitions"]) == (request["acks"], 1)
        assert response["broker"] == request["broker"]
        # measured from the receipt: never longer than the time since the replica manager
        # took the request out of its mailbox
        receipt = received[(request["trace_id"], request["actor"])]
        assert 0 <= response["latency_ms"] <= response["ts_ms"] - receipt
        codes = response["error_codes"]
        if response["outcome"] == "completed":
            assert codes == [0]
        elif response["outcome"] == "expired":
            assert codes == [7] and response["waited"]  # REQUEST_TIMED_OUT, after waiting
            leader = run.leaders[run.expired_partition]
            assert response["actor"] == f"broker/{leader}/purgatory/produce"
            assert response["latency_ms"] >= run.expiry_ms
        else:
            assert codes == [21] and not response["waited"]  # INVALID_REQUIRED_ACKS
            assert response["actor"] == f"broker/{run.leaders[0]}/replica-manager"
    for expiry in named(events, "timer.expire"):
        assert expiry["lateness_ms"] == expiry["ts_ms"] - expiry["deadline_ms"] >= 0


# -- latency ---------------------------------------------------------------------------------


def latency_rows(analysis: Analysis) -> dict[tuple[str, str, int | None, str], dict[str, Any]]:
    rows = {
        (r["request"], r["fetcher"], r["acks"], r["outcome"]): r for r in analysis.tables["latency"]
    }
    assert len(rows) == len(analysis.tables["latency"])  # one row per group
    return rows


def test_produce_latency_counts_are_what_the_run_sent(analysis: Analysis) -> None:
    run = analysis.run
    produce = {
        (acks, outcome): row["count"]
        for (request, fetcher, acks, outcome), row in latency_rows(analysis).items()
        if request == "produce"
    }
    assert produce == {
        (-1, "completed"): run.acks_all,
        (1, "completed"): run.acks_one,
        (run.invalid_acks, "error"): 1,
        (-1, "expired"): 1,
    }
    assert all(
        fetcher == "producer"
        for request, fetcher, _, _ in latency_rows(analysis)
        if request == "produce"
    )


def test_latency_statistics_equal_exact_percentiles_over_the_logged_latencies(
    analysis: Analysis,
) -> None:
    def key(e: dict[str, Any]) -> tuple[str, str, int | None, str]:
        if e["event"] == "produce.response":
            return ("produce", "producer", e["acks"], e["outcome"])
        return ("fetch", e["fetcher"], None, e["outcome"])

    responses = named(analysis.events, "produce.response", "fetch.response")
    expected = grouped(responses, key, lambda e: e["latency_ms"])
    rows = latency_rows(analysis)
    assert set(rows) == set(expected)
    assert ("fetch", "consumer", None, "completed") in rows  # the polls were answered
    assert ("fetch", "follower", None, "completed") in rows  # the followers replicated
    for group, values in expected.items():
        assert_stats(rows[group], stats(values, LATENCY_QUANTILES))


def test_percentiles_are_monotone(analysis: Analysis) -> None:
    for name, quantiles in (
        ("latency", ("p50_ms", "p90_ms", "p99_ms", "max_ms")),
        ("mailbox_delay", ("p50_ms", "p99_ms", "max_ms")),
        ("timer_lateness", ("p50_ms", "p99_ms", "max_ms")),
        ("hw_lag", ("p99_lag", "max_lag")),
    ):
        for row in analysis.tables[name]:
            values = [row[q] for q in quantiles]
            assert values == sorted(values), (name, row)


# -- traces and mailboxes --------------------------------------------------------------------


def test_trace_hops_equal_the_msg_recv_lines_of_each_trace(analysis: Analysis) -> None:
    receipts = [e for e in named(analysis.events, "msg.recv") if e["trace_id"]]
    hops = Counter(e["trace_id"] for e in receipts)
    actors = {t: len({e["actor"] for e in receipts if e["trace_id"] == t}) for t in hops}
    stamps = grouped(
        (e for e in analysis.events if e.get("trace_id")),
        lambda e: e["trace_id"],
        lambda e: e["ts_ms"],
    )
    table = {row["trace_id"]: row for row in analysis.tables["trace_hops"]}
    assert "" not in table
    assert set(hops) <= set(table) <= set(stamps)
    for trace_id, row in table.items():
        assert row["hops"] == hops.get(trace_id, 0), row
        assert row["actors"] == actors.get(trace_id, 0), row
        assert row["duration_ms"] == max(stamps[trace_id]) - min(stamps[trace_id]), row

    roots: dict[str, tuple[int, str]] = {}  # the earliest send; in a tie, the first logged
    for e in named(analysis.events, "msg.send"):
        if e["trace_id"] not in roots or e["ts_ms"] < roots[e["trace_id"]][0]:
            roots[e["trace_id"]] = (e["ts_ms"], e["msg_type"])
    for trace_id, row in table.items():
        if trace_id in roots:
            assert row["root"] == roots[trace_id][1], (row, roots[trace_id])
    longest = max(hops, key=lambda t: hops[t])  # an acks=all produce crosses many actors
    assert table[longest]["hops"] == hops[longest] > 3


def test_mailbox_delay_per_actor_type(analysis: Analysis) -> None:
    table = {row["actor_type"]: row for row in analysis.tables["mailbox_delay"]}
    assert len(table) == len(analysis.tables["mailbox_delay"])  # one row per type
    delays = grouped(
        named(analysis.events, "msg.recv"),
        lambda e: actor_type(e["actor"]),
        lambda e: e["mailbox_ms"],
    )
    assert {"replica-manager", "partition", "purgatory/produce", "producer"} <= set(table)
    assert set(table) == set(delays)
    for kind, values in delays.items():
        assert_stats(table[kind], stats(values, DELAY_QUANTILES))


# -- brokers, partitions, purgatories --------------------------------------------------------


def test_timeline_holds_the_crash_and_the_election_it_caused(analysis: Analysis) -> None:
    run, rows = analysis.run, analysis.tables["timeline"]
    stamps = [row["ts_ms"] for row in rows]
    assert stamps == sorted(stamps)
    assert Counter(row["event"] for row in rows) == Counter(
        e["event"] for e in analysis.events if e["event"] in TIMELINE_EVENTS
    )
    crash = [r for r in rows if r["event"] == "broker.crash"]
    assert [r["broker"] for r in crash] == [run.victim]
    (failover,) = [  # logged by the controller once the victim's session expired
        e
        for e in named(analysis.events, "controller.leader_elected")
        if (e["topic"], e["partition"], e["previous_leader"])
        == (TOPIC, run.victim_partition, run.victim)
    ]
    assert failover["ts_ms"] >= crash[0]["ts_ms"]
    in_timeline = [
        r
        for r in rows
        if (r["ts_ms"], r["event"], r["broker"], r["topic"], r["partition"])
        == (failover["ts_ms"], failover["event"], failover["broker"], TOPIC, run.victim_partition)
    ]
    assert len(in_timeline) == 1, in_timeline
    assert all(isinstance(r["detail"], str) for r in rows)


def test_hw_lag_has_a_row_per_follower_and_the_logged_lags(analysis: Analysis) -> None:
    run = analysis.run
    samples: dict[tuple[str, int, int, int], list[float]] = {}
    for e in named(analysis.events, "partition.hw_advance"):
        for follower, offset in e["follower_log_end_offsets"].items():
            key = (e["topic"], e["partition"], e["broker"], int(follower))
            samples.setdefault(key, []).append(e["log_end_offset"] - offset)
    table = {
        (r["topic"], r["partition"], r["leader"], r["follower"]): r
        for r in analysis.tables["hw_lag"]
    }
    assert set(table) == set(samples)
    for partition, leader in run.leaders.items():
        for follower in run.replicas[partition]:
            if follower != leader:
                assert (TOPIC, partition, leader, follower) in table
    for key, lags in samples.items():
        expected = stats(lags, (("p99", 0.99),))
        row = table[key]
        assert row["samples"] == len(lags)
        assert close(row["mean_lag"], expected["mean"]), row
        assert close(row["p99_lag"], expected["p99"]), row
        assert close(row["max_lag"], expected["max"]), row


def test_purgatory_timeline_per_second_window(analysis: Analysis) -> None:
    expected: dict[tuple[int, str, int], Counter[str]] = {}
    peaks: dict[tuple[int, str, int], int] = {}
    for e in analysis.events:
        if not e["event"].startswith("purgatory."):
            continue
        key = (e["broker"], e["purgatory"], e["ts_ms"] - e["ts_ms"] % 1000)
        totals = expected.setdefault(key, Counter())
        if e["event"] == "purgatory.watch":
            totals["watched"] += 1
        elif e["event"] == "purgatory.expire":
            totals["expired"] += 1
        elif e["event"] == "purgatory.complete":  # one arrival, or a key change's completions
            totals["completed"] += e.get("completed", 1)
        elif e["event"] == "purgatory.purge":
            totals["purged"] += e["purged"]
        peaks[key] = max(peaks.get(key, 0), e["delayed"])
    table = {
        (r["broker"], r["purgatory"], r["window_start_ms"]): r
        for r in analysis.tables["purgatory_timeline"]
    }
    assert set(expected) <= set(table)  # a window may also hold only timer events
    for key, row in table.items():
        totals = expected.get(key, Counter())
        for column in ("watched", "completed", "expired", "purged"):
            assert row[column] == totals[column], (column, row, totals)
        if key in peaks:
            assert row["max_delayed"] == peaks[key], (row, peaks[key])
    leader = analysis.run.leaders[analysis.run.expired_partition]
    assert (
        sum(
            row["expired"]
            for (broker, purgatory, _), row in table.items()
            if (broker, purgatory) == (leader, "Produce")
        )
        == 1
    )  # the stuck acks=all send


def test_timer_lateness_per_broker(analysis: Analysis) -> None:
    expires = named(analysis.events, "timer.expire")
    lateness = grouped(expires, lambda e: e["broker"], lambda e: e["lateness_ms"])
    table = {row["broker"]: row for row in analysis.tables["timer_lateness"]}
    assert set(table) == set(lateness)
    assert analysis.run.leaders[analysis.run.expired_partition] in table  # the stuck send
    for broker, values in lateness.items():
        assert min(values) >= 0
        assert_stats(table[broker], stats(values, DELAY_QUANTILES))


# -- report and plots ------------------------------------------------------------------------


def test_report_names_the_key_numbers_and_embeds_every_plot(analysis: Analysis) -> None:
    result = analysis.result
    assert result.report == result.out_dir / "report.md"
    text = result.report.read_text()
    assert text.startswith("#")  # a title
    assert str(analysis.run.path) in text or analysis.run.path.name in text  # the input
    events = result.events
    assert f"{events:,}" in text or str(events) in text
    for word in ("latency", "mailbox", "timeline", "purgatory", "hops"):
        assert word in text.lower(), word
    for plot in result.plots:
        assert plot.relative_to(result.out_dir).as_posix() in text, plot


def test_plots_are_png_files(analysis: Analysis) -> None:
    plots: tuple[Path, ...] = analysis.result.plots
    # latency, purgatory, mailbox delay, hops per trace, timer lateness (the run has expiries)
    assert len(plots) >= 5
    for plot in plots:
        assert plot.parent == analysis.result.out_dir / "plots"
        assert plot.read_bytes()[: len(PNG_MAGIC)] == PNG_MAGIC, plot
