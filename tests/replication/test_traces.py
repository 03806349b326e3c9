"""Every client request leaves one connected trace, from the client's send to its receipt."""

from __future__ import annotations

from typing import Any

from kafkactor.actors.runtime import Client, addresses
from kafkactor.messages.replication import FetchPartition, FetchRequest
from kafkactor.testing import Cluster
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    fetch_one,
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
        assert {
            (producer.address, rm, "ProduceRequest"),
            (rm, leader, "AppendRecords"),
            (leader, rm, "AppendResult"),
            (rm, purgatory, "DelayOperation"),
            (purgatory, producer.address, "ProduceResponse"),
        } <= hop_names(hops)


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
