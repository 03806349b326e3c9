"""OffsetDelete (api key 47, KIP-496) through `KafkaApis` without threads: a request encoded as a
client writes it is decoded, its partitions are looked up in the metadata cache, the known ones
go to the group coordinator, and a hand-made answer becomes the response a client reads (Kafka
2.8's KafkaApis.handleOffsetDeleteRequest)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.group import (
    OffsetDeletePartitionResult,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartitionRequest,
)
from kafkactor.messages.replication import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import decode_request, encode_response
from kafkactor.network.kafka_apis import Answer, Ask, KafkaApis, KafkaApisConfig, Step
from tests.network.wire import GROUP, TOPIC, decode_response, encode_request, offset_delete_request

pytestmark = pytest.mark.timeout(30)

BROKER = 1
COORDINATOR = addresses.group_coordinator(BROKER)
REPLICA_MANAGER = addresses.replica_manager(BROKER)
VERSION = 0
UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def handle(body: Any) -> Step:
    """Encode `body` as a client does, decode it as the broker does, and handle it."""
    header, decoded = decode_request(encode_request(ApiKey.OFFSET_DELETE, VERSION, body))
    assert decoded == body
    return KafkaApis(BROKER, KafkaApisConfig()).handle(header, decoded)


def looked_up(step: Step, *topics: str) -> Step:
    """The metadata cache is asked for the request's topics; it knows TOPIC, partitions 0-1."""
    assert isinstance(step, Ask) and step.address == REPLICA_MANAGER, step
    assert step.request == MetadataRequest(topics=topics)
    known = TopicMetadata(
        topic=TOPIC, partitions=tuple(PartitionMetadata(partition=p, leader=1) for p in (0, 1))
    )
    missing = (TopicMetadata(topic=t, error_code=UNKNOWN) for t in topics if t != TOPIC)
    return step.then(MetadataResponse(brokers=(1,), topics=(known, *missing)))


def coordinator_asked(step: Step) -> tuple[OffsetDeleteRequest, Ask]:
    assert isinstance(step, Ask) and step.address == COORDINATOR, step
    assert isinstance(step.request, OffsetDeleteRequest)
    return step.request, step


def answer(step: Step) -> Any:
    """The response as a client reads it off the wire."""
    assert isinstance(step, Answer), step
    frame = encode_response(ApiKey.OFFSET_DELETE, VERSION, 7, step.body)
    _, body = decode_response(frame[4:], ApiKey.OFFSET_DELETE, VERSION)
    return body


def codes(body: Any) -> list[tuple[str, int, ErrorCode]]:
    return [
        (t.name, int(p.partition_index), ErrorCode(p.error_code))
        for t in body.topics
        for p in t.partitions
    ]


def results(*codes: tuple[str, int, ErrorCode]) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(
        partitions=tuple(
            OffsetDeletePartitionResult(topic=t, partition=p, error_code=e) for t, p, e in codes
        )
    )


def test_offset_delete_v0_is_advertised() -> None:
    assert SUPPORTED[ApiKey.OFFSET_DELETE] == (0, 0)


def test_known_partitions_go_to_the_coordinator_and_the_others_are_unknown() -> None:
    step = looked_up(handle(offset_delete_request(VERSION)), TOPIC, "other")
    request, asked = coordinator_asked(step)
    assert request == OffsetDeleteRequest(
        group_id=GROUP,
        partitions=(
            OffsetFetchPartitionRequest(topic=TOPIC, partition=0),
            OffsetFetchPartitionRequest(topic=TOPIC, partition=1),
        ),
    )
    subscribed = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    body = answer(asked.then(results((TOPIC, 0, ErrorCode.NONE), (TOPIC, 1, subscribed))))
    assert body.error_code == ErrorCode.NONE
    assert codes(body) == [
        (TOPIC, 0, ErrorCode.NONE),
        (TOPIC, 1, subscribed),
        ("other", 0, UNKNOWN),
    ]


def test_a_partition_past_the_topic_is_unknown_and_one_named_twice_is_answered_once() -> None:
    body = offset_delete_request(VERSION, {TOPIC: [1, 5, 1]})
    request, asked = coordinator_asked(looked_up(handle(body), TOPIC))
    assert request.partitions == (OffsetFetchPartitionRequest(topic=TOPIC, partition=1),)
    response = answer(asked.then(results((TOPIC, 1, ErrorCode.NONE))))
    assert codes(response) == [(TOPIC, 1, ErrorCode.NONE), (TOPIC, 5, UNKNOWN)]


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.NON_EMPTY_GROUP,
    ],
)
def test_a_group_error_is_the_top_level_error_with_no_topics(error: ErrorCode) -> None:
    _, asked = coordinator_asked(looked_up(handle(offset_delete_request(VERSION)), TOPIC, "other"))
    body = answer(asked.then(OffsetDeleteResponse(error_code=error)))
    assert (ErrorCode(body.error_code), body.topics) == (error, ())


def test_the_group_is_checked_even_when_no_partition_is_known() -> None:
    """Kafka asks the coordinator with no partition left: an unknown group still says so."""
    body = offset_delete_request(VERSION, {"gone": [0]})
    request, asked = coordinator_asked(looked_up(handle(body), "gone"))
    assert request.partitions == ()
    not_found = answer(asked.then(OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND)))
    assert not_found.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    found = answer(asked.then(OffsetDeleteResponse()))
    assert (found.error_code, codes(found)) == (ErrorCode.NONE, [("gone", 0, UNKNOWN)])


def test_a_request_naming_no_partition_goes_straight_to_the_coordinator() -> None:
    request, asked = coordinator_asked(handle(offset_delete_request(VERSION, {})))
    assert request == OffsetDeleteRequest(group_id=GROUP)
    body = answer(asked.then(OffsetDeleteResponse()))
    assert (body.error_code, body.topics) == (ErrorCode.NONE, ())


@pytest.mark.parametrize("stage", ["metadata", "coordinator"])
def test_a_failed_ask_is_the_top_level_error(stage: str) -> None:
    failure: Response = ErrorResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE)
    step = handle(offset_delete_request(VERSION))
    if stage == "metadata":
        assert isinstance(step, Ask)
        body = answer(step.then(failure))
    else:
        _, asked = coordinator_asked(looked_up(step, TOPIC, "other"))
        body = answer(asked.then(failure))
    assert (body.error_code, body.topics) == (ErrorCode.BROKER_NOT_AVAILABLE, ())
