"""Timer tasks and the buckets (doubly linked task lists) that hold them.

Thread-safety model: a `TimingWheel` and its buckets are driven by one thread at a time (the
`Timer` serialises adds and clock advances with one re-entrant lock, which it shares with every
bucket). `TimerTask.cancel()` may be called from any thread: it takes the lock of the bucket its
entry sits in, so a cancel never corrupts a bucket that is being flushed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from mypy_extensions import mypyc_attr


# compiled by mypyc in the compiled build (kafkactor.build_info): tasks are subclassed in Python
@mypyc_attr(allow_interpreted_subclasses=True)
class TimerTask:
    """Kafka's `TimerTask`: work to run once `delay_ms` after it is added to a timer.

    Subclass it and override `run()`. A task sits in at most one timer entry at a time; adding it
    again moves it. `cancel()` removes it from its bucket in O(1), wherever in the wheel it is.
    """

    __slots__ = ("_entry", "delay_ms")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._entry: TimerTaskEntry | None = None

    def run(self) -> None:
        """The work to do when the task expires. Runs at most once per add."""
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop the task from running; O(1), safe from any thread, a no-op when not pending."""
        entry = self._entry
        if entry is not None:
            self._entry = None
            bucket = entry.list
            while bucket is not None:  # inlined entry.remove(): cancel is on the hot path
                with bucket.lock:
                    if entry.list is bucket:
                        if bucket._entries.pop(entry, False):
                            bucket._counter.value -= 1
                        entry.list = None
                bucket = entry.list

    @property
    def is_pending(self) -> bool:
        """True while the task sits in a bucket of some wheel."""
        entry = self._entry
        return entry is not None and entry.list is not None

    def _attach(self, entry: TimerTaskEntry) -> None:
        old = self._entry
        if old is not None and old is not entry:
            old.remove()
        self._entry = entry


class CallbackTask(TimerTask):
    """A TimerTask that calls a function: for callers that need no subclass of their own."""

    __slots__ = ("callback",)

    def __init__(self, delay_ms: int, callback: Callable[[], object]) -> None:
        super().__init__(delay_ms)
        self.callback = callback

    def run(self) -> None:
        self.callback()


class TimerTaskEntry:
    """Kafka's `TimerTaskEntry`: one task at one absolute expiration, held by one bucket.

    An entry is cancelled when its task no longer points at it (the task was cancelled or added
    again); a cancelled entry is never re-inserted and never run.
    """

    __slots__ = ("expiration_ms", "list", "task")

    def __init__(self, task: TimerTask | None, expiration_ms: int) -> None:
        self.task = task
        self.expiration_ms = expiration_ms
        self.list: TimerTaskList | None = None
        if task is not None:
            old = task._entry
            if old is not None and old is not self:
                old.remove()
            task._entry = self

    @property
    def cancelled(self) -> bool:
        task = self.task
        return task is None or task._entry is not self

    def remove(self) -> None:
        """Unlink from whichever bucket holds this entry (it may move between buckets meanwhile)."""
        current = self.list
        while current is not None:
            with current.lock:
                if self.list is current:
                    current._unlink(self)
            current = self.list


class TaskCounter:
    """The count of live entries across every bucket of one timer (Kafka's shared AtomicInteger)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


class TimerTaskList:
    """Kafka's `TimerTaskList`, a bucket: the entries sharing one expiration slot of a wheel.

    Kafka links entries into a doubly linked list for O(1) insert and removal; here the entries
    are the keys of an insertion-ordered dict, which gives the same O(1) operations in C, keeps
    insertion order, and leaves no reference cycles behind removed entries.
    `expiration_ms` is -1 while the bucket is not in the timer's queue; `set_expiration` reports
    whether it changed, which is exactly when the bucket must be (re-)enqueued: once per round.
    """

    __slots__ = ("_counter", "_entries", "expiration_ms", "lock")

    def __init__(
        self,
        counter: TaskCounter | None = None,
        lock: threading.RLock | None = None,
    ) -> None:
        self._counter = counter if counter is not None else TaskCounter()
        self.lock = lock if lock is not None else threading.RLock()
        self._entries: dict[TimerTaskEntry, bool] = {}
        self.expiration_ms = -1

    def set_expiration(self, expiration_ms: int) -> bool:
        """Set the bucket's expiration; True when it changed (the bucket must be enqueued)."""
        changed = self.expiration_ms != expiration_ms
        self.expiration_ms = expiration_ms
        return changed

    def add(self, entry: TimerTaskEntry) -> None:
        """Append `entry`, first unlinking it from any bucket it is in."""
        if entry.list is not None:
            entry.remove()
        with self.lock:
            self._entries[entry] = True
            entry.list = self
            self._counter.value += 1

    def remove(self, entry: TimerTaskEntry) -> None:
        """Unlink `entry` if it is in this bucket."""
        with self.lock:
            if entry.list is self:
                self._unlink(entry)

    def _unlink(self, entry: TimerTaskEntry) -> None:
        # caller holds self.lock and has checked entry.list is self; an entry of a bucket that
        # is being flushed is no longer in _entries (the flush already counted it out)
        if self._entries.pop(entry, False):
            self._counter.value -= 1
        entry.list = None

    def flush(self, action: Callable[[TimerTaskEntry], object]) -> None:
        """Remove every entry, hand each to `action`, and mark the bucket unqueued (-1).

        Entries cancelled or moved by `action` of an earlier entry are skipped.
        """
        with self.lock:
            entries = self._entries
            self._entries = {}
            self._counter.value -= len(entries)
            self.expiration_ms = -1
            for entry in entries:
                if entry.list is self:
                    entry.list = None
                    action(entry)

    def __iter__(self) -> Iterator[TimerTask]:
        """The live (not cancelled) tasks in this bucket, oldest first."""
        with self.lock:
            entries = list(self._entries)
        for entry in entries:
            task = entry.task
            if task is not None and task._entry is entry:
                yield task

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"TimerTaskList(expiration_ms={self.expiration_ms}, live={len(self)})"
