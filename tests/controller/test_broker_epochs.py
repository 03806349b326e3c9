"""Broker epochs (KIP-380): a broker restarted within its session timeout is seen as restarted.

Kafka before 2.2 (KAFKA-1120) could miss a broker that crashed and registered again before the
controller read `/brokers/ids`: the same ids, nothing "joined", no LeaderAndIsr for the
restarted broker, partitions left offline or with a shrunken ISR. The czxid of the registration
is the broker's epoch: a new one under the same id is a failure followed by a startup, and a
controller request stamped with an older epoch than the broker's own is refused.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import PartitionLeaderState
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    LeaderAndIsr,
    LeaderAndIsrResponse,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.testing import Cluster, ControllerRequestError
from tests.controller.support import (
    FAILOVER_BOUND_S,
    SESSION_TIMEOUT_MS,
    embedded_cluster,
    numbered_load,
    read_partition,
    settled_controller,
)
from tests.replication.support import MIN_ISR_2, WAIT_S, EventLog, wait_until

TOPIC = "bounced"


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with embedded_cluster() as started:
        yield started


def led_with_full_isr(cluster: Cluster, topic: str, partition: int) -> bool:
    leader = cluster.leader(topic, partition)
    if leader not in cluster.live_brokers():
        return False
    if sorted(cluster.isr(topic, partition)) != cluster.broker_ids:
        return False
    try:
        description = cluster.describe_partition(topic, partition, broker=leader)
    except ControllerRequestError:  # restarted, and not told about the partition yet
        return False
    return description.is_leader and sorted(description.isr) == cluster.broker_ids


@pytest.mark.timeout(120)
def test_a_leader_bounced_within_its_session_timeout_ten_times_loses_nothing(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    bounced: list[int] = []
    with numbered_load(producer, TOPIC, 0) as load:
        for _ in range(10):
            wait_until(
                lambda: led_with_full_isr(cluster, TOPIC, 0),
                timeout_s=4 * FAILOVER_BOUND_S,
                message="a leader and the full ISR back",
            )
            acked_before = len(load.acked)
            wait_until(
                lambda n=acked_before: len(load.acked) > n,  # type: ignore[misc]
                message="an acknowledgement",
            )
            leader = cluster.leader(TOPIC, 0)
            cluster.kill_broker(leader)
            # it registers again as soon as its old session expires: within the timeout
            cluster.restart_broker(leader)
            bounced.append(leader)
        wait_until(
            lambda: led_with_full_isr(cluster, TOPIC, 0),
            timeout_s=4 * FAILOVER_BOUND_S,
            message="a leader and the full ISR back after the last bounce",
        )
        acked_before = len(load.acked)
        wait_until(lambda: len(load.acked) > acked_before + 5, message="acks after the bounces")

    found = read_partition(cluster, TOPIC, 0)
    lost = [ack for ack in load.acked if found.get(ack.offset) != ack.value]
    assert lost == []
    assert len(load.acked) > 20
    # the controller told each restarted broker apart from the one it knew
    seen = {
        b
        for e in events.named("controller.brokers_changed")
        for b in [*e.get("bounced", []), *e["joined"]]
    }
    assert set(bounced) <= seen


def test_a_controller_request_for_an_earlier_registration_is_refused(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    controller = settled_controller(cluster)
    epoch = cluster.current_controller_epoch()
    broker = cluster.broker_ids[-1]
    own = cluster.brokers[broker].zookeeper
    assert own is not None and own.broker_epoch > 0
    coup = PartitionLeaderState(
        topic=TOPIC,
        partition=0,
        controller_epoch=epoch,
        leader=broker,
        leader_epoch=99,
        isr=(broker,),
        replicas=tuple(cluster.broker_ids),
    )
    raw = Client("stale-controller", cluster.directory)
    try:
        refused = raw.call(
            addresses.replica_manager(broker),
            LeaderAndIsr(
                controller_id=controller,
                controller_epoch=epoch,
                broker_epoch=own.broker_epoch - 1,
                partition_states=(coup,),
            ),
            WAIT_S,
        )
        metadata = raw.call(
            addresses.replica_manager(broker),
            UpdateMetadata(
                controller_id=controller,
                controller_epoch=epoch,
                broker_epoch=own.broker_epoch - 1,
                partition_states=(coup,),
                live_brokers=(broker,),
            ),
            WAIT_S,
        )
    finally:
        raw.close()

    assert isinstance(refused, LeaderAndIsrResponse)
    assert refused.error_code is ErrorCode.STALE_BROKER_EPOCH
    assert isinstance(metadata, UpdateMetadataResponse)
    assert metadata.error_code is ErrorCode.STALE_BROKER_EPOCH
    # nothing was applied: the replica still has the controller's leader and epoch
    description = cluster.describe_partition(TOPIC, 0, broker=broker)
    assert description.leader_epoch < 99
    assert description.leader == cluster.leader(TOPIC, 0)


def test_a_session_expiry_is_a_new_broker_epoch_and_the_broker_is_told_again(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    follower = next(b for b in cluster.broker_ids if b != cluster.leader(TOPIC, 0))
    session = cluster.brokers[follower].zookeeper
    assert session is not None
    before = session.broker_epoch

    cluster.expire_session(follower)

    wait_until(
        lambda: session.broker_epoch not in (before, -1),
        timeout_s=4 * SESSION_TIMEOUT_MS / 1000 + WAIT_S,
        message="the broker to register again under a new epoch",
    )
    wait_until(
        lambda: led_with_full_isr(cluster, TOPIC, 0),
        timeout_s=4 * FAILOVER_BOUND_S,
        message="the full ISR back",
    )
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    assert producer.send(TOPIC, b"after").result(WAIT_S).offset >= 0
