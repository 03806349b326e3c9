"""The contract between the embedded client and server (`kafkactor.zk_model.connection`).

Each side works with any implementation of the other's protocol: an `EmbeddedClient` talks to a
`SessionServer` that only records and forwards, and the `EmbeddedZooKeeper` serves a scripted
`SessionClient` that has no event thread, in the order kazoo's connection would see it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

import pytest
from kazoo.exceptions import ConnectionClosedError, SessionExpiredError
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from kafkactor.timer import ManualClock
from kafkactor.zk_model import EmbeddedClient, EmbeddedZooKeeper, Watcher, ZkModel
from kafkactor.zk_model.connection import Operation, SessionClient, SessionServer
from tests.zk_model.support import Events

TIMEOUT_MS = 10_000

T = TypeVar("T")


@pytest.fixture
def zk() -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(ManualClock(1_000_000), tick_ms=2000)
    try:
        yield server
    finally:
        server.close()


class RecordingServer:
    """A `SessionServer` that forwards every call to another one and records its name."""

    def __init__(self, server: SessionServer) -> None:
        self.server = server
        self.calls: list[str] = []

    def open_session(self, client: SessionClient) -> None:
        self.calls.append("open_session")
        self.server.open_session(client)

    def execute(self, client: SessionClient, op: Operation[T]) -> T:
        self.calls.append("execute")
        return self.server.execute(client, op)

    def close_session(self, client: SessionClient) -> None:
        self.calls.append("close_session")
        self.server.close_session(client)

    def pause_heartbeats(self, client: SessionClient) -> None:
        self.calls.append("pause_heartbeats")
        self.server.pause_heartbeats(client)

    def resume_heartbeats(self, client: SessionClient) -> None:
        self.calls.append("resume_heartbeats")
        self.server.resume_heartbeats(client)


Heard = tuple[object, ...]


class ScriptedClient:
    """A `SessionClient` without an event thread: it records what the server tells it."""

    def __init__(self, server: SessionServer, requested_timeout_ms: int) -> None:
        self.server = server
        self.heard: list[Heard] = []
        self._requested_timeout_ms = requested_timeout_ms
        self._session_id: int | None = None
        self._state: str = KeeperState.CLOSED

    @property
    def requested_timeout_ms(self) -> int:
        return self._requested_timeout_ms

    @property
    def session_id(self) -> int | None:
        return self._session_id

    @property
    def client_state(self) -> str:
        return self._state

    def on_session_opened(self, session_id: int, password: bytes, timeout_ms: int) -> None:
        self._session_id = session_id
        self._state = KeeperState.CONNECTED
        self.heard.append(("opened", session_id, len(password), timeout_ms))

    def on_connection_lost(self) -> None:
        self._state = KeeperState.CONNECTING
        self.heard.append(("connection_lost",))

    def on_session_ended(self, keeper_state: str) -> None:
        self._state = keeper_state
        self.heard.append(("ended", keeper_state))

    def on_watch_fired(self, watcher: Watcher, event: WatchedEvent) -> None:
        self.heard.append(("watch", watcher, event))

    def stop(self) -> None:
        self.server.close_session(self)

    def take(self) -> list[Heard]:
        heard, self.heard = self.heard, []
        return heard


def test_an_embedded_client_talks_to_any_session_server(zk: EmbeddedZooKeeper) -> None:
    server = RecordingServer(zk)
    client = EmbeddedClient(server, session_timeout_ms=TIMEOUT_MS)
    before = client.session_id
    assert client.requested_timeout_ms == TIMEOUT_MS and before is None

    client.start()
    client.create("/a", b"x")
    assert client.get("/a")[0] == b"x"
    client.pause_heartbeats()
    client.resume_heartbeats()
    session_id, client_id = client.session_id, client.client_id
    assert session_id is not None and client_id is not None and client_id[0] == session_id
    client.stop()
    with pytest.raises(ConnectionClosedError):
        client.get("/a")

    assert server.calls == [
        "open_session",
        "execute",
        "execute",
        "pause_heartbeats",
        "resume_heartbeats",
        "close_session",
        "execute",
    ]
    assert client.session_id == session_id and client.client_id is None  # kept after the end
    assert zk.sessions() == []


def test_the_embedded_server_serves_any_session_client(zk: EmbeddedZooKeeper) -> None:
    client = ScriptedClient(zk, requested_timeout_ms=100)
    with pytest.raises(ConnectionClosedError):  # never opened: CLOSED
        zk.execute(client, lambda model, _sid, _now: model.exists("/"))

    zk.open_session(client)
    first = client.session_id
    assert first is not None and zk.sessions() == [first]
    assert client.take() == [("opened", first, 16, 4_000)]  # clamped to 2 ticks

    fired, dropped = Events(), Events()

    def own_and_watch(model: ZkModel, session_id: int, now_ms: int) -> str:
        created = model.create("/e", ephemeral_owner=session_id, now_ms=now_ms)
        model.add_watch(session_id, "/w", "exists", fired)
        model.add_watch(session_id, "/", "data", dropped)
        return created

    assert zk.execute(client, own_and_watch) == "/e"
    assert client.take() == []
    other = zk.connect(TIMEOUT_MS)
    other.create("/w")
    assert client.take() == [
        ("watch", fired, WatchedEvent(EventType.CREATED, KeeperState.CONNECTED, "/w"))
    ]

    # kazoo's order on expiry: the connection drops (held watchers get NONE), then LOST; a
    # paused client is not given a new session until its heartbeats resume
    zk.pause_heartbeats(client)
    assert zk.expire_session(first) is True
    assert client.take() == [
        ("connection_lost",),
        ("watch", dropped, WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None)),
        ("ended", KeeperState.EXPIRED_SESSION),
    ]
    assert client.session_id == first and other.exists("/e") is None
    with pytest.raises(SessionExpiredError):
        zk.execute(client, lambda model, _sid, _now: model.exists("/"))

    zk.resume_heartbeats(client)
    second = client.session_id
    assert second is not None and second != first
    assert client.take() == [("opened", second, 16, 4_000)]
    assert first not in zk.sessions() and second in zk.sessions()

    zk.close_session(client)
    assert client.take() == [("ended", KeeperState.CLOSED)]
    assert second not in zk.sessions()
    with pytest.raises(ConnectionClosedError):
        zk.execute(client, lambda model, _sid, _now: model.exists("/"))
