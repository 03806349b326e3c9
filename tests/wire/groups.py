"""Helpers of the consumer-group wire tests (`test_groups_*.py`): the cluster they share, the
records they produce and the checks of how a group split and read them.

Every group test produces records whose partition and offset it knows (`Placed`), lets a group
of real consumers read them, and checks that the members' assignments split the topic
(`check_split`) and that every record was read exactly once, by the member that held its
partition (`check_read_once`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.testing import Cluster
from tests.wire.support import READ_S, wait_until

__all__ = [
    "JOIN_S",
    "OFFSETS_PARTITIONS",
    "QUICKSTART",
    "Placed",
    "check_read_once",
    "check_split",
    "coordinator_of",
    "ends",
    "first_offsets",
    "group_of",
    "is_split",
    "produce_in_process",
    "quickstart_cluster",
    "wait_for",
]

T = TypeVar("T")

# A group forms, or forms again after a member left or died, within this. Kafka's timings
# bound it: group.initial.rebalance.delay.ms (3 s, and 3 s more while members arrive), a
# heartbeat interval (3 s by every client's default) for members to learn of a rebalance.
JOIN_S = 30.0
LISTEN = "127.0.0.1"  # as conftest's clusters
OFFSETS_PARTITIONS = GroupConfig().offsets_topic_partitions  # offsets.topic.num.partitions, 50

# Kafka's quickstart broker settings (the config/server.properties Kafka ships, since 0.11,
# sets group.initial.rebalance.delay.ms=0 "for a better out-of-the-box experience for
# development and testing"): a new group's first rebalance does not wait 3 s for more
# members. Every other setting is Kafka's default. The group tests run on it to stay quick;
# test_groups_kafka_python's split of three runs on conftest's `cluster` and its coordinator
# failover on conftest's `failover_cluster`, both with the 3 s delay.
QUICKSTART = BrokerConfig(group=GroupConfig(initial_rebalance_delay_ms=0))


@contextmanager
def quickstart_cluster() -> Iterator[Cluster]:
    """Three brokers listening on loopback, with Kafka's quickstart group settings."""
    with Cluster(3, listen=LISTEN, config=QUICKSTART) as started:
        yield started


def group_of(topic: str) -> str:
    """A group id as unique as the test's topic."""
    return f"group-{topic}"


@dataclass(frozen=True, order=True, slots=True)
class Placed:
    """A record where it landed (or where a consumer read it)."""

    partition: int
    offset: int
    value: bytes | None


def produce_in_process(
    cluster: Cluster, topic: str, partitions: int, per_partition: int, tag: str
) -> list[Placed]:
    """`per_partition` records to each partition, through kafkactor's own producer (acks=all),
    as one batch per partition; their values name the tag, partition and index."""
    producer = cluster.producer(acks=-1)
    try:
        placed: list[Placed] = []
        for p in range(partitions):
            values = [f"{tag}-p{p}-{i}".encode() for i in range(per_partition)]
            acks = producer.send_batch(topic, values, partition=p).result(READ_S)
            placed.extend(Placed(p, a.offset, v) for a, v in zip(acks, values, strict=True))
        return placed
    finally:
        producer.close()


def ends(placed: Iterable[Placed]) -> dict[int, int]:
    """Each partition's offset after the last of these records: where a consumer that read
    them all resumes."""
    out: dict[int, int] = {}
    for r in placed:
        out[r.partition] = max(out.get(r.partition, 0), r.offset + 1)
    return out


def first_offsets(read: Iterable[Placed]) -> dict[int, int]:
    """The first offset read in each partition: where a consumer started (or resumed)."""
    out: dict[int, int] = {}
    for r in read:
        out[r.partition] = min(out.get(r.partition, r.offset), r.offset)
    return out


def coordinator_of(cluster: Cluster, group: str, *, not_broker: int | None = None) -> int:
    """The group's coordinator as the cluster sees it: the leader of its `__consumer_offsets`
    partition (Kafka's `abs(hashCode(group)) % offsets.topic.num.partitions`); with
    `not_broker`, once a broker other than that one leads it."""
    partition = partition_for(group, OFFSETS_PARTITIONS)
    return cluster.wait_for_leader(OFFSETS_TOPIC, partition, not_broker=not_broker)


def wait_for(condition: Callable[[], T | None], timeout_s: float, message: str) -> T:
    """`wait_until` for a condition that answers None until it holds, then its value."""
    found = wait_until(condition, timeout_s, message)
    assert found is not None
    return found


# -- checks ------------------------------------------------------------------------------------


def is_split(assignments: Iterable[Collection[int]], partitions: int) -> bool:
    """Every member holds a partition, no partition is held twice, and all are held."""
    held = [set(a) for a in assignments]
    union: set[int] = set().union(*held)
    return all(held) and sum(len(h) for h in held) == len(union) and union == set(range(partitions))


def check_split(assignments: Mapping[str, Collection[int]], partitions: int) -> None:
    shown = {name: sorted(a) for name, a in assignments.items()}
    assert is_split(assignments.values(), partitions), f"not a split of {partitions}: {shown}"


def check_read_once(
    read_by: Mapping[str, Sequence[Placed]],
    expected: Collection[Placed],
    owned: Mapping[str, Collection[int]] | None = None,
) -> None:
    """The members together read exactly the `expected` records, each once (same partition,
    offset and value); with `owned`, each member only from the partitions it held."""
    everything = [r for records in read_by.values() for r in records]
    twice = [k for k, n in Counter((r.partition, r.offset) for r in everything).items() if n > 1]
    assert not twice, f"read more than once: {sorted(twice)[:10]}"
    missing = sorted(set(expected) - set(everything))
    unexpected = sorted(set(everything) - set(expected))
    assert not missing, f"{len(missing)} records never read, e.g. {missing[:5]}"
    assert not unexpected, (
        f"{len(unexpected)} records read that were not expected: {unexpected[:5]}"
    )
    if owned is not None:
        for name, records in read_by.items():
            outside = {r.partition for r in records} - set(owned[name])
            assert not outside, f"{name} read partitions {sorted(outside)} it did not hold"
