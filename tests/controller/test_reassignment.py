"""The pure decisions of partition reassignment (Kafka 2.8's onPartitionReassignment, KIP-455)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kafkactor.actors.controller.reassignment import (
    build_reassignment,
    current_assignment,
    forget_gone,
    is_reassignment_complete,
    on_partition_reassignment,
    reassignments_to_resume,
    refusal,
    validate_replicas,
)
from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.actors.controller.state import ControllerState
from kafkactor.common import NO_LEADER, PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode

pytestmark = pytest.mark.timeout(10)

KEY = TopicPartition(topic="t", partition=0)


def state_with(
    replicas: tuple[int, ...] = (1, 2, 3),
    leader: int = 1,
    isr: tuple[int, ...] = (1, 2, 3),
    live: set[int] | None = None,
) -> ControllerState:
    state = ControllerState()
    state.live_brokers = {1, 2, 3, 4, 5, 6} if live is None else live
    state.load(
        PartitionLeaderState(
            topic="t", partition=0, replicas=replicas, leader=leader, leader_epoch=5, isr=isr
        )
    )
    return state


def caught_up(state: ControllerState, *brokers: int) -> None:
    """A leader's ISR expansion, learnt from ZooKeeper."""
    p = state.partitions[KEY]
    state.isr_changed(
        KEY, leader=p.leader, leader_epoch=p.leader_epoch, isr=(*p.isr, *brokers), zk_version=9
    )


# -- ReplicaAssignment ------------------------------------------------------------------------


def test_reassign_to_orders_the_target_first_then_what_the_origin_has_beyond_it() -> None:
    moved = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    assert moved == ReplicaAssignment((4, 5, 6, 1, 2, 3), adding=(4, 5, 6), removing=(1, 2, 3))
    assert (moved.origin, moved.target) == ((1, 2, 3), (4, 5, 6))
    partial = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    assert partial == ReplicaAssignment((2, 3, 4, 1), adding=(4,), removing=(1,))
    assert partial.being_reassigned


def test_a_new_target_replaces_the_old_one_and_keeps_the_original_replicas() -> None:
    first = ReplicaAssignment((1, 2, 3)).reassign_to((2, 3, 4))
    second = first.reassign_to((3, 5))
    # as in Kafka, the origin is RS without AR: in RS order (the target first)
    assert second == ReplicaAssignment((3, 5, 2, 1), adding=(5,), removing=(2, 1))
    assert first.origin == (2, 3, 1) and set(second.origin) == {1, 2, 3}
    back = first.reassign_to(first.origin)  # a cancellation
    # Kafka's origin keeps RS order, so a cancelled (2, 3, 4) comes back as (2, 3, 1)
    assert back == ReplicaAssignment((2, 3, 1)) and not back.being_reassigned


# -- phase A -----------------------------------------------------------------------------------


def test_phase_a_assigns_target_plus_origin_and_bumps_the_leader_epoch() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (2, 3, 4))
    assert wanted is not None
    step = on_partition_reassignment(state, KEY, wanted)
    assert step.write == ReplicaAssignment((2, 3, 4, 1), adding=(4,), removing=(1,))
    assert step.change is not None and step.completed is None and step.delete == ()
    after = step.change.after
    assert (after.replicas, after.leader, after.isr, after.leader_epoch) == (
        (2, 3, 4, 1),
        1,
        (1, 2, 3),
        6,
    )
    assert state.reassigning[KEY] == step.write
    assert current_assignment(state, KEY) == step.write
    assert not is_reassignment_complete(state, KEY, step.write)


def test_phase_b_moves_the_leader_into_the_target_and_deletes_the_removed_replicas() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (2, 3, 4))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    caught_up(state, 4)
    step = on_partition_reassignment(state, KEY, state.reassigning[KEY])
    assert step.write is None  # the topic znode already holds it
    assert step.completed == ReplicaAssignment((2, 3, 4))
    assert step.delete == (1,)
    assert step.change is not None
    after = step.change.after
    assert (after.replicas, after.leader, after.isr, after.leader_epoch) == (
        (2, 3, 4),
        2,  # the first target replica live and in the ISR
        (2, 3, 4),
        7,
    )
    assert KEY not in state.reassigning
    assert step.change.reason == "partition reassignment completed"


def test_phase_b_keeps_a_live_leader_that_is_in_the_target() -> None:
    state = state_with(leader=3, isr=(3, 1, 2))
    wanted = build_reassignment(state, KEY, (4, 3))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    caught_up(state, 4)
    step = on_partition_reassignment(state, KEY, state.reassigning[KEY])
    assert step.change is not None
    assert (step.change.after.leader, step.change.after.isr) == (3, (3, 4))
    assert step.delete == (1, 2)


def test_a_leader_that_is_dead_or_shutting_down_hands_over_at_completion() -> None:
    state = state_with(leader=2)
    wanted = build_reassignment(state, KEY, (4, 2, 3))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    caught_up(state, 4)
    state.shutting_down = {2}
    step = on_partition_reassignment(state, KEY, state.reassigning[KEY])
    assert step.change is not None and step.change.after.leader == 4


def test_a_target_already_in_the_isr_completes_at_once() -> None:
    state = state_with(replicas=(1, 2, 3))
    wanted = build_reassignment(state, KEY, (3, 2))
    assert wanted is not None
    step = on_partition_reassignment(state, KEY, wanted)
    assert step.write == ReplicaAssignment((3, 2, 1), adding=(), removing=(1,))
    assert step.completed == ReplicaAssignment((3, 2))
    assert step.change is not None and step.change.after.leader == 3
    assert step.delete == (1,)


