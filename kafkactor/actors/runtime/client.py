"""The edge of the actor system: a caller that sends requests and blocks on their responses."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from kafkactor import tracing
from kafkactor.actors.runtime.directory import Directory, on_actor_thread
from kafkactor.actors.runtime.hops import log_recv, log_send, new_envelope, travels_bare
from kafkactor.messages import Envelope, ErrorCode, ErrorResponse, Request, Response
from kafkactor.timer import Clock, SystemClock

R = TypeVar("R", bound=Request)


class RequestTimeoutError(TimeoutError):
    """No response arrived within the caller's timeout."""


class MailboxFullError(TimeoutError):
    """A request was not sent: the actor's mailbox stayed at the directory's edge limit for
    the client's `max_block_ms` (Kafka's producer fails a send that waits past max.block.ms
    the same way: unsent)."""


# How long a Client waits for room in a full mailbox by default: Kafka's max.block.ms.
MAX_BLOCK_MS = 60_000


class Client:
    """A non-actor participant with its own address (`client/<name>`), e.g. a test or producer.

    `request` stamps `reply_to` and a fresh `correlation_id` on a Request, sends it in a new
    trace, and returns a Future resolved by the response. Responses arrive through `tell`, on
    whichever actor thread sends them; blocking happens only at this edge, never in an actor.
    An undeliverable request resolves at once with an `ErrorResponse` (NETWORK_EXCEPTION).

    Backpressure: a request sent from a thread that is not an actor's first waits, up to
    `max_block_ms`, while the target actor's mailbox holds the directory's
    `edge_mailbox_limit` messages or more (`Directory.await_room`). Past that the request is
    not sent: `request` answers REQUEST_TIMED_OUT, `send_request` and `tell_request` raise
    `MailboxFullError`. From an actor's thread (a callback that sends again) it never waits.
    """

    def __init__(
        self,
        name: str,
        directory: Directory,
        clock: Clock | None = None,
        *,
        max_block_ms: int = MAX_BLOCK_MS,
    ) -> None:
        if max_block_ms < 0:
            raise ValueError(f"max_block_ms must not be negative, not {max_block_ms}")
        self.address = f"client/{name}"
        self.directory = directory
        self.max_block_ms = max_block_ms
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, Future[Any]] = {}
        directory.register(self.address, self)

    def request(self, address: str, request: R) -> Future[Any]:
        """Send `request` to `address`; the Future holds the Response (or ErrorResponse)."""
        return self._send(address, request)[1]

    def abandon(self, future: Future[Any]) -> None:
        """Forget a request whose caller gave up on it (its own request timeout): a late
        answer is then dropped, and nothing is kept for an answer that never comes."""
        with self._lock:
            for correlation_id, pending in self._pending.items():
                if pending is future:
                    del self._pending[correlation_id]
                    return

    def send_request(self, address: str, request: R, correlation_id: int) -> bool:
        """Send `request` under a correlation id of the caller's choosing, with no Future: for
        a subclass whose `tell` takes the responses itself. False if undeliverable;
        `MailboxFullError` if the actor's mailbox stayed full for `max_block_ms`."""
        return self._deliver(address, request, correlation_id)

    def tell_request(self, address: str, request: R) -> bool:
        """Send `request` expecting no response (e.g. acks=0 produce); False if undeliverable;
        `MailboxFullError` if the actor's mailbox stayed full for `max_block_ms`."""
        return self._deliver(address, request, next(self._ids))

    def _await_room(self, address: str) -> None:
        """Wait for room in the mailbox at `address` (not on an actor's thread)."""
        if on_actor_thread() or self.directory.await_room(address, self.max_block_ms / 1000):
            return
        raise MailboxFullError(
            f"the mailbox of {address} held {self.directory.edge_mailbox_limit} messages or more"
            f" for max_block_ms={self.max_block_ms}; the request was not sent"
        )

    def _deliver(self, address: str, request: R, correlation_id: int) -> bool:
        """Wait for room, stamp `request` as ours and send it in a new trace; False if
        undeliverable, `MailboxFullError` if no room came within `max_block_ms`."""
        self._await_room(address)
        stamped = dataclasses.replace(request, reply_to=self.address, correlation_id=correlation_id)
        directory = self.directory
        if travels_bare(directory):
            return directory.tell(address, stamped)  # untraced: bare, as TracedActor.send
        envelope = new_envelope(
            stamped,
            sender=self.address,
            sent_ms=self.clock.now_ms(),
            trace_id=tracing.new_id(),
            parent_span_id="",
        )
        if tracing.is_enabled():
            log_send(envelope, to=address, broker=None)
        return directory.tell(address, envelope)

    def _send(self, address: str, request: R) -> tuple[int, Future[Any]]:
        correlation_id = next(self._ids)
        future: Future[Any] = Future()
        with self._lock:
            self._pending[correlation_id] = future
        try:
            delivered = self._deliver(address, request, correlation_id)
        except MailboxFullError as full:
            self._resolve(
                ErrorResponse(
                    correlation_id=correlation_id,
                    error_code=ErrorCode.REQUEST_TIMED_OUT,
                    message=str(full),
                )
            )
            return correlation_id, future
        if not delivered:
            self._resolve(
                ErrorResponse(
                    correlation_id=correlation_id,
                    error_code=ErrorCode.NETWORK_EXCEPTION,
                    message=f"no actor at {address}",
                )
            )
        return correlation_id, future

    def call(self, address: str, request: Request, timeout_s: float) -> Any:
        """`request` and wait up to `timeout_s` for the response."""
        correlation_id, future = self._send(address, request)
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            with self._lock:
                self._pending.pop(correlation_id, None)
            raise RequestTimeoutError(
                f"no response from {address} within {timeout_s}s to {type(request).__name__}"
            ) from None

    def tell(self, message: Any) -> None:
        payload = message.payload if isinstance(message, Envelope) else message
        if tracing.is_enabled() and isinstance(message, Envelope):
            log_recv(message, actor=self.address, broker=None, now_ms=self.clock.now_ms())
        if isinstance(payload, Response):
            self._resolve(payload)

    @property
    def pending(self) -> int:
        """Requests sent and not yet answered."""
        with self._lock:
            return len(self._pending)

    def _resolve(self, response: Response) -> None:
        with self._lock:
            future = self._pending.pop(response.correlation_id, None)
        if future is not None and not future.done():
            future.set_result(response)

    def close(self) -> None:
        self.directory.unregister(self.address, self)
