"""Kafka's controller decisions (`ControllerState`): elections, ISR shrink, offline partitions.

The reference is Kafka 0.9's controller: the OfflinePartitionLeaderSelector picks the first live
ISR member in ISR order and keeps the live ISR; with no live ISR member a partition goes offline
(leader -1, ISR kept) unless unclean.leader.election.enable lets the first live assigned replica
lead with ISR = [it]; a dead follower leaves the ISR of partitions whose leader lives; every change
bumps the leader epoch; a new partition is led by its first live replica with its live replicas
as ISR at epoch 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.actors.controller import ControllerState, LeadershipChange
from kafkactor.common import NO_LEADER, PartitionLeaderState, TopicPartition

BROKERS = (1, 2, 3, 4, 5)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def controller(live: Iterable[int] = (1, 2, 3)) -> ControllerState:
    """A controller that knows `live` brokers and no partition yet."""
    state = ControllerState()
    assert state.brokers_changed(live) == []
    return state


def leadership(
    *,
    topic: str = "t",
    partition: int = 0,
    replicas: tuple[int, ...] = (1, 2, 3),
    leader: int = 1,
    leader_epoch: int = 0,
    isr: tuple[int, ...] = (1, 2, 3),
    zk_version: int = 0,
) -> PartitionLeaderState:
    return PartitionLeaderState(
        topic=topic,
        partition=partition,
        replicas=replicas,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=isr,
        zk_version=zk_version,
    )


def only_change(changes: list[LeadershipChange]) -> LeadershipChange:
    assert len(changes) == 1, changes
    return changes[0]


# -- PartitionLeaderState ------------------------------------------------------------------------


def test_partition_leadership_key_and_online() -> None:
    led = leadership(topic="orders", partition=4, leader=2)
    assert led.topic_partition == tp("orders", 4)
    assert led.online
    assert not leadership(leader=NO_LEADER).online


# -- new topics ------------------------------------------------------------------------------------


def test_new_partition_led_by_first_live_replica_with_live_replicas_as_isr() -> None:
    state = controller(live={2, 3})
    changes = state.add_topic("t", {1: (3, 1, 2), 0: (1, 2, 3)})

    assert [c.after.topic_partition for c in changes] == [tp("t", 0), tp("t", 1)]
    assert all(c.before is None and not c.unclean for c in changes)
    p0, p1 = (c.after for c in changes)
    assert (p0.leader, p0.isr, p0.leader_epoch, p0.replicas) == (2, (2, 3), 0, (1, 2, 3))
    assert (p1.leader, p1.isr, p1.leader_epoch, p1.replicas) == (3, (3, 2), 0, (3, 1, 2))
    assert state.partitions == {tp("t", 0): p0, tp("t", 1): p1}


def test_add_topic_does_not_re_add_known_partitions() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)})
    state.brokers_changed({2, 3})  # 1 dies: partition 0 is now led by 2 at epoch 1
    known = state.partitions[tp("t", 0)]

    changes = state.add_topic("t", {0: (1, 2, 3), 1: (3, 2)})

    assert [c.after.topic_partition for c in changes] == [tp("t", 1)]
    assert state.partitions[tp("t", 0)] == known
    assert (known.leader, known.leader_epoch) == (2, 1)


def test_new_partition_without_live_replica_is_led_when_a_replica_starts() -> None:
    state = controller(live={9})
    (created,) = state.add_topic("t", {0: (1, 2)})
    assert not created.after.online

    change = only_change(state.brokers_changed({2, 9}))

    assert (change.after.leader, change.after.isr) == (2, (2,))
    assert state.partitions[tp("t", 0)].online


# -- leader death ----------------------------------------------------------------------------------


def test_leader_death_elects_first_live_isr_member() -> None:
    state = controller(live={1, 2, 3})
    (created,) = state.add_topic("t", {0: (1, 2, 3)})

    change = only_change(state.brokers_changed({2, 3}))

    assert change.before == created.after
    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (2, (2, 3), 1)
    assert not change.unclean
    assert state.partitions[tp("t", 0)] == change.after
    assert state.offline_partitions() == []


def test_isr_order_not_replica_order_decides_the_new_leader() -> None:
    state = controller(live={1, 2, 3, 4})
    state.load(leadership(replicas=(1, 2, 3, 4), leader=1, leader_epoch=5, isr=(1, 4, 3, 2)))

    change = only_change(state.brokers_changed({2, 3, 4}))

    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (4, (4, 3, 2), 6)


def test_leader_and_follower_dying_together_leaves_only_live_isr() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)})

    change = only_change(state.brokers_changed({3}))

    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (3, (3,), 1)


def test_leader_and_whole_isr_dead_goes_offline_keeping_isr() -> None:
    state = controller(live={1, 2, 3})
    state.load(leadership(replicas=(1, 2, 3), leader=1, leader_epoch=4, isr=(1, 2)))

    change = only_change(state.brokers_changed({3}))

    # 3 is alive but not in the ISR, and the topic does not allow unclean elections.
    offline = change.after
    assert (offline.leader, offline.isr, offline.leader_epoch) == (NO_LEADER, (1, 2), 5)
    assert not change.unclean
    assert state.offline_partitions() == [offline]
    assert state.brokers_changed({3}) == []
    assert state.partitions[tp("t", 0)] == offline


def test_isr_member_returning_leads_again_with_epochs_increasing_throughout() -> None:
    state = controller(live={1, 2, 3})
    (created,) = state.add_topic("t", {0: (1, 2, 3)})
    history = [created.after]

    def step(live: set[int]) -> list[LeadershipChange]:
        changes = state.brokers_changed(live)
        history.extend(c.after for c in changes)
        return changes

    step({1, 2})  # follower 3 dies: ISR (1, 2)
    step({2})  # leader 1 dies: 2 leads, ISR (2,)
    step(set())  # 2 dies: offline, ISR (2,) kept
    assert step({1, 3}) == []  # 1 and 3 are back but were not in the last ISR
    assert state.offline_partitions() == [state.partitions[tp("t", 0)]]
    step({1, 2, 3})  # 2 returns and leads again

    assert [(s.leader, s.isr) for s in history] == [
        (1, (1, 2, 3)),
        (1, (1, 2)),
        (2, (2,)),
        (NO_LEADER, (2,)),
        (2, (2,)),
    ]
    assert [s.leader_epoch for s in history] == [0, 1, 2, 3, 4]
    assert state.offline_partitions() == []


def test_unclean_election_lets_first_live_assigned_replica_lead_alone() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)}, unclean=True)
    shrunk = only_change(state.brokers_changed({1})).after
    assert (shrunk.leader, shrunk.isr) == (1, (1,))

    change = only_change(state.brokers_changed({3, 2}))

    # Assignment order decides (2 before 3), and the ISR restarts from the new leader alone.
    assert change.unclean
    assert (change.after.leader, change.after.isr) == (2, (2,))
    assert change.after.leader_epoch == shrunk.leader_epoch + 1
    assert state.partitions[tp("t", 0)] == change.after


def test_unclean_off_stays_offline_although_a_non_isr_replica_is_alive() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)}, unclean=False)
    state.brokers_changed({1})

    change = only_change(state.brokers_changed({2, 3}))

    assert not change.unclean
    assert (change.after.leader, change.after.isr) == (NO_LEADER, (1,))
    assert state.offline_partitions() == [change.after]

    back = only_change(state.brokers_changed({1, 2, 3}))
    assert (back.after.leader, back.after.isr) == (1, (1,))
    assert back.after.leader_epoch == change.after.leader_epoch + 1
    assert not back.unclean


def test_unclean_topic_offline_partition_is_led_by_a_returning_non_isr_replica() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)}, unclean=True)
    state.brokers_changed({1})
    offline = only_change(state.brokers_changed(set())).after
    assert (offline.leader, offline.isr) == (NO_LEADER, (1,))

    change = only_change(state.brokers_changed({3}))

    assert change.unclean
    assert (change.after.leader, change.after.isr) == (3, (3,))
    assert change.after.leader_epoch == offline.leader_epoch + 1


def test_unclean_setting_is_per_topic() -> None:
    state = controller(live={1, 2})
    state.add_topic("dirty", {0: (1, 2)}, unclean=True)
    state.add_topic("clean", {0: (1, 2)})
    state.brokers_changed({1})  # both ISRs shrink to (1,)

    changes = state.brokers_changed({2})

    after = {c.after.topic: c for c in changes}
    assert after["dirty"].unclean
    assert after["dirty"].after.leader == 2
    assert not after["clean"].unclean
    assert after["clean"].after.leader == NO_LEADER
    assert state.unclean_topics == {"dirty"}


# -- follower death --------------------------------------------------------------------------------


def test_follower_death_shrinks_isr_and_keeps_leader() -> None:
    state = controller(live={1, 2, 3})
    (created,) = state.add_topic("t", {0: (1, 2, 3)})

    change = only_change(state.brokers_changed({1, 3}))

    assert change.before == created.after
    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (1, (1, 3), 1)
    assert change.after.replicas == (1, 2, 3)
    assert not change.unclean


def test_all_followers_dying_leaves_the_leader_alone_in_isr() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (2, 1, 3)})

    change = only_change(state.brokers_changed({2}))

    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (2, (2,), 1)


def test_follower_outside_isr_dying_changes_nothing() -> None:
    state = controller(live={1, 2, 3})
    state.load(leadership(leader=1, isr=(1, 2), leader_epoch=3))

    assert state.brokers_changed({1, 2}) == []
    assert state.partitions[tp("t", 0)].leader_epoch == 3


def test_returning_follower_does_not_rejoin_isr_by_itself() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)})
    shrunk = only_change(state.brokers_changed({1, 3})).after

    # The leader adds a caught-up follower back to the ISR, not the controller.
    assert state.brokers_changed({1, 2, 3}) == []
    assert state.partitions[tp("t", 0)] == shrunk


def test_unchanged_broker_set_reports_nothing() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)})
    before = dict(state.partitions)

    assert state.brokers_changed([3, 2, 1]) == []
    assert state.brokers_changed({1, 2, 3, 4}) == []  # a broker without replicas joins
    assert state.partitions == before


# -- many partitions -------------------------------------------------------------------------------


def test_one_broker_change_affects_every_partition_it_leads_or_follows() -> None:
    state = controller(live={1, 2, 3, 4})
    state.add_topic("a", {0: (2, 1, 3), 1: (1, 2), 2: (3, 4)})
    state.add_topic("b", {0: (4, 2), 1: (2, 4)})
    untouched = state.partitions[tp("a", 2)]

    changes = state.brokers_changed({1, 3, 4})

    result = {
        c.after.topic_partition: (c.after.leader, c.after.isr, c.after.leader_epoch)
        for c in changes
    }
    assert result == {
        tp("a", 0): (1, (1, 3), 1),  # led by 2: new leader
        tp("a", 1): (1, (1,), 1),  # followed by 2: ISR shrinks
        tp("b", 0): (4, (4,), 1),
        tp("b", 1): (4, (4,), 1),
    }
    assert [c.after.topic_partition for c in changes] == sorted(result)
    assert state.partitions[tp("a", 2)] == untouched
    assert all(state.partitions[c.after.topic_partition] == c.after for c in changes)


def test_partitions_of_lists_partitions_with_a_replica_on_the_broker() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("a", {0: (1, 2), 1: (2, 3)})
    state.add_topic("b", {0: (3, 1)})

    assert sorted(p.topic_partition for p in state.partitions_of(1)) == [tp("a", 0), tp("b", 0)]
    assert sorted(p.topic_partition for p in state.partitions_of(2)) == [tp("a", 0), tp("a", 1)]
    assert state.partitions_of(7) == []


def test_offline_partitions_includes_loaded_partitions_led_by_a_dead_broker() -> None:
    state = controller(live={2, 3})
    dead_leader = leadership(partition=0, leader=1, isr=(1, 2))
    live_leader = leadership(partition=1, leader=2, isr=(2, 3))
    state.load(dead_leader)
    state.load(live_leader)

    assert state.offline_partitions() == [dead_leader]


# -- controller failover, what ZooKeeper says ------------------------------------------------------


def test_loaded_state_is_taken_over_and_elected_with_its_unclean_flag() -> None:
    state = ControllerState()
    state.load(leadership(leader=1, leader_epoch=9, isr=(1,), zk_version=12), unclean=True)
    state.brokers_changed({1, 2, 3})

    change = only_change(state.brokers_changed({3}))

    assert change.unclean
    assert change.after == leadership(leader=3, leader_epoch=10, isr=(3,), zk_version=12)


def test_reconsider_removes_dead_broker_zookeeper_still_lists_in_isr() -> None:
    state = controller(live={1, 2})
    state.add_topic("t", {0: (1, 2, 3)})
    key: TopicPartition = tp("t", 0)

    # The leader expanded the ISR in ZooKeeper with 3, which is dead.
    learnt = state.isr_changed(key, leader=1, leader_epoch=5, isr=(1, 2, 3), zk_version=7)
    assert learnt == leadership(leader=1, leader_epoch=5, isr=(1, 2, 3), zk_version=7)
    assert state.partitions[key] == learnt

    change = state.reconsider(key)

    assert change is not None
    assert change.before == learnt
    assert change.after == leadership(leader=1, leader_epoch=6, isr=(1, 2), zk_version=7)
    assert state.partitions[key] == change.after


def test_reconsider_elects_when_zookeeper_names_a_dead_leader() -> None:
    state = controller(live={2, 3})
    state.add_topic("t", {0: (1, 2, 3)})
    state.isr_changed(tp("t", 0), leader=1, leader_epoch=2, isr=(1, 3, 2), zk_version=3)

    change = state.reconsider(tp("t", 0))

    assert change is not None
    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (3, (3, 2), 3)
    assert state.offline_partitions() == []


def test_reconsider_with_nothing_to_do_returns_none() -> None:
    state = controller(live={1, 2, 3})
    state.add_topic("t", {0: (1, 2, 3)})
    state.isr_changed(tp("t", 0), leader=1, leader_epoch=1, isr=(1, 2), zk_version=1)
    known = state.partitions[tp("t", 0)]

    assert state.reconsider(tp("t", 0)) is None
    assert state.partitions[tp("t", 0)] == known


def test_isr_changed_for_an_unknown_partition_is_ignored() -> None:
    state = controller(live={1, 2})

    assert state.isr_changed(tp("t", 0), leader=1, leader_epoch=0, isr=(1,), zk_version=1) is None
    assert state.partitions == {}


def test_written_records_the_znode_version_only() -> None:
    state = controller(live={1, 2})
    (created,) = state.add_topic("t", {0: (1, 2)})

    updated = state.written(created.after, 4)

    assert updated == leadership(replicas=(1, 2), isr=(1, 2), zk_version=4)
    assert state.partitions[tp("t", 0)] == updated


# -- property: random broker failures --------------------------------------------------------------

assignments = st.lists(
    st.permutations(BROKERS).flatmap(lambda order: st.integers(1, 3).map(lambda n: order[:n])),
    min_size=1,
    max_size=3,
)
live_sets = st.sets(st.sampled_from(BROKERS))


def check_invariants(state: ControllerState) -> None:
    live = state.live_brokers
    for p in state.partitions.values():
        assert set(p.isr) <= set(p.replicas), p
        assert len(set(p.isr)) == len(p.isr), p
        if p.online:
            assert p.leader in live, p
            assert p.leader in p.isr, p
            assert set(p.isr) <= live, p  # dead ISR members are removed while it is online
        elif p.topic in state.unclean_topics:
            assert not set(p.replicas) & live, p  # any live replica would have been elected
        else:
            assert not set(p.isr) & live, p  # a live ISR member would have been elected


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    clean=assignments,
    dirty=assignments,
    first=live_sets,
    events=st.lists(live_sets, max_size=12),
)
def test_random_broker_failures_keep_kafka_invariants(
    clean: list[tuple[int, ...]],
    dirty: list[tuple[int, ...]],
    first: set[int],
    events: list[set[int]],
) -> None:
    state = controller(live=first)
    state.add_topic("clean", dict(enumerate(clean)))
    state.add_topic("dirty", dict(enumerate(dirty)), unclean=True)
    check_invariants(state)
    max_epoch = {key: p.leader_epoch for key, p in state.partitions.items()}

    for live in events:
        previous = dict(state.partitions)
        changes = state.brokers_changed(live)

        changed = {c.after.topic_partition: c for c in changes}
        assert len(changed) == len(changes)  # one change per partition at most
        for key, p in state.partitions.items():
            change = changed.get(key)
            if change is None:
                assert p == previous[key]
                continue
            before, after = change.before, change.after
            assert before == previous[key]
            assert after == p
            assert after.leader_epoch == before.leader_epoch + 1
            assert after.leader_epoch > max_epoch[key]
            assert (after.replicas, after.zk_version) == (before.replicas, before.zk_version)
            if change.unclean:
                assert after.topic == "dirty"
                assert after.isr == (after.leader,)
                assert not set(before.isr) & state.live_brokers
                assert after.leader == next(r for r in after.replicas if r in live)
            elif not after.online:
                assert after.isr == before.isr  # kept for a returning member to lead
            elif before.isr:
                # Clean changes keep the leader or pick the first live member of the previous
                # ISR, in ISR order, and keep the live part of that ISR (an empty ISR is a
                # never-led partition, initialised from its live replicas).
                live_isr = tuple(r for r in before.isr if r in live)
                assert after.leader == (before.leader if before.leader in live else live_isr[0])
                assert after.isr == live_isr
            max_epoch[key] = after.leader_epoch

        check_invariants(state)
        assert state.brokers_changed(live) == []  # the same broker set again changes nothing


# -- broker epochs (KIP-380) ---------------------------------------------------------------------


def test_bounced_lists_live_brokers_whose_registration_changed() -> None:
    state = controller()
    state.broker_epochs = {1: 10, 2: 11, 3: 12}

    assert state.bounced({1: 10, 2: 40, 3: 12}) == {2}
    assert state.bounced({1: 10, 2: 11, 4: 50}) == set()  # 4 is new, not bounced


def test_a_restarted_leader_hands_over_to_a_live_isr_member_that_did_not_restart() -> None:
    state = controller()
    state.load(leadership(leader=1, leader_epoch=4, isr=(1, 2, 3)))

    change = state.replicas_restarted(tp("t", 0), {1})

    assert change is not None
    assert (change.after.leader, change.after.isr) == (2, (2, 3))
    assert change.after.leader_epoch == 5
    assert "restarted" in change.reason
    assert state.partitions[tp("t", 0)] == change.after


def test_a_restarted_follower_leaves_the_isr_and_the_leader_stays() -> None:
    state = controller()
    state.load(leadership(leader=1, leader_epoch=4, isr=(1, 2, 3)))

    change = state.replicas_restarted(tp("t", 0), {3, 4})

    assert change is not None
    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (1, (1, 2), 5)


def test_a_restarted_sole_isr_member_goes_offline_then_leads_again() -> None:
    state = controller()
    state.load(leadership(leader=1, leader_epoch=2, isr=(1,)))

    change = state.replicas_restarted(tp("t", 0), {1})
    assert change is not None
    assert change.after.leader == NO_LEADER
    assert change.after.isr == (1,)  # kept: no one else can lead without losing records
    assert state.live_brokers == {1, 2, 3}

    again = only_change(state.brokers_changed({1, 2, 3}))
    assert (again.after.leader, again.after.leader_epoch) == (1, 4)


def test_restarts_of_replicas_outside_the_state_change_nothing() -> None:
    state = controller()
    state.load(leadership(leader=1, isr=(1, 2)))

    assert state.replicas_restarted(tp("t", 0), {3}) is None
    assert state.replicas_restarted(tp("t", 0), set()) is None
