"""DescribeConfigs (api key 32) through `KafkaApis` without threads: topics (values, sources,
synonyms, the `configuration_keys` filter, unknown and illegal topics) and the broker's own
static configuration, as Kafka 2.8's AdminManager.describeConfigs answers them.

Every answer is encoded with the codec and read back as a client reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.controller.topic_configs import MappingTopicConfigRepository
from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import MetadataRequest, MetadataResponse, TopicMetadata
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import encode_response
from kafkactor.network.config_apis import BrokerProperties, ConfigSource
from kafkactor.network.kafka_apis import KafkaApis, KafkaApisConfig
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Admin, Answer, Ask, Step
from kafkactor.server import KafkaConfig, SharedBrokerConfig
from kafkactor.storage import LogConfig
from kafkactor.storage.topic_config import TOPIC_CONFIGS
from tests.network.wire import decode_response, describe_configs_request

pytestmark = pytest.mark.timeout(10)

BROKER = 1
TOPIC_TYPE, BROKER_TYPE, LOGGER_TYPE = 2, 4, 8
VERSIONS = range(SUPPORTED[ApiKey.DESCRIBE_CONFIGS][0], SUPPORTED[ApiKey.DESCRIBE_CONFIGS][1] + 1)
PROPERTIES = KafkaConfig.from_properties(
    {
        "broker.id": str(BROKER),
        "zookeeper.connect": "127.0.0.1:2181",
        "log.retention.ms": "5000",
        "log.retention.hours": "2",
        "num.partitions": "4",
        "log.segment.bytes": "2000000",
    }
).broker.properties


class Overrides:
    """A TopicConfigRepository over a mapping; counts its reads."""

    def __init__(self, topics: Mapping[str, Mapping[str, str]]) -> None:
        self.topics = topics
        self.reads: list[str] = []

    def topic_config(self, topic: str) -> Mapping[str, str]:
        self.reads.append(topic)
        return self.topics.get(topic, {})


def apis(
    overrides: Mapping[str, Mapping[str, str]] | None = None,
    properties: BrokerProperties | None = PROPERTIES,
) -> KafkaApis:
    return KafkaApis(BROKER, properties=properties, topic_configs=Overrides(overrides or {}))


def describe(
    kafka_apis: KafkaApis,
    version: int,
    *resources: tuple[int, str, list[str] | None],
    synonyms: bool = False,
    existing: tuple[str, ...] = ("orders",),
) -> Any:
    """Handle a DescribeConfigs; answer the metadata Ask (`existing` topics known) and run the
    Admin read; the response as a client decodes it."""
    header = RequestHeader(
        api_key=ApiKey.DESCRIBE_CONFIGS, api_version=version, correlation_id=7, client_id="c"
    )
    body = describe_configs_request(version, resources, include_synonyms=synonyms)
    step: Step = kafka_apis.handle(header, body)
    if isinstance(step, Ask):
        assert step.address == addresses.replica_manager(BROKER)
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
    frame = encode_response(ApiKey.DESCRIBE_CONFIGS, version, 7, step.body)
    _, decoded = decode_response(frame[4:], ApiKey.DESCRIBE_CONFIGS, version)
    return decoded


def configs_of(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


# -- topics --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_a_topic_lists_every_log_config_with_its_value_and_source(version: int) -> None:
    response = describe(apis({"orders": {"retention.ms": "1234"}}), version, (2, "orders", None))
    (result,) = response.results
    assert (result.error_code, result.resource_type, result.resource_name) == (0, 2, "orders")
    configs = configs_of(result)
    assert list(configs) == list(TOPIC_CONFIGS)  # every key of Kafka 2.8's LogConfig
    assert configs["retention.ms"].value == "1234"
    assert configs["segment.bytes"].value == "2000000"  # log.segment.bytes
    assert configs["cleanup.policy"].value == "delete"
    assert configs["min.cleanable.dirty.ratio"].value == "0.5"
    assert configs["unclean.leader.election.enable"].value == "false"
    assert configs["flush.messages"].value == "9223372036854775807"  # Long.MaxValue
    assert configs["leader.replication.throttled.replicas"].value == ""
    assert not any(c.read_only or c.is_sensitive for c in configs.values())
    if version == 0:
        assert not configs["retention.ms"].is_default
        assert not configs["segment.bytes"].is_default  # a static broker property
        assert configs["max.message.bytes"].is_default
    else:
        assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert configs["segment.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        assert configs["max.message.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
        assert all(c.synonyms == () for c in configs.values())  # not asked for


@pytest.mark.parametrize("version", [1, 2])
def test_topic_synonyms_are_the_override_then_the_broker_properties_kafka_names(
    version: int,
) -> None:
    response = describe(
        apis({"orders": {"retention.ms": "1234"}}), version, (2, "orders", None), synonyms=True
    )
    configs = configs_of(response.results[0])

    def synonyms(name: str) -> list[tuple[str, str | None, int]]:
        return [(s.name, s.value, s.source) for s in configs[name].synonyms]

    static, default = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG
    assert synonyms("retention.ms") == [
        ("retention.ms", "1234", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.ms", "5000", static),
        ("log.retention.hours", "2", static),
        ("log.retention.hours", "168", default),
    ]
    assert synonyms("segment.bytes") == [
        ("log.segment.bytes", "2000000", static),
        ("log.segment.bytes", "1073741824", default),
    ]
    assert synonyms("max.message.bytes") == [("message.max.bytes", "1048588", default)]
    # Kafka's configSynonyms keeps the synonyms from the config's own broker property on:
    # log.roll.ms has no default (log.roll.hours has), so segment.ms lists none
    assert synonyms("segment.ms") == []
    assert configs["segment.ms"].config_source == ConfigSource.DEFAULT_CONFIG
    # no broker property stands for the throttled-replica lists
    assert synonyms("leader.replication.throttled.replicas") == []


def test_retention_from_log_retention_hours_alone_is_listed_as_kafka_lists_it() -> None:
    """With only `log.retention.hours` set, Kafka 2.8 drops every synonym that precedes
    `log.retention.ms` (none follows it): the value is the hours', its source DEFAULT_CONFIG."""
    properties = KafkaConfig.from_properties(
        {"broker.id": "1", "zookeeper.connect": "z:2181", "log.retention.hours": "1"}
    ).broker.properties
    response = describe(apis(properties=properties), 1, (2, "orders", None), synonyms=True)
    retention = configs_of(response.results[0])["retention.ms"]
    assert (retention.value, retention.config_source, retention.synonyms) == (
        "3600000",
        ConfigSource.DEFAULT_CONFIG,
        (),
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_configuration_keys_filter_the_configs(version: int) -> None:
    response = describe(
        apis(), version, (2, "orders", ["retention.ms", "cleanup.policy", "no.such.key"])
    )
    assert list(configs_of(response.results[0])) == ["retention.ms", "cleanup.policy"]
    everything = describe(apis(), version, (2, "orders", []))  # empty: every config
    assert len(everything.results[0].configs) == len(TOPIC_CONFIGS)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_unknown_topic_is_unknown_topic_or_partition_and_is_not_read(version: int) -> None:
    kafka_apis = apis()
    response = describe(kafka_apis, version, (2, "missing", None), (2, "orders", None))
    missing, orders = response.results
    assert (missing.error_code, missing.error_message, missing.configs) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        None,  # Kafka 2.8 gives no message
        (),
    )
    assert (missing.resource_type, missing.resource_name) == (2, "missing")
    assert orders.error_code == 0 and orders.configs
    repository = kafka_apis.config_apis.repository
    assert isinstance(repository, Overrides) and repository.reads == ["orders"]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "Topic name is illegal, it can't be empty"),
        ("..", 'Topic name cannot be "." or ".."'),
        (
            "a/b",
            'Topic name "a/b" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        ),
        (
            "x" * 250,
            "Topic name is illegal, it can't be longer than 249 characters, topic name: "
            + "x" * 250,
        ),
    ],
)
def test_an_illegal_topic_name_is_invalid_topic_with_kafkas_message(
    name: str, message: str
) -> None:
    (result,) = describe(apis(), 2, (2, name, None)).results
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_TOPIC_EXCEPTION, message)


