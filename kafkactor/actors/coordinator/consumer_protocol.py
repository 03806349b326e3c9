"""The consumer protocol: what a consumer puts in JoinGroup's protocol metadata (its
`ConsumerProtocolSubscription`) and what the leader hands out in SyncGroup (a
`ConsumerProtocolAssignment`), as Kafka's `ConsumerProtocol` reads and writes them: kio's
entities, v0-v3, behind an int16 version; a version newer than v3 is read as v3, and bytes after
the struct are ignored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from kafkactor.actors.coordinator.versioned import (
    ConsumerProtocolError,
    non_null,
    read,
    read_version,
    write,
)
from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)
from kafkactor.network.codec import build

from kio.schema.consumer_protocol_assignment.v0 import data as _assignment_v0  # isort: skip
from kio.schema.consumer_protocol_assignment.v1 import data as _assignment_v1  # isort: skip
from kio.schema.consumer_protocol_assignment.v2 import data as _assignment_v2  # isort: skip
from kio.schema.consumer_protocol_assignment.v3 import data as _assignment_v3  # isort: skip
from kio.schema.consumer_protocol_subscription.v0 import data as _subscription_v0  # isort: skip
from kio.schema.consumer_protocol_subscription.v1 import data as _subscription_v1  # isort: skip
from kio.schema.consumer_protocol_subscription.v2 import data as _subscription_v2  # isort: skip
from kio.schema.consumer_protocol_subscription.v3 import data as _subscription_v3  # isort: skip
from kio.static.primitive import i32  # isort: skip

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "CONSUMER_PROTOCOL_VERSION",
    "Assignment",
    "ConsumerProtocolError",
    "Subscription",
    "TopicPartitions",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "subscription_topics",
]

CONSUMER_PROTOCOL_VERSION: Final = 3
"""The newest consumer protocol version (rack ids, KIP-881); Kafka's clients write it."""


# -- the consumer protocol -------------------------------------------------------------------


