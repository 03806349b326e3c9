"""CreateTopics with a manual replica assignment (`assignments`) through real clients:
kafka-python's KafkaAdminClient (`replica_assignments`) and confluent-kafka's AdminClient
(`replica_assignment`). The topic's partitions get exactly those replicas, the first of each
list leads, records go in and come out; an assignment Kafka refuses is refused with the
client's own error for INVALID_REPLICA_ASSIGNMENT (39) and Kafka's message, and nothing is
created. The in-process `Cluster.create_topic` (with and without ZooKeeper) and `AdminZkClient`
take the same assignments, with the same checks.

The tests share the module's three-broker cluster (brokers 1, 2, 3), each on topics of its
own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition
from kafka.admin import NewTopic as KafkaNewTopic

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.admin_zk import BOTH_SIZES_AND_ASSIGNMENTS, AdminZkClient
from kafkactor.common import InvalidReplicaAssignmentError
from kafkactor.testing import Cluster
from tests.wire.support import READ_S, wait_until

pytestmark = pytest.mark.timeout(60)

ASSIGNMENT = {0: (2, 3), 1: (3, 1)}
# (replica lists by partition, Kafka's message) of assignments Kafka refuses
REFUSED = [
    ({0: [1, 1], 1: [2, 3]}, "Duplicate brokers not allowed in replica assignment: 1, 1"),
    ({0: [2, 4], 1: [3, 1]}, "Unknown broker(s) in replica assignment: 4."),
    ({0: [2, 3], 1: [3]}, "Inconsistent replication factor between partitions"),
]


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def zookeeper(cluster: Cluster) -> Iterator[Any]:
    """A ZooKeeper session of the tests' own, to read and write the cluster's znodes."""
    assert cluster.embedded_zookeeper is not None
    session = cluster.embedded_zookeeper.connect(30_000)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def confluent_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def check_assigned(cluster: Cluster, zookeeper: Any, topic: str) -> None:
    """`/brokers/topics/<t>` holds exactly ASSIGNMENT, and each partition is led by its first
    replica."""
    data, _ = zookeeper.get(zk_data.topic_path(topic))
    assert zk_data.decode_assignment(topic, data) == ASSIGNMENT
    for partition, replicas in ASSIGNMENT.items():
        assert cluster.wait_for_leader(topic, partition) == replicas[0]
        assert cluster.replicas(topic, partition) == replicas


def topics_named(zookeeper: Any, prefix: str) -> list[str]:
    """The topics in ZooKeeper whose names start with `prefix`."""
    return sorted(t for t in zookeeper.get_children(zk_data.BROKER_TOPICS) if t.startswith(prefix))


# -- kafka-python --------------------------------------------------------------------------------


def test_kafka_python_creates_the_assignment_given_and_its_first_replicas_lead(
    cluster: Cluster, kafka_admin: KafkaAdminClient, zookeeper: Any, topic: str
) -> None:
    new = KafkaNewTopic(
        topic,
        num_partitions=-1,
        replication_factor=-1,
        replica_assignments={p: list(r) for p, r in ASSIGNMENT.items()},
    )
    kafka_admin.create_topics([new], timeout_ms=int(READ_S * 1000))
    check_assigned(cluster, zookeeper, topic)

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for partition in ASSIGNMENT:
            producer.send(topic, f"p{partition}".encode(), partition=partition).get(READ_S)
    finally:
        producer.close(timeout=READ_S)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    read: dict[int, bytes] = {}
    try:
        consumer.assign([KafkaPartition(topic, p) for p in ASSIGNMENT])
        consumer.seek_to_beginning()

        def both() -> bool:
            for records in consumer.poll(timeout_ms=100).values():
                read.update((r.partition, r.value) for r in records)
            return len(read) == len(ASSIGNMENT)

        wait_until(both, READ_S, "kafka-python to read one record of each partition")
    finally:
        consumer.close()
    assert read == {0: b"p0", 1: b"p1"}


@pytest.mark.parametrize(("assignment", "message"), REFUSED)
def test_kafka_python_gets_invalid_replication_assignment_error_for_a_bad_assignment(
    kafka_admin: KafkaAdminClient,
    zookeeper: Any,
    topic: str,
    assignment: dict[int, list[int]],
    message: str,
) -> None:
    new = KafkaNewTopic(topic, replica_assignments=assignment)
    with pytest.raises(kafka.errors.InvalidReplicationAssignmentError) as refused:
        kafka_admin.create_topics([new], timeout_ms=int(READ_S * 1000))
    assert message in str(refused.value)
    assert topics_named(zookeeper, topic) == []


def test_kafka_python_gets_invalid_request_for_an_assignment_with_a_size(
    cluster: Cluster, kafka_admin: KafkaAdminClient, zookeeper: Any, topic: str
) -> None:
    new = KafkaNewTopic(topic, num_partitions=2, replica_assignments={0: [1], 1: [2]})
    with pytest.raises(kafka.errors.InvalidRequestError) as refused:
        kafka_admin.create_topics([new], timeout_ms=int(READ_S * 1000))
    assert "Both numPartitions or replicationFactor and replicasAssignments were set" in str(
        refused.value
    )
    assert topics_named(zookeeper, topic) == []


# -- confluent-kafka -----------------------------------------------------------------------------


def confluent_create(
    admin: AdminClient, topic: str, assignment: list[list[int]], *, validate_only: bool = False
) -> KafkaError | None:
    (future,) = admin.create_topics(
        [NewTopic(topic, len(assignment), replica_assignment=assignment)],
        request_timeout=READ_S,
        validate_only=validate_only,
    ).values()
    try:
        future.result(READ_S)
    except Exception as error:  # confluent-kafka raises KafkaException(KafkaError)
        found: KafkaError = error.args[0]
        return found
    return None


def test_confluent_creates_the_assignment_given_and_its_first_replicas_lead(
    cluster: Cluster, confluent_admin: AdminClient, zookeeper: Any, topic: str
) -> None:
    lists = [list(ASSIGNMENT[p]) for p in sorted(ASSIGNMENT)]
    assert confluent_create(confluent_admin, topic, lists, validate_only=True) is None
    assert topics_named(zookeeper, topic) == []  # validate_only created nothing
    assert confluent_create(confluent_admin, topic, lists) is None
    check_assigned(cluster, zookeeper, topic)

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for partition in ASSIGNMENT:
        producer.produce(topic, f"p{partition}".encode(), partition=partition)
    assert producer.flush(READ_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": topic,
            "enable.auto.commit": False,
        }
    )
    read: dict[int | None, bytes | None] = {}
    try:
        consumer.assign([ConfluentPartition(topic, p, 0) for p in ASSIGNMENT])

        def both() -> bool:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read[message.partition()] = message.value()
            return len(read) == len(ASSIGNMENT)

        wait_until(both, READ_S, "confluent-kafka to read one record of each partition")
    finally:
        consumer.close()
    assert read == {0: b"p0", 1: b"p1"}


def test_confluent_gets_invalid_replica_assignment_for_bad_assignments(
    cluster: Cluster, confluent_admin: AdminClient, zookeeper: Any, topic: str
) -> None:
    for index, (assignment, message) in enumerate(REFUSED):
        lists = [assignment[p] for p in sorted(assignment)]
        for validate_only in (True, False):
            error = confluent_create(
                confluent_admin, f"{topic}-{index}", lists, validate_only=validate_only
            )
            assert error is not None, (assignment, validate_only)
            assert error.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, error
            assert message in error.str()
    assert topics_named(zookeeper, topic) == []


# -- in process: Cluster.create_topic and AdminZkClient ------------------------------------------


def test_cluster_create_topic_takes_an_assignment_with_kafkas_checks(
    cluster: Cluster, zookeeper: Any, topic: str
) -> None:
    assert cluster.create_topic(topic, assignments=ASSIGNMENT) == ASSIGNMENT
    check_assigned(cluster, zookeeper, topic)
    with pytest.raises(ValueError) as both:
        cluster.create_topic(f"{topic}-sized", 2, assignments=ASSIGNMENT)
    assert str(both.value) == BOTH_SIZES_AND_ASSIGNMENTS
    for index, (assignment, message) in enumerate(REFUSED):
        with pytest.raises(InvalidReplicaAssignmentError, match=re.escape(message)):
            cluster.create_topic(f"{topic}-{index}", assignments=assignment)
    assert topics_named(zookeeper, topic) == [topic]


def test_admin_zk_client_writes_the_assignment_and_the_controller_elects_its_first_replicas(
    cluster: Cluster, zookeeper: Any, topic: str
) -> None:
    admin = AdminZkClient(lambda: zookeeper, timeout_s=READ_S)
    assert admin.create_topic(topic, None, None, {}, assignments=ASSIGNMENT) == ASSIGNMENT
    check_assigned(cluster, zookeeper, topic)
    for index, (assignment, message) in enumerate(REFUSED):
        with pytest.raises(InvalidReplicaAssignmentError, match=re.escape(message)):
            admin.create_topic(f"{topic}-{index}", None, None, {}, assignments=assignment)
    assert topics_named(zookeeper, topic) == [topic]


def test_a_cluster_without_zookeeper_leads_each_partition_by_its_first_replica(
    topic: str,
) -> None:
    with Cluster(3, zookeeper=None) as plain:
        assert plain.create_topic(topic, assignments=ASSIGNMENT) == ASSIGNMENT
        for partition, replicas in ASSIGNMENT.items():
            assert plain.leader(topic, partition) == replicas[0]
            assert plain.replicas(topic, partition) == replicas
            wait_until(
                lambda p=partition: plain.describe_partition(topic, p).is_leader,  # type: ignore[misc]
                READ_S,
                f"the first replica to lead {topic}-{partition}",
            )
        with pytest.raises(InvalidReplicaAssignmentError, match="Unknown broker"):
            plain.create_topic(f"{topic}-unknown", assignments={0: (1, 4)})
