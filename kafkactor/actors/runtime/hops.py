"""One message hop: the envelope that carries it and the `msg.send` / `msg.recv` events."""

from __future__ import annotations

from typing import Any

from kafkactor import tracing
from kafkactor.actors.runtime.directory import Directory
from kafkactor.messages import Envelope

_log = tracing.get_logger("kafkactor.hop")


def travels_bare(directory: Directory) -> bool:
    """Whether a hop through `directory` may carry its bare payload: with tracing off nobody
    reads an envelope's ids or times, unless fault injection (`Directory.drop`) is on, whose
    rules may read the envelope's sender."""
    return directory.drop is None and not tracing.is_enabled()


def new_envelope(
    payload: Any, *, sender: str, sent_ms: int, trace_id: str, parent_span_id: str
) -> Envelope:
    """An envelope for one hop of a trace: a fresh span under `parent_span_id`."""
    return Envelope(
        payload=payload,
        trace_id=trace_id,
        span_id=tracing.new_id(),
        parent_span_id=parent_span_id,
        sender=sender,
        sent_ms=sent_ms,
    )


def log_send(envelope: Envelope, *, to: str, broker: int | None) -> None:
    """The `msg.send` event of a hop (callers check `tracing.is_enabled()` first)."""
    _log.info(
        "msg.send",
        actor=envelope.sender,
        broker=broker,
        to=to,
        msg_type=type(envelope.payload).__name__,
        trace_id=envelope.trace_id,
        span_id=envelope.span_id,
        parent_span_id=envelope.parent_span_id,
        ts_ms=envelope.sent_ms,
    )


def log_recv(envelope: Envelope, *, actor: str, broker: int | None, now_ms: int) -> None:
    """The `msg.recv` event of a hop, with the time it waited in the mailbox."""
    _log.info(
        "msg.recv",
        actor=actor,
        broker=broker,
        sender=envelope.sender,
        msg_type=type(envelope.payload).__name__,
        trace_id=envelope.trace_id,
        span_id=envelope.span_id,
        parent_span_id=envelope.parent_span_id,
        mailbox_ms=now_ms - envelope.sent_ms,
        ts_ms=now_ms,
    )
