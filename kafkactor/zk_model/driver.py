"""Drives a Timer from its clock: inline on a ManualClock, from a daemon thread otherwise."""

from __future__ import annotations

import threading

from kafkactor.timer import ManualClock, Timer

# How long the driving thread waits for a bucket before looking again (it is woken at once when
# an earlier bucket is added or the driver stops, so this only bounds idle polling).
_POLL_MS = 500


class TimerDriver:
    """Expires a `Timer`'s tasks as its clock moves, running them inline (no pool).

    On a ManualClock every due task runs on the thread that advanced the clock, before `advance`
    returns, in order of due time; so a test that moves the clock sees the effects at once. On
    any other clock a daemon thread advances the timer. Tasks must be short and must not wait
    for a thread that could be adding to or advancing this timer.

    For the embedded ZooKeeper it stands for the server's session-expiry thread (ZooKeeper's
    `SessionTrackerImpl`) and for every kazoo client's ping loop.
    """

    def __init__(self, timer: Timer, *, name: str) -> None:
        self._timer = timer
        self._name = name
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._manual = timer.clock if isinstance(timer.clock, ManualClock) else None

    def start(self) -> TimerDriver:
        if self._manual is not None:
            self._manual.add_listener(self._on_clock_moved)
        else:
            self._thread = threading.Thread(target=self._drive, name=self._name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop expiring tasks (tasks still pending never run) and wait for the thread."""
        self._stopping = True
        if self._manual is not None:
            self._manual.remove_listener(self._on_clock_moved)
        self._timer.shutdown()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _on_clock_moved(self, _now_ms: int) -> None:
        while not self._stopping and self._timer.advance_clock(0):
            pass

    def _drive(self) -> None:
        while not self._stopping:
            self._timer.advance_clock(_POLL_MS)
