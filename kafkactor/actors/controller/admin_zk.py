"""Topic creation and deletion through ZooKeeper alone: Kafka's `AdminZkClient`.

A broker process has no in-process `Cluster` to create topics for it: CreateTopics, automatic
creation and `__consumer_offsets` write the assignment and config znodes, as Kafka's brokers
did, and the controller (in whichever process) elects the leaders. An assignment is either
generated (`assign_replicas`) or given by the caller, then checked as Kafka checks a manual one
(`validate_replica_assignment`). Waiting is done on
ZooKeeper's view too: a partition counts as led once its state znode names a live broker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kafkactor.actors.controller import config_changes, zk_data
from kafkactor.actors.controller.add_partitions import QUEUED_FOR_DELETION, plan_added_partitions
from kafkactor.common import (
    InvalidReplicaAssignmentError,
    TopicExistsError,
    TopicQueuedForDeletionError,
    UnknownTopicError,
)
from kafkactor.kafka_uuid import random_uuid
from kafkactor.storage import LogConfig

__all__ = [
    "BOTH_SIZES_AND_ASSIGNMENTS",
    "NOT_CONSECUTIVE",
    "AdminZkClient",
    "TopicAdminTimeoutError",
    "assign_replicas",
    "plan_assignment",
    "validate_replica_assignment",
]

# Kafka's INVALID_REQUEST message for a CreateTopics topic with an assignment and a size too
BOTH_SIZES_AND_ASSIGNMENTS = (
    "Both numPartitions or replicationFactor and replicasAssignments were set. "
    "Both cannot be used at the same time."
)
# Kafka's INVALID_REPLICA_ASSIGNMENT message for partition ids that are not 0..n-1
NOT_CONSECUTIVE = "partitions should be a consecutive 0-based integer sequence"


class TopicAdminTimeoutError(TimeoutError):
    """The controller did not finish a topic change within the admin's timeout."""


def assign_replicas(
    live: list[int], partitions: int, replication_factor: int
) -> dict[int, tuple[int, ...]]:
    """Partition p's replicas are live[(p + r) % n]: leaders spread round-robin."""
    return {
        p: tuple(live[(p + r) % len(live)] for r in range(replication_factor))
        for p in range(partitions)
    }


def validate_replica_assignment(
    assignments: Mapping[int, Sequence[int]], registered: Collection[int] | None
) -> dict[int, tuple[int, ...]]:
    """Kafka's checks of a manual replica assignment (AdminZkClient's validateTopicCreate and
    validateReplicaAssignment, with CreatePartitions' unknown-broker check); returns it as
    partition -> replicas in partition order. Raises `InvalidReplicaAssignmentError` with
    Kafka's message for partition ids that are not 0..n-1, an empty replica list, a broker
    twice in one list, lists of different lengths, or (unless `registered` is None) a broker
    that is not registered. Kafka 2.8's CreateTopics leaves that last check to add-partitions
    and creates a partition that stays offline; here it is refused."""
    replicas = {int(p): tuple(int(b) for b in r) for p, r in sorted(assignments.items())}
    if not replicas or list(replicas) != list(range(len(replicas))):
        raise InvalidReplicaAssignmentError(NOT_CONSECUTIVE)
    for partition, brokers in replicas.items():
        if not brokers:
            raise InvalidReplicaAssignmentError(
                f"Cannot have replication factor of 0 for partition id {partition}."
            )
        if len(set(brokers)) != len(brokers):
            raise InvalidReplicaAssignmentError(
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, brokers))} for partition id {partition}."
            )
    factor = len(replicas[0])
    odd = {p: len(r) for p, r in replicas.items() if len(r) != factor}
    if odd:
        raise InvalidReplicaAssignmentError(
            "Inconsistent replication factor between partitions, partition 0 has "
            f"{factor} while partitions [{', '.join(map(str, odd))}] have replication "
            f"factors [{', '.join(map(str, odd.values()))}], respectively."
        )
    if registered is not None:
        unknown = sorted({b for r in replicas.values() for b in r} - set(registered))
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
            )
    return replicas


def plan_assignment(
    registered: list[int],
    partitions: int | None,
    replication_factor: int | None,
    assignments: Mapping[int, Sequence[int]] | None,
) -> dict[int, tuple[int, ...]]:
    """A new topic's assignment over the registered brokers: the caller's `assignments`,
    checked (then `partitions` and `replication_factor` must be None), or `partitions`
    (default 1) spread round-robin with `replication_factor` (default 1) replicas each.
    Raises ValueError (`InvalidReplicaAssignmentError` for a bad manual assignment)."""
    if assignments is not None:
        if partitions is not None or replication_factor is not None:
            raise ValueError(BOTH_SIZES_AND_ASSIGNMENTS)
        return validate_replica_assignment(assignments, registered)
    partitions = 1 if partitions is None else partitions
    replication_factor = 1 if replication_factor is None else replication_factor
    if partitions < 1:
        raise ValueError(f"a topic needs at least one partition, got {partitions}")
    if not 1 <= replication_factor <= len(registered):
        raise ValueError(
            f"replication factor {replication_factor} needs 1..{len(registered)} live brokers"
        )
    return assign_replicas(registered, partitions, replication_factor)


