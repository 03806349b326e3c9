"""KafkaApis' DescribeConfigs (api key 32): a topic's configs, or the broker's, as Kafka 2.8's
`AdminManager.describeConfigs` lists them.

A **topic** lists every config of Kafka 2.8's `LogConfig` with its value (the topic's override
from `/config/topics/<t>` over the broker's defaults), never read-only nor sensitive, and its
source: DYNAMIC_TOPIC_CONFIG for an override, else the source of the first broker synonym
(STATIC_BROKER_CONFIG for a property the broker was started with, DEFAULT_CONFIG for a
default), else DEFAULT_CONFIG. The synonyms (v1+, when asked for) are the override, then the
broker properties Kafka names for the config (`log.retention.ms`, `.minutes`, `.hours`),
static ones before defaults, and, as Kafka's `configSynonyms` does, only from the config's own
broker property on (so `retention.ms` lists `log.retention.hours=168` only when
`log.retention.ms` is set too). A **broker** named by its own id lists its static properties
(`BrokerProperties`), read-only (there are no dynamic broker configs here); the empty name is
the cluster-wide dynamic default, which is empty. Sensitive properties have a null value.

`ConfigApis` is pure: topic existence is an `Ask` of the replica manager's metadata cache, the
overrides a blocking read of the `TopicConfigRepository` in an `Admin` step.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol

from kafkactor.actors.controller import zk_data
from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import (
    NO_THROTTLE,
    Admin,
    Answer,
    Ask,
    Step,
    error_of,
    topic_name_error,
)
from kafkactor.storage import LogConfig
from kafkactor.storage.config import LONG_MAX
from kafkactor.storage.topic_config import (
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    format_topic_config,
)

__all__ = [
    "BrokerProperties",
    "BrokerProperty",
    "ConfigApis",
    "ConfigSource",
    "ResourceType",
    "TopicConfigRepository",
]


class ResourceType(enum.IntEnum):
    """Kafka's `ConfigResource.Type` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    """Kafka's `DescribeConfigsResponse.ConfigSource` ids (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


#: Kafka's `DynamicBrokerConfig.brokerConfigSynonyms`: the names a broker property also goes
#: by, in Kafka's order of precedence (any other property is its own only synonym).
BROKER_SYNONYMS: Final[Mapping[str, tuple[str, ...]]] = {
    name: group
    for group in (
        ("log.roll.ms", "log.roll.hours"),
        ("log.roll.jitter.ms", "log.roll.jitter.hours"),
        ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    )
    for name in group
} | {"log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")}

# Errors.INVALID_REQUEST's message, which Kafka's getErrorResponse gives every resource
_INVALID_REQUEST: Final = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerProperty:
    """One broker property as DescribeConfigs reports it: its current `value` as Kafka prints
    it (None: unset), the value the broker's properties gave it (`static`, None when not
    set there: STATIC_BROKER_CONFIG) and its default (`default`, None when it has none:
    DEFAULT_CONFIG). A `sensitive` one (a password) is listed with no value."""

    name: str
    value: str | None
    static: str | None = None
    default: str | None = None
    sensitive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerProperties:
    """The broker's static configuration as DescribeConfigs lists it: its topic-config
    defaults (`log_config`, the `log.*` properties) and every property in Kafka's order."""

    log_config: LogConfig = field(default_factory=LogConfig)
    properties: tuple[BrokerProperty, ...] = ()

    def named(self) -> dict[str, BrokerProperty]:
        return {p.name: p for p in self.properties}


class TopicConfigRepository(Protocol):
    """Kafka's `ConfigRepository.topicConfig`: a topic's overrides (`/config/topics/<t>`), by
    Kafka's names, as strings; {} for none. May block."""

    def topic_config(self, topic: str) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class _Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class _Entry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    synonyms: tuple[_Synonym, ...]


@dataclass(frozen=True, slots=True)
class _Result:
    code: ErrorCode
    message: str | None = None
    entries: tuple[_Entry, ...] = ()


