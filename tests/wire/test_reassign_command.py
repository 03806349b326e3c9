"""`kafkactor reassign` (Kafka's kafka-reassign-partitions.sh --bootstrap-server) against a
running cluster: a plan generated, executed under an acks=all producer, verified, listed and
cancelled, in Kafka's output formats; and each refusal's message and exit code.

The tests share the module's four-broker cluster (brokers 1-4), each on topics of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.admin.reassign_command import format_plan, parse_plan
from kafkactor.cli import main
from kafkactor.clients.consumer import ConsumerRecord
from kafkactor.testing import Cluster
from tests.wire.conftest import LISTEN

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(4, listen=LISTEN) as started:
        yield started


def reassign(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `kafkactor reassign --bootstrap-server ... ARGS`."""
    capsys.readouterr()
    code = main(["reassign", "--bootstrap-server", cluster.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_prints_the_current_and_a_proposed_plan(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str, tmp_path: Path
) -> None:
    cluster.create_topic(topic, assignments={0: (1, 2), 1: (2, 3), 2: (3, 1)})
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    code, out, err = reassign(
        cluster,
        capsys,
        "--generate",
        "--topics-to-move-json-file",
        str(topics),
        "--broker-list",
        "2,3,4",
    )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert parse_plan(lines[1]) == {(topic, 0): (1, 2), (topic, 1): (2, 3), (topic, 2): (3, 1)}
    assert lines[2:4] == ["", "Proposed partition reassignment configuration"]
    proposed = parse_plan(lines[4])
    assert sorted(proposed) == [(topic, 0), (topic, 1), (topic, 2)]
    for replicas in proposed.values():
        assert len(replicas) == 2 and set(replicas) <= {2, 3, 4}
    # Kafka's rack-unaware round robin: leaders spread over the brokers
    assert sorted(r[0] for r in proposed.values()) == [2, 3, 4]


def test_generate_refusals(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str, tmp_path: Path
) -> None:
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    args = ["--generate", "--topics-to-move-json-file", str(topics), "--broker-list"]
    code, _, err = reassign(cluster, capsys, *args, "1,2")
    assert (code, err.strip()) == (1, f"Error: Topic {topic} not found")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    code, _, err = reassign(cluster, capsys, *args, "1,2")
    assert code == 1 and "Replication factor: 3 larger than available brokers: 2." in err
    code, _, err = reassign(cluster, capsys, *args, "1,2,2")
    assert code == 1 and "Broker list contains duplicate entries: 2" in err
    code, _, err = reassign(cluster, capsys, "--generate", "--broker-list", "1,2")
    assert code == 2 and "--topics-to-move-json-file" in err
    code, _, err = reassign(cluster, capsys, "--generate", "--verify")
    assert code == 2 and "exactly one action" in err


def test_a_plan_round_trips_through_kafkas_json() -> None:
    plan = {("orders", 1): (3, 4), ("orders", 0): (2, 3)}
    text = format_plan(plan)
    assert text == (
        '{"version":1,"partitions":['
        '{"topic":"orders","partition":0,"replicas":[2,3],"log_dirs":["any","any"]},'
        '{"topic":"orders","partition":1,"replicas":[3,4],"log_dirs":["any","any"]}]}'
    )
    assert parse_plan(text) == plan
    with pytest.raises(ValueError, match="cannot be empty"):
        parse_plan('{"version":1,"partitions":[]}')
    with pytest.raises(ValueError, match="contains multiple entries for 2"):
        parse_plan('{"partitions":[{"topic":"t","partition":0,"replicas":[2,2]}]}')
    with pytest.raises(ValueError, match="more than once: t-0"):
        parse_plan(
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},'
            '{"topic":"t","partition":0,"replicas":[2]}]}'
        )
    with pytest.raises(ValueError, match="Unable to parse"):
        parse_plan("{not json")


def write_plan(path: Path, plan: dict[tuple[str, int], tuple[int, ...]]) -> str:
    path.write_text(format_plan(plan))
    return str(path)


def test_execute_then_verify_under_an_acks_all_producer(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str, tmp_path: Path
) -> None:
    cluster.create_topic(topic, assignments={0: (1, 2, 3)}, config={"min.insync.replicas": "2"})
    producer = cluster.producer(acks=-1, retries=5)  # the leader moves: it asks again
    acked = [
        producer.send(topic, b"before-%d" % n, partition=0).result(timeout=10) for n in range(50)
    ]
    plan = write_plan(tmp_path / "move.json", {(topic, 0): (2, 3, 4)})
    code, out, err = reassign(cluster, capsys, "--execute", "--reassignment-json-file", plan)
    assert code == 0, err
    assert out.splitlines() == [
        "Current partition replica assignment",
        "",
        format_plan({(topic, 0): (1, 2, 3)}),
        "",
        "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignments for {topic}-0",
    ]
    acked += [
        producer.send(topic, b"during-%d" % n, partition=0).result(timeout=10) for n in range(50)
    ]
    cluster.wait_for_reassignments([(topic, 0)])
    code, out, _ = reassign(cluster, capsys, "--verify", "--reassignment-json-file", plan)
    assert (code, out.splitlines()) == (
        0,
        ["Status of partition reassignment:", f"Reassignment of partition {topic}-0 is complete."],
    )
    assert cluster.replicas(topic, 0) == (2, 3, 4)
    assert reassign(cluster, capsys, "--list")[1] == "No partition reassignments found.\n"
    consumer = cluster.consumer()
    consumer.assign([(topic, 0)])
    consumer.seek(topic, 0, 0)
    read: list[ConsumerRecord] = []
    deadline = time.monotonic() + 10
    while len(read) < len(acked) and time.monotonic() < deadline:
        read += consumer.poll(500)  # the new leader, broker 2, answers
    assert [r.offset for r in read] == [a.offset for a in acked]


def test_an_unfinished_reassignment_is_listed_verified_and_cancelled(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str, tmp_path: Path
) -> None:
    cluster.create_topic(topic, assignments={0: (1, 2)})
    plan = write_plan(tmp_path / "move.json", {(topic, 0): (3, 4)})
    cluster.isolate_broker(4)  # the new replica on broker 4 cannot fetch: the move waits
    try:
        assert reassign(cluster, capsys, "--execute", "--reassignment-json-file", plan)[0] == 0
        code, out, _ = reassign(cluster, capsys, "--list")
        assert (code, out.splitlines()) == (
            0,
            [
                "Current partition reassignments:",
                f"{topic}-0: replicas: 3,4,1,2. adding: 3,4. removing: 1,2.",
            ],
        )
        code, out, _ = reassign(cluster, capsys, "--verify", "--reassignment-json-file", plan)
        assert out.splitlines()[1] == f"Reassignment of partition {topic}-0 is still in progress."
        code, out, _ = reassign(cluster, capsys, "--cancel", "--reassignment-json-file", plan)
        assert (code, out) == (
            0,
            f"Successfully cancelled partition reassignments for: {topic}-0\n",
        )
        cluster.wait_for_reassignments([(topic, 0)])
        assert cluster.replicas(topic, 0) == (1, 2)
        code, out, _ = reassign(cluster, capsys, "--verify", "--reassignment-json-file", plan)
        assert out.splitlines()[1] == (
            f"There is no active reassignment of partition {topic}-0, but replica set is 1,2 "
            "rather than 3,4."
        )
    finally:
        cluster.heal_broker(4)


def test_the_controller_refuses_a_bad_target(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], topic: str, tmp_path: Path
) -> None:
    cluster.create_topic(topic, assignments={0: (1, 2)})
    plan = write_plan(tmp_path / "move.json", {(topic, 0): (1, 9)})
    code, _, err = reassign(cluster, capsys, "--execute", "--reassignment-json-file", plan)
    assert code == 1
    assert f"Error: Error reassigning partition(s):\n{topic}-0: " in err
    assert cluster.replicas(topic, 0) == (1, 2)
    missing = write_plan(tmp_path / "missing.json", {(topic, 5): (1, 2)})
    code, _, err = reassign(cluster, capsys, "--execute", "--reassignment-json-file", missing)
    assert (code, err.strip()) == (1, f"Error: Unable to find partition: {topic}-5")
