"""CreateAcls, DescribeAcls and DeleteAcls (api keys 30, 29, 31) through real admin clients:
confluent-kafka's `AdminClient.create_acls / describe_acls / delete_acls` and kafka-python 3's
`KafkaAdminClient` against one module-scoped cluster with Kafka's AclAuthorizer, on the
embedded ZooKeeper. What they create is in ZooKeeper as Kafka writes it and reaches every
broker's authorizer; a client that may not alter the cluster gets its client's authorization
error; bad bindings get INVALID_REQUEST.

The clients connect on PLAINTEXT, as `User:ANONYMOUS`, with `allow.everyone.if.no.acl.found`:
while the CLUSTER resource has no ACL, anyone may alter it (and so manage ACLs); once an ACL
names it for someone else, the clients' CreateAcls and DescribeAcls are refused with
CLUSTER_AUTHORIZATION_FAILED, as Kafka's AclApis refuses them (which confluent-kafka shows
for CreateAcls only: librdkafka drops DescribeAcls' error code, against Kafka too).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._acl import (  # re-exported by confluent_kafka.admin, untyped
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
)
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaPythonResourceType
from kafka.errors import ClusterAuthorizationFailedError

from kafkactor.security.acl import AclBinding as KafkaAclBinding
from kafkactor.security.acl import AclOperation as Op
from kafkactor.security.acl import AclPermissionType as Permission
from kafkactor.security.acl import PatternType
from kafkactor.security.acl import ResourcePattern as KafkaResourcePattern
from kafkactor.security.acl import ResourceType as Res
from kafkactor.security.acl_store import AclStore
from kafkactor.security.authorizer import AclAuthorizer
from kafkactor.security.authorizer import AclBindingFilter as KafkaFilter
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.testing import Cluster
from kafkactor.testing.security import ClusterSecurity
from tests.wire.support import READ_S, wait_until

pytestmark = pytest.mark.timeout(90)

ALICE = KafkaPrincipal.user("alice")
ANYONE: Any = None  # librdkafka's "any" in a filter (typed str by confluent-kafka)


def acl_filter(
    resource_type: ResourceType, name: str | None, pattern_type: ResourcePatternType
) -> AclBindingFilter:
    """Any principal, host, operation and permission on the resources the pattern matches."""
    any_name: Any = name
    return AclBindingFilter(
        resource_type,
        any_name,
        pattern_type,
        ANYONE,
        ANYONE,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


EVERYTHING = acl_filter(ResourceType.ANY, None, ResourcePatternType.ANY)


@pytest.fixture(scope="module")
def acl_cluster() -> Iterator[Cluster]:
    """Two brokers with Kafka's AclAuthorizer, allowing everyone where no ACL is found."""
    security = ClusterSecurity(
        protocol="PLAINTEXT", authorizer=True, allow_everyone_if_no_acl_found=True
    )
    with Cluster(2, listen="127.0.0.1", security=security) as started:
        yield started


