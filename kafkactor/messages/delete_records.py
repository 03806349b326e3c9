"""The messages of DeleteRecords (KIP-107) and DescribeLogDirs: a client's request to a broker's
replica manager, the replica manager's order to each leader partition, the DeleteRecords
purgatory's operation, and the answers."""

from __future__ import annotations

from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode

HIGH_WATERMARK = -1  # Kafka's DeleteRecordsRequest.HIGH_WATERMARK: delete up to the HW
INVALID_LOW_WATERMARK = -1  # Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK


# -- DeleteRecords -------------------------------------------------------------------------------


@message
class DeleteRecordsPartition:
    """Delete the records of one partition below `offset` (HIGH_WATERMARK: below the HW)."""

    topic: str = ""
    partition: int = 0
    offset: int = HIGH_WATERMARK


@message
class DeleteRecordsRequest(Request):
    """Kafka's DeleteRecordsRequest to a replica manager: its leader partitions move their log
    start offsets; the answer comes once every replica's log start reached them (the low
    watermark), or after `timeout_ms`."""

    partitions: tuple[DeleteRecordsPartition, ...] = ()
    timeout_ms: int = 30_000


@message
class DeleteRecordsPartitionResult:
    """One partition's answer: its low watermark, or why not (-1 with an error)."""

    topic: str = ""
    partition: int = 0
    low_watermark: int = INVALID_LOW_WATERMARK
    error_code: ErrorCode = ErrorCode.NONE
    message: str = ""


@message
class DeleteRecordsResponse(Response):
    partitions: tuple[DeleteRecordsPartitionResult, ...] = ()


@message
class DeleteRecordsOnLeader(Request):
    """The replica manager's order to a leader partition (Kafka's
    `Partition.deleteRecordsOnLeader`): move the log start offset to `offset`."""

    topic: str = ""
    partition: int = 0
    offset: int = HIGH_WATERMARK


@message
class RecordsDeleted(Response):
    """What a leader partition did: the offset it moved its log start to (the HW for
    HIGH_WATERMARK) and its low watermark then, or the error (both -1)."""

    topic: str = ""
    partition: int = 0
    requested_offset: int = -1
    low_watermark: int = INVALID_LOW_WATERMARK
    error_code: ErrorCode = ErrorCode.NONE
    message: str = ""


@message
class DeleteRecordsStatus:
    """One partition of a DelayedDeleteRecords: the low watermark to wait for, the low watermark
    when it was applied, or an error decided before the wait."""

    topic: str = ""
    partition: int = 0
    required_offset: int = -1
    low_watermark: int = INVALID_LOW_WATERMARK
    error_code: ErrorCode = ErrorCode.NONE


@message
class DeleteRecordsSpec:
    """A DelayedDeleteRecords: waits until every partition's low watermark reaches its
    `required_offset`."""

    partitions: tuple[DeleteRecordsStatus, ...] = ()


# -- DescribeLogDirs -----------------------------------------------------------------------------


@message
class DescribeLogDirsTopic:
    """The partitions of one topic a DescribeLogDirs asks about."""

    topic: str = ""
    partitions: tuple[int, ...] = ()


@message
class DescribeLogDirsRequest(Request):
    """Kafka's DescribeLogDirsRequest to a replica manager: `topics` None asks for every
    partition this broker holds."""

    topics: tuple[DescribeLogDirsTopic, ...] | None = None


@message
class LogDirPartition:
    """One replica's log in a log directory (Kafka's DescribeLogDirsPartition)."""

    topic: str = ""
    partition: int = 0
    size: int = 0
    offset_lag: int = 0
    is_future: bool = False


@message
class LogDirDescription:
    """One log directory of the broker, with the replicas it holds and its disk space."""

    path: str = ""
    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[LogDirPartition, ...] = ()
    total_bytes: int = -1
    usable_bytes: int = -1


@message
class DescribeLogDirsResponse(Response):
    dirs: tuple[LogDirDescription, ...] = ()
