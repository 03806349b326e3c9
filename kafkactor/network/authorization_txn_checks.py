"""The authorization checks of the transaction and inter-broker APIs, as Kafka 2.8's
`KafkaApis` makes them: InitProducerId (WRITE on the transactional id; without one
IDEMPOTENT_WRITE on the cluster or WRITE on some topic), AddPartitionsToTxn (WRITE on the
transactional id and on each topic: one refused, none added), AddOffsetsToTxn and
TxnOffsetCommit (WRITE on the transactional id, READ on the group; TxnOffsetCommit READ on each
topic), EndTxn (WRITE on the transactional id), DescribeTransactions and ListTransactions
(DESCRIBE on each transactional id), and the controller's and brokers' own requests
(LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers: CLUSTER_ACTION
on the cluster)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Final

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.authorization import (
    RequestAuthorization,
    Serve,
    TopicsShape,
    answer_of,
    in_order,
    map_answer,
    refused_topics,
    split_topics,
)
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Answer, Step
from kafkactor.security.acl import AclOperation, ResourceType

__all__ = [
    "add_offsets_to_txn",
    "add_partitions_to_txn",
    "cluster_action",
    "describe_transactions",
    "end_txn",
    "init_producer_id",
    "list_transactions",
    "txn_offset_commit",
]

TXN_REFUSED: Final = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
TOPIC_REFUSED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_REFUSED: Final = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_REFUSED: Final = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)  # Kafka's default 0
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})

ADD_PARTITIONS_TO_TXN: Final = TopicsShape(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "v3_and_below_topics",
    "name",
    "partitions",
    None,
    "results_by_topic_v3_and_below",
    "AddPartitionsToTxnTopicResult",
    "name",
    "results_by_partition",
    "AddPartitionsToTxnPartitionResult",
    "partition_index",
)
TXN_OFFSET_COMMIT: Final = TopicsShape(
    ApiKey.TXN_OFFSET_COMMIT,
    "topics",
    "name",
    "partitions",
    "partition_index",
    "topics",
    "TxnOffsetCommitResponseTopic",
    "name",
    "partitions",
    "TxnOffsetCommitResponsePartition",
    "partition_index",
)


def _answer(header: RequestHeader, **fields: Any) -> Answer:
    schema = response_type(header.api_key, header.api_version)
    return answer_of(schema, **fields)


def _txn_write(auth: RequestAuthorization, transactional_id: str) -> bool:
    return auth.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def init_producer_id(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """WRITE on the transactional id; an idempotent producer (none) IDEMPOTENT_WRITE on the
    cluster or, KIP-679, WRITE on some topic (when the authorizer can tell)."""
    if body.transactional_id is not None:
        if _txn_write(auth, body.transactional_id):
            return serve(body)
        code = TXN_REFUSED
    elif auth.cluster(AclOperation.IDEMPOTENT_WRITE) or auth.any_allowed(
        AclOperation.WRITE, ResourceType.TOPIC
    ):
        return serve(body)
    else:
        code = CLUSTER_REFUSED
    return _answer(header, error_code=code, producer_id=-1, producer_epoch=-1)


def add_partitions_to_txn(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """WRITE on the transactional id (else every partition refused), WRITE on each topic
    (internal topics never): any partition refused fails the request, the others
    OPERATION_NOT_ATTEMPTED."""
    schema = response_type(ApiKey.ADD_PARTITIONS_TO_TXN, header.api_version)
    topics = tuple(body.v3_and_below_topics)
    if not _txn_write(auth, body.v3_and_below_transactional_id):
        refused = refused_topics(schema, ADD_PARTITIONS_TO_TXN, topics, TXN_REFUSED, {})
        return answer_of(schema, results_by_topic_v3_and_below=refused)
    names = [t.name for t in topics]
    denied = auth.denied(AclOperation.WRITE, ResourceType.TOPIC, names) | (
        INTERNAL_TOPICS & set(names)
    )
    if not denied:
        return serve(body)
    results = refused_topics(
        schema, ADD_PARTITIONS_TO_TXN, (t for t in topics if t.name in denied), TOPIC_REFUSED, {}
    ) + refused_topics(
        schema,
        ADD_PARTITIONS_TO_TXN,
        (t for t in topics if t.name not in denied),
        ErrorCode.OPERATION_NOT_ATTEMPTED,
        {},
    )
    return answer_of(schema, results_by_topic_v3_and_below=results)


def add_offsets_to_txn(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    if not _txn_write(auth, body.transactional_id):
        return _answer(header, error_code=TXN_REFUSED)
    if not auth.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        return _answer(header, error_code=GROUP_REFUSED)
    return serve(body)


def end_txn(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    if not _txn_write(auth, body.transactional_id):
        return _answer(header, error_code=TXN_REFUSED)
    return serve(body)


def txn_offset_commit(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """WRITE on the transactional id, READ on the group (each refusal on every partition),
    READ on each topic."""
    code = None
    if not _txn_write(auth, body.transactional_id):
        code = TXN_REFUSED
    elif not auth.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id):
        code = GROUP_REFUSED
    if code is not None:
        schema = response_type(ApiKey.TXN_OFFSET_COMMIT, header.api_version)
        refused = refused_topics(schema, TXN_OFFSET_COMMIT, body.topics, code, {})
        return answer_of(schema, topics=refused)
    denied = auth.denied(AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    return split_topics(
        header, body, serve, TXN_OFFSET_COMMIT, denied=denied, error=TOPIC_REFUSED, fields={}
    )


def describe_transactions(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DESCRIBE on each transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); of a
    described transaction only the topics the principal may DESCRIBE."""
    ids = tuple(body.transactional_ids)
    denied = auth.denied(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, ids)
    schema = response_type(ApiKey.DESCRIBE_TRANSACTIONS, header.api_version)
    state_type = nested(schema, "TransactionState")
    refused = tuple(
        build(
            state_type,
            error_code=TXN_REFUSED,
            transactional_id=i,
            transaction_state="",
            transaction_timeout=datetime.timedelta(0),
            transaction_start_time=_EPOCH,
            producer_id=0,
            producer_epoch=0,
            topics=(),
        )
        for i in dict.fromkeys(ids)
        if i in denied
    )
    kept = tuple(i for i in ids if i not in denied)
    if not kept:
        return answer_of(schema, transaction_states=refused)

    def joined(response: Any) -> Any:
        states = tuple(
            dataclasses.replace(
                s,
                topics=tuple(
                    t
                    for t in s.topics
                    if auth.visible(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
                ),
            )
            for s in response.transaction_states
        )
        return dataclasses.replace(
            response,
            transaction_states=in_order(states + refused, lambda s: s.transactional_id, ids),
        )

    return map_answer(serve(dataclasses.replace(body, transactional_ids=kept)), joined)


def list_transactions(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    def visible(response: Any) -> Any:
        return dataclasses.replace(
            response,
            transaction_states=tuple(
                s
                for s in response.transaction_states
                if auth.visible(
                    AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id
                )
            ),
        )

    return map_answer(serve(body), visible)


# -- inter-broker --------------------------------------------------------------------------------


def cluster_action(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """The controller's and the brokers' requests need CLUSTER_ACTION on the cluster, else
    the request's error response (Kafka's `getErrorResponse`: CLUSTER_AUTHORIZATION_FAILED
    for the request and each partition it names)."""
    if auth.cluster(AclOperation.CLUSTER_ACTION):
        return serve(body)
    return _cluster_action_refused(header, body)


def _cluster_action_refused(header: RequestHeader, body: Any) -> Step:
    api, version = header.api_key, header.api_version
    schema = response_type(api, version)
    if api == ApiKey.LEADER_AND_ISR:
        error_type = nested(schema, "LeaderAndIsrPartitionError")
        if version >= 5:
            topic_type = nested(schema, "LeaderAndIsrTopicError")
            topics = tuple(
                build(
                    topic_type,
                    topic_id=t.topic_id,
                    partition_errors=tuple(
                        build(
                            error_type,
                            partition_index=p.partition_index,
                            error_code=CLUSTER_REFUSED,
                        )
                        for p in t.partition_states
                    ),
                )
                for t in body.topic_states
            )
            return _answer(header, error_code=CLUSTER_REFUSED, topics=topics)
        states = (
            tuple(body.ungrouped_partition_states)
            if version < 2
            else tuple((t.topic_name, p) for t in body.topic_states for p in t.partition_states)
        )
        errors = tuple(
            build(
                error_type,
                topic_name=s[0] if isinstance(s, tuple) else s.topic_name,
                partition_index=(s[1] if isinstance(s, tuple) else s).partition_index,
                error_code=CLUSTER_REFUSED,
            )
            for s in states
        )
        return _answer(header, error_code=CLUSTER_REFUSED, partition_errors=errors)
    if api == ApiKey.STOP_REPLICA:
        error_type = nested(schema, "StopReplicaPartitionError")
        if version == 0:
            named = [(p.topic_name, int(p.partition_index)) for p in body.ungrouped_partitions]
        elif version < 3:
            named = [(t.name, int(p)) for t in body.topics for p in t.partition_indexes]
        else:
            named = [
                (t.topic_name, int(p.partition_index))
                for t in body.topic_states
                for p in t.partition_states
            ]
        errors = tuple(
            build(error_type, topic_name=t, partition_index=p, error_code=CLUSTER_REFUSED)
            for t, p in named
        )
        return _answer(header, error_code=CLUSTER_REFUSED, partition_errors=errors)
    if api == ApiKey.CONTROLLED_SHUTDOWN:
        return _answer(header, error_code=CLUSTER_REFUSED, remaining_partitions=())
    if api == ApiKey.WRITE_TXN_MARKERS:
        marker_type = nested(schema, "WritableTxnMarkerResult")
        topic_type = nested(schema, "WritableTxnMarkerTopicResult")
        partition_type = nested(schema, "WritableTxnMarkerPartitionResult")
        markers = tuple(
            build(
                marker_type,
                producer_id=m.producer_id,
                topics=tuple(
                    build(
                        topic_type,
                        name=t.name,
                        partitions=tuple(
                            build(partition_type, partition_index=p, error_code=CLUSTER_REFUSED)
                            for p in t.partition_indexes
                        ),
                    )
                    for t in m.topics
                ),
            )
            for m in body.markers
        )
        return _answer(header, markers=markers)
    return _answer(header, error_code=CLUSTER_REFUSED)  # UpdateMetadata
