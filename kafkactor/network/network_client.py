"""Kafka's inter-broker `NetworkClient`: actor requests to brokers in other processes, over TCP.

A broker process's `Directory` resolves an address of another broker (`broker/3/...`) to this
client's mailbox for that broker (`remote(3)`). Telling it an envelope whose payload is one of
the inter-broker requests (`inter_broker.wire_call`) sends that request in Kafka's wire format
on a long-lived connection; the wire response becomes the actor response and is told to the
request's `reply_to` in this process, in the request's trace. So an actor does not know
whether the broker it asks is in its process.

- **Connections.** One per (peer broker, requesting address): the controller's requests to a
  broker, each replica fetcher's and each controlled shutdown's travel on their own, as Kafka's
  controller channel and fetcher threads have their own, so a fetch waiting for data on the
  leader (a long poll) never holds a LeaderAndIsr up behind it. A broker answers a
  connection's requests in order, so each connection keeps its requests in flight in a queue.
- **Where peers are**: `endpoint(broker)` (the broker's registration in ZooKeeper: its
  inter-broker listener's endpoint), asked at every connect, so a broker that restarted
  elsewhere is found.
- **Security** (`security`, the broker's `InterBrokerSecurity`): on an SSL / SASL_SSL
  inter-broker listener the connection is TLS (`ssl_factory.client_context`: the trust store,
  the peer's host name checked unless `ssl.endpoint.identification.algorithm` is empty, the
  broker's key store as its client certificate); on a SASL one the broker logs in before its
  first request (`sasl_client`: ApiVersions, SaslHandshake v1, SaslAuthenticate with PLAIN or
  SCRAM). A failed handshake or login is a failed connect: backoff and an event with the
  reason, never the password.
- **Failures.** A connect that fails is retried with exponential backoff
  (`reconnect.backoff.ms` to `reconnect.backoff.max.ms`); requests queued meanwhile wait up to
  `request.timeout.ms`. A request not answered within `request.timeout.ms` (plus the wait a
  long-poll fetch asks the server for) closes its connection, as Kafka's NetworkClient does,
  and every request in flight on it is answered with an `ErrorResponse`: REQUEST_TIMED_OUT for
  the late one, NETWORK_EXCEPTION for the others and for those cut off by a closed connection.
  The requester then acts as for a dead peer in one process (the fetcher backs off and its
  partition leaves the leader's ISR; the controller learns of the death from ZooKeeper).
- **Bounded.** At most `max_queued` requests wait per connection; one more is answered at once
  with NETWORK_EXCEPTION (the requester retries later, as for an unreachable peer).

One asyncio event loop on one thread serves every connection; a `tell` only hands the
envelope to it. Events: `network.client_connected`, `network.client_disconnected`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from kafkactor import tracing
from kafkactor.actors.runtime import Directory
from kafkactor.actors.runtime.hops import new_envelope
from kafkactor.messages import Envelope, ErrorCode, ErrorResponse, Request, Response
from kafkactor.network.codec import decode_response, encode_request
from kafkactor.network.inter_broker import WireCall, wire_call
from kafkactor.security.sasl_client import SaslClientError, SaslLogin, authenticate
from kafkactor.security.security_config import InterBrokerSecurity
from kafkactor.security.ssl_factory import client_context
from kafkactor.timer import Clock, SystemClock

__all__ = ["NetworkClient", "NetworkClientConfig"]

_log = tracing.get_logger("kafkactor.network")

_SIZE: Final = struct.Struct(">i")
_STOP_TIMEOUT_S: Final = 10.0
_TICK_S: Final = 0.05  # how often request deadlines are checked


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkClientConfig:
    """The inter-broker client's settings (Kafka's broker settings of the same names)."""

    request_timeout_ms: int = 30_000  # request.timeout.ms
    reconnect_backoff_ms: int = 50  # reconnect.backoff.ms
    reconnect_backoff_max_ms: int = 1_000  # reconnect.backoff.max.ms
    max_queued: int = 1_000  # requests waiting per connection, not yet answered
    max_frame_bytes: int = 100 * 1024 * 1024  # a larger response size closes the connection


@dataclass(slots=True)
class _Pending:
    """One request on its way: what was asked, where the answer goes, by when."""

    address: str  # the actor asked, on the peer
    request: Request
    call: WireCall
    envelope: Envelope
    correlation_id: int  # the wire correlation id
    deadline: float  # loop time


class NetworkClient:
    """Kafka's `NetworkClient` for one broker process's requests to its peers (see module doc)."""

    def __init__(
        self,
        broker_id: int,
        directory: Directory,
        endpoint: Callable[[int], tuple[str, int] | None],
        *,
        clock: Clock | None = None,
        config: NetworkClientConfig | None = None,
        security: InterBrokerSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.endpoint = endpoint
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.config = config if config is not None else NetworkClientConfig()
        self.client_id = f"broker-{broker_id}"
        # TLS and SASL on the inter-broker listener (a key store that cannot be read fails
        # here, when the broker starts, not at its first connection)
        tls = security.ssl if security is not None else None
        self.ssl_context = client_context(tls) if tls is not None else None
        self.login: SaslLogin | None = None
        if security is not None and security.mechanism is not None:
            self.login = SaslLogin(
                security.mechanism, security.username or "", security.password or ""
            )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, name=f"broker-{broker_id}-network-client", daemon=True
        )
        self._connections: dict[tuple[int, str], _Connection] = {}
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> NetworkClient:
        self._thread.start()
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def close(self) -> None:
        """Close every connection, answering what is in flight with NETWORK_EXCEPTION."""
        if self._closed:
            return
        self._closed = True
        if not self._thread.is_alive():
            return
        done = asyncio.run_coroutine_threadsafe(self._close_all(), self._loop)
        with contextlib.suppress(Exception):
            done.result(_STOP_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_STOP_TIMEOUT_S)

    async def _close_all(self) -> None:
        for connection in list(self._connections.values()):
            await connection.close("the broker is stopping")
        self._connections.clear()

    # -- the mailboxes of remote brokers -----------------------------------------------------------

    def remote(self, address: str) -> RemoteActor | None:
        """The mailbox standing in this process for `address`, an actor of another broker
        (`Directory.remote`); None for an address that is not another broker's."""
        parts = address.split("/", 2)
        if len(parts) < 3 or parts[0] != "broker" or not parts[1].isdigit():
            return None
        peer = int(parts[1])
        if peer == self.broker_id:
            return None  # our own actor, not (or no longer) running: undeliverable
        return RemoteActor(self, peer, address)

    def send(self, peer: int, address: str, message: Any) -> None:
        """Send an envelope's request to `address` on broker `peer` (from any thread)."""
        envelope = message if isinstance(message, Envelope) else None
        payload = envelope.payload if envelope is not None else message
        if not isinstance(payload, Request):
            return  # responses never travel this way: they go back on the request's connection
        call = wire_call(payload)
        if envelope is None:
            envelope = new_envelope(
                payload,
                sender=payload.reply_to,
                sent_ms=self.clock.now_ms(),
                trace_id=tracing.new_id(),
                parent_span_id="",
            )
        if call is None or self._closed:
            reason = "closed" if self._closed else f"{type(payload).__name__} is not inter-broker"
            self._answer(payload, envelope, ErrorCode.NETWORK_EXCEPTION, reason)
            return
        self._loop.call_soon_threadsafe(self._enqueue, peer, address, payload, call, envelope)

    def _enqueue(
        self, peer: int, address: str, request: Request, call: WireCall, envelope: Envelope
    ) -> None:
        if self._closed:
            self._answer(request, envelope, ErrorCode.NETWORK_EXCEPTION, "closed")
            return
        key = (peer, request.reply_to)
        connection = self._connections.get(key)
        if connection is None:
            connection = _Connection(self, peer, request.reply_to)
            self._connections[key] = connection
        connection.enqueue(address, request, call, envelope)

    def _forget(self, connection: _Connection) -> None:
        key = (connection.peer, connection.owner)
        if self._connections.get(key) is connection:
            del self._connections[key]

    # -- answers -------------------------------------------------------------------------------

    def _deliver(self, pending: _Pending, response: Response) -> None:
        """Tell the requester its answer, in the request's trace."""
        answer = new_envelope(
            response,
            sender=pending.address,
            sent_ms=self.clock.now_ms(),
            trace_id=pending.envelope.trace_id,
            parent_span_id=pending.envelope.span_id,
        )
        self.directory.tell(pending.request.reply_to, answer)

    def _answer(self, request: Request, envelope: Envelope, code: ErrorCode, reason: str) -> None:
        if not request.reply_to:
            return
        response = ErrorResponse(
            correlation_id=request.correlation_id, error_code=code, message=reason
        )
        answer = new_envelope(
            response,
            sender=f"broker/{self.broker_id}/network-client",
            sent_ms=self.clock.now_ms(),
            trace_id=envelope.trace_id,
            parent_span_id=envelope.span_id,
        )
        self.directory.tell(request.reply_to, answer)

    def fail(self, pending: _Pending, code: ErrorCode, reason: str) -> None:
        self._answer(pending.request, pending.envelope, code, reason)


