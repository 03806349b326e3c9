"""A crashed leader is replaced from its ISR; acks=all writes resume and none is lost."""

from __future__ import annotations

import time

from kafkactor.actors.controller import zk_data
from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition
from kafkactor.testing import Cluster
from tests.controller.support import (
    FAILOVER_BOUND_S,
    numbered_load,
    read_partition,
    registered_brokers,
    settled_controller,
    state_znode,
)
from tests.replication.support import MIN_ISR_2, TOPIC, WAIT_S, EventLog, log_values, wait_until

PARTITIONS = 3


def _partition_led_by_a_non_controller(cluster: Cluster) -> tuple[int, int]:
    """(partition, leader) of a partition whose leader is not the controller's broker."""
    controller = settled_controller(cluster)
    for p in range(PARTITIONS):
        leader = cluster.leader(TOPIC, p)
        if leader != controller:
            return p, leader
    raise AssertionError("the controller leads every partition")


def test_leader_crash_under_acks_all_load_loses_no_acknowledged_record(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2)
    partition, old_leader = _partition_led_by_a_non_controller(cluster)
    old_isr = cluster.isr(TOPIC, partition)
    assert sorted(old_isr) == [1, 2, 3]
    old_state, _ = state_znode(cluster, TOPIC, partition)
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)

    with numbered_load(producer, TOPIC, partition) as load:
        wait_until(lambda: len(load.acked) >= 30, message="30 acknowledged records")
        killed_at = time.monotonic()
        cluster.kill_broker(old_leader)
        new_leader = wait_until(
            lambda: (leader := cluster.leader(TOPIC, partition)) not in (old_leader, -1) and leader,
            timeout_s=FAILOVER_BOUND_S,
            message="a new leader in ZooKeeper",
        )
        failover_s = time.monotonic() - killed_at
        assert cluster.wait_for_leader(TOPIC, partition) == new_leader
        # producers resume: acknowledgements continue after the failover
        wait_until(
            lambda: load.acked_after(killed_at + failover_s) >= 30,
            message="30 acknowledgements after the failover",
        )
    acked = list(load.acked)

    assert new_leader in old_isr
    new_state, _ = state_znode(cluster, TOPIC, partition)
    assert new_state.leader_epoch > old_state.leader_epoch
    assert new_state.isr == tuple(r for r in old_isr if r != old_leader)
    assert failover_s <= FAILOVER_BOUND_S
    assert events.named(
        "controller.leader_elected",
        topic=TOPIC,
        partition=partition,
        leader=new_leader,
        previous_leader=old_leader,
    )
    # every acknowledged record is where its acknowledgement said, and none is missing
    offsets = [ack.offset for ack in acked]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), offsets
    stored = read_partition(cluster, TOPIC, partition)
    lost = [(ack.offset, ack.value) for ack in acked if stored.get(ack.offset) != ack.value]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:5]}"
    assert len(stored) == max(stored) + 1  # no gaps below the high watermark


def test_restarted_leader_rejoins_as_follower_and_catches_up(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2)
    partition, old_leader = _partition_led_by_a_non_controller(cluster)
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    for i in range(10):
        producer.send(TOPIC, f"before-{i}".encode(), partition=partition).result(WAIT_S)
    cluster.kill_broker(old_leader)
    new_leader = cluster.wait_for_leader(TOPIC, partition, not_broker=old_leader)
    for i in range(10):  # written while the old leader is down
        producer.send(TOPIC, f"during-{i}".encode(), partition=partition).result(WAIT_S)

    cluster.restart_broker(old_leader)

    wait_until(
        lambda: old_leader in cluster.isr(TOPIC, partition),
        message="the restarted broker back in the ISR in ZooKeeper",
    )
    assert cluster.leader(TOPIC, partition) == new_leader  # no leader change on its return
    leader_view = cluster.describe_partition(TOPIC, partition)
    assert old_leader in leader_view.isr
    wait_until(
        lambda: (
            cluster.describe_partition(TOPIC, partition, broker=old_leader).log_end_offset
            == cluster.describe_partition(TOPIC, partition).log_end_offset
        ),
        message="the restarted follower's log end to reach the leader's",
    )
    follower_view = cluster.describe_partition(TOPIC, partition, broker=old_leader)
    assert not follower_view.is_leader
    assert follower_view.leader == new_leader
    key = str(TopicPartition(topic=TOPIC, partition=partition))
    follower_log = cluster.brokers[old_leader].logs[key]
    leader_log = cluster.brokers[new_leader].logs[key]
    assert log_values(follower_log) == log_values(leader_log)
    assert [v for _, v in log_values(follower_log)] == [
        *(f"before-{i}".encode() for i in range(10)),
        *(f"during-{i}".encode() for i in range(10)),
    ]
    # it fetches from the new leader
    assert cluster.directory.resolve(addresses.fetcher(old_leader, new_leader)) is not None


def test_broker_whose_session_expired_once_still_fails_over_when_it_crashes(
    cluster: Cluster,
) -> None:
    """Regression (found here, fixed in f78a51d): reconnecting after an expiry left the
    registration with an orphaned client, so the broker's later crash went unnoticed."""
    controller = settled_controller(cluster)
    broker = next(b for b in (1, 2, 3) if b != controller)
    cluster.expire_session(broker)
    wait_until(lambda: registered_brokers(cluster) == [1, 2, 3], message="re-registration")
    settled_controller(cluster)
    # registered by the session the broker now uses (the one a crash stops heartbeating)
    session = cluster.brokers[broker].zookeeper
    assert session is not None
    registration = cluster._zk.exists(zk_data.broker_path(broker))
    assert registration.ephemeralOwner == session.session_id
    # a topic created now: the partition broker-1 is led by that broker
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2)
    partition = broker - 1
    assert cluster.leader(TOPIC, partition) == broker
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    acked = producer.send(TOPIC, b"before", partition=partition).result(WAIT_S)

    cluster.kill_broker(broker)

    wait_until(
        lambda: broker not in registered_brokers(cluster),
        timeout_s=FAILOVER_BOUND_S,
        message="the crashed broker's registration to expire",
    )
    new_leader = cluster.wait_for_leader(TOPIC, partition, not_broker=broker)
    assert new_leader != broker
    assert producer.send(TOPIC, b"after", partition=partition).result(WAIT_S).offset == 1
    assert read_partition(cluster, TOPIC, partition)[acked.offset] == b"before"
