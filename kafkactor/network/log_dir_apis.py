"""KafkaApis' DescribeLogDirs (api key 35), as Kafka's `KafkaApis.handleDescribeLogDirsRequest`:
this broker's log directory, and for each partition it holds (those the request names, or all
when `topics` is null) the log's size in bytes, its offset lag (0: no future replica moves
here) and `is_future_key` false. v3 adds a top-level error code, v4 the disk's total and usable
bytes (KIP-827). Pure translation: the replica manager describes its log manager's logs.
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.delete_records import (
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeLogDirsTopic,
    LogDirDescription,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import NO_THROTTLE, Answer, Ask, Step, error_of

__all__ = ["describe_log_dirs"]


def describe_log_dirs(broker_id: int, version: int, body: Any) -> Step:
    """DescribeLogDirs v1-4 for broker `broker_id`."""
    topics = (
        None
        if body.topics is None
        else tuple(
            DescribeLogDirsTopic(topic=t.topic, partitions=tuple(int(p) for p in t.partitions))
            for t in body.topics
        )
    )
    return Ask(
        addresses.replica_manager(broker_id),
        DescribeLogDirsRequest(topics=topics),
        lambda response: _answer(version, response),
    )


def _answer(version: int, response: Response) -> Step:
    schema = response_type(ApiKey.DESCRIBE_LOG_DIRS, version)
    if not isinstance(response, DescribeLogDirsResponse):  # the replica manager did not answer
        return Answer(
            build(schema, throttle_time=NO_THROTTLE, error_code=error_of(response), results=())
        )
    return Answer(
        build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.NONE,
            results=tuple(_result(schema, d) for d in response.dirs),
        )
    )


def _result(schema: type[Any], log_dir: LogDirDescription) -> Any:
    topic_entity = nested(schema, "DescribeLogDirsTopic")
    partition_entity = nested(schema, "DescribeLogDirsPartition")
    topics = tuple(
        build(
            topic_entity,
            name=topic,
            partitions=tuple(
                build(
                    partition_entity,
                    partition_index=p.partition,
                    partition_size=p.size,
                    offset_lag=p.offset_lag,
                    is_future_key=p.is_future,
                )
                for p in partitions
            ),
        )
        for topic, partitions in groupby(log_dir.partitions, key=lambda p: p.topic)
    )
    return build(
        nested(schema, "DescribeLogDirsResult"),
        error_code=log_dir.error_code,
        log_dir=log_dir.path,
        topics=topics,
        total_bytes=log_dir.total_bytes,
        usable_bytes=log_dir.usable_bytes,
    )
