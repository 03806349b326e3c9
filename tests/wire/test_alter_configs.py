"""AlterConfigs and IncrementalAlterConfigs through real clients: kafka-python's
KafkaAdminClient.alter_configs (incremental or not), confluent-kafka's AdminClient
incremental_alter_configs and alter_configs, aiokafka's AIOKafkaAdminClient.alter_configs.
A change reaches the running logs (a lower retention.ms deletes old segments at the next
retention check and moves ListOffsets' earliest offset; a higher min.insync.replicas refuses
acks=all), DescribeConfigs reports it as DYNAMIC_TOPIC_CONFIG (and a topic's creation
overrides alone as such), a deleted override reverts to the default, refusals are each
client's own error with Kafka's message, and validate_only changes nothing.

The tests share the module's three-broker cluster (retention checked every 100 ms; the
brokers' `log.message.downconversion.enable=false` is a static default no topic overrides),
each on a topic of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.errors import NotEnoughReplicasError

from kafkactor.testing import Cluster
from tests.wire.conftest import LISTEN
from tests.wire.support import READ_S, wait_until

pytestmark = [
    pytest.mark.timeout(90),
    # confluent-kafka deprecates AlterConfigs for IncrementalAlterConfigs; both are tested
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),
]

PROPERTIES = {
    "log.retention.check.interval.ms": "100",
    "log.message.downconversion.enable": "false",
}
SMALL_SEGMENTS = {"segment.bytes": "300"}  # a few records per segment


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, listen=LISTEN, properties=PROPERTIES) as started:
        yield started


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


@pytest.fixture(scope="module")
def kafka_python_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def _produce(cluster: Cluster, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        for i in range(count):
            producer.send(topic, f"value-{i:04d}".encode() * 3, partition=0).get(READ_S)
    finally:
        producer.close()


def _earliest(cluster: Cluster, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        tp = KafkaTopicPartition(topic, 0)
        offsets: dict[KafkaTopicPartition, int] = consumer.beginning_offsets([tp])
        return offsets[tp]
    finally:
        consumer.close()


def _describe(admin: AdminClient, topic: str) -> dict[str, Any]:
    (future,) = admin.describe_configs(
        [ConfigResource("topic", topic)], request_timeout=READ_S
    ).values()
    found: dict[str, Any] = future.result(READ_S)
    return found


def _results(futures: Mapping[Any, Future[Any]]) -> list[object]:
    """Each future's result (None for a success), or the KafkaError it failed with."""
    out: list[object] = []
    for future in futures.values():
        try:
            out.append(future.result(READ_S))
        except KafkaException as failed:
            out.append(failed.args[0])
    return out


