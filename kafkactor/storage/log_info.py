"""Values the log hands out: offset positions, append results, read results."""

from __future__ import annotations

from dataclasses import dataclass

from kafkactor.common import LogOffsetMetadata

__all__ = ["LogAppendInfo", "LogOffsetMetadata", "LogReadResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LogAppendInfo:
    """Kafka's `LogAppendInfo`: what one append wrote.

    `duplicate` marks a leader append that retried an idempotent producer's batch already in
    the log: the offsets and max timestamp are the original batch's, the counts the retry's;
    nothing was written (`size_in_bytes` 0) and the log end did not move.
    `log_append_time` is the time a `LogAppendTime` leader stamped the batches with (the
    original batch's for a duplicate), NO_TIMESTAMP (-1) on a CreateTime log or a follower.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    record_count: int
    batch_count: int
    size_in_bytes: int
    duplicate: bool = False
    log_append_time: int = -1


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
