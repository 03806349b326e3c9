"""CreatePartitions (API 37) through real clients: kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient and aiokafka's AIOKafkaAdminClient add partitions to a topic,
and the same client then writes to and reads from a new partition. A manual assignment for
the new partitions is honoured (the first replica leads); a generated one is Kafka's. Each of
Kafka's refusals reaches the client as its own error class with Kafka's message, and
validate_only adds nothing. A larger assignment written straight into `/brokers/topics/<t>`
(as `kafka-topics --zookeeper --alter` does) is noticed by the controller too, and a broker
that is not the controller answers NOT_CONTROLLER.

The tests share the module's three-broker cluster (brokers 1, 2, 3), each on topics of its
own, created with partition 0 on (1, 2) and partition 1 on (2, 3).
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Iterator
from typing import Any

import aiokafka.errors
import kafka.errors
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewPartitions as ConfluentNewPartitions  # type: ignore[attr-defined]
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPartition
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)

from kafkactor.actors.controller import zk_data
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.testing import Cluster
from tests.network.wire import WireClient, make
from tests.wire.support import READ_S, wait_until

pytestmark = pytest.mark.timeout(120)

EXISTING = {0: (1, 2), 1: (2, 3)}
# what Kafka generates for partitions 2 and 3 of that topic (AdminUtils.assignReplicasToBrokers
# from partition 2 and partition 0's first broker)
GENERATED = {2: (3, 1), 3: (1, 3)}

# (total, assignments for the new partitions, Kafka's error code, Kafka's message)
Refusal = tuple[int, list[list[int]] | None, int, str]
REFUSED: list[Refusal] = [
    (1, None, 37, "Topic currently has 2 partitions, which is higher than the requested 1."),
    (2, None, 37, "Topic already has 2 partitions."),
    (3, [[1, 4]], 39, "Unknown broker(s) in replica assignment: 4."),
    (4, [[1, 2]], 39, "Increasing the number of partitions by 2 but 1 assignments provided."),
    (
        3,
        [[3, 3]],
        39,
        "Duplicate brokers not allowed in replica assignment: 3, 3 for partition id 2.",
    ),
    (
        3,
        [[1, 2, 3]],
        39,
        "Inconsistent replication factor between partitions, partition 0 has 2 while "
        "partitions [2] have replication factors [3], respectively.",
    ),
]
KAFKA_PYTHON_ERRORS = {
    37: kafka.errors.InvalidPartitionsError,
    39: kafka.errors.InvalidReplicationAssignmentError,
}
AIOKAFKA_ERRORS = {
    37: aiokafka.errors.InvalidPartitionsError,
    39: aiokafka.errors.InvalidReplicationAssignmentError,
}


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def confluent_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


@pytest.fixture(scope="module")
def zookeeper(cluster: Cluster) -> Iterator[Any]:
    """A ZooKeeper session of the tests' own, as an operator's tool would open."""
    assert cluster.embedded_zookeeper is not None
    session = cluster.embedded_zookeeper.connect(30_000)
    yield session
    session.stop()


@pytest.fixture
def two_partitions(cluster: Cluster, topic: str) -> str:
    cluster.create_topic(topic, assignments=EXISTING)
    return topic


def assignment(zookeeper: Any, topic: str) -> dict[int, tuple[int, ...]]:
    data, _ = zookeeper.get(zk_data.topic_path(topic))
    return zk_data.decode_assignment(topic, data)


def known_partitions(cluster: Cluster, broker: int, topic: str) -> int:
    """How many partitions of `topic` the broker's metadata cache has."""
    response = cluster._result(broker, cluster._request(broker, MetadataRequest(topics=(topic,))))
    assert isinstance(response, MetadataResponse)
    return sum(len(t.partitions) for t in response.topics if t.topic == topic)


def check_added(cluster: Cluster, zookeeper: Any, topic: str, added: dict[int, Any]) -> None:
    """The znode holds the old partitions and `added`, each new one led by its first replica,
    and every broker's metadata has them all."""
    assert assignment(zookeeper, topic) == {**EXISTING, **added}
    for partition, replicas in added.items():
        assert cluster.wait_for_leader(topic, partition) == replicas[0]
    total = len(EXISTING) + len(added)
    wait_until(
        lambda: all(known_partitions(cluster, b, topic) == total for b in cluster.live_brokers()),
        READ_S,
        f"every broker's metadata to have {total} partitions of {topic}",
    )


# -- kafka-python --------------------------------------------------------------------------------


