"""Typed errors of the storage layer.

Every error about bytes carries ``position``: the byte offset, in the buffer being read, of the
batch that could not be used, so a log can report it or truncate there. The errors pickle with
their fields, so they can cross a process like any other value (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Kafka's names of the compression codec ids (CompressionType).
_CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

__all__ = [
    "CorruptRecordError",
    "InvalidAppendOffsetError",
    "InvalidLogDirectoryError",
    "InvalidLogFileError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "LogClosedError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerStateError",
    "RecordError",
    "RecordTooLargeError",
    "RecordValidationError",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "TruncatedBatchError",
    "UnknownProducerIdError",
    "UnsupportedCompressionError",
]


class StorageError(Exception):
    """Base class of every error raised by ``kafkactor.storage``."""


class CorruptRecordError(StorageError):
    """Bytes that are not a valid record batch (Kafka's ``CorruptRecordException``).

    Raised for a wrong magic byte, a CRC mismatch, an impossible length or record count, or a
    record whose varint framing does not add up. ``position`` is where the offending batch starts.
    """

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} (batch at position {position})")
        self.message = message
        self.position = position

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.position))


class TruncatedBatchError(CorruptRecordError):
    """The buffer ends inside a batch: the tail is incomplete rather than damaged.

    A log that finds this at the end of its last segment truncates the partial batch (Kafka's
    recovery drops a partial tail the same way); a fetch response may legitimately end with one.
    """


class UnsupportedCompressionError(StorageError):
    """A batch whose attributes name a compression codec this storage layer cannot decode.

    Not corruption: the CRC was valid, the producer simply compressed the batch. ``codec`` is the
    3-bit codec id from the batch attributes (1 gzip, 2 snappy, 3 lz4, 4 zstd, 5-7 unassigned).
    """

    def __init__(self, codec: int, position: int) -> None:
        name = _CODEC_NAMES.get(codec, "an unknown codec")
        super().__init__(
            f"record batch at position {position} is compressed with {name} (codec id {codec}); "
            "only uncompressed batches are supported"
        )
        self.codec = codec
        self.position = position

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.codec, self.position))


class OffsetOutOfRangeError(StorageError):
    """A read of an offset outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.offset, self.log_start_offset, self.log_end_offset))


class LogStartOffsetOutOfRangeError(OffsetOutOfRangeError):
    """A log start offset moved past the high watermark (Kafka's `maybeIncrementLogStartOffset`
    refusal, OFFSET_OUT_OF_RANGE), with Kafka's message."""

    def __init__(self, offset: int, topic_partition: str, high_watermark: int) -> None:
        StorageError.__init__(
            self,
            f"Cannot increment the log start offset to {offset} of partition {topic_partition} "
            f"since it is larger than the high watermark {high_watermark}",
        )
        self.offset = offset
        self.topic_partition = topic_partition
        self.high_watermark = high_watermark
        self.log_start_offset = -1
        self.log_end_offset = high_watermark

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.offset, self.topic_partition, self.high_watermark))


class RecordTooLargeError(StorageError):
    """A batch is larger than the log's `max_message_bytes` (MESSAGE_TOO_LARGE)."""


class InvalidAppendOffsetError(StorageError):
    """A follower append whose offsets do not increase past the log end offset."""


class InvalidLogFileError(StorageError):
    """A file in a partition directory whose name is not a valid segment name."""


class InvalidLogDirectoryError(StorageError):
    """A directory name that is not `<topic>-<partition>`."""


class LogClosedError(StorageError):
    """An operation on a log that was closed."""


class ProducerStateError(StorageError):
    """A leader append refused by the idempotent producer checks (Kafka's ProducerAppendInfo).

    `producer_id` names the producer whose batch was refused. Nothing of the append was written.
    """

    def __init__(self, message: str, producer_id: int) -> None:
        super().__init__(message)
        self.message = message
        self.producer_id = producer_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.producer_id))


class OutOfOrderSequenceError(ProducerStateError):
    """A batch whose base sequence does not follow the producer's last one, or a new producer
    epoch that does not start at sequence 0 (Kafka's OUT_OF_ORDER_SEQUENCE_NUMBER, 45)."""


class UnknownProducerIdError(OutOfOrderSequenceError):
    """No state for the producer and a sequence other than 0 (Kafka's UNKNOWN_PRODUCER_ID, 59).

    Kafka 0.11 to 2.4 refused such a batch; since 2.5 (KIP-360) a leader accepts any sequence
    from a producer it has no state for, and so does `ProducerStateManager`: it never raises this
    error. The class exists so that the error and its code are named where storage errors are
    mapped to Kafka's codes; like Kafka's exception it is an `OutOfOrderSequenceError`.
    """


class InvalidProducerEpochError(ProducerStateError):
    """A batch from an older epoch of a producer: a fenced zombie (INVALID_PRODUCER_EPOCH, 47)."""


class TransactionCoordinatorFencedError(ProducerStateError):
    """A transaction marker written by a coordinator whose epoch is older than the one that
    wrote the producer's last marker here: a zombie coordinator (Kafka's
    ``TransactionCoordinatorFencedException``, TRANSACTION_COORDINATOR_FENCED 52)."""


class InvalidTxnStateError(ProducerStateError):
    """A non-transactional batch from a producer whose transaction is open in this partition
    (Kafka's ``InvalidTxnStateException``, INVALID_TXN_STATE 48)."""


@dataclass(frozen=True, slots=True)
class RecordError:
    """Why one record of a batch was refused (KIP-467's `RecordError`): `batch_index` is the
    record's index in its batch, `message` Kafka's text for it."""

    batch_index: int
    message: str


class RecordValidationError(StorageError):
    """A leader append whose records Kafka's `LogValidator` refuses (its
    `RecordValidationException`): `record_errors` names each refused record of the first batch
    that had any. Nothing of the append was written."""

    def __init__(self, message: str, record_errors: tuple[RecordError, ...]) -> None:
        super().__init__(message)
        self.message = message
        self.record_errors = record_errors

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.record_errors))


class InvalidRecordError(RecordValidationError):
    """Records a log cannot take, such as a record without a key on a compacted topic
    (Kafka's `InvalidRecordException`, INVALID_RECORD 87)."""


class InvalidTimestampError(RecordValidationError):
    """Records whose timestamps the log refuses: further from the leader's clock than
    `message.timestamp.difference.max.ms`, or a producer batch that claims LogAppendTime
    (Kafka's `InvalidTimestampException`, INVALID_TIMESTAMP 32)."""
