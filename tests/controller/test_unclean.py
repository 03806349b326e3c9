"""When the whole ISR dies: offline until an ISR member returns, or (unclean) data loss."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkactor.clients import ProduceError
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import PartitionDescription
from kafkactor.testing import Cluster, ControllerRequestError
from tests.controller.support import (
    Ack,
    controller_view,
    partition_metadata,
    partition_without,
    read_partition,
    settled_controller,
    state_znode,
)
from tests.replication.support import TOPIC, WAIT_S, EventLog, result_or_error, wait_until

PARTITIONS = 3


@dataclass(frozen=True)
class DeadIsr:
    """A partition whose ISR shrank to its leader, which then died too."""

    partition: int
    leader: int  # the last ISR member
    follower: int  # dropped from the ISR before the leader died
    controller: int  # alive throughout
    acked_by_both: list[Ack]
    acked_by_leader_alone: list[Ack]


def _produce(cluster: Cluster, partition: int, prefix: str, count: int) -> list[Ack]:
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=20, retry_backoff_ms=50)
    acks = []
    for i in range(count):
        value = f"{prefix}-{i}".encode()
        metadata = producer.send(TOPIC, value, partition=partition).result(WAIT_S)
        acks.append(Ack(value, metadata.offset, 0.0))
    return acks


def _kill_the_whole_isr(cluster: Cluster, config: Mapping[str, str]) -> DeadIsr:
    """RF 2, min ISR 1: the follower dies, the ISR shrinks to the leader, records are
    acknowledged by the leader alone, then the leader dies. The controller's broker lives."""
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2, config=config)
    controller = settled_controller(cluster)
    partition = partition_without(cluster, TOPIC, PARTITIONS, controller)
    leader, follower = cluster.replicas(TOPIC, partition)
    assert cluster.leader(TOPIC, partition) == leader
    both = _produce(cluster, partition, "both", 5)

    cluster.kill_broker(follower)
    wait_until(
        lambda: cluster.isr(TOPIC, partition) == (leader,),
        message="the ISR to shrink to the leader alone",
    )
    alone = _produce(cluster, partition, "alone", 5)
    assert [a.offset for a in alone] == list(range(5, 10))

    cluster.kill_broker(leader)
    wait_until(lambda: cluster.leader(TOPIC, partition) == -1, message="leader -1 in ZooKeeper")
    assert settled_controller(cluster) == controller
    return DeadIsr(partition, leader, follower, controller, both, alone)


def _replica(cluster: Cluster, partition: int, broker: int) -> PartitionDescription | None:
    try:
        return cluster.describe_partition(TOPIC, partition, broker=broker)
    except ControllerRequestError:
        return None


def _missing(stored: Mapping[int, bytes | None], acks: list[Ack]) -> list[Ack]:
    return [ack for ack in acks if stored.get(ack.offset) != ack.value]


def test_without_unclean_election_the_partition_waits_for_an_isr_member(
    cluster: Cluster, events: EventLog
) -> None:
    dead = _kill_the_whole_isr(cluster, {"min.insync.replicas": "1"})
    p = dead.partition
    state, _ = state_znode(cluster, TOPIC, p)
    assert (state.leader, state.isr) == (-1, (dead.leader,))  # the ISR is kept for its return
    wait_until(
        lambda: partition_metadata(cluster, dead.controller, TOPIC)[p].leader == -1,
        message="brokers' metadata to show no leader",
    )
    assert (
        partition_metadata(cluster, dead.controller, TOPIC)[p].error_code
        is ErrorCode.LEADER_NOT_AVAILABLE
    )
    producer = cluster.producer(acks=-1, timeout_ms=1_000, retries=3, retry_backoff_ms=50)
    error = result_or_error(producer.send(TOPIC, b"nowhere", partition=p))
    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.LEADER_NOT_AVAILABLE

    # the replica that left the ISR comes back: it must not lead
    cluster.restart_broker(dead.follower)
    wait_until(
        lambda: events.named("controller.brokers_changed", joined=[dead.follower]),
        message="the controller to see the follower return",
    )
    wait_until(
        lambda: (
            (replica := _replica(cluster, p, dead.follower)) is not None
            and replica.leader_epoch >= state.leader_epoch
        ),
        message="the returning replica to hear of the partition",
    )
    assert controller_view(cluster, dead.controller) is not None  # its mailbox is drained
    assert cluster.leader(TOPIC, p) == -1
    assert cluster.isr(TOPIC, p) == (dead.leader,)
    replica = _replica(cluster, p, dead.follower)
    assert replica is not None and not replica.is_leader
    error = result_or_error(producer.send(TOPIC, b"still-nowhere", partition=p))
    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.LEADER_NOT_AVAILABLE
    assert not events.named("controller.leader_elected", partition=p, unclean=True)

    # the last ISR member comes back: it leads, with everything it acknowledged
    cluster.restart_broker(dead.leader)
    assert cluster.wait_for_leader(TOPIC, p) == dead.leader
    stored = read_partition(cluster, TOPIC, p)
    assert _missing(stored, dead.acked_by_both + dead.acked_by_leader_alone) == []
    assert producer.send(TOPIC, b"back", partition=p).result(WAIT_S).offset == 10


def test_unclean_election_makes_an_out_of_sync_replica_leader_and_loses_acknowledged_records(
    cluster: Cluster, events: EventLog
) -> None:
    dead = _kill_the_whole_isr(
        cluster, {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    )
    p = dead.partition
    assert cluster.isr(TOPIC, p) == (dead.leader,)  # nobody to elect, even uncleanly

    cluster.restart_broker(dead.follower)  # only the replica that left the ISR comes back

    assert cluster.wait_for_leader(TOPIC, p) == dead.follower
    assert cluster.isr(TOPIC, p) == (dead.follower,)
    assert events.named(
        "controller.leader_elected", partition=p, leader=dead.follower, unclean=True
    )
    stored = read_partition(cluster, TOPIC, p)
    # what both replicas had is there; what the leader alone acknowledged is gone
    assert _missing(stored, dead.acked_by_both) == []
    lost = _missing(stored, dead.acked_by_leader_alone)
    assert lost == dead.acked_by_leader_alone
    assert sorted(stored) == [a.offset for a in dead.acked_by_both]
    # and the lost records' offsets are given to new records
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=20, retry_backoff_ms=50)
    first_lost = dead.acked_by_leader_alone[0]
    assert producer.send(TOPIC, b"new", partition=p).result(WAIT_S).offset == first_lost.offset
