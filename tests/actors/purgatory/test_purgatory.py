"""The pure Purgatory, deterministically: a ManualClock, a Timer running expirations inline.

Kafka's bug history is the checklist: exactly one completion when expiry and completion race
(KAFKA-385), completed operations purged from watcher lists (KAFKA-664), try / watch / try again
(KAFKA-1430), empty watcher lists removed (KAFKA-2160).
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Hashable, Iterator

import pytest

from kafkactor.actors.purgatory import DelayedOperation, Purgatory
from kafkactor.timer import ManualClock, Timer


class FlagOperation(DelayedOperation):
    """Completes when `ready` is set (or, with `ready_on_try=n`, from its n-th try on).

    Records every `on_complete` / `on_expiration` call, in order, with the clock's time (and
    what `completed_by` said when `on_complete` ran).
    """

    def __init__(
        self, delay_ms: int, clock: ManualClock, *, ready: bool = False, ready_on_try: int = 0
    ) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.ready = ready
        self.ready_on_try = ready_on_try
        self.tries = 0
        self.calls: list[str] = []
        self.completed_at: list[int] = []
        self.expired_at_completion: list[bool] = []
        self.completed_by_at_completion: list[object] = []
        self._calls_lock = threading.Lock()

    def try_complete(self) -> bool:
        self.tries += 1
        if self.ready_on_try and self.tries >= self.ready_on_try:
            self.ready = True
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        assert self.is_completed(), "on_complete runs after the operation is marked completed"
        with self._calls_lock:
            self.calls.append("complete")
            self.completed_at.append(self.clock.now_ms())
            self.expired_at_completion.append(self.expired)
            self.completed_by_at_completion.append(self.completed_by)

    def on_expiration(self) -> None:
        with self._calls_lock:
            self.calls.append("expire")

    @property
    def completions(self) -> int:
        return self.calls.count("complete")


class Harness:
    """A purgatory on a ManualClock whose Timer runs expired operations inline."""

    def __init__(self, purge_interval: int = 1000) -> None:
        self.clock = ManualClock(0)
        self.timer = Timer(self.clock)
        self.purgatory = Purgatory("Test", self.timer, purge_interval=purge_interval)

    def op(
        self, delay_ms: int = 200, *, ready: bool = False, ready_on_try: int = 0
    ) -> FlagOperation:
        return FlagOperation(delay_ms, self.clock, ready=ready, ready_on_try=ready_on_try)

    def watch(self, operation: FlagOperation, *keys: Hashable) -> bool:
        return self.purgatory.try_complete_else_watch(operation, keys)

    def advance(self, ms: int) -> None:
        """Move the clock and let the timer expire everything now due (the Reaper's job)."""
        self.clock.advance(ms)
        while self.timer.advance_clock(0):
            pass


@pytest.fixture
def h() -> Harness:
    return Harness()


# -- completing --------------------------------------------------------------------------------


def test_completes_on_the_first_try_without_watching_or_timing(h: Harness) -> None:
    op = h.op(ready=True)

    assert h.watch(op, "k") is True

    assert op.calls == ["complete"]
    assert op.tries == 1
    assert op.is_completed()
    assert h.purgatory.watched == 0
    assert h.purgatory.keys == 0
    assert h.purgatory.num_delayed == 0
    assert h.purgatory.estimated_total == 0
    assert h.timer.size == 0
    h.advance(1000)
    assert op.calls == ["complete"]


def test_check_and_complete_completes_satisfied_operations_and_drops_them(h: Harness) -> None:
    a, b, c = h.op(), h.op(), h.op()
    other = h.op()
    for op in (a, b, c):
        assert h.watch(op, "k") is False
    assert h.watch(other, "j") is False
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.timer.size) == (4, 4, 4)

    assert h.purgatory.check_and_complete("k") == 0  # nothing satisfied yet: nothing changes
    assert h.purgatory.watched == 4

    a.ready = c.ready = True
    assert h.purgatory.check_and_complete("k") == 2

    assert a.calls == ["complete"]
    assert c.calls == ["complete"]
    assert b.calls == []
    assert h.purgatory.watched == 2  # b under k, other under j
    assert h.purgatory.num_delayed == 2
    assert h.timer.size == 2  # the completed operations left the timer
    assert {id(op) for op in h.purgatory.pending()} == {id(b), id(other)}
    assert h.purgatory.check_and_complete("k") == 0  # already done: not counted again
    assert h.purgatory.check_and_complete("no-such-key") == 0

    h.advance(200)  # the completed ones never expire
    assert a.calls == ["complete"]
    assert c.calls == ["complete"]
    assert b.calls == ["complete", "expire"]


