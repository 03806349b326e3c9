"""SCRAM credentials (KIP-554: DescribeUserScramCredentials 50, AlterUserScramCredentials 51)
with confluent-kafka's AdminClient at its defaults, and client quotas (KIP-546:
DescribeClientQuotas 48, AlterClientQuotas 49) over the wire protocol itself (neither
confluent-kafka nor kafka-python has a client-quota admin call), against one cluster on the
embedded ZooKeeper. What the APIs write is checked where Kafka keeps it: `/config/users/<u>`
and `/config/clients/<c>` with their change notifications.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._scram import (  # re-exported by confluent_kafka.admin, untyped
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.admin import KafkaAdminClient

from kafkactor import zk_model
from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.security.scram_credentials import credential_from_password, credential_from_string
from kafkactor.testing import Cluster
from tests.network.wire import WireClient, make, nested, request_schema
from tests.replication.support import wait_until
from tests.wire.conftest import LISTEN

pytestmark = pytest.mark.timeout(90)

WAIT_S = 15.0
SALT = b"a-salt-of-sixteen"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, listen=LISTEN) as started:
        wait_until(lambda: started.controller_id() is not None, WAIT_S, "a controller")
        yield started


@pytest.fixture(scope="module")
def zk(cluster: Cluster) -> Iterator[Any]:
    client = zk_model.connect("embedded", embedded=cluster.embedded_zookeeper)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def _user_config(zk: Any, user: str) -> dict[str, str]:
    data, _ = zk.get(f"/config/users/{user}")
    config: dict[str, str] = json.loads(data)["config"]
    return config


def _alter(admin: AdminClient, *alterations: Any) -> dict[str, KafkaError | None]:
    """Each user's outcome: None, or the KafkaError its future raised."""
    outcome: dict[str, KafkaError | None] = {}
    for user, future in admin.alter_user_scram_credentials(list(alterations)).items():
        try:
            future.result(timeout=WAIT_S)
            outcome[user] = None
        except KafkaException as error:
            outcome[user] = error.args[0]
    return outcome


def _described(admin: AdminClient, *users: str) -> dict[str, Future[Any]]:
    """describe_user_scram_credentials of named users: a future per user."""
    return cast(dict[str, Future[Any]], admin.describe_user_scram_credentials(list(users)))


def _upsert(user: str, mechanism: ScramMechanism, iterations: int, password: bytes) -> Any:
    return UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism, iterations), password, SALT
    )


# -- SCRAM credentials with confluent-kafka ----------------------------------------------------


def test_credentials_altered_then_described_are_stored_as_kafka_stores_them(
    admin: AdminClient, zk: Any
) -> None:
    outcome = _alter(
        admin,
        _upsert("alice", ScramMechanism.SCRAM_SHA_256, 8192, b"alice-secret"),
        _upsert("alice", ScramMechanism.SCRAM_SHA_512, 4096, b"alice-secret"),
        _upsert("bob", ScramMechanism.SCRAM_SHA_512, 4096, b"bob-secret"),
    )
    assert outcome == {"alice": None, "bob": None}
    described = _described(admin, "alice", "bob")
    alice = described["alice"].result(timeout=WAIT_S)
    infos = {(i.mechanism, i.iterations) for i in alice.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 8192), (ScramMechanism.SCRAM_SHA_512, 4096)}
    bob = described["bob"].result(timeout=WAIT_S)
    assert [(i.mechanism, i.iterations) for i in bob.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 4096)
    ]
    # the client sent only the salted password; the broker stored StoredKey and ServerKey
    stored = credential_from_string(_user_config(zk, "alice")["SCRAM-SHA-256"])
    assert stored == credential_from_password("SCRAM-SHA-256", "alice-secret", 8192, salt=SALT)
    notified = [zk.get(f"/config/changes/{c}")[0] for c in zk.get_children("/config/changes")]
    assert b'{"version":2,"entity_path":"users/alice"}' in notified

    everyone = cast(Future[Any], admin.describe_user_scram_credentials()).result(timeout=WAIT_S)
    assert {"alice", "bob"} <= set(everyone)


def test_kafkas_errors_for_unknown_users_and_unacceptable_credentials(
    admin: AdminClient, zk: Any
) -> None:
    described = _described(admin, "nobody")
    with pytest.raises(KafkaException) as missing:
        described["nobody"].result(timeout=WAIT_S)
    assert missing.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND
    assert "Attempt to describe a user credential that does not exist: nobody" in str(missing.value)
    outcome = _alter(admin, _upsert("carol", ScramMechanism.SCRAM_SHA_256, 20000, b"pw"))
    error = outcome["carol"]
    assert error is not None
    assert error.code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert "Too many iterations" in error.str()
    outcome = _alter(admin, UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512))
    error = outcome["carol"]
    assert error is not None
    assert error.code() == KafkaError.RESOURCE_NOT_FOUND
    assert "Attempt to delete a user credential that does not exist" in error.str()
    assert zk.exists("/config/users/carol") is None  # nothing written


