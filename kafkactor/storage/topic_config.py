"""Kafka's topic configs by name: the `ConfigDef` of Kafka 2.8's `LogConfig`.

Every topic-level key Kafka 2.x knows, with its type, default, validator and the `LogConfig`
field it sets. `parse_topic_configs` reads Kafka-named string values as Kafka's `ConfigDef.parse`
does (values trimmed; INT and LONG as Java parses them, within 32 and 64 bits; BOOLEAN
`true`/`false` in any case; LIST split on commas) and checks each with Kafka's validator, then
the one rule between two keys (`LogConfig.validateValues`: `min.compaction.lag.ms` not above
`max.compaction.lag.ms`). A refusal is a `TopicConfigError` whose message names the key, the
value and the valid values, in the form of Kafka's `ConfigException`; an unknown key is an
`UnknownTopicConfigError`, as Kafka's `LogConfig.validateNames`.

Where kafkactor departs from Kafka's ranges it says so in `rule` (docs/broker-config.md lists
every key with its effect here).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kafkactor.storage.config import (
    COMPACT,
    COMPRESSION_TYPES,
    DELETE,
    LONG_MAX,
    TIMESTAMP_TYPES,
)

__all__ = [
    "TOPIC_CONFIGS",
    "TOPIC_CONFIG_SYNONYMS",
    "ConfigType",
    "TopicConfigError",
    "TopicConfigKey",
    "UnknownTopicConfigError",
    "format_topic_config",
    "parse_topic_configs",
]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN = -(2**63)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
_THROTTLED_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


class TopicConfigError(ValueError):
    """A topic config value Kafka's ConfigDef refuses (INVALID_CONFIG), naming the key."""

    def __init__(self, key: str, value: str, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class UnknownTopicConfigError(ValueError):
    """A topic config key Kafka does not know (INVALID_CONFIG)."""


class ConfigType(enum.Enum):
    """Kafka's `ConfigDef.Type`s that topic configs use."""

    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    LIST = "LIST"


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """One of Kafka's topic configs: its name, type, `LogConfig` field, and validator.

    `low` / `high` bound a number (Kafka's `Range.atLeast` / `between`); `valid` lists the
    strings a STRING or each element of a LIST may be (Kafka's `ValidString.in` /
    `ValidList.in`, case-sensitive as they are); `check` is a validator of its own that returns
    the reason a value is refused, or None. `rule` is the valid values as Kafka's documentation
    writes them.
    """

    name: str
    type: ConfigType
    field: str
    low: float | None = None
    high: float | None = None
    valid: tuple[str, ...] = ()
    check: Callable[[Any], str | None] | None = None

    @property
    def rule(self) -> str:
        if self.valid:
            return "[" + ", ".join(self.valid) + "]"
        if self.low is not None and self.high is not None:
            return f"[{_number(self.low)},...,{_number(self.high)}]"
        if self.low is not None:
            return f"[{_number(self.low)},...]"
        if self.type is ConfigType.BOOLEAN:
            return "[true, false]"
        return _RULES.get(self.name, "")

    def parse(self, text: str) -> Any:
        """The value of `text` as Kafka's ConfigDef parses and validates it."""
        value = self._parse(text)
        reason = self._invalid(value)
        if reason is not None:
            raise TopicConfigError(self.name, text, reason)
        return value

    def _parse(self, text: str) -> Any:
        trimmed = text.strip()
        kind = self.type
        if kind is ConfigType.INT or kind is ConfigType.LONG:
            low, high = (_INT_MIN, _INT_MAX) if kind is ConfigType.INT else (_LONG_MIN, LONG_MAX)
            if not _INTEGER.fullmatch(trimmed) or not low <= int(trimmed) <= high:
                raise TopicConfigError(self.name, text, f"Not a number of type {kind.value}")
            return int(trimmed)
        if kind is ConfigType.DOUBLE:
            if not _DOUBLE.fullmatch(trimmed):
                raise TopicConfigError(self.name, text, "Not a number of type DOUBLE")
            return float(trimmed.rstrip("dDfF"))
        if kind is ConfigType.BOOLEAN:
            if trimmed.lower() not in ("true", "false"):
                raise TopicConfigError(self.name, text, "Expected value to be either true or false")
            return trimmed.lower() == "true"
        if kind is ConfigType.LIST:
            return () if not trimmed else tuple(_LIST_SEPARATOR.split(trimmed))
        return trimmed

    def _invalid(self, value: Any) -> str | None:
        if self.low is not None and value < self.low:
            return f"Value must be at least {_number(self.low)}; valid values: {self.rule}"
        if self.high is not None and value > self.high:
            return f"Value must be no more than {_number(self.high)}; valid values: {self.rule}"
        if self.valid and self.type is ConfigType.LIST:
            bad = [item for item in value if item not in self.valid]
            if bad or not value:
                return f"String must be one of: {', '.join(self.valid)}"
        elif self.valid and value not in self.valid:
            return f"String must be one of: {', '.join(self.valid)}"
        if self.check is not None:
            return self.check(value)
        return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# -- the validators of their own (Kafka's ApiVersionValidator, ThrottledReplicaListValidator) --

# Kafka 2.8's ApiVersion.allVersions; a value is valid when its first three dot-separated parts
# (two from 1.0 on) name one of them or one of their short versions (ApiVersion.apply).
_API_VERSIONS: Final = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0",
    "0.10.0-IV0", "0.10.0-IV1", "0.10.1-IV0", "0.10.1-IV1", "0.10.1-IV2", "0.10.2-IV0",
    "0.11.0-IV0", "0.11.0-IV1", "0.11.0-IV2", "1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1",
    "2.1-IV0", "2.1-IV1", "2.1-IV2", "2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0",
    "2.4-IV1", "2.5-IV0", "2.6-IV0", "2.7-IV0", "2.7-IV1", "2.7-IV2", "2.8-IV0", "2.8-IV1",
)  # fmt: skip
_VERSION_KEYS: Final = frozenset(_API_VERSIONS) | {v.split("-")[0] for v in _API_VERSIONS}


