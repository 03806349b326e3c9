"""What a producer's user sees when a produce fails: a failed Future with Kafka's code.

`send` and `send_batch` never raise for a failed produce; only programming errors (a closed
producer, a value that is not bytes, a negative partition, an empty batch) raise at once.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from kafkactor.clients import ClientError, ConsumerError, ProduceError, Producer
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster
from tests.replication.support import MIN_ISR_2, TOPIC, WAIT_S, EventLog, wait_until


def produce_error(future: Future[Any]) -> ProduceError:
    """The ProduceError the Future fails with (within WAIT_S); anything else fails the test."""
    error = future.exception(timeout=WAIT_S)
    assert isinstance(error, ProduceError), f"expected a ProduceError, got {error!r}"
    return error


def sent_requests(events: EventLog, producer: Producer, msg_type: str) -> int:
    return len(events.named("msg.send", actor=producer.address, msg_type=msg_type))


@pytest.mark.timeout(30)
def test_send_to_an_unknown_topic_fails_its_future_not_the_caller(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    producer = cluster.producer(acks=1, retries=5)

    unkeyed = producer.send("no-such-topic", b"x")  # returns: no exception here
    keyed = producer.send("no-such-topic", b"x", key=b"k")
    explicit = producer.send_batch("no-such-topic", [b"a", b"b"], partition=0)

    for future, partition in ((unkeyed, None), (keyed, None), (explicit, 0)):
        error = produce_error(future)
        assert error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (error.topic, error.partition) == ("no-such-topic", partition)
        assert "no-such-topic" in str(error)
    # Bounded: each send asked every broker once (none knew the topic) and was not resent,
    # although the producer has retries; no produce request went anywhere.
    assert sent_requests(events, producer, "MetadataRequest") == 3 * 3
    assert sent_requests(events, producer, "ProduceRequest") == 0
    assert producer.send(TOPIC, b"fine").result(WAIT_S).offset == 0  # the producer still works


@pytest.mark.timeout(30)
def test_send_to_a_partition_the_topic_does_not_have_fails_its_future(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
    producer = cluster.producer(acks=1)

    error = produce_error(producer.send(TOPIC, b"x", partition=2))

    assert error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert error.topic_partition == TopicPartition(topic=TOPIC, partition=2)
    assert "no partition 2" in str(error)
    assert producer.send(TOPIC, b"x", partition=1).result(WAIT_S).offset == 0


@pytest.mark.timeout(30)
def test_a_batch_the_broker_finds_too_large_fails_its_future(cluster: Cluster) -> None:
    cluster.create_topic(
        TOPIC, partitions=1, replication_factor=3, config=LogConfig(max_message_bytes=200)
    )
    producer = cluster.producer(acks=-1, retries=3)  # not retriable: no resend

    error = produce_error(producer.send(TOPIC, b"x" * 300))

    assert error.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert not error.retriable
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0


@pytest.mark.timeout(30)
def test_a_batch_above_max_request_size_fails_its_future_without_being_sent(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    producer = cluster.producer(acks=1, max_request_size=200)

    error = produce_error(producer.send_batch(TOPIC, [b"x" * 100, b"y" * 100], partition=0))

    assert error.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert "max_request_size=200" in str(error)
    assert sent_requests(events, producer, "ProduceRequest") == 0
    assert producer.send(TOPIC, b"small", partition=0).result(WAIT_S).offset == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("acks", [2, -2])
def test_invalid_acks_fail_the_future(cluster: Cluster, acks: int) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)

    error = produce_error(cluster.producer(acks=acks).send(TOPIC, b"x"))

    assert error.error_code is ErrorCode.INVALID_REQUIRED_ACKS
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0


@pytest.mark.timeout(30)
def test_acks_all_with_the_isr_below_min_isr_fails_with_not_enough_replicas(
    cluster: Cluster,
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    assert producer.send(TOPIC, b"committed").result(WAIT_S).offset == 0
    cluster.kill_broker(2)
    cluster.kill_broker(3)
    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0).isr == (1,),
        message="the leader to drop both dead followers from the ISR",
    )

    error = produce_error(producer.send(TOPIC, b"refused"))

    assert error.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert error.retriable
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 1  # nothing appended


@pytest.mark.timeout(30)
def test_a_killed_leader_fails_the_future_with_leader_not_available(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    producer = cluster.producer(acks=1)
    cluster.kill_broker(3)  # the leader of partition 2

    error = produce_error(producer.send(TOPIC, b"x", partition=2))

    assert error.error_code is ErrorCode.LEADER_NOT_AVAILABLE
    assert producer.send(TOPIC, b"x", partition=0).result(WAIT_S).offset == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("acks", [0, 1, -1])
def test_a_killed_cluster_fails_the_future_with_network_exception(
    cluster: Cluster, acks: int
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    warm = cluster.producer(acks=acks)  # its metadata names broker 1, which is about to die
    warm.send(TOPIC, b"before").result(WAIT_S)
    for broker in (1, 2, 3):
        cluster.kill_broker(broker)

    cold = produce_error(cluster.producer(acks=acks).send(TOPIC, b"after"))  # nobody to ask
    stale = produce_error(warm.send(TOPIC, b"after"))  # its leader is gone

    assert cold.error_code is ErrorCode.NETWORK_EXCEPTION
    assert "no broker answered a metadata request" in str(cold)
    assert stale.error_code is ErrorCode.NETWORK_EXCEPTION
    assert cold.retriable and stale.retriable


@pytest.mark.timeout(30)
def test_a_request_the_broker_holds_past_request_timeout_ms_fails_with_request_timed_out(
    sticky_cluster: Cluster,
) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.kill_broker(3)  # still in the ISR for 10 s: an acks=all produce waits that long
    producer = cluster.producer(acks=-1, timeout_ms=60_000, request_timeout_ms=300)

    waiting = producer.send(TOPIC, b"held")
    error = produce_error(waiting)

    assert error.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert "request_timeout_ms" in str(error)  # the client gave up, not the broker
    assert producer.client.pending == 0  # nothing kept for an answer it no longer wants
    # The broker's own timeout (timeout_ms) gives the same code, from the broker.
    broker_side = produce_error(cluster.producer(acks=-1, timeout_ms=300).send(TOPIC, b"held"))
    assert broker_side.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert "request_timeout_ms" not in str(broker_side)


@pytest.mark.timeout(30)
def test_closing_a_producer_fails_the_futures_still_waiting(sticky_cluster: Cluster) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.kill_broker(3)  # an acks=all produce waits in the purgatory
    producer = cluster.producer(acks=-1, timeout_ms=60_000)
    waiting = producer.send(TOPIC, b"held")

    producer.close()

    error = produce_error(waiting)
    assert error.error_code is ErrorCode.NETWORK_EXCEPTION
    assert "closed" in str(error)
    with pytest.raises(RuntimeError, match="closed"):
        producer.send(TOPIC, b"too late")


PROGRAMMING_ERRORS: dict[str, tuple[Callable[[Producer], object], type[Exception]]] = {
    "value not bytes": (lambda p: p.send(TOPIC, "text"), TypeError),  # type: ignore[arg-type]
    "key not bytes": (lambda p: p.send(TOPIC, b"v", key=7), TypeError),  # type: ignore[arg-type]
    "topic not a str": (lambda p: p.send(b"topic", b"v"), TypeError),  # type: ignore[arg-type]
    "negative partition": (lambda p: p.send(TOPIC, b"v", partition=-1), ValueError),
    "empty batch": (lambda p: p.send_batch(TOPIC, []), ValueError),
}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", sorted(PROGRAMMING_ERRORS))
def test_programming_errors_raise_at_once_as_in_kafkas_producers(
    cluster: Cluster, case: str
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    call, expected = PROGRAMMING_ERRORS[case]

    with pytest.raises(expected):
        call(cluster.producer(acks=1))


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "error",
    [
        ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS, TOPIC, 0, "isr (1,)"),
        ProduceError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "gone", None),
        ConsumerError(ErrorCode.OFFSET_OUT_OF_RANGE, TopicPartition(topic=TOPIC, partition=1)),
        ClientError(ErrorCode.NETWORK_EXCEPTION, "no broker"),
    ],
)
def test_client_errors_keep_their_code_and_message_across_a_pickle(error: ClientError) -> None:
    copy = pickle.loads(pickle.dumps(error))

    assert type(copy) is type(error)
    assert (copy.error_code, copy.reason, str(copy)) == (error.error_code, error.reason, str(error))
    assert copy.retriable is error.error_code.retriable


@pytest.mark.timeout(30)
def test_a_topic_sent_to_before_and_missing_from_metadata_for_a_while_is_retried(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    producer = cluster.producer(acks=-1, retries=5, retry_backoff_ms=10)
    assert producer.send(TOPIC, b"first").result(WAIT_S).offset == 0
    real_leader = producer.metadata.leader
    missing = [2]  # the next two lookups: restarted brokers that do not know the topic yet

    def leader(tp: TopicPartition) -> int:
        if missing[0]:
            missing[0] -= 1
            raise ClientError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "no broker knows it yet")
        return real_leader(tp)

    monkeypatch.setattr(producer.metadata, "leader", leader)

    assert producer.send(TOPIC, b"second").result(WAIT_S).offset == 1
    assert missing == [0]
    # a topic never sent to is still failed at once, with no resend
    missing[0] = 1
    error = produce_error(producer.send("never-seen", b"x"))
    assert error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
