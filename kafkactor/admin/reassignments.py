"""Partition reassignments through Kafka 2.4's admin APIs (KIP-455): AlterPartitionReassignments
(45) starts or cancels them, ListPartitionReassignments (46) lists those in progress. Both go
to the controller (`AdminClient.call` resends them after NOT_CONTROLLER)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkactor.admin.admin_client import (
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    AdminClient,
    AdminError,
    raise_for,
)
from kafkactor.messages import ErrorCode
from kafkactor.network.codec import build, nested

__all__ = [
    "OngoingReassignment",
    "alter_partition_reassignments",
    "list_partition_reassignments",
]

Partition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """A partition being reassigned: its replicas now (target and original together), those
    being added and those being removed."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def alter_partition_reassignments(
    admin: AdminClient, targets: Mapping[Partition, Sequence[int] | None]
) -> dict[Partition, AdminError | None]:
    """Start reassigning each partition to its target replicas (None cancels its reassignment);
    the outcome per partition: None, or the error the controller gave it."""
    by_topic: dict[str, list[tuple[int, Sequence[int] | None]]] = {}
    for (topic, partition), replicas in sorted(targets.items()):
        by_topic.setdefault(topic, []).append((partition, replicas))

    def body(schema: Any) -> Any:
        topic_type = nested(schema, "ReassignableTopic")
        partition_type = nested(schema, "ReassignablePartition")
        return build(
            schema,
            timeout=datetime.timedelta(seconds=admin.timeout_s),
            topics=tuple(
                build(
                    topic_type,
                    name=topic,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=p,
                            replicas=None if r is None else tuple(r),
                        )
                        for p, r in partitions
                    ),
                )
                for topic, partitions in by_topic.items()
            ),
        )

    answer = admin.call(ALTER_PARTITION_REASSIGNMENTS, body)
    raise_for(answer.error_code, answer.error_message)
    outcomes: dict[Partition, AdminError | None] = {}
    for topic in answer.responses:
        for p in topic.partitions:
            code = ErrorCode(int(p.error_code))
            outcomes[(str(topic.name), int(p.partition_index))] = (
                None if code is ErrorCode.NONE else AdminError(code, p.error_message or code.name)
            )
    return outcomes


def list_partition_reassignments(
    admin: AdminClient, partitions: Sequence[Partition] | None = None
) -> dict[Partition, OngoingReassignment]:
    """The reassignments in progress (of `partitions` only, when given)."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        by_topic.setdefault(topic, []).append(partition)

    def body(schema: Any) -> Any:
        topic_type = nested(schema, "ListPartitionReassignmentsTopics")
        return build(
            schema,
            timeout=datetime.timedelta(seconds=admin.timeout_s),
            topics=None
            if partitions is None
            else tuple(
                build(topic_type, name=t, partition_indexes=tuple(ps))
                for t, ps in sorted(by_topic.items())
            ),
        )

    answer = admin.call(LIST_PARTITION_REASSIGNMENTS, body)
    raise_for(answer.error_code, answer.error_message)
    return {
        (str(topic.name), int(p.partition_index)): OngoingReassignment(
            replicas=tuple(int(b) for b in p.replicas),
            adding=tuple(int(b) for b in p.adding_replicas),
            removing=tuple(int(b) for b in p.removing_replicas),
        )
        for topic in answer.topics
        for p in topic.partitions
    }