def test_kafka_python_adds_partitions_kafka_assigns_and_writes_and_reads_a_new_one(
    cluster: Cluster, kafka_admin: KafkaAdminClient, zookeeper: Any, two_partitions: str
) -> None:
    topic = two_partitions
    kafka_admin.create_partitions({topic: 4})
    check_added(cluster, zookeeper, topic, GENERATED)

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        sent = producer.send(topic, b"in partition 3", partition=3).get(READ_S)
    finally:
        producer.close(timeout=READ_S)
    assert (sent.partition, sent.offset) == (3, 0)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    read: list[bytes] = []
    try:
        assert consumer.partitions_for_topic(topic) == {0, 1, 2, 3}
        consumer.assign([KafkaPartition(topic, 3)])
        consumer.seek_to_beginning()

        def one() -> bool:
            for records in consumer.poll(timeout_ms=100).values():
                read.extend(r.value for r in records)
            return bool(read)

        wait_until(one, READ_S, "kafka-python to read the record of partition 3")
    finally:
        consumer.close()
    assert read == [b"in partition 3"]


@pytest.mark.parametrize("refusal", REFUSED)
def test_kafka_python_gets_its_error_class_with_kafkas_message(
    kafka_admin: KafkaAdminClient,
    zookeeper: Any,
    two_partitions: str,
    refusal: Refusal,
) -> None:
    total, assignments, code, message = refusal
    request: Any = total if assignments is None else {"count": total, "assignments": assignments}
    with pytest.raises(KAFKA_PYTHON_ERRORS[code]) as refused:
        kafka_admin.create_partitions({two_partitions: request})
    assert f"error_message={message!r}" in str(refused.value)
    assert assignment(zookeeper, two_partitions) == EXISTING


def test_kafka_python_validate_only_checks_and_adds_nothing(
    cluster: Cluster, kafka_admin: KafkaAdminClient, zookeeper: Any, two_partitions: str
) -> None:
    kafka_admin.create_partitions({two_partitions: 5}, validate_only=True)
    with pytest.raises(kafka.errors.InvalidPartitionsError):
        kafka_admin.create_partitions({two_partitions: 2}, validate_only=True)
    assert assignment(zookeeper, two_partitions) == EXISTING
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        assert consumer.partitions_for_topic(two_partitions) == {0, 1}
    finally:
        consumer.close()


def test_kafka_python_gets_unknown_topic_for_a_topic_that_does_not_exist(
    kafka_admin: KafkaAdminClient, topic: str
) -> None:
    with pytest.raises(kafka.errors.UnknownTopicOrPartitionError) as refused:
        kafka_admin.create_partitions({topic: 3})
    assert f"The topic '{topic}' does not exist." in str(refused.value)


# -- confluent-kafka -----------------------------------------------------------------------------


def test_confluent_kafka_honours_a_manual_assignment_and_writes_and_reads_a_new_one(
    cluster: Cluster, confluent_admin: AdminClient, zookeeper: Any, two_partitions: str
) -> None:
    topic = two_partitions
    wanted = {2: (3, 2), 3: (2, 1)}
    futures = confluent_admin.create_partitions(
        [ConfluentNewPartitions(topic, 4, replica_assignment=[list(r) for r in wanted.values()])]
    )
    futures[topic].result(READ_S)
    check_added(cluster, zookeeper, topic, wanted)

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    delivered: list[Any] = []
    producer.produce(
        topic, b"in partition 2", partition=2, on_delivery=lambda e, m: delivered.append((e, m))
    )
    assert producer.flush(READ_S) == 0
    [(error, message)] = delivered
    assert error is None and (message.partition(), message.offset()) == (2, 0)
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"{topic}-reader"}
    )
    try:
        consumer.assign([ConfluentPartition(topic, 2, 0)])
        read = consumer.consume(1, READ_S)
    finally:
        consumer.close()
    assert [(m.error(), m.value()) for m in read] == [(None, b"in partition 2")]


@pytest.mark.parametrize("refusal", [REFUSED[1], REFUSED[2], REFUSED[5]])
def test_confluent_kafka_gets_kafkas_error_code_and_message(
    confluent_admin: AdminClient,
    zookeeper: Any,
    two_partitions: str,
    refusal: Refusal,
) -> None:
    total, assignments, code, message = refusal
    extra = {} if assignments is None else {"replica_assignment": assignments}
    futures = confluent_admin.create_partitions(
        [ConfluentNewPartitions(two_partitions, total, **extra)]
    )
    with pytest.raises(KafkaException) as refused:
        futures[two_partitions].result(READ_S)
    error: KafkaError = refused.value.args[0]
    assert (error.code(), error.str()) == (code, message)
    assert assignment(zookeeper, two_partitions) == EXISTING


def test_confluent_kafka_validate_only_adds_nothing(
    confluent_admin: AdminClient, zookeeper: Any, two_partitions: str
) -> None:
    futures = confluent_admin.create_partitions(
        [ConfluentNewPartitions(two_partitions, 6)], validate_only=True
    )
    futures[two_partitions].result(READ_S)
    assert assignment(zookeeper, two_partitions) == EXISTING


