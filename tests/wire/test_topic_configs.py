"""Topic configs Kafka 2.x accepts, and the LogValidator checks they switch on, through real
clients: CreateTopics (confluent-kafka's AdminClient) with the configs kafkactor refused
before, `message.timestamp.type=LogAppendTime` as librdkafka and kafka-python report it,
keyless records on a compacted topic (INVALID_RECORD with the record's index) and
`message.timestamp.difference.max.ms` (INVALID_TIMESTAMP).

The tests share the module's three-broker cluster, each on topics of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import kafka.errors
import pytest
from confluent_kafka import (
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaProducer

from kafkactor.actors.controller import zk_data
from kafkactor.testing import Cluster
from kafkactor.testing.read_back import stored_batches
from tests.wire.support import READ_S, wait_until

OLD_TIMESTAMP_MS = 1_000_000_000_000  # 2001: far from any broker's clock

# Configs Kafka 2.x takes that kafkactor refused at creation before (valid, non-default values)
NEWLY_KNOWN = {
    "message.timestamp.type": "LogAppendTime",
    "max.compaction.lag.ms": "86400000",
    "message.timestamp.difference.max.ms": "3600000",
    "compression.type": "lz4",
    "preallocate": "true",
    "message.downconversion.enable": "false",
    "message.format.version": "2.4-IV1",
    "follower.replication.throttled.replicas": "0:1,0:2",
    "leader.replication.throttled.replicas": "*",
    "segment.jitter.ms": "1000",
    "index.interval.bytes": "1024",
}


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


@pytest.fixture(scope="module")
def zookeeper(cluster: Cluster) -> Iterator[object]:
    """A ZooKeeper session of the test's own, to read the znodes the brokers wrote."""
    assert cluster.embedded_zookeeper is not None
    session = cluster.embedded_zookeeper.connect(30_000)
    yield session
    session.stop()


def create(admin: AdminClient, **topics: dict[str, str]) -> dict[str, KafkaError | None]:
    """CreateTopics of each named topic (1 partition, 3 replicas) with its configs: the error
    of each, None when created."""
    futures = admin.create_topics(
        [NewTopic(name, 1, 3, config=config) for name, config in topics.items()],
        request_timeout=READ_S,
    )
    outcome: dict[str, KafkaError | None] = {}
    for name, future in futures.items():
        try:
            future.result(READ_S)
            outcome[name] = None
        except Exception as error:  # confluent-kafka raises KafkaException(KafkaError)
            outcome[name] = error.args[0]
    return outcome


def leader_log_config(cluster: Cluster, topic: str) -> object:
    leader = cluster.wait_for_leader(topic, 0)
    return cluster.brokers[leader].logs[f"{topic}-0"].config


def test_configs_kafka_accepts_are_created_stored_and_read_back(
    cluster: Cluster, admin: AdminClient, zookeeper: object, topic: str
) -> None:
    assert create(admin, **{topic: NEWLY_KNOWN}) == {topic: None}

    data, _ = zookeeper.get(zk_data.topic_config_path(topic))  # type: ignore[attr-defined]
    assert json.loads(data) == {"version": 1, "config": NEWLY_KNOWN}
    expected = zk_data.log_config_from(NEWLY_KNOWN)
    assert expected.message_timestamp_type == "LogAppendTime"
    assert expected.follower_replication_throttled_replicas == "0:1,0:2"
    assert leader_log_config(cluster, topic) == expected


