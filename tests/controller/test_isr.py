"""Leaders change the ISR in ZooKeeper themselves, with versioned writes the controller hears of."""

from __future__ import annotations

from functools import partial

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.controller import zk_data
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.actors.runtime import addresses
from kafkactor.testing import Cluster
from tests.controller.support import (
    SESSION_TIMEOUT_MS,
    embedded_cluster,
    partition_metadata,
    registered_brokers,
    settled_controller,
    state_znode,
)
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    actor_ref,
    wait_until,
)


def _in_isr(cluster: Cluster, partition: int, broker: int) -> bool:
    return broker in cluster.isr(TOPIC, partition)


def _not_in_isr(cluster: Cluster, partition: int, broker: int) -> bool:
    return broker not in cluster.isr(TOPIC, partition)


def _metadata_isr_is(cluster: Cluster, broker: int, partition: int, isr: tuple[int, ...]) -> bool:
    """Whether `broker`'s metadata cache (a MetadataRequest) shows `isr` for the partition."""
    return partition_metadata(cluster, broker, TOPIC)[partition].isr == isr


def _log_end_is(cluster: Cluster, partition: int, broker: int, log_end: int) -> bool:
    return cluster.describe_partition(TOPIC, partition, broker=broker).log_end_offset == log_end


def _notifications(cluster: Cluster) -> tuple[list[str], int]:
    """The children of /isr_change_notification, and its cversion (creations + deletions)."""
    children = cluster._zk.get_children(zk_data.ISR_CHANGE_NOTIFICATION)
    stat = cluster._zk.exists(zk_data.ISR_CHANGE_NOTIFICATION)
    return sorted(children), int(stat.cversion)


def test_leader_shrinks_the_isr_in_zookeeper_and_the_controller_spreads_it(
    events: EventLog,
) -> None:
    # A long session: the crashed follower stays registered, so the leader (not the
    # controller, which would see the broker go) is the one that drops it from the ISR.
    with embedded_cluster(session_timeout_ms=10_000) as cluster:
        controller = settled_controller(cluster)
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
        leader = cluster.leader(TOPIC, 0)
        follower = next(b for b in cluster.isr(TOPIC, 0) if b not in (leader, controller))
        before, before_stat = state_znode(cluster, TOPIC, 0)
        assert sorted(before.isr) == [1, 2, 3]
        _, cversion_before = _notifications(cluster)

        cluster.kill_broker(follower)

        shrunk = tuple(b for b in before.isr if b != follower)
        wait_until(
            lambda: cluster.isr(TOPIC, 0) == shrunk, message="the ISR to shrink in ZooKeeper"
        )
        after, after_stat = state_znode(cluster, TOPIC, 0)
        # written by the leader: same leader and leader epoch (a controller bumps it), one
        # versioned write on top of the version the leader was given
        assert (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)
        assert after.controller_epoch == before.controller_epoch
        assert after_stat.version == before_stat.version + 1
        assert events.named(
            "partition.isr_shrink", broker=leader, topic=TOPIC, partition=0, removed=[follower]
        )
        assert not events.named("controller.isr_changed", topic=TOPIC)
        assert follower in registered_brokers(cluster)  # the controller had no reason to act
        # a notification was created, and the controller consumed (deleted) it
        wait_until(
            lambda: (n := _notifications(cluster))[0] == [] and n[1] >= cversion_before + 2,
            message="an ISR change notification to be created and consumed",
        )
        # the controller told the brokers: their metadata shows the new ISR
        for broker in cluster.live_brokers():
            wait_until(
                partial(_metadata_isr_is, cluster, broker, 0, shrunk),
                message=f"broker {broker}'s metadata to show ISR {shrunk}",
            )
        assert cluster.describe_partition(TOPIC, 0).isr == shrunk