def test_force_complete_returns_true_once_then_false(h: Harness) -> None:
    op = h.op()
    h.watch(op, "k")

    assert op.force_complete() is True
    assert op.force_complete() is False
    assert op.force_complete() is False

    assert op.calls == ["complete"]
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0
    h.advance(500)
    assert op.calls == ["complete"]


def test_an_operation_needs_at_least_one_key(h: Harness) -> None:
    with pytest.raises(ValueError, match="at least one key"):
        h.purgatory.try_complete_else_watch(h.op(), [])
    with pytest.raises(ValueError):
        h.purgatory.try_complete_else_watch(h.op(), iter(()))
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.timer.size) == (0, 0, 0)


# -- expiring ----------------------------------------------------------------------------------


def test_expires_at_its_timeout_and_not_a_tick_before(h: Harness) -> None:
    op = h.op(200)
    assert h.watch(op, "k") is False
    assert h.purgatory.num_delayed == 1

    h.advance(199)
    assert op.calls == []
    assert not op.is_completed()
    assert h.purgatory.num_delayed == 1

    h.advance(1)
    assert op.calls == ["complete", "expire"]  # on_complete first, then on_expiration, once
    assert op.completed_at == [200]
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0

    h.advance(10_000)
    assert op.calls == ["complete", "expire"]


def test_a_timed_operation_knows_its_deadline_and_whether_its_timeout_completed_it(
    h: Harness,
) -> None:
    h.advance(50)
    timed_out, satisfied, at_once = h.op(200), h.op(200), h.op(200, ready=True)
    assert h.watch(timed_out, "k") is False
    assert h.watch(satisfied, "k") is False
    assert h.watch(at_once, "k") is True
    assert (timed_out.deadline_ms, satisfied.deadline_ms) == (250, 250)
    assert at_once.deadline_ms == -1  # completed before it was timed

    satisfied.ready = True
    assert h.purgatory.check_and_complete("k") == 1
    h.advance(200)

    assert timed_out.expired_at_completion == [True]  # set before on_complete ran
    assert satisfied.expired_at_completion == [False]
    assert at_once.expired_at_completion == [False]
    assert (timed_out.expired, satisfied.expired) == (True, False)


@pytest.mark.parametrize("delay_ms", [1, 19, 20, 21, 399, 400, 401, 8_000, 160_001])
def test_expiry_time_across_wheel_levels(h: Harness, delay_ms: int) -> None:
    h.advance(7)  # not aligned with the wheel's buckets
    op = h.op(delay_ms)
    h.watch(op, "k")

    h.advance(delay_ms - 1)
    assert op.calls == []
    h.advance(1)
    assert op.calls == ["complete", "expire"]
    assert op.completed_at == [7 + delay_ms]


def test_a_timeout_already_due_expires_at_once(h: Harness) -> None:
    op = h.op(0)

    assert h.watch(op, "k") is False  # not completed by its tries

    assert op.calls == ["complete", "expire"]
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0


def test_completion_just_before_the_expiring_tick_wins(h: Harness) -> None:
    op = h.op(200)
    h.watch(op, "k")

    h.clock.advance(200)  # the deadline has come, but the Reaper has not run yet
    op.ready = True
    assert h.purgatory.check_and_complete("k") == 1
    h.advance(0)  # now the Reaper runs: the operation is no longer in the timer

    assert op.calls == ["complete"]
    assert h.purgatory.num_delayed == 0
    assert h.purgatory.keys == 0


