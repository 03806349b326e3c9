"""TimerTaskList (a bucket) and TimerTaskEntry: linking, moving, flushing, counting."""

from __future__ import annotations

from kafkactor.timer import ManualClock, TimerTaskEntry, TimerTaskList
from kafkactor.timer.task import TaskCounter
from tests.timer.support import RecordingTask

CLOCK = ManualClock()


def test_add_and_iterate_keeps_insertion_order() -> None:
    bucket = TimerTaskList()
    tasks = [RecordingTask(10, CLOCK, i) for i in range(5)]
    for task in tasks:
        bucket.add(TimerTaskEntry(task, 10))
    assert list(bucket) == tasks
    assert len(bucket) == 5


def test_shared_counter_counts_live_entries_across_buckets() -> None:
    counter = TaskCounter()
    first, second = TimerTaskList(counter), TimerTaskList(counter)
    entries = [TimerTaskEntry(RecordingTask(1, CLOCK), 1) for _ in range(4)]
    first.add(entries[0])
    first.add(entries[1])
    second.add(entries[2])
    second.add(entries[3])
    assert counter.value == 4
    first.remove(entries[0])
    assert counter.value == 3
    # removing an entry from a bucket it is not in changes nothing
    first.remove(entries[2])
    assert counter.value == 3
    assert list(second) == [entries[2].task, entries[3].task]


def test_adding_an_entry_to_another_bucket_moves_it() -> None:
    counter = TaskCounter()
    first, second = TimerTaskList(counter), TimerTaskList(counter)
    entry = TimerTaskEntry(RecordingTask(1, CLOCK), 1)
    first.add(entry)
    second.add(entry)
    assert len(first) == 0
    assert len(second) == 1
    assert entry.list is second
    assert counter.value == 1


def test_cancel_unlinks_in_place_and_leaves_neighbours() -> None:
    bucket = TimerTaskList()
    tasks = [RecordingTask(1, CLOCK, i) for i in range(3)]
    for task in tasks:
        bucket.add(TimerTaskEntry(task, 1))
    tasks[1].cancel()
    assert list(bucket) == [tasks[0], tasks[2]]
    assert not tasks[1].is_pending
    tasks[1].cancel()  # cancelling twice is a no-op
    assert list(bucket) == [tasks[0], tasks[2]]


def test_a_new_entry_for_the_same_task_cancels_the_old_one() -> None:
    bucket = TimerTaskList()
    task = RecordingTask(1, CLOCK)
    old = TimerTaskEntry(task, 1)
    bucket.add(old)
    new = TimerTaskEntry(task, 2)
    assert old.cancelled
    assert not new.cancelled
    assert len(bucket) == 0  # the old entry was unlinked when the task moved


def test_flush_hands_out_every_entry_and_resets_expiration() -> None:
    counter = TaskCounter()
    bucket = TimerTaskList(counter)
    entries = [TimerTaskEntry(RecordingTask(5, CLOCK, i), 5) for i in range(3)]
    for entry in entries:
        bucket.add(entry)
    assert bucket.set_expiration(5)
    flushed: list[TimerTaskEntry] = []
    bucket.flush(flushed.append)
    assert flushed == entries
    assert all(entry.list is None for entry in entries)
    assert len(bucket) == 0
    assert counter.value == 0
    assert bucket.expiration_ms == -1


def test_set_expiration_reports_only_changes() -> None:
    bucket = TimerTaskList()
    assert bucket.set_expiration(20)
    assert not bucket.set_expiration(20)
    assert bucket.set_expiration(40)
