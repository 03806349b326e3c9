"""acks=all, acks=1 and acks=0 as a producer sees them, with healthy and dead followers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.actors.runtime import Client, addresses
from kafkactor.clients import ProduceError, RecordMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.storage import Record
from kafkactor.testing import Cluster
from kafkactor.timer import ManualClock
from tests.replication.support import (
    MIN_ISR_2,
    NO_ERROR,
    TOPIC,
    WAIT_S,
    EventLog,
    batch,
    fetch_one,
    produce_request,
    produce_results,
    purgatory_state,
    result_or_error,
    settle_actor,
    values_of,
    wait_until,
)

LEADER_PARTITION = f"broker/1/partition/{TOPIC}-0"


def hw_advance_index(events: EventLog, at_least: int) -> int:
    """The position of the leader's first `partition.hw_advance` to `at_least` or more."""
    return events.index_of(
        lambda e: (
            e["event"] == "partition.hw_advance"
            and e["actor"] == LEADER_PARTITION
            and e["high_watermark"] >= at_least
        )
    )


def test_acks_all_answers_only_after_both_followers_have_the_batch(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    assert cluster.replicas(TOPIC, 0) == (1, 2, 3)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    consumer = cluster.consumer(max_wait_ms=1_000)
    consumer.assign([(TOPIC, 0)])

    for i in range(3):
        value = f"committed-{i}".encode()
        metadata = producer.send(TOPIC, value).result(WAIT_S)
        assert metadata.offset == i
        required = metadata.offset + 1

        # When the answer is in, both followers have fetched past the batch and the HW too.
        described = cluster.describe_partition(TOPIC, 0)
        followers = dict(described.follower_log_end_offsets)
        assert set(followers) == {2, 3}
        assert all(leo >= required for leo in followers.values()), followers
        assert described.high_watermark >= required
        assert described.isr == (1, 2, 3)

        # ... and they had before the answer was sent: the leader logged the HW passing the
        # batch, with both followers' log ends past it, before the producer got its response.
        trace_id = events.trace_of(producer.address, "ProduceRequest")
        answered = events.receipt_index(producer.address, trace_id, "ProduceResponse")
        advanced = hw_advance_index(events, required)
        assert 0 <= advanced < answered, (advanced, answered)
        hw_event = events.all()[advanced]
        assert all(leo >= required for leo in hw_event["follower_log_end_offsets"].values())
        assert set(hw_event["follower_log_end_offsets"]) == {"2", "3"}

        # A consumer can read the record at once.
        records = consumer.poll(int(WAIT_S * 1000))
        assert [(r.offset, r.value) for r in records] == [(i, value)]


def test_acks_all_succeeds_once_the_isr_drops_a_dead_follower(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    assert producer.send(TOPIC, b"before").result(WAIT_S).offset == 0

    cluster.kill_broker(3)
    metadata = producer.send(TOPIC, b"after").result(WAIT_S)  # no error

    assert metadata.offset == 1
    described = cluster.describe_partition(TOPIC, 0)
    assert described.isr == (1, 2)
    assert described.high_watermark == 2
    shrinks = events.named("partition.isr_shrink", actor=LEADER_PARTITION)
    assert [(s["removed"], s["isr_before"], s["isr"]) for s in shrinks] == [
        ([3], [1, 2, 3], [1, 2])
    ]
    # The answer came only after the ISR shrank (the dead follower held the HW back till then).
    trace_id = events.trace_of(producer.address, "ProduceRequest")
    answered = events.receipt_index(producer.address, trace_id, "ProduceResponse")
    shrunk = events.index_of(lambda e: e["event"] == "partition.isr_shrink")
    assert 0 <= shrunk < answered


def test_acks_all_fails_with_not_enough_replicas_once_the_leader_is_alone(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    assert producer.send(TOPIC, b"before").result(WAIT_S).offset == 0

    cluster.kill_broker(2)
    cluster.kill_broker(3)
    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0).isr == (1,),
        message="the ISR to shrink to the leader alone",
    )
    before = cluster.describe_partition(TOPIC, 0)

    error = result_or_error(producer.send(TOPIC, b"refused"))

    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    after = cluster.describe_partition(TOPIC, 0)
    assert after.log_end_offset == before.log_end_offset  # nothing was appended
    assert after.high_watermark == before.high_watermark
    failed = events.named("partition.append_failed", actor=LEADER_PARTITION)
    assert [f["error"] for f in failed] == ["NOT_ENOUGH_REPLICAS"]
    # acks=1 does not need the ISR: the partition itself still takes writes.
    assert cluster.producer(acks=1).send(TOPIC, b"acks-1").result(WAIT_S).offset == 1


def test_acks_all_waiting_when_the_isr_falls_below_min_fails_after_the_append(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    assert producer.send(TOPIC, b"before").result(WAIT_S).offset == 0
    cluster.kill_broker(2)
    cluster.kill_broker(3)

    error = result_or_error(producer.send(TOPIC, b"orphan"))  # appended while the ISR was 3

    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    described = cluster.describe_partition(TOPIC, 0)
    assert described.isr == (1,)
    # As in Kafka, the record stays in the leader's log (only the guarantee was not met).
    assert (described.log_end_offset, described.high_watermark) == (2, 2)
    assert [e["last_offset"] for e in events.named("partition.append", broker=1)] == [0, 1]


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def manual_cluster(manual_clock: ManualClock) -> Iterator[Cluster]:
    """Kafka's default lag time (10 s: the ISR keeps a dead follower) on a ManualClock; a
    follower whose first fetch beat its leader's LeaderAndIsr backs off for only 10 ms."""
    config = BrokerConfig(replica=ReplicaManagerConfig(replica_fetch_backoff_ms=10))
    with Cluster(3, clock=manual_clock, config=config, zookeeper=None) as started:
        yield started


def test_acks_all_times_out_at_timeout_ms_and_not_before(
    manual_cluster: Cluster, manual_clock: ManualClock, events: EventLog
) -> None:
    cluster, clock = manual_cluster, manual_clock
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=1_000)
    warm_up = producer.send(TOPIC, b"warm-up")

    def warmed_up() -> bool:
        if not warm_up.done():
            clock.advance(10)  # ends a follower's backoff, if it is in one
        return warm_up.done()

    wait_until(warmed_up, message="both followers to replicate the first record")
    assert warm_up.result(0).offset == 0

    cluster.kill_broker(3)  # still in the ISR for 10 s: the HW cannot pass the next record
    future = producer.send(TOPIC, b"stuck")
    wait_until(
        lambda: purgatory_state(cluster, 1, "produce")["delayed"] == 1,
        message="the produce to wait in the produce purgatory",
    )

    clock.advance(999)
    settle_actor(cluster, addresses.reaper(1))  # the timer has advanced to the new time
    assert purgatory_state(cluster, 1, "produce")["delayed"] == 1  # and expirations delivered
    assert not future.done()

    clock.advance(1)
    error = result_or_error(future)

    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.REQUEST_TIMED_OUT
    described = cluster.describe_partition(TOPIC, 0)
    assert described.isr == (1, 2, 3)  # the timeout, not an ISR change, ended it
    assert (described.log_end_offset, described.high_watermark) == (2, 1)
    expired = events.named("purgatory.expire", actor=addresses.produce_purgatory(1))
    assert len(expired) == 1
    # the request log: the timeout ended it exactly timeout_ms after the broker received it
    (response,) = [
        e for e in events.named("produce.response") if e["trace_id"] == expired[0]["trace_id"]
    ]
    assert response["outcome"] == "expired"
    assert response["error_codes"] == [int(ErrorCode.REQUEST_TIMED_OUT)]
    assert (response["acks"], response["latency_ms"], response["waited"]) == (-1, 1_000, True)
    (timed_out,) = events.named("timer.expire", operation_id=expired[0]["operation_id"])
    assert timed_out["lateness_ms"] == 0  # the Reaper advanced the timer on the clock's move
    (added,) = events.named("timer.add", operation_id=expired[0]["operation_id"])
    assert added["deadline_ms"] == timed_out["deadline_ms"] == timed_out["ts_ms"]


def test_acks_1_answers_after_the_leader_append_even_with_both_followers_dead(
    sticky_cluster: Cluster,
) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    assert cluster.producer(acks=-1).send(TOPIC, b"committed").result(WAIT_S).offset == 0
    cluster.kill_broker(2)
    cluster.kill_broker(3)

    metadata = cluster.producer(acks=1).send(TOPIC, b"leader-only").result(WAIT_S)

    assert metadata.offset == 1
    described = cluster.describe_partition(TOPIC, 0)
    assert described.isr == (1, 2, 3)  # not shrunk: acks=1 did not wait for it
    assert (described.log_end_offset, described.high_watermark) == (2, 1)


def test_acks_0_appends_and_sends_no_response(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    client = Client("acks-0", cluster.directory)
    before = cluster.describe_partition(TOPIC, 0).log_end_offset

    future = client.request(
        addresses.replica_manager(1), produce_request(0, (TOPIC, 0, batch(b"fire-and-forget")))
    )

    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0).log_end_offset == before + 1,
        message="the leader to append the acks=0 record",
    )
    # The replica manager has handled the append's result (queued before the describe answer):
    # any response would have been delivered by now.
    settle_actor(cluster, addresses.replica_manager(1))
    assert not future.done()
    assert client.pending == 1
    wait_until(lambda: cluster.describe_partition(TOPIC, 0).high_watermark == before + 1)
    data = fetch_one(client, 1, TOPIC, 0, before)
    assert values_of(data.records) == [(before, b"fire-and-forget")]
    client.close()