def test_a_deleted_credential_is_gone(admin: AdminClient, zk: Any) -> None:
    assert _alter(admin, _upsert("dave", ScramMechanism.SCRAM_SHA_256, 4096, b"pw")) == {
        "dave": None
    }
    assert _alter(admin, UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)) == {
        "dave": None
    }
    assert _user_config(zk, "dave") == {}
    with pytest.raises(KafkaException) as gone:
        _described(admin, "dave")["dave"].result(timeout=WAIT_S)
    assert gone.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


def test_kafka_python_describes_the_credentials(cluster: Cluster, admin: AdminClient) -> None:
    """kafka-python 3 sends DescribeUserScramCredentials to any broker: each answers it."""
    assert _alter(admin, _upsert("frank", ScramMechanism.SCRAM_SHA_512, 10000, b"pw")) == {
        "frank": None
    }
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = client.describe_user_scram_credentials(["frank", "nobody"])
    finally:
        client.close()
    assert described["frank"]["error"] is None
    assert [
        (int(c["mechanism"]), c["iterations"]) for c in described["frank"]["credential_infos"]
    ] == [(2, 10000)]
    assert described["nobody"]["error"] == (
        "Attempt to describe a user credential that does not exist: nobody"
    )


def test_a_broker_that_is_not_the_controller_refuses_to_alter(cluster: Cluster) -> None:
    controller = wait_until(cluster.controller_id, WAIT_S, "a controller")
    other = next(b for b in cluster.broker_ids if b != controller)
    host, port = cluster.bootstrap_servers.split(",")[other - 1].rsplit(":", 1)
    schema = request_schema(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)
    deletion = nested(schema, "ScramCredentialDeletion")
    body = make(schema, deletions=(make(deletion, name="erin", mechanism=1),), upsertions=())
    with WireClient(host, int(port)) as client:
        response = client.call(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    (result,) = response.results
    assert (result.user, result.error_code) == ("erin", ErrorCode.NOT_CONTROLLER)


# -- client quotas over the wire ---------------------------------------------------------------


def _alter_quotas(client: WireClient, version: int, entries: list[tuple[Any, Any]]) -> Any:
    schema = request_schema(ApiKey.ALTER_CLIENT_QUOTAS, version)
    entity, op, entry = (nested(schema, n) for n in ("EntityData", "OpData", "EntryData"))
    body = make(
        schema,
        entries=tuple(
            entry(
                entity=tuple(make(entity, entity_type=t, entity_name=n) for t, n in parts),
                ops=tuple(
                    make(op, key=k, value=v if v is not None else 0.0, remove=v is None)
                    for k, v in ops
                ),
            )
            for parts, ops in entries
        ),
        validate_only=False,
    )
    return client.call(ApiKey.ALTER_CLIENT_QUOTAS, version, body)


def _describe_quotas(
    client: WireClient, version: int, components: list[tuple[str, int, str | None]], strict: bool
) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    component = nested(schema, "ComponentData")
    body = make(
        schema,
        components=tuple(
            make(component, entity_type=t, match_type=m, match=n) for t, m, n in components
        ),
        strict=strict,
    )
    return client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body)


def _entries(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


@pytest.mark.parametrize("version", [0, 1])
def test_client_quotas_altered_then_described(cluster: Cluster, zk: Any, version: int) -> None:
    user, client_id = f"quota-user-{version}", f"quota-app-{version}"
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        altered = _alter_quotas(
            client,
            version,
            [
                ([("user", user)], [("producer_byte_rate", 1024.0)]),
                ([("user", user), ("client-id", client_id)], [("consumer_byte_rate", 2048.0)]),
                ([("client-id", None)], [("request_percentage", 50.0)]),  # the default client
                ([("user", user)], [("producer_byte_rate", 1.5)]),  # a LONG key
                ([("user", "")], [("producer_byte_rate", 1.0)]),
            ],
        )
        errors = [(e.error_code, e.error_message) for e in altered.entries]
        assert errors[:3] == [(ErrorCode.NONE, None)] * 3
        assert errors[3] == (
            ErrorCode.INVALID_REQUEST,
            "Configuration producer_byte_rate must be a LONG value",
        )
        assert errors[4] == (ErrorCode.INVALID_REQUEST, "Empty user not supported")
        assert _user_config(zk, user) == {"producer_byte_rate": "1024"}

        exact = _describe_quotas(client, version, [("user", 0, user)], strict=False)
        assert exact.error_code == ErrorCode.NONE
        assert _entries(exact) == {
            (("user", user),): {"producer_byte_rate": 1024.0},
            (("client-id", client_id), ("user", user)): {"consumer_byte_rate": 2048.0},
        }
        only_user = _describe_quotas(client, version, [("user", 0, user)], strict=True)
        assert _entries(only_user) == {(("user", user),): {"producer_byte_rate": 1024.0}}
        default = _describe_quotas(client, version, [("client-id", 1, None)], strict=True)
        assert _entries(default)[(("client-id", None),)] == {"request_percentage": 50.0}

        removed = _alter_quotas(
            client, version, [([("user", user)], [("producer_byte_rate", None)])]
        )
        assert removed.entries[0].error_code == ErrorCode.NONE
        gone = _describe_quotas(client, version, [("user", 0, user)], strict=True)
        assert _entries(gone) == {}

        bad = _describe_quotas(client, version, [("group", 2, None)], strict=False)
        assert bad.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert bad.error_message == "Custom entity type 'group' not supported"
        assert bad.entries is None
