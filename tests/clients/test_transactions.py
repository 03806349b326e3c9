"""Transactions end to end in one process: the in-process transactional Producer against the
brokers' transaction coordinators, markers and last stable offsets, read by read_committed and
read_uncommitted Consumers (3 brokers on the embedded ZooKeeper, one cluster for the module,
each test on its own topics).

What a user sees: committed records read once, aborted ones only by read_uncommitted, an open
transaction holding read_committed back, a zombie fenced by a second producer of its id, offsets
committed with the transaction and nowhere else, and a transaction left open aborted by the
broker. Nothing sleeps to wait for the system: polls against deadlines.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.transaction import partition_for_transactional_id
from kafkactor.clients import Consumer, Producer, ProducerFencedError, TransactionError
from kafkactor.common import TRANSACTION_STATE_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.testing import Cluster
from tests.replication.support import FAST

pytestmark = pytest.mark.timeout(120)

WAIT_S = 20.0
CONFIG = BrokerConfig(
    replica=FAST.replica,
    group=GroupConfig(offsets_topic_partitions=3, initial_rebalance_delay_ms=0),
)
PROPERTIES = {
    "transaction.state.log.num.partitions": "3",
    # a timed-out transaction is aborted within 100 ms of its timeout
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
}
FAST_CLIENT: dict[str, Any] = {"max_block_ms": 15_000, "retry_backoff_ms": 20}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, config=CONFIG, properties=PROPERTIES) as started:
        yield started


def _topic(cluster: Cluster, name: str, partitions: int = 1) -> str:
    cluster.create_topic(name, partitions=partitions, replication_factor=3)
    return name


def _producer(cluster: Cluster, tid: str, **options: Any) -> Producer:
    producer = cluster.producer(transactional_id=tid, **{**FAST_CLIENT, **options})
    producer.init_transactions()
    return producer


def _reader(cluster: Cluster, topic: str, isolation: str, partitions: int = 1) -> Consumer:
    consumer = cluster.consumer(isolation_level=isolation, max_wait_ms=100)
    consumer.assign([(topic, p) for p in range(partitions)])
    return consumer


def _read_until(consumer: Consumer, done: Any, timeout_s: float = WAIT_S) -> list[bytes]:
    """Values polled until `done(values)` holds (the test fails at the deadline)."""
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while not done(values):
        assert time.monotonic() < deadline, f"read only {values}"
        values.extend(r.value or b"" for r in consumer.poll(100))
    return values


def _send(producer: Producer, topic: str, values: list[bytes], partition: int = 0) -> None:
    for value in values:
        producer.send(topic, value, partition=partition)


def test_committed_records_are_read_once_and_aborted_ones_only_read_uncommitted(
    cluster: Cluster,
) -> None:
    topic = _topic(cluster, "txn-commit-abort")
    producer = _producer(cluster, "commit-abort")
    aborted = [b"a%d" % i for i in range(5)]
    committed = [b"c%d" % i for i in range(5)]
    producer.begin_transaction()
    _send(producer, topic, aborted)
    producer.abort_transaction()
    producer.begin_transaction()
    _send(producer, topic, committed)
    producer.commit_transaction()

    read_committed = _reader(cluster, topic, "read_committed")
    # every committed record, once, in order: the aborted ones before them were skipped
    assert _read_until(read_committed, lambda v: len(v) >= len(committed)) == committed
    assert read_committed.poll(300) == []  # nothing more: no marker is a record
    end = read_committed.position(topic, 0)
    assert end == len(aborted) + len(committed) + 2  # past both markers
    read_uncommitted = _reader(cluster, topic, "read_uncommitted")
    assert _read_until(read_uncommitted, lambda v: len(v) >= 10) == aborted + committed


def test_an_open_transaction_holds_read_committed_back_until_it_commits(cluster: Cluster) -> None:
    topic = _topic(cluster, "txn-open")
    producer = _producer(cluster, "open")
    producer.begin_transaction()
    producer.send(topic, b"pending", partition=0).result(WAIT_S)
    read_uncommitted = _reader(cluster, topic, "read_uncommitted")
    assert _read_until(read_uncommitted, lambda v: len(v) >= 1) == [b"pending"]
    read_committed = _reader(cluster, topic, "read_committed")
    assert read_committed.poll(500) == []  # below the last stable offset: nothing
    producer.commit_transaction()
    assert _read_until(read_committed, lambda v: len(v) >= 1) == [b"pending"]


def test_a_second_producer_of_the_same_id_fences_the_first_and_aborts_its_transaction(
    cluster: Cluster,
) -> None:
    topic = _topic(cluster, "txn-fence")
    zombie = _producer(cluster, "fenced-id")
    zombie.begin_transaction()
    zombie.send(topic, b"zombie", partition=0).result(WAIT_S)
    successor = _producer(cluster, "fenced-id")  # bumps the epoch, aborts the open one
    with pytest.raises(ProducerFencedError):
        zombie.commit_transaction()
    with pytest.raises(ProducerFencedError):
        zombie.begin_transaction()
    successor.begin_transaction()
    successor.send(topic, b"successor", partition=0)
    successor.commit_transaction()
    read_committed = _reader(cluster, topic, "read_committed")
    assert _read_until(read_committed, lambda v: len(v) >= 1) == [b"successor"]
    assert read_committed.poll(300) == []


def test_offsets_sent_to_the_transaction_are_where_a_restarted_group_member_starts(
    cluster: Cluster,
) -> None:
    source, sink, group = _topic(cluster, "txn-in"), _topic(cluster, "txn-out"), "txn-stage"
    feeder = cluster.producer(acks=-1)
    for i in range(10):
        feeder.send(source, b"%d" % i, partition=0).result(WAIT_S)
    producer = _producer(cluster, "stage")
    tp = TopicPartition(topic=source, partition=0)

    def member() -> Consumer:
        consumer = cluster.consumer(
            group_id=group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            heartbeat_interval_ms=100,
            max_wait_ms=100,
        )
        consumer.subscribe([source])
        return consumer

    reader = member()
    inputs = _read_until(reader, lambda v: len(v) >= 6)[:6]
    # the first 4 inputs are transformed and committed with their offsets, as this member's
    producer.begin_transaction()
    _send(producer, sink, [b"x" + v for v in inputs[:4]])
    producer.send_offsets_to_transaction({tp: 4}, reader.group_metadata())
    producer.commit_transaction()
    # ... the next 2 are aborted, their offsets too
    producer.begin_transaction()
    _send(producer, sink, [b"x" + v for v in inputs[4:6]])
    producer.send_offsets_to_transaction({tp: 6}, group)
    producer.abort_transaction()
    stale = reader.group_metadata()
    reader.close()
    # a member that left is a zombie: its offsets are refused (KIP-447), the transaction aborts
    producer.begin_transaction()
    with pytest.raises(TransactionError) as zombie:
        producer.send_offsets_to_transaction({tp: 6}, stale)
    assert zombie.value.abortable
    assert zombie.value.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION)
    producer.abort_transaction()

    restarted = member()
    resumed = _read_until(restarted, lambda v: len(v) >= 6)
    assert resumed == [b"%d" % i for i in range(4, 10)]  # from the committed offset, 4
    assert restarted.committed(tp) == 4
    restarted.close()
    output = _reader(cluster, sink, "read_committed")
    assert _read_until(output, lambda v: len(v) >= 4) == [b"x0", b"x1", b"x2", b"x3"]
    assert output.poll(300) == []


def test_a_transaction_left_open_past_its_timeout_is_aborted_by_the_broker(
    cluster: Cluster,
) -> None:
    topic = _topic(cluster, "txn-timeout")
    producer = _producer(cluster, "forgetful", transaction_timeout_ms=300)
    producer.begin_transaction()
    producer.send(topic, b"forgotten", partition=0).result(WAIT_S)
    # the broker aborts it: its marker moves the last stable offset past the record, so a
    # read_committed reader gets to the end without it
    read_committed = _reader(cluster, topic, "read_committed")
    deadline = time.monotonic() + WAIT_S
    while read_committed.position(topic, 0) < 2:
        assert read_committed.poll(100) == []
        assert time.monotonic() < deadline, "the open transaction was never aborted"
    with pytest.raises(ProducerFencedError):  # its epoch was bumped by the abort
        producer.commit_transaction()


def test_a_transaction_timeout_above_the_brokers_maximum_is_refused_with_kafkas_error(
    cluster: Cluster,
) -> None:
    producer = cluster.producer(transactional_id="too-patient", transaction_timeout_ms=900_001)
    with pytest.raises(TransactionError) as refused:
        producer.init_transactions()
    assert refused.value.error_code is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert not refused.value.abortable  # fatal, as Kafka's InitProducerIdHandler makes it
    assert "larger than the maximum value allowed by the broker" in str(refused.value)
    with pytest.raises(TransactionError):
        producer.begin_transaction()


def test_a_transaction_outlives_the_death_of_its_coordinators_broker() -> None:
    # its own cluster: a broker is killed, and ZooKeeper sessions expire fast
    with Cluster(3, config=CONFIG, properties=PROPERTIES, session_timeout_ms=600) as cluster:
        topic = _topic(cluster, "txn-failover")
        producer = _producer(cluster, "survivor", request_timeout_ms=2_000)
        producer.begin_transaction()
        producer.send(topic, b"before", partition=0).result(WAIT_S)
        coordinator = cluster.leader(
            TRANSACTION_STATE_TOPIC, partition_for_transactional_id("survivor", 3)
        )
        cluster.kill_broker(coordinator)
        # the next send and the commit find the new coordinator, which loaded the transaction
        producer.send(topic, b"after", partition=0)
        producer.commit_transaction(timeout_ms=int(WAIT_S * 1000))
        read_committed = _reader(cluster, topic, "read_committed")
        assert _read_until(read_committed, lambda v: len(v) >= 2) == [b"before", b"after"]
        assert cluster.leader(
            TRANSACTION_STATE_TOPIC, partition_for_transactional_id("survivor", 3)
        ) not in (coordinator, -1)


def test_latest_is_the_last_stable_offset_for_read_committed_and_the_hw_otherwise(
    cluster: Cluster,
) -> None:
    topic = _topic(cluster, "txn-latest")
    plain = cluster.producer(acks=-1)
    plain.send(topic, b"settled", partition=0).result(WAIT_S)  # offset 0
    producer = _producer(cluster, "latest")
    producer.begin_transaction()
    producer.send(topic, b"open", partition=0).result(WAIT_S)  # offset 1, not yet stable

    def latest(isolation: str) -> int:
        consumer = cluster.consumer(isolation_level=isolation, auto_offset_reset="latest")
        consumer.assign([(topic, 0)])
        consumer.seek(topic, 0, 99)  # out of range: reset by auto_offset_reset
        consumer.poll(200)
        return consumer.position(topic, 0)

    assert latest("read_committed") == 1  # the open transaction's first offset
    assert latest("read_uncommitted") == 2  # the high watermark
    # a group member with nothing committed asks ListOffsets for the latest: the LSO too
    member = cluster.consumer(
        group_id="latest-readers",
        isolation_level="read_committed",
        auto_offset_reset="latest",
        heartbeat_interval_ms=100,
        max_wait_ms=100,
    )
    member.subscribe([topic])
    deadline = time.monotonic() + WAIT_S
    while not member.assignment():
        assert time.monotonic() < deadline, "never assigned"
        member.poll(100)
    assert member.position(topic, 0) == 1
    member.close()
    producer.commit_transaction()
