"""The authorization checks of the consumer-group APIs, as Kafka 2.8's `KafkaApis` makes them:
FindCoordinator (DESCRIBE on the group or transactional id), JoinGroup, SyncGroup, Heartbeat,
LeaveGroup (READ on the group), OffsetCommit (READ on the group, READ on each topic),
OffsetFetch (DESCRIBE on the group, DESCRIBE on each topic), DescribeGroups (DESCRIBE on each
group), ListGroups (the groups the principal may DESCRIBE, every group with DESCRIBE on the
cluster), DeleteGroups (DELETE on each group) and OffsetDelete (DELETE on the group, READ on
each topic)."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.authorization import (
    AUTHORIZATION_MESSAGES,
    RequestAuthorization,
    Serve,
    TopicsShape,
    answer_of,
    in_order,
    map_answer,
    refused_topics,
    split_topics,
    with_fields,
)
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import AUTHORIZED_OPERATIONS_OMITTED, Step
from kafkactor.security.acl import AclOperation, ResourceType

__all__ = [
    "delete_groups",
    "describe_groups",
    "find_coordinator",
    "heartbeat",
    "join_group",
    "leave_group",
    "list_groups",
    "offset_commit",
    "offset_delete",
    "offset_fetch",
    "sync_group",
]

GROUP_REFUSED: Final = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_REFUSED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_COORDINATOR_TRANSACTION: Final = 1  # FindCoordinator's key type of a transactional id

OFFSET_COMMIT: Final = TopicsShape(
    ApiKey.OFFSET_COMMIT,
    "topics",
    "name",
    "partitions",
    "partition_index",
    "topics",
    "OffsetCommitResponseTopic",
    "name",
    "partitions",
    "OffsetCommitResponsePartition",
    "partition_index",
)
OFFSET_FETCH: Final = TopicsShape(
    ApiKey.OFFSET_FETCH,
    "topics",
    "name",
    "partition_indexes",
    None,
    "topics",
    "OffsetFetchResponseTopic",
    "name",
    "partitions",
    "OffsetFetchResponsePartition",
    "partition_index",
)
# Kafka's OffsetFetchResponse.UNAUTHORIZED_PARTITION (and the v0-1 error entries)
_NO_OFFSET: Final = {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""}
OFFSET_DELETE: Final = TopicsShape(
    ApiKey.OFFSET_DELETE,
    "topics",
    "name",
    "partitions",
    "partition_index",
    "topics",
    "OffsetDeleteResponseTopic",
    "name",
    "partitions",
    "OffsetDeleteResponsePartition",
    "partition_index",
)


def _refused(header: RequestHeader, **fields: Any) -> Step:
    schema = response_type(header.api_key, header.api_version)
    return answer_of(schema, **fields)


def _succeeded(response: Any) -> bool:
    return int(getattr(response, "error_code", ErrorCode.NONE)) == ErrorCode.NONE


# -- the coordinator and membership --------------------------------------------------------------


def find_coordinator(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    if int(getattr(body, "key_type", 0)) == _COORDINATOR_TRANSACTION:
        resource, code = (
            ResourceType.TRANSACTIONAL_ID,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        )
    else:
        resource, code = ResourceType.GROUP, GROUP_REFUSED
    if auth.allowed(AclOperation.DESCRIBE, resource, body.key):
        return serve(body)
    # Kafka's FindCoordinatorResponse.prepareResponse(error, Node.noNode)
    return _refused(
        header,
        error_code=code,
        error_message=AUTHORIZATION_MESSAGES[code],
        node_id=-1,
        host="",
        port=-1,
    )


def _group_read(auth: RequestAuthorization, body: Any) -> bool:
    return auth.allowed(AclOperation.READ, ResourceType.GROUP, body.group_id)


def join_group(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    if _group_read(auth, body):
        return serve(body)
    # Kafka's JoinGroupResult(UNKNOWN_MEMBER_ID, error)
    return _refused(
        header,
        error_code=GROUP_REFUSED,
        generation_id=-1,
        protocol_type=None,
        protocol_name=None if header.api_version >= 7 else "",
        leader="",
        member_id="",
        members=(),
    )


def sync_group(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    if _group_read(auth, body):
        return serve(body)
    return _refused(
        header, error_code=GROUP_REFUSED, protocol_type=None, protocol_name=None, assignment=b""
    )


def heartbeat(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    if _group_read(auth, body):
        return serve(body)
    return _refused(header, error_code=GROUP_REFUSED)


def leave_group(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    if _group_read(auth, body):
        return serve(body)
    return _refused(header, error_code=GROUP_REFUSED, members=())


# -- offsets -------------------------------------------------------------------------------------


def offset_commit(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), READ on each topic."""
    if not _group_read(auth, body):
        schema = response_type(ApiKey.OFFSET_COMMIT, header.api_version)
        refused = refused_topics(schema, OFFSET_COMMIT, body.topics, GROUP_REFUSED, {})
        return answer_of(schema, topics=refused)
    denied = auth.denied(AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    return split_topics(
        header, body, serve, OFFSET_COMMIT, denied=denied, error=TOPIC_REFUSED, fields={}
    )


def offset_fetch(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED: on each partition asked in
    v0-1, the response's error from v2. Topics the principal may not DESCRIBE are left out of
    an all-partitions answer (v2+: null topics) and answered TOPIC_AUTHORIZATION_FAILED
    (offset -1) when named, unless the group's answer failed as a whole."""
    version = header.api_version
    if not auth.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, body.group_id):
        schema = response_type(ApiKey.OFFSET_FETCH, version)
        topics = (
            refused_topics(schema, OFFSET_FETCH, body.topics or (), GROUP_REFUSED, _NO_OFFSET)
            if version < 2
            else ()
        )
        return answer_of(schema, error_code=GROUP_REFUSED, topics=topics)
    if body.topics is None:

        def described(response: Any) -> Any:
            return dataclasses.replace(
                response,
                topics=tuple(
                    t
                    for t in response.topics
                    if auth.visible(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
                ),
            )

        return map_answer(serve(body), described)
    denied = auth.denied(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in body.topics))
    return split_topics(
        header,
        body,
        serve,
        OFFSET_FETCH,
        denied=denied,
        error=TOPIC_REFUSED,
        fields=_NO_OFFSET,
        serve_empty=True,
        merge=_succeeded,
    )


def offset_delete(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DELETE on the group (else the response's error), READ on each topic."""
    if not auth.allowed(AclOperation.DELETE, ResourceType.GROUP, body.group_id):
        return _refused(header, error_code=GROUP_REFUSED, topics=())
    denied = auth.denied(AclOperation.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    return split_topics(
        header,
        body,
        serve,
        OFFSET_DELETE,
        denied=denied,
        error=TOPIC_REFUSED,
        fields={},
        serve_empty=True,
        merge=_succeeded,
    )


# -- groups --------------------------------------------------------------------------------------


def describe_groups(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DESCRIBE on each group, else Kafka's `DescribeGroupsResponse.forError` entry; v3+ may
    ask each described group's authorized operations (KIP-430)."""
    groups = tuple(body.groups)
    denied = auth.denied(AclOperation.DESCRIBE, ResourceType.GROUP, groups)
    operations = bool(getattr(body, "include_authorized_operations", False))
    if not denied and not operations:
        return serve(body)
    schema = response_type(ApiKey.DESCRIBE_GROUPS, header.api_version)
    group_type = nested(schema, "DescribedGroup")
    refused = tuple(
        build(
            group_type,
            error_code=GROUP_REFUSED,
            group_id=g,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=(),
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
        for g in groups
        if g in denied
    )
    kept = tuple(g for g in groups if g not in denied)
    if not kept:
        return answer_of(schema, groups=refused)

    def joined(response: Any) -> Any:
        described = tuple(
            with_fields(
                g,
                authorized_operations=auth.authorized_operations(ResourceType.GROUP, g.group_id),
            )
            if operations and int(g.error_code) == ErrorCode.NONE
            else g
            for g in response.groups
        )
        return dataclasses.replace(
            response, groups=in_order(described + refused, lambda g: g.group_id, groups)
        )

    return map_answer(serve(dataclasses.replace(body, groups=kept)), joined)


def list_groups(auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve) -> Step:
    if auth.cluster(AclOperation.DESCRIBE):  # every group, as Kafka keeps for compatibility
        return serve(body)

    def visible(response: Any) -> Any:
        return dataclasses.replace(
            response,
            groups=tuple(
                g
                for g in response.groups
                if auth.visible(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
            ),
        )

    return map_answer(serve(body), visible)


def delete_groups(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    groups = tuple(dict.fromkeys(body.groups_names))
    denied = auth.denied(AclOperation.DELETE, ResourceType.GROUP, groups)
    if not denied:
        return serve(body)
    schema = response_type(ApiKey.DELETE_GROUPS, header.api_version)
    result_type = nested(schema, "DeletableGroupResult")
    refused = tuple(
        build(result_type, group_id=g, error_code=GROUP_REFUSED) for g in groups if g in denied
    )
    kept = tuple(g for g in groups if g not in denied)
    if not kept:
        return answer_of(schema, results=refused)

    def joined(response: Any) -> Any:
        return dataclasses.replace(
            response,
            results=in_order(tuple(response.results) + refused, lambda r: r.group_id, groups),
        )

    return map_answer(serve(dataclasses.replace(body, groups_names=kept)), joined)
