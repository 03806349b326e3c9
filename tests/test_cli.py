"""The `kafkactor` command as a user runs it: version, the demo topology, the timer demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kafkactor import __version__
from kafkactor.demo import run_demo

KAFKACTOR = [sys.executable, "-m", "kafkactor.cli"]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KAFKACTOR, *args], cwd=cwd, capture_output=True, text=True, timeout=90, check=False
    )


@pytest.mark.timeout(60)
def test_version(tmp_path: Path) -> None:
    done = run("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == f"kafkactor {__version__}"


@pytest.mark.timeout(60)
def test_an_unknown_command_is_refused_with_usage(tmp_path: Path) -> None:
    done = run("no-such-command", cwd=tmp_path)
    assert done.returncode == 2
    assert "usage: kafkactor" in done.stderr


@pytest.mark.timeout(90)
def test_the_demo_survives_a_leader_crash_and_loses_no_acks_all_record(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines: list[str] = []
    result = run_demo(seconds=7.5, events_path=events, print_fn=lines.append)

    acks_all, acks_one = result.producers
    assert acks_all.acks == -1 and acks_one.acks == 1
    assert acks_all.acked > 0 and acks_one.acked > 0
    assert result.missing_acked == 0  # Kafka's promise for acks=all
    assert result.missing_by_acks[-1] == 0
    # the crash shows in the event log: a new leader, and the old one back in the ISR
    assert result.events["broker.crash"] == 1
    assert result.events["controller.leader_elected"] >= 3  # two new partitions + a failover
    assert result.events["partition.isr_expand"] >= 1
    assert any("crashed" in line for line in lines)
    assert any("restarted" in line for line in lines)
    logged = [json.loads(line) for line in events.read_bytes().splitlines()]
    assert all(event["event"] for event in logged)  # every line is a JSON event
    failovers = [
        e
        for e in logged
        if e["event"] == "controller.leader_elected"
        and e["previous_leader"] is not None
        and e["previous_leader"] >= 0
        and e["leader"] >= 0
        and e["leader"] != e["previous_leader"]
    ]
    assert failovers, "no partition moved from its crashed leader to a live one"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_demo_command_prints_a_summary_a_trace_writes_the_log_and_analyses_it(
    tmp_path: Path,
) -> None:
    done = run("demo", "--seconds", "3", "--events", "out.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "acks=all records acked" in done.stdout
    assert "the slowest produce request" in done.stdout
    assert "ProduceRequest" in done.stdout
    acks_all_line = next(line for line in done.stdout.splitlines() if "acks=all records" in line)
    assert acks_all_line.endswith("acknowledged but lost: 0")
    assert (tmp_path / "out.jsonl").stat().st_size > 0
    # the Spark analysis ran on that log and the demo names the report it wrote
    report = tmp_path / "kafkactor-demo-analysis" / "report.md"
    assert f"report   {report.relative_to(tmp_path)}" in done.stdout
    assert report.read_text(encoding="utf-8").startswith("#")
    assert "produce acks=all" in done.stdout  # the latency summary, by acks
    assert "spark:" in done.stderr  # the progress line while Spark ran


@pytest.mark.timeout(60)
def test_the_timer_demo_runs(tmp_path: Path) -> None:
    done = run("timer-demo", "--seconds", "0.5", "--rate", "500", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "expired by the timer" in done.stdout
