"""Every benchmark script runs in its smallest size (``--smoke``) and reports what it promises.

The scripts run at once, as subprocesses from the repository root, and each test waits for its
own: no figure is judged (a smoke run's numbers mean nothing), only that the script exits 0 and
its table and JSON carry the expected rows. Each script runs in a session of its own, so that
whatever is still running at the end (a ``-k`` selection leaves scripts unwaited for) goes with
its whole process group: multiprocessing children (resource_tracker, spawn_main) included, which
would otherwise keep the pipes open.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactor.server.zookeeper import LocalZooKeeper

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = (
    "admin_bench",
    "analytics_bench",
    "compaction_bench",
    "cpu_bench",
    "group_bench",
    "process_bench",
    "produce_bench",
    "purgatory_bench",
    "scale_bench",
    "security_bench",
    "storage_bench",
    "timer_bench",
    "txn_bench",
    "wire_bench",
)
WAIT_S = 60
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
KILLED_WAIT_S = 10  # for a killed script's pipes to close


class Run:
    """One script's smoke run, started at once, waited for by its test."""

    def __init__(self, name: str, out: Path) -> None:
        self.json_path = out / f"{name}.json"
        self.process = subprocess.Popen(
            [sys.executable, f"benchmarks/{name}.py", "--smoke", "--json", str(self.json_path)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, children included: see `stop`
        )

    def wait(self) -> tuple[str, dict[str, Any]]:
        """The script's stdout and JSON, after checking that it exited 0."""
        stdout, stderr = self.process.communicate(timeout=WAIT_S)
        assert self.process.returncode == 0, stderr
        return stdout, json.loads(self.json_path.read_text())

    def stop(self) -> None:
        """Kill the script's whole process group (whatever of it is left), then reap it."""
        with contextlib.suppress(ProcessLookupError):  # nothing left of the group
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.communicate(timeout=KILLED_WAIT_S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    out = tmp_path_factory.mktemp("benchmarks")
    started = {name: Run(name, out) for name in SCRIPTS}
    yield started
    for run in started.values():
        run.stop()


@pytest.mark.timeout(10)
def test_every_script_is_covered() -> None:
    assert sorted(p.stem for p in (ROOT / "benchmarks").glob("*_bench.py")) == list(SCRIPTS)


@pytest.mark.timeout(WAIT_S + 10)
def test_timer_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["timer_bench"].wait()
    assert "wheel/(heap+lock)" in stdout
    assert [r["n"] for r in document["results"]] == document["parameters"]["sizes"]
    for result in document["results"]:
        assert set(result["ns_per_step"]) == {"wheel", "heap", "heap+lock"}
        assert set(result["bytes_per_task"]) == {"wheel", "heap"}


@pytest.mark.timeout(WAIT_S + 10)
def test_storage_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["storage_bench"].wait()
    assert "log/raw" in stdout
    shapes = ["1KiB x1", "1KiB x10", "100KiB x1", "100KiB x100"]
    assert [r["shape"] for r in document["append"]] == shapes * 2  # default and rolling segments
    assert len(document["reads"]) == 6  # 2 index intervals x 3 read sizes
    assert [r["shape"] for r in document["recovery"]] == shapes


@pytest.mark.timeout(WAIT_S + 10)
def test_purgatory_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["purgatory_bench"].wait()
    assert "Highest sustained rate" in stdout
    for goal in ("goal 50,000 ops/s with tracing off", "goal tracing on >= 50% of tracing off"):
        assert goal in stdout, goal
    assert document["model"] == "3 of 100 keys"  # Kafka's key model is the default
    assert [b["tracing"] for b in document["best"]] == [False, True]
    assert {p["tracing"] for p in document["probes"]} == {False, True}
    assert all(p["errors"] == 0 for p in document["probes"])
    # past the ceiling: bounded, then the unbounded baseline (none when no rate was sustained)
    ceiling = next(b["rate"]["median"] for b in document["best"] if not b["tracing"])
    overload = document["overload"]
    assert [p["edge_limit"] for p in overload] == ([500, None] if ceiling else [])
    assert ("Past the ceiling" in stdout) == bool(ceiling)


@pytest.mark.timeout(WAIT_S + 10)
def test_group_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["group_bench"].wait()
    for title in ("commit/produce", "join->sync ms", "beyond session ms"):
        assert title in stdout, title
    commits = document["commits"]
    assert [c["in_flight"] for c in commits] == document["parameters"]["in_flight"]
    # a smoke window is 0.1 s: on a loaded machine it may see no answer, the run must see some
    assert all(c["errors"] == 0 and c["answered"] > 0 for c in commits)
    assert document["commit_batch_bytes"] > 0
    rebalances, [failover] = document["rebalances"], document["failovers"]
    assert [r["case"] for r in rebalances] == ["leave", "crash"]
    for run in [*rebalances, failover]:
        assert run["error"] == "" and run["total_ms"] > 0, run
    assert failover["elected_ms"] <= failover["total_ms"]


@pytest.mark.timeout(WAIT_S + 10)
def test_admin_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["admin_bench"].wait()
    for title in ("grow/create", "p99 during/before", "lost"):
        assert title in stdout, title
    grows = document["add_partitions"]
    assert [g["path"] for g in grows] == ["in-process", "wire"]
    for grow in grows:
        [run] = grow["runs"]
        assert run["error"] == "", run
        assert 0 < run["grow_call_ms"] < run["grow_to_ack_ms"], run
        assert 0 < run["create_call_ms"] < run["create_to_ack_ms"], run
        assert run["existing_ms"] > 0 and grow["summary"]["ratio"]["median"] > 0
    [move] = document["reassignments"]
    assert move["error"] == "" and move["reassign_s"] > 0, move
    assert move["moved_mib"] > 0 and move["before_acks"] > 0
    assert move["acked"] > 0 and move["lost"] == 0 and move["failed"] == 0, move


@pytest.mark.timeout(WAIT_S + 10)
def test_compaction_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["compaction_bench"].wait()
    assert "cleaner/raw" in stdout
    [compaction] = document["compactions"]
    assert compaction["segments"] > 1 and compaction["messages_read"] > 0
    assert 0 < compaction["bytes_written"] < compaction["dirty_bytes"]
    assert compaction["cleaner_s"] > 0 and compaction["raw_s"] > 0


@pytest.mark.timeout(WAIT_S + 10)
def test_produce_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["produce_bench"].wait()
    assert "of the tell/queue.Queue rate" in stdout
    assert [p["tracing"] for p in document["probes"]] == [False, True]
    kinds = {(c["kind"], c["inbox"]) for c in document["ceilings"]}
    # raw tells and ping-pongs on both inboxes, and the ping-pong through TracedActors
    assert ("ping-pong", "TracedActor, tracing off") in kinds
    assert len(kinds) == 5 and len(document["ceilings"]) == 10  # at the start and the end
    assert "a hop through the actor runtime (tracing off)" in stdout
    assert set(document["summary"]["ratios"]) == {f"{k}/{i}" for k, i in kinds}


@pytest.mark.timeout(WAIT_S + 10)
def test_analytics_bench(runs: dict[str, Run]) -> None:
    stdout, document = runs["analytics_bench"].wait()
    assert "tracing costs at most" in stdout
    assert [p["tracing"] for p in document["tracing_cost"]["probes"]] == [False, True]
    [size] = document["analysis"]
    assert size["events"] == document["parameters"]["sizes"][0]
    assert size["baseline_events_per_s"] > 0


@pytest.mark.timeout(WAIT_S + 10)
def test_wire_bench(runs: dict[str, Run]) -> None:
    pytest.importorskip("confluent_kafka")  # the clients it measures (librdkafka)
    stdout, document = runs["wire_bench"].wait()
    assert "wire acks=all / raw TCP" in stdout
    [run] = document["runs"]
    records = document["parameters"]["records"]
    for produced in ("acks_1", "acks_all", "in_process", "mock_produce"):
        assert run[produced]["delivered"] == records and run[produced]["errors"] == 0, produced
    assert run["consume"]["records"] == run["consume"]["expected"] >= records
    assert run["mock_consume"]["records"] == run["mock_consume"]["expected"] > 0
    assert run["acks_all"]["requests"] > 0 and run["raw"]["total_bytes"] > 0
    for startup in ("first_ack_created", "first_ack_auto"):
        assert run[startup]["error"] == "" and run[startup]["total_s"] > 0, startup
    verdicts = [row["met"] for row in document["summary"] if row["goal"]]
    assert len(verdicts) == 4 and set(verdicts) <= {"met", "not met"}


@pytest.mark.timeout(WAIT_S + 10)
def test_security_bench(runs: dict[str, Run]) -> None:
    pytest.importorskip("confluent_kafka")  # the clients it measures (librdkafka)
    stdout, document = runs["security_bench"].wait()
    for title in ("x PLAINTEXT", "handshakes/s", "pool granted MiB"):
        assert title in stdout, title
    assert document["errors"] == []
    [run] = document["runs"]
    assert sorted(run) == ["PLAINTEXT", "SASL_SSL", "SSL"]
    for result in run.values():
        assert result["produce_rps"] > 0 and result["consume_rps"] > 0, result
        assert result["handshakes_per_s"] > 0, result
    memory = document["memory"]
    # two 100 MiB frames granted by the 200 MiB pool, the 48 others left unread
    assert memory["pool_allocated_mib"] == 200 and memory["waiting_connections"] == 48


@pytest.mark.timeout(WAIT_S + 10)
def test_txn_bench(runs: dict[str, Run]) -> None:
    pytest.importorskip("confluent_kafka")  # the clients it measures (librdkafka)
    stdout, document = runs["txn_bench"].wait()
    for title in (
        "commit latency p99",
        "transactional / plain",
        "read_committed / read_uncommitted",
    ):
        assert title in stdout, title
    [run] = document["runs"]
    assert [t["size"] for t, _ in run["produce"]] == list(document["parameters"]["sizes"])
    for transactional, plain in run["produce"]:
        assert (transactional["mode"], plain["mode"]) == ("transactional", "plain")
        for result in (transactional, plain):
            assert result["errors"] == 0 and result["delivered"] == result["records"], result
        assert 0 < transactional["p50_ms"] <= transactional["p99_ms"], transactional
    committed, uncommitted = run["consume"]
    assert (committed["isolation"], uncommitted["isolation"]) == ISOLATION_LEVELS
    for consumed in (committed, uncommitted):
        assert consumed["records"] == consumed["expected"] > 0 and consumed["errors"] == 0


@pytest.mark.timeout(WAIT_S + 10)
def test_cpu_bench(runs: dict[str, Run]) -> None:
    pytest.importorskip("confluent_kafka")  # the client that drives the serve process
    stdout, document = runs["cpu_bench"].wait()
    assert "CPU s / 100k" in stdout
    [sample] = document["brokers_1_dispatcher"]
    # every record acknowledged and read back; the CPU figure itself may round to 0 at this
    # size (the kernel counts CPU in 10 ms ticks)
    assert sample["produce_rate"] > 0 and sample["consume_rate"] > 0, sample
    assert sample["produce_cpu"] >= 0 and sample["consume_cpu"] >= 0, sample
    for phase in ("produce 1 broker RF 1", "consume 1 broker RF 1"):
        assert phase in stdout, phase


@pytest.mark.timeout(WAIT_S + 10)
def test_scale_bench(runs: dict[str, Run]) -> None:
    pytest.importorskip("confluent_kafka")  # the client of serve's first ack (librdkafka)
    stdout, document = runs["scale_bench"].wait()
    for title in ("ms/partition", "p99/base", "spawn->first ack s", "The issue's goals"):
        assert title in stdout, title
    [size] = document["sizes"]  # the smoke run: the 10-partition baseline alone
    assert size["status"] == "ok", size
    result = size["result"]
    assert result["replicas"] == 3 * size["partitions"] == 30
    assert 0 < result["leaders_s"] <= result["create_s"] and result["idle_cpu_pct"] >= 0
    assert result["threads"] > 1 and result["rss_kib"] > 0
    produced = result["produce"]
    assert produced["acked"] == produced["sent"] > 0 and produced["errors"] == 0, produced
    assert 0 < produced["p50_ms"] <= produced["p99_ms"]
    [startup] = document["startups"]
    assert startup["error"] == "" and 0 < startup["ready_s"] <= startup["first_ack_s"], startup
    assert startup["exit_s"] > 0  # SIGTERM: a clean exit, not the SIGKILL after the grace


def _still_running(pid: int, marker: str) -> bool:
    """Whether `pid` is a live process (not a zombie) with `marker` in its command line."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, IndexError):
        return False
    return state not in "ZXx" and marker in arguments


@pytest.mark.timeout(WAIT_S + 10)
def test_process_bench(runs: dict[str, Run]) -> None:
    pytest.importorskip("confluent_kafka")  # the clients it measures (librdkafka)
    available = LocalZooKeeper.available()
    if not available:
        pytest.skip(f"no ZooKeeper: {available.reason}")
    stdout, document = runs["process_bench"].wait()
    for title in ("processes / in-process", "Failover after SIGKILL", "Controlled shutdown"):
        assert title in stdout, title
    [run] = document["runs"]
    records = document["parameters"]["records"]
    for cluster in ("processes", "in_process"):
        assert run[cluster]["delivered"] == records and run[cluster]["errors"] == 0, cluster
    memory = run["memory"]
    assert len(memory["broker_loaded_kib"]) == 3 and min(memory["broker_loaded_kib"]) > 0
    assert memory["zookeeper_kib"] > 0 and memory["in_process_before_kib"] > 0
    failover, shutdown = run["failover"], run["shutdown"]
    assert failover["error"] == "" and failover["expired_ms"] > 0, failover
    assert 0 < failover["elected_ms"] <= failover["first_ack_ms"], failover
    assert shutdown["error"] == "" and shutdown["led"], shutdown
    assert shutdown["moved_ms"] > 0 and shutdown["exit_ms"] > 0, shutdown
    assert run["paced_reports"] > 0 and run["paced_failures"] == 0
    # ZooKeeper and the brokers run detached (out of reach of `Run.stop`): none may be left
    left = [pid for pid in run["pids"] if _still_running(pid, "process-bench-")]
    assert not left, f"still running after the benchmark: {left}"
