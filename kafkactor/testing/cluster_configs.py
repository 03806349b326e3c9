"""Dynamic topic configs of the in-process `Cluster`: its topics' overrides read, replaced
(Kafka's `AdminZkClient.changeTopicConfig`) and altered key by key, with or without
ZooKeeper. `Cluster.topic_config`, `change_topic_config` and `alter_topic_config` are these
functions; they live here to keep the cluster's module to its lifecycle, topics and faults."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from kafkactor.actors.broker import Broker, BrokerConfig
from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.config_changes import change_topic_config, fetch_topic_config
from kafkactor.actors.controller.topic_configs import MappingTopicConfigRepository
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.common import PartitionLeaderState, UnknownTopicError
from kafkactor.messages.config import TopicConfigChanged
from kafkactor.storage import LogConfig


class Cluster(Protocol):
    """What these functions use of `kafkactor.testing.Cluster` (no import: it imports them)."""

    _zk: Any
    partition_states: dict[tuple[str, int], PartitionLeaderState]
    config: BrokerConfig
    topic_configs: dict[str, LogConfig]
    directory: Directory
    brokers: dict[int, Broker]

    def live_brokers(self) -> list[int]: ...

    def _wait_for(self, condition: Callable[[], bool], what: str) -> None: ...


__all__ = ["alter_topic_config", "applied_everywhere", "change_config", "read_topic_config"]


def _exists(cluster: Cluster, topic: str) -> bool:
    if cluster._zk is not None:
        return cluster._zk.exists(zk_data.topic_path(topic)) is not None
    return any(t == topic for t, _ in cluster.partition_states)


def read_topic_config(cluster: Cluster, topic: str) -> dict[str, str]:
    """The topic's overrides: `/config/topics/<t>` with ZooKeeper, else the settings of its
    config that differ from the brokers' defaults. `UnknownTopicError` for no such topic."""
    if not _exists(cluster, topic):
        raise UnknownTopicError(f"The topic '{topic}' does not exist.")
    if cluster._zk is not None:
        return fetch_topic_config(cluster._zk, topic)
    defaults = cluster.config.log_manager.default_log_config
    return MappingTopicConfigRepository(cluster.topic_configs, defaults).topic_config(topic)


def change_config(cluster: Cluster, topic: str, overrides: Mapping[str, str]) -> LogConfig:
    """The topic's overrides become `overrides`, checked as Kafka checks them (ValueError:
    `TopicConfigError` / `UnknownTopicConfigError`); returns the topic's new config. With
    ZooKeeper: written with a change notification, which every broker applies; without: the
    cluster tells every live broker's replica manager itself."""
    if not _exists(cluster, topic):
        raise UnknownTopicError(f"The topic '{topic}' does not exist.")
    given = {str(k): str(v) for k, v in overrides.items()}
    config = zk_data.log_config_from(given, base=cluster.config.log_manager.default_log_config)
    cluster.topic_configs[topic] = config  # topics created or logs opened from now on
    if cluster._zk is not None:
        change_topic_config(cluster._zk, topic, given)
        return config
    message = TopicConfigChanged(topic=topic, overrides=tuple(sorted(given.items())))
    for broker in cluster.live_brokers():
        cluster.directory.tell(addresses.replica_manager(broker), message)
    return config


def applied_everywhere(cluster: Cluster, topic: str, config: LogConfig) -> bool:
    """Every live broker's logs of `topic` run with `config` (their partitions too: a
    partition actor updates its state before it swaps its log's config)."""
    for broker_id in cluster.live_brokers():
        broker = cluster.brokers[broker_id]
        for tp, log in broker.log_manager.all_logs().items():
            if tp.topic == topic and log.config != config:
                return False
    return True


def alter_topic_config(
    cluster: Cluster, topic: str, changes: Mapping[str, str | None]
) -> LogConfig:
    """Incremental: each key set to its value, or its override deleted (None); waits until
    every live broker's replicas of the topic run with the new config."""
    overrides = read_topic_config(cluster, topic)
    for name, value in changes.items():
        if value is None:
            overrides.pop(name, None)
        else:
            overrides[name] = str(value)
    config = change_config(cluster, topic, overrides)
    cluster._wait_for(
        lambda: applied_everywhere(cluster, topic, config),
        f"every live broker's replicas of {topic!r} to run with its new config",
    )
    return config
