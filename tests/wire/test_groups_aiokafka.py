"""aiokafka consumer groups against kafkactor's group coordinator, over the wire.

Members are `AIOKafkaConsumer(topic, group_id=...)` with aiokafka's defaults (the roundrobin
assignor, auto-commit every 5 s and on stop, auto_offset_reset="latest", a 10 s session,
heartbeats every 3 s): aiokafka joins, heartbeats and commits in background tasks, and
`position()` waits for a partition's position, so the tests produce once every member's
position is known. Each scenario is a coroutine run with `asyncio.run`, bounded as a whole by
`asyncio.wait_for`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, TypeVar

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from kafkactor.testing import Cluster
from tests.wire.groups import (
    JOIN_S,
    Placed,
    check_read_once,
    check_split,
    ends,
    first_offsets,
    group_of,
    is_split,
)
from tests.wire.support import READ_S

T = TypeVar("T")
SCENARIO_S = 45.0  # no scenario may take longer


def run(scenario: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(scenario, SCENARIO_S))


class Member:
    """A started AIOKafkaConsumer in a group, and what it read."""

    def __init__(self, name: str, consumer: Any) -> None:
        self.name = name
        self.consumer = consumer
        self.read: list[Placed] = []

    @property
    def assigned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    async def poll(self) -> None:
        batch = await self.consumer.getmany(timeout_ms=100)
        self.read.extend(
            Placed(r.partition, r.offset, r.value) for rs in batch.values() for r in rs
        )

    async def positions(self) -> dict[int, int]:
        """Each assigned partition's position, once aiokafka knows it (the committed offset,
        or the reset to the log end)."""
        return {
            tp.partition: await asyncio.wait_for(self.consumer.position(tp), READ_S)
            for tp in self.consumer.assignment()
        }


@asynccontextmanager
async def members(
    cluster: Cluster, group: str, topic: str, count: int
) -> AsyncIterator[list[Member]]:
    """`count` started members; stopped afterwards (auto-commit, then LeaveGroup)."""
    async with AsyncExitStack() as stack:
        started = []
        for i in range(count):
            consumer = AIOKafkaConsumer(
                topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group
            )
            await consumer.start()
            stack.push_async_callback(consumer.stop)
            started.append(Member(f"member-{i}", consumer))
        yield started


async def pump(group: list[Member], until: Callable[[], bool], what: str) -> None:
    """getmany on each member in turn until `until()` holds (or fail at the deadline)."""
    deadline = asyncio.get_running_loop().time() + JOIN_S
    while not until():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        for m in group:
            await m.poll()


async def wait_for_split(group: list[Member], partitions: int) -> dict[str, frozenset[int]]:
    """Until the assignments split the topic and every member's positions are known."""
    while True:
        await pump(group, lambda: is_split([m.assigned for m in group], partitions), "a split")
        split = {m.name: m.assigned for m in group}
        for m in group:
            await m.positions()
        if {m.name: m.assigned for m in group} == split:
            return split


async def produce(
    cluster: Cluster, topic: str, partitions: int, per_partition: int, tag: str
) -> list[Placed]:
    """`per_partition` records to each partition through an AIOKafkaProducer (aiokafka's
    defaults: acks=1); where each landed."""
    client = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    await client.start()
    try:
        values = [
            (p, f"{tag}-p{p}-{i}".encode()) for i in range(per_partition) for p in range(partitions)
        ]
        futures = [await client.send(topic, value=v, partition=p) for p, v in values]
        acks = await asyncio.wait_for(asyncio.gather(*futures), READ_S)
        return [Placed(p, m.offset, v) for (p, v), m in zip(values, acks, strict=True)]
    finally:
        await client.stop()


def read_count(group: list[Member]) -> int:
    return sum(len(m.read) for m in group)


# -- a group of two splits a topic -------------------------------------------------------------


@pytest.mark.timeout(60)
def test_two_members_split_a_topic_and_read_every_record_once(quick: Cluster, topic: str) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=6, replication_factor=3)

    async def scenario() -> tuple[dict[str, frozenset[int]], dict[str, list[Placed]], list[Placed]]:
        async with members(cluster, group_of(topic), topic, 2) as group:
            split = await wait_for_split(group, 6)
            sent = await produce(cluster, topic, 6, 10, "split")
            await pump(group, lambda: read_count(group) >= len(sent), "every record read")
            assert {m.name: m.assigned for m in group} == split, "rebalanced while reading"
        return split, {m.name: m.read for m in group}, sent

    split, read_by, sent = run(scenario())

    check_split(split, 6)
    assert all(len(a) == 3 for a in split.values()), split  # the roundrobin assignor: 6 / 2
    check_read_once(read_by, sent, split)


# -- committed offsets: a new member resumes after them ----------------------------------------


@pytest.mark.timeout(60)
def test_commit_then_a_new_member_resumes_after_the_committed_offsets(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    group_id = group_of(topic)
    tps = [TopicPartition(topic, p) for p in range(3)]

    async def scenario() -> None:
        async with members(cluster, group_id, topic, 1) as (first,):
            await wait_for_split([first], 3)
            batch1 = await produce(cluster, topic, 3, 5, "one")
            await pump([first], lambda: len(first.read) >= len(batch1), "the first batch")
            await first.consumer.commit()  # the positions, synchronously
            assert {tp.partition: await first.consumer.committed(tp) for tp in tps} == ends(batch1)
        batch2 = await produce(cluster, topic, 3, 5, "two")  # while no member runs
        async with members(cluster, group_id, topic, 1) as (second,):
            await pump([second], lambda: len(second.read) >= len(batch2), "the second batch")
        check_read_once({"first": first.read}, batch1)
        check_read_once({"second": second.read}, batch2)
        # it started at the committed offsets (with none, it would have started at the end)
        assert first_offsets(second.read) == ends(batch1)

    run(scenario())
