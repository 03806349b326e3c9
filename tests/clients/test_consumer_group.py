"""Consumer groups through a real in-process cluster: the client's `ConsumerCoordinator` against
the brokers' `GroupCoordinatorActor`s (3 brokers on the embedded ZooKeeper, `__consumer_offsets`
with 3 partitions, a topic of 6).

Nothing sleeps to wait for the system: every wait polls the consumers (or a condition) against
a deadline.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import Directory
from kafkactor.clients import ClientError, CommitFailedError, Consumer, ConsumerError
from kafkactor.clients.assignors import assign
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.testing import Cluster
from tests.replication.support import FAST

TOPIC = "orders"
PARTITIONS = 6
ALL = [TopicPartition(topic=TOPIC, partition=p) for p in range(PARTITIONS)]
WAIT_S = 10.0
ZK_SESSION_MS = 600  # a killed broker's ZooKeeper session (and leaderships) go this fast
SESSION_MS = 1_000  # the consumers' session timeout when a test waits for one to expire
CONFIG = BrokerConfig(
    replica=FAST.replica,
    group=GroupConfig(
        offsets_topic_partitions=3, initial_rebalance_delay_ms=0, min_session_timeout_ms=500
    ),
)
GROUP_PARTITION = partition_for("g", CONFIG.group.offsets_topic_partitions)
# fast heartbeats and short long-polls; a rebalance that waits on a silent member fails a test
# (20 s) rather than hanging it (Kafka's 300 s)
FAST_MEMBER: dict[str, Any] = {
    "heartbeat_interval_ms": 100,
    "max_wait_ms": 100,
    "max_poll_interval_ms": 20_000,
    "request_timeout_ms": 5_000,
}

Read = tuple[int, int]  # (partition, offset)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(3, config=CONFIG, session_timeout_ms=ZK_SESSION_MS) as started:
        started.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        yield started


def member(cluster: Cluster, group: str = "g", **options: Any) -> Consumer:
    consumer = cluster.consumer(group_id=group, **{**FAST_MEMBER, **options})
    consumer.subscribe([TOPIC])
    return consumer


def produce(cluster: Cluster, count: int, start: int = 0) -> set[Read]:
    """`count` records spread over the partitions; where they landed."""
    producer = cluster.producer(acks=-1, retries=50, retry_backoff_ms=100)
    sent = [
        producer.send(TOPIC, f"v{i}".encode(), partition=i % PARTITIONS)
        for i in range(start, start + count)
    ]
    return {(r.partition, r.offset) for r in (f.result(WAIT_S) for f in sent)}


class Reader:
    """Polls consumers in turn, keeping what each read, until a condition holds."""

    def __init__(self, *consumers: Consumer) -> None:
        self.consumers = list(consumers)
        self.read: dict[Consumer, list[Read]] = {c: [] for c in consumers}

    def add(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.read[consumer] = []

    def poll_until(
        self, condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() >= deadline:
                raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
            for consumer in self.consumers:
                self.read[consumer].extend((r.partition, r.offset) for r in consumer.poll(50))

    def everything(self) -> list[Read]:
        return [read for reads in self.read.values() for read in reads]

    def distinct(self) -> set[Read]:
        return set(self.everything())


def owns(consumer: Consumer, partitions: Sequence[TopicPartition]) -> Callable[[], bool]:
    return lambda: consumer.assignment() == sorted(partitions)


def stable_split(*consumers: Consumer) -> Callable[[], bool]:
    """Every consumer holds partitions of one generation, together all of them."""

    def split() -> bool:
        coordinators = [c.coordinator for c in consumers]
        generations = {c.generation_id for c in coordinators if c is not None}
        owned = [tp for c in consumers for tp in c.assignment()]
        return (
            len(generations) == 1
            and all(c.assignment() for c in consumers)
            and (sorted(owned) == ALL)
        )

    return split


def positions(consumer: Consumer) -> dict[TopicPartition, int]:
    return {tp: consumer.position(tp) for tp in consumer.assignment()}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_two_members_split_the_partitions_and_read_every_record_once(
    cluster: Cluster, strategy: str
) -> None:
    produced = produce(cluster, 60)
    first = member(cluster, partition_assignment_strategy=(strategy,))
    reader = Reader(first)
    reader.poll_until(owns(first, ALL), "the first member to own every partition")
    reader.poll_until(lambda: len(reader.everything()) >= 20, "some records read alone")

    second = member(cluster, partition_assignment_strategy=(strategy,))
    reader.add(second)
    reader.poll_until(stable_split(first, second), "a rebalance that splits the partitions")
    produced |= produce(cluster, 60, start=60)
    reader.poll_until(lambda: reader.distinct() >= produced, "every record")

    members = {c.coordinator.member_id: c for c in (first, second) if c.coordinator}
    expected = assign(strategy, {m: [TOPIC] for m in members}, {TOPIC: PARTITIONS})
    for member_id, consumer in members.items():
        owned = [TopicPartition(topic=TOPIC, partition=p) for p in expected[member_id][TOPIC]]
        assert consumer.assignment() == owned
    assert not set(first.assignment()) & set(second.assignment())
    duplicates = [read for read, n in Counter(reader.everything()).items() if n > 1]
    assert duplicates == []  # the rebalance committed the first member's positions
    assert reader.distinct() == produced


@pytest.mark.timeout(60)
def test_a_member_that_closes_hands_its_partitions_over_at_once_with_its_offsets(
    cluster: Cluster,
) -> None:
    produced = produce(cluster, 60)
    leaving, staying = member(cluster), member(cluster)
    reader = Reader(leaving, staying)
    reader.poll_until(stable_split(leaving, staying), "two members")
    reader.poll_until(lambda: reader.distinct() == produced, "every record")
    handed_over = positions(leaving)

    started = time.monotonic()
    leaving.close()  # auto-commit, then LeaveGroup
    reader.consumers.remove(leaving)
    reader.poll_until(owns(staying, ALL), "the other member to own every partition")
    assert time.monotonic() - started < 5  # LeaveGroup, not the 10 s session timeout
    for tp, offset in handed_over.items():
        assert staying.position(tp) == offset  # from the offsets committed on close
        assert staying.committed(tp) == offset
    produced |= produce(cluster, 12, start=60)
    reader.poll_until(lambda: reader.distinct() >= produced, "the new records")
    assert sorted(reader.everything()) == sorted(produced)  # nothing read twice


@pytest.mark.timeout(60)
def test_a_member_that_stops_heartbeating_loses_its_partitions_after_its_session(
    cluster: Cluster,
) -> None:
    silent = member(cluster, session_timeout_ms=SESSION_MS)
    survivor = member(cluster, session_timeout_ms=SESSION_MS)
    reader = Reader(silent, survivor)
    reader.poll_until(stable_split(silent, survivor), "two members")

    assert silent.coordinator is not None
    silent.coordinator.stop_heartbeats()  # a crash: no LeaveGroup, no more polls
    stopped = time.monotonic()
    reader.consumers.remove(silent)
    reader.poll_until(owns(survivor, ALL), "the survivor to own every partition")
    took = time.monotonic() - stopped
    # the coordinator waited for the session (its last heartbeat was < 0.1 s before the stop)
    assert SESSION_MS / 1000 - 0.2 <= took < SESSION_MS / 1000 + 4


@pytest.mark.timeout(60)
def test_a_member_kicked_out_of_the_group_cannot_commit(cluster: Cluster) -> None:
    produced = produce(cluster, 30)
    kicked = member(cluster, session_timeout_ms=SESSION_MS, enable_auto_commit=False)
    survivor = member(cluster, session_timeout_ms=SESSION_MS, enable_auto_commit=False)
    reader = Reader(kicked, survivor)
    reader.poll_until(stable_split(kicked, survivor), "two members")
    reader.poll_until(lambda: reader.distinct() == produced, "every record")
    assert kicked.coordinator is not None
    stale_generation = kicked.coordinator.generation_id
    kicked.coordinator.stop_heartbeats()
    reader.consumers.remove(kicked)
    reader.poll_until(owns(survivor, ALL), "the survivor to own every partition")
    assert survivor.coordinator is not None
    assert survivor.coordinator.generation_id > stale_generation

    with pytest.raises(CommitFailedError) as refused:
        kicked.commit()
    assert refused.value.error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert all(survivor.committed(tp) is None for tp in ALL)  # nothing was committed
    assert kicked.coordinator.generation_id == -1  # it rejoins as a new member next poll


@pytest.mark.timeout(60)
def test_a_new_member_resumes_from_the_committed_offsets(cluster: Cluster) -> None:
    produced = produce(cluster, 60)
    # one batch (here: one record) per partition and fetch, so it reads a few at a time
    first = member(cluster, enable_auto_commit=False, max_partition_fetch_bytes=1)
    assert all(first.committed(tp) is None for tp in ALL)
    reader = Reader(first)
    reader.poll_until(lambda: len(reader.everything()) >= 25, "some of the records")
    first.commit()
    committed = positions(first)
    assert 0 < sum(committed.values()) < 60
    assert {tp: first.committed(tp) for tp in ALL} == committed
    first.close()  # no auto-commit: what it read after the commit is not committed

    second = member(cluster, enable_auto_commit=False)
    rest = Reader(second)
    unread = produced - {(p, o) for p, o in reader.everything() if o < committed[ALL[p]]}
    rest.poll_until(lambda: rest.distinct() >= unread, "the records after the commit")
    assert sorted(rest.everything()) == sorted(unread)  # nothing skipped, nothing read twice
    assert {tp: second.position(tp) for tp in ALL} == {tp: 10 for tp in ALL}

    second.commit({ALL[0]: 3})  # explicit offsets
    assert second.committed(ALL[0]) == 3
    assert second.committed((TOPIC, 1)) == committed[ALL[1]]


@pytest.mark.timeout(60)
def test_auto_commit_commits_every_interval_and_on_close(cluster: Cluster) -> None:
    produced = produce(cluster, 30)
    periodic = member(cluster, auto_commit_interval_ms=200)
    reader = Reader(periodic)
    reader.poll_until(lambda: reader.distinct() == produced, "every record")
    reader.poll_until(
        lambda: all(periodic.committed(tp) == 5 for tp in ALL), "an auto-commit from poll"
    )
    produced |= produce(cluster, 12, start=30)
    reader.poll_until(
        lambda: all(periodic.committed(tp) == 7 for tp in ALL), "the next auto-commit"
    )
    assert reader.distinct() == produced
    periodic.close()

    on_close = member(cluster, group="on-close", auto_commit_interval_ms=60_000)
    reader = Reader(on_close)
    reader.poll_until(lambda: reader.distinct() == produced, "every record")
    assert on_close.committed(ALL[0]) is None  # the interval has not passed
    on_close.close()
    checker = cluster.consumer(group_id="on-close")
    assert {tp: checker.committed(tp) for tp in ALL} == {tp: 7 for tp in ALL}


@pytest.mark.timeout(60)
def test_a_partition_without_a_committed_offset_starts_by_auto_offset_reset(
    cluster: Cluster,
) -> None:
    produce(cluster, 12)
    latest = member(cluster, group="latest", auto_offset_reset="latest")
    reader = Reader(latest)
    reader.poll_until(owns(latest, ALL), "the partitions")
    assert {tp: latest.position(tp) for tp in ALL} == {tp: 2 for tp in ALL}
    later = produce(cluster, 6, start=12)
    reader.poll_until(lambda: reader.distinct() == later, "only the later records")

    strict = member(cluster, group="strict", auto_offset_reset="none")
    deadline = time.monotonic() + WAIT_S
    with pytest.raises(ConsumerError) as raised:
        while time.monotonic() < deadline:
            strict.poll(50)
    assert raised.value.error_code is ErrorCode.OFFSET_OUT_OF_RANGE


@pytest.mark.timeout(60)
def test_the_group_survives_the_death_of_its_coordinators_broker(cluster: Cluster) -> None:
    produced = produce(cluster, 30)
    survivor = member(cluster, enable_auto_commit=False)
    reader = Reader(survivor)
    reader.poll_until(lambda: reader.distinct() == produced, "every record")
    survivor.commit()
    assert survivor.coordinator is not None
    generation = survivor.coordinator.generation_id
    dead = survivor.coordinator.coordinator_id
    assert dead is not None and cluster.leader(OFFSETS_TOPIC, GROUP_PARTITION) == dead

    cluster.kill_broker(dead)
    produced |= produce(cluster, 30, start=30)
    reader.poll_until(lambda: reader.distinct() >= produced, "the records after the kill")
    assert sorted(reader.everything()) == sorted(produced)  # nothing skipped, nothing twice
    reader.poll_until(
        lambda: (
            survivor.coordinator is not None
            and survivor.coordinator.coordinator_id not in (None, dead)
        ),
        "the new coordinator",
    )
    survivor.commit()  # to the new coordinator, which loaded the group from its replica
    assert survivor.coordinator.generation_id == generation  # the membership carried over
    assert {tp: survivor.committed(tp) for tp in ALL} == {tp: 10 for tp in ALL}


def test_subscribe_needs_a_group_and_excludes_assign() -> None:
    directory = Directory()
    alone = Consumer(directory, list)
    with pytest.raises(ValueError, match="group_id"):
        alone.subscribe([TOPIC])
    with pytest.raises(ValueError, match="group_id"):
        alone.commit()
    alone.close()

    assigned = Consumer(directory, list, group_id="g", enable_auto_commit=False)
    assigned.assign([ALL[0]])
    with pytest.raises(ValueError, match="mutually exclusive"):
        assigned.subscribe([TOPIC])
    assigned.assign([])
    assigned.subscribe([TOPIC])  # allowed once the manual assignment is gone
    with pytest.raises(ValueError, match="mutually exclusive"):
        assigned.assign([ALL[0]])
    assigned.unsubscribe()
    assigned.assign([ALL[0]])
    assert assigned.assignment() == [ALL[0]]
    assigned.close()


@pytest.mark.timeout(60)
def test_a_member_not_polled_for_max_poll_interval_leaves_and_rejoins_on_its_next_poll(
    cluster: Cluster,
) -> None:
    slow = member(cluster, max_poll_interval_ms=1_000)
    other = member(cluster)
    reader = Reader(slow, other)
    reader.poll_until(stable_split(slow, other), "two members")

    reader.consumers.remove(slow)  # its heartbeat thread leaves the group after 1 s
    started = time.monotonic()
    reader.poll_until(owns(other, ALL), "the other member to own every partition")
    assert time.monotonic() - started < 5  # well before its 10 s session would end
    assert slow.coordinator is not None and slow.coordinator.generation_id == -1

    reader.add(slow)
    reader.poll_until(stable_split(slow, other), "the slow member back in the group")


def test_a_join_the_coordinator_refuses_is_raised_by_poll(cluster: Cluster) -> None:
    too_short = member(cluster, session_timeout_ms=200, heartbeat_interval_ms=50)
    with pytest.raises(ClientError) as raised:
        too_short.poll(5_000)  # below the brokers' group.min.session.timeout.ms (500 here)
    assert raised.value.error_code is ErrorCode.INVALID_SESSION_TIMEOUT
