"""Kafka's ZooKeeper paths and JSON payloads: what brokers and the controller write and read."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from typing import Any

from kafkactor.actors.controller.broker_registration import (
    BrokerRegistration as BrokerRegistration,  # noqa: PLC0414 - re-exported
)
from kafkactor.actors.controller.znode_error import (
    MalformedZnodeError as MalformedZnodeError,  # noqa: PLC0414 - re-exported
)
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.kafka_uuid import InvalidUuidError, uuid_from_string, uuid_to_string
from kafkactor.storage import LogConfig
from kafkactor.storage.topic_config import (
    TOPIC_CONFIGS,
    TopicConfigError,
    format_topic_config,
    parse_topic_configs,
)
from kafkactor.storage.topic_config import (
    UnknownTopicConfigError as UnknownTopicConfigError,  # noqa: PLC0414 - re-exported
)

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
CONFIG_TOPICS = "/config/topics"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"  # a child per topic marked for deletion


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    """`/admin/delete_topics/<topic>`: created (empty) to ask the controller to delete it."""
    return f"{ADMIN_DELETE_TOPICS}/{topic}"


def _load(path: str, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedZnodeError(path, f"not JSON ({error})") from None


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _int(path: str, value: Any, what: str) -> int:
    if type(value) is not int:
        raise MalformedZnodeError(path, f"{what} is {value!r}, not an integer")
    return value


def _int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise MalformedZnodeError(path, f"{what} is {value!r}, not a list")
    return tuple(_int(path, item, what) for item in value)


def _object(path: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedZnodeError(path, f"expected a JSON object, got {value!r}")
    return value


# -- /brokers/ids/<id> -----------------------------------------------------------------------------


# BrokerRegistration (Kafka's BrokerIdZNode with its listeners) has a module of its own


# -- /controller and /controller_epoch -----------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dump({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    """The controller's broker id."""
    body = _object(CONTROLLER, _load(CONTROLLER, data))
    return _int(CONTROLLER, body.get("brokerid"), "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise MalformedZnodeError(CONTROLLER_EPOCH, f"{data!r} is not an integer") from None


# -- /brokers/topics/<topic> and its partition states --------------------------------------------


def encode_assignment(
    assignment: Mapping[int, tuple[int, ...]], topic_id: uuid.UUID | None = None
) -> bytes:
    """A new topic's `/brokers/topics/<t>`: with its id, Kafka 2.8's TopicZNode version 3
    (partitions, empty adding/removing replicas, `topic_id` in Kafka's base64 form, KIP-516);
    without, the version 1 an older tool writes."""
    partitions = {str(p): list(r) for p, r in sorted(assignment.items())}
    if topic_id is None:
        return _dump({"version": 1, "partitions": partitions})
    return _dump(
        {
            "version": 3,
            "partitions": partitions,
            "adding_replicas": {},
            "removing_replicas": {},
            "topic_id": uuid_to_string(topic_id),
        }
    )


def decode_topic_id(topic: str, data: bytes) -> uuid.UUID | None:
    """The topic id a `/brokers/topics/<t>` holds (None when written without one)."""
    path = topic_path(topic)
    body = _object(path, _load(path, data))
    found = body.get("topic_id")
    if found is None:
        return None
    if not isinstance(found, str):
        raise MalformedZnodeError(path, f"topic_id is {found!r}, not a string")
    try:
        return uuid_from_string(found)
    except InvalidUuidError as error:
        raise MalformedZnodeError(path, str(error)) from None


def encode_topic_id_over(topic: str, data: bytes, topic_id: uuid.UUID) -> bytes:
    """`/brokers/topics/<t>` as it was (`data`) with `topic_id` added (version 3), as Kafka
    2.8's controller writes it to a topic an older tool created (its other fields kept)."""
    path = topic_path(topic)
    body = dict(_object(path, _load(path, data)))
    version = body.get("version")
    body["version"] = version if type(version) is int and version > 3 else 3
    body["topic_id"] = uuid_to_string(topic_id)
    return _dump(body)


def encode_assignment_over(
    topic: str, data: bytes, assignment: Mapping[int, tuple[int, ...]]
) -> bytes:
    """`/brokers/topics/<t>` as it was (`data`) with its partitions replaced by `assignment`:
    the other fields a Kafka broker or tool wrote (version, topic_id, adding_replicas,
    removing_replicas) are kept, as Kafka's AdminZkClient keeps them when it adds partitions."""
    path = topic_path(topic)
    body = dict(_object(path, _load(path, data)))
    body["partitions"] = {str(p): list(r) for p, r in sorted(assignment.items())}
    return _dump(body)


def decode_assignment(topic: str, data: bytes) -> dict[int, tuple[int, ...]]:
    path = topic_path(topic)
    body = _object(path, _load(path, data))
    partitions = _object(path, body.get("partitions"))
    assignment: dict[int, tuple[int, ...]] = {}
    for key, replicas in partitions.items():
        if not (key.isascii() and key.isdigit()):
            raise MalformedZnodeError(path, f"partition {key!r} is not a number")
        assignment[int(key)] = _int_list(path, replicas, f"replicas of partition {key}")
    return assignment


def encode_partition_state(state: PartitionLeaderState) -> bytes:
    """`/brokers/topics/<t>/partitions/<p>/state`: leader, leader epoch, ISR, controller epoch."""
    return _dump(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(
    topic: str,
    partition: int,
    data: bytes,
    *,
    replicas: tuple[int, ...] = (),
    zk_version: int = 0,
) -> PartitionLeaderState:
    """A partition's state znode, with the assignment and znode version the caller knows."""
    path = partition_state_path(topic, partition)
    body = _object(path, _load(path, data))
    return PartitionLeaderState(
        topic=topic,
        partition=partition,
        leader=_int(path, body.get("leader"), "leader"),
        leader_epoch=_int(path, body.get("leader_epoch"), "leader_epoch"),
        isr=_int_list(path, body.get("isr"), "isr"),
        controller_epoch=_int(path, body.get("controller_epoch"), "controller_epoch"),
        replicas=replicas,
        zk_version=zk_version,
    )


# -- /isr_change_notification ----------------------------------------------------------------


def encode_isr_change(partitions: list[TopicPartition]) -> bytes:
    return _dump(
        {
            "version": 1,
            "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions],
        }
    )


def decode_isr_change(path: str, data: bytes) -> list[TopicPartition]:
    body = _object(path, _load(path, data))
    entries = body.get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnodeError(path, "partitions is not a list")
    out = []
    for entry in entries:
        item = _object(path, entry)
        topic = item.get("topic")
        if not isinstance(topic, str):
            raise MalformedZnodeError(path, f"topic {topic!r} is not a string")
        out.append(
            TopicPartition(topic=topic, partition=_int(path, item.get("partition"), "partition"))
        )
    return out


# -- /config/topics/<topic> -------------------------------------------------------------------

# Kafka's topic config names and the LogConfig fields they set: every key of Kafka 2.8's
# LogConfig (kafkactor.storage.topic_config holds their types, defaults and validators).
TOPIC_CONFIG_KEYS: dict[str, str] = {name: key.field for name, key in TOPIC_CONFIGS.items()}
_FIELD_KEYS = {field: key for key, field in TOPIC_CONFIG_KEYS.items()}


def topic_config_overrides(config: LogConfig, base: LogConfig | None = None) -> dict[str, str]:
    """The settings of `config` that differ from `base` (the broker's defaults; Kafka's when
    None), under Kafka's names."""
    default = base if base is not None else LogConfig()
    overrides = {}
    for field in dataclasses.fields(LogConfig):
        value = getattr(config, field.name)
        if value != getattr(default, field.name):
            key = _FIELD_KEYS[field.name]
            overrides[key] = format_topic_config(key, value)
    return overrides


def log_config_from(overrides: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
    """A LogConfig from Kafka-named overrides on top of `base`, each value checked as Kafka's
    LogConfig checks it: `UnknownTopicConfigError` for unknown keys, `TopicConfigError` (a
    ValueError naming the key, the value and the valid values) for a bad value."""
    start = base if base is not None else LogConfig()
    changes = parse_topic_configs(overrides)
    low = changes.get("min_compaction_lag_ms", start.min_compaction_lag_ms)
    high = changes.get("max_compaction_lag_ms", start.max_compaction_lag_ms)
    if low > high:  # Kafka's LogConfig.validateValues
        name = (
            "min.compaction.lag.ms"
            if "min.compaction.lag.ms" in overrides
            else ("max.compaction.lag.ms")
        )
        raise TopicConfigError(
            name,
            str(overrides[name]),
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})",
        )
    return dataclasses.replace(start, **changes)


def encode_topic_config(config: LogConfig) -> bytes:
    return _dump({"version": 1, "config": topic_config_overrides(config)})


def encode_topic_config_overrides(overrides: Mapping[str, str]) -> bytes:
    """`/config/topics/<t>` as Kafka's AdminZkClient writes it: only the topic's overrides,
    as given (`{"version":1,"config":{...}}`); the broker's defaults apply to the rest."""
    return _dump({"version": 1, "config": {str(k): str(v) for k, v in overrides.items()}})


def decode_topic_config_overrides(topic: str, data: bytes) -> dict[str, str]:
    """A topic's overrides as its znode holds them (Kafka's names, every value a string)."""
    path = topic_config_path(topic)
    body = _object(path, _load(path, data))
    overrides = _object(path, body.get("config", {}))
    return {str(k): str(v) for k, v in overrides.items()}


def decode_topic_config(topic: str, data: bytes, base: LogConfig | None = None) -> LogConfig:
    """A topic's config: its overrides on top of `base` (the broker's defaults)."""
    overrides = decode_topic_config_overrides(topic, data)
    try:
        return log_config_from(overrides, base=base)
    except (UnknownTopicConfigError, ValueError) as error:
        raise MalformedZnodeError(topic_config_path(topic), str(error)) from None
