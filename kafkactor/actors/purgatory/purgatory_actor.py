"""The actor side of Kafka's purgatory: operations created from requests, and the actor that
owns a Purgatory."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from kafkactor import tracing
from kafkactor.actors.purgatory.purgatory import DelayedOperation, Purgatory
from kafkactor.actors.runtime import Directory, TracedActor, handles
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.purgatory import (
    AwaitValue,
    CancelForKey,
    DelayOperation,
    KeyChanged,
    OperationResult,
    OperationsExpired,
)
from kafkactor.timer import Clock, Timer

_ids = itertools.count(1)
_log = tracing.get_logger("kafkactor.purgatory")

EXPIRED = "expired"  # the `CompletedBy.kind` of an operation its timeout completed


@dataclass(frozen=True, slots=True)
class CompletedBy:
    """What completed a delayed operation: the kind of event, and the span it happened in.

    `trace_id` and `span_id` name a span of the event log: the message being handled when the
    completing event happened. For a partition's change (a `kind` such as `high_watermark` or
    `isr_shrink`, see `replica_purgatory`) that is the message the partition was handling; for
    an expiry (`expired`) the Reaper's `OperationsExpired`. Both are "" when not known.
    """

    kind: str
    trace_id: str = ""
    span_id: str = ""

    def fields(self) -> dict[str, str]:
        """As event fields: `completed_by` (the kind) and the span's ids."""
        return {
            "completed_by": self.kind,
            "completed_by_trace_id": self.trace_id,
            "completed_by_span_id": self.span_id,
        }


def log_watched(
    log_event: Callable[..., None],
    purgatory: Purgatory,
    operation: DelayedOperation,
    keys: list[str],
    completed: bool,
) -> None:
    """The events of `try_complete_else_watch`: `purgatory.complete` when the operation
    completed at once, else `purgatory.watch` and the `timer.add` of its timeout."""
    log_event(
        "purgatory.complete" if completed else "purgatory.watch",
        purgatory=purgatory.name,
        operation_id=operation.operation_id,
        keys=keys,
        delayed=purgatory.num_delayed,
        watched_keys=purgatory.keys,  # O(1); `watched` walks every list
    )
    if not completed and operation.deadline_ms >= 0:
        log_event(
            "timer.add",
            purgatory=purgatory.name,
            operation_id=operation.operation_id,
            delay_ms=operation.delay_ms,
            deadline_ms=operation.deadline_ms,
        )


class RequestOperation(DelayedOperation):
    """A delayed operation created from a `DelayOperation` request, answered when it ends."""

    def __init__(self, actor: PurgatoryActor, request: DelayOperation) -> None:
        super().__init__(request.timeout_ms)
        self.actor = actor
        self.request = request

    def respond(self, response: Response) -> None:
        self.actor.reply(self.request, response, trace=self.trace)

    @property
    def completion(self) -> CompletedBy | None:
        """What completed it: the `CompletedBy` its completer gave, `expired` (with no span)
        for a timeout nobody described, else None (it completed on its own try, or is not
        completed, or was aborted)."""
        completed_by = self.completed_by
        if isinstance(completed_by, CompletedBy):
            return completed_by
        return CompletedBy(EXPIRED) if self.expired else None

    def abort(self, error_code: ErrorCode, reason: str) -> bool:
        """End the operation without completing it (e.g. on shutdown), answering the caller."""
        if not self._mark_completed():
            return False
        self.on_abort(error_code)
        self.respond(ErrorResponse(error_code=error_code, message=reason))
        return True

    def on_abort(self, error_code: ErrorCode) -> None:
        """Called when `abort` ends the operation, before the caller is answered."""


class DelayedAwaitValue(RequestOperation):
    """The generic operation: done once the purgatory's value for a key reaches a target."""

    def __init__(self, actor: PurgatoryActor, request: DelayOperation) -> None:
        super().__init__(actor, request)
        spec = request.operation
        assert isinstance(spec, AwaitValue)
        self.spec = spec

    def satisfied(self) -> bool:
        return self.actor.values.get(self.spec.key, 0) >= self.spec.at_least

    def try_complete(self) -> bool:
        return self.force_complete() if self.satisfied() else False

    def on_complete(self) -> None:
        self.respond(
            OperationResult(
                correlation_id=self.request.correlation_id,
                operation_id=self.operation_id,
                expired=not self.satisfied(),
            )
        )


