"""The authorization checks of the admin APIs, as Kafka 2.8's `KafkaApis` makes them:
CreateTopics (CREATE on the cluster or on each topic), DeleteTopics (DELETE on each topic),
CreatePartitions (ALTER on each topic), DescribeConfigs / AlterConfigs /
IncrementalAlterConfigs (DESCRIBE_CONFIGS / ALTER_CONFIGS on each topic, on the cluster for a
broker or broker logger), DescribeLogDirs (DESCRIBE on the cluster), ElectLeaders and
AlterPartitionReassignments (ALTER on the cluster), ListPartitionReassignments (DESCRIBE on the
cluster), DescribeCluster (KIP-430's authorized operations), DescribeClientQuotas /
AlterClientQuotas (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster) and
DescribeUserScramCredentials / AlterUserScramCredentials (DESCRIBE / ALTER on the cluster)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.authorization import (
    AUTHORIZATION_MESSAGES,
    RequestAuthorization,
    Serve,
    answer_of,
    in_order,
    map_answer,
)
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Answer, Step
from kafkactor.security.acl import CLUSTER_NAME, AclOperation, ResourceType

__all__ = [
    "alter_client_quotas",
    "alter_configs",
    "alter_partition_reassignments",
    "alter_user_scram_credentials",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "describe_client_quotas",
    "describe_cluster",
    "describe_configs",
    "describe_log_dirs",
    "describe_user_scram_credentials",
    "elect_leaders",
    "incremental_alter_configs",
    "list_partition_reassignments",
]

TOPIC_REFUSED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_REFUSED: Final = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
# ConfigResource.Type ids
_TOPIC_CONFIG: Final = 2
_BROKER_CONFIGS: Final = (4, 8)  # BROKER, BROKER_LOGGER


def _answer(header: RequestHeader, **fields: Any) -> Answer:
    schema = response_type(header.api_key, header.api_version)
    return answer_of(schema, **fields)


def _split_named(
    header: RequestHeader,
    body: Any,
    serve: Serve,
    *,
    field: str,
    name_of: Callable[[Any], str],
    denied: frozenset[str],
    answers: str,
    refusal: Callable[[str], Any],
    answered_name: Callable[[Any], str],
) -> Step:
    """Serve the request without its `denied` entries (named `name_of`), answering each of
    those `refusal(name)` in the response's `answers`, in the request's order."""
    if not denied:
        return serve(body)
    entries = tuple(getattr(body, field))
    order = [name_of(e) for e in entries]
    refused = tuple(refusal(n) for n in dict.fromkeys(order) if n in denied)
    kept = tuple(e for e in entries if name_of(e) not in denied)
    if not kept:
        return _answer(header, **{answers: refused})

    def joined(response: Any) -> Any:
        merged = tuple(getattr(response, answers)) + refused
        return dataclasses.replace(response, **{answers: in_order(merged, answered_name, order)})

    return map_answer(serve(dataclasses.replace(body, **{field: kept})), joined)


# -- topics --------------------------------------------------------------------------------------


def create_topics(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """CREATE on the cluster allows every topic, else CREATE on each; a topic named twice is
    the handler's INVALID_REQUEST whatever the principal may do."""
    if auth.cluster(AclOperation.CREATE):
        return serve(body)
    counts = Counter(t.name for t in body.topics)
    named_once = [n for n, c in counts.items() if c == 1]
    denied = auth.denied(AclOperation.CREATE, ResourceType.TOPIC, named_once)
    result = nested(response_type(ApiKey.CREATE_TOPICS, header.api_version), "CreatableTopicResult")
    return _split_named(
        header,
        body,
        serve,
        field="topics",
        name_of=lambda t: t.name,
        denied=denied,
        answers="topics",
        refusal=lambda n: build(
            result,
            name=n,
            error_code=TOPIC_REFUSED,
            error_message="Authorization failed.",
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        ),
        answered_name=lambda t: t.name,
    )


