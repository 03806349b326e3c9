"""The rebalance protocol of GroupCoordinatorCore: the behaviours of Kafka's
GroupCoordinatorTest for JoinGroup, SyncGroup, Heartbeat and LeaveGroup, driven through a
stand-in shell on a ManualClock (explicit times, no sleeps)."""

from __future__ import annotations

from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.results import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    GroupConfig,
    SyncGroupResult,
)
from kafkactor.messages.errors import ErrorCode
from tests.actors.coordinator.shell import (
    GROUP,
    PROTOCOLS,
    REBALANCE_MS,
    SESSION_MS,
    Shell,
)

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE

# -- JoinGroup ---------------------------------------------------------------------------------


def test_a_new_member_creates_the_group_and_leads_generation_one() -> None:
    shell = Shell()
    result = shell.join().result
    assert result.error is ErrorCode.NONE
    assert result.member_id == "consumer-1-1"
    assert (result.generation_id, result.leader_id) == (1, result.member_id)
    assert (result.protocol_type, result.protocol_name) == ("consumer", "range")
    assert [(m.member_id, m.metadata) for m in result.members] == [
        (result.member_id, b"range-meta")
    ]
    assert shell.state() is COMPLETING


def test_member_id_required_then_the_rejoin_with_that_id_is_accepted() -> None:
    shell = Shell()
    first = shell.join(require_known=True).result
    assert first.error is ErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id == "consumer-1-1"
    assert shell.group().is_pending_member(first.member_id)
    assert shell.state() is EMPTY
    second = shell.join(first.member_id, require_known=True).result
    assert (second.error, second.member_id, second.generation_id) == (
        ErrorCode.NONE,
        first.member_id,
        1,
    )
    assert not shell.group().pending_members


def test_a_pending_member_id_not_used_within_the_session_is_forgotten() -> None:
    shell = Shell()
    (leader,), generation = shell.stable_group(1)
    pending = shell.join(require_known=True, session_ms=6_000).result
    assert shell.group().is_pending_member(pending.member_id)
    shell.advance(3_000)
    assert shell.heartbeat(leader, generation) is ErrorCode.NONE
    shell.advance(3_000)
    assert not shell.group().pending_members
    assert shell.state() is STABLE
    assert list(shell.group().members) == [leader]
    assert shell.join(pending.member_id).result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_rebalance_waits_for_a_pending_member_to_join() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    shell.join(a)  # the leader rejoins: a rebalance
    pending = shell.join(require_known=True).result
    shell.join(b)
    assert shell.state() is PREPARING  # every member rejoined, but the pending id did not
    new = shell.join(pending.member_id)
    assert new.result.error is ErrorCode.NONE
    assert shell.state() is COMPLETING
    assert len(shell.group().members) == 3


def test_a_rebalance_completes_when_a_pending_member_times_out() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    shell.join(a)
    shell.join(require_known=True, session_ms=6_000)
    rejoin = shell.join(b)
    assert not rejoin.done
    shell.advance(6_000)
    assert rejoin.result.error is ErrorCode.NONE
    assert shell.state() is COMPLETING
    assert (len(shell.group().members), len(shell.group().pending_members)) == (2, 0)


def test_a_rebalance_completes_when_a_pending_member_leaves() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    shell.join(a)
    pending = shell.join(require_known=True).result
    shell.join(b)
    outcome = shell.leave(pending.member_id)
    assert outcome.errors == {pending.member_id: ErrorCode.NONE}
    assert shell.state() is COMPLETING
    assert set(shell.group().members) == {a, b}


def test_a_join_naming_a_member_the_coordinator_does_not_know_is_refused() -> None:
    shell = Shell()
    assert shell.join("ghost").result.error is ErrorCode.UNKNOWN_MEMBER_ID  # no such group
    assert shell.core.group(GROUP) is None
    shell.stable_group(1)
    assert shell.join("ghost").result.error is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_join_with_another_protocol_type_or_no_common_protocol_is_inconsistent() -> None:
    shell = Shell()
    shell.join(protocols=[("range", b"")])  # CompletingRebalance, protocol "range"
    other_type = shell.join(protocol_type="connect").result
    assert other_type.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    no_common = shell.join(protocols=[("roundrobin", b"")]).result
    assert no_common.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert len(shell.group().members) == 1


