"""Bad requests fail clearly and change nothing; a malformed znode does not stop the controller."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.testing import Cluster, TopicExistsError
from tests.controller.support import FAILOVER_BOUND_S, settled_controller
from tests.replication.support import TOPIC, WAIT_S, EventLog, wait_until


def _no_trace_of(cluster: Cluster, topic: str) -> None:
    assert cluster._zk.exists(zk_data.topic_path(topic)) is None
    assert cluster._zk.exists(zk_data.topic_config_path(topic)) is None


def test_creating_an_existing_topic_fails_and_keeps_the_first(cluster: Cluster) -> None:
    assignment = cluster.create_topic(
        TOPIC, partitions=2, replication_factor=2, config={"retention.ms": "60000"}
    )
    config_before = cluster._zk.get(zk_data.topic_config_path(TOPIC))[0]

    with pytest.raises(TopicExistsError, match=re.escape(f"'{TOPIC}' already exists")):
        cluster.create_topic(
            TOPIC, partitions=5, replication_factor=3, config={"retention.ms": "1"}
        )

    data, _ = cluster._zk.get(zk_data.topic_path(TOPIC))
    assert zk_data.decode_assignment(TOPIC, data) == assignment
    assert cluster._zk.get(zk_data.topic_config_path(TOPIC))[0] == config_before
    assert sorted(cluster._zk.get_children(zk_data.topic_path(TOPIC) + "/partitions")) == [
        "0",
        "1",
    ]


@dataclass(frozen=True)
class BadRequest:
    partitions: int
    replication_factor: int
    config: dict[str, str] | None
    error: type[Exception]
    message: str


BAD_REQUESTS = {
    "rf-above-live": BadRequest(1, 4, None, ValueError, "replication factor 4 needs 1..3 live"),
    "rf-zero": BadRequest(1, 0, None, ValueError, "replication factor 0 needs 1..3 live"),
    "no-partitions": BadRequest(0, 1, None, ValueError, "at least one partition, got 0"),
    "negative-partitions": BadRequest(-2, 1, None, ValueError, "at least one partition, got -2"),
    "unknown-config-keys": BadRequest(
        1,
        1,
        {"min.insync.replicas": "2", "no.such.key": "1", "bogus": "x"},
        zk_data.UnknownTopicConfigError,
        "unknown topic config keys: bogus, no.such.key",
    ),
    "bad-config-value": BadRequest(
        1,
        1,
        {"min.insync.replicas": "two"},
        ValueError,
        "Invalid value two for configuration min.insync.replicas: Not a number of type INT",
    ),
    "out-of-range-config-value": BadRequest(
        1,
        1,
        {"segment.ms": "0"},
        ValueError,
        "Invalid value 0 for configuration segment.ms: Value must be at least 1; valid values: "
        "[1,...]",
    ),
}


@pytest.mark.parametrize("case", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_bad_topic_requests_fail_clearly_and_write_nothing(
    cluster: Cluster, case: BadRequest
) -> None:
    with pytest.raises(case.error, match=re.escape(case.message)):
        cluster.create_topic(TOPIC, case.partitions, case.replication_factor, config=case.config)
    _no_trace_of(cluster, TOPIC)
    # the name is still free
    cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
    assert cluster.wait_for_leader(TOPIC, 0) in (1, 2, 3)


@pytest.mark.parametrize("name", ["", "bad/name", "spaces here", "..", "x" * 250])
def test_illegal_topic_names_are_refused(cluster: Cluster, name: str) -> None:
    with pytest.raises(ValueError, match="illegal topic name"):
        cluster.create_topic(name, partitions=1, replication_factor=1)
    assert cluster._zk.get_children(zk_data.BROKER_TOPICS) == []


def test_replication_factor_counts_only_live_brokers(cluster: Cluster) -> None:
    cluster.stop_broker(3)  # its registration goes at once
    assert sorted(cluster._zk.get_children(zk_data.BROKER_IDS)) == ["1", "2"]

    with pytest.raises(ValueError, match=re.escape("replication factor 3 needs 1..2 live brokers")):
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)

    _no_trace_of(cluster, TOPIC)
    assignment = cluster.create_topic(TOPIC, partitions=2, replication_factor=2)
    assert all(set(replicas) == {1, 2} for replicas in assignment.values())


@pytest.mark.parametrize(
    "payload",
    [
        b"{not json",
        b"\xff\xfe\x00",
        b'{"version":1,"partitions":{"0":"1,2"}}',
        b'{"version":1,"partitions":{"zero":[1]}}',
        b"[1, 2, 3]",
    ],
)
def test_malformed_topic_znode_is_logged_and_the_controller_keeps_working(
    cluster: Cluster, events: EventLog, payload: bytes
) -> None:
    controller = settled_controller(cluster)
    cluster._zk.create(zk_data.topic_path("garbage"), payload)

    bad = wait_until(
        lambda: events.named("controller.bad_topic", topic="garbage"),
        message="the controller to log the malformed topic",
    )
    assert bad[0]["broker"] == controller
    assert "malformed znode /brokers/topics/garbage" in bad[0]["error"]
    assert cluster._zk.exists(zk_data.topic_path("garbage") + "/partitions") is None

    # still the controller, and it still elects leaders for a valid topic
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    assert settled_controller(cluster) == controller
    producer = cluster.producer(acks=-1, timeout_ms=2_000)
    for p in range(3):
        assert cluster.leader(TOPIC, p) == cluster.replicas(TOPIC, p)[0]
        assert producer.send(TOPIC, b"fine", partition=p).result(WAIT_S).offset == 0
    # and it still fails over: a broker death moves its partitions' leadership
    victim = next(b for b in (1, 2, 3) if b != controller)
    cluster.stop_broker(victim)
    for p in range(3):
        assert cluster.wait_for_leader(TOPIC, p) != victim


def test_malformed_partition_state_does_not_stop_a_new_controller(
    cluster: Cluster, events: EventLog
) -> None:
    """Regression (found here, fixed in f78a51d): a corrupt state znode made the new
    controller's takeover raise half-way, leaving a controller that never elected anything."""
    cluster.create_topic("corrupt", partitions=1, replication_factor=3)
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    orphan = next(p for p in range(3) if cluster.leader(TOPIC, p) == old)
    cluster._zk.set(zk_data.partition_state_path("corrupt", 0), b"{not json")

    cluster.stop_broker(old)  # the new controller finds the corrupt znode when it takes over

    new = wait_until(
        lambda: (c := cluster.controller_id()) not in (None, old) and c,
        message="a new controller",
    )
    assert cluster.current_controller_epoch() == old_epoch + 1
    # it does its job for every healthy partition: the dead broker's partition gets a leader
    wait_until(
        lambda: cluster.leader(TOPIC, orphan) not in (old, -1),
        timeout_s=FAILOVER_BOUND_S,
        message=f"a new leader for {TOPIC}-{orphan}, which the dead controller's broker led",
    )
    assert settled_controller(cluster, min_epoch=old_epoch) == new
    assert not events.named("actor.error", broker=new)
    # the corrupt partition is named in the log, and left alone
    bad = events.named("controller.bad_partition_state", broker=new)
    assert [e["path"] for e in bad] == [zk_data.partition_state_path("corrupt", 0)]
    assert cluster._zk.get(zk_data.partition_state_path("corrupt", 0))[0] == b"{not json"
    # and it still creates topics
    cluster.create_topic("later", partitions=1, replication_factor=2)
    assert cluster.leader("later", 0) in (1, 2, 3)
