"""`kafkactor cluster`: the launcher end to end, with a stub broker instead of `kafkactor broker`.

The stub (STUB below) reads its properties file, listens on its port, registers
`/brokers/ids/<id>` as an ephemeral znode, answers a Metadata request (the launcher's probe)
with the registered brokers and a controller, and exits cleanly on SIGTERM, closing its session.
Most tests share one ZooKeeper per module (each cluster under a chroot of its own); one test
runs the directory's own, detached ZooKeeper. Every process a test starts is stopped in its
fixture's teardown, also when the test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import javaproperties
import pytest
from kazoo.client import KazooClient

from kafkactor.actors.controller import zk_data
from kafkactor.cli import main as cli_main
from kafkactor.common import PartitionLeaderState
from kafkactor.server import launcher, processes
from kafkactor.server.cluster_files import ClusterLayout, broker_properties, write_broker_properties
from kafkactor.server.launcher import ClusterError
from kafkactor.server.zookeeper import LocalZooKeeper

pytestmark = pytest.mark.timeout(60)

INSTALL = LocalZooKeeper.available()
needs_zookeeper = pytest.mark.skipif(not INSTALL, reason=f"real ZooKeeper: {INSTALL.reason}")
KAFKACTOR = [sys.executable, "-m", "kafkactor"]
SESSION_TIMEOUT_MS = 1000  # a killed stub's registration lingers this long

STUB = """
import json, signal, socket, sys, time
import javaproperties
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError
from kafkactor.network.codec import build, decode_request, encode_response, nested, response_type

METADATA = response_type(3, 1)
BROKER = nested(METADATA, "MetadataResponseBroker")

with open(sys.argv[-1], encoding="utf-8") as file:
    props = javaproperties.load(file)
broker_id = int(props["broker.id"])
host, _, port = props["listeners"].removeprefix("PLAINTEXT://").rpartition(":")
if props.get("stub.fail.broker") == str(broker_id):
    print(f"stub broker {broker_id}: refusing to start", flush=True)
    sys.exit(3)


def on_sigterm(signum, frame):
    if props.get("stub.ignore.sigterm") != "true":
        raise SystemExit(0)


signal.signal(signal.SIGTERM, on_sigterm)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind((host, int(port)))
listener.listen()
timeout_s = int(props["zookeeper.session.timeout.ms"]) / 1000
zk = KazooClient(hosts=props["zookeeper.connect"], timeout=timeout_s)
zk.start(timeout=10)
try:
    registration = json.dumps({"version": 2, "host": host, "port": int(port), "timestamp": "0"})
    deadline = time.monotonic() + 20
    while True:
        try:
            zk.create(f"/brokers/ids/{broker_id}", registration.encode(), ephemeral=True,
                      makepath=True)
            break
        except NodeExistsError:  # a killed predecessor's session has not expired yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    print(f"stub broker {broker_id}: serving on {host}:{port}", flush=True)
    listener.settimeout(0.05)  # SIGTERM may reach another thread: the main one must look up
    uninformed = int(props.get("stub.uninformed.probes", "0"))
    while True:
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        with connection:  # a Metadata request (the launcher's probe): registered brokers
            connection.settimeout(1)
            try:
                size = connection.recv(4)
                frame = connection.recv(int.from_bytes(size, "big")) if len(size) == 4 else b""
            except OSError:
                frame = b""
            if frame:
                header, _ = decode_request(frame)
                ids = sorted(int(b) for b in zk.get_children("/brokers/ids"))
                if uninformed > 0:  # as a broker before the controller's first UpdateMetadata
                    uninformed -= 1
                    ids = []
                    print(f"stub broker {broker_id}: metadata of no broker", flush=True)
                body = build(
                    METADATA,
                    brokers=tuple(BROKER(node_id=i, host=host, port=0, rack=None) for i in ids),
                    controller_id=ids[0] if ids else -1,
                    topics=(),
                )
                connection.sendall(encode_response(3, 1, header.correlation_id, body))
