"""The contract between the embedded server and its clients: ZooKeeper's client protocol as calls.

Over a real connection, a ZooKeeper client sends a ConnectRequest (with the session timeout it
asks for), requests, pings and a CloseSession; the server answers with a ConnectResponse (the
session id, password and negotiated timeout), replies, watch notifications, and, when the
session dies, an expiry or a closed connection. In the process these messages are method calls.
`SessionServer` is the server as a client sees it and `SessionClient` is a session's client as
the server sees it. `EmbeddedClient` and `EmbeddedZooKeeper` know each other only through these
two protocols and their public names: the client module does not import the server's, and the
server imports the client class only to construct one in `connect`.

Locking: a `SessionServer` calls a `SessionClient`'s `on_*` methods while holding its lock, so
those only set fields and queue work on the client's event thread; they never call the server
back, and never run a user's callback. A `SessionClient` calls the server with no lock of the
server's held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from kazoo.protocol.states import WatchedEvent

from kafkactor.zk_model.model import ZkModel
from kafkactor.zk_model.watches import Watcher

T = TypeVar("T")

Operation = Callable[[ZkModel, int, int], T]
"""A request for the model: called as op(model, session_id, now_ms) under the server's lock.

It stands for one ZooKeeper request (create, getData, exists, ...): it may raise kazoo's errors
(NoNodeError, BadVersionError, ...), which reach the caller as the server's error reply would.
"""


class SessionClient(Protocol):
    """A ZooKeeper client connection as the server sees it (kazoo's `ConnectionHandler` end).

    It carries what the server reads from a ConnectRequest (the timeout it asks for) and from
    each request (which session it belongs to, and whether the client closed), and it receives
    what the server sends back: the ConnectResponse, the loss of the connection, the end of the
    session (expired or closed), and watch notifications. The server calls the `on_*` methods
    under its lock: they set fields and queue work on the client's event thread, nothing more.
    """

    @property
    def requested_timeout_ms(self) -> int:
        """The session timeout the client asks for in its ConnectRequest (the server clamps it)."""
        ...

    @property
    def session_id(self) -> int | None:
        """The id of the client's current or last session (None before its first)."""
        ...

    @property
    def client_state(self) -> str:
        """The client's KeeperState: CONNECTED, CONNECTING, EXPIRED_SESSION or CLOSED."""
        ...

    def on_session_opened(self, session_id: int, password: bytes, timeout_ms: int) -> None:
        """The ConnectResponse: a new session with its id, password and negotiated timeout."""
        ...

    def on_connection_lost(self) -> None:
        """The connection dropped (the session may still be live): kazoo goes SUSPENDED."""
        ...

    def on_session_ended(self, keeper_state: str) -> None:
        """The session is over: EXPIRED_SESSION (expired) or CLOSED (closed); kazoo goes LOST."""
        ...

    def on_watch_fired(self, watcher: Watcher, event: WatchedEvent) -> None:
        """A watch notification for `watcher` (one the client registered): queue its call."""
        ...

    def stop(self) -> None:
        """Close the connection from the client's end (kazoo's `stop`), ending its session
        through `SessionServer.close_session`: what a server that shuts down asks of each of its
        clients, without holding its lock."""
        ...


class SessionServer(Protocol):
    """A ZooKeeper server as a client connection sees it: sessions, requests and heartbeats.

    `open_session` is the ConnectRequest (answered through `SessionClient.on_session_opened`),
    `execute` submits one request in the client's session, `close_session` is the CloseSession
    request, and the heartbeat methods stand for the client's pings stopping and starting
    again (a hung or partitioned client, whose session then expires after its timeout).
    """

    def open_session(self, client: SessionClient) -> None:
        """Open a new session for `client`; ConnectionClosedError if the server is closed."""
        ...

    def execute(self, client: SessionClient, op: Operation[T]) -> T:
        """Run one request in `client`'s live session, and deliver the watches it fires.

        ConnectionClosedError after the client closed, SessionExpiredError when it has no live
        session.
        """
        ...

    def close_session(self, client: SessionClient) -> None:
        """End `client`'s session now (its ephemerals are deleted), or just mark it CLOSED."""
        ...

    def pause_heartbeats(self, client: SessionClient) -> None:
        """Stop `client`'s pings without closing its session, which then expires."""
        ...

    def resume_heartbeats(self, client: SessionClient) -> None:
        """Ping again at once; a client whose session expired meanwhile gets a new one."""
        ...
