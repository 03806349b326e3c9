"""The pure core of a partition replica: leader epoch, ISR, followers' LEOs and the HW.

Kafka's `Partition` rules, driven with explicit times and log end offsets: the high watermark
is the minimum LEO over the ISR (the leader's own included), never moves back on a leader and
waits for every ISR follower's first fetch after a leader change; a follower that has not
caught up for more than `replica_lag_time_max_ms` leaves the ISR, one that reaches the HW
rejoins; a follower's HW is min(leader HW, own LEO); min.insync.replicas refuses acks=-1 only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.actors.replication import UNKNOWN_OFFSET, PartitionState, PendingIsrChange
from kafkactor.common import NO_LEADER, PartitionLeaderState
from kafkactor.messages import ErrorCode

LOCAL = 1
LAG_MS = 100


def leader_and_isr(
    *,
    leader: int = LOCAL,
    leader_epoch: int = 0,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    controller_epoch: int = 1,
    zk_version: int = 0,
) -> PartitionLeaderState:
    return PartitionLeaderState(
        topic="t",
        partition=0,
        controller_epoch=controller_epoch,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=isr,
        replicas=replicas,
        zk_version=zk_version,
    )


def new_leader(
    *,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    log_end: int = 0,
    now_ms: int = 0,
    high_watermark: int = 0,
    min_insync_replicas: int = 1,
    leader_epoch: int = 0,
) -> PartitionState:
    """Broker 1's replica, just made leader at `now_ms` with its log ending at `log_end`."""
    state = PartitionState(
        "t",
        0,
        LOCAL,
        replica_lag_time_max_ms=LAG_MS,
        min_insync_replicas=min_insync_replicas,
        high_watermark=high_watermark,
    )
    state.make_leader(
        leader_and_isr(isr=isr, replicas=replicas, leader_epoch=leader_epoch), now_ms, log_end
    )
    return state


def isr_of(state: PartitionState) -> tuple[int, ...]:
    """The ISR, read through a call (mypy would otherwise keep a narrowed literal type)."""
    return state.isr


@dataclass(frozen=True, slots=True)
class Fetched:
    """What a follower's fetch changed once the partition actor committed its ISR change."""

    high_watermark_advanced: bool = False
    isr_expanded: bool = False
    isr_shrunk: bool = False


def fetch(
    state: PartitionState, replica: int, fetch_offset: int, leader_log_end: int, now_ms: int
) -> Fetched:
    """A follower fetch as the partition actor handles it without ZooKeeper: the decided ISR
    change is committed at once, then the HW reconsidered."""
    hw_before = state.high_watermark
    outcome = state.update_follower(replica, fetch_offset, leader_log_end, now_ms)
    change = outcome.isr_change
    if change is not None:
        assert state.commit_isr_change(change, state.zk_version)
        if not change.is_shrink:
            state.maybe_increment_high_watermark(leader_log_end)
    return Fetched(
        high_watermark_advanced=state.high_watermark != hw_before,
        isr_expanded=change is not None and not change.is_shrink,
        isr_shrunk=change is not None and change.is_shrink,
    )


def shrink(state: PartitionState, now_ms: int, leader_log_end: int) -> tuple[int, ...]:
    """A shrink check as the partition actor runs it: commit, then reconsider the HW."""
    change = state.maybe_shrink_isr(now_ms)
    if change is None:
        return ()
    assert state.commit_isr_change(change, state.zk_version + 1)
    state.maybe_increment_high_watermark(leader_log_end)
    return change.removed


# -- controller decisions --------------------------------------------------------------------


def test_a_new_replica_leads_nothing_and_refuses_appends() -> None:
    state = PartitionState("t", 0, LOCAL)

    assert state.is_leader is False
    assert state.leader == NO_LEADER
    assert isr_of(state) == ()
    assert state.append_error(1) is ErrorCode.NOT_LEADER_FOR_PARTITION
    assert state.accepts(leader_and_isr(leader_epoch=0))


