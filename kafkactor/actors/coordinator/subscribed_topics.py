"""The topics a consumer group's members subscribe to, as Kafka's group coordinator reads them
from the members' JoinGroup metadata (`GroupMetadata.computeSubscribedTopics` and
`isSubscribedToTopic`, KIP-496): the topics whose offsets OffsetDelete keeps while the group
has members."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kafkactor.actors.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    subscription_topics,
)
from kafkactor.actors.coordinator.member_metadata import MemberMetadata

__all__ = ["is_subscribed_to_topic", "subscribed_topics"]


class Membership(Protocol):
    """What the subscriptions are read from: a group's protocol and its members."""

    @property
    def protocol_type(self) -> str | None: ...

    @property
    def protocol_name(self) -> str | None: ...

    @property
    def members(self) -> Mapping[str, MemberMetadata]: ...


def subscribed_topics(group: Membership) -> frozenset[str] | None:
    """Every topic the members subscribe to with the group's protocol, for a group of protocol
    type "consumer" with members and a chosen protocol. None (not known: every topic counts as
    subscribed) for any other group, and when a member's metadata is not a consumer
    subscription (Kafka's SchemaException, which it logs and treats the same way)."""
    protocol = group.protocol_name
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or protocol is None or not group.members:
        return None
    topics: set[str] = set()
    try:
        for member in group.members.values():
            topics.update(subscription_topics(member.metadata(protocol)))
    except ConsumerProtocolError:
        return None
    return frozenset(topics)


def is_subscribed_to_topic(subscribed: frozenset[str] | None, topic: str) -> bool:
    """Kafka's isSubscribedToTopic: a topic of the subscriptions, or any topic when they are
    not known."""
    return subscribed is None or topic in subscribed
