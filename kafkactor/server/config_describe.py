"""A broker's static configuration as DescribeConfigs lists it (`BrokerProperties`): every
property `KafkaConfig` reads, with its value, the value the broker's properties gave it
(STATIC_BROKER_CONFIG) and its default (DEFAULT_CONFIG), as Kafka's `DynamicBrokerConfig`
keeps `staticBrokerConfigs` and `staticDefaultConfigs`.

A property counts as static when the properties named it, or when its value differs from the
default and nothing named it or another of its names: a `BrokerConfig` built in code
(`Cluster(config=...)`) is the broker's static configuration too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final

from kafkactor.actors.broker import BrokerConfig
from kafkactor.network.config_apis import BrokerProperties, BrokerProperty
from kafkactor.server.config_properties import ALIASES, SETTINGS, is_sensitive

__all__ = ["MISSING", "SENSITIVE", "describe_properties", "field_default", "nested_value"]

# Kafka 2.8's defaults of the other names (KafkaConfig's ConfigDef); log.retention.minutes has
# none. The `.ms` names they stand for have none in Kafka either: DescribeConfigs lists a
# default for `log.retention.hours`, not for `log.retention.ms`.
_ALIAS_DEFAULTS: Final = {
    "log.dir": "/tmp/kafka-logs",
    "log.retention.hours": "168",
    "log.roll.hours": "168",
    "log.roll.jitter.hours": "0",
    "log.cleaner.enable": "true",
}
_NO_KAFKA_DEFAULT: Final = frozenset(
    {"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"}
)
#: Properties whose values are secrets (Kafka's PASSWORD type): listed with no value (and
#: `listener.name.<l>.` of them: `config_properties.is_sensitive`).
SENSITIVE: Final[frozenset[str]] = frozenset(name for name in SETTINGS if is_sensitive(name))
#: what a secret's value is in a `BrokerProperty` (DescribeConfigs sends none)
HIDDEN: Final = "[hidden]"


def describe_properties(
    value_of: Callable[[tuple[str, ...]], Any],
    default_of: Callable[[tuple[str, ...]], Any],
    given: Mapping[str, str],
    broker: BrokerConfig,
) -> BrokerProperties:
    """The `BrokerProperties` of a configuration: `value_of(path)` is a setting's value in it
    (`_MISSING` when the configuration has no such setting), `default_of(path)` its default,
    `given` the properties it was read from (name -> text) and `broker` its BrokerConfig."""
    named_by = set(given)
    for name in given:
        if name in ALIASES:
            named_by.add(ALIASES[name].target)
    listed = []
    for setting in SETTINGS.values():
        if setting.path is None:
            continue
        value = value_of(setting.path)
        if value is MISSING:
            continue
        default = default_of(setting.path)
        text = _format(setting.kind.format, value)
        default_text = (
            None if setting.name in _NO_KAFKA_DEFAULT else _format(setting.kind.format, default)
        )
        static = given.get(setting.name)
        if static is None and setting.name not in named_by and value != default:
            static = text
        sensitive = setting.name in SENSITIVE
        if sensitive:  # the secret itself never leaves the config objects
            text = None if text is None else HIDDEN
            static = None if static is None else HIDDEN
        listed.append(
            BrokerProperty(
                name=setting.name,
                value=text,
                static=static,
                default=default_text,
                sensitive=sensitive,
            )
        )
    for name, text in given.items():  # listener.name.<listener>.<setting>, as given
        if name.startswith("listener.name."):
            hidden = HIDDEN if is_sensitive(name) else text
            listed.append(
                BrokerProperty(name=name, value=hidden, static=hidden, sensitive=is_sensitive(name))
            )
    for name in ALIASES:
        default_text = _ALIAS_DEFAULTS.get(name)
        static = given.get(name)
        listed.append(
            BrokerProperty(
                name=name,
                value=static if static is not None else default_text,
                static=static,
                default=default_text,
                sensitive=name in SENSITIVE,
            )
        )
    return BrokerProperties(
        log_config=broker.log_manager.default_log_config, properties=tuple(listed)
    )


MISSING: Final = object()
_DEFAULT_BROKER: Final = BrokerConfig()


def _format(format_value: Callable[[Any], str], value: Any) -> str | None:
    return None if value is None or value is MISSING else format_value(value)


def nested_value(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` (attribute names, outermost first), MISSING where there is none."""
    for attr in path:
        obj = getattr(obj, attr, MISSING)
        if obj is MISSING:
            return MISSING
    return obj


def field_default(cls: type[Any], path: tuple[str, ...]) -> Any:
    """The default of the setting at `path` in a config class (None when it has none)."""
    if path[0] == "broker":
        return nested_value(_DEFAULT_BROKER, path[1:])
    for f in dataclasses.fields(cls):
        if f.name == path[0]:
            default: Any = None
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            if len(path) > 1:  # a setting inside a config object (security_properties)
                found = nested_value(default, path[1:])
                return None if found is MISSING else found
            return default
    return None
