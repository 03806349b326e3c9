"""Kafka's `LogValidator`: the record checks of a leader append beyond the batch format, and the
recompression `compression.type` asks for.

`Log.append_as_leader` calls these on producer batches that `iter_batches(deep=True)` already
checked for framing:

- a compacted log refuses a record without a key (INVALID_RECORD);
- with `message.timestamp.type=CreateTime`, a record whose timestamp is further than
  `message.timestamp.difference.max.ms` from the leader's clock is refused, and every record of
  a batch that claims LogAppendTime (only a broker sets that) is refused (INVALID_TIMESTAMP);
- a record is checked for its key first, then for its timestamp, and each refused record is
  named by its index in its batch; the first batch with refused records fails the append
  (Kafka's `processRecordErrors`).

The refusal's message is Kafka 3's summary, which names the first three refused records
("One or more records have been rejected due to 2 record errors in total, and only showing the
first three errors at most: [RecordError(batchIndex=0, message='...'), ...]"); Kafka 2.x said
only "One or more records have been rejected". For timestamps Kafka keeps "... due to invalid
timestamp"; here that is followed by the same count and list.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kafkactor.storage.compression import CompressionType
from kafkactor.storage.config import LONG_MAX, PRODUCER_COMPRESSION, LogConfig
from kafkactor.storage.errors import InvalidRecordError, InvalidTimestampError, RecordError
from kafkactor.storage.record_batch import RecordBatch
from kafkactor.storage.records import NO_TIMESTAMP, Record, TimestampType, build_batch

__all__ = ["recompressed", "target_codec", "validate_batches", "validate_records"]

_CODECS: Final = {
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}
_SHOWN_ERRORS: Final = 3


def target_codec(config: LogConfig) -> CompressionType | None:
    """The codec `compression.type` stores batches with; None for `producer` (as they came)."""
    if config.compression_type == PRODUCER_COMPRESSION:
        return None
    return _CODECS[config.compression_type]


def _needs_walk(config: LogConfig) -> bool:
    return config.compact or (
        not config.log_append_time and config.message_timestamp_difference_max_ms < LONG_MAX
    )


def validate_batches(
    batches: Sequence[RecordBatch],
    topic_partition: str,
    config: LogConfig,
    now_ms: int,
    *,
    from_client: bool = True,
) -> None:
    """Kafka's LogValidator record checks on a leader's producer batches (see the module).

    Raises `InvalidRecordError` for a producer batch that reports no records or, from a client
    (`from_client`: not a coordinator's append), for a control batch, as Kafka ("Clients are
    not allowed to write control records"); `InvalidRecordError` / `InvalidTimestampError` for
    the first batch holding refused records. A log that is neither compacted nor bounds
    timestamps reads only batch headers.
    """
    walk = _needs_walk(config)
    for batch in batches:
        if from_client and batch.is_control_batch:
            raise InvalidRecordError(
                "Clients are not allowed to write control records in topic partition "
                f"{topic_partition}.",
                (),
            )
        if batch.record_count <= 0 and not batch.is_control_batch:  # Kafka's validateBatch
            raise InvalidRecordError(
                f"Invalid reported count for record batch: {batch.record_count} in topic "
                f"partition {topic_partition}.",
                (),
            )
        claims_append_time = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        if batch.is_control_batch or not (walk or claims_append_time):
            continue
        _refuse(
            [
                (index, record.offset, record.timestamp_ms, record.key, record.value)
                for index, record in enumerate(batch.records())
            ],
            claims_append_time,
            topic_partition,
            config,
            now_ms,
        )


def validate_records(
    records: Sequence[Record], topic_partition: str, config: LogConfig, now_ms: int, first: int
) -> None:
    """`validate_batches` for records the log builds into one batch itself (offsets from
    `first`): the in-process producer's."""
    if not _needs_walk(config):
        return
    _refuse(
        [
            (index, first + index, record.timestamp_ms, record.key, record.value)
            for index, record in enumerate(records)
        ],
        False,
        topic_partition,
        config,
        now_ms,
    )


def _refuse(
    records: list[tuple[int, int, int, bytes | None, bytes | None]],
    claims_append_time: bool,
    topic_partition: str,
    config: LogConfig,
    now_ms: int,
) -> None:
    errors: list[RecordError] = []
    timestamp_errors = False
    check_time = not config.log_append_time
    limit = config.message_timestamp_difference_max_ms
    for index, offset, timestamp, key, value in records:
        if config.compact and key is None:
            errors.append(
                RecordError(
                    index,
                    "Compacted topic cannot accept message without key in topic partition "
                    f"{topic_partition}.",
                )
            )
        elif check_time and timestamp != NO_TIMESTAMP and abs(timestamp - now_ms) > limit:
            timestamp_errors = True
            errors.append(
                RecordError(
                    index,
                    f"Timestamp {timestamp} of message with offset {offset} is out of range. "
                    f"The timestamp should be within [{now_ms - limit}, {now_ms + limit}]",
                )
            )
        elif claims_append_time:
            timestamp_errors = True
            errors.append(
                RecordError(
                    index,
                    f"Invalid timestamp type in message DefaultRecord(offset={offset}, "
                    f"timestamp={timestamp}, key={_size(key)} bytes, value={_size(value)} "
                    "bytes). Producer should not set timestamp type to LogAppendTime.",
                )
            )
    if not errors:
        return
    shown = ", ".join(
        f"RecordError(batchIndex={e.batch_index}, message='{e.message}')"
        for e in errors[:_SHOWN_ERRORS]
    )
    cause = "invalid timestamp: " if timestamp_errors else ""
    message = (
        f"One or more records have been rejected due to {cause}{len(errors)} record errors "
        f"in total, and only showing the first three errors at most: [{shown}]"
    )
    if timestamp_errors:
        raise InvalidTimestampError(message, tuple(errors))
    raise InvalidRecordError(message, tuple(errors))


def _size(data: bytes | None) -> int:
    return 0 if data is None else len(data)


def recompressed(batch: RecordBatch, codec: CompressionType) -> RecordBatch | None:
    """The batch rebuilt with `codec` when the producer wrote it with another one (Kafka's
    `LogValidator` builds it anew when source and target codecs differ), else None. The
    records, their timestamps and headers, the producer fields and the timestamp type stay;
    offsets become consecutive, as Kafka's rebuild assigns them."""
    if batch.compression_codec == codec or batch.is_control_batch:
        return None
    append_time = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    built = build_batch(
        [record.to_record() for record in batch.records()],
        batch.base_offset,
        batch.leader_epoch,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        timestamp_type=batch.timestamp_type,
        log_append_time_ms=batch.max_timestamp if append_time else None,
        compression=codec,
    )
    return RecordBatch(built, verify_crc=False)
