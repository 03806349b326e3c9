"""The pure decisions of preferred and unclean leader elections and of the imbalance check."""

from __future__ import annotations

import pytest

from kafkactor.actors.controller.preferred_election import (
    ElectionResult,
    ElectionType,
    elect_leaders,
    imbalance_ratios,
    imbalanced_partitions,
)
from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.actors.controller.state import ControllerState
from kafkactor.common import NO_LEADER, PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode

pytestmark = pytest.mark.timeout(10)

T = "t"


def tp(partition: int, topic: str = T) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def state_with(
    *partitions: tuple[tuple[int, ...], int, tuple[int, ...]],
    live: set[int] | None = None,
    topic: str = T,
) -> ControllerState:
    """Partitions 0.. of `topic` as (replicas, leader, isr), leader epoch 5."""
    state = ControllerState()
    state.live_brokers = {1, 2, 3} if live is None else live
    for i, (replicas, leader, isr) in enumerate(partitions):
        state.load(
            PartitionLeaderState(
                topic=topic,
                partition=i,
                replicas=replicas,
                leader=leader,
                leader_epoch=5,
                isr=isr,
                zk_version=7,
            )
        )
    return state


def test_the_preferred_replica_leads_in_the_next_epoch_with_the_isr_unchanged() -> None:
    state = state_with(((1, 2, 3), 2, (2, 3, 1)))
    decision = elect_leaders(state, [tp(0)], ElectionType.PREFERRED, reason="r")
    assert decision.answered == {}
    (change,) = decision.changes
    assert (change.after.leader, change.after.leader_epoch, change.after.isr) == (1, 6, (2, 3, 1))
    assert change.after.zk_version == 7  # the versioned set is made against what was read
    assert not change.unclean
    assert state.partitions[tp(0)] == change.after


def test_a_partition_its_preferred_replica_leads_needs_no_election() -> None:
    state = state_with(((1, 2, 3), 1, (1, 2, 3)))
    decision = elect_leaders(state, [tp(0)], ElectionType.PREFERRED, reason="r")
    assert decision.changes == []
    assert decision.answered == {tp(0): ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)}


@pytest.mark.parametrize(
    ("live", "isr", "shutting_down"),
    [
        ({2, 3}, (2, 3), set()),  # preferred replica dead
        ({1, 2, 3}, (2, 3), set()),  # live, but out of the ISR
        ({1, 2, 3}, (2, 3, 1), {1}),  # in the ISR, but shutting down
    ],
)
def test_a_preferred_replica_that_cannot_lead_is_preferred_leader_not_available(
    live: set[int], isr: tuple[int, ...], shutting_down: set[int]
) -> None:
    state = state_with(((1, 2, 3), 2, isr), live=live)
    state.shutting_down = shutting_down
    decision = elect_leaders(state, [tp(0)], ElectionType.PREFERRED, reason="r")
    assert decision.changes == []
    assert decision.answered == {
        tp(0): ElectionResult(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
            "Failed to elect leader for partition t-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy",
        )
    }
    assert state.partitions[tp(0)].leader == 2


def test_unknown_partitions_and_topics_being_deleted_get_kafkas_answers() -> None:
    state = state_with(((1, 2), 2, (1, 2)), ((2, 1), 2, (2, 1)), topic="gone")
    state.begin_deletion("gone")
    decision = elect_leaders(
        state, [tp(0, "gone"), tp(1, "gone"), tp(0, "nope")], ElectionType.PREFERRED, reason="r"
    )
    assert decision.changes == []
    assert decision.answered == {
        tp(0, "gone"): ElectionResult(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
        ),
        tp(1, "gone"): ElectionResult(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted"
        ),
        tp(0, "nope"): ElectionResult(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        ),
    }


def test_mixed_partitions_each_get_their_own_answer() -> None:
    state = state_with(
        ((1, 2), 2, (2, 1)),  # elected
        ((2, 1), 2, (2, 1)),  # not needed
        ((3, 1), 1, (1,)),  # preferred out of the ISR
    )
    decision = elect_leaders(state, [tp(0), tp(1), tp(2)], ElectionType.PREFERRED, reason="r")
    assert [c.after.topic_partition for c in decision.changes] == [tp(0)]
    assert decision.answered[tp(1)].error is ErrorCode.ELECTION_NOT_NEEDED
    assert decision.answered[tp(2)].error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