finally:
    zk.stop()
    zk.close()
    print(f"stub broker {broker_id}: stopped", flush=True)
"""


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The broker command of the stub (the launcher appends the properties file)."""
    path = tmp_path_factory.mktemp("stub") / "stub_broker.py"
    path.write_text(STUB)
    return [sys.executable, str(path)]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalZooKeeper]:
    if not INSTALL:
        pytest.skip(f"real ZooKeeper: {INSTALL.reason}")
    server = LocalZooKeeper(
        tmp_path_factory.mktemp("zookeeper"),
        tick_time_ms=100,
        min_session_timeout_ms=200,
        max_session_timeout_ms=10_000,
        force_sync=False,
    )
    server.start()
    try:
        yield server
    finally:
        server.stop(grace_s=2.0)


def clean_up(root: Path) -> None:
    """Stop whatever the cluster in `root` still runs: down, then SIGKILL what survived it."""
    layout = ClusterLayout.of(root)
    if layout.state_path.exists():
        try:
            launcher.down(root, timeout_s=2.0)
        finally:
            body = json.loads(layout.state_path.read_text())
            for broker in body["brokers"]:
                if broker["pid"]:
                    marker = str(layout.properties(broker["id"]))
                    processes.send_signal(broker["pid"], marker, 9)
                    processes.wait_until_dead(broker["pid"], marker, 5.0)
    if (layout.zookeeper_dir / "zoo.cfg").exists():
        LocalZooKeeper.attach(layout.zookeeper_dir).stop(grace_s=2.0)


@dataclass
class Harness:
    root: Path
    connect: str  # the shared ZooKeeper, under a chroot of this test's own
    command: list[str]

    def up(self, brokers: int = 3, **options: Any) -> launcher.ClusterUp:
        return launcher.up(
            self.root,
            brokers,
            zookeeper=self.connect,
            broker_command=self.command,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            **options,
        )

    @contextlib.contextmanager
    def client(self) -> Iterator[KazooClient]:
        client = KazooClient(hosts=self.connect, timeout=5.0)
        client.start(timeout=10.0)
        try:
            yield client
        finally:
            client.stop()
            client.close()

    def states(self) -> dict[int, str]:
        return {b.broker_id: b.state for b in launcher.status(self.root).brokers}

    def pid(self, broker_id: int) -> int:
        pid = json.loads(ClusterLayout.of(self.root).state_path.read_text())["brokers"][
            broker_id - 1
        ]["pid"]
        assert isinstance(pid, int)
        return pid


@pytest.fixture
def harness(tmp_path: Path, zookeeper: LocalZooKeeper, stub: list[str]) -> Iterator[Harness]:
    root = tmp_path / "cluster"
    try:
        yield Harness(root, f"{zookeeper.hosts}/t-{uuid.uuid4().hex}", stub)
    finally:
        clean_up(root)


def running(root: Path, pid: int, broker_id: int) -> bool:
    return processes.process_state(pid, str(ClusterLayout.of(root).properties(broker_id))) != "dead"


# -- server.properties ------------------------------------------------------------------------


def test_broker_properties_use_kafkas_names(tmp_path: Path) -> None:
    data, events = tmp_path / "broker-2" / "data", tmp_path / "broker-2" / "events.jsonl"
    properties = broker_properties(
        2, 9093, data, "127.0.0.1:2181", events, extra={"log.retention.hours": "1"}
    )
    assert properties == {
        "broker.id": "2",
        "listeners": "PLAINTEXT://127.0.0.1:9093",
        "log.dirs": str(data),
        "zookeeper.connect": "127.0.0.1:2181/kafkactor",
        "zookeeper.session.timeout.ms": "6000",
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
        "controlled.shutdown.retry.backoff.ms": "1000",
        "kafkactor.event.log": str(events),
        "log.retention.hours": "1",
    }
    alone = broker_properties(1, 9092, data, "zk:2181/mine", events, brokers=1)
    assert alone["zookeeper.connect"] == "zk:2181/mine"
    assert alone["min.insync.replicas"] == alone["default.replication.factor"] == "1"
    assert (
        broker_properties(1, 9092, data, "zk:1", events, brokers=5)[
            "offsets.topic.replication.factor"
        ]
        == "3"
    )

    path = tmp_path / "server.properties"
    write_broker_properties(path, properties)
    with path.open(encoding="utf-8") as written:
        assert javaproperties.load(written) == properties
    try:
        from kafkactor.server.config import KafkaConfig
    except ImportError:
        return
    config = KafkaConfig.from_file(path)  # the broker's own parser reads what we write
    assert (config.broker_id, config.listeners.port) == (2, 9093)
    assert config.zookeeper_connect == "127.0.0.1:2181/kafkactor"
    assert config.event_log == events and config.ignored == ()


