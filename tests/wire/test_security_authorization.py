"""What a client sees of Kafka's per-API authorization: one broker with Kafka's AclAuthorizer
(`allow.everyone.if.no.acl.found` false), real clients at their defaults on PLAINTEXT (so as
`User:ANONYMOUS`), ACLs added per test for its own topics and groups. A refused topic, group or
creation is the client's own authorization error; what the ACLs allow is served beside it.
The answers request by request are tests/security/test_authorization_checks.py's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from kafkactor.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.testing import Cluster
from kafkactor.testing.security import ClusterSecurity
from tests.wire.support import READ_S

pytestmark = pytest.mark.timeout(90)

ANONYMOUS = "User:ANONYMOUS"


def allow(operation: AclOperation, resource_type: ResourceType, name: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name), ANONYMOUS, "*", operation, AclPermissionType.ALLOW
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    security = ClusterSecurity(protocol="PLAINTEXT", authorizer=True)
    with Cluster(1, listen="127.0.0.1", security=security) as started:
        started.add_acls(allow(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME))
        yield started


@pytest.fixture
def names() -> tuple[str, str]:
    """A topic the test allows, and one it does not."""
    tag = uuid.uuid4().hex[:8]
    return f"authz-{tag}", f"authz-secret-{tag}"


def test_kafka_python_writes_where_allowed_and_is_refused_elsewhere(
    cluster: Cluster, names: tuple[str, str]
) -> None:
    allowed, secret = names
    for topic in names:
        cluster.create_topic(topic, 1, 1)
    cluster.add_acls(allow(AclOperation.WRITE, ResourceType.TOPIC, allowed))
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=10_000)
    try:
        assert producer.send(allowed, b"ok").get(timeout=READ_S).offset == 0
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"no").get(timeout=READ_S)
    finally:
        producer.close()


def test_confluent_kafka_delivery_of_a_refused_topic_fails_with_topic_authorization_failed(
    cluster: Cluster, names: tuple[str, str]
) -> None:
    _, secret = names
    cluster.create_topic(secret, 1, 1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    errors: list[KafkaError | None] = []
    producer.produce(secret, b"no", on_delivery=lambda error, _: errors.append(error))
    producer.flush(READ_S)
    del producer  # librdkafka's threads end with it, before the module's cluster stops
    assert [e.code() if e is not None else None for e in errors] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    ]


def test_a_consumer_needs_read_on_its_group(cluster: Cluster, names: tuple[str, str]) -> None:
    topic, _ = names
    group = f"group-{topic}"
    cluster.create_topic(topic, 1, 1)
    cluster.add_acls(
        allow(AclOperation.WRITE, ResourceType.TOPIC, topic),
        allow(AclOperation.READ, ResourceType.TOPIC, topic),
    )
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    producer.send(topic, b"v").get(timeout=READ_S)
    producer.close()

    def consume() -> list[bytes]:
        """Poll until a record comes (or an error is raised), within READ_S."""
        consumer = KafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
        )
        deadline = time.monotonic() + READ_S
        try:
            while time.monotonic() < deadline:
                batches = consumer.poll(timeout_ms=200)
                if batches:
                    return [r.value for records in batches.values() for r in records]
            return []
        finally:
            consumer.close()

    with pytest.raises(GroupAuthorizationFailedError):
        consume()
    cluster.add_acls(allow(AclOperation.READ, ResourceType.GROUP, group))
    assert consume() == [b"v"]


def test_creating_a_topic_needs_create_and_listing_shows_what_may_be_described(
    cluster: Cluster, names: tuple[str, str]
) -> None:
    allowed, secret = names
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    cluster.add_acls(
        allow(AclOperation.CREATE, ResourceType.TOPIC, allowed),
        allow(AclOperation.DESCRIBE, ResourceType.TOPIC, allowed),
    )
    outcome = admin.create_topics([NewTopic(allowed, 1, 1), NewTopic(secret, 1, 1)])
    outcome[allowed].result(READ_S)
    with pytest.raises(Exception) as refused:
        outcome[secret].result(READ_S)
    error = refused.value.args[0]
    assert (error.code(), error.str()) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "Authorization failed.",
    )
    cluster.create_topic(secret, 1, 1)  # it exists, but ANONYMOUS may not see it
    listed = admin.list_topics(timeout=READ_S).topics
    del admin  # librdkafka's threads end with it, before the module's cluster stops
    assert allowed in listed
    assert secret not in listed