def test_a_join_without_protocol_type_or_protocols_is_inconsistent() -> None:
    shell = Shell()
    assert shell.join(protocol_type="").result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert shell.join(protocols=[]).result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_group_protocol_is_the_one_most_members_prefer() -> None:
    shell = Shell()
    both = [("range", b"r"), ("roundrobin", b"rr")]
    backwards = [("roundrobin", b"rr"), ("range", b"r")]
    a = shell.join(protocols=both).result.member_id
    assert shell.group().protocol_name == "range"
    b = shell.join(protocols=backwards)
    shell.join(a, protocols=both)
    assert b.result.protocol_name == "range"  # one vote each: the first vote wins the tie
    c = shell.join(protocols=backwards)
    a_again = shell.join(a, protocols=both)
    b_again = shell.join(b.member_id, protocols=backwards)
    assert {x.result.protocol_name for x in (a_again, b_again, c)} == {"roundrobin"}
    assert {m.metadata for m in a_again.result.members} == {b"rr"}  # the leader's view


def test_only_the_leader_is_told_every_members_metadata() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    rejoin_a, rejoin_b = shell.join(a), shell.join(b)
    leader, follower = rejoin_a.result, rejoin_b.result
    assert leader.leader_id == follower.leader_id == a
    assert {m.member_id for m in leader.members} == {a, b}
    assert follower.members == ()
    assert leader.generation_id == follower.generation_id == generation + 1


def test_a_rebalance_completes_as_soon_as_every_known_member_rejoined() -> None:
    shell = Shell()
    (a, b, c), generation = shell.stable_group(3)
    first = shell.join(a)
    assert shell.state() is PREPARING
    second = shell.join(b)
    assert not (first.done or second.done)
    third = shell.join(c)
    assert [x.result.generation_id for x in (first, second, third)] == [generation + 1] * 3
    assert shell.now == 1_000  # no timer fired
    assert shell.state() is COMPLETING


def test_an_unchanged_follower_rejoining_a_stable_group_does_not_rebalance() -> None:
    shell = Shell()
    (_, b), generation = shell.stable_group(2)
    result = shell.join(b).result
    assert (result.error, result.generation_id, result.members) == (
        ErrorCode.NONE,
        generation,
        (),
    )
    assert shell.state() is STABLE


def test_the_leader_rejoining_or_a_follower_with_new_metadata_rebalances() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    assert not shell.join(a).done
    assert shell.state() is PREPARING
    shell.join(b)
    shell.sync(a, shell.group().generation_id)
    shell.sync(b, shell.group().generation_id)
    assert shell.state() is STABLE
    assert not shell.join(b, protocols=[("range", b"new-subscription")]).done
    assert shell.state() is PREPARING


def test_rejoining_with_the_same_metadata_while_completing_repeats_the_answer() -> None:
    shell = Shell()
    first = shell.join().result
    again = shell.join(first.member_id).result
    assert again == first
    assert shell.state() is COMPLETING


