"""Topic ids in partition directories (KIP-516, Kafka 2.8 in ZooKeeper mode): every replica's
directory records its topic's id in `partition.metadata`, and a replica whose directory records
another topic's id (a stale log of an earlier topic of the same name) is refused with
INCONSISTENT_TOPIC_ID: it neither leads nor follows, and its log is left as it was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.kafka_uuid import uuid_from_string, uuid_to_string
from kafkactor.storage import PARTITION_METADATA_FILE, PartitionMetadataFile
from kafkactor.testing import Cluster
from tests.controller.support import embedded_cluster, settled_controller
from tests.replication.support import EventLog, wait_until

pytestmark = pytest.mark.timeout(60)

STALE_ID = uuid_from_string("Xc4ZxOuvRd2cZV0uAE5M-A")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with embedded_cluster() as started:
        settled_controller(started)
        yield started


def topic_id(cluster: Cluster, topic: str) -> str:
    data, _ = cluster._zk.get(zk_data.topic_path(topic))
    found = zk_data.decode_topic_id(topic, data)
    assert found is not None
    return uuid_to_string(found)


def replica_dir(cluster: Cluster, broker: int, topic: str, partition: int) -> Path:
    return cluster.data_dir / f"broker-{broker}" / f"{topic}-{partition}"


def test_every_replica_of_a_new_topic_records_the_topics_id(cluster: Cluster) -> None:
    topic = "ids-recorded"
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    expected = topic_id(cluster, topic)

    def recorded() -> dict[tuple[int, int], str | None]:
        found = {}
        for broker in (1, 2, 3):
            for partition in (0, 1):
                read = PartitionMetadataFile(replica_dir(cluster, broker, topic, partition)).read()
                found[broker, partition] = uuid_to_string(read) if read is not None else None
        return found

    # create_topic waits for the leaders; the followers apply their LeaderAndIsr alongside
    wait_until(lambda: set(recorded().values()) == {expected}, message="every replica's id")
    text = (replica_dir(cluster, 1, topic, 0) / PARTITION_METADATA_FILE).read_text()
    assert text == f"version: 0\ntopic_id: {expected}"


def test_a_replica_whose_directory_records_another_topic_id_is_refused(
    cluster: Cluster, events: EventLog
) -> None:
    topic = "ids-stale"
    cluster.create_topic(topic, assignments={0: (1, 2, 3)})
    current = topic_id(cluster, topic)
    directory = replica_dir(cluster, 3, topic, 0)
    wait_until(
        lambda: PartitionMetadataFile(directory).read() == uuid_from_string(current),
        message="broker 3's replica to record the id",
    )
    cluster.stop_broker(3)
    # broker 3's log now looks like one left by an earlier topic of this name, deleted while
    # the broker was down (as Kafka's test writes another id into the directory)
    PartitionMetadataFile(directory).write(STALE_ID)
    wait_until(lambda: cluster.isr(topic, 0) == (1, 2), message="broker 3 out of the ISR")
    mark = len(events.all())

    cluster.restart_broker(3)

    refused = wait_until(
        lambda: events.named("partition.inconsistent_topic_id", broker=3, topic=topic),
        message="broker 3 to refuse its stale replica",
    )[0]
    assert refused["level"] == "error"
    assert refused["log_topic_id"] == uuid_to_string(STALE_ID)
    assert refused["request_topic_id"] == current
    assert refused["dir"] == str(directory)
    # never rewritten with the new id; the replica neither follows nor fetches
    assert PartitionMetadataFile(directory).read() == STALE_ID
    after = events.all()[mark:]
    assert not [
        e
        for e in after
        if e["event"] in ("partition.become_follower", "partition.become_leader")
        and e.get("broker") == 3
        and e.get("topic") == topic
    ]
    described = cluster.describe_partition(topic, 0, broker=3)
    assert not described.is_leader
    assert described.leader_epoch == -1  # no decision applied
    assert cluster.isr(topic, 0) == (1, 2)  # it never rejoins
    # the other topics' replicas on broker 3 are served as usual
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    assert producer.send(topic, b"still-writable", partition=0).result(10).offset == 0