# -- the launcher ---------------------------------------------------------------------------


@needs_zookeeper
def test_up_status_down_with_the_directorys_own_zookeeper(tmp_path: Path, stub: list[str]) -> None:
    root = tmp_path / "cluster"
    layout = ClusterLayout.of(root)
    try:
        cluster = launcher.up(root, 3, broker_command=stub, session_timeout_ms=SESSION_TIMEOUT_MS)
        assert cluster.zookeeper_started and cluster.zookeeper_pid is not None
        assert os.getsid(cluster.zookeeper_pid) == cluster.zookeeper_pid  # detached
        assert cluster.zookeeper_connect.endswith("/kafkactor")
        ports = [b.port for b in cluster.brokers]
        assert [b.broker_id for b in cluster.brokers] == [1, 2, 3] and len(set(ports)) == 3
        assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{p}" for p in ports)
        for broker in cluster.brokers:
            assert os.getsid(broker.pid) == broker.pid  # detached
            for path in (
                layout.properties(broker.broker_id),
                layout.data_dir(broker.broker_id),
                layout.event_log(broker.broker_id),
            ):
                assert path.exists()
            assert "serving" in layout.stdout_log(broker.broker_id).read_text()
        assert (layout.zookeeper_dir / "zoo.cfg").exists()
        state = json.loads(layout.state_path.read_text())
        assert state["zookeeper"] == {"connect": cluster.zookeeper_connect, "external": False}
        assert state["broker_command"] == stub
        assert [(b["id"], b["port"], b["pid"], b["stopped"]) for b in state["brokers"]] == [
            (b.broker_id, b.port, b.pid, False) for b in cluster.brokers
        ]

        status = launcher.status(root)
        assert (status.zookeeper.state, status.zookeeper.answers) == ("running", True)
        assert [(b.state, b.registered) for b in status.brokers] == [("running", True)] * 3
        with pytest.raises(ClusterError, match="already running"):
            launcher.up(root, 3, broker_command=stub)

        actions = launcher.down(root)
        assert [a.name for a in actions] == ["broker 1", "broker 2", "broker 3", "zookeeper"]
        assert all(a.action.startswith("stopped (SIGTERM") for a in actions), actions
        status = launcher.status(root)
        assert (status.zookeeper.state, status.zookeeper.answers) == ("stopped", False)
        assert [(b.state, b.registered) for b in status.brokers] == [("stopped", None)] * 3
        assert not any(running(root, b.pid, b.broker_id) for b in cluster.brokers)

        again = launcher.up(root, 3, broker_command=stub, session_timeout_ms=SESSION_TIMEOUT_MS)
        assert again.zookeeper_started
        assert [b.port for b in again.brokers] == ports  # the same bootstrap servers
        assert [b.state for b in launcher.status(root).brokers] == ["running"] * 3
        assert launcher.down(root)[-1].action == "stopped (SIGTERM)"
    finally:
        clean_up(root)


@needs_zookeeper
def test_up_waits_until_each_broker_tells_clients_of_the_whole_cluster(harness: Harness) -> None:
    """A broker registered and listening, but not yet told of the cluster by the controller,
    answers a Metadata request with no broker and no controller; `up` does not count it as
    serving yet (a client asking it then waited 30 s for a controller)."""
    harness.up(settings={"stub.uninformed.probes": "3"})
    for broker_id in (1, 2, 3):
        log = ClusterLayout.of(harness.root).stdout_log(broker_id).read_text()
        assert log.count(f"stub broker {broker_id}: metadata of no broker") == 3, log


