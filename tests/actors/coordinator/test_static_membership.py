"""Static membership (KIP-345) in GroupCoordinatorCore, as Kafka 2.8's GroupCoordinator has it
(GroupCoordinatorTest's "static member" cases): a restarted instance takes its old member id's
place without a rebalance, the old id is fenced, LeaveGroup by instance id, the session expiry
of a static member, and the instance ids kept through `__consumer_offsets`. Driven through the
stand-in shell on a ManualClock."""

from __future__ import annotations

from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.member_metadata import Protocol
from kafkactor.actors.coordinator.offsets_store import OffsetsReplay, group_record
from kafkactor.actors.coordinator.offsets_topic import (
    GroupValue,
    decode_record,
    encode_value,
)
from kafkactor.actors.coordinator.results import LeaveMemberResult, MemberIdentity
from kafkactor.messages.errors import ErrorCode
from kafkactor.storage import StoredRecord
from tests.actors.coordinator.shell import GROUP, SESSION_MS, TEST_CONFIG, Shell, tp

PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
EMPTY = GroupState.EMPTY


def static_group(shell: Shell, *instances: str) -> tuple[dict[str, str], int]:
    """A Stable group of static members (the first leads): ({instance: member id}, generation).
    Each member's assignment is b"assignment-<instance>"."""
    first = shell.join(instance=instances[0]).result
    ids = {instances[0]: first.member_id}
    generation = first.generation_id
    for instance in instances[1:]:
        new = shell.join(instance=instance)
        for known, member_id in ids.items():
            shell.join(member_id, instance=known)
        ids[instance] = new.member_id
        generation = new.result.generation_id
    assignment = {member_id: f"assignment-{i}".encode() for i, member_id in ids.items()}
    for instance, member_id in ids.items():
        shell.sync(member_id, generation, assignment, instance=instance)
    assert shell.state() is STABLE
    return ids, generation


# -- joining as a static member ----------------------------------------------------------------


def test_a_static_member_id_is_its_instance_id_and_it_never_gets_member_id_required() -> None:
    shell = Shell()
    result = shell.join(instance="alpha", require_known=True).result  # JoinGroup v5
    assert result.error is ErrorCode.NONE
    assert result.member_id == "alpha-1"
    assert [(m.member_id, m.group_instance_id) for m in result.members] == [("alpha-1", "alpha")]
    assert shell.group().static_members == {"alpha": "alpha-1"}


def test_the_leaders_join_answer_and_describe_show_each_members_instance_id() -> None:
    shell = Shell()
    ids, _ = static_group(shell, "alpha", "beta")
    dynamic = shell.join()  # a dynamic member joins: everyone rejoins
    leader = shell.join(ids["alpha"], instance="alpha")
    follower = shell.join(ids["beta"], instance="beta")
    expected = {ids["alpha"]: "alpha", ids["beta"]: "beta", dynamic.member_id: None}
    assert {m.member_id: m.group_instance_id for m in leader.result.members} == expected
    assert follower.result.members == () == dynamic.result.members
    error, summary = shell.core.handle_describe_group(GROUP)
    assert error is ErrorCode.NONE
    assert {m.member_id: m.group_instance_id for m in summary.members} == expected


# -- a restart within the session: no rebalance ------------------------------------------------


def test_a_restarted_static_follower_takes_its_place_and_assignment_without_a_rebalance() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    old = ids["beta"]
    rejoin = shell.join(instance="beta").result  # a new process: member id ""
    new = rejoin.member_id
    assert new != old and new.startswith("beta-")
    assert (rejoin.error, rejoin.generation_id, rejoin.leader_id) == (
        ErrorCode.NONE,
        generation,
        ids["alpha"],
    )
    assert rejoin.members == ()
    assert shell.state() is STABLE
    assert list(shell.group().members) == [ids["alpha"], new]
    assert shell.group().static_members == {"alpha": ids["alpha"], "beta": new}
    # the new id syncs in the same generation and gets the old id's assignment
    synced = shell.sync(new, generation, instance="beta").result
    assert (synced.error, synced.assignment) == (ErrorCode.NONE, b"assignment-beta")
    # the other member sees nothing: same generation, no rebalance signal
    assert shell.heartbeat(ids["alpha"], generation, instance="alpha") is ErrorCode.NONE
    assert shell.heartbeat(new, generation, instance="beta") is ErrorCode.NONE
    assert shell.group().generation_id == generation


