"""LeaderAndIsr v5 between processes (KIP-516): the controller's topic ids go into each topic
state, and the v5 response, whose partition errors are grouped under topic ids with no topic
names, is named back from the request."""

from __future__ import annotations

import pytest

from kafkactor.common import PartitionLeaderState
from kafkactor.kafka_uuid import ZERO_UUID, random_uuid, uuid_to_string
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    LeaderAndIsr,
    LeaderAndIsrResponse,
    PartitionError,
    TopicIdentity,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, decode_response, encode_response, nested, response_type
from kafkactor.network.inter_broker import wire_call

pytestmark = pytest.mark.timeout(30)

WITH_ID = random_uuid()
OTHER_ID = random_uuid()


def _state(topic: str, partition: int) -> PartitionLeaderState:
    return PartitionLeaderState(topic=topic, partition=partition, leader=1, isr=(1,), replicas=(1,))


REQUEST = LeaderAndIsr(
    correlation_id=42,
    partition_states=(_state("a", 0), _state("old", 0), _state("a", 1), _state("b", 0)),
    topic_ids=(
        TopicIdentity(topic="a", topic_id=uuid_to_string(WITH_ID)),
        TopicIdentity(topic="b", topic_id=uuid_to_string(OTHER_ID)),
    ),
)


def test_the_controller_sends_v5_with_each_topics_id() -> None:
    call = wire_call(REQUEST)
    assert call is not None
    assert (call.api_key, call.version) == (ApiKey.LEADER_AND_ISR, 5)
    assert [(t.topic_name, t.topic_id) for t in call.body.topic_states] == [
        ("a", WITH_ID),
        ("old", ZERO_UUID),  # a topic without an id is sent with the zero uuid, as Kafka does
        ("b", OTHER_ID),
    ]


def test_the_v5_response_is_named_back_from_the_requests_ids() -> None:
    call = wire_call(REQUEST)
    assert call is not None
    schema = response_type(ApiKey.LEADER_AND_ISR, 5)

    def topic(topic_id: object, *errors: tuple[int, ErrorCode]) -> object:
        return build(
            nested(schema, "LeaderAndIsrTopicError"),
            topic_id=topic_id,
            partition_errors=tuple(
                build(
                    nested(schema, "LeaderAndIsrPartitionError"),
                    partition_index=p,
                    error_code=code,
                )
                for p, code in errors
            ),
        )

    body = build(
        schema,
        error_code=ErrorCode.NONE,
        topics=(
            topic(OTHER_ID, (0, ErrorCode.NONE)),
            topic(WITH_ID, (0, ErrorCode.INCONSISTENT_TOPIC_ID), (1, ErrorCode.NONE)),
            topic(ZERO_UUID, (0, ErrorCode.NONE)),
        ),
    )
    frame = encode_response(ApiKey.LEADER_AND_ISR, 5, 42, body)[4:]  # without the size prefix
    wire = decode_response(ApiKey.LEADER_AND_ISR, 5, frame)[1]

    response = call.read(wire)

    assert isinstance(response, LeaderAndIsrResponse)
    assert response.correlation_id == 42
    assert response.partitions == (
        PartitionError(topic="b", partition=0, error_code=ErrorCode.NONE),
        PartitionError(topic="a", partition=0, error_code=ErrorCode.INCONSISTENT_TOPIC_ID),
        PartitionError(topic="a", partition=1, error_code=ErrorCode.NONE),
        PartitionError(topic="old", partition=0, error_code=ErrorCode.NONE),
    )
