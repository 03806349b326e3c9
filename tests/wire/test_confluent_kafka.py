"""confluent-kafka (librdkafka) against kafkactor's brokers, over Kafka's wire protocol.

Producers and consumers run with librdkafka's defaults (acks=all, no idempotence,
api.version.request=true) except where a test is about a setting. A consumer needs a
`group.id`; these use `assign()` with `enable.auto.commit=false`, so they never join nor
commit (consumer groups are tests/wire/test_groups_confluent.py's).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.testing import Cluster
from tests.wire.support import (
    BASE_TIMESTAMP_MS,
    READ_S,
    Delivered,
    EventLog,
    Read,
    Sample,
    assert_stored_as_sent,
    check_acknowledged,
    check_negotiated,
    check_round_trip,
    headers_of,
    non_controller_partition,
    produce_error_in_process,
    read_in_process,
    samples,
    wait_until,
)


class Deliveries:
    """A librdkafka producer's delivery reports, by the value of the record reported."""

    def __init__(self) -> None:
        self.acked: dict[bytes | None, Message] = {}
        self.failed: dict[bytes | None, KafkaError] = {}

    def report(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.acked[message.value()] = message
        else:
            self.failed[message.value()] = error


@contextmanager
def producer(cluster: Cluster, **settings: Any) -> Iterator[Producer]:
    """A Producer with librdkafka's defaults, but for `settings`; flushed and closed after."""
    client = Producer({"bootstrap.servers": cluster.bootstrap_servers, **settings})
    try:
        yield client
    finally:
        client.flush(READ_S)
        client.close()


@contextmanager
def consumer(cluster: Cluster) -> Iterator[Consumer]:
    """A Consumer for manual assignment: it never joins its group nor commits."""
    client = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "kafkactor-wire-tests",  # required by the client, never used here
            "enable.auto.commit": False,
        }
    )
    try:
        yield client
    finally:
        client.close()


def produce(client: Producer, topic: str, sent: list[Sample], **options: Any) -> Deliveries:
    """Produce `sent` (keys, values, headers, create times) and wait for every report."""
    deliveries = Deliveries()
    for s in sent:
        client.produce(
            topic,
            value=s.value,
            key=s.key,
            headers=list(s.headers),
            timestamp=s.timestamp_ms,
            on_delivery=deliveries.report,
            **options,
        )
    assert client.flush(READ_S) == 0, "records still undelivered"
    return deliveries


def known(value: int | None) -> int:
    """A message's partition or offset (None only for messages not from a broker)."""
    assert value is not None
    return value


def delivered(sent: list[Sample], deliveries: Deliveries) -> list[Delivered]:
    assert not deliveries.failed, deliveries.failed
    out = []
    for s in sent:
        message = deliveries.acked[s.value]
        out.append(Delivered(s, known(message.partition()), known(message.offset())))
    return out


def as_read(message: Message) -> Read:
    timestamp_type, timestamp = message.timestamp()
    assert timestamp_type == TIMESTAMP_CREATE_TIME
    return Read(
        known(message.partition()),
        known(message.offset()),
        message.key(),
        message.value(),
        headers_of(message.headers()),
        timestamp,
    )


def poll_until(client: Consumer, count: int) -> list[Read]:
    """Poll until `count` records arrived (or fail at the deadline); errors fail the test."""
    found: list[Read] = []

    def enough() -> bool:
        message = client.poll(0.1)
        if message is not None:
            assert message.error() is None, message.error()
            found.append(as_read(message))
        return len(found) >= count

    wait_until(enough, READ_S, f"{count} records read by confluent-kafka")
    return found


def read_back(cluster: Cluster, topic: str, partitions: range, count: int) -> list[Read]:
    with consumer(cluster) as client:
        client.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        return poll_until(client, count)


def distinct_values(sent: list[Sample]) -> None:
    # delivery reports are matched to records by value
    assert len({s.value for s in sent}) == len(sent)


# -- 1. round trip -----------------------------------------------------------------------------


def test_round_trip_keeps_keys_values_headers_timestamps_partitions_and_offsets(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, partitions=3)
    sent = samples(40)
    distinct_values(sent)
    with producer(cluster) as client:
        deliveries = produce(client, topic, sent)
    acked = delivered(sent, deliveries)
    for s in sent:  # the create time given is the one reported
        assert deliveries.acked[s.value].timestamp() == (TIMESTAMP_CREATE_TIME, s.timestamp_ms)
    assert len({d.partition for d in acked}) == 3  # the key hash spread them

    check_round_trip(acked, read_back(cluster, topic, range(3), len(sent)))