# -- unclean -------------------------------------------------------------------------------------


def test_unclean_election_of_an_offline_partition_picks_the_first_live_replica_alone() -> None:
    state = state_with(((1, 2, 3), NO_LEADER, (1,)), live={2, 3})
    decision = elect_leaders(state, [tp(0)], ElectionType.UNCLEAN, reason="r")
    (change,) = decision.changes
    assert (change.after.leader, change.after.isr, change.after.leader_epoch) == (2, (2,), 6)
    assert change.unclean


def test_unclean_election_prefers_a_live_isr_member_in_assignment_order() -> None:
    # the leader died and no election followed yet: a live ISR member leads, cleanly
    state = state_with(((1, 2, 3), 1, (1, 3, 2)), live={2, 3})
    decision = elect_leaders(state, [tp(0)], ElectionType.UNCLEAN, reason="r")
    (change,) = decision.changes
    assert (change.after.leader, change.after.isr) == (2, (3, 2))
    assert not change.unclean


def test_unclean_election_of_a_partition_with_a_live_leader_is_not_needed() -> None:
    state = state_with(((1, 2, 3), 2, (2,)))
    decision = elect_leaders(state, [tp(0)], ElectionType.UNCLEAN, reason="r")
    assert decision.answered == {tp(0): ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)}


def test_unclean_election_with_no_live_replica_is_eligible_leaders_not_available() -> None:
    state = state_with(((1, 2), NO_LEADER, (1,)), live={3})
    decision = elect_leaders(state, [tp(0)], ElectionType.UNCLEAN, reason="r")
    assert decision.answered == {
        tp(0): ElectionResult(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
            "Failed to elect leader for partition t-0 under strategy "
            "OfflinePartitionLeaderElectionStrategy(true)",
        )
    }


# -- the imbalance check -------------------------------------------------------------------------


def test_imbalance_ratio_is_the_share_of_preferred_partitions_a_broker_does_not_lead() -> None:
    state = state_with(
        ((1, 2), 1, (1, 2)),
        ((1, 2), 2, (1, 2)),
        ((1, 2), 2, (2, 1)),
        ((1, 2), 1, (1, 2)),
        ((2, 1), 2, (2, 1)),
    )
    assert imbalance_ratios(state) == {1: 0.5, 2: 0.0}
    assert imbalanced_partitions(state, 10) == [tp(1), tp(2)]
    assert imbalanced_partitions(state, 50) == []  # not above the percentage


def test_the_check_elects_only_where_the_preferred_replica_can_lead() -> None:
    state = state_with(
        ((1, 2), 2, (2, 1)),  # can lead
        ((1, 2), 2, (2,)),  # out of the ISR
        ((3, 2), 2, (2, 3)),  # broker 3 shutting down
        ((4, 2), 2, (2,)),  # broker 4 dead
        live={1, 2, 3},
    )
    state.shutting_down = {3}
    assert imbalanced_partitions(state, 10) == [tp(0)]


def test_topics_being_deleted_are_left_out_of_the_check() -> None:
    state = state_with(((1, 2), 2, (2, 1)), topic="gone")
    state.begin_deletion("gone")
    assert imbalance_ratios(state) == {}
    assert imbalanced_partitions(state, 0) == []


def test_a_ratio_equal_to_the_percentage_is_not_above_it() -> None:
    # 7 of 25 not led: 0.28, not above 28 %, in Kafka's comparison (ratio > percentage / 100;
    # 7/25 * 100 > 28 would say it is, in floats)
    state = state_with(*[((1, 2), 2, (2, 1))] * 7, *[((1, 2), 1, (1, 2))] * 18)
    assert imbalance_ratios(state)[1] == pytest.approx(0.28)
    assert imbalanced_partitions(state, 28) == []
    assert imbalanced_partitions(state, 27) == [tp(p) for p in range(7)]


def test_nothing_is_rebalanced_while_a_partition_is_being_reassigned() -> None:
    state = state_with(((1, 2), 2, (2, 1)), ((3, 2, 1), 2, (2, 1, 3)))
    state.reassigning[tp(1)] = ReplicaAssignment(replicas=(3, 2, 1), adding=(3,), removing=(1,))
    assert imbalanced_partitions(state, 10) == []
    del state.reassigning[tp(1)]
    assert imbalanced_partitions(state, 10) == [tp(0), tp(1)]
