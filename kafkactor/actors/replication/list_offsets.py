"""ListOffsets on a leader: Kafka's `Partition.fetchOffsetForTimestamp` for consumers."""

from __future__ import annotations

from kafkactor.messages.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from kafkactor.storage import Log

NOT_FOUND = (-1, -1)
READ_UNCOMMITTED = 0  # Kafka's IsolationLevel: reads up to the high watermark
READ_COMMITTED = 1  # reads up to the last stable offset (KIP-98)


def offset_for_timestamp(log: Log, last_fetchable: int, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) a consumer is told for `timestamp`.

    `last_fetchable` is Kafka's lastFetchableOffset: the high watermark for read_uncommitted,
    the last stable offset for read_committed. EARLIEST_TIMESTAMP is the log start offset and
    LATEST_TIMESTAMP `last_fetchable` (a consumer never learns of offsets it may not read),
    both with timestamp -1. Any other timestamp finds the first record whose timestamp is at
    or after it, through the time index; a record at or past `last_fetchable` is not
    revealed: (-1, -1), as when no record is that late.
    """
    if timestamp == EARLIEST_TIMESTAMP:
        return -1, log.log_start_offset
    if timestamp == LATEST_TIMESTAMP:
        return -1, last_fetchable
    found = log.fetch_offset_by_timestamp(timestamp)
    if found is None:
        return NOT_FOUND
    offset, record_timestamp = found
    if offset >= last_fetchable:
        return NOT_FOUND
    return record_timestamp, offset
