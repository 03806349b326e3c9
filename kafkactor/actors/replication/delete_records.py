"""Kafka's `Partition.deleteRecordsOnLeader` (KIP-107): a leader replica moves its log start
offset for a DeleteRecords, and answers its low watermark. The partition actor calls it; it
decides from the replica's `PartitionState` and writes only through `Log`'s own method."""

from __future__ import annotations

from collections.abc import Callable

from kafkactor.actors.replication.partition import PartitionState
from kafkactor.messages import ErrorCode
from kafkactor.messages.delete_records import HIGH_WATERMARK, DeleteRecordsOnLeader, RecordsDeleted
from kafkactor.storage import Log, LogClosedError, OffsetOutOfRangeError, StorageError

__all__ = [  # the partition actor takes the order's type from here too
    "CLIENT_RECORD_DELETION",
    "LEADER_OFFSET_INCREMENTED",
    "DeleteRecordsOnLeader",
    "delete_records_on_leader",
    "follow_leader_log_start",
]

CLIENT_RECORD_DELETION = "ClientRecordDeletion"  # Kafka's LogStartOffsetIncrementReason
LEADER_OFFSET_INCREMENTED = "LeaderOffsetIncremented"


def delete_records_on_leader(  # noqa: PLR0911 - one refusal per Kafka exception
    state: PartitionState,
    log: Log,
    offset: int,
    is_alive: Callable[[int], bool],
) -> RecordsDeleted:
    """Move `log`'s start to `offset` (HIGH_WATERMARK: the high watermark) as the partition's
    leader, with Kafka's refusals: NOT_LEADER_FOR_PARTITION when this replica does not lead,
    POLICY_VIOLATION when the topic's cleanup.policy lacks `delete`, OFFSET_OUT_OF_RANGE for a
    negative offset or one past the high watermark. On success the answer carries the offset
    and the low watermark after the move."""
    topic_partition = f"{state.topic}-{state.partition}"

    def refused(error: ErrorCode, message: str) -> RecordsDeleted:
        return RecordsDeleted(
            topic=state.topic, partition=state.partition, error_code=error, message=message
        )

    if not state.is_leader:
        return refused(
            ErrorCode.NOT_LEADER_FOR_PARTITION,
            f"Leader not local for partition {topic_partition} on broker {state.local_broker}",
        )
    if not log.config.delete:
        return refused(
            ErrorCode.POLICY_VIOLATION,
            f"Records of partition {topic_partition} can not be deleted due to the configured "
            "policy",
        )
    converted = state.high_watermark if offset == HIGH_WATERMARK else offset
    if converted < 0:
        return refused(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"The offset {converted} for partition {topic_partition} is not valid",
        )
    try:
        log.maybe_increment_log_start_offset(
            converted, CLIENT_RECORD_DELETION, high_watermark=state.high_watermark
        )
    except OffsetOutOfRangeError as error:
        return refused(ErrorCode.OFFSET_OUT_OF_RANGE, str(error))
    except LogClosedError as error:
        return refused(ErrorCode.NOT_LEADER_FOR_PARTITION, str(error))
    except StorageError as error:
        return refused(ErrorCode.KAFKA_STORAGE_ERROR, str(error))
    return RecordsDeleted(
        topic=state.topic,
        partition=state.partition,
        requested_offset=converted,
        low_watermark=state.low_watermark(log.log_start_offset, is_alive),
    )


def follow_leader_log_start(state: PartitionState, log: Log, leader_log_start_offset: int) -> bool:
    """A follower's log start follows its leader's, as a fetch answer says it (Kafka's
    `ReplicaFetcherThread.processPartitionData`), up to the follower's own high watermark;
    returns whether it moved."""
    target = min(leader_log_start_offset, state.high_watermark)
    if target <= log.log_start_offset:
        return False
    return log.maybe_increment_log_start_offset(
        target, LEADER_OFFSET_INCREMENTED, high_watermark=state.high_watermark
    )
