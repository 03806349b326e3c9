"""What a consumer's user sees: `poll` raises `ConsumerError` with Kafka's code for what
retrying cannot cure, and keeps retrying (returning empty) through what it can."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kafkactor.actors.runtime import Client, Directory, Mailbox, addresses
from kafkactor.clients import Consumer, ConsumerError, ConsumerRecord
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import FetchRequest, UpdateMetadata, UpdateMetadataResponse
from kafkactor.testing import Cluster
from tests.replication.support import TOPIC, WAIT_S, wait_until

P0 = TopicPartition(topic=TOPIC, partition=0)


def poll_until(consumer: Consumer, count: int) -> list[ConsumerRecord]:
    """Poll until at least `count` records came (or fail at the deadline)."""
    got: list[ConsumerRecord] = []

    def enough() -> bool:
        got.extend(consumer.poll(100))
        return len(got) >= count

    wait_until(enough, message=f"{count} records")
    return got


def poll_error(consumer: Consumer, timeout_ms: int = 2_000) -> ConsumerError:
    """The ConsumerError the next poll raises."""
    with pytest.raises(ConsumerError) as raised:
        consumer.poll(timeout_ms)
    return raised.value


def tell_every_broker_that(cluster: Cluster, leader: int, *partitions: TopicPartition) -> None:
    """Send each broker an UpdateMetadata (the current controller epoch) naming `leader` as
    the leader of `partitions`: metadata that lies, as a lagging metadata cache would."""
    client = Client("metadata-liar", cluster.directory)
    try:
        for broker in cluster.live_brokers():
            response = client.call(
                addresses.replica_manager(broker),
                UpdateMetadata(
                    controller_id=0,
                    controller_epoch=cluster.controller_epoch,
                    partition_states=tuple(
                        PartitionLeaderState(
                            topic=tp.topic,
                            partition=tp.partition,
                            controller_epoch=cluster.controller_epoch,
                            leader=leader,
                            isr=(1, 2, 3),
                            replicas=(1, 2, 3),
                        )
                        for tp in partitions
                    ),
                    live_brokers=tuple(cluster.live_brokers()),
                ),
                WAIT_S,
            )
            assert isinstance(response, UpdateMetadataResponse), response
            assert response.error_code is ErrorCode.NONE
    finally:
        client.close()


@pytest.mark.timeout(30)
def test_offset_out_of_range_without_a_reset_policy_is_raised_by_poll(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.producer(acks=-1).send_batch(TOPIC, [b"r0", b"r1"], partition=0).result(WAIT_S)
    consumer = cluster.consumer(max_wait_ms=100, auto_offset_reset="none")
    consumer.assign([P0])
    consumer.seek(P0, 5)

    error = poll_error(consumer)

    assert (error.error_code, error.topic_partition) == (ErrorCode.OFFSET_OUT_OF_RANGE, P0)
    assert "offset 5 is outside [0, 2]" in str(error)
    assert poll_error(consumer).error_code is ErrorCode.OFFSET_OUT_OF_RANGE  # until it moves
    consumer.seek(P0, 1)
    assert [r.value for r in poll_until(consumer, 1)] == [b"r1"]


@pytest.mark.timeout(30)
def test_records_fetched_with_an_error_are_returned_first_and_the_error_next(
    cluster: Cluster,
) -> None:
    cluster.create_topic(TOPIC, partitions=4, replication_factor=3)  # 0 and 3 led by broker 1
    cluster.producer(acks=-1).send(TOPIC, b"kept", partition=0).result(WAIT_S)
    p3 = TopicPartition(topic=TOPIC, partition=3)
    consumer = cluster.consumer(max_wait_ms=100, auto_offset_reset="none")
    consumer.assign([P0, p3])
    consumer.seek(p3, 7)  # beyond its empty log: one fetch brings p0's record and p3's error

    records = consumer.poll(2_000)
    error = poll_error(consumer)

    assert [(r.topic_partition, r.value) for r in records] == [(P0, b"kept")]
    assert (error.error_code, error.topic_partition) == (ErrorCode.OFFSET_OUT_OF_RANGE, p3)
    assert consumer.position(P0) == 1


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "assigned",
    [TopicPartition(topic="no-such-topic", partition=0), TopicPartition(topic=TOPIC, partition=4)],
)
def test_an_assigned_partition_no_broker_knows_is_raised_by_poll(
    cluster: Cluster, assigned: TopicPartition
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    consumer = cluster.consumer(max_wait_ms=100)
    consumer.assign([assigned])  # as in Kafka, assign checks nothing

    error = poll_error(consumer)

    assert (error.error_code, error.topic_partition) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        assigned,
    )
    assert error.retriable


@pytest.mark.timeout(30)
def test_a_not_leader_error_that_persists_is_raised_by_poll(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.producer(acks=-1).send(TOPIC, b"r0").result(WAIT_S)
    tell_every_broker_that(cluster, 2, P0)  # broker 1 leads; the metadata says broker 2
    consumer = cluster.consumer(max_wait_ms=100, retry_backoff_ms=10, partition_error_retries=3)
    consumer.assign([P0])

    error = poll_error(consumer, timeout_ms=int(WAIT_S * 1000))

    assert (error.error_code, error.topic_partition) == (ErrorCode.NOT_LEADER_FOR_PARTITION, P0)
    assert "4 fetches in a row" in str(error)
    # A producer with the same metadata fails its Future with the same code.
    sent = cluster.producer(acks=1).send(TOPIC, b"x", partition=0)
    assert getattr(sent.exception(WAIT_S), "error_code", None) is ErrorCode.NOT_LEADER_FOR_PARTITION


@pytest.mark.timeout(30)
def test_a_not_leader_error_that_clears_is_retried_not_raised(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.producer(acks=-1).send(TOPIC, b"r0").result(WAIT_S)
    tell_every_broker_that(cluster, 2, P0)
    consumer = cluster.consumer(max_wait_ms=100, retry_backoff_ms=10, partition_error_retries=1000)
    consumer.assign([P0])

    assert consumer.poll(300) == []  # NOT_LEADER, metadata refreshed, again and again
    tell_every_broker_that(cluster, 1, P0)  # the metadata catches up

    assert [r.value for r in poll_until(consumer, 1)] == [b"r0"]


@pytest.mark.timeout(30)
def test_a_consumer_of_a_killed_cluster_polls_empty_and_reads_on_after_a_restart(
    cluster: Cluster,
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.producer(acks=-1).send(TOPIC, b"r0").result(WAIT_S)
    consumer = cluster.consumer(max_wait_ms=100)
    consumer.assign([P0])
    assert [r.value for r in poll_until(consumer, 1)] == [b"r0"]
    for broker in (1, 2, 3):
        cluster.kill_broker(broker)

    assert consumer.poll(300) == []  # not available is retried, never raised
    assert consumer.poll(0) == []

    for broker in (1, 2, 3):
        cluster.restart_broker(broker)
    cluster.producer(acks=-1).send(TOPIC, b"r1").result(WAIT_S)
    assert [r.value for r in poll_until(consumer, 1)] == [b"r1"]


class SwallowFetchesFrom:
    """A mailbox in front of a replica manager that loses one client's fetch requests."""

    def __init__(self, real: Mailbox, client_address: str) -> None:
        self.real = real
        self.client_address = client_address
        self.swallowed = 0
        self._lock = threading.Lock()

    def tell(self, message: Any) -> None:
        payload = getattr(message, "payload", message)  # bare when tracing is off
        if isinstance(payload, FetchRequest) and payload.reply_to == self.client_address:
            with self._lock:
                self.swallowed += 1
            return
        self.real.tell(message)


def replace_mailbox(directory: Directory, address: str, new: Mailbox) -> None:
    directory.unregister(address)
    directory.register(address, new)


@pytest.mark.timeout(30)
def test_a_fetch_never_answered_is_given_up_after_request_timeout_ms(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    consumer = cluster.consumer(max_wait_ms=100, request_timeout_ms=200, retry_backoff_ms=20)
    consumer.assign([P0])
    address = addresses.replica_manager(1)
    real = cluster.directory.resolve(address)
    assert real is not None
    hole = SwallowFetchesFrom(real, consumer.address)
    replace_mailbox(cluster.directory, address, hole)
    try:
        assert consumer.poll(1_000) == []
    finally:
        replace_mailbox(cluster.directory, address, real)

    assert hole.swallowed >= 2  # the first fetch was given up and sent again
    assert consumer.client.pending <= 1  # the fetches given up are forgotten
    cluster.producer(acks=-1).send(TOPIC, b"r0").result(WAIT_S)
    assert [r.value for r in poll_until(consumer, 1)] == [b"r0"]
