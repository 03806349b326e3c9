"""Static membership (KIP-345) with real clients: confluent-kafka's `group.instance.id` and
kafka-python's `group_instance_id` against the in-process cluster, and OffsetCommit to a topic
that does not exist.

- A static member that restarts (closed without LeaveGroup, as both clients close a static
  member, and a new consumer with the same instance id) within its session gets its partitions
  back, and the other member sees no rebalance: no revoke or assign callback, the group's
  generation unchanged.
- A second live consumer with the same instance id fences the first, which its client reports
  as FENCED_INSTANCE_ID.

The group's generation is read from the coordinator's core (`generation`): no Kafka API shows
it to a client that is not rejoining.
"""

from __future__ import annotations

import contextlib
from typing import Any

import kafka.errors
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkactor.actors.coordinator.coordinator_actor import GroupCoordinatorActor
from kafkactor.testing import Cluster
from tests.wire.groups import JOIN_S, coordinator_of, group_of, is_split
from tests.wire.support import READ_S, wait_until
from tests.wire.test_groups_kafka_python import Member as PythonMember
from tests.wire.test_groups_kafka_python import wait_for_split

PARTITIONS = 4
SESSION_MS = 30_000  # a restart well within it


def generation(cluster: Cluster, group: str) -> int | None:
    """The group's generation as its coordinator holds it (None: no such group there). Read
    from the actor's core on this thread: an int read, for a check between rebalances."""
    broker = cluster.brokers[coordinator_of(cluster, group)]
    for ref in broker.refs:
        actor = ref._actor_weakref()  # the in-process coordinator actor, for the test
        if isinstance(actor, GroupCoordinatorActor):
            found = actor.core.group(group)
            return None if found is None else found.generation_id
    raise AssertionError(f"broker {broker} runs no group coordinator")


# -- confluent-kafka -----------------------------------------------------------------------------


