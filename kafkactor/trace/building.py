"""Building traces from events: spans linked by parent, orphans attached, cycles broken."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from kafkactor.trace.model import (
    COMMON_FIELDS,
    COMPLETED_BY,
    COMPLETED_BY_SPAN,
    COMPLETED_BY_TRACE,
    Completion,
    Span,
    StateEvent,
    Trace,
    request_kind,
)
from kafkactor.trace.reading import ReadReport


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(slots=True)
class _Undeliverable:
    actor: str
    to: str
    msg_type: str
    ts_ms: float
    seq: int


@dataclass(slots=True)
class _TraceParts:
    spans: dict[str, Span] = field(default_factory=dict)
    events: list[StateEvent] = field(default_factory=list)
    undeliverable: list[_Undeliverable] = field(default_factory=list)


class _Builder:
    """Groups hops and state events by trace id, keeping only what the trees need."""

    def __init__(self, report: ReadReport, keep: Callable[[str], bool] | None) -> None:
        self.report = report
        self.keep = keep
        self.traces: dict[str, _TraceParts] = {}
        self.completions: list[Completion] = []  # to resolve once every trace is built
        self._strings: dict[str, str] = {}  # actors and message types, shared

    def _share(self, text: str) -> str:
        return self._strings.setdefault(text, text)

    def add(self, event: Mapping[str, Any], seq: int) -> None:
        trace_id = event.get("trace_id")
        if not isinstance(trace_id, str) or not trace_id:
            return  # not part of a trace (broker.start, log_manager.*, ...)
        if self.keep is not None and not self.keep(trace_id):
            return
        name = event.get("event")
        ts = event.get("ts_ms")
        if not isinstance(name, str) or not _number(ts):
            self.report.malformed += 1
            return
        parts = self.traces.get(trace_id)
        if parts is None:
            parts = self.traces[trace_id] = _TraceParts()
        if name in ("msg.send", "msg.recv"):
            if not self._add_hop(parts, name, event, ts, seq):
                self.report.malformed += 1
        elif name == "msg.undeliverable":
            actor, to, msg_type = event.get("actor"), event.get("to"), event.get("msg_type")
            if isinstance(actor, str) and isinstance(to, str) and isinstance(msg_type, str):
                parts.undeliverable.append(_Undeliverable(actor, to, msg_type, ts, seq))
            else:
                self.report.malformed += 1
        else:
            parent = event.get("parent_span_id", "")
            actor = event.get("actor", "")
            if not isinstance(parent, str) or not isinstance(actor, str):
                self.report.malformed += 1
                return
            fields = {k: v for k, v in event.items() if k not in COMMON_FIELDS}
            state = StateEvent(name, self._share(actor), ts, parent, fields, seq)
            if COMPLETED_BY_TRACE in fields:
                state.completed_by = self._completion(fields)
            parts.events.append(state)

    def _completion(self, fields: Mapping[str, Any]) -> Completion | None:
        kind = fields.get(COMPLETED_BY)
        trace_id = fields.get(COMPLETED_BY_TRACE)
        span_id = fields.get(COMPLETED_BY_SPAN, "")
        if not (isinstance(kind, str) and isinstance(trace_id, str) and isinstance(span_id, str)):
            return None  # mistyped: the fields are shown as they are
        completion = Completion(kind, trace_id, span_id)
        self.completions.append(completion)
        return completion

    def _add_hop(
        self, parts: _TraceParts, name: str, event: Mapping[str, Any], ts: float, seq: int
    ) -> bool:
        span_id = event.get("span_id")
        parent = event.get("parent_span_id", "")
        msg_type = event.get("msg_type")
        actor = event.get("actor")
        if not (
            isinstance(span_id, str)
            and span_id
            and isinstance(parent, str)
            and isinstance(msg_type, str)
            and isinstance(actor, str)
        ):
            return False
        span = parts.spans.get(span_id)
        if name == "msg.send":
            to = event.get("to")
            if not isinstance(to, str):
                return False
            if span is None:
                parts.spans[span_id] = Span(
                    span_id,
                    parent,
                    self._share(msg_type),
                    self._share(actor),
                    self._share(to),
                    ts,
                    send_logged=True,
                    seq=seq,
                )
            elif not span.send_logged:  # its receipt came first in the log
                span.send_logged = True
                span.sender = self._share(actor)
                span.sent_ms = ts
            return True
        sender = event.get("sender", "")
        mailbox = event.get("mailbox_ms")
        if not isinstance(sender, str) or not (mailbox is None or _number(mailbox)):
            return False
        if span is None:
            span = parts.spans[span_id] = Span(
                span_id,
                parent,
                self._share(msg_type),
                self._share(sender),
                self._share(actor),
                ts - mailbox if mailbox is not None else ts,
                seq=seq,
            )
        if span.recv_ms is None:
            span.recv_ms = ts
            span.mailbox_ms = mailbox if mailbox is not None else ts - span.sent_ms
            span.receiver = self._share(actor)  # who got it, should the address have moved
        return True


def build_traces(
    events: Iterable[Mapping[str, Any]],
    *,
    report: ReadReport | None = None,
    keep: Callable[[str], bool] | None = None,
) -> list[Trace]:
    """The traces of `events`, in the order they started in the log.

    Only events with a `trace_id` count (and, with `keep`, only the trace ids it accepts).
    Hops and events with mistyped fields are counted in `report.malformed` and skipped.
    """
    builder = _Builder(report if report is not None else ReadReport(), keep)
    for seq, event in enumerate(events):
        builder.add(event, seq)
    traces = [_assemble(trace_id, parts) for trace_id, parts in builder.traces.items()]
    _resolve_completions(builder, traces)
    return traces


def _resolve_completions(builder: _Builder, traces: list[Trace]) -> None:
    """Point each response's `Completion` at the trace and span it names, when built."""
    if not builder.completions:
        return
    by_id = {trace.trace_id: trace for trace in traces}
    for completion in builder.completions:
        completion.trace = by_id.get(completion.trace_id)
        parts = builder.traces.get(completion.trace_id)
        if parts is not None and completion.span_id:
            completion.span = parts.spans.get(completion.span_id)


