"""Topic deletion as Kafka's ZooKeeper-era controller does it: `/admin/delete_topics/<t>`, the
partitions offline, UpdateMetadata with LEADER_DURING_DELETE, StopReplica(delete_partitions)
to every replica (a dead one when its broker comes back), then the topic's znodes go."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafkactor.actors.controller import ControllerState, zk_data
from kafkactor.actors.replication.metadata_cache import MetadataCache
from kafkactor.clients import ProduceError
from kafkactor.common import LEADER_DURING_DELETE, PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import UpdateMetadata
from kafkactor.testing import Cluster, ControllerRequestError, TopicExistsError, UnknownTopicError
from tests.controller.support import (
    controller_view,
    partition_metadata,
    read_partition,
    settled_controller,
)
from tests.replication.support import FAST, TOPIC, WAIT_S, EventLog, wait_until
from tests.zk_conformance.conftest import RealServer

PARTITIONS = 2


def _log_dirs(cluster: Cluster, broker: int, topic: str) -> list[str]:
    """The topic's log directories in a broker's data dir."""
    return sorted(p.name for p in Path(cluster.data_dir, f"broker-{broker}").glob(f"{topic}-*"))


def _znodes(cluster: Cluster, topic: str) -> dict[str, bool]:
    """Which of the topic's znodes exist."""
    paths = {
        "topic": zk_data.topic_path(topic),
        "config": zk_data.topic_config_path(topic),
        "marked": zk_data.delete_topic_path(topic),
    }
    return {name: cluster._zk.exists(path) is not None for name, path in paths.items()}


def _produce(cluster: Cluster, topic: str, values: list[bytes], partition: int = 0) -> list[int]:
    producer = cluster.producer(acks=-1)
    return [producer.send(topic, v, partition=partition).result(WAIT_S).offset for v in values]


def _unknown_to_producers(cluster: Cluster, topic: str) -> ErrorCode:
    with pytest.raises(ProduceError) as refused:
        cluster.producer().send(topic, b"late", partition=0).result(WAIT_S)
    return refused.value.error_code


# -- with ZooKeeper ----------------------------------------------------------------------------