OperationFactory = Callable[["PurgatoryActor", DelayOperation], RequestOperation]


class PurgatoryActor(TracedActor):
    """A broker's produce or fetch purgatory: one `Purgatory` driven through its mailbox.

    `DelayOperation` requests create operations of the type registered for their spec
    (`register_operation`: the replication layer adds DelayedProduce / DelayedFetch);
    `KeyChanged` events update the value a key holds here and re-check its watchers;
    `OperationsExpired` comes from the Reaper; on stop every pending caller is answered
    (BROKER_NOT_AVAILABLE), so no request hangs.
    """

    operation_types: ClassVar[dict[type[Any], OperationFactory]] = {}

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock | None = None,
        broker: int | None = None,
        *,
        name: str = "Produce",
        purge_interval: int = 1000,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.purgatory = Purgatory(name, timer, purge_interval, on_purge=self._purged)
        self.values: dict[str, int] = {}

    @classmethod
    def register_operation(cls, spec_type: type[Any], factory: OperationFactory) -> None:
        cls.operation_types = {**cls.operation_types, spec_type: factory}

    @handles(DelayOperation)
    def _on_delay(self, request: DelayOperation) -> None:
        factory = self.operation_types.get(type(request.operation))
        if not request.keys:
            self.reply(
                request,
                ErrorResponse(
                    error_code=ErrorCode.INVALID_REQUEST,
                    message="a delayed operation must watch at least one key",
                ),
            )
            return
        if factory is None:
            self.reply(
                request,
                ErrorResponse(
                    error_code=ErrorCode.INVALID_REQUEST,
                    message=f"no operation type for {type(request.operation).__name__}",
                ),
            )
            return
        operation = factory(self, request)
        operation.owner = self.address
        operation.trace = self.trace_context
        completed = self.purgatory.try_complete_else_watch(operation, request.keys)
        if tracing.is_enabled():
            log_watched(self.log_event, self.purgatory, operation, list(request.keys), completed)

    def _purged(self, purged: int) -> None:
        if tracing.is_enabled():
            purgatory = self.purgatory
            self.log_event(
                "purgatory.purge",
                purgatory=purgatory.name,
                purged=purged,
                delayed=purgatory.num_delayed,
                watched_keys=purgatory.keys,
            )

    @handles(KeyChanged)
    def _on_key_changed(self, event: KeyChanged) -> None:
        self.values[event.key] = event.value
        completed = self.purgatory.check_and_complete(event.key)
        self.purgatory.maybe_purge()
        if completed and tracing.is_enabled():
            self.log_event(
                "purgatory.complete",
                purgatory=self.purgatory.name,
                key=event.key,
                completed=completed,
                delayed=self.purgatory.num_delayed,
            )

    @handles(CancelForKey)
    def _on_cancel_for_key(self, event: CancelForKey) -> None:
        for operation in self.purgatory.cancel_for_key(event.key):
            if isinstance(operation, RequestOperation):
                operation.abort(ErrorCode.NOT_LEADER_FOR_PARTITION, f"{event.key} cancelled")

    @handles(OperationsExpired)
    def _on_expired(self, event: OperationsExpired) -> None:
        context = self.trace_context  # the Reaper's OperationsExpired: what completed them
        completed_by = (
            CompletedBy(EXPIRED, context.trace_id, context.parent_span_id)
            if context is not None
            else CompletedBy(EXPIRED)
        )
        expired = self.purgatory.expire_all(event.operation_ids, completed_by)
        if expired and tracing.is_enabled():
            delayed = self.purgatory.num_delayed
            for operation in expired:
                trace = operation.trace
                _log.info(
                    "purgatory.expire",
                    actor=self.address,
                    broker=self.broker,
                    purgatory=self.purgatory.name,
                    operation_id=operation.operation_id,
                    trace_id=trace.trace_id if trace is not None else "",
                    parent_span_id=trace.parent_span_id if trace is not None else "",
                    delayed=delayed,
                )

    def on_stop(self) -> None:
        for operation in self.purgatory.pending():
            if isinstance(operation, RequestOperation):
                operation.abort(ErrorCode.BROKER_NOT_AVAILABLE, "the broker is shutting down")
        super().on_stop()


PurgatoryActor.register_operation(AwaitValue, DelayedAwaitValue)
