"""The same controller code on a real ZooKeeper 3.8 server (a kazoo client per broker).

On a real server `kill_broker` closes the crashed broker's session (a client cannot stop only
its heartbeats), so its registration, and the `/controller` it may hold, go at once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from kafkactor.testing import Cluster
from tests.controller.support import (
    FAILOVER_BOUND_S,
    ControllerSampler,
    acting_controllers,
    deposed_controller_actions,
    expire_real_session,
    read_partition,
    registered_brokers,
    settled_controller,
)
from tests.replication.support import FAST, MIN_ISR_2, TOPIC, WAIT_S, EventLog, wait_until
from tests.zk_conformance.conftest import RealServer

SESSION_TIMEOUT_MS = 1000


@pytest.fixture
def real_cluster(real_zookeeper: RealServer) -> Iterator[Cluster]:
    with Cluster(
        3, zookeeper=real_zookeeper.hosts, session_timeout_ms=SESSION_TIMEOUT_MS, config=FAST
    ) as started:
        assert isinstance(started._zk, KazooClient)  # really on the server, not the model
        settled_controller(started)
        yield started


def test_controller_failover_on_a_real_zookeeper(real_cluster: Cluster, events: EventLog) -> None:
    cluster = real_cluster
    old = settled_controller(cluster)
    assert acting_controllers(cluster) == [old]
    assert registered_brokers(cluster) == [1, 2, 3]
    old_epoch = cluster.current_controller_epoch()
    assert old_epoch == 1  # a chroot of its own: no epoch left over from another cluster

    started = time.monotonic()
    with ControllerSampler(cluster) as sampler:
        cluster.kill_broker(old)
        new = settled_controller(cluster, min_epoch=old_epoch)
    elapsed = time.monotonic() - started

    assert new != old
    assert cluster.current_controller_epoch() == old_epoch + 1
    assert acting_controllers(cluster) == [new]
    assert registered_brokers(cluster) == sorted({1, 2, 3} - {old})
    assert sampler.same_epoch_controllers() == []
    assert events.named("controller.elected", controller=new, epoch=old_epoch + 1)
    assert elapsed < FAILOVER_BOUND_S, f"a new controller after {elapsed:.2f}s"


def test_leader_failover_on_a_real_zookeeper(real_cluster: Cluster) -> None:
    cluster = real_cluster
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3, config=MIN_ISR_2)
    controller = settled_controller(cluster)
    partition = next(p for p in range(3) if cluster.leader(TOPIC, p) != controller)
    old_leader = cluster.leader(TOPIC, partition)
    old_isr = cluster.isr(TOPIC, partition)
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    before = [
        producer.send(TOPIC, f"before-{i}".encode(), partition=partition).result(WAIT_S)
        for i in range(10)
    ]

    started = time.monotonic()
    cluster.kill_broker(old_leader)
    new_leader = wait_until(
        lambda: (leader := cluster.leader(TOPIC, partition)) not in (old_leader, -1) and leader,
        timeout_s=FAILOVER_BOUND_S,
        message="a new leader in ZooKeeper",
    )
    elapsed = time.monotonic() - started

    assert new_leader in old_isr
    assert cluster.isr(TOPIC, partition) == tuple(b for b in old_isr if b != old_leader)
    assert cluster.wait_for_leader(TOPIC, partition) == new_leader
    after = [
        producer.send(TOPIC, f"after-{i}".encode(), partition=partition).result(WAIT_S)
        for i in range(10)
    ]
    assert elapsed < FAILOVER_BOUND_S
    stored = read_partition(cluster, TOPIC, partition)
    expected = {
        **{m.offset: f"before-{i}".encode() for i, m in enumerate(before)},
        **{m.offset: f"after-{i}".encode() for i, m in enumerate(after)},
    }
    assert {offset: stored.get(offset) for offset in expected} == expected
    assert settled_controller(cluster) == controller  # the controller stayed


def test_controller_whose_session_expired_makes_no_decision_before_resigning_on_a_real_zookeeper(
    real_cluster: Cluster, real_zookeeper: RealServer, events: EventLog
) -> None:
    """Regression (fixed in f78a51d), with kazoo itself: its connection-state watch events
    must not make an expired controller act."""
    cluster = real_cluster
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    session = cluster.brokers[old].zookeeper
    assert session is not None
    seen = len(events.all())

    expire_real_session(real_zookeeper.hosts, session.client)

    settled_controller(cluster, min_epoch=old_epoch)
    acted, resign = deposed_controller_actions(events, seen, old, old_epoch)
    assert acted == [], f"the deposed controller acted after its session expired: {acted}"
    assert resign["reason"] == "ZooKeeper session lost"


def test_cluster_expires_a_broker_session_on_a_real_zookeeper(real_cluster: Cluster) -> None:
    cluster = real_cluster
    controller = settled_controller(cluster)
    follower = next(b for b in (1, 2, 3) if b != controller)
    session = cluster.brokers[follower].zookeeper
    assert session is not None
    before = session.session_id

    cluster.expire_session(follower)

    # the broker's client gets a new session and the broker registers again
    wait_until(
        lambda: session.client.client_id is not None and session.session_id != before,
        message="a new session for the expired broker",
    )
    wait_until(
        lambda: registered_brokers(cluster) == [1, 2, 3],
        message="the broker to register again",
    )
    settled_controller(cluster)
