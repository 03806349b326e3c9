"""A transactional producer's own state (Kafka's client-side `TransactionManager.State`) and
its per-partition sequence numbers (Kafka's `TopicPartitionBookkeeper`): pure, no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkactor.clients.errors import TransactionStateError
from kafkactor.common import TopicPartition

__all__ = ["PartitionSequences", "TransactionState", "check_transition"]


class TransactionState(enum.Enum):
    """The states of Kafka's producer `TransactionManager`.

    UNINITIALIZED until `init_transactions`; INITIALIZING while InitProducerId is out (and
    while an abort bumps the epoch, KIP-360); READY between transactions; IN_TRANSACTION
    after `begin_transaction`; COMMITTING_TRANSACTION / ABORTING_TRANSACTION while the
    transaction ends; ABORTABLE_ERROR after a failure that an abort clears (a send of the
    transaction failed); FATAL_ERROR after one nothing clears (fenced).
    """

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_S = TransactionState

# target -> the states it may be entered from (Kafka's State.isTransitionValid); FATAL_ERROR
# may be entered from any state.
_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.UNINITIALIZED: frozenset({_S.READY}),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset(
        {_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}
    ),
    _S.FATAL_ERROR: frozenset(_S),
}


def check_transition(
    transactional_id: str, current: TransactionState, target: TransactionState
) -> None:
    """Raise `TransactionStateError` with Kafka's message unless `current -> target` is legal."""
    if current not in _SOURCES[target]:
        raise TransactionStateError(
            f"TransactionalId {transactional_id}: Invalid transition attempted from state "
            f"{current.name} to state {target.name}"
        )


@dataclass(slots=True)
class _Partition:
    next_sequence: int = 0
    in_flight: set[int] = field(default_factory=set)  # base sequences sent, not yet answered


_MAX_SEQUENCE = 2**31 - 1


class PartitionSequences:
    """Kafka's `TopicPartitionBookkeeper`: the base sequence of each partition's next batch for
    the current producer id and epoch, and the sequences in flight.

    Sequences start at 0 per partition and grow by the batch's record count, wrapping past
    Integer.MAX_VALUE to 0 as Kafka's `DefaultRecordBatch.incrementSequence` does. A new
    epoch (InitProducerId, an epoch bump) starts every partition at 0 again (`reset`).
    """

    def __init__(self) -> None:
        self._partitions: dict[TopicPartition, _Partition] = {}

    def assign(self, tp: TopicPartition, record_count: int) -> int:
        """The base sequence of a batch of `record_count` records to `tp`, now in flight."""
        entry = self._partitions.setdefault(tp, _Partition())
        base = entry.next_sequence
        entry.next_sequence = (base + record_count) % (_MAX_SEQUENCE + 1)
        entry.in_flight.add(base)
        return base

    def completed(self, tp: TopicPartition, base_sequence: int) -> None:
        """The batch at `base_sequence` was answered for good (written, or failed)."""
        entry = self._partitions.get(tp)
        if entry is not None:
            entry.in_flight.discard(base_sequence)

    def earlier_in_flight(self, tp: TopicPartition, base_sequence: int) -> bool:
        """Whether a batch sent before this one to `tp` is still unanswered: an
        OUT_OF_ORDER_SEQUENCE_NUMBER for this one may only mean it overtook that one (a
        leader change), so it is sent again (Kafka's `Sender.canRetry` for idempotence)."""
        entry = self._partitions.get(tp)
        return entry is not None and any(s < base_sequence for s in entry.in_flight)

    def next_sequence(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return 0 if entry is None else entry.next_sequence

    def reset(self) -> None:
        """A new producer id or epoch: every partition's sequences start at 0 again."""
        self._partitions.clear()
