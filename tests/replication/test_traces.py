"""Every client request leaves one connected trace, from the client's send to its receipt;
a request that waited in a purgatory names the span, usually of another trace, that ended the
wait."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from kafkactor.actors.runtime import Client, addresses
from kafkactor.cli import main
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import FetchPartition, FetchRequest
from kafkactor.testing import Cluster
from kafkactor.trace import build_traces, describe, render_tree, select_traces
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    batch,
    fetch_one,
    produce_request,
    produce_results,
    values_of,
    wait_until,
)


def assert_one_connected_trace(
    events: EventLog, trace_id: str, client: str, request: str, response: str
) -> list[dict[str, Any]]:
    """The hops of `trace_id` form one tree rooted at `client`'s send of `request` and reaching
    `client`'s receipt of `response`; returns the hops."""

    def all_delivered() -> bool:  # hops still in a mailbox are logged when received
        hops = events.hops(trace_id)
        sent = {e["span_id"] for e in hops if e["event"] == "msg.send"}
        received = {e["span_id"] for e in hops if e["event"] == "msg.recv"}
        return sent == received

    wait_until(all_delivered, message=f"every hop of trace {trace_id} to be received")
    hops = events.hops(trace_id)
    sends = {e["span_id"]: e for e in hops if e["event"] == "msg.send"}
    recvs = {e["span_id"]: e for e in hops if e["event"] == "msg.recv"}
    assert len(sends) == len([e for e in hops if e["event"] == "msg.send"]), "a span sent twice"

    roots = [e for e in sends.values() if e["parent_span_id"] == ""]
    assert [(r["actor"], r["msg_type"]) for r in roots] == [(client, request)], roots
    spans = set(sends)
    orphans = [e for e in hops if e["parent_span_id"] and e["parent_span_id"] not in spans]
    assert not orphans, f"hops whose parent is not in the trace: {orphans}"
    for span_id, recv in recvs.items():  # each receipt is the receipt of that send
        send = sends[span_id]
        assert (send["to"], send["msg_type"]) == (recv["actor"], recv["msg_type"])
        assert recv["sender"] == send["actor"]
    # Every span hangs off the root: the parent links reach it without a cycle.
    for start in spans:
        span_id, seen = start, set()
        while sends[span_id]["parent_span_id"]:
            assert span_id not in seen, f"a cycle through {span_id}"
            seen.add(span_id)
            span_id = sends[span_id]["parent_span_id"]
        assert span_id == roots[0]["span_id"], f"{start} does not hang off the root"
    answers = [e for e in recvs.values() if e["actor"] == client and e["msg_type"] == response]
    assert len(answers) == 1, f"{client} received {len(answers)} {response} in the trace"
    return hops


def hop_names(hops: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(e["actor"], e["to"], e["msg_type"]) for e in hops if e["event"] == "msg.send"}


def test_acks_all_produce_leaves_one_connected_trace(cluster: Cluster, events: EventLog) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1)

    for i in range(3):
        assert producer.send(TOPIC, f"traced-{i}".encode()).result(WAIT_S).offset == i
        trace_id = events.trace_of(producer.address, "ProduceRequest")
        hops = assert_one_connected_trace(
            events, trace_id, producer.address, "ProduceRequest", "ProduceResponse"
        )
        rm, leader = addresses.replica_manager(1), f"broker/1/partition/{TOPIC}-0"
        purgatory = addresses.produce_purgatory(1)
        sent = hop_names(hops)
        # one partition: the partition hands the request to the purgatory itself, and the
        # replica manager hears nothing back
        assert {
            (producer.address, rm, "ProduceRequest"),
            (rm, leader, "AppendRecords"),
            (leader, purgatory, "DelayOperation"),
            (purgatory, producer.address, "ProduceResponse"),
        } <= sent
        assert not {hop for hop in sent if hop[1] == rm and hop[0] != producer.address}


def test_acks_1_produce_of_one_partition_is_answered_by_the_partition(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=1)

    assert producer.send(TOPIC, b"one").result(WAIT_S).offset == 0

    trace_id = events.trace_of(producer.address, "ProduceRequest")
    hops = assert_one_connected_trace(
        events, trace_id, producer.address, "ProduceRequest", "ProduceResponse"
    )
    leader = f"broker/1/partition/{TOPIC}-0"
    assert hop_names(hops) == {
        (producer.address, RM, "ProduceRequest"),
        (RM, leader, "AppendRecords"),
        (leader, addresses.fetch_purgatory(1), "LogEndOffsetAdvanced"),
        (leader, producer.address, "ProduceResponse"),
    }
    (response,) = events.named("produce.response", trace_id=trace_id)
    assert (response["actor"], response["acks"], response["outcome"]) == (leader, 1, "completed")


