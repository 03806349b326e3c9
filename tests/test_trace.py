"""`kafkactor trace`: causal trees from the spans of an event log.

The pure functions run on hand-written events (a trace's shape, orphans, cycles, selection,
durations, the Mermaid form); the command runs on the log of a real cluster doing an acks=all
produce and a consumer poll, whole, torn at the end, and with garbage in the middle.
"""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kafkactor import Cluster, tracing
from kafkactor.cli import main
from kafkactor.storage import LogConfig
from kafkactor.trace import (
    ReadReport,
    Trace,
    build_traces,
    iter_events,
    matches_request,
    no_match_message,
    render_mermaid,
    render_summary,
    render_tree,
    request_kind,
    select_traces,
)
from tests.replication.support import FAST, WAIT_S, wait_until

pytestmark = pytest.mark.timeout(60)

CLIENT = "client/producer-1"
RM = "broker/1/replica-manager"
LEADER = "broker/1/partition/events-0"
FETCH_PURGATORY = "broker/1/purgatory/fetch"
PRODUCE_PURGATORY = "broker/1/purgatory/produce"
ARROW = re.compile(r"^\s+\S+(->>|-->>|-x|--x)\S+: ")


# -- hand-written events ---------------------------------------------------------------------------


def send(  # noqa: PLR0917 - a hop reads as a row of a table
    span: str, parent: str, sender: str, to: str, msg_type: str, ts: int, trace: str = "t1"
) -> dict[str, Any]:
    return {
        "actor": sender,
        "broker": None,
        "to": to,
        "msg_type": msg_type,
        "trace_id": trace,
        "span_id": span,
        "parent_span_id": parent,
        "ts_ms": ts,
        "event": "msg.send",
        "level": "info",
        "schema": 1,
    }


def recv(  # noqa: PLR0917 - a hop reads as a row of a table
    span: str, parent: str, sender: str, actor: str, msg_type: str, sent: int, ts: int,
    trace: str = "t1",
) -> dict[str, Any]:  # fmt: skip
    return {
        "actor": actor,
        "broker": None,
        "sender": sender,
        "msg_type": msg_type,
        "trace_id": trace,
        "span_id": span,
        "parent_span_id": parent,
        "mailbox_ms": ts - sent,
        "ts_ms": ts,
        "event": "msg.recv",
        "level": "info",
        "schema": 1,
    }


def hop(  # noqa: PLR0917 - a hop reads as a row of a table
    span: str,
    parent: str,
    sender: str,
    receiver: str,
    msg_type: str,
    sent: int,
    received: int | None,
    trace: str = "t1",
) -> list[dict[str, Any]]:
    """The send and (unless `received` is None) the receipt of one message."""
    events = [send(span, parent, sender, receiver, msg_type, sent, trace)]
    if received is not None:
        events.append(recv(span, parent, sender, receiver, msg_type, sent, received, trace))
    return events


def state(
    event: str, parent: str, actor: str, ts: int, trace: str = "t1", **fields: Any
) -> dict[str, Any]:
    return {
        "actor": actor,
        "broker": 1,
        "trace_id": trace,
        "parent_span_id": parent,
        **fields,
        "event": event,
        "level": "info",
        "ts_ms": ts,
        "schema": 1,
    }


def produce_trace(trace: str = "t1", start: int = 1_000, wait: int = 25) -> list[dict[str, Any]]:
    """An acks=all produce as the actors log it, answered `wait` ms after it was parked."""
    t, s, done = trace, start, start + 4 + wait
    return [
        *hop("s1", "", CLIENT, RM, "ProduceRequest", s, s + 1, t),
        *hop("s2", "s1", RM, LEADER, "AppendRecords", s + 1, s + 2, t),
        state("partition.append", "s2", LEADER, s + 2, t, topic="events", partition=0),
        *hop("s3", "s2", LEADER, FETCH_PURGATORY, "LogEndOffsetAdvanced", s + 2, s + 4, t),
        *hop("s4", "s2", LEADER, RM, "AppendResult", s + 3, s + 3, t),
        *hop("s5", "s4", RM, PRODUCE_PURGATORY, "DelayOperation", s + 3, s + 4, t),
        *hop("s6", "s5", PRODUCE_PURGATORY, CLIENT, "ProduceResponse", done, done, t),
    ]  # fmt: skip


def only(traces: list[Trace]) -> Trace:
    assert len(traces) == 1, [t.trace_id for t in traces]
    return traces[0]


def shape(trace: Trace) -> list[tuple[int, str, str, str]]:
    return [(depth, s.sender, s.receiver, s.msg_type) for depth, s in trace.walk()]


