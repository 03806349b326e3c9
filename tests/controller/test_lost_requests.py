"""A controller request lost on its way to a live broker is not lost for good.

Kafka's controller sends each LeaderAndIsr and UpdateMetadata again, 100 ms apart, until it
gets through, for as long as the broker is live. Without that, a request cut off with its
connection (a broker restarted on another address, a reset) leaves that broker out of a
partition until some later decision mentions it: it never fetches and drops out of the ISR,
or its metadata never names the topic. Here the network's answer (NETWORK_EXCEPTION) makes
the controller send the broker its partitions and the metadata again, as they stand then.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.messages.replication import LeaderAndIsr, UpdateMetadata
from kafkactor.testing import Cluster, ControllerRequestError
from tests.controller.support import partition_metadata
from tests.replication.support import MIN_ISR_2, EventLog, wait_until

TOPIC = "lost"


@contextmanager
def _topic_created_losing_first(
    cluster: Cluster, kind: type[LeaderAndIsr] | type[UpdateMetadata], broker: int
) -> Iterator[None]:
    """Create TOPIC (RF 3) while the first `kind` naming it on its way to `broker`'s replica
    manager is lost (`Directory.drop`: the sender is answered NETWORK_EXCEPTION, as a cut
    connection is); the block runs once it was, and the losses end with it."""
    lost: list[int] = []

    def drop(address: str, message: Any) -> bool:
        payload = getattr(message, "payload", message)
        if lost or address != addresses.replica_manager(broker) or not isinstance(payload, kind):
            return False
        if not any(state.topic == TOPIC for state in payload.partition_states):
            return False
        lost.append(payload.correlation_id)
        return True

    cluster.directory.drop = drop
    try:
        cluster.create_topic(TOPIC, 1, 3, MIN_ISR_2)
        wait_until(lambda: lost, message=f"broker {broker}'s {kind.__name__} lost")
        yield
    finally:
        cluster.directory.drop = None


def _replicated(cluster: Cluster, broker: int, offset: int) -> bool:
    try:
        found = cluster.describe_partition(TOPIC, 0, broker=broker)
    except ControllerRequestError:  # no replica there: its LeaderAndIsr never arrived
        return False
    return found.log_end_offset >= offset


@pytest.mark.timeout(60)
def test_a_lost_leader_and_isr_reaches_the_live_broker_again(
    cluster: Cluster, events: EventLog
) -> None:
    with _topic_created_losing_first(cluster, LeaderAndIsr, 3):
        producer = cluster.producer(acks=-1)
        try:
            producer.send(TOPIC, b"acknowledged", partition=0).result(10)
        finally:
            producer.close()
        # broker 3 follows all the same, and holds the acknowledged record
        wait_until(lambda: _replicated(cluster, 3, 1), message="broker 3 replicates the record")
    assert events.named("controller.resend", to_broker=3)
    assert 3 in cluster.describe_partition(TOPIC, 0).isr


@pytest.mark.timeout(60)
def test_a_lost_update_metadata_reaches_the_live_broker_again(
    cluster: Cluster, events: EventLog
) -> None:
    with _topic_created_losing_first(cluster, UpdateMetadata, 2):
        # broker 2's metadata names the topic's leader all the same
        leader = cluster.leader(TOPIC, 0)
        wait_until(
            lambda: (
                partition_metadata(cluster, 2, TOPIC).get(0) is not None
                and partition_metadata(cluster, 2, TOPIC)[0].leader == leader
            ),
            message="broker 2's metadata names the leader",
        )
    assert events.named("controller.resend", to_broker=2)
