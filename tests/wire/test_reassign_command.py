"""`kafkactor reassign` (Kafka's kafka-reassign-partitions.sh --bootstrap-server) against a
running cluster: a plan generated, executed under an acks=all producer, verified, listed and
cancelled, in Kafka's output formats; and each refusal's message and exit code.

The tests share the module's four-broker cluster (brokers 1-4), each on topics of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.admin.reassign_command import format_plan, parse_plan
from kafkactor.cli import main
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
