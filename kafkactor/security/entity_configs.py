"""The user and client entity configs Kafka keeps in ZooKeeper: SCRAM credentials and quotas.

Kafka 2.x keeps a config znode per entity, `{"version":1,"config":{...}}` (every value a
string), at `/config/users/<user>`, `/config/clients/<client-id>` and
`/config/users/<user>/clients/<client-id>`; `<default>` names the default user or client-id
(Kafka's `ConfigEntityName.Default`), and other names are stored sanitized (Kafka's
`Sanitizer`: URL-encoded, `*` as `%2A`, a space as `%20`). A user's config holds its SCRAM
credentials under `SCRAM-SHA-256` / `SCRAM-SHA-512` (ScramCredentialUtils' text form) and its
quotas; a client-id's or a user/client-id pair's config holds quotas only: Kafka's
`producer_byte_rate`, `consumer_byte_rate` (LONG), `request_percentage` and
`controller_mutation_rate` (DOUBLE). A write (`change_entity_config`, Kafka's
`AdminZkClient.changeEntityConfig`) sets the znode then creates the change notification
`{"version":2,"entity_path":"users/alice"}` under `/config/changes`.

`EntityConfigs` is one immutable view of them all (`load_entity_configs` reads it at start;
`with_entity` gives the next one after a notification): the SCRAM credentials by (mechanism,
user) and the quota settings of every entity, defaults included (Kafka's resolution order over
them is the quota manager's).
"""

from __future__ import annotations

import contextlib
import enum
import json
import math
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final

from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.config_changes import (
    CONFIG_CHANGE_PREFIX,
    CONFIG_CHANGES,
    encode_config_change,
)
from kafkactor.security.scram_credential import SCRAM_MECHANISMS, ScramCredential
from kafkactor.security.scram_credentials import (
    MalformedScramCredentialError,
    credential_from_string,
)

__all__ = [
    "CLIENTS",
    "QUOTA_KEYS",
    "USERS",
    "ConfigEntityName",
    "EntityConfigs",
    "EntityName",
    "QuotaEntity",
    "change_entity_config",
    "desanitize",
    "entity_config_path",
    "fetch_entity_config",
    "load_entity_configs",
    "quota_text",
    "sanitize",
]

USERS: Final = "users"  # Kafka's ConfigType.User
CLIENTS: Final = "clients"  # Kafka's ConfigType.Client
CONFIG: Final = "/config"
# Kafka's QuotaConfigs (DynamicConfig.User / Client): the client and user quota keys and types
QUOTA_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "producer_byte_rate": "LONG",
        "consumer_byte_rate": "LONG",
        "request_percentage": "DOUBLE",
        "controller_mutation_rate": "DOUBLE",
    }
)


class ConfigEntityName(enum.Enum):
    """Kafka's `ConfigEntityName.Default`: the default user or client-id (`<default>`)."""

    DEFAULT = "<default>"