# -- 2. acks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acknowledged_record_is_readable(cluster: Cluster, topic: str, acks: str) -> None:
    cluster.create_topic(topic, replication_factor=3, config={"min.insync.replicas": "2"})
    sent = samples(30, tag=f"acks-{acks}", tombstone=False)
    with producer(cluster, acks=acks) as client:
        deliveries = produce(client, topic, sent)
    assert not deliveries.failed, deliveries.failed
    assert set(deliveries.acked) == {s.value for s in sent}

    read = read_back(cluster, topic, range(1), len(sent))

    assert [(r.offset, r.key, r.value) for r in read] == [
        (i, s.key, s.value) for i, s in enumerate(sent)
    ]
    if acks != "0":  # with acks=0 no broker answered: librdkafka reports no offset
        assert [deliveries.acked[s.value].offset() for s in sent] == list(range(len(sent)))


# -- 3. compression ----------------------------------------------------------------------------


# librdkafka enables lz4 only for a broker that lists FindCoordinator in ApiVersions.


@pytest.mark.parametrize(
    "codec",
    [
        "gzip",
        "lz4",
        "snappy",
        "zstd",
    ],
)
def test_compressed_batches_are_stored_valid_and_read_back(
    cluster: Cluster, topic: str, codec: str
) -> None:
    # librdkafka builds every codec in (its builtin.features list them all)
    cluster.create_topic(topic)
    sent = samples(50, tag=codec)
    distinct_values(sent)
    with producer(cluster, **{"compression.type": codec}) as client:
        acked = delivered(sent, produce(client, topic, sent))

    # the broker kept the producer's codec (compression.type=producer) ...
    assert_stored_as_sent(cluster, topic, 0, codec)
    # ... in batches both the client and kafkactor's own record code read back
    check_round_trip(acked, read_back(cluster, topic, range(1), len(sent)))
    check_round_trip(acked, read_in_process(cluster, topic, [0], len(sent)))


# -- 4. seeking --------------------------------------------------------------------------------


def test_seek_to_beginning_end_and_timestamp(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    sent = samples(10, tombstone=False)  # create times BASE + 0 s, + 1 s, ... + 9 s
    with producer(cluster) as client:
        assert not produce(client, topic, sent).failed

    with consumer(cluster) as reader:
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), READ_S) == (0, 10)
        # Kafka's answer: the first offset whose timestamp is at or after the one asked for
        times = {
            BASE_TIMESTAMP_MS + 3000: 3,
            BASE_TIMESTAMP_MS + 3500: 4,
            BASE_TIMESTAMP_MS - 10_000: 0,
            BASE_TIMESTAMP_MS + 9001: -1,  # later than every record: none
        }
        for asked, expected in times.items():
            [found] = reader.offsets_for_times([TopicPartition(topic, 0, asked)], READ_S)
            assert (found.error, found.offset) == (None, expected), asked

        reader.assign([TopicPartition(topic, 0, 4)])
        assert [r.offset for r in poll_until(reader, 6)] == list(range(4, 10))
        reader.seek(TopicPartition(topic, 0, OFFSET_BEGINNING))
        assert poll_until(reader, 1)[0].key == sent[0].key
        reader.seek(TopicPartition(topic, 0, OFFSET_END))
        assert reader.poll(0.2) is None
        with producer(cluster) as late:
            late.produce(topic, value=b"after the end", key=b"late")
        assert [(r.offset, r.key) for r in poll_until(reader, 1)] == [(10, b"late")]


# -- 5. a leader killed under acks=all ---------------------------------------------------------


