"""GroupCoordinatorCore beyond the rebalance: OffsetCommit and OffsetFetch (GroupCoordinatorTest's
offset cases), DescribeGroups, ListGroups, DeleteGroups, which coordinator answers for a group,
and loading groups back from `__consumer_offsets`."""

from __future__ import annotations

from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_metadata import (
    DEAD_GROUP,
    EMPTY_GROUP,
    GroupMetadataSnapshot,
    GroupOverview,
    MemberSnapshot,
)
from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.results import (
    GroupTombstones,
    OffsetFetchPartition,
)
from kafkactor.messages.errors import ErrorCode
from tests.actors.coordinator.shell import GROUP, SESSION_MS, TEST_CONFIG, Shell, offset, tp

NONE = ErrorCode.NONE
TP0, TP1, TP2 = tp("topic", 0), tp("topic", 1), tp("other", 0)

# -- OffsetCommit and OffsetFetch --------------------------------------------------------------


def test_a_member_commits_and_fetches_its_offsets() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    committed = shell.commit({TP0: 15, TP1: 16}, a, generation)
    assert committed.errors == {TP0: NONE, TP1: NONE}
    error, offsets = shell.core.handle_fetch_offsets(GROUP, [TP0, TP2])
    assert error is NONE
    assert offsets == {TP0: OffsetFetchPartition(offset=15), TP2: OffsetFetchPartition(offset=-1)}
    _, every = shell.core.handle_fetch_offsets(GROUP)
    assert {p: o.offset for p, o in every.items()} == {TP0: 15, TP1: 16}


def test_a_commit_from_a_stale_generation_or_unknown_member_is_refused() -> None:
    shell = Shell()
    (a, _), generation = shell.stable_group(2)
    assert shell.commit({TP0: 1}, a, generation - 1).errors == {TP0: ErrorCode.ILLEGAL_GENERATION}
    assert shell.commit({TP0: 1}, "ghost", generation).errors == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert shell.core.handle_fetch_offsets(GROUP, [TP0])[1][TP0].offset == -1


def test_a_commit_while_awaiting_the_assignment_is_told_a_rebalance_is_in_progress() -> None:
    shell = Shell()
    first = shell.join().result
    assert shell.state() is GroupState.COMPLETING_REBALANCE
    outcome = shell.commit({TP0: 1}, first.member_id, first.generation_id)
    assert outcome.errors == {TP0: ErrorCode.REBALANCE_IN_PROGRESS}


def test_a_commit_of_the_current_generation_is_taken_while_preparing_a_rebalance() -> None:
    shell = Shell()
    (a, b), generation = shell.stable_group(2)
    shell.join(a)
    assert shell.state() is GroupState.PREPARING_REBALANCE
    assert shell.commit({TP0: 7}, b, generation).errors == {TP0: NONE}


def test_a_commit_keeps_the_members_session_alive() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    shell.advance(SESSION_MS - 1)
    shell.commit({TP0: 1}, a, generation)
    shell.advance(SESSION_MS - 1)
    assert shell.heartbeat(a, generation) is NONE


def test_a_simple_consumer_commits_with_generation_minus_one_to_an_empty_group() -> None:
    shell = Shell()
    assert shell.commit({TP0: 3}).errors == {TP0: NONE}  # creates the group
    assert shell.state() is GroupState.EMPTY
    assert shell.core.handle_fetch_offsets(GROUP, [TP0])[1][TP0].offset == 3
    assert shell.core.handle_list_groups()[1] == [GroupOverview(GROUP, "", "Empty")]
    assert shell.commit({TP0: 4}, "", 0, group_id="new").errors == {
        TP0: ErrorCode.ILLEGAL_GENERATION
    }


def test_a_simple_consumer_cannot_commit_to_a_group_with_members_until_it_empties() -> None:
    shell = Shell()
    (a,), generation = shell.stable_group(1)
    assert shell.commit({TP0: 3}).errors == {TP0: ErrorCode.UNKNOWN_MEMBER_ID}
    shell.commit({TP0: 5}, a, generation)
    shell.leave(a)
    assert shell.commit({TP0: 6}).errors == {TP0: NONE}
    assert shell.core.handle_fetch_offsets(GROUP, [TP0])[1][TP0].offset == 6


