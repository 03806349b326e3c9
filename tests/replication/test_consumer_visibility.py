"""What a consumer sees: nothing above the high watermark, and long polls that end on time."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from kafkactor.actors.runtime import Client, addresses
from kafkactor.clients import Consumer, ConsumerRecord
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.testing import Cluster
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    fetch_one,
    wait_until,
)


def poll_until(consumer: Consumer, count: int, timeout_s: float = WAIT_S) -> list[ConsumerRecord]:
    """Poll until at least `count` records came (or fail at the deadline)."""
    got: list[ConsumerRecord] = []

    def enough() -> bool:
        got.extend(consumer.poll(200))
        return len(got) >= count

    wait_until(enough, timeout_s, message=f"{count} records")
    return got


def test_consumer_never_sees_records_above_the_high_watermark(sticky_cluster: Cluster) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    committed = [b"c0", b"c1", b"c2"]
    cluster.producer(acks=-1).send_batch(TOPIC, committed, partition=0).result(WAIT_S)
    cluster.kill_broker(2)
    cluster.kill_broker(3)  # both still in the ISR for 10 s: the HW stays at 3
    uncommitted = cluster.producer(acks=1).send_batch(TOPIC, [b"u3", b"u4"], partition=0)
    assert [m.offset for m in uncommitted.result(WAIT_S)] == [3, 4]
    described = cluster.describe_partition(TOPIC, 0)
    assert (described.log_end_offset, described.high_watermark) == (5, 3)

    consumer = cluster.consumer(max_wait_ms=300)
    tp = TopicPartition(topic=TOPIC, partition=0)
    consumer.assign([tp])
    records = poll_until(consumer, 3)

    assert [(r.offset, r.value) for r in records] == [(0, b"c0"), (1, b"c1"), (2, b"c2")]
    assert consumer.poll(300) == []  # offsets 3 and 4 exist on the leader, above the HW
    assert consumer.position(tp) == 3
    assert consumer.high_watermarks == {tp: 3}
    client = Client("raw", cluster.directory)
    data = fetch_one(client, 1, TOPIC, 0, 3)
    assert data.error_code is ErrorCode.NONE
    assert (data.records, data.high_watermark, data.log_end_offset) == (b"", 3, 5)
    client.close()


def test_long_poll_returns_as_soon_as_a_record_becomes_visible(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1)
    consumer = cluster.consumer(max_wait_ms=5_000, min_bytes=1)
    consumer.assign([(TOPIC, 0)])

    with ThreadPoolExecutor(1, thread_name_prefix="poller") as pool:
        started = time.monotonic()
        polled = pool.submit(consumer.poll, 5_000)

        def parked() -> bool:  # the consumer's fetch reached the leader's fetch purgatory
            fetches = events.named("msg.send", actor=consumer.address, msg_type="FetchRequest")
            return bool(fetches) and bool(
                events.named(
                    "msg.recv",
                    actor=addresses.fetch_purgatory(1),
                    msg_type="DelayOperation",
                    trace_id=fetches[0]["trace_id"],
                )
            )

        wait_until(parked, message="the consumer's fetch to wait in the fetch purgatory")
        assert not polled.done()
        producer.send(TOPIC, b"wake-up").result(WAIT_S)
        records = polled.result(WAIT_S)
        elapsed = time.monotonic() - started

    assert [(r.offset, r.value) for r in records] == [(0, b"wake-up")]
    assert elapsed < 2.0, f"the long poll took {elapsed:.2f}s, its max wait is 5s"
    # One long poll, woken by the record: not a loop of short fetches.
    assert len(events.named("msg.send", actor=consumer.address, msg_type="FetchRequest")) == 1


def test_fetch_short_of_min_bytes_returns_what_there_is_at_max_wait(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.producer(acks=-1).send(TOPIC, b"v", key=b"k", timestamp_ms=12_345).result(WAIT_S)
    consumer = cluster.consumer(max_wait_ms=300, min_bytes=10_000)
    consumer.assign([(TOPIC, 0)])
    consumer.metadata.partitions(TOPIC)  # metadata, fetched outside the measured poll

    started = time.monotonic()
    records = consumer.poll(3_000)
    elapsed = time.monotonic() - started

    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in records] == [
        (0, b"k", b"v", 12_345)
    ]
    assert 0.2 <= elapsed < 2.0, elapsed  # the fetch waited for more bytes, then gave up


def test_poll_on_an_idle_partition_returns_empty_at_its_timeout(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    consumer = cluster.consumer(max_wait_ms=300)
    consumer.assign([(TOPIC, 0)])
    consumer.metadata.partitions(TOPIC)  # metadata, fetched outside the measured poll

    started = time.monotonic()
    records = consumer.poll(300)
    elapsed = time.monotonic() - started

    assert records == []
    assert 0.29 <= elapsed < 2.0, elapsed


def test_broker_answers_an_idle_fetch_empty_after_its_max_wait(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    client = Client("raw", cluster.directory)

    started = time.monotonic()
    data = fetch_one(client, 1, TOPIC, 0, 0, max_wait_ms=300)
    elapsed = time.monotonic() - started

    assert data.error_code is ErrorCode.NONE
    assert data.records == b""
    assert 0.29 <= elapsed < 2.0, elapsed  # the reaper polls the timer every 200 ms at most
    client.close()
    # the request log calls it expired, not an error: a long poll's normal end
    (response,) = [
        e
        for e in events.named("fetch.response", fetcher="consumer")
        if e["actor"].startswith("broker/1/")
    ]
    assert (response["outcome"], response["error_codes"], response["bytes"]) == (
        "expired",
        [0],
        0,
    )
    assert response["waited"] is True
    assert 300 <= response["latency_ms"] < 2_000
