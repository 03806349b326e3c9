"""aiokafka against kafkactor's brokers, over Kafka's wire protocol.

Producers and consumers run with aiokafka's defaults (acks=1, no idempotence, a consumer
without a group) except where a test is about a setting. Each test is a coroutine run with
`asyncio.run` inside a plain test; the clusters it talks to run on threads of their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import aiokafka.codec
import aiokafka.errors
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
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
)

HAS_CODEC = {
    "gzip": aiokafka.codec.has_gzip(),
    "snappy": aiokafka.codec.has_snappy(),
    "lz4": aiokafka.codec.has_lz4(),
    "zstd": aiokafka.codec.has_zstd(),
}

T = TypeVar("T")


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(scenario)


@asynccontextmanager
async def producer(cluster: Cluster, **settings: Any) -> AsyncIterator[Any]:
    """A started AIOKafkaProducer with aiokafka's defaults, but for `settings`; stopped after."""
    client = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, **settings)
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


@asynccontextmanager
async def consumer(cluster: Cluster, **settings: Any) -> AsyncIterator[Any]:
    """A started AIOKafkaConsumer without a group (aiokafka's default), assigned by hand."""
    client = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, **settings)
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


async def poll_until(client: Any, count: int) -> list[Read]:
    """getmany until `count` records arrived (or fail at the deadline)."""
    found: list[Read] = []
    deadline = time.monotonic() + READ_S
    while len(found) < count:
        assert time.monotonic() < deadline, f"read {len(found)} of {count} records"
        for records in (await client.getmany(timeout_ms=100)).values():
            found.extend(
                Read(r.partition, r.offset, r.key, r.value, headers_of(r.headers), r.timestamp)
                for r in records
            )
    return found


async def assign(client: Any, tps: list[Any]) -> None:
    """Assign, and wait for the positions aiokafka resets the partitions to (the log end: its
    default auto_offset_reset is "latest"). A seek_to_* while that reset's ListOffsets is out
    is undone by its answer (aiokafka applies any answer to a partition awaiting a reset)."""
    client.assign(tps)
    for tp in tps:
        await asyncio.wait_for(client.position(tp), READ_S)


async def read_back(cluster: Cluster, topic: str, partitions: range, count: int) -> list[Read]:
    async with consumer(cluster) as client:
        tps = [TopicPartition(topic, p) for p in partitions]
        await assign(client, tps)
        await client.seek_to_beginning(*tps)
        return await poll_until(client, count)


# -- 1. round trip -----------------------------------------------------------------------------


def test_round_trip_keeps_keys_values_headers_timestamps_partitions_and_offsets(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, partitions=3)
    sent = samples(40)

    async def scenario() -> list[Delivered]:
        async with producer(cluster) as client:
            futures = [
                await client.send(
                    topic,
                    key=s.key,
                    value=s.value,
                    headers=list(s.headers),
                    timestamp_ms=s.timestamp_ms,
                )
                for s in sent
            ]
            acks = await asyncio.wait_for(asyncio.gather(*futures), READ_S)
        # (aiokafka reports the first record's create time for every record of a batch, so
        # the timestamps are checked as read back)
        return [Delivered(s, m.partition, m.offset) for s, m in zip(sent, acks, strict=True)]

    delivered = run(scenario())
    assert len({d.partition for d in delivered}) == 3  # the key hash spread them

    check_round_trip(delivered, run(read_back(cluster, topic, range(3), len(sent))))


