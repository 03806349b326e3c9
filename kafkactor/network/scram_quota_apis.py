"""KafkaApis' DescribeClientQuotas (api key 48), AlterClientQuotas (49; KIP-546),
DescribeUserScramCredentials (50) and AlterUserScramCredentials (51; KIP-554), as Kafka 2.8
answers them in ZooKeeper mode.

Pure translation: the request becomes one blocking `Admin` step over the broker's
`EntityConfigAdmin` (ZooKeeper: `EntityAdminZkClient`), run by `ZkAdminManager`'s logic, whose
results become the response. AlterUserScramCredentials is the controller's, as in Kafka 2.8:
a broker that is not the active controller (by `/controller`) answers NOT_CONTROLLER for every
user named (the clients send it to the controller). The password arrives salted (salt,
iterations and salted password); the broker stores the credential derived from it. Without an
`EntityConfigAdmin` (a cluster without ZooKeeper) every request fails with
UNKNOWN_SERVER_ERROR. The authorization of these APIs (CLUSTER ALTER / DESCRIBE,
ALTER_CONFIGS / DESCRIBE_CONFIGS) is KafkaApis' authorizer's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import NO_THROTTLE, Admin, Answer, Step
from kafkactor.security.entity_configs import EntityConfigs, QuotaEntity
from kafkactor.security.zk_admin_manager import (
    NONE,
    ApiError,
    QuotaFilterComponent,
    ScramUpsertion,
    UserScramResult,
    ZkAdminManager,
    entity_parts,
)

__all__ = ["EntityConfigAdmin", "ScramQuotaApis"]

# Errors.NOT_CONTROLLER's default message
NOT_CONTROLLER_MESSAGE: Final = "This is not the correct controller for this cluster."
_NO_ADMIN: Final = "this broker keeps no user or client entity configs (no ZooKeeper)"
T = TypeVar("T")


class EntityConfigAdmin(Protocol):
    """The users / clients entity configs as this cluster keeps them (Kafka's AdminZkClient),
    and who the active controller is; may block."""

    def fetch_entity_config(self, entity: QuotaEntity) -> dict[str, str]: ...

    def all_entity_configs(self) -> EntityConfigs: ...

    def change_configs(self, entity: QuotaEntity, config: Any) -> object: ...

    def active_controller(self) -> int | None: ...


class ScramQuotaApis:
    """The four APIs for one broker, over its `EntityConfigAdmin` (None: none kept)."""

    def __init__(self, broker_id: int, admin: EntityConfigAdmin | None) -> None:
        self.broker_id = broker_id
        self.admin = admin
        self.manager = ZkAdminManager(admin) if admin is not None else None

    def _admin_step(
        self, work: Callable[[ZkAdminManager], T], answer: Callable[[T | ApiError], Answer]
    ) -> Step:
        manager = self.manager
        if manager is None:
            return answer(ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, _NO_ADMIN))

        def then(result: Any) -> Step:
            if isinstance(result, Exception):  # the work itself failed: ZooKeeper
                return answer(ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(result) or None))
            return answer(result)

        return Admin(lambda: work(manager), then)

    # -- DescribeUserScramCredentials (50) -----------------------------------------------------

    def describe_user_scram_credentials(self, version: int, body: Any) -> Step:
        users = None if body.users is None else [u.name for u in body.users]
        schema = response_type(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
        result_type = nested(schema, "DescribeUserScramCredentialsResult")
        info_type = nested(schema, "CredentialInfo")

        def entry(r: UserScramResult) -> Any:
            return build(
                result_type,
                user=r.user,
                error_code=r.error.code,
                error_message=r.error.message,
                credential_infos=tuple(
                    build(info_type, mechanism=c.mechanism, iterations=c.iterations)
                    for c in r.credentials
                ),
            )

        def answer(done: tuple[ApiError, list[UserScramResult]] | ApiError) -> Answer:
            error, results = done if isinstance(done, tuple) else (done, [])
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    error_code=error.code,
                    error_message=error.message,
                    results=tuple(entry(r) for r in results),
                )
            )

        return self._admin_step(lambda m: m.describe_user_scram_credentials(users), answer)

    # -- AlterUserScramCredentials (51) --------------------------------------------------------

    def alter_user_scram_credentials(self, version: int, body: Any) -> Step:
        deletions = [(d.name, int(d.mechanism)) for d in body.deletions]
        upsertions = [
            ScramUpsertion(
                name=u.name,
                mechanism=int(u.mechanism),
                iterations=int(u.iterations),
                salt=bytes(u.salt),
                salted_password=bytes(u.salted_password),
            )
            for u in body.upsertions
        ]
        named = sorted({n for n, _ in deletions} | {u.name for u in upsertions})
        broker_id, admin = self.broker_id, self.admin
        schema = response_type(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
        result_type = nested(schema, "AlterUserScramCredentialsResult")

        def work(manager: ZkAdminManager) -> list[tuple[str, ApiError]]:
            assert admin is not None
            if admin.active_controller() != broker_id:  # Kafka 2.8: the controller's API
                refused = ApiError(ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE)
                return [(user, refused) for user in named]
            return manager.alter_user_scram_credentials(upsertions, deletions)

        def answer(done: list[tuple[str, ApiError]] | ApiError) -> Answer:
            results = done if isinstance(done, list) else [(user, done) for user in named]
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    results=tuple(
                        build(
                            result_type,
                            user=user,
                            error_code=error.code,
                            error_message=error.message,
                        )
                        for user, error in results
                    ),
                )
            )

        return self._admin_step(work, answer)

    # -- DescribeClientQuotas (48) -------------------------------------------------------------

    def describe_client_quotas(self, version: int, body: Any) -> Step:
        components = [
            QuotaFilterComponent(c.entity_type, int(c.match_type), c.match) for c in body.components
        ]
        strict = bool(body.strict)
        schema = response_type(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
        entry_type = nested(schema, "EntryData")
        entity_type = nested(schema, "EntityData")
        value_type = nested(schema, "ValueData")

        def answer(
            done: tuple[ApiError, list[tuple[QuotaEntity, dict[str, float]]]] | ApiError,
        ) -> Answer:
            error, found = done if isinstance(done, tuple) else (done, [])
            entries = tuple(
                entry_type(  # every version has these fields (`entity` is build's own name)
                    entity=tuple(
                        build(entity_type, entity_type=kind, entity_name=name)
                        for kind, name in entity_parts(entity)
                    ),
                    values=tuple(
                        build(value_type, key=key, value=value)
                        for key, value in sorted(quotas.items())
                    ),
                )
                for entity, quotas in found
            )
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    error_code=error.code,
                    error_message=error.message,
                    entries=entries if error == NONE else None,
                )
            )

        return self._admin_step(lambda m: m.describe_client_quotas(components, strict), answer)

    # -- AlterClientQuotas (49) ----------------------------------------------------------------

    def alter_client_quotas(self, version: int, body: Any) -> Step:
        entries = [
            (
                [(e.entity_type, e.entity_name) for e in entry.entity],
                [(op.key, None if op.remove else float(op.value)) for op in entry.ops],
            )
            for entry in body.entries
        ]
        validate_only = bool(body.validate_only)
        schema = response_type(ApiKey.ALTER_CLIENT_QUOTAS, version)
        entry_type = nested(schema, "EntryData")
        entity_type = nested(schema, "EntityData")

        def answer(done: list[ApiError] | ApiError) -> Answer:
            errors = done if isinstance(done, list) else [done] * len(entries)
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    entries=tuple(
                        entry_type(  # `entity` is build's own argument's name
                            error_code=error.code,
                            error_message=error.message,
                            entity=tuple(
                                build(entity_type, entity_type=kind, entity_name=name)
                                for kind, name in parts
                            ),
                        )
                        for (parts, _ops), error in zip(entries, errors, strict=True)
                    ),
                )
            )

        return self._admin_step(lambda m: m.alter_client_quotas(entries, validate_only), answer)
