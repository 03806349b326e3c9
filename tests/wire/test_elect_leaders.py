"""Preferred replica election over Kafka's wire protocol (ElectLeaders, api key 43) with
kafka-python's and confluent-kafka's admin clients at their defaults, through the
`/admin/preferred_replica_election` znode, and by the controller itself
(`auto.leader.rebalance.enable`).

The preferred replica of a partition (its first assigned) is restarted, so another replica
leads; an election makes it lead again, and a produce and consume through it work.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.errors import PreferredLeaderNotAvailableError

from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.controller.preferred_election_zk import (
    PREFERRED_REPLICA_ELECTION,
    encode_preferred_replica_election,
)
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.testing import Cluster
from tests.network.wire import WireClient, elect_leaders_request
from tests.replication.support import FAST, wait_until
from tests.wire.conftest import FAILOVER_SESSION_TIMEOUT_MS, LISTEN

pytestmark = pytest.mark.timeout(120)

WAIT_S = 15.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Three brokers whose controller never rebalances by itself: leadership comes back only
    when asked for."""
    config = dataclasses.replace(
        FAST, controller=ControllerConfig(auto_leader_rebalance_enable=False)
    )
    with Cluster(
        3, listen=LISTEN, config=config, session_timeout_ms=FAILOVER_SESSION_TIMEOUT_MS
    ) as started:
        wait_until(lambda: started.controller_id() is not None, WAIT_S, "a controller")
        yield started


def _topic() -> str:
    return f"elect-{uuid.uuid4().hex[:8]}"


def _not_controller(cluster: Cluster) -> int:
    controller = wait_until(cluster.controller_id, WAIT_S, "a controller")
    return next(b for b in cluster.broker_ids if b != controller)


def _moved_topic(cluster: Cluster) -> tuple[str, int]:
    """A topic whose partition 0 prefers a broker that is not the controller, and which that
    broker no longer leads (it restarted), though it is back in the ISR."""
    topic = _topic()
    preferred = _not_controller(cluster)
    others = [b for b in cluster.broker_ids if b != preferred]
    cluster.create_topic(topic, assignments={0: (preferred, *others)})
    cluster.stop_broker(preferred)
    cluster.wait_for_leader(topic, 0, not_broker=preferred)
    cluster.restart_broker(preferred)
    wait_until(lambda: preferred in cluster.isr(topic, 0), WAIT_S, "back in the ISR")
    assert cluster.leader(topic, 0) != preferred
    return topic, preferred


def _produce_and_consume(cluster: Cluster, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    try:
        producer.send(topic, b"after-election", partition=0).get(timeout=WAIT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cluster.bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(WAIT_S * 1000),
    )
    try:
        values = []
        for message in consumer:  # stops at the first match (or after consumer_timeout_ms)
            values.append(message.value)
            if message.value == b"after-election":
                break
        assert b"after-election" in values
    finally:
        consumer.close()


def _partition_errors(response: object) -> dict[tuple[str, int], int]:
    return {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results  # type: ignore[attr-defined]
        for p in r.partition_result
    }


# -- kafka-python -------------------------------------------------------------------------------


def test_kafka_python_elects_the_preferred_replica_back(cluster: Cluster) -> None:
    topic, preferred = _moved_topic(cluster)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        response = admin.elect_leaders(0, {topic: [0]})
        assert _partition_errors(response) == {(topic, 0): 0}
        assert cluster.leader(topic, 0) == preferred
        _produce_and_consume(cluster, topic)

        # again: nothing to do, which kafka-python reports without raising
        again = admin.elect_leaders(0, {topic: [0]})
        assert _partition_errors(again) == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED}
    finally:
        admin.close()


def test_kafka_python_raises_preferred_leader_not_available(cluster: Cluster) -> None:
    topic = _topic()
    preferred = _not_controller(cluster)
    others = [b for b in cluster.broker_ids if b != preferred]
    cluster.create_topic(topic, assignments={0: (preferred, *others)})
    cluster.stop_broker(preferred)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        cluster.wait_for_leader(topic, 0, not_broker=preferred)
        with pytest.raises(PreferredLeaderNotAvailableError):
            admin.elect_leaders(0, {topic: [0]})
        assert cluster.leader(topic, 0) != preferred
    finally:
        admin.close()
        cluster.restart_broker(preferred)
        wait_until(lambda: preferred in cluster.isr(topic, 0), WAIT_S, "back in the ISR")


# -- confluent-kafka ----------------------------------------------------------------------------


def test_confluent_kafka_elects_the_preferred_replica_back(cluster: Cluster) -> None:
    topic, preferred = _moved_topic(cluster)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    asked = [ConfluentTopicPartition(topic, 0)]

    elected = admin.elect_leaders(ElectionType.PREFERRED, asked).result(WAIT_S)
    assert {(tp.topic, tp.partition): error for tp, error in elected.items()} == {(topic, 0): None}
    assert cluster.leader(topic, 0) == preferred
    _produce_and_consume(cluster, topic)

    again = admin.elect_leaders(ElectionType.PREFERRED, asked).result(WAIT_S)
    (error,) = again.values()
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED

    # every partition (null): only those where an election happened or failed are reported
    # (other tests' restarts may have left partitions to elect: the second call has none)
    everything = admin.elect_leaders(ElectionType.PREFERRED, None).result(WAIT_S)
    assert all(error is None for error in everything.values()), everything
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(WAIT_S) == {}


