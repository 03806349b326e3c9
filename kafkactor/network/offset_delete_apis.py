"""KafkaApis' OffsetDelete (api key 47, KIP-496): the partitions checked against the metadata
cache, then the group coordinator asked (`kafkactor.messages.group.OffsetDeleteRequest`), as
Kafka 2.8's `KafkaApis.handleOffsetDeleteRequest` does."""

from __future__ import annotations

from typing import Any

from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.group import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartitionRequest,
)
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import Ask, Step, ask_expecting, error_of, respond

__all__ = ["offset_delete"]


def offset_delete(broker_id: int, version: int, body: Any) -> Step:
    """An OffsetDelete. A partition the broker's metadata cache does not know (no such topic,
    or an index past its partitions) answers UNKNOWN_TOPIC_OR_PARTITION; the others go to this
    broker's group coordinator, which answers NOT_COORDINATOR when the group is not its own
    (the client then looks the coordinator up again). A group-level error is the response's
    top-level error code, with no topics (Kafka's error response); otherwise every partition
    asked for is answered, topic by topic in the request's order."""
    schema = response_type(ApiKey.OFFSET_DELETE, version)
    wanted = list(
        dict.fromkeys(
            TopicPartition(topic=topic.name, partition=int(p.partition_index))
            for topic in body.topics
            for p in topic.partitions
        )
    )

    def failed(code: ErrorCode) -> Step:
        return respond(schema, error_code=code, topics=())

    def ask_coordinator(known: list[TopicPartition]) -> Step:
        request = OffsetDeleteRequest(
            group_id=body.group_id,
            partitions=tuple(
                OffsetFetchPartitionRequest(topic=tp.topic, partition=tp.partition) for tp in known
            ),
        )

        def deleted(response: OffsetDeleteResponse | None, code: ErrorCode) -> Step:
            if response is None:
                return failed(code)
            if response.error_code is not ErrorCode.NONE:
                return failed(response.error_code)
            answers = {
                TopicPartition(topic=p.topic, partition=p.partition): p.error_code
                for p in response.partitions
            }
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            codes = {tp: answers.get(tp, code if tp in known else unknown) for tp in wanted}
            return respond(schema, error_code=ErrorCode.NONE, topics=_topics(schema, codes))

        coordinator = addresses.group_coordinator(broker_id)
        return ask_expecting(coordinator, request, OffsetDeleteResponse, deleted)

    topics = tuple(dict.fromkeys(tp.topic for tp in wanted))
    if not topics:
        return ask_coordinator([])  # still the group's checks, as Kafka does

    def checked(response: Response) -> Step:
        if not isinstance(response, MetadataResponse):
            return failed(error_of(response))
        existing = {
            TopicPartition(topic=t.topic, partition=p.partition)
            for t in response.topics
            if t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for p in t.partitions
        }
        return ask_coordinator([tp for tp in wanted if tp in existing])

    replica_manager = addresses.replica_manager(broker_id)
    return Ask(replica_manager, MetadataRequest(topics=topics), checked)


def _topics(schema: type[Any], codes: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
    """The response's topics: each partition's code, grouped by topic in the order given."""
    topic_type = nested(schema, "OffsetDeleteResponseTopic")
    partition_type = nested(schema, "OffsetDeleteResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(
            build(partition_type, partition_index=tp.partition, error_code=code)
        )
    return tuple(build(topic_type, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