def test_accepts_only_a_strictly_newer_leader_epoch() -> None:
    state = new_leader(leader_epoch=3)

    assert state.accepts(leader_and_isr(leader_epoch=4))
    assert not state.accepts(leader_and_isr(leader_epoch=3))
    assert not state.accepts(leader_and_isr(leader_epoch=2))


def test_make_leader_applies_the_controller_state_and_forgets_followers_positions() -> None:
    state = PartitionState("t", 0, LOCAL, replica_lag_time_max_ms=LAG_MS)
    state.make_leader(
        leader_and_isr(
            leader_epoch=5, controller_epoch=7, isr=(1, 2), replicas=(3, 1, 2), zk_version=9
        ),
        now_ms=0,
        log_end_offset=10,
    )

    assert state.is_leader
    assert (state.leader, state.leader_epoch, state.controller_epoch) == (LOCAL, 5, 7)
    assert state.zk_version == 9
    assert state.assigned_replicas == (3, 1, 2)
    assert isr_of(state) == (1, 2)
    assert state.follower_log_end_offsets() == {3: UNKNOWN_OFFSET, 2: UNKNOWN_OFFSET}
    assert state.append_error(1) is ErrorCode.NONE


def test_a_leader_alone_in_the_isr_has_its_log_end_as_high_watermark() -> None:
    state = new_leader(isr=(1,), replicas=(1, 2, 3), log_end=5)

    assert state.high_watermark == 5
    assert state.maybe_increment_high_watermark(8) is True
    assert state.high_watermark == 8


def test_a_new_leader_never_starts_with_a_high_watermark_past_its_log_end() -> None:
    state = new_leader(isr=(1, 2), high_watermark=10, log_end=7)

    assert state.high_watermark == 7


def test_a_new_leader_keeps_its_high_watermark_until_every_isr_follower_has_fetched() -> None:
    state = new_leader(isr=(1, 2, 3), high_watermark=3, log_end=10)
    assert state.high_watermark == 3

    first = fetch(state, 2, fetch_offset=8, leader_log_end=10, now_ms=1)
    assert first == Fetched(high_watermark_advanced=False, isr_expanded=False)
    assert state.high_watermark == 3  # follower 3's LEO is not known yet

    second = fetch(state, 3, fetch_offset=6, leader_log_end=10, now_ms=2)
    assert second.high_watermark_advanced is True
    assert second.isr_expanded is False
    assert state.high_watermark == 6  # min(leader 10, follower 2 at 8, follower 3 at 6)


def test_high_watermark_is_the_minimum_log_end_over_the_isr() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    fetch(state, 3, 10, 10, now_ms=1)
    assert state.high_watermark == 10

    assert state.maybe_increment_high_watermark(15) is False  # the leader appended: followers lag
    assert state.high_watermark == 10
    outcome = fetch(state, 2, 15, 15, now_ms=2)
    assert outcome.high_watermark_advanced is False  # follower 3 is still at 10
    assert state.high_watermark == 10
    outcome = fetch(state, 3, 13, 15, now_ms=3)
    assert outcome.high_watermark_advanced is True
    assert state.high_watermark == 13
    assert state.follower_log_end_offsets() == {2: 15, 3: 13}


