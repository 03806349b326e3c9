"""Kafka's ZooKeeper paths and JSON payloads (Kafka 0.9 `ZkUtils` formats), byte for byte.

Real Kafka brokers, tools and controllers read these znodes, so the encoders must write exactly
Kafka's JSON and the decoders must refuse anything else with a `MalformedZnodeError` naming the
znode.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.actors.controller.zk_data import (
    CONTROLLER,
    CONTROLLER_EPOCH,
    ISR_CHANGE_NOTIFICATION,
    ISR_CHANGE_PREFIX,
    BrokerRegistration,
    MalformedZnodeError,
    UnknownTopicConfigError,
    broker_path,
    decode_assignment,
    decode_controller,
    decode_controller_epoch,
    decode_isr_change,
    decode_partition_state,
    decode_topic_config,
    encode_assignment,
    encode_controller,
    encode_controller_epoch,
    encode_isr_change,
    encode_partition_state,
    encode_topic_config,
    log_config_from,
    partition_state_path,
    topic_config_overrides,
    topic_config_path,
    topic_path,
)
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.storage import LogConfig

# -- paths -----------------------------------------------------------------------------------------


def test_znode_paths_are_kafkas() -> None:
    assert broker_path(3) == "/brokers/ids/3"
    assert topic_path("orders") == "/brokers/topics/orders"
    assert partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert topic_config_path("orders") == "/config/topics/orders"
    assert CONTROLLER == "/controller"
    assert CONTROLLER_EPOCH == "/controller_epoch"
    assert ISR_CHANGE_NOTIFICATION == "/isr_change_notification"
    assert ISR_CHANGE_PREFIX == "isr_change_"


# -- /brokers/ids/<id> -----------------------------------------------------------------------------

KAFKA_REGISTRATION = (
    b'{"jmx_port":-1,"timestamp":"1453824417372","endpoints":["PLAINTEXT://kafka-1:9092"],'
    b'"host":"kafka-1","version":2,"port":9092}'
)


def test_kafkas_version_2_broker_registration_decodes() -> None:
    registration = BrokerRegistration.decode(1, KAFKA_REGISTRATION)

    assert (registration.host, registration.port) == ("kafka-1", 9092)
    assert registration.timestamp_ms == 1453824417372
    assert registration.endpoint("PLAINTEXT") == ("kafka-1", 9092)
    # what it registers now (version 4) decodes to the same broker
    again = BrokerRegistration.decode(1, registration.encode())
    assert again == registration
    assert json.loads(registration.encode())["version"] == 4


def test_broker_registration_decodes_regardless_of_layout() -> None:
    data = json.dumps(
        {"version": 2, "port": 19092, "host": "10.0.0.7", "timestamp": "5", "jmx_port": 9999},
        indent=2,
    ).encode()

    assert BrokerRegistration.decode(7, data) == BrokerRegistration(
        broker_id=7, host="10.0.0.7", port=19092, timestamp_ms=5
    )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"\xff\xfe{}", id="not-utf8"),
        pytest.param(b"", id="empty"),
        pytest.param(b"[1, 2]", id="not-an-object"),
        pytest.param(b'{"port": 9092, "timestamp": "1"}', id="missing-host"),
        pytest.param(b'{"host": "h", "timestamp": "1"}', id="missing-port"),
        pytest.param(b'{"host": "h", "port": 9092}', id="missing-timestamp"),
        pytest.param(b'{"host": "h", "port": "9092", "timestamp": "1"}', id="string-port"),
        pytest.param(b'{"host": "h", "port": 9092, "timestamp": "soon"}', id="bad-timestamp"),
    ],
)
def test_malformed_broker_registration_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError) as caught:
        BrokerRegistration.decode(4, data)
    assert caught.value.path == "/brokers/ids/4"
    assert "/brokers/ids/4" in str(caught.value)


@pytest.mark.parametrize("timestamp", ["null", "[1]", "{}"])
def test_broker_registration_with_non_scalar_timestamp_is_malformed(timestamp: str) -> None:
    data = b'{"host": "h", "port": 9092, "timestamp": %s}' % timestamp.encode()

    with pytest.raises(MalformedZnodeError) as caught:
        BrokerRegistration.decode(4, data)
    assert caught.value.path == "/brokers/ids/4"


@pytest.mark.parametrize("host", ["null", "42", '["h"]'])
def test_broker_registration_with_non_string_host_is_malformed(host: str) -> None:
    data = b'{"host": %s, "port": 9092, "timestamp": "1"}' % host.encode()

    with pytest.raises(MalformedZnodeError):
        BrokerRegistration.decode(4, data)


# -- /controller and /controller_epoch -------------------------------------------------------------


def test_controller_znode_is_kafkas_json() -> None:
    data = encode_controller(2, 1453824417372)

    assert data == b'{"version":1,"brokerid":2,"timestamp":"1453824417372"}'
    assert decode_controller(data) == 2


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"{", id="not-json"),
        pytest.param(b"\x80", id="not-utf8"),
        pytest.param(b'{"version": 1}', id="missing-brokerid"),
        pytest.param(b'{"version": 1, "brokerid": "2"}', id="string-brokerid"),
        pytest.param(b'{"version": 1, "brokerid": 2.0}', id="float-brokerid"),
        pytest.param(b'{"version": 1, "brokerid": true}', id="bool-brokerid"),
        pytest.param(b'"2"', id="not-an-object"),
    ],
)
def test_malformed_controller_znode_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError) as caught:
        decode_controller(data)
    assert caught.value.path == "/controller"


def test_controller_epoch_is_a_plain_integer() -> None:
    assert encode_controller_epoch(17) == b"17"
    assert decode_controller_epoch(b"17") == 17
    assert decode_controller_epoch(encode_controller_epoch(1)) == 1


@pytest.mark.parametrize("data", [b"", b"seventeen", b"1.5", b'{"epoch":1}', b"\xff"])
def test_malformed_controller_epoch_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError) as caught:
        decode_controller_epoch(data)
    assert caught.value.path == "/controller_epoch"


# -- /brokers/topics/<topic> -----------------------------------------------------------------------


def test_topic_assignment_is_kafkas_json() -> None:
    data = encode_assignment({1: (2, 3, 1), 0: (1, 2, 3)})

    assert data == b'{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}'
    assert decode_assignment("t", data) == {0: (1, 2, 3), 1: (2, 3, 1)}


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    st.dictionaries(
        st.integers(0, 1000), st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)
    )
)
def test_topic_assignment_round_trips(assignment: dict[int, tuple[int, ...]]) -> None:
    data = encode_assignment(assignment)

    assert decode_assignment("t", data) == assignment
    assert json.loads(data)["version"] == 1


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"garbage", id="not-json"),
        pytest.param(b'{"version": 1}', id="missing-partitions"),
        pytest.param(b'{"version": 1, "partitions": [[1, 2]]}', id="partitions-a-list"),
        pytest.param(b'{"version": 1, "partitions": {"x": [1]}}', id="key-not-a-number"),
        pytest.param(b'{"version": 1, "partitions": {"-1": [1]}}', id="negative-key"),
        pytest.param(b'{"version": 1, "partitions": {"1.5": [1]}}', id="fractional-key"),
        pytest.param(b'{"version": 1, "partitions": {"": [1]}}', id="empty-key"),
        pytest.param(b'{"version": 1, "partitions": {"0": "1,2"}}', id="replicas-not-a-list"),
        pytest.param(b'{"version": 1, "partitions": {"0": [1, "2"]}}', id="string-replica"),
        pytest.param(b'{"version": 1, "partitions": {"0": [1, null]}}', id="null-replica"),
    ],
)
def test_malformed_topic_assignment_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError) as caught:
        decode_assignment("orders", data)
    assert caught.value.path == "/brokers/topics/orders"


@pytest.mark.parametrize("key", ["\u00b2", "\u0663"], ids=["superscript-two", "arabic-three"])
def test_topic_assignment_with_non_ascii_digit_key_is_malformed(key: str) -> None:
    data = json.dumps({"version": 1, "partitions": {key: [1]}}).encode()

    with pytest.raises(MalformedZnodeError):
        decode_assignment("orders", data)


# -- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------------


def test_partition_state_is_kafkas_json() -> None:
    state = PartitionLeaderState(
        topic="t", partition=0, leader=1, leader_epoch=7, isr=(1, 3, 2), controller_epoch=3
    )

    data = encode_partition_state(state)

    assert data == b'{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":7,"isr":[1,3,2]}'
    assert decode_partition_state("t", 0, data) == state


def test_offline_partition_state_round_trips() -> None:
    state = PartitionLeaderState(
        topic="t", partition=0, leader=-1, leader_epoch=12, isr=(2,), controller_epoch=5
    )

    assert b'"leader":-1' in encode_partition_state(state)
    assert decode_partition_state("t", 0, encode_partition_state(state)) == state


def test_partition_state_written_by_kafka_decodes() -> None:
    data = b'{"controller_epoch": 4, "leader": 2, "version": 1, "leader_epoch": 0, "isr": [2, 1]}'

    assert decode_partition_state("t", 9, data, replicas=(1, 2), zk_version=3) == (
        PartitionLeaderState(
            topic="t",
            partition=9,
            leader=2,
            leader_epoch=0,
            isr=(2, 1),
            controller_epoch=4,
            replicas=(1, 2),
            zk_version=3,
        )
    )


GOOD_STATE = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2]}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("leader", "1"),
        ("leader", 1.0),
        ("leader", True),
        ("leader", None),
        ("leader_epoch", "0"),
        ("controller_epoch", [1]),
        ("isr", "1,2"),
        ("isr", 1),
        ("isr", [1, "2"]),
        ("isr", {"1": 2}),
    ],
)
def test_partition_state_with_wrong_types_is_refused(field: str, value: object) -> None:
    data = json.dumps({**GOOD_STATE, field: value}).encode()

    with pytest.raises(MalformedZnodeError) as caught:
        decode_partition_state("t", 3, data)
    assert caught.value.path == "/brokers/topics/t/partitions/3/state"


@pytest.mark.parametrize("field", ["leader", "leader_epoch", "isr", "controller_epoch"])
def test_partition_state_missing_a_field_is_refused(field: str) -> None:
    data = json.dumps({k: v for k, v in GOOD_STATE.items() if k != field}).encode()

    with pytest.raises(MalformedZnodeError) as caught:
        decode_partition_state("t", 3, data)
    assert caught.value.path == "/brokers/topics/t/partitions/3/state"


@pytest.mark.parametrize("data", [b"", b"{'leader': 1}", b"\xc3\x28", b"null"])
def test_partition_state_that_is_not_a_json_object_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError) as caught:
        decode_partition_state("t", 3, data)
    assert caught.value.path == "/brokers/topics/t/partitions/3/state"


# -- /isr_change_notification -------------------------------------------------------------------


def test_isr_change_notification_is_kafkas_json() -> None:
    data = encode_isr_change(
        [TopicPartition(topic="t", partition=0), TopicPartition(topic="orders", partition=12)]
    )

    assert data == (
        b'{"version":1,"partitions":[{"topic":"t","partition":0},'
        b'{"topic":"orders","partition":12}]}'
    )
    path = f"{ISR_CHANGE_NOTIFICATION}/{ISR_CHANGE_PREFIX}0000000003"
    assert decode_isr_change(path, data) == [
        TopicPartition(topic="t", partition=0),
        TopicPartition(topic="orders", partition=12),
    ]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"nope", id="not-json"),
        pytest.param(b'{"version": 1}', id="missing-partitions"),
        pytest.param(b'{"version": 1, "partitions": {"t": 0}}', id="partitions-not-a-list"),
        pytest.param(b'{"version": 1, "partitions": [["t", 0]]}', id="entry-not-an-object"),
        pytest.param(b'{"version": 1, "partitions": [{"partition": 0}]}', id="missing-topic"),
        pytest.param(
            b'{"version": 1, "partitions": [{"topic": 5, "partition": 0}]}', id="int-topic"
        ),
        pytest.param(b'{"version": 1, "partitions": [{"topic": "t"}]}', id="missing-partition"),
        pytest.param(
            b'{"version": 1, "partitions": [{"topic": "t", "partition": "0"}]}',
            id="string-partition",
        ),
    ],
)
def test_malformed_isr_change_notification_is_refused(data: bytes) -> None:
    path = "/isr_change_notification/isr_change_0000000001"

    with pytest.raises(MalformedZnodeError) as caught:
        decode_isr_change(path, data)
    assert caught.value.path == path


# -- /config/topics/<topic> ---------------------------------------------------------------------


def test_topic_config_is_kafkas_json() -> None:
    data = encode_topic_config(LogConfig(min_insync_replicas=2))

    assert data == b'{"version":1,"config":{"min.insync.replicas":"2"}}'
    assert decode_topic_config("t", data) == LogConfig(min_insync_replicas=2)


def test_default_topic_config_has_no_overrides() -> None:
    assert topic_config_overrides(LogConfig()) == {}
    assert encode_topic_config(LogConfig()) == b'{"version":1,"config":{}}'
    assert decode_topic_config("t", b'{"version":1,"config":{}}') == LogConfig()
    assert decode_topic_config("t", b'{"version":1}') == LogConfig()


def test_topic_config_overrides_list_only_non_default_settings_as_strings() -> None:
    config = LogConfig(
        retention_ms=-1,
        segment_bytes=1024,
        flush_interval_messages=10,
        unclean_leader_election_enable=True,
    )

    assert topic_config_overrides(config) == {
        "retention.ms": "-1",
        "segment.bytes": "1024",
        "flush.messages": "10",
        "unclean.leader.election.enable": "true",
    }
    # Setting a value equal to its default is no override.
    assert topic_config_overrides(LogConfig(min_insync_replicas=1)) == {}


def test_topic_config_written_by_kafka_decodes() -> None:
    data = (
        b'{"version":1,"config":{"min.insync.replicas":"2","retention.ms":"86400000",'
        b'"unclean.leader.election.enable":"false","segment.index.bytes":"4096"}}'
    )

    assert decode_topic_config("t", data) == LogConfig(
        min_insync_replicas=2,
        retention_ms=86_400_000,
        unclean_leader_election_enable=False,
        max_index_size=4096,
    )


log_configs = st.builds(
    LogConfig,
    segment_bytes=st.integers(14, 2**31 - 1),
    segment_ms=st.integers(1, 2**40),
    index_interval_bytes=st.integers(0, 2**20),
    max_index_size=st.integers(8, 2**31 - 1),
    retention_bytes=st.integers(-1, 2**40),
    retention_ms=st.integers(-1, 2**40),
    max_message_bytes=st.integers(0, 2**31 - 1),
    flush_interval_messages=st.none() | st.integers(0, 2**40),
    flush_interval_ms=st.none() | st.integers(0, 2**40),
    file_delete_delay_ms=st.integers(0, 2**31 - 1),
    min_insync_replicas=st.integers(1, 10),
    unclean_leader_election_enable=st.booleans(),
    cleanup_policy=st.sampled_from(["delete", "compact", "compact,delete"]),
    max_compaction_lag_ms=st.integers(1, 2**63 - 1),
    segment_jitter_ms=st.integers(0, 2**40),
    message_timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
    message_timestamp_difference_max_ms=st.integers(0, 2**63 - 1),
    compression_type=st.sampled_from(["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]),
    preallocate=st.booleans(),
    message_format_version=st.sampled_from(["2.8-IV1", "0.10.0", "1.0", "2.4-IV0"]),
    message_downconversion_enable=st.booleans(),
    leader_replication_throttled_replicas=st.sampled_from(["", "*", "0:1", "0:1,1:2"]),
    follower_replication_throttled_replicas=st.sampled_from(["", "*", "3:4"]),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(log_configs)
def test_topic_config_round_trips_every_setting(config: LogConfig) -> None:
    data = encode_topic_config(config)

    assert decode_topic_config("t", data) == config
    body = json.loads(data)
    assert body["version"] == 1
    assert all(isinstance(v, str) for v in body["config"].values())
    assert log_config_from(topic_config_overrides(config)) == config


def test_log_config_from_applies_overrides_on_a_base() -> None:
    base = LogConfig(segment_bytes=4096, min_insync_replicas=2)

    config = log_config_from(
        {"min.insync.replicas": "3", "unclean.leader.election.enable": "TRUE"}, base
    )

    assert config == LogConfig(
        segment_bytes=4096, min_insync_replicas=3, unclean_leader_election_enable=True
    )


def test_unknown_topic_config_key_is_refused() -> None:
    with pytest.raises(UnknownTopicConfigError, match=r"no\.such\.key"):
        log_config_from({"no.such.key": "1"})
    with pytest.raises(UnknownTopicConfigError, match=r"no\.such\.key"):
        log_config_from({"min.insync.replicas": "2", "no.such.key": "1"})


@pytest.mark.parametrize(
    "overrides",
    [
        {"min.insync.replicas": "two"},
        {"min.insync.replicas": "0"},  # LogConfig refuses an ISR minimum below one
        {"segment.bytes": "1.5"},
        {"retention.ms": ""},
        {"unclean.leader.election.enable": "maybe"},
        {"unclean.leader.election.enable": "1"},
    ],
)
def test_bad_topic_config_values_are_refused(overrides: dict[str, str]) -> None:
    with pytest.raises(ValueError) as caught:
        log_config_from(overrides)
    assert not isinstance(caught.value, UnknownTopicConfigError)


@pytest.mark.parametrize(
    "config",
    [
        pytest.param('{"no.such.key": "1"}', id="unknown-key"),
        pytest.param('{"min.insync.replicas": "two"}', id="bad-int"),
        pytest.param('{"unclean.leader.election.enable": "maybe"}', id="bad-bool"),
        pytest.param('["min.insync.replicas"]', id="config-not-an-object"),
    ],
)
def test_malformed_topic_config_znode_is_refused(config: str) -> None:
    data = b'{"version": 1, "config": %s}' % config.encode()

    with pytest.raises(MalformedZnodeError) as caught:
        decode_topic_config("orders", data)
    assert caught.value.path == "/config/topics/orders"


@pytest.mark.parametrize("data", [b"{", b"\xfe", b"[]"])
def test_topic_config_znode_that_is_not_a_json_object_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedZnodeError) as caught:
        decode_topic_config("orders", data)
    assert caught.value.path == "/config/topics/orders"