def test_acks_all_produce_of_two_partitions_is_gathered_by_the_replica_manager(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=6, replication_factor=3, config=MIN_ISR_2)
    client = Client("producer", cluster.directory)
    leaders = {p: cluster.leader(TOPIC, p) for p in range(6)}
    broker = leaders[0]
    mine = [p for p, leader in leaders.items() if leader == broker]
    assert len(mine) >= 2, leaders  # six partitions over three brokers
    try:
        response = client.call(
            addresses.replica_manager(broker),
            produce_request(-1, *[(TOPIC, p, batch(b"x%d" % p)) for p in mine]),
            WAIT_S,
        )
    finally:
        client.close()
    assert all(r.error_code is ErrorCode.NONE for r in produce_results(response).values())

    trace_id = events.trace_of(client.address, "ProduceRequest")
    hops = assert_one_connected_trace(
        events, trace_id, client.address, "ProduceRequest", "ProduceResponse"
    )
    rm = addresses.replica_manager(broker)
    sent = hop_names(hops)
    for p in mine:
        leader = f"broker/{broker}/partition/{TOPIC}-{p}"
        assert {(rm, leader, "AppendRecords"), (leader, rm, "AppendResult")} <= sent
    assert (rm, addresses.produce_purgatory(broker), "DelayOperation") in sent


def test_acks_all_produce_that_waits_for_an_isr_shrink_leaves_one_connected_trace(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1)
    producer.send(TOPIC, b"first").result(WAIT_S)
    cluster.kill_broker(3)

    producer.send(TOPIC, b"after-shrink").result(WAIT_S)

    trace_id = events.trace_of(producer.address, "ProduceRequest")
    assert_one_connected_trace(
        events, trace_id, producer.address, "ProduceRequest", "ProduceResponse"
    )


