"""DeleteRecords (api key 21, KIP-107) and DescribeLogDirs (api key 35) through real clients.

kafka-python's `KafkaAdminClient.delete_records`, confluent-kafka's `AdminClient.delete_records`
and aiokafka's `AIOKafkaAdminClient.delete_records` on RF-3 topics: the answer is the low
watermark, a consumer of the same family reading from the beginning starts at it, ListOffsets'
earliest answers it, and every follower's log starts there too. Kafka's refusals come back as
each client's own error: an offset past the high watermark (OffsetOutOfRange), a compacted
topic (PolicyViolation), an unknown topic (UnknownTopicOrPartition). A broker stopped and
started again keeps the start (log-start-offset-checkpoint). DescribeLogDirs through
kafka-python lists each broker's data directory with the size of every log in it.

The tests share the module's three-broker cluster, each on topics of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import kafka.errors
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition

from kafkactor.messages import ErrorCode
from kafkactor.storage import LogConfig, TopicPartition
from kafkactor.testing import Cluster
from kafkactor.testing.records_deletion import DeleteRecordsError
from tests.replication.support import EventLog, wait_until
from tests.wire.support import READ_S

pytestmark = pytest.mark.timeout(120)

RECORDS = 10


def produced(cluster: Cluster, topic: str, *, replicas: int = 3, **config: str) -> None:
    """`topic` with one partition of `replicas` replicas holding RECORDS records, acks=all."""
    cluster.create_topic(topic, partitions=1, replication_factor=replicas, config=config or None)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for i in range(RECORDS):
            producer.send(topic, b"value-%d" % i, partition=0).get(READ_S)
    finally:
        producer.close(timeout=READ_S)


def log_starts(cluster: Cluster, topic: str) -> dict[int, int]:
    """Each replica's log start offset, as its partition actor holds it."""
    return {
        broker: cluster.describe_partition(topic, 0, broker=broker).log_start_offset
        for broker in cluster.replicas(topic, 0)
    }


@pytest.fixture
def kafka_python_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


@pytest.fixture
def confluent_admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


# -- kafka-python ----------------------------------------------------------------------------------


def test_kafka_python_deletes_and_reads_from_the_new_start(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, topic: str, events: EventLog
) -> None:
    produced(cluster, topic)
    tp = KafkaTopicPartition(topic, 0)
    answer = kafka_python_admin.delete_records({tp: 4})
    assert answer[tp]["low_watermark"] == 4
    assert answer[tp]["error_code"] == 0
    # the answer waited for every live replica: each one's log starts there already
    assert log_starts(cluster, topic) == {b: 4 for b in cluster.replicas(topic, 0)}
    asked = events.named("network.request", api="DELETE_RECORDS")
    assert [e["api_version"] for e in asked] == [2]  # the newest version served

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 4}
        consumer.seek_to_beginning(tp)
        first = next(r for batch in iter(lambda: consumer.poll(500), None) for r in batch[tp])
    finally:
        consumer.close()
    assert (first.offset, first.value) == (4, b"value-4")


def test_kafka_python_gets_its_own_errors(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, topic: str
) -> None:
    produced(cluster, topic)
    compacted = f"{topic}-compacted"
    cluster.create_topic(compacted, 1, 3, config=LogConfig(cleanup_policy="compact"))
    with pytest.raises(kafka.errors.OffsetOutOfRangeError):
        kafka_python_admin.delete_records({KafkaTopicPartition(topic, 0): RECORDS + 1})
    with pytest.raises(kafka.errors.PolicyViolationError):
        kafka_python_admin.delete_records({KafkaTopicPartition(compacted, 0): 0})
    with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
        kafka_python_admin.delete_records({KafkaTopicPartition(f"{topic}-nowhere", 0): 0})
    assert log_starts(cluster, topic) == {b: 0 for b in cluster.replicas(topic, 0)}


# -- confluent-kafka -------------------------------------------------------------------------------


def test_confluent_kafka_deletes_up_to_the_high_watermark_and_reads_from_there(
    cluster: Cluster, confluent_admin: AdminClient, topic: str
) -> None:
    produced(cluster, topic)
    futures = confluent_admin.delete_records(
        [ConfluentTopicPartition(topic, 0, 6)], request_timeout=READ_S
    )
    [(_, future)] = futures.items()
    assert future.result(READ_S).low_watermark == 6
    assert log_starts(cluster, topic) == {b: 6 for b in cluster.replicas(topic, 0)}

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        low, high = consumer.get_watermark_offsets(
            ConfluentTopicPartition(topic, 0), timeout=READ_S
        )
        assert (low, high) == (6, RECORDS)
        consumer.subscribe([topic])
        found = []

        def polled() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                found.append(message)
            return bool(found)

        wait_until(polled, READ_S, "the first record after the deletion")
    finally:
        consumer.close()
    assert (found[0].offset(), found[0].value()) == (6, b"value-6")

    # -1 (OFFSET_END) deletes every record: up to the high watermark
    futures = confluent_admin.delete_records(
        [ConfluentTopicPartition(topic, 0, -1)], request_timeout=READ_S
    )
    assert next(iter(futures.values())).result(READ_S).low_watermark == RECORDS


