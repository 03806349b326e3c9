"""confluent-kafka (librdkafka) consumer groups against kafkactor's group coordinator.

Members are `Consumer({"bootstrap.servers": ..., "group.id": ...})` with librdkafka's defaults
(range and roundrobin assignors, auto-commit every 5 s and on close, a 45 s session,
heartbeats every 3 s) but one: `auto.offset.reset=earliest`. librdkafka resolves a new
partition's "latest" position in the background some time after the assignment and tells the
application nothing (position() stays -1001 until a record is consumed), so a record written
meanwhile would be skipped; with "earliest" every record of a topic created empty is read
whenever that happens. Committed offsets come first either way.

The members are polled in turn from the test's thread (librdkafka joins, heartbeats and
fetches on threads of its own; rebalance callbacks run inside poll).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

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
from tests.wire.support import READ_S, wait_until


class Member:
    """A subscribed Consumer, what it holds (kept by its rebalance callbacks) and what it read."""

    def __init__(self, name: str, cluster: Cluster, group: str, topic: str) -> None:
        self.name = name
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",  # see the module's docstring
            }
        )
        self.assigned: frozenset[int] = frozenset()
        self.held: set[int] = set()
        self.read: list[Placed] = []
        self.closed = False
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = frozenset(tp.partition for tp in partitions)
        self.held |= self.assigned

    def _revoke(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned = frozenset()

    def poll(self) -> None:
        """One poll: a record, an event, or nothing after 0.1 s."""
        message: Message | None = self.consumer.poll(0.1)
        if message is None:
            return
        error = message.error()
        assert error is None, f"{self.name}: {error}"
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        self.read.append(Placed(partition, offset, message.value()))

    def close(self) -> None:
        """Leave the group (auto-commit first: librdkafka commits what was read)."""
        if not self.closed:
            self.closed = True
            self.consumer.close()


@contextmanager
def members(cluster: Cluster, group: str, topic: str, count: int) -> Iterator[list[Member]]:
    with ExitStack() as stack:
        started = []
        for i in range(count):
            member = Member(f"member-{i}", cluster, group, topic)
            stack.callback(member.close)
            started.append(member)
        yield started


def pump(group: list[Member], until: Callable[[], bool], what: str) -> None:
    """Poll the open members in turn until `until()` holds (or fail at the deadline)."""

    def done() -> bool:
        for m in group:
            if not m.closed:
                m.poll()
        return until()

    wait_until(done, JOIN_S, what)


def read_count(group: list[Member]) -> int:
    return sum(len(m.read) for m in group)


def produce(
    cluster: Cluster, topic: str, partitions: int, per_partition: int, tag: str
) -> list[Placed]:
    """`per_partition` records to each partition through a Producer (librdkafka's defaults:
    acks=all); where each landed, from the delivery reports."""
    placed: list[Placed] = []
    failed: list[Any] = []

    def report(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(error)
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None
        placed.append(Placed(partition, offset, message.value()))

    client = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(per_partition):
        for p in range(partitions):
            client.produce(topic, value=f"{tag}-p{p}-{i}".encode(), partition=p, on_delivery=report)
    assert client.flush(READ_S) == 0, "records still undelivered"
    assert not failed, failed
    return placed


# -- a group of two splits a topic; one leaves; the other takes over ---------------------------


@pytest.mark.timeout(60)
def test_two_members_split_a_topic_and_the_survivor_takes_over_when_one_leaves(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    with members(cluster, group_of(topic), topic, 2) as group:
        stays, leaves = group
        pump(group, lambda: is_split([m.assigned for m in group], 6), "two members splitting 6")
        split = {m.name: m.assigned for m in group}
        before = produce(cluster, topic, 6, 10, "before")
        pump(group, lambda: read_count(group) >= len(before), "the records read")
        assert {m.name: m.assigned for m in group} == split, "the group rebalanced while reading"
        read_before = {m.name: list(m.read) for m in group}

        leaves.close()  # commits what it read, then LeaveGroup: the group rebalances at once
        pump([stays], lambda: stays.assigned == frozenset(range(6)), "the survivor taking all 6")
        after = produce(cluster, topic, 6, 5, "after")
        pump([stays], lambda: len(stays.read) >= len(read_before[stays.name]) + len(after), "read")

    check_split(split, 6)
    check_read_once(read_before, before, split)
    assert all(read_before.values()), "a member read nothing"
    # the survivor read what was produced after the leave, on every partition, and nothing
    # of what the leaver had read and committed
    check_read_once({"stays": stays.read, "leaves": leaves.read}, before + after)
    assert first_offsets(r for r in stays.read if r.value in {a.value for a in after}) == ends(
        before
    )


# -- committed offsets: a new member resumes after them ----------------------------------------


@pytest.mark.timeout(60)
def test_commit_then_a_new_member_resumes_after_the_committed_offsets(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    group = group_of(topic)
    tps = [TopicPartition(topic, p) for p in range(3)]
    with members(cluster, group, topic, 1) as (first,):
        pump(
            [first], lambda: first.assigned == frozenset(range(3)), "the first member's assignment"
        )
        batch1 = produce(cluster, topic, 3, 5, "one")
        pump([first], lambda: len(first.read) >= len(batch1), "the first batch read")
        committed = first.consumer.commit(asynchronous=False)  # what it read, synchronously
        assert committed is not None
        assert {tp.partition: tp.offset for tp in committed} == ends(batch1)
        stored = first.consumer.committed(tps, timeout=READ_S)
        assert {tp.partition: tp.offset for tp in stored} == ends(batch1)
    batch2 = produce(cluster, topic, 3, 5, "two")  # while no member runs
    with members(cluster, group, topic, 1) as (second,):
        pump([second], lambda: len(second.read) >= len(batch2), "the second batch read")
    check_read_once({"first": first.read}, batch1)
    check_read_once({"second": second.read}, batch2)
    assert first_offsets(second.read) == ends(batch1)
