"""confluent-kafka (librdkafka) transactional producers against kafkactor's transaction
coordinator: a committed transaction is read by read_committed consumers (librdkafka's
default), an aborted one only by read_uncommitted ones, a second producer with the same
transactional id fences the first, offsets commit inside a consume-transform-produce
transaction, the broker aborts a transaction past its timeout, and compressed batches commit.

Producers and consumers run with librdkafka's defaults but the transactional id (and
`auto.offset.reset=earliest`, `enable.partition.eof` on the readers, which read a partition
up to its end, the last stable offset for read_committed). librdkafka purges what it has not
sent when a transaction aborts, so a test that wants aborted records in the log flushes first.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kafkactor.storage import CompressionType
from kafkactor.testing import Cluster
from tests.wire.support import CODECS, READ_S, stored_codecs, wait_until
from tests.wire.transactions import TXN_TIMEOUT_MS

pytestmark = pytest.mark.timeout(120)

TXN_S = 30.0  # init/commit/abort bound: the first lookup creates __transaction_state


@pytest.fixture(scope="module")
def cluster(txn_cluster: Cluster) -> Cluster:
    """The package's transactions cluster (tests/wire/conftest.py), shared with the other
    client modules."""
    return txn_cluster


@pytest.fixture
def topic(topic: str) -> str:
    """This module's topic (and so transactional id and group) apart from the other client
    modules' on the shared cluster."""
    return "confluent-" + topic


def transactional(cluster: Cluster, transactional_id: str, **settings: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id}
        | settings
    )
    producer.init_transactions(TXN_S)
    return producer


def reader(cluster: Cluster, isolation: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )


def read_all(cluster: Cluster, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of `isolation` reads from the start of each partition to its end
    (the high watermark, or the last stable offset for read_committed)."""
    consumer = reader(cluster, isolation)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    ended: set[int] = set()

    def done() -> bool:
        message = consumer.poll(0.1)
        if message is not None:
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition() or 0)
            elif error is None:
                values.append(bytes(message.value() or b""))
            else:
                raise AssertionError(error)
        return len(ended) == partitions

    try:
        wait_until(done, READ_S, f"reading {topic} to its end ({isolation})")
    finally:
        consumer.close()
    return values


def test_commit_is_read_committed_and_abort_only_read_uncommitted(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, 2, 3)
    producer = transactional(cluster, f"txn-{topic}")
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(TXN_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, f"aborted-{i}".encode(), partition=i % 2)
    assert producer.flush(TXN_S) == 0  # in the log, then aborted
    producer.abort_transaction(TXN_S)

    committed = {f"committed-{i}".encode() for i in range(6)}
    aborted = {f"aborted-{i}".encode() for i in range(6)}
    assert sorted(read_all(cluster, topic, 2, "read_committed")) == sorted(committed)
    assert sorted(read_all(cluster, topic, 2, "read_uncommitted")) == sorted(committed | aborted)


def test_an_open_transaction_holds_read_committed_at_its_first_offset(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3)
    producer = transactional(cluster, f"txn-{topic}")
    producer.begin_transaction()
    producer.produce(topic, b"first", partition=0)
    producer.commit_transaction(TXN_S)
    producer.begin_transaction()
    producer.produce(topic, b"pending", partition=0)
    assert producer.flush(TXN_S) == 0
    watcher = reader(cluster, "read_committed")
    try:
        # ListOffsets LATEST with read_committed: the last stable offset (record, marker)
        low, stable = watcher.get_watermark_offsets(TopicPartition(topic, 0), TXN_S, cached=False)
        assert (low, stable) == (0, 2)
        assert read_all(cluster, topic, 1, "read_committed") == [b"first"]
        producer.commit_transaction(TXN_S)
        assert read_all(cluster, topic, 1, "read_committed") == [b"first", b"pending"]
    finally:
        watcher.close()


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3)
    zombie = transactional(cluster, f"txn-{topic}")
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    assert zombie.flush(TXN_S) == 0
    successor = transactional(cluster, f"txn-{topic}")  # aborts the zombie's transaction
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TXN_S)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() == KafkaError._FENCED, error
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(TXN_S)
    assert read_all(cluster, topic, 1, "read_committed") == [b"successor"]
    assert read_all(cluster, topic, 1, "read_uncommitted") == [b"zombie", b"successor"]


def test_consume_transform_produce_commits_the_offsets_with_the_output(
    cluster: Cluster, topic: str
) -> None:
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    cluster.create_topic(source, 1, 3)
    cluster.create_topic(sink, 1, 3)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(10):
        plain.produce(source, f"record-{i}".encode(), partition=0)
    assert plain.flush(TXN_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([source])
    producer = transactional(cluster, f"txn-{topic}")
    done = 0

    def transformed_a_batch() -> bool:
        nonlocal done
        messages = [m for m in consumer.consume(5, 0.2) if m.error() is None]
        if not messages:
            return done == 10
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, bytes(message.value() or b"").upper(), partition=0)
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), TXN_S
        )
        producer.commit_transaction(TXN_S)
        done += len(messages)
        return done == 10

    try:
        wait_until(transformed_a_batch, TXN_S, "ten records transformed")
    finally:
        consumer.close()
    expected = [f"RECORD-{i}".encode() for i in range(10)]
    assert read_all(cluster, sink, 1, "read_committed") == expected
    restarted = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        committed = restarted.committed([TopicPartition(source, 0)], TXN_S)
    finally:
        restarted.close()
    assert [tp.offset for tp in committed] == [10]


def test_the_broker_aborts_a_transaction_past_its_timeout(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, 1, 3)
    producer = transactional(cluster, f"txn-{topic}", **{"transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.begin_transaction()
    producer.produce(topic, b"too-slow", partition=0)
    assert producer.flush(TXN_S) == 0
    watcher = reader(cluster, "read_committed")
    try:
        # the abort marker follows the record: the last stable offset moves past both
        wait_until(
            lambda: (
                watcher.get_watermark_offsets(TopicPartition(topic, 0), TXN_S, cached=False)[1] == 2
            ),
            TXN_S,
            "the broker's abort of the timed-out transaction",
        )
    finally:
        watcher.close()
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(TXN_S)
    error = raised.value.args[0]
    assert error.code() in (KafkaError._FENCED, KafkaError.INVALID_PRODUCER_EPOCH), error
    assert read_all(cluster, topic, 1, "read_committed") == []
    assert read_all(cluster, topic, 1, "read_uncommitted") == [b"too-slow"]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_batches_inside_transactions(cluster: Cluster, topic: str, codec: str) -> None:
    cluster.create_topic(topic, 1, 3)
    producer = transactional(cluster, f"txn-{topic}", **{"compression.type": codec})
    producer.begin_transaction()
    for i in range(50):
        producer.produce(topic, f"kept-{i:02d}-".encode() * 20, partition=0)
    producer.commit_transaction(TXN_S)
    producer.begin_transaction()
    for i in range(50):
        producer.produce(topic, f"dropped-{i:02d}-".encode() * 20, partition=0)
    assert producer.flush(TXN_S) == 0
    producer.abort_transaction(TXN_S)
    assert read_all(cluster, topic, 1, "read_committed") == [
        f"kept-{i:02d}-".encode() * 20 for i in range(50)
    ]
    assert len(read_all(cluster, topic, 1, "read_uncommitted")) == 100
    assert CODECS[codec] in stored_codecs(cluster, topic, 0) - {CompressionType.NONE}
