"""The SCRAM-credential and client-quota part of Kafka 2.8's `ZkAdminManager`: what
DescribeUserScramCredentials, AlterUserScramCredentials (KIP-554), DescribeClientQuotas and
AlterClientQuotas (KIP-546) do to the users and clients entity configs, with Kafka's checks,
error codes and messages, over an `EntityConfigStore` (ZooKeeper: `EntityAdminZkClient`).

Its calls block on the store: KafkaApis runs them in an Admin step. Quota entities are users
and client-ids; Kafka 2.8's `ip` entities (connection-rate quotas) are not kept here: a
filter naming them is UNSUPPORTED_VERSION and an alteration INVALID_REQUEST (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from kafkactor.messages import ErrorCode
from kafkactor.security.entity_configs import (
    QUOTA_KEYS,
    ConfigEntityName,
    EntityConfigs,
    EntityName,
    QuotaEntity,
    quota_text,
    quota_values,
)
from kafkactor.security.scram_credential import SCRAM_MECHANISMS
from kafkactor.security.scram_credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    MalformedScramCredentialError,
    ScramMechanismType,
    credential_from_salted,
    credential_from_string,
    credential_to_string,
)

__all__ = [
    "CLIENT_ID",
    "USER",
    "ApiError",
    "CredentialInfo",
    "EntityConfigStore",
    "ScramUpsertion",
    "UserScramResult",
    "ZkAdminManager",
]

USER: Final = "user"  # Kafka's ClientQuotaEntity.USER
CLIENT_ID: Final = "client-id"  # ClientQuotaEntity.CLIENT_ID
IP: Final = "ip"  # ClientQuotaEntity.IP (not kept here)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2  # DescribeClientQuotas' match types

_EMPTY_USER: Final = "Username must not be empty"
_NO_SUCH_USER: Final = "Attempt to describe a user credential that does not exist"
_UNKNOWN_MECHANISM: Final = "Unknown SCRAM mechanism"
_DUPLICATE: Final = "A user credential cannot be altered twice in the same request"
_NO_SUCH_CREDENTIAL: Final = "Attempt to delete a user credential that does not exist"
_UNEXPECTED: Final = "The server experienced an unexpected error when processing the request."


class EntityConfigStore(Protocol):
    """Where the users and clients entity configs are kept (Kafka's AdminZkClient)."""

    def fetch_entity_config(self, entity: QuotaEntity) -> dict[str, str]: ...

    def all_entity_configs(self) -> EntityConfigs: ...

    def change_configs(self, entity: QuotaEntity, config: Mapping[str, str]) -> object: ...


@dataclass(frozen=True, slots=True)
class ApiError:
    """Kafka's `ApiError`: an error code and its message."""

    code: ErrorCode
    message: str | None = None


NONE: Final = ApiError(ErrorCode.NONE)


class _RefusedError(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _invalid(message: str) -> _RefusedError:
    return _RefusedError(ApiError(ErrorCode.INVALID_REQUEST, message))


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    mechanism: int  # Kafka's ScramMechanism type byte
    iterations: int


@dataclass(frozen=True, slots=True)
class UserScramResult:
    """One user of a DescribeUserScramCredentials answer."""

    user: str
    error: ApiError = NONE
    credentials: tuple[CredentialInfo, ...] = ()


@dataclass(frozen=True, slots=True, repr=False)
class ScramUpsertion:
    """One AlterUserScramCredentials upsertion (the password arrives salted)."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    """Kafka's `ClientQuotaFilterComponent`: an entity type and a match (`match_type`)."""

    entity_type: str
    match_type: int
    match: str | None = None


class ZkAdminManager:
    """The users / clients entity-config operations of Kafka's ZkAdminManager."""

    def __init__(self, store: EntityConfigStore) -> None:
        self.store = store

    # -- DescribeUserScramCredentials -------------------------------------------------------------

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None
    ) -> tuple[ApiError, list[UserScramResult]]:
        """Every user with a credential (sorted) when `users` is None or empty; else each user
        once, in the order asked: RESOURCE_NOT_FOUND for an empty name or a user without
        credentials, DUPLICATE_RESOURCE for a user asked twice."""
        try:
            if not users:
                configs = self.store.all_entity_configs().configs
                named = {
                    e.user: c
                    for e, c in configs.items()
                    if e.client_id is None and isinstance(e.user, str)
                }
                found = [_user_result(u, named[u]) for u in sorted(named)]
                return NONE, [r for r in found if r is not None]
            results: dict[str, UserScramResult] = {}
            for user in dict.fromkeys(users):
                if not user:
                    results[user] = UserScramResult(
                        user, ApiError(ErrorCode.RESOURCE_NOT_FOUND, _EMPTY_USER)
                    )
                elif users.count(user) > 1:
                    message = (
                        "Cannot describe SCRAM credentials for the same user twice in a single "
                        f"request: {user}"
                    )
                    results[user] = UserScramResult(
                        user, ApiError(ErrorCode.DUPLICATE_RESOURCE, message)
                    )
                else:
                    result = _user_result(
                        user, self.store.fetch_entity_config(QuotaEntity(user=user))
                    )
                    missing = ApiError(ErrorCode.RESOURCE_NOT_FOUND, f"{_NO_SUCH_USER}: {user}")
                    results[user] = result if result is not None else UserScramResult(user, missing)
            return NONE, list(results.values())
        except Exception as error:  # ZooKeeper failed: the whole request
            return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error) or _UNEXPECTED), []

    # -- AlterUserScramCredentials ----------------------------------------------------------------

    def alter_user_scram_credentials(
        self, upsertions: Sequence[ScramUpsertion], deletions: Sequence[tuple[str, int]]
    ) -> list[tuple[str, ApiError]]:
        """Kafka's checks in its order: an empty user, an unknown mechanism, iterations out
        of 4096..16384 (the user's whole alteration refused); a (user, mechanism) twice
        (DUPLICATE_RESOURCE); deleting a credential the user does not have
        (RESOURCE_NOT_FOUND); then each remaining user's config written once, with all its
        changes. One result per user."""
        refused = _refused_users(upsertions, deletions)
        results = list(refused.items())
        pairs = [(u.name, u.mechanism) for u in upsertions] + list(deletions)
        pairs = [(n, m) for n, m in pairs if n not in refused]
        duplicated = list(dict.fromkeys(n for n, m in pairs if pairs.count((n, m)) > 1))
        results += [(n, ApiError(ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE)) for n in duplicated]
        users = list(dict.fromkeys(n for n, _ in pairs if n not in duplicated))
        configs: dict[str, dict[str, str]] = {}
        for user in users:
            try:
                configs[user] = self.store.fetch_entity_config(QuotaEntity(user=user))
            except Exception as error:
                results.append(
                    (user, ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error) or _UNEXPECTED))
                )
        missing = list(
            dict.fromkeys(
                n for n, m in deletions if n in configs and _mechanism_name(m) not in configs[n]
            )
        )
        results += [
            (n, ApiError(ErrorCode.RESOURCE_NOT_FOUND, _NO_SUCH_CREDENTIAL)) for n in missing
        ]
        for user in (u for u in users if u in configs and u not in missing):
            results.append((user, self._alter_user(user, configs[user], upsertions, deletions)))
        return results

    def _alter_user(
        self,
        user: str,
        config: dict[str, str],
        upsertions: Sequence[ScramUpsertion],
        deletions: Sequence[tuple[str, int]],
    ) -> ApiError:
        """One user's deletions then upsertions applied to its config, written once."""
        try:
            for name, mechanism in deletions:
                if name == user:
                    config.pop(_mechanism_name(mechanism), None)
            for up in upsertions:
                if up.name == user:
                    mechanism_name = _mechanism_name(up.mechanism)
                    credential = credential_from_salted(
                        mechanism_name, up.salt, up.salted_password, up.iterations
                    )
                    config[mechanism_name] = credential_to_string(credential)
            self.store.change_configs(QuotaEntity(user=user), config)
        except Exception as error:
            return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error) or _UNEXPECTED)
        return NONE

    # -- DescribeClientQuotas ---------------------------------------------------------------------

    def describe_client_quotas(
        self, components: Sequence[QuotaFilterComponent], strict: bool
    ) -> tuple[ApiError, list[tuple[QuotaEntity, dict[str, float]]]]:
        """The entities the filter matches that have quota settings, with those settings:
        Kafka's `handleDescribeClientQuotas`. An exact match names an entity (or, match type
        1, the default); match type 2 any entity of that type that names one (the default
        included, as Kafka 2.8's ZooKeeper path matches it); a type not in the filter matches
        only entities without that part when `strict`, any otherwise."""
        try:
            wanted = _filter(components)
            found = []
            for entity, config in self.store.all_entity_configs().configs.items():
                quotas = quota_values(config)
                if (
                    quotas
                    and _matches(wanted.get(USER), entity.user, strict)
                    and _matches(wanted.get(CLIENT_ID), entity.client_id, strict)
                ):
                    found.append((entity, quotas))
            return NONE, found
        except _RefusedError as refused:
            return refused.error, []
        except Exception as error:
            return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error) or _UNEXPECTED), []

    # -- AlterClientQuotas ------------------------------------------------------------------------

    def alter_client_quotas(
        self,
        entries: Sequence[
            tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float | None]]]
        ],
        validate_only: bool,
    ) -> list[ApiError]:
        """Each entry's entity ((type, name or None for the default) pairs) and operations
        ((key, value or None to remove)): Kafka's `alterClientQuotas`, one result per entry."""
        results = []
        for parts, ops in entries:
            try:
                entity = _quota_entity(parts)
                config = self.store.fetch_entity_config(entity)
                for key, value in ops:
                    if value is None:
                        config.pop(key, None)
                    else:
                        config[key] = _quota_value(key, value)
                if not validate_only:
                    self.store.change_configs(entity, config)
                results.append(NONE)
            except _RefusedError as refused:
                results.append(refused.error)
            except ValueError as error:  # DynamicConfig's validation
                results.append(ApiError(ErrorCode.INVALID_REQUEST, str(error)))
            except Exception as error:
                results.append(ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error) or _UNEXPECTED))
        return results


