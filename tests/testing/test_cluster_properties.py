"""`Cluster(properties=...)` and `@pytest.mark.kafka_cluster(properties=...)`: Kafka's broker
properties, shared by every broker, taking effect where a client sees them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkactor.actors.broker import BrokerConfig
from kafkactor.network.admin_apis import KafkaApisConfig
from kafkactor.server import ConfigError
from kafkactor.testing import Cluster

TEST_SETTINGS = {
    "num.partitions": "4",
    "group.initial.rebalance.delay.ms": "0",
    "min.insync.replicas": "2",
    "log.retention.ms": "120000",
    "socket.request.max.bytes": "1048576",
}


@pytest.mark.kafka_cluster(brokers=2, properties=TEST_SETTINGS)
@pytest.mark.timeout(60)
def test_the_marker_passes_properties_that_take_effect(kafka_cluster: Cluster) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)
    assert producer.partitions_for("fresh") == {0, 1, 2, 3}  # auto-created: num.partitions
    producer.close()
    topic_config = kafka_cluster.topic_configs["fresh"]  # the brokers' topic-config defaults
    assert (topic_config.min_insync_replicas, topic_config.retention_ms) == (2, 120_000)
    for broker in kafka_cluster.brokers.values():
        assert broker.config.group.initial_rebalance_delay_ms == 0
        assert broker.listener is not None
        assert broker.listener.socket_request_max_bytes == 1_048_576


OLD_TIMESTAMP_MS = 1_000_000_000_000  # 2001: far from any broker's clock
LOG_APPEND_TIME = 1  # a record's timestamp type, as kafka-python reports it


@pytest.mark.kafka_cluster(properties={"log.message.timestamp.type": "LogAppendTime"})
@pytest.mark.timeout(30)
def test_log_append_time_as_a_broker_default_stamps_an_auto_created_topic(
    kafka_cluster: Cluster,
) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)
    before = int(time.time() * 1000)
    sent = producer.send("stamped", b"v", timestamp_ms=OLD_TIMESTAMP_MS).get(timeout=10)
    after = int(time.time() * 1000)
    producer.close()
    assert before <= sent.timestamp <= after  # the Produce answer's log_append_time
    assert kafka_cluster.topic_configs["stamped"].message_timestamp_type == "LogAppendTime"

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, auto_offset_reset="earliest"
    )
    consumer.assign([TopicPartition("stamped", 0)])
    try:
        records = consumer.poll(timeout_ms=10_000, max_records=1)  # returns once it has one
    finally:
        consumer.close()
    (record,) = records[TopicPartition("stamped", 0)]
    assert (record.timestamp_type, record.timestamp) == (LOG_APPEND_TIME, sent.timestamp)


@pytest.mark.timeout(10)
def test_properties_are_laid_over_config(tmp_path: Path) -> None:
    config = BrokerConfig(apis=KafkaApisConfig(num_partitions=2, delete_topic_enable=False))
    cluster = Cluster(1, data_dir=tmp_path, config=config, properties={"num.partitions": "4"})
    assert cluster.config.apis.num_partitions == 4  # the property wins for what it names
    assert cluster.config.apis.delete_topic_enable is False  # config keeps the rest
    ignored = Cluster(1, data_dir=tmp_path, properties={"num.io.threads": "8"})
    assert ignored.properties_ignored == ("num.io.threads",)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"num.partitions": "0"}, "properties: 'num.partitions' must be a positive integer"),
        ({"offsets.topic.num.partitions": "x"}, "'offsets.topic.num.partitions' must be a posit"),
        ({"num.partiton": "4"}, "unknown setting 'num.partiton' (did you mean 'num.partitions'?)"),
        ({"broker.id": "1"}, "'broker.id' names one broker"),
        ({"advertised.listeners": "PLAINTEXT://h:1"}, "'advertised.listeners' names one broker"),
        ({"log.dirs": "/data"}, "'log.dirs' is a Cluster parameter here: give data_dir="),
        ({"listeners": "PLAINTEXT://h:1"}, "'listeners' is a Cluster parameter here: give listen="),
        ({"zookeeper.connect": "h:2181"}, "give zookeeper="),
    ],
)
@pytest.mark.timeout(10)
def test_a_property_it_cannot_take_is_refused_naming_it(
    tmp_path: Path, properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        Cluster(1, data_dir=tmp_path, properties=properties)
    assert message in str(refused.value)
    assert refused.value.setting == next(iter(properties))
