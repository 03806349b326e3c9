"""Topic ids (KIP-516, as Kafka 2.8 keeps them in ZooKeeper) through real clients.

Every topic gets a random id when it is created, kept in `/brokers/topics/<t>`; Metadata
v10+ answers carry it, and confluent-kafka's and kafka-python's admin clients show it. A topic
deleted and created again under its name has a new id, which is how librdkafka (Metadata v12)
tells that its topic is a new one: a producer whose topic came back with fewer partitions has
its records for the vanished partitions failed with `_UNKNOWN_PARTITION` instead of keeping
them queued forever, and goes on writing the partitions that exist into the new topic. A topic
znode an older tool wrote without an id gets one from the controller.

The tests share the module's three-broker cluster, each on topics of its own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaAdminClient

from kafkactor.actors.controller import zk_data
from kafkactor.kafka_uuid import uuid_to_string
from kafkactor.network.api_versions import ApiKey
from kafkactor.testing import Cluster
from tests.network.wire import WireClient, make, nested, request_schema
from tests.wire.support import READ_S, read_in_process, wait_until

pytestmark = pytest.mark.timeout(120)

_MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def confluent_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


@pytest.fixture(scope="module")
def kafka_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield admin
    admin.close()


@pytest.fixture(scope="module")
def zookeeper(cluster: Cluster) -> Iterator[Any]:
    """A ZooKeeper session of the tests' own, as an operator's tool would open."""
    assert cluster.embedded_zookeeper is not None
    session = cluster.embedded_zookeeper.connect(30_000)
    yield session
    session.stop()


def znode_topic_id(zookeeper: Any, topic: str) -> uuid.UUID | None:
    data, _ = zookeeper.get(zk_data.topic_path(topic))
    return zk_data.decode_topic_id(topic, data)


def confluent_topic_id(admin: AdminClient, topic: str) -> uuid.UUID:
    """The id confluent-kafka's describe_topics shows (librdkafka's Uuid, as Python's)."""
    found = admin.describe_topics(TopicCollection([topic]))[topic].result(READ_S).topic_id
    high, low = found.get_most_significant_bits(), found.get_least_significant_bits()
    return uuid.UUID(int=((high & _MASK) << 64) | (low & _MASK))


def broker_address(cluster: Cluster) -> tuple[str, int]:
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


