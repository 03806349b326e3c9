"""Recorders that let a test wait for callbacks on a client's event thread, without sleeping."""

from __future__ import annotations

import queue
import threading
from typing import Any

from kazoo.protocol.states import Callback, WatchedEvent

# Bound for waits on other threads: generous, it only matters when something is broken.
WAIT_S = 5.0


class Events:
    """A watch callback that records each event and the thread it ran on."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[WatchedEvent, threading.Thread]] = queue.Queue()

    def __call__(self, watched: WatchedEvent) -> None:
        self._queue.put((watched, threading.current_thread()))

    def next_with_thread(self) -> tuple[WatchedEvent, threading.Thread]:
        try:
            return self._queue.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no watch event within {WAIT_S} s") from None

    def next(self) -> WatchedEvent:
        return self.next_with_thread()[0]

    def expect_none(self, client: Any) -> None:
        """Nothing was called: checked once every callback `client` has queued so far ran."""
        drain(client)
        if not self._queue.empty():
            raise AssertionError(f"unexpected watch event {self._queue.get()!r}")


class Calls:
    """A recipe callback (DataWatch / ChildrenWatch) that records its arguments."""

    def __init__(self, result: object = None) -> None:
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.result = result

    def __call__(self, *args: Any) -> object:
        self._queue.put(args)
        return self.result

    def next(self) -> tuple[Any, ...]:
        try:
            return self._queue.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no recipe call within {WAIT_S} s") from None

    def expect_none(self, client: Any) -> None:
        """Nothing was called: checked once every callback `client` has queued so far ran."""
        drain(client)
        if not self._queue.empty():
            raise AssertionError(f"unexpected recipe call {self._queue.get()!r}")


class States:
    """A connection state listener recording each KazooState and the thread it ran on."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.threads: list[threading.Thread] = []
        self._changed = threading.Condition()

    def __call__(self, state: str) -> None:
        with self._changed:
            self.seen.append(state)
            self.threads.append(threading.current_thread())
            self._changed.notify_all()

    def wait_for(self, count: int) -> list[str]:
        """Wait until `count` states were seen; returns them."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.seen) >= count, WAIT_S):
                raise AssertionError(f"expected {count} states, saw {self.seen}")
            return list(self.seen)


def drain(client: Any) -> None:
    """Wait until every callback queued on `client`'s event thread so far has run."""
    done = threading.Event()
    client.handler.dispatch_callback(Callback("test", done.set, ()))
    assert done.wait(WAIT_S), "the client's event thread is stuck"