def test_isr_write_with_a_stale_znode_version_leaves_the_isr_unchanged(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    leader = cluster.leader(TOPIC, 0)
    follower = next(b for b in cluster.isr(TOPIC, 0) if b != leader)
    path = zk_data.partition_state_path(TOPIC, 0)
    data, stat = cluster._zk.get(path)
    bumped = cluster._zk.set(path, data)  # same content, a version the leader does not know
    assert bumped.version == stat.version + 1
    isr = cluster.describe_partition(TOPIC, 0).isr

    cluster.isolate_broker(follower)  # the leader wants to drop it: its write must fail

    failed = wait_until(
        lambda: events.named("partition.isr_update_failed", broker=leader, topic=TOPIC),
        message="the leader's ISR write to fail",
    )
    assert failed[0]["error"] == "BadVersionError"
    assert failed[0]["zk_version"] == stat.version
    assert follower not in failed[0]["isr"]
    assert cluster.describe_partition(TOPIC, 0).isr == isr  # the leader kept its ISR
    assert not events.named("partition.isr_shrink", broker=leader, topic=TOPIC)
    data_now, stat_now = cluster._zk.get(path)
    assert (data_now, stat_now.version) == (data, bumped.version)  # nothing was written


def _isolate_the_follower_of_both_partitions(cluster: Cluster) -> tuple[int, dict[int, int]]:
    """RF 3, two partitions: isolate the broker that leads neither; it leaves both ISRs."""
    cluster.create_topic(TOPIC, partitions=2, replication_factor=3, config=MIN_ISR_2)
    leaders = {p: cluster.leader(TOPIC, p) for p in (0, 1)}
    (follower,) = {1, 2, 3} - set(leaders.values())
    cluster.isolate_broker(follower)
    for p in (0, 1):
        wait_until(
            partial(_not_in_isr, cluster, p, follower),
            message=f"the isolated broker to leave the ISR of partition {p}",
        )
    return follower, leaders


def test_isolated_follower_leaves_the_isr_while_its_session_stays_up(
    cluster: Cluster, events: EventLog
) -> None:
    controller = settled_controller(cluster)
    epoch = cluster.current_controller_epoch()
    follower, leaders = _isolate_the_follower_of_both_partitions(cluster)

    producer = cluster.producer(acks=-1, timeout_ms=3_000, retries=5, retry_backoff_ms=50)
    for p in (0, 1):
        assert follower not in cluster.describe_partition(TOPIC, p).isr
        shrunk = cluster.isr(TOPIC, p)
        wait_until(
            partial(_metadata_isr_is, cluster, controller, p, shrunk),
            message="the brokers' metadata to show the shrunk ISR",
        )
        # acks=all still works with the two others; the isolated broker does not get the record
        assert producer.send(TOPIC, b"isolated", partition=p).result(WAIT_S).offset == 0
        assert cluster.describe_partition(TOPIC, p, broker=follower).log_end_offset == 0
    # its session stayed up: still registered, no controller change, no leader moved
    assert registered_brokers(cluster) == [1, 2, 3]
    assert (cluster.controller_id(), cluster.current_controller_epoch()) == (controller, epoch)
    assert {p: cluster.leader(TOPIC, p) for p in (0, 1)} == leaders
    assert events.named("partition.isr_shrink", removed=[follower], topic=TOPIC)
    assert not events.named("controller.leader_elected", topic=TOPIC, reason="leader went offline")


# An idle follower's fetch waits in the leader's purgatory for 300 ms: long enough to be sure
# that a fetch the fetcher has just sent is still out when the isolation starts, so its
# answer is the one dropped. A fetch unanswered 300 + 500 ms after it was sent is given up.
LONG_POLL = BrokerConfig(
    replica=ReplicaManagerConfig(
        replica_lag_time_max_ms=400,
        replica_fetch_wait_max_ms=300,
        replica_fetch_backoff_ms=50,
        replica_socket_timeout_ms=500,
    )
)


def test_healed_follower_catches_up_and_rejoins_the_isr(events: EventLog) -> None:
    """Regression (found here, fixed in f78a51d): the answer to the fetch a follower had out
    when it was isolated is dropped; its fetcher waited for it forever, and never rejoined."""
    with Cluster(
        3, zookeeper="embedded", session_timeout_ms=SESSION_TIMEOUT_MS, config=LONG_POLL
    ) as cluster:
        settled_controller(cluster)
        cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
        leader = cluster.leader(TOPIC, 0)
        follower = next(b for b in (1, 2, 3) if b != leader)
        address = addresses.fetcher(follower, leader)
        # create_topic returns once the controller elected; the follower starts its fetcher
        # when its LeaderAndIsr arrives, a moment later
        wait_until(lambda: cluster.directory.resolve(address) is not None, message=address)
        fetcher = actor_ref(cluster, address).proxy()
        settled = wait_until(lambda: (n := fetcher.fetches.get(timeout=WAIT_S)) >= 3 and n)
        wait_until(  # isolate while a fresh long poll is out, as almost any moment would be
            lambda: fetcher.fetches.get(timeout=WAIT_S) > settled, message="a fresh fetch"
        )
        cluster.isolate_broker(follower)
        wait_until(
            partial(_not_in_isr, cluster, 0, follower),
            message="the isolated broker to leave the ISR",
        )
        producer = cluster.producer(acks=-1, timeout_ms=3_000, retries=5, retry_backoff_ms=50)
        assert producer.send(TOPIC, b"isolated", partition=0).result(WAIT_S).offset == 0
        assert cluster.describe_partition(TOPIC, 0, broker=follower).log_end_offset == 0

        cluster.heal_broker(follower)

        wait_until(  # at most the socket timeout, a backoff and a fetch or two
            partial(_log_end_is, cluster, 0, follower, 1),
            timeout_s=3.0,
            message="the healed follower to catch up",
        )
        wait_until(
            partial(_in_isr, cluster, 0, follower), message="the healed broker to rejoin the ISR"
        )
        assert cluster.leader(TOPIC, 0) == leader
        # the fetch whose answer was dropped was given up, not waited for forever
        fetcher_address = addresses.fetcher(follower, leader)
        assert events.named("fetcher.timeout", actor=fetcher_address, leader=leader)
