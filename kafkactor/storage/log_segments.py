"""A log's segments by base offset (Kafka's `LogSegments`)."""

from __future__ import annotations

import bisect

from kafkactor.storage.segment import LogSegment


class LogSegments:
    """Kafka's `LogSegments`: the segments of one log, keyed and ordered by base offset.

    `by_base` and `bases` are the map and the sorted list themselves, so the `Log` reads them
    on its hot path without a call; changes go through `add` and `remove`, which keep both
    in step. The last segment is the active one.
    """

    __slots__ = ("bases", "by_base")

    def __init__(self) -> None:
        self.by_base: dict[int, LogSegment] = {}
        self.bases: list[int] = []

    def add(self, segment: LogSegment) -> None:
        self.by_base[segment.base_offset] = segment
        bisect.insort(self.bases, segment.base_offset)

    def remove(self, base: int) -> LogSegment:
        self.bases.remove(base)
        return self.by_base.pop(base)

    def floor_index(self, offset: int) -> int:
        """The index in `bases` of the segment that would hold `offset` (-1: before all)."""
        return bisect.bisect_right(self.bases, offset) - 1

    @property
    def active(self) -> LogSegment:
        return self.by_base[self.bases[-1]]

    def in_order(self) -> list[LogSegment]:
        """The segments, oldest first."""
        return [self.by_base[base] for base in self.bases]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self.by_base.values())

    def __len__(self) -> int:
        return len(self.bases)
