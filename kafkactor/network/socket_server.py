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
import dataclasses
import itertools
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from kafkactor import tracing
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.actors.runtime.hops import log_recv, log_send, new_envelope
from kafkactor.messages import Envelope
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import BadRequestError, decode_request
from kafkactor.network.framing import FrameDecoder, FrameSizeError
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse, RequestHeader
from kafkactor.timer import Clock, SystemClock

__all__ = ["SocketServer", "SocketServerConfig"]

_log = tracing.get_logger("kafkactor.network")

_STOP_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SocketServerConfig:
    """A listener's address and limits (Kafka's broker settings of the same names)."""

    host: str = "127.0.0.1"  # listeners bind loopback unless an address is given
    port: int = 0  # 0: a free port, chosen at start
    socket_request_max_bytes: int = 100 * 1024 * 1024
    queued_max_requests: int = 500
    max_in_flight_per_connection: int = 16
    connections_max_idle_ms: int = 600_000

    def __post_init__(self) -> None:
        for name in (
            "socket_request_max_bytes",
            "queued_max_requests",
            "max_in_flight_per_connection",
            "connections_max_idle_ms",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"UNKNOWN_{api_key}"


class _Slot:
    """One request's place in its connection's response order."""

    __slots__ = (
        "api_key",
        "api_version",
        "close",
        "correlation_id",
        "done",
        "frame",
        "reason",
        "received_ns",
        "trace_id",
    )

    def __init__(self, header: RequestHeader, received_ns: int, trace_id: str) -> None:
        self.api_key = header.api_key
        self.api_version = header.api_version
        self.correlation_id = header.correlation_id
        self.received_ns = received_ns
        self.trace_id = trace_id
        self.done = False
        self.frame: bytes | None = None
        self.close = False
        self.reason = ""


class _Connection(asyncio.Protocol):
    """One client connection: frames in, responses out in request order."""

    def __init__(self, server: SocketServer, connection_id: str) -> None:
        self.server = server
        self.connection_id = connection_id
        self.decoder = FrameDecoder(server.config.socket_request_max_bytes)
        self.transport: asyncio.Transport | None = None
        self.slots: OrderedDict[int, _Slot] = OrderedDict()
        self.sequence = itertools.count()
        self.last_active = time.monotonic()
        self.paused = False
        self.closing = False
        self.peer = ""
        self.peer_host = ""

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.peer_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        self.connection_id = f"{self.connection_id}-{self.peer}"
        self.server._connections[self.connection_id] = self
        if self.server._all_paused:
            self._pause()

    def data_received(self, data: bytes) -> None:
        if self.closing:
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

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        self.server._connection_closed(self, len(self.slots))
        self.slots.clear()

    # -- requests -----------------------------------------------------------------------------

    def _handle(self, frame: bytes) -> bool:
        """Hand one frame on; False when the connection was closed over it."""
        received_ns = time.monotonic_ns()
        try:
            header, body = decode_request(frame)
        except BadRequestError as error:
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
        slot = _Slot(header, received_ns, trace_id)
        self.slots[sequence] = slot
        request = NetworkRequest(
            connection_id=self.connection_id,
            sequence=sequence,
            header=dataclasses.replace(header, client_host=self.peer_host),
            body=body,
            size=len(frame),
            received_ns=received_ns,
        )
        if not self.server._hand_on(request, trace_id):
            # never queued: its slot must not be counted off queued.max.requests on close
            del self.slots[sequence]
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
        if len(self.slots) < server.config.max_in_flight_per_connection:
            self._resume()

    # -- flow control and closing -------------------------------------------------------------

    def _pause(self) -> None:
        if not self.paused and self.transport is not None and not self.closing:
            self.paused = True
            self.transport.pause_reading()

    def _resume(self) -> None:
        if (
            self.paused
            and self.transport is not None
            and not self.closing
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
        if self.transport is not None:
            self.transport.close()


class SocketServer:
    """A broker's listener (Kafka's `SocketServer` with its acceptor and processors).

    `start()` binds at once (so `port` is known when it returns; port 0 picks a free one)
    and serves on a thread of its own; `stop()` closes the listener and every connection.
    It is reachable at `addresses.socket_server(broker_id)`: KafkaApis tells it each
    `NetworkResponse`, from any thread.
    """

    def __init__(
        self,
        broker_id: int,
        directory: Directory,
        config: SocketServerConfig | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.config = config if config is not None else SocketServerConfig()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.address = addresses.socket_server(broker_id)
        self.apis_address = addresses.kafka_apis(broker_id)
        self._connections: dict[str, _Connection] = {}
        self._queued = 0  # handed on to KafkaApis, not yet answered (queued.max.requests)
        self._all_paused = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._server: asyncio.Server | None = None
        self._ids = itertools.count()
        self.host = self.config.host
        self.port = self.config.port

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> SocketServer:
        sock = socket.create_server((self.config.host, self.config.port), backlog=128)
        sock.setblocking(False)
        self._socket = sock
        self.host, self.port = sock.getsockname()[:2]
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(loop, ready), name=f"broker-{self.broker_id}-network"
        )
        self._thread.daemon = True
        self._thread.start()
        ready.wait(_STOP_TIMEOUT_S)
        if self._server is None:
            raise RuntimeError(f"broker {self.broker_id}'s listener did not start")
        self.directory.register(self.address, self)
        _log.info(
            "network.listening",
            broker=self.broker_id,
            host=self.host,
            port=self.port,
            ts_ms=self.clock.now_ms(),
        )
        return self

    def _run(self, loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)

        async def serve() -> None:
            assert self._socket is not None
            self._server = await loop.create_server(self._new_connection, sock=self._socket)
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

    def _new_connection(self) -> _Connection:
        return _Connection(self, f"{self.host}:{self.port}-{next(self._ids)}")

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
            if self._server is not None:
                self._server.close()
            for connection in list(self._connections.values()):
                connection.close("the broker is stopping")
            for task in asyncio.all_tasks(loop):
                task.cancel()

        if not loop.is_closed():
            loop.call_soon_threadsafe(shut)
        thread.join(_STOP_TIMEOUT_S)
        if self._socket is not None:
            self._socket.close()

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

    def _connection_closed(self, connection: _Connection, unanswered: int) -> None:
        self._connections.pop(connection.connection_id, None)
        for _ in range(unanswered):
            self._request_done()

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
