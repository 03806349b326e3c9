"""The group leader's assignors: ports of Kafka's RangeAssignorTest and RoundRobinAssignorTest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkactor.clients.assignors import (
    ASSIGNORS,
    Assignment,
    PartitionAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    assign,
)

RANGE = RangeAssignor()
ROUND_ROBIN = RoundRobinAssignor()
BOTH = pytest.mark.parametrize("assignor", [RANGE, ROUND_ROBIN], ids=["range", "roundrobin"])


def test_protocol_names_are_kafkas() -> None:
    assert RANGE.name == "range"
    assert ROUND_ROBIN.name == "roundrobin"
    assert set(ASSIGNORS) == {"range", "roundrobin"}


def test_assign_by_name_runs_that_assignor() -> None:
    subscriptions = {"c1": ["t1", "t2"], "c2": ["t1", "t2"]}
    partitions = {"t1": 3, "t2": 3}
    assert assign("range", subscriptions, partitions) == RANGE.assign(partitions, subscriptions)
    assert assign("roundrobin", subscriptions, partitions) == ROUND_ROBIN.assign(
        partitions, subscriptions
    )
    with pytest.raises(KeyError):
        assign("cooperative-sticky", subscriptions, partitions)


# Behaviours shared by both assignors.


@BOTH
def test_one_consumer_no_topic(assignor: PartitionAssignor) -> None:
    assert assignor.assign({}, {"c": []}) == {"c": {}}


@BOTH
def test_one_consumer_nonexistent_topic(assignor: PartitionAssignor) -> None:
    assert assignor.assign({}, {"c": ["topic"]}) == {"c": {}}


@BOTH
def test_topic_with_no_partitions(assignor: PartitionAssignor) -> None:
    assert assignor.assign({"topic": 0}, {"c1": ["topic"], "c2": ["topic"]}) == {"c1": {}, "c2": {}}


@BOTH
def test_one_consumer_one_topic(assignor: PartitionAssignor) -> None:
    assert assignor.assign({"topic": 3}, {"c": ["topic"]}) == {"c": {"topic": [0, 1, 2]}}


@BOTH
def test_only_assigns_partitions_from_subscribed_topics(assignor: PartitionAssignor) -> None:
    result = assignor.assign({"topic": 3, "other": 3}, {"c": ["topic"]})
    assert result == {"c": {"topic": [0, 1, 2]}}


@BOTH
def test_one_consumer_multiple_topics(assignor: PartitionAssignor) -> None:
    result = assignor.assign({"topic1": 1, "topic2": 2}, {"c": ["topic1", "topic2"]})
    assert result == {"c": {"topic1": [0], "topic2": [0, 1]}}


@BOTH
def test_two_consumers_one_topic_one_partition(assignor: PartitionAssignor) -> None:
    result = assignor.assign({"topic": 1}, {"consumer1": ["topic"], "consumer2": ["topic"]})
    assert result == {"consumer1": {"topic": [0]}, "consumer2": {}}


@BOTH
def test_two_consumers_one_topic_two_partitions(assignor: PartitionAssignor) -> None:
    result = assignor.assign({"topic": 2}, {"consumer1": ["topic"], "consumer2": ["topic"]})
    assert result == {"consumer1": {"topic": [0]}, "consumer2": {"topic": [1]}}


@BOTH
def test_multiple_consumers_mixed_topics(assignor: PartitionAssignor) -> None:
    subscriptions = {
        "consumer1": ["topic1"],
        "consumer2": ["topic1", "topic2"],
        "consumer3": ["topic1"],
    }
    result = assignor.assign({"topic1": 3, "topic2": 2}, subscriptions)
    assert result == {
        "consumer1": {"topic1": [0]},
        "consumer2": {"topic1": [1], "topic2": [0, 1]},
        "consumer3": {"topic1": [2]},
    }


@BOTH
def test_members_are_ordered_by_member_id_not_insertion(assignor: PartitionAssignor) -> None:
    subscriptions = {"consumer2": ["topic"], "consumer1": ["topic"]}
    result = assignor.assign({"topic": 2}, subscriptions)
    assert result == {"consumer1": {"topic": [0]}, "consumer2": {"topic": [1]}}


# Where the two differ.


def test_range_two_consumers_two_topics_six_partitions() -> None:
    subscriptions = {"consumer1": ["topic1", "topic2"], "consumer2": ["topic1", "topic2"]}
    result = RANGE.assign({"topic1": 3, "topic2": 3}, subscriptions)
    # The first member in order takes the extra partition of every topic.
    assert result == {
        "consumer1": {"topic1": [0, 1], "topic2": [0, 1]},
        "consumer2": {"topic1": [2], "topic2": [2]},
    }


def test_range_extras_go_to_the_first_members() -> None:
    subscriptions = {f"c{i}": ["t"] for i in range(3)}
    result = RANGE.assign({"t": 8}, subscriptions)
    assert result == {"c0": {"t": [0, 1, 2]}, "c1": {"t": [3, 4, 5]}, "c2": {"t": [6, 7]}}


def test_round_robin_two_consumers_two_topics_six_partitions() -> None:
    subscriptions = {"consumer1": ["topic1", "topic2"], "consumer2": ["topic1", "topic2"]}
    result = ROUND_ROBIN.assign({"topic1": 3, "topic2": 3}, subscriptions)
    # The circle's position carries across topics.
    assert result == {
        "consumer1": {"topic1": [0, 2], "topic2": [1]},
        "consumer2": {"topic1": [1], "topic2": [0, 2]},
    }


def test_round_robin_unequal_subscriptions_skip_non_subscribers() -> None:
    # Kafka's documented example: C0 -> t0; C1 -> t0, t1; C2 -> t0, t1, t2.
    subscriptions = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    result = ROUND_ROBIN.assign({"t0": 1, "t1": 2, "t2": 3}, subscriptions)
    assert result == {
        "C0": {"t0": [0]},
        "C1": {"t1": [0]},
        "C2": {"t1": [1], "t2": [0, 1, 2]},
    }


# Properties.

MEMBERS = st.lists(st.sampled_from([f"m{i}" for i in range(6)]), min_size=1, unique=True)
TOPICS = [f"t{i}" for i in range(4)]


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Partition counts for some topics (maybe none) and each member's subscription."""
    known = draw(st.lists(st.sampled_from(TOPICS), unique=True))
    partitions = {topic: draw(st.integers(0, 12)) for topic in known}
    subscriptions = {
        member: draw(st.lists(st.sampled_from(TOPICS), unique=True)) for member in draw(MEMBERS)
    }
    return partitions, subscriptions