def _order(span: Span) -> tuple[float, int]:
    return span.sent_ms, span.seq


def _assemble(trace_id: str, parts: _TraceParts) -> Trace:
    spans = parts.spans
    roots, anchor = _link(spans)
    _mark_undeliverable(parts)
    loose = _attach_events(parts, anchor)
    times = [s.sent_ms for s in spans.values()]
    times.extend(s.recv_ms for s in spans.values() if s.recv_ms is not None)
    times.extend(e.ts_ms for e in parts.events)
    first_ms, end_ms = min(times), max(times)
    true_root = roots[0] if roots and not roots[0].orphan else None
    trace = Trace(
        trace_id=trace_id,
        roots=roots,
        kind=_kind(true_root, parts.events),
        root_msg_type=true_root.msg_type if true_root is not None else "",
        start_ms=true_root.sent_ms if true_root is not None else first_ms,
        end_ms=end_ms,
        first_ms=first_ms,
        hops=len(spans),
        actors=[],
        events=loose,
        orphans=sum(1 for s in spans.values() if s.orphan),
        unreceived=sum(1 for s in spans.values() if s.recv_ms is None),
    )
    trace.actors = _actors(trace)
    return trace


def _kind(root: Span | None, events: list[StateEvent]) -> str:
    """The request's name: its root message's, or, for a request that came over the wire
    (a NetworkRequest root), its API's as `network.request` names it ("produce", ...)."""
    if root is None:
        return "unknown"
    if root.msg_type == "NetworkRequest":
        for state in events:
            api = state.fields.get("api") if state.event == "network.request" else None
            if isinstance(api, str) and api:
                return api.lower().replace("_", "-")
    return request_kind(root.msg_type)


