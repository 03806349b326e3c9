"""DeleteRecords and DescribeLogDirs in KafkaApis, pure: what the replica manager is asked and
how its answer (or its failure) becomes each version's response."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    LogDirDescription,
    LogDirPartition,
)
from kafkactor.network.delete_records_apis import delete_records
from kafkactor.network.log_dir_apis import describe_log_dirs
from kafkactor.network.steps import Answer, Ask
from tests.network.wire import TOPIC, delete_records_request, describe_log_dirs_request

pytestmark = pytest.mark.timeout(30)


def asked(step: Any) -> Ask:
    assert isinstance(step, Ask)
    assert step.address == "broker/2/replica-manager"
    return step


def answered(step: Ask, response: Any) -> Any:
    answer = step.then(response)
    assert isinstance(answer, Answer)
    return answer.body


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records_asks_the_replica_manager_and_answers_in_the_requests_order(
    version: int,
) -> None:
    step = asked(delete_records(2, version, delete_records_request(version, {1: -1, 0: 3})))
    request = step.request
    assert isinstance(request, DeleteRecordsRequest)
    assert request.timeout_ms == 5000
    assert [(p.topic, p.partition, p.offset) for p in request.partitions] == [
        (TOPIC, 1, -1),
        (TOPIC, 0, 3),
    ]
    body = answered(
        step,
        DeleteRecordsResponse(
            partitions=(
                DeleteRecordsPartitionResult(topic=TOPIC, partition=0, low_watermark=3),
                DeleteRecordsPartitionResult(
                    topic=TOPIC, partition=1, error_code=ErrorCode.NOT_LEADER_FOR_PARTITION
                ),
            )
        ),
    )
    [topic] = body.topics
    assert topic.name == TOPIC
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in topic.partitions] == [
        (1, -1, ErrorCode.NOT_LEADER_FOR_PARTITION),
        (0, 3, ErrorCode.NONE),
    ]


def test_a_replica_manager_that_fails_fails_every_partition() -> None:
    step = asked(delete_records(2, 2, delete_records_request(2)))
    body = answered(step, ErrorResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE))
    assert {(p.low_watermark, p.error_code) for p in body.topics[0].partitions} == {
        (-1, ErrorCode.BROKER_NOT_AVAILABLE)
    }


DESCRIBED = DescribeLogDirsResponse(
    dirs=(
        LogDirDescription(
            path="/data/broker-2",
            partitions=(
                LogDirPartition(topic="a", partition=0, size=100),
                LogDirPartition(topic="a", partition=1, size=0),
                LogDirPartition(topic="b", partition=0, size=7),
            ),
            total_bytes=1000,
            usable_bytes=400,
        ),
    )
)


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_log_dirs_groups_each_dirs_logs_by_topic(version: int) -> None:
    step = asked(describe_log_dirs(2, version, describe_log_dirs_request(version, None)))
    assert step.request == DescribeLogDirsRequest(topics=None)
    body = answered(step, DESCRIBED)
    [result] = body.results
    assert (result.error_code, result.log_dir) == (ErrorCode.NONE, "/data/broker-2")
    assert [
        (
            t.name,
            [
                (p.partition_index, p.partition_size, p.offset_lag, p.is_future_key)
                for p in t.partitions
            ],
        )
        for t in result.topics
    ] == [("a", [(0, 100, 0, False), (1, 0, 0, False)]), ("b", [(0, 7, 0, False)])]
    if version >= 4:  # KIP-827
        assert (result.total_bytes, result.usable_bytes) == (1000, 400)
    if version >= 3:
        assert body.error_code == ErrorCode.NONE


def test_describe_log_dirs_names_the_partitions_asked_for() -> None:
    step = asked(describe_log_dirs(2, 2, describe_log_dirs_request(2, (0, 2))))
    request = step.request
    assert isinstance(request, DescribeLogDirsRequest)
    assert request.topics is not None
    assert [(t.topic, t.partitions) for t in request.topics] == [(TOPIC, (0, 2))]


def test_describe_log_dirs_when_the_replica_manager_fails() -> None:
    step = asked(describe_log_dirs(2, 3, describe_log_dirs_request(3)))
    body = answered(step, ErrorResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE))
    assert (body.error_code, body.results) == (ErrorCode.BROKER_NOT_AVAILABLE, ())
