"""`kafkactor trace`: each request's causal tree, rebuilt from the spans of an event log.

Every hop logs `msg.send` (by the sender) and `msg.recv` (by the receiver) with the same
`span_id`; a hop made while handling a message has that message's span as `parent_span_id`, and
a request's first hop (the client's send) has none. State events (`partition.*`,
`purgatory.*`, ...) carry the `parent_span_id` of the message being handled when they happened.
So one `trace_id` is a tree of spans with state events hanging under them.

A request that waited in a purgatory was ended by something that happened in another span, most
often of another trace (a follower's fetch that moved the high watermark, an ISR shrink, the
Reaper's expiry): its response event names it (`completed_by`, `completed_by_trace_id`,
`completed_by_span_id`), and the tree shows "completed by ..." under it, with the first line of
that trace and the hop of that span when they are in the traces built.

The functions here are pure over parsed events, in three steps:

- `iter_events(lines, report)`: JSON objects from raw lines, reading past damage; a torn last
  line (a killed writer) and garbage lines are counted in the `ReadReport`, never raised;
- `build_traces(events)`: the traces, one `Trace` of `Span`s each, orphans (spans whose parent
  is not in the log) attached under the root with a marker;
- `select_traces`, then `render_summary`, `render_tree` or `render_mermaid` for the output.

Only hops and events with a `trace_id` are kept, in compact objects: the 12 s demo's log
(about 480,000 lines, 130 MB) is read in about 3 s in about 200 MB.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import orjson

__all__ = [
    "Completion",
    "ReadReport",
    "Span",
    "StateEvent",
    "Trace",
    "build_traces",
    "describe",
    "iter_events",
    "kind_counts",
    "matches_request",
    "no_match_message",
    "render_mermaid",
    "render_summary",
    "render_tree",
    "request_kind",
    "select_traces",
]

SUMMARY_LIMIT = 20  # the summary table lists this many of the slowest traces
OUTSIDE = "(outside)"  # the sender of a message told from outside the actor system
MAX_WARNED_LINES = 10  # bad lines warned about one by one; the rest are only counted

# Fields every event of an actor carries: not repeated in a state event's details.
_COMMON_FIELDS = frozenset(
    {"event", "ts_ms", "schema", "level", "actor", "broker", "trace_id", "parent_span_id"}
)
_KNOWN_KINDS = {"ProduceRequest": "produce", "FetchRequest": "fetch"}
# The fields of a response event that name what completed its wait (shown as their own line).
_COMPLETED_BY = "completed_by"
_COMPLETED_BY_TRACE = "completed_by_trace_id"
_COMPLETED_BY_SPAN = "completed_by_span_id"
_COMPLETED_BY_FIELDS = frozenset({_COMPLETED_BY, _COMPLETED_BY_TRACE, _COMPLETED_BY_SPAN})


# -- reading -------------------------------------------------------------------------------------


@dataclass(slots=True)
class ReadReport:
    """What reading a log ran into: lines read, unreadable lines, a torn last line."""

    lines: int = 0
    events: int = 0
    bad_count: int = 0  # lines that are not JSON objects, before the last line
    bad_lines: list[int] = field(default_factory=list)  # the first MAX_WARNED_LINES of them
    truncated_line: int | None = None  # the last line, when it is not a JSON object
    read_error: str | None = None  # the stream failed here (the log is read up to it)
    malformed: int = 0  # hops and events with a trace_id whose fields have the wrong types

    def warnings(self) -> list[str]:
        """One message per damage found (at most `MAX_WARNED_LINES` bad lines one by one)."""
        messages = [f"line {number} is not a JSON object; ignored" for number in self.bad_lines]
        if self.bad_count:
            more = self.bad_count - len(self.bad_lines)
            messages.append(
                f"{self.bad_count} unreadable line{_s(self.bad_count)} ignored"
                + (f" ({more} more not listed)" if more > 0 else "")
            )
        if self.malformed:
            messages.append(
                f"{self.malformed} event{_s(self.malformed)} with missing or mistyped trace "
                "fields ignored"
            )
        if self.truncated_line is not None:
            messages.append(f"truncated last line {self.truncated_line} ignored")
        if self.read_error is not None:
            messages.append(f"read error after line {self.lines}: {self.read_error}")
        return messages


def iter_events(
    lines: Iterable[bytes | str], report: ReadReport | None = None
) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines log, in order, reading past damage.

    Blank lines are skipped. A line that is not a JSON object is counted in `report` (as
    `truncated_line` when no readable line follows it: a write torn by a killed process) and
    skipped; an I/O error ends the log where it happened. Nothing is raised for bad input.
    """
    report = report if report is not None else ReadReport()
    pending: int | None = None  # a bad line: torn last line, or garbage if anything follows
    source = iter(lines)
    number = 0
    while True:
        try:
            raw = next(source)
        except StopIteration:
            break
        except (OSError, ValueError) as error:  # an unreadable file, a closed stream
            report.read_error = str(error) or type(error).__name__
            break
        number += 1
        report.lines = number
        if not raw.strip():
            continue
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            event = None
        if pending is not None:
            report.bad_count += 1
            if len(report.bad_lines) < MAX_WARNED_LINES:
                report.bad_lines.append(pending)
            pending = None
        if not isinstance(event, dict):
            pending = number
            continue
        report.events += 1
        yield event
    if pending is not None:
        report.truncated_line = pending


