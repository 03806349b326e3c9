"""Partition reassignment through the controller actor (KIP-455, Kafka 2.8 in ZooKeeper mode):
`Cluster.reassign_partitions` (AlterPartitionReassignments), `/admin/reassign_partitions`,
cancellation, and a new controller resuming a reassignment under way."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial

import jsonschema
import pytest
from kazoo.client import KazooClient

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.reassignment_zk import (
    REASSIGN_PARTITIONS,
    encode_reassign_partitions,
)
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.testing import Cluster, ControllerRequestError
from tests.controller.support import (
    embedded_cluster,
    numbered_load,
    read_partition,
    settled_controller,
)
from tests.replication.support import EventLog, wait_until
from tests.test_events_schema import load_schema
from tests.zk_conformance.conftest import RealServer

pytestmark = pytest.mark.timeout(120)

MIN_ISR_2 = {"min.insync.replicas": "2"}
VALIDATOR = jsonschema.Draft202012Validator(load_schema())


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Four brokers on the embedded ZooKeeper."""
    with embedded_cluster(4) as started:
        settled_controller(started)
        yield started


def holds(cluster: Cluster, broker: int, topic: str) -> bool:
    """The broker has a log of `topic`."""
    return any(tp.topic == topic for tp in cluster.brokers[broker].log_manager.all_logs())


def topic_znode(cluster: Cluster, topic: str) -> dict[str, object]:
    data, _ = cluster._zk.get(zk_data.topic_path(topic))
    found: dict[str, object] = json.loads(data)
    return found


def not_controller(cluster: Cluster, count: int) -> list[int]:
    controller = settled_controller(cluster)
    return [b for b in cluster.broker_ids if b != controller][:count]