class Static:
    """A confluent-kafka Consumer with a `group.instance.id`, subscribed to `topic`; it counts
    its rebalance callbacks and keeps the errors its polls return."""

    def __init__(self, cluster: Cluster, group: str, topic: str, instance: str) -> None:
        self.instance = instance
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 500,
                "auto.offset.reset": "earliest",
            }
        )
        self.assigned: frozenset[int] = frozenset()
        self.callbacks = 0
        self.errors: list[KafkaError] = []
        self.closed = False
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.callbacks += 1
        self.assigned = frozenset(tp.partition for tp in partitions)

    def _revoke(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self.callbacks += 1
        self.assigned = frozenset()

    def poll(self) -> None:
        message: Message | None = self.consumer.poll(0.1)
        error = None if message is None else message.error()
        if error is not None:
            self.errors.append(error)

    def close(self) -> None:
        """Close: a static member leaves no LeaveGroup behind (librdkafka sends none)."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(KafkaException):  # a fenced consumer may refuse its commit
                self.consumer.close()


def pump(members: list[Static], until: Any, what: str) -> None:
    def done() -> bool:
        for m in members:
            if not m.closed:
                m.poll()
        return bool(until())

    wait_until(done, JOIN_S, what)


@pytest.mark.timeout(60)
def test_confluent_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    quick: Cluster, topic: str
) -> None:
    quick.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    group = group_of(topic)
    alpha = Static(quick, group, topic, "alpha")
    beta = Static(quick, group, topic, "beta")
    restarted: Static | None = None
    try:
        pump([alpha, beta], lambda: is_split([alpha.assigned, beta.assigned], PARTITIONS), "split")
        before = generation(quick, group)
        callbacks, alpha_id = alpha.callbacks, alpha.consumer.memberid()
        beta_id, beta_held = beta.consumer.memberid(), beta.assigned

        beta.close()  # no LeaveGroup: the coordinator keeps its place for the session
        restarted = Static(quick, group, topic, "beta")
        pump([alpha, restarted], lambda: restarted.assigned == beta_held, "beta's partitions")

        assert restarted.consumer.memberid() != beta_id  # a new member id, the same place
        assert alpha.callbacks == callbacks, "alpha saw a rebalance"
        assert alpha.consumer.memberid() == alpha_id
        assert generation(quick, group) == before
        assert not alpha.errors and not restarted.errors

        # DescribeGroups (v4+) shows each member's instance id
        admin = AdminClient({"bootstrap.servers": quick.bootstrap_servers})
        described = admin.describe_consumer_groups([group])[group].result(timeout=READ_S)
        members = {m.group_instance_id: m.member_id for m in described.members}
        assert members == {"alpha": alpha_id, "beta": restarted.consumer.memberid()}
    finally:
        for member in (alpha, beta, restarted):
            if member is not None:
                member.close()


@pytest.mark.timeout(60)
def test_confluent_a_second_consumer_with_the_same_instance_id_fences_the_first(
    quick: Cluster, topic: str
) -> None:
    quick.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    group = group_of(topic)
    first = Static(quick, group, topic, "twin")
    second: Static | None = None
    try:
        everything = frozenset(range(PARTITIONS))
        pump([first], lambda: first.assigned == everything, "the first one's assignment")
        second = Static(quick, group, topic, "twin")
        pump([first, second], lambda: first.errors and second.assigned == everything, "fencing")
        # librdkafka makes the broker's FENCED_INSTANCE_ID a fatal error of the instance,
        # described by that code's text
        error = first.errors[0]
        assert error.code() == KafkaError._FATAL, error
        assert "Static consumer fenced by other consumer" in error.str(), error
        assert not second.errors
    finally:
        first.close()
        if second is not None:
            second.close()


@pytest.mark.timeout(30)
def test_confluent_offset_commit_to_a_topic_that_does_not_exist(quick: Cluster, topic: str) -> None:
    quick.create_topic(topic, partitions=2, replication_factor=3)
    consumer = Consumer({"bootstrap.servers": quick.bootstrap_servers, "group.id": group_of(topic)})
    try:
        offsets = [
            TopicPartition(topic, 0, 5),
            TopicPartition(f"{topic}-missing", 0, 5),  # no such topic
            TopicPartition(topic, 7, 5),  # beyond the topic's partitions
        ]
        with pytest.raises(KafkaException) as raised:
            consumer.commit(offsets=offsets, asynchronous=False)
        assert raised.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
        # the partition that exists was committed all the same, as Kafka commits it
        (stored,) = consumer.committed([TopicPartition(topic, 0)], timeout=READ_S)
        assert stored.offset == 5
    finally:
        consumer.close()


# -- kafka-python ----------------------------------------------------------------------------


def python_member(cluster: Cluster, name: str, group: str, topic: str) -> PythonMember:
    return PythonMember(
        name,
        cluster,
        group,
        topic,
        group_instance_id=name,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )


@pytest.mark.timeout(60)
def test_kafka_python_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    quick: Cluster, topic: str
) -> None:
    quick.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    group = group_of(topic)
    alpha = python_member(quick, "alpha", group, topic)
    beta = python_member(quick, "beta", group, topic)
    restarted: PythonMember | None = None
    try:
        split = wait_for_split([alpha, beta], PARTITIONS)
        before = generation(quick, group)
        held_by_alpha = alpha.held

        beta.stop()  # close: kafka-python sends no LeaveGroup for a static member
        restarted = python_member(quick, "beta", group, topic)
        wait_until(
            lambda: restarted.assigned == split["beta"] and restarted.positions is not None,
            JOIN_S,
            "the restarted member holding beta's partitions",
        )
        assert generation(quick, group) == before, "the group rebalanced"
        assert alpha.assigned == split["alpha"] and alpha.held == held_by_alpha
        alpha.check()
    finally:
        alpha.stop()
        if restarted is not None:
            restarted.stop()


@pytest.mark.timeout(60)
def test_kafka_python_a_second_consumer_with_the_same_instance_id_fences_the_first(
    quick: Cluster, topic: str
) -> None:
    quick.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    group = group_of(topic)
    first = python_member(quick, "twin", group, topic)
    second: PythonMember | None = None
    try:
        wait_for_split([first], PARTITIONS)
        second = python_member(quick, "twin", group, topic)
        wait_until(
            lambda: second.assigned == frozenset(range(PARTITIONS)), JOIN_S, "the second joining"
        )
        with pytest.raises(kafka.errors.FencedInstanceIdError):
            first.call(lambda consumer: consumer.commit())  # its member id was replaced
    finally:
        first.stop()
        if second is not None:
            second.stop()
