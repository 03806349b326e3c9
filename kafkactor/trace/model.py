"""The model of a trace: spans (one message hop each), state events, completions."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

SUMMARY_LIMIT = 20  # the summary table lists this many of the slowest traces
OUTSIDE = "(outside)"  # the sender of a message told from outside the actor system

# Fields every event of an actor carries: not repeated in a state event's details.
COMMON_FIELDS = frozenset(
    {"event", "ts_ms", "schema", "level", "actor", "broker", "trace_id", "parent_span_id"}
)
_KNOWN_KINDS = {"ProduceRequest": "produce", "FetchRequest": "fetch"}
# The fields of a response event that name what completed its wait (shown as their own line).
COMPLETED_BY = "completed_by"
COMPLETED_BY_TRACE = "completed_by_trace_id"
COMPLETED_BY_SPAN = "completed_by_span_id"
COMPLETED_BY_FIELDS = frozenset({COMPLETED_BY, COMPLETED_BY_TRACE, COMPLETED_BY_SPAN})


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


def plural_s(n: int) -> str:
    return "" if n == 1 else "s"