def test_a_partition_moves_under_an_acks_all_load_and_loses_nothing(
    cluster: Cluster, events: EventLog
) -> None:
    topic = "moved"
    cluster.create_topic(topic, assignments={0: (1, 2, 3)}, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    with numbered_load(producer, topic, 0) as load:
        wait_until(lambda: len(load.acked) >= 30, message="30 acknowledged records")
        results = cluster.reassign_partitions({(topic, 0): [2, 3, 4]})
        assert results == {(topic, 0): (ErrorCode.NONE, None)}
        cluster.wait_for_reassignments([(topic, 0)])
        moved_at = time.monotonic()
        wait_until(lambda: load.acked_after(moved_at) >= 30, message="30 acks after the move")
    acked = list(load.acked)

    assert load.failed == []
    assert cluster.replicas(topic, 0) == (2, 3, 4)
    assert cluster.leader(topic, 0) == 2  # the first target replica in the ISR
    wait_until(lambda: set(cluster.isr(topic, 0)) == {2, 3, 4}, message="ISR = {2, 3, 4}")
    znode = topic_znode(cluster, topic)
    assert znode["partitions"] == {"0": [2, 3, 4]}
    assert znode["adding_replicas"] == {} and znode["removing_replicas"] == {}
    # the old replica's log is deleted from broker 1
    wait_until(lambda: not holds(cluster, 1, topic), message="broker 1's replica deleted")
    # every acknowledged record is there, and on each new replica
    stored = read_partition(cluster, topic, 0)
    lost = [(a.offset, a.value) for a in acked if stored.get(a.offset) != a.value]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    end = max(a.offset for a in acked) + 1

    def replicated(broker: int) -> bool:
        return cluster.describe_partition(topic, 0, broker=broker).log_end_offset >= end

    for broker in (2, 3, 4):
        wait_until(partial(replicated, broker), message=f"broker {broker} has every record")
    steps = events.named("controller.partition_reassignment", topic=topic)
    assert [e["phase"] for e in steps] == ["started", "completed"]
    assert steps[1]["deleted_replicas"] == [1] and steps[1]["replicas"] == [2, 3, 4]
    for event in steps:  # as kafkactor/events.schema.json describes them
        VALIDATOR.validate(event)
    assert cluster.list_partition_reassignments() == {}


def test_a_reassignment_waits_for_its_new_replica_and_can_be_cancelled(cluster: Cluster) -> None:
    topic = "cancelled"
    cluster.create_topic(topic, assignments={0: (1, 2, 3)})
    producer = cluster.producer(acks=-1)
    for i in range(5):
        producer.send(topic, f"r{i}".encode(), partition=0).result(10)
    cluster.isolate_broker(4)  # live, but its fetches never arrive: it never catches up
    try:
        assert cluster.reassign_partitions({(topic, 0): [2, 3, 4]}) == {
            (topic, 0): (ErrorCode.NONE, None)
        }
        listed = cluster.list_partition_reassignments()
        assert listed == {
            (topic, 0): {
                "replicas": (2, 3, 4, 1),
                "adding_replicas": (4,),
                "removing_replicas": (1,),
            }
        }
        assert cluster.list_partition_reassignments([(topic, 0), ("nope", 0)]) == listed
        znode = topic_znode(cluster, topic)
        # Kafka 2.8's TopicZNode (version 3: the topic id is kept by the rewrite)
        assert znode["version"] == 3 and znode["partitions"] == {"0": [2, 3, 4, 1]}
        assert "topic_id" in znode
        assert znode["adding_replicas"] == {"0": [4]}
        assert znode["removing_replicas"] == {"0": [1]}
        wait_until(lambda: holds(cluster, 4, topic), message="the new replica started on 4")
        assert cluster.replicas(topic, 0) == (2, 3, 4, 1)
        assert 4 not in cluster.isr(topic, 0)

        assert cluster.reassign_partitions({(topic, 0): None}) == {
            (topic, 0): (ErrorCode.NONE, None)
        }
        assert cluster.list_partition_reassignments() == {}
        # Kafka's origin is RS without AR, in RS order
        assert cluster.replicas(topic, 0) == (2, 3, 1)
        assert set(cluster.isr(topic, 0)) == {1, 2, 3}
        wait_until(lambda: not holds(cluster, 4, topic), message="the added replica deleted")
        assert cluster.reassign_partitions({(topic, 0): None}) == {
            (topic, 0): (
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                "No partition reassignment is in progress.",
            )
        }
    finally:
        cluster.heal_broker(4)
    assert len(read_partition(cluster, topic, 0)) == 5


def test_invalid_targets_are_refused_with_kafkas_errors(cluster: Cluster) -> None:
    topic = "refused"
    cluster.create_topic(topic, assignments={0: (1, 2)})
    results = cluster.reassign_partitions(
        {
            (topic, 0): [1, 9],
            (topic, 7): [1, 2],
            ("no-such-topic", 0): [1],
            ("no-such-topic", 1): None,
        }
    )
    assert results == {
        (topic, 0): (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Replica assignment has brokers that are not alive. Replica list: "
            "ArrayBuffer(9), live broker list: Set(1, 2, 3, 4)",
        ),
        (topic, 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
        ("no-such-topic", 0): (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "The partition does not exist.",
        ),
        ("no-such-topic", 1): (
            ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
            "No partition reassignment is in progress.",
        ),
    }
    assert cluster.replicas(topic, 0) == (1, 2)
    # the current assignment as target: done at once
    assert cluster.reassign_partitions({(topic, 0): [1, 2]}) == {(topic, 0): (ErrorCode.NONE, None)}
    assert cluster.list_partition_reassignments() == {}


def test_without_zookeeper_there_is_no_controller_to_ask() -> None:
    with pytest.raises(ControllerRequestError, match="needs ZooKeeper"):
        Cluster(1).reassign_partitions({("t", 0): [1]})
    with pytest.raises(ControllerRequestError, match="needs ZooKeeper"):
        Cluster(1).list_partition_reassignments()


def test_the_admin_znode_reassigns_and_goes_once_done(cluster: Cluster, events: EventLog) -> None:
    topic = "through-zookeeper"
    cluster.create_topic(topic, assignments={0: (1, 2), 1: (2, 3)})
    cluster._zk.create(
        REASSIGN_PARTITIONS,
        encode_reassign_partitions(
            {
                TopicPartition(topic=topic, partition=0): (3, 4),
                TopicPartition(topic=topic, partition=1): (2, 3),  # already so
                TopicPartition(topic="nope", partition=0): (1,),  # refused: removed at once
            }
        ),
        makepath=True,
    )
    wait_until(lambda: cluster._zk.exists(REASSIGN_PARTITIONS) is None, message="znode deleted")
    assert cluster.replicas(topic, 0) == (3, 4)
    assert cluster.replicas(topic, 1) == (2, 3)
    wait_until(lambda: not holds(cluster, 1, topic), message="broker 1's replica deleted")
    (started,) = events.named(
        "controller.partition_reassignment", topic=topic, partition=0, phase="started"
    )
    assert started["trigger"] == "/admin/reassign_partitions"

    # the watch is set again; a znode that does not decode is deleted, not left to block
    cluster._zk.create(REASSIGN_PARTITIONS, b"{not json")
    wait_until(lambda: cluster._zk.exists(REASSIGN_PARTITIONS) is None, message="bad znode gone")
    (bad,) = events.named("controller.bad_reassign_partitions", path=REASSIGN_PARTITIONS)
    VALIDATOR.validate(bad)
    cluster._zk.create(
        REASSIGN_PARTITIONS,
        encode_reassign_partitions({TopicPartition(topic=topic, partition=1): (4, 3)}),
    )
    wait_until(lambda: cluster._zk.exists(REASSIGN_PARTITIONS) is None, message="znode deleted")
    assert cluster.replicas(topic, 1) == (4, 3)


def test_a_removed_replica_on_a_broker_that_is_down_is_deleted_when_it_returns(
    cluster: Cluster,
) -> None:
    topic = "down-origin"
    old, kept, new = not_controller(cluster, 3)
    cluster.create_topic(topic, assignments={0: (old, kept)})
    producer = cluster.producer(acks=-1)
    for i in range(10):
        producer.send(topic, f"r{i}".encode(), partition=0).result(10)
    cluster.stop_broker(old)
    cluster.wait_for_leader(topic, 0, not_broker=old)
    assert cluster.reassign_partitions({(topic, 0): [kept, new]}) == {
        (topic, 0): (ErrorCode.NONE, None)
    }
    cluster.wait_for_reassignments([(topic, 0)])  # the dead original replica is not waited for
    assert cluster.replicas(topic, 0) == (kept, new)
    cluster.restart_broker(old)
    wait_until(lambda: not holds(cluster, old, topic), message="its replica deleted on return")
    assert len(read_partition(cluster, topic, 0)) == 10
    settled_controller(cluster)


def test_the_leader_dying_mid_reassignment_loses_no_acknowledged_record(cluster: Cluster) -> None:
    topic = "leader-died"
    old, kept, new = not_controller(cluster, 3)
    cluster.create_topic(topic, assignments={0: (old, kept)})
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    cluster.isolate_broker(new)  # phase B waits for it
    try:
        with numbered_load(producer, topic, 0) as load:
            wait_until(lambda: len(load.acked) >= 20, message="20 acknowledged records")
            assert cluster.reassign_partitions({(topic, 0): [kept, new]}) == {
                (topic, 0): (ErrorCode.NONE, None)
            }
            cluster.kill_broker(old)  # the leader: the live ISR member takes over
            cluster.wait_for_leader(topic, 0, not_broker=old)
            died_at = time.monotonic()
            wait_until(lambda: load.acked_after(died_at) >= 20, message="20 acks after")
            assert cluster.list_partition_reassignments() != {}  # still waiting for `new`
        acked = list(load.acked)
    finally:
        cluster.heal_broker(new)
    cluster.wait_for_reassignments([(topic, 0)])
    assert cluster.replicas(topic, 0) == (kept, new)
    assert load.failed == []
    stored = read_partition(cluster, topic, 0)
    lost = [(a.offset, a.value) for a in acked if stored.get(a.offset) != a.value]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    cluster.restart_broker(old)
    wait_until(lambda: not holds(cluster, old, topic), message="its replica deleted on return")
    settled_controller(cluster)


def test_a_new_controller_resumes_a_reassignment_and_finishes_it(
    cluster: Cluster, events: EventLog
) -> None:
    topic = "resumed"
    controller = settled_controller(cluster)
    old, kept, new = not_controller(cluster, 3)
    cluster.create_topic(topic, assignments={0: (old, kept)})
    cluster.producer(acks=-1).send(topic, b"before", partition=0).result(10)
    cluster.isolate_broker(new)  # phase B waits for it
    try:
        assert cluster.reassign_partitions({(topic, 0): [kept, new]}) == {
            (topic, 0): (ErrorCode.NONE, None)
        }
        epoch = cluster.current_controller_epoch()
        cluster.kill_broker(controller)
        successor = settled_controller(cluster, min_epoch=epoch)
        assert successor != controller
        resumed = wait_until(
            lambda: events.named(
                "controller.partition_reassignment", topic=topic, trigger="resumed"
            ),
            message="the new controller resumed the reassignment",
        )
        assert resumed[0]["phase"] == "started"
        assert cluster.list_partition_reassignments() == {
            (topic, 0): {
                "replicas": (kept, new, old),
                "adding_replicas": (new,),
                "removing_replicas": (old,),
            }
        }
    finally:
        cluster.heal_broker(new)
    cluster.wait_for_reassignments([(topic, 0)])
    assert cluster.replicas(topic, 0) == (kept, new)
    wait_until(lambda: not holds(cluster, old, topic), message="the removed replica deleted")
    assert read_partition(cluster, topic, 0) == {0: b"before"}
    cluster.restart_broker(controller)
    settled_controller(cluster)


def test_a_topic_znode_that_does_not_decode_fails_that_partition_only(
    cluster: Cluster, events: EventLog
) -> None:
    topic, other = "undecodable", "decodable"
    cluster.create_topic(topic, assignments={0: (1, 2)})
    cluster.create_topic(other, assignments={0: (1, 2)})
    cluster._zk.set(zk_data.topic_path(topic), b"{not json")
    results = cluster.reassign_partitions({(topic, 0): [2, 3], (other, 0): [2, 3]})
    assert results == {
        (topic, 0): (ErrorCode.UNKNOWN_SERVER_ERROR, None),
        (other, 0): (ErrorCode.NONE, None),
    }
    assert events.named("controller.bad_topic", topic=topic)
    cluster.wait_for_reassignments()
    assert cluster.replicas(other, 0) == (2, 3)


def test_reassignments_on_a_real_zookeeper(real_zookeeper: RealServer) -> None:
    """The same code on a real ZooKeeper 3.8 server: the exists watch on
    `/admin/reassign_partitions` fires on creation, the topic znode's version 2 fields, and
    the znode deleted once done."""
    with Cluster(3, zookeeper=real_zookeeper.hosts, session_timeout_ms=1000) as real:
        assert isinstance(real._zk, KazooClient)  # really on the server, not the model
        settled_controller(real)
        real.create_topic("real", assignments={0: (1, 2), 1: (2, 3)})
        assert real.reassign_partitions({("real", 0): [2, 3]}) == {
            ("real", 0): (ErrorCode.NONE, None)
        }
        real.wait_for_reassignments()
        assert real.replicas("real", 0) == (2, 3)
        real._zk.create(
            REASSIGN_PARTITIONS,
            encode_reassign_partitions({TopicPartition(topic="real", partition=1): (3, 1)}),
            makepath=True,
        )
        wait_until(lambda: real._zk.exists(REASSIGN_PARTITIONS) is None, message="deleted")
        assert real.replicas("real", 1) == (3, 1)
        assert topic_znode(real, "real")["adding_replicas"] == {}
        gone = TopicPartition(topic="real", partition=0)
        wait_until(
            lambda: gone not in real.brokers[1].log_manager.all_logs(),
            message="broker 1's replica of partition 0 deleted",
        )
