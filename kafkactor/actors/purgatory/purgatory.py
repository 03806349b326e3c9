"""Kafka's delayed-operation purgatory, the pure core: DelayedOperation and the Purgatory
that watches operations by key."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Hashable, Iterable

from mypy_extensions import mypyc_attr

from kafkactor import tracing
from kafkactor.actors.runtime import TraceContext
from kafkactor.timer import Timer, TimerTask

_ids = itertools.count(1)
_log = tracing.get_logger("kafkactor.purgatory")


# compiled by mypyc in the compiled build (kafkactor.build_info): every operation is a subclass
@mypyc_attr(allow_interpreted_subclasses=True)
class DelayedOperation(TimerTask):
    """Kafka's `DelayedOperation`: work that completes when a condition holds or its timeout
    passes, whichever comes first, and exactly once.

    Subclasses implement `try_complete` (check the condition; call `force_complete` when it
    holds), `on_complete` (the completion logic, e.g. send the response) and `on_expiration`
    (called after `on_complete` when the timeout completed it).

    `completed_by` says what completed it, as told by whoever did: the value given to
    `check_and_complete`, `maybe_try_complete`, `force_complete` or `expire` (set before
    `on_complete` runs). The purgatory never looks inside it; None when nobody said, e.g. when
    the operation completed on its own first try.
    """

    def __init__(self, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.operation_id = next(_ids)
        self._completed = False
        self._completion_lock = threading.Lock()
        self._try_lock = threading.Lock()
        self._purgatory: Purgatory | None = None
        self.owner = ""  # the address of the purgatory actor that owns it (for expirations)
        self.trace: TraceContext | None = None
        self.deadline_ms = -1  # when its timeout falls due on the timer's clock, once timed
        self.expired = False  # True when the timeout completed it (set before `on_complete`)
        self.completed_by: object = None  # what completed it (opaque; set before `on_complete`)
        # (thread id, cause) while `maybe_try_complete` tries on behalf of a cause: a
        # `force_complete` from inside that try, on that thread, records the cause
        self._trying_for: tuple[int, object] | None = None

    def try_complete(self) -> bool:
        """Check the condition; when it holds, `force_complete()` and return its result."""
        raise NotImplementedError

    def on_complete(self) -> None:
        """What completion does (once, whether by the condition or by expiry)."""
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after `on_complete` when the timeout completed the operation."""

    def is_completed(self) -> bool:
        return self._completed

    def _mark_completed(self, completed_by: object = None) -> bool:
        with self._completion_lock:
            if self._completed:
                return False
            self._completed = True
            if completed_by is None:
                trying = self._trying_for
                if trying is not None and trying[0] == threading.get_ident():
                    completed_by = trying[1]
            self.completed_by = completed_by
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._delayed.pop(self.operation_id, None)
        self.cancel()  # out of the timer: cancelling a completed operation's timeout
        return True

    def force_complete(self, completed_by: object = None) -> bool:
        """Complete now if nobody has: True for the one caller that did it.

        `completed_by` (or, when None, the cause `maybe_try_complete` is trying for on this
        thread) becomes `self.completed_by`.
        """
        if not self._mark_completed(completed_by):
            return False
        self.on_complete()
        return True

    def maybe_try_complete(self, completed_by: object = None) -> bool:
        """`try_complete` unless another thread is trying right now (Kafka's tryLock).

        Should the try complete the operation, `completed_by` is recorded as what did.
        """
        if not self._try_lock.acquire(blocking=False):
            return False
        try:
            if completed_by is not None:
                self._trying_for = (threading.get_ident(), completed_by)
            return self.try_complete()
        finally:
            self._trying_for = None
            self._try_lock.release()

    def expire(self, completed_by: object = None) -> bool:
        """The timeout: complete (unless already done), then `on_expiration`; True if it did.

        `expired` (and `completed_by`, when given) is set before `on_complete` runs, so the
        completion logic can tell a timeout from a satisfied condition.
        """
        if not self._mark_completed(completed_by):
            return False
        self.expired = True
        self.on_complete()
        self.on_expiration()
        return True

    def run(self) -> None:
        """The timeout, when the timer runs the task inline."""
        self.expire()