def metadata(cluster: Cluster, version: int, topics: list[tuple[str | None, uuid.UUID]]) -> Any:
    schema = request_schema(ApiKey.METADATA, version)
    topic_type = nested(schema, "MetadataRequestTopic")
    request = make(
        schema,
        topics=tuple(make(topic_type, name=n, topic_id=i) for n, i in topics),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    with WireClient(*broker_address(cluster)) as client:
        return client.call(ApiKey.METADATA, version, request)


def test_admin_clients_show_the_id_written_in_zookeeper(
    cluster: Cluster,
    topic: str,
    zookeeper: Any,
    confluent_admin: AdminClient,
    kafka_admin: KafkaAdminClient,
) -> None:
    cluster.create_topic(topic, partitions=2, replication_factor=2)
    data, _ = zookeeper.get(zk_data.topic_path(topic))
    written = json.loads(data)
    assert written["version"] == 3  # Kafka 2.8's TopicZNode with its id
    topic_id = zk_data.decode_topic_id(topic, data)
    assert topic_id is not None and topic_id.int != 0
    assert written["topic_id"] == uuid_to_string(topic_id)

    assert confluent_topic_id(confluent_admin, topic) == topic_id
    described = kafka_admin.describe_topics([topic])
    assert [(d["name"], d["topic_id"]) for d in described] == [(topic, str(topic_id))]


def test_a_topic_created_again_under_its_name_has_a_new_id(
    cluster: Cluster, topic: str, zookeeper: Any, confluent_admin: AdminClient
) -> None:
    for future in confluent_admin.create_topics([NewTopic(topic, 1, 2)]).values():
        future.result(READ_S)
    first = confluent_topic_id(confluent_admin, topic)
    for future in confluent_admin.delete_topics([topic]).values():
        future.result(READ_S)

    def created_again() -> bool:
        # TOPIC_ALREADY_EXISTS while the controller still deletes its replicas, as in Kafka
        future = confluent_admin.create_topics([NewTopic(topic, 1, 2)])[topic]
        try:
            future.result(READ_S)
        except KafkaException as error:
            assert error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
            return False
        return True

    wait_until(created_again, READ_S, f"{topic} created again")
    second = znode_topic_id(zookeeper, topic)
    assert second is not None and second != first
    wait_until(
        lambda: confluent_topic_id(confluent_admin, topic) == second,
        READ_S,
        "the new id in every broker's metadata",
    )


def test_librdkafka_sees_its_topic_created_again_with_fewer_partitions(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, partitions=3, replication_factor=2)
    delivered: list[Message] = []
    failed: list[tuple[bytes | None, KafkaError]] = []

    def report(error: KafkaError | None, message: Message) -> None:
        if error is None:
            delivered.append(message)
        else:
            failed.append((message.value(), error))

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        producer.produce(topic, b"old", partition=2, on_delivery=report)
        assert producer.flush(READ_S) == 0
        assert [(m.partition(), m.value()) for m in delivered] == [(2, b"old")]

        cluster.delete_topic(topic)
        cluster.create_topic(topic, partitions=1, replication_factor=2)
        refused: list[bytes] = []
        sent = 0

        def new_topic_seen() -> bool:
            # librdkafka refuses a partition it knows is gone at once, or fails what it queued
            nonlocal sent
            sent += 1
            value = b"vanished-%d" % sent
            try:
                producer.produce(topic, value, partition=2, on_delivery=report)
            except KafkaException as error:
                assert error.args[0].code() == KafkaError._UNKNOWN_PARTITION
                refused.append(value)
            producer.poll(0.1)
            return bool(refused)

        wait_until(new_topic_seen, READ_S, "librdkafka refusing the vanished partition 2")
        producer.produce(topic, b"new", partition=0, on_delivery=report)
        assert producer.flush(READ_S) == 0  # nothing left queued for partition 2
    finally:  # what is still queued fails (_PURGE_QUEUE) rather than blocking close()
        producer.purge()
        producer.flush(READ_S)
        producer.close()

    queued = {b"vanished-%d" % i for i in range(1, sent + 1)} - set(refused)
    assert {value for value, _ in failed} == queued
    assert {e.code() for _, e in failed} <= {KafkaError._UNKNOWN_PARTITION}
    assert [(m.partition(), m.value()) for m in delivered[1:]] == [(0, b"new")]
    # the new topic holds only what was written after it was created
    assert [r.value for r in read_in_process(cluster, topic, [0], 1)] == [b"new"]


def test_a_topic_znode_written_without_an_id_gets_one_from_the_controller(
    cluster: Cluster, topic: str, zookeeper: Any, confluent_admin: AdminClient
) -> None:
    # what an older kafka-topics.sh --zookeeper writes: version 1, no topic_id
    zookeeper.create(
        zk_data.topic_path(topic), zk_data.encode_assignment({0: (1, 2)}), makepath=True
    )
    assigned = wait_until(lambda: znode_topic_id(zookeeper, topic), READ_S, "an id written")
    data, _ = zookeeper.get(zk_data.topic_path(topic))
    assert zk_data.decode_assignment(topic, data) == {0: (1, 2)}
    assert json.loads(data)["version"] == 3
    wait_until(
        lambda: confluent_topic_id(confluent_admin, topic) == assigned,
        READ_S,
        "the controller's id in the brokers' metadata",
    )


def test_metadata_v12_answers_topics_named_by_id(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    known: Any = wait_until(
        lambda: next(
            (t for t in metadata(cluster, 12, [(topic, uuid.UUID(int=0))]).topics if t.topic_id),
            None,
        ),
        READ_S,
        f"{topic} known with its id",
    )
    unknown = uuid.uuid4()

    answer = metadata(cluster, 12, [(None, unknown), (None, known.topic_id)])
    assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
        (100, None, unknown),  # UNKNOWN_TOPIC_ID, first as in Kafka's answer
        (0, topic, known.topic_id),
    ]
    assert len(answer.topics[1].partitions) == 1


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_and_v11_refuse_topics_named_by_id(
    cluster: Cluster, topic: str, version: int
) -> None:
    asked = uuid.uuid4()
    answer = metadata(cluster, version, [(topic, asked)])
    assert [(t.error_code, t.name, t.topic_id, t.partitions) for t in answer.topics] == [
        (42, topic, asked, ())  # INVALID_REQUEST, as Kafka's getErrorResponse
    ]
    answer = metadata(cluster, version, [(None, uuid.UUID(int=0))])
    assert [(t.error_code, t.name) for t in answer.topics] == [(42, "")]
