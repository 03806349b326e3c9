"""OffsetDelete (KIP-496) in GroupCoordinatorCore, case by case as Kafka 2.8's
GroupCoordinator.handleDeleteOffsets answers them (GroupCoordinatorTest's testDeleteOffset*
cases): which offsets go, each partition's answer, the group's, the tombstones and the group's
own end."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from kafkactor.actors.coordinator.consumer_protocol import encode_subscription
from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_metadata import GroupMetadataSnapshot, MemberSnapshot
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.offset_delete import OffsetDeleteOutcome
from kafkactor.actors.coordinator.offsets_store import tombstone_records
from kafkactor.actors.coordinator.offsets_topic import GroupKey, OffsetKey, decode_key
from kafkactor.actors.coordinator.results import GroupTombstones
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode
from tests.actors.coordinator.shell import GROUP, TEST_CONFIG, Shell, offset, tp

pytestmark = pytest.mark.timeout(30)

NONE = ErrorCode.NONE
SUBSCRIBED = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
TP0, TP1, OTHER = tp("topic", 0), tp("topic", 1), tp("other", 0)


def delete(shell: Shell, *partitions: TopicPartition, group: str = GROUP) -> OffsetDeleteOutcome:
    return shell.core.handle_delete_offsets(group, partitions, shell.now)


def committed(shell: Shell, *partitions: TopicPartition, group: str = GROUP) -> list[int]:
    error, found = shell.core.handle_fetch_offsets(group, list(partitions))
    assert error is NONE
    return [found[p].offset for p in partitions]


def consumer_group(shell: Shell, *subscriptions: Sequence[str]) -> tuple[list[str], int]:
    """A Stable group of "consumer" members, one per subscription (the range protocol, with
    the subscription encoded as Kafka's consumers encode it): (member ids, generation)."""
    members: list[str] = []
    generation = 0
    for topics in subscriptions:
        protocols = [("range", encode_subscription(topics))]
        joined = shell.join(protocols=protocols)
        rejoins = [shell.join(m, protocols=protocols) for m in members]  # metadata aside
        members.append(joined.member_id)
        generation = joined.result.generation_id
        assert all(r.result.generation_id == generation for r in rejoins)
        assignment = {m: b"" for m in members}
        for member in members:
            shell.sync(member, generation, assignment)
    assert shell.state() is GroupState.STABLE
    return members, generation


# -- no group, or a Dead one --------------------------------------------------------------------


def test_a_group_not_known_here_is_not_found() -> None:
    shell = Shell()
    assert delete(shell, TP0) == OffsetDeleteOutcome(ErrorCode.GROUP_ID_NOT_FOUND)


def test_a_dead_group_is_not_found() -> None:
    shell = Shell()
    shell.commit({TP0: 1})
    shell.group().transition_to(GroupState.DEAD)
    outcome = delete(shell, TP0)
    assert (outcome.error, outcome.partitions, outcome.tombstones) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        {},
        None,
    )


def test_a_deleted_group_is_not_found() -> None:
    shell = Shell()
    shell.commit({TP0: 1})
    shell.core.handle_delete_groups([GROUP], shell.now)
    assert delete(shell, TP0).error is ErrorCode.GROUP_ID_NOT_FOUND


# -- an Empty group -------------------------------------------------------------------------------


def test_an_empty_group_loses_the_offsets_asked_for_and_keeps_the_others() -> None:
    shell = Shell()
    shell.commit({TP0: 10, TP1: 11})
    outcome = delete(shell, TP0, OTHER)  # OTHER never had an offset: answered NONE too
    assert (outcome.error, outcome.partitions) == (NONE, {TP0: NONE, OTHER: NONE})
    # only the offset removed gets a tombstone; the group stays (it has an offset left)
    assert outcome.tombstones == GroupTombstones(GROUP, (TP0,), metadata=False)
    assert not outcome.group_removed
    assert committed(shell, TP0, TP1) == [-1, 11]
    assert shell.state() is GroupState.EMPTY


