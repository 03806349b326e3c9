"""The transaction coordinator's messages to itself (from the broker's scheduler and timer)
and its answers to the producer's requests."""

from __future__ import annotations

from kafkactor.actors.transaction.transaction_metadata import TransactionMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.base import message
from kafkactor.messages.transaction import (
    AddPartitionsToTxnResponse,
    TransactionDescription,
    TxnPartition,
    TxnPartitionError,
)

__all__ = [
    "AbortTimedOutTransactions",
    "ExpireTransactionalIds",
    "RetryTxnMarkers",
    "add_partitions_response",
    "describe",
]


@message
class AbortTimedOutTransactions:
    """Time to abort transactions open longer than their timeout (the scheduler's
    "transaction-abort" task, every
    `transaction.abort.timed.out.transaction.cleanup.interval.ms`)."""


@message
class ExpireTransactionalIds:
    """Time to expire idle transactional ids (the scheduler's "transactionalId-expiration"
    task, every `transaction.remove.expired.transaction.cleanup.interval.ms`)."""


@message
class RetryTxnMarkers:
    """The retry backoff passed (the broker's timer): look the leaders up again for markers
    not yet written, and write the completions that found the partition unavailable."""


def add_partitions_response(
    partitions: tuple[TxnPartition, ...], error: ErrorCode
) -> AddPartitionsToTxnResponse:
    """Every partition of the request with the coordinator's one answer (Kafka's)."""
    return AddPartitionsToTxnResponse(
        partitions=tuple(
            TxnPartitionError(topic=p.topic, partition=p.partition, error_code=error)
            for p in partitions
        )
    )


def describe(transactional_id: str, metadata: TransactionMetadata) -> TransactionDescription:
    """DescribeTransactions' / ListTransactions' view of one transactional id (KIP-664)."""
    return TransactionDescription(
        transactional_id=transactional_id,
        state=metadata.state.kafka_name,
        transaction_timeout_ms=metadata.txn_timeout_ms,
        transaction_start_time_ms=metadata.txn_start_timestamp,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        partitions=tuple(
            TxnPartition(topic=tp.topic, partition=tp.partition)
            for tp in sorted(metadata.partitions, key=_order)
        ),
    )


def _order(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition
