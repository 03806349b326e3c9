"""OffsetDelete (KIP-496) over the wire: kafka-python 3's `KafkaAdminClient.delete_group_offsets`
against three brokers, as Kafka's OffsetDeleteRequestTest and PlaintextAdminIntegrationTest
(deleteConsumerGroupOffsets) exercise it.

kafka-python answers each partition with an error class (`NoError` when its offset went) and
raises the top-level error (GroupIdNotFoundError, NonEmptyGroupError, ...). confluent-kafka
2.16 has no Python call for it (librdkafka's DeleteConsumerGroupOffsets is not exposed by its
AdminClient), nor has aiokafka 0.14's admin client: kafka-python is the client that sends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kafka.errors
import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.structs import OffsetAndMetadata

from kafkactor.testing import Cluster
from tests.wire.groups import coordinator_of, group_of
from tests.wire.test_groups_kafka_python import members, wait_for_split

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def quick(quick: Cluster) -> Cluster:
    """The package's quickstart cluster (tests/wire/conftest.py), with `__consumer_offsets`
    made first: kafka-python's admin calls do not retry the COORDINATOR_NOT_AVAILABLE of the
    first FindCoordinator, which creates it."""
    quick.ensure_offsets_topic()
    return quick


@contextmanager
def admin_client(cluster: Cluster) -> Iterator[Any]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        yield admin
    finally:
        admin.close()


def committed(admin: Any, group: str) -> dict[TopicPartition, int]:
    """Every committed offset of the group (OffsetFetch of all partitions)."""
    return {tp: m.offset for tp, m in admin.list_group_offsets(group)[group].items()}


def test_an_empty_groups_offsets_are_deleted_partition_by_partition(
    quick: Cluster, topic: str
) -> None:
    quick.create_topic(topic, partitions=2, replication_factor=3)
    group = group_of(topic)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with admin_client(quick) as admin:
        # offsets committed from outside group management: an Empty group
        admin.alter_group_offsets(
            group, {tp0: OffsetAndMetadata(5, "", -1), tp1: OffsetAndMetadata(7, "", -1)}
        )
        assert committed(admin, group) == {tp0: 5, tp1: 7}

        assert admin.delete_group_offsets(group, [tp0]) == {tp0: kafka.errors.NoError}
        assert committed(admin, group) == {tp1: 7}
        # a partition the cluster does not have: Kafka's UNKNOWN_TOPIC_OR_PARTITION for it
        past = TopicPartition(topic, 9)
        assert admin.delete_group_offsets(group, [past]) == {
            past: kafka.errors.UnknownTopicOrPartitionError
        }
        assert committed(admin, group) == {tp1: 7}

        # the last offset goes: so does the group, which is then not found
        assert admin.delete_group_offsets(group, [tp0, tp1]) == {
            tp0: kafka.errors.NoError,
            tp1: kafka.errors.NoError,
        }
        assert committed(admin, group) == {}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            admin.delete_group_offsets(group, [tp1])


def test_a_group_with_a_member_keeps_the_offsets_of_its_subscribed_topic(
    quick: Cluster, topic: str
) -> None:
    other = f"{topic}-other"
    quick.create_topic(topic, partitions=1, replication_factor=3)
    quick.create_topic(other, partitions=1, replication_factor=3)
    group = group_of(topic)
    subscribed, unsubscribed = TopicPartition(topic, 0), TopicPartition(other, 0)
    # a member polling on a thread of its own (see test_groups_kafka_python's Member)
    with members(quick, group, topic, 1) as (member,):
        wait_for_split([member], 1)
        # the member commits both (a member may commit any partition in its generation)
        offsets = {
            subscribed: OffsetAndMetadata(3, "", -1),
            unsubscribed: OffsetAndMetadata(4, "", -1),
        }
        member.call(lambda consumer: consumer.commit(offsets))
        with admin_client(quick) as admin:
            assert committed(admin, group) == {subscribed: 3, unsubscribed: 4}
            deleted = admin.delete_group_offsets(group, [subscribed, unsubscribed])
            assert deleted == {
                subscribed: kafka.errors.GroupSubscribedToTopicError,
                unsubscribed: kafka.errors.NoError,
            }
            assert committed(admin, group) == {subscribed: 3}
            assert admin.describe_groups([group])[group]["group_state"] == "Stable"


def test_an_unknown_group_is_not_found(quick: Cluster, topic: str) -> None:
    quick.create_topic(topic, partitions=1, replication_factor=3)
    with admin_client(quick) as admin, pytest.raises(kafka.errors.GroupIdNotFoundError):
        admin.delete_group_offsets(group_of(topic), [TopicPartition(topic, 0)])


def test_a_broker_that_is_not_the_coordinator_says_so(quick: Cluster, topic: str) -> None:
    """Sent to another broker, OffsetDelete is NOT_COORDINATOR (kafka-python raises it; it
    looks the coordinator up itself when not told which broker it is), and nothing goes."""
    quick.create_topic(topic, partitions=1, replication_factor=3)
    group = group_of(topic)
    tp = TopicPartition(topic, 0)
    elsewhere = next(b for b in quick.live_brokers() if b != coordinator_of(quick, group))
    with admin_client(quick) as admin:
        admin.alter_group_offsets(group, {tp: OffsetAndMetadata(2, "", -1)})
        with pytest.raises(kafka.errors.NotCoordinatorError):
            admin.delete_group_offsets(group, [tp], group_coordinator_id=elsewhere)
        assert committed(admin, group) == {tp: 2}
