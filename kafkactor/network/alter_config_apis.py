"""KafkaApis' AlterConfigs (api key 33) and IncrementalAlterConfigs (44): a topic's overrides
changed as Kafka 2.8's `ZkAdminManager.alterConfigs` / `incrementalAlterConfigs` change them.

**Topics.** AlterConfigs replaces the topic's whole override set (a key it does not give
reverts to the broker's default); IncrementalAlterConfigs starts from the overrides in
`/config/topics/<t>` and applies SET, DELETE (of a key not set: nothing), APPEND and SUBTRACT
(LIST-typed keys only: `cleanup.policy`, the throttled-replica lists; the list starts from
the override or else Kafka's default). The result is checked as Kafka's `LogConfig.validate`
checks it: an unknown key is INVALID_CONFIG `Unknown topic config name: <k>`; a value Kafka's
ConfigDef refuses is INVALID_REQUEST `Invalid config value for resource
ConfigResource(type=TOPIC, name='<t>'): Invalid value <v> for configuration <k>: <why>`
(Kafka wraps its ConfigException so); `min.compaction.lag.ms` above `max.compaction.lag.ms`
is INVALID_CONFIG. A topic the broker's metadata does not know is UNKNOWN_TOPIC_OR_PARTITION
`The topic '<t>' does not exist.`. Unless `validate_only`, the new overrides are written
through the `TopicConfigAdmin` (with ZooKeeper: `/config/topics/<t>` and a change
notification, which every broker applies; the request does not wait for them).

**Brokers.** Kafka 2.8 updates some broker configs dynamically; kafkactor has no dynamic
broker config, so every broker config is one Kafka's `DynamicBrokerConfig` refuses to update:
INVALID_REQUEST `Invalid config value for resource ConfigResource(type=BROKER, name='1'):
Cannot update these configs dynamically: Set(<keys>)` (docs/broker-config.md). A resource
that changes nothing (no entries; only DELETEs) succeeds. BROKER_LOGGER (incremental only,
KIP-412) names no logger that exists here. Other resource types are INVALID_REQUEST, as Kafka.

`AlterConfigApis` is pure: topic existence is an `Ask` of the replica manager's metadata cache,
the reads and writes of overrides one blocking `Admin` step.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from kafkactor.actors.controller import zk_data
from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import NO_THROTTLE, Admin, Answer, Ask, Step, error_of
from kafkactor.storage import LogConfig
from kafkactor.storage.topic_config import (
    TOPIC_CONFIGS,
    ConfigType,
    TopicConfigError,
    format_topic_config,
)

__all__ = [
    "AlterConfigApis",
    "ApiError",
    "OpType",
    "TopicConfigAdmin",
    "incremental_overrides",
    "topic_config_error",
]

_TOPIC, _BROKER, _BROKER_LOGGER = 2, 4, 8
_TYPE_NAMES: Final = {_TOPIC: "TOPIC", _BROKER: "BROKER", _BROKER_LOGGER: "BROKER_LOGGER"}
_JAVA_INT: Final = re.compile(r"[+-]?[0-9]+")
# Errors.UNKNOWN_SERVER_ERROR's message (what Kafka answers for an operation it cannot read)
_UNEXPECTED: Final = "The server experienced an unexpected error when processing the request."


@runtime_checkable
class TopicConfigAdmin(Protocol):
    """Reads and replaces a topic's overrides the way this cluster keeps them (Kafka's
    `AdminZkClient.fetchEntityConfig` / `changeTopicConfig`); may block."""

    def topic_config(self, topic: str) -> Mapping[str, str]: ...

    def change_topic_config(self, topic: str, overrides: Mapping[str, str]) -> object: ...


class OpType(enum.IntEnum):
    """Kafka's `AlterConfigOp.OpType` ids (IncrementalAlterConfigs)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ApiError:
    """Kafka's `ApiError`: a resource's error code and message."""

    code: ErrorCode
    message: str | None = None


_NONE: Final = ApiError(ErrorCode.NONE)


