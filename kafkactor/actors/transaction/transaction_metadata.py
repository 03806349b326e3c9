"""Kafka's `TransactionMetadata` and `TxnTransitMetadata`: what the coordinator knows of one
transactional id, and a state change prepared but not yet written to `__transaction_state`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, NoReturn

from kafkactor.actors.transaction.transaction_state import TransactionState, is_valid_transition
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode

__all__ = [
    "MAX_PRODUCER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "IllegalTransitionError",
    "TransactionMetadata",
    "TxnTransitMetadata",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_PRODUCER_EPOCH: Final = 2**15 - 1  # Short.MaxValue

_S = TransactionState


class IllegalTransitionError(RuntimeError):
    """A state change Kafka treats as a bug (its IllegalStateException): preparing a transition
    while another is pending, to a state not reachable from the current one, or completing one
    that does not match what was prepared."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch (Short.MaxValue) for fencing: at MaxValue - 1 a producer id
    has no epochs left for its producer, and the next InitProducerId takes a new producer id."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnTransitMetadata:
    """Kafka's `TxnTransitMetadata`: the metadata a transactional id will have once this
    transition is written to `__transaction_state` (`TransactionMetadata.complete_transition`
    applies it then)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(slots=True, kw_only=True)
class TransactionMetadata:
    """Kafka's `TransactionMetadata` for one transactional id: its producer id and epoch (and
    the previous ones, KIP-360), its timeout, state, the partitions of its open transaction and
    its timestamps. `pending_state` is the state of a transition prepared and being written
    (none may be prepared meanwhile); `has_failed_epoch_fence` says a fencing epoch bump could
    not be written, so the next fence reuses it instead of bumping again.

    Each `prepare_*` returns the `TxnTransitMetadata` to write and sets `pending_state`;
    `complete_transition` applies it once written (after Kafka's checks), `pending_state = None`
    forgets it when the write failed.
    """

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def remove_partition(self, partition: TopicPartition) -> None:
        """A marker was written to `partition` (only while the transaction is being ended)."""
        if not self.state.is_prepare:
            raise IllegalTransitionError(
                f"{self.transactional_id}: removing a marked partition in state "
                f"{self.state.kafka_name}"
            )
        self.partitions.discard(partition)

    # -- preparing transitions -----------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Bump the epoch to abort the open transaction of a producer being fenced (by a new
        instance's InitProducerId, or because the transaction timed out)."""
        if self.producer_epoch == MAX_PRODUCER_EPOCH:
            raise IllegalTransitionError("cannot fence a producer whose epoch is Short.MaxValue")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            _S.PREPARE_EPOCH_FENCE,
            producer_epoch=bumped,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            partitions=frozenset(self.partitions),
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransitMetadata | ErrorCode:
        """InitProducerId on a transactional id without an open transaction: the next epoch.
        With KIP-360's expected epoch: the current one (or none yet) bumps, the previous one
        is a retry of a bump already made (answered the same), any other is PRODUCER_FENCED."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"no epochs left for producer id {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(
            _S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            txn_timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now: int, *, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """The epochs of the producer id are used up: a new producer id, from epoch 0."""
        if self.state in (_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransitionError("cannot rotate producer ids during a transaction")
        return self._prepare(
            _S.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            txn_timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
            txn_last_update_timestamp=now,
        )

    def prepare_add_partitions(
        self, added: frozenset[TopicPartition], now: int
    ) -> TxnTransitMetadata:
        """The transaction gains partitions (and starts, when none was open)."""
        starts = self.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
        return self._prepare(
            _S.ONGOING,
            partitions=frozenset(self.partitions) | added,
            txn_start_timestamp=now if starts else self.txn_start_timestamp,
            txn_last_update_timestamp=now,
        )

    def prepare_abort_or_commit(self, state: TransactionState, now: int) -> TxnTransitMetadata:
        return self._prepare(
            state, partitions=frozenset(self.partitions), txn_last_update_timestamp=now
        )

    def prepare_complete(self, now: int) -> TxnTransitMetadata:
        """Every marker is written: CompleteCommit after PrepareCommit, else CompleteAbort."""
        target = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(target, partitions=frozenset(), txn_last_update_timestamp=now)

    def prepare_dead(self) -> TxnTransitMetadata:
        """The transactional id expired: its tombstone is written."""
        return self._prepare(_S.DEAD, partitions=frozenset())

    def _prepare(
        self,
        state: TransactionState,
        *,
        producer_id: int | None = None,
        producer_epoch: int | None = None,
        last_producer_epoch: int | None = None,
        txn_timeout_ms: int | None = None,
        partitions: frozenset[TopicPartition],
        txn_start_timestamp: int | None = None,
        txn_last_update_timestamp: int | None = None,
    ) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"{self.transactional_id}: preparing {state.kafka_name} while "
                f"{self.pending_state.kafka_name} is pending"
            )
        new_id = self.producer_id if producer_id is None else producer_id
        epoch = self.producer_epoch if producer_epoch is None else producer_epoch
        if new_id < 0:
            raise IllegalTransitionError(f"illegal new producer id {new_id}")
        if state is not _S.DEAD and epoch < 0:
            raise IllegalTransitionError(f"illegal new producer epoch {epoch}")
        if not is_valid_transition(self.state, state):
            raise IllegalTransitionError(
                f"{self.transactional_id}: {state.kafka_name} cannot follow {self.state.kafka_name}"
            )
        self.pending_state = state
        return TxnTransitMetadata(
            producer_id=new_id,
            last_producer_id=self.producer_id,
            producer_epoch=epoch,
            last_producer_epoch=(
                self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch
            ),
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            partitions=partitions,
            txn_start_timestamp=(
                self.txn_start_timestamp if txn_start_timestamp is None else txn_start_timestamp
            ),
            txn_last_update_timestamp=(
                self.txn_last_update_timestamp
                if txn_last_update_timestamp is None
                else txn_last_update_timestamp
            ),
        )

    # -- completing them -----------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransitMetadata) -> TransactionState:
        """Apply a written transition (Kafka's `completeTransitionTo`, with its checks);
        returns the state left."""
        target = self.pending_state
        if target is None or target is not transit.state:
            self._fail(transit)
        same_producer = (
            transit.producer_epoch == self.producer_epoch
            and transit.producer_id == self.producer_id
        )
        if target is _S.EMPTY:
            bump = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id
            )
            if (
                (self.producer_epoch != transit.producer_epoch and not bump)
                or transit.partitions
                or transit.txn_start_timestamp != -1
            ):
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif target is _S.ONGOING:
            if (
                not same_producer
                or not self.partitions <= transit.partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions |= transit.partitions
        elif target.is_prepare:
            if (
                not same_producer
                or self.partitions != transit.partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp != transit.txn_start_timestamp
            ):
                self._fail(transit)
        elif target.is_complete:
            if (
                not same_producer
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp == -1
            ):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.partitions.clear()
        else:  # PrepareEpochFence is never written; Dead is removed, never completed
            self._fail(transit)
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = target
        return target

    def _fail(self, transit: TxnTransitMetadata) -> NoReturn:
        raise IllegalTransitionError(
            f"{self.transactional_id} ({self.state.kafka_name}, pending "
            f"{self.pending_state.kafka_name if self.pending_state else None}) cannot complete "
            f"the transition to {transit}"
        )

    # -- loading -------------------------------------------------------------------------------

    @staticmethod
    def from_transit(transactional_id: str, transit: TxnTransitMetadata) -> TransactionMetadata:
        """The metadata a `__transaction_state` value records (when a partition is loaded)."""
        return TransactionMetadata(
            transactional_id=transactional_id,
            producer_id=transit.producer_id,
            last_producer_id=transit.last_producer_id,
            producer_epoch=transit.producer_epoch,
            last_producer_epoch=transit.last_producer_epoch,
            txn_timeout_ms=transit.txn_timeout_ms,
            state=transit.state,
            partitions=set(transit.partitions),
            txn_start_timestamp=transit.txn_start_timestamp,
            txn_last_update_timestamp=transit.txn_last_update_timestamp,
        )

    def as_transit(self) -> TxnTransitMetadata:
        """The metadata as it stands (Kafka's `prepareNoTransit`), without a pending state."""
        return TxnTransitMetadata(
            producer_id=self.producer_id,
            last_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms,
            state=self.state,
            partitions=frozenset(self.partitions),
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
        )
