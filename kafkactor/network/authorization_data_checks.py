"""The authorization checks of the data APIs, as Kafka 2.8's `KafkaApis` makes them: Produce
(WRITE on each topic; a transactional producer's WRITE on its transactional id), Fetch (a
consumer's READ on each topic, a follower's CLUSTER_ACTION), ListOffsets and
OffsetForLeaderEpoch (DESCRIBE on each topic, or CLUSTER_ACTION for a follower's epoch
lookup), DeleteRecords (DELETE on each topic) and Metadata (topics the principal may not
DESCRIBE hidden or refused; auto-creation needing CREATE; KIP-430's authorized operations)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.authorization import (
    RequestAuthorization,
    Serve,
    TopicsShape,
    answer_of,
    map_answer,
    map_step,
    refused_topics,
    split_topics,
    with_fields,
)
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import (
    AUTHORIZED_OPERATIONS_OMITTED,
    Answer,
    Ask,
    Close,
    NoAnswer,
    Step,
)
from kafkactor.network.txn_produce import has_transactional_records
from kafkactor.security.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = [
    "delete_records",
    "fetch",
    "list_offsets",
    "metadata",
    "offset_for_leader_epoch",
    "produce",
]

TOPIC_REFUSED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED

PRODUCE: Final = TopicsShape(
    ApiKey.PRODUCE,
    "topic_data",
    "name",
    "partition_data",
    "index",
    "responses",
    "TopicProduceResponse",
    "name",
    "partition_responses",
    "PartitionProduceResponse",
    "index",
)
# Kafka's `PartitionResponse(error)`: nothing appended
_PRODUCE_REFUSED: Final = {
    "base_offset": -1,
    "log_append_time": None,
    "log_start_offset": -1,
    "record_errors": (),
    "error_message": None,
}
FETCH: Final = TopicsShape(
    ApiKey.FETCH,
    "topics",
    "topic",
    "partitions",
    "partition",
    "responses",
    "FetchableTopicResponse",
    "topic",
    "partitions",
    "PartitionData",
    "partition_index",
)
_FETCH_REFUSED: Final = {
    "high_watermark": -1,
    "last_stable_offset": -1,
    "log_start_offset": -1,
    "aborted_transactions": None,
    "preferred_read_replica": -1,
    "records": b"",
}
LIST_OFFSETS: Final = TopicsShape(
    ApiKey.LIST_OFFSETS,
    "topics",
    "name",
    "partitions",
    "partition_index",
    "topics",
    "ListOffsetsTopicResponse",
    "name",
    "partitions",
    "ListOffsetsPartitionResponse",
    "partition_index",
)
OFFSET_FOR_LEADER_EPOCH: Final = TopicsShape(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "topics",
    "topic",
    "partitions",
    "partition",
    "topics",
    "OffsetForLeaderTopicResult",
    "topic",
    "partitions",
    "EpochEndOffset",
    "partition",
)
DELETE_RECORDS: Final = TopicsShape(
    ApiKey.DELETE_RECORDS,
    "topics",
    "name",
    "partitions",
    "partition_index",
    "topics",
    "DeleteRecordsTopicResult",
    "name",
    "partitions",
    "DeleteRecordsPartitionResult",
    "partition_index",
)


def _topic_names(body: Any, shape: TopicsShape) -> list[str]:
    return [getattr(t, shape.name) for t in getattr(body, shape.topics)]


# -- Produce -------------------------------------------------------------------------------------


def produce(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    """Transactional batches need WRITE on the transactional id (else the whole request is
    refused TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs WRITE (else its
    partitions are TOPIC_AUTHORIZATION_FAILED and the others appended). An acks=0 producer
    reads no answer: a refusal closes its connection, after the others were appended."""
    acks = int(body.acks)
    transactional_id = body.transactional_id
    transactional = has_transactional_records(body)
    if transactional and transactional_id is None:
        return serve(body)  # the handler refuses it whole (no transactional id to authorize)
    if transactional and not auth.allowed(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, str(transactional_id)
    ):
        if acks == 0:
            return Close("produce refused: TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        schema = response_type(ApiKey.PRODUCE, header.api_version)
        refused = refused_topics(
            schema,
            PRODUCE,
            body.topic_data,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            _PRODUCE_REFUSED,
        )
        return answer_of(schema, responses=refused)
    denied = auth.denied(AclOperation.WRITE, ResourceType.TOPIC, _topic_names(body, PRODUCE))
    if denied and acks == 0:
        return _acks0_refused(body, serve, denied)
    return split_topics(
        header, body, serve, PRODUCE, denied=denied, error=TOPIC_REFUSED, fields=_PRODUCE_REFUSED
    )


def _acks0_refused(body: Any, serve: Serve, denied: frozenset[str]) -> Step:
    """An acks=0 producer reads no answer: the others appended, its connection is closed
    (Kafka's only way to tell it of an error)."""
    reason = (
        "an acks=0 produce failed ("
        + ", ".join(f"{t}: TOPIC_AUTHORIZATION_FAILED" for t in sorted(denied))
        + ")"
    )

    def closed(final: Step) -> Step:
        return Close(reason) if isinstance(final, (NoAnswer, Answer)) else final

    kept = tuple(t for t in body.topic_data if t.name not in denied)
    if not kept:
        return Close(reason)
    return map_step(serve(dataclasses.replace(body, topic_data=kept)), closed)


# -- Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords ----------------------------------


def fetch(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    """A follower (replica id >= 0) needs CLUSTER_ACTION, else every partition is
    TOPIC_AUTHORIZATION_FAILED (Kafka 2.8's answer); a consumer READ on each topic."""
    names = _topic_names(body, FETCH)
    if int(body.replica_id) >= 0:
        allowed = auth.cluster(AclOperation.CLUSTER_ACTION)
        denied = frozenset() if allowed else frozenset(names)
    else:
        denied = auth.denied(AclOperation.READ, ResourceType.TOPIC, names)
    return split_topics(
        header,
        body,
        serve,
        FETCH,
        denied=denied,
        error=TOPIC_REFUSED,
        fields=_FETCH_REFUSED,
        top={"error_code": ErrorCode.NONE, "session_id": 0},
    )


def list_offsets(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    denied = auth.denied(
        AclOperation.DESCRIBE, ResourceType.TOPIC, _topic_names(body, LIST_OFFSETS)
    )
    fields = {"timestamp": -1, "offset": -1, "leader_epoch": -1, "old_style_offsets": ()}
    return split_topics(
        header, body, serve, LIST_OFFSETS, denied=denied, error=TOPIC_REFUSED, fields=fields
    )


def offset_for_leader_epoch(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """CLUSTER_ACTION (a follower) allows every topic; else DESCRIBE on each (KIP-320)."""
    if auth.cluster(AclOperation.CLUSTER_ACTION):
        return serve(body)
    names = _topic_names(body, OFFSET_FOR_LEADER_EPOCH)
    denied = auth.denied(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    fields = {"leader_epoch": -1, "end_offset": -1}
    return split_topics(
        header,
        body,
        serve,
        OFFSET_FOR_LEADER_EPOCH,
        denied=denied,
        error=TOPIC_REFUSED,
        fields=fields,
    )


def delete_records(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    denied = auth.denied(
        AclOperation.DELETE, ResourceType.TOPIC, _topic_names(body, DELETE_RECORDS)
    )
    fields = {"low_watermark": -1}
    return split_topics(
        header, body, serve, DELETE_RECORDS, denied=denied, error=TOPIC_REFUSED, fields=fields
    )


# -- Metadata ------------------------------------------------------------------------------------


def _creation_refused(auth: RequestAuthorization, body: Any, version: int, served: Step) -> Step:
    """Auto-creation needs CREATE on the cluster or on the topic: the metadata cache's answer
    is read before the handler decides what to create, and each unknown topic the principal
    may not create is turned TOPIC_AUTHORIZATION_FAILED (so neither created nor reported
    unknown), as Kafka's handleTopicMetadataRequest answers it."""
    allow = version < 4 or bool(getattr(body, "allow_auto_topic_creation", True))
    if not (auth.auto_create_topics and allow) or not isinstance(served, Ask):
        return served
    if not isinstance(served.request, MetadataRequest) or auth.cluster(AclOperation.CREATE):
        return served
    then = served.then

    def read(response: Response) -> Step:
        if isinstance(response, MetadataResponse):
            response = dataclasses.replace(
                response,
                topics=tuple(
                    dataclasses.replace(t, error_code=TOPIC_REFUSED, partitions=())
                    if t.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    and not auth.allowed(AclOperation.CREATE, ResourceType.TOPIC, t.topic)
                    else t
                    for t in response.topics
                ),
            )
        return then(response)

    return Ask(served.address, served.request, read)


def metadata(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    """Topics the principal may not DESCRIBE are left out of an all-topics answer and answered
    TOPIC_AUTHORIZATION_FAILED when named (without saying whether they exist); a named topic
    that does not exist is auto-created only with CREATE (the handler asks
    `_creation_refused`), else TOPIC_AUTHORIZATION_FAILED. KIP-430: the cluster's authorized
    operations (v8-10) when asked, 0 without DESCRIBE on the cluster; each answered topic's
    when asked."""
    version = header.api_version
    every = body.topics is None or (version == 0 and not body.topics)
    by_id = not every and any(getattr(t, "topic_id", None) for t in body.topics)
    refused: tuple[Any, ...] = ()
    keep: Callable[[str], bool]
    if every or by_id:  # hidden, never named (Kafka's "do not disclose" rule)
        served = serve(body)

        def keep(name: str) -> bool:
            return auth.visible(AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    else:
        names = [t.name for t in body.topics]
        denied = auth.denied(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        kept = tuple(t for t in body.topics if t.name not in denied)
        served = serve(dataclasses.replace(body, topics=kept)) if denied else serve(body)
        served = _creation_refused(auth, body, version, served)
        schema = response_type(ApiKey.METADATA, version)
        topic_type = nested(schema, "MetadataResponseTopic")
        refused = tuple(
            build(
                topic_type,
                error_code=TOPIC_REFUSED,
                name=name,
                topic_id=None,
                is_internal=False,
                partitions=(),
                topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
            for name in dict.fromkeys(n for n in names if n in denied)
        )
        wanted = {t.name for t in kept}

        def keep(name: str) -> bool:  # v0 with every topic denied was served as "all topics"
            return name in wanted

    topic_operations = bool(getattr(body, "include_topic_authorized_operations", False))
    cluster_operations = bool(getattr(body, "include_cluster_authorized_operations", False))

    def answered(response: Any) -> Any:
        topics = tuple(
            with_fields(
                t,
                topic_authorized_operations=auth.authorized_operations(ResourceType.TOPIC, t.name),
            )
            if topic_operations and t.name
            else t
            for t in response.topics
            if not t.name or keep(t.name)
        )
        changes: dict[str, Any] = {"topics": topics + refused}
        if cluster_operations:
            changes["cluster_authorized_operations"] = (
                auth.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
                if auth.cluster(AclOperation.DESCRIBE)
                else 0
            )
        return with_fields(response, **changes)

    return map_answer(served, answered)
