"""Kafka's `request.timeout.ms` for the in-process producer: one request's attempt, and the
thread that fails requests still unanswered at their deadline."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable

from kafkactor.messages import ErrorCode

__all__ = ["Attempt", "RequestTimeouts"]


class Attempt:
    """One request of a batch: answered, timed out or aborted, whichever comes first."""

    __slots__ = ("_done", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False

    def claim(self) -> bool:
        """True for the first caller only: the one that settles this attempt."""
        with self._lock:
            if self._done:
                return False
            self._done = True
            return True


class RequestTimeouts:
    """Kafka's `request.timeout.ms`: fails requests still unanswered at their deadline.

    One daemon thread per producer, started with the first request, sleeping until the
    earliest deadline. `abort_all` (at close) fails every request still out.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._pending: dict[int, tuple[float, Callable[[ErrorCode, str], None]]] = {}
        self._ids = itertools.count()
        self._wake_at = math.inf
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, timeout_s: float, fail: Callable[[ErrorCode, str], None]) -> Callable[[], None]:
        """Call `fail(REQUEST_TIMED_OUT, reason)` after `timeout_s` unless the function this
        returns (the request was answered) is called first."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            closed = self._closed
            key = next(self._ids)
            if not closed:
                self._pending[key] = (deadline, fail)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                    self._thread.start()
                if deadline < self._wake_at:
                    self._cond.notify()
        if closed:  # a send that raced close()
            fail(ErrorCode.NETWORK_EXCEPTION, "the producer was closed")

        def answered() -> None:
            with self._cond:
                self._pending.pop(key, None)

        return answered

    def abort_all(self, code: ErrorCode, reason: str) -> None:
        """Stop the thread and fail every request still out with `code`."""
        with self._cond:
            self._closed = True
            aborted = [fail for _, fail in self._pending.values()]
            self._pending.clear()
            self._cond.notify()
            thread = self._thread
        for fail in aborted:
            fail(code, reason)
        if thread is not None and thread is not threading.current_thread():
            thread.join()  # (not when a Future's callback on this thread closes the producer)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                due = [key for key, (deadline, _) in self._pending.items() if deadline <= now]
                if due:
                    expired = [self._pending.pop(key)[1] for key in due]
                    self._cond.release()
                    try:
                        for fail in expired:
                            fail(ErrorCode.REQUEST_TIMED_OUT, "no answer within request_timeout_ms")
                    finally:
                        self._cond.acquire()
                    continue
                self._wake_at = min((d for d, _ in self._pending.values()), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)
                self._wake_at = math.inf