def test_confluent_kafka_gets_kafkas_error_codes(
    cluster: Cluster, confluent_admin: AdminClient, topic: str
) -> None:
    produced(cluster, topic)
    compacted = f"{topic}-compacted"
    cluster.create_topic(compacted, 1, 3, config=LogConfig(cleanup_policy="compact"))
    cases = {
        (topic, RECORDS + 1): KafkaError.OFFSET_OUT_OF_RANGE,
        (compacted, 0): KafkaError.POLICY_VIOLATION,
        # librdkafka finds no leader for it in the metadata and does not send the request
        (f"{topic}-nowhere", 0): KafkaError._NOENT,
    }
    for (name, offset), code in cases.items():
        futures = confluent_admin.delete_records(
            [ConfluentTopicPartition(name, 0, offset)], request_timeout=READ_S
        )
        with pytest.raises(KafkaException) as refused:
            next(iter(futures.values())).result(READ_S)
        assert refused.value.args[0].code() == code, name


# -- aiokafka --------------------------------------------------------------------------------------


def test_aiokafka_deletes_and_reads_from_the_new_start(cluster: Cluster, topic: str) -> None:
    produced(cluster, topic)
    tp = AioTopicPartition(topic, 0)

    async def scenario() -> tuple[dict[AioTopicPartition, int], int, int]:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        await admin.start()
        try:
            answer = await admin.delete_records({tp: RecordsToDelete(before_offset=3)})
        finally:
            await admin.close()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            earliest = (await consumer.beginning_offsets([tp]))[tp]
            first = await asyncio.wait_for(consumer.getone(), READ_S)
        finally:
            await consumer.stop()
        return answer, earliest, first.offset

    answer, earliest, first = asyncio.run(scenario())
    assert answer == {tp: 3}
    assert (earliest, first) == (3, 3)
    assert log_starts(cluster, topic) == {b: 3 for b in cluster.replicas(topic, 0)}


# -- a restart -------------------------------------------------------------------------------------


def test_a_restarted_broker_keeps_the_moved_start(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, topic: str
) -> None:
    # one replica only: after the restart nothing but its own checkpoint can tell it the start
    broker = next(b for b in cluster.broker_ids if b != cluster.controller_id())
    cluster.create_topic(topic, assignments={0: (broker,)})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        for i in range(RECORDS):
            producer.send(topic, b"value-%d" % i, partition=0).get(READ_S)
    finally:
        producer.close(timeout=READ_S)
    tp = KafkaTopicPartition(topic, 0)
    assert kafka_python_admin.delete_records({tp: 7})[tp]["low_watermark"] == 7
    checkpoint = Path(cluster.brokers[broker].data_dir) / "log-start-offset-checkpoint"
    cluster.stop_broker(broker)
    assert f"{topic} 0 7\n" in checkpoint.read_text()
    cluster.restart_broker(broker)
    wait_until(
        lambda: cluster.leader(topic, 0) == broker, READ_S, "the restarted broker leads again"
    )
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        assert consumer.beginning_offsets([tp]) == {tp: 7}
    finally:
        consumer.close()


# -- DescribeLogDirs -------------------------------------------------------------------------------


def test_kafka_python_describes_each_brokers_log_dir_and_its_logs(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, topic: str
) -> None:
    produced(cluster, topic)
    described = kafka_python_admin.describe_log_dirs()
    assert sorted(d["broker"] for d in described) == sorted(cluster.broker_ids)
    for entry in described:
        broker = cluster.brokers[entry["broker"]]
        [log_dir] = entry["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == str(Path(broker.data_dir).resolve())
        sizes = {
            (t["name"], p["partition_index"]): p["partition_size"]
            for t in log_dir["topics"]
            for p in t["partitions"]
        }
        log = broker.logs[f"{topic}-0"]
        assert sizes[(topic, 0)] == log.size_in_bytes > 0
        assert all(
            p["offset_lag"] == 0 and not p["is_future_key"]
            for t in log_dir["topics"]
            for p in t["partitions"]
        )
    # only the partitions asked for
    [one] = kafka_python_admin.describe_log_dirs(
        topic_partitions={topic: [0]}, brokers=[cluster.leader(topic, 0)]
    )
    [log_dir] = one["log_dirs"]
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in log_dir["topics"]
    ] == [(topic, [0])]


def test_the_harness_deletes_through_the_leaders_too(cluster: Cluster, topic: str) -> None:
    produced(cluster, topic)
    tp = TopicPartition(topic=topic, partition=0)
    assert cluster.delete_records({(topic, 0): 2}) == {tp: 2}
    assert log_starts(cluster, topic) == {b: 2 for b in cluster.replicas(topic, 0)}
    with pytest.raises(DeleteRecordsError) as refused:
        cluster.delete_records({(f"{topic}-nowhere", 0): 1})
    assert refused.value.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