def delete_topics(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    names = tuple(body.topic_names)
    denied = auth.denied(AclOperation.DELETE, ResourceType.TOPIC, names)
    result = nested(response_type(ApiKey.DELETE_TOPICS, header.api_version), "DeletableTopicResult")
    return _split_named(
        header,
        body,
        serve,
        field="topic_names",
        name_of=str,
        denied=denied,
        answers="responses",
        refusal=lambda n: build(result, name=n, error_code=TOPIC_REFUSED, error_message=None),
        answered_name=lambda r: r.name,
    )


def create_partitions(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    counts = Counter(t.name for t in body.topics)
    named_once = [n for n, c in counts.items() if c == 1]
    denied = auth.denied(AclOperation.ALTER, ResourceType.TOPIC, named_once)
    schema = response_type(ApiKey.CREATE_PARTITIONS, header.api_version)
    result = nested(schema, "CreatePartitionsTopicResult")
    return _split_named(
        header,
        body,
        serve,
        field="topics",
        name_of=lambda t: t.name,
        denied=denied,
        answers="results",
        refusal=lambda n: build(
            result,
            name=n,
            error_code=TOPIC_REFUSED,
            error_message="The topic authorization is failed.",
        ),
        answered_name=lambda r: r.name,
    )


# -- configs -------------------------------------------------------------------------------------


def _config_refusals(
    auth: RequestAuthorization,
    operation: AclOperation,
    resources: Any,
    brokers: tuple[int, ...] = _BROKER_CONFIGS,
) -> dict[tuple[int, str], ErrorCode]:
    """The config resources refused `operation`, with their error: topics on the topic, the
    `brokers` types on the cluster (other types are the handler's to refuse)."""
    refused: dict[tuple[int, str], ErrorCode] = {}
    cluster: bool | None = None
    for r in resources:
        kind, name = int(r.resource_type), r.resource_name
        if kind == _TOPIC_CONFIG:
            if not auth.allowed(operation, ResourceType.TOPIC, name):
                refused[(kind, name)] = TOPIC_REFUSED
        elif kind in brokers:
            if cluster is None:
                cluster = auth.cluster(operation)
            if not cluster:
                refused[(kind, name)] = CLUSTER_REFUSED
    return refused


def _split_configs(
    header: RequestHeader,
    body: Any,
    serve: Serve,
    refused: dict[tuple[int, str], ErrorCode],
    *,
    answers: str,
    refusal: Callable[[int, str, ErrorCode], Any],
) -> Step:
    """The authorized resources served, the refused answered after them (Kafka's order)."""
    if not refused:
        return serve(body)
    resources = tuple(body.resources)
    refusals = tuple(refusal(kind, name, code) for (kind, name), code in refused.items())
    kept = tuple(r for r in resources if (int(r.resource_type), r.resource_name) not in refused)
    if not kept:
        return _answer(header, **{answers: refusals})

    def joined(response: Any) -> Any:
        return dataclasses.replace(
            response, **{answers: tuple(getattr(response, answers)) + refusals}
        )

    return map_answer(serve(dataclasses.replace(body, resources=kept)), joined)


def describe_configs(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    refused = _config_refusals(auth, AclOperation.DESCRIBE_CONFIGS, body.resources)
    result = nested(
        response_type(ApiKey.DESCRIBE_CONFIGS, header.api_version), "DescribeConfigsResult"
    )
    return _split_configs(
        header,
        body,
        serve,
        refused,
        answers="results",
        refusal=lambda kind, name, code: build(
            result,
            error_code=code,
            error_message=AUTHORIZATION_MESSAGES[code],
            resource_type=kind,
            resource_name=name,
            configs=(),
        ),
    )


def _alter_configs(
    auth: RequestAuthorization,
    header: RequestHeader,
    body: Any,
    serve: Serve,
    brokers: tuple[int, ...] = _BROKER_CONFIGS,
) -> Step:
    refused = _config_refusals(auth, AclOperation.ALTER_CONFIGS, body.resources, brokers)
    schema = response_type(header.api_key, header.api_version)
    result = nested(schema, "AlterConfigsResourceResponse")
    return _split_configs(
        header,
        body,
        serve,
        refused,
        answers="responses",
        refusal=lambda kind, name, code: build(
            result, error_code=code, error_message=None, resource_type=kind, resource_name=name
        ),
    )


def alter_configs(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """ALTER_CONFIGS; a BROKER_LOGGER is the handler's to refuse whatever the principal may do
    (Kafka's AlterConfigs refuses the whole request before asking the authorizer)."""
    return _alter_configs(auth, header, body, serve, brokers=(4,))


def incremental_alter_configs(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    return _alter_configs(auth, header, body, serve)


# -- the cluster ---------------------------------------------------------------------------------


def describe_log_dirs(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DESCRIBE on the cluster, else no log dirs (and, from v3, CLUSTER_AUTHORIZATION_FAILED)."""
    if auth.cluster(AclOperation.DESCRIBE):
        return serve(body)
    return _answer(header, error_code=CLUSTER_REFUSED, results=())


def elect_leaders(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """ALTER on the cluster, else every partition asked (none for "all") and the response
    CLUSTER_AUTHORIZATION_FAILED."""
    if auth.cluster(AclOperation.ALTER):
        return serve(body)
    schema = response_type(ApiKey.ELECT_LEADERS, header.api_version)
    topic_type = nested(schema, "ReplicaElectionResult")
    partition_type = nested(schema, "PartitionResult")
    results = tuple(
        build(
            topic_type,
            topic=t.topic,
            partition_result=tuple(
                build(
                    partition_type,
                    partition_id=int(p),
                    error_code=CLUSTER_REFUSED,
                    error_message=None,
                )
                for p in dict.fromkeys(t.partitions)
            ),
        )
        for t in body.topic_partitions or ()
    )
    return _answer(header, error_code=CLUSTER_REFUSED, replica_election_results=results)


def alter_partition_reassignments(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """ALTER on the cluster, else the request's error response (every partition and the
    response CLUSTER_AUTHORIZATION_FAILED)."""
    if auth.cluster(AclOperation.ALTER):
        return serve(body)
    message = AUTHORIZATION_MESSAGES[CLUSTER_REFUSED]
    schema = response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS, header.api_version)
    topic_type = nested(schema, "ReassignableTopicResponse")
    partition_type = nested(schema, "ReassignablePartitionResponse")
    responses = tuple(
        build(
            topic_type,
            name=t.name,
            partitions=tuple(
                build(
                    partition_type,
                    partition_index=p.partition_index,
                    error_code=CLUSTER_REFUSED,
                    error_message=message,
                )
                for p in t.partitions
            ),
        )
        for t in body.topics
    )
    return _answer(header, error_code=CLUSTER_REFUSED, error_message=message, responses=responses)


def list_partition_reassignments(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    if auth.cluster(AclOperation.DESCRIBE):
        return serve(body)
    message = AUTHORIZATION_MESSAGES[CLUSTER_REFUSED]
    return _answer(header, error_code=CLUSTER_REFUSED, error_message=message, topics=())


def describe_cluster(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """No check; asked for, the cluster's authorized operations (0 without DESCRIBE on it)."""
    if not body.include_cluster_authorized_operations:
        return serve(body)
    operations = (
        auth.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
        if auth.cluster(AclOperation.DESCRIBE)
        else 0
    )
    return map_answer(
        serve(body),
        lambda r: (
            dataclasses.replace(r, cluster_authorized_operations=operations)
            if int(r.error_code) == ErrorCode.NONE
            else r
        ),
    )


# -- client quotas and SCRAM credentials (KIP-546, KIP-554) ----------------------------------------

DESCRIBE_CLIENT_QUOTAS: Final = 48
ALTER_CLIENT_QUOTAS: Final = 49
DESCRIBE_USER_SCRAM_CREDENTIALS: Final = 50
ALTER_USER_SCRAM_CREDENTIALS: Final = 51


def describe_client_quotas(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DESCRIBE_CONFIGS on the cluster, else the response's error (no entries)."""
    if auth.cluster(AclOperation.DESCRIBE_CONFIGS):
        return serve(body)
    message = AUTHORIZATION_MESSAGES[CLUSTER_REFUSED]
    return _answer(header, error_code=CLUSTER_REFUSED, error_message=message, entries=None)


def alter_client_quotas(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """ALTER_CONFIGS on the cluster, else each entry refused."""
    if auth.cluster(AclOperation.ALTER_CONFIGS):
        return serve(body)
    schema = response_type(ALTER_CLIENT_QUOTAS, header.api_version)
    entry_type = nested(schema, "EntryData")
    entity_type = nested(schema, "EntityData")
    # built directly: `build`'s own first parameter is named `entity`, as these fields are
    entries = tuple(
        entry_type(
            error_code=CLUSTER_REFUSED,
            error_message=AUTHORIZATION_MESSAGES[CLUSTER_REFUSED],
            entity=tuple(
                entity_type(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity
            ),
        )
        for entry in body.entries
    )
    return _answer(header, entries=entries)


def describe_user_scram_credentials(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """DESCRIBE on the cluster, else the response's error (no results)."""
    if auth.cluster(AclOperation.DESCRIBE):
        return serve(body)
    message = AUTHORIZATION_MESSAGES[CLUSTER_REFUSED]
    return _answer(header, error_code=CLUSTER_REFUSED, error_message=message, results=())


def alter_user_scram_credentials(
    auth: RequestAuthorization, header: RequestHeader, body: Any, serve: Serve
) -> Step:
    """ALTER on the cluster, else each user named (sorted, once) refused."""
    if auth.cluster(AclOperation.ALTER):
        return serve(body)
    schema = response_type(ALTER_USER_SCRAM_CREDENTIALS, header.api_version)
    result_type = nested(schema, "AlterUserScramCredentialsResult")
    users = sorted({d.name for d in body.deletions} | {u.name for u in body.upsertions})
    results = tuple(
        build(
            result_type,
            user=u,
            error_code=CLUSTER_REFUSED,
            error_message=AUTHORIZATION_MESSAGES[CLUSTER_REFUSED],
        )
        for u in users
    )
    return _answer(header, results=results)
