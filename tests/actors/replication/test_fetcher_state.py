"""The pure core of a replica fetcher, driven on a ManualClock.

What a follower's fetcher sends next and how each answer moves a partition: epochs first
for a new leader (KIP-101 / KIP-279), one fetch and one epoch question out at a time, no fetch
while an append is out, per-partition backoff after an error, whole-fetcher backoff when the
leader does not answer, out of range ahead of the leader (epochs again) or behind its log
start (start over there), and answers about a partition removed or re-added ignored.
"""

from __future__ import annotations

import pytest

from kafkactor.actors.replication import FetcherState, PartitionFetchState
from kafkactor.actors.replication.fetcher_state import EARLY_RETRIES, EARLY_RETRY_MS
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    EpochEndOffset,
)
from kafkactor.messages.replication import (
    FetcherPartition,
    FetchPartitionData,
)
from kafkactor.timer import ManualClock

BACKOFF = 1000
T0 = TopicPartition(topic="t", partition=0)
T1 = TopicPartition(topic="t", partition=1)

pytestmark = pytest.mark.timeout(10)


def member(
    tp: TopicPartition = T0, *, offset: int = 0, epoch: int = 1, truncate: bool = False
) -> FetcherPartition:
    return FetcherPartition(
        topic=tp.topic,
        partition=tp.partition,
        fetch_offset=offset,
        leader_epoch=epoch,
        truncate=truncate,
        latest_epoch=0 if truncate else -1,
    )


def data(
    tp: TopicPartition = T0,
    *,
    error: ErrorCode = ErrorCode.NONE,
    records: bytes = b"",
    high_watermark: int = 0,
    log_start: int = 0,
    log_end: int = 0,
) -> FetchPartitionData:
    return FetchPartitionData(
        topic=tp.topic,
        partition=tp.partition,
        error_code=error,
        records=records,
        high_watermark=high_watermark,
        log_start_offset=log_start,
        log_end_offset=log_end,
    )


def epoch_end(
    tp: TopicPartition = T0, *, end: int = 5, error: ErrorCode = ErrorCode.NONE
) -> EpochEndOffset:
    return EpochEndOffset(
        topic=tp.topic, partition=tp.partition, error_code=error, leader_epoch=0, end_offset=end
    )


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


def idle(state: FetcherState, now: int) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """What would go out now with nothing in flight: (asking epochs, fetching)."""
    out = state.next_requests(now, epochs_out=False, fetch_out=False)
    return [s.topic_partition for s in out.ask_epochs], [s.topic_partition for s in out.fetch]


def test_a_new_leaders_partition_asks_its_epochs_before_it_fetches(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, truncate=True), member(T1, offset=7)])

    assert idle(state, clock.now_ms()) == ([T0], [T1])


def test_the_same_leader_in_a_newer_epoch_only_learns_the_epoch(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, offset=7, epoch=1)])
    before = state.partitions[T0]

    state.add([member(T0, offset=0, epoch=2)])  # no truncation asked: same leader

    assert state.partitions[T0] is before
    assert (before.fetch_offset, before.leader_epoch) == (7, 2)


def test_one_epoch_question_and_one_fetch_out_at_a_time(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, truncate=True), member(T1)])

    out = state.next_requests(clock.now_ms(), epochs_out=True, fetch_out=True)

    assert out.ask_epochs == () and out.fetch == ()


def test_no_fetch_goes_out_while_an_append_is_out(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0), member(T1)])
    state.stepping(7, state.partitions[T0])

    assert idle(state, clock.now_ms()) == ([], [])

    assert (
        state.step_answered(
            7, log_end_offset=12, latest_epoch=1, error_code=ErrorCode.NONE, now_ms=clock.now_ms()
        )
        is state.partitions[T0]
    )
    assert state.partitions[T0].fetch_offset == 12
    assert idle(state, clock.now_ms()) == ([], [T0, T1])


def test_fetched_records_or_a_new_hw_are_appended_nothing_new_is_not(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0)])

    first = state.fetched(data(records=b"x", high_watermark=0), clock.now_ms())
    assert first is not None and first.append
    hw_only = state.fetched(data(high_watermark=3), clock.now_ms())
    assert hw_only is not None and hw_only.append
    nothing = state.fetched(data(high_watermark=3), clock.now_ms())
    assert nothing is not None and not nothing.append and nothing.truncate_from is None


def test_an_error_backs_off_that_partition_alone(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0), member(T1)])

    state.fetched(data(T0, error=ErrorCode.NOT_LEADER_FOR_PARTITION), clock.now_ms())

    out = state.next_requests(clock.now_ms(), epochs_out=False, fetch_out=False)
    assert [s.topic_partition for s in out.fetch] == [T1]
    assert out.wake_at_ms == clock.now_ms() + BACKOFF
    clock.advance(BACKOFF)
    assert idle(state, clock.now_ms()) == ([], [T0, T1])


def test_ahead_of_the_leader_finds_its_truncation_point_from_the_epochs_again(
    clock: ManualClock,
) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, offset=50)])

    fetched = state.fetched(
        data(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_start=0, log_end=40), clock.now_ms()
    )

    assert fetched is not None and fetched.truncate_from is None and not fetched.append
    assert state.partitions[T0].truncating
    assert idle(state, clock.now_ms()) == ([T0], [])


def test_behind_the_leaders_log_start_starts_over_there(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, offset=3)])

    fetched = state.fetched(
        data(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_start=20, log_end=40), clock.now_ms()
    )

    assert fetched is not None and fetched.truncate_from == 20


