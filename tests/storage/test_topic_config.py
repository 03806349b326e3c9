"""Every topic config of Kafka 2.8's LogConfig, by name: accepted with Kafka's types, ranges and
valid values, stored in `/config/topics/<t>` and read back; refused naming the key and the
valid values."""

from __future__ import annotations

import json

import pytest

from kafkactor.actors.controller.zk_data import (
    decode_topic_config,
    encode_topic_config,
    log_config_from,
    topic_config_overrides,
)
from kafkactor.storage import LogConfig
from kafkactor.storage.topic_config import (
    TOPIC_CONFIGS,
    TopicConfigError,
    UnknownTopicConfigError,
)

LONG_MAX = 2**63 - 1

# Kafka 2.8's topic configs with its defaults (LogConfig's Defaults), and a valid non-default.
KAFKA_TOPIC_CONFIGS = {
    "segment.bytes": ("1073741824", "14"),
    "segment.ms": ("604800000", "1"),
    "segment.jitter.ms": ("0", "1000"),
    "segment.index.bytes": ("10485760", "4096"),
    "flush.messages": (None, "0"),  # Kafka's default is Long.MAX_VALUE: never forced
    "flush.ms": (None, str(LONG_MAX)),
    "retention.bytes": ("-1", "-5"),  # any LONG: a negative one is no limit
    "retention.ms": ("604800000", "-1"),
    "max.message.bytes": ("1048588", "0"),
    "index.interval.bytes": ("4096", "0"),
    "delete.retention.ms": ("86400000", "0"),
    "min.compaction.lag.ms": ("0", "100"),
    "max.compaction.lag.ms": (str(LONG_MAX), "1000"),
    "file.delete.delay.ms": ("60000", "0"),
    "min.cleanable.dirty.ratio": ("0.5", "1"),
    "cleanup.policy": ("delete", "compact"),
    "unclean.leader.election.enable": ("false", "TRUE"),
    "min.insync.replicas": ("1", "2"),
    "compression.type": ("producer", "zstd"),
    "preallocate": ("false", "true"),
    "message.format.version": ("2.8-IV1", "0.10.2"),
    "message.timestamp.type": ("CreateTime", "LogAppendTime"),
    "message.timestamp.difference.max.ms": (str(LONG_MAX), "0"),
    "leader.replication.throttled.replicas": ("", "0:1, 1:2"),
    "follower.replication.throttled.replicas": ("", "*"),
    "message.downconversion.enable": ("true", "false"),
}


def test_every_kafka_topic_config_is_known_with_kafkas_default() -> None:
    assert set(TOPIC_CONFIGS) == set(KAFKA_TOPIC_CONFIGS)
    defaults = LogConfig()
    for name, (default, _) in KAFKA_TOPIC_CONFIGS.items():
        value = getattr(defaults, TOPIC_CONFIGS[name].field)
        if default is None:
            assert value is None, name
        else:
            assert log_config_from({name: default}) == defaults, name


@pytest.mark.parametrize("name", sorted(KAFKA_TOPIC_CONFIGS))
def test_each_config_is_accepted_stored_in_its_znode_and_read_back(name: str) -> None:
    value = KAFKA_TOPIC_CONFIGS[name][1]
    config = log_config_from({name: value})
    assert config != LogConfig(), f"{name}={value} changed nothing"

    data = encode_topic_config(config)
    stored = json.loads(data)["config"]
    assert list(stored) == [name]
    assert decode_topic_config("t", data) == config
    assert log_config_from(topic_config_overrides(config)) == config


def test_values_are_read_as_kafkas_config_def_reads_them() -> None:
    config = log_config_from(
        {
            "segment.ms": " 5000 ",
            "cleanup.policy": "delete , compact",
            "preallocate": "True",
            "min.cleanable.dirty.ratio": "1e-1",
            "leader.replication.throttled.replicas": "0:1,1:2",
            "message.format.version": "2.8.1",  # its first two parts name 2.8
        }
    )
    assert config.segment_ms == 5000
    assert config.cleanup_policy == "compact,delete"
    assert config.preallocate is True
    assert config.min_cleanable_dirty_ratio == 0.1
    assert config.leader_replication_throttled_replicas == "0:1,1:2"
    assert config.message_format_version == "2.8.1"
    assert config.log_append_time is False


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("segment.bytes", "13", "Value must be at least 14; valid values: [14,...]"),
        ("segment.ms", "0", "Value must be at least 1; valid values: [1,...]"),
        ("segment.jitter.ms", "-1", "Value must be at least 0; valid values: [0,...]"),
        ("segment.index.bytes", "7", "Value must be at least 8; valid values: [8,...]"),
        ("retention.ms", "-2", "Value must be at least -1; valid values: [-1,...]"),
        ("max.compaction.lag.ms", "0", "Value must be at least 1; valid values: [1,...]"),
        ("min.cleanable.dirty.ratio", "1.01", "Value must be no more than 1; valid values: "),
        ("min.insync.replicas", "0", "Value must be at least 1; valid values: [1,...]"),
        ("message.timestamp.difference.max.ms", "-1", "Value must be at least 0"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),
        ("segment.ms", "9223372036854775808", "Not a number of type LONG"),
        ("retention.ms", "1.5", "Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("message.timestamp.type", "logappendtime", "String must be one of: CreateTime, LogAppe"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, snappy, lz4"),
        ("cleanup.policy", "compact,shred", "String must be one of: compact, delete"),
        ("message.format.version", "3.0", "Version `3.0` is not a valid version; valid values"),
        ("follower.replication.throttled.replicas", "0-1", "must be the literal '*' or a list"),
    ],
)
def test_a_bad_value_is_refused_naming_the_key_and_the_valid_values(
    name: str, value: str, reason: str
) -> None:
    with pytest.raises(TopicConfigError) as refused:
        log_config_from({name: value})
    assert str(refused.value).startswith(f"Invalid value {value} for configuration {name}: ")
    assert reason in str(refused.value)
    assert refused.value.key == name


def test_min_compaction_lag_above_max_is_refused_as_kafka_does() -> None:
    with pytest.raises(TopicConfigError, match=r"min\.compaction\.lag\.ms \(10\) > max"):
        log_config_from({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_an_unknown_key_is_still_refused() -> None:
    with pytest.raises(UnknownTopicConfigError, match=r"unknown topic config keys: segment\.size"):
        log_config_from({"segment.size": "1", "segment.ms": "5"})
