"""One client connection of a `SocketServer` (Kafka's `KafkaChannel` with its processor's
bookkeeping): frames in, requests handed on, responses out in request order.

On a TLS listener the connection first completes a TLS handshake (asyncio's `start_tls`,
bounded by `tls_handshake_timeout_ms`); one that fails or stalls closes this connection alone
with a `network.tls_handshake_failed` event. On a SASL listener every frame goes to the
connection's `SaslServerAuthenticator` (pure: it decodes, decides and encodes; the connection
only writes what it answers) until it has authenticated a principal; a failed authentication
stops the reading and the connection is closed `connection.failed.authentication.delay.ms`
later, by a task on the broker's timer. Every request handed on carries the connection's
principal and listener name in its header.

The socket server's limits (`ConnectionLimits`): a connection past `max.connections` /
`max.connections.per.ip` is closed as soon as it is made; each frame's bytes come from the
request memory pool from its size prefix until its request is answered, and the connection
stops being read while the pool cannot grant them; a response with `throttle_ms` (a client
quota exceeded) is written at once, then the connection is not read until a timer task fires.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import ssl
import time
from collections import OrderedDict
from typing import Protocol

from kafkactor import tracing
from kafkactor.network.codec import BadRequestError, decode_request
from kafkactor.network.connection_limits import ConnectionLimits
from kafkactor.network.framing import FrameDecoder, FrameSizeError
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse, RequestHeader
from kafkactor.network.socket_server_config import SocketServerConfig
from kafkactor.security.listener import ListenerConfig
from kafkactor.security.principal import ANONYMOUS, KafkaPrincipal
from kafkactor.security.sasl_authenticator import AuthenticationFailure, SaslServerAuthenticator
from kafkactor.security.ssl_factory import principal_of
from kafkactor.timer import Clock

__all__ = ["Connection", "ConnectionOwner"]


class ConnectionOwner(Protocol):
    """What a connection needs of its `SocketServer` (a protocol of its own, so that the
    connection does not import the server that imports it)."""

    broker_id: int
    clock: Clock
    config: SocketServerConfig
    limits: ConnectionLimits
    _all_paused: bool
    _connections: dict[str, Connection]

    def _hand_on(self, request: NetworkRequest, trace_id: str) -> bool: ...

    def _request_done(self) -> None: ...

    def _connection_closed(self, connection: Connection, unanswered: int) -> None: ...

    def _authentication_failed(
        self, connection: Connection, failure: AuthenticationFailure
    ) -> None: ...


_log = tracing.get_logger("kafkactor.network")


class _Slot:
    """One request's place in its connection's response order."""

    __slots__ = (
        "api_key",
        "api_version",
        "close",
        "correlation_id",
        "done",
        "frame",
        "memory",
        "reason",
        "received_ns",
        "throttle_ms",
        "trace_id",
    )

    def __init__(
        self, header: RequestHeader, received_ns: int, trace_id: str, memory: int = 0
    ) -> None:
        self.api_key = header.api_key
        self.api_version = header.api_version
        self.correlation_id = header.correlation_id
        self.received_ns = received_ns
        self.trace_id = trace_id
        self.done = False
        self.frame: bytes | None = None
        self.close = False
        self.reason = ""
        self.memory = memory  # granted by the request memory pool, released when answered
        self.throttle_ms = 0


class Connection(asyncio.Protocol):
    """One client connection on one listener: frames in, responses out in request order."""

    def __init__(
        self,
        server: ConnectionOwner,
        connection_id: str,
        listener: ListenerConfig,
        tls: ssl.SSLContext | None = None,
        authenticator: SaslServerAuthenticator | None = None,
    ) -> None:
        self.server = server
        self.connection_id = connection_id
        self.listener = listener
        self.tls = tls
        self.authenticator = authenticator
        self.principal: KafkaPrincipal = ANONYMOUS
        pool = server.limits.pool
        self.decoder = FrameDecoder(
            server.config.socket_request_max_bytes,
            pool.try_allocate if pool is not None else None,
        )
        self.admitted = False  # counted by the connection quotas
        self.throttles = 0  # client-quota delays not yet passed: not read while any is
        self.transport: asyncio.Transport | None = None
        self._raw: asyncio.Transport | None = None  # the TCP transport, under TLS
        self._handshake: asyncio.Task[None] | None = None
        self._early: list[bytes] = []  # read before start_tls returned its transport
        self.slots: OrderedDict[int, _Slot] = OrderedDict()
        self.sequence = itertools.count()
        self.last_active = time.monotonic()
        self.paused = False
        self.closing = False
        self.failed = False  # authentication failed: nothing more is read
        self.lost = False
        self.peer = ""
        self.peer_host = ""

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self._raw is not None:  # the TLS transport of start_tls: nothing more to set up
            return
        self._raw = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self.connection_id = f"{self.connection_id}-{self.peer}"
        if not self.server.limits.admit(self.listener.name, self.peer_host, self.peer):
            self.closing = True  # max.connections / max.connections.per.ip: refused at once
            transport.close()
            return
        self.admitted = True
        self.server._connections[self.connection_id] = self
        if self.tls is None:
            self.transport = transport
            if self.server._all_paused:
                self._pause()
            return
        transport.pause_reading()  # start_tls takes the bytes from here on
        self._handshake = asyncio.get_running_loop().create_task(self._start_tls(transport))

    async def _start_tls(self, raw: asyncio.Transport) -> None:
        assert self.tls is not None
        loop = asyncio.get_running_loop()
        try:
            transport = await loop.start_tls(
                raw,
                self,
                self.tls,
                server_side=True,
                ssl_handshake_timeout=self.server.config.tls_handshake_timeout_ms / 1000,
                # a client that never answers the server's close_notify is cut off as soon
                ssl_shutdown_timeout=self.server.config.tls_handshake_timeout_ms / 1000,
            )
        except Exception as error:  # a bad or stalled handshake ends this connection only
            if not self.closing:  # not closed meanwhile by the server (stopping, idle)
                _log.info(
                    "network.tls_handshake_failed",
                    broker=self.server.broker_id,
                    listener=self.listener.name,
                    client_address=self.peer,
                    reason=f"{type(error).__name__}: {error}"
                    if str(error)
                    else type(error).__name__,
                    ts_ms=self.server.clock.now_ms(),
                )
            raw.close()
            self.connection_lost(None)
            return
        if self.closing or transport is None:  # closed meanwhile: start_tls may still return
            if transport is not None:
                transport.close()
            raw.close()
            self.connection_lost(None)
            return
        self.transport = transport
        self.principal = principal_of(transport.get_extra_info("peercert"))
        if self.server._all_paused:
            self._pause()
        early, self._early = self._early, []
        for data in early:
            self.data_received(data)

    def data_received(self, data: bytes) -> None:
        if self.closing or self.failed:
            return
        if self.transport is None:  # TLS: the handshake is done, start_tls has not returned
            self._early.append(data)
            return
        self.last_active = time.monotonic()
        try:
            frames = self.decoder.feed(data)
        except FrameSizeError as error:
            self.bad_request(str(error), size=error.size)
            return
        for frame in frames:
            if not self._handle(frame):
                return
        if self.decoder.waiting_for_memory:
            self._pause()  # Kafka mutes the channel until the memory pool can grant it
            self.server.limits.wait_for_memory(self)

    def retry_memory(self) -> None:
        """Memory was released: take up the frame that waited for it, and read again."""
        if self.closing or self.failed:
            return
        self.data_received(b"")
        self._resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.lost:
            return
        self.lost = True
        self.closing = True
        self.server._connection_closed(self, len(self.slots))
        limits = self.server.limits
        limits.release(self.decoder.granted + sum(slot.memory for slot in self.slots.values()))
        limits.closed(self, admitted=self.admitted)
        self.slots.clear()

    # -- SASL ---------------------------------------------------------------------------------

    def _authenticate(self, frame: bytes) -> bool:
        """One frame of the SASL exchange; False when the connection stops reading over it."""
        assert self.authenticator is not None
        outcome = self.authenticator.receive(frame)
        if outcome.response is not None and self.transport is not None:
            self.transport.write(outcome.response)
        if outcome.failure is not None:
            self.failed = True
            if self.transport is not None:
                self.transport.pause_reading()
            self.server._authentication_failed(self, outcome.failure)
            return False
        if outcome.principal is not None:
            self.principal = outcome.principal
            if tracing.is_enabled():
                _log.info(
                    "security.authenticated",
                    broker=self.server.broker_id,
                    listener=self.listener.name,
                    client_address=self.peer,
                    mechanism=self.authenticator.mechanism,
                    principal=str(outcome.principal),
                    ts_ms=self.server.clock.now_ms(),
                )
        return True

    def close_after_failure(self, failure: AuthenticationFailure) -> None:
        """The end of a failed authentication (on the loop): its response, then the close."""
        if self.closing:
            return
        if failure.response is not None and self.transport is not None:
            self.transport.write(failure.response)
        self.close(f"authentication failed: {failure.reason}")

    # -- requests -----------------------------------------------------------------------------

    def _handle(self, frame: bytes) -> bool:
        """Hand one frame on; False when the connection was closed over it."""
        memory = len(frame) if self.server.limits.pool is not None else 0
        if self.authenticator is not None and not self.authenticator.complete:
            self.server.limits.release(memory)  # answered as soon as it is read
            return self._authenticate(frame)
        received_ns = time.monotonic_ns()
        try:
            header, body = decode_request(frame)
        except BadRequestError as error:
            self.server.limits.release(memory)
            self.bad_request(
                error.reason,
                size=len(frame),
                api_key=error.api_key,
                api_version=error.api_version,
            )
            return False
        sequence = next(self.sequence)
        # a request from another broker may continue its trace (kafkactor's tagged header field)
        trace_id = header.trace_id or tracing.new_id()
        slot = _Slot(header, received_ns, trace_id, memory)
        self.slots[sequence] = slot
        request = NetworkRequest(
            connection_id=self.connection_id,
            sequence=sequence,
            header=dataclasses.replace(
                header,
                client_host=self.peer_host,
                principal=self.principal,
                listener=self.listener.name,
            ),
            body=body,
            size=len(frame),
            received_ns=received_ns,
        )
        if not self.server._hand_on(request, trace_id):
            # never queued: its slot must not be counted off queued.max.requests on close
            del self.slots[sequence]
            self.server.limits.release(memory)
            self.close("the broker is not serving requests")
            return False
        if len(self.slots) >= self.server.config.max_in_flight_per_connection:
            self._pause()
        return True

    def bad_request(
        self, reason: str, *, size: int, api_key: int = -1, api_version: int = -1
    ) -> None:
        _log.info(
            "network.bad_request",
            broker=self.server.broker_id,
            connection=self.connection_id,
            api_key=api_key,
            api_version=api_version,
            bytes=size,
            reason=reason,
            ts_ms=self.server.clock.now_ms(),
        )
        self.close(reason)

    # -- responses ----------------------------------------------------------------------------

    def answered(self, response: NetworkResponse) -> None:
        slot = self.slots.get(response.sequence)
        if slot is None or slot.done:
            return
        slot.done, slot.frame = True, response.frame
        slot.close, slot.reason = response.close, response.reason
        slot.throttle_ms = response.throttle_ms
        memory, slot.memory = slot.memory, 0
        self.server.limits.release(memory)  # answered: its bytes go back to the pool
        self._write_ready()

    def _write_ready(self) -> None:
        server = self.server
        while self.slots and not self.closing:
            sequence, slot = next(iter(self.slots.items()))
            if not slot.done:
                break
            del self.slots[sequence]
            server._request_done()
            if slot.frame is not None and self.transport is not None:
                self.transport.write(slot.frame)
                self.last_active = time.monotonic()
            if tracing.is_enabled():
                _log.info(
                    "network.response",
                    broker=server.broker_id,
                    connection=self.connection_id,
                    api_key=slot.api_key,
                    api=api_name(slot.api_key),
                    api_version=slot.api_version,
                    correlation_id=slot.correlation_id,
                    bytes=len(slot.frame) if slot.frame is not None else 0,
                    latency_ms=(time.monotonic_ns() - slot.received_ns) / 1e6,
                    trace_id=slot.trace_id,
                    ts_ms=server.clock.now_ms(),
                )
            if slot.close:
                self.close(slot.reason)
                return
            if slot.throttle_ms > 0:
                self._throttle(slot.throttle_ms)
        if len(self.slots) < server.config.max_in_flight_per_connection:
            self._resume()

    # -- flow control and closing -------------------------------------------------------------

    def _throttle(self, throttle_ms: int) -> None:
        """KIP-219: the throttled response is written; nothing more is read until a task on
        the broker's timer fires `throttle_ms` later (Kafka's ThrottledChannel)."""
        self.throttles += 1
        self._pause()
        self.server.limits.mute_for(throttle_ms, self._unthrottle)

    def _unthrottle(self) -> None:
        self.throttles -= 1
        self._resume()

    def _pause(self) -> None:
        if not self.paused and self.transport is not None and not self.closing:
            self.paused = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if (
            self.paused
            and self.transport is not None
            and not self.closing
            and not self.failed
            and not self.throttles
            and not self.decoder.waiting_for_memory
            and not self.server._all_paused
            and len(self.slots) < self.server.config.max_in_flight_per_connection
        ):
            self.paused = False
            self.transport.resume_reading()

    def close(self, reason: str) -> None:
        if self.closing:
            return
        self.closing = True
        _log.info(
            "network.connection_closed",
            broker=self.server.broker_id,
            connection=self.connection_id,
            reason=reason,
            unanswered=len(self.slots),
            ts_ms=self.server.clock.now_ms(),
        )
        transport = self.transport if self.transport is not None else self._raw
        if transport is not None:
            transport.close()


def api_name(api_key: int) -> str:
    from kafkactor.network.api_versions import ApiKey

    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN_{api_key}"
