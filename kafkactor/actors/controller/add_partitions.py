"""Adding partitions to a topic, decided without I/O: Kafka's `AdminZkClient.addPartitions`.

`plan_added_partitions` is what ZkAdminManager.createPartitions and
AdminZkClient.createNewPartitionsAssignment decide for one topic of a CreatePartitions request:
the new partitions' replicas (the caller's, checked, or generated), or Kafka's error with
Kafka's message. `assign_added_replicas` is AdminUtils.assignReplicasToBrokers without racks,
as Kafka runs it for added partitions: from partition id = the current count and broker index
= where the existing partition 0's first replica stands among the registered brokers, so the
new partitions continue the topic's round-robin instead of starting at a random broker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafkactor.common import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)

__all__ = ["QUEUED_FOR_DELETION", "assign_added_replicas", "plan_added_partitions"]

# Kafka's INVALID_TOPIC_EXCEPTION message for a CreatePartitions topic marked for deletion
QUEUED_FOR_DELETION = "The topic is queued for deletion."


def assign_added_replicas(
    brokers: Sequence[int],
    count: int,
    replication_factor: int,
    *,
    start_index: int,
    start_partition: int,
) -> dict[int, tuple[int, ...]]:
    """Kafka's rack-unaware assignment of `count` partitions numbered from `start_partition`
    over `brokers` (sorted ids): partition p's first replica is brokers[(p + start_index) % n];
    its followers follow it at a shift (start_index, plus one each time p wraps round the
    brokers) so that the same replica sequence does not repeat. Raises
    `InvalidReplicationFactorError` when there are fewer brokers than replicas."""
    n = len(brokers)
    if count <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}."
        )
    shift = start_index
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(max(0, start_partition), max(0, start_partition) + count):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        followers = tuple(
            brokers[(first + 1 + (shift + j) % (n - 1)) % n] for j in range(replication_factor - 1)
        )
        assignment[partition] = (brokers[first], *followers)
    return assignment


def plan_added_partitions(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    registered: Sequence[int],
    total: int,
    assignments: Sequence[Sequence[int]] | None = None,
    *,
    max_partitions: int | None = None,
) -> dict[int, tuple[int, ...]]:
    """The replicas of the partitions a CreatePartitions of `topic` to `total` partitions
    adds (ids len(existing)..total-1), over the `registered` brokers: `assignments` (one
    replica list per new partition, in order), checked, or generated.

    Kafka's checks, in Kafka's order and with its messages: fewer or as many partitions
    (`InvalidPartitionsError`), a broker that is not registered, a count of lists that is not
    the increase, an empty list, a broker twice in one list, a list whose length is not the
    topic's replication factor (`InvalidReplicaAssignmentError`), too few brokers for the
    replication factor (`InvalidReplicationFactorError`). `max_partitions` (kafkactor's
    bound on partitions per topic, none in Kafka) is checked after the counts."""
    current = len(existing)
    if total < current:
        raise InvalidPartitionsError(
            f"Topic currently has {current} partitions, which is higher than the requested {total}."
        )
    if total == current:
        raise InvalidPartitionsError(f"Topic already has {current} partitions.")
    if max_partitions is not None and total > max_partitions:
        raise InvalidPartitionsError(
            f"Topic cannot have {total} partitions: at most {max_partitions} partitions per "
            "topic here."
        )
    increase = total - current
    first_replicas = tuple(existing.get(0, ()))
    if not first_replicas:
        raise ValueError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            "missing."
        )
    if assignments is None:
        brokers = sorted(registered)
        start = next((i for i, b in enumerate(brokers) if b >= first_replicas[0]), 0)
        return assign_added_replicas(
            brokers, increase, len(first_replicas), start_index=start, start_partition=current
        )
    lists = [tuple(int(b) for b in replicas) for replicas in assignments]
    unknown = {b for replicas in lists for b in replicas} - set(registered)
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, sorted(unknown)))}."
        )
    if len(lists) != increase:
        raise InvalidReplicaAssignmentError(
            f"Increasing the number of partitions by {increase} but {len(lists)} assignments "
            "provided."
        )
    added = {current + index: replicas for index, replicas in enumerate(lists)}
    for partition, replicas in added.items():
        if not replicas:
            raise InvalidReplicaAssignmentError(
                f"Cannot have replication factor of 0 for partition id {partition}."
            )
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {partition}."
            )
    factor = len(first_replicas)
    odd = {p: len(r) for p, r in added.items() if len(r) != factor}
    if odd:
        raise InvalidReplicaAssignmentError(
            "Inconsistent replication factor between partitions, partition 0 has "
            f"{factor} while partitions [{', '.join(map(str, odd))}] have replication "
            f"factors [{', '.join(map(str, odd.values()))}], respectively."
        )
    return added
