"""GroupMetadata: the behaviours of Kafka's GroupMetadataTest (state machine, protocol vote,
generations, leaders, pending commits) and the snapshot a group is stored and loaded as."""

from __future__ import annotations

import pytest

from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadata,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.group_state import GroupState, IllegalGroupStateError
from kafkactor.actors.coordinator.member_metadata import MemberMetadata, Protocol
from kafkactor.common import TopicPartition

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

# Kafka's valid previous states: to -> from
VALID = {
    EMPTY: {PREPARING},
    PREPARING: {STABLE, COMPLETING, EMPTY},
    COMPLETING: {PREPARING},
    STABLE: {COMPLETING},
    DEAD: {EMPTY, PREPARING, COMPLETING, STABLE, DEAD},
}
TP = TopicPartition(topic="foo", partition=0)


def member(member_id: str, protocols: list[Protocol] | None = None) -> MemberMetadata:
    return MemberMetadata(
        member_id=member_id,
        client_id="client",
        client_host="host",
        rebalance_timeout_ms=60_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        supported_protocols=protocols or [("range", b""), ("roundrobin", b"")],
    )


def group_in(state: GroupState) -> GroupMetadata:
    """A group walked to `state` along valid transitions."""
    group = GroupMetadata("group")
    path = {
        EMPTY: [],
        PREPARING: [PREPARING],
        COMPLETING: [PREPARING, COMPLETING],
        STABLE: [PREPARING, COMPLETING, STABLE],
        DEAD: [DEAD],
    }[state]
    for step in path:
        group.transition_to(step)
    return group


@pytest.mark.parametrize("source", list(VALID))
@pytest.mark.parametrize("target", list(VALID))
def test_transitions_follow_kafkas_valid_previous_states(
    source: GroupState, target: GroupState
) -> None:
    group = group_in(source)
    if source in VALID[target]:
        group.transition_to(target, now_ms=77)
        assert group.state is target
        assert group.current_state_timestamp_ms == 77
    else:
        with pytest.raises(IllegalGroupStateError, match=f"before moving to {target.value}"):
            group.transition_to(target)
        assert group.state is source


def test_can_rebalance_from_empty_stable_and_completing_only() -> None:
    assert {s for s in VALID if group_in(s).can_rebalance} == {EMPTY, STABLE, COMPLETING}


def test_select_protocol_by_most_votes_among_protocols_all_support() -> None:
    group = GroupMetadata("group")
    group.add(member("a", [("range", b""), ("roundrobin", b"")]))
    assert group.select_protocol() == "range"
    group.add(member("b", [("roundrobin", b""), ("range", b"")]))
    assert group.select_protocol() in {"range", "roundrobin"}  # a tie
    group.add(member("c", [("roundrobin", b""), ("range", b"")]))
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_skips_a_protocol_one_member_lacks() -> None:
    group = GroupMetadata("group")
    group.add(member("a", [("range", b""), ("roundrobin", b"")]))
    group.add(member("b", [("roundrobin", b""), ("blah", b"")]))
    assert group.candidate_protocols() == {"roundrobin"}
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_raises_without_members() -> None:
    with pytest.raises(IllegalGroupStateError):
        GroupMetadata("group").select_protocol()


def test_supports_protocols() -> None:
    group = GroupMetadata("group")
    assert group.supports_protocols("consumer", {"roundrobin", "range"})  # Empty: anything
    assert not group.supports_protocols("", {"range"})
    assert not group.supports_protocols("consumer", set())
    group.add(member("a", [("range", b""), ("roundrobin", b"")]))
    group.transition_to(PREPARING)
    assert group.supports_protocols("consumer", {"roundrobin", "foo"})
    assert group.supports_protocols("consumer", {"range", "foo"})
    assert not group.supports_protocols("consumer", {"foo", "bar"})
    group.add(member("b", [("roundrobin", b""), ("blah", b"")]))
    assert group.supports_protocols("consumer", {"roundrobin", "foo"})
    assert not group.supports_protocols("invalid_type", {"roundrobin", "foo"})
    assert not group.supports_protocols("consumer", {"range", "foo"})


def test_init_next_generation_selects_the_protocol_and_awaits_the_assignment() -> None:
    group = group_in(PREPARING)
    group.add(member("a", [("roundrobin", b"")]), awaiting_join=True)
    assert (group.generation_id, group.protocol_name) == (0, None)
    group.init_next_generation(now_ms=5)
    assert (group.generation_id, group.protocol_name) == (1, "roundrobin")
    assert group.state is COMPLETING


def test_init_next_generation_of_an_empty_group_makes_it_empty() -> None:
    group = group_in(PREPARING)
    group.init_next_generation()
    assert (group.generation_id, group.protocol_name, group.state) == (1, None, EMPTY)