def test_leader_killed_while_producing_loses_no_acknowledged_record(
    failover_cluster: Cluster, topic: str
) -> None:
    cluster = failover_cluster
    cluster.create_topic(
        topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    partition, old_leader = non_controller_partition(cluster, topic, 3)
    deliveries = Deliveries()
    count = 0
    # librdkafka's defaults: acks=all, retries without limit for message.timeout.ms (300 s)
    with producer(cluster) as client:

        def send(records: int) -> None:
            nonlocal count
            for _ in range(records):
                value = f"record-{count}".encode()
                count += 1
                client.produce(
                    topic, value=value, partition=partition, on_delivery=deliveries.report
                )
            client.poll(0)

        send(50)
        assert client.flush(READ_S) == 0
        send(50)  # in flight or queued when the leader dies
        cluster.kill_broker(old_leader)
        send(50)  # sent while the client still believes in the dead leader
        new_leader = cluster.wait_for_leader(topic, partition, not_broker=old_leader)
        assert client.flush(30) == 0
        send(50)  # to the new leader
        assert client.flush(READ_S) == 0

    assert new_leader != old_leader
    assert not deliveries.failed, deliveries.failed
    assert len(deliveries.acked) == count
    acked = {value: known(m.offset()) for value, m in deliveries.acked.items() if value is not None}
    high_watermark = cluster.describe_partition(topic, partition).high_watermark
    read = read_back(cluster, topic, range(partition, partition + 1), high_watermark)
    check_acknowledged(acked, {r.offset: r.value for r in read})


# -- 6. errors ---------------------------------------------------------------------------------


def test_unknown_topic_without_auto_creation_fails_the_delivery(
    strict_cluster: Cluster, topic: str
) -> None:
    # librdkafka waits topic.metadata.propagation.max.ms (30 s by default, 1 s here) for a
    # topic the broker says does not exist before failing its records
    with producer(strict_cluster, **{"topic.metadata.propagation.max.ms": 1000}) as client:
        # the broker answers Metadata with UNKNOWN_TOPIC_OR_PARTITION, and creates nothing
        metadata = client.list_topics(topic, READ_S)
        error = metadata.topics[topic].error
        assert error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        assert error.code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value
        deliveries = Deliveries()
        started = time.monotonic()
        client.produce(topic, value=b"nowhere", on_delivery=deliveries.report)
        assert client.flush(READ_S) == 0
        assert time.monotonic() - started < READ_S
    failure = deliveries.failed[b"nowhere"]
    # librdkafka reports the broker's code (older versions: its own _UNKNOWN_TOPIC)
    assert failure.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
    assert not failure.retriable()
    with producer(strict_cluster) as client:
        assert topic not in client.list_topics(timeout=READ_S).topics


def test_record_over_max_message_bytes_fails_with_msg_size_too_large(
    strict_cluster: Cluster, topic: str
) -> None:
    strict_cluster.create_topic(topic, config={"max.message.bytes": "1024"})
    too_large = b"x" * 2048  # far below the client's own message.max.bytes (1 MB)
    assert produce_error_in_process(strict_cluster, topic, too_large) is (
        ErrorCode.MESSAGE_TOO_LARGE
    )
    with producer(strict_cluster) as client:
        deliveries = Deliveries()
        client.produce(topic, value=too_large, on_delivery=deliveries.report)
        assert client.flush(READ_S) == 0
        failure = deliveries.failed[too_large]
        assert failure.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert failure.code() == ErrorCode.MESSAGE_TOO_LARGE.value
        # nothing of the refused batch was stored: the next record is the first
        client.produce(topic, value=b"small", on_delivery=deliveries.report)
        assert client.flush(READ_S) == 0
        assert deliveries.acked[b"small"].offset() == 0


# -- 7. ApiVersions ----------------------------------------------------------------------------


def test_api_versions_negotiation_picks_versions_we_serve(
    cluster: Cluster, topic: str, events: EventLog
) -> None:
    cluster.create_topic(topic)
    with producer(cluster) as client:  # api.version.request=true by default
        metadata = client.list_topics(timeout=READ_S)
        assert sorted(metadata.brokers) == cluster.broker_ids
        assert metadata.cluster_id == "kafkactor"
        deliveries = produce(client, topic, samples(1, tombstone=False))
        assert not deliveries.failed
    with consumer(cluster) as reader:
        [found] = reader.offsets_for_times([TopicPartition(topic, 0, 0)], READ_S)
        assert found.offset == 0
        reader.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert poll_until(reader, 1)[0].offset == 0

    sent = check_negotiated(events)
    used = {ApiKey(api) for api, _ in sent}
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA} <= used
    # librdkafka 2.x asks ApiVersions v3 (its newest), which we serve: no fallback needed
    assert {v for api, v in sent if api == ApiKey.API_VERSIONS} == {3}
