"""Preferred replica election through ZooKeeper and the controller actor: the
`/admin/preferred_replica_election` znode, `Cluster.elect_leaders` and the automatic
leader rebalance (`auto.leader.rebalance.enable`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.controller.preferred_election_zk import (
    PREFERRED_REPLICA_ELECTION,
    encode_preferred_replica_election,
)
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.testing import Cluster, ControllerRequestError
from tests.controller.support import SESSION_TIMEOUT_MS, partition_metadata, settled_controller
from tests.replication.support import FAST, WAIT_S, EventLog, wait_until
from tests.test_events_schema import load_schema

pytestmark = pytest.mark.timeout(90)

VALIDATOR = jsonschema.Draft202012Validator(load_schema())


def _valid(*events: dict[str, object]) -> None:
    """The events as kafkactor/events.schema.json describes them."""
    for event in events:
        VALIDATOR.validate(event)


def _cluster(**controller: object) -> Cluster:
    config = dataclasses.replace(FAST, controller=ControllerConfig(**controller))  # type: ignore[arg-type]
    return Cluster(3, zookeeper="embedded", session_timeout_ms=SESSION_TIMEOUT_MS, config=config)


@pytest.fixture(scope="module")
def quiet() -> Iterator[Cluster]:
    """Three brokers whose controller never rebalances by itself."""
    with _cluster(auto_leader_rebalance_enable=False) as started:
        settled_controller(started)
        yield started


def _bounce_preferred(cluster: Cluster, topic: str, partition: int) -> int:
    """Restart the partition's preferred replica: another replica leads, and the preferred one
    is back in the ISR. Returns the preferred replica."""
    preferred = cluster.replicas(topic, partition)[0]
    assert cluster.leader(topic, partition) == preferred
    cluster.stop_broker(preferred)
    cluster.wait_for_leader(topic, partition, not_broker=preferred)
    cluster.restart_broker(preferred)
    wait_until(lambda: preferred in cluster.isr(topic, partition), message="back in the ISR")
    assert cluster.leader(topic, partition) != preferred
    return preferred


def _not_controller(cluster: Cluster) -> int:
    controller = settled_controller(cluster)
    return next(b for b in cluster.broker_ids if b != controller)


def test_the_znode_elects_the_partitions_it_lists_and_goes(
    quiet: Cluster, events: EventLog
) -> None:
    topic = "znode-elect"
    preferred = _not_controller(quiet)
    others = [b for b in quiet.broker_ids if b != preferred]
    quiet.create_topic(topic, assignments={0: (preferred, *others), 1: (preferred, *others)})
    _bounce_preferred(quiet, topic, 0)
    moved = quiet.leader(topic, 1)
    assert moved != preferred
    listed = [TopicPartition(topic=topic, partition=0), TopicPartition(topic="nope", partition=0)]
    quiet._zk.create(PREFERRED_REPLICA_ELECTION, encode_preferred_replica_election(listed))

    wait_until(
        lambda: quiet._zk.exists(PREFERRED_REPLICA_ELECTION) is None, message="znode deleted"
    )
    assert quiet.leader(topic, 0) == preferred
    assert quiet.leader(topic, 1) == moved  # not listed: not elected
    (event,) = events.named("controller.replica_election", trigger="zookeeper")
    assert event["elected"] == {f"{topic}-0": preferred}
    assert event["errors"] == {"UNKNOWN_TOPIC_OR_PARTITION": ["nope-0"]}
    _valid(event)

    # the watch is set again: a second request is served too
    quiet._zk.create(
        PREFERRED_REPLICA_ELECTION,
        encode_preferred_replica_election([TopicPartition(topic=topic, partition=1)]),
    )
    wait_until(lambda: quiet.leader(topic, 1) == preferred, message="partition 1 elected")
    wait_until(lambda: quiet._zk.exists(PREFERRED_REPLICA_ELECTION) is None, message="deleted")


def test_a_znode_left_while_no_controller_acts_is_processed_at_take_over(
    quiet: Cluster, events: EventLog
) -> None:
    """Only the active controller watches the znode: one created after it crashed is found
    by the next controller when it takes over (Kafka's onControllerFailover)."""
    topic = "takeover-elect"
    controller = settled_controller(quiet)
    epoch = quiet.current_controller_epoch()
    preferred = next(b for b in quiet.broker_ids if b != controller)
    third = next(b for b in quiet.broker_ids if b not in (controller, preferred))
    quiet.create_topic(topic, assignments={0: (preferred, third, controller)})
    _bounce_preferred(quiet, topic, 0)
    quiet.kill_broker(controller)  # its actors stop now; its session expires later
    try:
        listed = [TopicPartition(topic=topic, partition=0)]
        quiet._zk.create(PREFERRED_REPLICA_ELECTION, encode_preferred_replica_election(listed))
        successor = settled_controller(quiet, min_epoch=epoch)
        assert successor != controller
        wait_until(lambda: quiet.leader(topic, 0) == preferred, message="the preferred leader")
        wait_until(lambda: quiet._zk.exists(PREFERRED_REPLICA_ELECTION) is None, message="deleted")
        (event,) = events.named("controller.replica_election", trigger="zookeeper")
        assert event["broker"] == successor
        assert event["elected"] == {f"{topic}-0": preferred}
    finally:
        quiet.restart_broker(controller)
        settled_controller(quiet)


def test_a_malformed_znode_is_logged_and_deleted(quiet: Cluster, events: EventLog) -> None:
    quiet._zk.create(PREFERRED_REPLICA_ELECTION, b'{"version":1,"partitions":[{"topic":7}]}')
    wait_until(
        lambda: quiet._zk.exists(PREFERRED_REPLICA_ELECTION) is None, message="znode deleted"
    )
    (event,) = events.named("controller.bad_preferred_replica_election")
    assert "not a {'topic': string, 'partition': integer}" in event["error"]
    _valid(event)


def test_cluster_elect_leaders_answers_per_partition(quiet: Cluster) -> None:
    topic = "cluster-elect"
    preferred = _not_controller(quiet)
    others = [b for b in quiet.broker_ids if b != preferred]
    quiet.create_topic(
        topic, assignments={0: (preferred, *others), 1: (others[0], preferred, others[1])}
    )
    _bounce_preferred(quiet, topic, 0)

    # the ISR in ZooKeeper names the preferred replica before the controller has read its
    # change notification: until then the controller answers PREFERRED_LEADER_NOT_AVAILABLE,
    # as Kafka's does, and an administrator asks again
    asked: list[dict[tuple[str, int], Any]] = []

    def elected() -> bool:
        asked.append(quiet.elect_leaders([(topic, 0), (topic, 1), (topic, 9)]))
        code = asked[-1][(topic, 0)].error_code
        return code is not ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

    wait_until(elected, message="the controller saw the preferred replica back in the ISR")
    results = asked[-1]
    assert results[(topic, 0)].error_code is ErrorCode.NONE
    assert results[(topic, 0)].leader == preferred
    assert quiet.leader(topic, 0) == preferred
    # the controller's own broker had the UpdateMetadata queued before the answer: its cache
    # names the new leader at once (what Kafka's DelayedElectLeader waits for)
    controller = quiet.controller_id()
    assert controller is not None
    assert partition_metadata(quiet, controller, topic)[0].leader == preferred
    assert results[(topic, 1)].error_code is ErrorCode.ELECTION_NOT_NEEDED
    assert (results[(topic, 9)].error_code, results[(topic, 9)].error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The partition does not exist.",
    )
    # every partition: those needing no election are left out (other tests' bounces may
    # have left some partitions to elect: then the next call has none)
    everything = quiet.elect_leaders()
    assert all(r.error_code is ErrorCode.NONE for r in everything.values()), everything
    assert quiet.elect_leaders() == {}
    with pytest.raises(ValueError, match="election must be one of"):
        quiet.elect_leaders([(topic, 0)], election="random")


def test_the_preferred_replica_out_of_the_isr_is_not_available(quiet: Cluster) -> None:
    topic = "elect-dead"
    preferred = _not_controller(quiet)
    others = [b for b in quiet.broker_ids if b != preferred]
    quiet.create_topic(topic, assignments={0: (preferred, *others)})
    quiet.stop_broker(preferred)
    try:
        quiet.wait_for_leader(topic, 0, not_broker=preferred)
        (result,) = quiet.elect_leaders([(topic, 0)]).values()
        assert (result.error_code, result.error_message) == (
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            f"Failed to elect leader for partition {topic}-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        )
    finally:
        quiet.restart_broker(preferred)
        settled_controller(quiet)


def test_without_zookeeper_there_is_no_controller_to_ask() -> None:
    with Cluster(1, zookeeper=None) as cluster:
        cluster.create_topic("t")
        with pytest.raises(ControllerRequestError, match="needs ZooKeeper"):
            cluster.elect_leaders()


def test_auto_rebalance_moves_leadership_back_after_a_restart(events: EventLog) -> None:
    with _cluster(leader_imbalance_check_interval_seconds=1) as cluster:
        settled_controller(cluster)
        topic = "rebalanced"
        preferred = _not_controller(cluster)
        others = [b for b in cluster.broker_ids if b != preferred]
        cluster.create_topic(topic, assignments={0: (preferred, *others)})
        cluster.stop_broker(preferred)
        cluster.wait_for_leader(topic, 0, not_broker=preferred)
        cluster.restart_broker(preferred)
        wait_until(
            lambda: cluster.leader(topic, 0) == preferred,
            timeout_s=WAIT_S + 3,
            message="the preferred replica leads again",
        )
        elected = events.named("controller.replica_election", trigger="auto leader rebalance")
        assert elected
        checks = events.named("controller.leader_imbalance_check")
        assert any(check["to_elect"] == [f"{topic}-0"] for check in checks), checks
        _valid(*elected, *checks)