def test_deleting_a_topic_removes_its_logs_znodes_and_metadata(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    before = {p: cluster.leader(TOPIC, p) for p in range(PARTITIONS)}
    writer = cluster.producer(acks=-1)
    for p in range(PARTITIONS):
        writer.send(TOPIC, b"doomed", partition=p).result(WAIT_S)
    assert all(_log_dirs(cluster, b, TOPIC) == [f"{TOPIC}-0", f"{TOPIC}-1"] for b in (1, 2, 3))

    cluster.delete_topic(TOPIC)

    for broker in (1, 2, 3):
        assert _log_dirs(cluster, broker, TOPIC) == []
        assert partition_metadata(cluster, broker, TOPIC) == {}
    assert _znodes(cluster, TOPIC) == {"topic": False, "config": False, "marked": False}
    controller = settled_controller(cluster)
    view = controller_view(cluster, controller)
    assert view is not None and view["deleting_topics"] == []
    # a producer that knew the topic is told by its old leader; a new one by the metadata
    with pytest.raises(ProduceError) as refused:
        writer.send(TOPIC, b"late", partition=0).result(WAIT_S)
    assert refused.value.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _unknown_to_producers(cluster, TOPIC) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # the partitions went offline first, then the topic went
    for p in range(PARTITIONS):
        (offline,) = events.named(
            "controller.leader_elected", topic=TOPIC, partition=p, reason="topic deletion"
        )
        assert (offline["leader"], offline["previous_leader"]) == (-1, before[p])
    (started,) = events.named("controller.topic_deletion_started", topic=TOPIC)
    assert (started["partitions"], started["replicas"], started["waiting_for"]) == (
        2,
        [1, 2, 3],
        [],
    )
    assert events.named("controller.topic_deleted", topic=TOPIC)
    assert events.named("cluster.topic_deleted", topic=TOPIC, pending=[])


def test_a_replica_on_a_dead_broker_is_deleted_when_it_comes_back(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    for p in range(PARTITIONS):
        _produce(cluster, TOPIC, [b"doomed"], partition=p)
    victim = next(b for b in (1, 2, 3) if b != settled_controller(cluster))
    cluster.kill_broker(victim)
    settled_controller(cluster)  # the controller has seen its session expire

    cluster.delete_topic(TOPIC)

    # the live brokers are done; the dead one's replicas wait, and so do the topic's znodes
    for broker in cluster.live_brokers():
        assert _log_dirs(cluster, broker, TOPIC) == []
        assert partition_metadata(cluster, broker, TOPIC) == {}
    assert _log_dirs(cluster, victim, TOPIC) == [f"{TOPIC}-0", f"{TOPIC}-1"]
    assert _znodes(cluster, TOPIC) == {"topic": True, "config": True, "marked": True}
    with pytest.raises(TopicExistsError):
        cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
    (started,) = events.named("controller.topic_deletion_started", topic=TOPIC)
    assert started["waiting_for"] == [victim]
    assert events.named("cluster.topic_deleted", topic=TOPIC, pending=[victim])
    assert not events.named("controller.topic_deleted", topic=TOPIC)

    cluster.restart_broker(victim)

    wait_until(
        lambda: _znodes(cluster, TOPIC) == {"topic": False, "config": False, "marked": False},
        message="the deletion to complete once the broker is back",
    )
    assert _log_dirs(cluster, victim, TOPIC) == []
    assert partition_metadata(cluster, victim, TOPIC) == {}
    assert events.named("controller.topic_deleted", topic=TOPIC)


def test_a_new_controller_resumes_a_deletion_and_elects_nothing_for_it(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    old = settled_controller(cluster)
    old_epoch = cluster.current_controller_epoch()
    victim = next(b for b in (1, 2, 3) if b != old)
    cluster.kill_broker(victim)
    settled_controller(cluster)
    cluster.delete_topic(TOPIC)
    since = len(events.all())

    cluster.stop_broker(old)  # the controller goes while the deletion waits for the victim
    new = settled_controller(cluster, min_epoch=old_epoch)
    view = controller_view(cluster, new)
    assert view is not None and view["deleting_topics"] == [TOPIC]
    cluster.restart_broker(victim)
    cluster.restart_broker(old)

    wait_until(
        lambda: _znodes(cluster, TOPIC) == {"topic": False, "config": False, "marked": False},
        message="the new controller to finish the deletion",
    )
    for broker in (1, 2, 3):
        assert _log_dirs(cluster, broker, TOPIC) == []
    # the new controller never gave the topic being deleted a leader
    later = events.all()[since:]
    assert not [
        e
        for e in later
        if e["event"] == "controller.leader_elected" and e["topic"] == TOPIC and e["leader"] >= 0
    ]
    assert events.named("controller.topic_deleted", topic=TOPIC, broker=new)


def test_a_topic_created_again_under_its_old_name_starts_from_an_empty_log(
    cluster: Cluster,
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    assert _produce(cluster, TOPIC, [f"old-{i}".encode() for i in range(5)]) == [0, 1, 2, 3, 4]
    cluster.delete_topic(TOPIC)

    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)

    assert _produce(cluster, TOPIC, [b"new-0", b"new-1"]) == [0, 1]
    assert read_partition(cluster, TOPIC, 0) == {0: b"new-0", 1: b"new-1"}
    for broker in (1, 2, 3):  # acks=-1: every replica of the ISR (all three) has both
        described = cluster.describe_partition(TOPIC, 0, broker=broker)
        assert (described.log_start_offset, described.log_end_offset) == (0, 2)


def test_deleting_an_unknown_topic_is_a_typed_error_and_a_stray_mark_is_removed(
    cluster: Cluster, events: EventLog
) -> None:
    with pytest.raises(UnknownTopicError):
        cluster.delete_topic("never-created")
    with pytest.raises(ValueError):  # UnknownTopicError is a ValueError
        cluster.delete_topic("../escape")
    # a mark written by another tool for a topic that does not exist is just removed
    cluster._zk.create(zk_data.delete_topic_path("ghost"), b"", makepath=True)
    wait_until(
        lambda: cluster._zk.exists(zk_data.delete_topic_path("ghost")) is None,
        message="the controller to remove the stray mark",
    )
    assert events.named("controller.topic_deletion_ignored", topic="ghost")


def test_deletion_on_a_real_zookeeper(real_zookeeper: RealServer) -> None:
    with Cluster(3, zookeeper=real_zookeeper.hosts, config=FAST) as cluster:
        assert isinstance(cluster._zk, KazooClient)  # really on the server, not the model
        settled_controller(cluster)
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        _produce(cluster, TOPIC, [b"doomed"])

        cluster.delete_topic(TOPIC)

        assert _znodes(cluster, TOPIC) == {"topic": False, "config": False, "marked": False}
        for broker in (1, 2, 3):
            assert _log_dirs(cluster, broker, TOPIC) == []
            assert partition_metadata(cluster, broker, TOPIC) == {}
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        assert _produce(cluster, TOPIC, [b"new"]) == [0]


# -- without ZooKeeper -------------------------------------------------------------------------


def test_deletion_without_zookeeper() -> None:
    with Cluster(3, zookeeper=None, config=FAST, request_timeout_s=WAIT_S) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=2)
        cluster.create_topic("kept", partitions=1, replication_factor=3)
        for p in range(PARTITIONS):
            _produce(cluster, TOPIC, [b"doomed"], partition=p)

        cluster.delete_topic(TOPIC)

        assert sorted(cluster.partition_states) == [("kept", 0)]
        for broker in (1, 2, 3):
            assert _log_dirs(cluster, broker, TOPIC) == []
            assert partition_metadata(cluster, broker, TOPIC) == {}
            assert sorted(partition_metadata(cluster, broker, "kept")) == [0]
        assert _unknown_to_producers(cluster, TOPIC) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        with pytest.raises(UnknownTopicError):
            cluster.delete_topic(TOPIC)

        cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        assert _produce(cluster, TOPIC, [b"new"]) == [0]

        # without a controller nobody would delete a dead broker's replica later: refused
        holder = cluster.replicas("kept", 0)[0]
        cluster.kill_broker(holder)
        with pytest.raises(ControllerRequestError):
            cluster.delete_topic("kept")
        assert ("kept", 0) in cluster.partition_states


# -- the pure parts ----------------------------------------------------------------------------


def test_controller_state_keeps_a_topic_being_deleted_out_of_elections() -> None:
    state = ControllerState()
    state.brokers_changed({1, 2, 3})
    state.add_topic("t", {0: (1, 2), 1: (2, 3)})
    state.add_topic("u", {0: (1, 3)})
    t0, t1 = (TopicPartition(topic="t", partition=p) for p in (0, 1))

    changes = state.begin_deletion("t")

    assert [(c.after.partition, c.after.leader, c.after.leader_epoch) for c in changes] == [
        (0, -1, 1),
        (1, -1, 1),
    ]
    assert [c.after.isr for c in changes] == [(1, 2), (2, 3)]  # the ISR is kept
    assert state.begin_deletion("t") == []  # already under way
    assert sorted(state.partitions) == [TopicPartition(topic="u", partition=0)]
    assert state.topics() == {"t", "u"} and state.deleting_topics() == {"t"}
    # a broker dying or returning decides nothing for the topic being deleted
    assert [c.after.topic for c in state.brokers_changed({2, 3})] == ["u"]
    assert [c.after.topic for c in state.brokers_changed({1, 2, 3})] == []  # u-0 has a leader
    assert state.deletions_on(1) == [t0]
    assert state.deletions_on(2) == [t0, t1]

    for key, broker in ((t0, 2), (t1, 2), (t1, 3), (t1, 9)):
        state.replica_deleted(key, broker)
    assert state.deleted_topics() == []  # broker 1's replica of t-0 is still there
    state.replica_deleted(t0, 1)
    assert state.deleted_topics() == ["t"]

    state.finish_deletion("t")
    assert state.topics() == {"u"} and state.deleting == {} and state.undeleted == {}
    again = state.add_topic("t", {0: (3,)})  # the name is free: a new topic, epoch 0
    assert [(c.before, c.after.leader, c.after.leader_epoch) for c in again] == [(None, 3, 0)]


def test_metadata_cache_forgets_partitions_sent_with_the_leader_during_delete() -> None:
    cache = MetadataCache()

    def state(topic: str, partition: int, leader: int) -> PartitionLeaderState:
        return PartitionLeaderState(
            topic=topic, partition=partition, leader=leader, isr=(1,), replicas=(1,)
        )

    cache.update(
        UpdateMetadata(
            partition_states=(state("t", 0, 1), state("t", 1, 1), state("u", 0, 1)),
            live_brokers=(1,),
        )
    )
    cache.update(
        UpdateMetadata(
            partition_states=(state("t", 0, LEADER_DURING_DELETE), state("u", 0, 1)),
            live_brokers=(1,),
        )
    )
    assert not cache.knows("t", 0) and cache.knows("t", 1)
    cache.update(UpdateMetadata(partition_states=(state("t", 1, LEADER_DURING_DELETE),)))
    assert "t" not in cache.partitions
    (t,) = cache.topic_metadata(("t",))
    assert t.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # an UpdateMetadata may repeat a deletion, also to a broker that never knew the topic
    cache.update(UpdateMetadata(partition_states=(state("t", 1, LEADER_DURING_DELETE),)))
    assert sorted(cache.partitions) == ["u"]
