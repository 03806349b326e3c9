"""AlterConfigs (api key 33) and IncrementalAlterConfigs (44) through `KafkaApis` without
threads: a topic's overrides replaced or changed key by key, Kafka 2.8's checks and messages
(ZkAdminManager.alterConfigs / incrementalAlterConfigs), `validate_only`, and the BROKER and
BROKER_LOGGER resources kafkactor cannot change. Every answer is encoded with the codec and
read back as a client reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest

from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import MetadataRequest, MetadataResponse, TopicMetadata
from kafkactor.network.alter_config_apis import OpType, incremental_overrides
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import encode_response, nested
from kafkactor.network.config_apis import BrokerProperties
from kafkactor.network.kafka_apis import KafkaApis
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Admin, Answer, Ask, Step
from kafkactor.storage import LogConfig
from tests.network.wire import decode_response, make, request_schema

pytestmark = pytest.mark.timeout(10)

BROKER = 1
TOPIC, BROKER_TYPE, LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = (int(op) for op in OpType)
ALTER_VERSIONS = range(SUPPORTED[ApiKey.ALTER_CONFIGS][0], SUPPORTED[ApiKey.ALTER_CONFIGS][1] + 1)
INCREMENTAL_VERSIONS = range(
    SUPPORTED[ApiKey.INCREMENTAL_ALTER_CONFIGS][0],
    SUPPORTED[ApiKey.INCREMENTAL_ALTER_CONFIGS][1] + 1,
)
RESOURCE = "ConfigResource(type=TOPIC, name='orders')"


class ConfigStore:
    """A TopicConfigAdmin over a dict; records its writes."""

    def __init__(self, topics: Mapping[str, Mapping[str, str]]) -> None:
        self.topics = {t: dict(c) for t, c in topics.items()}
        self.writes: list[tuple[str, dict[str, str]]] = []

    def topic_config(self, topic: str) -> Mapping[str, str]:
        return dict(self.topics[topic])

    def change_topic_config(self, topic: str, overrides: Mapping[str, str]) -> None:
        self.writes.append((topic, dict(overrides)))
        self.topics[topic] = dict(overrides)


def _send(
    admin: ConfigStore, api: ApiKey, version: int, body: Any, existing: Sequence[str] = ("orders",)
) -> list[tuple[int, str | None]]:
    kafka_apis = KafkaApis(
        BROKER,
        admin=cast(Any, admin),
        properties=BrokerProperties(log_config=LogConfig(retention_ms=5000)),
    )
    header = RequestHeader(api_key=api, api_version=version, correlation_id=3, client_id="c")
    step: Step = kafka_apis.handle(header, body)
    if isinstance(step, Ask):
        assert isinstance(step.request, MetadataRequest)
        topics = tuple(
            TopicMetadata(topic=t)
            if t in existing
            else TopicMetadata(topic=t, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for t in step.request.topics
        )
        step = step.then(MetadataResponse(topics=topics))
    if isinstance(step, Admin):
        step = step.then(step.work())
    assert isinstance(step, Answer), step
    frame = encode_response(api, version, 3, step.body)
    _, decoded = decode_response(frame[4:], api, version)
    return [(int(r.error_code), r.error_message) for r in decoded.responses]


def alter(
    admin: ConfigStore,
    *resources: tuple[int, str, dict[str, str | None]],
    version: int = 1,
    validate_only: bool = False,
    existing: Sequence[str] = ("orders",),
) -> list[tuple[int, str | None]]:
    schema = request_schema(ApiKey.ALTER_CONFIGS, version)
    resource, entry = nested(schema, "AlterConfigsResource"), nested(schema, "AlterableConfig")
    body = make(
        schema,
        validate_only=validate_only,
        resources=tuple(
            make(
                resource,
                resource_type=kind,
                resource_name=name,
                configs=tuple(make(entry, name=k, value=v) for k, v in configs.items()),
            )
            for kind, name, configs in resources
        ),
    )
    return _send(admin, ApiKey.ALTER_CONFIGS, version, body, existing)


def incremental(
    admin: ConfigStore,
    *resources: tuple[int, str, list[tuple[str, int, str | None]]],
    version: int = 1,
    validate_only: bool = False,
    existing: Sequence[str] = ("orders",),
) -> list[tuple[int, str | None]]:
    schema = request_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
    resource, entry = nested(schema, "AlterConfigsResource"), nested(schema, "AlterableConfig")
    body = make(
        schema,
        validate_only=validate_only,
        resources=tuple(
            make(
                resource,
                resource_type=kind,
                resource_name=name,
                configs=tuple(
                    make(entry, name=k, config_operation=op, value=v) for k, op, v in ops
                ),
            )
            for kind, name, ops in resources
        ),
    )
    return _send(admin, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body, existing)


# -- AlterConfigs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ALTER_VERSIONS)
def test_alter_configs_replaces_the_whole_override_set(version: int) -> None:
    admin = ConfigStore({"orders": {"retention.ms": "1000", "segment.bytes": "20000"}})
    assert alter(admin, (TOPIC, "orders", {"cleanup.policy": "compact"}), version=version) == [
        (0, None)
    ]
    assert admin.topics["orders"] == {"cleanup.policy": "compact"}


def test_alter_configs_checks_as_kafka_and_writes_nothing_refused() -> None:
    admin = ConfigStore({"orders": {}})
    answers = alter(
        admin,
        (TOPIC, "orders", {"retention.ms": "soon"}),
        (TOPIC, "orders", {"nonsense": "1"}),
        (TOPIC, "orders", {"min.cleanable.dirty.ratio": "1.1"}),
        (TOPIC, "orders", {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}),
        (TOPIC, "orders", {"retention.ms": None}),
        (TOPIC, "missing", {"retention.ms": "1"}),
    )
    assert answers == [
        (
            ErrorCode.INVALID_REQUEST,
            f"Invalid config value for resource {RESOURCE}: Invalid value soon for "
            "configuration retention.ms: Not a number of type LONG",
        ),
        (ErrorCode.INVALID_CONFIG, "Unknown topic config name: nonsense"),
        (
            ErrorCode.INVALID_REQUEST,
            f"Invalid config value for resource {RESOURCE}: Invalid value 1.1 for "
            "configuration min.cleanable.dirty.ratio: Value must be no more than 1; "
            "valid values: [0,...,1]",
        ),
        (
            ErrorCode.INVALID_CONFIG,
            "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
        ),
        (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
    ]
    assert admin.writes == []


def test_validate_only_checks_and_writes_nothing() -> None:
    admin = ConfigStore({"orders": {"retention.ms": "1000"}})
    assert alter(admin, (TOPIC, "orders", {"retention.ms": "7"}), validate_only=True) == [(0, None)]
    assert incremental(
        admin, (TOPIC, "orders", [("retention.ms", DELETE, None)]), validate_only=True
    ) == [(0, None)]
    assert admin.writes == [] and admin.topics["orders"] == {"retention.ms": "1000"}


def test_broker_configs_cannot_be_updated_dynamically() -> None:
    admin = ConfigStore({})
    answers = alter(
        admin,
        (BROKER_TYPE, "1", {"log.retention.ms": "5", "num.io.threads": "2"}),
        (BROKER_TYPE, "", {"log.retention.ms": "5"}),
        (BROKER_TYPE, "2", {"log.retention.ms": "5"}),
        (BROKER_TYPE, "x", {}),
        (BROKER_TYPE, "1", {}),
        (LOGGER, "1", {"kafka": "DEBUG"}),
    )
    assert answers == [
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
            "Cannot update these configs dynamically: Set(log.retention.ms, num.io.threads)",
        ),
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid config value for resource ConfigResource(type=BROKER, name=''): "
            "Cannot update these configs dynamically: Set(log.retention.ms)",
        ),
        (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2"),
        (ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: x"),
        (0, None),
        (
            ErrorCode.INVALID_REQUEST,
            "AlterConfigs is only supported for topics and brokers, but resource type is "
            "BROKER_LOGGER",
        ),
    ]


# -- IncrementalAlterConfigs ----------------------------------------------------------------------


@pytest.mark.parametrize("version", INCREMENTAL_VERSIONS)
def test_incremental_ops_change_the_stored_overrides_key_by_key(version: int) -> None:
    admin = ConfigStore({"orders": {"retention.ms": "1000", "segment.bytes": "20000"}})
    ops = [
        ("retention.ms", DELETE, None),
        ("max.message.bytes", SET, "5000"),
        ("flush.ms", DELETE, None),  # not set: fine
        ("cleanup.policy", APPEND, "compact"),
    ]
    assert incremental(admin, (TOPIC, "orders", ops), version=version) == [(0, None)]
    assert admin.topics["orders"] == {
        "segment.bytes": "20000",
        "max.message.bytes": "5000",
        "cleanup.policy": "delete,compact",
    }


def test_append_and_subtract_follow_kafkas_list_arithmetic() -> None:
    assert incremental_overrides({}, [("cleanup.policy", SUBTRACT, "delete")]) == {
        "cleanup.policy": ""
    }
    assert incremental_overrides(
        {"leader.replication.throttled.replicas": "0:1,1:2,0:1"},
        [("leader.replication.throttled.replicas", SUBTRACT, "0:1")],
    ) == {"leader.replication.throttled.replicas": "1:2,0:1"}
    assert incremental_overrides(
        {}, [("follower.replication.throttled.replicas", APPEND, "0:1")]
    ) == {
        "follower.replication.throttled.replicas": ",0:1"  # Kafka's empty default splits to [""]
    }


def test_incremental_refusals_are_kafkas() -> None:
    admin = ConfigStore({"orders": {}})
    answers = incremental(
        admin,
        (TOPIC, "orders", [("retention.ms", APPEND, "5")]),
        (TOPIC, "orders", [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)]),
        (TOPIC, "orders", [("retention.ms", SET, None)]),
        (TOPIC, "orders", [("nonsense", SET, "1")]),
        (TOPIC, "orders", [("cleanup.policy", SUBTRACT, "delete")]),
        (TOPIC, "orders", [("retention.ms", 9, "1")]),
        (TOPIC, "gone", [("retention.ms", SET, "1")]),
        (BROKER_TYPE, "1", [("log.retention.ms", DELETE, None)]),
        (BROKER_TYPE, "1", [("log.retention.ms", SET, "1")]),
        (LOGGER, "1", [("kafka", SET, "DEBUG")]),
        (LOGGER, "1", [("kafka", APPEND, "DEBUG")]),
        (LOGGER, "", [("kafka", SET, "DEBUG")]),
    )
    assert answers == [
        (
            ErrorCode.INVALID_REQUEST,
            "Config value append is not allowed for config key: retention.ms",
        ),
        (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys : retention.ms"),
        (ErrorCode.INVALID_REQUEST, "Null value not supported for : SET:retention.ms"),
        (ErrorCode.INVALID_CONFIG, "Unknown topic config name: nonsense"),
        (
            ErrorCode.INVALID_REQUEST,
            f"Invalid config value for resource {RESOURCE}: Invalid value  for configuration "
            "cleanup.policy: String must be one of: compact, delete",
        ),
        (
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "The server experienced an unexpected error when processing the request.",
        ),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'gone' does not exist."),
        (0, None),
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
            "Cannot update these configs dynamically: Set(log.retention.ms)",
        ),
        (
            ErrorCode.INVALID_REQUEST,
            "Invalid config value for resource ConfigResource(type=BROKER_LOGGER, name='1'): "
            "Logger kafka does not exist!",
        ),
        (
            ErrorCode.INVALID_REQUEST,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        ),
        (ErrorCode.INVALID_REQUEST, "Broker id must not be empty"),
    ]
    assert admin.writes == []


def test_without_an_admin_a_topic_cannot_be_changed() -> None:
    kafka_apis = KafkaApis(BROKER)
    assert kafka_apis.alter_config_apis.admin is None
