"""Values the log hands out: offset positions, append results, read results."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOffsetMetadata:
    """Kafka's `LogOffsetMetadata`: an offset with the segment and byte position where it sits.

    DelayedFetch compares these to decide whether a fetch offset and the log end (or high
    watermark) are on the same segment and how many bytes lie between them.
    """

    offset: int
    segment_base_offset: int
    position: int

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from `other` to this position (both on the same segment)."""
        if not self.on_same_segment(other):
            raise ValueError(f"{self} and {other} are on different segments")
        return self.position - other.position


@dataclass(frozen=True, slots=True, kw_only=True)
class LogAppendInfo:
    """Kafka's `LogAppendInfo`: what one append wrote."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    batch_count: int
    size_in_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LogReadResult:
    """Kafka's `FetchDataInfo`: whole record batches read from a log, and where the read began.

    `records` may be empty (the fetch offset is the log end, or the bound stopped the read).
    `fetch_offset_metadata` is the fetch offset with the segment and position of the first batch
    returned (or that would be returned).
    """

    records: bytes
    fetch_offset_metadata: LogOffsetMetadata

    @property
    def size_in_bytes(self) -> int:
        return len(self.records)