def test_the_current_assignment_as_target_completes_at_once_with_nothing_to_write() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (1, 2, 3))
    assert wanted == ReplicaAssignment((1, 2, 3))
    step = on_partition_reassignment(state, KEY, wanted)
    assert step.write is None and step.delete == ()
    assert step.completed == ReplicaAssignment((1, 2, 3))
    assert state.reassigning == {}


# -- cancellation and replacement ------------------------------------------------------------------


def test_cancelling_goes_back_to_the_original_replicas_and_deletes_the_added_ones() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (4, 5, 6))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    caught_up(state, 4)  # one of them caught up meanwhile
    back = build_reassignment(state, KEY, None)
    assert back == ReplicaAssignment((1, 2, 3))
    step = on_partition_reassignment(state, KEY, back)
    assert step.write == ReplicaAssignment((1, 2, 3))
    assert step.delete == (4, 5, 6)
    assert step.completed == ReplicaAssignment((1, 2, 3))
    assert step.change is not None
    assert (step.change.after.replicas, step.change.after.isr) == ((1, 2, 3), (1, 2, 3))
    assert KEY not in state.reassigning


def test_cancelling_moves_the_leader_back_into_the_original_replicas() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (4, 1, 2, 3))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    p = state.partitions[KEY]
    state.partitions[KEY] = replace(p, leader=4, isr=(4, 1, 2, 3))  # 4 was made leader
    state.reassigning[KEY] = wanted
    back = build_reassignment(state, KEY, None)
    assert back is not None
    step = on_partition_reassignment(state, KEY, back)
    assert step.change is not None
    assert (step.change.after.leader, step.change.after.isr) == (1, (1, 2, 3))


def test_cancelling_a_partition_not_being_reassigned_is_no_reassignment_in_progress() -> None:
    assert build_reassignment(state_with(), KEY, None) is None
    unknown = TopicPartition(topic="nope", partition=0)
    assert build_reassignment(state_with(), unknown, None) is None


def test_a_second_target_replaces_the_first_and_stops_the_replicas_it_no_longer_needs() -> None:
    state = state_with()
    first = build_reassignment(state, KEY, (2, 3, 4))
    assert first is not None
    on_partition_reassignment(state, KEY, first)
    second = build_reassignment(state, KEY, (2, 3, 5))
    assert second == ReplicaAssignment((2, 3, 5, 1), adding=(5,), removing=(1,))
    step = on_partition_reassignment(state, KEY, second)
    assert step.delete == (4,) and step.completed is None
    assert step.change is not None and step.change.after.replicas == (2, 3, 5, 1)


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ((), "Empty replica list specified in partition reassignment."),
        (
            (2, 2, 3),
            "Duplicate replica ids in partition reassignment replica list: ArrayBuffer(2, 2, 3)",
        ),
        ((2, -1), "Invalid broker id in replica list: ArrayBuffer(2, -1)"),
        (
            (2, 3, 9),
            "Replica assignment has brokers that are not alive. Replica list: ArrayBuffer(9), "
            "live broker list: Set(1, 2, 3, 4)",
        ),
    ],
)
def test_invalid_targets_are_refused_with_kafkas_messages(
    target: tuple[int, ...], message: str
) -> None:
    state = state_with(live={1, 2, 3, 4})
    error = validate_replicas(state, KEY, target)
    assert error is not None
    assert (error.error, error.message) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def test_only_added_replicas_must_be_live() -> None:
    state = state_with(live={2, 3, 4})  # 1 is down but is already a replica
    assert validate_replicas(state, KEY, (1, 2, 4)) is None


def test_an_unknown_partition_is_refused_as_unknown_topic_or_partition() -> None:
    state = state_with()
    unknown = TopicPartition(topic="t", partition=7)
    assert validate_replicas(state, unknown, (1, 2)) is None  # Kafka checks it later
    assert build_reassignment(state, unknown, (1, 2)) is not None
    error = refusal(state, unknown)
    assert error is not None
    assert (error.error, error.message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The partition does not exist.",
    )
    assert refusal(state, KEY) is None


# -- broker failures and resumption ----------------------------------------------------------------


def test_a_dead_adding_replica_only_delays_completion() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (2, 3, 4))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    state.brokers_changed({1, 2, 3})  # 4 died
    step = on_partition_reassignment(state, KEY, state.reassigning[KEY])
    assert step.completed is None  # still waiting for 4
    assert reassignments_to_resume(state, [4]) == [KEY]
    assert reassignments_to_resume(state, [1]) == []
    assert reassignments_to_resume(state) == [KEY]


def test_the_leader_going_offline_with_no_target_replica_live_leaves_it_without_leader() -> None:
    state = state_with(live={1, 2, 3})
    state.partitions[KEY] = replace(state.partitions[KEY], isr=(1, 2, 3))
    wanted = ReplicaAssignment((4, 1, 2, 3), adding=(4,), removing=(1, 2, 3))
    state.partitions[KEY] = replace(state.partitions[KEY], replicas=wanted.replicas, isr=(1, 4))
    state.reassigning[KEY] = wanted
    state.live_brokers = {1}  # 4 is in the ISR but down
    step = on_partition_reassignment(state, KEY, wanted)
    assert step.change is not None
    assert (step.change.after.leader, step.change.after.isr) == (NO_LEADER, (4,))


def test_reassignments_of_partitions_gone_are_forgotten() -> None:
    state = state_with()
    wanted = build_reassignment(state, KEY, (2, 3, 4))
    assert wanted is not None
    on_partition_reassignment(state, KEY, wanted)
    state.begin_deletion("t")
    assert forget_gone(state) == [KEY]
    assert state.reassigning == {}