def test_completion_just_after_the_expiring_tick_does_nothing(h: Harness) -> None:
    op = h.op(200)
    h.watch(op, "k")

    h.advance(200)
    op.ready = True
    assert h.purgatory.check_and_complete("k") == 0
    assert op.force_complete() is False

    assert op.calls == ["complete", "expire"]
    assert h.purgatory.keys == 0  # the expired entry was dropped from the list it sat in
    assert h.purgatory.watched == 0


def test_expire_by_id_completes_and_expires_a_pending_operation_once(h: Harness) -> None:
    op = h.op(200)
    h.watch(op, "k")

    assert h.purgatory.expire(op.operation_id) is True  # the actor's path (OperationsExpired)
    assert op.calls == ["complete", "expire"]
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0

    assert h.purgatory.expire(op.operation_id) is False
    h.advance(500)  # its timer entry is gone: no second expiry
    assert op.calls == ["complete", "expire"]


def test_expire_by_id_after_completion_does_nothing(h: Harness) -> None:
    op = h.op(200)
    h.watch(op, "k")
    op.ready = True
    h.purgatory.check_and_complete("k")

    assert h.purgatory.expire(op.operation_id) is False
    assert h.purgatory.expire(10**9) is False  # unknown id
    assert op.calls == ["complete"]


# -- exactly once under threads (KAFKA-385) ----------------------------------------------------


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads often, so racing threads really interleave inside the purgatory."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


@pytest.mark.usefixtures("fast_switching")
def test_force_complete_racing_the_expiring_timer_completes_each_operation_once() -> None:
    h = Harness()
    rng = random.Random(385)
    ops = [h.op(rng.randint(1, 60)) for _ in range(3000)]
    for index, op in enumerate(ops):
        h.watch(op, f"k{index % 7}")
    assert h.purgatory.num_delayed == len(ops)
    due_at = {tick: [op for op in ops if op.delay_ms == tick] for tick in range(1, 61)}

    forced: list[FlagOperation] = []
    errors: list[BaseException] = []
    tick_start = threading.Barrier(2, timeout=10)

    def completer() -> None:  # completes the operations falling due in the tick being expired
        try:
            for tick in range(1, 61):
                tick_start.wait()
                forced.extend(op for op in due_at[tick] if op.force_complete())
        except BaseException as error:  # reported below
            errors.append(error)

    def reaper() -> None:
        try:
            for _ in range(1, 61):
                tick_start.wait()
                h.advance(1)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=completer), threading.Thread(target=reaper)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads), "a racing thread hung"
    assert errors == []

    h.advance(100)
    forced_ids = {id(op) for op in forced}
    assert len(forced_ids) == len(forced)
    for op in ops:
        assert op.completions == 1, op.calls
        if id(op) in forced_ids:
            assert op.calls == ["complete"]
        else:
            assert op.calls == ["complete", "expire"]
    assert 0 < len(forced) < len(ops), "both sides should win some races"
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0