def test_a_failed_metadata_lookup_answers_its_code_for_each_topic() -> None:
    header = RequestHeader(
        api_key=ApiKey.DESCRIBE_CONFIGS, api_version=1, correlation_id=7, client_id="c"
    )
    step = apis().handle(header, describe_configs_request(1, [(2, "orders", None)]))
    assert isinstance(step, Ask)
    answered = step.then(ErrorResponse(error_code=ErrorCode.NOT_COORDINATOR))
    assert isinstance(answered, Answer)
    assert answered.body.results[0].error_code == ErrorCode.NOT_COORDINATOR


def test_a_failed_read_of_the_overrides_is_an_unknown_server_error() -> None:
    class Failing:
        def topic_config(self, topic: str) -> Mapping[str, str]:
            raise ConnectionError("ZooKeeper is gone")

    kafka_apis = KafkaApis(BROKER, properties=PROPERTIES, topic_configs=Failing())
    (result,) = describe(kafka_apis, 1, (2, "orders", None)).results
    assert (result.error_code, result.error_message) == (
        ErrorCode.UNKNOWN_SERVER_ERROR,
        "ZooKeeper is gone",
    )


# -- the broker ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_the_broker_lists_its_static_properties_read_only(version: int) -> None:
    response = describe(apis(), version, (4, str(BROKER), None), synonyms=True)
    (result,) = response.results
    assert (result.error_code, result.resource_type, result.resource_name) == (0, 4, "1")
    configs = configs_of(result)
    assert configs["num.partitions"].value == "4"
    assert configs["broker.id"].value == "1"
    assert configs["default.replication.factor"].value == "1"
    assert configs["log.retention.hours"].value == "2"
    assert all(c.read_only for c in configs.values())
    # the PASSWORD settings, as Kafka lists them: sensitive, with no value
    secrets = {"ssl.key.password", "sasl.jaas.config"}
    assert {name for name, c in configs.items() if c.is_sensitive} == secrets
    if version == 0:
        assert not configs["num.partitions"].is_default
        assert configs["default.replication.factor"].is_default
    else:
        assert configs["num.partitions"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        assert [(s.name, s.value, s.source) for s in configs["num.partitions"].synonyms] == [
            ("num.partitions", "4", ConfigSource.STATIC_BROKER_CONFIG),
            ("num.partitions", "1", ConfigSource.DEFAULT_CONFIG),
        ]
        assert configs["default.replication.factor"].config_source == ConfigSource.DEFAULT_CONFIG


def test_a_sensitive_broker_property_has_no_value() -> None:
    from dataclasses import replace

    assert PROPERTIES is not None
    secret = replace(PROPERTIES.properties[0], sensitive=True)
    properties = replace(PROPERTIES, properties=(secret,))
    (result,) = describe(apis(properties=properties), 1, (4, "1", None), synonyms=True).results
    (config,) = result.configs
    assert (config.name, config.value, config.is_sensitive) == (secret.name, None, True)
    assert all(s.value is None for s in config.synonyms)


def test_the_broker_default_resource_is_empty() -> None:
    """The empty name is the cluster-wide dynamic defaults: there are none here."""
    (result,) = describe(apis(), 2, (4, "", None)).results
    assert (result.error_code, result.configs) == (0, ())


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        (4, "2", "Unexpected broker id, expected 1 or empty string, but received 2"),
        (4, "one", "Broker id must be an integer, but it is: one"),
        (8, "", "Broker id must not be empty"),
        (8, "3", "Unexpected broker id, expected 1 but received 3"),
    ],
)
def test_another_broker_or_a_name_that_is_no_id_is_an_invalid_request(
    kind: int, name: str, message: str
) -> None:
    (result,) = describe(apis(), 1, (kind, name, None)).results
    assert (result.error_code, result.error_message, result.configs) == (
        ErrorCode.INVALID_REQUEST,
        message,
        (),
    )


