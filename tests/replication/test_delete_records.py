"""DeleteRecords (KIP-107) on in-process brokers: the leader moves its log start, the followers
follow it from their fetch answers, and the answer is the low watermark once every live replica
starts there; Kafka's refusals; a dead follower does not hold the low watermark back."""

from __future__ import annotations

import pytest

from kafkactor.messages import ErrorCode
from kafkactor.storage import LogConfig, TopicPartition
from kafkactor.testing import Cluster
from kafkactor.testing.records_deletion import DeleteRecordsError
from tests.replication.support import WAIT_S, wait_until

pytestmark = pytest.mark.timeout(60)

TOPIC = "trimmed"


def produce(cluster: Cluster, topic: str, count: int) -> None:
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    values = [f"v{i}".encode() for i in range(count)]
    producer.send_batch(topic, values, partition=0).result(WAIT_S)
    producer.close()


def test_the_low_watermark_answers_once_every_replica_starts_there(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    produce(cluster, TOPIC, 10)
    assert cluster.delete_records({(TOPIC, 0): 4}) == {TopicPartition(topic=TOPIC, partition=0): 4}
    for broker in cluster.replicas(TOPIC, 0):
        assert cluster.describe_partition(TOPIC, 0, broker=broker).log_start_offset == 4
    # -1 deletes up to the high watermark
    tp = TopicPartition(topic=TOPIC, partition=0)
    assert cluster.delete_records({tp: -1}) == {tp: 10}
    # an older offset moves nothing: the low watermark stays
    assert cluster.delete_records({tp: 2}) == {tp: 10}


def test_kafkas_refusals(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.create_topic(
        "compacted", partitions=1, replication_factor=1, config=LogConfig(cleanup_policy="compact")
    )
    produce(cluster, TOPIC, 5)
    cases = {
        (TOPIC, 0): (6, ErrorCode.OFFSET_OUT_OF_RANGE),
        ("compacted", 0): (0, ErrorCode.POLICY_VIOLATION),
        ("nowhere", 0): (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    }
    for key, (offset, code) in cases.items():
        with pytest.raises(DeleteRecordsError) as refused:
            cluster.delete_records({key: offset})
        assert refused.value.error_code is code, key
    assert cluster.describe_partition(TOPIC, 0).log_start_offset == 0


def test_a_dead_follower_does_not_hold_the_low_watermark_back(sticky_cluster: Cluster) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    produce(cluster, TOPIC, 10)
    leader = cluster.leader(TOPIC, 0)
    follower = next(b for b in cluster.replicas(TOPIC, 0) if b != leader)
    cluster.kill_broker(follower)  # the harness tells the live brokers it is gone
    tp = TopicPartition(topic=TOPIC, partition=0)
    assert cluster.delete_records({tp: 6}, timeout_ms=5_000) == {tp: 6}
    cluster.restart_broker(follower)
    wait_until(
        lambda: cluster.describe_partition(TOPIC, 0, broker=follower).log_start_offset == 6,
        message="the restarted follower takes its leader's log start",
    )


def test_a_live_follower_that_does_not_fetch_times_the_request_out(
    sticky_cluster: Cluster,
) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    produce(cluster, TOPIC, 10)
    leader = cluster.leader(TOPIC, 0)
    follower = next(b for b in cluster.replicas(TOPIC, 0) if b != leader)
    cluster.isolate_broker(follower)  # alive for the metadata, but its fetches are lost
    tp = TopicPartition(topic=TOPIC, partition=0)
    with pytest.raises(DeleteRecordsError) as refused:
        cluster.delete_records({tp: 5}, timeout_ms=300)
    assert refused.value.errors == {tp: ErrorCode.REQUEST_TIMED_OUT}
    # the leader applied it all the same: its log starts there
    assert cluster.describe_partition(TOPIC, 0).log_start_offset == 5
    cluster.heal_broker(follower)
    assert cluster.delete_records({tp: 5}) == {tp: 5}  # once the follower fetched again
