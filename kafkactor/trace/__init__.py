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

from kafkactor.trace.building import build_traces
from kafkactor.trace.model import (
    OUTSIDE,
    SUMMARY_LIMIT,
    Completion,
    Span,
    StateEvent,
    Trace,
    matches_request,
    request_kind,
)
from kafkactor.trace.reading import ReadReport, iter_events
from kafkactor.trace.rendering import (
    describe,
    kind_counts,
    no_match_message,
    render_mermaid,
    render_summary,
    render_tree,
    select_traces,
)

__all__ = [
    "OUTSIDE",
    "SUMMARY_LIMIT",
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