class RemoteActor:
    """The mailbox of an actor of a broker in another process: what is told to it goes over
    the wire."""

    __slots__ = ("_client", "address", "peer")

    def __init__(self, client: NetworkClient, peer: int, address: str) -> None:
        self._client = client
        self.peer = peer
        self.address = address

    def tell(self, message: Any) -> None:
        self._client.send(self.peer, self.address, message)


class _Connection:
    """One TCP connection to a peer for one requester, with its queue and requests in flight."""

    def __init__(self, client: NetworkClient, peer: int, owner: str) -> None:
        self.client = client
        self.peer = peer
        self.owner = owner
        self.loop = client._loop
        self.config = client.config
        self.queued: collections.deque[_Pending] = collections.deque()
        self.in_flight: collections.deque[_Pending] = collections.deque()
        self.wakeup = asyncio.Event()
        self.closing = False
        self.writer: asyncio.StreamWriter | None = None
        self.last_failure = ""  # why the last connect failed ("" after a success)
        self._ids = 0
        self.task = self.loop.create_task(self._run())
        self.task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        """A connection whose loop failed (a defect) must not hold its requests forever: they
        are answered, and the next request to this peer opens a fresh connection."""
        if task.cancelled() or self.closing:
            return
        error = task.exception()
        reason = f"connection loop failed: {type(error).__name__}: {error}"
        self.closing = True
        self._fail_all(ErrorCode.NETWORK_EXCEPTION, reason)
        self.client._forget(self)
        self._log("network.client_disconnected", reason=reason)

    def enqueue(self, address: str, request: Request, call: WireCall, envelope: Envelope) -> None:
        if len(self.queued) + len(self.in_flight) >= self.config.max_queued:
            self.client._answer(
                request, envelope, ErrorCode.NETWORK_EXCEPTION, "too many requests queued"
            )
            return
        self._ids = (self._ids + 1) & 0x7FFFFFFF
        timeout_s = (self.config.request_timeout_ms + call.server_wait_ms) / 1000
        self.queued.append(
            _Pending(address, request, call, envelope, self._ids, self.loop.time() + timeout_s)
        )
        self.wakeup.set()

    async def close(self, reason: str) -> None:
        self.closing = True
        self.wakeup.set()
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.task
        self._fail_all(ErrorCode.NETWORK_EXCEPTION, reason)

    def _fail_all(self, code: ErrorCode, reason: str) -> None:
        while self.in_flight:
            self.client.fail(self.in_flight.popleft(), code, reason)
        while self.queued:
            self.client.fail(self.queued.popleft(), code, reason)

    def _expire_queued(self) -> None:
        now = self.loop.time()
        while self.queued and self.queued[0].deadline <= now:
            self.client.fail(
                self.queued.popleft(),
                ErrorCode.REQUEST_TIMED_OUT,
                f"broker {self.peer} not reachable within request.timeout.ms",
            )

    async def _run(self) -> None:
        backoff_ms = self.config.reconnect_backoff_ms
        while not self.closing:
            while not self.queued and not self.closing:  # connect only when there is work
                self.wakeup.clear()
                await self.wakeup.wait()
            if self._stopping():
                return
            try:
                reader, writer = await self._connect()
            except (TimeoutError, OSError, EOFError, LookupError, SaslClientError) as error:
                self._expire_queued()
                await asyncio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, self.config.reconnect_backoff_max_ms)
                reason = str(error) or type(error).__name__
                if isinstance(error, SaslClientError):
                    reason = f"SASL authentication failed: {reason}"
                elif isinstance(error, EOFError):
                    reason = "the broker closed the connection while authenticating"
                if reason != self.last_failure:  # once per outage, not once per attempt
                    self._log("network.client_connect_failed", reason=reason)
                    self.last_failure = reason
                continue
            self.last_failure = ""
            backoff_ms = self.config.reconnect_backoff_ms
            self.writer = writer
            self._log("network.client_connected", reason="")
            reason = await self._serve(reader, writer)
            self.writer = None
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._log("network.client_disconnected", reason=reason)
            while self.in_flight:  # cut off: their answers will never come on this connection
                self.client.fail(self.in_flight.popleft(), ErrorCode.NETWORK_EXCEPTION, reason)

    def _stopping(self) -> bool:
        return self.closing

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        timeout_s = self.config.request_timeout_ms / 1000
        # A ZooKeeper read, off the loop so other connections keep going meanwhile. It fails as
        # a ZooKeeper client can (an expired session, a lost connection) or blocks until that
        # client reconnects: either is a failed connect, retried with backoff.
        lookup = self.loop.run_in_executor(None, self.client.endpoint, self.peer)
        try:
            found = await asyncio.wait_for(lookup, timeout_s)
        except TimeoutError:
            raise TimeoutError(f"broker {self.peer}'s registration not read in time") from None
        except Exception as error:
            raise LookupError(
                f"broker {self.peer}'s registration not read: {type(error).__name__}: {error}"
            ) from error
        if found is None:
            raise LookupError(f"broker {self.peer} is not registered")
        host, port = found
        tls = self.client.ssl_context
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host, port, ssl=tls, server_hostname=host if tls is not None else None
            ),
            timeout_s,
        )
        login = self.client.login
        if login is not None:
            try:
                await asyncio.wait_for(
                    authenticate(reader, writer, login, self.client.client_id), timeout_s
                )
            except BaseException:
                writer.close()
                raise
        return reader, writer

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Write what is queued and read the answers until the connection fails; why it did."""
        reading = self.loop.create_task(self._read(reader))
        try:
            while not self.closing:
                while self.queued:
                    pending = self.queued.popleft()
                    frame = encode_request(
                        pending.call.api_key,
                        pending.call.version,
                        pending.correlation_id,
                        self.client.client_id,
                        pending.call.body,
                        trace=(pending.envelope.trace_id, pending.envelope.span_id),
                    )
                    self.in_flight.append(pending)
                    writer.write(frame)
                await writer.drain()
                if reading.done():
                    return reading.result()
                if self.in_flight and self.in_flight[0].deadline <= self.loop.time():
                    late = self.in_flight.popleft()
                    self.client.fail(
                        late,
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"no answer from broker {self.peer} within request.timeout.ms",
                    )
                    return "request timed out"
                self._expire_queued()
                self.wakeup.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), _TICK_S)
            return "closed"
        except (OSError, ConnectionError) as error:
            return f"{type(error).__name__}: {error}"
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reading

    async def _read(self, reader: asyncio.StreamReader) -> str:
        """Read answers in order until the connection fails; why it did."""
        try:
            while True:
                size_bytes = await reader.readexactly(_SIZE.size)
                (size,) = _SIZE.unpack(size_bytes)
                if not 0 < size <= self.config.max_frame_bytes:
                    return f"a response of {size} bytes"
                frame = await reader.readexactly(size)
                if not self.in_flight:
                    return "a response to no request"
                pending = self.in_flight.popleft()
                call = pending.call
                try:
                    correlation_id, body = decode_response(call.api_key, call.version, frame)
                    if correlation_id != pending.correlation_id:
                        raise ValueError(
                            f"correlation id {correlation_id}, expected {pending.correlation_id}"
                        )
                    response = call.read(body)
                except Exception as error:  # a malformed answer: the connection is not trusted
                    self.client.fail(pending, ErrorCode.NETWORK_EXCEPTION, str(error))
                    return f"a malformed response: {error}"
                self.client._deliver(pending, response)
                self.wakeup.set()
        except asyncio.IncompleteReadError:
            return "the broker closed the connection"
        except (OSError, ConnectionError) as error:
            return f"{type(error).__name__}: {error}"

    def _log(self, event: str, *, reason: str) -> None:
        if tracing.is_enabled():
            _log.info(
                event,
                broker=self.client.broker_id,
                peer=self.peer,
                requester=self.owner,
                reason=reason,
            )
