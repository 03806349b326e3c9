"""Timer (Kafka's SystemTimer) driven by a ManualClock: when tasks run, demotion, cancel, size."""

from __future__ import annotations

import io
import json
import time

import pytest

from kafkactor import tracing
from kafkactor.timer import CallbackTask, ManualClock, Timer, TimerTask
from tests.timer.support import RecordingTask


def make_timer(start_ms: int = 0, tick_ms: int = 1) -> tuple[ManualClock, Timer]:
    clock = ManualClock(start_ms)
    return clock, Timer(clock, tick_ms=tick_ms, wheel_size=20)


def advance(clock: ManualClock, timer: Timer, ms: int) -> None:
    clock.advance(ms)
    timer.advance_clock(0)


def level_of(timer: Timer, task: TimerTask) -> int | None:
    entry = task._entry
    for level, wheel in enumerate(timer.wheel.levels()):
        if entry is not None and any(entry.list is bucket for bucket in wheel.buckets):
            return level
    return None


def test_task_runs_at_its_expiration_not_before() -> None:
    clock, timer = make_timer(start_ms=1_000)
    task = RecordingTask(10, clock)
    timer.add(task)
    advance(clock, timer, 9)
    assert task.runs == 0
    advance(clock, timer, 1)
    assert task.ran_at == [1_010]
    advance(clock, timer, 100)
    assert task.runs == 1  # exactly once


@pytest.mark.parametrize("delay_ms", [0, -1, -10_000])
def test_already_expired_task_runs_at_once_on_add(delay_ms: int) -> None:
    clock, timer = make_timer(start_ms=500)
    task = RecordingTask(delay_ms, clock)
    timer.add(task)
    assert task.ran_at == [500]
    assert timer.size == 0


def test_expired_on_add_is_judged_against_the_clock_not_the_lagging_wheel() -> None:
    clock, timer = make_timer()
    clock.advance(5_000)  # the wheel has flushed nothing, so its own time is still 0
    task = RecordingTask(0, clock)
    timer.add(task)
    assert task.ran_at == [5_000]


def test_demotion_through_four_levels_runs_at_the_exact_tick() -> None:
    clock, timer = make_timer()
    task = RecordingTask(12_345, clock)
    timer.add(task)
    assert level_of(timer, task) == 3
    seen_levels = [3]
    while task.runs == 0:
        advance(clock, timer, 1)
        level = level_of(timer, task)
        if level is not None and level != seen_levels[-1]:
            seen_levels.append(level)
    assert seen_levels == [3, 2, 1, 0]
    assert task.ran_at == [12_345]


def test_overflow_bucket_tasks_run_or_move_down_when_the_bucket_expires() -> None:
    clock, timer = make_timer()
    tasks = {delay: RecordingTask(delay, clock) for delay in (400, 401, 415, 799)}
    for task in tasks.values():
        timer.add(task)
    # all four share the level-2 bucket [400, 800)
    assert {level_of(timer, t) for t in tasks.values()} == {2}
    assert len({id(t._entry.list) for t in tasks.values() if t._entry is not None}) == 1
    clock.advance(400)
    timer.advance_clock(0)
    assert tasks[400].ran_at == [400]
    assert level_of(timer, tasks[401]) == 0
    assert level_of(timer, tasks[415]) == 0
    assert level_of(timer, tasks[799]) == 1
    advance(clock, timer, 1_000)
    assert [tasks[d].ran_at for d in (401, 415, 799)] == [[1_400]] * 3


def test_one_advance_catches_up_on_everything_due() -> None:
    clock, timer = make_timer()
    tasks = [RecordingTask(delay, clock) for delay in (1, 19, 20, 399, 8_000, 100_000)]
    for task in tasks:
        timer.add(task)
    advance(clock, timer, 200_000)
    assert [task.ran_at for task in tasks] == [[200_000]] * len(tasks)
    assert timer.size == 0


@pytest.mark.parametrize("delay_ms", [5, 50, 5_000, 50_000, 5_000_000])
def test_cancel_at_every_level_never_runs_and_spares_neighbours(delay_ms: int) -> None:
    clock, timer = make_timer()
    victim = RecordingTask(delay_ms, clock)
    neighbour = RecordingTask(delay_ms, clock)
    timer.add(victim)
    timer.add(neighbour)
    assert level_of(timer, victim) == level_of(timer, neighbour)
    victim.cancel()
    assert timer.size == 1
    advance(clock, timer, delay_ms)
    assert victim.runs == 0
    assert neighbour.ran_at == [delay_ms]