# -- aiokafka ------------------------------------------------------------------------------------


def test_aiokafka_adds_partitions_and_writes_and_reads_a_new_one(
    cluster: Cluster, zookeeper: Any, two_partitions: str
) -> None:
    topic = two_partitions

    async def scenario() -> tuple[int, list[bytes]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_partitions({topic: AioNewPartitions(3, None)})
        finally:
            await admin.close()
        await asyncio.to_thread(check_added, cluster, zookeeper, topic, {2: GENERATED[2]})
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        await producer.start()
        try:
            sent = await asyncio.wait_for(
                producer.send_and_wait(topic, b"in partition 2", partition=2), READ_S
            )
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
        await consumer.start()
        try:
            consumer.assign([AioPartition(topic, 2)])
            await consumer.seek_to_beginning(AioPartition(topic, 2))
            record = await asyncio.wait_for(consumer.getone(), READ_S)
        finally:
            await consumer.stop()
        return sent.offset, [record.value]

    assert asyncio.run(scenario()) == (0, [b"in partition 2"])


@pytest.mark.parametrize("refusal", [REFUSED[0], REFUSED[2]])
def test_aiokafka_gets_its_error_class_with_kafkas_message(
    cluster: Cluster,
    zookeeper: Any,
    two_partitions: str,
    refusal: Refusal,
) -> None:
    total, assignments, code, message = refusal

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_partitions({two_partitions: AioNewPartitions(total, assignments)})
        finally:
            await admin.close()

    with pytest.raises(AIOKAFKA_ERRORS[code]) as refused:
        asyncio.run(scenario())
    assert str(refused.value).endswith(
        f"Could not create partitions for {two_partitions}: {message}"
    )
    assert assignment(zookeeper, two_partitions) == EXISTING


# -- ZooKeeper and the controller ----------------------------------------------------------------


def test_a_larger_assignment_written_into_zookeeper_is_noticed_by_the_controller(
    cluster: Cluster, zookeeper: Any, two_partitions: str
) -> None:
    topic = two_partitions
    data, stat = zookeeper.get(zk_data.topic_path(topic))
    body = json.loads(data)
    body["partitions"]["2"] = [3, 2]
    zookeeper.set(zk_data.topic_path(topic), json.dumps(body).encode(), version=stat.version)
    check_added(cluster, zookeeper, topic, {2: (3, 2)})
    # and again: the controller left its watch on the znode once more
    data, stat = zookeeper.get(zk_data.topic_path(topic))
    body = json.loads(data)
    body["partitions"]["3"] = [1, 3]
    zookeeper.set(zk_data.topic_path(topic), json.dumps(body).encode(), version=stat.version)
    check_added(cluster, zookeeper, topic, {2: (3, 2), 3: (1, 3)})


def test_a_broker_that_is_not_the_controller_answers_not_controller(
    cluster: Cluster, zookeeper: Any, two_partitions: str
) -> None:
    controller = cluster.controller_id()
    other = next(b for b in cluster.broker_ids if b != controller)
    host, port = cluster.bootstrap_servers.split(",")[other - 1].rsplit(":", 1)
    request = make(
        CreatePartitionsRequest,
        topics=(make(CreatePartitionsTopic, name=two_partitions, count=4, assignments=None),),
        timeout=datetime.timedelta(seconds=5),
        validate_only=False,
    )
    with WireClient(host, int(port)) as client:
        response = client.call(ApiKey.CREATE_PARTITIONS, 3, request)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        (two_partitions, 41, None)
    ]
    assert assignment(zookeeper, two_partitions) == EXISTING


def test_a_zero_timeout_is_answered_at_once_with_request_timed_out_and_the_partitions_come(
    cluster: Cluster, zookeeper: Any, two_partitions: str
) -> None:
    """Kafka's ZkAdminManager: with timeout_ms <= 0 the answer does not wait in the topic
    purgatory; the topics written are REQUEST_TIMED_OUT, and the write stands."""
    controller = cluster.controller_id()
    assert controller is not None
    host, port = cluster.bootstrap_servers.split(",")[controller - 1].rsplit(":", 1)
    request = make(
        CreatePartitionsRequest,
        topics=(make(CreatePartitionsTopic, name=two_partitions, count=3, assignments=None),),
        timeout=datetime.timedelta(0),
        validate_only=False,
    )
    with WireClient(host, int(port)) as client:
        response = client.call(ApiKey.CREATE_PARTITIONS, 3, request)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        (two_partitions, 7, None)  # REQUEST_TIMED_OUT
    ]
    check_added(cluster, zookeeper, two_partitions, {2: GENERATED[2]})
