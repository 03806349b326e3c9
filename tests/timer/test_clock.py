"""Clocks: SystemClock (Kafka's Time.SYSTEM) and ManualClock (Kafka's MockTime)."""

from __future__ import annotations

import math
import threading
import time

import pytest

from kafkactor.timer import Clock, ManualClock, SystemClock

# Bound for waits on other threads: generous, it only matters when something is broken.
WAIT_S = 5.0


# -- SystemClock -------------------------------------------------------------------------------


def test_both_clocks_satisfy_the_clock_protocol() -> None:
    assert isinstance(SystemClock(), Clock)
    assert isinstance(ManualClock(), Clock)


def test_system_clock_reads_like_epoch_milliseconds() -> None:
    clock = SystemClock()
    for _ in range(100):
        before_ms = math.floor(time.time() * 1000)
        now_ms = clock.now_ms()
        after_ms = math.ceil(time.time() * 1000)
        # 1 ms of slack either side for rounding of the two clocks (and an NTP slew since the
        # clock was built, which moves the wall clock by far less than that).
        assert before_ms - 1 <= now_ms <= after_ms + 1


def test_system_clock_never_decreases() -> None:
    clock = SystemClock()
    previous = clock.now_ms()
    for _ in range(200_000):
        now = clock.now_ms()
        assert now >= previous
        previous = now


def test_system_clock_wait_returns_after_about_the_timeout() -> None:
    clock = SystemClock()
    condition = threading.Condition()
    with condition:
        started = time.monotonic()
        clock.wait(condition, 50)
        elapsed = time.monotonic() - started
    assert 0.045 <= elapsed < WAIT_S


@pytest.mark.parametrize("timeout_ms", [0, -5])
def test_system_clock_wait_without_positive_timeout_returns_at_once(timeout_ms: int) -> None:
    # Condition.wait(None) would wait forever: a non-positive timeout must not mean "no timeout".
    clock = SystemClock()
    condition = threading.Condition()
    with condition:
        started = time.monotonic()
        clock.wait(condition, timeout_ms)
        elapsed = time.monotonic() - started
    assert elapsed < 1.0


def test_system_clock_wait_ends_early_when_notified_from_another_thread() -> None:
    clock = SystemClock()
    condition = threading.Condition()
    waiting = threading.Event()
    elapsed: list[float] = []

    def waiter() -> None:
        with condition:
            waiting.set()  # set while holding the lock: a notify can only come once we wait
            started = time.monotonic()
            clock.wait(condition, 60_000)
            elapsed.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter, name="clock-waiter", daemon=True)
    thread.start()
    try:
        assert waiting.wait(WAIT_S)
        with condition:  # acquirable only once the waiter released the lock inside wait()
            condition.notify_all()
    finally:
        thread.join(WAIT_S)
    assert not thread.is_alive(), "the notified wait did not end"
    assert len(elapsed) == 1
    assert elapsed[0] < WAIT_S  # far below the 60 s timeout: the notify ended the wait


# -- ManualClock -------------------------------------------------------------------------------


def test_manual_clock_starts_where_told_and_moves_only_when_told() -> None:
    assert ManualClock().now_ms() == 0
    clock = ManualClock(1_000)
    assert clock.now_ms() == 1_000
    assert clock.now_ms() == 1_000
    assert clock.advance(5) == 1_005
    assert clock.now_ms() == 1_005
    assert clock.advance(0) == 1_005
    assert clock.set(2_000) == 2_000
    assert clock.now_ms() == 2_000
    assert clock.set(2_000) == 2_000


def test_manual_clock_refuses_to_move_backwards() -> None:
    clock = ManualClock(100)
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(99)
    assert clock.now_ms() == 100


def test_manual_clock_listeners_get_the_new_time() -> None:
    clock = ManualClock(10)
    first: list[int] = []
    second: list[int] = []
    clock.add_listener(first.append)
    clock.add_listener(second.append)
    clock.advance(5)
    clock.set(40)
    clock.advance(0)
    assert first == [15, 40, 40]
    assert second == [15, 40, 40]


def test_manual_clock_removed_listener_is_not_called() -> None:
    clock = ManualClock()
    kept: list[int] = []
    removed: list[int] = []
    clock.add_listener(kept.append)
    clock.add_listener(removed.append)
    clock.advance(1)
    clock.remove_listener(removed.append)
    clock.advance(1)
    clock.remove_listener(removed.append)  # removing an unknown listener is a no-op
    clock.advance(1)
    assert kept == [1, 2, 3]
    assert removed == [1]


def test_manual_clock_rejected_move_calls_no_listener() -> None:
    clock = ManualClock(7)
    seen: list[int] = []
    clock.add_listener(seen.append)
    with pytest.raises(ValueError):
        clock.advance(-3)
    assert seen == []


def test_manual_clock_calls_listeners_outside_its_lock() -> None:
    # A listener may use the clock, even (un)register listeners, without deadlocking.
    clock = ManualClock()
    seen: list[tuple[int, int]] = []

    def once(now_ms: int) -> None:
        seen.append((now_ms, clock.now_ms()))
        clock.remove_listener(once)
        clock.add_listener(lambda t: seen.append((t, -1)))

    clock.add_listener(once)
    mover = threading.Thread(target=lambda: (clock.advance(3), clock.advance(4)), daemon=True)
    mover.start()
    mover.join(WAIT_S)
    assert not mover.is_alive(), "a listener using the clock deadlocked it"
    assert seen == [(3, 3), (7, -1)]


def test_manual_clock_advances_from_many_threads_add_up() -> None:
    clock = ManualClock()
    calls: list[int] = []
    clock.add_listener(calls.append)  # list.append is atomic
    start = threading.Barrier(4, timeout=WAIT_S)

    def mover() -> None:
        start.wait()
        for _ in range(2_000):
            clock.advance(1)

    threads = [threading.Thread(target=mover, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 2)
    assert not any(thread.is_alive() for thread in threads)
    assert clock.now_ms() == 8_000
    # Every move notified once, each with a distinct new time (listeners may see them out of
    # order: they are called outside the lock).
    assert sorted(calls) == list(range(1, 8_001))


def test_manual_clock_wait_returns_at_once() -> None:
    clock = ManualClock(500)
    condition = threading.Condition()
    with condition:
        started = time.monotonic()
        clock.wait(condition, 60_000)
        elapsed = time.monotonic() - started
    assert elapsed < 1.0  # far below the 60 s asked for: a manual clock never waits
    assert clock.now_ms() == 500  # and waiting does not move its time