def test_out_of_range_that_is_in_range_by_now_is_tried_again_later(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, offset=30)])

    fetched = state.fetched(
        data(error=ErrorCode.OFFSET_OUT_OF_RANGE, log_start=20, log_end=40), clock.now_ms()
    )

    assert fetched is not None and fetched.truncate_from is None
    assert not state.partitions[T0].truncating
    assert state.partitions[T0].retry_at_ms == clock.now_ms() + BACKOFF


def test_a_silent_leader_backs_the_whole_fetcher_off_and_releases_the_asked(
    clock: ManualClock,
) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, truncate=True), member(T1)])
    state.asking(3, [state.partitions[T0]])
    assert state.partitions[T0].busy

    state.leader_failed(3, clock.now_ms())

    assert not state.partitions[T0].busy
    out = state.next_requests(clock.now_ms() + BACKOFF - 1, epochs_out=False, fetch_out=False)
    assert out.ask_epochs == () and out.fetch == ()
    assert out.wake_at_ms == clock.now_ms() + BACKOFF
    assert idle(state, clock.now_ms() + BACKOFF) == ([T0], [T1])


def test_epoch_answers_give_truncation_points_and_errors_back_off(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, truncate=True), member(T1, truncate=True)])
    state.asking(3, [state.partitions[T0], state.partitions[T1]])

    outcome = state.epochs_answered(
        3,
        {T0: epoch_end(T0, end=5), T1: epoch_end(T1, error=ErrorCode.KAFKA_STORAGE_ERROR)},
        clock.now_ms(),
    )

    assert [(s.topic_partition, e.end_offset) for s, e in outcome.truncate] == [(T0, 5)]
    assert [(s.topic_partition, code) for s, code in outcome.errors] == [
        (T1, ErrorCode.KAFKA_STORAGE_ERROR)
    ]
    assert state.partitions[T1].retry_at_ms == clock.now_ms() + BACKOFF
    assert not state.partitions[T0].busy


@pytest.mark.parametrize(
    "error", [ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.UNKNOWN_LEADER_EPOCH]
)
def test_a_leader_not_yet_leading_is_asked_again_soon_a_few_times(
    clock: ManualClock, error: ErrorCode
) -> None:
    """The controller's LeaderAndIsr reached the follower before the leader: the follower
    asks again after EARLY_RETRY_MS, not after the whole backoff, EARLY_RETRIES times in a
    row; an answer resets the count."""
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, truncate=True)])
    t0 = state.partitions[T0]

    def ask_and_fail(correlation_id: int) -> int:
        assert state.next_requests(clock.now_ms(), epochs_out=False, fetch_out=False).ask_epochs
        state.asking(correlation_id, [t0])
        state.epochs_answered(correlation_id, {T0: epoch_end(T0, error=error)}, clock.now_ms())
        return t0.retry_at_ms - clock.now_ms()

    waits = []
    for n in range(EARLY_RETRIES + 1):
        waits.append(ask_and_fail(n))
        clock.advance(waits[-1])
    assert waits == [EARLY_RETRY_MS] * EARLY_RETRIES + [BACKOFF]
    assert EARLY_RETRIES >= 5 and EARLY_RETRY_MS <= 50  # a few tries within a fraction of 1 s

    state.asking(99, [t0])
    state.epochs_answered(99, {T0: epoch_end(T0, end=0)}, clock.now_ms())  # it leads now
    assert t0.early_retries == 0


def test_answers_about_a_partition_removed_or_re_added_are_ignored(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0, truncate=True)])
    old = state.partitions[T0]
    state.asking(3, [old])
    state.stepping(4, old)

    state.remove([T0])
    state.add([member(T0, truncate=True, epoch=2)])  # a new leader meanwhile

    assert state.epochs_answered(3, {T0: epoch_end()}, clock.now_ms()).truncate == ()
    assert (
        state.step_answered(
            4, log_end_offset=9, latest_epoch=1, error_code=ErrorCode.NONE, now_ms=0
        )
        is None
    )
    assert state.partitions[T0] is not old and state.partitions[T0].fetch_offset == 0
    assert state.fetched(data(records=b"x"), clock.now_ms()) is None  # truncating: no appends


def test_a_failed_local_step_backs_the_partition_off(clock: ManualClock) -> None:
    state = FetcherState(backoff_ms=BACKOFF)
    state.add([member(T0)])
    state.stepping(5, state.partitions[T0])

    assert (
        state.step_answered(
            5,
            log_end_offset=4,
            latest_epoch=1,
            error_code=ErrorCode.KAFKA_STORAGE_ERROR,
            now_ms=clock.now_ms(),
        )
        is None
    )
    assert state.partitions[T0].fetch_offset == 4
    assert state.partitions[T0].retry_at_ms == clock.now_ms() + BACKOFF

    state.stepping(6, state.partitions[T0])
    state.local_failed(6, clock.now_ms() + 10)
    assert state.partitions[T0].retry_at_ms == clock.now_ms() + 10 + BACKOFF
    assert not state.partitions[T0].busy


def test_partition_fetch_states_compare_by_identity() -> None:
    one = PartitionFetchState(topic_partition=T0, fetch_offset=0, leader_epoch=1)
    two = PartitionFetchState(topic_partition=T0, fetch_offset=0, leader_epoch=1)
    assert one != two
    assert {id(one): one}[id(one)] is one
