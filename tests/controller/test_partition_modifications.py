"""Partitions added to a topic become real partitions: the controller watches each topic's
`/brokers/topics/<t>` (Kafka's PartitionModificationsListener), a controller that takes over
picks up partitions added while no controller ran, and the in-process `Cluster.create_partitions`
works with ZooKeeper and without it. New partitions take records like any other."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.common import InvalidPartitionsError, TopicQueuedForDeletionError
from kafkactor.testing import Cluster
from tests.controller.support import SESSION_TIMEOUT_MS, read_partition, settled_controller
from tests.replication.support import WAIT_S, EventLog

pytestmark = pytest.mark.timeout(60)

TOPIC = "grown"


@pytest.fixture
def operator(cluster: Cluster) -> Iterator[Any]:
    """A ZooKeeper session of an operator's tool (kafka-topics --zookeeper)."""
    assert cluster.embedded_zookeeper is not None
    session = cluster.embedded_zookeeper.connect(SESSION_TIMEOUT_MS * 10)
    yield session
    session.stop()


def add_in_zookeeper(session: Any, topic: str, partition: int, replicas: list[int]) -> None:
    data, stat = session.get(zk_data.topic_path(topic))
    body = json.loads(data)
    body["partitions"][str(partition)] = replicas
    session.set(zk_data.topic_path(topic), json.dumps(body).encode(), version=stat.version)


def produce_and_read(cluster: Cluster, topic: str, partition: int) -> None:
    producer = cluster.producer(acks=-1)
    sent = producer.send(topic, b"new", partition=partition).result(WAIT_S)
    assert (sent.partition, sent.offset) == (partition, 0)
    assert read_partition(cluster, topic, partition) == {0: b"new"}


def test_partitions_added_while_no_controller_ran_are_led_after_the_next_election(
    cluster: Cluster, operator: Any, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, assignments={0: (1, 2)})
    epoch = cluster.current_controller_epoch()
    for broker in cluster.broker_ids:  # cleanly: the sessions, /controller with them, end now
        cluster.stop_broker(broker)
    assert cluster.controller_id() is None
    add_in_zookeeper(operator, TOPIC, 1, [2, 3])
    for broker in cluster.broker_ids:
        cluster.restart_broker(broker)
    controller = settled_controller(cluster, min_epoch=epoch)

    assert cluster.wait_for_leader(TOPIC, 1) == 2
    assert events.named(
        "controller.leader_elected",
        broker=controller,
        topic=TOPIC,
        partition=1,
        reason="new partition",
        controller_epoch=cluster.current_controller_epoch(),
    )
    produce_and_read(cluster, TOPIC, 1)


def test_the_controller_adds_what_the_znode_gains_and_leaves_reassigned_partitions_alone(
    cluster: Cluster, operator: Any, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, assignments={0: (1, 2)})
    data, stat = operator.get(zk_data.topic_path(TOPIC))
    body = json.loads(data)
    body["partitions"] = {"0": [3, 1], "1": [3, 1]}  # partition 0 "moved", partition 1 new
    operator.set(zk_data.topic_path(TOPIC), json.dumps(body).encode(), version=stat.version)

    assert cluster.wait_for_leader(TOPIC, 1) == 3
    assert cluster.leader(TOPIC, 0) == 1  # no reassignment: partition 0 stays on (1, 2)
    [added] = events.named("controller.partitions_added", topic=TOPIC)
    assert added["assignment"] == {"1": [3, 1]}
    assert added["reassignment_ignored"] == [0]


def test_cluster_create_partitions_in_zookeeper_mode(cluster: Cluster, operator: Any) -> None:
    cluster.create_topic(TOPIC, assignments={0: (1, 2), 1: (2, 3)})
    whole = cluster.create_partitions(TOPIC, 4, [[3, 2], [1, 3]])
    assert whole == {0: (1, 2), 1: (2, 3), 2: (3, 2), 3: (1, 3)}
    assert [cluster.leader(TOPIC, p) for p in (2, 3)] == [3, 1]
    produce_and_read(cluster, TOPIC, 3)
    with pytest.raises(InvalidPartitionsError, match=r"^Topic already has 4 partitions\.$"):
        cluster.create_partitions(TOPIC, 4)
    # a topic whose deletion waits for a replica's broker to come back
    cluster.create_topic("marked", assignments={0: (1, 3)})
    cluster.stop_broker(3)
    operator.create(zk_data.delete_topic_path("marked"), b"", makepath=True)
    with pytest.raises(TopicQueuedForDeletionError, match=r"^The topic is queued for deletion\.$"):
        cluster.create_partitions("marked", 2)
    assert cluster.replicas("marked", 0) == (1, 3)


def test_cluster_create_partitions_without_zookeeper() -> None:
    with Cluster(3, zookeeper=None) as cluster:
        cluster.create_topic(TOPIC, assignments={0: (1, 2), 1: (2, 3)})
        assert cluster.create_partitions(TOPIC, 3, validate_only=True) == {
            0: (1, 2),
            1: (2, 3),
            2: (3, 1),
        }
        assert (TOPIC, 2) not in cluster.partition_states  # validate_only added nothing
        assert cluster.create_partitions(TOPIC, 3) == {0: (1, 2), 1: (2, 3), 2: (3, 1)}
        assert cluster.leader(TOPIC, 2) == 3
        produce_and_read(cluster, TOPIC, 2)
