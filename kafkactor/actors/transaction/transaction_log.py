"""The `__transaction_state` topic: which partition holds a transactional id, and the bytes of
its records (Kafka's `TransactionLog`).

A transactional id belongs to partition `Utils.abs(transactionalId.hashCode) % partitions`
(`transaction.state.log.num.partitions`, 50), whose leader is its coordinator; the same
function as `__consumer_offsets`' (`partition_for`).

A record's key is a big-endian int16 version (0) and a `TransactionLogKey` (the transactional
id); its value an int16 version (0, what Kafka 2.x writes) and a `TransactionLogValue`: producer
id (int64), producer epoch (int16), transaction timeout (int32), status (int8: the
`TransactionState` id), the partitions as (topic, int32 array) entries (null in Empty), the
last update time and the transaction's start time (int64 each). A null value is the tombstone
of an expired transactional id. v1 (flexible, with tagged fields) is read too.

As in `offsets_topic.py`, the schemas are transcribed from Kafka's JSON definitions
(`transaction-coordinator/src/main/resources/common/message/TransactionLog{Key,Value}.json`)
and kio reads and writes every byte; only the int16 version prefix is packed here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import Any, Final, get_args

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.versioned import (
    OffsetsRecordError,
    read,
    read_version,
    write,
)
from kafkactor.actors.transaction.transaction_metadata import NO_PRODUCER_ID, TxnTransitMetadata
from kafkactor.actors.transaction.transaction_state import TransactionState
from kafkactor.common import TopicPartition
from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)
from kafkactor.network.codec import build
from kafkactor.network.transcribed import EntityType, Field
from kafkactor.network.transcribed import entity as transcribed_entity

__all__ = [
    "KEY_VERSION",
    "VALUE_VERSION",
    "TransactionLogError",
    "TransactionLogRecord",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for_transactional_id",
]

KEY_VERSION: Final = 0
VALUE_VERSION: Final = 0  # what Kafka 2.x writes


class TransactionLogError(OffsetsRecordError):
    """Bytes that are not a `__transaction_state` record this coordinator can read."""


def partition_for_transactional_id(transactional_id: str, partitions: int = 50) -> int:
    """The `__transaction_state` partition of a transactional id (Kafka's
    `Utils.abs(transactionalId.hashCode) % transactionTopicPartitionCount`)."""
    return partition_for(transactional_id, partitions)


_PARTITIONS: Final = (
    Field("topic", "string", 0),
    Field("partition_ids", "[]int32", 0),
)
_VALUE_FIELDS: Final = (
    Field("producer_id", "int64", 0),
    Field("previous_producer_id", "int64", 1, default="-1", tag=0),
    Field("next_producer_id", "int64", 1, default="-1", tag=1),
    Field("producer_epoch", "int16", 0),
    Field("transaction_timeout_ms", "int32", 0),
    Field("transaction_status", "int8", 0),
    Field(
        "transaction_partitions",
        "[]PartitionsSchema",
        0,
        nullable=True,
        nested=("PartitionsSchema", _PARTITIONS),
    ),
    Field("transaction_last_update_timestamp_ms", "int64", 0),
    Field("transaction_start_timestamp_ms", "int64", 0),
    Field("client_transaction_version", "int16", 1, default="0", tag=2),
)


@dataclass(frozen=True, slots=True)
class _Entities:
    """The record schemas' entities: the key's, each value version's, and the element class of
    the value's (nullable) partitions array (tuple[PartitionsSchema, ...] | None)."""

    key: Any
    values: tuple[Any, ...]
    partitions_struct: Any


@cache
def _entities() -> _Entities:
    """Made on first use: a broker whose transaction coordinator reads and writes no
    `__transaction_state` record never makes them."""
    values = tuple(
        transcribed_entity(
            "TransactionLogValue",
            v,
            _VALUE_FIELDS,
            EntityType.data,
            module=__name__,
            flexible_from=1,
        )
        for v in range(2)
    )
    partitions = {f.name: f.type for f in fields(values[VALUE_VERSION])}["transaction_partitions"]
    return _Entities(
        key=transcribed_entity(
            "TransactionLogKey",
            0,
            (Field("transactional_id", "string", 0),),
            EntityType.data,
            module=__name__,
        ),
        values=values,
        partitions_struct=get_args(get_args(partitions)[0])[0],
    )


@dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """A decoded record: the transactional id, and its metadata (None: a tombstone)."""

    transactional_id: str
    transit: TxnTransitMetadata | None


def encode_key(transactional_id: str) -> bytes:
    key = _entities().key
    record = build(key, transactional_id=transactional_id)
    return write(KEY_VERSION, key, record, TransactionLogError, "TransactionLogKey")


def encode_value(transit: TxnTransitMetadata) -> bytes:
    """A `TransactionLogValue` v0 of the metadata (Kafka refuses to write an Empty transaction
    with partitions; it writes none, as null)."""
    if transit.state is TransactionState.EMPTY and transit.partitions:
        raise TransactionLogError("an Empty transaction cannot have partitions")
    entities = _entities()
    entity: Any = entities.values[VALUE_VERSION]
    struct = entities.partitions_struct
    partitions: tuple[Any, ...] | None = None
    if transit.state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = tuple(
            build(struct, topic=topic, partition_ids=tuple(ids)) for topic, ids in by_topic.items()
        )
    record = build(
        entity,
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=int(transit.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
    )
    return write(VALUE_VERSION, entity, record, TransactionLogError, "TransactionLogValue")


def decode_key(key: bytes) -> str:
    """The transactional id of a record key (version 0)."""
    version = read_version(key, TransactionLogError, "__transaction_state key")
    if version != KEY_VERSION:
        raise TransactionLogError(f"unknown __transaction_state key version {version}")
    return str(
        read(key, _entities().key, TransactionLogError, "TransactionLogKey").transactional_id
    )


def decode_value(value: bytes | None) -> TxnTransitMetadata | None:
    """A `TransactionLogValue` (v0 or v1); None for a tombstone."""
    if value is None:
        return None
    version = read_version(value, TransactionLogError, "TransactionLogValue")
    values = _entities().values
    if not 0 <= version < len(values):
        raise TransactionLogError(f"unknown TransactionLogValue version {version}")
    v = read(value, values[version], TransactionLogError, f"TransactionLogValue v{version}")
    try:
        state = TransactionState(int(v.transaction_status))
    except ValueError:
        raise TransactionLogError(f"unknown transaction status {v.transaction_status}") from None
    partitions = frozenset(
        TopicPartition(topic=p.topic, partition=int(i))
        for p in (v.transaction_partitions or ())
        for i in p.partition_ids
    )
    return TxnTransitMetadata(
        producer_id=int(v.producer_id),
        last_producer_id=int(getattr(v, "previous_producer_id", NO_PRODUCER_ID)),
        producer_epoch=int(v.producer_epoch),
        last_producer_epoch=-1,
        txn_timeout_ms=int(v.transaction_timeout_ms),
        state=state,
        partitions=partitions,
        txn_start_timestamp=int(v.transaction_start_timestamp_ms),
        txn_last_update_timestamp=int(v.transaction_last_update_timestamp_ms),
    )
