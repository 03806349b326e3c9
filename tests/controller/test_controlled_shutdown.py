"""Kafka's controlled shutdown (KAFKA-340) through real in-process clusters on the embedded
ZooKeeper: a broker asked to stop has the controller move its leaderships away first, so
clients fail over while it still answers, not after its registration goes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import ControlledShutdownRequest, ControlledShutdownResponse
from kafkactor.testing import Cluster
from tests.controller.support import (
    embedded_cluster,
    numbered_load,
    read_partition,
    registered_brokers,
    settled_controller,
    state_znode,
)
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    actor_ref,
    wait_until,
)

pytestmark = pytest.mark.timeout(20)  # each runs in a few seconds

PARTITIONS = 3
LONG_SESSION_TIMEOUT_MS = 30_000  # a crash would go unnoticed for 30 s: longer than any test
MOVED_WITHIN_S = 2.0  # a controlled shutdown is done this long after it starts


@pytest.fixture
def slow_expiry_cluster() -> Iterator[Cluster]:
    """Three brokers whose ZooKeeper sessions time out after 30 s: a failover seen within a
    couple of seconds cannot have waited for a session to expire."""
    with embedded_cluster(session_timeout_ms=LONG_SESSION_TIMEOUT_MS) as started:
        settled_controller(started)
        yield started


def reason(broker: int) -> str:
    return f"controlled shutdown of broker {broker}"


def position(events: list[dict[str, Any]], event: str, **fields: Any) -> int:
    """The position of the first `event` with these fields in `events` (-1: none)."""
    for i, found in enumerate(events):
        if found["event"] == event and all(found.get(k) == v for k, v in fields.items()):
            return i
    return -1


def led_by(cluster: Cluster, broker: int, topic: str = TOPIC) -> list[int]:
    return [p for p in range(PARTITIONS) if cluster.leader(topic, p) == broker]


def left_position(events: list[dict[str, Any]], broker: int) -> int:
    """Where the controller learnt that `broker`'s registration went (-1: not yet)."""
    for i, found in enumerate(events):
        if found["event"] == "controller.brokers_changed" and broker in found["left"]:
            return i
    return -1


def test_leader_moves_before_its_registration_goes_and_acks_all_load_loses_nothing(
    slow_expiry_cluster: Cluster, events: EventLog
) -> None:
    cluster = slow_expiry_cluster
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2)
    controller = settled_controller(cluster)
    broker = next(b for b in cluster.broker_ids if b != controller and led_by(cluster, b))
    led = led_by(cluster, broker)
    partition = led[0]
    before = {p: state_znode(cluster, TOPIC, p)[0] for p in range(PARTITIONS)}
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)

    with numbered_load(producer, TOPIC, partition) as load:
        wait_until(lambda: len(load.acked) >= 30, message="30 acknowledged records")
        started = time.monotonic()
        moved = cluster.stop_broker(broker, controlled=True)
        took_s = time.monotonic() - started
        # already moved when stop_broker returns: nothing waits for a session to expire
        leaders = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
        wait_until(
            lambda: load.acked_after(started + took_s) >= 30,
            message="30 acknowledgements after the shutdown",
        )
    acked = list(load.acked)

    assert moved
    assert took_s < MOVED_WITHIN_S, f"the controlled shutdown took {took_s:.2f}s"
    # A follower's fetch in flight when it was taken out of an ISR can put it back there
    # before its StopReplica lands (as in Kafka before KIP-841): its departure removes it.
    wait_until(
        lambda: all(broker not in cluster.isr(TOPIC, p) for p in range(PARTITIONS)),
        message="the stopped broker out of every ISR",
    )
    after = {p: state_znode(cluster, TOPIC, p)[0] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        assert leaders[p] == after[p].leader != broker, (leaders[p], after[p])
        assert after[p].leader_epoch > before[p].leader_epoch
        assert after[p].isr == tuple(r for r in before[p].isr if r != broker)
        if p in led:  # to the first other ISR member
            assert after[p].leader == before[p].isr[1 if before[p].isr[0] == broker else 0]
    # every move was decided for the controlled shutdown, before the registration went
    log = events.all()
    stopped_at = position(log, "broker.stop", broker=broker)
    left_at = left_position(log, broker)
    assert stopped_at >= 0 and left_at >= 0
    asked_at = position(log, "broker.controlled_shutdown", broker=broker, error="NONE")
    answered_at = position(log, "controller.controlled_shutdown", replica=broker, error="NONE")
    assert 0 <= answered_at < asked_at < stopped_at
    assert log[answered_at]["remaining"] == [] and log[asked_at]["remaining"] == []
    assert log[asked_at]["attempt"] == 1
    for p in led:
        elected_at = position(
            log,
            "controller.leader_elected",
            topic=TOPIC,
            partition=p,
            previous_leader=broker,
            reason=reason(broker),
        )
        assert 0 <= elected_at < answered_at < left_at, (p, elected_at, answered_at, left_at)
        assert broker not in log[elected_at]["isr"], log[elected_at]
    for p in set(range(PARTITIONS)) - set(led):  # it followed them: it left their ISR
        left_isr_at = position(
            log, "controller.isr_changed", topic=TOPIC, partition=p, reason=reason(broker)
        )
        assert 0 <= left_isr_at < answered_at
        assert broker not in log[left_isr_at]["isr"], log[left_isr_at]
    assert not [
        e
        for e in log
        if e["event"] == "controller.leader_elected"
        and e["previous_leader"] == broker
        and e["reason"] != reason(broker)
    ], "a leadership of the stopped broker was moved by its departure, not its shutdown"
    # the producer never gave up, and nothing acknowledged is lost
    assert load.failed == []
    offsets = [ack.offset for ack in acked]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), offsets
    stored = read_partition(cluster, TOPIC, partition)
    lost = [(ack.offset, ack.value) for ack in acked if stored.get(ack.offset) != ack.value]
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:5]}"
    assert len(stored) == max(stored) + 1