def test_size_is_exactly_the_number_of_live_tasks() -> None:
    clock, timer = make_timer()
    tasks = [RecordingTask(delay, clock) for delay in range(1, 101)]
    for task in tasks:
        timer.add(task)
    assert timer.size == 100
    for task in tasks[50:80]:
        task.cancel()
    assert timer.size == 70
    advance(clock, timer, 20)  # runs delays 1..20
    assert timer.size == 50
    advance(clock, timer, 1_000)
    assert timer.size == 0
    assert sum(task.runs for task in tasks) == 70


def test_tasks_added_while_a_bucket_is_flushed() -> None:
    clock, timer = make_timer()
    order: list[str] = []
    later = RecordingTask(5, clock)

    def spawn() -> None:
        order.append("parent")
        timer.add(CallbackTask(0, lambda: order.append("immediate child")))
        timer.add(later)

    timer.add(CallbackTask(10, spawn))
    advance(clock, timer, 10)
    assert order == ["parent", "immediate child"]
    assert later.runs == 0
    advance(clock, timer, 5)
    assert later.ran_at == [15]


def test_a_task_cancelled_by_an_earlier_task_of_the_same_bucket_does_not_run() -> None:
    clock, timer = make_timer()
    victim = RecordingTask(10, clock)
    timer.add(CallbackTask(10, victim.cancel))
    timer.add(victim)
    advance(clock, timer, 10)
    assert victim.runs == 0
    assert timer.size == 0


def test_adding_a_pending_task_again_moves_it() -> None:
    clock, timer = make_timer()
    task = RecordingTask(10, clock)
    timer.add(task)
    task.delay_ms = 30
    timer.add(task)
    assert timer.size == 1
    advance(clock, timer, 10)
    assert task.runs == 0
    advance(clock, timer, 20)
    assert task.ran_at == [30]


def test_a_task_may_reschedule_itself_from_run() -> None:
    clock, timer = make_timer()

    class Periodic(TimerTask):
        def __init__(self) -> None:
            super().__init__(10)
            self.ran_at: list[int] = []

        def run(self) -> None:
            self.ran_at.append(clock.now_ms())
            if len(self.ran_at) < 3:
                timer.add(self)

    task = Periodic()
    timer.add(task)
    for _ in range(5):
        advance(clock, timer, 10)
    assert task.ran_at == [10, 20, 30]


def test_coarser_tick_never_runs_a_task_more_than_one_tick_early() -> None:
    clock, timer = make_timer(tick_ms=10)
    task = RecordingTask(25, clock)  # due at 25, bucket [20, 30)
    timer.add(task)
    advance(clock, timer, 19)
    assert task.runs == 0
    advance(clock, timer, 1)
    assert task.ran_at == [20]
    assert 25 - task.ran_at[0] < 10


def test_custom_executor_receives_due_tasks_instead_of_running_them() -> None:
    clock = ManualClock()
    handed: list[TimerTask] = []
    timer = Timer(clock, executor=handed.append)
    task = RecordingTask(3, clock)
    timer.add(task)
    advance(clock, timer, 3)
    assert handed == [task]
    assert task.runs == 0


def test_a_failing_task_is_logged_and_the_rest_still_run() -> None:
    clock, timer = make_timer()

    def explode() -> None:
        raise RuntimeError("boom")

    survivor = RecordingTask(5, clock)
    timer.add(CallbackTask(5, explode))
    timer.add(survivor)
    stream = io.BytesIO()
    with tracing.configured(stream=stream):
        advance(clock, timer, 5)
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert survivor.ran_at == [5]
    assert [e["event"] for e in events] == ["timer.task_error"]
    assert events[0]["task"] == "CallbackTask"


def test_advance_clock_reports_whether_anything_was_due_and_never_blocks_on_manual_time() -> None:
    clock, timer = make_timer()
    timer.add(RecordingTask(50, clock))
    started = time.monotonic()
    assert timer.advance_clock(10_000) is False
    assert time.monotonic() - started < 1.0
    clock.advance(50)
    assert timer.advance_clock(0) is True
    assert timer.advance_clock(0) is False


def test_queued_buckets_stay_bounded_by_the_wheels_bucket_count() -> None:
    clock, timer = make_timer()
    tasks = [RecordingTask(delay, clock) for delay in range(1, 30_001, 7)]
    for task in tasks:
        timer.add(task)
    levels = timer.wheel.levels()
    assert timer.queued_buckets <= sum(len(w.buckets) for w in levels)
    for _ in range(40):
        advance(clock, timer, 777)
        assert timer.queued_buckets <= sum(len(w.buckets) for w in timer.wheel.levels())
    assert all(task.runs == 1 for task in tasks)
