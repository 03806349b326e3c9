"""Recorders for watch events, listener states and recipe calls, and the harness interface.

Nothing here sleeps: positive checks block on a queue or condition with a generous timeout, and
the only negative checks ("nothing more arrives") are bounded waits of QUIET seconds.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Protocol

from kazoo.protocol.states import KeeperState, WatchedEvent, ZnodeStat

# How long a positive check waits for something that should happen (generous: CI machines stall).
TIMEOUT_S = 5.0
# How long a negative check waits for something that should not happen.
QUIET_S = 0.3

# Clients are kazoo.client.KazooClient or the embedded model's client; both are duck-typed.
Client = Any


class ZK(Protocol):
    """What a conformance test gets from the `zk` fixture, whichever backend runs it."""

    backend: str  # "embedded" or "real"
    base: str  # this test's own top-level node, e.g. "/t-3f2a...": every test works under it

    def connect(self) -> Client:
        """A new started client with its own session (closed by the fixture after the test)."""
        ...

    def expire(self, client: Client) -> None:
        """Make the server expire `client`'s current session (the client is not closed)."""
        ...

    def path(self, *parts: str) -> str:
        """`base` joined with `parts`: zk.path("a", "b") == zk.base + "/a/b"."""
        ...


def event(kind: str, path: str | None) -> WatchedEvent:
    """The WatchedEvent a connected client's watch receives for `kind` (an EventType) on `path`."""
    return WatchedEvent(kind, KeeperState.CONNECTED, path)


class Events:
    """A watch callback that queues every event it is given, for the test thread to check."""

    def __init__(self) -> None:
        self._queue: queue.Queue[WatchedEvent] = queue.Queue()

    def __call__(self, watched: WatchedEvent) -> None:
        self._queue.put(watched)

    def next(self, timeout: float = TIMEOUT_S) -> WatchedEvent:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no watch event within {timeout} s") from None

    def expect_none(self, within: float = QUIET_S) -> None:
        try:
            extra = self._queue.get(timeout=within)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected watch event {extra!r}")


class Calls:
    """Recipe callbacks (DataWatch / ChildrenWatch) that queue their arguments.

    Pass `calls.data` to DataWatch and `calls.children` to ChildrenWatch: their exact signatures
    matter, as kazoo's DataWatch passes the event too when the callback takes a third argument.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.made: list[tuple[Any, ...]] = []  # every call's arguments, as soon as it is made

    def data(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        self._record((data, stat))

    def children(self, children: list[str]) -> None:
        self._record((children,))

    def _record(self, args: tuple[Any, ...]) -> None:
        self.made.append(args)
        self._queue.put(args)

    def next(self, timeout: float = TIMEOUT_S) -> tuple[Any, ...]:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no recipe call within {timeout} s") from None

    def expect_none(self, within: float = QUIET_S) -> None:
        try:
            extra = self._queue.get(timeout=within)
        except queue.Empty:
            return
        raise AssertionError(f"unexpected recipe call {extra!r}")


class States:
    """A connection-state listener that records every KazooState it is told about, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._changed = threading.Condition()

    def __call__(self, state: str) -> None:
        with self._changed:
            self.seen.append(state)
            self._changed.notify_all()

    def wait_for(self, *sequence: str, timeout: float = TIMEOUT_S) -> list[str]:
        """Wait until `sequence` occurs in order (not necessarily adjacent); returns all seen."""

        def occurred() -> bool:
            remaining = iter(self.seen)
            return all(any(s == wanted for s in remaining) for wanted in sequence)

        with self._changed:
            if not self._changed.wait_for(occurred, timeout):
                raise AssertionError(f"states {sequence} not seen in order; saw {self.seen}")
            return list(self.seen)