class AdminZkClient:
    """Kafka's `AdminZkClient` over a ZooKeeper client (`zk()` gives the current one).

    `create_topic` writes `/config/topics/<t>` (only the Kafka-named overrides given, checked
    over the broker's defaults `defaults`, as Kafka writes them) and `/brokers/topics/<t>`
    (the caller's `assignments`, checked as Kafka checks them, or one generated over the
    registered brokers), then waits until
    every partition's state znode names a registered leader.
    `delete_topic` marks `/admin/delete_topics/<t>` and waits until the controller removed
    the topic's znodes (or, while a replica's broker is down, until no registered broker
    is waited for). Both raise `TopicAdminTimeoutError` after `timeout_s`; may block. With
    `wait=False` they return after the writes: a broker's CreateTopics, CreatePartitions and
    DeleteTopics wait in its topic purgatory instead (no polling).
    """

    def __init__(
        self,
        zk: Callable[[], Any],
        *,
        defaults: LogConfig | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self._zk = zk
        self.defaults = defaults if defaults is not None else LogConfig()
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def registered_brokers(self) -> list[int]:
        try:
            children = self._zk().get_children(zk_data.BROKER_IDS)
        except NoNodeError:
            return []
        return sorted(int(c) for c in children if c.isdigit())

    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        config: Mapping[str, str],
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        if partitions is not None and partitions < 1:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        zk_data.log_config_from(config, base=self.defaults)  # checked; only overrides written
        with self._lock:
            zk = self._zk()
            if zk.exists(zk_data.topic_path(name)) is not None:  # Kafka checks this first
                raise TopicExistsError(f"topic {name!r} already exists")
            assignment = plan_assignment(
                self.registered_brokers(), partitions, replication_factor, assignments
            )
            config_path = zk_data.topic_config_path(name)
            config_data = zk_data.encode_topic_config_overrides(config)
            if zk.exists(config_path) is None:
                with contextlib.suppress(NodeExistsError):
                    zk.create(config_path, config_data, makepath=True)
            else:
                zk.set(config_path, config_data)
            try:
                zk.create(
                    zk_data.topic_path(name),
                    zk_data.encode_assignment(assignment, random_uuid()),  # KIP-516
                    makepath=True,
                )
            except NodeExistsError:
                raise TopicExistsError(f"topic {name!r} already exists") from None
        if wait:
            self._wait(
                lambda: all(self._led(name, p) for p in assignment),
                f"leaders for every partition of {name!r}",
            )
        return assignment

    def topic_config(self, topic: str) -> dict[str, str]:
        """Kafka's `fetchEntityConfig` for a topic: its overrides ({} without the znode)."""
        return config_changes.fetch_topic_config(self._zk(), topic)

    def change_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        """Kafka's `changeTopicConfig`: `/config/topics/<t>` set to `overrides` (checked by
        the caller) and a change notification created; every broker applies it."""
        config_changes.change_topic_config(self._zk(), topic, overrides)

    def _led(self, topic: str, partition: int) -> bool:
        try:
            data, _ = self._zk().get(zk_data.partition_state_path(topic, partition))
        except NoNodeError:
            return False
        leader = zk_data.decode_partition_state(topic, partition, data).leader
        return leader >= 0 and leader in self.registered_brokers()

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        zk = self._zk()
        try:
            data, _ = zk.get(zk_data.topic_path(name))
        except NoNodeError:
            raise UnknownTopicError(f"no topic {name!r}") from None
        try:
            holders = {b for r in zk_data.decode_assignment(name, data).values() for b in r}
        except zk_data.MalformedZnodeError:
            holders = set()
        with contextlib.suppress(NodeExistsError):
            zk.create(zk_data.delete_topic_path(name), b"", makepath=True)
        if not wait:
            return

        def deleted() -> bool:
            if holders <= set(self.registered_brokers()):
                return self._zk().exists(zk_data.delete_topic_path(name)) is None
            return True  # a replica waits for its broker to come back: the mark stays

        self._wait(deleted, f"the deletion of topic {name!r}")

    def create_partitions(
        self,
        topic: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        wait: bool = True,
    ) -> dict[int, tuple[int, ...]]:
        """Kafka's addPartitions: grow `topic` to `total` partitions, the new ones on
        `assignments` (one replica list per new partition) or as Kafka generates them
        (`plan_added_partitions`), by writing the larger assignment to `/brokers/topics/<t>`
        (its other fields kept); the controller's watch of that znode elects their leaders.
        Returns the whole assignment. Raises `TopicQueuedForDeletionError` for a topic marked
        for deletion, `UnknownTopicError`, or `plan_added_partitions`' errors; writes nothing
        when `validate_only` or on an error. With `wait`, returns once every new partition's
        state znode names a registered leader (`TopicAdminTimeoutError` after `timeout_s`)."""
        zk = self._zk()
        if zk.exists(zk_data.delete_topic_path(topic)) is not None:
            raise TopicQueuedForDeletionError(QUEUED_FOR_DELETION)
        path = zk_data.topic_path(topic)
        with self._lock:
            for _ in range(3):  # a versioned write: another writer in between means plan again
                try:
                    data, stat = zk.get(path)
                except NoNodeError:
                    raise UnknownTopicError(f"The topic '{topic}' does not exist.") from None
                existing = zk_data.decode_assignment(topic, data)
                added = plan_added_partitions(
                    topic,
                    existing,
                    self.registered_brokers(),
                    total,
                    assignments,
                    max_partitions=max_partitions,
                )
                whole = {**existing, **added}
                if validate_only:
                    return whole
                try:
                    zk.set(path, zk_data.encode_assignment_over(topic, data, whole), stat.version)
                except BadVersionError:
                    continue
                break
            else:
                raise TopicAdminTimeoutError(f"{path} kept changing while adding partitions")
        if wait:
            self._wait(
                lambda: all(self._led(topic, p) for p in added),
                f"leaders for the new partitions of {topic!r}",
            )
        return whole

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        pause = threading.Event()
        while not condition():
            if time.monotonic() > deadline:
                raise TopicAdminTimeoutError(
                    f"timed out after {self.timeout_s}s waiting for {what}"
                )
            pause.wait(0.02)
