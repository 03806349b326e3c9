"""A broker's topic configs read from ZooKeeper: `/config/topics/<t>`, as Kafka's brokers
read them (its TopicConfigHandler), so a broker process learns the configs topics were created
with in other processes, and a broker that restarts opens its logs with them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

from kazoo.exceptions import NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.storage import LogConfig
from kafkactor.storage.topic_config import TOPIC_CONFIGS, format_topic_config

__all__ = ["MappingTopicConfigRepository", "ZkTopicConfigRepository", "ZkTopicConfigs"]


class ZkTopicConfigs(MutableMapping[str, LogConfig]):
    """Topic -> LogConfig, filled from `/config/topics/<topic>` on first use (`zk()` gives the
    current ZooKeeper client), its overrides on top of the broker's `defaults`; a topic with no
    config znode has none (the log manager's default
    applies). Values set here (a topic created in this process) are kept as given. A malformed
    znode counts as absent. Thread-safe: the replica manager and log manager both read it."""

    def __init__(self, zk: Callable[[], Any], defaults: LogConfig | None = None) -> None:
        self._zk = zk
        self.defaults = defaults if defaults is not None else LogConfig()
        self._configs: dict[str, LogConfig] = {}
        self._lock = threading.Lock()

    def __getitem__(self, topic: str) -> LogConfig:
        with self._lock:
            found = self._configs.get(topic)
        if found is not None:
            return found
        try:
            data, _ = self._zk().get(zk_data.topic_config_path(topic))
            config = zk_data.decode_topic_config(topic, data, base=self.defaults)
        except (NoNodeError, zk_data.MalformedZnodeError):
            raise KeyError(topic) from None
        with self._lock:
            return self._configs.setdefault(topic, config)

    def __setitem__(self, topic: str, config: LogConfig) -> None:
        with self._lock:
            self._configs[topic] = config

    def __delitem__(self, topic: str) -> None:
        with self._lock:
            del self._configs[topic]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._configs))

    def __len__(self) -> int:
        with self._lock:
            return len(self._configs)


class ZkTopicConfigRepository:
    """Kafka's `ConfigRepository.topicConfig` in ZooKeeper mode: a topic's overrides read
    from `/config/topics/<topic>` each time ({} without the znode). Blocks on ZooKeeper."""

    def __init__(self, zk: Callable[[], Any]) -> None:
        self._zk = zk

    def topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self._zk().get(zk_data.topic_config_path(topic))
        except NoNodeError:
            return {}
        return zk_data.decode_topic_config_overrides(topic, data)


class MappingTopicConfigRepository:
    """A topic's overrides where no ZooKeeper holds them (the in-process cluster without
    one): the settings of its LogConfig that differ from the broker's `defaults`."""

    def __init__(self, configs: Mapping[str, LogConfig], defaults: LogConfig) -> None:
        self._configs = configs
        self._defaults = defaults

    def topic_config(self, topic: str) -> dict[str, str]:
        config = self._configs.get(topic)
        if config is None:
            return {}
        return {
            name: format_topic_config(name, getattr(config, key.field))
            for name, key in TOPIC_CONFIGS.items()
            if getattr(config, key.field) not in (None, getattr(self._defaults, key.field))
        }