# -- the model -----------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Completion:
    """What ended a request's wait, as its response event names it: a kind of event
    (`high_watermark`, `isr_shrink`, `append`, `leadership`, `expired`, ...) and the span it
    happened in. `trace` and `span` are that span's trace and hop when they were built too."""

    kind: str
    trace_id: str
    span_id: str
    trace: Trace | None = None
    span: Span | None = None


@dataclass(slots=True, eq=False)
class StateEvent:
    """A state change logged while an actor handled a message (`partition.append`, ...)."""

    event: str
    actor: str
    ts_ms: float
    parent_span_id: str
    fields: dict[str, Any]
    seq: int = 0  # position in the log
    orphan: bool = False  # its span is not in the log: attached to the trace's root instead
    completed_by: Completion | None = None  # a response's: what completed the request's wait


@dataclass(slots=True, eq=False)
class Span:
    """One hop: a message from `sender` to `receiver`, and what happened while handling it.

    `sent_ms` is the send's timestamp (from the receipt, less its mailbox time, when the send
    is not in the log); `recv_ms` and `mailbox_ms` are None when nobody logged receiving it.
    """

    span_id: str
    parent_span_id: str
    msg_type: str
    sender: str
    receiver: str
    sent_ms: float
    recv_ms: float | None = None
    mailbox_ms: float | None = None
    children: list[Span] = field(default_factory=list)
    events: list[StateEvent] = field(default_factory=list)
    orphan: bool = False  # its parent is not in the log: attached under the root instead
    send_logged: bool = False
    undeliverable: bool = False  # the sender logged `msg.undeliverable` for it
    seq: int = 0  # position in the log of its first event

    @property
    def received(self) -> bool:
        return self.recv_ms is not None


@dataclass(slots=True, eq=False)
class Trace:
    """One request's causal tree.

    `roots` are the spans with no parent (normally one: the client's request) and, when none
    is in the log, the orphans instead. `start_ms` is the root's send (the first event when
    there is no root), `end_ms` the last event, `first_ms` the earliest event (offsets are
    relative to it). `events` holds state events of a trace that has no span at all.
    """

    trace_id: str
    roots: list[Span]
    kind: str
    root_msg_type: str
    start_ms: float
    end_ms: float
    first_ms: float
    hops: int
    actors: list[str]
    events: list[StateEvent] = field(default_factory=list)
    orphans: int = 0
    unreceived: int = 0

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms

    def walk(self) -> Iterator[tuple[int, Span]]:
        """Every span depth first, children in the order they were sent, with its depth."""
        stack = [(0, root) for root in reversed(self.roots)]
        while stack:
            depth, span = stack.pop()
            yield depth, span
            stack.extend((depth + 1, child) for child in reversed(span.children))


def request_kind(msg_type: str) -> str:
    """Kafka's name of a request: ProduceRequest -> "produce", MetadataRequest -> "metadata",
    others by their name in kebab case (StandForElection -> "stand-for-election")."""
    known = _KNOWN_KINDS.get(msg_type)
    if known is not None:
        return known
    name = msg_type.removesuffix("Request") or msg_type
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def _normalized(name: str) -> str:
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    return squashed.removesuffix("request") or squashed


def matches_request(trace: Trace, request: str) -> bool:
    """Whether `trace` is a request of this kind: Kafka's name ("produce", "fetch", any case,
    "leader_and_isr" or "leader-and-isr") or the message type name ("ProduceRequest")."""
    wanted = _normalized(request)
    return wanted in (_normalized(trace.kind), _normalized(trace.root_msg_type))


# -- building ------------------------------------------------------------------------------------


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
            fields = {k: v for k, v in event.items() if k not in _COMMON_FIELDS}
            state = StateEvent(name, self._share(actor), ts, parent, fields, seq)
            if _COMPLETED_BY_TRACE in fields:
                state.completed_by = self._completion(fields)
            parts.events.append(state)

    def _completion(self, fields: Mapping[str, Any]) -> Completion | None:
        kind = fields.get(_COMPLETED_BY)
        trace_id = fields.get(_COMPLETED_BY_TRACE)
        span_id = fields.get(_COMPLETED_BY_SPAN, "")
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
        kind=request_kind(true_root.msg_type) if true_root is not None else "unknown",
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
    return f"{what} in {source}; it has {len(traces)} trace{_s(len(traces))}: {found}"


# -- rendering -----------------------------------------------------------------------------------


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _ms(value: float) -> str:
    return f"{value:.1f}"


def _status(trace: Trace) -> str:
    notes = []
    if trace.unreceived:
        notes.append(f"{trace.unreceived} unreceived")
    if trace.orphans:
        notes.append(f"{trace.orphans} orphan{_s(trace.orphans)}")
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
        f"{trace.hops} hop{_s(trace.hops)}  {len(trace.actors)} actor{_s(len(trace.actors))}"
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
    return {k: v for k, v in state.fields.items() if k not in _COMPLETED_BY_FIELDS}


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