def test_an_offset_in_flight_is_unstable_for_a_stable_fetch() -> None:
    shell = Shell(hold_writes=True)
    shell.commit({TP0: 1})
    shell.core.complete_offset_write(shell.held_offset_writes.pop())
    outcome = shell.commit({TP0: 2})
    assert outcome.errors is None and outcome.write is not None
    unstable = shell.core.handle_fetch_offsets(GROUP, [TP0], require_stable=True)[1][TP0]
    assert unstable == OffsetFetchPartition(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert shell.core.handle_fetch_offsets(GROUP, [TP0])[1][TP0].offset == 1
    answer = shell.core.complete_offset_write(outcome.write, ErrorCode.NOT_ENOUGH_REPLICAS)
    assert answer == {TP0: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    stable = shell.core.handle_fetch_offsets(GROUP, [TP0], require_stable=True)[1][TP0]
    assert stable.offset == 1


def test_metadata_over_the_limit_is_refused_per_partition() -> None:
    shell = Shell()
    too_long = offset(1, metadata="x" * 4097)
    outcome = shell.commit({TP0: too_long, TP1: offset(2, metadata="x" * 4096)})
    assert outcome.errors == {TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE, TP1: NONE}
    only = shell.commit({TP0: too_long})
    assert (only.errors, only.write) == ({TP0: ErrorCode.OFFSET_METADATA_TOO_LARGE}, None)


# -- DescribeGroups, ListGroups, DeleteGroups --------------------------------------------------


def test_describe_a_stable_group_shows_metadata_and_assignments() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    error, summary = shell.core.handle_describe_group(GROUP)
    assert (error, summary.state, summary.protocol_type, summary.protocol) == (
        NONE,
        "Stable",
        "consumer",
        "range",
    )
    assert [(m.member_id, m.metadata, m.assignment) for m in summary.members] == [
        (a, b"range-meta", b"a0"),
        (b, b"range-meta", b"a1"),
    ]


def test_describe_a_rebalancing_or_unknown_group() -> None:
    shell = Shell()
    (a, _), _ = shell.stable_group(2)
    shell.join(a)
    _, summary = shell.core.handle_describe_group(GROUP)
    assert (summary.state, summary.protocol) == ("PreparingRebalance", "")
    assert {(m.metadata, m.assignment) for m in summary.members} == {(b"", b"")}
    assert shell.core.handle_describe_group("unknown") == (NONE, DEAD_GROUP)


def test_list_groups_with_and_without_a_state_filter() -> None:
    shell = Shell()
    shell.stable_group(1)
    shell.stable_group(2, group_id="other")
    shell.join(shell.group("other").leader_id or "", "other")
    error, groups = shell.core.handle_list_groups()
    assert error is NONE
    assert groups == [
        GroupOverview(GROUP, "consumer", "Stable"),
        GroupOverview("other", "consumer", "PreparingRebalance"),
    ]
    assert shell.core.handle_list_groups({"Stable"})[1] == [groups[0]]


def test_delete_groups() -> None:
    shell = Shell()
    shell.stable_group(1)
    shell.commit({TP0: 1, TP1: 2}, group_id="idle")
    outcome = shell.core.handle_delete_groups([GROUP, "idle", "unknown"], shell.now)
    assert outcome.errors == {
        GROUP: ErrorCode.NON_EMPTY_GROUP,
        "idle": NONE,
        "unknown": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    # "idle" only stored offsets (generation 0): no metadata record, so no metadata tombstone
    assert outcome.tombstones == (GroupTombstones("idle", (TP0, TP1), metadata=False),)
    assert shell.core.group("idle") is None
    assert shell.core.handle_fetch_offsets("idle", [TP0])[1][TP0].offset == -1


def test_delete_groups_writes_a_metadata_tombstone_for_a_group_that_had_a_generation() -> None:
    shell = Shell()
    (a,), _ = shell.stable_group(1)
    shell.leave(a)
    outcome = shell.core.handle_delete_groups([GROUP], shell.now)
    assert outcome.tombstones == (GroupTombstones(GROUP, (), metadata=True),)
    # a group with neither offsets nor a generation (its only member never came back with
    # the id it was handed): deleted with nothing to write
    shell.join(require_known=True)
    assert shell.state() is GroupState.EMPTY and shell.group().generation_id == 0
    outcome = shell.core.handle_delete_groups([GROUP], shell.now)
    assert (outcome.errors, outcome.tombstones) == ({GROUP: NONE}, ())


# -- which coordinator answers -----------------------------------------------------------------


def _window_answers(shell: Shell) -> dict[str, object]:
    """What each group API answers for GROUP now (Kafka's validateGroupStatus per API)."""
    core = shell.core
    return {
        "join": shell.join().result.error,
        "sync": shell.sync("m", 1).result.error,
        "heartbeat": shell.heartbeat("m", 1),
        "leave": shell.leave("m").error,
        "commit": set((shell.commit({TP0: 1}).errors or {}).values()),
        "fetch": core.handle_fetch_offsets(GROUP, [TP0])[0],
        "describe": core.handle_describe_group(GROUP)[0],
        "delete": core.handle_delete_groups([GROUP], shell.now).errors[GROUP],
    }


# Kafka's answers while a partition loads: the membership APIs and the offset APIs say
# COORDINATOR_LOAD_IN_PROGRESS, SyncGroup says REBALANCE_IN_PROGRESS (the member rejoins) and
# Heartbeat answers blindly (GroupCoordinator.handleSyncGroup / handleHeartbeat)
LOADING = {
    "join": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    "sync": ErrorCode.REBALANCE_IN_PROGRESS,
    "heartbeat": NONE,
    "leave": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    "commit": {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS},
    "fetch": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    "describe": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    "delete": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


def test_every_group_api_in_the_load_window_answers_as_kafka() -> None:
    """Not told of the partition yet (another broker's metadata may already name this one),
    then loading: both are the load window; once told another broker leads it, or once
    loaded, the answers are Kafka's for those states."""
    core = GroupCoordinatorCore(TEST_CONFIG, owned_partitions=[])
    shell = Shell(core)
    partition = core.partition_for(GROUP)
    assert _window_answers(shell) == LOADING  # not told yet
    core.begin_loading(partition)
    assert _window_answers(shell) == LOADING
    assert core.handle_list_groups()[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    core.finish_loading(partition)
    assert core.handle_fetch_offsets(GROUP, [TP0])[0] is NONE
    assert core.handle_describe_group(GROUP)[0] is NONE
    core.resign(partition, shell.now)  # told: another broker leads it now
    elsewhere = {api: ErrorCode.NOT_COORDINATOR for api in LOADING}
    assert _window_answers(shell) == elsewhere | {"commit": {ErrorCode.NOT_COORDINATOR}}
    # a partition its metadata shows, led elsewhere, is not the load window either
    other = GroupCoordinatorCore(TEST_CONFIG, owned_partitions=[])
    other.learn_partitions([partition])
    assert _window_answers(Shell(other)) == elsewhere | {"commit": {ErrorCode.NOT_COORDINATOR}}


def test_requests_for_a_group_elsewhere_or_loading_or_badly_named() -> None:
    core = GroupCoordinatorCore(TEST_CONFIG, owned_partitions=[])
    shell = Shell(core)
    core.learn_partitions(range(TEST_CONFIG.offsets_topic_partitions))  # its metadata shows them
    assert shell.join().result.error is ErrorCode.NOT_COORDINATOR
    assert shell.core.handle_describe_group(GROUP) == (ErrorCode.NOT_COORDINATOR, EMPTY_GROUP)
    core.begin_loading(core.partition_for(GROUP))
    assert shell.join().result.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert shell.heartbeat("m", 1) is NONE  # answered blindly while loading
    assert shell.sync("m", 1).result.error is ErrorCode.REBALANCE_IN_PROGRESS
    assert core.handle_list_groups()[0] is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    core.finish_loading(core.partition_for(GROUP))
    core.finish_loading(core.partition_for(""))
    assert shell.join("", "").result.error is ErrorCode.INVALID_GROUP_ID
    assert shell.commit({TP0: 1}, group_id="").errors == {TP0: NONE}  # the offset APIs allow ""
    core.active = False
    assert shell.join().result.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert core.handle_list_groups() == (ErrorCode.COORDINATOR_NOT_AVAILABLE, [])


# -- loading and unloading ---------------------------------------------------------------------


def test_a_loaded_group_is_stable_with_fresh_sessions_and_its_offsets() -> None:
    shell = Shell()
    members = tuple(
        MemberSnapshot(
            member_id=member_id,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=30_000,
            subscription=b"sub",
            assignment=assignment,
        )
        for member_id, assignment in (("m1", b"x"), ("m2", b"y"))
    )
    snapshot = GroupMetadataSnapshot(
        group_id=GROUP,
        generation_id=4,
        protocol_type="consumer",
        protocol_name="range",
        leader_id="m1",
        members=members,
    )
    shell.apply(shell.core.load_group(GROUP, snapshot, {TP0: offset(9)}, shell.now))
    assert shell.state() is GroupState.STABLE
    assert shell.sync("m2", 4).result.assignment == b"y"
    assert shell.core.handle_fetch_offsets(GROUP, [TP0])[1][TP0].offset == 9
    assert shell.core.handle_describe_group(GROUP)[1].members[0].metadata == b"sub"
    shell.advance(SESSION_MS // 2)
    assert shell.heartbeat("m1", 4) is NONE
    shell.advance(SESSION_MS // 2)  # the session m2 got at load time ends
    assert list(shell.group().members) == ["m1"]
    assert shell.state() is GroupState.PREPARING_REBALANCE


def test_a_group_with_only_offsets_loads_empty() -> None:
    shell = Shell()
    effects = shell.core.load_group("idle", None, {TP0: offset(2)}, shell.now)
    assert effects.empty
    assert shell.state("idle") is GroupState.EMPTY
    assert shell.commit({TP0: 3}, group_id="idle").errors == {TP0: NONE}


def test_resigning_answers_parked_requests_not_coordinator() -> None:
    shell = Shell()
    (a, b), _ = shell.stable_group(2)
    parked = shell.join(a)
    for effects in shell.core.resign(shell.core.partition_for(GROUP), shell.now):
        shell.apply(effects)
    assert parked.result.error is ErrorCode.NOT_COORDINATOR
    assert not shell.join_deadlines and not shell.heartbeat_deadlines
    assert shell.core.group(GROUP) is None
    assert shell.heartbeat(b, 1) is ErrorCode.NOT_COORDINATOR
