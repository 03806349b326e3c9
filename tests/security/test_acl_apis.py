"""DescribeAcls, CreateAcls and DeleteAcls as KafkaApis translates them (kafkactor/network/
acl_apis.py), without threads: Kafka's errors (SECURITY_DISABLED, CLUSTER_AUTHORIZATION_FAILED,
INVALID_REQUEST) and filter matching; the Admin steps run here against an AclStore on the
embedded ZooKeeper. Every answer is encoded as the wire would carry it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.create_acls.v2.request import AclCreation, CreateAclsRequest
from kio.schema.delete_acls.v2.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.describe_acls.v1.request import DescribeAclsRequest
from kio.static.primitive import i8

from kafkactor.messages import ErrorCode
from kafkactor.network.acl_apis import create_acls, delete_acls, describe_acls
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import encode_response
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Admin, Answer, Step
from kafkactor.security.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.security.acl_store import AclStore
from kafkactor.security.authorizer import AccessControlEntry, AclAuthorizer
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.security_config import AuthorizerConfig
from kafkactor.timer import SystemClock
from kafkactor.zk_model import EmbeddedZooKeeper

pytestmark = pytest.mark.timeout(30)

ADMIN = KafkaPrincipal.user("admin")
ALICE = KafkaPrincipal.user("alice")
ANY, MATCH = PatternType.ANY, PatternType.MATCH
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def header(api: ApiKey, version: int, principal: KafkaPrincipal = ADMIN) -> RequestHeader:
    return RequestHeader(
        api_key=api,
        api_version=version,
        correlation_id=7,
        client_id="test",
        client_host="10.0.0.9",
        principal=principal,
    )


def run(step: Step) -> Any:
    """The step to its answer, Admin work done here; the body encodes as on the wire."""
    while isinstance(step, Admin):
        try:
            result = step.work()
        except Exception as error:
            result = error
        step = step.then(result)
    assert isinstance(step, Answer)
    return step.body


def encoded(api: ApiKey, version: int, body: Any) -> Any:
    encode_response(api, version, 7, body)  # raises on a field of the wrong type
    return body


def creation(
    name: str,
    principal: str = "User:alice",
    operation: AclOperation = AclOperation.READ,
    *,
    resource_type: ResourceType = ResourceType.TOPIC,
    pattern_type: PatternType = LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclCreation:
    return AclCreation(
        resource_type=i8(resource_type),
        resource_name=name,
        resource_pattern_type=i8(pattern_type),
        principal=principal,
        host="*",
        operation=i8(operation),
        permission_type=i8(permission),
    )


def describe(
    authorizer: Any,
    *,
    resource_type: ResourceType = ResourceType.ANY,
    name: str | None = None,
    pattern_type: PatternType = ANY,
    principal: KafkaPrincipal = ADMIN,
    operation: int = AclOperation.ANY,
) -> Any:
    body = DescribeAclsRequest(
        resource_type_filter=i8(resource_type),
        resource_name_filter=name,
        pattern_type_filter=i8(pattern_type),
        principal_filter=None,
        host_filter=None,
        operation=i8(operation),
        permission_type=i8(AclPermissionType.ANY),
    )
    answer = run(describe_acls(authorizer, header(ApiKey.DESCRIBE_ACLS, 1, principal), body))
    return encoded(ApiKey.DESCRIBE_ACLS, 1, answer)


def create(authorizer: Any, *creations: AclCreation, principal: KafkaPrincipal = ADMIN) -> Any:
    body = CreateAclsRequest(creations=creations)
    answer = run(create_acls(authorizer, header(ApiKey.CREATE_ACLS, 2, principal), body))
    return encoded(ApiKey.CREATE_ACLS, 2, answer)


def delete_filter(
    name: str | None, pattern_type: PatternType = ANY, operation: int = AclOperation.ANY
) -> DeleteAclsFilter:
    return DeleteAclsFilter(
        resource_type_filter=i8(ResourceType.TOPIC),
        resource_name_filter=name,
        pattern_type_filter=i8(pattern_type),
        principal_filter=None,
        host_filter=None,
        operation=i8(operation),
        permission_type=i8(AclPermissionType.ANY),
    )


def delete(authorizer: Any, *filters: DeleteAclsFilter, principal: KafkaPrincipal = ADMIN) -> Any:
    body = DeleteAclsRequest(filters=filters)
    answer = run(delete_acls(authorizer, header(ApiKey.DELETE_ACLS, 2, principal), body))
    return encoded(ApiKey.DELETE_ACLS, 2, answer)


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedZooKeeper]:
    with EmbeddedZooKeeper(SystemClock()) as zk:
        yield zk


@pytest.fixture
def authorizer(server: EmbeddedZooKeeper) -> Iterator[AclAuthorizer]:
    """An authorizer with its store, admin a super user, on a clean ZooKeeper."""
    client = server.connect()
    client.delete("/kafka-acl", recursive=True)
    client.delete("/kafka-acl-extended", recursive=True)
    auth = AclAuthorizer(AuthorizerConfig(enabled=True, super_users=("User:admin",)))
    store = AclStore(lambda: client, auth).start()
    yield auth
    store.stop()
    client.stop()


def test_without_an_authorizer_each_api_answers_security_disabled() -> None:
    described = describe(None)
    assert described.error_code == ErrorCode.SECURITY_DISABLED
    assert described.error_message == "No Authorizer is configured on the broker"
    created = create(None, creation("t"), creation("u"))
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    ] * 2
    deleted = delete(None, delete_filter("t"))
    assert deleted.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED


def test_the_cluster_is_checked_first(authorizer: AclAuthorizer) -> None:
    described = describe(authorizer, principal=ALICE)
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    created = create(authorizer, creation("t"), principal=ALICE)
    assert created.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    deleted = delete(authorizer, delete_filter(None), principal=ALICE)
    assert deleted.filter_results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert len(authorizer.snapshot) == 0
    # DESCRIBE on the cluster (ALTER implies it) lets alice describe, not create
    create(
        authorizer,
        creation(
            "kafka-cluster",
            operation=AclOperation.ALTER,
            resource_type=ResourceType.CLUSTER,
        ),
    )
    assert describe(authorizer, principal=ALICE).error_code == ErrorCode.NONE
    assert create(authorizer, creation("t"), principal=ALICE).results[0].error_code == 0


def test_create_describe_and_delete_with_kafkas_filters(authorizer: AclAuthorizer) -> None:
    created = create(
        authorizer,
        creation("orders"),
        creation("orders-", pattern_type=PREFIXED, operation=AclOperation.WRITE),
        creation("*", "User:bob"),
    )
    assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 3
    everything = describe(authorizer)
    assert {(r.resource_name, r.pattern_type) for r in everything.resources} == {
        ("orders", LITERAL),
        ("orders-", PREFIXED),
        ("*", LITERAL),
    }
    matched = describe(authorizer, name="orders-eu", pattern_type=MATCH)
    assert {r.resource_name for r in matched.resources} == {"orders-", "*"}
    (literal,) = describe(authorizer, name="orders", pattern_type=LITERAL).resources
    assert [(a.principal, a.operation) for a in literal.acls] == [("User:alice", 3)]
    deleted = delete(
        authorizer,
        delete_filter("orders-eu", MATCH, AclOperation.WRITE),
        delete_filter("nothing", LITERAL),
    )
    first, second = deleted.filter_results
    assert [(m.resource_name, m.pattern_type, m.error_code) for m in first.matching_acls] == [
        ("orders-", PREFIXED, ErrorCode.NONE)
    ]
    assert second.error_code == ErrorCode.NONE and second.matching_acls == ()
    assert {r.resource_name for r in describe(authorizer).resources} == {"orders", "*"}


def test_bad_bindings_are_invalid_request_each(authorizer: AclAuthorizer) -> None:
    created = create(
        authorizer,
        creation("other-cluster", resource_type=ResourceType.CLUSTER),
        creation(""),
        creation("a/b"),
        creation("fine"),
        creation("x", operation=AclOperation.ANY),
        creation("x", pattern_type=MATCH),
        creation("x", resource_type=ResourceType.UNKNOWN),
    )
    outcomes = [(r.error_code, r.error_message) for r in created.results]
    assert outcomes[0] == (
        ErrorCode.INVALID_REQUEST,
        "The only valid name for the CLUSTER resource is kafka-cluster",
    )
    assert outcomes[1] == (ErrorCode.INVALID_REQUEST, "Invalid empty resource name")
    assert outcomes[3] == (ErrorCode.NONE, None)
    for outcome in outcomes[2:3] + outcomes[4:]:
        assert outcome == (ErrorCode.INVALID_REQUEST, "Failed to create ACL")
    pattern_names = {p.name for p in authorizer.snapshot.patterns()}
    assert pattern_names == {"fine"}
    # a filter with an element Kafka does not know
    unknown = describe(authorizer, operation=99)
    assert unknown.error_code == ErrorCode.INVALID_REQUEST
    deleted = delete(authorizer, delete_filter("fine", LITERAL, 99))
    assert deleted.filter_results[0].error_code == ErrorCode.INVALID_REQUEST


def test_authorize_by_resource_type() -> None:
    """Kafka's authorizeByResourceType (InitProducerId's fallback), from AuthorizerTest."""
    auth = AclAuthorizer(AuthorizerConfig(enabled=True, super_users=("User:admin",)))
    write = AclOperation.WRITE
    topic = ResourceType.TOPIC

    def allowed(principal: KafkaPrincipal = ALICE) -> bool:
        return auth.authorize_by_resource_type(principal, "h", write, topic)

    def put(name: str, pattern_type: PatternType, permission: AclPermissionType) -> None:
        pattern = ResourcePattern(topic, name, pattern_type)
        entry = AccessControlEntry("User:alice", "*", write, permission)
        auth.update(pattern, auth.snapshot.get(pattern) | {entry})

    assert not allowed() and allowed(ADMIN)
    put("t1", LITERAL, AclPermissionType.ALLOW)
    assert allowed()
    put("t1", LITERAL, AclPermissionType.DENY)  # the literal deny covers its allow
    assert not allowed()
    put("pre", PREFIXED, AclPermissionType.ALLOW)
    assert allowed()
    put("p", PREFIXED, AclPermissionType.DENY)  # a deny prefix of the allowed prefix
    assert not allowed()
    put("*", LITERAL, AclPermissionType.ALLOW)
    assert allowed()  # an allow of every topic that no literal deny of `*` covers
    put("*", LITERAL, AclPermissionType.DENY)
    assert not allowed()
