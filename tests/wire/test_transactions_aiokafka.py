"""aiokafka transactional producers (`AIOKafkaProducer(transactional_id=...)`, which speaks the
transaction APIs at v0) against kafkactor's transaction coordinator: commit and abort seen by
read_committed and read_uncommitted consumers, a fenced zombie, offsets committed inside a
consume-transform-produce transaction, a transaction the broker aborts past its timeout, and
compressed batches inside transactions.

Clients run with aiokafka's defaults but the transactional id; each test is a coroutine run
with `asyncio.run` inside a plain test, the cluster on threads of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import aiokafka.codec
import aiokafka.errors
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from kafkactor.storage import CompressionType
from kafkactor.testing import Cluster
from tests.wire.support import CODECS, READ_S, stored_codecs
from tests.wire.transactions import TXN_TIMEOUT_MS

pytestmark = pytest.mark.timeout(120)

TXN_S = 30.0
HAS_CODEC = {
    "gzip": aiokafka.codec.has_gzip(),
    "snappy": aiokafka.codec.has_snappy(),
    "lz4": aiokafka.codec.has_lz4(),
    "zstd": aiokafka.codec.has_zstd(),
}
T = TypeVar("T")


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(scenario, TXN_S * 2))


@pytest.fixture(scope="module")
def cluster(txn_cluster: Cluster) -> Cluster:
    """The package's transactions cluster (tests/wire/conftest.py), shared with the other
    client modules."""
    return txn_cluster


@pytest.fixture
def topic(topic: str) -> str:
    """This module's topic (and so transactional id and group) apart from the other client
    modules' on the shared cluster."""
    return "aiokafka-" + topic


async def started(stack: AsyncExitStack, client: Any) -> Any:
    await client.start()
    stack.push_async_callback(client.stop)
    return client


async def transactional(
    stack: AsyncExitStack, cluster: Cluster, transactional_id: str, **settings: Any
) -> Any:
    """A started transactional producer (start() initializes its transactions)."""
    client = AIOKafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, transactional_id=transactional_id, **settings
    )
    return await started(stack, client)