def test_the_controllers_own_broker_shuts_down_then_another_controller_takes_over(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2)
    controller = settled_controller(cluster)
    epoch = cluster.current_controller_epoch()
    led = led_by(cluster, controller)
    assert led, "round-robin assignment: every broker leads a partition"

    assert cluster.stop_broker(controller, controlled=True)

    successor = settled_controller(cluster, min_epoch=epoch)
    assert successor != controller
    for p in range(PARTITIONS):
        assert cluster.wait_for_leader(TOPIC, p) != controller
    wait_until(  # a fetch in flight may have put it back in an ISR: its departure removes it
        lambda: all(controller not in cluster.isr(TOPIC, p) for p in range(PARTITIONS)),
        message="the stopped controller's broker out of every ISR",
    )
    log = events.all()
    # the controller answered its own broker, in its epoch, before it stopped
    answered_at = position(
        log,
        "controller.controlled_shutdown",
        actor=addresses.controller(controller),
        replica=controller,
        error="NONE",
        remaining=[],
    )
    stopped_at = position(log, "broker.stop", broker=controller)
    elected_at = position(log, "controller.elected", controller=successor)
    assert 0 <= answered_at < stopped_at
    assert answered_at < elected_at  # the successor is elected once the session is closed
    for p in led:
        moved_at = position(
            log,
            "controller.leader_elected",
            topic=TOPIC,
            partition=p,
            previous_leader=controller,
            reason=reason(controller),
            controller_epoch=epoch,
        )
        assert 0 <= moved_at < answered_at
    # the new controller found nothing to elect: the leaders had moved already
    assert not [
        e
        for e in log[elected_at:]
        if e["event"] == "controller.leader_elected" and e["topic"] == TOPIC
    ]
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    for p in range(PARTITIONS):
        assert producer.send(TOPIC, b"after", partition=p).result(WAIT_S).offset == 0