def test_high_watermark_never_moves_back_on_a_leader() -> None:
    state = new_leader(isr=(1, 2), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    assert state.high_watermark == 10

    outcome = fetch(state, 2, 4, 10, now_ms=2)  # a follower reporting less than before
    assert outcome.high_watermark_advanced is False
    assert state.high_watermark == 10
    assert state.maybe_increment_high_watermark(6) is False
    assert state.high_watermark == 10


def test_a_fetch_to_a_replica_that_does_not_lead_changes_nothing() -> None:
    state = PartitionState("t", 0, LOCAL, high_watermark=4)
    state.make_follower(leader_and_isr(leader=2, isr=(1, 2)), log_end_offset=10)

    outcome = fetch(state, 3, fetch_offset=10, leader_log_end=10, now_ms=1)

    assert outcome == Fetched()
    assert isr_of(state) == (1, 2)
    assert state.high_watermark == 4
    assert state.follower_log_end_offsets() == {}
    assert state.maybe_increment_high_watermark(10) is False
    assert state.high_watermark == 4


def test_a_fetch_from_an_unassigned_replica_changes_nothing() -> None:
    state = new_leader(isr=(1, 2), replicas=(1, 2, 3), log_end=10)
    fetch(state, 2, 5, 10, now_ms=1)
    assert state.high_watermark == 5

    outcome = fetch(state, 9, fetch_offset=10, leader_log_end=10, now_ms=2)

    assert outcome == Fetched()
    assert isr_of(state) == (1, 2)
    assert state.high_watermark == 5
    assert 9 not in state.follower_log_end_offsets()


def test_a_fetch_from_the_leader_itself_is_ignored() -> None:
    state = new_leader(isr=(1, 2), log_end=10)

    assert fetch(state, LOCAL, 10, 10, now_ms=1) == Fetched()
    assert state.high_watermark == 0


def test_make_follower_forgets_followers_and_keeps_the_hw_within_its_log() -> None:
    state = new_leader(isr=(1, 2), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    assert state.high_watermark == 10

    state.make_follower(leader_and_isr(leader=2, leader_epoch=1, isr=(1, 2)), log_end_offset=6)

    assert state.is_leader is False
    assert state.leader == 2
    assert state.leader_epoch == 1
    assert state.follower_log_end_offsets() == {}
    assert state.high_watermark == 6
    assert state.append_error(1) is ErrorCode.NOT_LEADER_FOR_PARTITION
    assert state.append_error(-1) is ErrorCode.NOT_LEADER_FOR_PARTITION


def test_a_leader_elected_again_waits_for_fresh_fetches_before_moving_the_hw() -> None:
    state = new_leader(isr=(1, 2), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    state.make_follower(leader_and_isr(leader=2, leader_epoch=1, isr=(1, 2)), log_end_offset=10)

    state.make_leader(leader_and_isr(leader_epoch=2, isr=(1, 2)), now_ms=5, log_end_offset=20)

    assert state.follower_log_end_offsets() == {2: UNKNOWN_OFFSET, 3: UNKNOWN_OFFSET}
    assert state.high_watermark == 10
    fetch(state, 2, 20, 20, now_ms=6)
    assert state.high_watermark == 20


def test_stop_ends_leadership_and_the_isr() -> None:
    state = new_leader(isr=(1, 2), log_end=10)

    state.stop()

    assert state.is_leader is False
    assert state.leader == NO_LEADER
    assert isr_of(state) == ()
    assert state.follower_log_end_offsets() == {}
    assert state.append_error(-1) is ErrorCode.NOT_LEADER_FOR_PARTITION
    assert fetch(state, 2, 10, 10, now_ms=1) == Fetched()
    assert shrink(state, 10 * LAG_MS, 10) == ()


# -- ISR expansion ---------------------------------------------------------------------------


def test_an_assigned_follower_rejoins_the_isr_once_its_fetch_offset_reaches_the_hw() -> None:
    state = new_leader(isr=(1, 2), replicas=(1, 2, 3), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    assert state.high_watermark == 10

    below = fetch(state, 3, 9, 10, now_ms=2)
    assert below.isr_expanded is False
    assert isr_of(state) == (1, 2)

    at_hw = fetch(state, 3, 10, 10, now_ms=3)
    assert at_hw.isr_expanded is True
    assert isr_of(state) == (1, 2, 3)
    assert state.high_watermark == 10

    again = fetch(state, 3, 10, 10, now_ms=4)
    assert again.isr_expanded is False
    assert isr_of(state) == (1, 2, 3)


def test_a_follower_that_rejoined_holds_the_hw_back_until_it_catches_up() -> None:
    state = new_leader(isr=(1, 2), replicas=(1, 2, 3), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    fetch(state, 3, 10, 10, now_ms=2)
    assert isr_of(state) == (1, 2, 3)

    fetch(state, 2, 20, 20, now_ms=3)
    assert state.high_watermark == 10  # follower 3, now in the ISR, is at 10
    outcome = fetch(state, 3, 15, 20, now_ms=4)
    assert outcome.high_watermark_advanced is True
    assert state.high_watermark == 15


# -- ISR shrink ------------------------------------------------------------------------------


def test_isr_followers_count_as_caught_up_when_the_leader_takes_over() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10, now_ms=1_000)

    assert state.out_of_sync_replicas(1_000 + LAG_MS) == ()  # exactly the lag: still in sync
    assert state.out_of_sync_replicas(1_000 + LAG_MS + 1) == (2, 3)


def test_only_isr_members_are_reported_out_of_sync() -> None:
    state = new_leader(isr=(1, 2), replicas=(1, 2, 3), log_end=10)

    assert state.out_of_sync_replicas(10 * LAG_MS) == (2,)


def test_a_fetch_at_the_leaders_log_end_is_caught_up_now() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10)

    fetch(state, 2, 10, 10, now_ms=80)

    assert state.out_of_sync_replicas(80 + LAG_MS) == (3,)
    assert state.out_of_sync_replicas(80 + LAG_MS + 1) == (2, 3)


def test_a_fetch_at_the_previous_fetchs_leader_end_was_caught_up_at_that_previous_fetch() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10)
    fetch(state, 2, 0, 20, now_ms=10)  # behind; the leader's LEO at this fetch is 20
    fetch(state, 3, 0, 20, now_ms=10)

    fetch(state, 2, 20, 30, now_ms=90)  # reached 20: caught up as of t=10, not t=90
    fetch(state, 3, 19, 30, now_ms=90)  # one short of 20: not caught up at all

    assert state.out_of_sync_replicas(LAG_MS) == ()
    assert state.out_of_sync_replicas(LAG_MS + 1) == (3,)  # last caught up at t=0
    assert state.out_of_sync_replicas(10 + LAG_MS) == (3,)
    assert state.out_of_sync_replicas(10 + LAG_MS + 1) == (2, 3)


def test_a_follower_that_stops_fetching_leaves_the_isr_and_the_hw_moves_on() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10)
    fetch(state, 2, 10, 10, now_ms=1)
    fetch(state, 3, 4, 10, now_ms=1)
    assert state.high_watermark == 4

    assert shrink(state, LAG_MS, 10) == ()  # exactly the lag since t=0
    assert isr_of(state) == (1, 2, 3)
    fetch(state, 2, 10, 10, now_ms=LAG_MS)
    removed = shrink(state, LAG_MS + 1, 10)

    assert removed == (3,)
    assert isr_of(state) == (1, 2)
    assert state.high_watermark == 10


def test_a_follower_that_never_fetched_leaves_the_isr_and_unblocks_the_hw() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10)
    fetch(state, 2, 10, 10, now_ms=LAG_MS)
    assert state.high_watermark == 0  # follower 3's LEO is unknown

    assert shrink(state, LAG_MS + 1, 10) == (3,)
    assert state.high_watermark == 10