@pytest.mark.usefixtures("fast_switching")
def test_many_threads_forcing_the_same_operations_complete_each_once() -> None:
    h = Harness()
    ops = [h.op(10_000) for _ in range(500)]
    for op in ops:
        h.watch(op, "k")
    wins = [0] * 4
    start = threading.Barrier(4, timeout=10)

    def complete_all(slot: int) -> None:
        start.wait()
        for op in ops:
            if op.force_complete():
                wins[slot] += 1

    threads = [threading.Thread(target=complete_all, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    assert not any(thread.is_alive() for thread in threads)

    assert sum(wins) == len(ops)
    assert all(op.calls == ["complete"] for op in ops)
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0


# -- try, watch, try again (KAFKA-1430) --------------------------------------------------------


def test_condition_met_while_watching_completes_on_the_second_try_untimed(h: Harness) -> None:
    op = h.op(200, ready_on_try=2)  # the event lands between the first try and the watch

    assert h.watch(op, "a", "b") is True

    assert op.tries == 2
    assert op.calls == ["complete"]
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0
    h.advance(1000)
    assert op.calls == ["complete"]
    # the entries it left behind are dropped on the next check of each key (or by a purge)
    assert h.purgatory.check_and_complete("a") == 0
    assert h.purgatory.check_and_complete("b") == 0
    assert h.purgatory.keys == 0


def test_an_operation_completed_while_being_watched_is_not_timed(h: Harness) -> None:
    op = h.op(200)

    class CompletingKey:
        """A key whose hashing (watching under it) coincides with another party completing
        the operation, as another request thread would in Kafka."""

        def __hash__(self) -> int:
            op.force_complete()
            return 1

    assert h.purgatory.try_complete_else_watch(op, ["a", CompletingKey(), "c"]) is False

    assert op.calls == ["complete"]
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0
    assert h.purgatory.watched <= 2  # not watched under the keys after its completion
    h.advance(1000)
    assert op.calls == ["complete"]


def test_an_unmet_operation_is_tried_exactly_twice_before_being_timed(h: Harness) -> None:
    op = h.op(200)
    assert h.watch(op, "a", "b", "c") is False
    assert op.tries == 2
    assert h.purgatory.num_delayed == 1
    assert h.timer.size == 1


# -- multiple keys, estimated total, purge (KAFKA-664), empty lists (KAFKA-2160) ----------------


def test_multi_key_operation_is_counted_once_and_watched_under_each_key(h: Harness) -> None:
    op = h.op()
    h.watch(op, "a", "b", "c")

    assert h.purgatory.estimated_total == 1
    assert h.purgatory.watched == 3
    assert h.purgatory.keys == 3
    assert h.purgatory.num_delayed == 1

    op.ready = True
    assert h.purgatory.check_and_complete("b") == 1

    assert op.calls == ["complete"]
    assert h.purgatory.num_delayed == 0
    assert h.purgatory.keys == 2  # b's list emptied and removed
    assert h.purgatory.watched == 2  # stale entries under a and c until a check or a purge
    assert h.purgatory.estimated_total == 1

    assert h.purgatory.check_and_complete("a") == 0  # a stale entry is dropped, not re-counted
    assert h.purgatory.watched == 1
    assert op.calls == ["complete"]


def test_purge_runs_once_completed_operations_exceed_the_purge_interval() -> None:
    h = Harness(purge_interval=3)
    ops = [h.op() for _ in range(4)]
    for op in ops:
        h.watch(op, "a", "b")
    assert h.purgatory.estimated_total == 4
    assert h.purgatory.watched == 8

    for op in ops[:3]:
        op.ready = True
    assert h.purgatory.check_and_complete("a") == 3
    assert h.purgatory.watched == 5  # a: one live, b: three stale + one live
    assert h.purgatory.maybe_purge() == 0  # 4 - 1 = 3 completed-but-counted: not above 3

    ops[3].ready = True
    assert h.purgatory.check_and_complete("a") == 1
    assert h.purgatory.watched == 4  # all four stale under b
    assert h.purgatory.keys == 1

    assert h.purgatory.maybe_purge() == 4  # 4 - 0 > 3
    assert h.purgatory.watched == 0
    assert h.purgatory.keys == 0  # the emptied list went too
    assert h.purgatory.estimated_total == h.purgatory.num_delayed == 0
    assert h.purgatory.purged == 4
    assert all(op.calls == ["complete"] for op in ops)


def test_each_purge_pass_is_reported_with_the_entries_it_removed() -> None:
    h = Harness(purge_interval=1)
    passes: list[int] = []
    h.purgatory.on_purge = passes.append
    ops = [h.op() for _ in range(3)]
    for op in ops:
        h.watch(op, "a", "b")
    for op in ops:
        op.ready = True
    assert h.purgatory.check_and_complete("a") == 3
    assert passes == []  # nothing purges until maybe_purge is asked

    assert h.purgatory.maybe_purge() == 3  # the three stale entries under b
    assert passes == [3]
    assert h.purgatory.maybe_purge() == 0  # nothing counted since: no pass at all
    assert passes == [3]


def test_watching_a_new_operation_triggers_the_purge() -> None:
    h = Harness(purge_interval=3)
    done = [h.op() for _ in range(4)]
    live = h.op()
    h.watch(live, "x")
    for op in done:
        h.watch(op, "a", "b")
    for op in done:
        op.ready = True
    h.purgatory.check_and_complete("a")
    assert h.purgatory.watched == 5  # four stale under b, one live under x

    fresh = h.op()
    assert h.watch(fresh, "c") is False  # 6 counted, 2 delayed: 4 > 3, purge

    assert h.purgatory.watched == 2  # live under x, fresh under c
    assert h.purgatory.keys == 2
    assert h.purgatory.estimated_total == h.purgatory.num_delayed == 2
    assert h.purgatory.purged == 4
    assert live.calls == []
    assert fresh.calls == []


def test_expiry_through_the_purgatory_triggers_the_purge() -> None:
    h = Harness(purge_interval=3)
    ops = [h.op(200) for _ in range(5)]
    for op in ops:
        h.watch(op, "a", "b")
    for op in ops[:4]:
        op.ready = True
    h.purgatory.check_and_complete("a")
    assert h.purgatory.watched == 6

    assert h.purgatory.expire(ops[4].operation_id) is True  # 5 counted, 0 delayed: purge

    assert h.purgatory.watched == 0
    assert h.purgatory.keys == 0
    assert h.purgatory.estimated_total == 0


def test_empty_watcher_lists_are_removed(h: Harness) -> None:
    ops = [h.op() for _ in range(3)]
    for op in ops:
        h.watch(op, "k")
    assert h.purgatory.keys == 1

    for op in ops:
        op.ready = True
    assert h.purgatory.check_and_complete("k") == 3
    assert h.purgatory.keys == 0
    assert h.purgatory.watched == 0

    expiring = h.op(50)
    h.watch(expiring, "j")
    h.advance(50)
    assert expiring.calls == ["complete", "expire"]
    assert h.purgatory.check_and_complete("j") == 0  # only a completed entry: the list goes
    assert h.purgatory.keys == 0


def test_delayed_and_watched_counts_as_operations_complete(h: Harness) -> None:
    ab = h.op(100)
    bc = h.op(100)
    c = h.op(300)
    h.watch(ab, "a", "b")
    h.watch(bc, "b", "c")
    h.watch(c, "c")
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.purgatory.keys) == (3, 5, 3)

    ab.ready = True
    assert h.purgatory.check_and_complete("b") == 1
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.purgatory.keys) == (2, 4, 3)

    h.advance(100)  # bc expires; its entries stay until their keys are checked
    assert bc.calls == ["complete", "expire"]
    assert (h.purgatory.num_delayed, h.purgatory.watched) == (1, 4)

    assert h.purgatory.check_and_complete("c") == 0
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.purgatory.keys) == (1, 3, 3)
    assert h.purgatory.check_and_complete("a") == 0
    assert h.purgatory.check_and_complete("b") == 0
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.purgatory.keys) == (1, 1, 1)

    c.ready = True
    assert h.purgatory.check_and_complete("c") == 1
    assert (h.purgatory.num_delayed, h.purgatory.watched, h.purgatory.keys) == (0, 0, 0)
    assert h.purgatory.pending() == []