def test_all_members_joined_counts_rejoins_and_pending_member_ids() -> None:
    group = group_in(PREPARING)
    group.add(member("a"), awaiting_join=True)
    group.add(member("b"))
    assert not group.all_members_joined()
    assert list(group.not_yet_rejoined_members) == ["b"]
    group.get("b").awaiting_join = True
    assert group.all_members_joined()
    group.add_pending_member("c", deadline_ms=100)
    assert group.is_pending_member("c")
    assert not group.all_members_joined()
    group.remove_pending_member("c")
    assert group.all_members_joined()


def test_the_first_member_leads_and_the_oldest_remaining_succeeds_it() -> None:
    group = GroupMetadata("group")
    for member_id in ("a", "b", "c"):
        group.add(member(member_id))
    assert group.leader_id == "a"
    group.remove("b")
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "c"
    group.remove("c")
    assert group.leader_id is None


def test_a_leader_that_did_not_rejoin_gives_way_to_one_that_did() -> None:
    group = group_in(PREPARING)
    group.add(member("a"))
    group.add(member("b"), awaiting_join=True)
    assert group.maybe_elect_new_joined_leader()
    assert group.leader_id == "b"
    group.get("b").awaiting_join = False
    assert not group.maybe_elect_new_joined_leader()


def test_leader_member_metadata_is_refused_while_preparing_a_rebalance() -> None:
    group = group_in(PREPARING)
    group.add(member("a"), awaiting_join=True)
    with pytest.raises(IllegalGroupStateError):
        group.current_member_metadata()
    group.init_next_generation()
    assert [m.member_id for m in group.current_member_metadata()] == ["a"]


def test_a_snapshot_loads_back_as_a_stable_group() -> None:
    group = group_in(PREPARING)
    group.add(member("a", [("range", b"sub-a")]), awaiting_join=True)
    group.add(member("b", [("range", b"sub-b")]), awaiting_join=True)
    group.init_next_generation(now_ms=9)
    snapshot = group.snapshot({"a": b"as-a", "b": b"as-b"})
    assert (snapshot.generation_id, snapshot.protocol_name, snapshot.leader_id) == (1, "range", "a")
    assert [(m.subscription, m.assignment) for m in snapshot.members] == [
        (b"sub-a", b"as-a"),
        (b"sub-b", b"as-b"),
    ]
    loaded = GroupMetadata.from_snapshot(snapshot)
    assert loaded.state is STABLE
    assert (loaded.generation_id, loaded.protocol_type, loaded.leader_id) == (1, "consumer", "a")
    assert loaded.get("b").assignment == b"as-b"
    assert loaded.get("b").supported_protocols == [("range", b"sub-b")]
    with pytest.raises(IllegalGroupStateError, match="no assignment"):
        group.snapshot({"a": b""})


def test_offset_commit_is_pending_until_its_append_completes() -> None:
    group = GroupMetadata("group")
    committed = OffsetAndMetadata(offset=37)
    group.prepare_offset_commit({TP: committed})
    assert group.has_offsets
    assert group.offset(TP) is None
    group.on_offset_commit_append(TP, committed)
    assert group.offset(TP) == committed
    assert not group.has_pending_offset_commit(TP)


def test_failed_offset_commit_leaves_nothing() -> None:
    group = GroupMetadata("group")
    failed = OffsetAndMetadata(offset=37)
    group.prepare_offset_commit({TP: failed})
    group.fail_pending_offset_write(TP, failed)
    assert not group.has_offsets
    assert group.offset(TP) is None


def test_failed_offset_commit_keeps_a_later_pending_one() -> None:
    group = GroupMetadata("group")
    first, second = OffsetAndMetadata(offset=37), OffsetAndMetadata(offset=57)
    group.prepare_offset_commit({TP: first})
    group.prepare_offset_commit({TP: second})
    group.fail_pending_offset_write(TP, first)
    assert group.has_offsets
    assert group.offset(TP) is None
    group.on_offset_commit_append(TP, second)
    assert group.offset(TP) == second
    assert not group.pending_offset_commits


def test_two_pending_commits_complete_in_turn() -> None:
    group = GroupMetadata("group")
    first, second = OffsetAndMetadata(offset=37), OffsetAndMetadata(offset=57)
    group.prepare_offset_commit({TP: first})
    group.prepare_offset_commit({TP: second})
    group.on_offset_commit_append(TP, first)
    assert group.offset(TP) == first
    assert group.has_pending_offset_commit(TP)  # the second is still in flight
    group.on_offset_commit_append(TP, second)
    assert group.offset(TP) == second
    assert not group.has_pending_offset_commit(TP)


def test_removed_offsets_ignore_a_late_append() -> None:
    group = GroupMetadata("group")
    group.initialize_offsets({TP: OffsetAndMetadata(offset=1)})
    late = OffsetAndMetadata(offset=2)
    group.prepare_offset_commit({TP: late})
    assert group.remove_offsets([TP]) == {TP: OffsetAndMetadata(offset=1)}
    group.on_offset_commit_append(TP, late)
    assert not group.has_offsets