def _link(spans: dict[str, Span]) -> tuple[list[Span], Span | None]:
    """Hang every span under its parent: the roots, and the span orphans are attached under
    (the first root; with no root in the log the orphans are the roots, and the first one)."""
    roots: list[Span] = []
    orphans: list[Span] = []
    for span in spans.values():
        if not span.parent_span_id:
            roots.append(span)
            continue
        parent = spans.get(span.parent_span_id)
        if parent is None or parent is span:
            orphans.append(span)
        else:
            parent.children.append(span)
    roots.sort(key=_order)
    orphans.sort(key=_order)
    for span in orphans:
        span.orphan = True
    if roots:
        roots[0].children.extend(orphans)
    else:
        roots = orphans
    anchor = _break_cycles(spans, roots, roots[0] if roots else None)
    for span in spans.values():
        span.children.sort(key=_order)
    return roots, anchor


def _attach_events(parts: _TraceParts, anchor: Span | None) -> list[StateEvent]:
    """Put each state event under its span (under `anchor`, marked, when that span is not in
    the log); the events left when the trace has no span at all."""
    loose: list[StateEvent] = []
    for state in parts.events:
        span = parts.spans.get(state.parent_span_id) if state.parent_span_id else None
        if span is None:
            state.orphan = bool(state.parent_span_id)
            (loose if anchor is None else anchor.events).append(state)
        else:
            span.events.append(state)
    for span in parts.spans.values():
        if len(span.events) > 1:
            span.events.sort(key=lambda e: (e.ts_ms, e.seq))
    return loose


def _break_cycles(spans: dict[str, Span], roots: list[Span], anchor: Span | None) -> Span | None:
    """Spans no root reaches hang in a parent cycle (a corrupt log): cut each cycle and attach
    the span cut under the anchor, as an orphan. Returns the anchor (the first span cut, when
    there was none)."""
    reached: set[str] = set()

    def reach(top: Span) -> None:
        stack = [top]
        while stack:
            span = stack.pop()
            if span.span_id not in reached:
                reached.add(span.span_id)
                stack.extend(span.children)

    for root in roots:
        reach(root)
    if len(reached) == len(spans):
        return anchor
    for start in sorted(spans.values(), key=_order):
        if start.span_id in reached:
            continue
        span, walked = start, {start.span_id}
        while span.parent_span_id not in walked:  # up to the span that closes the cycle
            span = spans[span.parent_span_id]
            walked.add(span.span_id)
        spans[span.parent_span_id].children.remove(span)
        span.orphan = True
        if anchor is None:
            roots.append(span)
            anchor = span
        else:
            anchor.children.append(span)
        reach(span)
    return anchor


def _mark_undeliverable(parts: _TraceParts) -> None:
    """Match each `msg.undeliverable` to the unreceived send it reports (it names no span)."""
    for note in parts.undeliverable:
        candidates = [
            s
            for s in parts.spans.values()
            if s.recv_ms is None
            and not s.undeliverable
            and (s.sender, s.receiver, s.msg_type) == (note.actor, note.to, note.msg_type)
            and s.seq <= note.seq
        ]
        if candidates:
            max(candidates, key=lambda s: s.seq).undeliverable = True
        else:
            fields = {"to": note.to, "msg_type": note.msg_type}
            parts.events.append(
                StateEvent("msg.undeliverable", note.actor, note.ts_ms, "", fields, note.seq)
            )


def _actors(trace: Trace) -> list[str]:
    """The actors of a trace in the order they appear (senders before receivers)."""
    seen: dict[str, None] = {}
    for _depth, span in sorted(trace.walk(), key=lambda item: _order(item[1])):
        if span.sender:
            seen.setdefault(span.sender)
        seen.setdefault(span.receiver)
        for state in span.events:
            if state.actor:
                seen.setdefault(state.actor)
    for state in trace.events:
        if state.actor:
            seen.setdefault(state.actor)
    return list(seen)