def test_a_restarted_static_leader_is_not_told_to_assign_again() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    rejoin = shell.join(instance="alpha").result
    # the answer names the leader as it was (the old id), so the new id does not see itself
    # as the leader and sends no assignment; the group's leader is now the new id
    assert (rejoin.error, rejoin.generation_id, rejoin.leader_id) == (
        ErrorCode.NONE,
        generation,
        ids["alpha"],
    )
    assert rejoin.leader_id != rejoin.member_id
    assert shell.group().leader_id == rejoin.member_id
    assert shell.state() is STABLE
    assert shell.sync(rejoin.member_id, generation).result.assignment == b"assignment-alpha"


def test_the_rejoin_is_answered_only_once_the_new_member_id_is_stored() -> None:
    shell = Shell(hold_writes=True)
    shell.hold_writes = False
    ids, generation = static_group(shell, "alpha", "beta")
    shell.hold_writes = True
    rejoin = shell.join(instance="beta")
    assert not rejoin.done
    (stored,) = shell.held_group_writes
    assert {m.member_id: m.group_instance_id for m in stored.members} == {
        ids["alpha"]: "alpha",
        rejoin.member_id: "beta",
    }
    assert {m.group_instance_id: m.assignment for m in stored.members} == {
        "alpha": b"assignment-alpha",
        "beta": b"assignment-beta",
    }
    shell.complete_held_group_write()
    assert rejoin.result.error is ErrorCode.NONE
    assert rejoin.result.generation_id == generation


def test_a_failed_append_gives_the_instance_its_old_member_id_back() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    shell.hold_writes = True
    rejoin = shell.join(instance="beta")
    shell.complete_held_group_write(ErrorCode.NOT_LEADER_FOR_PARTITION)
    assert (rejoin.result.error, rejoin.result.member_id) == (ErrorCode.NOT_COORDINATOR, "")
    assert shell.group().static_members["beta"] == ids["beta"]
    assert set(shell.group().members) == set(ids.values())
    assert shell.heartbeat(ids["beta"], generation, instance="beta") is ErrorCode.NONE
    assert shell.state() is STABLE


# -- fencing -------------------------------------------------------------------------------------


