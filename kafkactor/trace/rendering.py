"""Selecting traces and rendering them: the summary table, the tree, a Mermaid diagram."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import orjson

from kafkactor.trace.model import (
    COMPLETED_BY_FIELDS,
    OUTSIDE,
    SUMMARY_LIMIT,
    Completion,
    Span,
    StateEvent,
    Trace,
    matches_request,
    plural_s,
)

# -- selecting -----------------------------------------------------------------------------------


def _slowest_first(trace: Trace) -> tuple[float, float, str]:
    return -trace.duration_ms, trace.start_ms, trace.trace_id


def select_traces(
    traces: Iterable[Trace],
    *,
    trace_id: str | None = None,
    request: str | None = None,
    slowest: int | None = None,
) -> list[Trace]:
    """The traces to show, slowest first: the one with `trace_id` (or, when no id is exactly
    that, those it is a prefix of), of the `request` kind, at most `slowest` of them."""
    chosen = list(traces)
    if trace_id is not None:
        wanted = trace_id.strip().lower()
        exact = [t for t in chosen if t.trace_id.lower() == wanted]
        chosen = exact or [t for t in chosen if t.trace_id.lower().startswith(wanted)]
    if request is not None:
        chosen = [t for t in chosen if matches_request(t, request)]
    chosen.sort(key=_slowest_first)
    return chosen if slowest is None else chosen[: max(0, slowest)]


def kind_counts(traces: Iterable[Trace]) -> Counter[str]:
    """How many traces of each request kind."""
    return Counter(t.kind for t in traces)


def no_match_message(
    traces: list[Trace], *, source: str, trace_id: str | None = None, request: str | None = None
) -> str:
    """Why `select_traces` found nothing: no such trace, a trace of another kind, no trace of
    that kind (and which kinds there are), or no trace at all."""
    if trace_id is not None:
        named = select_traces(traces, trace_id=trace_id)
        if not named:
            return f"no trace {trace_id} in {source}"
        kinds = sorted({t.kind for t in named})
        return f"trace {trace_id} is {' / '.join(kinds)}, not {request}"
    if not traces:
        return f"no traces in {source} (no msg.send / msg.recv with a trace_id)"
    counts = kind_counts(traces).most_common()
    found = ", ".join(f"{kind} {n}" for kind, n in counts[:8]) + (
        ", ..." if len(counts) > 8 else ""
    )
    what = f"no {request} trace" if request is not None else "no trace matched"
    return f"{what} in {source}; it has {len(traces)} trace{plural_s(len(traces))}: {found}"


# -- rendering -----------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:.1f}"


def _status(trace: Trace) -> str:
    notes = []
    if trace.unreceived:
        notes.append(f"{trace.unreceived} unreceived")
    if trace.orphans:
        notes.append(f"{trace.orphans} orphan{plural_s(trace.orphans)}")
    return ", ".join(notes) or "ok"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_summary(traces: list[Trace], *, limit: int = SUMMARY_LIMIT) -> str:
    """A table of the `limit` slowest of `traces`: id, kind, duration, hops, status, actors."""
    shown = sorted(traces, key=_slowest_first)[:limit]
    rows = [("TRACE ID", "REQUEST", "DURATION MS", "HOPS", "STATUS", "ACTORS")]
    rows.extend(
        (
            t.trace_id,
            t.kind,
            _ms(t.duration_ms),
            str(t.hops),
            _status(t),
            _clip(f"{len(t.actors)}: " + ", ".join(t.actors), 100),
        )
        for t in shown
    )
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    right = {2, 3}
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row[:5])
        ]
        lines.append("  ".join([*cells, row[5]]))
    return "\n".join(lines)


def describe(trace: Trace) -> str:
    """A trace's one-line header: id, kind, duration, hops, actors, damage."""
    text = (
        f"trace {trace.trace_id}  {trace.kind}  {_ms(trace.duration_ms)}ms  "
        f"{trace.hops} hop{plural_s(trace.hops)}  "
        f"{len(trace.actors)} actor{plural_s(len(trace.actors))}"
    )
    status = _status(trace)
    return text if status == "ok" else f"{text}  ({status})"


def _value(value: Any, width: int = 60) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, list | tuple):
        text = "[" + ", ".join(_value(v, width) for v in value) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {_value(v, width)}" for k, v in value.items()) + "}"
    else:
        text = orjson.dumps(value, default=repr).decode()
    return _clip(text, width)


def _shown_fields(state: StateEvent) -> dict[str, Any]:
    """The fields of a state event as listed (what completed it has a line of its own)."""
    if state.completed_by is None:
        return state.fields
    return {k: v for k, v in state.fields.items() if k not in COMPLETED_BY_FIELDS}


def _state_text(state: StateEvent, receiver: str | None) -> str:
    fields = ", ".join(f"{k}: {_value(v)}" for k, v in _shown_fields(state).items())
    where = f" @{state.actor}" if state.actor and state.actor != receiver else ""
    mark = "[orphan] " if state.orphan else ""
    return f"{mark}{state.event}{where} {{{fields}}}"


def _hop_text(span: Span) -> str:
    return f"{span.sender or OUTSIDE} -> {span.receiver}  {span.msg_type}"


