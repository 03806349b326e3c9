"""`kafkactor serve` as a user runs it: one `bootstrap.servers=` line once every broker serves,
real clients on those addresses, a clean shutdown on SIGTERM or SIGINT, a taken port refused."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkactor.storage import CLEAN_SHUTDOWN_FILE

SERVE = [sys.executable, "-m", "kafkactor.cli", "serve"]
READY_S = 60.0

pytestmark = pytest.mark.timeout(120)


class Served:
    """A `kafkactor serve` process and the first line it printed."""

    def __init__(self, process: subprocess.Popen[str], line: str) -> None:
        self.process = process
        self.line = line

    @property
    def bootstrap_servers(self) -> str:
        return self.line.removeprefix("bootstrap.servers=")

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str, str]:
        """Signal it; its exit code, and what it printed after its first line."""
        self.process.send_signal(signum)
        out, err = self.process.communicate(timeout=READY_S)
        return self.process.returncode, out, err


def first_line(process: subprocess.Popen[str]) -> str:
    """The process's first stdout line, waited for with a deadline (not a sleep)."""
    assert process.stdout is not None
    stdout = process.stdout
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(READY_S)
    assert got, f"no line within {READY_S}s"
    return got[0].rstrip("\n")


def start(*args: str, cwd: Path) -> Served:
    process = subprocess.Popen(
        [*SERVE, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    return Served(process, first_line(process))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = start(
        "--brokers", "3", "--port", "0", "--data-dir", str(tmp_path / "data"), cwd=tmp_path
    )
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.communicate(timeout=READY_S)


def test_it_prints_one_bootstrap_line_then_serves_real_clients(served: Served) -> None:
    assert served.line.startswith("bootstrap.servers=127.0.0.1:")
    servers = served.bootstrap_servers.split(",")
    assert len(servers) == 3 and len(set(servers)) == 3

    producer = KafkaProducer(bootstrap_servers=served.bootstrap_servers)  # auto-creates
    sent = producer.send("orders", key=b"k", value=b"first").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=served.bootstrap_servers, consumer_timeout_ms=3000)
    consumer.assign([TopicPartition("orders", 0)])
    consumer.seek_to_beginning()
    assert [(r.offset, r.value) for r in consumer] == [(sent.offset, b"first")]
    consumer.close()

    code, out, err = served.stop(signal.SIGTERM)
    assert code == 0, err
    assert out == ""  # the one line, nothing after it


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_shuts_every_broker_down_cleanly(tmp_path: Path, signum: int) -> None:
    data = tmp_path / "data"
    server = start("--brokers", "2", "--port", "0", "--data-dir", str(data), cwd=tmp_path)
    code, _, err = server.stop(signum)
    assert code == 0, err
    markers = sorted(p.parent.name for p in data.glob(f"*/{CLEAN_SHUTDOWN_FILE}"))
    assert markers == ["broker-1", "broker-2"]  # flushed, checkpointed, marked clean
    assert err == ""  # a library that prints nothing, a command that says only its line


def test_ports_follow_the_first_one(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port with two free ones above it, most likely
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    if port > 65000:
        pytest.skip("the free port found is too close to the top of the range")
    try:
        server = start("--brokers", "2", "--port", str(port), cwd=tmp_path)
    except AssertionError:
        pytest.skip(f"port {port} or {port + 1} was taken meanwhile")
    try:
        assert server.line == f"bootstrap.servers=127.0.0.1:{port},127.0.0.1:{port + 1}"
    finally:
        assert server.stop()[0] == 0


def test_a_taken_port_is_refused_with_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*SERVE, "--brokers", "1", "--port", str(port)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=READY_S,
            check=False,
        )
    assert done.returncode == 1
    assert done.stdout == ""
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
