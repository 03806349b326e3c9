"""Injected time: every component reads time through a `Clock`, never the wall clock directly."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Kafka's `Time`: the source of milliseconds for timers, schedulers and event timestamps."""

    def now_ms(self) -> int:
        """Milliseconds on this clock's time line (never moves backwards)."""
        ...

    def wait(self, condition: threading.Condition, timeout_ms: int) -> None:
        """Wait on `condition` (whose lock the caller holds) for at most `timeout_ms` of this clock.

        A notify on the condition ends the wait early. A clock whose time only moves when it is
        told to (ManualClock) returns at once: waiting could never end by itself.
        """
        ...


class SystemClock:
    """Kafka's `Time.SYSTEM`: epoch milliseconds that never jump backwards.

    Milliseconds come from the monotonic clock, offset once at construction so that values read
    like epoch milliseconds (useful in event logs) yet an NTP step cannot move timers.
    """

    __slots__ = ("_offset_ns",)

    def __init__(self) -> None:
        self._offset_ns = time.time_ns() - time.monotonic_ns()

    def now_ms(self) -> int:
        return (time.monotonic_ns() + self._offset_ns) // 1_000_000

    def wait(self, condition: threading.Condition, timeout_ms: int) -> None:
        if timeout_ms > 0:
            condition.wait(timeout_ms / 1000.0)


class ManualClock:
    """Kafka's `MockTime`: time moves only when a test calls `advance` or `set`.

    Listeners registered with `add_listener` are called (outside any lock of this clock) after
    every move, with the new time; that is how schedulers built on a ManualClock run their due
    tasks without a polling thread.
    """

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []

    def now_ms(self) -> int:
        return self._now_ms

    def wait(self, condition: threading.Condition, timeout_ms: int) -> None:
        return None

    def advance(self, ms: int) -> int:
        """Move time forward by `ms` (>= 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"a clock cannot move backwards (advance by {ms} ms)")
        with self._lock:
            self._now_ms += ms
            now = self._now_ms
            listeners = list(self._listeners) if self._listeners else ()
        for listener in listeners:
            listener(now)
        return now

    def set(self, now_ms: int) -> int:
        """Move time forward to `now_ms` (not before the current time) and return it."""
        return self.advance(now_ms - self._now_ms)

    def add_listener(self, listener: Callable[[int], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[int], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)