def test_an_unknown_resource_type_refuses_every_resource_of_the_request() -> None:
    response = describe(apis(), 1, (2, "orders", None), (3, "x", None))
    assert [r.error_code for r in response.results] == [ErrorCode.INVALID_REQUEST] * 2
    assert response.results[0].error_message.startswith("This most likely occurs")


def test_the_properties_of_a_cluster_without_properties_are_defaults_or_the_config_given() -> None:
    """A `BrokerConfig` built in code is static configuration too."""
    shared = SharedBrokerConfig.from_properties({"num.partitions": "3"})
    named = shared.broker.properties.named() if shared.broker.properties else {}
    assert (named["num.partitions"].value, named["num.partitions"].static) == ("3", "3")
    assert named["log.retention.hours"].static is None
    plain = SharedBrokerConfig().broker.properties
    assert plain is not None and all(p.static is None for p in plain.properties)
    assert "broker.id" not in plain.named()  # a cluster's brokers share the properties
    assert plain.log_config == LogConfig()


def test_a_broker_config_built_in_code_is_the_brokers_static_configuration() -> None:
    config = BrokerConfig(apis=KafkaApisConfig(num_partitions=5))
    described = SharedBrokerConfig(broker=config).broker.properties
    assert described is not None
    partitions = described.named()["num.partitions"]
    assert (partitions.value, partitions.static, partitions.default) == ("5", "5", "1")


def test_without_zookeeper_a_topics_overrides_are_what_differs_from_the_brokers_defaults() -> None:
    defaults = LogConfig(segment_bytes=2000, retention_ms=60_000)
    configs = {"orders": LogConfig(segment_bytes=2000, retention_ms=1234, flush_interval_ms=None)}
    repository = MappingTopicConfigRepository(configs, defaults)
    assert repository.topic_config("orders") == {"retention.ms": "1234"}
    assert repository.topic_config("missing") == {}