def test_a_new_member_that_never_completes_its_join_is_dropped_after_five_minutes() -> None:
    shell = Shell()
    long_session = NEW_MEMBER_JOIN_TIMEOUT_MS + 5_000
    long_rebalance = 2 * NEW_MEMBER_JOIN_TIMEOUT_MS
    first = shell.join(session_ms=long_session, rebalance_ms=long_rebalance).result
    shell.sync(first.member_id, first.generation_id)
    new = shell.join(session_ms=long_session, rebalance_ms=long_rebalance)
    assert not new.done
    assert shell.group().get(new.member_id).is_new
    shell.advance(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert new.result.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert new.result.member_id == ""
    assert list(shell.group().members) == [first.member_id]


def test_the_initial_rebalance_waits_the_delay_and_extends_it_for_new_members() -> None:
    config = GroupConfig(initial_rebalance_delay_ms=50)
    shell = Shell(GroupCoordinatorCore(config, member_id_suffix=iter("123").__next__))
    first = shell.join(rebalance_ms=120)
    assert not first.done
    shell.advance(40)
    second = shell.join(rebalance_ms=120)
    shell.advance(10)  # 50 ms: a member came during the delay, so it is extended by 50
    assert not first.done
    shell.advance(49)
    assert not second.done
    shell.advance(1)
    assert first.result.generation_id == second.result.generation_id == 1
    assert len(first.result.members) == 2


def test_the_initial_delay_never_outlasts_the_rebalance_timeout() -> None:
    config = GroupConfig(initial_rebalance_delay_ms=50)
    shell = Shell(GroupCoordinatorCore(config, member_id_suffix=iter("12345").__next__))
    start = shell.now
    calls = []
    for at in (0, 40, 80, 110):  # new members keep coming: each wait is extended
        shell.advance(start + at - shell.now)
        calls.append(shell.join(rebalance_ms=120))
    shell.advance(start + 119 - shell.now)
    assert not any(call.done for call in calls)
    shell.advance(1)  # the rebalance timeout bounds the extensions: 50 + 50 + 20 ms
    assert {call.result.generation_id for call in calls} == {1}
    assert len(shell.group().members) == 4


def test_session_timeouts_outside_the_brokers_bounds_are_refused() -> None:
    shell = Shell(GroupCoordinatorCore())  # Kafka 2.x's bounds: 6 s to 30 min
    for session_ms in (5_999, 1_800_001):
        result = shell.join(session_ms=session_ms).result
        assert result.error is ErrorCode.INVALID_SESSION_TIMEOUT
    assert shell.core.group(GROUP) is None
    assert not shell.join(session_ms=45_000).done  # librdkafka's default: waits the 3 s delay


# -- SyncGroup ---------------------------------------------------------------------------------


def test_followers_syncing_before_the_leader_wait_for_its_assignment() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    shell.join(a)
    generation = shell.join(b).result.generation_id
    follower = shell.sync(b, generation)
    assert not follower.done
    leader = shell.sync(a, generation, {a: b"for-a", b: b"for-b"})
    assert leader.result == SyncGroupResult(
        assignment=b"for-a", protocol_type="consumer", protocol_name="range"
    )
    assert follower.result.assignment == b"for-b"
    assert shell.state() is STABLE


def test_a_follower_syncing_after_the_leader_gets_its_assignment_at_once() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    assert shell.sync(b, generation).result.assignment == b"a1"
    assert shell.group().get(a).assignment == b"a0"


def test_the_leader_sync_waits_for_the_group_metadata_append() -> None:
    shell = Shell(hold_writes=True)
    first = shell.join().result
    leader = shell.sync(first.member_id, 1, {first.member_id: b"x"})
    assert not leader.done
    assert shell.held_group_writes[0].members[0].assignment == b"x"
    shell.complete_held_group_write()
    assert leader.result.assignment == b"x"
    assert shell.state() is STABLE


def test_a_failed_append_answers_the_parked_syncs_and_rebalances() -> None:
    shell = Shell(hold_writes=True)
    first = shell.join().result
    leader = shell.sync(first.member_id, 1, {first.member_id: b"x"})
    shell.complete_held_group_write(ErrorCode.NOT_LEADER_FOR_PARTITION)
    assert leader.result == SyncGroupResult(error=ErrorCode.NOT_COORDINATOR)
    assert shell.group().get(first.member_id).assignment == b""
    assert shell.state() is PREPARING


def test_a_member_the_leader_left_out_gets_an_empty_assignment() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    shell.join(a)
    generation = shell.join(b).result.generation_id
    follower = shell.sync(b, generation)
    shell.sync(a, generation, {})
    assert follower.result == SyncGroupResult(protocol_type="consumer", protocol_name="range")
    assert shell.heartbeat(b, generation) is ErrorCode.NONE


def test_sync_errors_unknown_member_generation_and_protocol() -> None:
    shell = Shell()
    assert shell.sync("ghost", 1).result.error is ErrorCode.UNKNOWN_MEMBER_ID  # no group
    first = shell.join().result
    member_id = first.member_id
    assert shell.sync("ghost", 1).result.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert shell.sync(member_id, 2).result.error is ErrorCode.ILLEGAL_GENERATION
    wrong_type = shell.sync(member_id, 1, protocol_type="connect")
    assert wrong_type.result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_name = shell.sync(member_id, 1, protocol_name="roundrobin")
    assert wrong_name.result.error is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    right = shell.sync(member_id, 1, protocol_type="consumer", protocol_name="range")
    assert right.result.error is ErrorCode.NONE


def test_a_sync_while_preparing_a_rebalance_is_told_to_rejoin() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    shell.join(a)
    assert shell.sync(b, generation).result.error is ErrorCode.REBALANCE_IN_PROGRESS


def test_a_new_member_joining_during_the_sync_phase_sends_the_waiting_followers_back() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    shell.join(a)
    generation = shell.join(b).result.generation_id
    follower = shell.sync(b, generation)
    shell.join()  # a third member: rebalance again
    assert follower.result.error is ErrorCode.REBALANCE_IN_PROGRESS
    assert shell.state() is PREPARING


# -- Heartbeat ---------------------------------------------------------------------------------


def test_heartbeat_errors_unknown_member_and_generation() -> None:
    shell = Shell()
    assert shell.heartbeat("ghost", 1) is ErrorCode.UNKNOWN_MEMBER_ID  # no group
    (a,), generation = shell.stable_group(1)
    assert shell.heartbeat("ghost", generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert shell.heartbeat(a, generation + 1) is ErrorCode.ILLEGAL_GENERATION
    assert shell.heartbeat(a, generation) is ErrorCode.NONE


def test_heartbeats_during_a_rebalance_answer_rebalance_in_progress() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    shell.join(a)
    assert shell.heartbeat(b, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    completed = shell.join(b).result.generation_id
    assert shell.state() is COMPLETING
    assert shell.heartbeat(b, completed) is ErrorCode.NONE  # after the join answer: a session


def test_heartbeats_keep_a_member_alive_and_silence_ends_its_session() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    for _ in range(5):
        shell.advance(SESSION_MS - 1)
        assert shell.heartbeat(a, generation) is ErrorCode.NONE
    shell.advance(SESSION_MS)
    assert shell.state() is EMPTY
    assert shell.group().generation_id == generation + 1
    assert shell.heartbeat(a, generation) is ErrorCode.UNKNOWN_MEMBER_ID


def test_an_expired_session_removes_the_member_and_starts_a_rebalance() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    shell.advance(SESSION_MS // 2)
    shell.heartbeat(a, generation)
    shell.advance(SESSION_MS // 2)  # b's session ends
    assert b not in shell.group().members
    assert list(shell.group().members) == [a]
    assert shell.state() is PREPARING
    assert shell.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = shell.join(a).result
    assert (rejoin.generation_id, [m.member_id for m in rejoin.members]) == (generation + 1, [a])


def test_a_session_ending_during_a_rebalance_lets_it_complete_without_the_member() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    new = shell.join()  # a new member starts a rebalance; a never rejoins
    shell.advance(SESSION_MS // 2)
    assert shell.heartbeat(a, generation) is ErrorCode.REBALANCE_IN_PROGRESS
    shell.advance(SESSION_MS)
    assert shell.heartbeat(a, generation) is ErrorCode.UNKNOWN_MEMBER_ID
    assert new.result.error is ErrorCode.NONE
    assert new.result.leader_id == new.member_id


def test_the_rebalance_timeout_drops_a_member_that_keeps_heartbeating_but_never_rejoins() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    leader = shell.join(a)
    for _ in range(REBALANCE_MS // (SESSION_MS // 2)):
        assert shell.heartbeat(b, generation) is ErrorCode.REBALANCE_IN_PROGRESS
        shell.advance(SESSION_MS // 2)
    assert leader.result.generation_id == generation + 1
    assert [m.member_id for m in leader.result.members] == [a]
    assert shell.heartbeat(b, generation) is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_superseded_heartbeat_deadline_is_ignored() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    old = shell.heartbeat_deadlines[(GROUP, a)].deadline_ms
    shell.advance(1)
    shell.heartbeat(a, generation)
    assert shell.core.on_heartbeat_expired(GROUP, a, old, old).empty
    assert shell.state() is STABLE


# -- LeaveGroup --------------------------------------------------------------------------------


def test_the_last_member_leaving_makes_the_group_empty() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    outcome = shell.leave(a)
    assert (outcome.error, outcome.errors) == (ErrorCode.NONE, {a: ErrorCode.NONE})
    assert shell.state() is EMPTY
    assert (shell.group().generation_id, shell.group().protocol_name) == (generation + 1, None)
    assert (GROUP, a) not in shell.heartbeat_deadlines


def test_the_leader_leaving_makes_the_group_rebalance_under_a_new_leader() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    shell.leave(a)
    assert shell.state() is PREPARING
    assert shell.group().leader_id == b
    rejoin = shell.join(b).result
    assert (rejoin.leader_id, rejoin.generation_id) == (b, generation + 1)


def test_a_member_leaving_while_its_join_waits_is_answered_unknown_member() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    parked = shell.join(a)
    shell.leave(a)
    assert parked.result.error is ErrorCode.UNKNOWN_MEMBER_ID
    assert shell.join(b).result.members[0].member_id == b


def test_leaving_unknown_members_and_groups() -> None:
    shell = Shell()
    assert shell.leave("ghost").errors == {"ghost": ErrorCode.UNKNOWN_MEMBER_ID}  # no group
    (a, b), _ = shell.stable_group(2)
    outcome = shell.leave(a, "ghost", b)  # LeaveGroup v3: a batch
    assert outcome.errors == {
        a: ErrorCode.NONE,
        "ghost": ErrorCode.UNKNOWN_MEMBER_ID,
        b: ErrorCode.NONE,
    }
    assert shell.state() is EMPTY


def test_a_group_rebuilt_after_everyone_left_starts_from_the_next_generation() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    shell.leave(a)
    result = shell.join(protocols=PROTOCOLS, rebalance_ms=REBALANCE_MS).result
    assert result.generation_id == generation + 2
