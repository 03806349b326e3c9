"""Brokers that crash or stop come back: truncation, catch-up, ISR, HW checkpoint, data kept."""

from __future__ import annotations

from typing import Any

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.replication import REPLICATION_OFFSET_CHECKPOINT, ReplicaManagerConfig
from kafkactor.storage import LogConfig, OffsetCheckpoint, TopicPartition
from kafkactor.testing import Cluster
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    log_values,
    wait_until,
)

KEY = f"{TOPIC}-0"


def wait_for_log_end(cluster: Cluster, broker: int, log_end_offset: int) -> None:
    wait_until(
        lambda: (
            cluster.describe_partition(TOPIC, 0, broker=broker).log_end_offset == log_end_offset
        ),
        message=f"broker {broker}'s replica to reach log end {log_end_offset}",
    )


def test_killed_follower_restarts_keeps_its_log_catches_up_and_rejoins_the_isr(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    first = [f"a{i}".encode() for i in range(5)]
    assert [m.offset for m in producer.send_batch(TOPIC, first, partition=0).result(WAIT_S)] == [
        0,
        1,
        2,
        3,
        4,
    ]
    assert cluster.describe_partition(TOPIC, 0, broker=3).log_end_offset == 5

    cluster.kill_broker(3)
    second = [f"b{i}".encode() for i in range(5, 10)]
    acked = producer.send_batch(TOPIC, second, partition=0).result(WAIT_S)  # after the shrink
    assert [m.offset for m in acked] == [5, 6, 7, 8, 9]
    assert cluster.describe_partition(TOPIC, 0).isr == (1, 2)
    mark = len(events.all())

    cluster.restart_broker(3)

    # It kept its whole log: the leader's epochs say all five records are the leader's too
    # (KIP-101). Kafka 0.9 cut it back to its high watermark, the last one checkpointed (a
    # crash writes none), and lost what a later election would have needed.
    became = [e for e in events.all()[mark:] if e["event"] == "partition.become_follower"]
    assert [(e["broker"], e["log_end_offset"]) for e in became] == [(3, 5)]

    def steps() -> list[dict[str, Any]]:
        return [
            e
            for e in events.all()[mark:]
            if e["event"] == "partition.epoch_truncation" and e["broker"] == 3
        ]

    wait_until(lambda: steps() != [], message="the restarted follower to ask where its epoch ends")
    [step] = steps()
    assert (step["asked_epoch"], step["answered_epoch"], step["offset"]) == (0, 0, 5)
    assert step["finished"] is True
    assert not [
        e for e in events.all()[mark:] if e["event"] == "partition.truncate" and e["broker"] == 3
    ]
    # ... catches up with the leader ...
    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0, broker=3).log_end_offset == 10,
        message="the restarted follower to catch up",
    )
    # ... and rejoins the ISR.
    wait_until(
        lambda: set(cluster.describe_partition(TOPIC, 0).isr) == {1, 2, 3},
        message="the restarted follower to rejoin the ISR",
    )
    expansions = events.named("partition.isr_expand", broker=1, replica=3)
    assert [sorted(e["isr"]) for e in expansions] == [[1, 2, 3]]

    # Every acknowledged record is on the restarted broker's log, at its offset.
    expected = list(enumerate(first + second))
    assert log_values(cluster.brokers[3].logs[KEY]) == expected
    # As an ISR member again it holds up acks=all until it has the record.
    metadata = producer.send(TOPIC, b"c10").result(WAIT_S)
    assert metadata.offset == 10
    assert dict(cluster.describe_partition(TOPIC, 0).follower_log_end_offsets)[3] >= 11
    assert log_values(cluster.brokers[3].logs[KEY])[-1] == (10, b"c10")


def test_clean_stop_checkpoints_the_high_watermark_and_restart_keeps_the_log(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    values = [f"v{i}".encode() for i in range(4)]
    producer.send_batch(TOPIC, values, partition=0).result(WAIT_S)
    wait_until(  # a follower learns the leader's HW on its next fetch
        lambda: cluster.describe_partition(TOPIC, 0, broker=2).high_watermark == 4,
        message="follower 2 to learn the high watermark",
    )

    cluster.stop_broker(2)

    checkpoint = OffsetCheckpoint(cluster.brokers[2].data_dir / REPLICATION_OFFSET_CHECKPOINT)
    assert checkpoint.read() == {TopicPartition(topic=TOPIC, partition=0): 4}
    mark = len(events.all())

    cluster.restart_broker(2)

    became = [e for e in events.all()[mark:] if e["event"] == "partition.become_follower"]
    assert [(e["broker"], e["log_end_offset"], e["high_watermark"]) for e in became] == [(2, 4, 4)]
    assert not [e for e in events.all()[mark:] if e["event"] == "partition.truncate"]
    assert cluster.describe_partition(TOPIC, 0, broker=2).log_end_offset == 4
    assert log_values(cluster.brokers[2].logs[KEY]) == list(enumerate(values))
    wait_until(
        lambda: set(cluster.describe_partition(TOPIC, 0).isr) == {1, 2, 3},
        message="the restarted follower to be in the ISR",
    )
    assert producer.send(TOPIC, b"v4").result(WAIT_S).offset == 4
    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0, broker=2).log_end_offset == 5,
        message="the restarted follower to replicate a new record",
    )


