"""OffsetFetch v7's `require_stable` (KIP-447) through real read_committed consumers: a group
whose offset a transaction has sent (`send_offsets_to_transaction`) but not yet committed is
not read from its older committed offset; once the transaction commits, the consumer starts
at the transaction's offset.

librdkafka (confluent-kafka, whose consumers default to read_committed) and kafka-python 3
with `isolation_level="read_committed"` send OffsetFetch v7 with require_stable=true; the
group coordinator answers UNSTABLE_OFFSET_COMMIT for the pending partition, and both clients
ask again until it is stable. A read_uncommitted consumer of the same group meanwhile reads the
older offset (require_stable=false), as from Kafka 2.8. aiokafka sends OffsetFetch v1-v3 only,
without require_stable.

The tests share the package's transactional cluster, each on topics and a group of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from kafkactor.testing import Cluster
from tests.replication.support import EventLog
from tests.wire.support import READ_S, wait_until

pytestmark = pytest.mark.timeout(120)

TXN_S = 30.0  # init/commit bound: the first lookup creates __transaction_state
RECORDS = 10
OLD, PENDING = 3, 7  # the group's committed offset, and the one the open transaction sends
NO_OFFSET = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID: no position yet
ASKED_AGAIN = 3  # OffsetFetch requests of the reader that all met the open transaction


@pytest.fixture(scope="module")
def cluster(txn_cluster: Cluster) -> Cluster:
    """The package's transactional cluster (tests/wire/conftest.py): its topics, groups and
    transactional ids are named after each test's own topic."""
    return txn_cluster


def offset_fetches(events: EventLog, client_id: str) -> list[int]:
    """The versions of the OffsetFetch requests `client_id` sent, in order."""
    return [
        int(e["api_version"])
        for e in events.named("network.request", api="OFFSET_FETCH", client_id=client_id)
    ]


def pending_offsets(cluster: Cluster, source: str, group: str) -> Producer:
    """`source` (one partition, RECORDS records) whose `group` committed OLD, and a
    transactional producer with PENDING for the group sent in its open transaction."""
    cluster.create_topic(source, 1, 3)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(RECORDS):
        plain.produce(source, f"record-{i}".encode(), partition=0)
    assert plain.flush(TXN_S) == 0
    member = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        member.commit(offsets=[TopicPartition(source, 0, OLD)], asynchronous=False)
        producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"txn-{group}"}
        )
        producer.init_transactions(TXN_S)
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, PENDING)], member.consumer_group_metadata(), TXN_S
        )
    finally:
        member.close()
    return producer


def read_uncommitted_offset(cluster: Cluster, source: str, group: str) -> int:
    """The group's offset as a read_uncommitted consumer reads it (require_stable=false)."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        (committed,) = consumer.committed([TopicPartition(source, 0)], READ_S)
    finally:
        consumer.close()
    return int(committed.offset)


def held_back(events: EventLog, client_id: str, poll: Callable[[], list[int]]) -> None:
    """While the transaction is open: the reader asks for its offset again and again (each
    answer UNSTABLE_OFFSET_COMMIT), at v7, and reads no record."""
    read: list[int] = []

    def asked_again() -> bool:
        read.extend(poll())
        return bool(read) or len(offset_fetches(events, client_id)) >= ASKED_AGAIN

    wait_until(asked_again, READ_S, f"{client_id} asking for its offset {ASKED_AGAIN} times")
    assert set(offset_fetches(events, client_id)) == {7}
    read.extend(poll())
    assert read == [], f"read from offset {read[0]} while the transaction is open"


def first_offset_read(poll: Callable[[], list[int]]) -> int:
    read: list[int] = []

    def got_one() -> bool:
        read.extend(poll())
        return bool(read)

    wait_until(got_one, READ_S, "a record after the transaction committed")
    return read[0]


def test_librdkafka_read_committed_waits_for_the_transactions_offset(
    cluster: Cluster, topic: str, events: EventLog
) -> None:
    group, client_id = f"{topic}-group", f"{topic}-reader"
    producer = pending_offsets(cluster, topic, group)
    reader = Consumer(  # librdkafka's default isolation.level: read_committed
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
        }
    )
    tp = TopicPartition(topic, 0)

    def poll() -> list[int]:
        message = reader.poll(0.1)
        if message is None or message.error() is not None:
            return []
        offset = message.offset()
        return [] if offset is None else [offset]

    try:
        reader.assign([tp])  # from the group's committed offset
        held_back(events, client_id, poll)
        assert reader.position([tp])[0].offset == NO_OFFSET
        assert read_uncommitted_offset(cluster, topic, group) == OLD
        producer.commit_transaction(TXN_S)
        assert first_offset_read(poll) == PENDING
    finally:
        reader.close()
    assert read_uncommitted_offset(cluster, topic, group) == PENDING


def test_kafka_python_read_committed_waits_for_the_transactions_offset(
    cluster: Cluster, topic: str, events: EventLog
) -> None:
    group, client_id = f"{topic}-group", f"{topic}-reader"
    producer = pending_offsets(cluster, topic, group)
    reader = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        client_id=client_id,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    tp = KafkaTopicPartition(topic, 0)

    def poll() -> list[int]:
        batches: dict[Any, list[Any]] = reader.poll(timeout_ms=100)
        return [int(r.offset) for records in batches.values() for r in records]

    try:
        reader.assign([tp])
        held_back(events, client_id, poll)
        assert read_uncommitted_offset(cluster, topic, group) == OLD
        producer.commit_transaction(TXN_S)
        assert first_offset_read(poll) == PENDING
    finally:
        reader.close()
