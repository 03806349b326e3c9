"""An in-process ZooKeeper server: one ZkModel served to many clients, with session timers."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from kazoo.exceptions import ConnectionClosedError, SessionExpiredError
from kazoo.protocol.states import KeeperState

from kafkactor.timer import CallbackTask, Clock, SystemClock, Timer
from kafkactor.zk_model.client import EmbeddedClient
from kafkactor.zk_model.connection import Operation, SessionClient
from kafkactor.zk_model.driver import TimerDriver
from kafkactor.zk_model.model import ZkModel
from kafkactor.zk_model.watches import Notification

T = TypeVar("T")


@dataclass(slots=True)
class _SessionTimers:
    """A session's two timer tasks, its expiry check and its client's heartbeat, and when they
    first fall due."""

    expiry: CallbackTask
    heartbeat: CallbackTask
    heartbeat_period_ms: int
    expiry_due_ms: int
    heartbeat_due_ms: int

    def cancel(self) -> None:
        self.expiry.cancel()
        self.heartbeat.cancel()


class EmbeddedZooKeeper:
    """A standalone ZooKeeper server in the process, for many client sessions at once.

    One lock serialises every request on the `ZkModel`; the watches a request fires are queued,
    still under the lock (so each client sees events in transaction order), on the event thread
    of the client that set them, and run there with no lock held.

    Time comes from the injected clock: a session expires when its client's heartbeats stop for
    its negotiated timeout; each connected client heartbeats every third of that timeout. Both
    are tasks of one `Timer`, expired inline (on a ManualClock by whoever advances the clock, so
    the effects of `clock.advance(ms)` are complete when it returns; otherwise by a daemon
    thread). A heartbeat always falls due before the expiry it prevents, so a live client's
    session never expires, however far the clock jumps; `client.pause_heartbeats()` simulates a
    hung or partitioned client, whose session then expires after its timeout.

    When a session expires, its client behaves as kazoo's does: SUSPENDED (its connection is
    dropped; its watchers get an EventType.NONE event), LOST (its reconnect is told the session
    expired), then at once CONNECTED with a new session. A client whose heartbeats are paused
    stays LOST, raising SessionExpiredError, until `resume_heartbeats()` reconnects it.

    Its clients see it as a `connection.SessionServer` (`open_session`, `execute`,
    `close_session` and the heartbeat switches), and it sees each of them only as a
    `connection.SessionClient`.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        tick_ms: int = 2000,
        first_session_id: int | None = None,
    ) -> None:
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._model = ZkModel(tick_ms=tick_ms, first_session_id=first_session_id)
        self._lock = threading.Lock()
        self._clients: dict[int, SessionClient] = {}  # by live session id
        self._started: dict[SessionClient, None] = {}  # every client started and not stopped
        self._paused: set[SessionClient] = set()
        self._timers: dict[int, _SessionTimers] = {}
        self._closed = False
        self._timer = Timer(self._clock)
        self._driver = TimerDriver(self._timer, name="embedded-zookeeper-sessions").start()

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def tick_ms(self) -> int:
        return self._model.tick_ms

    @property
    def zxid(self) -> int:
        """The id of the last transaction."""
        with self._lock:
            return self._model.zxid

    def connect(
        self, session_timeout_ms: int = 10_000, *, timeout_s: float = 15.0
    ) -> EmbeddedClient:
        """A started client with a new session (the timeout is negotiated to [2, 20] ticks)."""
        client = EmbeddedClient(self, session_timeout_ms=session_timeout_ms)
        client.start(timeout=timeout_s)
        return client

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now, as the server does when heartbeats stop; False if not live.

        Its ephemerals are deleted (firing the watches of other sessions) and its watches
        dropped; its client goes SUSPENDED, LOST and (unless paused) CONNECTED with a new session.
        """
        with self._lock:
            ended = self._model.expire_session(session_id)
            stale, fresh = self._finish_locked([session_id] if ended else [], expired=True)
        self._rearm(stale, fresh)
        return ended

    def sessions(self) -> list[int]:
        """The live session ids, oldest first."""
        with self._lock:
            return self._model.sessions()

    def close(self) -> None:
        """Stop every client (ending its session) and the session timers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            clients = list(self._started)
        for client in clients:
            client.stop()
        self._driver.stop()

    def __enter__(self) -> EmbeddedZooKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the server end of the connection (connection.SessionServer), used by EmbeddedClient --

    def open_session(self, client: SessionClient) -> None:
        """Open a new session for `client` (its ConnectRequest); it hears of it through
        `on_session_opened`. ConnectionClosedError once this server is closed."""
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the embedded ZooKeeper is closed")
            fresh = self._open_locked(client)
        self._rearm([], [fresh])

    def execute(self, client: SessionClient, op: Operation[T]) -> T:
        """Run one request in `client`'s live session and queue the watches it fired.

        ConnectionClosedError after the client closed; SessionExpiredError while it has no live
        session (expired, or not yet reconnected).
        """
        with self._lock:
            if client.client_state == KeeperState.CLOSED:
                raise ConnectionClosedError("Connection has been closed")
            session_id = client.session_id
            if session_id is None or self._clients.get(session_id) is not client:
                raise SessionExpiredError()
            try:
                return op(self._model, session_id, self._clock.now_ms())
            finally:
                self._deliver(self._model.take_notifications(), {})

    def close_session(self, client: SessionClient) -> None:
        """End `client`'s session now (its CloseSession): its ephemerals are deleted and it
        goes CLOSED; a client whose session already ended just goes CLOSED."""
        with self._lock:
            self._started.pop(client, None)
            self._paused.discard(client)
            session_id = client.session_id
            if session_id is not None and self._model.close_session(session_id):
                stale, _ = self._finish_locked([session_id], expired=False)
            else:
                stale = []
                client.on_session_ended(KeeperState.CLOSED)
        self._rearm(stale, [])

    def pause_heartbeats(self, client: SessionClient) -> None:
        """Stop `client`'s heartbeats, leaving its session open (it expires after its timeout);
        once expired, it is not reconnected until `resume_heartbeats`."""
        with self._lock:
            self._paused.add(client)
            timers = self._timers.get(client.session_id or 0)
        if timers is not None:
            timers.heartbeat.cancel()

    def resume_heartbeats(self, client: SessionClient) -> None:
        """Heartbeat for `client` again at once; if its session expired meanwhile, open a new
        one. Nothing happens unless its heartbeats were paused."""
        live: int | None = None
        fresh: list[_SessionTimers] = []
        with self._lock:
            if client not in self._paused:
                return
            self._paused.discard(client)
            session_id = client.session_id
            if session_id is not None and self._clients.get(session_id) is client:
                live = session_id
            elif client in self._started and not self._closed:
                fresh.append(self._open_locked(client))  # its session expired meanwhile
        if live is not None:
            self._heartbeat(live)
        self._rearm([], fresh)

    # -- session timers (run by the timer, holding its lock; they take the server lock after) -

    def _heartbeat(self, session_id: int) -> None:
        with self._lock:
            timers = self._timers.get(session_id)
            client = self._clients.get(session_id)
            if timers is None or client is None or client in self._paused:
                return
            now = self._clock.now_ms()
            try:
                deadline = self._model.touch(session_id, now)
            except SessionExpiredError:
                return
        self._timer.add_at(timers.expiry, deadline)
        self._timer.add_at(timers.heartbeat, now + timers.heartbeat_period_ms)

    def _check_expiry(self, session_id: int) -> None:
        with self._lock:
            expired = self._model.expire_due(self._clock.now_ms())
            stale, fresh = self._finish_locked(expired, expired=True)
            deadline = self._model.deadline_ms(session_id)
            timers = self._timers.get(session_id)
        self._rearm(stale, fresh)
        if deadline is not None and timers is not None:
            # a heartbeat moved the deadline after this check was planned: check again then
            self._timer.add_at(timers.expiry, deadline)

    def _rearm(self, stale: Iterable[_SessionTimers], fresh: Iterable[_SessionTimers]) -> None:
        # after the server lock is released: the timer's lock is taken before ours
        for timers in stale:
            timers.cancel()
        for timers in fresh:
            self._timer.add_at(timers.expiry, timers.expiry_due_ms)
            self._timer.add_at(timers.heartbeat, timers.heartbeat_due_ms)

    # -- internals (callers hold self._lock) --------------------------------------------------

    def _open_locked(self, client: SessionClient) -> _SessionTimers:
        """Open a session for `client`; returns its timers, to arm once the lock is released."""
        now = self._clock.now_ms()
        session_id, password, timeout = self._model.open_session(client.requested_timeout_ms, now)
        period = max(1, timeout // 3)
        timers = _SessionTimers(
            expiry=CallbackTask(0, partial(self._check_expiry, session_id)),
            heartbeat=CallbackTask(0, partial(self._heartbeat, session_id)),
            heartbeat_period_ms=period,
            expiry_due_ms=now + timeout,
            heartbeat_due_ms=now + period,
        )
        self._timers[session_id] = timers
        self._clients[session_id] = client
        self._started[client] = None
        self._paused.discard(client)
        client.on_session_opened(session_id, password, timeout)
        return timers

    def _finish_locked(
        self, session_ids: Iterable[int], *, expired: bool
    ) -> tuple[list[_SessionTimers], list[_SessionTimers]]:
        """Tell the clients of ended sessions, in kazoo's order, and deliver what the ending
        fired; reconnect expired clients that still heartbeat. Returns (timers to cancel,
        timers to arm)."""
        ended: dict[int, SessionClient] = {}
        stale: list[_SessionTimers] = []
        for session_id in session_ids:
            client = self._clients.pop(session_id, None)
            if client is not None:
                ended[session_id] = client
            timers = self._timers.pop(session_id, None)
            if timers is not None:
                stale.append(timers)
        if not expired:  # kazoo on stop: LOST (its watchers are dropped without a call)
            for client in ended.values():
                client.on_session_ended(KeeperState.CLOSED)
            self._deliver(self._model.take_notifications(), ended)
            return stale, []
        # kazoo on expiry: the dropped connection (SUSPENDED, NONE events), the failed reconnect
        # (LOST), a new session (CONNECTED)
        for client in ended.values():
            client.on_connection_lost()
        self._deliver(self._model.take_notifications(), ended)
        fresh: list[_SessionTimers] = []
        for client in ended.values():
            client.on_session_ended(KeeperState.EXPIRED_SESSION)
            if client not in self._paused and not self._closed:
                fresh.append(self._open_locked(client))
        return stale, fresh

    def _deliver(self, notes: list[Notification], ended: dict[int, SessionClient]) -> None:
        for note in notes:
            client = self._clients.get(note.session_id) or ended.get(note.session_id)
            if client is not None:
                client.on_watch_fired(note.watcher, note.event)
