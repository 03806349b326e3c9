"""A library prints nothing: kafkactor is silent until the application calls
`tracing.configure(...)`, and it leaves the application's own structlog configuration alone.

Each program runs in a fresh interpreter (structlog's configuration and kafkactor's tracing are
process-global, and an earlier test of this process may have configured either), exactly as
an application would use kafkactor: nothing configured beforehand.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _run(program: str, cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def _assert_silent(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""


@pytest.mark.timeout(60)
def test_opening_appending_and_flushing_a_log_prints_nothing(tmp_path: Path) -> None:
    done = _run(
        """
        from pathlib import Path

        import structlog

        from kafkactor.storage import Log, LogConfig, Record

        log = Log(Path("data/events-0"), LogConfig(segment_bytes=1024))
        for n in range(40):  # several segments: rolls are logged too
            log.append_as_leader(
                [Record(key=b"k", value=b"value %d" % n, timestamp_ms=n)], leader_epoch=0
            )
        log.flush()
        assert log.log_end_offset == 40
        log.close()
        assert not structlog.is_configured()  # kafkactor left structlog to the application
        """,
        tmp_path,
        timeout_s=50,
    )
    _assert_silent(done)
    assert len(list((tmp_path / "data" / "events-0").glob("*.log"))) > 1  # it did roll


@pytest.mark.timeout(90)
def test_a_cluster_with_a_broker_crash_and_restart_prints_nothing(tmp_path: Path) -> None:
    done = _run(
        """
        import structlog

        from kafkactor import Cluster

        with Cluster(brokers=3, session_timeout_ms=1500) as cluster:
            cluster.create_topic("orders", partitions=2, replication_factor=3)
            producer = cluster.producer(
                acks=-1, timeout_ms=5000, retries=50, retry_backoff_ms=100
            )
            for n in range(6):
                producer.send("orders", b"before %d" % n, partition=n % 2).result(timeout=10)
            consumer = cluster.consumer()
            consumer.assign([("orders", 0), ("orders", 1)])
            received = []
            while len(received) < 6:
                received += consumer.poll(timeout_ms=1000)
            victim = cluster.leader("orders", 0)
            cluster.kill_broker(victim)  # its session expires, a new leader is elected
            cluster.wait_for_leader("orders", 0, not_broker=victim)
            producer.send("orders", b"after the crash", partition=0).result(timeout=10)
            cluster.restart_broker(victim)  # recovers its log and catches up
            producer.close()
        assert sorted(r.value for r in received) == [b"before %d" % n for n in range(6)]
        assert not structlog.is_configured()
        """,
        tmp_path,
        timeout_s=80,
    )
    _assert_silent(done)


@pytest.mark.timeout(60)
def test_an_applications_structlog_configuration_is_left_as_it_was(tmp_path: Path) -> None:
    done = _run(
        """
        import io
        import json
        from pathlib import Path

        import structlog

        app_output = io.StringIO()
        structlog.configure(
            processors=[structlog.processors.JSONRenderer()],
            logger_factory=structlog.PrintLoggerFactory(app_output),
            cache_logger_on_first_use=False,
        )
        before = structlog.get_config()
        before_processors = list(before["processors"])

        from kafkactor import tracing
        from kafkactor.storage import Log, LogConfig, Record

        def use_kafkactor(name: str) -> None:
            log = Log(Path(name), LogConfig())
            log.append_as_leader([Record(key=None, value=b"v", timestamp_ms=0)], leader_epoch=0)
            log.flush()
            log.close()

        use_kafkactor("quiet-0")  # tracing not configured: dropped
        events = io.BytesIO()
        tracing.configure(stream=events)  # the application asks for kafkactor's event log
        tracing.get_logger("app.side").info("side.event")
        use_kafkactor("traced-0")
        tracing.flush()
        structlog.get_logger("app").info("app.event", n=1)

        after = structlog.get_config()
        assert after.keys() == before.keys()
        changed = [key for key in before if after[key] is not before[key]]
        assert changed == [], changed
        assert list(after["processors"]) == before_processors
        # the application's chain got its own event and none of kafkactor's
        assert [json.loads(line)["event"] for line in app_output.getvalue().splitlines()] == [
            "app.event"
        ]
        # kafkactor's events went to the sink the application gave tracing, and only there
        written = [json.loads(line)["event"] for line in events.getvalue().splitlines()]
        assert "side.event" in written and "log.flush" in written, written
        assert not any(b"quiet-0" in line for line in events.getvalue().splitlines())
        """,
        tmp_path,
        timeout_s=50,
    )
    _assert_silent(done)
