"""kafka-python 3 against kafkactor's brokers, over Kafka's wire protocol.

Producers and consumers run with kafka-python's defaults (an idempotent producer with
acks=all, a consumer without a group) except where a test is about a setting. What the client
acknowledged is read back by the same client and, for compressed batches, by kafkactor's own
consumer too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kafka.codec
import kafka.errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.testing import Cluster
from tests.wire.support import (
    BASE_TIMESTAMP_MS,
    CODECS,
    READ_S,
    Delivered,
    EventLog,
    Read,
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

# whether kafka-python finds the library each codec needs (it ships only gzip's)
HAS_CODEC = {
    "gzip": kafka.codec.has_gzip(),
    "snappy": kafka.codec.has_snappy(),
    "lz4": kafka.codec.has_lz4(),
    "zstd": kafka.codec.has_zstd(),
}
LIBRARY = {"gzip": "zlib", "snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}


@contextmanager
def producer(cluster: Cluster, **settings: Any) -> Iterator[Any]:
    """A KafkaProducer with kafka-python's defaults, but for `settings`; closed afterwards."""
    client = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, **settings)
    try:
        yield client
    finally:
        client.close(timeout=READ_S)


@contextmanager
def consumer(cluster: Cluster, **settings: Any) -> Iterator[Any]:
    """A KafkaConsumer without a group (kafka-python's default group_id=None), assigned by
    hand; closed afterwards."""
    client = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, **settings)
    try:
        yield client
    finally:
        client.close()


def poll_until(client: Any, count: int) -> list[Read]:
    """Poll until `count` records arrived (or fail at the deadline)."""
    found: list[Read] = []

    def enough() -> bool:
        for records in client.poll(timeout_ms=100).values():
            found.extend(
                Read(r.partition, r.offset, r.key, r.value, headers_of(r.headers), r.timestamp)
                for r in records
            )
        return len(found) >= count

    wait_until(enough, READ_S, f"{count} records read by kafka-python")
    return found


def read_back(cluster: Cluster, topic: str, partitions: range, count: int) -> list[Read]:
    """`count` records from the start of these partitions, read by a KafkaConsumer."""
    with consumer(cluster) as client:
        client.assign([TopicPartition(topic, p) for p in partitions])
        client.seek_to_beginning()
        return poll_until(client, count)


# -- 1. round trip -----------------------------------------------------------------------------


def test_round_trip_keeps_keys_values_headers_timestamps_partitions_and_offsets(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, partitions=3)
    sent = samples(40, null_header=False)  # kafka-python refuses a null header value
    with producer(cluster) as client:
        futures = [
            client.send(
                topic,
                key=s.key,
                value=s.value,
                headers=list(s.headers),
                timestamp_ms=s.timestamp_ms,
            )
            for s in sent
        ]
        client.flush(timeout=READ_S)
        acks = [f.get(timeout=READ_S) for f in futures]
    delivered = [Delivered(s, m.partition, m.offset) for s, m in zip(sent, acks, strict=True)]
    assert [m.timestamp for m in acks] == [s.timestamp_ms for s in sent]  # CreateTime kept
    assert len({d.partition for d in delivered}) == 3  # the key hash spread them

    read = read_back(cluster, topic, range(3), len(sent))

    check_round_trip(delivered, read)


# -- 2. acks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_every_acknowledged_record_is_readable(
    cluster: Cluster, topic: str, acks: int | str
) -> None:
    cluster.create_topic(topic, replication_factor=3, config={"min.insync.replicas": "2"})
    sent = samples(30, tag=f"acks-{acks}", tombstone=False)
    # kafka-python turns idempotence off for acks 0 and 1 (it needs acks=all)
    with producer(cluster, acks=acks) as client:
        futures = [client.send(topic, key=s.key, value=s.value) for s in sent]
        client.flush(timeout=READ_S)
        acked = [f.get(timeout=READ_S) for f in futures]

    read = read_back(cluster, topic, range(1), len(sent))

    assert [(r.offset, r.key, r.value) for r in read] == [
        (i, s.key, s.value) for i, s in enumerate(sent)
    ]
    if acks != 0:  # with acks=0 no broker answered: the offsets reported are the client's guess
        assert [m.offset for m in acked] == list(range(len(sent)))


# -- 3. compression ----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_batches_are_stored_valid_and_read_back(
    cluster: Cluster, topic: str, codec: str
) -> None:
    if not HAS_CODEC[codec]:
        pytest.skip(f"kafka-python has no {codec} codec here: {LIBRARY[codec]} is not installed")
    cluster.create_topic(topic)
    sent = samples(50, tag=codec, null_header=False)
    with producer(cluster, compression_type=codec) as client:
        futures = [
            client.send(
                topic,
                key=s.key,
                value=s.value,
                headers=list(s.headers),
                timestamp_ms=s.timestamp_ms,
            )
            for s in sent
        ]
        client.flush(timeout=READ_S)
        delivered = [
            Delivered(s, 0, f.get(timeout=READ_S).offset)
            for s, f in zip(sent, futures, strict=True)
        ]

    # the broker kept the producer's codec (compression.type=producer) ...
    assert_stored_as_sent(cluster, topic, 0, codec)
    # ... in batches both the client and kafkactor's own record code read back
    check_round_trip(delivered, read_back(cluster, topic, range(1), len(sent)))
    check_round_trip(delivered, read_in_process(cluster, topic, [0], len(sent)))


