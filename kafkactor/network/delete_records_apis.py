"""KafkaApis' DeleteRecords (api key 21, KIP-107), as Kafka's
`KafkaApis.handleDeleteRecordsRequest`: the request goes to this broker's replica manager, which
deletes on the partitions it leads and answers each one's low watermark once every live
replica's log starts there (or REQUEST_TIMED_OUT after the request's timeout); a partition it
does not lead is NOT_LEADER_FOR_PARTITION (a client sends each partition to its leader), one it
does not know UNKNOWN_TOPIC_OR_PARTITION. Pure translation, like the rest of KafkaApis.
"""

from __future__ import annotations

from typing import Any, Final

from kafkactor.actors.runtime import addresses
from kafkactor.messages import Response
from kafkactor.messages.delete_records import (
    INVALID_LOW_WATERMARK,
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, response_type
from kafkactor.network.partition_answers import PartitionsShape, per_partition
from kafkactor.network.steps import NO_THROTTLE, Answer, Ask, Step, millis

__all__ = ["DELETE_RECORDS", "delete_records"]

DELETE_RECORDS: Final = PartitionsShape(
    "topics",
    "name",
    "partitions",
    "partition_index",
    "DeleteRecordsTopicResult",
    "DeleteRecordsPartitionResult",
    "partitions",
)


def delete_records(broker_id: int, version: int, body: Any) -> Step:
    """DeleteRecords v0-2 for broker `broker_id`: one answer per partition the request named,
    in its order, with its low watermark (-1 with an error)."""
    request = DeleteRecordsRequest(
        timeout_ms=millis(body.timeout),
        partitions=tuple(
            DeleteRecordsPartition(
                topic=topic.name, partition=int(p.partition_index), offset=int(p.offset)
            )
            for topic in body.topics
            for p in topic.partitions
        ),
    )
    return Ask(
        addresses.replica_manager(broker_id),
        request,
        lambda response: _answer(version, body, response),
    )


def _answer(version: int, body: Any, response: Response) -> Step:
    schema = response_type(ApiKey.DELETE_RECORDS, version)
    topics = per_partition(
        schema,
        body,
        DELETE_RECORDS,
        response,
        answered_type=DeleteRecordsResponse,
        entry=lambda p, r, fallback: {
            "partition_index": p.partition_index,
            "low_watermark": r.low_watermark if r is not None else INVALID_LOW_WATERMARK,
            "error_code": r.error_code if r is not None else fallback,
        },
    )
    return Answer(build(schema, throttle_time=NO_THROTTLE, topics=topics))
