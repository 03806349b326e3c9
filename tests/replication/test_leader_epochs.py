"""Leader epochs decide truncation (KIP-101, KIP-279): the epoch protocol's acceptance scenarios.

The behaviours of Kafka's EpochDrivenReplicationProtocolAcceptanceTest, on brokers in this
process. The test plays the controller (a cluster without ZooKeeper, whose leaders only move
when told): it sends LeaderAndIsr itself, so every election happens exactly where the scenario
puts it. Broker isolation stops replication traffic (fetches and OffsetsForLeaderEpoch) between
one broker and the others, so a follower can be kept from catching up or from asking.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from kafkactor.actors.replication import REPLICATION_OFFSET_CHECKPOINT
from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import PartitionLeaderState
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import LeaderAndIsr, LeaderAndIsrResponse, UpdateMetadata
from kafkactor.storage import LogConfig, iter_batches
from kafkactor.testing import Cluster
from tests.replication.support import (
    FAST,
    TOPIC,
    WAIT_S,
    EventLog,
    batch,
    fetch_one,
    log_values,
    produce_request,
    produce_results,
    values_of,
    wait_until,
)

KEY = f"{TOPIC}-0"


@pytest.fixture
def two() -> Iterator[Cluster]:
    """Two brokers, no controller: partition 0 of a topic is led by 1 and followed by 2."""
    with Cluster(2, config=FAST, zookeeper=None) as started:
        yield started


@pytest.fixture
def client(two: Cluster) -> Iterator[Client]:
    raw = Client("epochs-test", two.directory)
    yield raw
    raw.close()


def elect(cluster: Cluster, client: Client, *, leader: int, isr: tuple[int, ...]) -> int:
    """Play the controller: partition 0 gets `leader` and `isr` in the next leader epoch, told
    to every live replica (and every live broker's metadata). Returns the new epoch."""
    state = cluster.partition_states[(TOPIC, 0)]
    state = replace(state, leader=leader, isr=isr, leader_epoch=state.leader_epoch + 1)
    cluster.partition_states[(TOPIC, 0)] = state
    live = cluster.live_brokers()
    for broker in state.replicas:
        if broker not in live:
            continue
        answer = client.call(
            addresses.replica_manager(broker),
            LeaderAndIsr(
                controller_id=0,
                controller_epoch=cluster.controller_epoch,
                partition_states=(state,),
            ),
            WAIT_S,
        )
        assert isinstance(answer, LeaderAndIsrResponse), answer
        assert [p.error_code for p in answer.partitions] == [ErrorCode.NONE], answer
    for broker in live:
        client.call(
            addresses.replica_manager(broker),
            UpdateMetadata(
                controller_id=0,
                controller_epoch=cluster.controller_epoch,
                partition_states=(state,),
                live_brokers=tuple(live),
            ),
            WAIT_S,
        )
    return state.leader_epoch


def produce(client: Client, broker: int, *values: bytes, acks: int = 1) -> int:
    """Produce one batch to partition 0 on `broker`; its base offset."""
    response = client.call(
        addresses.replica_manager(broker), produce_request(acks, (TOPIC, 0, batch(*values))), WAIT_S
    )
    result = produce_results(response)[(TOPIC, 0)]
    assert result.error_code is ErrorCode.NONE, result
    return result.base_offset


def state_of(cluster: Cluster) -> PartitionLeaderState:
    return cluster.partition_states[(TOPIC, 0)]


def batches_of(cluster: Cluster, broker: int) -> list[bytes]:
    """Every record batch of broker's replica, as bytes."""
    log = cluster.brokers[broker].logs[KEY]
    data = log.read(log.log_start_offset, 64 * 1024 * 1024).records if log.log_end_offset else b""
    return [bytes(b.buffer) for b in iter_batches(data)]


def epoch_steps(events: EventLog, broker: int, since: int) -> list[dict[str, object]]:
    return [
        e
        for e in events.all()[since:]
        if e["event"] == "partition.epoch_truncation" and e["broker"] == broker
    ]


def test_kip101_scenario_1_a_restarted_follower_elected_at_once_has_every_acked_record(
    two: Cluster, client: Client, events: EventLog
) -> None:
    two.create_topic(
        TOPIC, partitions=1, replication_factor=2, config=LogConfig(min_insync_replicas=2)
    )
    acked = two.producer(acks=-1, timeout_ms=5_000).send_batch(TOPIC, [b"m0", b"m1"], partition=0)
    assert [m.offset for m in acked.result(WAIT_S)] == [0, 1]  # both replicas have both

    two.kill_broker(2)
    # the follower's last high watermark checkpoint predates both records
    (two.brokers[2].data_dir / REPLICATION_OFFSET_CHECKPOINT).unlink(missing_ok=True)
    two.isolate_broker(1)  # it cannot reach the leader: no fetch, no epoch question
    mark = len(events.all())
    two.restart_broker(2)  # follows 1 again (returns once it applied that)
    became = [e for e in events.all()[mark:] if e["event"] == "partition.become_follower"]
    assert [(e["broker"], e["log_end_offset"], e["high_watermark"]) for e in became] == [(2, 2, 0)]

    two.kill_broker(1)  # the leader dies before the follower could catch up or ask
    epoch = elect(two, client, leader=2, isr=(2,))

    # Kafka 0.9 cut the follower back to its high watermark (0) on becoming follower: both
    # acknowledged records would be gone now.
    assert log_values(two.brokers[2].logs[KEY]) == [(0, b"m0"), (1, b"m1")]
    data = fetch_one(client, 2, TOPIC, 0, 0)
    assert data.error_code is ErrorCode.NONE
    assert values_of(data.records) == [(0, b"m0"), (1, b"m1")]
    assert two.brokers[2].logs[KEY].leader_epochs[-1].epoch == epoch


def test_kip101_scenario_2_replicas_do_not_diverge_after_a_double_crash(
    two: Cluster, client: Client, events: EventLog
) -> None:
    two.create_topic(TOPIC, partitions=1, replication_factor=2)
    assert produce(client, 1, b"m0", acks=-1) == 0  # on both replicas

    # The follower stops copying and leaves the ISR; the leader takes m1 alone and, as the whole
    # ISR, commits it: its HW is 2 and a clean stop checkpoints that.
    two.isolate_broker(2)
    wait_until(
        lambda: two.describe_partition(TOPIC, 0, broker=1).isr == (1,),
        message="the isolated follower to leave the ISR",
    )
    assert produce(client, 1, b"m1-old-leader") == 1
    wait_until(
        lambda: two.describe_partition(TOPIC, 0, broker=1).high_watermark == 2,
        message="the leader's HW to pass m1",
    )
    two.stop_broker(1)
    two.kill_broker(2)
    two.heal_broker(2)

    # The follower comes back first and leads epoch 1, taking different records at offset 1.
    two.partition_states[(TOPIC, 0)] = replace(state_of(two), leader=2, isr=(2,))
    two.restart_broker(2)  # the cluster makes it lead again in the next epoch
    assert state_of(two).leader == 2
    assert produce(client, 2, b"m1-new-leader", b"m2") == 1

    # The old leader returns as a follower. Its checkpointed HW (2) covers its own m1; Kafka
    # 0.9 kept it, fetched from offset 2 and the two logs differed at offset 1 for good.
    mark = len(events.all())
    two.restart_broker(1)
    wait_until(
        lambda: two.describe_partition(TOPIC, 0, broker=1).log_end_offset == 3,
        message="the old leader to catch up",
    )
    [step] = epoch_steps(events, 1, mark)
    assert (step["asked_epoch"], step["answered_epoch"], step["offset"]) == (0, 0, 1)
    assert batches_of(two, 1) == batches_of(two, 2)
    assert log_values(two.brokers[1].logs[KEY]) == [
        (0, b"m0"),
        (1, b"m1-new-leader"),
        (2, b"m2"),
    ]


def test_kip279_successive_elections_leave_no_divergent_epoch_behind(
    two: Cluster, client: Client, events: EventLog
) -> None:
    """Leadership flips while the brokers cannot copy from each other, so each leads an epoch
    with writes the other never sees. The last follower must walk back over every epoch the
    leader does not have (one OffsetsForLeaderEpoch round per epoch), not only the last one."""
    two.create_topic(TOPIC, partitions=1, replication_factor=2)
    assert produce(client, 1, b"a0", b"a1", acks=-1) == 0  # epoch 0, on both

    two.isolate_broker(2)
    epoch1 = elect(two, client, leader=2, isr=(2,))  # broker 2 leads epoch 1 alone...
    assert produce(client, 2, b"b2", b"b3") == 2
    epoch2 = elect(two, client, leader=1, isr=(1,))  # ...1 leads epoch 2 alone...
    assert produce(client, 1, b"c2") == 2
    epoch3 = elect(two, client, leader=2, isr=(2,))  # ...2 leads epoch 3 alone...
    assert produce(client, 2, b"d4") == 4
    assert [e.epoch for e in two.brokers[2].logs[KEY].leader_epochs] == [0, epoch1, epoch3]

    mark = len(events.all())
    two.heal_broker(2)
    epoch4 = elect(two, client, leader=1, isr=(1,))  # ...and 1 leads epoch 4, with 2 following
    assert produce(client, 1, b"e3", b"e4", b"e5") == 3
    wait_until(
        lambda: two.describe_partition(TOPIC, 0, broker=2).log_end_offset == 6,
        message="broker 2 to catch up with the leader",
    )

    steps = epoch_steps(events, 2, mark)
    # asked for epoch 3: the leader's largest epoch up to 3 is 2, which broker 2 never had, so
    # it cut to the end of its epoch 1 (offset 4) and asked again; for epoch 1 the leader
    # answered "epoch 0 ends at 2", which broker 2 has: cut to 2, done.
    assert [(s["asked_epoch"], s["answered_epoch"], s["offset"], s["finished"]) for s in steps] == [
        (epoch3, epoch2, 4, False),
        (epoch1, 0, 2, True),
    ]
    assert batches_of(two, 2) == batches_of(two, 1)
    assert log_values(two.brokers[2].logs[KEY]) == [
        (0, b"a0"),
        (1, b"a1"),
        (2, b"c2"),
        (3, b"e3"),
        (4, b"e4"),
        (5, b"e5"),
    ]
    assert [e.epoch for e in two.brokers[2].logs[KEY].leader_epochs] == [0, epoch2, epoch4]


def test_an_isr_change_under_the_same_leader_does_not_touch_the_followers_log(
    two: Cluster, client: Client, events: EventLog
) -> None:
    two.create_topic(TOPIC, partitions=1, replication_factor=2)
    assert produce(client, 1, b"x0", b"x1", acks=-1) == 0
    two.isolate_broker(2)
    assert produce(client, 1, b"x2") == 2  # the follower never gets it; its HW stays low

    mark = len(events.all())
    elect(two, client, leader=1, isr=(1,))  # the controller shrinks the ISR: same leader
    elect(two, client, leader=1, isr=(1, 2))
    two.heal_broker(2)
    wait_until(
        lambda: two.describe_partition(TOPIC, 0, broker=2).log_end_offset == 3,
        message="the follower to catch up",
    )

    later = events.all()[mark:]
    assert [e for e in later if e["event"] == "partition.truncate" and e["broker"] == 2] == []
    assert epoch_steps(events, 2, mark) == []  # no truncation round at all: Kafka skips it
    assert log_values(two.brokers[2].logs[KEY]) == [(0, b"x0"), (1, b"x1"), (2, b"x2")]


def test_a_follower_behind_the_leaders_log_start_starts_over_there(events: EventLog) -> None:
    config = LogConfig(segment_bytes=200, retention_bytes=0)
    with Cluster(2, config=FAST, zookeeper=None) as cluster:
        raw = Client("raw", cluster.directory)
        try:
            cluster.create_topic(TOPIC, partitions=1, replication_factor=2, config=config)
            cluster.isolate_broker(2)
            wait_until(
                lambda: cluster.describe_partition(TOPIC, 0, broker=1).isr == (1,),
                message="the isolated follower to leave the ISR",
            )
            for i in range(12):
                produce(raw, 1, f"v{i:03d}".encode() * 8)
            leader_log = cluster.brokers[1].logs[KEY]
            assert leader_log.delete_old_segments() > 0  # retention ran on the leader
            start = leader_log.log_start_offset
            assert start > 0
            follower_log = cluster.brokers[2].logs[KEY]
            assert follower_log.log_end_offset < start  # the follower is behind it

            mark = len(events.all())
            cluster.heal_broker(2)
            wait_until(
                lambda: follower_log.log_end_offset == leader_log.log_end_offset,
                message="the follower to start over at the leader's log start and catch up",
            )
            truncations = [
                e
                for e in events.all()[mark:]
                if e["event"] == "partition.truncate" and e["broker"] == 2
            ]
            assert [t["offset"] for t in truncations] == [start]
            assert follower_log.log_start_offset == start
            fetches = [
                e
                for e in events.all()[mark:]
                if e["event"] == "fetch.response" and e["broker"] == 1 and e.get("replica_id") == 2
            ]
            assert len(fetches) < 50  # no spinning on OFFSET_OUT_OF_RANGE
        finally:
            raw.close()