def test_an_empty_group_without_offsets_left_goes_dead() -> None:
    """An offsets-only group (generation 0) loses its last offset: it leaves the coordinator,
    and, never having had group metadata, gets no metadata tombstone (cleanupGroupMetadata)."""
    shell = Shell()
    shell.commit({TP0: 10})
    outcome = delete(shell, TP0, TP0)  # a partition named twice is answered once
    assert (outcome.error, outcome.partitions) == (NONE, {TP0: NONE})
    assert outcome.tombstones == GroupTombstones(GROUP, (TP0,), metadata=False)
    assert outcome.group_removed
    assert shell.core.group(GROUP) is None
    assert delete(shell, TP0).error is ErrorCode.GROUP_ID_NOT_FOUND
    assert committed(shell, TP0) == [-1]


def test_a_group_emptied_after_a_generation_gets_a_metadata_tombstone_with_its_offset() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    shell.commit({TP0: 5}, a, generation)
    shell.leave(a)
    assert shell.state() is GroupState.EMPTY
    outcome = delete(shell, TP0)
    assert outcome.tombstones == GroupTombstones(GROUP, (TP0,), metadata=True)
    assert outcome.group_removed


def test_an_empty_group_with_nothing_to_delete_writes_nothing_and_stays() -> None:
    shell = Shell()
    shell.commit({TP0: 10})
    outcome = delete(shell, OTHER)
    assert (outcome.partitions, outcome.tombstones, outcome.group_removed) == (
        {OTHER: NONE},
        None,
        False,
    )
    assert committed(shell, TP0) == [10]
    # and a request naming no partition at all: the group's checks only
    assert delete(shell) == OffsetDeleteOutcome(NONE)


def test_a_commit_in_flight_is_dropped_and_its_completion_commits_nothing() -> None:
    shell = Shell(hold_writes=True)
    shell.commit({TP1: 1})
    shell.core.complete_offset_write(shell.held_offset_writes.pop())
    shell.commit({TP0: 7})  # pending
    outcome = delete(shell, TP0)
    assert outcome.partitions == {TP0: NONE}
    assert outcome.tombstones is None  # no committed offset was removed
    answer = shell.core.complete_offset_write(shell.held_offset_writes.pop())
    assert answer == {TP0: NONE}  # the commit is answered, as Kafka does, but not applied
    assert committed(shell, TP0, TP1) == [-1, 1]


# -- a group with members -----------------------------------------------------------------------


def test_a_consumer_group_keeps_the_offsets_of_the_topics_its_members_subscribe_to() -> None:
    shell = Shell()
    (a, b), generation = consumer_group(shell, ["topic"], ["topic", "third"])
    shell.commit({TP0: 1, TP1: 2, OTHER: 3, tp("third", 0): 4}, a, generation)
    outcome = delete(shell, TP0, OTHER, tp("third", 0))
    assert outcome.error is NONE
    assert outcome.partitions == {TP0: SUBSCRIBED, OTHER: NONE, tp("third", 0): SUBSCRIBED}
    assert outcome.tombstones == GroupTombstones(GROUP, (OTHER,), metadata=False)
    assert not outcome.group_removed
    assert committed(shell, TP0, TP1, OTHER) == [1, 2, -1]
    assert shell.state() is GroupState.STABLE
    # every partition subscribed: nothing goes, nothing is written, the request succeeds
    only_subscribed = delete(shell, TP0, TP1)
    assert only_subscribed == OffsetDeleteOutcome(NONE, {TP0: SUBSCRIBED, TP1: SUBSCRIBED})
    assert b in shell.group().members


def test_subscriptions_count_as_of_the_generation_while_a_rebalance_prepares() -> None:
    """Kafka computes the subscribed topics when a generation starts (initNextGeneration): a
    member rejoining with a new subscription changes them only in the next generation."""
    shell = Shell()
    (a, b), generation = consumer_group(shell, ["topic"], ["topic"])
    shell.commit({TP0: 1, OTHER: 2}, a, generation)
    moved = [("range", encode_subscription(["other"]))]
    rejoined = shell.join(a, protocols=moved)  # the leader rejoins: the group prepares a
    assert shell.state() is GroupState.PREPARING_REBALANCE  # rebalance, waiting for b
    assert delete(shell, TP0, OTHER).partitions == {TP0: SUBSCRIBED, OTHER: NONE}
    assert committed(shell, TP0, OTHER) == [1, -1]
    shell.join(b, protocols=moved)  # the next generation subscribes to "other" only
    assert rejoined.result.generation_id == generation + 1
    assert delete(shell, TP0, OTHER).partitions == {TP0: NONE, OTHER: SUBSCRIBED}


