"""ZkAdminManager's SCRAM-credential and client-quota operations over an in-memory store:
Kafka 2.8's checks, codes and messages for what the wire tests do not reach (duplicates,
unknown mechanisms, empty names, filter components)."""

from __future__ import annotations

from collections.abc import Mapping
from types import SimpleNamespace

import pytest

from kafkactor.messages import ErrorCode
from kafkactor.network.scram_quota_apis import ScramQuotaApis
from kafkactor.network.steps import Answer
from kafkactor.security.entity_configs import ConfigEntityName, EntityConfigs, QuotaEntity
from kafkactor.security.scram_credentials import credential_from_password, credential_to_string
from kafkactor.security.zk_admin_manager import (
    NONE,
    ApiError,
    CredentialInfo,
    QuotaFilterComponent,
    ScramUpsertion,
    UserScramResult,
    ZkAdminManager,
)

pytestmark = pytest.mark.timeout(30)

DEFAULT = ConfigEntityName.DEFAULT
SHA256, SHA512 = 1, 2


class MemoryStore:
    """Entity configs in a dict; counts the writes."""

    def __init__(self, configs: Mapping[QuotaEntity, Mapping[str, str]] | None = None) -> None:
        self.configs = {e: dict(c) for e, c in (configs or {}).items()}
        self.writes: list[QuotaEntity] = []

    def fetch_entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        return dict(self.configs.get(entity, {}))

    def all_entity_configs(self) -> EntityConfigs:
        return EntityConfigs.of(self.configs)

    def change_configs(self, entity: QuotaEntity, config: Mapping[str, str]) -> None:
        self.configs[entity] = dict(config)
        self.writes.append(entity)


def _credential(mechanism: str = "SCRAM-SHA-256", iterations: int = 4096) -> str:
    return credential_to_string(credential_from_password(mechanism, "pw", iterations))


def _upsert(name: str, mechanism: int = SHA256, iterations: int = 4096) -> ScramUpsertion:
    return ScramUpsertion(name, mechanism, iterations, b"salt" * 4, b"x" * 32)


def test_describe_answers_each_user_once_with_kafkas_errors() -> None:
    store = MemoryStore(
        {QuotaEntity(user="alice"): {"SCRAM-SHA-512": _credential("SCRAM-SHA-512", 8192)}}
    )
    error, results = ZkAdminManager(store).describe_user_scram_credentials(
        ["alice", "", "twice", "twice", "nobody"]
    )
    assert error == NONE
    assert results == [
        UserScramResult("alice", NONE, (CredentialInfo(SHA512, 8192),)),
        UserScramResult("", ApiError(ErrorCode.RESOURCE_NOT_FOUND, "Username must not be empty")),
        UserScramResult(
            "twice",
            ApiError(
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request: "
                "twice",
            ),
        ),
        UserScramResult(
            "nobody",
            ApiError(
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to describe a user credential that does not exist: nobody",
            ),
        ),
    ]


def test_describing_everyone_lists_only_users_with_credentials_sorted() -> None:
    store = MemoryStore(
        {
            QuotaEntity(user="zed"): {"SCRAM-SHA-256": _credential()},
            QuotaEntity(user="amy"): {"SCRAM-SHA-256": _credential()},
            QuotaEntity(user="quota-only"): {"producer_byte_rate": "10"},
            QuotaEntity(user=DEFAULT): {"producer_byte_rate": "10"},
        }
    )
    _, results = ZkAdminManager(store).describe_user_scram_credentials(None)
    assert [r.user for r in results] == ["amy", "zed"]


