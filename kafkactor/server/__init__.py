"""Kafka's `kafka.server`: one broker process and what starts it.

- `config`: `KafkaConfig`, a broker's settings read from a Kafka-style properties file
  (`kafkactor broker --config FILE`), and its `ConfigError`; `SharedBrokerConfig`, the same
  properties shared by every broker of an in-process cluster (`kafkactor serve`, `Cluster`)
- `broker_process`: `BrokerProcess` and `main`, one broker in this process and its peers in
  others (`kafkactor broker`)
- `zookeeper`: `LocalZooKeeper`, Debian's ZooKeeper 3.8 as a child process
- `launcher` (with `cluster_files`, `cluster_status`, `cluster_signals`, `processes`): a local
  cluster of broker processes kept in one directory (`kafkactor cluster ...`)

The names below are imported on first use: `kafkactor --help` builds its parser from
`cluster_cli` without loading the broker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkactor.server.config import ConfigError, EndPoint, KafkaConfig, SharedBrokerConfig
    from kafkactor.server.zookeeper import LocalZooKeeper, LocalZooKeeperError

__all__ = [
    "ConfigError",
    "EndPoint",
    "KafkaConfig",
    "LocalZooKeeper",
    "LocalZooKeeperError",
    "SharedBrokerConfig",
]

_HOMES = {
    "ConfigError": "kafkactor.server.config",
    "EndPoint": "kafkactor.server.config",
    "KafkaConfig": "kafkactor.server.config",
    "SharedBrokerConfig": "kafkactor.server.config",
    "LocalZooKeeper": "kafkactor.server.zookeeper",
    "LocalZooKeeperError": "kafkactor.server.zookeeper",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'kafkactor.server' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