def test_a_bad_config_is_invalid_config_naming_the_key_and_the_valid_values(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    outcome = create(
        admin,
        **{
            f"{topic}-range": {"max.compaction.lag.ms": "0"},
            f"{topic}-value": {"message.timestamp.type": "WallClock"},
            f"{topic}-unknown": {"message.timestamp.kind": "CreateTime"},
        },
    )
    errors = {name: (e.code(), e.str()) for name, e in outcome.items() if e is not None}
    assert errors == {
        f"{topic}-range": (
            KafkaError.INVALID_CONFIG,
            "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1; "
            "valid values: [1,...]",
        ),
        f"{topic}-value": (
            KafkaError.INVALID_CONFIG,
            "Invalid value WallClock for configuration message.timestamp.type: String must be "
            "one of: CreateTime, LogAppendTime",
        ),
        f"{topic}-unknown": (
            KafkaError.INVALID_CONFIG,
            "unknown topic config keys: message.timestamp.kind",
        ),
    }
    assert not any(name.startswith(topic) for name, _ in cluster.partition_states)


def test_log_append_time_is_what_librdkafka_reports_and_followers_keep_byte_for_byte(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    assert create(admin, **{topic: {"message.timestamp.type": "LogAppendTime"}}) == {topic: None}
    reports: list[tuple[KafkaError | None, Message]] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 50})
    before = int(time.time() * 1000)
    for i in range(3):
        producer.produce(
            topic,
            b"value-%d" % i,
            key=b"k",
            timestamp=OLD_TIMESTAMP_MS + i,
            on_delivery=lambda e, m: reports.append((e, m)),
        )
    assert producer.flush(READ_S) == 0
    after = int(time.time() * 1000)
    assert [e for e, _ in reports] == [None] * 3
    stamps = {m.timestamp() for _, m in reports}
    ((kind, append_time),) = stamps  # one batch: one append time for every record
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before <= append_time <= after

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[Message] = []

        def polled() -> bool:
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                read.append(message)
            return len(read) >= 3

        wait_until(polled, READ_S, "three records read back")
    finally:
        consumer.close()
    assert [m.timestamp() for m in read] == [(TIMESTAMP_LOG_APPEND_TIME, append_time)] * 3

    def copies() -> list[bytes]:
        return [
            b"".join(b.data for b in stored_batches(cluster.brokers[r].logs[f"{topic}-0"], 3))
            for r in cluster.replicas(topic, 0)
        ]

    wait_until(lambda: len(set(copies())) == 1, READ_S, "every replica holds the leader's bytes")
    assert len(copies()) == 3


def test_kafka_python_reports_the_append_time_and_an_invalid_timestamp(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    appended, bounded = f"{topic}-lat", f"{topic}-bounded"
    assert create(
        admin,
        **{
            appended: {"message.timestamp.type": "LogAppendTime"},
            bounded: {"message.timestamp.difference.max.ms": "60000"},
        },
    ) == {appended: None, bounded: None}
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, retries=0)
    try:
        before = int(time.time() * 1000)
        metadata = producer.send(appended, b"v", timestamp_ms=OLD_TIMESTAMP_MS).get(READ_S)
        assert before <= metadata.timestamp <= int(time.time() * 1000)

        late = producer.send(bounded, b"old", timestamp_ms=OLD_TIMESTAMP_MS)
        with pytest.raises(kafka.errors.InvalidTimestampError) as refused:
            late.get(READ_S)
        assert f"Timestamp {OLD_TIMESTAMP_MS} of message with offset 0 is out of range" in str(
            refused.value
        )
        assert producer.send(bounded, b"now").get(READ_S).offset == 0  # nothing was written
    finally:
        producer.close(timeout=READ_S)


def test_keyless_records_on_a_compacted_topic_are_invalid_record_naming_their_index(
    cluster: Cluster, admin: AdminClient, topic: str
) -> None:
    assert create(admin, **{topic: {"cleanup.policy": "compact"}}) == {topic: None}
    keyless = f"Compacted topic cannot accept message without key in topic partition {topic}-0."

    # kafka-python: one batch of three records, the middle one without a key
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5_000)
    try:
        futures = [producer.send(topic, b"v", key=key) for key in (b"a", None, b"b")]
        producer.flush(READ_S)
        outcomes = [f.exception for f in futures]
    finally:
        producer.close(timeout=READ_S)
    assert isinstance(outcomes[1], kafka.errors.InvalidRecordError)
    assert keyless in str(outcomes[1])
    for other in (outcomes[0], outcomes[2]):  # refused with their batch, not for themselves
        assert other is not None and not isinstance(other, kafka.errors.InvalidRecordError)

    # librdkafka: the delivery report's error is INVALID_RECORD
    reports: list[KafkaError | None] = []
    rdkafka = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    rdkafka.produce(topic, b"no key", on_delivery=lambda e, _: reports.append(e))
    rdkafka.flush(READ_S)
    ((error,),) = [reports]
    assert error is not None and error.code() == KafkaError.INVALID_RECORD
    assert error.str() == "Broker: Broker failed to validate record"  # librdkafka 2.x's text

    leader = cluster.wait_for_leader(topic, 0)
    assert cluster.brokers[leader].logs[f"{topic}-0"].log_end_offset == 0  # nothing written
