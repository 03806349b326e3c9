"""One controller at a time; a new one, in a higher epoch, when it goes; older epochs are fenced."""

from __future__ import annotations

import time

import pytest

from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    LeaderAndIsr,
    LeaderAndIsrResponse,
    StopReplica,
    StopReplicaResponse,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.testing import Cluster
from tests.controller.support import (
    FAILOVER_BOUND_S,
    ControllerSampler,
    acting_controllers,
    controller_views,
    deposed_controller_actions,
    partition_metadata,
    registered_brokers,
    replica_manager_epoch,
    settled_controller,
)
from tests.replication.support import TOPIC, WAIT_S, EventLog, wait_until


def test_exactly_one_controller_and_it_is_the_one_in_zookeeper(
    cluster: Cluster, events: EventLog
) -> None:
    views = controller_views(cluster)
    assert sorted(views) == [1, 2, 3]
    acting = [b for b, view in views.items() if view["is_controller"]]
    assert len(acting) == 1, views
    (controller,) = acting
    assert cluster.controller_id() == controller
    assert views[controller]["epoch"] == cluster.current_controller_epoch() == 1
    assert views[controller]["live_brokers"] == [1, 2, 3]
    assert [e["broker"] for e in events.named("controller.elected")] == [controller]
    # the losers watch /controller; they do not act
    assert all(view["epoch"] == 0 for b, view in views.items() if b != controller)


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_losing_the_controller_broker_elects_another_in_a_higher_epoch(
    cluster: Cluster, events: EventLog, how: str
) -> None:
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    started = time.monotonic()
    with ControllerSampler(cluster) as sampler:
        if how == "kill":
            cluster.kill_broker(old)
        else:
            cluster.stop_broker(old)
        new = wait_until(
            lambda: (c := cluster.controller_id()) is not None and c != old and c,
            timeout_s=FAILOVER_BOUND_S,
            message="another broker to become controller",
        )
        elapsed = time.monotonic() - started
        assert settled_controller(cluster, min_epoch=old_epoch) == new
    assert new in (1, 2, 3) and new != old
    assert cluster.current_controller_epoch() == old_epoch + 1
    assert acting_controllers(cluster) == [new]
    assert controller_views(cluster)[new]["live_brokers"] == [b for b in (1, 2, 3) if b != old]
    assert sampler.samples, "the sampler saw nothing"
    assert sampler.same_epoch_controllers() == []
    assert events.named("controller.elected", controller=new, epoch=old_epoch + 1)
    if how == "stop":  # the registration goes at once: no session timeout to wait for
        assert elapsed < 1.0, f"a new controller {elapsed:.2f}s after a clean stop"