def test_the_replaced_member_id_is_fenced_on_every_request() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    old = ids["beta"]
    new = shell.join(instance="beta").result.member_id
    fenced = ErrorCode.FENCED_INSTANCE_ID
    assert shell.heartbeat(old, generation, instance="beta") is fenced
    assert shell.sync(old, generation, instance="beta").result.error is fenced
    assert shell.join(old, instance="beta").result.error is fenced
    commit = shell.commit({tp(): 5}, old, generation, instance="beta")
    assert commit.errors == {tp(): fenced}
    # without its instance id the old id is merely unknown
    assert shell.heartbeat(old, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert shell.commit({tp(): 5}, new, generation, instance="beta").errors == {
        tp(): ErrorCode.NONE
    }
    assert shell.state() is STABLE


def test_a_second_instance_fences_the_parked_join_of_the_first() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    parked = shell.join(ids["alpha"], instance="alpha")  # the leader rejoins: a rebalance
    assert shell.state() is PREPARING and not parked.done
    second = shell.join(instance="alpha")  # another process with the same instance id
    assert parked.result.error is ErrorCode.FENCED_INSTANCE_ID
    assert not second.done  # the rebalance under way takes it
    shell.join(ids["beta"], instance="beta")
    assert second.result.error is ErrorCode.NONE
    assert second.result.generation_id == generation + 1
    assert second.result.leader_id == second.member_id


def test_a_static_rejoin_while_completing_rebalances_and_fences_the_parked_sync() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    shell.join(ids["alpha"], instance="alpha")
    shell.join(ids["beta"], instance="beta")
    assert shell.state() is COMPLETING
    follower_sync = shell.sync(ids["beta"], generation + 1, instance="beta")
    assert not follower_sync.done
    restarted = shell.join(instance="beta")
    assert follower_sync.result.error is ErrorCode.FENCED_INSTANCE_ID
    assert shell.state() is PREPARING
    assert not restarted.done
    shell.join(ids["alpha"], instance="alpha")
    assert restarted.result.generation_id == generation + 2


def test_a_known_member_naming_an_unknown_instance_is_unknown() -> None:
    shell = Shell()
    ids, _ = static_group(shell, "alpha")
    assert shell.join(ids["alpha"], instance="gamma").result.error is ErrorCode.UNKNOWN_MEMBER_ID


# -- a changed protocol on rejoin ----------------------------------------------------------------


BOTH: list[Protocol] = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


def test_a_rejoin_that_changes_the_chosen_protocol_rebalances() -> None:
    shell = Shell()
    first = shell.join(instance="alpha", protocols=BOTH).result
    shell.sync(first.member_id, first.generation_id, {first.member_id: b"x"})
    assert shell.group().protocol_name == "range"
    rejoin = shell.join(instance="alpha", protocols=[("roundrobin", b"rr-meta")])
    assert shell.state() is COMPLETING  # a rebalance, which this lone member completed
    assert rejoin.result.generation_id == first.generation_id + 1
    assert rejoin.result.protocol_name == "roundrobin"
    assert rejoin.result.leader_id == rejoin.member_id


def test_a_rejoin_with_new_metadata_for_the_same_protocol_does_not_rebalance() -> None:
    # Kafka 2.8 rebalances only when the protocol the group would choose changes; the new
    # metadata is stored with the new member id
    shell = Shell(hold_writes=True)
    shell.hold_writes = False
    ids, generation = static_group(shell, "alpha", "beta")
    shell.hold_writes = True
    rejoin = shell.join(instance="beta", protocols=[("range", b"new-subscription")])
    (stored,) = shell.held_group_writes
    assert {m.group_instance_id: m.subscription for m in stored.members} == {
        "alpha": b"range-meta",
        "beta": b"new-subscription",
    }
    shell.complete_held_group_write()
    assert (rejoin.result.error, rejoin.result.generation_id) == (ErrorCode.NONE, generation)
    assert shell.state() is STABLE
    assert ids["beta"] not in shell.group().members


# -- leaving ----------------------------------------------------------------------------------


def test_leave_group_by_instance_id() -> None:
    shell = Shell()
    ids, _ = static_group(shell, "alpha", "beta", "gamma")
    outcome = shell.leave(
        MemberIdentity("", "beta"),  # by instance id alone
        MemberIdentity("stale-id", "alpha"),  # a member id the instance no longer has
        MemberIdentity("", "delta"),  # an instance the group does not know
        MemberIdentity(ids["gamma"], "gamma"),
    )
    assert outcome.error is ErrorCode.NONE
    assert outcome.members == (
        LeaveMemberResult("", "beta", ErrorCode.NONE),
        LeaveMemberResult("stale-id", "alpha", ErrorCode.FENCED_INSTANCE_ID),
        LeaveMemberResult("", "delta", ErrorCode.UNKNOWN_MEMBER_ID),
        LeaveMemberResult(ids["gamma"], "gamma", ErrorCode.NONE),
    )
    assert list(shell.group().members) == [ids["alpha"]]
    assert shell.group().static_members == {"alpha": ids["alpha"]}
    assert shell.state() is PREPARING  # those leaving rebalance the group


def test_leave_by_instance_id_of_an_unknown_group() -> None:
    shell = Shell()
    outcome = shell.leave(MemberIdentity("", "alpha"))
    assert outcome.members == (LeaveMemberResult("", "alpha", ErrorCode.UNKNOWN_MEMBER_ID),)


# -- the session ------------------------------------------------------------------------------


def test_a_static_member_whose_session_ends_is_removed_and_the_group_rebalances() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    # a static member closes without LeaveGroup: nothing happens until its session ends
    shell.advance(SESSION_MS // 2)
    assert shell.heartbeat(ids["alpha"], generation, instance="alpha") is ErrorCode.NONE
    shell.advance(SESSION_MS // 2 - 1)
    assert ids["beta"] in shell.group().members and shell.state() is STABLE
    shell.advance(1)  # beta's session ends
    assert ids["beta"] not in shell.group().members
    assert shell.group().static_members == {"alpha": ids["alpha"]}
    assert shell.heartbeat(ids["alpha"], generation) is ErrorCode.REBALANCE_IN_PROGRESS
    # the instance coming back after that is a new member
    back = shell.join(instance="beta")
    shell.join(ids["alpha"], instance="alpha")
    assert back.result.generation_id == generation + 1
    assert shell.group().static_members["beta"] == back.member_id


def test_a_restart_within_the_session_cancels_the_old_ids_expiry() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    shell.advance(SESSION_MS - 1_000)
    shell.heartbeat(ids["alpha"], generation)
    new = shell.join(instance="beta").result.member_id
    assert (GROUP, ids["beta"]) not in shell.heartbeat_deadlines
    shell.advance(2_000)  # past the old id's deadline
    assert shell.state() is STABLE
    assert shell.heartbeat(new, generation, instance="beta") is ErrorCode.NONE


# -- __consumer_offsets: GroupMetadataValue v3 keeps the instance ids ------------------------------


def test_group_metadata_v3_keeps_the_instance_ids_through_a_load() -> None:
    shell = Shell()
    ids, generation = static_group(shell, "alpha", "beta")
    snapshot = shell.group().snapshot(
        {m.member_id: m.assignment for m in shell.group().members.values()}
    )
    record = group_record(snapshot, shell.now)
    assert record.value is not None and record.value[:2] == b"\x00\x03"  # written as v3
    replay = OffsetsReplay()
    replay.replay([StoredRecord(0, record.timestamp_ms, record.key, record.value, ())])
    (loaded,) = replay.loaded()
    assert loaded.snapshot == snapshot
    # a coordinator that loads it knows the instances: a restart there needs no rebalance
    other = Shell(core=GroupCoordinatorCore(TEST_CONFIG, member_id_suffix=lambda: "after-load"))
    other.apply(other.core.load_group(GROUP, loaded.snapshot, {}, other.now))
    assert other.group().static_members == {"alpha": ids["alpha"], "beta": ids["beta"]}
    rejoin = other.join(instance="beta").result
    assert (rejoin.error, rejoin.member_id, rejoin.generation_id) == (
        ErrorCode.NONE,
        "beta-after-load",
        generation,
    )
    assert other.state() is STABLE
    synced = other.sync(rejoin.member_id, generation).result
    assert synced.assignment == b"assignment-beta"


def test_group_metadata_before_v3_reads_as_dynamic_members() -> None:
    shell = Shell()
    static_group(shell, "alpha")
    snapshot = shell.group().snapshot(
        {m.member_id: m.assignment for m in shell.group().members.values()}
    )
    record = group_record(snapshot, shell.now)
    assert record.value is not None
    _, value = decode_record(record.key or b"", record.value)
    assert isinstance(value, GroupValue)
    for version in (0, 1, 2):
        _, old = decode_record(record.key or b"", encode_value(value, version))
        assert isinstance(old, GroupValue)
        assert [m.group_instance_id for m in old.members] == [None]
        assert [m.member_id for m in old.members] == [m.member_id for m in value.members]