class ConfigApis:
    """DescribeConfigs for one broker: topics through the metadata cache and the
    `TopicConfigRepository`, the broker from its `BrokerProperties`."""

    def __init__(
        self,
        broker_id: int,
        properties: BrokerProperties | None = None,
        repository: TopicConfigRepository | None = None,
    ) -> None:
        self.broker_id = broker_id
        described = properties if properties is not None else BrokerProperties()
        if described.properties and "broker.id" not in described.named():
            # brokers that share their properties (an in-process cluster) are numbered for them
            me = BrokerProperty(name="broker.id", value=str(broker_id), static=str(broker_id))
            described = replace(described, properties=(me, *described.properties))
        self.properties = described
        self.repository = repository
        self.replica_manager = addresses.replica_manager(broker_id)
        # the properties never change: each topic config's broker synonyms and the broker's
        # entries (without and with their synonyms) are worked out once
        broker = described.named()
        self._topic_synonyms: Final[dict[str, tuple[_Synonym, ...]]] = {
            name: tuple(_broker_synonyms(synonym, broker, sensitive=False))
            for name, synonym in TOPIC_CONFIG_SYNONYMS.items()
        }
        self._broker_entries: Final[dict[bool, tuple[_Entry, ...]]] = {
            include: tuple(
                _entry(
                    prop.name,
                    None if prop.sensitive else prop.value,
                    _broker_synonyms(prop.name, broker, sensitive=prop.sensitive),
                    include,
                    read_only=True,
                    sensitive=prop.sensitive,
                )
                for prop in described.properties
            )
            for include in (False, True)
        }

    def describe_configs(self, version: int, body: Any) -> Step:
        resources = list(body.resources)
        if any(int(r.resource_type) not in set(ResourceType) - {0} for r in resources):
            # KafkaApis refuses the whole request: every resource gets the error's message
            refused = _Result(ErrorCode.INVALID_REQUEST, _INVALID_REQUEST)
            return _answer(version, resources, [refused] * len(resources))
        wanted = [
            r.resource_name
            for r in resources
            if r.resource_type == ResourceType.TOPIC and topic_name_error(r.resource_name) is None
        ]
        if not wanted:
            return self._described(version, body, {}, None)
        topics = tuple(dict.fromkeys(wanted))

        def known(response: Response) -> Step:
            if not isinstance(response, MetadataResponse):
                return self._described(version, body, {}, error_of(response))
            present = [
                t.topic
                for t in response.topics
                if t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ]
            repository = self.repository
            if repository is None or not present:
                return self._described(version, body, {t: {} for t in present}, None)
            return Admin(_reader(repository, present), lambda read: self._read(version, body, read))

        return Ask(self.replica_manager, MetadataRequest(topics=topics), known)

    def _read(self, version: int, body: Any, read: Any) -> Step:
        if isinstance(read, BaseException):
            return self._described(version, body, {}, ErrorCode.UNKNOWN_SERVER_ERROR)
        return self._described(version, body, read, None)

    def _described(
        self,
        version: int,
        body: Any,
        overrides: Mapping[str, Mapping[str, str] | BaseException],
        failure: ErrorCode | None,
    ) -> Step:
        synonyms = version >= 1 and bool(getattr(body, "include_synonyms", False))
        results = []
        for resource in body.resources:
            name, keys = resource.resource_name, resource.configuration_keys
            kind = ResourceType(int(resource.resource_type))
            if kind is ResourceType.TOPIC:
                result = self._topic(name, overrides, failure, synonyms)
            elif kind is ResourceType.BROKER:
                result = self._broker(name, synonyms)
            else:
                result = self._broker_logger(name)
            if keys:  # null or empty: every config (Kafka 3.0's filter; see docs/network.md)
                wanted = set(keys)
                result = _Result(
                    result.code,
                    result.message,
                    tuple(e for e in result.entries if e.name in wanted),
                )
            results.append(result)
        return _answer(version, list(body.resources), results)

    # -- topics ---------------------------------------------------------------------------------

    def _topic(
        self,
        topic: str,
        overrides: Mapping[str, Mapping[str, str] | BaseException],
        failure: ErrorCode | None,
        include_synonyms: bool,
    ) -> _Result:
        invalid = topic_name_error(topic)
        if invalid is not None:
            return _Result(ErrorCode.INVALID_TOPIC_EXCEPTION, invalid)
        if failure is not None:
            return _Result(failure)
        found = overrides.get(topic)
        if found is None:  # not in the metadata cache (Kafka gives no message)
            return _Result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if isinstance(found, BaseException):
            return _Result(ErrorCode.UNKNOWN_SERVER_ERROR, str(found))
        try:
            config = zk_data.log_config_from(found, base=self.properties.log_config)
        except ValueError as error:  # a znode Kafka's LogConfig.fromProps would refuse
            return _Result(ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
        entries = []
        for name, key in TOPIC_CONFIGS.items():
            value = getattr(config, key.field)
            # flush.messages and flush.ms unset: Kafka's Long.MaxValue, never forced
            text = str(LONG_MAX) if value is None else format_topic_config(name, value)
            found_synonyms: list[_Synonym] = []
            if name in found:
                found_synonyms.append(_Synonym(name, text, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            found_synonyms += self._topic_synonyms.get(name, ())
            entries.append(_entry(name, text, found_synonyms, include_synonyms, read_only=False))
        return _Result(ErrorCode.NONE, None, tuple(entries))

    # -- the broker -----------------------------------------------------------------------------

    def _broker(self, name: str, include_synonyms: bool) -> _Result:
        if not name:  # the cluster-wide dynamic defaults (/config/brokers/<default>): none here
            return _Result(ErrorCode.NONE)
        if not self._is_me(name):
            return _Result(
                ErrorCode.INVALID_REQUEST,
                self._not_me(
                    name, "Unexpected broker id, expected {} or empty string, but received {}"
                ),
            )
        return _Result(ErrorCode.NONE, None, self._broker_entries[include_synonyms])

    def _broker_logger(self, name: str) -> _Result:
        """BROKER_LOGGER (KIP-412): Kafka lists its log4j loggers; kafkactor has none to list."""
        if not name:
            return _Result(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if not self._is_me(name):
            return _Result(
                ErrorCode.INVALID_REQUEST,
                self._not_me(name, "Unexpected broker id, expected {} but received {}"),
            )
        return _Result(ErrorCode.NONE)

    def _is_me(self, name: str) -> bool:
        return _JAVA_INT.fullmatch(name) is not None and int(name) == self.broker_id

    def _not_me(self, name: str, template: str) -> str:
        if _JAVA_INT.fullmatch(name) is None or not -(2**31) <= int(name) < 2**31:
            return f"Broker id must be an integer, but it is: {name}"
        return template.format(self.broker_id, name)


# -- helpers -------------------------------------------------------------------------------------


def _reader(
    repository: TopicConfigRepository, topics: Sequence[str]
) -> Callable[[], dict[str, Mapping[str, str] | BaseException]]:
    def read() -> dict[str, Mapping[str, str] | BaseException]:
        found: dict[str, Mapping[str, str] | BaseException] = {}
        for topic in topics:
            try:
                found[topic] = dict(repository.topic_config(topic))
            except Exception as error:  # ZooKeeper failed for this topic: reported on it
                found[topic] = error
        return found

    return read


def _broker_synonyms(
    name: str, broker: Mapping[str, BrokerProperty], *, sensitive: bool
) -> list[_Synonym]:
    """Kafka's `configSynonyms`: the static values of the property's names, then their
    defaults, from the property's own name on (what precedes it is dropped)."""
    names = BROKER_SYNONYMS.get(name, (name,))
    found = []
    for source in (ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG):
        for synonym in names:
            prop = broker.get(synonym)
            if prop is None:
                continue
            value = prop.static if source is ConfigSource.STATIC_BROKER_CONFIG else prop.default
            if value is not None:
                found.append(_Synonym(synonym, None if sensitive else value, source))
    while found and found[0].name != name:
        found.pop(0)
    return found


def _entry(
    name: str,
    value: str | None,
    synonyms: Sequence[_Synonym],
    include_synonyms: bool,
    *,
    read_only: bool,
    sensitive: bool = False,
) -> _Entry:
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    listed = tuple(synonyms) if include_synonyms else ()
    return _Entry(name, value, source, read_only, sensitive, listed)


def _answer(version: int, resources: Sequence[Any], results: Sequence[_Result]) -> Answer:
    schema = response_type(ApiKey.DESCRIBE_CONFIGS, version)
    result_type = nested(schema, "DescribeConfigsResult")
    config_type = nested(schema, "DescribeConfigsResourceResult")
    synonym_type = nested(schema, "DescribeConfigsSynonym") if version >= 1 else None
    built = []
    for resource, result in zip(resources, results, strict=True):
        configs = tuple(
            build(
                config_type,
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                is_default=e.source is ConfigSource.DEFAULT_CONFIG,  # v0
                config_source=int(e.source),
                is_sensitive=e.sensitive,
                synonyms=tuple(
                    build(synonym_type, name=s.name, value=s.value, source=int(s.source))
                    for s in e.synonyms
                )
                if synonym_type is not None
                else (),
            )
            for e in result.entries
        )
        built.append(
            build(
                result_type,
                error_code=result.code,
                error_message=result.message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    # v0's throttle time is transcribed as a plain int32 (removed_versions.py)
    throttle = 0 if version == 0 else NO_THROTTLE
    return Answer(build(schema, throttle_time=throttle, results=tuple(built)))
