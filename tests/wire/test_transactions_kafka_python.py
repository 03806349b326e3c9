"""kafka-python 3 transactional producers (`KafkaProducer(transactional_id=...)`) against
kafkactor's transaction coordinator: commit and abort seen by `isolation_level`
read_committed and read_uncommitted consumers, a fenced zombie, offsets committed inside a
consume-transform-produce transaction, a transaction the broker aborts past its timeout, and
compressed batches inside transactions.

Clients run with kafka-python's defaults but the transactional id (readers are assigned by
hand without a group, from the start of each partition, and read to its end: the high
watermark, or the last stable offset for read_committed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kafka.codec
import kafka.errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kafkactor.storage import CompressionType
from kafkactor.testing import Cluster
from tests.wire.support import CODECS, READ_S, stored_codecs, wait_until
from tests.wire.transactions import TXN_TIMEOUT_MS

pytestmark = pytest.mark.timeout(120)

TXN_S = 30.0
HAS_CODEC = {
    "gzip": kafka.codec.has_gzip(),
    "snappy": kafka.codec.has_snappy(),
    "lz4": kafka.codec.has_lz4(),
    "zstd": kafka.codec.has_zstd(),
}


@pytest.fixture(scope="module")
def cluster(txn_cluster: Cluster) -> Cluster:
    """The package's transactions cluster (tests/wire/conftest.py), shared with the other
    client modules."""
    return txn_cluster


@pytest.fixture
def topic(topic: str) -> str:
    """This module's topic (and so transactional id and group) apart from the other client
    modules' on the shared cluster."""
    return "kafka-python-" + topic


@pytest.fixture
def producers() -> Iterator[list[Any]]:
    """The test's producers, closed after it."""
    made: list[Any] = []
    yield made
    for client in made:
        client.close(timeout=READ_S)


def transactional(cluster: Cluster, made: list[Any], transactional_id: str, **settings: Any) -> Any:
    client = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, transactional_id=transactional_id, **settings
    )
    made.append(client)
    client.init_transactions()
    return client


def read_all(cluster: Cluster, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of `isolation` reads from each partition's start to its end."""
    client = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation)
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        client.assign(assigned)
        client.seek_to_beginning(*assigned)
        ends = client.end_offsets(assigned)  # read_committed: the last stable offsets
        values: list[bytes] = []

        def at_end() -> bool:
            for records in client.poll(timeout_ms=100).values():
                values.extend(bytes(r.value) for r in records)
            return all(client.position(tp) >= ends[tp] for tp in assigned)

        wait_until(at_end, READ_S, f"reading {topic} to its end ({isolation})")
        return values
    finally:
        client.close()


def test_commit_is_read_committed_and_abort_only_read_uncommitted(
    cluster: Cluster, topic: str, producers: list[Any]
) -> None:
    cluster.create_topic(topic, 2, 3)
    client = transactional(cluster, producers, f"txn-{topic}")
    client.begin_transaction()
    for i in range(6):
        client.send(topic, f"committed-{i}".encode(), partition=i % 2)
    client.commit_transaction()
    client.begin_transaction()
    for i in range(6):
        client.send(topic, f"aborted-{i}".encode(), partition=i % 2)
    client.flush(timeout=TXN_S)
    client.abort_transaction()

    committed = {f"committed-{i}".encode() for i in range(6)}
    aborted = {f"aborted-{i}".encode() for i in range(6)}
    assert sorted(read_all(cluster, topic, 2, "read_committed")) == sorted(committed)
    assert sorted(read_all(cluster, topic, 2, "read_uncommitted")) == sorted(committed | aborted)


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    cluster: Cluster, topic: str, producers: list[Any]
) -> None:
    cluster.create_topic(topic, 1, 3)
    zombie = transactional(cluster, producers, f"txn-{topic}")
    zombie.begin_transaction()
    zombie.send(topic, b"zombie", partition=0).get(timeout=TXN_S)
    successor = transactional(cluster, producers, f"txn-{topic}")
    with pytest.raises(kafka.errors.ProducerFencedError):
        zombie.commit_transaction()
    successor.begin_transaction()
    successor.send(topic, b"successor", partition=0)
    successor.commit_transaction()
    assert read_all(cluster, topic, 1, "read_committed") == [b"successor"]
    assert read_all(cluster, topic, 1, "read_uncommitted") == [b"zombie", b"successor"]