# -- 4. seeking --------------------------------------------------------------------------------


def test_seek_to_beginning_end_and_timestamp(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    sent = samples(10, tombstone=False)  # create times BASE + 0 s, + 1 s, ... + 9 s
    with producer(cluster) as client:
        for s in sent:
            client.send(topic, key=s.key, value=s.value, timestamp_ms=s.timestamp_ms)
        client.flush(timeout=READ_S)
    tp = TopicPartition(topic, 0)

    with consumer(cluster) as client:
        client.assign([tp])
        assert client.beginning_offsets([tp]) == {tp: 0}
        assert client.end_offsets([tp]) == {tp: 10}
        # Kafka's answer: the first offset whose timestamp is at or after the one asked for
        found = client.offsets_for_times({tp: BASE_TIMESTAMP_MS + 3000})[tp]
        assert (found.offset, found.timestamp) == (3, BASE_TIMESTAMP_MS + 3000)
        between = client.offsets_for_times({tp: BASE_TIMESTAMP_MS + 3500})[tp]
        assert (between.offset, between.timestamp) == (4, BASE_TIMESTAMP_MS + 4000)
        before = client.offsets_for_times({tp: BASE_TIMESTAMP_MS - 10_000})[tp]
        assert (before.offset, before.timestamp) == (0, BASE_TIMESTAMP_MS)
        assert client.offsets_for_times({tp: BASE_TIMESTAMP_MS + 9001}) == {tp: None}

        client.seek(tp, between.offset)
        assert [r.offset for r in poll_until(client, 6)] == list(range(4, 10))
        client.seek_to_beginning(tp)
        assert client.position(tp) == 0
        assert poll_until(client, 1)[0].key == sent[0].key
        client.seek_to_end(tp)
        assert client.position(tp) == 10
        assert client.poll(timeout_ms=200) == {}
        with producer(cluster) as late:
            late.send(topic, key=b"late", value=b"after the end").get(timeout=READ_S)
        assert [(r.offset, r.key) for r in poll_until(client, 1)] == [(10, b"late")]


# -- 5. a leader killed under acks=all ---------------------------------------------------------


def test_leader_killed_while_producing_loses_no_acknowledged_record(
    failover_cluster: Cluster, topic: str
) -> None:
    cluster = failover_cluster
    cluster.create_topic(
        topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    partition, old_leader = non_controller_partition(cluster, topic, 3)
    futures: dict[bytes, Any] = {}
    with producer(cluster) as client:  # idempotent, acks=all, retries until delivery.timeout

        def send(count: int) -> None:
            for _ in range(count):
                value = f"record-{len(futures)}".encode()
                futures[value] = client.send(topic, value=value, partition=partition)

        send(50)
        client.flush(timeout=READ_S)
        send(50)  # in flight or queued when the leader dies
        cluster.kill_broker(old_leader)
        send(50)  # sent while the client still believes in the dead leader
        new_leader = cluster.wait_for_leader(topic, partition, not_broker=old_leader)
        client.flush(timeout=30)
        send(50)  # to the new leader
        client.flush(timeout=READ_S)
    acked: dict[bytes, int] = {}
    failed: dict[bytes, BaseException] = {}
    for value, future in futures.items():
        if future.succeeded():
            acked[value] = future.value.offset
        else:
            failed[value] = future.exception
    assert not failed, f"{len(failed)} records failed, e.g. {next(iter(failed.items()))}"
    assert new_leader != old_leader

    high_watermark = cluster.describe_partition(topic, partition).high_watermark
    read = read_back(cluster, topic, range(partition, partition + 1), high_watermark)
    stored = {r.offset: r.value for r in read}
    check_acknowledged(acked, stored)
    assert len(stored) == len(acked), "the idempotent producer wrote a record twice"
    check_metadata_leader_epochs(cluster, topic, moved=partition)


def check_metadata_leader_epochs(cluster: Cluster, topic: str, *, moved: int) -> None:
    """Metadata v7+ carries each partition's leader epoch (KIP-320), the one its leader's
    replica holds: after a failover the moved partition's is past its first (0)."""

    def answered() -> dict[int, tuple[int, int]]:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            (described,) = admin.describe_topics([topic])
        finally:
            admin.close()
        return {
            p["partition_index"]: (p["leader_id"], p["leader_epoch"])
            for p in described["partitions"]
        }

    def held() -> dict[int, tuple[int, int]]:
        found = {}
        for p in sorted(answered()):
            replica = cluster.describe_partition(topic, p)
            found[p] = (replica.leader, replica.leader_epoch)
        return found

    # the metadata caches follow the leaders' LeaderAndIsr within an UpdateMetadata
    wait_until(lambda: answered() == held(), READ_S, "Metadata to show the leaders' epochs")
    assert answered()[moved][1] > 0


# -- 6. errors ---------------------------------------------------------------------------------


def admin_topics(cluster: Cluster) -> list[str]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        return list(admin.list_topics())
    finally:
        admin.close()


def test_unknown_topic_without_auto_creation_times_out_the_send(
    strict_cluster: Cluster, topic: str
) -> None:
    # The broker answers Metadata with UNKNOWN_TOPIC_OR_PARTITION, and creates nothing ...
    admin = KafkaAdminClient(bootstrap_servers=strict_cluster.bootstrap_servers)
    try:
        described = admin.describe_topics([topic])
    finally:
        admin.close()
    assert [(t["name"], t["error_code"]) for t in described] == [
        (topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value)
    ]
    assert kafka.errors.for_code(described[0]["error_code"]) is (
        kafka.errors.UnknownTopicOrPartitionError
    )
    # ... so kafka-python's send waits for the topic's metadata for max_block_ms (60 s by
    # default, 1 s here) and then raises its KafkaTimeoutError, as against Kafka.
    with producer(strict_cluster, max_block_ms=1000) as client:
        started = time.monotonic()
        with pytest.raises(kafka.errors.KafkaTimeoutError, match="metadata"):
            client.send(topic, value=b"nowhere").get(timeout=READ_S)
        assert time.monotonic() - started < READ_S
    assert topic not in admin_topics(strict_cluster)


def test_record_over_max_message_bytes_fails_with_message_size_too_large(
    strict_cluster: Cluster, topic: str
) -> None:
    strict_cluster.create_topic(topic, config={"max.message.bytes": "1024"})
    too_large = b"x" * 2048  # far below the client's own max_request_size (1 MiB)
    assert produce_error_in_process(strict_cluster, topic, too_large) is (
        ErrorCode.MESSAGE_TOO_LARGE
    )
    with producer(strict_cluster) as client:
        with pytest.raises(kafka.errors.MessageSizeTooLargeError) as raised:
            client.send(topic, value=too_large).get(timeout=READ_S)
        assert raised.value.errno == ErrorCode.MESSAGE_TOO_LARGE.value
    # nothing of the refused batch was stored: the next record is the first. (A new producer:
    # kafka-python's idempotent producer treats any non-retriable error as fatal to itself.)
    with producer(strict_cluster) as client:
        assert client.send(topic, value=b"small").get(timeout=READ_S).offset == 0


# -- 7. ApiVersions ----------------------------------------------------------------------------


def test_api_versions_negotiation_picks_versions_we_serve(
    cluster: Cluster, topic: str, events: EventLog
) -> None:
    cluster.create_topic(topic)
    advertised = {int(api): versions for api, versions in SUPPORTED.items()}
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        # every broker's ApiVersions answer, as the client holds it, is what we advertise
        assert {int(api): v for api, v in admin.api_versions().items()} == advertised
        for broker in cluster.broker_ids:
            version_data = admin.get_broker_version_data(broker)
            assert version_data.api_versions == advertised
            assert version_data.broker_version >= (0, 11)  # record batches v2, headers
    finally:
        admin.close()
    with producer(cluster) as client:
        # the producer's api_version (auto-detected) allows idempotence and headers
        assert client.config["api_version"] >= (0, 11)
        client.send(topic, value=b"negotiated").get(timeout=READ_S)
    with consumer(cluster) as reader:
        tp = TopicPartition(topic, 0)
        reader.assign([tp])
        assert reader.offsets_for_times({tp: 0})[tp].offset == 0
        reader.seek_to_beginning(tp)
        assert poll_until(reader, 1)[0].value == b"negotiated"

    sent = check_negotiated(events)
    used = {ApiKey(api) for api, _ in sent}
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA} <= used
    # kafka-python asks ApiVersions v4 first; the KIP-511 answer sends it back to v3
    api_versions = sorted({v for api, v in sent if api == ApiKey.API_VERSIONS})
    assert api_versions[-1] > 3 and 3 in api_versions, api_versions


def test_the_admin_client_creates_and_deletes_topics_and_gets_kafkas_errors(
    cluster: Cluster, topic: str
) -> None:
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        created = admin.create_topics(
            [
                NewTopic(topic, 3, 2),
                NewTopic(f"{topic}-compact", 1, 3, topic_configs={"cleanup.policy": "compact"}),
            ]
        )
        assert [t["error_code"] for t in created["topics"]] == [0, 0]
        assert {topic, f"{topic}-compact"} <= set(admin.list_topics())
        (described,) = admin.describe_topics([topic])
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
        assert all(len(p["isr_nodes"]) == 2 for p in described["partitions"])

        with pytest.raises(kafka.errors.TopicAlreadyExistsError):
            admin.create_topics([NewTopic(topic, 3, 2)])
        with pytest.raises(kafka.errors.InvalidReplicationFactorError):
            admin.create_topics([NewTopic(f"{topic}-too-wide", 1, 4)])  # 3 brokers

        assert admin.delete_topics([topic])["topics"][0]["error_code"] == 0
        assert topic not in set(admin.list_topics())
        with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
            admin.delete_topics([f"{topic}-never-created"])
    finally:
        admin.close()
