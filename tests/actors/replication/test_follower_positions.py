"""Follower fetches the replica manager does not pass on to an idle leader partition's actor.

`FollowerPositions` leaves out a fetch that finds the follower where it was last told, at the
leader's log end; the partition learns when it was last caught up from the next position it is
told or from the ISR-expiration check. The partition's decisions (HW, who is out of sync) must be
exactly those it makes hearing of every fetch.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.actors.replication.follower_positions import FollowerPositions
from tests.actors.replication.test_partition import LAG_MS, new_leader

pytestmark = pytest.mark.timeout(60)


def fetched(
    positions: FollowerPositions, replica: int, offset: int, log_end: int, now: int
) -> tuple[int, int] | None:
    return positions.fetched(
        replica,
        leader_epoch=0,
        fetch_offset=offset,
        log_start_offset=-1,
        leader_log_end=log_end,
        now_ms=now,
    )


def test_a_follower_caught_up_as_last_told_is_not_told_again() -> None:
    positions = FollowerPositions(refresh_ms=1_000)
    assert fetched(positions, 2, 10, 10, now=0) == (-1, -1)  # first fetch: told
    assert fetched(positions, 2, 10, 10, now=100) is None  # nothing new
    assert fetched(positions, 2, 10, 10, now=200) is None
    assert positions.caught_up() == ((2, 10, 200),)
    # the leader appended: the follower is behind, so it is told, with the last caught-up fetch
    assert fetched(positions, 2, 10, 12, now=300) == (10, 200)
    assert fetched(positions, 2, 12, 12, now=400) == (10, -1)  # it moved: told
    assert fetched(positions, 2, 12, 12, now=1_400) == (12, -1)  # refresh_ms since told


def test_a_new_leader_epoch_or_log_start_offset_is_told() -> None:
    positions = FollowerPositions(refresh_ms=1_000)
    fetched(positions, 2, 10, 10, now=0)
    assert positions.fetched(
        2, leader_epoch=1, fetch_offset=10, log_start_offset=-1, leader_log_end=10, now_ms=10
    ) == (-1, -1)
    assert positions.fetched(
        2, leader_epoch=1, fetch_offset=10, log_start_offset=5, leader_log_end=10, now_ms=20
    ) == (10, -1)


def test_the_isr_check_is_skipped_only_when_every_follower_caught_up_lately() -> None:
    positions = FollowerPositions(refresh_ms=1_000)
    fetched(positions, 2, 10, 10, now=100)  # told, at the log end
    fetched(positions, 3, 8, 10, now=100)  # told, behind
    assert not positions.all_caught_up_since([2, 3], 50)  # 3 has not caught up
    fetched(positions, 3, 10, 10, now=200)
    assert positions.all_caught_up_since([2, 3], 100)
    assert not positions.all_caught_up_since([2, 3], 101)  # 2 last seen caught up at 100
    fetched(positions, 2, 10, 10, now=300)  # not told, but seen caught up
    assert positions.all_caught_up_since([2, 3], 200)
    assert not positions.all_caught_up_since([2, 3, 4], 0)  # 4 never fetched


def test_the_partition_takes_a_caught_up_fetch_only_at_the_offset_it_knows() -> None:
    state = new_leader(isr=(1, 2, 3), log_end=10)
    state.update_follower(2, 10, 10, now_ms=0)
    state.follower_caught_up(2, 9, at_ms=80)  # not where it knows the follower: ignored
    assert state.out_of_sync_replicas(LAG_MS + 1) == (2, 3)
    state.follower_caught_up(2, 10, at_ms=80)
    assert state.out_of_sync_replicas(LAG_MS + 1) == (3,)
    assert state.out_of_sync_replicas(80 + LAG_MS + 1) == (2, 3)


_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3)),
        st.tuples(st.just("fetch"), st.sampled_from([2, 3]), st.integers(0, 3)),
        st.tuples(st.just("wait"), st.integers(1, LAG_MS)),
        st.tuples(st.just("check"), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_steps)
def test_the_partition_decides_as_if_it_heard_every_fetch(steps: list[tuple]) -> None:  # type: ignore[type-arg]
    every = new_leader(isr=(1, 2, 3), log_end=0)
    told = new_leader(isr=(1, 2, 3), log_end=0)
    positions = FollowerPositions(refresh_ms=10 * LAG_MS)
    log_end, now = 0, 0
    offsets = {2: 0, 3: 0}

    def check() -> None:
        if positions.all_caught_up_since([2, 3], now - LAG_MS):  # the check is not sent
            assert every.out_of_sync_replicas(now) == ()
            return
        for replica, offset, at_ms in positions.caught_up():
            told.follower_caught_up(replica, offset, at_ms)
        assert told.out_of_sync_replicas(now) == every.out_of_sync_replicas(now)
        assert told.high_watermark == every.high_watermark

    for step in steps:
        if step[0] == "append":
            log_end += step[1]
        elif step[0] == "wait":
            now += step[1]
        elif step[0] == "check":
            check()
        else:
            _, replica, behind = step
            offset = max(offsets[replica], log_end - behind)
            offsets[replica] = offset
            every.update_follower(replica, offset, log_end, now)
            caught_up = fetched(positions, replica, offset, log_end, now)
            if caught_up is not None:
                if caught_up[1] >= 0:
                    told.follower_caught_up(replica, *caught_up)
                told.update_follower(replica, offset, log_end, now)
            assert told.high_watermark == every.high_watermark
    check()
