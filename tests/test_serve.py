"""`kafkactor serve` as a user runs it: one `bootstrap.servers=` line once every broker serves,
real clients on those addresses, a clean shutdown on SIGTERM or SIGINT, a taken port refused;
Kafka's broker properties from a file and `--override`, as kafka-server-start.sh takes them."""

from __future__ import annotations

import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkactor.cli import build_parser, main, serve_options
from kafkactor.serve import ServeOptions, plan
from kafkactor.server import ConfigError
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
    if server.line == "":  # it exited at once: refused, naming the port it could not bind
        code, _, err = server.stop()
        taken = (f"cannot listen on 127.0.0.1:{p}" in err for p in (port, port + 1))
        if code == 1 and any(taken):  # another process's connection took it meanwhile
            pytest.skip(f"port {port} or {port + 1} was taken meanwhile")
        raise AssertionError(f"exit {code} without a line: {err}")
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


# -- broker properties: a file, then overrides -------------------------------------------------

# Kafka's usual test settings, the file's values beaten by the overrides
TEST_PROPERTIES = """\
# kafkactor serve test settings
num.partitions=2
group.initial.rebalance.delay.ms=3000
num.io.threads=8
"""
OVERRIDES = ("num.partitions=4", "group.initial.rebalance.delay.ms=0")