def _refused_users(
    upsertions: Sequence[ScramUpsertion], deletions: Sequence[tuple[str, int]]
) -> dict[str, ApiError]:
    """The users whose alteration Kafka refuses whole: an empty name, an unknown mechanism,
    iterations out of bounds."""
    refused: dict[str, ApiError] = {}
    for name, mechanism in deletions:
        if not name:
            refused[name] = ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER)
        elif ScramMechanismType.from_type(mechanism) is ScramMechanismType.UNKNOWN:
            refused[name] = ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM)
    for up in upsertions:
        if not up.name:
            refused[up.name] = ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, _EMPTY_USER)
        elif ScramMechanismType.from_type(up.mechanism) is ScramMechanismType.UNKNOWN:
            refused[up.name] = ApiError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, _UNKNOWN_MECHANISM)
        elif not MIN_ITERATIONS <= up.iterations <= MAX_ITERATIONS:
            why = "Too many iterations" if up.iterations > MAX_ITERATIONS else "Too few iterations"
            refused[up.name] = ApiError(ErrorCode.UNACCEPTABLE_CREDENTIAL, why)
    return refused


def entity_parts(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """A quota entity as the wire names it: (type, name), None naming the default."""
    parts: list[tuple[str, str | None]] = []
    if entity.user is not None:
        parts.append((USER, _wire_name(entity.user)))
    if entity.client_id is not None:
        parts.append((CLIENT_ID, _wire_name(entity.client_id)))
    return parts


def _wire_name(name: EntityName) -> str | None:
    return None if isinstance(name, ConfigEntityName) else name


def _mechanism_name(mechanism: int) -> str:
    return ScramMechanismType.from_type(mechanism).mechanism_name


def _user_result(user: str, config: Mapping[str, str]) -> UserScramResult | None:
    """Kafka's addToResultsIfHasScramCredential: None for a user without credentials."""
    present = [m for m in SCRAM_MECHANISMS if m in config]
    if not present:
        return None
    try:
        infos = tuple(
            CredentialInfo(
                int(ScramMechanismType.from_name(m)), credential_from_string(config[m]).iterations
            )
            for m in present
        )
    except MalformedScramCredentialError as error:
        return UserScramResult(user, ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error)))
    return UserScramResult(user, NONE, infos)