def test_a_single_replica_partition_stays_remaining_and_the_broker_stops_anyway(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic("single", partitions=1, replication_factor=1)
    (broker,) = cluster.replicas("single", 0)
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    led = led_by(cluster, broker)

    started = time.monotonic()
    moved = cluster.stop_broker(broker, controlled=True)
    took_s = time.monotonic() - started

    assert not moved
    assert took_s < MOVED_WITHIN_S + 0.4  # three attempts, 200 ms apart
    attempts = events.named("broker.controlled_shutdown", broker=broker)
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert all(a["error"] == "NONE" and a["remaining"] == ["single-0"] for a in attempts)
    answers = events.named("controller.controlled_shutdown", replica=broker)
    assert [(a["error"], a["remaining"]) for a in answers] == [("NONE", ["single-0"])] * 3
    # the replicated partitions moved on the first request only
    moves = events.named("controller.leader_elected", reason=reason(broker))
    assert sorted(m["partition"] for m in moves) == led
    assert all(m["topic"] == TOPIC for m in moves)
    # it stopped all the same; its partition goes offline with it, ISR kept
    assert broker not in cluster.live_brokers()
    wait_until(lambda: broker not in registered_brokers(cluster), message="the deregistration")
    wait_until(lambda: cluster.leader("single", 0) == -1, message="single-0 offline")
    offline, _ = state_znode(cluster, "single", 0)
    assert offline.isr == (broker,)
    assert events.named(
        "controller.leader_elected",
        topic="single",
        partition=0,
        previous_leader=broker,
        leader=-1,
        reason="leader went offline; no live ISR member",
    )


def test_stale_broker_epoch_and_non_controller_are_refused(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    controller = settled_controller(cluster)
    broker, bystander = (b for b in cluster.broker_ids if b != controller)
    session = cluster.brokers[broker].zookeeper
    assert session is not None
    old_epoch = session.broker_epoch
    # a new registration (session expired, registered again): its earlier epoch is stale
    seen = len(events.all())
    cluster.expire_session(broker)
    wait_until(
        lambda: [
            e
            for e in events.all()[seen:]
            if e["event"] == "controller.brokers_changed"
            and (broker in e["joined"] or broker in e["bounced"])
        ],
        message="the controller to see the broker's new registration",
    )
    settled_controller(cluster)
    new_epoch = session.broker_epoch
    assert new_epoch > old_epoch
    # handled as a failure and a restart: back as a follower once it has caught up
    wait_until(
        lambda: all(broker in cluster.isr(TOPIC, p) for p in range(PARTITIONS)),
        message="the bounced broker back in every ISR",
    )
    before = {p: state_znode(cluster, TOPIC, p)[0] for p in range(PARTITIONS)}
    probe = Client("controlled-shutdown-probe", cluster.directory)

    def ask(at: int, broker_id: int, broker_epoch: int) -> ControlledShutdownResponse:
        request = ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch)
        response = probe.call(addresses.controller(at), request, WAIT_S)
        assert isinstance(response, ControlledShutdownResponse), response
        return response

    try:
        stale = ask(controller, broker, old_epoch)
        not_controller = ask(bystander, broker, new_epoch)
        unknown = ask(controller, 9, 1)
    finally:
        probe.close()

    refused_codes = (
        ErrorCode.STALE_BROKER_EPOCH,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.BROKER_NOT_AVAILABLE,
    )
    assert (stale.error_code, stale.remaining_partitions) == (ErrorCode.STALE_BROKER_EPOCH, ())
    assert not_controller.error_code is ErrorCode.NOT_CONTROLLER
    assert unknown.error_code is ErrorCode.BROKER_NOT_AVAILABLE
    refusals = [
        (e["actor"], e["replica"], e["error"], e["error_code"], e["remaining"])
        for e in events.named("controller.controlled_shutdown")
    ]
    assert refusals == [
        (addresses.controller(controller), broker, "STALE_BROKER_EPOCH", 77, []),
        (addresses.controller(bystander), broker, "NOT_CONTROLLER", 41, []),
        (addresses.controller(controller), 9, "BROKER_NOT_AVAILABLE", 8, []),
    ]
    assert [int(c) for c in refused_codes] == [77, 41, 8]
    # nothing was decided: the broker is still in every ISR
    assert {p: state_znode(cluster, TOPIC, p)[0] for p in range(PARTITIONS)} == before
    assert not events.named("controller.isr_changed", reason=reason(broker))
    # the same request with the current epoch is accepted: it leaves every ISR
    assert cluster.brokers[broker].controlled_shutdown(retries=1, backoff_ms=0, timeout_s=WAIT_S)
    assert all(broker not in cluster.isr(TOPIC, p) for p in range(PARTITIONS))
    assert len(events.named("controller.isr_changed", reason=reason(broker))) == PARTITIONS


def test_a_restarted_broker_rejoins_the_isr_and_may_lead_again(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    controller = settled_controller(cluster)
    broker, other = (b for b in cluster.broker_ids if b != controller)
    producer = cluster.producer(acks=-1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    for p in range(PARTITIONS):
        producer.send(TOPIC, b"before", partition=p).result(WAIT_S)

    assert cluster.stop_broker(broker, controlled=True)
    for p in range(PARTITIONS):  # written while it is down
        producer.send(TOPIC, b"during", partition=p).result(WAIT_S)
    cluster.restart_broker(broker)

    wait_until(
        lambda: all(broker in cluster.isr(TOPIC, p) for p in range(PARTITIONS)),
        message="the restarted broker back in every ISR",
    )
    assert settled_controller(cluster) == controller  # the one that saw it shut down
    # the two others shut down in turn: the controller that handled the first shutdown hands
    # every leadership to the returned broker, which it no longer counts as shutting down
    assert cluster.stop_broker(other, controlled=True)
    assert cluster.stop_broker(controller, controlled=True)

    for p in range(PARTITIONS):
        assert cluster.wait_for_leader(TOPIC, p) == broker
    handed = [
        e
        for e in events.named("controller.leader_elected", leader=broker, topic=TOPIC)
        if e["reason"] in (reason(other), reason(controller))
    ]
    assert handed and all(e["actor"] == addresses.controller(controller) for e in handed)
    assert sorted({e["partition"] for e in handed}) == list(range(PARTITIONS))
    for p in range(PARTITIONS):
        stored = read_partition(cluster, TOPIC, p)
        assert list(stored.values()) == [b"before", b"during"], (p, stored)
        key = str(TopicPartition(topic=TOPIC, partition=p))
        assert cluster.brokers[broker].logs[key].log_end_offset == 2


def test_the_broker_keeps_no_replica_and_no_fetcher_of_what_it_no_longer_leads(
    cluster: Cluster, events: EventLog
) -> None:
    """Regression: the broker was sent LeaderAndIsr (as a follower) and then StopReplica for
    the same partitions; the LeaderAndIsr's fan-out finished after the StopReplica had removed
    the fetchers and added them back, so fetchers of stopped replicas ran until the broker
    stopped (retries and backoff included). It is now sent StopReplica only."""
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    controller = settled_controller(cluster)
    broker = next(b for b in cluster.broker_ids if b != controller)
    seen = len(events.all())

    assert cluster.brokers[broker].controlled_shutdown(retries=1, backoff_ms=0, timeout_s=WAIT_S)

    # the StopReplica is on its way when the answer comes: wait for it to be applied
    manager = actor_ref(cluster, addresses.replica_manager(broker))

    def served() -> dict[str, Any]:
        view: dict[str, Any] = manager.proxy().describe().get(timeout=WAIT_S)
        return view

    wait_until(
        lambda: (view := served())["leaders"] == view["followers"] == [],
        message="every replica stopped",
    )
    wait_until(lambda: served()["fetchers"] == [], message="no fetcher left")
    wait_until(
        lambda: all(
            cluster.directory.resolve(addresses.fetcher(broker, leader)) is None
            for leader in cluster.broker_ids
        ),
        message="no fetcher actor registered",
    )
    told = [
        e
        for e in events.all()[seen:]
        if e["event"] in ("partition.become_leader", "partition.become_follower")
        and e.get("broker") == broker
    ]
    assert told == []
    stopped = events.named("partition.stopped", broker=broker)
    assert sorted(e["partition"] for e in stopped) == list(range(PARTITIONS))
    assert not any(e["delete"] for e in stopped)
    # the logs stay on disk for the broker's return
    kept = cluster.brokers[broker].log_manager.all_logs()
    assert all(TopicPartition(topic=TOPIC, partition=p) in kept for p in range(PARTITIONS))


def test_a_fenced_controller_answers_not_controller_and_stops_nothing(
    cluster: Cluster, events: EventLog
) -> None:
    """Regression: a controller fenced while writing the moves (a newer controller epoch in a
    partition state) answered NONE with nothing remaining, and sent StopReplica for
    partitions whose moves were never written."""
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    controller = settled_controller(cluster)
    broker = next(b for b in cluster.broker_ids if b != controller)
    (partition,) = led_by(cluster, broker)
    # a newer controller wrote this partition's state: the next write finds it and resigns
    state, stat = state_znode(cluster, TOPIC, partition)
    newer = replace(state, controller_epoch=cluster.current_controller_epoch() + 1)
    cluster._zk.set(
        zk_data.partition_state_path(TOPIC, partition),
        zk_data.encode_partition_state(newer),
        version=stat.version,
    )
    session = cluster.brokers[broker].zookeeper
    assert session is not None
    probe = Client("fenced-probe", cluster.directory)
    try:
        response = probe.call(
            addresses.controller(controller),
            ControlledShutdownRequest(broker_id=broker, broker_epoch=session.broker_epoch),
            WAIT_S,
        )
    finally:
        probe.close()

    assert isinstance(response, ControlledShutdownResponse), response
    assert response.error_code is ErrorCode.NOT_CONTROLLER
    assert events.named("controller.resign", broker=controller)
    assert not events.named("partition.stopped", broker=broker)
    assert cluster.leader(TOPIC, partition) == broker


def test_a_topic_created_while_a_broker_shuts_down_is_not_led_by_it(
    cluster: Cluster, events: EventLog
) -> None:
    controller = settled_controller(cluster)
    broker = next(b for b in cluster.broker_ids if b != controller)
    assert cluster.brokers[broker].controlled_shutdown(retries=1, backoff_ms=0, timeout_s=WAIT_S)

    assignment = cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)

    first_on_it = [p for p, replicas in assignment.items() if replicas[0] == broker]
    assert first_on_it, assignment
    for p, replicas in assignment.items():
        # the first replica that is not shutting down leads
        assert cluster.leader(TOPIC, p) == next(r for r in replicas if r != broker)
    producer = cluster.producer(acks=1, timeout_ms=2_000, retries=40, retry_backoff_ms=50)
    for p in first_on_it:
        assert producer.send(TOPIC, b"new", partition=p).result(WAIT_S).offset == 0
