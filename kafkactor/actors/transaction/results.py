"""The transaction coordinator core's decisions, as values the actor carries out."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkactor.actors.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TxnTransitMetadata,
)
from kafkactor.actors.transaction.transaction_state import TransactionState
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode

__all__ = [
    "AppendOutcome",
    "AppendPurpose",
    "CompletedTxn",
    "Decision",
    "MarkerJob",
    "Transition",
    "TxnAppend",
]


class AppendPurpose(enum.Enum):
    """Why a transition is written to `__transaction_state` (what its answer is)."""

    INIT = "init"  # InitProducerId: answer the producer id and epoch
    ADD_PARTITIONS = "add_partitions"  # AddPartitionsToTxn / AddOffsetsToTxn
    END_TXN = "end_txn"  # EndTxn: PrepareCommit / PrepareAbort, then markers
    FENCE_ABORT = "fence_abort"  # InitProducerId found a transaction open: abort it first
    TIMEOUT_ABORT = "timeout_abort"  # the transaction timed out: abort it (nobody to answer)
    COMPLETE = "complete"  # every marker written: CompleteCommit / CompleteAbort
    EXPIRE = "expire"  # the transactional id expired: its tombstone


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnAppend:
    """Write `transit` (None: a tombstone) for `transactional_id` to partition `partition` of
    `__transaction_state`, as its coordinator in `coordinator_epoch`; then hand the outcome to
    `TransactionCoordinatorCore.complete_append`. `cause` and `partition_count` describe the
    transaction a COMPLETE write ends (for its `txn.completed` event)."""

    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: TxnTransitMetadata
    purpose: AppendPurpose
    tombstone: bool = False
    cause: str = "client"
    partition_count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """The core's answer to a request: an error (or NONE) at once, or a write whose outcome
    `complete_append` turns into the answer. InitProducerId's id and epoch when answered now."""

    error: ErrorCode = ErrorCode.NONE
    append: TxnAppend | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True, kw_only=True)
class MarkerJob:
    """The markers of one ended transaction (Kafka's `TxnMarkerEntry` per partition leader,
    then the completion): write a COMMIT (`committed`) or ABORT marker for producer id / epoch
    with `coordinator_epoch` on each of `partitions`; once every one is written, write
    `completion` (the prepared CompleteCommit / CompleteAbort)."""

    transactional_id: str
    txn_partition: int
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    committed: bool
    partitions: frozenset[TopicPartition]
    completion: TxnTransitMetadata
    cause: str
    partition_count: int

    def completion_append(self) -> TxnAppend:
        return TxnAppend(
            transactional_id=self.transactional_id,
            partition=self.txn_partition,
            coordinator_epoch=self.coordinator_epoch,
            transit=self.completion,
            purpose=AppendPurpose.COMPLETE,
            cause=self.cause,
            partition_count=self.partition_count,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """A state change now in effect (for the `txn.transition` event)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    from_state: TransactionState
    to_state: TransactionState
    partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletedTxn:
    """A transaction ended: CompleteCommit or CompleteAbort is written (`txn.completed`)."""

    transactional_id: str
    producer_id: int
    committed: bool
    cause: str
    duration_ms: int
    partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendOutcome:
    """What a write's outcome means: the `error` to answer (InitProducerId: with `producer_id`
    and `producer_epoch`), the `transition` it made, `markers` to send now (a Prepare* was
    written), the transaction it `completed`, or `retry`: write the same transition again (a
    completion whose write found the partition unavailable, as Kafka retries it)."""

    error: ErrorCode = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    transition: Transition | None = None
    markers: MarkerJob | None = None
    completed: CompletedTxn | None = None
    retry: bool = False