def test_consumer_fetches_leave_one_connected_trace_each(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    client = Client("fetcher", cluster.directory)
    rm = addresses.replica_manager(1)

    # Answered at once: the record is below the HW.
    cluster.producer(acks=-1).send(TOPIC, b"there").result(WAIT_S)
    assert values_of(fetch_one(client, 1, TOPIC, 0, 0, max_wait_ms=2_000).records) == [
        (0, b"there")
    ]
    immediate = events.trace_of(client.address, "FetchRequest")
    # Answered when its max wait passed, by the reaper's expiration.
    assert fetch_one(client, 1, TOPIC, 0, 1, max_wait_ms=100).records == b""
    expired = events.trace_of(client.address, "FetchRequest")
    # Woken by a produce while it waited.
    waiting = client.request(
        rm,
        FetchRequest(
            max_wait_ms=5_000,
            partitions=(FetchPartition(topic=TOPIC, partition=0, fetch_offset=1),),
        ),
    )
    woken = events.trace_of(client.address, "FetchRequest")
    wait_until(
        lambda: events.named(
            "msg.recv",
            actor=addresses.fetch_purgatory(1),
            msg_type="DelayOperation",
            trace_id=woken,
        ),
        message="the fetch to reach the fetch purgatory",
    )
    cluster.producer(acks=-1).send(TOPIC, b"later").result(WAIT_S)
    waiting.result(WAIT_S)

    for trace_id in (immediate, expired, woken):
        hops = assert_one_connected_trace(
            events, trace_id, client.address, "FetchRequest", "FetchResponse"
        )
        assert (rm, addresses.fetch_purgatory(1), "DelayOperation") in hop_names(hops)
    assert len({immediate, expired, woken}) == 3
    client.close()


# -- what ended a wait -------------------------------------------------------------------------

LEADER = addresses.partition(1, f"{TOPIC}-0")
RM = addresses.replica_manager(1)


def completion(events: EventLog, trace_id: str, event: str = "produce.response") -> dict[str, Any]:
    """The response event of `trace_id`, which must name what completed it."""
    (response,) = events.named(event, trace_id=trace_id)
    assert {"completed_by", "completed_by_trace_id", "completed_by_span_id"} <= response.keys(), (
        response
    )
    return response


def completing_span(
    events: EventLog, response: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The receipt of the span a response names as its completion, and the state events logged
    while that message was handled."""
    trace_id, span_id = response["completed_by_trace_id"], response["completed_by_span_id"]
    (receipt,) = events.named("msg.recv", trace_id=trace_id, span_id=span_id)
    under = [
        e
        for e in events.all()
        if e.get("trace_id") == trace_id
        and e.get("parent_span_id") == span_id
        and not e["event"].startswith("msg.")
    ]
    return receipt, under


def root_send(events: EventLog, trace_id: str) -> dict[str, Any]:
    (root,) = [
        e for e in events.hops(trace_id) if e["event"] == "msg.send" and not e["parent_span_id"]
    ]
    return root


def park_a_produce(
    cluster: Cluster, events: EventLog, client: Client, *, timeout_ms: int = 5_000
) -> tuple[Any, str]:
    """Send an acks=-1 produce to the leader (broker 1) and return once it waits in the produce
    purgatory: its future and its trace id."""
    future = client.request(
        RM, produce_request(-1, (TOPIC, 0, batch(b"waits")), timeout_ms=timeout_ms)
    )
    trace_id = events.trace_of(client.address, "ProduceRequest")
    wait_until(
        lambda: events.named(
            "purgatory.watch", actor=addresses.produce_purgatory(1), trace_id=trace_id
        ),
        message="the produce to wait in the produce purgatory",
    )
    return future, trace_id


@pytest.mark.timeout(30)
def test_a_produce_that_waited_for_a_follower_names_the_fetch_that_moved_the_hw(
    sticky_cluster: Cluster,
    events: EventLog,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = sticky_cluster  # the isolated follower stays in the ISR: the HW waits for it
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    client = Client("producer", cluster.directory)
    try:
        client.call(RM, produce_request(-1, (TOPIC, 0, batch(b"first"))), WAIT_S)
        cluster.isolate_broker(3)
        future, trace_id = park_a_produce(cluster, events, client)
        cluster.heal_broker(3)
        assert produce_results(future.result(WAIT_S))[(TOPIC, 0)].error_code is ErrorCode.NONE
    finally:
        client.close()

    response = completion(events, trace_id)
    assert (response["completed_by"], response["waited"]) == ("high_watermark", True)
    cause_trace = response["completed_by_trace_id"]
    assert cause_trace != trace_id
    # the span is the leader partition handling a follower's fetch position, and it is where
    # the HW moved past the produce's record (offset 1)
    receipt, under = completing_span(events, response)
    assert (receipt["actor"], receipt["msg_type"]) == (LEADER, "FollowerFetchPosition")
    advances = [e for e in under if e["event"] == "partition.hw_advance"]
    assert [(e["actor"], e["high_watermark"]) for e in advances] == [(LEADER, 2)]
    # ...in the trace of the healed follower's fetch: it was the last replica of the ISR
    root = root_send(events, cause_trace)
    assert (root["actor"], root["msg_type"]) == (addresses.fetcher(3, 1), "FetchRequest")

    # `kafkactor trace` shows it under the wait, with the first line of the fetch's trace
    traces = build_traces(events.all())
    (produce,) = select_traces(traces, trace_id=trace_id)
    (fetch,) = select_traces(traces, trace_id=cause_trace)
    tree = render_tree(produce).splitlines()
    (line,) = [i for i, text in enumerate(tree) if "· produce.response" in text]
    assert tree[line + 1].strip() == (
        f"↳ completed by high_watermark (span {receipt['span_id']} in trace {cause_trace})"
    )
    assert tree[line + 2].strip() == describe(fetch)
    assert tree[line + 3].strip() == f"at {RM} -> {LEADER}  FollowerFetchPosition"
    # and the command, which builds only the trace asked for, names the span
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events.all()))
    capsys.readouterr()
    assert main(["trace", str(path), "--trace-id", trace_id]) == 0
    out = capsys.readouterr().out
    assert (
        f"↳ completed by high_watermark (span {receipt['span_id']} in trace {cause_trace})" in out
    )


@pytest.mark.timeout(30)
def test_a_produce_that_waited_for_an_isr_shrink_names_the_shrink(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    client = Client("producer", cluster.directory)
    try:
        client.call(RM, produce_request(-1, (TOPIC, 0, batch(b"first"))), WAIT_S)
        cluster.kill_broker(3)  # the HW cannot pass broker 3's log end until it leaves the ISR
        future, trace_id = park_a_produce(cluster, events, client)
        assert produce_results(future.result(WAIT_S))[(TOPIC, 0)].error_code is ErrorCode.NONE
    finally:
        client.close()

    response = completion(events, trace_id)
    assert response["completed_by"] == "isr_shrink"
    receipt, under = completing_span(events, response)
    assert (receipt["actor"], receipt["msg_type"]) == (LEADER, "MaybeShrinkIsr")
    shrinks = [e for e in under if e["event"] == "partition.isr_shrink"]
    assert [(e["actor"], e["removed"], e["isr"]) for e in shrinks] == [(LEADER, [3], [1, 2])]
    assert [e["high_watermark"] for e in under if e["event"] == "partition.hw_advance"] == [2]


@pytest.mark.timeout(30)
def test_a_produce_that_timed_out_names_the_reapers_expiry(
    sticky_cluster: Cluster, events: EventLog
) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    client = Client("producer", cluster.directory)
    try:
        client.call(RM, produce_request(-1, (TOPIC, 0, batch(b"first"))), WAIT_S)
        cluster.kill_broker(3)  # dead, but in the ISR for 10 s: the produce can only time out
        future, trace_id = park_a_produce(cluster, events, client, timeout_ms=200)
        result = produce_results(future.result(WAIT_S))[(TOPIC, 0)]
        assert result.error_code is ErrorCode.REQUEST_TIMED_OUT
    finally:
        client.close()

    response = completion(events, trace_id)
    assert (response["completed_by"], response["outcome"]) == ("expired", "expired")
    # the Reaper's hop that expired it, in the produce's own trace (it expired alone)
    assert response["completed_by_trace_id"] == trace_id
    receipt, _ = completing_span(events, response)
    assert (receipt["sender"], receipt["actor"], receipt["msg_type"]) == (
        addresses.reaper(1),
        addresses.produce_purgatory(1),
        "OperationsExpired",
    )
