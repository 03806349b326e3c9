"""The group coordinator's load window, as a real client meets it on a fresh cluster.

A new group's first OffsetFetch on a cluster without `__consumer_offsets`: FindCoordinator
creates the topic and answers COORDINATOR_NOT_AVAILABLE until some broker's metadata names a
leader for the group's partition; the client then asks that broker, which may not yet have
applied the controller's LeaderAndIsr. Kafka marks the partition loading inside that
LeaderAndIsr handling, so the answer is COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
librdkafka does not retry an OffsetFetch answered NOT_COORDINATOR: it hands the application
"Failed to get committed offsets: Broker: Not coordinator". Before kafkactor opened the
window at LeaderAndIsr, 7 of 20 fresh clusters gave librdkafka that error here.

Each round is a fresh cluster (the window exists only while the topic is new), 20 rounds per
client, as the issue that asked for this check says. The clusters keep Kafka's defaults except
`offsets.topic.replication.factor=1`: the window is the group's leader applying its
LeaderAndIsr, which the followers take no part in, and 150 replicas of the 50 partitions
instead of 50 made a round three times slower (over a second each). With the window closed
again (the loading mark at LeaderAndIsr removed), librdkafka still failed half the rounds at
replication factor 1, as at 3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

from kafkactor.testing import Cluster
from tests.wire.support import READ_S

LISTEN = "127.0.0.1"
ROUNDS = 20
TOPIC = "orders"
# the followers of __consumer_offsets play no part in the window, and each costs a log per
# partition on every fresh cluster
PROPERTIES = {"offsets.topic.replication.factor": "1"}
NO_OFFSET = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID: nothing committed


def confluent_committed(cluster: Cluster, group: str) -> tuple[Any, list[KafkaError]]:
    """librdkafka's OffsetFetch of a new group; errors its error callback saw."""
    errors: list[KafkaError] = []
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": group,
            "error_cb": errors.append,
        }
    )
    try:
        (found,) = consumer.committed([ConfluentPartition(TOPIC, 0)], timeout=READ_S)
        return (found.offset, found.error), errors
    finally:
        consumer.close()


def kafka_python_committed(cluster: Cluster, group: str) -> tuple[Any, list[KafkaError]]:
    """kafka-python's OffsetFetch of a new group (it raises what it does not retry)."""
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        group_id=group,
        enable_auto_commit=False,
        request_timeout_ms=int(READ_S * 1000),
    )
    try:
        return consumer.committed(KafkaPythonPartition(TOPIC, 0)), []
    finally:
        consumer.close()


CLIENTS: dict[str, tuple[Callable[[Cluster, str], tuple[Any, list[KafkaError]]], Any]] = {
    "confluent-kafka": (confluent_committed, (NO_OFFSET, None)),
    "kafka-python": (kafka_python_committed, None),
}


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_new_groups_first_offset_fetch_on_a_fresh_cluster_is_never_an_error(
    client: str,
) -> None:
    committed, nothing = CLIENTS[client]
    outcomes = []
    for round_ in range(ROUNDS):
        with Cluster(3, listen=LISTEN, properties=PROPERTIES) as cluster:
            cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
            try:
                outcomes.append(committed(cluster, f"group-{round_}"))
            except Exception as error:  # the client gave up: the outcome names why
                outcomes.append((repr(error), []))
    assert outcomes == [(nothing, [])] * ROUNDS
