"""Messages of a broker's "topic" purgatory (Kafka's DelayedCreatePartitions and
DelayedDeleteTopics): the specs of its operations, their result, and what the replica manager
tells it of its metadata cache."""

from __future__ import annotations

from kafkactor.common import TopicPartition
from kafkactor.messages.base import Response, message


@message
class AwaitPartitionsLed:
    """The spec of Kafka's DelayedCreatePartitions (CreateTopics, CreatePartitions): done once
    every one of `partitions` has a leader in this broker's metadata cache."""

    partitions: tuple[TopicPartition, ...] = ()


@message
class AwaitTopicsDeleted:
    """The spec of Kafka's DelayedDeleteTopics: done once none of `topics` is in this broker's
    metadata cache."""

    topics: tuple[str, ...] = ()


@message
class TopicOperationResult(Response):
    """How a topic operation ended: `timed_out` names the topics its condition did not hold
    for when its timeout completed it (REQUEST_TIMED_OUT for those), none when it held."""

    timed_out: tuple[str, ...] = ()


@message
class TopicLeaders:
    """One topic as the metadata cache now has it: the partitions that have a leader."""

    topic: str = ""
    led: tuple[int, ...] = ()


@message
class TopicsMetadataChanged:
    """The replica manager's metadata cache changed (an UpdateMetadata): `topics` whose led
    partitions changed, as they stand now, and `gone`, the topics it no longer has."""

    topics: tuple[TopicLeaders, ...] = ()
    gone: tuple[str, ...] = ()