def lines_of(events: list[dict[str, Any]]) -> list[bytes]:
    return [orjson.dumps(e) + b"\n" for e in events]


# -- reading ---------------------------------------------------------------------------------------


def test_reading_skips_blank_lines_and_counts_garbage_in_the_middle() -> None:
    good = lines_of(produce_trace())
    report = ReadReport()
    events = list(
        iter_events([good[0], b"\n", b"not json\n", b"[1, 2]\n", b"\x00\x00\n", *good[1:]], report)
    )
    assert events == produce_trace()
    assert (report.bad_count, report.bad_lines) == (3, [3, 4, 5])
    assert report.truncated_line is None
    assert "3 unreadable lines ignored" in report.warnings()
    assert "line 3 is not a JSON object; ignored" in report.warnings()


def test_a_torn_last_line_is_reported_as_truncated_not_as_garbage() -> None:
    good = lines_of(produce_trace())
    torn = good[-1][: len(good[-1]) // 2]
    report = ReadReport()
    events = list(iter_events([*good[:-1], torn], report))
    assert len(events) == len(good) - 1
    assert report.bad_count == 0
    assert report.truncated_line == len(good)
    assert report.warnings() == [f"truncated last line {len(good)} ignored"]
    # trailing blank lines after the torn write do not make it a middle line
    report = ReadReport()
    list(iter_events([*good[:-1], torn + b"\n", b"\n", b"  \n"], report))
    assert report.truncated_line == len(good)
    assert report.bad_count == 0


def test_many_bad_lines_are_listed_up_to_a_bound_and_counted() -> None:
    report = ReadReport()
    list(iter_events([b"junk\n"] * 30 + lines_of(produce_trace()), report))
    warnings = report.warnings()
    assert report.bad_count == 30 and report.bad_lines == list(range(1, 11))
    assert sum("is not a JSON object" in w for w in warnings) == 10
    assert "30 unreadable lines ignored (20 more not listed)" in warnings


def test_a_stream_that_fails_is_read_up_to_the_failure() -> None:
    def failing() -> Iterator[bytes]:
        yield from lines_of(produce_trace())[:3]
        raise OSError("Input/output error")

    report = ReadReport()
    assert len(list(iter_events(failing(), report))) == 3
    assert report.read_error == "Input/output error"
    assert any("read error after line 3" in w for w in report.warnings())


def test_text_lines_are_read_too() -> None:
    text = [line.decode() for line in lines_of(produce_trace())]
    assert list(iter_events(text)) == produce_trace()


# -- building trees --------------------------------------------------------------------------------


def test_a_produce_trace_becomes_one_tree_with_its_state_events_under_their_hop() -> None:
    trace = only(build_traces(produce_trace()))

    assert shape(trace) == [
        (0, CLIENT, RM, "ProduceRequest"),
        (1, RM, LEADER, "AppendRecords"),
        (2, LEADER, FETCH_PURGATORY, "LogEndOffsetAdvanced"),
        (2, LEADER, RM, "AppendResult"),
        (3, RM, PRODUCE_PURGATORY, "DelayOperation"),
        (4, PRODUCE_PURGATORY, CLIENT, "ProduceResponse"),
    ]
    assert (trace.trace_id, trace.kind, trace.root_msg_type) == ("t1", "produce", "ProduceRequest")
    assert (trace.start_ms, trace.end_ms, trace.duration_ms) == (1_000, 1_029, 29)
    assert trace.hops == 6
    assert trace.actors == [CLIENT, RM, LEADER, FETCH_PURGATORY, PRODUCE_PURGATORY]
    assert (trace.orphans, trace.unreceived) == (0, 0)
    (root,) = trace.roots
    append = root.children[0]
    assert [(e.event, e.fields) for e in append.events] == [
        ("partition.append", {"topic": "events", "partition": 0})
    ]
    assert (root.sent_ms, root.recv_ms, root.mailbox_ms) == (1_000, 1_001, 1)


def test_log_order_does_not_matter_receipts_before_sends_and_traces_interleaved() -> None:
    mixed = [e for pair in zip(produce_trace("a"), produce_trace("b", 1_005), strict=True)
             for e in pair]  # fmt: skip
    shuffled = list(reversed(mixed))
    traces = {t.trace_id: t for t in build_traces(shuffled)}
    reference = only(build_traces(produce_trace()))
    assert shape(traces["a"]) == shape(traces["b"]) == shape(reference)
    assert all(s.send_logged for _d, s in traces["a"].walk())
    assert traces["b"].start_ms == 1_005


def test_children_are_ordered_by_send_time() -> None:
    events = [
        *hop("r", "", CLIENT, RM, "ProduceRequest", 0, 1),
        *hop("late", "r", RM, "x/late", "Late", 9, 10),
        *hop("early", "r", RM, "x/early", "Early", 2, 3),
    ]
    assert [s.msg_type for _d, s in only(build_traces(events)).walk()] == [
        "ProduceRequest",
        "Early",
        "Late",
    ]


def test_spans_whose_parent_is_not_in_the_log_hang_under_the_root_marked_orphan() -> None:
    events = [e for e in produce_trace() if e.get("span_id") != "s4"]  # lost: AppendResult
    events.append(state("purgatory.expire", "gone", PRODUCE_PURGATORY, 1_040, operation_id=7))
    trace = only(build_traces(events))

    assert trace.orphans == 1
    (root,) = trace.roots
    orphan = root.children[-1]
    assert (orphan.msg_type, orphan.orphan) == ("DelayOperation", True)
    assert [c.msg_type for c in orphan.children] == ["ProduceResponse"]  # its subtree is kept
    assert [(e.event, e.orphan) for e in root.events] == [("purgatory.expire", True)]
    assert trace.hops == 5 and trace.end_ms == 1_040
    tree = render_tree(trace)
    assert "[orphan: parent s4 not in log] broker/1/replica-manager -> " in tree
    assert "· [orphan] purgatory.expire @broker/1/purgatory/produce {operation_id: 7}" in tree


def test_a_trace_whose_root_was_cut_off_keeps_its_spans_as_orphan_roots() -> None:
    events = [e for e in produce_trace() if e.get("span_id") not in ("s1", "s2")]
    trace = only(build_traces(events))
    assert trace.kind == "unknown"
    assert [s.msg_type for s in trace.roots] == [
        "LogEndOffsetAdvanced",
        "AppendResult",
    ]
    assert all(s.orphan for s in trace.roots)
    assert trace.hops == 4 and trace.orphans == 2
    assert trace.start_ms == trace.first_ms == 1_002


def test_a_parent_cycle_in_a_corrupt_log_is_cut_and_no_span_is_lost() -> None:
    events = [
        *hop("r", "", CLIENT, RM, "ProduceRequest", 0, 1),
        *hop("a", "b", RM, "x/a", "A", 2, 3),
        *hop("b", "a", "x/a", "x/b", "B", 4, 5),
        *hop("c", "b", "x/b", "x/c", "C", 6, 7),
        *hop("self", "self", "x/c", "x/d", "D", 8, 9),
    ]
    trace = only(build_traces(events))
    assert sorted(s.msg_type for _d, s in trace.walk()) == ["A", "B", "C", "D", "ProduceRequest"]
    assert trace.roots[0].msg_type == "ProduceRequest"
    assert trace.orphans == 2  # the span that closed the cycle, and the one that is its own parent


def test_a_hop_never_received_and_an_undeliverable_one() -> None:
    events = [
        *hop("r", "", CLIENT, RM, "ProduceRequest", 0, 1),
        *hop("lost", "r", RM, LEADER, "AppendRecords", 2, None),
        *hop("dead", "r", RM, "broker/3/replica-manager", "UpdateMetadata", 3, None),
        {
            "actor": RM,
            "broker": 1,
            "to": "broker/3/replica-manager",
            "msg_type": "UpdateMetadata",
            "trace_id": "t1",
            "event": "msg.undeliverable",
            "level": "warning",
            "ts_ms": 3,
            "schema": 1,
        },
    ]
    trace = only(build_traces(events))
    lost, dead = trace.roots[0].children
    assert (lost.recv_ms, lost.mailbox_ms, lost.undeliverable) == (None, None, False)
    assert dead.undeliverable and not dead.received
    assert trace.unreceived == 2
    tree = render_tree(trace)
    assert "AppendRecords  (never received)" in tree
    assert "UpdateMetadata  (undeliverable)" in tree
    assert "(2 unreceived)" in tree.splitlines()[0]


def test_a_message_told_from_outside_roots_a_trace_named_after_it() -> None:
    events = [
        recv("m", "", "", RM, "MaybeShrinkIsr", 100, 100),
        *hop("p", "m", RM, LEADER, "MaybeShrinkIsr", 101, 103),
        state("partition.isr_shrink", "p", LEADER, 103, removed=[3], isr=[1, 2]),
    ]
    trace = only(build_traces(events))
    assert trace.kind == "maybe-shrink-isr"
    assert (trace.start_ms, trace.duration_ms) == (100, 3)
    assert not trace.roots[0].send_logged
    assert trace.actors == [RM, LEADER]
    tree = render_tree(trace)
    assert "(outside) -> broker/1/replica-manager  MaybeShrinkIsr" in tree
    assert "· partition.isr_shrink {removed: [3], isr: [1, 2]}" in tree


def test_events_outside_traces_and_mistyped_hops_are_left_out() -> None:
    report = ReadReport()
    bad_send = send("s9", "s1", RM, LEADER, "AppendRecords", 5)
    bad_send["span_id"] = 9
    bad_recv = recv("s8", "s1", RM, LEADER, "X", 5, 6)
    bad_recv["mailbox_ms"] = "slow"
    events = [
        {"event": "broker.start", "broker": 1, "ts_ms": 0, "schema": 1},
        {"event": "msg.send", "trace_id": "", "ts_ms": 0},
        bad_send,
        bad_recv,
        {**state("partition.append", "s2", LEADER, 5), "ts_ms": "late"},
        *produce_trace(),
    ]
    trace = only(build_traces(events, report=report))
    assert trace.hops == 6
    assert report.malformed == 3
    assert "3 events with missing or mistyped trace fields ignored" in report.warnings()


def test_only_the_trace_ids_kept_are_built() -> None:
    events = produce_trace("aaaa1") + produce_trace("bbbb2") + produce_trace("aaaa3")
    kept = build_traces(events, keep=lambda trace_id: trace_id.startswith("aaaa"))
    assert [t.trace_id for t in kept] == ["aaaa1", "aaaa3"]


# -- selecting -------------------------------------------------------------------------------------


def test_request_kinds_are_kafkas_names_and_match_any_spelling() -> None:
    assert request_kind("ProduceRequest") == "produce"
    assert request_kind("FetchRequest") == "fetch"
    assert request_kind("MetadataRequest") == "metadata"
    assert request_kind("LeaderAndIsr") == "leader-and-isr"
    assert request_kind("Request") == "request"
    trace = only(build_traces(produce_trace()))
    for spelling in ("produce", "PRODUCE", "Produce", "ProduceRequest", "produce-request"):
        assert matches_request(trace, spelling), spelling
    assert not matches_request(trace, "fetch")
    leader_and_isr = only(build_traces(hop("x", "", "c/c", RM, "LeaderAndIsr", 0, 1)))
    assert matches_request(leader_and_isr, "leader_and_isr")
    assert matches_request(leader_and_isr, "LeaderAndIsr")


def fetch_trace(trace: str, start: int, wait: int) -> list[dict[str, Any]]:
    consumer = "client/consumer-1"
    return [
        *hop("f1", "", consumer, RM, "FetchRequest", start, start, trace),
        *hop("f2", "f1", RM, FETCH_PURGATORY, "DelayOperation", start, start + 1, trace),
        *hop("f3", "f2", FETCH_PURGATORY, consumer, "FetchResponse", start + wait,
             start + wait, trace),
    ]  # fmt: skip


def mixed_traces() -> list[Trace]:
    return build_traces(
        produce_trace("p-fast", 0, wait=1)
        + produce_trace("p-slow", 10, wait=300)
        + produce_trace("p-mid", 20, wait=50)
        + fetch_trace("f-slowest", 30, wait=500)
        + fetch_trace("f-quick", 40, wait=2)
    )


def test_selection_is_slowest_first_by_kind_by_id_and_bounded() -> None:
    traces = mixed_traces()
    ids = [t.trace_id for t in select_traces(traces)]
    assert ids == ["f-slowest", "p-slow", "p-mid", "p-fast", "f-quick"]
    assert [t.trace_id for t in select_traces(traces, request="produce")] == [
        "p-slow",
        "p-mid",
        "p-fast",
    ]
    assert [t.trace_id for t in select_traces(traces, request="fetch", slowest=1)] == ["f-slowest"]
    assert [t.trace_id for t in select_traces(traces, trace_id="p-mid")] == ["p-mid"]
    assert [t.trace_id for t in select_traces(traces, trace_id="P-")] == [
        "p-slow",
        "p-mid",
        "p-fast",
    ]  # a prefix, any case
    assert select_traces(traces, trace_id="p-mid", request="fetch") == []
    assert select_traces(traces, request="metadata") == []


def test_durations_run_from_the_root_send_to_the_last_event() -> None:
    by_id = {t.trace_id: t for t in mixed_traces()}
    assert by_id["p-slow"].duration_ms == 4 + 300
    assert by_id["f-slowest"].duration_ms == 500
    # an event after the last hop (an expiry logged late) extends the trace
    events = [*produce_trace(), state("purgatory.expire", "s5", PRODUCE_PURGATORY, 1_900)]
    assert only(build_traces(events)).duration_ms == 900


def test_no_match_messages_say_what_was_missing() -> None:
    traces = mixed_traces()
    assert no_match_message(traces, source="x.jsonl", trace_id="zz") == "no trace zz in x.jsonl"
    assert (
        no_match_message(traces, source="x.jsonl", trace_id="p-mid", request="fetch")
        == "trace p-mid is produce, not fetch"
    )
    assert no_match_message(traces, source="x.jsonl", request="metadata") == (
        "no metadata trace in x.jsonl; it has 5 traces: produce 3, fetch 2"
    )
    assert no_match_message([], source="x.jsonl").startswith("no traces in x.jsonl")


# -- rendering -------------------------------------------------------------------------------------


def test_the_tree_has_one_line_per_hop_indented_by_depth_with_offsets() -> None:
    assert render_tree(only(build_traces(produce_trace()))).splitlines() == [
        "trace t1  produce  29.0ms  6 hops  5 actors",
        " +0.0ms  client/producer-1 -> broker/1/replica-manager  ProduceRequest  (mailbox 1.0ms)",
        " +1.0ms    broker/1/replica-manager -> broker/1/partition/events-0  AppendRecords"
        "  (mailbox 1.0ms)",
        "             · partition.append {topic: events, partition: 0}",
        " +2.0ms      broker/1/partition/events-0 -> broker/1/purgatory/fetch"
        "  LogEndOffsetAdvanced  (mailbox 2.0ms)",
        " +3.0ms      broker/1/partition/events-0 -> broker/1/replica-manager  AppendResult"
        "  (mailbox 0.0ms)",
        " +3.0ms        broker/1/replica-manager -> broker/1/purgatory/produce  DelayOperation"
        "  (mailbox 1.0ms)",
        "+29.0ms          broker/1/purgatory/produce -> client/producer-1  ProduceResponse"
        "  (mailbox 0.0ms)",
    ]


def test_long_state_values_are_clipped() -> None:
    events = [*produce_trace(), state("partition.x", "s2", LEADER, 1_003, blob="z" * 500)]
    tree = render_tree(only(build_traces(events)))
    (line,) = [line for line in tree.splitlines() if "partition.x" in line]
    assert "z" * 59 + "…" in line and "z" * 61 not in line


def test_the_mermaid_diagram_has_participants_an_arrow_per_hop_and_notes() -> None:
    events = [
        *produce_trace(),
        *hop("s7", "s1", RM, "broker/3/replica-manager", "UpdateMetadata", 1_005, None),
    ]
    trace = only(build_traces(events))
    diagram = render_mermaid(trace).splitlines()

    assert diagram[0] == "sequenceDiagram"
    assert diagram[1].startswith("    %% trace t1  produce")
    participants = [line.split()[1:] for line in diagram if line.startswith("    participant")]
    assert participants == [
        ["producer_1", "as", CLIENT],
        ["b1_replica_manager", "as", RM],
        ["b1_partition_events_0", "as", LEADER],
        ["b1_purgatory_fetch", "as", FETCH_PURGATORY],
        ["b1_purgatory_produce", "as", PRODUCE_PURGATORY],
        ["b3_replica_manager", "as", "broker/3/replica-manager"],
    ]
    arrows = [line for line in diagram if ARROW.match(line)]
    assert len(arrows) == trace.hops == 7
    assert arrows[0] == "    producer_1->>b1_replica_manager: ProduceRequest +0.0ms"
    assert "    b1_purgatory_produce-->>producer_1: ProduceResponse +29.0ms" in arrows
    assert "    b1_replica_manager-xb3_replica_manager: UpdateMetadata +5.0ms" in arrows
    assert (
        "    Note over b1_partition_events_0: partition.append +2.0ms topic=events, partition=0"
        in diagram
    )
    # in time order: the response comes last
    assert diagram[-1].endswith("ProduceResponse +29.0ms")


def test_mermaid_aliases_are_unique_and_never_a_keyword() -> None:
    events = [
        *hop("r", "", "client/end", "broker/1/a.b", "X", 0, 1),
        *hop("c", "r", "broker/1/a.b", "broker/1/a-b", "Y", 1, 2),
        *hop("d", "c", "broker/1/a-b", "client/9;#x", "Z", 2, 3),
    ]
    diagram = render_mermaid(only(build_traces(events)))
    participants = [line.split()[1] for line in diagram.splitlines() if "participant" in line]
    assert participants == ["end_", "b1_a_b", "b1_a_b_2", "a_9_x"]
    assert "as client/9  x" in diagram  # no ; or # reaches the diagram


def test_the_summary_lists_the_20_slowest() -> None:
    events: list[dict[str, Any]] = []
    for i in range(25):
        events += produce_trace(f"t{i:02d}", i * 100, wait=i)
    table = render_summary(build_traces(events)).splitlines()
    assert table[0].split() == [
        "TRACE",
        "ID",
        "REQUEST",
        "DURATION",
        "MS",
        "HOPS",
        "STATUS",
        "ACTORS",
    ]
    assert len(table) == 21
    assert table[1].split()[:5] == ["t24", "produce", "28.0", "6", "ok"]
    assert table[-1].split()[0] == "t05"
    assert "5: client/producer-1, broker/1/replica-manager" in table[1]


# -- what ended a wait ----------------------------------------------------------------------------

FETCHER = "broker/2/fetcher/1"
REAPER = "broker/1/reaper"


def waited_produce(**completed_by: Any) -> list[dict[str, Any]]:
    """`produce_trace` whose response, logged by the purgatory under the DelayOperation hop,
    names what completed its wait."""
    events = produce_trace()
    response = state(
        "produce.response", "s5", PRODUCE_PURGATORY, 1_029, acks=-1, waited=True, **completed_by
    )
    return [*events[:-2], response, *events[-2:]]


def follower_fetch_trace() -> list[dict[str, Any]]:
    """Trace t2: a follower's fetch whose position moved the leader's HW, which completed t1."""
    t = "t2"
    return [
        *hop("f1", "", FETCHER, RM, "FetchRequest", 1_010, 1_011, t),
        *hop("f2", "f1", RM, LEADER, "FollowerFetchPosition", 1_011, 1_012, t),
        state("partition.hw_advance", "f2", LEADER, 1_012, t, high_watermark=1),
        *hop("f3", "f2", LEADER, PRODUCE_PURGATORY, "HighWatermarkAdvanced", 1_012, 1_013, t),
        state(
            "purgatory.complete", "f3", PRODUCE_PURGATORY, 1_013, t,
            key="events-0", completed=1, completed_by="high_watermark",
        ),
    ]  # fmt: skip


BY_THE_FETCH = {
    "completed_by": "high_watermark",
    "completed_by_trace_id": "t2",
    "completed_by_span_id": "f2",
}


def after_the_response(tree: str) -> list[str]:
    """The lines of a tree from the produce.response on, stripped."""
    lines = [line.strip() for line in tree.splitlines()]
    (at,) = [i for i, line in enumerate(lines) if line.startswith("· produce.response")]
    return lines[at:]


def test_a_wait_shows_what_completed_it_the_first_line_of_its_trace_and_its_hop() -> None:
    traces = {
        t.trace_id: t
        for t in build_traces([*follower_fetch_trace(), *waited_produce(**BY_THE_FETCH)])
    }

    lines = after_the_response(render_tree(traces["t1"]))

    assert lines[:4] == [
        "· produce.response {acks: -1, waited: true}",  # the three fields have their own line
        "↳ completed by high_watermark (span f2 in trace t2)",
        "trace t2  fetch  3.0ms  3 hops  4 actors",  # the first line of t2's own tree
        f"at {RM} -> {LEADER}  FollowerFetchPosition",
    ]
    assert lines[4].endswith(f"{PRODUCE_PURGATORY} -> {CLIENT}  ProduceResponse  (mailbox 0.0ms)")
    assert render_tree(traces["t2"]).splitlines()[0] == lines[2]
    # the completing trace's own purgatory.complete names the kind, and points nowhere
    fetch_tree = render_tree(traces["t2"])
    assert "completed_by: high_watermark}" in fetch_tree
    assert "↳" not in fetch_tree


def test_without_the_completing_trace_built_only_its_ids_are_shown() -> None:
    events = [*follower_fetch_trace(), *waited_produce(**BY_THE_FETCH)]
    trace = only(build_traces(events, keep=lambda trace_id: trace_id == "t1"))

    lines = after_the_response(render_tree(trace))

    assert lines[1] == "↳ completed by high_watermark (span f2 in trace t2)"
    assert lines[2].endswith("ProduceResponse  (mailbox 0.0ms)")


def test_an_expiry_names_the_reapers_hop_in_the_same_trace_or_nothing_when_unknown() -> None:
    expired = waited_produce(
        completed_by="expired", completed_by_trace_id="t1", completed_by_span_id="x1"
    )
    expired += hop("x1", "s5", REAPER, PRODUCE_PURGATORY, "OperationsExpired", 1_028, 1_029)
    lines = after_the_response(render_tree(only(build_traces(expired))))
    assert lines[1:3] == [
        "↳ completed by expired (span x1 in this trace)",
        f"at {REAPER} -> {PRODUCE_PURGATORY}  OperationsExpired",
    ]

    unknown = waited_produce(
        completed_by="expired", completed_by_trace_id="", completed_by_span_id=""
    )
    lines = after_the_response(render_tree(only(build_traces(unknown))))
    assert lines[1] == "↳ completed by expired"
    assert lines[2].endswith("ProduceResponse  (mailbox 0.0ms)")


def test_mistyped_completion_fields_are_shown_as_they_are() -> None:
    events = waited_produce(**{**BY_THE_FETCH, "completed_by_span_id": 7})
    tree = render_tree(only(build_traces(events)))
    assert "↳" not in tree
    assert "completed_by_span_id: 7" in tree


def test_the_mermaid_note_of_a_response_says_what_completed_it() -> None:
    events = [*follower_fetch_trace(), *waited_produce(**BY_THE_FETCH)]
    traces = {t.trace_id: t for t in build_traces(events)}
    diagram = render_mermaid(traces["t1"])
    (note,) = [line for line in diagram.splitlines() if "produce.response" in line]
    assert "produce.response +29.0ms completed by high_watermark acks=-1" in note


def test_the_command_shows_what_completed_a_wait(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(lines_of([*follower_fetch_trace(), *waited_produce(**BY_THE_FETCH)])))

    code, out, err = run_trace(capsys, str(path), "--request", "produce", "--slowest", "1")

    assert (code, err) == (0, "")
    assert "↳ completed by high_watermark (span f2 in trace t2)" in out
    assert "trace t2  fetch  " in out


# -- the command on a real cluster's log -----------------------------------------------------------


@pytest.fixture(scope="module")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The event log of a 3-broker cluster: one acks=all produce, then a consumer poll."""
    path = tmp_path_factory.mktemp("trace") / "events.jsonl"
    # other test modules configure tracing too: it is put back as found
    with tracing.configured(path=path), Cluster(3, config=FAST, zookeeper=None) as cluster:
        cluster.create_topic(
            "events", replication_factor=3, config=LogConfig(min_insync_replicas=2)
        )
        producer = cluster.producer(acks=-1)
        assert producer.send("events", b"traced").result(WAIT_S).offset == 0
        consumer = cluster.consumer(max_wait_ms=200)
        consumer.assign([("events", 0)])
        wait_until(lambda: consumer.poll(200), message="the record to be consumed")
    yield path


def run_trace(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["trace", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_produce_tree_runs_from_the_client_through_the_purgatory_back_to_it(
    real_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_trace(capsys, str(real_log), "--request", "produce", "--slowest", "1")
    assert code == 0, err
    assert err == ""
    lines = out.splitlines()
    assert re.fullmatch(r"trace [0-9a-f]{16}  produce  \d+\.\dms  \d+ hops  \d+ actors", lines[0])
    client = re.search(r"(client/producer-\d+) -> ", out)
    assert client is not None
    producer = client.group(1)
    chain = [
        f"{producer} -> broker/1/replica-manager  ProduceRequest",
        "broker/1/replica-manager -> broker/1/partition/events-0  AppendRecords",
        # one partition: the partition hands the request to the purgatory itself
        "broker/1/partition/events-0 -> broker/1/purgatory/produce  DelayOperation",
        f"broker/1/purgatory/produce -> {producer}  ProduceResponse",
    ]
    depths = []
    for step in chain:
        (line,) = [line for line in lines if step in line]
        assert re.match(r"^ *\+\d+\.\dms  ", line), line
        depths.append(len(line.split("ms  ", 1)[1]) - len(line.split("ms  ", 1)[1].lstrip()))
    assert depths == sorted(depths) and len(set(depths)) == len(depths)  # each one level deeper
    assert "· partition.append {topic: events, partition: 0" in out
    assert "never received" not in out

    code, diagram, err = run_trace(
        capsys, str(real_log), "--request", "produce", "--slowest", "1", "--mermaid"
    )
    assert code == 0, err
    assert diagram.startswith("sequenceDiagram\n")
    hops = int(re.search(r"(\d+) hops", lines[0]).group(1))  # type: ignore[union-attr]
    assert sum(1 for line in diagram.splitlines() if ARROW.match(line)) == hops
    alias = producer.removeprefix("client/").replace("-", "_")
    assert f"    participant {alias} as {producer}\n" in diagram
    assert "Note over b1_partition_events_0: partition.append" in diagram


def test_the_summary_and_a_trace_by_id_on_the_real_log(
    real_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_trace(capsys, str(real_log))
    assert code == 0, err
    assert out.splitlines()[1].split()[:3] == ["TRACE", "ID", "REQUEST"]
    assert " produce " in out and " fetch " in out

    code, out, err = run_trace(capsys, str(real_log), "--request", "fetch")
    assert code == 0, err
    consumer_fetch = [line for line in out.splitlines() if "client/consumer-" in line]
    assert consumer_fetch, out
    trace_id = consumer_fetch[0].split()[0]

    code, out, err = run_trace(capsys, str(real_log), "--trace-id", trace_id[:8])
    assert code == 0, err
    assert out.startswith(f"trace {trace_id}  fetch  ")
    assert "broker/1/replica-manager  FetchRequest" in out
    assert "FetchResponse" in out


def test_a_log_torn_in_the_middle_of_a_line_is_read_up_to_the_damage(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = real_log.read_bytes()
    cut_at = data.index(b"\n", len(data) // 2) + 20  # 20 bytes into the next line
    assert b"\n" not in data[cut_at - 19 : cut_at]
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(data[:cut_at])
    last_line = data[:cut_at].count(b"\n") + 1

    code, out, err = run_trace(capsys, str(torn))
    assert code == 0
    assert f"warning: truncated last line {last_line} ignored" in err
    assert "Traceback" not in err
    assert re.search(r"^[0-9a-f]{16}  ", out, re.MULTILINE), out


def test_garbage_in_the_middle_is_skipped_with_a_count(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = real_log.read_bytes().splitlines(keepends=True)
    middle = len(lines) // 2
    garbled = tmp_path / "garbled.jsonl"
    garbled.write_bytes(
        b"".join([*lines[:middle], b"{not json\n", b"\x00\x00\x00\n", b'"text"\n', *lines[middle:]])
    )

    code, out, err = run_trace(capsys, str(garbled), "--request", "produce", "--slowest", "1")
    assert code == 0
    assert "3 unreadable lines ignored" in err
    assert f"line {middle + 1} is not a JSON object; ignored" in err
    assert "ProduceRequest" in out


def test_stdin_is_read_with_a_dash(
    real_log: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(real_log.read_bytes())))
    code, out, err = run_trace(capsys, "-", "--request", "ProduceRequest", "--mermaid")
    assert code == 0, err
    assert out.startswith("sequenceDiagram\n")


def test_exit_codes_for_no_match_a_missing_file_and_bad_usage(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_trace(capsys, str(real_log), "--request", "offset-commit")
    assert (code, out) == (1, "")
    assert "no offset-commit trace in" in err

    code, out, err = run_trace(capsys, str(real_log), "--trace-id", "ffffffffffffffffff")
    assert code == 1 and "no trace ffffffffffffffffff in" in err

    code, out, err = run_trace(capsys, str(tmp_path / "missing.jsonl"))
    assert (code, out) == (2, "")
    assert "cannot read" in err and "No such file or directory" in err

    code, out, err = run_trace(capsys, str(tmp_path))
    assert code == 2 and "cannot read" in err

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    code, out, err = run_trace(capsys, str(empty))
    assert code == 1 and "no traces in" in err

    with pytest.raises(SystemExit) as usage:
        main(["trace", str(real_log), "--slowest", "0"])
    assert usage.value.code == 2
    assert "--slowest: must be at least 1" in capsys.readouterr().err


def test_the_help_names_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["trace", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for option in ("EVENTS", "--trace-id", "--slowest", "--request", "--mermaid"):
        assert option in out


def test_the_logs_of_several_processes_are_read_as_one(
    real_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each broker process writes its own log: split by broker, given as files or a glob, the
    logs yield the same trees as the one log they were cut from."""
    by_broker: dict[str, list[bytes]] = {}
    for line in real_log.read_bytes().splitlines(keepends=True):
        broker = json.loads(line).get("broker")
        by_broker.setdefault(str(broker), []).append(line)
    assert len(by_broker) >= 3
    for broker, lines in by_broker.items():
        (tmp_path / f"broker-{broker}").mkdir()
        (tmp_path / f"broker-{broker}" / "events.jsonl").write_bytes(b"".join(lines))
    whole = run_trace(capsys, str(real_log), "--request", "ProduceRequest", "--slowest", "1")
    pattern = str(tmp_path / "broker-*" / "events.jsonl")
    globbed = run_trace(capsys, pattern, "--request", "ProduceRequest", "--slowest", "1")
    files = sorted(str(p) for p in tmp_path.glob("broker-*/events.jsonl"))
    listed = run_trace(capsys, *files, "--request", "ProduceRequest", "--slowest", "1")
    assert whole[0] == 0, whole[2]
    assert globbed == listed == whole


def test_a_glob_that_matches_nothing_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_trace(capsys, str(tmp_path / "nothing-*" / "events.jsonl"))
    assert (code, out) == (2, "")
    assert "cannot read" in err and "no event log matches" in err