def test_acks_0_producer_future_resolves_at_once_without_an_offset(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    metadata = cluster.producer(acks=0).send(TOPIC, b"fire-and-forget").result(WAIT_S)
    assert metadata.offset == -1
    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0).log_end_offset == 1,
        message="the leader to append the acks=0 record",
    )


@pytest.mark.parametrize("acks", [-1, 1, 0])
def test_a_batch_is_answered_with_where_each_of_its_records_landed(
    cluster: Cluster, acks: int
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1)
    producer.send_batch(TOPIC, [b"a", b"b"], partition=0).result(WAIT_S)
    records = [Record(None, f"r{i}".encode(), 1_000 + i) for i in range(5)]
    landed = cluster.producer(acks=acks).send_batch(TOPIC, records, partition=0).result(WAIT_S)
    offsets = [2, 3, 4, 5, 6] if acks else [-1] * 5
    assert landed == [
        RecordMetadata(TOPIC, 0, offset, 1_000 + i) for i, offset in enumerate(offsets)
    ]
    assert all(type(m) is RecordMetadata for m in landed)
    assert landed[4].topic_partition == TopicPartition(topic=TOPIC, partition=0)
    values = producer.send_batch(TOPIC, [b"v0", b"v1", b"v2"], partition=0).result(WAIT_S)
    assert [(m.topic, m.partition, m.offset) for m in values] == [(TOPIC, 0, o) for o in (7, 8, 9)]
    assert len({m.timestamp_ms for m in values}) == 1  # one send, one timestamp
    producer.close()


