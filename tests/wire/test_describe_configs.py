"""DescribeConfigs through real clients: a topic's configs (its override as
DYNAMIC_TOPIC_CONFIG, the rest defaults), a broker's static configuration (read-only) and an
unknown topic, as kafka-python's KafkaAdminClient, confluent-kafka's AdminClient and aiokafka's
AIOKafkaAdminClient read them.

The tests share the module's three-broker cluster, each on a topic of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    ConfigSource,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kafkactor.storage.topic_config import TOPIC_CONFIGS
from kafkactor.testing import Cluster
from tests.wire.support import READ_S

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


@pytest.fixture(scope="module")
def kafka_python_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def test_kafka_python_reads_a_topics_override_and_its_defaults(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3, config={"retention.ms": "1234"})
    found = kafka_python_admin.describe_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )
    configs = found["topic"][topic]
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["retention.ms"]["value"] == "1234"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"
    assert {c["config_source"] for name, c in configs.items() if name != "retention.ms"} == {
        "DEFAULT_CONFIG"
    }
    assert not any(c["read_only"] or c["is_sensitive"] for c in configs.values())
    # the default filter: only what is not a default
    modified = kafka_python_admin.describe_configs(
        [KafkaPythonConfigResource(ConfigResourceType.TOPIC, topic)]
    )
    assert list(modified["topic"][topic]) == ["retention.ms"]


def test_confluent_kafka_reads_values_sources_and_synonyms(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3, config={"retention.ms": "1234"})
    futures = admin.describe_configs([ConfigResource("topic", topic)], request_timeout=READ_S)
    (future,) = futures.values()
    configs = future.result(READ_S)
    retention = configs["retention.ms"]
    assert retention.value == "1234"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not (retention.is_default or retention.is_read_only or retention.is_sensitive)
    assert [(s.name, s.value, s.source) for s in retention.synonyms.values()] == [
        ("retention.ms", "1234", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    ]
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source, segment.is_default) == (
        "1073741824",
        ConfigSource.DEFAULT_CONFIG.value,
        True,
    )
    assert [(s.name, s.value, s.source) for s in segment.synonyms.values()] == [
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG.value)
    ]


def test_confluent_kafka_reads_a_brokers_static_configuration(admin: AdminClient) -> None:
    (future,) = admin.describe_configs(
        [ConfigResource("broker", "2")], request_timeout=READ_S
    ).values()
    configs = future.result(READ_S)
    partitions = configs["num.partitions"]
    assert (partitions.value, partitions.is_read_only, partitions.source) == (
        "1",
        True,
        ConfigSource.DEFAULT_CONFIG.value,
    )
    assert configs["broker.id"].value == "2"
    assert all(c.is_read_only for c in configs.values())


def test_an_unknown_topic_is_the_clients_unknown_topic_error(admin: AdminClient) -> None:
    (future,) = admin.describe_configs(
        [ConfigResource("topic", "no-such-topic-describe")], request_timeout=READ_S
    ).values()
    with pytest.raises(KafkaException) as failed:
        future.result(READ_S)
    assert failed.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_aiokafka_reads_a_topics_configs(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, 1, 3, config={"cleanup.policy": "compact"})

    async def describe() -> list[object]:
        client = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await client.start()
        try:
            found: list[object] = await client.describe_configs(
                [AioConfigResource(AioConfigResourceType.TOPIC, topic)]
            )
            return found
        finally:
            await client.close()

    (response,) = asyncio.run(asyncio.wait_for(describe(), READ_S))
    ((code, _, kind, name, configs),) = response.resources  # type: ignore[attr-defined]
    assert (code, kind, name) == (0, 2, topic)
    values = {entry[0]: entry[1] for entry in configs}
    assert values["cleanup.policy"] == "compact"
    assert values["retention.ms"] == "604800000"