def test_restarted_leader_leads_again_and_keeps_every_acknowledged_record(
    cluster: Cluster, events: EventLog
) -> None:
    small_segments = LogConfig(min_insync_replicas=2, segment_bytes=300)  # several segments
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=small_segments)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    values = [f"r{i}".encode() for i in range(12)]
    for i, value in enumerate(values):
        assert producer.send(TOPIC, value).result(WAIT_S).offset == i

    cluster.kill_broker(1)
    cluster.restart_broker(1)

    described = cluster.describe_partition(TOPIC, 0)
    assert (described.is_leader, described.leader_epoch, described.log_end_offset) == (
        True,
        1,
        12,
    )
    assert [e["broker"] for e in events.named("partition.become_leader", leader_epoch=1)] == [1]
    consumer = cluster.consumer(max_wait_ms=200)
    consumer.assign([(TOPIC, 0)])
    got: list[tuple[int, bytes | None]] = []

    def all_read() -> bool:
        got.extend((r.offset, r.value) for r in consumer.poll(200))
        return len(got) >= len(values)

    wait_until(all_read, message="every acknowledged record from the restarted leader")
    assert got == list(enumerate(values))
    assert producer.send(TOPIC, b"r12").result(WAIT_S).offset == 12
    for follower in (2, 3):
        wait_for_log_end(cluster, follower, 13)
        assert log_values(cluster.brokers[follower].logs[KEY]) == [
            *enumerate(values),
            (12, b"r12"),
        ]


def test_a_crashed_follower_truncates_only_to_its_periodically_checkpointed_hw(
    events: EventLog,
) -> None:
    config = BrokerConfig(
        replica=ReplicaManagerConfig(
            replica_lag_time_max_ms=400,
            replica_fetch_wait_max_ms=100,
            replica_fetch_backoff_ms=50,
            high_watermark_checkpoint_interval_ms=100,
        )
    )
    with Cluster(3, config=config, zookeeper=None) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
        values = [f"v{i}".encode() for i in range(4)]
        cluster.producer(acks=-1).send_batch(TOPIC, values, partition=0).result(WAIT_S)
        checkpoint = OffsetCheckpoint(cluster.brokers[3].data_dir / REPLICATION_OFFSET_CHECKPOINT)
        wait_until(
            lambda: checkpoint.read().get(TopicPartition(topic=TOPIC, partition=0)) == 4,
            message="broker 3 to checkpoint the high watermark 4",
        )

        cluster.kill_broker(3)  # a crash writes no checkpoint of its own
        mark = len(events.all())
        cluster.restart_broker(3)

        became = [e for e in events.all()[mark:] if e["event"] == "partition.become_follower"]
        assert [(e["broker"], e["log_end_offset"], e["high_watermark"]) for e in became] == [
            (3, 4, 4)
        ]
        assert not [e for e in events.all()[mark:] if e["event"] == "partition.truncate"]
        assert log_values(cluster.brokers[3].logs[KEY]) == list(enumerate(values))


def test_restarted_leader_does_not_wait_for_a_follower_that_is_still_down(
    sticky_cluster: Cluster,
) -> None:
    cluster = sticky_cluster  # a silent follower leaves the ISR only after 10 s
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    values = [b"c0", b"c1", b"c2"]
    cluster.producer(acks=-1).send_batch(TOPIC, values, partition=0).result(WAIT_S)
    cluster.kill_broker(3)  # a follower goes down ...
    cluster.kill_broker(1)  # ... then the leader, which comes back
    cluster.restart_broker(1)

    assert 3 not in cluster.describe_partition(TOPIC, 0).isr
    consumer = cluster.consumer(max_wait_ms=200)
    consumer.assign([(TOPIC, 0)])
    got: list[bytes | None] = []

    def committed_read() -> bool:
        got.extend(r.value for r in consumer.poll(200))
        return len(got) >= len(values)

    wait_until(committed_read, 2.0, message="the committed records from the returned leader")
    assert got == values
    assert cluster.producer(acks=-1, timeout_ms=2_000).send(TOPIC, b"c3").result(WAIT_S).offset == 3