# -- 2. acks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_every_acknowledged_record_is_readable(
    cluster: Cluster, topic: str, acks: int | str
) -> None:
    cluster.create_topic(topic, replication_factor=3, config={"min.insync.replicas": "2"})
    sent = samples(30, tag=f"acks-{acks}", tombstone=False)

    async def scenario() -> tuple[list[Any], list[Read]]:
        async with producer(cluster, acks=acks) as client:
            futures = [await client.send(topic, key=s.key, value=s.value) for s in sent]
            acked = await asyncio.wait_for(asyncio.gather(*futures), READ_S)
        return acked, await read_back(cluster, topic, range(1), len(sent))

    acked, read = run(scenario())

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
        pytest.skip(f"aiokafka has no {codec} codec here (it needs cramjam)")
    cluster.create_topic(topic)
    sent = samples(50, tag=codec)

    async def scenario() -> list[Delivered]:
        async with producer(cluster, compression_type=codec) as client:
            futures = [
                await client.send(
                    topic,
                    key=s.key,
                    value=s.value,
                    headers=list(s.headers),
                    timestamp_ms=s.timestamp_ms,
                )
                for s in sent
            ]
            acks = await asyncio.wait_for(asyncio.gather(*futures), READ_S)
        return [Delivered(s, 0, m.offset) for s, m in zip(sent, acks, strict=True)]

    delivered = run(scenario())

    # the broker kept the producer's codec (compression.type=producer) ...
    assert_stored_as_sent(cluster, topic, 0, codec)
    # ... in batches both the client and kafkactor's own record code read back
    check_round_trip(delivered, run(read_back(cluster, topic, range(1), len(sent))))
    check_round_trip(delivered, read_in_process(cluster, topic, [0], len(sent)))


# -- 4. seeking --------------------------------------------------------------------------------