def _completion_lines(completion: Completion, trace: Trace) -> list[str]:
    """The line "completed by <kind> (span <id> in trace <id>)", then, when they were built,
    the first line of that trace and the hop of that span."""
    if completion.span_id and completion.trace_id == trace.trace_id:
        where = f" (span {completion.span_id} in this trace)"
    elif completion.span_id:
        where = f" (span {completion.span_id} in trace {completion.trace_id})"
    elif completion.trace_id:
        where = f" (in trace {completion.trace_id})"
    else:
        where = ""
    lines = [f"↳ completed by {completion.kind}{where}"]
    if completion.trace is not None and completion.trace is not trace:
        lines.append(f"  {describe(completion.trace)}")
    if completion.span is not None:
        lines.append(f"  at {_hop_text(completion.span)}")
    return lines


def _hop_status(span: Span) -> str:
    if span.mailbox_ms is not None:
        return f"mailbox {_ms(span.mailbox_ms)}ms"
    return "undeliverable" if span.undeliverable else "never received"


def render_tree(trace: Trace) -> str:
    """The trace as an indented tree: a header, then one line per hop (offset from the trace's
    first event, sender -> receiver, message type, mailbox time), state events under their hop.
    """
    offsets = [f"+{_ms(span.sent_ms - trace.first_ms)}ms" for _depth, span in trace.walk()]
    width = max((len(o) for o in offsets), default=7)
    blank = " " * width
    lines = [describe(trace)]
    for offset, (depth, span) in zip(offsets, trace.walk(), strict=True):
        indent = "  " * depth
        mark = f"[orphan: parent {span.parent_span_id} not in log] " if span.orphan else ""
        sender = span.sender or OUTSIDE
        lines.append(
            f"{offset:>{width}}  {indent}{mark}{sender} -> {span.receiver}  {span.msg_type}"
            f"  ({_hop_status(span)})"
        )
        for state in span.events:
            lines.append(f"{blank}  {indent}  · {_state_text(state, span.receiver)}")
            if state.completed_by is not None:
                lines.extend(
                    f"{blank}  {indent}    {line}"
                    for line in _completion_lines(state.completed_by, trace)
                )
    for state in trace.events:
        lines.append(f"{blank}  · {_state_text(state, None)}")
        if state.completed_by is not None:
            lines.extend(
                f"{blank}    {line}" for line in _completion_lines(state.completed_by, trace)
            )
    return "\n".join(lines)


_MERMAID_RESERVED = frozenset(
    {"end", "participant", "actor", "loop", "alt", "else", "opt", "par", "and", "rect", "note"}
)


def _alias(address: str, taken: set[str]) -> str:
    """A Mermaid participant id that reads like the address: broker/2/replica-manager ->
    b2_replica_manager, client/producer-1 -> producer_1."""
    text = re.sub(r"^broker/(\d+)/", r"b\1_", address)
    text = text.removeprefix("client/")
    base = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_") or "outside"
    if not base[0].isalpha():
        base = f"a_{base}"
    if base.lower() in _MERMAID_RESERVED:
        base = f"{base}_"
    alias, n = base, 2
    while alias in taken:
        alias, n = f"{base}_{n}", n + 1
    taken.add(alias)
    return alias


def _mermaid_text(text: str, width: int = 100) -> str:
    return _clip(re.sub(r"[;#\n\r]", " ", text), width)


def _arrow(span: Span) -> str:
    reply = span.msg_type.endswith(("Response", "Result"))
    if span.recv_ms is None:
        return "--x" if reply else "-x"
    return "-->>" if reply else "->>"


def render_mermaid(trace: Trace) -> str:
    """The trace as a Mermaid `sequenceDiagram`: the actors as participants in the order they
    appear, an arrow per hop (message type and offset; dashed for answers, a cross for a hop
    never received) and a `Note over` the actor of each state event, in time order."""
    items: list[tuple[float, int, Span | StateEvent]] = []
    for _depth, span in trace.walk():
        items.append((span.sent_ms, span.seq, span))
        items.extend((state.ts_ms, state.seq, state) for state in span.events)
    items.extend((state.ts_ms, state.seq, state) for state in trace.events)
    items.sort(key=lambda item: (item[0], item[1]))

    aliases: dict[str, str] = {}
    taken: set[str] = set()
    header = [
        "sequenceDiagram",
        f"    %% {_mermaid_text(describe(trace), 200)}",
    ]
    participants: list[str] = []

    def alias(address: str) -> str:
        known = aliases.get(address)
        if known is None:
            known = aliases[address] = _alias(address, taken)
            participants.append(f"    participant {known} as {_mermaid_text(address)}")
        return known

    body: list[str] = []
    for when, _seq, item in items:
        offset = f"+{_ms(when - trace.first_ms)}ms"
        if isinstance(item, Span):
            source = alias(item.sender or OUTSIDE)
            target = alias(item.receiver)
            note = " (orphan)" if item.orphan else ""
            note += " (undeliverable)" if item.undeliverable else ""
            body.append(f"    {source}{_arrow(item)}{target}: {item.msg_type} {offset}{note}")
        else:
            where = alias(item.actor or OUTSIDE)
            fields = ", ".join(f"{k}={_value(v, 30)}" for k, v in _shown_fields(item).items())
            done = f"completed by {item.completed_by.kind} " if item.completed_by else ""
            text = _mermaid_text(f"{item.event} {offset} {done}{fields}".rstrip())
            body.append(f"    Note over {where}: {text}")
    return "\n".join([*header, *participants, *body])
