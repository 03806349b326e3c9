"""`kafkactor topics` (Kafka's kafka-topics.sh --bootstrap-server) against a running cluster:
each action's output in Kafka's format, the exit codes, and each refusal's message.

The tests share the module's three-broker cluster, each on topics of its own; they run the
command's `main` in this process (one test runs the installed command, as a user would).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.admin.topic_command import parse_replica_assignment
from kafkactor.cli import main
from kafkactor.kafka_uuid import uuid_to_string
from kafkactor.testing import Cluster
from tests.wire.conftest import LISTEN

pytestmark = pytest.mark.timeout(60)


def topic_id_in_zookeeper(cluster: Cluster, topic: str) -> uuid.UUID:
    assert cluster.embedded_zookeeper is not None
    session = cluster.embedded_zookeeper.connect(30_000)
    try:
        data, _ = session.get(zk_data.topic_path(topic))
    finally:
        session.stop()
    found = zk_data.decode_topic_id(topic, data)
    assert found is not None
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, listen=LISTEN) as started:
        yield started


def topics(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kafkactor topics --bootstrap-server ... ARGS`."""
    capsys.readouterr()
    code = main(["topics", "--bootstrap-server", cluster.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_create_describe_list_delete(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    code, out, _ = topics(
        cluster,
        capsys,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "3",
        "--replication-factor",
        "2",
        "--config",
        "retention.ms=60000",
    )
    assert (code, out) == (0, f"Created topic {topic}.\n")
    code, out, _ = topics(cluster, capsys, "--describe", "--topic", topic)
    assert code == 0
    lines = out.splitlines()
    topic_id = uuid_to_string(topic_id_in_zookeeper(cluster, topic))
    assert lines[0] == (  # Kafka's TopicCommand prints the id (KIP-516) unless it is zero
        f"Topic: {topic}\tTopicId: {topic_id}\tPartitionCount: 3\tReplicationFactor: 2"
        "\tConfigs: retention.ms=60000"
    )
    for partition, line in enumerate(lines[1:]):
        replicas = cluster.replicas(topic, partition)
        isr = ",".join(map(str, cluster.isr(topic, partition)))
        assert line == (
            f"\tTopic: {topic}\tPartition: {partition}\tLeader: {cluster.leader(topic, partition)}"
            f"\tReplicas: {','.join(map(str, replicas))}\tIsr: {isr}"
        )
    assert len(lines) == 4
    code, out, _ = topics(cluster, capsys, "--list")
    assert code == 0 and topic in out.splitlines()
    code, out, _ = topics(cluster, capsys, "--delete", "--topic", topic)
    assert (code, out) == (0, "")
    code, out, _ = topics(cluster, capsys, "--list")
    assert topic not in out.splitlines()


def test_a_manual_assignment_is_kept(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    code, _, err = topics(
        cluster, capsys, "--create", "--topic", topic, "--replica-assignment", "3:1,2:3"
    )
    assert code == 0, err
    assert cluster.replicas(topic, 0) == (3, 1)
    assert cluster.replicas(topic, 1) == (2, 3)
    assert cluster.wait_for_leader(topic, 1) == 2


def test_an_existing_topic_is_refused_unless_if_not_exists(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    assert topics(cluster, capsys, "--create", "--topic", topic)[0] == 0
    code, out, err = topics(cluster, capsys, "--create", "--topic", topic)
    assert code == 1 and out == ""
    assert err.startswith("Error while executing topic command : ")
    assert "already exists" in err
    assert topics(cluster, capsys, "--create", "--topic", topic, "--if-not-exists")[:2] == (0, "")


def test_a_topic_that_does_not_exist(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    for action in ("--describe", "--delete"):
        code, _, err = topics(cluster, capsys, action, "--topic", topic)
        assert code == 1
        assert f"Topic '{topic}' does not exist as expected" in err
        assert topics(cluster, capsys, action, "--topic", topic, "--if-exists")[0] == 0


def test_refusals_of_the_broker_and_of_the_command(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    code, _, err = topics(
        cluster, capsys, "--create", "--topic", topic, "--config", "cleanup.policy=sometimes"
    )
    assert code == 1 and "cleanup.policy" in err
    code, _, err = topics(
        cluster, capsys, "--create", "--topic", topic, "--replication-factor", "4"
    )
    assert code == 1 and "replication factor" in err
    code, _, err = topics(cluster, capsys, "--create", "--topic", topic, "--partitions", "0")
    assert (code, err.strip()) == (
        1,
        "Error while executing topic command : The partitions must be greater than 0",
    )
    code, _, err = topics(cluster, capsys, "--list", "--describe")
    assert code == 2 and "exactly one action" in err
    assert topic not in topics(cluster, capsys, "--list")[1].splitlines()


def test_unreachable_brokers_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    port = closed_port()
    code = main(["topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list"])
    assert code == 1
    assert "cannot connect to 127.0.0.1" in capsys.readouterr().err


def test_the_installed_command(cluster: Cluster, topic: str) -> None:
    command = ["topics", "--bootstrap-server", cluster.bootstrap_servers]
    run = subprocess.run(
        [sys.executable, "-m", "kafkactor", *command, "--create", "--topic", topic],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert (run.returncode, run.stdout) == (0, f"Created topic {topic}.\n"), run.stderr


def test_parse_replica_assignment() -> None:
    assert parse_replica_assignment("1:2, 2:3") == {0: [1, 2], 1: [2, 3]}
    with pytest.raises(ValueError, match="may not contain duplicate entries: 1"):
        parse_replica_assignment("1:1,2:3")
    with pytest.raises(ValueError, match="Partition 1 has different replication factor"):
        parse_replica_assignment("1:2,3")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_alter_adds_partitions(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    assert topics(cluster, capsys, "--create", "--topic", topic, "--partitions", "1")[0] == 0
    code, out, err = topics(cluster, capsys, "--alter", "--topic", topic, "--partitions", "3")
    assert (code, out) == (0, ""), err
    code, out, _ = topics(cluster, capsys, "--describe", "--topic", topic)
    assert out.splitlines()[0].startswith(f"Topic: {topic}\tTopicId: ")
    assert "\tPartitionCount: 3\t" in out.splitlines()[0]
    assert cluster.wait_for_leader(topic, 2) in (1, 2, 3)
    code, _, err = topics(
        cluster,
        capsys,
        "--alter",
        "--topic",
        topic,
        "--partitions",
        "5",
        "--replica-assignment",
        "1,2,3,3,1",
    )
    assert code == 0, err
    assert [cluster.replicas(topic, p) for p in (3, 4)] == [(3,), (1,)]
    code, _, err = topics(cluster, capsys, "--alter", "--topic", topic, "--partitions", "2")
    assert code == 1
    assert "Topic currently has 5 partitions, which is higher than the requested 2." in err
    code, _, err = topics(cluster, capsys, "--alter", "--topic", topic)
    assert code == 1 and "--alter needs --partitions" in err
