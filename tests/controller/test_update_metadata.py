"""UpdateMetadata carries the partitions a decision changed, not the whole cluster each time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.messages.base import Envelope
from kafkactor.messages.replication import UpdateMetadata
from kafkactor.testing import Cluster
from tests.controller.support import embedded_cluster, partition_metadata, settled_controller

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with embedded_cluster() as started:
        settled_controller(started)
        yield started


def _watch_update_metadata(cluster: Cluster) -> list[tuple[str, UpdateMetadata]]:
    """Every UpdateMetadata the brokers are sent from now on, with its address (the
    Directory's drop hook, delivering everything)."""
    seen: list[tuple[str, UpdateMetadata]] = []

    def observe(address: str, message: object) -> bool:
        payload = message.payload if isinstance(message, Envelope) else message
        if isinstance(payload, UpdateMetadata):
            seen.append((address, payload))
        return False

    cluster.directory.drop = observe
    return seen


def test_a_topic_created_is_sent_with_its_own_partitions_alone(cluster: Cluster) -> None:
    cluster.create_topic("um-first", partitions=4, replication_factor=3)
    seen = _watch_update_metadata(cluster)
    try:
        cluster.create_topic("um-second", partitions=2, replication_factor=3)
    finally:
        cluster.directory.drop = None
    creations = [
        (address, m)
        for address, m in seen
        if any(s.topic == "um-second" for s in m.partition_states)
    ]
    assert sorted(address for address, _ in creations) == [
        addresses.replica_manager(b) for b in (1, 2, 3)
    ]  # one to each live broker
    for _, message in creations:
        assert {(s.topic, s.partition) for s in message.partition_states} == {
            ("um-second", 0),
            ("um-second", 1),
        }
        assert [i.topic for i in message.topic_ids] == ["um-second"]
        assert message.live_brokers == (1, 2, 3)
    # every broker still answers Metadata for the topic it was told of before
    for broker in (1, 2, 3):
        assert len(partition_metadata(cluster, broker, "um-first")) == 4
        assert len(partition_metadata(cluster, broker, "um-second")) == 2