EntityName = str | ConfigEntityName  # a user or client-id as the client names it, or the default


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: Java's URLEncoder (UTF-8), then `*` as `%2A` and a space
    as `%20` (URLEncoder's `+`)."""
    return urllib.parse.quote(name, safe="-_.").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Kafka's `Sanitizer.desanitize`: Java's URLDecoder (a `+` is a space)."""
    return urllib.parse.unquote_plus(name, errors="strict")


def zk_name(name: EntityName) -> str:
    """An entity's name in its znode path: `<default>`, or the name sanitized."""
    return name.value if isinstance(name, ConfigEntityName) else sanitize(name)


def from_zk_name(name: str) -> EntityName:
    return ConfigEntityName.DEFAULT if name == ConfigEntityName.DEFAULT.value else desanitize(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Kafka's `ClientQuotaEntity` over users and client-ids: a user, a client-id or both
    (None: that part is not in the entity)."""

    user: EntityName | None = None
    client_id: EntityName | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("Invalid empty client quota entity")

    def config_path(self) -> tuple[str, str]:
        """(entity type, name under it): `users`, `alice/clients/app` for both parts."""
        if self.user is not None and self.client_id is not None:
            return USERS, f"{zk_name(self.user)}/{CLIENTS}/{zk_name(self.client_id)}"
        if self.user is not None:
            return USERS, zk_name(self.user)
        assert self.client_id is not None
        return CLIENTS, zk_name(self.client_id)

    @staticmethod
    def from_path(entity_type: str, name: str) -> QuotaEntity | None:
        """The entity a config path (`users`, `alice/clients/app`) names; None for another
        entity type or a path of another shape."""
        parts = name.split("/")
        if entity_type == CLIENTS and len(parts) == 1 and parts[0]:
            return QuotaEntity(client_id=from_zk_name(parts[0]))
        if entity_type == USERS and len(parts) == 1 and parts[0]:
            return QuotaEntity(user=from_zk_name(parts[0]))
        if entity_type == USERS and len(parts) == 3 and parts[1] == CLIENTS and all(parts):
            return QuotaEntity(user=from_zk_name(parts[0]), client_id=from_zk_name(parts[2]))
        return None


def entity_config_path(entity_type: str, name: str) -> str:
    return f"{CONFIG}/{entity_type}/{name}"


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """Kafka's entity config znode: `{"version":1,"config":{...}}`."""
    body = {"version": 1, "config": {str(k): str(v) for k, v in config.items()}}
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_entity_config(path: str, data: bytes) -> dict[str, str]:
    """An entity's config; raises `MalformedZnodeError` for a znode Kafka would not read."""
    try:
        body = json.loads(data.decode("utf-8")) if data else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise zk_data.MalformedZnodeError(path, f"not JSON ({error})") from None
    if not isinstance(body, dict) or not isinstance(body.get("config", {}), dict):
        raise zk_data.MalformedZnodeError(path, "not a config object")
    return {str(k): str(v) for k, v in body.get("config", {}).items()}


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's config as numbers (Kafka's `fromProps`); a value that is
    not a number is left out."""
    values: dict[str, float] = {}
    for key, value in config.items():
        if key in QUOTA_KEYS:
            with contextlib.suppress(ValueError):
                values[key] = float(value)
    return values


@dataclass(frozen=True, slots=True)
class EntityConfigs:
    """One immutable view of every user / client-id entity config: each entity's config (SCRAM
    keys included), the parsed SCRAM credentials by (mechanism, user), and the credentials that
    did not parse (`malformed`, as `users/<u>:<mechanism>`)."""

    configs: Mapping[QuotaEntity, Mapping[str, str]] = field(default_factory=dict)
    credentials: Mapping[tuple[str, str], ScramCredential] = field(default_factory=dict)
    malformed: tuple[str, ...] = ()

    @staticmethod
    def of(configs: Mapping[QuotaEntity, Mapping[str, str]]) -> EntityConfigs:
        credentials: dict[tuple[str, str], ScramCredential] = {}
        malformed: list[str] = []
        for entity, config in configs.items():
            user = entity.user
            if entity.client_id is not None or not isinstance(user, str):
                continue  # only a named user has credentials
            for mechanism in SCRAM_MECHANISMS:
                text = config.get(mechanism)
                if text is None:
                    continue
                try:
                    credentials[(mechanism, user)] = credential_from_string(text)
                except MalformedScramCredentialError:
                    malformed.append(f"{USERS}/{sanitize(user)}:{mechanism}")
        frozen = {e: MappingProxyType(dict(c)) for e, c in configs.items()}
        return EntityConfigs(
            MappingProxyType(frozen), MappingProxyType(credentials), tuple(malformed)
        )

    def with_entity(self, entity: QuotaEntity, config: Mapping[str, str]) -> EntityConfigs:
        """The view after `entity`'s config became `config` ({}: the entity is gone)."""
        configs = dict(self.configs)
        if config:
            configs[entity] = config
        else:
            configs.pop(entity, None)
        return EntityConfigs.of(configs)

    def scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get((mechanism, user))

    def quota_config(self, entity: QuotaEntity) -> Mapping[str, float]:
        """`entity`'s own quota settings ({} when it has none)."""
        return quota_values(self.configs.get(entity, {}))