def _check_api_version(value: str) -> str | None:
    parts = value.split(".")
    key = ".".join(parts[: 3 if value.startswith("0.") else 2])
    if key in _VERSION_KEYS:
        return None
    return f"Version `{value}` is not a valid version; valid values: {_RULES[_FORMAT_VERSION]}"


def _check_throttled_replicas(value: tuple[str, ...]) -> str | None:
    if all(_THROTTLED_REPLICA.fullmatch(item.strip()) for item in value):
        return None
    if "".join(value).strip() == "*":
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


_FORMAT_VERSION: Final = "message.format.version"
_RULES: Final = {
    "retention.bytes": "any LONG (-1: no limit)",
    _FORMAT_VERSION: f"[{', '.join(_API_VERSIONS)}] or a short version (0.10.0, 1.0, 2.8, ...)",
    "leader.replication.throttled.replicas": "[partitionId]:[brokerId],... or *",
    "follower.replication.throttled.replicas": "[partitionId]:[brokerId],... or *",
}

_I, _L, _D, _B, _S, _LIST = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
)

#: Kafka 2.8's topic configs, in LogConfig's order. Departures from Kafka's ranges:
#: `segment.index.bytes` must hold one 8-byte index entry (Kafka: at least 0, which rolls a
#: segment on every append).
TOPIC_CONFIGS: Final[dict[str, TopicConfigKey]] = {
    key.name: key
    for key in (
        TopicConfigKey("segment.bytes", _I, "segment_bytes", low=14),
        TopicConfigKey("segment.ms", _L, "segment_ms", low=1),
        TopicConfigKey("segment.jitter.ms", _L, "segment_jitter_ms", low=0),
        TopicConfigKey("segment.index.bytes", _I, "max_index_size", low=8),
        TopicConfigKey("flush.messages", _L, "flush_interval_messages", low=0),
        TopicConfigKey("flush.ms", _L, "flush_interval_ms", low=0),
        TopicConfigKey("retention.bytes", _L, "retention_bytes"),
        TopicConfigKey("retention.ms", _L, "retention_ms", low=-1),
        TopicConfigKey("max.message.bytes", _I, "max_message_bytes", low=0),
        TopicConfigKey("index.interval.bytes", _I, "index_interval_bytes", low=0),
        TopicConfigKey("delete.retention.ms", _L, "delete_retention_ms", low=0),
        TopicConfigKey("min.compaction.lag.ms", _L, "min_compaction_lag_ms", low=0),
        TopicConfigKey("max.compaction.lag.ms", _L, "max_compaction_lag_ms", low=1),
        TopicConfigKey("file.delete.delay.ms", _L, "file_delete_delay_ms", low=0),
        TopicConfigKey("min.cleanable.dirty.ratio", _D, "min_cleanable_dirty_ratio", 0, 1),
        TopicConfigKey("cleanup.policy", _LIST, "cleanup_policy", valid=(COMPACT, DELETE)),
        TopicConfigKey("unclean.leader.election.enable", _B, "unclean_leader_election_enable"),
        TopicConfigKey("min.insync.replicas", _I, "min_insync_replicas", low=1),
        TopicConfigKey("compression.type", _S, "compression_type", valid=COMPRESSION_TYPES),
        TopicConfigKey("preallocate", _B, "preallocate"),
        TopicConfigKey(
            "message.format.version", _S, "message_format_version", check=_check_api_version
        ),
        TopicConfigKey(
            "message.timestamp.type", _S, "message_timestamp_type", valid=TIMESTAMP_TYPES
        ),
        TopicConfigKey(
            "message.timestamp.difference.max.ms",
            _L,
            "message_timestamp_difference_max_ms",
            low=0,
        ),
        TopicConfigKey(
            "leader.replication.throttled.replicas",
            _LIST,
            "leader_replication_throttled_replicas",
            check=_check_throttled_replicas,
        ),
        TopicConfigKey(
            "follower.replication.throttled.replicas",
            _LIST,
            "follower_replication_throttled_replicas",
            check=_check_throttled_replicas,
        ),
        TopicConfigKey("message.downconversion.enable", _B, "message_downconversion_enable"),
    )
}