def test_kafka_python_lowers_retention_and_old_segments_go(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, admin: AdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3, config=SMALL_SEGMENTS)
    _produce(cluster, topic, 40)
    leader = cluster.brokers[cluster.leader(topic, 0)].logs[f"{topic}-0"]
    assert len(leader.segments) > 5
    assert _earliest(cluster, topic) == 0
    answer = kafka_python_admin.alter_configs(
        [
            KafkaPythonConfigResource(
                ConfigResourceType.TOPIC,
                topic,
                configs={"retention.ms": "1", "segment.bytes": "300"},
            )
        ],
        incremental=False,  # AlterConfigs: the whole set
    )
    assert answer == {"topic": {topic: "OK"}}
    wait_until(lambda: _earliest(cluster, topic) > 0, READ_S, "ListOffsets' earliest to move")
    logs = [broker.logs[f"{topic}-0"] for broker in cluster.brokers.values()]
    wait_until(lambda: all(len(log.segments) == 1 for log in logs), READ_S, "one segment left")
    retention = _describe(admin, topic)["retention.ms"]
    assert (retention.value, retention.source) == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def test_only_creation_overrides_are_dynamic_topic_configs(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3, config={"retention.ms": "1234"})
    configs = _describe(admin, topic)
    dynamic = {n for n, c in configs.items() if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert dynamic == {"retention.ms"}
    downconversion = configs["message.downconversion.enable"]
    assert (downconversion.value, downconversion.source) == (
        "false",
        ConfigSource.STATIC_BROKER_CONFIG.value,
    )


def test_confluent_incremental_set_then_delete_reverts_to_the_default(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3, config={"retention.ms": "60000"})
    resource = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "5000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND
            ),
        ],
    )
    assert _results(admin.incremental_alter_configs([resource])) == [None]
    configs = _describe(admin, topic)
    assert configs["max.message.bytes"].value == "5000"
    assert configs["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # stored as Kafka stores it; DescribeConfigs lists LogConfig's canonical order
    assert cluster.topic_config(topic)["cleanup.policy"] == "delete,compact"
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["retention.ms"].value == "60000"  # untouched
    wait_until(
        lambda: all(
            b.logs[f"{topic}-0"].config.max_message_bytes == 5000 for b in cluster.brokers.values()
        ),
        READ_S,
        "every replica to run with the new config",
    )
    deleted = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    assert _results(admin.incremental_alter_configs([deleted])) == [None]
    retention = _describe(admin, topic)["retention.ms"]
    assert (retention.value, retention.source) == ("604800000", ConfigSource.DEFAULT_CONFIG.value)


def test_confluent_refusals_are_kafkas(cluster: Cluster, admin: AdminClient, topic: str) -> None:
    cluster.create_topic(topic, 1, 1)

    def incremental(name: str, value: str | None, op: AlterConfigOpType) -> KafkaError:
        entry = ConfigEntry(name, value, incremental_operation=op)
        futures = admin.incremental_alter_configs(
            [ConfigResource("topic", topic, incremental_configs=[entry])]
        )
        (error,) = _results(futures)
        assert isinstance(error, KafkaError), error
        return error

    bad = incremental("retention.ms", "soon", AlterConfigOpType.SET)
    assert bad.code() == KafkaError.INVALID_REQUEST
    assert bad.str() == (
        f"Invalid config value for resource ConfigResource(type=TOPIC, name='{topic}'): "
        "Invalid value soon for configuration retention.ms: Not a number of type LONG"
    )
    unknown = incremental("retention.mss", "1", AlterConfigOpType.SET)
    assert (unknown.code(), unknown.str()) == (
        KafkaError.INVALID_CONFIG,
        "Unknown topic config name: retention.mss",
    )
    append = incremental("retention.ms", "1", AlterConfigOpType.APPEND)
    assert (append.code(), append.str()) == (
        KafkaError.INVALID_REQUEST,
        "Config value append is not allowed for config key: retention.ms",
    )
    (missing,) = _results(
        admin.incremental_alter_configs(
            [
                ConfigResource(
                    "topic",
                    "no-such-topic-alter",
                    incremental_configs=[
                        ConfigEntry(
                            "retention.ms", "1", incremental_operation=AlterConfigOpType.SET
                        )
                    ],
                )
            ]
        )
    )
    assert isinstance(missing, KafkaError) and missing.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    (broker,) = _results(
        admin.alter_configs([ConfigResource("broker", "1", set_config={"log.retention.ms": "5"})])
    )
    assert isinstance(broker, KafkaError)
    assert (broker.code(), broker.str()) == (
        KafkaError.INVALID_REQUEST,
        "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
        "Cannot update these configs dynamically: Set(log.retention.ms)",
    )
    assert cluster.topic_config(topic) == {}


def test_validate_only_changes_nothing(
    cluster: Cluster, admin: AdminClient, kafka_python_admin: KafkaAdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3, config={"retention.ms": "60000"})
    (checked,) = _results(
        admin.alter_configs(
            [ConfigResource("topic", topic, set_config={"retention.ms": "5"})],
            validate_only=True,
        )
    )
    assert checked is None
    answer = kafka_python_admin.alter_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic, configs={"flush.ms": "7"})],
        validate_only=True,
    )
    assert answer == {"topic": {topic: "OK"}}
    refused = kafka_python_admin.alter_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic, configs={"flush.ms": "-7"})],
        validate_only=True,
    )
    assert refused["topic"][topic].startswith("[Error 42] InvalidRequestError: Invalid config")
    assert cluster.topic_config(topic) == {"retention.ms": "60000"}
    for broker in cluster.brokers.values():
        assert broker.logs[f"{topic}-0"].config.retention_ms == 60000


def test_min_insync_replicas_above_the_isr_refuses_acks_all(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3)
    _produce(cluster, topic, 1)
    (changed,) = _results(
        admin.incremental_alter_configs(
            [
                ConfigResource(
                    "topic",
                    topic,
                    incremental_configs=[
                        ConfigEntry(
                            "min.insync.replicas", "4", incremental_operation=AlterConfigOpType.SET
                        )
                    ],
                )
            ]
        )
    )
    assert changed is None
    leader = cluster.brokers[cluster.leader(topic, 0)].logs[f"{topic}-0"]
    wait_until(lambda: leader.config.min_insync_replicas == 4, READ_S, "the leader to apply it")
    # NOT_ENOUGH_REPLICAS is retriable: kafka-python would retry it for its delivery timeout
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, retries=0)
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send(topic, b"refused", partition=0).get(READ_S)
    finally:
        producer.close()


def test_aiokafka_alters_a_topics_config(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, 1, 3)

    async def alter() -> list[object]:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            found: list[object] = await client.alter_configs(
                [
                    AioConfigResource(
                        AioConfigResourceType.TOPIC, topic, configs={"segment.ms": "3600000"}
                    ),
                    AioConfigResource(
                        AioConfigResourceType.TOPIC, topic + "-x", configs={"segment.ms": "1"}
                    ),
                ]
            )
            return found
        finally:
            await client.close()

    responses = asyncio.run(asyncio.wait_for(alter(), READ_S))
    codes = {
        name: code
        for response in responses
        for code, _, _, name in response.resources  # type: ignore[attr-defined]
    }
    assert codes == {topic: 0, topic + "-x": 3}  # UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.topic_config(topic) == {"segment.ms": "3600000"}
