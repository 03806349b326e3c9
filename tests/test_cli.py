"""The `kafkactor` command as a user runs it: version, the demo topology, the timer demo, and
what the command does where the `analytics` extra (PySpark, matplotlib) is not installed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from kafkactor import __version__
from kafkactor.demo import run_demo
from tests.conftest import EarlyRun

KAFKACTOR = [sys.executable, "-m", "kafkactor.cli"]
INSTALL_THE_EXTRA = "pip install 'kafkactor[analytics]'"


def run(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout_s: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KAFKACTOR, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


# A sitecustomize that makes the analytics extra look uninstalled: importing pyspark or
# matplotlib (or any of their modules) fails as it does when they are absent.
WITHOUT_THE_EXTRA = textwrap.dedent(
    """
    import sys


    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in {"pyspark", "matplotlib"}:
                raise ModuleNotFoundError(f"No module named {top!r}", name=top)
            return None


    sys.meta_path.insert(0, NotInstalled())
    """
)


@pytest.fixture
def without_the_extra(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import the analytics extra."""
    site = tmp_path / "site-without-analytics"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WITHOUT_THE_EXTRA, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


@pytest.mark.timeout(60)
def test_version(tmp_path: Path) -> None:
    done = run("--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == f"kafkactor {__version__}"


@pytest.mark.timeout(60)
def test_the_version_command_names_the_build(tmp_path: Path) -> None:
    done = run("version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # the suite runs the source tree: the pure build (the compiled one is tested by ./dev test
    # through tests/test_compiled_build.py)
    assert done.stdout.startswith(f"kafkactor {__version__} (pure build, Python 3."), done.stdout


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
    # the exactly-once stage: every input once in the read_committed output, the aborted
    # transaction's records only in the read_uncommitted one, the offsets at the input's end
    stage = result.exactly_once
    assert stage is not None and stage.proved, stage
    assert stage.aborted_records > 0 and stage.aborted_visible == 0
    assert stage.read_uncommitted >= stage.inputs + stage.aborted_records
    assert any("aborted on purpose" in line for line in lines)
    assert any("exactly-once check" in line and "missing 0" in line for line in lines)


@pytest.mark.slow
@pytest.mark.timeout(300)
# Spark's start and the analysis take most of it (~1 min alone, 3 on a loaded machine): it
# starts with the session and runs beside the tests before it (tests/conftest.py)
@pytest.mark.early(*KAFKACTOR, "demo", "--seconds", "3", "--events", "out.jsonl", timeout_s=280)
def test_the_demo_command_prints_a_summary_a_trace_writes_the_log_and_analyses_it(
    early_run: EarlyRun,
) -> None:
    done, tmp_path = early_run.wait(), early_run.cwd
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


@pytest.mark.timeout(60)
def test_the_core_package_imports_without_the_analytics_extra(
    tmp_path: Path, without_the_extra: dict[str, str]
) -> None:
    program = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        import kafkactor

        try:
            import pyspark
        except ModuleNotFoundError:
            pass
        else:
            sys.exit("the extra is still importable: the test proves nothing")
        for info in pkgutil.walk_packages(kafkactor.__path__, "kafkactor."):
            if not info.name.startswith("kafkactor.analytics"):
                importlib.import_module(info.name)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=tmp_path,
        env=without_the_extra,
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == ("", "")


@pytest.mark.timeout(60)
def test_analyze_without_the_analytics_extra_exits_2_and_names_it(
    tmp_path: Path, without_the_extra: dict[str, str]
) -> None:
    (tmp_path / "events.jsonl").write_text('{"event":"x","ts_ms":1,"schema":1}\n')
    done = run("analyze", "events.jsonl", "--out", "out", cwd=tmp_path, env=without_the_extra)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("kafkactor analyze: ")
    assert INSTALL_THE_EXTRA in line and "pyspark" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(90)
def test_the_demo_without_the_analytics_extra_runs_and_says_the_analysis_was_skipped(
    tmp_path: Path, without_the_extra: dict[str, str]
) -> None:
    done = run("demo", "--seconds", "2", "--events", "e.jsonl", cwd=tmp_path, env=without_the_extra)
    assert done.returncode == 0, done.stderr
    assert "acks=all records acked" in done.stdout
    assert "the slowest produce request" in done.stdout
    [line] = done.stderr.splitlines()
    assert "analysis was skipped" in line
    assert INSTALL_THE_EXTRA in line and "pyspark" in line
    assert "Spark analysis of the event log" not in done.stdout
    assert not (tmp_path / "kafkactor-demo-analysis").exists()
