"""ListOffsets on a leader: Kafka's `Partition.fetchOffsetForTimestamp` for consumers."""

from __future__ import annotations

from kafkactor.messages.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from kafkactor.storage import Log

NOT_FOUND = (-1, -1)


def offset_for_timestamp(log: Log, high_watermark: int, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) a consumer (read-uncommitted) is told for `timestamp`.

    EARLIEST_TIMESTAMP is the log start offset and LATEST_TIMESTAMP the high watermark (a
    consumer never learns of offsets it may not read), both with timestamp -1. Any other
    timestamp finds the first record whose timestamp is at or after it, through the time
    index; a record at or past the high watermark is not revealed: (-1, -1), as when no
    record is that late.
    """
    if timestamp == EARLIEST_TIMESTAMP:
        return -1, log.log_start_offset
    if timestamp == LATEST_TIMESTAMP:
        return -1, high_watermark
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return NOT_FOUND
    offset, record_timestamp = found
    if offset >= high_watermark:
        return NOT_FOUND
    return record_timestamp, offset
