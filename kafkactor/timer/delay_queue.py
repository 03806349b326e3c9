"""The priority queue of buckets that drives a timer's clock (the role of Kafka's DelayQueue)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from kafkactor.timer.task import TimerTaskList


class BucketQueue:
    """Buckets ordered by expiration: Kafka's `DelayQueue[TimerTaskList]`.

    It holds buckets, never tasks, so its size is bounded by the number of buckets of all wheel
    levels, however many tasks are pending. A bucket is offered when its expiration changes (once
    per wheel round) and leaves the queue when polled; `on_offer` lets a timer wake a thread that
    waits for the earliest bucket.
    """

    __slots__ = ("_heap", "_seq", "on_offer")

    def __init__(self, on_offer: Callable[[], None] | None = None) -> None:
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = itertools.count()
        self.on_offer = on_offer

    def offer(self, bucket: TimerTaskList) -> None:
        heapq.heappush(self._heap, (bucket.expiration_ms, next(self._seq), bucket))
        if self.on_offer is not None:
            self.on_offer()

    def peek_expiration(self) -> int | None:
        """The earliest queued expiration, or None when the queue is empty."""
        return self._heap[0][0] if self._heap else None

    def poll(self, now_ms: int) -> TimerTaskList | None:
        """Remove and return the earliest bucket if it has expired by `now_ms`, else None."""
        heap = self._heap
        if heap and heap[0][0] <= now_ms:
            return heapq.heappop(heap)[2]
        return None

    def __len__(self) -> int:
        return len(self._heap)
