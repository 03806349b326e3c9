"""Transaction markers: Kafka's control batches (``ControlRecordType``, ``EndTransactionMarker``).

A transaction ends in every partition it wrote to with a COMMIT or ABORT marker, which the
transaction coordinator has the partition's leader append (WriteTxnMarkers). A marker is a
control batch: attributes transactional | control, the producer's id and epoch, no sequence
(-1), uncompressed, holding one record whose

- key is the control record key: version int16 (0) and type int16 (ABORT 0, COMMIT 1);
- value is the end transaction marker: version int16 (0) and the coordinator epoch int32.

Consumers never see control records; they use them to drop an aborted transaction's records
(read_committed) and to step over the marker's offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from kafkactor.storage.errors import InvalidRecordError
from kafkactor.storage.record_batch import RecordBatch
from kafkactor.storage.records import (
    _CONTROL_MASK,
    _INT32_MAX,
    _TAIL,
    _TRANSACTIONAL_MASK,
    NO_SEQUENCE,
    Record,
    _check_range,
    _check_timestamp,
    _encode_records,
    _framed,
)

__all__ = [
    "CONTROL_RECORD_KEY_VERSION",
    "END_TXN_MARKER_VERSION",
    "ControlRecordType",
    "EndTransactionMarker",
    "build_control_batch",
    "end_txn_marker",
    "parse_end_txn_marker",
]

CONTROL_RECORD_KEY_VERSION: Final = 0
END_TXN_MARKER_VERSION: Final = 0

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


class ControlRecordType(IntEnum):
    """The type in a control record's key (Kafka's ``ControlRecordType``); UNKNOWN for any
    type this broker does not know (KRaft's LEADER_CHANGE and snapshot records among them)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1

    @classmethod
    def parse(cls, key: bytes | None) -> ControlRecordType:
        """The type in a control record key; `InvalidRecordError` for a key too short to hold
        one or a negative version, as Kafka's ``ControlRecordType.parse``."""
        size = 0 if key is None else len(key)
        if key is None or size < _KEY.size:
            raise InvalidRecordError(f"Invalid value size found for control record key: {size}", ())
        version, type_id = _KEY.unpack_from(key)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for control record: {version}", ())
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT or ABORT marker's record (Kafka's ``EndTransactionMarker``): its type and the
    epoch of the transaction coordinator that wrote it."""

    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def committed(self) -> bool:
        return self.control_type is ControlRecordType.COMMIT

    @property
    def is_abort(self) -> bool:
        return self.control_type is ControlRecordType.ABORT


def build_control_batch(
    *,
    committed: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    leader_epoch: int = 0,
    base_offset: int = 0,
) -> bytes:
    """One COMMIT (or ABORT) marker as a control batch, as Kafka's
    ``MemoryRecords.withEndTransactionMarker`` builds it. Raises ``ValueError`` for a field out
    of range (a producer id must be set: a marker always ends a producer's transaction)."""
    _check_range("producer_id", producer_id, 0, 2**63 - 1)
    _check_range("producer_epoch", producer_epoch, 0, 2**15 - 1)
    _check_range("coordinator_epoch", coordinator_epoch, -(2**31), _INT32_MAX)
    _check_range("leader_epoch", leader_epoch, -(2**31), _INT32_MAX)
    _check_range("base_offset", base_offset, 0, 2**63 - 1)
    _check_timestamp("timestamp_ms", timestamp_ms)
    control_type = ControlRecordType.COMMIT if committed else ControlRecordType.ABORT
    key = _KEY.pack(CONTROL_RECORD_KEY_VERSION, control_type)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    body = _encode_records([Record(key, value, timestamp_ms)])
    tail = _TAIL.pack(
        _TRANSACTIONAL_MASK | _CONTROL_MASK,
        0,  # lastOffsetDelta
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        1,
    )
    return _framed(base_offset, leader_epoch, tail, body)


def parse_end_txn_marker(key: bytes | None, value: bytes | None) -> EndTransactionMarker | None:
    """The marker a control record holds, None when its type is neither COMMIT nor ABORT.

    Raises `InvalidRecordError` for a key or value Kafka's ``EndTransactionMarker.deserialize``
    refuses (too short, a negative version)."""
    control_type = ControlRecordType.parse(key)
    if control_type is ControlRecordType.UNKNOWN:
        return None
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError(
            "Invalid value size found for end transaction marker: "
            f"{0 if value is None else len(value)}",
            (),
        )
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for end transaction marker: {version}", ())
    return EndTransactionMarker(control_type, coordinator_epoch)


def end_txn_marker(batch: RecordBatch) -> EndTransactionMarker | None:
    """The marker of a control batch: None for a data batch, a control batch without records
    (Kafka's cleaner may leave one) or a control record of another type."""
    if not batch.is_control_batch or batch.record_count == 0:
        return None
    record = batch.records()[0]
    return parse_end_txn_marker(record.key, record.value)