@pytest.mark.parametrize("acks", [2, -2, 3])
def test_invalid_acks_are_refused_and_nothing_is_appended(
    cluster: Cluster, acks: int, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    client = Client("bad-acks", cluster.directory)

    response = client.call(
        addresses.replica_manager(1), produce_request(acks, (TOPIC, 0, batch(b"x"))), WAIT_S
    )

    assert produce_results(response)[(TOPIC, 0)].error_code is ErrorCode.INVALID_REQUIRED_ACKS
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0
    error = result_or_error(cluster.producer(acks=acks).send(TOPIC, b"x"))
    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.INVALID_REQUIRED_ACKS
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0
    client.close()
    # the request log has each refusal as an error answered at once, with the acks asked for
    responses = events.named("produce.response", acks=acks)
    assert len(responses) == 2
    for response in responses:
        assert response["outcome"] == "error"
        assert response["error_codes"] == [int(ErrorCode.INVALID_REQUIRED_ACKS)]
        assert response["waited"] is False
    assert len(events.named("produce.request", acks=acks)) == 2


def test_acks_all_times_out_only_the_partition_that_cannot_reach_its_offset(
    manual_cluster: Cluster, manual_clock: ManualClock
) -> None:
    cluster, clock = manual_cluster, manual_clock
    cluster.create_topic("solo", partitions=1, replication_factor=1)  # on broker 1 alone
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)  # led by broker 1 too
    assert cluster.leader("solo", 0) == cluster.leader(TOPIC, 0) == 1
    cluster.kill_broker(3)  # in TOPIC's ISR for 10 s: its HW cannot move
    client = Client("two-partitions", cluster.directory)

    future = client.request(
        addresses.replica_manager(1),
        produce_request(
            -1, ("solo", 0, batch(b"replicated")), (TOPIC, 0, batch(b"stuck")), timeout_ms=500
        ),
    )
    wait_until(
        lambda: purgatory_state(cluster, 1, "produce")["delayed"] == 1,
        message="the produce to wait in the produce purgatory",
    )
    assert not future.done()  # "solo" alone is done: the request waits for the other
    clock.advance(500)
    results = produce_results(future.result(WAIT_S))

    assert (results[("solo", 0)].error_code, results[("solo", 0)].base_offset) == (NO_ERROR, 0)
    assert results[(TOPIC, 0)].error_code is ErrorCode.REQUEST_TIMED_OUT
    assert results[(TOPIC, 0)].base_offset == -1
    assert values_of(fetch_one(client, 1, "solo", 0, 0).records) == [(0, b"replicated")]
    described = cluster.describe_partition(TOPIC, 0)
    assert (described.log_end_offset, described.high_watermark) == (1, 0)  # appended, not acked
    client.close()
