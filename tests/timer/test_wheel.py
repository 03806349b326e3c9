"""TimingWheel on its own: placement, overflow levels, bucket reuse, clock advance."""

from __future__ import annotations

import pytest

from kafkactor.timer import BucketQueue, ManualClock, TimerTaskEntry, TimingWheel
from tests.timer.support import RecordingTask

CLOCK = ManualClock()


def entry(expiration_ms: int) -> TimerTaskEntry:
    return TimerTaskEntry(RecordingTask(expiration_ms, CLOCK), expiration_ms)


def level_and_bucket_of(wheel: TimingWheel, item: TimerTaskEntry) -> tuple[int, int]:
    for level, candidate in enumerate(wheel.levels()):
        for index, bucket in enumerate(candidate.buckets):
            if item.list is bucket:
                return level, index
    raise AssertionError("entry is in no bucket of the wheel")


def test_entry_goes_into_the_bucket_of_its_expiration() -> None:
    queue = BucketQueue()
    wheel = TimingWheel(1, 20, 0, queue=queue)
    item = entry(7)
    assert wheel.add(item)
    assert level_and_bucket_of(wheel, item) == (0, 7)
    assert wheel.buckets[7].expiration_ms == 7
    assert queue.peek_expiration() == 7


def test_expired_or_cancelled_entries_are_refused() -> None:
    wheel = TimingWheel(1, 20, 100)
    assert not wheel.add(entry(100))  # within the current tick: expired
    assert not wheel.add(entry(42))
    cancelled = entry(150)
    assert cancelled.task is not None
    cancelled.task.cancel()
    assert not wheel.add(cancelled)


def test_start_time_is_aligned_to_the_tick() -> None:
    wheel = TimingWheel(10, 20, 1234)
    assert wheel.current_time_ms == 1230
    assert wheel.interval_ms == 200


def test_overflow_wheels_are_created_on_demand_with_the_parent_interval_as_tick() -> None:
    wheel = TimingWheel(1, 20, 0)
    assert len(wheel.levels()) == 1
    wheel.add(entry(19))
    assert len(wheel.levels()) == 1
    wheel.add(entry(25))
    level1 = wheel.overflow_wheel
    assert level1 is not None
    assert (level1.tick_ms, level1.interval_ms) == (20, 400)
    wheel.add(entry(12_345))
    levels = wheel.levels()
    assert [w.tick_ms for w in levels] == [1, 20, 400, 8000]
    assert levels[3].current_time_ms == 0


def test_entries_land_on_the_coarsest_level_they_need() -> None:
    wheel = TimingWheel(1, 20, 0)
    placements = {exp: entry(exp) for exp in (5, 25, 399, 400, 7_999, 8_000, 159_999)}
    for item in placements.values():
        wheel.add(item)
    assert level_and_bucket_of(wheel, placements[5]) == (0, 5)
    assert level_and_bucket_of(wheel, placements[25]) == (1, 1)
    assert level_and_bucket_of(wheel, placements[399]) == (1, 19)
    assert level_and_bucket_of(wheel, placements[400]) == (2, 1)
    assert level_and_bucket_of(wheel, placements[7_999]) == (2, 19)
    assert level_and_bucket_of(wheel, placements[8_000]) == (3, 1)
    assert level_and_bucket_of(wheel, placements[159_999]) == (3, 19)


def test_huge_expirations_climb_as_many_levels_as_needed() -> None:
    wheel = TimingWheel(1, 20, 0)
    far = entry(2**50)
    assert wheel.add(far)
    level, _ = level_and_bucket_of(wheel, far)
    assert 20**level <= 2**50 < 20 ** (level + 1)


def test_a_bucket_is_enqueued_once_per_round_and_reused_in_the_next() -> None:
    offers: list[int] = []
    queue = BucketQueue(on_offer=lambda: offers.append(1))
    wheel = TimingWheel(1, 20, 0, queue=queue)
    wheel.add(entry(5))
    wheel.add(entry(5))
    assert len(offers) == 1  # same bucket, same expiration: queued once
    bucket = queue.poll(5)
    assert bucket is wheel.buckets[5]
    wheel.advance_clock(bucket.expiration_ms)
    flushed: list[TimerTaskEntry] = []
    bucket.flush(flushed.append)
    assert len(flushed) == 2
    # next round: expiration 25 maps to the same slot, which is queued again with the new time
    wheel.advance_clock(20)
    wheel.add(entry(25))
    assert len(offers) == 2
    assert wheel.buckets[5].expiration_ms == 25
    assert queue.peek_expiration() == 25


def test_queue_holds_buckets_not_tasks() -> None:
    queue = BucketQueue()
    wheel = TimingWheel(1, 20, 0, queue=queue)
    for expiration in range(1, 10_000):
        wheel.add(entry(expiration))
    bucket_count = sum(len(level.buckets) for level in wheel.levels())
    assert len(queue) <= bucket_count


def test_advance_clock_moves_every_level_to_its_own_tick() -> None:
    wheel = TimingWheel(1, 20, 0)
    wheel.add(entry(10_000))  # creates levels up to tick 8000
    wheel.advance_clock(8_765)
    assert [w.current_time_ms for w in wheel.levels()] == [8_765, 8_760, 8_400, 8_000]
    wheel.advance_clock(8_765)  # same time again: nothing moves
    assert wheel.current_time_ms == 8_765


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(0, 20), (1, 1)])
def test_invalid_geometry_is_rejected(tick_ms: int, wheel_size: int) -> None:
    with pytest.raises(ValueError, match="tick_ms"):
        TimingWheel(tick_ms, wheel_size, 0)