def _owners(result: Assignment) -> dict[tuple[str, int], list[str]]:
    owners: dict[tuple[str, int], list[str]] = {}
    for member, topics in result.items():
        for topic, partitions in topics.items():
            assert partitions == sorted(partitions)
            for partition in partitions:
                owners.setdefault((topic, partition), []).append(member)
    return owners


@BOTH
@given(group=groups())
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(
    assignor: PartitionAssignor, group: tuple[dict[str, int], dict[str, list[str]]]
) -> None:
    partitions, subscriptions = group
    result = assignor.assign(partitions, subscriptions)
    assert set(result) == set(subscriptions)
    subscribed = {topic for topics in subscriptions.values() for topic in topics}
    expected = {
        (topic, p) for topic in subscribed if topic in partitions for p in range(partitions[topic])
    }
    owners = _owners(result)
    assert set(owners) == expected
    for (topic, _), members in owners.items():
        assert len(members) == 1
        assert topic in subscriptions[members[0]]


@given(group=groups())
def test_range_per_topic_imbalance_is_at_most_one(
    group: tuple[dict[str, int], dict[str, list[str]]],
) -> None:
    partitions, subscriptions = group
    result = RANGE.assign(partitions, subscriptions)
    for topic, count in partitions.items():
        subscribers = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not subscribers:
            continue
        counts = [len(result[m].get(topic, [])) for m in subscribers]
        assert max(counts) - min(counts) <= 1
        assert counts == sorted(counts, reverse=True)  # the extras go to the first members
        assert sum(counts) == count
