"""OffsetDelete (KIP-496, api key 47) on one group the coordinator has found, as Kafka 2.8's
`GroupCoordinator.handleDeleteOffsets` decides it, with the clean-up of
`GroupMetadataManager.cleanupGroupMetadata`: which partitions' offsets go, what each partition
and the request answer, the tombstones to append and whether the group goes with them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkactor.actors.coordinator.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from kafkactor.actors.coordinator.group_metadata import GroupMetadata
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.results import GroupTombstones
from kafkactor.actors.coordinator.subscribed_topics import is_subscribed_to_topic
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode

__all__ = ["OffsetDeleteOutcome", "delete_offsets"]


@dataclass(frozen=True, slots=True)
class OffsetDeleteOutcome:
    """An OffsetDelete's answer: the request's `error` (NONE, or a group-level error with no
    partition answers, as Kafka answers it) and each partition's. `tombstones` are to be
    appended to `__consumer_offsets` (None: nothing was deleted); `group_removed` says the
    group went Dead with its last offset and left the coordinator."""

    error: ErrorCode
    partitions: Mapping[TopicPartition, ErrorCode] = field(default_factory=dict)
    tombstones: GroupTombstones | None = None
    group_removed: bool = False


def delete_offsets(
    group: GroupMetadata | None,
    partitions: Iterable[TopicPartition],
    now_ms: int,
    *,
    txn_pending: bool = False,
) -> OffsetDeleteOutcome:
    """Delete `partitions`' committed offsets of `group` (None: not known here).

    - No such group, or a Dead one: GROUP_ID_NOT_FOUND.
    - Empty: every partition's offset goes (NONE, whether it had one or not).
    - Members, protocol type "consumer": a partition whose topic the members subscribe to
      (`GroupMetadata.subscribed_topics`, as of the generation; every topic when the
      subscriptions could not be read) answers GROUP_SUBSCRIBED_TO_TOPIC; the others go.
    - Members, another protocol type: NON_EMPTY_GROUP.

    Offsets go from the cache at once, pending commits of those partitions too (their append's
    completion then commits nothing). Each committed offset removed gets a tombstone. An Empty
    group left with no offset goes Dead and leaves the coordinator; its metadata gets a
    tombstone as well unless it never had a generation (a group only storing offsets). A
    group with a transaction's offsets pending (`txn_pending`) has offsets still, as Kafka's
    hasOffsets counts them: it stays."""
    if group is None or group.state is GroupState.DEAD:
        return OffsetDeleteOutcome(ErrorCode.GROUP_ID_NOT_FOUND)
    wanted = list(dict.fromkeys(partitions))
    answers: dict[TopicPartition, ErrorCode] = {}
    if group.state is GroupState.EMPTY:
        eligible = wanted
    elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
        subscribed = group.subscribed_topics
        eligible = [tp for tp in wanted if not is_subscribed_to_topic(subscribed, tp.topic)]
        answers = {
            tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            for tp in wanted
            if is_subscribed_to_topic(subscribed, tp.topic)
        }
    else:
        return OffsetDeleteOutcome(ErrorCode.NON_EMPTY_GROUP)
    if not eligible:
        return OffsetDeleteOutcome(ErrorCode.NONE, answers)
    removed = group.remove_offsets(eligible)
    answers.update(dict.fromkeys(eligible, ErrorCode.NONE))
    dead = group.state is GroupState.EMPTY and not group.has_offsets and not txn_pending
    if dead:
        group.transition_to(GroupState.DEAD, now_ms)
    metadata = dead and group.generation_id > 0
    tombstones = (
        GroupTombstones(group.group_id, tuple(removed), metadata=metadata)
        if removed or metadata
        else None
    )
    return OffsetDeleteOutcome(ErrorCode.NONE, answers, tombstones, group_removed=dead)
