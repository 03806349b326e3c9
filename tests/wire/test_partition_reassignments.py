"""Partition reassignment over Kafka's wire protocol (AlterPartitionReassignments, api key 45,
and ListPartitionReassignments, 46; KIP-455) with kafka-python's KafkaAdminClient at its
defaults: a move with every record readable afterwards from the new replicas, a listing while
a new replica cannot catch up, its cancellation, Kafka's refusals with the client's error
classes, and NOT_CONTROLLER from a broker that is not the controller."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.testing import Cluster
from tests.network.wire import (
    WireClient,
    alter_partition_reassignments_request,
    list_partition_reassignments_request,
)
from tests.replication.support import wait_until
from tests.wire.conftest import LISTEN

pytestmark = pytest.mark.timeout(120)

WAIT_S = 15.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(4, listen=LISTEN) as started:
        wait_until(lambda: started.controller_id() is not None, WAIT_S, "a controller")
        yield started


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def _topic() -> str:
    return f"reassign-{uuid.uuid4().hex[:8]}"


def _not_reassigning(admin: KafkaAdminClient) -> bool:
    return not admin.list_partition_reassignments()


def test_a_partition_moves_and_its_records_are_read_from_the_new_replicas(
    cluster: Cluster, admin: KafkaAdminClient
) -> None:
    topic = _topic()
    cluster.create_topic(topic, assignments={0: (1, 2, 3)})
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    sent = [f"v{i}".encode() for i in range(50)]
    for value in sent:
        producer.send(topic, value, partition=0)
    producer.flush(WAIT_S)
    tp = TopicPartition(topic, 0)

    assert admin.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
    wait_until(lambda: _not_reassigning(admin), WAIT_S, "the reassignment to complete")

    assert cluster.replicas(topic, 0) == (2, 3, 4)
    wait_until(lambda: not cluster._holds_topic(1, topic), WAIT_S, "broker 1's log deleted")
    producer.send(topic, b"after", partition=0).get(WAIT_S)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
    )
    consumer.assign([tp])
    read: list[bytes] = []

    def everything() -> bool:
        for records in consumer.poll(200).values():
            read.extend(r.value for r in records)
        return len(read) >= len(sent) + 1

    wait_until(everything, WAIT_S, "every record read back")
    consumer.close()
    assert read == [*sent, b"after"]


def test_listing_and_cancelling_a_reassignment_waiting_for_its_new_replica(
    cluster: Cluster, admin: KafkaAdminClient
) -> None:
    topic = _topic()
    cluster.create_topic(topic, assignments={0: (1, 2, 3)})
    tp = TopicPartition(topic, 0)
    cluster.isolate_broker(4)  # its fetches never arrive: it never joins the ISR
    try:
        assert admin.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
        ongoing = {tp: {"replicas": [2, 3, 4, 1], "adding_replicas": [4], "removing_replicas": [1]}}
        assert admin.list_partition_reassignments() == ongoing
        assert admin.list_partition_reassignments([tp, TopicPartition(topic, 5)]) == ongoing
        assert admin.list_partition_reassignments({topic: [0]}) == ongoing

        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert admin.list_partition_reassignments() == {}
        assert set(cluster.replicas(topic, 0)) == {1, 2, 3}
        assert admin.alter_partition_reassignments({tp: None}) == {
            tp: NoReassignmentInProgressError
        }
    finally:
        cluster.heal_broker(4)
    wait_until(lambda: not cluster._holds_topic(4, topic), WAIT_S, "the added replica deleted")


def test_refusals_come_back_as_the_clients_error_classes(
    cluster: Cluster, admin: KafkaAdminClient
) -> None:
    topic = _topic()
    cluster.create_topic(topic, assignments={0: (1, 2)})
    unknown = TopicPartition(topic, 3)
    dead = TopicPartition(topic, 0)
    assert admin.alter_partition_reassignments({dead: [1, 9], unknown: [1, 2]}) == {
        dead: InvalidReplicationAssignmentError,
        unknown: UnknownTopicOrPartitionError,
    }
    with pytest.raises(ValueError, match="must be non-empty"):  # the client's own check
        admin.alter_partition_reassignments({dead: []})
    assert cluster.replicas(topic, 0) == (1, 2)


def test_messages_and_not_controller_on_the_wire(cluster: Cluster) -> None:
    topic = _topic()
    cluster.create_topic(topic, assignments={0: (1, 2)})
    controller = cluster.controller_id()
    assert controller is not None
    other = next(b for b in cluster.broker_ids if b != controller)
    servers = cluster.bootstrap_servers.split(",")
    host, port = servers[other - 1].rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        refused = client.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            alter_partition_reassignments_request(0, {topic: {0: [2]}}),
        )
        listed = client.call(
            ApiKey.LIST_PARTITION_REASSIGNMENTS,
            0,
            list_partition_reassignments_request(0),
        )
    # Kafka 2.8: a top-level error, no partition answered
    assert (refused.error_code, refused.responses) == (ErrorCode.NOT_CONTROLLER, ())
    assert refused.error_message == "This is not the correct controller for this cluster."
    assert (listed.error_code, listed.topics) == (ErrorCode.NOT_CONTROLLER, ())
    host, port = servers[controller - 1].rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        answer = client.call(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            0,
            alter_partition_reassignments_request(0, {topic: {0: [1, 1]}}),
        )
    assert answer.error_code == ErrorCode.NONE
    ((entry,),) = [t.partitions for t in answer.responses]
    assert entry.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert entry.error_message == (
        "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(1, 1)"
    )
