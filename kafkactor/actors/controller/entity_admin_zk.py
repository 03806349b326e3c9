"""SCRAM credentials and client quotas written to ZooKeeper: Kafka's `AdminZkClient` for the
users and clients entities (`changeConfigs` / `changeUserOrUserClientIdConfig` /
`changeClientIdConfig`, what `kafka-configs --alter --entity-type users|clients` does).

Every change reads the entity's config, changes it, writes the whole config back to its znode
and then creates the change notification, so every broker's DynamicConfigManager re-reads the
entity (`entity_configs.change_entity_config`). As Kafka's, a user's config may hold SCRAM
credentials and quotas, a client-id's or a user/client-id pair's quotas only; any other key is
refused before anything is written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from kazoo.exceptions import NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.security.entity_configs import (
    QUOTA_KEYS,
    EntityConfigs,
    QuotaEntity,
    change_entity_config,
    fetch_entity_config,
    load_entity_configs,
    quota_text,
)
from kafkactor.security.scram_credential import SCRAM_MECHANISMS, ScramCredential
from kafkactor.security.scram_credentials import (
    DEFAULT_ITERATIONS,
    credential_from_password,
    credential_to_string,
)

__all__ = ["EntityAdminZkClient", "validate_entity_config"]

_USER_KEYS: Final = frozenset(QUOTA_KEYS) | frozenset(SCRAM_MECHANISMS)


def validate_entity_config(entity: QuotaEntity, config: Mapping[str, str]) -> None:
    """Kafka's `DynamicConfig.User.validate` / `DynamicConfig.Client.validate`: a named or
    default user's config may hold quota keys and (a named user) SCRAM credentials, the rest
    quota keys only; raises ValueError naming the unknown keys."""
    named_user = entity.client_id is None and isinstance(entity.user, str)
    allowed = _USER_KEYS if named_user else frozenset(QUOTA_KEYS)
    unknown = sorted(k for k in config if k not in allowed)
    if unknown:
        raise ValueError(f"Unknown Dynamic Configuration: Set({', '.join(unknown)}).")


class EntityAdminZkClient:
    """Kafka's `AdminZkClient` for users and clients entity configs, over a ZooKeeper client
    (`zk()` gives the current one). Its calls block on ZooKeeper; one lock orders this
    process's read-modify-writes (Kafka's writers do not guard against a concurrent writer in
    another process either)."""

    def __init__(self, zk: Callable[[], Any]) -> None:
        self._zk = zk
        self._lock = threading.Lock()

    def fetch_entity_config(self, entity: QuotaEntity) -> dict[str, str]:
        """Kafka's `fetchEntityConfig`: the entity's config, {} without its znode."""
        return fetch_entity_config(self._zk(), *entity.config_path())

    def all_entity_configs(self) -> EntityConfigs:
        """Kafka's `fetchAllEntityConfigs` (users, clients) and `fetchAllChildEntityConfigs`
        (users/<u>/clients); znodes that do not decode are left out."""
        configs, _bad = load_entity_configs(self._zk())
        return configs

    def change_configs(self, entity: QuotaEntity, config: Mapping[str, str]) -> str:
        """Kafka's `changeConfigs`: `config` checked, written whole, then notified; returns
        the notification's path."""
        validate_entity_config(entity, config)
        return change_entity_config(self._zk(), *entity.config_path(), config)

    def alter_entity_config(
        self, entity: QuotaEntity, change: Callable[[dict[str, str]], None]
    ) -> dict[str, str]:
        """Read the entity's config, let `change` edit it, write it back (and notify); returns
        the config written."""
        with self._lock:
            config = self.fetch_entity_config(entity)
            change(config)
            self.change_configs(entity, config)
            return config

    # -- SCRAM credentials ------------------------------------------------------------------------

    def upsert_scram_credential(
        self, user: str, mechanism: str, credential: ScramCredential
    ) -> None:
        """A user's credential for `mechanism`, set (added or replaced)."""
        _check_mechanism(mechanism)
        text = credential_to_string(credential)
        self.alter_entity_config(QuotaEntity(user=user), lambda c: c.__setitem__(mechanism, text))

    def set_scram_credential(
        self, user: str, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS
    ) -> None:
        """`kafka-configs --alter --add-config 'SCRAM-SHA-256=[iterations=..,password=..]'`:
        a credential made from `password` (a random salt). Raises ValueError for a mechanism
        or an iteration count Kafka refuses."""
        self.upsert_scram_credential(
            user, mechanism, credential_from_password(mechanism, password, iterations)
        )

    def delete_scram_credential(self, user: str, mechanism: str) -> bool:
        """`kafka-configs --alter --delete-config SCRAM-SHA-256`: False when the user had no
        credential for `mechanism` (nothing written)."""
        _check_mechanism(mechanism)
        entity = QuotaEntity(user=user)
        with self._lock:
            config = self.fetch_entity_config(entity)
            if config.pop(mechanism, None) is None:
                return False
            self.change_configs(entity, config)
            return True

    # -- quotas -----------------------------------------------------------------------------------

    def set_client_quotas(
        self, entity: QuotaEntity, quotas: Mapping[str, float | None]
    ) -> dict[str, str]:
        """`kafka-configs --alter --add-config producer_byte_rate=1024 --entity-type users
        --entity-name alice [--entity-type clients --entity-name app]`: each key set (a LONG
        key written as an integer) or, for None, removed. Raises ValueError for a key that is
        not a quota key or a LONG value that is not whole."""
        values = {key: quota_text(key, value) for key, value in quotas.items()}

        def change(config: dict[str, str]) -> None:
            for key, text in values.items():
                if text is None:
                    config.pop(key, None)
                else:
                    config[key] = text

        return self.alter_entity_config(entity, change)

    # -- the controller ---------------------------------------------------------------------------

    def active_controller(self) -> int | None:
        """The broker `/controller` names (None while there is none)."""
        try:
            data, _ = self._zk().get(zk_data.CONTROLLER)
        except NoNodeError:
            return None
        try:
            return zk_data.decode_controller(data)
        except zk_data.MalformedZnodeError:
            return None


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"Unknown SCRAM mechanism {mechanism}")