@needs_zookeeper
def test_kill_then_restart(harness: Harness) -> None:
    harness.up()
    old = harness.pid(2)
    with harness.client() as client:
        stale = client.exists("/brokers/ids/2").czxid

        assert str(launcher.kill(harness.root, 2)) == f"broker 2 pid {old} killed (SIGKILL)"
        assert harness.states() == {1: "running", 2: "dead", 3: "running"}
        with pytest.raises(ClusterError, match="broker 2 is dead"):
            launcher.kill(harness.root, 2)

        serving = launcher.restart(harness.root, 2)  # once its old session expired
        assert serving.pid != old and serving.broker_id == 2
        assert client.exists("/brokers/ids/2").czxid != stale
    assert harness.states() == {1: "running", 2: "running", 3: "running"}
    log = ClusterLayout.of(harness.root).stdout_log(2).read_text()
    assert log.count("stub broker 2: serving") == 2
    with pytest.raises(ClusterError, match=r"broker 2 is running \(pid \d+\): stop or kill"):
        launcher.restart(harness.root, 2)


@needs_zookeeper
def test_stop_then_restart(harness: Harness) -> None:
    harness.up()
    pid = harness.pid(3)
    action = launcher.stop(harness.root, 3)
    assert action.name == "broker 3" and action.pid == pid
    assert action.action.startswith("stopped (SIGTERM; exited in ")
    status = launcher.status(harness.root)
    assert [(b.state, b.registered) for b in status.brokers] == [
        ("running", True),
        ("running", True),
        ("stopped", False),  # deregistered on its way out
    ]
    assert not running(harness.root, pid, 3)
    assert "stub broker 3: stopped" in ClusterLayout.of(harness.root).stdout_log(3).read_text()
    launcher.restart(harness.root, 3)
    assert harness.states() == {1: "running", 2: "running", 3: "running"}


@needs_zookeeper
def test_a_broker_that_ignores_sigterm_is_killed_after_the_deadline(harness: Harness) -> None:
    harness.up(2, settings={"stub.ignore.sigterm": "true"})
    action = launcher.stop(harness.root, 1, timeout_s=0.3)
    assert action.action == "killed (SIGKILL): still running 0.3 s after SIGTERM"
    assert harness.states() == {1: "stopped", 2: "running"}
    actions = [str(a) for a in launcher.down(harness.root, timeout_s=0.3)]
    assert actions == [
        f"broker 1 pid {harness.pid(1)} was stopped",
        f"broker 2 pid {harness.pid(2)} killed (SIGKILL): still running 0.3 s after SIGTERM",
    ]  # no zookeeper line: not the directory's own


@needs_zookeeper
def test_pause_and_resume(harness: Harness) -> None:
    harness.up()
    pid = harness.pid(1)
    assert str(launcher.pause(harness.root, 1)) == f"broker 1 pid {pid} paused (SIGSTOP)"
    assert harness.states() == {1: "paused", 2: "running", 3: "running"}
    with pytest.raises(ClusterError, match="broker 1 is paused, not running"):
        launcher.pause(harness.root, 1)
    assert str(launcher.resume(harness.root, 1)) == f"broker 1 pid {pid} resumed (SIGCONT)"
    assert harness.states() == {1: "running", 2: "running", 3: "running"}
    with pytest.raises(ClusterError, match="broker 1 is running, not paused"):
        launcher.resume(harness.root, 1)

    launcher.pause(harness.root, 2)  # down stops a paused broker too (SIGTERM, then SIGCONT)
    actions = launcher.down(harness.root, timeout_s=10.0)
    assert all(a.action.startswith("stopped (SIGTERM") for a in actions), actions
    assert harness.states() == {1: "stopped", 2: "stopped", 3: "stopped"}


