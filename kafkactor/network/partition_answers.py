"""How the data APIs' responses (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch) are laid
out per topic and partition: one entry for every partition the request named, in its order,
from an actor's answer that names partitions in a flat tuple (Kafka's per-partition response
maps in `KafkaApis`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kafkactor.messages import ErrorCode, Response
from kafkactor.network.codec import build, nested
from kafkactor.network.steps import error_of

__all__ = [
    "FETCH",
    "LIST_OFFSETS",
    "OFFSET_FOR_LEADER_EPOCH",
    "PRODUCE",
    "PartitionsShape",
    "per_partition",
    "storage_error_for",
]

# The first version of each data API whose client knows KAFKA_STORAGE_ERROR (KIP-112).
_STORAGE_ERROR_SINCE: Final = {"produce": 4, "fetch": 6}


def storage_error_for(api: str, version: int, code: ErrorCode) -> ErrorCode:
    """`code` as a client of `version` understands it: KAFKA_STORAGE_ERROR is
    NOT_LEADER_FOR_PARTITION to an older Produce (v3) or Fetch (v4-5) client, which then
    refreshes its metadata and retries instead of failing on an unknown code (Kafka's
    ProduceResponse and `maybeDownConvertStorageError`)."""
    if code is ErrorCode.KAFKA_STORAGE_ERROR and version < _STORAGE_ERROR_SINCE[api]:
        return ErrorCode.NOT_LEADER_FOR_PARTITION
    return code


@dataclass(frozen=True, slots=True)
class PartitionsShape:
    """Where one data API's request and response keep their topics and partitions."""

    topics: str  # the request's topics field
    name: str  # a topic's name field, in the request and the response alike
    partitions: str  # a request topic's partitions field
    index: str  # a request partition's index field
    topic_entity: str  # the response's nested topic entity
    partition_entity: str  # the response's nested partition entity
    answered_partitions: str  # a response topic's partitions field


PRODUCE: Final = PartitionsShape(
    "topic_data",
    "name",
    "partition_data",
    "index",
    "TopicProduceResponse",
    "PartitionProduceResponse",
    "partition_responses",
)
FETCH: Final = PartitionsShape(
    "topics",
    "topic",
    "partitions",
    "partition",
    "FetchableTopicResponse",
    "PartitionData",
    "partitions",
)
LIST_OFFSETS: Final = PartitionsShape(
    "topics",
    "name",
    "partitions",
    "partition_index",
    "ListOffsetsTopicResponse",
    "ListOffsetsPartitionResponse",
    "partitions",
)
OFFSET_FOR_LEADER_EPOCH: Final = PartitionsShape(
    "topics",
    "topic",
    "partitions",
    "partition",
    "OffsetForLeaderTopicResult",
    "EpochEndOffset",
    "partitions",
)


def per_partition(
    schema: type[Any],
    body: Any,
    shape: PartitionsShape,
    response: Response,
    *,
    answered_type: type[Any],
    entry: Callable[[Any, Any | None, ErrorCode], dict[str, Any]],
) -> tuple[Any, ...]:
    """The response's topics, one entry per partition the request named, in its order:
    `entry(request partition, the actor's result for it or None, the fallback error)` gives
    the entry's fields; a partition the actor's answer does not name gets the error of the
    whole answer (an ErrorResponse's, else UNKNOWN_SERVER_ERROR)."""
    results = (
        {(r.topic, r.partition): r for r in response.partitions}
        if isinstance(response, answered_type)
        else {}
    )
    fallback = error_of(response)
    topic_entity = nested(schema, shape.topic_entity)
    partition_entity = nested(schema, shape.partition_entity)
    topics = []
    for topic in getattr(body, shape.topics):
        name = getattr(topic, shape.name)
        entries = tuple(
            build(
                partition_entity,
                **entry(p, results.get((name, int(getattr(p, shape.index)))), fallback),
            )
            for p in getattr(topic, shape.partitions)
        )
        topics.append(build(topic_entity, **{shape.name: name, shape.answered_partitions: entries}))
    return tuple(topics)
