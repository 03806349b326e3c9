"""The Reaper: the one actor that advances a broker's shared timer."""

from __future__ import annotations

from typing import Any

from kafkactor import tracing
from kafkactor.actors.base import TracedActor
from kafkactor.actors.directory import Directory
from kafkactor.actors.hops import log_send, new_envelope
from kafkactor.actors.purgatory import DelayedOperation
from kafkactor.messages.purgatory import OperationExpired
from kafkactor.timer import Clock, ManualClock, SystemClock, Timer, TimerTask, run_inline

# Kafka's ExpirationReaper polls the timer with a 200 ms timeout.
REAPER_POLL_MS = 200


class ExpirationDelivery:
    """The shared timer's executor: an expired `DelayedOperation` goes to its owning purgatory
    as an `OperationExpired` message, in the trace of the request that created it; any other
    task runs inline."""

    def __init__(
        self, directory: Directory, address: str, clock: Clock, broker: int | None
    ) -> None:
        self.directory = directory
        self.address = address
        self.clock = clock
        self.broker = broker

    def __call__(self, task: TimerTask) -> None:
        if not isinstance(task, DelayedOperation) or not task.owner:
            run_inline(task)
            return
        trace = task.trace
        envelope = new_envelope(
            OperationExpired(operation_id=task.operation_id),
            sender=self.address,
            sent_ms=self.clock.now_ms(),
            trace_id=trace.trace_id if trace is not None else tracing.new_id(),
            parent_span_id=trace.parent_span_id if trace is not None else "",
        )
        if tracing.is_enabled():
            log_send(envelope, to=task.owner, broker=self.broker)
        self.directory.tell(task.owner, envelope)


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

    def _tick(self) -> None:
        timer = self.timer
        if self._manual:
            while timer.advance_clock(0):
                pass
            return
        timer.advance_clock(self.poll_ms)
        if not timer.is_shutdown:
            self.actor_ref.tell(_Tick())