class Purgatory:
    """Kafka's `DelayedOperationPurgatory`, without threads: watcher lists per key and a timer.

    `try_complete_else_watch` tries an operation, watches it under every key (counting it once
    in the estimated total), tries again (so an event between the first try and the watch
    cannot strand it, KAFKA-1430), and only then adds it to the timer. `check_and_complete`
    re-tries the operations watching a key and drops the completed ones; empty watcher lists
    are removed (KAFKA-2160). Completed operations still in other keys' lists are purged once
    the estimated total exceeds the delayed count by `purge_interval` (KAFKA-664).
    """

    def __init__(
        self,
        name: str,
        timer: Timer,
        purge_interval: int = 1000,
        on_purge: Callable[[int], None] | None = None,
    ) -> None:
        self.name = name
        self.timer = timer
        self.purge_interval = purge_interval
        self.on_purge = on_purge  # told how many entries each purge pass removed
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._delayed: dict[int, DelayedOperation] = {}
        self.estimated_total = 0
        self.purged = 0

    def try_complete_else_watch(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> bool:
        """True when the operation completed during this call (by this call's tries)."""
        keys = list(keys)
        if not keys:
            raise ValueError("an operation must be watched under at least one key")
        operation._purgatory = self
        if operation.try_complete():
            return True
        counted = False
        for key in keys:
            if operation.is_completed():
                return False
            self._watchers.setdefault(key, {})[operation] = None
            if not counted:
                counted = True
                self.estimated_total += 1
        if operation.maybe_try_complete():
            return True
        if not operation.is_completed():
            self._delayed[operation.operation_id] = operation
            deadline_ms = self.timer.clock.now_ms() + operation.delay_ms
            operation.deadline_ms = deadline_ms
            self.timer.add_at(operation, deadline_ms)
            if operation.is_completed():  # completed meanwhile (e.g. by another thread): untime it
                operation.cancel()
                self._delayed.pop(operation.operation_id, None)
        self.maybe_purge()
        return False

    def check_and_complete(self, key: Hashable, completed_by: object = None) -> int:
        """Re-try the operations watching `key`; how many completed now.

        `completed_by` (what changed the key; opaque here) is recorded on each operation this
        call completes, before its `on_complete` runs.
        """
        watchers = self._watchers.get(key)
        if watchers is None:
            return 0
        completed = 0
        for operation in list(watchers):
            if operation.is_completed():
                del watchers[operation]
            elif operation.maybe_try_complete(completed_by):
                del watchers[operation]
                completed += 1
        if not watchers:
            self._watchers.pop(key, None)
        return completed

    def cancel_for_key(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching `key`; its operations leave the timer uncompleted and are returned."""
        watchers = self._watchers.pop(key, None)
        if watchers is None:
            return []
        cancelled = []
        for operation in watchers:
            if not operation.is_completed():
                operation.cancel()
                self._delayed.pop(operation.operation_id, None)
                cancelled.append(operation)
        return cancelled

    def expire(self, operation_id: int, completed_by: object = None) -> bool:
        """The timeout of `operation_id` fired: complete and expire it, unless already done."""
        return bool(self.expire_all((operation_id,), completed_by))

    def expire_all(
        self, operation_ids: Iterable[int], completed_by: object = None
    ) -> list[DelayedOperation]:
        """The timeouts of these operations fired: the ones this call expired (others were
        already done or are not this purgatory's). `completed_by` (opaque here: who expired
        them) is recorded on each."""
        expired = []
        delayed = self._delayed
        for operation_id in operation_ids:
            operation = delayed.get(operation_id)
            if operation is not None and operation.expire(completed_by):
                expired.append(operation)
        self.maybe_purge()
        return expired

    def maybe_purge(self) -> int:
        """Purge completed operations from every watcher list when enough have piled up."""
        delayed = self.num_delayed
        if self.estimated_total - delayed <= self.purge_interval:
            return 0
        self.estimated_total = delayed
        purged = 0
        for key in list(self._watchers):
            watchers = self._watchers[key]
            for operation in [op for op in watchers if op.is_completed()]:
                del watchers[operation]
                purged += 1
            if not watchers:
                del self._watchers[key]
        self.purged += purged
        if self.on_purge is not None:
            self.on_purge(purged)
        return purged

    @property
    def num_delayed(self) -> int:
        """Operations waiting in the timer (not completed)."""
        return len(self._delayed)

    @property
    def watched(self) -> int:
        """Entries in all watcher lists (completed ones count until removed or purged)."""
        return sum(len(watchers) for watchers in self._watchers.values())

    @property
    def keys(self) -> int:
        return len(self._watchers)

    def is_watched(self, key: Hashable) -> bool:
        """Whether `key` has a watcher list (completed entries count until removed or purged)."""
        return key in self._watchers

    def pending(self) -> list[DelayedOperation]:
        """Every operation not yet completed (waiting in the timer)."""
        return [op for op in self._delayed.values() if not op.is_completed()]