# -- what completed an operation ---------------------------------------------------------------


@pytest.mark.timeout(10)
def test_check_and_complete_records_its_cause_on_the_operations_it_completed(h: Harness) -> None:
    ready, waiting, elsewhere = h.op(), h.op(), h.op()
    for op in (ready, waiting):
        h.watch(op, "k")
    h.watch(elsewhere, "j")
    ready.ready = True
    assert h.purgatory.is_watched("k") and not h.purgatory.is_watched("nobody's")

    assert h.purgatory.check_and_complete("k", completed_by="hw moved") == 1

    assert ready.completed_by_at_completion == ["hw moved"]  # set before on_complete ran
    assert (waiting.completed_by, elsewhere.completed_by) == (None, None)
    waiting.ready = elsewhere.ready = True
    assert h.purgatory.check_and_complete("k", completed_by="isr shrank") == 1
    assert h.purgatory.check_and_complete("j") == 1  # said nothing: records nothing
    assert waiting.completed_by_at_completion == ["isr shrank"]
    assert elsewhere.completed_by_at_completion == [None]
    assert h.purgatory.check_and_complete("k", completed_by="later") == 0
    assert ready.completed_by == "hw moved"  # completed once, by the first cause
    assert not h.purgatory.is_watched("k")  # its emptied watcher list is gone


