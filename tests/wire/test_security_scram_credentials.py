"""A SCRAM credential altered over the wire is the one the brokers authenticate with: on a
SASL_PLAINTEXT cluster an admin user adds a user with confluent-kafka's
AlterUserScramCredentials; every broker's DynamicConfigManager reads the change notification
into its credential cache, and that user then logs in with SCRAM; once the credential is
deleted, the same login fails with Kafka's authentication error."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._scram import (  # re-exported by confluent_kafka.admin, untyped
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from kafkactor.testing import Cluster
from kafkactor.testing.security import ClusterSecurity
from tests.replication.support import wait_until
from tests.wire.conftest import LISTEN

pytestmark = pytest.mark.timeout(120)

WAIT_S = 15.0
MECHANISM = "SCRAM-SHA-512"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    security = ClusterSecurity(
        protocol="SASL_PLAINTEXT", users={"admin": "admin-secret"}, mechanisms=(MECHANISM,)
    )
    with Cluster(3, listen=LISTEN, security=security) as started:
        wait_until(lambda: started.controller_id() is not None, WAIT_S, "a controller")
        yield started


def _config(cluster: Cluster, user: str, password: str) -> dict[str, Any]:
    config: dict[str, Any] = cluster.client_config(
        "confluent-kafka", user=user, password=password, mechanism=MECHANISM
    )
    return config


def _wait(futures: dict[str, Any]) -> None:
    for future in futures.values():
        future.result(timeout=WAIT_S)


def _produce(cluster: Cluster, user: str, password: str, topic: str) -> KafkaError | None:
    """One record produced as `user`: None when it was acknowledged, else the error."""
    errors: list[KafkaError] = []
    config = {**_config(cluster, user, password), "error_cb": errors.append, "acks": "all"}
    producer = Producer(config)
    delivered: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda error, _msg: delivered.append(error))
    wait_until(lambda: producer.poll(0.1) >= 0 and (delivered or errors), WAIT_S, "an outcome")
    producer.purge()
    producer.flush(1)
    if errors:
        return errors[0]
    return delivered[0]


def test_a_user_added_through_the_api_logs_in_until_deleted(cluster: Cluster) -> None:
    admin = AdminClient(_config(cluster, "admin", "admin-secret"))
    user, password, topic = "newbie", "newbie-secret", f"scram-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    _wait(admin.alter_user_scram_credentials([upsert]))
    # every broker reads the notification; until then a login may still be refused
    wait_until(lambda: _produce(cluster, user, password, topic) is None, WAIT_S, "a login")
    refused = _produce(cluster, user, "wrong-password", topic)
    assert refused is not None
    assert refused.code() == KafkaError._AUTHENTICATION

    deletion = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)
    _wait(admin.alter_user_scram_credentials([deletion]))
    wait_until(
        lambda: (
            (e := _produce(cluster, user, password, topic)) is not None
            and e.code() == KafkaError._AUTHENTICATION
        ),
        WAIT_S,
        "the login refused",
    )
    described = cast(dict[str, Any], admin.describe_user_scram_credentials([user]))
    with pytest.raises(KafkaException):
        described[user].result(timeout=WAIT_S)
