"""Kafka's `SocketServer`: accept connections, read frames, hand requests on, write responses.

One asyncio event loop on one thread per broker plays Kafka's acceptor and processors. A
frame is decoded on the loop (the codec is Rust) into a `NetworkRequest` and told to the
broker's KafkaApis actor as the root of a new trace; the `NetworkResponse` that comes back
is written in its connection's request order, whatever order the answers arrive in.

Limits (Kafka's names): `socket.request.max.bytes` (a larger size prefix closes the
connection before the body is read), `queued.max.requests` (requests handed on and not yet
answered, over all connections: at the limit every connection stops being read until answers
drain, so a flood waits in the clients' socket buffers, not in memory here), a limit on one
connection's requests in flight (the same, for that connection alone), and
`connections.max.idle.ms`. A frame that cannot be served closes its connection with a
`network.bad_request` event; other connections are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any, Final, Protocol

from kafkactor import tracing
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.actors.runtime.hops import log_recv, log_send, new_envelope
from kafkactor.messages import Envelope
from kafkactor.network.connection import Connection, api_name
from kafkactor.network.connection_limits import connection_limits
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse
from kafkactor.network.socket_server_config import SocketServerConfig
from kafkactor.security.listener import ListenerConfig, plaintext
from kafkactor.security.memory_pool import SimpleMemoryPool
from kafkactor.security.sasl_authenticator import (
    AuthenticationFailure,
    SaslServerAuthenticator,
    sasl_servers,
)
from kafkactor.security.scram_credential import ScramCredentialLookup
from kafkactor.security.security_config import BrokerSecurityConfig, SaslServerConfig
from kafkactor.security.ssl_factory import server_context
from kafkactor.timer import Clock, SystemClock, TimerTask

__all__ = ["SocketServer", "SocketServerConfig", "api_name"]

_log = tracing.get_logger("kafkactor.network")

_STOP_TIMEOUT_S: Final = 10.0


class TaskTimer(Protocol):
    """What the socket server needs of the broker's timer (`kafkactor.timer.Timer`)."""

    def add(self, task: TimerTask) -> None: ...