class _RefusedError(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _resource(kind: int, name: str) -> str:
    """Kafka's `ConfigResource.toString`."""
    return f"ConfigResource(type={_TYPE_NAMES.get(kind, 'UNKNOWN')}, name='{name}')"


def _invalid_value(kind: int, name: str, reason: str) -> ApiError:
    """A ConfigException, as ZkAdminManager wraps it in an InvalidRequestException."""
    return ApiError(
        ErrorCode.INVALID_REQUEST,
        f"Invalid config value for resource {_resource(kind, name)}: {reason}",
    )


def topic_config_error(
    topic: str, overrides: Mapping[str, str], defaults: LogConfig
) -> ApiError | None:
    """Kafka's `LogConfig.validate` of a topic's new overrides, as ZkAdminManager answers it;
    None when they are valid."""
    for key in overrides:  # validateNames first (an InvalidConfigurationException)
        if key not in TOPIC_CONFIGS:
            return ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
    try:
        zk_data.log_config_from(overrides, base=defaults)
    except TopicConfigError as error:
        if error.reason.startswith("conflict topic config setting"):  # validateValues
            return ApiError(ErrorCode.INVALID_CONFIG, error.reason)
        return _invalid_value(_TOPIC, topic, str(error))
    except ValueError as error:
        return _invalid_value(_TOPIC, topic, str(error))
    return None


def _list_value(current: Mapping[str, str], name: str) -> list[str]:
    """A LIST key's elements: its override, else Kafka's default, split as Kafka splits it."""
    found = current.get(name)
    if found is None:
        key = TOPIC_CONFIGS[name]
        found = format_topic_config(name, getattr(LogConfig(), key.field))
    return found.split(",")


def incremental_overrides(
    current: Mapping[str, str], ops: Sequence[tuple[str, int, str | None]]
) -> dict[str, str]:
    """Kafka's `prepareIncrementalConfigs` over a topic's overrides: each (name, op, value)
    applied in order. Raises `_RefusedError` for APPEND / SUBTRACT of a key that is not a LIST."""
    overrides = dict(current)
    for name, op, value in ops:
        if op == OpType.SET:
            overrides[name] = str(value)
        elif op == OpType.DELETE:
            overrides.pop(name, None)
        elif op in (OpType.APPEND, OpType.SUBTRACT):
            key = TOPIC_CONFIGS.get(name)
            if key is None:
                raise _RefusedError(
                    ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
                )
            verb = "append" if op == OpType.APPEND else "subtract"
            if key.type is not ConfigType.LIST:
                raise _RefusedError(
                    ApiError(
                        ErrorCode.INVALID_REQUEST,
                        f"Config value {verb} is not allowed for config key: {name}",
                    )
                )
            old, given = _list_value(overrides, name), str(value).split(",")
            if op == OpType.APPEND:
                overrides[name] = ",".join(old + given)
            else:  # Scala's List.diff: one occurrence removed per element given
                for item in given:
                    if item in old:
                        old.remove(item)
                overrides[name] = ",".join(old)
        else:  # Kafka's OpType.forId gives null and its match fails: an unexpected error
            raise _RefusedError(ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, _UNEXPECTED))
    return overrides


@dataclass(frozen=True, slots=True)
class _TopicChange:
    """A TOPIC resource that passed the checks made without I/O: its new overrides are worked
    out (and written) in the Admin step."""

    topic: str
    replace: Mapping[str, str] | None  # AlterConfigs: the whole set
    ops: Sequence[tuple[str, int, str | None]] = ()  # IncrementalAlterConfigs