def test_alter_refuses_a_users_whole_alteration_as_kafka_does() -> None:
    store = MemoryStore({QuotaEntity(user="has"): {"SCRAM-SHA-256": _credential()}})
    results = ZkAdminManager(store).alter_user_scram_credentials(
        [
            _upsert(""),
            _upsert("unknown", mechanism=7),
            _upsert("few", iterations=4095),
            _upsert("many", iterations=16385),
            _upsert("dup"),
            _upsert("dup"),
            _upsert("ok", SHA512),
        ],
        [("has", SHA512), ("unknown-delete", 0)],
    )
    assert results == [  # deletions' refusals first, as Kafka merges them
        (
            "unknown-delete",
            ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ),
        ("", ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")),
        ("unknown", ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")),
        ("few", ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")),
        ("many", ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")),
        (
            "dup",
            ApiError(
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            ),
        ),
        (
            "has",
            ApiError(
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            ),
        ),
        ("ok", NONE),
    ]
    assert store.writes == [QuotaEntity(user="ok")]  # only the user that passed every check


def test_one_users_deletion_and_upsertion_are_one_write() -> None:
    store = MemoryStore(
        {QuotaEntity(user="u"): {"SCRAM-SHA-256": _credential(), "producer_byte_rate": "5"}}
    )
    results = ZkAdminManager(store).alter_user_scram_credentials(
        [_upsert("u", SHA512, 8192)], [("u", SHA256)]
    )
    assert results == [("u", NONE)]
    assert store.writes == [QuotaEntity(user="u")]
    config = store.configs[QuotaEntity(user="u")]
    assert set(config) == {"SCRAM-SHA-512", "producer_byte_rate"}


@pytest.mark.parametrize(
    ("components", "error"),
    [
        (
            [QuotaFilterComponent("user", 2), QuotaFilterComponent("user", 2)],
            ApiError(ErrorCode.INVALID_REQUEST, "Duplicate user filter component entity type"),
        ),
        (
            [QuotaFilterComponent("", 2)],
            ApiError(ErrorCode.INVALID_REQUEST, "Unexpected empty filter component entity type"),
        ),
        (
            [QuotaFilterComponent("ip", 2)],
            ApiError(ErrorCode.UNSUPPORTED_VERSION, "Custom entity type 'ip' not supported"),
        ),
        (
            [QuotaFilterComponent("user", 5)],
            ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "Unexpected match type: 5"),
        ),
    ],
)
def test_a_filter_kafka_refuses(components: list[QuotaFilterComponent], error: ApiError) -> None:
    assert ZkAdminManager(MemoryStore()).describe_client_quotas(components, False) == (error, [])


def test_filters_match_named_default_and_any_entities() -> None:
    store = MemoryStore(
        {
            QuotaEntity(user="alice"): {"producer_byte_rate": "1", "SCRAM-SHA-256": _credential()},
            QuotaEntity(user=DEFAULT): {"producer_byte_rate": "2"},
            QuotaEntity("alice", "app"): {"consumer_byte_rate": "3"},
            QuotaEntity(client_id="app"): {"request_percentage": "4.5"},
            QuotaEntity(user="bob"): {"SCRAM-SHA-256": _credential()},  # no quota: not listed
        }
    )
    manager = ZkAdminManager(store)

    def found(components: list[QuotaFilterComponent], strict: bool) -> set[QuotaEntity]:
        error, entries = manager.describe_client_quotas(components, strict)
        assert error == NONE
        return {entity for entity, _ in entries}

    any_user = [QuotaFilterComponent("user", 2)]
    assert found(any_user, True) == {QuotaEntity(user="alice"), QuotaEntity(user=DEFAULT)}
    assert found(any_user, False) == {
        QuotaEntity(user="alice"),
        QuotaEntity(user=DEFAULT),
        QuotaEntity("alice", "app"),
    }
    assert found([QuotaFilterComponent("user", 1)], True) == {QuotaEntity(user=DEFAULT)}
    assert found([QuotaFilterComponent("client-id", 0, "app")], False) == {
        QuotaEntity(client_id="app"),
        QuotaEntity("alice", "app"),
    }
    assert found([], False) == set(store.configs) - {QuotaEntity(user="bob")}
    assert found([], True) == set()
    _, entries = manager.describe_client_quotas([QuotaFilterComponent("user", 0, "alice")], True)
    assert entries == [(QuotaEntity(user="alice"), {"producer_byte_rate": 1.0})]


def test_alter_client_quotas_checks_each_entry_alone() -> None:
    store = MemoryStore({QuotaEntity(user="alice"): {"SCRAM-SHA-256": _credential()}})
    manager = ZkAdminManager(store)
    results = manager.alter_client_quotas(
        [
            ([("user", "alice")], [("producer_byte_rate", 100.0)]),
            ([], [("producer_byte_rate", 1.0)]),
            ([("group", "g")], [("producer_byte_rate", 1.0)]),
            ([("client-id", "")], [("producer_byte_rate", 1.0)]),
            ([("user", None)], [("no_such_key", 1.0)]),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 1.0)]),
        ],
        validate_only=False,
    )
    assert results == [
        NONE,
        ApiError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
        ApiError(ErrorCode.INVALID_REQUEST, "Unhandled client quota entity type: group"),
        ApiError(ErrorCode.INVALID_REQUEST, "Empty client-id not supported"),
        ApiError(ErrorCode.INVALID_REQUEST, "Invalid configuration key no_such_key"),
        ApiError(ErrorCode.INVALID_REQUEST, "IP quota entities are not supported by this broker"),
    ]
    # the user's credential is kept beside its new quota
    assert set(store.configs[QuotaEntity(user="alice")]) == {"SCRAM-SHA-256", "producer_byte_rate"}
    assert manager.alter_client_quotas(
        [([("user", "bob")], [("producer_byte_rate", 1.0)])], validate_only=True
    ) == [NONE]
    assert QuotaEntity(user="bob") not in store.configs  # validate_only writes nothing


def test_without_zookeeper_every_request_is_an_unknown_server_error() -> None:
    """A cluster without ZooKeeper keeps no entity configs: the APIs answer at once."""
    apis = ScramQuotaApis(1, None)
    described = apis.describe_user_scram_credentials(0, SimpleNamespace(users=None))
    assert isinstance(described, Answer)
    assert described.body.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    deletion = SimpleNamespace(name="alice", mechanism=1)
    altered = apis.alter_user_scram_credentials(
        0, SimpleNamespace(deletions=[deletion], upsertions=[])
    )
    assert isinstance(altered, Answer)
    assert [(r.user, r.error_code) for r in altered.body.results] == [
        ("alice", ErrorCode.UNKNOWN_SERVER_ERROR)
    ]