@pytest.fixture
def properties_file(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(TEST_PROPERTIES)
    return path


def overrides(*texts: str) -> tuple[tuple[str, str], ...]:
    return tuple((name, value) for name, _, value in (t.partition("=") for t in texts))


def test_a_file_and_its_overrides_take_effect_for_real_clients(
    tmp_path: Path, properties_file: Path
) -> None:
    args = [str(properties_file), *(f"--override={o}" for o in OVERRIDES)]
    server = start(*args, "--brokers", "2", "--port", "0", cwd=tmp_path)
    try:
        producer = KafkaProducer(bootstrap_servers=server.bootstrap_servers)
        assert producer.partitions_for("fresh") == {0, 1, 2, 3}  # auto-created: num.partitions
        producer.close()
    finally:
        code, out, err = server.stop(signal.SIGTERM)
    assert code == 0, err
    assert out == ""
    assert err == "kafkactor serve: ignored (no meaning here): num.io.threads\n"


@pytest.mark.timeout(30)
def test_the_brokers_run_with_the_overridden_values(properties_file: Path) -> None:
    planned = plan(
        ServeOptions(brokers=1, port=0, properties=properties_file, overrides=overrides(*OVERRIDES))
    )
    with planned.cluster() as cluster:
        (broker,) = cluster.brokers.values()
        assert broker.config.group.initial_rebalance_delay_ms == 0
        assert broker.config.apis.num_partitions == 4


@pytest.mark.timeout(10)
def test_topic_config_defaults_are_overridden_for_every_broker() -> None:
    planned = plan(
        ServeOptions(
            overrides=overrides(
                "log.message.timestamp.type=LogAppendTime",
                "log.roll.jitter.hours=1",
                "compression.type=gzip",
            )
        )
    )
    defaults = planned.config.broker.log_manager.default_log_config
    assert defaults.message_timestamp_type == "LogAppendTime"
    assert defaults.segment_jitter_ms == 3_600_000
    assert defaults.compression_type == "gzip"
    assert planned.config.ignored == ()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["serve", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--override", "num.partitions=0"],
            "--override: 'num.partitions' must be a positive integer, got '0'",
        ),
        (
            ["--override", "log.cleaner.min.cleanable.ratio=1.5"],
            "--override: 'log.cleaner.min.cleanable.ratio' must be a number from 0 to 1, got '1.5'",
        ),
        (
            ["--override", "log.message.timestamp.type=WallClock"],
            "--override: 'log.message.timestamp.type' must be a valid message.timestamp.type "
            "value (String must be one of: CreateTime, LogAppendTime), got 'WallClock'",
        ),
        (
            ["--override", "num.partitons=4"],
            "--override: unknown setting 'num.partitons' (did you mean 'num.partitions'?)",
        ),
        (
            ["--override", "broker.id=0"],
            "--override: 'broker.id' names one broker, and these properties are shared by "
            "every broker of the cluster (numbered 1 to N): remove it",
        ),
        (
            ["--data-dir", "/tmp/x", "--override", "log.dirs=/tmp/y"],
            "--override: 'log.dirs' is overridden and set by --data-dir too: give one of them",
        ),
        (
            ["--override", "num.partitions=2", "--override", "num.partitions=3"],
            "--override: 'num.partitions' is overridden twice",
        ),
    ],
)
@pytest.mark.timeout(10)
def test_a_bad_property_exits_2_with_one_line_naming_it(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert run_cli(capsys, *args) == (2, "", f"kafkactor serve: {message}\n")


@pytest.mark.timeout(10)
def test_a_bad_line_of_the_file_is_named_with_its_line(
    capsys: pytest.CaptureFixture[str], properties_file: Path
) -> None:
    properties_file.write_text(TEST_PROPERTIES + "broker.id=0\n")
    code, out, err = run_cli(capsys, str(properties_file), "--override", "num.partitions=4")
    assert (code, out) == (2, "")
    assert err.startswith(f"kafkactor serve: {properties_file}:5: 'broker.id' names one broker")
    assert err.count("\n") == 1


@pytest.mark.timeout(10)
def test_the_properties_that_say_where_the_cluster_lives_are_derived(tmp_path: Path) -> None:
    derived = plan(
        ServeOptions(
            overrides=overrides(
                "listeners=PLAINTEXT://127.0.0.2:19092",
                f"log.dir={tmp_path}",
                "zookeeper.connect=127.0.0.1:2181",
                "zookeeper.session.timeout.ms=9000",
                f"kafkactor.event.log={tmp_path / 'events.jsonl'}",
                "controlled.shutdown.enable=false",
            )
        )
    )
    assert (derived.host, derived.port) == ("127.0.0.2", 19092)  # broker i on 19092 + i - 1
    assert derived.data_dir == tmp_path  # broker i in <dir>/broker-i
    assert (derived.zookeeper, derived.session_timeout_ms) == ("127.0.0.1:2181", 9000)
    assert derived.events == tmp_path / "events.jsonl"
    assert derived.config.ignored == ("controlled.shutdown.enable",)  # a broker process's only
    plain = plan(ServeOptions())
    assert (plain.host, plain.port, plain.data_dir, plain.zookeeper, plain.events) == (
        "127.0.0.1",
        9092,
        None,
        "embedded",
        None,
    )


@pytest.mark.timeout(10)
def test_a_flag_wins_over_the_file(properties_file: Path, tmp_path: Path) -> None:
    properties_file.write_text(
        "listeners=PLAINTEXT://127.0.0.2:19092\n"
        f"log.dirs={tmp_path / 'file'}\n"
        "zookeeper.connect=127.0.0.1:2181\n"
        "auto.create.topics.enable=true\n"
        "default.replication.factor=1\n"
    )
    planned = plan(
        ServeOptions(
            properties=properties_file,
            port=0,
            data_dir=tmp_path / "flag",
            zookeeper="embedded",
            auto_create_topics=False,
            default_replication_factor=3,
        )
    )
    assert (planned.host, planned.port) == ("127.0.0.2", 0)
    assert (planned.data_dir, planned.zookeeper) == (tmp_path / "flag", "embedded")
    apis = planned.config.broker.apis
    assert (apis.auto_create_topics_enable, apis.default_replication_factor) == (False, 3)
    with pytest.raises(ConfigError, match="'listeners' is overridden and set by --port too"):
        plan(ServeOptions(port=0, overrides=overrides("listeners=PLAINTEXT://127.0.0.1:0")))


@pytest.mark.timeout(10)
def test_the_readme_shows_a_run_with_overrides_that_plans_as_it_says() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    (command,) = [
        line
        for line in readme.splitlines()
        if line.startswith(".venv/bin/kafkactor serve ") and "--override" in line
    ]
    planned = plan(serve_options(build_parser().parse_args(shlex.split(command)[1:])))
    broker = planned.config.broker
    assert (broker.apis.num_partitions, broker.group.initial_rebalance_delay_ms) == (4, 0)
    assert (planned.host, planned.port, planned.options.brokers) == ("127.0.0.1", 9092, 3)
