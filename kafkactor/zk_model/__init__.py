"""ZooKeeper semantics in memory, and the same client interface over a real ZooKeeper (kazoo).

`ZkModel` is the pure core (tree, transactions, sessions, watches); `EmbeddedZooKeeper` serves
it to many `EmbeddedClient` sessions in the process, the two meeting only through the protocols
of `kafkactor.zk_model.connection`; `connect()` returns either that client or a kazoo
`KazooClient`. Values and errors are kazoo's own types, re-exported here.
"""

from __future__ import annotations

from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    ConnectionClosedError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent, ZnodeStat

from kafkactor.zk_model.client import EmbeddedClient
from kafkactor.zk_model.embedded import EmbeddedZooKeeper
from kafkactor.zk_model.interface import WatchRecipe, ZkClient
from kafkactor.zk_model.model import ZkModel
from kafkactor.zk_model.watches import Notification, Watcher, WatchKind

EMBEDDED = "embedded"


def connect(
    hosts: str,
    *,
    embedded: EmbeddedZooKeeper | None = None,
    session_timeout_ms: int = 10_000,
    timeout_s: float = 15.0,
) -> ZkClient:
    """A started client: of `embedded` for hosts "embedded", else kazoo's for "host:port,...".

    The kazoo client asks for `session_timeout_ms` (the server negotiates it) and waits up to
    `timeout_s` for the connection.
    """
    if hosts == EMBEDDED:
        if embedded is None:
            raise ValueError('hosts="embedded" needs the EmbeddedZooKeeper to connect to')
        return embedded.connect(session_timeout_ms, timeout_s=timeout_s)
    from kazoo.client import KazooClient

    client = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
    client.start(timeout=timeout_s)
    return client  # type: ignore[no-any-return]


__all__ = [
    "EMBEDDED",
    "BadArgumentsError",
    "BadVersionError",
    "ConnectionClosedError",
    "EmbeddedClient",
    "EmbeddedZooKeeper",
    "EventType",
    "KazooState",
    "KeeperState",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Notification",
    "SessionExpiredError",
    "WatchKind",
    "WatchRecipe",
    "WatchedEvent",
    "Watcher",
    "ZkClient",
    "ZkModel",
    "ZnodeStat",
    "connect",
]
