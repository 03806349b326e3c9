"""An idle cluster, as its followers and producers see it: idle followers' fetches, answered
empty at their max wait from the partitions' snapshots (no log read), keep them in the ISR for
as long as the cluster stays idle, and the next record completes the waiting fetches, reaches
every follower and moves the high watermark (docs/replication.md, "Fetch")."""

from __future__ import annotations

import pytest

from kafkactor.testing import Cluster
from tests.replication.support import FAST, MIN_ISR_2, TOPIC, WAIT_S, EventLog, wait_until

pytestmark = pytest.mark.timeout(30)

PARTITIONS = 3  # one led by each broker
LAG_MS = FAST.replica.replica_lag_time_max_ms
FETCH_WAIT_MS = FAST.replica.replica_fetch_wait_max_ms


def idle_fetches_answered(events: EventLog, since: int, leader: int, follower: int) -> int:
    """How many of `follower`'s fetches `leader`'s fetch purgatory answered at their max wait,
    with nothing read, since event number `since`."""
    return sum(
        1
        for e in events.all()[since:]
        if e["event"] == "fetch.response"
        and e.get("broker") == leader
        and e.get("replica_id") == follower
        and e.get("outcome") == "expired"
        and e.get("bytes") == 0
    )


def test_idle_followers_stay_in_the_isr_and_the_next_record_reaches_them(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    for p in range(PARTITIONS):
        assert producer.send(TOPIC, b"first", partition=p).result(WAIT_S).offset == 0
    idle_from = len(events.all())

    # idle for three lag limits' worth of long polls, from every follower to every leader
    enough = 3 * LAG_MS // FETCH_WAIT_MS
    pairs = [(leader, f) for leader in (1, 2, 3) for f in (1, 2, 3) if f != leader]
    wait_until(
        lambda: all(idle_fetches_answered(events, idle_from, *pair) >= enough for pair in pairs),
        message=f"{enough} idle fetches answered per follower and leader",
    )

    assert [e for e in events.all()[idle_from:] if e["event"] == "partition.isr_shrink"] == []
    for p in range(PARTITIONS):
        described = cluster.describe_partition(TOPIC, p)
        assert (sorted(described.isr), described.high_watermark) == ([1, 2, 3], 1)

    for p in range(PARTITIONS):  # acks=all: every follower must fetch it
        assert producer.send(TOPIC, b"second", partition=p).result(WAIT_S).offset == 1
    for p in range(PARTITIONS):
        described = cluster.describe_partition(TOPIC, p)
        assert (sorted(described.isr), described.high_watermark) == ([1, 2, 3], 2)