class AlterConfigApis:
    """AlterConfigs and IncrementalAlterConfigs for one broker; topics through the metadata
    cache and the `TopicConfigAdmin` (None: none can be changed, UNKNOWN_SERVER_ERROR)."""

    def __init__(
        self, broker_id: int, admin: TopicConfigAdmin | None, defaults: LogConfig | None = None
    ) -> None:
        self.broker_id = broker_id
        self.admin = admin
        self.defaults = defaults if defaults is not None else LogConfig()
        self.replica_manager = addresses.replica_manager(broker_id)

    # -- AlterConfigs ---------------------------------------------------------------------------

    def alter_configs(self, version: int, body: Any) -> Step:
        resources = list(body.resources)
        results: dict[int, ApiError | _TopicChange] = {}
        for i, resource in enumerate(resources):
            kind, name = int(resource.resource_type), resource.resource_name
            entries = [(c.name, c.value) for c in resource.configs]
            nulls = [n for n, v in entries if v is None]
            if nulls:
                results[i] = ApiError(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}"
                )
            elif kind == _TOPIC:
                results[i] = _TopicChange(name, {n: str(v) for n, v in entries})
            elif kind == _BROKER:
                results[i] = self._broker(name, [n for n, _ in entries])
            else:
                results[i] = _unsupported(kind)
        return self._continue(ApiKey.ALTER_CONFIGS, version, body, results)

    # -- IncrementalAlterConfigs ------------------------------------------------------------------

    def incremental_alter_configs(self, version: int, body: Any) -> Step:
        resources = list(body.resources)
        results: dict[int, ApiError | _TopicChange] = {}
        for i, resource in enumerate(resources):
            kind, name = int(resource.resource_type), resource.resource_name
            ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
            names = [n for n, _, _ in ops]
            duplicates = sorted({n for n in names if names.count(n) > 1})
            nulls = [f"{_op_name(op)}:{n}" for n, op, v in ops if v is None and op != OpType.DELETE]
            if duplicates:
                results[i] = ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"Error due to duplicate config keys : {','.join(duplicates)}",
                )
            elif nulls:
                results[i] = ApiError(
                    ErrorCode.INVALID_REQUEST, f"Null value not supported for : {','.join(nulls)}"
                )
            elif kind == _TOPIC:
                results[i] = _TopicChange(name, None, tuple(ops))
            elif kind == _BROKER:
                changed = [n for n, op, _ in ops if op != OpType.DELETE]
                results[i] = self._broker(name, changed)
            elif kind == _BROKER_LOGGER:
                results[i] = self._broker_logger(name, ops)
            else:
                results[i] = _unsupported(kind)
        return self._continue(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body, results)

    # -- brokers ----------------------------------------------------------------------------------

    def _broker_id_error(self, name: str, *, empty_ok: bool) -> ApiError | None:
        """Kafka's getBrokerId: the empty name (the cluster-wide default) or this broker."""
        if not name:
            if empty_ok:
                return None
            return ApiError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        if _JAVA_INT.fullmatch(name) is None or not -(2**31) <= int(name) < 2**31:
            return ApiError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            )
        if int(name) != self.broker_id:
            return ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self.broker_id}, but received {name}",
            )
        return None

    def _broker(self, name: str, changed: Sequence[str]) -> ApiError:
        refused = self._broker_id_error(name, empty_ok=True)
        if refused is not None:
            return refused
        if not changed:
            return _NONE
        return _invalid_value(
            _BROKER, name, f"Cannot update these configs dynamically: Set({', '.join(changed)})"
        )

    def _broker_logger(self, name: str, ops: Sequence[tuple[str, int, str | None]]) -> ApiError:
        refused = self._broker_id_error(name, empty_ok=False)
        if refused is not None:
            return refused
        for logger, op, _ in ops:
            if op in (OpType.APPEND, OpType.SUBTRACT):
                return ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"{_op_name(op)} operation is not allowed for the BROKER_LOGGER resource",
                )
            return _invalid_value(_BROKER_LOGGER, name, f"Logger {logger} does not exist!")
        return _NONE

    # -- topics -----------------------------------------------------------------------------------

    def _continue(
        self, api: ApiKey, version: int, body: Any, results: dict[int, ApiError | _TopicChange]
    ) -> Step:
        changes = {i: r for i, r in results.items() if isinstance(r, _TopicChange)}
        if not changes:
            return _answer(api, version, body, results)
        topics = tuple(dict.fromkeys(c.topic for c in changes.values()))
        validate_only = bool(body.validate_only)

        def known(response: Response) -> Step:
            if not isinstance(response, MetadataResponse):
                failed = ApiError(error_of(response))
                return _answer(api, version, body, {**results, **dict.fromkeys(changes, failed)})
            present = {
                t.topic
                for t in response.topics
                if t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            }
            work = self._work(changes, present, validate_only)
            return Admin(
                work, lambda done: _answer(api, version, body, {**results, **_done(done, changes)})
            )

        return Ask(self.replica_manager, MetadataRequest(topics=topics), known)

    def _work(
        self, changes: Mapping[int, _TopicChange], present: set[str], validate_only: bool
    ) -> Callable[[], dict[int, ApiError]]:
        admin, defaults = self.admin, self.defaults

        def run() -> dict[int, ApiError]:
            done: dict[int, ApiError] = {}
            for i, change in changes.items():
                try:
                    done[i] = _change_topic(admin, change, present, defaults, validate_only)
                except _RefusedError as refused:
                    done[i] = refused.error
                except Exception as error:  # ZooKeeper failed: this resource only
                    done[i] = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(error) or _UNEXPECTED)
            return done

        return run


def _change_topic(
    admin: TopicConfigAdmin | None,
    change: _TopicChange,
    present: set[str],
    defaults: LogConfig,
    validate_only: bool,
) -> ApiError:
    """One TOPIC resource, in ZkAdminManager's order: the incremental operations over the
    stored overrides, then the topic's existence, then LogConfig's validation, then the write."""
    topic = change.topic
    if admin is None:
        return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "this broker cannot change topic configs")
    if change.replace is not None:
        overrides = dict(change.replace)
    else:
        current = admin.topic_config(topic) if topic in present else {}
        overrides = incremental_overrides(current, change.ops)
    if topic not in present:
        return ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist."
        )
    refused = topic_config_error(topic, overrides, defaults)
    if refused is not None:
        return refused
    if not validate_only:
        admin.change_topic_config(topic, overrides)
    return _NONE


def _done(done: Any, changes: Mapping[int, _TopicChange]) -> dict[int, ApiError]:
    if isinstance(done, dict):
        return done
    failed = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, str(done) or _UNEXPECTED)
    return dict.fromkeys(changes, failed)


def _op_name(op: int) -> str:
    return OpType(op).name if op in OpType._value2member_map_ else "null"


def _unsupported(kind: int) -> ApiError:
    return ApiError(
        ErrorCode.INVALID_REQUEST,
        "AlterConfigs is only supported for topics and brokers, but resource type is "
        + _TYPE_NAMES.get(kind, "UNKNOWN"),
    )


def _answer(
    api: ApiKey, version: int, body: Any, results: Mapping[int, ApiError | _TopicChange]
) -> Answer:
    schema = response_type(api, version)
    result_type = nested(schema, "AlterConfigsResourceResponse")
    responses = []
    for i, resource in enumerate(body.resources):
        result = results.get(i)
        error = result if isinstance(result, ApiError) else ApiError(ErrorCode.UNKNOWN_SERVER_ERROR)
        responses.append(
            build(
                result_type,
                error_code=error.code,
                error_message=error.message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return Answer(build(schema, throttle_time=NO_THROTTLE, responses=tuple(responses)))
