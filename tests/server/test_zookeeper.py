"""`LocalZooKeeper`: Debian's ZooKeeper 3.8 as a child process, attached or detached.

The tests that run the server skip (with the reason) where Debian's package or java is missing;
every server a test starts is stopped in teardown, even when the test fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkactor.server.zookeeper import LocalZooKeeper, LocalZooKeeperError

pytestmark = pytest.mark.timeout(60)

INSTALL = LocalZooKeeper.available()
needs_zookeeper = pytest.mark.skipif(not INSTALL, reason=f"real ZooKeeper: {INSTALL.reason}")


def fast(root: Path, port: int | None = None) -> LocalZooKeeper:
    """A server for tests: 100 ms ticks, no fsync."""
    return LocalZooKeeper(
        root,
        port=port,
        tick_time_ms=100,
        min_session_timeout_ms=200,
        max_session_timeout_ms=10_000,
        force_sync=False,
    )


@pytest.fixture
def servers() -> Iterator[list[LocalZooKeeper]]:
    """Servers to stop after the test, whatever happened in it."""
    started: list[LocalZooKeeper] = []
    yield started
    for server in started:
        server.stop(grace_s=2.0)


def read_root(hosts: str) -> list[str]:
    client = KazooClient(hosts=hosts, timeout=5.0)
    client.start(timeout=10.0)
    try:
        return sorted(client.get_children("/"))
    finally:
        client.stop()
        client.close()


def test_available_says_whether_debians_zookeeper_can_run_and_why_not(tmp_path: Path) -> None:
    if INSTALL:
        assert INSTALL.java is not None and os.access(INSTALL.java, os.X_OK)
        assert INSTALL.jars[0].name == "zookeeper.jar"
    missing = LocalZooKeeper.available(package_dir=tmp_path / "no-such-package")
    assert not missing
    assert "no-such-package" in missing.reason and "zookeeper package" in missing.reason
    no_jar = LocalZooKeeper.available(package_dir=tmp_path, java_libs=tmp_path)
    assert not no_jar
    assert str(tmp_path / "zookeeper.jar") in no_jar.reason


@needs_zookeeper
def test_starts_answers_and_stops(tmp_path: Path, servers: list[LocalZooKeeper]) -> None:
    server = fast(tmp_path / "zk")
    servers.append(server)
    assert server.start() is server
    pid = server.pid
    assert pid is not None and server.state() == "running"
    assert server.hosts == f"127.0.0.1:{server.port}"
    assert server.answers()
    assert server.four_letter_word("ruok") == "imok"
    assert "Mode: standalone" in (server.four_letter_word("srvr") or "")
    assert "zookeeper" in read_root(server.hosts)
    config = server.config_path.read_text()
    for line in (
        "tickTime=100",
        f"clientPort={server.port}",
        "clientPortAddress=127.0.0.1",
        "admin.enableServer=false",
        "minSessionTimeout=200",
        "maxSessionTimeout=10000",
        "forceSync=no",
        f"dataDir={server.data_dir}",
    ):
        assert line in config.splitlines()
    assert os.getsid(pid) == os.getsid(0)  # not detached: in the test's session
    assert server.pid_path.read_text().strip() == str(pid)

    assert server.stop() == "exited"
    assert server.state() == "dead" and server.pid is None
    assert not Path(f"/proc/{pid}").exists()  # reaped, not a zombie
    assert not server.pid_path.exists()
    assert not server.answers()
    assert "ZooKeeperServerMain" in server.log_path.read_text()
    assert server.stop() == "gone"


@needs_zookeeper
def test_a_detached_server_outlives_its_object_and_is_stopped_from_its_pid_file(
    tmp_path: Path, servers: list[LocalZooKeeper]
) -> None:
    root = tmp_path / "zk"
    server = fast(root).start(detach=True)
    servers.append(server)
    pid = server.pid
    assert pid is not None
    assert os.getsid(pid) == pid != os.getsid(0)  # a session of its own
    client = KazooClient(hosts=server.hosts, timeout=5.0)
    client.start(timeout=10.0)
    client.create("/kept", b"data")
    client.stop()
    client.close()
    with pytest.raises(LocalZooKeeperError, match=f"already running \\(pid {pid}\\)"):
        fast(root).start()

    fresh = LocalZooKeeper.attach(root)  # as another process finds it
    assert (fresh.port, fresh.pid, fresh.tick_time_ms) == (server.port, pid, 100)
    assert fresh.answers()
    assert fresh.stop() == "exited"
    assert server.state() == "dead"
    assert not (root / "zookeeper.pid").exists()

    again = LocalZooKeeper.attach(root).start(detach=True)  # same port, same data
    servers.append(again)
    assert again.port == server.port
    assert "kept" in read_root(again.hosts)
    assert again.stop() == "exited"


def test_a_pid_file_naming_another_program_is_left_alone(tmp_path: Path) -> None:
    """The OS reuses pids: a pid file is trusted only while its pid runs this zoo.cfg."""
    root = tmp_path / "zk"
    root.mkdir()
    (root / "zoo.cfg").write_text("tickTime=100\nclientPort=1\n")
    other = subprocess.Popen(["sleep", "60"])
    try:
        (root / "zookeeper.pid").write_text(f"{other.pid}\n")
        server = LocalZooKeeper.attach(root)
        assert server.state() == "dead" and server.pid is None
        assert server.stop() == "gone"
        assert other.poll() is None  # not signalled
    finally:
        other.kill()
        other.wait()


@needs_zookeeper
def test_a_server_that_cannot_start_fails_with_its_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = fast(tmp_path / "zk", port=port)
        with pytest.raises(LocalZooKeeperError) as failure:
            server.start(timeout_s=30.0)
    message = str(failure.value)
    assert f"127.0.0.1:{port}" in message
    assert "Address already in use" in message  # the log's tail
    assert server.pid is None and server.state() == "dead"