class TopicPartitions(NamedTuple):
    """One topic and some of its partitions, as the consumer protocol lists them."""

    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's JoinGroup metadata (Kafka's `ConsumerProtocolSubscription`).

    `version` is the one the bytes carry (a version newer than v3 is read as v3). The topics it
    wants, `user_data` for its assignor (None when null), the partitions it owns (v1+, for the
    cooperative protocol), the generation it last joined (v2+, -1 for none) and its rack (v3+;
    None when null). Fields the version does not hold keep these defaults.
    """

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartitions, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    """A consumer's SyncGroup assignment (Kafka's `ConsumerProtocolAssignment`): the partitions
    the leader assigned it, by topic, and `user_data` from the assignor (None when null).
    `version` is the one the bytes carry."""

    version: int
    partitions: tuple[TopicPartitions, ...]
    user_data: bytes | None = None


_SUBSCRIPTIONS: Final[tuple[Any, ...]] = (
    _subscription_v0.ConsumerProtocolSubscription,
    _subscription_v1.ConsumerProtocolSubscription,
    _subscription_v2.ConsumerProtocolSubscription,
    _subscription_v3.ConsumerProtocolSubscription,
)
_SUBSCRIPTION_PARTITIONS: Final[tuple[Any, ...]] = (
    None,
    _subscription_v1.TopicPartition,
    _subscription_v2.TopicPartition,
    _subscription_v3.TopicPartition,
)
_ASSIGNMENTS: Final[tuple[Any, ...]] = (
    _assignment_v0.ConsumerProtocolAssignment,
    _assignment_v1.ConsumerProtocolAssignment,
    _assignment_v2.ConsumerProtocolAssignment,
    _assignment_v3.ConsumerProtocolAssignment,
)
_ASSIGNMENT_PARTITIONS: Final[tuple[Any, ...]] = (
    _assignment_v0.TopicPartition,
    _assignment_v1.TopicPartition,
    _assignment_v2.TopicPartition,
    _assignment_v3.TopicPartition,
)
_NO_PARTITIONS: Final[Mapping[str, Sequence[int]]] = MappingProxyType({})


def _protocol_version(version: int, what: str) -> int:
    if not 0 <= version <= CONSUMER_PROTOCOL_VERSION:
        raise ConsumerProtocolError(
            f"unsupported {what} version {version} (supported: 0-{CONSUMER_PROTOCOL_VERSION})"
        )
    return version


def _topic_partitions(
    entity: Any, partitions: Mapping[str, Sequence[int]], what: str
) -> tuple[Any, ...]:
    try:
        return tuple(
            entity(topic=topic, partitions=tuple(i32(p) for p in ps))
            for topic, ps in partitions.items()
        )
    except TypeError as exc:  # kio's i32 refuses an int out of range
        raise ConsumerProtocolError(f"cannot write {what}: {exc}") from None


def encode_subscription(
    topics: Sequence[str],
    user_data: bytes | None = b"",
    *,
    owned_partitions: Mapping[str, Sequence[int]] = _NO_PARTITIONS,
    generation_id: int = -1,
    rack_id: str | None = None,
    version: int = CONSUMER_PROTOCOL_VERSION,
) -> bytes:
    """A consumer's JoinGroup protocol metadata: a `ConsumerProtocolSubscription` of `version`
    (fields it does not hold are dropped), topics and owned partitions in the order given."""
    version = _protocol_version(version, "subscription")
    entity = _SUBSCRIPTIONS[version]
    owned = ()
    if version >= 1:
        owned = _topic_partitions(
            _SUBSCRIPTION_PARTITIONS[version], owned_partitions, "subscription"
        )
    record = build(
        entity,
        topics=tuple(topics),
        user_data=user_data,
        owned_partitions=owned,
        generation_id=generation_id,
        rack_id=rack_id,
    )
    return write(version, entity, record, ConsumerProtocolError, "ConsumerProtocolSubscription")


def decode_subscription(data: bytes) -> Subscription:
    """A consumer's JoinGroup protocol metadata (Kafka's `ConsumerProtocol.deserializeSubscription`:
    a version newer than ours is read as ours, a negative one is refused)."""
    what = "ConsumerProtocolSubscription"
    version = read_version(data, ConsumerProtocolError, what)
    if version < 0:
        raise ConsumerProtocolError(f"unsupported subscription version {version}")
    entity = _SUBSCRIPTIONS[min(version, CONSUMER_PROTOCOL_VERSION)]
    s = read(data, entity, ConsumerProtocolError, f"{what} v{version}")
    owned = non_null(getattr(s, "owned_partitions", ()), ConsumerProtocolError, "ownedPartitions")
    return Subscription(
        version=version,
        topics=tuple(non_null(s.topics, ConsumerProtocolError, "topics")),
        user_data=None if s.user_data is None else bytes(s.user_data),
        owned_partitions=_decoded_partitions(owned, "ownedPartitions"),
        generation_id=int(getattr(s, "generation_id", -1)),
        rack_id=getattr(s, "rack_id", None),
    )


def subscription_topics(data: bytes) -> tuple[str, ...]:
    """The topics of a consumer's JoinGroup metadata as Kafka's group coordinator reads them
    (`GroupMetadata.computeSubscribedTopics`): the version prefix, then the v0 fields every
    version starts with, whatever the version says."""
    what = "ConsumerProtocolSubscription"
    read_version(data, ConsumerProtocolError, what)
    s = read(data, _SUBSCRIPTIONS[0], ConsumerProtocolError, f"{what} (read as v0)")
    return tuple(non_null(s.topics, ConsumerProtocolError, "topics"))


def encode_assignment(
    partitions: Mapping[str, Sequence[int]],
    user_data: bytes | None = b"",
    version: int = CONSUMER_PROTOCOL_VERSION,
) -> bytes:
    """A consumer's SyncGroup assignment: a `ConsumerProtocolAssignment` of `version` (all four
    versions share one layout), topics in the order given."""
    version = _protocol_version(version, "assignment")
    entity = _ASSIGNMENTS[version]
    assigned = _topic_partitions(_ASSIGNMENT_PARTITIONS[version], partitions, "assignment")
    record = entity(assigned_partitions=assigned, user_data=user_data)
    return write(version, entity, record, ConsumerProtocolError, "ConsumerProtocolAssignment")


def decode_assignment(data: bytes) -> Assignment:
    """A consumer's SyncGroup assignment (Kafka's `ConsumerProtocol.deserializeAssignment`: a
    version newer than ours is read as ours, a negative one is refused)."""
    what = "ConsumerProtocolAssignment"
    version = read_version(data, ConsumerProtocolError, what)
    if version < 0:
        raise ConsumerProtocolError(f"unsupported assignment version {version}")
    entity = _ASSIGNMENTS[min(version, CONSUMER_PROTOCOL_VERSION)]
    a = read(data, entity, ConsumerProtocolError, f"{what} v{version}")
    assigned = non_null(a.assigned_partitions, ConsumerProtocolError, "assignedPartitions")
    return Assignment(
        version=version,
        partitions=_decoded_partitions(assigned, "assignedPartitions"),
        user_data=None if a.user_data is None else bytes(a.user_data),
    )


def _decoded_partitions(items: Sequence[Any], what: str) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(
            tp.topic, tuple(int(p) for p in non_null(tp.partitions, ConsumerProtocolError, what))
        )
        for tp in items
    )
