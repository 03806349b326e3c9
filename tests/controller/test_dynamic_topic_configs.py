"""Dynamic topic configs through ZooKeeper: `/config/topics/<t>` rewritten with a change
notification under `/config/changes`, which every broker's DynamicConfigManager picks up and
applies to its running logs and partitions (Kafka's TopicConfigHandler); and the same
`Cluster.alter_topic_config` without ZooKeeper. The notification format and its sequence
bookkeeping are tested as pure functions first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from types import SimpleNamespace
from typing import cast

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kazoo.client import KazooClient

from kafkactor import zk_model
from kafkactor.actors.controller import ZooKeeperSession, zk_data
from kafkactor.actors.controller.config_changes import (
    CONFIG_CHANGES,
    ChangeNotificationSequence,
    EntityConfigChange,
    change_topic_config,
    decode_config_change,
    encode_config_change,
)
from kafkactor.actors.controller.dynamic_config_manager import DynamicConfigManagerActor
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.clients import ProduceError
from kafkactor.messages import ErrorCode
from kafkactor.storage import Log
from kafkactor.testing import Cluster
from kafkactor.timer import SystemClock
from kafkactor.zk_model import EmbeddedZooKeeper
from tests.controller.support import (
    controller_view,
    embedded_cluster,
    partition_without,
    settled_controller,
)
from tests.network.split_cluster import split_cluster
from tests.replication.support import FAST, WAIT_S, EventLog, wait_until
from tests.zk_conformance.conftest import RealServer

pytestmark = pytest.mark.timeout(90)

# retention checked every 100 ms, so a lowered retention.ms shows within a test's patience
PROPERTIES = {"log.retention.check.interval.ms": "100"}
SMALL_SEGMENTS = {"segment.bytes": "200"}  # a few records per segment

# -- the notification format and sequence (pure) -------------------------------------------------


def test_a_notification_is_kafkas_version_2_and_version_1_is_read_too() -> None:
    data = encode_config_change("topics", "orders")
    assert data == b'{"version":2,"entity_path":"topics/orders"}'
    assert decode_config_change("/p", data) == EntityConfigChange("topics", "orders")
    old = b'{"version":1,"entity_type":"topics","entity_name":"orders"}'
    assert decode_config_change("/p", old) == EntityConfigChange("topics", "orders")
    # a user/client quota path keeps its slashes in the name
    nested = b'{"version":2,"entity_path":"users/alice/clients/app"}'
    assert decode_config_change("/p", nested) == EntityConfigChange("users", "alice/clients/app")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"version":3,"entity_path":"topics/x"}', "unsupported version 3"),
        (b'{"version":2}', "invalid entity_path"),
        (b'{"version":1,"entity_type":"topics"}', "entity_type and entity_name"),
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
    ],
)
def test_a_notification_kafka_would_not_read_is_malformed(data: bytes, reason: str) -> None:
    with pytest.raises(zk_data.MalformedZnodeError, match=reason):
        decode_config_change("/config/changes/config_change_0000000001", data)


def test_the_sequence_gives_only_notifications_above_the_last_processed_in_order() -> None:
    sequence = ChangeNotificationSequence()
    children = ["config_change_0000000002", "config_change_0000000000", "other", "config_change_x"]
    assert sequence.pending(children) == ["config_change_0000000000", "config_change_0000000002"]
    sequence.processed("config_change_0000000000")
    sequence.processed("config_change_0000000002")
    assert sequence.pending([*children, "config_change_0000000001"]) == []
    assert sequence.pending(["config_change_0000000003"]) == ["config_change_0000000003"]


def test_notifications_older_than_the_expiration_are_obsolete() -> None:
    sequence = ChangeNotificationSequence(expiration_ms=15 * 60 * 1000)
    created = {"config_change_0000000001": 1_000, "config_change_0000000002": 900_000}
    now = 1_000 + 15 * 60 * 1000 + 1
    assert sequence.obsolete(created, now) == ["config_change_0000000001"]


def test_the_listener_processes_what_is_there_at_start_and_purges_expired_notifications(
    events: EventLog,
) -> None:
    """One DynamicConfigManagerActor on its own: notifications written before it starts are
    processed when it starts; with an expiration already passed, each is deleted after its
    round (Kafka's purgeObsoleteNotifications)."""
    zookeeper = EmbeddedZooKeeper()
    client = zk_model.connect("embedded", embedded=zookeeper)
    directory = Directory()
    ref = None
    try:
        client.create(
            zk_data.topic_config_path("early"), b'{"version":1,"config":{"a":"1"}}', makepath=True
        )
        change_topic_config(client, "early", {"retention.ms": "5"})
        session = cast(ZooKeeperSession, SimpleNamespace(client=client))
        address = addresses.dynamic_config_manager(1)
        ref = DynamicConfigManagerActor.start(
            address, directory, SystemClock(), 1, zk=session, expiration_ms=-1
        )
        directory.register(address, ref)
        wait_until(lambda: client.get_children(CONFIG_CHANGES) == [], message="purged")
        (processed,) = events.named("config_change.processed")
        assert processed["overrides"] == {"retention.ms": "5"}
        assert processed["notification"] == "config_change_0000000000"
        change_topic_config(client, "early", {"retention.ms": "6"})  # the watch is set again
        wait_until(lambda: len(events.named("config_change.processed")) == 2, message="next")
        wait_until(lambda: client.get_children(CONFIG_CHANGES) == [], message="purged again")
    finally:
        if ref is not None:
            ref.stop()
        client.stop()
        client.close()


# -- through ZooKeeper --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, config=FAST, properties=PROPERTIES, session_timeout_ms=600) as started:
        settled_controller(started)
        yield started


def _fill(cluster: Cluster, topic: str, count: int, *, acks: int = 1) -> None:
    producer = cluster.producer(acks=acks)
    for i in range(count):
        producer.send(topic, f"record-{i:04d}".encode() * 4, partition=0).result(WAIT_S)


def _one_segment(log: Log) -> bool:
    return len(log.segments) == 1


def _segments(cluster: Cluster, broker: int, topic: str) -> int:
    return len(cluster.brokers[broker].logs[f"{topic}-0"].segments)


def test_a_lower_retention_deletes_old_segments_on_every_replica(cluster: Cluster) -> None:
    topic = "retained"
    cluster.create_topic(topic, 1, 3, config=SMALL_SEGMENTS)
    _fill(cluster, topic, 30, acks=-1)
    for broker in cluster.broker_ids:
        assert _segments(cluster, broker, topic) > 5
    cluster.alter_topic_config(topic, {"retention.ms": "1"})
    for broker in cluster.broker_ids:
        log = cluster.brokers[broker].logs[f"{topic}-0"]
        assert log.config.retention_ms == 1
        assert log.config.segment_bytes == 200  # the other override stays
        wait_until(partial(_one_segment, log), message="old segments deleted")
        assert log.log_start_offset > 0


def test_a_lower_segment_bytes_rolls_at_the_next_append(cluster: Cluster) -> None:
    topic = "rolled"
    cluster.create_topic(topic, 1, 2)
    _fill(cluster, topic, 3)
    leader = cluster.leader(topic, 0)
    assert _segments(cluster, leader, topic) == 1
    cluster.alter_topic_config(topic, {"segment.bytes": "100"})
    _fill(cluster, topic, 3)
    assert _segments(cluster, leader, topic) >= 3


def test_the_znodes_are_kafkas_and_a_deleted_override_reverts_to_the_default(
    cluster: Cluster,
) -> None:
    topic = "znodes"
    cluster.create_topic(topic, 1, 1, config={"retention.ms": "60000"})
    before = set(cluster._zk.get_children(CONFIG_CHANGES))
    cluster.alter_topic_config(topic, {"segment.bytes": "1000", "retention.ms": None})
    data, _ = cluster._zk.get(zk_data.topic_config_path(topic))
    assert json.loads(data) == {"version": 1, "config": {"segment.bytes": "1000"}}
    (added,) = set(cluster._zk.get_children(CONFIG_CHANGES)) - before
    assert added.startswith("config_change_") and added[len("config_change_") :].isdigit()
    notification, _ = cluster._zk.get(f"{CONFIG_CHANGES}/{added}")
    assert json.loads(notification) == {"version": 2, "entity_path": f"topics/{topic}"}
    (log,) = [b.logs[f"{topic}-0"] for b in cluster.brokers.values() if f"{topic}-0" in b.logs]
    assert log.config.retention_ms == cluster.config.log_manager.default_log_config.retention_ms
    assert cluster.topic_config(topic) == {"segment.bytes": "1000"}


def test_min_insync_replicas_raised_above_the_isr_refuses_acks_all(cluster: Cluster) -> None:
    topic = "guarded"
    cluster.create_topic(topic, 1, 2)
    _fill(cluster, topic, 1, acks=-1)
    cluster.alter_topic_config(topic, {"min.insync.replicas": "3"})
    producer = cluster.producer(acks=-1, retries=0)
    with pytest.raises(ProduceError) as refused:
        producer.send(topic, b"x", partition=0).result(WAIT_S)
    assert refused.value.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    cluster.alter_topic_config(topic, {"min.insync.replicas": None})
    producer.send(topic, b"y", partition=0).result(WAIT_S)


def test_a_broker_down_during_the_change_opens_its_logs_with_it(cluster: Cluster) -> None:
    topic = "restarted"
    cluster.create_topic(topic, 1, 3)
    _fill(cluster, topic, 2, acks=-1)
    down = cluster.replicas(topic, 0)[-1]
    cluster.stop_broker(down)
    cluster.alter_topic_config(topic, {"max.message.bytes": "5000"})
    broker = cluster.restart_broker(down)
    wait_until(lambda: f"{topic}-0" in broker.logs, message="the replica back")
    assert broker.logs[f"{topic}-0"].config.max_message_bytes == 5000


def test_a_new_zookeeper_session_watches_again(cluster: Cluster) -> None:
    topic = "resession"
    cluster.create_topic(topic, 1, 3)
    expired = cluster.replicas(topic, 0)[1]
    cluster.expire_session(expired)
    wait_until(lambda: sorted(cluster.registered_brokers()) == cluster.broker_ids, WAIT_S)
    cluster.alter_topic_config(topic, {"flush.messages": "7"})
    log = cluster.brokers[expired].logs[f"{topic}-0"]
    assert log.config.flush_interval_messages == 7


def test_a_notification_kafka_cannot_read_is_logged_and_skipped(
    cluster: Cluster, events: EventLog
) -> None:
    topic = "skipped"
    cluster.create_topic(topic, 1, 1)
    cluster._zk.create(f"{CONFIG_CHANGES}/config_change_", b'{"version":9}', sequence=True)
    wait_until(
        lambda: len(events.named("config_change.invalid")) == 3, message="each broker's event"
    )
    assert "unsupported version 9" in events.named("config_change.invalid")[0]["error"]
    cluster.alter_topic_config(topic, {"retention.bytes": "1000000"})  # later ones still work
    processed = events.named("config_change.processed", entity=f"topics/{topic}")
    assert {e["broker"] for e in processed} == set(cluster.broker_ids)
    assert processed[0]["overrides"] == {"retention.bytes": "1000000"}


def test_unclean_election_enabled_on_an_offline_partition_elects_a_live_replica() -> None:
    """Kafka 2.8's TopicConfigHandler tells the controller, which elects the topic's offline
    partitions from their live out-of-sync replicas at once."""
    with embedded_cluster() as cluster:
        controller = settled_controller(cluster)
        cluster.create_topic("offline", 3, 2)
        p = partition_without(cluster, "offline", 3, controller)
        leader, follower = cluster.replicas("offline", p)
        cluster.kill_broker(follower)
        wait_until(lambda: cluster.isr("offline", p) == (leader,), message="ISR = the leader")
        cluster.kill_broker(leader)
        wait_until(lambda: cluster.leader("offline", p) == -1, message="the partition offline")
        cluster.restart_broker(follower)

        def sees_follower() -> bool:
            view = controller_view(cluster, controller)
            return view is not None and follower in view["live_brokers"]

        wait_until(sees_follower, message="the controller to see the follower back")
        assert cluster.leader("offline", p) == -1  # out of sync: no clean election
        cluster.alter_topic_config("offline", {"unclean.leader.election.enable": "true"})
        wait_until(lambda: cluster.leader("offline", p) == follower, message="unclean leader")


def test_brokers_sharing_only_zookeeper_apply_an_alter_configs_sent_to_one() -> None:
    """A broker process's wiring (its own Directory and ZkTopicConfigs, the AdminZkClient):
    the change reaches every broker through ZooKeeper alone, and a broker restarted
    afterwards opens its log with it."""
    with split_cluster(3, config=FAST) as split:
        split.admin.create_topic("split", 1, 3, {"segment.bytes": "100000"})

        def logs() -> list[Log | None]:
            return [s.broker.logs.get("split-0") for s in split.brokers.values()]

        wait_until(lambda: all(logs()), message="every replica open")
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{split.brokers[1].port}")
        try:
            resource = ConfigResource(
                ConfigResourceType.TOPIC, "split", {"max.message.bytes": "4000"}
            )
            assert admin.alter_configs([resource]) == {"topic": {"split": "OK"}}
        finally:
            admin.close()

        def applied() -> bool:
            found = logs()
            return all(
                log is not None
                and (log.config.max_message_bytes, log.config.segment_bytes) == (4000, 100000)
                for log in found
            )

        wait_until(applied, message="every broker's log to take the new config")
        split.brokers[3].stop()
        restarted = split.restart(3)
        wait_until(lambda: "split-0" in restarted.broker.logs, message="the replica back")
        assert restarted.broker.logs["split-0"].config.max_message_bytes == 4000


def test_a_topic_created_again_after_its_deletion_takes_its_new_config() -> None:
    """Brokers forget a deleted topic's config (a broker process caches what it read of
    `/config/topics/<t>`), so the same name created again opens with the new one."""
    with split_cluster(3, config=FAST) as split:

        def segment_bytes() -> list[int]:
            logs = [s.broker.logs.get("again-0") for s in split.brokers.values()]
            return [log.config.segment_bytes for log in logs if log is not None]

        split.admin.create_topic("again", 1, 3, {"segment.bytes": "100000"})
        wait_until(lambda: segment_bytes() == [100000] * 3, message="every replica open")
        split.admin.delete_topic("again")
        split.admin.create_topic("again", 1, 3, {"segment.bytes": "200000"})
        wait_until(lambda: len(segment_bytes()) == 3, message="every replica open again")
        assert segment_bytes() == [200000] * 3


def test_a_config_change_on_a_real_zookeeper(real_zookeeper: RealServer) -> None:
    """Sequential notification znodes, their ctime and the watches as a real server has them."""
    with Cluster(2, zookeeper=real_zookeeper.hosts, session_timeout_ms=1000, config=FAST) as real:
        assert isinstance(real._zk, KazooClient)
        settled_controller(real)
        real.create_topic("real", 1, 2)
        real.alter_topic_config("real", {"retention.bytes": "123456"})
        (notification,) = real._zk.get_children(CONFIG_CHANGES)
        assert notification == "config_change_0000000000"
        data, _ = real._zk.get(f"{CONFIG_CHANGES}/{notification}")
        assert json.loads(data) == {"version": 2, "entity_path": "topics/real"}
        real.alter_topic_config("real", {"retention.bytes": None})
        for broker in real.brokers.values():
            assert broker.logs["real-0"].config.retention_bytes == -1


# -- without ZooKeeper ----------------------------------------------------------------------------


def test_without_zookeeper_the_cluster_tells_the_brokers_itself() -> None:
    with Cluster(2, zookeeper=None, properties=PROPERTIES) as cluster:
        cluster.create_topic("plain", 1, 2, config=SMALL_SEGMENTS)
        _fill(cluster, "plain", 20)
        cluster.alter_topic_config("plain", {"retention.ms": "1"})
        for broker in cluster.brokers.values():
            log = broker.logs["plain-0"]
            wait_until(partial(_one_segment, log), message="old segments deleted")
        assert cluster.topic_config("plain") == {"segment.bytes": "200", "retention.ms": "1"}