@pytest.fixture(scope="module")
def admin(acl_cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": acl_cluster.bootstrap_servers})


@pytest.fixture
def name() -> str:
    return f"acl-{uuid.uuid4().hex[:8]}"


def authorizers(cluster: Cluster) -> list[Any]:
    """Every broker's AclAuthorizer."""
    return [getattr(broker.security, "authorizer", None) for broker in cluster.brokers.values()]


def zookeeper(cluster: Cluster) -> Any:
    """A broker's ZooKeeper client (the cluster's one embedded ZooKeeper)."""
    broker = next(b for b in cluster.brokers.values() if b.alive)
    assert broker.zookeeper is not None
    return broker.zookeeper.client


def zk_json(cluster: Cluster, path: str) -> Any:
    data, _ = zookeeper(cluster).get(path)
    return json.loads(data)


def test_confluent_kafka_creates_describes_and_deletes(
    acl_cluster: Cluster, admin: AdminClient, name: str
) -> None:
    read = AclBinding(
        ResourceType.TOPIC,
        name,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    write = AclBinding(
        ResourceType.TOPIC,
        f"{name}-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.DENY,
    )
    for future in admin.create_acls([read, write], request_timeout=READ_S).values():
        assert future.result(timeout=READ_S) is None
    # in ZooKeeper as Kafka 2.x writes it
    assert zk_json(acl_cluster, f"/kafka-acl/Topic/{name}") == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    prefixed = zk_json(acl_cluster, f"/kafka-acl-extended/prefixed/Topic/{name}-")
    assert prefixed["acls"][0]["permissionType"] == "Deny"
    # every broker's authorizer has them (the writer's at once, the other by notification)
    wait_until(
        lambda: all(
            a.authorize(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, name, log_if_denied=False)
            and not a.authorize(
                ALICE, "10.0.0.1", Op.WRITE, Res.TOPIC, f"{name}-x", log_if_denied=False
            )
            for a in authorizers(acl_cluster)
        ),
        message="the ACLs on both brokers",
    )
    described = admin.describe_acls(
        acl_filter(ResourceType.TOPIC, f"{name}-eu", ResourcePatternType.MATCH),
        request_timeout=READ_S,
    ).result(timeout=READ_S)
    assert described == [write]  # MATCH: the prefix applies to name-eu, the literal does not
    everything = admin.describe_acls(EVERYTHING, request_timeout=READ_S).result(timeout=READ_S)
    assert read in everything and write in everything
    deleting = acl_filter(ResourceType.TOPIC, name, ResourcePatternType.ANY)
    [(_, future)] = admin.delete_acls([deleting], request_timeout=READ_S).items()
    assert future.result(timeout=READ_S) == [read]
    assert zookeeper(acl_cluster).exists(f"/kafka-acl/Topic/{name}") is None
    pattern = KafkaResourcePattern(Res.TOPIC, name)
    wait_until(
        lambda: all(a.snapshot.get(pattern) == frozenset() for a in authorizers(acl_cluster)),
        message="the deletion on both brokers",
    )


def test_confluent_kafka_sees_invalid_request_for_a_bad_binding(
    admin: AdminClient, name: str
) -> None:
    wrong_cluster = AclBinding(
        ResourceType.BROKER,  # librdkafka's name of Kafka's CLUSTER resource type
        "not-kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    slash = AclBinding(
        ResourceType.TOPIC,
        f"{name}/x",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    futures = admin.create_acls([wrong_cluster, slash], request_timeout=READ_S)
    with pytest.raises(KafkaException, match="only valid name for the CLUSTER resource") as bad:
        futures[wrong_cluster].result(timeout=READ_S)
    assert bad.value.args[0].name() == "INVALID_REQUEST"
    with pytest.raises(KafkaException, match="Failed to create ACL"):
        futures[slash].result(timeout=READ_S)


def test_kafka_python_manages_prefixed_acls(
    acl_cluster: Cluster, admin: AdminClient, name: str
) -> None:
    client = KafkaAdminClient(bootstrap_servers=acl_cluster.bootstrap_servers)
    try:
        acl = ACL(
            principal="User:bob",
            host="*",
            operation=ACLOperation.DESCRIBE,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(
                KafkaPythonResourceType.GROUP, f"{name}-", ACLResourcePatternType.PREFIXED
            ),
        )
        created = client.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found, error = client.describe_acls(
            ACLFilter(
                principal="User:bob",
                host=None,
                operation=ACLOperation.ANY,
                permission_type=ACLPermissionType.ANY,
                resource_pattern=ResourcePatternFilter(
                    KafkaPythonResourceType.GROUP, f"{name}-1", ACLResourcePatternType.MATCH
                ),
            )
        )
        assert error.__name__ == "NoError"
        assert [(a.resource_pattern.resource_name, a.operation) for a in found] == [
            (f"{name}-", ACLOperation.DESCRIBE)
        ]
        [(_, matched, error)] = client.delete_acls(
            [
                ACLFilter(
                    principal=None,
                    host=None,
                    operation=ACLOperation.ANY,
                    permission_type=ACLPermissionType.ANY,
                    resource_pattern=ResourcePatternFilter(
                        KafkaPythonResourceType.GROUP, f"{name}-", ACLResourcePatternType.PREFIXED
                    ),
                )
            ]
        )
        assert error.__name__ == "NoError" and len(matched) == 1
        assert zookeeper(acl_cluster).exists(f"/kafka-acl-extended/prefixed/Group/{name}-") is None
    finally:
        client.close()


def test_without_alter_on_the_cluster_acl_changes_are_refused(
    acl_cluster: Cluster, admin: AdminClient, name: str
) -> None:
    """An ACL on the CLUSTER resource for someone else: the clients (User:ANONYMOUS) lose
    ALTER and DESCRIBE on it, and get their client's CLUSTER_AUTHORIZATION_FAILED."""
    ops_alter = KafkaAclBinding(
        KafkaResourcePattern(Res.CLUSTER, "kafka-cluster"),
        "User:ops",
        "*",
        Op.ALTER,
        Permission.ALLOW,
    )
    acl_cluster.add_acls(ops_alter)
    try:
        attempt = AclBinding(
            ResourceType.TOPIC,
            name,
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        [(_, created)] = admin.create_acls([attempt], request_timeout=READ_S).items()
        with pytest.raises(KafkaException) as refused:
            created.result(timeout=READ_S)
        assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
        # librdkafka drops DescribeAcls' top-level error code (rd_kafka_DescribeAclsResponse_
        # parse): against Kafka too, a refused listing reaches confluent-kafka as an empty one
        described = admin.describe_acls(EVERYTHING, request_timeout=READ_S)
        assert described.result(timeout=READ_S) == []
        client = KafkaAdminClient(bootstrap_servers=acl_cluster.bootstrap_servers)
        try:
            answer = client.create_acls(
                [
                    ACL(
                        principal="User:alice",
                        host="*",
                        operation=ACLOperation.READ,
                        permission_type=ACLPermissionType.ALLOW,
                        resource_pattern=ResourcePattern(KafkaPythonResourceType.TOPIC, name),
                    )
                ]
            )
            with pytest.raises(ClusterAuthorizationFailedError):  # kafka-python reads it
                client.describe_acls(
                    ACLFilter(
                        principal=None,
                        host=None,
                        operation=ACLOperation.ANY,
                        permission_type=ACLPermissionType.ANY,
                        resource_pattern=ResourcePatternFilter(
                            KafkaPythonResourceType.ANY, None, ACLResourcePatternType.ANY
                        ),
                    )
                )
        finally:
            client.close()
        assert [e.__name__ for e in answer["failed"]] == ["ClusterAuthorizationFailedError"]
        assert zookeeper(acl_cluster).exists(f"/kafka-acl/Topic/{name}") is None
    finally:  # as kafka-acls --remove would, straight in ZooKeeper
        store = AclStore(lambda: zookeeper(acl_cluster), AclAuthorizer())
        cluster_acls = KafkaFilter(
            resource_type=Res.CLUSTER, name="kafka-cluster", pattern_type=PatternType.LITERAL
        )
        store.delete_acls([cluster_acls])
        wait_until(
            lambda: all(
                a.snapshot.get(ops_alter.pattern) == frozenset() for a in authorizers(acl_cluster)
            ),
            message="the cluster ACL gone from both brokers",
        )