def test_consume_transform_produce_commits_the_offsets_with_the_output(
    cluster: Cluster, topic: str, producers: list[Any]
) -> None:
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    cluster.create_topic(source, 1, 3)
    cluster.create_topic(sink, 1, 3)
    plain = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    producers.append(plain)
    for i in range(10):
        plain.send(source, f"record-{i}".encode(), partition=0)
    plain.flush(timeout=TXN_S)
    consumer = KafkaConsumer(
        source,
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    client = transactional(cluster, producers, f"txn-{topic}")
    done = 0

    def transformed_a_batch() -> bool:
        nonlocal done
        polled = consumer.poll(timeout_ms=200, max_records=5)
        records = [r for batch in polled.values() for r in batch]
        if not records:
            return done == 10
        client.begin_transaction()
        for record in records:
            client.send(sink, bytes(record.value).upper(), partition=0)
        offsets = {
            tp: OffsetAndMetadata(consumer.position(tp), "", -1) for tp in consumer.assignment()
        }
        client.send_offsets_to_transaction(offsets, consumer.group_metadata())
        client.commit_transaction()
        done += len(records)
        return done == 10

    try:
        wait_until(transformed_a_batch, TXN_S, "ten records transformed")
    finally:
        consumer.close(autocommit=False)
    assert read_all(cluster, sink, 1, "read_committed") == [
        f"RECORD-{i}".encode() for i in range(10)
    ]
    restarted = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group)
    try:
        assert restarted.committed(TopicPartition(source, 0)) == 10
    finally:
        restarted.close(autocommit=False)


def test_the_broker_aborts_a_transaction_past_its_timeout(
    cluster: Cluster, topic: str, producers: list[Any]
) -> None:
    cluster.create_topic(topic, 1, 3)
    client = transactional(
        cluster, producers, f"txn-{topic}", transaction_timeout_ms=TXN_TIMEOUT_MS
    )
    client.begin_transaction()
    client.send(topic, b"too-slow", partition=0).get(timeout=TXN_S)
    watcher = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, isolation_level="read_committed"
    )
    partition = TopicPartition(topic, 0)
    try:
        # the abort marker follows the record: the last stable offset moves past both
        wait_until(
            lambda: watcher.end_offsets([partition])[partition] == 2,
            TXN_S,
            "the broker's abort of the timed-out transaction",
        )
    finally:
        watcher.close()
    with pytest.raises((kafka.errors.ProducerFencedError, kafka.errors.InvalidProducerEpochError)):
        client.commit_transaction()
    assert read_all(cluster, topic, 1, "read_committed") == []
    assert read_all(cluster, topic, 1, "read_uncommitted") == [b"too-slow"]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_batches_inside_transactions(
    cluster: Cluster, topic: str, codec: str, producers: list[Any]
) -> None:
    if not HAS_CODEC[codec]:
        pytest.skip(f"kafka-python has no {codec} codec here")
    cluster.create_topic(topic, 1, 3)
    client = transactional(cluster, producers, f"txn-{topic}", compression_type=codec)
    client.begin_transaction()
    for i in range(50):
        client.send(topic, f"kept-{i:02d}-".encode() * 20, partition=0)
    client.commit_transaction()
    client.begin_transaction()
    for i in range(50):
        client.send(topic, f"dropped-{i:02d}-".encode() * 20, partition=0)
    client.flush(timeout=TXN_S)
    client.abort_transaction()
    assert read_all(cluster, topic, 1, "read_committed") == [
        f"kept-{i:02d}-".encode() * 20 for i in range(50)
    ]
    assert len(read_all(cluster, topic, 1, "read_uncommitted")) == 100
    assert CODECS[codec] in stored_codecs(cluster, topic, 0) - {CompressionType.NONE}


def test_the_admin_client_describes_and_lists_an_open_transaction(
    cluster: Cluster, topic: str, producers: list[Any]
) -> None:
    cluster.create_topic(topic, 2, 3)
    transactional_id = f"txn-{topic}"
    client = transactional(cluster, producers, transactional_id)
    client.begin_transaction()
    client.send(topic, b"open", partition=1).get(timeout=TXN_S)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = admin.describe_transactions([transactional_id])[transactional_id]
        assert described.state.value == "Ongoing"
        assert described.topic_partitions == {TopicPartition(topic, 1)}
        assert described.transaction_timeout_ms == 60_000  # kafka-python's default
        listed = [
            t
            for per_broker in admin.list_transactions(state_filters=["Ongoing"]).values()
            for t in per_broker
            if t.transactional_id == transactional_id
        ]
        assert [(t.producer_id, t.state.value) for t in listed] == [
            (described.producer_id, "Ongoing")
        ]
        client.commit_transaction()  # answered once PrepareCommit is written (Kafka's EndTxn)
        wait_until(
            lambda: (
                admin.describe_transactions([transactional_id])[transactional_id].state.value
                == "CompleteCommit"
            ),
            TXN_S,
            "the markers written and the transaction complete",
        )
        with pytest.raises(kafka.errors.TransactionalIdNotFoundError):
            admin.describe_transactions([f"{transactional_id}-never-used"])
    finally:
        admin.close()