def test_seek_to_beginning_end_and_timestamp(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    sent = samples(10, tombstone=False)  # create times BASE + 0 s, + 1 s, ... + 9 s
    tp = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with producer(cluster) as client:
            for s in sent:
                await client.send(topic, key=s.key, value=s.value, timestamp_ms=s.timestamp_ms)
            await client.flush()
        async with consumer(cluster) as reader:
            await assign(reader, [tp])
            assert await reader.beginning_offsets([tp]) == {tp: 0}
            assert await reader.end_offsets([tp]) == {tp: 10}
            # Kafka's answer: the first offset whose timestamp is at or after the one asked for
            times = {
                BASE_TIMESTAMP_MS + 3000: (3, BASE_TIMESTAMP_MS + 3000),
                BASE_TIMESTAMP_MS + 3500: (4, BASE_TIMESTAMP_MS + 4000),
                BASE_TIMESTAMP_MS - 10_000: (0, BASE_TIMESTAMP_MS),
            }
            for asked, expected in times.items():
                found = (await reader.offsets_for_times({tp: asked}))[tp]
                assert (found.offset, found.timestamp) == expected, asked
            assert await reader.offsets_for_times({tp: BASE_TIMESTAMP_MS + 9001}) == {tp: None}

            reader.seek(tp, 4)
            assert [r.offset for r in await poll_until(reader, 6)] == list(range(4, 10))
            await reader.seek_to_beginning(tp)
            assert await reader.position(tp) == 0
            assert (await poll_until(reader, 1))[0].key == sent[0].key
            await reader.seek_to_end(tp)
            assert await reader.position(tp) == 10
            assert await reader.getmany(timeout_ms=200) == {}
            async with producer(cluster) as late:
                await late.send_and_wait(topic, key=b"late", value=b"after the end")
            assert [(r.offset, r.key) for r in await poll_until(reader, 1)] == [(10, b"late")]

    run(scenario())


# -- 5. a leader killed under acks=all ---------------------------------------------------------


def test_leader_killed_while_producing_loses_no_acknowledged_record(
    failover_cluster: Cluster, topic: str
) -> None:
    cluster = failover_cluster
    cluster.create_topic(
        topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    partition, old_leader = non_controller_partition(cluster, topic, 3)
    futures: dict[bytes, asyncio.Future[Any]] = {}

    async def scenario() -> int:
        # acks=all (the test's subject); aiokafka retries until request_timeout_ms by default
        async with producer(cluster, acks="all") as client:

            async def send(count: int) -> None:
                for _ in range(count):
                    value = f"record-{len(futures)}".encode()
                    futures[value] = await client.send(topic, value=value, partition=partition)

            await send(50)
            await client.flush()
            await send(50)  # in flight or queued when the leader dies
            # killed from a thread, so the client's event loop keeps running meanwhile
            await asyncio.to_thread(cluster.kill_broker, old_leader)
            await send(50)  # sent while the client still believes in the dead leader
            new_leader = await asyncio.to_thread(
                cluster.wait_for_leader, topic, partition, not_broker=old_leader
            )
            await asyncio.wait_for(client.flush(), 30)
            await send(50)  # to the new leader
            await asyncio.wait_for(client.flush(), READ_S)
            await asyncio.wait(futures.values(), timeout=READ_S)
        return new_leader

    new_leader = run(scenario())

    assert new_leader != old_leader
    failed = {v: f.exception() for v, f in futures.items() if f.exception() is not None}
    assert not failed, f"{len(failed)} records failed, e.g. {next(iter(failed.items()))}"
    acked = {value: future.result().offset for value, future in futures.items()}
    high_watermark = cluster.describe_partition(topic, partition).high_watermark
    read = run(read_back(cluster, topic, range(partition, partition + 1), high_watermark))
    check_acknowledged(acked, {r.offset: r.value for r in read})


# -- 6. errors ---------------------------------------------------------------------------------


def test_unknown_topic_without_auto_creation_fails_the_send(
    strict_cluster: Cluster, topic: str
) -> None:
    async def scenario() -> None:
        # The broker answers Metadata with UNKNOWN_TOPIC_OR_PARTITION, and creates nothing ...
        admin = AIOKafkaAdminClient(bootstrap_servers=strict_cluster.bootstrap_servers)
        await admin.start()
        try:
            described = await admin.describe_topics([topic])
            assert [(t["topic"], t["error_code"]) for t in described] == [
                (topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value)
            ]
            # ... so aiokafka's send waits for the topic's metadata for request_timeout_ms
            # (40 s by default, 1 s here) and raises its UnknownTopicOrPartitionError
            async with producer(strict_cluster, request_timeout_ms=1000) as client:
                started = time.monotonic()
                with pytest.raises(aiokafka.errors.UnknownTopicOrPartitionError):
                    await client.send_and_wait(topic, value=b"nowhere")
                assert time.monotonic() - started < READ_S
            assert topic not in await admin.list_topics()
        finally:
            await admin.close()

    run(scenario())


def test_record_over_max_message_bytes_fails_with_message_size_too_large(
    strict_cluster: Cluster, topic: str
) -> None:
    strict_cluster.create_topic(topic, config={"max.message.bytes": "1024"})
    too_large = b"x" * 2048  # far below the client's own max_request_size (1 MiB)
    assert produce_error_in_process(strict_cluster, topic, too_large) is (
        ErrorCode.MESSAGE_TOO_LARGE
    )

    async def scenario() -> None:
        async with producer(strict_cluster) as client:
            with pytest.raises(aiokafka.errors.MessageSizeTooLargeError) as raised:
                await client.send_and_wait(topic, value=too_large)
            assert raised.value.errno == ErrorCode.MESSAGE_TOO_LARGE.value
            # nothing of the refused batch was stored: the next record is the first
            assert (await client.send_and_wait(topic, value=b"small")).offset == 0

    run(scenario())


# -- 7. ApiVersions ----------------------------------------------------------------------------


def test_api_versions_negotiation_picks_versions_we_serve(
    cluster: Cluster, topic: str, events: EventLog
) -> None:
    cluster.create_topic(topic)
    tp = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with producer(cluster) as client:
            brokers = {b.nodeId: (b.host, b.port) for b in client.client.cluster.brokers()}
            await client.send_and_wait(topic, value=b"negotiated")
        assert set(brokers) == set(cluster.broker_ids)
        async with consumer(cluster) as reader:
            await assign(reader, [tp])
            assert (await reader.offsets_for_times({tp: 0}))[tp].offset == 0
            await reader.seek_to_beginning(tp)
            assert (await poll_until(reader, 1))[0].value == b"negotiated"

    run(scenario())

    sent = check_negotiated(events)
    used = {ApiKey(api) for api, _ in sent}
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA} <= used
