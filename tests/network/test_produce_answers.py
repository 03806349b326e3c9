"""Produce answers on the wire: `log_append_time` (v2+), KIP-467's `record_errors` and
`error_message` (v8), and the CreateTopics check of topic configs before anything is created."""

from __future__ import annotations

import datetime
import sys
from typing import Any

import pytest

from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    ProducePartitionResult,
    ProduceRecordError,
    ProduceRequest,
    ProduceResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import decode_response, encode_response
from tests.network.test_kafka_apis import (
    FakeAdmin,
    _create_topics,
    answer,
    apis,
    ask,
    handle,
    run_admin,
)
from tests.network.wire import TOPIC, batch, produce_request

APPEND_TIME_MS = 1_700_000_000_123
SUMMARY = "One or more records have been rejected due to 1 record errors in total, ..."


def produce_answer(version: int, result: ProducePartitionResult) -> Any:
    """The partition of a Produce answer a client reads off the wire for `result`."""
    step = ask(
        handle(apis(), ApiKey.PRODUCE, version, produce_request(version, batch(b"a"))),
        ProduceRequest,
    )
    body = answer(step.then(ProduceResponse(partitions=(result,))), ApiKey.PRODUCE, version)
    return body.responses[0].partition_responses[0]


def raw_log_append_time(version: int, result: ProducePartitionResult) -> int:
    """The int64 the frame carries, read back as kio reads it."""
    step = ask(
        handle(apis(), ApiKey.PRODUCE, version, produce_request(version, batch(b"a"))),
        ProduceRequest,
    )
    sent = step.then(ProduceResponse(partitions=(result,)))
    frame = encode_response(ApiKey.PRODUCE, version, 11, sent.body)  # type: ignore[union-attr]
    _, body = decode_response(ApiKey.PRODUCE, version, frame[4:])
    stamp = body.responses[0].partition_responses[0].log_append_time
    return -1 if stamp is None else round(stamp.timestamp() * 1000)


@pytest.mark.parametrize("version", [3, 5, 7, 8])
def test_a_log_append_time_topics_answer_carries_the_append_time(version: int) -> None:
    appended = ProducePartitionResult(
        topic=TOPIC, partition=0, base_offset=4, log_append_time_ms=APPEND_TIME_MS
    )
    assert raw_log_append_time(version, appended) == APPEND_TIME_MS
    stamp = produce_answer(version, appended).log_append_time
    assert stamp == datetime.datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=datetime.UTC)
    create_time = ProducePartitionResult(topic=TOPIC, partition=0, base_offset=4)
    assert raw_log_append_time(version, create_time) == -1


def test_v8_names_the_refused_records_and_why() -> None:
    refused = ProducePartitionResult(
        topic=TOPIC,
        partition=0,
        error_code=ErrorCode.INVALID_RECORD,
        log_start_offset=0,
        record_errors=(ProduceRecordError(batch_index=1, message="no key"),),
        error_message=SUMMARY,
    )
    partition = produce_answer(8, refused)
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, "no key")
    ]
    assert partition.error_message == SUMMARY
    older = produce_answer(7, refused)  # no such fields before v8: the code alone
    assert older.error_code == ErrorCode.INVALID_RECORD
    assert not hasattr(older, "record_errors")


def _with_configs(body: Any, configs: dict[str, str | None]) -> Any:
    topic = body.topics[0]
    entity = sys.modules[type(body).__module__].CreatableTopicConfig
    return type(body)(
        topics=(
            type(topic)(
                name=topic.name,
                num_partitions=topic.num_partitions,
                replication_factor=topic.replication_factor,
                assignments=(),
                configs=tuple(entity(name=k, value=v) for k, v in configs.items()),
            ),
        ),
        timeout=body.timeout,
        validate_only=body.validate_only,
    )


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize(
    ("configs", "code", "message"),
    [
        (
            {"segment.ms": "0"},
            ErrorCode.INVALID_CONFIG,
            "Invalid value 0 for configuration segment.ms: Value must be at least 1; "
            "valid values: [1,...]",
        ),
        (
            {"no.such.config": "1"},
            ErrorCode.INVALID_CONFIG,
            "unknown topic config keys: no.such.config",
        ),
        (
            {"retention.ms": None},
            ErrorCode.INVALID_REQUEST,
            "Null value not supported for topic configs : retention.ms",
        ),
    ],
)
def test_create_topics_checks_configs_before_creating_anything(
    configs: dict[str, str | None], code: ErrorCode, message: str, validate_only: bool
) -> None:
    admin = FakeAdmin()
    body = _with_configs(_create_topics(4, ("new", 1, 1), validate_only=validate_only), configs)
    response = answer(
        run_admin(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 4, body)), ApiKey.CREATE_TOPICS, 4
    )
    assert (response.topics[0].error_code, response.topics[0].error_message) == (code, message)
    assert admin.created == []


def test_create_topics_passes_the_configs_kafka_accepts_to_the_admin() -> None:
    admin = FakeAdmin()
    configs = {"message.timestamp.type": "LogAppendTime", "preallocate": "true"}
    body = _with_configs(_create_topics(4, ("new", 1, 1)), dict(configs))
    response = answer(
        run_admin(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 4, body)), ApiKey.CREATE_TOPICS, 4
    )
    assert response.topics[0].error_code == ErrorCode.NONE
    assert admin.created == [("new", 1, 1, configs)]