def test_shrinking_below_min_isr_refuses_acks_all_but_not_acks_one_or_zero() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10, min_insync_replicas=2)
    fetch(state, 2, 10, 10, now_ms=LAG_MS)
    assert state.append_error(-1) is ErrorCode.NONE

    shrink(state, LAG_MS + 1, 10)
    assert isr_of(state) == (1, 2)
    assert state.append_error(-1) is ErrorCode.NONE  # exactly min.insync.replicas

    shrink(state, 3 * LAG_MS, 10)
    assert isr_of(state) == (1,)
    assert state.append_error(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert state.append_error(1) is ErrorCode.NONE
    assert state.append_error(0) is ErrorCode.NONE


def test_a_follower_trailing_by_the_newest_append_under_steady_load_stays_in_the_isr() -> None:
    state = new_leader(isr=(1, 2), log_end=0)
    log_end = 0
    fetch_offset = 0
    for now in range(0, 20 * LAG_MS, LAG_MS // 2):
        log_end += 5  # a new append arrives just before every fetch
        fetch(state, 2, fetch_offset, log_end, now_ms=now)
        fetch_offset = log_end  # the next fetch asks for what this one returned
        assert shrink(state, now, log_end) == ()
        assert isr_of(state) == (1, 2)
    assert state.high_watermark == log_end - 5


def test_a_follower_that_keeps_fetching_two_appends_behind_leaves_the_isr() -> None:
    state = new_leader(isr=(1, 2), log_end=0)
    log_end = 0
    removed_at = None
    for now in range(0, 20 * LAG_MS, LAG_MS // 2):
        log_end += 5
        fetch(state, 2, max(0, log_end - 10), log_end, now_ms=now)  # two appends behind
        if shrink(state, now, log_end) == (2,):
            removed_at = now
            break
    assert removed_at == 3 * LAG_MS // 2  # never caught up: the first check past LAG_MS
    assert isr_of(state) == (1,)


def test_out_of_sync_checks_do_nothing_on_a_follower() -> None:
    state = PartitionState("t", 0, LOCAL, replica_lag_time_max_ms=LAG_MS)
    state.make_follower(leader_and_isr(leader=2, isr=(1, 2, 3)), log_end_offset=0)

    assert state.out_of_sync_replicas(100 * LAG_MS) == ()
    assert shrink(state, 100 * LAG_MS, 0) == ()
    assert isr_of(state) == (1, 2, 3)


# -- the follower's view ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("leader_hw", "log_end", "expected"),
    [(10, 7, 7), (10, 12, 10), (10, 10, 10), (0, 5, 0)],
)
def test_a_followers_hw_is_the_leaders_hw_bounded_by_its_own_log_end(
    leader_hw: int, log_end: int, expected: int
) -> None:
    state = PartitionState("t", 0, LOCAL, high_watermark=3)
    state.make_follower(leader_and_isr(leader=2, isr=(1, 2)), log_end_offset=20)

    changed = state.update_follower_high_watermark(leader_hw, log_end)

    assert state.high_watermark == expected
    assert changed is (expected != 3)
    assert state.update_follower_high_watermark(leader_hw, log_end) is False


# -- the HW against a model ------------------------------------------------------------------

FOLLOWERS = (2, 3)


@settings(max_examples=300, deadline=None)
@given(isr=st.sampled_from([(1, 2, 3), (1, 2), (1, 3), (1,)]), data=st.data())
def test_high_watermark_matches_the_isr_minimum_on_random_histories(
    isr: tuple[int, ...], data: st.DataObject
) -> None:
    state = new_leader(isr=isr, replicas=(1, 2, 3), log_end=0)
    log_end = 0
    now = 0
    fetched: dict[int, int] = {}  # follower -> its latest fetch offset since the leader took over
    previous_hw = state.high_watermark
    steps = data.draw(st.integers(min_value=1, max_value=60), label="steps")
    for _ in range(steps):
        kind = data.draw(st.sampled_from(["append", "fetch", "fetch", "tick", "shrink"]))
        if kind == "append":
            log_end += data.draw(st.integers(min_value=1, max_value=5))
            state.maybe_increment_high_watermark(log_end)  # as the leader does after appending
        elif kind == "fetch":
            replica = data.draw(st.sampled_from(FOLLOWERS))
            low = fetched.get(replica, 0)
            offset = data.draw(st.integers(min_value=low, max_value=log_end))
            fetch(state, replica, offset, log_end, now)
            fetched[replica] = offset
        elif kind == "tick":
            now += data.draw(st.integers(min_value=0, max_value=2 * LAG_MS))
        else:
            shrink(state, now, log_end)

        hw = state.high_watermark
        assert hw >= previous_hw, "the HW moved back"
        assert hw <= log_end, "the HW passed the leader's log end"
        assert set(state.isr) >= {LOCAL}
        followers_in_isr = [r for r in state.isr if r != LOCAL]
        if all(r in fetched for r in followers_in_isr):
            assert hw == min([log_end, *(fetched[r] for r in followers_in_isr)])
        previous_hw = hw


# -- leader epochs: following, ISR membership (KIP-101, KAFKA-7128) ---------------------------


def new_follower(*, leader: int = 2, leader_epoch: int = 0, log_end: int = 0) -> PartitionState:
    state = PartitionState("t", 0, LOCAL, replica_lag_time_max_ms=LAG_MS)
    assert state.make_follower(leader_and_isr(leader=leader, leader_epoch=leader_epoch), log_end)
    return state


def test_a_first_follow_and_a_new_leader_need_truncation_the_same_leader_does_not() -> None:
    state = new_follower(leader=2, leader_epoch=3)
    assert state.follow_start_epoch == 3

    # the controller shrank the ISR: same leader, newer epoch -> nothing to truncate
    assert not state.make_follower(leader_and_isr(leader=2, leader_epoch=4, isr=(1, 2)), 10)
    assert state.follow_start_epoch == 3
    assert state.leader_epoch == 4
    assert isr_of(state) == (1, 2)

    # another leader: truncation again, following from its epoch
    assert state.make_follower(leader_and_isr(leader=3, leader_epoch=5), 10)
    assert state.follow_start_epoch == 5


def test_following_again_after_a_stop_or_after_leading_needs_truncation() -> None:
    state = new_follower(leader=2, leader_epoch=1)
    state.stop()
    assert state.make_follower(leader_and_isr(leader=2, leader_epoch=2), 0)

    state.make_leader(leader_and_isr(leader=LOCAL, leader_epoch=3), now_ms=0, log_end_offset=0)
    assert state.make_follower(leader_and_isr(leader=2, leader_epoch=4), 0)


def test_follows_epoch_accepts_epochs_of_the_current_leadership_only() -> None:
    state = new_follower(leader=2, leader_epoch=3)
    state.make_follower(leader_and_isr(leader=2, leader_epoch=5), 0)

    assert [e for e in range(8) if state.follows_epoch(e)] == [3, 4, 5]
    state.make_leader(leader_and_isr(leader=LOCAL, leader_epoch=6), now_ms=0, log_end_offset=0)
    assert not any(state.follows_epoch(e) for e in range(8))


def test_a_follower_joins_the_isr_only_once_past_the_leaders_epoch_start() -> None:
    # KAFKA-7128: the new leader's HW (0) lags; its log ended at 50 when it took over, and
    # everything committed lies below that. A follower at 10 is past the HW, not the start.
    state = new_leader(isr=(1,), log_end=50, high_watermark=0)
    assert state.leader_epoch_start_offset == 50

    outcome = fetch(state, 2, fetch_offset=10, leader_log_end=50, now_ms=1)
    assert not outcome.isr_expanded
    assert isr_of(state) == (1,)

    outcome = fetch(state, 2, fetch_offset=50, leader_log_end=50, now_ms=2)
    assert outcome.isr_expanded
    assert isr_of(state) == (1, 2)


def test_an_isr_member_fetching_below_the_hw_lost_data_and_leaves_the_isr_at_once() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=20)
    fetch(state, 2, fetch_offset=20, leader_log_end=20, now_ms=1)
    fetch(state, 3, fetch_offset=20, leader_log_end=20, now_ms=1)
    assert state.high_watermark == 20

    # broker 3 came back from a power loss the controller has not noticed yet
    outcome = fetch(state, 3, fetch_offset=12, leader_log_end=20, now_ms=2)

    assert outcome == Fetched(isr_shrunk=True)
    assert isr_of(state) == (1, 2)
    assert state.high_watermark == 20  # never back
    # once caught up again it rejoins
    assert fetch(state, 3, fetch_offset=20, leader_log_end=20, now_ms=3).isr_expanded


def test_an_isr_shrink_refused_by_zookeeper_keeps_the_member() -> None:
    state = new_leader(isr=(1, 2), log_end=20)
    fetch(state, 2, fetch_offset=20, leader_log_end=20, now_ms=1)

    change = state.update_follower(2, fetch_offset=5, leader_log_end=20, now_ms=2).isr_change
    assert change is not None and change.removed == (2,)
    state.abort_isr_change(change)  # the versioned write failed

    assert isr_of(state) == (1, 2)
    assert state.pending_isr_change is None
    # the next check proposes the shrink again
    assert shrink(state, 3 * LAG_MS, 20) == (2,)


def test_a_leader_in_a_newer_epoch_keeps_what_it_knew_of_its_followers() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=20)
    fetch(state, 2, fetch_offset=20, leader_log_end=20, now_ms=1)
    fetch(state, 3, fetch_offset=20, leader_log_end=20, now_ms=1)

    state.make_leader(leader_and_isr(leader_epoch=1, isr=(1, 2)), now_ms=5, log_end_offset=30)

    assert state.follower_log_end_offsets() == {2: 20, 3: 20}
    assert state.leader_epoch_start_offset == 30