class SocketServer:
    """A broker's listeners (Kafka's `SocketServer` with its acceptors and processors).

    One bound socket per `ListenerConfig` of `listeners` (Kafka's `listeners`): PLAINTEXT, SSL
    (a TLS handshake first, with the listener's `SslConfig`), SASL_PLAINTEXT and SASL_SSL (a
    SASL exchange before any other request: `SaslServerAuthenticator`, the mechanisms the
    listener enables). Without `listeners`, one PLAINTEXT listener on `config.host` /
    `config.port`, as before listeners were configurable.

    - `sasl`: the SASL server settings shared by the SASL listeners (PLAIN's users,
      `connection.failed.authentication.delay.ms`); Kafka's defaults without it.
    - `scram`: the SCRAM credentials (`/config/users`), asked at each SCRAM exchange; without
      it every SCRAM user is unknown.
    - `timer`: the broker's timer (`kafkactor.timer.Timer`, or anything with
      `add(TimerTask)`), on which a connection whose authentication failed is closed
      `connection_failed_authentication_delay_ms` later; without one it is closed at once.
      A connection throttled by a client quota (`NetworkResponse.throttle_ms`) is read again
      by a task on it too (without one, by the loop's own `call_later`).
    - Limits across connections (docs/security.md, `connection_limits.py`):
      `queued_max_request_bytes` (the request memory pool, KIP-72: reading stops while it is
      empty), `max_connections`, `max_connections_per_ip` and
      `max_connections_per_ip_overrides` (a new connection past them is closed at once); each
      as given, else from `security` (the broker's `BrokerSecurityConfig`), else Kafka's
      default; `memory_pool` a pool the broker built instead of one of
      `queued_max_request_bytes`.

    `start()` binds every listener at once (so `ports` — the bound port of each listener by
    name, port 0 picking a free one — is known when it returns; `host` / `port` are the first
    listener's) and serves on a thread of its own; `stop()` closes the listeners and every
    connection. It is reachable at `addresses.socket_server(broker_id)`: KafkaApis tells it
    each `NetworkResponse`, from any thread.
    """

    def __init__(
        self,
        broker_id: int,
        directory: Directory,
        config: SocketServerConfig | None = None,
        *,
        clock: Clock | None = None,
        listeners: tuple[ListenerConfig, ...] | None = None,
        sasl: SaslServerConfig | None = None,
        scram: ScramCredentialLookup | None = None,
        timer: TaskTimer | None = None,
        security: BrokerSecurityConfig | None = None,
        memory_pool: SimpleMemoryPool | None = None,
        queued_max_request_bytes: int | None = None,
        max_connections: int | None = None,
        max_connections_per_ip: int | None = None,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.config = config if config is not None else SocketServerConfig()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.listeners: tuple[ListenerConfig, ...] = (
            listeners if listeners else (plaintext(self.config.host, self.config.port),)
        )
        names = [listener.name for listener in self.listeners]
        if len(set(names)) != len(names):
            raise ValueError(f"listener names must be unique, got {names}")
        self.sasl = sasl if sasl is not None else SaslServerConfig()
        self.timer = timer
        self.limits = connection_limits(
            broker_id,
            self.clock,
            timer=timer,
            socket_request_max_bytes=self.config.socket_request_max_bytes,
            security=security,
            memory_pool=memory_pool,
            queued_max_request_bytes=queued_max_request_bytes,
            max_connections=max_connections,
            max_connections_per_ip=max_connections_per_ip,
            max_connections_per_ip_overrides=max_connections_per_ip_overrides,
        )
        self._sasl_servers = sasl_servers(self.sasl.plain_users, scram)
        # a key store that cannot be read fails here, not at the first connection
        self._tls: dict[str, ssl.SSLContext] = {
            listener.name: server_context(listener.ssl)
            for listener in self.listeners
            if listener.security_protocol.uses_tls and listener.ssl is not None
        }
        self.address = addresses.socket_server(broker_id)
        self.apis_address = addresses.kafka_apis(broker_id)
        self._connections: dict[str, Connection] = {}
        self._queued = 0  # handed on to KafkaApis, not yet answered (queued.max.requests)
        self._all_paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._sockets: dict[str, socket.socket] = {}
        self._servers: list[asyncio.Server] = []
        self._started = False
        self._ids = itertools.count()
        self.ports: dict[str, int] = {listener.name: listener.port for listener in self.listeners}
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> SocketServer:
        try:
            for listener in self.listeners:
                sock = socket.create_server((listener.host, listener.port), backlog=128)
                sock.setblocking(False)
                self._sockets[listener.name] = sock
                self.ports[listener.name] = sock.getsockname()[1]
        except OSError:
            for sock in self._sockets.values():
                sock.close()
            raise
        first = self.listeners[0]
        self.host, self.port = first.host, self.ports[first.name]
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(loop, ready), name=f"broker-{self.broker_id}-network"
        )
        self._thread.daemon = True
        self._thread.start()
        ready.wait(_STOP_TIMEOUT_S)
        if not self._started:
            raise RuntimeError(f"broker {self.broker_id}'s listeners did not start")
        self.directory.register(self.address, self)
        for listener in self.listeners:
            _log.info(
                "network.listening",
                broker=self.broker_id,
                listener=listener.name,
                security_protocol=listener.security_protocol.name,
                host=listener.host,
                port=self.ports[listener.name],
                ts_ms=self.clock.now_ms(),
            )
        return self

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)

        async def serve() -> None:
            self.limits.bind(loop)
            for listener in self.listeners:
                server = await loop.create_server(
                    lambda listener=listener: self._new_connection(listener),  # type: ignore[misc]
                    sock=self._sockets[listener.name],
                )
                self._servers.append(server)
            self._started = True
            ready.set()
            await self._close_idle_connections()

        task = loop.create_task(serve())
        try:
            loop.run_until_complete(task)
        except asyncio.CancelledError:
            pass
        finally:
            ready.set()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _new_connection(self, listener: ListenerConfig) -> Connection:
        authenticator = None
        if listener.security_protocol.uses_sasl:
            authenticator = SaslServerAuthenticator(listener.sasl_mechanisms, self._sasl_servers)
        return Connection(
            self,
            f"{listener.host}:{self.ports[listener.name]}-{next(self._ids)}",
            listener,
            self._tls.get(listener.name),
            authenticator,
        )

    async def _close_idle_connections(self) -> None:
        idle_s = self.config.connections_max_idle_ms / 1000
        while True:
            await asyncio.sleep(min(idle_s / 4, 1.0))
            now = time.monotonic()
            for connection in list(self._connections.values()):
                if not connection.slots and now - connection.last_active > idle_s:
                    connection.close("idle for longer than connections.max.idle.ms")

    def stop(self) -> None:
        """Stop accepting, close every connection (unanswered requests are dropped)."""
        self.directory.unregister(self.address, self)
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._loop = None

        def shut() -> None:
            for server in self._servers:
                server.close()
            for connection in list(self._connections.values()):
                connection.close("the broker is stopping")
            for task in asyncio.all_tasks(loop):
                task.cancel()

        if not loop.is_closed():
            loop.call_soon_threadsafe(shut)
        thread.join(_STOP_TIMEOUT_S)
        for sock in self._sockets.values():
            sock.close()

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # -- from the connections -----------------------------------------------------------------

    def _hand_on(self, request: NetworkRequest, trace_id: str) -> bool:
        header = request.header
        now = self.clock.now_ms()
        if tracing.is_enabled():
            _log.info(
                "network.request",
                broker=self.broker_id,
                connection=request.connection_id,
                api_key=header.api_key,
                api=api_name(header.api_key),
                api_version=header.api_version,
                correlation_id=header.correlation_id,
                client_id=header.client_id,
                bytes=request.size,
                trace_id=trace_id,
                ts_ms=now,
            )
        envelope = new_envelope(
            request,
            sender=self.address,
            sent_ms=now,
            trace_id=trace_id,
            parent_span_id=header.parent_span_id if header.trace_id == trace_id else "",
        )
        if tracing.is_enabled():
            log_send(envelope, to=self.apis_address, broker=self.broker_id)
        if not self.directory.tell(self.apis_address, envelope):
            return False
        self._queued += 1
        if self._queued >= self.config.queued_max_requests and not self._all_paused:
            self._all_paused = True
            for connection in self._connections.values():
                connection._pause()
        return True

    def _request_done(self) -> None:
        self._queued -= 1
        if self._all_paused and self._queued < self.config.queued_max_requests:
            self._all_paused = False
            for connection in list(self._connections.values()):
                connection._resume()

    def _connection_closed(self, connection: Connection, unanswered: int) -> None:
        if self._connections.pop(connection.connection_id, None) is None:
            return
        for _ in range(unanswered):
            self._request_done()

    def _authentication_failed(
        self, connection: Connection, failure: AuthenticationFailure
    ) -> None:
        """A connection's SASL exchange failed: the event, then its close — at once, or
        `connection.failed.authentication.delay.ms` later by a task on the broker's timer."""
        authenticator = connection.authenticator
        _log.info(
            "security.authentication_failed",
            broker=self.broker_id,
            listener=connection.listener.name,
            client_address=connection.peer,
            mechanism=authenticator.mechanism if authenticator is not None else None,
            error=failure.error.name,
            reason=failure.reason,
            ts_ms=self.clock.now_ms(),
        )
        delay_ms = self.sasl.connection_failed_authentication_delay_ms
        loop = self._loop
        if not failure.delayed or delay_ms <= 0 or self.timer is None or loop is None:
            connection.close_after_failure(failure)
            return
        self.timer.add(_DelayedClose(delay_ms, loop, connection, failure))

    # -- from KafkaApis (any thread) ----------------------------------------------------------

    def tell(self, message: Any) -> None:
        response = message.payload if isinstance(message, Envelope) else message
        if tracing.is_enabled() and isinstance(message, Envelope):
            log_recv(message, actor=self.address, broker=self.broker_id, now_ms=self.clock.now_ms())
        if not isinstance(response, NetworkResponse):
            return
        loop = self._loop
        if loop is None:
            return
        # RuntimeError: the loop closed meanwhile, and the connection with it
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._answered, response)

    def _answered(self, response: NetworkResponse) -> None:
        connection = self._connections.get(response.connection_id)
        if connection is not None:
            connection.answered(response)


class _DelayedClose(TimerTask):
    """Kafka's `DelayedAuthenticationFailureClose`: a task of the broker's timer that closes a
    connection whose authentication failed, on the connection's loop."""

    def __init__(
        self,
        delay_ms: int,
        loop: asyncio.AbstractEventLoop,
        connection: Connection,
        failure: AuthenticationFailure,
    ) -> None:
        super().__init__(delay_ms)
        self.loop = loop
        self.connection = connection
        self.failure = failure

    def run(self) -> None:
        # RuntimeError: the loop closed meanwhile (the broker stopped), and the connection too
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.connection.close_after_failure, self.failure)
