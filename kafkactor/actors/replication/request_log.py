"""Kafka's request log: one `produce.*` / `fetch.*` summary event per request and response.

The hops of a request (`msg.send` / `msg.recv`) say where it went; these say what it was and
how it ended, in one line each, so a reader of the event log (or `kafkactor analyze`) gets
latency by acks and outcome without rebuilding traces. The replica manager logs the request
on receipt; whoever answers it (the replica manager, or the purgatory it waited in) logs the
response, with the latency measured on the broker's clock from that receipt. A response from
a purgatory also names what completed the wait (`completed_by`, and the span it happened in),
so a trace that shows the wait can point at the trace that ended it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafkactor import tracing
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    CONSUMER_REPLICA_ID,
)
from kafkactor.messages.replication import (
    FetchPartitionData,
    FetchRequest,
    ProducePartitionResult,
    ProduceRequest,
)

if TYPE_CHECKING:
    from kafkactor.actors.purgatory.purgatory_actor import CompletedBy
    from kafkactor.actors.runtime import TraceContext, TracedActor

COMPLETED = "completed"
EXPIRED = "expired"
ERROR = "error"

_TIMED_OUT = {ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT}


def outcome(error_codes: Sequence[ErrorCode], *, expired: bool) -> str:
    """How a request ended: `expired` when its timeout in a purgatory ended it (and no
    partition failed otherwise), `error` when any partition has an error code, else
    `completed`."""
    if expired and all(code in _TIMED_OUT for code in error_codes):
        return EXPIRED
    if any(code is not ErrorCode.NONE for code in error_codes):
        return ERROR
    return EXPIRED if expired else COMPLETED


def fetcher_kind(replica_id: int) -> str:
    """`consumer` for a consumer's fetch, `follower` for a follower replica's."""
    return "consumer" if replica_id == CONSUMER_REPLICA_ID else "follower"


def log_produce_request(actor: TracedActor, request: ProduceRequest) -> None:
    """`produce.request`: a produce request reached the replica manager."""
    if not tracing.is_enabled():
        return
    actor.log_event(
        "produce.request",
        acks=request.acks,
        partitions=len(request.partitions),
        bytes=sum(len(p.records) for p in request.partitions),
        timeout_ms=request.timeout_ms,
        correlation_id=request.correlation_id,
    )


def _log_response(
    actor: TracedActor,
    event: str,
    codes: Sequence[ErrorCode],
    *,
    received_ms: int,
    waited: bool,
    expired: bool,
    correlation_id: int,
    trace: TraceContext | None,
    completed_by: CompletedBy | None,
    **fields: Any,
) -> None:
    """The fields every response event has, around the request kind's own `fields` (and,
    when a purgatory says what completed the request, `completed_by` and its span)."""
    if completed_by is not None:
        fields.update(completed_by.fields())
    actor.log_event(
        event,
        trace=trace,
        **fields,
        partitions=len(codes),
        error_codes=[int(code) for code in codes],
        outcome=outcome(codes, expired=expired),
        latency_ms=actor.clock.now_ms() - received_ms,
        waited=waited,
        correlation_id=correlation_id,
    )


def log_produce_response(
    actor: TracedActor,
    *,
    acks: int,
    correlation_id: int,
    results: Sequence[ProducePartitionResult],
    received_ms: int,
    waited: bool,
    expired: bool = False,
    trace: TraceContext | None = None,
    completed_by: CompletedBy | None = None,
) -> None:
    """`produce.response`: a produce request was answered (`completed_by`: what ended its
    wait in the produce purgatory)."""
    if not tracing.is_enabled():
        return
    _log_response(
        actor,
        "produce.response",
        [r.error_code for r in results],
        received_ms=received_ms,
        waited=waited,
        expired=expired,
        correlation_id=correlation_id,
        trace=trace,
        completed_by=completed_by,
        acks=acks,
    )


def log_fetch_request(actor: TracedActor, request: FetchRequest) -> None:
    """`fetch.request`: a consumer's or follower's fetch reached the replica manager."""
    if not tracing.is_enabled():
        return
    actor.log_event(
        "fetch.request",
        replica_id=request.replica_id,
        fetcher=fetcher_kind(request.replica_id),
        partitions=len(request.partitions),
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        correlation_id=request.correlation_id,
    )


def log_fetch_response(
    actor: TracedActor,
    *,
    replica_id: int,
    correlation_id: int,
    partitions: Sequence[FetchPartitionData],
    received_ms: int,
    waited: bool,
    expired: bool = False,
    trace: TraceContext | None = None,
    completed_by: CompletedBy | None = None,
) -> None:
    """`fetch.response`: a fetch was answered (`expired`: its max wait passed first;
    `completed_by`: what ended its wait in the fetch purgatory)."""
    if not tracing.is_enabled():
        return
    _log_response(
        actor,
        "fetch.response",
        [p.error_code for p in partitions],
        received_ms=received_ms,
        waited=waited,
        expired=expired,
        correlation_id=correlation_id,
        trace=trace,
        completed_by=completed_by,
        replica_id=replica_id,
        fetcher=fetcher_kind(replica_id),
        bytes=sum(len(p.records) for p in partitions),
    )