@pytest.mark.timeout(10)
def test_an_operation_completed_by_its_own_try_or_by_force_records_what_it_was_told(
    h: Harness,
) -> None:
    at_once, forced = h.op(ready=True), h.op()
    assert h.watch(at_once, "k") is True
    h.watch(forced, "k")

    assert forced.force_complete(completed_by="the owner") is True
    assert forced.force_complete(completed_by="someone else") is False

    assert at_once.completed_by_at_completion == [None]
    assert forced.completed_by_at_completion == ["the owner"]


@pytest.mark.timeout(10)
def test_an_expiry_records_who_expired_it(h: Harness) -> None:
    by_owner, by_timer = h.op(100), h.op(100)
    h.watch(by_owner, "k")
    h.watch(by_timer, "k")

    assert h.purgatory.expire_all([by_owner.operation_id], completed_by="the reaper") == [by_owner]
    h.advance(100)  # the timer runs the other one's timeout inline: nobody says who

    assert (by_owner.calls, by_timer.calls) == (["complete", "expire"], ["complete", "expire"])
    assert by_owner.completed_by_at_completion == ["the reaper"]
    assert by_owner.expired_at_completion == [True]
    assert by_timer.completed_by_at_completion == [None]
    assert h.purgatory.expire(by_owner.operation_id, completed_by="again") is False
    assert by_owner.completed_by == "the reaper"


@pytest.mark.timeout(10)
def test_a_cause_being_tried_for_on_one_thread_is_not_given_to_a_completion_on_another() -> None:
    """While `maybe_try_complete(cause)` runs on one thread, another thread's
    `force_complete()` completes the operation: it said no cause, and gets none."""
    clock = ManualClock(0)
    inside, forced = threading.Event(), threading.Event()

    class Slow(FlagOperation):
        def try_complete(self) -> bool:
            inside.set()
            assert forced.wait(5), "the other thread never completed the operation"
            return self.force_complete()  # too late: already completed

    op = Slow(100, clock)

    def complete_meanwhile() -> None:
        if inside.wait(5):
            op.force_complete()
            forced.set()

    other = threading.Thread(target=complete_meanwhile)
    other.start()
    try:
        assert op.maybe_try_complete(completed_by="the snapshot being tried") is False
    finally:
        other.join(timeout=5)
    assert not other.is_alive()
    assert op.completed_by_at_completion == [None]
    assert op.completions == 1


# -- cancelling a key --------------------------------------------------------------------------


def test_cancel_for_key_returns_uncompleted_operations_and_untimes_them(h: Harness) -> None:
    first, second, done = h.op(200), h.op(300), h.op(200)
    elsewhere = h.op(200)
    for op in (first, second, done):
        h.watch(op, "k")
    h.watch(elsewhere, "j")
    done.force_complete()
    assert h.purgatory.num_delayed == 3

    cancelled = h.purgatory.cancel_for_key("k")

    assert [id(op) for op in cancelled] == [id(first), id(second)]
    assert h.purgatory.num_delayed == 1
    assert h.timer.size == 1
    assert h.purgatory.keys == 1
    assert not first.is_completed()  # cancelled, not completed: the owner answers them
    h.advance(1000)
    assert first.calls == []
    assert second.calls == []
    assert done.calls == ["complete"]
    assert elsewhere.calls == ["complete", "expire"]
    assert h.purgatory.cancel_for_key("k") == []
    assert h.purgatory.cancel_for_key("never-watched") == []
