"""Addresses to actors: messages name actors by address strings, never by reference."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import pykka


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
    """

    def __init__(self) -> None:
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

    def addresses(self) -> list[str]:
        with self._lock:
            return sorted(self._mailboxes)
