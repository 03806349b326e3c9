"""Offset lookups: ListOffsets (by timestamp, earliest, latest) and OffsetsForLeaderEpoch."""

from __future__ import annotations

from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode

CONSUMER_REPLICA_ID = -1  # Kafka's replica id of a fetch from a consumer (not a follower)
UNDEFINED_EPOCH = -1  # no leader epoch known (Kafka's UNDEFINED_EPOCH)
UNDEFINED_EPOCH_OFFSET = -1  # no end offset known for an epoch (UNDEFINED_EPOCH_OFFSET)

# -- list offsets --------------------------------------------------------------------------------

EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
LATEST_TIMESTAMP = -1  # ListOffsets: the high watermark (what a consumer may read)


@message
class ListOffsetsPartition:
    """One partition of a ListOffsets request: the offset of the first record at or after
    `timestamp`, or EARLIEST_TIMESTAMP / LATEST_TIMESTAMP."""

    topic: str = ""
    partition: int = 0
    timestamp: int = LATEST_TIMESTAMP
    current_leader_epoch: int = UNDEFINED_EPOCH


@message
class ListOffsetsRequest(Request):
    """Kafka's ListOffsets (api key 2), answered by each partition's leader."""

    partitions: tuple[ListOffsetsPartition, ...] = ()
    # ListOffsets v2+ (KIP-98): READ_COMMITTED (1) answers LATEST with the last stable offset
    isolation_level: int = 0


@message
class ListOffsetsPartitionResult:
    """Where a partition's offset for a timestamp is: -1 / -1 when no record at or after the
    timestamp is below the high watermark."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = UNDEFINED_EPOCH


@message
class ListOffsetsResponse(Response):
    partitions: tuple[ListOffsetsPartitionResult, ...] = ()


# -- leader epochs (KIP-101) ---------------------------------------------------------------------


@message
class OffsetForLeaderPartition:
    """One partition of an OffsetsForLeaderEpoch request: the follower's latest epoch, and the
    leader epoch it follows (a leader in another epoch answers FENCED / UNKNOWN_LEADER_EPOCH)."""

    topic: str = ""
    partition: int = 0
    current_leader_epoch: int = UNDEFINED_EPOCH
    leader_epoch: int = UNDEFINED_EPOCH


@message
class OffsetsForLeaderEpochRequest(Request):
    """Kafka's OffsetsForLeaderEpoch (api key 23): a follower asks the leader where each of
    its epochs ends in the leader's log."""

    replica_id: int = CONSUMER_REPLICA_ID
    partitions: tuple[OffsetForLeaderPartition, ...] = ()


@message
class EpochEndOffset:
    """The leader's answer for one partition: the largest epoch <= the one asked for that it
    knows, and where that epoch ends in its log (the start of the next one, or its log end)."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET


@message
class OffsetsForLeaderEpochResponse(Response):
    partitions: tuple[EpochEndOffset, ...] = ()