@needs_zookeeper
def test_status_names_the_controller_and_each_brokers_leaderships(harness: Harness) -> None:
    cluster = harness.up()
    with harness.client() as client:
        client.create(zk_data.CONTROLLER, zk_data.encode_controller(2, 0))
        for topic, partition, leader in [
            ("orders", 0, 2),
            ("orders", 1, 1),
            ("orders", 2, 2),
            ("__consumer_offsets", 1, 2),
        ]:
            state = PartitionLeaderState(
                topic=topic, partition=partition, leader=leader, leader_epoch=0, isr=(1, 2, 3)
            )
            client.create(
                zk_data.partition_state_path(topic, partition),
                zk_data.encode_partition_state(state),
                makepath=True,
            )
    status = launcher.status(harness.root)
    assert status.controller == 2
    assert status.brokers[1].leaderships == ("__consumer_offsets-1", "orders-0", "orders-2")
    port = {b.broker_id: b.port for b in cluster.brokers}
    assert launcher.format_status(status)[1:] == [
        f"broker 1  pid {harness.pid(1)}  running  127.0.0.1:{port[1]}  registered  leads 1:"
        " orders-1",
        f"broker 2  pid {harness.pid(2)}  running  127.0.0.1:{port[2]}  registered  controller"
        "  leads 3: __consumer_offsets-1 orders-0 orders-2",
        f"broker 3  pid {harness.pid(3)}  running  127.0.0.1:{port[3]}  registered  leads 0",
    ]
    assert launcher.format_status(status)[0].startswith("zookeeper  pid -  external  ")
    assert [a.name for a in launcher.down(harness.root)] == ["broker 1", "broker 3", "broker 2"]


@needs_zookeeper
def test_a_recorded_pid_that_now_names_another_program_is_left_alone(harness: Harness) -> None:
    harness.up()
    launcher.kill(harness.root, 2)
    layout = ClusterLayout.of(harness.root)
    other = subprocess.Popen(["sleep", "60"])  # as if the OS had given broker 2's pid to it
    try:
        body = json.loads(layout.state_path.read_text())
        body["brokers"][1]["pid"] = other.pid
        layout.state_path.write_text(json.dumps(body))
        assert harness.states()[2] == "dead"
        for action in (launcher.kill, launcher.stop, launcher.pause):
            with pytest.raises(ClusterError, match="broker 2 is dead"):
                action(harness.root, 2)
        actions = [str(a) for a in launcher.down(harness.root)]
        assert f"broker 2 pid {other.pid} was dead" in actions
        assert other.poll() is None  # never signalled
    finally:
        other.kill()
        other.wait()


@needs_zookeeper
def test_a_broker_that_exits_at_start_up_is_named_with_its_output(harness: Harness) -> None:
    with pytest.raises(ClusterError) as failure:
        harness.up(settings={"stub.fail.broker": "2"})
    message = str(failure.value)
    assert message.startswith("broker 2 (pid ")
    assert "exited with code 3 during start-up" in message
    assert "stub broker 2: refusing to start" in message
    assert harness.states() == {1: "stopped", 2: "dead", 3: "stopped"}  # nothing left running
    with pytest.raises(ClusterError, match="holds a cluster of 3 brokers, not 2"):
        harness.up(2)
    harness.command = [str(harness.root / "no-such-broker")]
    with pytest.raises(ClusterError, match=r"broker 1: cannot run .*no-such-broker: No such file"):
        harness.up()
    assert harness.states() == {1: "stopped", 2: "stopped", 3: "stopped"}  # none started


# -- the command line -------------------------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`kafkactor ...` as a user runs it, in a process of its own."""
    return subprocess.run(
        [*KAFKACTOR, *args], capture_output=True, text=True, timeout=60, check=False
    )


