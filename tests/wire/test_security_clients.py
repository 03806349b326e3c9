"""Real clients against secured listeners, at their defaults (librdkafka's host name check on):
kafka-python, confluent-kafka, aiokafka and kcat produce and consume through SASL_SSL (SCRAM,
with an authorizer), SSL and SASL_PLAINTEXT (PLAIN); wrong passwords and unknown users get the
client's own authentication error; a SCRAM user added while the cluster runs logs in; ACLs
decide who reads what (prefixed patterns, deny over allow, super users), each refusal the
client's own authorization error.

One broker per cluster, one cluster per protocol (module-scoped), each test on its own topic.
The settings each client uses come from `Cluster.client_config` (docs/security.md, "Each
client's settings").
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.testing import Cluster
from kafkactor.testing.security import CLIENTS, ClusterSecurity
from tests.wire.support import wait_until

pytestmark = pytest.mark.timeout(240)

KCAT = shutil.which("kcat")
RUN_S = 30.0
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "admin": "admin-secret"}
PROPERTIES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.replication.factor": "1"}


def allow(
    principal: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern), principal, "*", operation, permission
    )


# alice may do anything with topics and groups named alice-* except read alice-denied;
# bob may write the topic "shared" and read the group bob-group, not read "shared"
ACLS = (
    allow(
        "User:alice", AclOperation.ALL, ResourceType.TOPIC, "alice-", pattern=PatternType.PREFIXED
    ),
    allow(
        "User:alice", AclOperation.ALL, ResourceType.GROUP, "alice-", pattern=PatternType.PREFIXED
    ),
    allow(
        "User:alice",
        AclOperation.READ,
        ResourceType.TOPIC,
        "alice-denied",
        permission=AclPermissionType.DENY,
    ),
    allow("User:bob", AclOperation.WRITE, ResourceType.TOPIC, "shared"),
    allow("User:bob", AclOperation.READ, ResourceType.GROUP, "bob-group"),
)


def _cluster(security: ClusterSecurity) -> Iterator[Cluster]:
    with Cluster(brokers=1, security=security, properties=PROPERTIES) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def sasl_ssl() -> Iterator[Cluster]:
    """SASL_SSL with SCRAM users, an authorizer, ACLs and a super user."""
    yield from _cluster(
        ClusterSecurity(
            protocol="SASL_SSL",
            users=PASSWORDS,
            mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"),
            super_users=("admin",),
            authorizer=True,
            acls=ACLS,
        )
    )


@pytest.fixture(scope="module")
def ssl_only() -> Iterator[Cluster]:
    yield from _cluster(ClusterSecurity(protocol="SSL"))


@pytest.fixture(scope="module")
def sasl_plain() -> Iterator[Cluster]:
    yield from _cluster(
        ClusterSecurity(protocol="SASL_PLAINTEXT", users=PASSWORDS, mechanisms=("PLAIN",))
    )


def topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- each client: produce some records, read them back ----------------------------------------


def round_trip(client: str, cluster: Cluster, name: str, user: str | None) -> list[bytes]:
    """Produce three records with `client` as `user`, read them back with it (partition 0
    assigned, from the beginning); the values read."""
    values = [f"{client}-{i}".encode() for i in range(3)]
    if client == "confluent-kafka":
        return _confluent(cluster.client_config(client, user=user), name, values)
    if client == "kafka-python":
        return _kafka_python(cluster.client_config(client, user=user), name, values)
    if client == "aiokafka":
        return asyncio.run(_aiokafka(cluster.client_config(client, user=user), name, values))
    return _kcat(cluster.client_config(client, user=user), name, values)


def _confluent(settings: dict[str, Any], name: str, values: list[bytes]) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(settings)
    for value in values:
        producer.produce(name, value)
    assert producer.flush(RUN_S) == 0
    # assigned, not subscribed; librdkafka still looks up the group's coordinator, so the
    # group is one the user may read (named after the topic)
    consumer = Consumer({**settings, "group.id": name, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(name, 0, 0)])
        read: list[bytes] = []
        wait_until(lambda: _poll_into(consumer, read) >= len(values), RUN_S, "records read")
        return read
    finally:
        consumer.close()


def _poll_into(consumer: Any, read: list[bytes]) -> int:
    message = consumer.poll(0.5)
    if message is not None:
        assert message.error() is None, message.error()
        read.append(message.value())
    return len(read)


def _kafka_python(settings: dict[str, Any], name: str, values: list[bytes]) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**settings)
    try:
        for value in values:
            producer.send(name, value).get(timeout=RUN_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(**settings, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(name, 0)])
        consumer.seek_to_beginning()
        read: list[bytes] = []

        def polled() -> bool:
            for records in consumer.poll(500).values():
                read.extend(r.value for r in records)
            return len(read) >= len(values)

        wait_until(polled, RUN_S, "records read")
        return read
    finally:
        consumer.close()


async def _aiokafka(settings: dict[str, Any], name: str, values: list[bytes]) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    producer = AIOKafkaProducer(**settings)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(name, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(**settings, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(name, 0)])
        await consumer.seek_to_beginning()
        read: list[bytes] = []
        async with asyncio.timeout(RUN_S):
            while len(read) < len(values):
                batches = await consumer.getmany(timeout_ms=500)
                read.extend(r.value for records in batches.values() for r in records)
        return read
    finally:
        await consumer.stop()


def kcat(
    arguments: list[str], *more: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    return subprocess.run(
        [KCAT, *arguments, *more], input=stdin, capture_output=True, timeout=RUN_S, check=False
    )


def _kcat(arguments: list[str], name: str, values: list[bytes]) -> list[bytes]:
    produced = kcat(arguments, "-P", "-t", name, stdin=b"\n".join(values) + b"\n")
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = kcat(arguments, "-C", "-t", name, "-o", "beginning", "-c", str(len(values)))
    assert consumed.returncode == 0, consumed.stderr.decode()
    return consumed.stdout.splitlines()


def _skip_missing(client: str) -> None:
    if client == "kcat" and KCAT is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")


# kcat 1.7.1 (Debian's, librdkafka 2.0.2) sends its SCRAM nonce twice in its final message,
# which Kafka accepts (the nonce need only end with the server's: scram_server.py)
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_over_sasl_ssl_with_scram(
    client: str, sasl_ssl: Cluster
) -> None:
    _skip_missing(client)
    name = topic("alice-roundtrip")
    sasl_ssl.create_topic(name, 1, 1)

    assert sorted(round_trip(client, sasl_ssl, name, "alice")) == sorted(
        f"{client}-{i}".encode() for i in range(3)
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_over_ssl(client: str, ssl_only: Cluster) -> None:
    _skip_missing(client)
    name = topic("ssl")
    ssl_only.create_topic(name, 1, 1)

    assert len(round_trip(client, ssl_only, name, None)) == 3


@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_over_sasl_plaintext_with_plain(
    client: str, sasl_plain: Cluster
) -> None:
    _skip_missing(client)
    name = topic("plain")
    sasl_plain.create_topic(name, 1, 1)

    assert len(round_trip(client, sasl_plain, name, "bob")) == 3


# -- authentication failures: each client's own error ------------------------------------------


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "not-her-password"), ("mallory", "anything")]
)
def test_confluent_kafka_is_refused_with_its_authentication_error(
    sasl_ssl: Cluster, user: str, password: str
) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    settings = sasl_ssl.client_config("confluent-kafka", user=user, password=password)
    producer = Producer({**settings, "error_cb": errors.append})
    producer.produce("alice-refused", b"x")
    wait_until(
        lambda: (
            producer.poll(0.2) >= 0 and any(e.code() == KafkaError._AUTHENTICATION for e in errors)
        ),
        RUN_S,
        "an authentication error",
    )
    refused = next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed" in refused.str()
    producer.purge()


def test_kafka_python_is_refused_with_sasl_authentication_failed(
    sasl_ssl: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    settings = sasl_ssl.client_config("kafka-python", user="alice", password="wrong")
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaTimeoutError):
        KafkaProducer(**settings, bootstrap_timeout_ms=3000)
    assert "SaslAuthenticationFailed" in caplog.text


def test_aiokafka_is_refused_with_sasl_authentication_failed(
    sasl_ssl: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    settings = sasl_ssl.client_config("aiokafka", user="mallory", password="anything")

    async def start() -> None:
        producer = AIOKafkaProducer(**settings)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(KafkaConnectionError):
        asyncio.run(start())
    assert "SaslAuthenticationFailed" in caplog.text


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_is_refused_with_an_authentication_error(sasl_ssl: Cluster) -> None:
    arguments = sasl_ssl.client_config("kcat", user="alice", password="wrong")
    listed = kcat(arguments, "-L", "-m", "5")

    assert listed.returncode != 0
    assert "Authentication failed" in listed.stderr.decode()


def test_a_scram_user_added_while_the_cluster_runs_logs_in(sasl_ssl: Cluster) -> None:
    name = topic("carol-live")
    sasl_ssl.create_topic(name, 1, 1)
    sasl_ssl.add_acls(
        allow("User:carol", AclOperation.ALL, ResourceType.TOPIC, name),
        allow("User:carol", AclOperation.READ, ResourceType.GROUP, name),
    )
    sasl_ssl.add_user("carol", "carol-secret")

    def logged_in() -> bool:
        try:
            return len(round_trip("confluent-kafka", sasl_ssl, name, "carol")) == 3
        except AssertionError:
            return False

    wait_until(logged_in, RUN_S * 2, "carol's records read back")


# -- ACLs: prefixed patterns, deny over allow, super users --------------------------------------


def _confluent_read_error(cluster: Cluster, user: str, name: str, group: str) -> Any:
    """What a subscribed confluent-kafka consumer of `user` reports reading `name` in
    `group`: the first error, or None when a record arrived."""
    from confluent_kafka import Consumer

    settings = cluster.client_config("confluent-kafka", user=user)
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest"})
    seen: list[Any] = []
    try:
        consumer.subscribe([name])

        def answered() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                seen.append(message.error())
            return bool(seen)

        wait_until(answered, RUN_S, "a record or an error")
        return seen[0]
    finally:
        consumer.close()


def test_a_prefixed_acl_lets_alice_read_every_topic_and_group_of_her_prefix(
    sasl_ssl: Cluster,
) -> None:
    name = topic("alice-prefixed")
    sasl_ssl.create_topic(name, 1, 1)
    round_trip("confluent-kafka", sasl_ssl, name, "alice")

    assert _confluent_read_error(sasl_ssl, "alice", name, topic("alice-group")) is None


def test_deny_overrides_allow(sasl_ssl: Cluster) -> None:
    from confluent_kafka import KafkaError

    sasl_ssl.create_topic("alice-denied", 1, 1)
    error = _confluent_read_error(sasl_ssl, "alice", "alice-denied", topic("alice-group"))

    assert error is not None
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def shared(sasl_ssl: Cluster) -> str:
    """The topic bob may write but not read."""
    sasl_ssl.create_topic("shared", 1, 1)
    return "shared"


def test_a_consumer_without_read_on_the_topic_gets_topic_authorization_failed(
    sasl_ssl: Cluster, shared: str
) -> None:
    from confluent_kafka import KafkaError

    error = _confluent_read_error(sasl_ssl, "bob", shared, "bob-group")

    assert error is not None
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_without_read_on_the_topic_raises_topic_authorization_failed(
    sasl_ssl: Cluster, shared: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import TopicAuthorizationFailedError

    consumer = KafkaConsumer(
        **sasl_ssl.client_config("kafka-python", user="bob"), enable_auto_commit=False
    )
    try:
        consumer.assign([TopicPartition(shared, 0)])
        with pytest.raises(TopicAuthorizationFailedError):
            wait_until(lambda: bool(consumer.poll(500)), RUN_S, "an authorization error")
    finally:
        consumer.close()


def test_a_consumer_without_read_on_its_group_gets_group_authorization_failed(
    sasl_ssl: Cluster,
) -> None:
    from confluent_kafka import KafkaError

    name = topic("alice-grouped")
    sasl_ssl.create_topic(name, 1, 1)
    error = _confluent_read_error(sasl_ssl, "alice", name, "someone-elses-group")

    assert error is not None
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_a_super_user_needs_no_acl(sasl_ssl: Cluster) -> None:
    name = topic("nobodys")
    sasl_ssl.create_topic(name, 1, 1)

    assert len(round_trip("kafka-python", sasl_ssl, name, "admin")) == 3
