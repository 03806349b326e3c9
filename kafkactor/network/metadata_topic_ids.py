"""Topic ids (KIP-516) in Metadata requests and answers: which topics a v10+ request names by
id, the requests Kafka refuses for naming them so, and the ids in answers."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kafkactor.kafka_uuid import ZERO_UUID, uuid_from_string
from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE

__all__ = [
    "FIRST_TOPIC_ID_REQUEST_VERSION",
    "answer_topic_id",
    "invalid_topic_id_request",
    "refused_answer",
    "requested_topic_ids",
    "unknown_topic_id_entries",
]

#: Metadata v12 is the first whose requests may name topics by id (Kafka 3.1); v10 and v11
#: carry the fields but Kafka refuses a topic named by id, or without a name, in them.
FIRST_TOPIC_ID_REQUEST_VERSION = 12


def requested_topic_ids(topics: Sequence[Any]) -> tuple[uuid.UUID, ...]:
    """The ids (not the zero uuid) a request's topics name, in order and without repeats."""
    found = (getattr(t, "topic_id", None) for t in topics)
    return tuple(dict.fromkeys(i for i in found if i is not None and i != ZERO_UUID))


def invalid_topic_id_request(version: int, topics: Sequence[Any]) -> str | None:
    """Why Kafka's handleTopicMetadataRequest refuses these topics of a v10/v11 request (an
    InvalidRequestException), or None: a topic without a name, or named by id."""
    if version >= FIRST_TOPIC_ID_REQUEST_VERSION:
        return None
    for topic in topics:
        if topic.name is None:
            return f"Topic name can not be null for version {version}"
        if getattr(topic, "topic_id", None) not in (None, ZERO_UUID):
            return f"Topic IDs are not supported in requests for version {version}"
    return None


def refused_answer(version: int, topics: Sequence[Any], code: ErrorCode) -> Any:
    """Kafka's MetadataRequest.getErrorResponse: every requested topic (its name, "" when it
    had none, and its id) with the error and no partitions; no brokers."""
    schema = response_type(ApiKey.METADATA, version)
    topic_type = nested(schema, "MetadataResponseTopic")
    return build(
        schema,
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=tuple(
            build(
                topic_type,
                error_code=code,
                name=t.name if t.name is not None else "",
                topic_id=getattr(t, "topic_id", None),
                is_internal=False,
                partitions=(),
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
            for t in topics
        ),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def answer_topic_id(topic_id: str) -> uuid.UUID | None:
    """A topic's id as a Metadata answer carries it (None when unknown: kio writes the zero
    uuid, and reads it back as None)."""
    return uuid_from_string(topic_id) if topic_id else None


def unknown_topic_id_entries(
    version: int, topic_ids: Sequence[uuid.UUID], authorized_operations: int
) -> tuple[Any, ...]:
    """Kafka's answer for ids no topic has: UNKNOWN_TOPIC_ID, no name, the id as asked."""
    topic_type = nested(response_type(ApiKey.METADATA, version), "MetadataResponseTopic")
    return tuple(
        build(
            topic_type,
            error_code=ErrorCode.UNKNOWN_TOPIC_ID,
            name=None,
            topic_id=topic_id,
            is_internal=False,
            partitions=(),
            topic_authorized_operations=authorized_operations,
        )
        for topic_id in topic_ids
    )