def test_confluent_kafka_reports_preferred_leader_not_available(cluster: Cluster) -> None:
    topic = _topic()
    preferred = _not_controller(cluster)
    others = [b for b in cluster.broker_ids if b != preferred]
    cluster.create_topic(topic, assignments={0: (preferred, *others)})
    cluster.stop_broker(preferred)
    try:
        cluster.wait_for_leader(topic, 0, not_broker=preferred)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        result = admin.elect_leaders(
            ElectionType.PREFERRED, [ConfluentTopicPartition(topic, 0)]
        ).result(WAIT_S)
        (error,) = result.values()
        assert error.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
        assert "PreferredReplicaPartitionLeaderElectionStrategy" in error.str()
    finally:
        cluster.restart_broker(preferred)
        wait_until(lambda: preferred in cluster.isr(topic, 0), WAIT_S, "back in the ISR")


# -- a broker that is not the controller --------------------------------------------------------


def test_a_broker_that_is_not_the_controller_answers_not_controller(cluster: Cluster) -> None:
    topic, preferred = _moved_topic(cluster)
    other = _not_controller(cluster)
    host, port = cluster.bootstrap_servers.split(",")[other - 1].rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        response = client.call(ApiKey.ELECT_LEADERS, 2, elect_leaders_request(2, {topic: [0]}))
    assert response.error_code == ErrorCode.NONE  # Kafka 2.8: per partition, not at the top
    assert _partition_errors(response) == {(topic, 0): ErrorCode.NOT_CONTROLLER}
    assert cluster.leader(topic, 0) != preferred


# -- ZooKeeper ----------------------------------------------------------------------------------


def test_the_znode_elects_the_preferred_replica_back(cluster: Cluster) -> None:
    topic, preferred = _moved_topic(cluster)
    zk = cluster._zk  # the cluster's own ZooKeeper session, as an operator's tool would have
    listed = [TopicPartition(topic=topic, partition=0)]
    zk.create(PREFERRED_REPLICA_ELECTION, encode_preferred_replica_election(listed))
    wait_until(lambda: cluster.leader(topic, 0) == preferred, WAIT_S, "the preferred leader")
    wait_until(lambda: zk.exists(PREFERRED_REPLICA_ELECTION) is None, WAIT_S, "znode deleted")
    _produce_and_consume(cluster, topic)


# -- auto.leader.rebalance.enable ---------------------------------------------------------------


def test_auto_rebalance_moves_leadership_back_without_an_admin_call() -> None:
    properties = {"leader.imbalance.check.interval.seconds": "1"}
    with Cluster(
        3,
        listen=LISTEN,
        properties=properties,
        session_timeout_ms=FAILOVER_SESSION_TIMEOUT_MS,
    ) as rebalancing:
        assert rebalancing.config.controller.leader_imbalance_check_interval_seconds == 1
        topic = _topic()
        preferred = _not_controller(rebalancing)
        others = [b for b in rebalancing.broker_ids if b != preferred]
        rebalancing.create_topic(topic, assignments={0: (preferred, *others)})
        rebalancing.stop_broker(preferred)
        rebalancing.wait_for_leader(topic, 0, not_broker=preferred)
        rebalancing.restart_broker(preferred)
        wait_until(
            lambda: rebalancing.leader(topic, 0) == preferred, WAIT_S, "the preferred leader"
        )
        _produce_and_consume(rebalancing, topic)


# -- unclean (election_type 1) ------------------------------------------------------------------


def _offline_topic(cluster: Cluster) -> tuple[str, int, int]:
    """A topic on the two brokers that are not the controller, offline: its follower stopped
    (the ISR shrank to the leader), then its leader stopped, then the follower restarted. The
    follower is live and out of the ISR. Returns (topic, old leader, follower)."""
    topic = _topic()
    controller = wait_until(cluster.controller_id, WAIT_S, "a controller")
    leader, follower = (b for b in cluster.broker_ids if b != controller)
    cluster.create_topic(topic, assignments={0: (leader, follower)})
    cluster.stop_broker(follower)
    wait_until(lambda: cluster.isr(topic, 0) == (leader,), WAIT_S, "the ISR shrunk")
    cluster.stop_broker(leader)
    wait_until(lambda: cluster.leader(topic, 0) == -1, WAIT_S, "the partition offline")
    cluster.restart_broker(follower)
    wait_until(lambda: follower in cluster.live_brokers(), WAIT_S, "the follower back")
    assert cluster.leader(topic, 0) == -1
    return topic, leader, follower


def test_kafka_python_unclean_election_makes_a_live_out_of_sync_replica_lead(
    cluster: Cluster,
) -> None:
    topic, leader, follower = _offline_topic(cluster)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        response = admin.elect_leaders(1, {topic: [0]})
        assert _partition_errors(response) == {(topic, 0): 0}
        assert (cluster.leader(topic, 0), cluster.isr(topic, 0)) == (follower, (follower,))
        _produce_and_consume(cluster, topic)
        again = admin.elect_leaders(1, {topic: [0]})  # it has a live leader now
        assert _partition_errors(again) == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED}
    finally:
        admin.close()
        cluster.restart_broker(leader)


def test_confluent_kafka_unclean_election_with_no_live_replica_is_not_available(
    cluster: Cluster,
) -> None:
    topic, leader, follower = _offline_topic(cluster)
    cluster.stop_broker(follower)
    try:
        wait_until(lambda: follower not in cluster.registered_brokers(), WAIT_S, "it left")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        result = admin.elect_leaders(
            ElectionType.UNCLEAN, [ConfluentTopicPartition(topic, 0)]
        ).result(WAIT_S)
        (error,) = result.values()
        assert error.code() == KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE
        assert "OfflinePartitionLeaderElectionStrategy(true)" in error.str()
    finally:
        cluster.restart_broker(follower)
        cluster.restart_broker(leader)
