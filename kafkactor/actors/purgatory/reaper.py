"""The Reaper: the one actor that advances a broker's shared timer."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from kafkactor import tracing
from kafkactor.actors.purgatory.purgatory import DelayedOperation
from kafkactor.actors.runtime import Directory, TracedActor
from kafkactor.actors.runtime.hops import log_send, new_envelope
from kafkactor.messages.purgatory import OperationsExpired
from kafkactor.timer import Clock, ManualClock, SystemClock, Timer, TimerTask, run_inline

_log = tracing.get_logger("kafkactor.reaper")

# Kafka's ExpirationReaper polls the timer with a 200 ms timeout.
REAPER_POLL_MS = 200


class ExpirationDelivery:
    """The shared timer's executor: expired `DelayedOperation`s go to their owning purgatory as
    `OperationsExpired` messages; any other task runs inline.

    Inside `batch()` (the Reaper wraps each advance of the timer in one) the expirations of
    one owner are gathered and sent as one message when the batch ends, so a burst of timeouts
    costs one mailbox hop per purgatory. A lone expiration travels in the trace of the request
    that created it; a batch starts a trace of its own, and the purgatory logs each expiry with
    its operation's trace. Expirations outside a batch, or from another thread (a timer `add`
    of an already-expired operation), are sent at once.
    """

    def __init__(
        self, directory: Directory, address: str, clock: Clock, broker: int | None
    ) -> None:
        self.directory = directory
        self.address = address
        self.clock = clock
        self.broker = broker
        self._batch: dict[str, list[DelayedOperation]] | None = None
        self._batch_thread = 0

    def __call__(self, task: TimerTask) -> None:
        if not isinstance(task, DelayedOperation) or not task.owner:
            run_inline(task)
            return
        if tracing.is_enabled():
            self._log_expire(task)
        batch = self._batch
        if batch is not None and self._batch_thread == threading.get_ident():
            owned = batch.get(task.owner)
            if owned is None:
                batch[task.owner] = [task]
            else:
                owned.append(task)
            return
        self._send(task.owner, [task])

    def _log_expire(self, operation: DelayedOperation) -> None:
        now = self.clock.now_ms()
        trace = operation.trace
        purgatory = operation._purgatory
        _log.info(
            "timer.expire",
            actor=self.address,
            broker=self.broker,
            trace_id=trace.trace_id if trace is not None else "",
            parent_span_id=trace.parent_span_id if trace is not None else "",
            purgatory=purgatory.name if purgatory is not None else "",
            operation_id=operation.operation_id,
            deadline_ms=operation.deadline_ms,
            lateness_ms=now - operation.deadline_ms,
            ts_ms=now,
        )

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Gather this thread's expirations until the block ends, then send one per owner."""
        if self._batch is not None:  # nested: the outer batch sends
            yield
            return
        self._batch = {}
        self._batch_thread = threading.get_ident()
        try:
            yield
        finally:
            batch, self._batch, self._batch_thread = self._batch, None, 0
            for owner, operations in batch.items():
                self._send(owner, operations)

    def _send(self, owner: str, operations: list[DelayedOperation]) -> None:
        trace = operations[0].trace if len(operations) == 1 else None
        envelope = new_envelope(
            OperationsExpired(operation_ids=tuple(op.operation_id for op in operations)),
            sender=self.address,
            sent_ms=self.clock.now_ms(),
            trace_id=trace.trace_id if trace is not None else tracing.new_id(),
            parent_span_id=trace.parent_span_id if trace is not None else "",
        )
        if tracing.is_enabled():
            log_send(envelope, to=owner, broker=self.broker)
        self.directory.tell(owner, envelope)


class _Tick:
    """The Reaper's own poke to advance the timer (not traced: it is the Reaper's clock)."""


class ReaperActor(TracedActor):
    """Kafka's ExpirationReaper as an actor: it owns the advancing of a broker's shared Timer.

    On a real clock it advances with a 200 ms poll in a loop of messages to itself (so a stop
    still gets through its mailbox); `Timer.shutdown()` ends the loop promptly. On a
    ManualClock it advances whenever the clock is moved. Expirations are delivered to the
    owning purgatories by the timer's executor (`ExpirationDelivery`).
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock | None = None,
        broker: int | None = None,
        *,
        poll_ms: int = REAPER_POLL_MS,
    ) -> None:
        super().__init__(address, directory, clock if clock is not None else SystemClock(), broker)
        self.timer = timer
        self.poll_ms = poll_ms
        self._manual = isinstance(self.clock, ManualClock)
        executor = timer.executor
        self._delivery = executor if isinstance(executor, ExpirationDelivery) else None

    def on_start(self) -> None:
        super().on_start()
        if isinstance(self.clock, ManualClock):
            self.clock.add_listener(self._clock_moved)
        else:
            self.actor_ref.tell(_Tick())

    def on_stop(self) -> None:
        if isinstance(self.clock, ManualClock):
            self.clock.remove_listener(self._clock_moved)
        super().on_stop()

    def _clock_moved(self, _now_ms: int) -> None:
        self.actor_ref.tell(_Tick())

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Tick):
            self._tick()
            return None
        return super().on_receive(message)

    def _batch(self) -> AbstractContextManager[None]:
        return self._delivery.batch() if self._delivery is not None else nullcontext()

    def _tick(self) -> None:
        timer = self.timer
        if self._manual:
            with self._batch():
                while timer.advance_clock(0):
                    pass
            return
        with self._batch():
            timer.advance_clock(self.poll_ms)
        if not timer.is_shutdown:
            self.actor_ref.tell(_Tick())
