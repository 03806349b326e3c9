"""A client session of the embedded ZooKeeper, with kazoo's KazooClient interface."""

from __future__ import annotations

import contextlib
import os.path
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from kazoo.exceptions import (
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.states import Callback, KazooState, KeeperState, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch as _KazooChildrenWatch
from kazoo.recipe.watchers import DataWatch as _KazooDataWatch
from kazoo.retry import KazooRetry

from kafkactor import tracing
from kafkactor.zk_model.connection import Operation, SessionServer
from kafkactor.zk_model.interface import WatchRecipe
from kafkactor.zk_model.model import ZkModel
from kafkactor.zk_model.watches import Watcher

T = TypeVar("T")

Listener = Callable[[str], object]
"""A connection state listener: called with a KazooState; returning True removes it."""

_log = tracing.get_logger("kafkactor.zk_model")


class EmbeddedClient:
    """A ZooKeeper client connection and its session, as kazoo's `KazooClient` presents them.

    Methods, arguments, return values and exceptions are kazoo's (paths are normalised by kazoo's
    own function; `makepath`, `ensure_path` and recursive `delete` follow kazoo's algorithms), and
    `DataWatch` / `ChildrenWatch` are kazoo's recipes running on this client. Watch callbacks and
    state listeners run on this client's single event thread (kazoo's handler), never on the
    calling thread and never under the server's lock, so they may call the client again.

    When its session expires it does what kazoo does: listeners see SUSPENDED, LOST and then
    CONNECTED with a new session (watchers it held get an EventType.NONE event; kazoo's recipes
    carry on). While its heartbeats are paused it cannot reconnect: it stays LOST and every call
    raises SessionExpiredError until `resume_heartbeats()`. After `stop()` every call raises
    ConnectionClosedError, until `start()` opens a new session.

    It reaches its server only through `connection.SessionServer` (any server with that
    interface; `EmbeddedZooKeeper` in practice), and is that server's `connection.SessionClient`.
    """

    def __init__(self, server: SessionServer, *, session_timeout_ms: int = 10_000) -> None:
        self._server = server
        self._requested_timeout_ms = session_timeout_ms
        self.handler = self._new_handler()
        self._retry = KazooRetry(
            max_tries=None, delay=0.1, backoff=2, max_delay=3600, sleep_func=self._retry_sleep
        )
        self.state: str = KazooState.LOST
        self._keeper_state: str = KeeperState.CLOSED
        self._session_id: int | None = None
        self._password = b"\x00" * 16
        self._timeout_ms = 0
        self._session_changed = threading.Condition()  # wakes kazoo retries between attempts
        self._listeners: dict[Listener, None] = {}
        self._listeners_lock = threading.Lock()
        self._lifecycle = threading.Lock()
        self._event_thread: threading.Thread | None = None

    # -- connection ---------------------------------------------------------------------------

    def start(self, timeout: float = 15) -> None:
        """Open a session (at once: `timeout` is accepted for kazoo's signature)."""
        with self._lifecycle:
            if self.connected:
                return
            self.handler.start()
            self.handler.dispatch_callback(Callback("session", self._mark_event_thread, ()))
            try:
                self._server.open_session(self)
            except BaseException:
                self.handler.stop()
                raise

    def stop(self) -> None:
        """End the session now (its ephemerals are deleted) and stop the event thread.

        Listeners see LOST; watchers still pending are dropped without a call, as with kazoo.
        """
        with self._lifecycle:
            if self._keeper_state == KeeperState.CLOSED and not self.handler.running:
                return
            self._server.close_session(self)  # queues LOST for the listeners
            # A fresh handler for a later start(): a listener that restarts the client on LOST
            # must not get the handler being stopped, nor wait for this thread's join.
            old, self.handler = self.handler, self._new_handler()
            on_event_thread = threading.current_thread() is self._event_thread
            self._event_thread = None
        if on_event_thread:
            old.spawn(old.stop)  # the event thread cannot wait for itself
        else:
            old.stop()  # runs what is queued (LOST among it), then ends the threads

    def close(self) -> None:
        """kazoo's close: frees the client; here the same as `stop()`."""
        self.stop()

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def connected(self) -> bool:
        return bool(self._keeper_state == KeeperState.CONNECTED)

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) while connected, else None (as kazoo)."""
        session_id = self._session_id
        if self.connected and session_id is not None:
            return session_id, self._password
        return None

    @property
    def client_state(self) -> str:
        """The KeeperState (CONNECTED, CONNECTING while the connection is lost, EXPIRED_SESSION,
        CLOSED)."""
        return self._keeper_state

    @property
    def session_timeout_ms(self) -> int:
        """The timeout the server negotiated for the current (or last) session."""
        return self._timeout_ms

    def add_listener(self, listener: Listener) -> None:
        if not callable(listener):
            raise TypeError("listener must be callable")
        with self._listeners_lock:
            self._listeners[listener] = None

    def remove_listener(self, listener: Listener) -> None:
        with self._listeners_lock:
            self._listeners.pop(listener, None)

    def pause_heartbeats(self) -> None:
        """Stop heartbeating without closing the session (a hung or partitioned client): the
        session expires after its timeout, and the client does not reconnect until resumed."""
        self._server.pause_heartbeats(self)

    def resume_heartbeats(self) -> None:
        """Heartbeat again at once; if the session expired meanwhile, open a new one."""
        self._server.resume_heartbeats(self)

    def retry(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """kazoo's command retry (a fresh copy of the KazooRetry per call)."""
        result: T = self._retry.copy()(func, *args, **kwargs)
        return result

    # -- operations ---------------------------------------------------------------------------

    def create(  # noqa: PLR0917 (kazoo's signature)
        self,
        path: str,
        value: bytes | None = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
    ) -> Any:
        """Create a node; returns its path, or (path, stat) with `include_data`. ACLs ignored."""
        _check_path(path)
        if value is not None and not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        node_path = _normalise(path, trailing=sequence)
        data = value or b""

        def op(model: ZkModel, session_id: int, now_ms: int) -> Any:
            created = model.create(
                node_path,
                data,
                ephemeral_owner=session_id if ephemeral else 0,
                sequence=sequence,
                makepath=makepath,
                now_ms=now_ms,
            )
            return (created, model.exists(created)) if include_data else created

        return self._call(op)

    def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        node_path = _normalise(_check_path(path))
        _check_watch(watch)

        def op(model: ZkModel, session_id: int, _now_ms: int) -> tuple[bytes, ZnodeStat]:
            result = model.get(node_path)
            if watch is not None:
                model.add_watch(session_id, node_path, "data", watch)
            return result

        return self._call(op)

    def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        node_path = _normalise(_check_path(path))
        _check_watch(watch)

        def op(model: ZkModel, session_id: int, _now_ms: int) -> ZnodeStat | None:
            stat = model.exists(node_path)
            if watch is not None:
                model.add_watch(session_id, node_path, "exists", watch)
            return stat

        return self._call(op)

    def get_children(
        self, path: str, watch: Watcher | None = None, include_data: bool = False
    ) -> Any:
        """The sorted child names, or (children, stat of the node) with `include_data`."""
        node_path = _normalise(_check_path(path))
        _check_watch(watch)

        def op(model: ZkModel, session_id: int, _now_ms: int) -> Any:
            children = model.get_children(node_path)
            if watch is not None:
                model.add_watch(session_id, node_path, "child", watch)
            return (children, model.exists(node_path)) if include_data else children

        return self._call(op)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        node_path = _normalise(_check_path(path))
        if not isinstance(value, bytes):
            raise TypeError("Invalid type for 'value' (must be a byte string)")
        return self._call(
            lambda model, _sid, now_ms: model.set(node_path, value, version, now_ms=now_ms)
        )

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> Literal[True]:
        """Delete a node; `recursive` deletes its subtree depth first (ignoring `version`, and
        a missing node, as kazoo does)."""
        node_path = _normalise(_check_path(path))
        if recursive:
            self._delete_recursive(node_path)
        else:
            self._call(lambda model, _sid, _now: model.delete(node_path, version))
        return True

    def ensure_path(self, path: str, acl: object = None) -> Any:
        """Create `path` and its missing ancestors; True if it existed, else the created path."""
        if self.exists(path):
            return True
        parent, name = os.path.split(path)
        if name:
            self.ensure_path(parent)
        try:
            return self.create(path)
        except NodeExistsError:
            return True

    def DataWatch(  # noqa: N802
        self, path: str, func: Callable[..., Any] | None = None
    ) -> WatchRecipe:
        """kazoo's DataWatch recipe on this client (also usable as a decorator).

        `func(data, stat)` or `func(data, stat, event)` is called at once (on the calling
        thread, as kazoo does) and after every change (on the event thread); returning False
        stops it. A missing node gives (None, None).
        """
        recipe: WatchRecipe = _KazooDataWatch(self, path, func)
        return recipe

    def ChildrenWatch(  # noqa: N802
        self,
        path: str,
        func: Callable[..., Any] | None = None,
        allow_session_lost: bool = True,
        send_event: bool = False,
    ) -> WatchRecipe:
        """kazoo's ChildrenWatch recipe on this client (also usable as a decorator).

        `func(children)` (or `func(children, event)` with `send_event`) is called at once and
        after every change of the children; returning False stops it, as does the node's
        deletion.
        """
        recipe: WatchRecipe = _KazooChildrenWatch(self, path, func, allow_session_lost, send_event)
        return recipe

    # -- the client end of the connection (connection.SessionClient), read and called by the
    # -- server under its lock: set fields and queue work, nothing more

    @property
    def requested_timeout_ms(self) -> int:
        """The session timeout this client asks for (the server negotiates `session_timeout_ms`)."""
        return self._requested_timeout_ms

    @property
    def session_id(self) -> int | None:
        """The id of the current or last session (None before the first); unlike kazoo's
        `client_id`, kept after the session ends."""
        return self._session_id

    def on_session_opened(self, session_id: int, password: bytes, timeout_ms: int) -> None:
        """The server opened a session for this client (ZooKeeper's ConnectResponse)."""
        self._session_id = session_id
        self._password = password
        self._timeout_ms = timeout_ms
        self._keeper_state = KeeperState.CONNECTED
        self._change_state(KazooState.CONNECTED)
        self._wake_retries()

    def on_connection_lost(self) -> None:
        """The connection dropped: kazoo's SUSPENDED."""
        self._keeper_state = KeeperState.CONNECTING
        self._change_state(KazooState.SUSPENDED)

    def on_session_ended(self, keeper_state: str) -> None:
        """The session expired (EXPIRED_SESSION) or was closed (CLOSED): kazoo's LOST."""
        self._keeper_state = keeper_state
        self._change_state(KazooState.LOST)
        self._wake_retries()

    def on_watch_fired(self, watcher: Watcher, event: WatchedEvent) -> None:
        """A watch of this client fired: `watcher(event)` runs on the event thread."""
        self.handler.dispatch_callback(Callback("watch", watcher, (event,)))

    # -- internals ----------------------------------------------------------------------------

    def _call(self, op: Operation[T]) -> T:
        return self._server.execute(self, op)

    def _delete_recursive(self, path: str) -> None:
        try:
            children = self.get_children(path)
        except NoNodeError:
            return
        for child in children:
            self._delete_recursive(path + child if path == "/" else f"{path}/{child}")
        with contextlib.suppress(NoNodeError):
            self.delete(path)

    def _change_state(self, state: str) -> None:
        if self.state == state:
            return
        self.state = state
        with self._listeners_lock:
            listeners = list(self._listeners)
        self.handler.dispatch_callback(Callback("session", self._notify, (state, listeners)))

    def _notify(self, state: str, listeners: list[Listener]) -> None:
        for listener in listeners:
            try:
                if listener(state) is True:
                    self.remove_listener(listener)
            except Exception:
                _log.exception("zk_client.listener_error", state=state)

    def _new_handler(self) -> Any:
        # kazoo's handler: one thread runs watch callbacks (and here listeners) in order
        handler = SequentialThreadingHandler()
        handler.sleep_func = self._retry_sleep
        return handler

    def _mark_event_thread(self) -> None:
        self._event_thread = threading.current_thread()

    def _retry_sleep(self, seconds: float) -> None:
        # kazoo's retries wait between attempts (its recipes retry SessionExpiredError until the
        # client has reconnected): a session change ends the wait early, a stop ends the retry.
        if self._keeper_state == KeeperState.CLOSED:
            raise ConnectionClosedError("Connection has been closed")
        with self._session_changed:
            self._session_changed.wait(seconds)

    def _wake_retries(self) -> None:
        with self._session_changed:
            self._session_changed.notify_all()

    def __repr__(self) -> str:
        session = "none" if self._session_id is None else f"0x{self._session_id:x}"
        return f"EmbeddedClient(session={session}, state={self.state})"


def _check_path(path: object) -> str:
    if not isinstance(path, str):
        raise TypeError("Invalid type for 'path' (string expected)")
    return path


def _check_watch(watch: object) -> None:
    if watch is not None and not callable(watch):
        raise TypeError("Invalid type for 'watch' (must be a callable)")


def _normalise(path: str, *, trailing: bool = False) -> str:
    """The path kazoo sends for `path` (no chroot): relative made absolute, slashes collapsed,
    "." and ".." refused with ValueError."""
    normalised: str = _prefix_root("", path, trailing=trailing)
    return normalised