# -- ISR changes are decided here and take effect once written ---------------------------------


def test_a_decided_isr_change_takes_effect_only_when_committed() -> None:
    state = new_leader(isr=(1, 2), log_end=20, replicas=(1, 2, 3))
    fetch(state, 2, fetch_offset=20, leader_log_end=20, now_ms=1)
    fetch(state, 3, fetch_offset=5, leader_log_end=20, now_ms=1)

    outcome = state.update_follower(3, fetch_offset=20, leader_log_end=20, now_ms=2)

    change = outcome.isr_change
    assert change == PendingIsrChange(isr=(1, 2, 3), added=(3,), zk_version=0)
    assert isr_of(state) == (1, 2)  # not yet: the znode is written first
    assert state.pending_isr_change is change
    assert state.commit_isr_change(change, zk_version=7)
    assert isr_of(state) == (1, 2, 3)
    assert state.zk_version == 7
    assert state.pending_isr_change is None


def test_the_hw_counts_a_replica_being_added_before_the_change_is_written() -> None:
    state = new_leader(isr=(1,), log_end=10, replicas=(1, 2))
    assert state.high_watermark == 10  # the leader alone in the ISR
    # the leader appended up to 30 and broker 2 reaches the HW: it is proposed for the ISR
    outcome = state.update_follower(2, fetch_offset=10, leader_log_end=30, now_ms=2)

    assert outcome.isr_change is not None and outcome.isr_change.added == (2,)
    assert state.maximal_isr == (1, 2)
    assert isr_of(state) == (1,)
    # alone in the ISR the leader would move the HW to 30, past what broker 2 holds
    assert state.high_watermark == 10
    assert not state.maybe_increment_high_watermark(30)


