"""A replica manager checks each LeaderAndIsr's topic ids against its replicas' directories
(KIP-516, Kafka 2.8's `checkOrSetTopicId`): the partition whose `partition.metadata` records
another id is answered INCONSISTENT_TOPIC_ID, the request's other partitions are applied."""

from __future__ import annotations

from collections.abc import Iterator

import jsonschema
import pytest

from kafkactor.common import PartitionLeaderState
from kafkactor.kafka_uuid import random_uuid, uuid_from_string, uuid_to_string
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import LeaderAndIsr, LeaderAndIsrResponse, TopicIdentity
from kafkactor.storage import PartitionMetadataFile
from kafkactor.testing import Cluster
from kafkactor.testing.cluster import CLUSTER_CONTROLLER_ID, ControllerRequestError
from tests.replication.support import FAST, EventLog
from tests.test_events_schema import load_schema

pytestmark = pytest.mark.timeout(60)

STALE_ID = uuid_from_string("Xc4ZxOuvRd2cZV0uAE5M-A")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, config=FAST, zookeeper=None) as started:
        yield started


def leader_state(cluster: Cluster, topic: str, broker: int) -> PartitionLeaderState:
    """The broker's sole replica of `topic`-0 led again, in the next leader epoch."""
    return PartitionLeaderState(
        topic=topic,
        partition=0,
        controller_epoch=cluster.controller_epoch,
        leader=broker,
        leader_epoch=cluster.partition_states[topic, 0].leader_epoch + 1,
        isr=(broker,),
        replicas=(broker,),
    )


def test_only_the_partition_with_another_topic_id_is_refused(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic("ids-mixed", assignments={0: (2,)})
    cluster.create_topic("ids-fine", assignments={0: (2,)})
    recorded = uuid_from_string(cluster.topic_ids["ids-mixed"])
    other = uuid_to_string(random_uuid())  # as if "ids-mixed" had been deleted and re-created
    request = LeaderAndIsr(
        controller_id=CLUSTER_CONTROLLER_ID,
        controller_epoch=cluster.controller_epoch,
        partition_states=(
            leader_state(cluster, "ids-mixed", 2),
            leader_state(cluster, "ids-fine", 2),
        ),
        topic_ids=(
            TopicIdentity(topic="ids-mixed", topic_id=other),
            TopicIdentity(topic="ids-fine", topic_id=cluster.topic_ids["ids-fine"]),
        ),
    )

    response = cluster._result(2, cluster._request(2, request))

    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code is ErrorCode.NONE
    assert {(p.topic, p.error_code) for p in response.partitions} == {
        ("ids-mixed", ErrorCode.INCONSISTENT_TOPIC_ID),
        ("ids-fine", ErrorCode.NONE),
    }
    [refused] = events.named("partition.inconsistent_topic_id", broker=2)
    jsonschema.validate(refused, load_schema())  # the event as docs/events.md publishes it
    assert (refused["topic"], refused["partition"]) == ("ids-mixed", 0)
    assert refused["log_topic_id"] == uuid_to_string(recorded)
    assert refused["request_topic_id"] == other
    directory = cluster.data_dir / "broker-2" / "ids-mixed-0"
    assert PartitionMetadataFile(directory).read() == recorded  # never rewritten
    # the refused replica kept its old decision; the other one applied the new epoch
    assert cluster.describe_partition("ids-mixed", 0, broker=2).leader_epoch == (
        cluster.partition_states["ids-mixed", 0].leader_epoch
    )
    assert cluster.describe_partition("ids-fine", 0, broker=2).leader_epoch == (
        cluster.partition_states["ids-fine", 0].leader_epoch + 1
    )


def test_a_restarted_broker_with_a_stale_log_is_refused_for_it(
    cluster: Cluster, events: EventLog
) -> None:
    """Without ZooKeeper the Cluster is the controller: it reports the refusal."""
    cluster.create_topic("ids-restart", assignments={0: (1, 3)})
    follower = 3
    cluster.stop_broker(follower)
    PartitionMetadataFile(cluster.data_dir / f"broker-{follower}" / "ids-restart-0").write(STALE_ID)
    with pytest.raises(ControllerRequestError, match="INCONSISTENT_TOPIC_ID"):
        cluster.restart_broker(follower)
    assert events.named("partition.inconsistent_topic_id", broker=follower, topic="ids-restart")

    # LeaderAndIsr before v5 (or a topic sent with the zero uuid) carries no id: Kafka checks
    # nothing and applies it, whatever the directory records
    state = cluster.partition_states["ids-restart", 0]
    request = LeaderAndIsr(
        controller_id=CLUSTER_CONTROLLER_ID,
        controller_epoch=cluster.controller_epoch,
        partition_states=(state,),
    )
    response = cluster._result(follower, cluster._request(follower, request))
    assert isinstance(response, LeaderAndIsrResponse)
    assert [p.error_code for p in response.partitions] == [ErrorCode.NONE]
    assert cluster.describe_partition("ids-restart", 0, broker=follower).leader == 1