def main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`kafkactor ...` in this process (quicker): exit code, stdout, stderr."""
    try:
        code = cli_main(list(args))
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@needs_zookeeper
def test_the_cluster_command(harness: Harness, capsys: pytest.CaptureFixture[str]) -> None:
    where = ["--dir", str(harness.root)]
    started = cli(
        "cluster", "up", "--brokers", "3", *where, "--zookeeper", harness.connect,
        "--broker-command", shlex.join(harness.command),
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    body = json.loads(ClusterLayout.of(harness.root).state_path.read_text())
    ports = [broker["port"] for broker in body["brokers"]]
    assert started.stdout.splitlines() == [
        f"zookeeper {harness.connect} (not the directory's own)",
        *(
            f"broker {i} pid {harness.pid(i)} serving on 127.0.0.1:{ports[i - 1]}"
            for i in (1, 2, 3)
        ),
        "bootstrap.servers=" + ",".join(f"127.0.0.1:{port}" for port in ports),
    ]

    shown = cli("cluster", "status", *where)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout.splitlines()) == 4
    assert shown.stdout.splitlines()[2].startswith(f"broker 2  pid {harness.pid(2)}  running  ")

    old = harness.pid(2)
    killed = cli("cluster", "kill", "2", *where)
    assert (killed.returncode, killed.stdout) == (0, f"broker 2 pid {old} killed (SIGKILL)\n")
    again = cli("cluster", "kill", "2", *where)
    assert (again.returncode, again.stdout) == (1, "")
    assert again.stderr == "kafkactor cluster kill: broker 2 is dead, not running or paused\n"

    code, out, err = main(capsys, "cluster", "restart", "2", *where)
    assert code == 0, err
    assert out == f"broker 2 pid {harness.pid(2)} serving on 127.0.0.1:{ports[1]}\n"
    pid = harness.pid(1)
    assert main(capsys, "cluster", "pause", "1", *where) == (
        0,
        f"broker 1 pid {pid} paused (SIGSTOP)\n",
        "",
    )
    assert main(capsys, "cluster", "resume", "1", *where) == (
        0,
        f"broker 1 pid {pid} resumed (SIGCONT)\n",
        "",
    )
    code, out, err = main(capsys, "cluster", "stop", "3", *where)
    assert code == 0 and out.startswith(f"broker 3 pid {harness.pid(3)} stopped (SIGTERM; ")
    assert main(capsys, "cluster", "stop", "9", *where) == (
        1,
        "",
        f"kafkactor cluster stop: no broker 9 in {harness.root} (its brokers: 1, 2, 3)\n",
    )

    taken_down = cli("cluster", "down", *where)
    assert taken_down.returncode == 0, taken_down.stderr
    lines = taken_down.stdout.splitlines()
    assert len(lines) == 3 and f"broker 3 pid {harness.pid(3)} was stopped" in lines
    assert harness.states() == {1: "stopped", 2: "stopped", 3: "stopped"}


def test_the_cluster_commands_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = cli("cluster", "kill", "--dir", str(tmp_path))  # no id
    assert (usage.returncode, usage.stdout) == (2, "")
    assert "the following arguments are required: ID" in usage.stderr
    for args in (
        ["cluster"],
        ["cluster", "status"],  # no --dir
        ["cluster", "kill", "two", "--dir", str(tmp_path)],
        ["cluster", "up", "--brokers", "0", "--dir", str(tmp_path)],
        ["cluster", "up", "--port", "70000", "--dir", str(tmp_path)],
    ):
        code, out, _ = main(capsys, *args)
        assert (code, out) == (2, ""), args
    empty = cli("cluster", "status", "--dir", str(tmp_path))
    assert (empty.returncode, empty.stdout) == (1, "")
    assert empty.stderr.startswith(f"kafkactor cluster status: no cluster in {tmp_path}: ")
    assert len(empty.stderr.splitlines()) == 1


def test_the_broker_command_runs_the_broker_process_or_says_it_is_not_built(
    tmp_path: Path,
) -> None:
    result = cli("broker", "--config", str(tmp_path / "missing.properties"))
    assert result.returncode in (1, 2)  # 1: not built yet; 2: the broker's "bad config"
    assert result.stderr.startswith("kafkactor broker")