def test_one_isr_change_at_a_time() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=20)
    fetch(state, 2, fetch_offset=20, leader_log_end=20, now_ms=1)
    fetch(state, 3, fetch_offset=20, leader_log_end=20, now_ms=1)
    first = state.update_follower(3, fetch_offset=10, leader_log_end=20, now_ms=2).isr_change
    assert first is not None

    second = state.update_follower(2, fetch_offset=10, leader_log_end=20, now_ms=2).isr_change

    assert second is None
    assert state.maybe_shrink_isr(10 * LAG_MS) is None
    assert state.pending_isr_change is first


def test_a_leader_and_isr_supersedes_an_unwritten_change() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=20)
    fetch(state, 2, fetch_offset=20, leader_log_end=20, now_ms=1)
    fetch(state, 3, fetch_offset=20, leader_log_end=20, now_ms=1)
    change = state.update_follower(3, fetch_offset=10, leader_log_end=20, now_ms=2).isr_change
    assert change is not None

    state.make_leader(leader_and_isr(leader_epoch=1, isr=(1, 2, 3), zk_version=4), 3, 20)

    assert state.pending_isr_change is None
    assert not state.commit_isr_change(change, zk_version=5)  # a late commit changes nothing
    assert isr_of(state) == (1, 2, 3)
    assert state.zk_version == 4