#: Kafka 2.8's `LogConfig.TopicConfigSynonyms`: each topic config's broker property (the
#: broker-wide default it overrides; `server.config_properties` reads its `log.*` names here).
TOPIC_CONFIG_SYNONYMS: Final[dict[str, str]] = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "max.message.bytes": "message.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "cleanup.policy": "log.cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "preallocate": "log.preallocate",
    "message.format.version": "log.message.format.version",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
}


def parse_topic_configs(overrides: Mapping[str, str]) -> dict[str, Any]:
    """`LogConfig` field -> value for Kafka-named string overrides, each parsed and validated
    as Kafka's `LogConfig.validate` does. Raises `UnknownTopicConfigError` naming every unknown
    key, else `TopicConfigError` for the first bad value."""
    unknown = sorted(set(overrides) - set(TOPIC_CONFIGS))
    if unknown:
        raise UnknownTopicConfigError(f"unknown topic config keys: {', '.join(unknown)}")
    fields: dict[str, Any] = {}
    for name, text in overrides.items():
        key = TOPIC_CONFIGS[name]
        value = key.parse(str(text))
        if key.type is ConfigType.LIST:  # LogConfig keeps a list as its canonical string
            value = ",".join(item.strip() for item in value)
        fields[key.field] = value
    return fields


def format_topic_config(name: str, value: Any) -> str:
    """A `LogConfig` field's value as Kafka writes the config `name` in `/config/topics/<t>`."""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