@pytest.mark.parametrize("how", ["kill", "stop"])
def test_requests_of_the_old_controller_epoch_are_refused(cluster: Cluster, how: str) -> None:
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    (cluster.kill_broker if how == "kill" else cluster.stop_broker)(old)
    settled_controller(cluster, min_epoch=old_epoch)
    new_epoch = cluster.current_controller_epoch()
    survivors = [b for b in (1, 2, 3) if b != old]
    # the new controller told every live broker its epoch (LeaderAndIsr, UpdateMetadata)
    wait_until(
        lambda: all(replica_manager_epoch(cluster, b) == new_epoch for b in survivors),
        message="every live broker to accept the new controller epoch",
    )
    # a partition the target follows: the stale request would make the target its leader
    target = survivors[0]
    partition = next(p for p in range(3) if cluster.leader(TOPIC, p) not in (target, -1))
    before = cluster.describe_partition(TOPIC, partition, broker=target)
    assert not before.is_leader
    leader = cluster.leader(TOPIC, partition)
    client = Client("old-controller", cluster.directory)
    stale_state = PartitionLeaderState(
        topic=TOPIC,
        partition=partition,
        controller_epoch=old_epoch,
        leader=target,
        leader_epoch=before.leader_epoch + 100,
        isr=(target,),
        replicas=cluster.replicas(TOPIC, partition),
        zk_version=99,
    )
    try:
        leader_and_isr = client.call(
            addresses.replica_manager(target),
            LeaderAndIsr(
                controller_id=old, controller_epoch=old_epoch, partition_states=(stale_state,)
            ),
            WAIT_S,
        )
        update_metadata = client.call(
            addresses.replica_manager(target),
            UpdateMetadata(
                controller_id=old,
                controller_epoch=old_epoch,
                partition_states=(stale_state,),
                live_brokers=(target,),
            ),
            WAIT_S,
        )
        stop_replica = client.call(
            addresses.replica_manager(target),
            StopReplica(
                controller_id=old,
                controller_epoch=old_epoch,
                delete_partitions=True,
                partitions=(TopicPartition(topic=TOPIC, partition=partition),),
            ),
            WAIT_S,
        )
    finally:
        client.close()

    assert isinstance(leader_and_isr, LeaderAndIsrResponse), leader_and_isr
    assert leader_and_isr.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    assert isinstance(update_metadata, UpdateMetadataResponse), update_metadata
    assert update_metadata.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    assert isinstance(stop_replica, StopReplicaResponse), stop_replica
    assert stop_replica.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    # none of them had an effect: the replica still follows, still exists, metadata unchanged
    after = cluster.describe_partition(TOPIC, partition, broker=target)
    assert not after.is_leader
    assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)
    assert cluster.leader(TOPIC, partition) == leader
    assert partition_metadata(cluster, target, TOPIC)[partition].leader == leader
    assert replica_manager_epoch(cluster, target) == new_epoch


def test_controller_whose_session_expires_gives_way_to_a_new_epoch(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    leaders = {p: cluster.leader(TOPIC, p) for p in range(3)}
    with ControllerSampler(cluster) as sampler:
        cluster.expire_session(old)
        new = settled_controller(cluster, min_epoch=old_epoch)
    # another broker, or the same one with its new session, in the next epoch
    assert cluster.current_controller_epoch() == old_epoch + 1
    assert acting_controllers(cluster) == [new]
    assert sampler.same_epoch_controllers() == []
    assert events.named("controller.resign", broker=old, epoch=old_epoch)  # even if re-elected
    # the broker came back with a new session and registered again
    wait_until(lambda: registered_brokers(cluster) == [1, 2, 3], message="re-registration")
    assert controller_views(cluster)[new]["live_brokers"] == [1, 2, 3]
    # every partition still has an acting leader, and takes acks=all writes
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=20, retry_backoff_ms=50)
    for p in range(3):
        assert cluster.wait_for_leader(TOPIC, p) in (1, 2, 3)
        assert producer.send(TOPIC, b"after", partition=p).result(WAIT_S).offset == 0
    # only the partition the expired broker led can have moved
    moved = [p for p in range(3) if cluster.leader(TOPIC, p) != leaders[p]]
    assert set(moved) <= {p for p in range(3) if leaders[p] == old}, (leaders, moved)
    # the new controller's epoch reached every broker
    wait_until(
        lambda: all(replica_manager_epoch(cluster, b) == old_epoch + 1 for b in (1, 2, 3)),
        message="every broker to accept the new controller epoch",
    )


def test_controller_whose_session_expired_makes_no_decision_before_resigning(
    cluster: Cluster, events: EventLog
) -> None:
    """Regression (found here, fixed in f78a51d): when its connection drops, a client gives
    its pending watchers EventType.NONE events before LOST; the controller took them for
    changes and acted on them as controller after its session was gone."""
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    seen = len(events.all())

    cluster.expire_session(old)

    settled_controller(cluster, min_epoch=old_epoch)
    acted, resign = deposed_controller_actions(events, seen, old, old_epoch)
    assert acted == [], f"the deposed controller acted after its session expired: {acted}"
    assert resign["reason"] == "ZooKeeper session lost"
