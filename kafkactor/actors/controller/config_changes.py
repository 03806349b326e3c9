"""Config change notifications in ZooKeeper: Kafka's `/config/changes/config_change_<n>`.

Writing an entity's config (Kafka's `AdminZkClient.changeEntityConfig`) sets
`/config/<type>/<name>` (a topic: `/config/topics/<t>`, its overrides alone) and then creates a
persistent sequential `/config/changes/config_change_` znode naming the entity,
`{"version":2,"entity_path":"topics/<t>"}` (version 1, `{"version":1,"entity_type":"topics",
"entity_name":"<t>"}`, is still read). Every broker watches `/config/changes`
(`DynamicConfigManagerActor`) and, for each notification numbered above the last it
processed, re-reads the entity's config and applies it (`ChangeNotificationSequence`).
Notifications older than Kafka's `changeExpirationMs` (15 minutes) are deleted by whoever
processes them, as Kafka's `ZkNodeChangeNotificationListener` does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkactor.actors.controller import zk_data

__all__ = [
    "CHANGE_EXPIRATION_MS",
    "CONFIG_CHANGES",
    "CONFIG_CHANGE_PREFIX",
    "TOPICS",
    "ChangeNotificationSequence",
    "EntityConfigChange",
    "change_topic_config",
    "decode_config_change",
    "encode_config_change",
    "fetch_topic_config",
]

CONFIG_CHANGES: Final = "/config/changes"
CONFIG_CHANGE_PREFIX: Final = "config_change_"
TOPICS: Final = "topics"  # Kafka's ConfigType.Topic: the entity type of a topic's config
# Kafka's ZkNodeChangeNotificationListener.changeExpirationMs default: 15 minutes
CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000


@dataclass(frozen=True, slots=True)
class EntityConfigChange:
    """What one notification names: the entity whose config changed (`topics`, `orders`)."""

    entity_type: str
    entity_name: str


def encode_config_change(entity_type: str, entity_name: str) -> bytes:
    """Kafka 2.8's notification (version 2): `{"version":2,"entity_path":"<type>/<name>"}`."""
    body = {"version": 2, "entity_path": f"{entity_type}/{entity_name}"}
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_config_change(path: str, data: bytes) -> EntityConfigChange:
    """A notification of version 1 or 2 (Kafka's ConfigChangedNotificationHandler); raises
    `MalformedZnodeError` for anything else (Kafka logs such a notification and skips it)."""
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise zk_data.MalformedZnodeError(path, f"not JSON ({error})") from None
    if not isinstance(body, dict):
        raise zk_data.MalformedZnodeError(path, "not a JSON object")
    version = body.get("version")
    if version == 1:
        kind, name = body.get("entity_type"), body.get("entity_name")
        if isinstance(kind, str) and isinstance(name, str) and kind and name:
            return EntityConfigChange(kind, name)
        raise zk_data.MalformedZnodeError(path, "version 1 needs entity_type and entity_name")
    if version == 2:
        entity = body.get("entity_path")
        if isinstance(entity, str) and "/" in entity.strip("/"):
            kind, _, name = entity.strip("/").partition("/")
            return EntityConfigChange(kind, name)
        raise zk_data.MalformedZnodeError(path, f"invalid entity_path {entity!r}")
    raise zk_data.MalformedZnodeError(
        path, f"Config change notification has an unsupported version {version!r}"
    )


def change_number(name: str) -> int | None:
    """The sequence number of `config_change_<n>`; None for a child of another name."""
    digits = name[len(CONFIG_CHANGE_PREFIX) :]
    if not name.startswith(CONFIG_CHANGE_PREFIX) or not digits.isdigit():
        return None
    return int(digits)


class ChangeNotificationSequence:
    """Kafka's `ZkNodeChangeNotificationListener` bookkeeping: which notifications are new.

    `pending(children)` lists the children numbered above the last one processed, in
    sequence order; `processed(name)` records one as done. A fresh sequence (a broker
    starting) processes every notification still there. `obsolete` picks the notifications
    created more than `expiration_ms` ago, which the processing side deletes.
    """

    def __init__(self, expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.expiration_ms = expiration_ms
        self.last_executed = -1

    def pending(self, children: Iterable[str]) -> list[str]:
        numbered = sorted(
            (number, name) for name in children if (number := change_number(name)) is not None
        )
        return [name for number, name in numbered if number > self.last_executed]

    def processed(self, name: str) -> None:
        number = change_number(name)
        if number is not None and number > self.last_executed:
            self.last_executed = number

    def obsolete(self, created_ms: Mapping[str, int], now_ms: int) -> list[str]:
        return sorted(n for n, ctime in created_ms.items() if now_ms - ctime > self.expiration_ms)


def fetch_topic_config(zk: Any, topic: str) -> dict[str, str]:
    """Kafka's `fetchEntityConfig` for a topic: its overrides ({} without the znode)."""
    try:
        data, _ = zk.get(zk_data.topic_config_path(topic))
    except NoNodeError:
        return {}
    return zk_data.decode_topic_config_overrides(topic, data)


def change_topic_config(zk: Any, topic: str, overrides: Mapping[str, str]) -> str:
    """Kafka's `AdminZkClient.changeTopicConfig` once validated: `/config/topics/<t>` set to
    `overrides` (all of them: what is not there reverts to the broker's defaults), then a
    change notification created; returns the notification's path. Blocks on ZooKeeper."""
    path = zk_data.topic_config_path(topic)
    data = zk_data.encode_topic_config_overrides(overrides)
    try:
        zk.set(path, data)
    except NoNodeError:
        with contextlib.suppress(NodeExistsError):
            zk.create(path, data, makepath=True)
            return _notify(zk, topic)
        zk.set(path, data)
    return _notify(zk, topic)


def _notify(zk: Any, topic: str) -> str:
    zk.ensure_path(CONFIG_CHANGES)
    created: str = zk.create(
        f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
        encode_config_change(TOPICS, topic),
        sequence=True,
    )
    return created
