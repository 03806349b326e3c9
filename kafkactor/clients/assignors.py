"""The group leader's partition assignors: Kafka's `RangeAssignor` and `RoundRobinAssignor`.

In Kafka's classic group protocol the coordinator picks one consumer as group leader and hands
it every member's subscription; the leader runs the assignor named by the group's protocol
(`partition.assignment.strategy`) to decide which member owns which topic-partition, and sends
the result back through SyncGroup. These are the two eager assignors built on Kafka's
`AbstractPartitionAssignor`: both receive the partition count of each topic (from the leader's
metadata) and each member's subscribed topics, and return, for every member, its partitions
grouped by topic.

Common rules (as in Kafka): every member appears in the result, with an empty assignment when it
is subscribed to nothing assignable; a subscribed topic absent from the metadata is skipped; each
partition of a subscribed, known topic goes to exactly one member subscribed to it. Rack
awareness, static membership (`group.instance.id`) and the sticky assignors are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

Assignment = dict[str, dict[str, list[int]]]
"""member id -> topic -> the partition numbers of that topic the member owns (ascending)."""


class PartitionAssignor(Protocol):
    """Kafka's `ConsumerPartitionAssignor` as a group leader uses it: a name and `assign`."""

    @property
    def name(self) -> str:
        """The assignment protocol's name the members advertise in JoinGroup."""
        ...

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Sequence[str]],
    ) -> Assignment:
        """Map each member (by member id) to the partitions, per topic, it will consume."""
        ...


def _empty_assignment(subscriptions: Mapping[str, Sequence[str]]) -> Assignment:
    """Every member with nothing yet: Kafka puts each member id in the result up front."""
    return {member: {} for member in subscriptions}


def _members_per_topic(subscriptions: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """`AbstractPartitionAssignor.consumersPerTopic`: topic -> its subscribers, sorted."""
    per_topic: dict[str, set[str]] = {}
    for member, topics in subscriptions.items():
        for topic in topics:
            per_topic.setdefault(topic, set()).add(member)
    return {topic: sorted(members) for topic, members in sorted(per_topic.items())}


class RangeAssignor:
    """Kafka's `RangeAssignor` (protocol "range"): contiguous ranges per topic.

    Topics are assigned independently. For each topic, its subscribers are sorted by member id and
    its partitions split into contiguous ranges in that order: each gets `partitions // members`,
    and the first `partitions % members` members get one extra. With several topics of the same
    size, the lexicographically first members therefore get the extras of every topic.
    """

    name = "range"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Sequence[str]],
    ) -> Assignment:
        """Split each subscribed topic's partitions into ranges over its sorted subscribers."""
        assignment = _empty_assignment(subscriptions)
        for topic, members in _members_per_topic(subscriptions).items():
            num_partitions = partitions_per_topic.get(topic)
            if num_partitions is None:
                continue
            per_member, with_extra = divmod(num_partitions, len(members))
            start = 0
            for index, member in enumerate(members):
                length = per_member + (1 if index < with_extra else 0)
                if length > 0:
                    assignment[member][topic] = list(range(start, start + length))
                start += length
        return assignment


class RoundRobinAssignor:
    """Kafka's `RoundRobinAssignor` (protocol "roundrobin"): deal partitions out in a circle.

    All partitions of every subscribed topic known to the metadata are laid out sorted by
    (topic, partition); members are sorted by member id and walked as a circle. Each partition goes
    to the next member in the circle that subscribes to its topic, skipping those that do not;
    the circle's position carries over from one partition (and topic) to the next. With identical
    subscriptions, member counts differ by at most one; with differing ones they may not.
    """

    name = "roundrobin"

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Sequence[str]],
    ) -> Assignment:
        """Deal sorted topic-partitions to the sorted members in turn, skipping non-subscribers."""
        assignment = _empty_assignment(subscriptions)
        members = sorted(subscriptions)
        subscribed = {member: set(subscriptions[member]) for member in members}
        position = 0
        for topic in _members_per_topic(subscriptions):
            num_partitions = partitions_per_topic.get(topic)
            if num_partitions is None:
                continue
            for partition in range(num_partitions):
                # Some member subscribes to `topic` (it came from the subscriptions), so this ends.
                while topic not in subscribed[members[position]]:
                    position = (position + 1) % len(members)
                assignment[members[position]].setdefault(topic, []).append(partition)
                position = (position + 1) % len(members)
        return assignment


ASSIGNORS: Mapping[str, PartitionAssignor] = {
    RangeAssignor.name: RangeAssignor(),
    RoundRobinAssignor.name: RoundRobinAssignor(),
}
"""The assignors by protocol name, as a leader resolves the group's chosen protocol."""


def assign(
    name: str,
    subscriptions: Mapping[str, Sequence[str]],
    partitions_per_topic: Mapping[str, int],
) -> Assignment:
    """Run the assignor whose protocol name is `name`; `KeyError` for any other name."""
    return ASSIGNORS[name].assign(partitions_per_topic, subscriptions)