def test_members_whose_metadata_is_not_a_subscription_hold_every_topic() -> None:
    """The shell's members join with b"range-meta": Kafka cannot read the subscriptions
    (SchemaException), so every topic counts as subscribed."""
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    shell.commit({TP0: 1, OTHER: 2}, a, generation)
    outcome = delete(shell, TP0, OTHER)
    assert outcome == OffsetDeleteOutcome(NONE, {TP0: SUBSCRIBED, OTHER: SUBSCRIBED})
    assert committed(shell, TP0, OTHER) == [1, 2]


def test_a_group_of_another_protocol_type_with_members_is_not_empty() -> None:
    shell = Shell()
    joined = shell.join(protocol_type="connect", protocols=[("default", b"")])
    shell.sync(joined.member_id, joined.result.generation_id, {joined.member_id: b""})
    assert shell.state() is GroupState.STABLE
    assert delete(shell, TP0) == OffsetDeleteOutcome(ErrorCode.NON_EMPTY_GROUP)


def test_a_consumer_group_that_has_not_completed_a_generation_holds_every_topic() -> None:
    """A new group's first rebalance waits (group.initial.rebalance.delay.ms): it has members
    and no generation yet, so no subscriptions are known and every topic counts."""
    delayed = dataclasses.replace(TEST_CONFIG, initial_rebalance_delay_ms=3000)
    shell = Shell(GroupCoordinatorCore(delayed))
    shell.commit({OTHER: 2})
    parked = shell.join(protocols=[("range", encode_subscription(["topic"]))])
    assert not parked.done
    assert shell.state() is GroupState.PREPARING_REBALANCE
    assert delete(shell, OTHER) == OffsetDeleteOutcome(NONE, {OTHER: SUBSCRIBED})
    shell.advance(3000)  # the generation starts: its subscriptions are known
    assert parked.result.error is NONE
    assert delete(shell, OTHER).partitions == {OTHER: NONE}


def test_a_loaded_consumer_group_reads_its_members_subscriptions() -> None:
    shell = Shell()
    member = MemberSnapshot(
        member_id="m1",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000,
        subscription=encode_subscription(["topic"]),
    )
    snapshot = GroupMetadataSnapshot(
        group_id=GROUP,
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="m1",
        members=(member,),
    )
    loaded = {TP0: offset(1), OTHER: offset(2)}
    shell.apply(shell.core.load_group(GROUP, snapshot, loaded, shell.now))
    assert delete(shell, TP0, OTHER).partitions == {TP0: SUBSCRIBED, OTHER: NONE}


# -- which coordinator answers -------------------------------------------------------------------


def test_the_group_status_is_checked_first() -> None:
    core = GroupCoordinatorCore(TEST_CONFIG, owned_partitions=[])
    shell = Shell(core)
    partition = core.partition_for(GROUP)
    load_in_progress = OffsetDeleteOutcome(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert delete(shell, TP0) == load_in_progress  # not told of the partition yet
    core.begin_loading(partition)
    assert delete(shell, TP0) == load_in_progress
    core.finish_loading(partition)
    assert delete(shell, TP0).error is ErrorCode.GROUP_ID_NOT_FOUND
    core.resign(partition, shell.now)
    assert delete(shell, TP0) == OffsetDeleteOutcome(ErrorCode.NOT_COORDINATOR)
    core.finish_loading(core.partition_for(""))
    # unlike OffsetCommit and OffsetFetch, Kafka's OffsetDelete refuses the empty group id
    assert delete(shell, TP0, group="") == OffsetDeleteOutcome(ErrorCode.INVALID_GROUP_ID)
    core.active = False
    assert delete(shell, TP0).error is ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- the tombstones -----------------------------------------------------------------------------


def test_the_tombstones_name_the_offsets_and_the_group_only_when_asked() -> None:
    def keys(tombstones: GroupTombstones) -> list[object]:
        records = tombstone_records(tombstones, 5)
        assert all(r.value is None for r in records)
        return [decode_key(r.key) for r in records if r.key is not None]

    offsets_only = GroupTombstones(GROUP, (TP0,), metadata=False)
    assert keys(offsets_only) == [OffsetKey(group=GROUP, topic="topic", partition=0)]
    with_group = GroupTombstones(GROUP, (TP0,))
    assert keys(with_group) == [
        OffsetKey(group=GROUP, topic="topic", partition=0),
        GroupKey(group=GROUP),
    ]
