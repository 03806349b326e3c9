"""Addresses to actors: messages name actors by address strings, never by reference."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import pykka

# The most messages an actor's mailbox holds before an edge sender waits (Directory.await_room):
# the in-process counterpart of Kafka's queued.max.requests, whose default it takes.
EDGE_MAILBOX_LIMIT = 500
# An edge waiting for room re-checks the mailbox after this pause, doubling up to the most.
_FIRST_PAUSE_S, _MOST_PAUSE_S = 0.0005, 0.005

_thread_role = threading.local()


def mark_actor_thread() -> None:
    """Record that this thread runs an actor (called by the actor base on start): a send from
    it never waits for room, since an actor that blocks can stall the actor it waits on."""
    _thread_role.actor = True


def on_actor_thread() -> bool:
    """Whether the calling thread runs an actor (see `mark_actor_thread`)."""
    return getattr(_thread_role, "actor", False)


class Mailbox(Protocol):
    """Anything that accepts a message without blocking: a Pykka ActorRef or a client inbox."""

    def tell(self, message: Any) -> None: ...


class Directory:
    """Resolves addresses (`broker/1/replica-manager`, `client/producer-3`) to mailboxes.

    Actors register on start and unregister on stop; a message to an unknown or stopped
    address is undeliverable (`tell` returns False) rather than an exception.

    In a broker process, `remote` resolves what no local actor holds: an address of a broker in
    another process becomes the inter-broker network client's mailbox for it, so actors send
    to peers the same way wherever they run.

    Backpressure at the edge: an actor's mailbox is unbounded for other actors (an actor never
    blocks on another), but a sender outside the actor system (a `Client` on its caller's
    thread) first calls `await_room`, which waits while the mailbox holds `edge_mailbox_limit`
    messages or more. None lifts the bound.
    """

    def __init__(
        self,
        *,
        edge_mailbox_limit: int | None = EDGE_MAILBOX_LIMIT,
        pause: Callable[[float], None] = time.sleep,
    ) -> None:
        if edge_mailbox_limit is not None and edge_mailbox_limit < 1:
            raise ValueError(f"edge_mailbox_limit must be positive, not {edge_mailbox_limit}")
        self.edge_mailbox_limit = edge_mailbox_limit
        self._pause = pause  # how a waiting edge sleeps between checks (a test observes it)
        self._lock = threading.Lock()
        self._mailboxes: dict[str, Mailbox] = {}
        # fault injection: a message for which this answers True is not delivered
        self.drop: Callable[[str, Any], bool] | None = None
        # addresses of other processes' actors -> a mailbox that sends over the network
        self.remote: Callable[[str], Mailbox | None] | None = None

    def register(self, address: str, mailbox: Mailbox) -> None:
        with self._lock:
            if address in self._mailboxes and self._mailboxes[address] is not mailbox:
                raise ValueError(f"address {address!r} is already registered")
            self._mailboxes[address] = mailbox

    def unregister(self, address: str, mailbox: Mailbox | None = None) -> None:
        with self._lock:
            if mailbox is None or self._mailboxes.get(address) is mailbox:
                self._mailboxes.pop(address, None)

    def resolve(self, address: str) -> Mailbox | None:
        return self._mailboxes.get(address)

    def tell(self, address: str, message: Any) -> bool:
        """Deliver `message` to `address`; False when nobody (alive) is there."""
        mailbox = self._mailboxes.get(address)
        if mailbox is None:
            remote = self.remote
            mailbox = remote(address) if remote is not None else None
            if mailbox is None:
                return False
        drop = self.drop
        if drop is not None and drop(address, message):
            return False
        try:
            mailbox.tell(message)
        except pykka.ActorDeadError:
            self.unregister(address, mailbox)
            return False
        return True

    def await_room(self, address: str, timeout_s: float) -> bool:
        """Wait until the mailbox of the actor at `address` holds fewer than
        `edge_mailbox_limit` messages; False if it still holds that many after `timeout_s`.

        True at once for an address with no local actor (a send there fails or goes over the
        network, which has its own bound) and when the actor stops while this waits. The
        mailbox is a C queue that tells nobody when it is read, so a waiting edge re-checks it
        after a pause of 0.5 ms, doubling up to 5 ms: an actor pays nothing per message for
        the bound, and an edge polls only while the actor is over it.
        """
        limit = self.edge_mailbox_limit
        mailbox = self._mailboxes.get(address)
        inbox = getattr(mailbox, "actor_inbox", None)
        if limit is None or inbox is None or inbox.qsize() < limit:
            return True
        deadline = time.monotonic() + timeout_s
        pause = _FIRST_PAUSE_S
        while inbox.qsize() >= limit and self._mailboxes.get(address) is mailbox:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._pause(min(pause, left))
            pause = min(pause * 2, _MOST_PAUSE_S)
        return True

    def addresses(self) -> list[str]:
        with self._lock:
            return sorted(self._mailboxes)