async def read_all(cluster: Cluster, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of `isolation` reads from each partition's start to its end
    (the high watermark, or the last stable offset for read_committed)."""
    async with AsyncExitStack() as stack:
        client = await started(
            stack,
            AIOKafkaConsumer(
                bootstrap_servers=cluster.bootstrap_servers, isolation_level=isolation
            ),
        )
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        client.assign(assigned)
        await client.seek_to_beginning(*assigned)
        ends = await client.end_offsets(assigned)
        values: list[bytes] = []
        deadline = time.monotonic() + READ_S
        while not all([await client.position(tp) >= ends[tp] for tp in assigned]):
            assert time.monotonic() < deadline, f"reading {topic} to its end ({isolation})"
            for records in (await client.getmany(timeout_ms=100)).values():
                values.extend(bytes(r.value) for r in records)
        return values


async def last_stable_offset(cluster: Cluster, partition: TopicPartition) -> int:
    async with AsyncExitStack() as stack:
        client = await started(
            stack,
            AIOKafkaConsumer(
                bootstrap_servers=cluster.bootstrap_servers, isolation_level="read_committed"
            ),
        )
        ends: dict[TopicPartition, int] = await client.end_offsets([partition])
        return ends[partition]


def test_commit_is_read_committed_and_abort_only_read_uncommitted(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, 2, 3)

    async def scenario() -> None:
        async with AsyncExitStack() as stack:
            client = await transactional(stack, cluster, f"txn-{topic}")
            async with client.transaction():
                for i in range(6):
                    await client.send(topic, f"committed-{i}".encode(), partition=i % 2)
            await client.begin_transaction()
            sent = [
                await client.send(topic, f"aborted-{i}".encode(), partition=i % 2) for i in range(6)
            ]
            await asyncio.gather(*sent)  # in the log, then aborted
            await client.abort_transaction()
        committed = {f"committed-{i}".encode() for i in range(6)}
        aborted = {f"aborted-{i}".encode() for i in range(6)}
        assert sorted(await read_all(cluster, topic, 2, "read_committed")) == sorted(committed)
        assert sorted(await read_all(cluster, topic, 2, "read_uncommitted")) == sorted(
            committed | aborted
        )

    run(scenario())


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3)

    async def scenario() -> None:
        async with AsyncExitStack() as stack:
            zombie = await transactional(stack, cluster, f"txn-{topic}")
            await zombie.begin_transaction()
            await zombie.send_and_wait(topic, b"zombie", partition=0)
            successor = await transactional(stack, cluster, f"txn-{topic}")
            with pytest.raises(aiokafka.errors.ProducerFenced):
                await zombie.commit_transaction()
            async with successor.transaction():
                await successor.send(topic, b"successor", partition=0)
        assert await read_all(cluster, topic, 1, "read_committed") == [b"successor"]
        assert await read_all(cluster, topic, 1, "read_uncommitted") == [b"zombie", b"successor"]

    run(scenario())


def test_consume_transform_produce_commits_the_offsets_with_the_output(
    cluster: Cluster, topic: str
) -> None:
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    cluster.create_topic(source, 1, 3)
    cluster.create_topic(sink, 1, 3)

    async def scenario() -> None:
        async with AsyncExitStack() as stack:
            plain = await started(
                stack, AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
            )
            for i in range(10):
                await plain.send_and_wait(source, f"record-{i}".encode(), partition=0)
            consumer = await started(
                stack,
                AIOKafkaConsumer(
                    source,
                    bootstrap_servers=cluster.bootstrap_servers,
                    group_id=group,
                    auto_offset_reset="earliest",
                    enable_auto_commit=False,
                    isolation_level="read_committed",
                ),
            )
            client = await transactional(stack, cluster, f"txn-{topic}")
            done = 0
            deadline = time.monotonic() + TXN_S
            while done < 10:
                assert time.monotonic() < deadline, f"{done} of 10 records transformed"
                batches = await consumer.getmany(timeout_ms=200, max_records=5)
                records = [r for batch in batches.values() for r in batch]
                if not records:
                    continue
                async with client.transaction():
                    for record in records:
                        await client.send(sink, bytes(record.value).upper(), partition=0)
                    offsets = {tp: await consumer.position(tp) for tp in consumer.assignment()}
                    await client.send_offsets_to_transaction(offsets, group)
                done += len(records)
        assert await read_all(cluster, sink, 1, "read_committed") == [
            f"RECORD-{i}".encode() for i in range(10)
        ]
        async with AsyncExitStack() as stack:
            restarted = await started(
                stack,
                AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group),
            )
            assert await restarted.committed(TopicPartition(source, 0)) == 10

    run(scenario())


def test_the_broker_aborts_a_transaction_past_its_timeout(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, 1, 3)
    partition = TopicPartition(topic, 0)

    async def scenario() -> None:
        async with AsyncExitStack() as stack:
            client = await transactional(
                stack, cluster, f"txn-{topic}", transaction_timeout_ms=TXN_TIMEOUT_MS
            )
            await client.begin_transaction()
            await client.send_and_wait(topic, b"too-slow", partition=0)
            # the abort marker follows the record: the last stable offset moves past both
            deadline = time.monotonic() + TXN_S
            while await last_stable_offset(cluster, partition) != 2:
                assert time.monotonic() < deadline, "the broker did not abort the transaction"
            with pytest.raises(aiokafka.errors.ProducerFenced):
                await client.commit_transaction()
        assert await read_all(cluster, topic, 1, "read_committed") == []
        assert await read_all(cluster, topic, 1, "read_uncommitted") == [b"too-slow"]

    run(scenario())


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compressed_batches_inside_transactions(cluster: Cluster, topic: str, codec: str) -> None:
    if not HAS_CODEC[codec]:
        pytest.skip(f"aiokafka has no {codec} codec here")
    cluster.create_topic(topic, 1, 3)

    async def scenario() -> None:
        async with AsyncExitStack() as stack:
            client = await transactional(stack, cluster, f"txn-{topic}", compression_type=codec)
            async with client.transaction():
                for i in range(50):
                    await client.send(topic, f"kept-{i:02d}-".encode() * 20, partition=0)
            await client.begin_transaction()
            sent = [
                await client.send(topic, f"dropped-{i:02d}-".encode() * 20, partition=0)
                for i in range(50)
            ]
            await asyncio.gather(*sent)
            await client.abort_transaction()
        assert await read_all(cluster, topic, 1, "read_committed") == [
            f"kept-{i:02d}-".encode() * 20 for i in range(50)
        ]
        assert len(await read_all(cluster, topic, 1, "read_uncommitted")) == 100

    run(scenario())
    assert CODECS[codec] in stored_codecs(cluster, topic, 0) - {CompressionType.NONE}