def fetch_entity_config(zk: Any, entity_type: str, name: str) -> dict[str, str]:
    """Kafka's `fetchEntityConfig`: the entity's config, {} without its znode."""
    path = entity_config_path(entity_type, name)
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return {}
    return decode_entity_config(path, data)


def _children(zk: Any, path: str) -> list[str]:
    try:
        children: list[str] = zk.get_children(path)
    except NoNodeError:
        return []
    return sorted(children)


def load_entity_configs(zk: Any) -> tuple[EntityConfigs, list[str]]:
    """Every users, clients and users/clients entity config in ZooKeeper (Kafka's
    `fetchAllEntityConfigs` / `fetchAllChildEntityConfigs`), and the paths of the znodes that
    did not decode (skipped). Blocks on ZooKeeper."""
    paths: list[tuple[str, str]] = []
    for user in _children(zk, f"{CONFIG}/{USERS}"):
        paths.append((USERS, user))
        for client in _children(zk, f"{CONFIG}/{USERS}/{user}/{CLIENTS}"):
            paths.append((USERS, f"{user}/{CLIENTS}/{client}"))
    paths += [(CLIENTS, client) for client in _children(zk, f"{CONFIG}/{CLIENTS}")]
    configs: dict[QuotaEntity, dict[str, str]] = {}
    bad: list[str] = []
    for entity_type, name in paths:
        try:
            entity = QuotaEntity.from_path(entity_type, name)  # a name that does not decode
            config = fetch_entity_config(zk, entity_type, name) if entity is not None else {}
        except (zk_data.MalformedZnodeError, ValueError):
            bad.append(entity_config_path(entity_type, name))
            continue
        if entity is not None and config:
            configs[entity] = config
    return EntityConfigs.of(configs), bad


def change_entity_config(zk: Any, entity_type: str, name: str, config: Mapping[str, str]) -> str:
    """Kafka's `AdminZkClient.changeEntityConfig`: `/config/<type>/<name>` set to `config`
    (the whole config: what is not there is removed), then a change notification created;
    returns the notification's path. Blocks on ZooKeeper."""
    path = entity_config_path(entity_type, name)
    data = encode_entity_config(config)
    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            zk.set(path, data)
    zk.ensure_path(CONFIG_CHANGES)
    created: str = zk.create(
        f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(entity_type, name),
        sequence=True,
    )
    return created


def quota_text(key: str, value: float | None) -> str | None:
    """Kafka's AlterClientQuotas conversion of a quota value to its stored string (None: the
    key is removed); raises ValueError for a key that is not a quota key or a LONG value that
    is not whole."""
    kind = QUOTA_KEYS.get(key)
    if kind is None:
        raise ValueError(f"Invalid configuration key {key}")
    if value is None:
        return None
    if kind == "DOUBLE":
        return _java_double(value)
    if not math.isfinite(value):
        raise ValueError(f"Configuration {key} must be a LONG value")
    whole = int(value + 1e-6)
    if abs(whole - value) > 1e-6:
        raise ValueError(f"Configuration {key} must be a LONG value")
    return str(whole)


def _java_double(value: float) -> str:
    """Java's `Double.toString`: plain from 10^-3 up to 10^7, else `<d>.<ddd>E<n>`."""
    value = float(value)
    if value == 0 or 1e-3 <= abs(value) < 1e7 or not math.isfinite(value):
        text = repr(value)
        return {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}.get(text, text)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    power = len(shown) - 1 + exponent
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"
