"""The timer against a reference model on random add / cancel / advance sequences.

The model is a plain dictionary of pending tasks. A task is due once the clock reaches the start
of its tick (`expiration - expiration % tick_ms`: never more than one tick early); it must run at
the first `advance_clock` at which it is due, or on `add` itself when it is already expired.
With a tick wider than 1 ms, a task added when its tick has already started may run either on
`add` or at the next advance (the wheel's own time lags the clock); the model accepts both.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.timer import ManualClock, Timer
from tests.timer.support import RecordingTask

Add = tuple[str, int]
Op = tuple[str, int]

delays = st.one_of(
    st.integers(min_value=-50, max_value=0),  # already expired
    st.integers(min_value=1, max_value=60),  # level 0 and 1
    st.integers(min_value=1, max_value=20_000),  # up to level 3
    st.integers(min_value=1, max_value=10**9),  # very far away
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), delays),
        st.tuples(st.just("cancel"), st.integers(min_value=0, max_value=10**6)),
        st.tuples(
            st.just("advance"),
            st.one_of(
                st.integers(min_value=0, max_value=3),
                st.integers(min_value=0, max_value=500),
                st.integers(min_value=0, max_value=50_000),
            ),
        ),
    ),
    max_size=120,
)


@dataclass
class ModelTask:
    task: RecordingTask
    due_ms: int  # start of the tick holding the expiration
    cancelled: bool = False
    fired: bool = False


@settings(max_examples=400, deadline=None)
@given(
    tick_ms=st.sampled_from([1, 1, 2, 5]),
    wheel_size=st.sampled_from([2, 3, 8, 20]),
    start_ms=st.integers(min_value=0, max_value=10**6),
    ops=operations,
)
def test_timer_fires_the_same_tasks_at_the_same_ticks_as_the_model(
    tick_ms: int, wheel_size: int, start_ms: int, ops: list[Op]
) -> None:
    clock = ManualClock(start_ms)
    timer = Timer(clock, tick_ms=tick_ms, wheel_size=wheel_size)
    model: list[ModelTask] = []

    def pending() -> list[ModelTask]:
        return [m for m in model if not m.fired and not m.cancelled]

    for step, (kind, arg) in enumerate(ops):
        now = clock.now_ms()
        if kind == "add":
            task = RecordingTask(arg, clock, label=len(model))
            expiration = now + arg
            entry = ModelTask(task, expiration - expiration % tick_ms)
            model.append(entry)
            timer.add(task)
            if expiration <= now:
                assert task.ran_at == [now], f"step {step}: expired task not run on add"
            elif entry.due_ms > now:
                assert task.runs == 0, f"step {step}: task ran on add before its tick"
            else:
                assert task.ran_at in ([], [now]), f"step {step}: ran at {task.ran_at}"
            entry.fired = task.runs > 0
        elif kind == "cancel":
            live = pending()
            if live:
                victim = live[arg % len(live)]
                victim.task.cancel()
                victim.cancelled = True
        else:
            due_before = {id(m) for m in pending() if m.due_ms <= now + arg}
            clock.advance(arg)
            timer.advance_clock(0)
            now = clock.now_ms()
            for m in model:
                if id(m) in due_before:
                    assert m.task.ran_at == [now], f"step {step}: due task {m.task.label} not run"
                    m.fired = True
                elif not m.fired:
                    assert m.task.runs == 0, f"step {step}: task {m.task.label} ran early"
        for m in model:
            assert m.task.runs == (1 if m.fired else 0), f"step {step}: task {m.task.label}"
        assert timer.size == len(pending()), f"step {step}: size"
        bucket_count = sum(len(w.buckets) for w in timer.wheel.levels())
        assert timer.queued_buckets <= bucket_count
        # the invariant TimingWheel.add relies on to pick a level arithmetically
        finest = timer.wheel.current_time_ms
        for wheel in timer.wheel.levels():
            assert wheel.current_time_ms == finest - finest % wheel.tick_ms

    # finally everything still pending runs once the clock passes every deadline
    clock.advance(10**10)
    timer.advance_clock(0)
    for m in model:
        expected = 0 if m.cancelled and not m.fired else 1
        assert m.task.runs == expected
    assert timer.size == 0