def _filter(components: Sequence[QuotaFilterComponent]) -> dict[str, QuotaFilterComponent]:
    """Kafka's reading of a filter's components (DescribeClientQuotasRequest.filter, then
    ZkAdminManager's checks), by entity type."""
    for component in components:  # the request's conversion: Java exceptions, unexpected errors
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise _RefusedError(
                ApiError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"Unexpected match type: {component.match_type}",
                )
            )
        if component.match_type == MATCH_EXACT and component.match is None:
            raise _RefusedError(ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, _UNEXPECTED))
    wanted: dict[str, QuotaFilterComponent] = {}
    for component in components:
        kind = component.entity_type
        if kind in (USER, CLIENT_ID, IP) and kind in wanted:
            which = "client" if kind == CLIENT_ID else kind
            raise _invalid(f"Duplicate {which} filter component entity type")
        if kind == "":
            raise _invalid("Unexpected empty filter component entity type")
        if kind not in (USER, CLIENT_ID):
            raise _RefusedError(
                ApiError(
                    ErrorCode.UNSUPPORTED_VERSION, f"Custom entity type '{kind}' not supported"
                )
            )
        wanted[kind] = component
    return wanted


def _matches(component: QuotaFilterComponent | None, name: EntityName | None, strict: bool) -> bool:
    if component is None:
        return name is None or not strict
    if component.match_type == MATCH_SPECIFIED:
        return name is not None
    if component.match_type == MATCH_DEFAULT:
        return name is ConfigEntityName.DEFAULT
    return isinstance(name, str) and name == component.match


def _quota_entity(parts: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """Kafka's `parseAndSanitizeQuotaEntity` for users and client-ids."""
    if not parts:
        raise _invalid("Invalid empty client quota entity")
    names: dict[str, EntityName] = {}
    for kind, name in parts:
        if kind not in (USER, CLIENT_ID):
            if kind == IP:
                raise _invalid("IP quota entities are not supported by this broker")
            raise _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise _invalid(f"Empty {kind} not supported")
        names[kind] = ConfigEntityName.DEFAULT if name is None else name
    return QuotaEntity(user=names.get(USER), client_id=names.get(CLIENT_ID))


def _quota_value(key: str, value: float) -> str:
    """The stored string of a quota value: Kafka's key check and LONG / DOUBLE conversion."""
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        raise _invalid(f"Invalid configuration key {key}")
    text = quota_text(key, value)
    assert text is not None
    return text
