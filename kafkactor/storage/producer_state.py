"""What a partition's log knows of its idempotent producers: Kafka's ``ProducerStateManager``.

KIP-98's idempotence without transactions. An idempotent producer (kafka-python 3 and
librdkafka are, by default) gets a producer id and epoch from InitProducerId, then numbers the
records it sends to each partition: a batch carries ``producerId``, ``producerEpoch`` and the
``baseSequence`` of its first record, and the sequence of its last record is the base plus the
batch's last offset delta, wrapping past 2**31 - 1 to 0. The leader of a partition keeps, per
producer, its epoch and the metadata of its last five batches, so that it can answer a retry of
one of them with the offsets it already has and refuse a batch that skips sequences.

The rules (`ProducerStateManager.validate_leader_append`) are Kafka's leader validation of 2.5
and later (``ProducerAppendInfo``, for data batches of an idempotent producer):

- a batch whose epoch and sequence range equal one of the producer's last five batches is a
  duplicate: the append is answered with that batch's offsets and nothing is written;
- an epoch older than the producer's is fenced (INVALID_PRODUCER_EPOCH);
- a newer epoch must start at sequence 0, the same epoch must continue at the last sequence
  + 1, with 2**31 - 1 followed by 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER); so a retry of a batch
  older than the last five is out of order, as in Kafka;
- a producer the log has no state for may start at any sequence. Kafka 0.11 to 2.4 refused a
  sequence other than 0 there with UNKNOWN_PRODUCER_ID; 2.5 (KIP-360) accepts it, because a
  producer whose batches all went to retention (or whose state this broker never saw) cannot
  prove anything else, and refusing it made the producer fail. We follow 2.5 and later, so
  `UnknownProducerIdError` is never raised here.

Batches without a producer id (-1) are ignored. Transactions (KIP-98) add, per producer, its
open transaction's first offset and the epoch of the coordinator that wrote its last marker
(``currentTxnFirstOffset``, ``coordinatorEpoch``), and per partition the open and unreplicated
transactions (`kafkactor.storage.transactions`), as Kafka's ``ProducerAppendInfo``:

- a transactional batch opens the producer's transaction when none is open; a
  non-transactional batch while one is open is refused (INVALID_TXN_STATE);
- a COMMIT or ABORT marker (a control batch) completes the open transaction (a marker with no
  transaction open completes nothing, as in Kafka 3), moves the producer to the marker's epoch
  and records its coordinator epoch; a marker of an older producer epoch is refused
  (INVALID_PRODUCER_EPOCH), one of an older coordinator epoch too
  (TRANSACTION_COORDINATOR_FENCED);
- `AppendOrigin.COORDINATOR` appends skip sequence checks and duplicates, not epoch checks.

Followers do not validate (`update_from_batches`): a follower that becomes leader dedupes a
retry of a batch its old leader wrote, and knows the transactions its leader opened.

Kafka snapshots this state to ``<offset>.snapshot`` files and reloads from the latest one. We
keep it in memory only: opening a log rebuilds it from every batch header on disk
(`read_producer_batches`: headers, and a marker's one record), and a truncation that removes
a producer's batch rebuilds it from the log that remains. A producer whose batches all went to
retention therefore keeps its state until the log is reopened or rebuilt, where Kafka keeps it
until the producer id expires (``transactional.id.expiration.ms``); neither expiry nor snapshots
are built.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from kafkactor.storage.control_batch import EndTransactionMarker, end_txn_marker
from kafkactor.storage.errors import (
    CorruptRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from kafkactor.storage.producer_batches import StoredProducerBatch, read_producer_batches
from kafkactor.storage.record_batch import RecordBatch
from kafkactor.storage.transactions import (
    AppendOrigin,
    CompletedTxn,
    TransactionTracker,
    check_epoch,
    check_marker,
)

__all__ = [
    "BATCHES_TO_RETAIN",
    "BatchMetadata",
    "DuplicateBatch",
    "ProducerBatch",
    "ProducerStateEntry",
    "ProducerStateManager",
    "StoredProducerBatch",
    "decrement_sequence",
    "increment_sequence",
    "read_producer_batches",
]

BATCHES_TO_RETAIN: Final = 5
"""Batches remembered per producer (Kafka's ``NumBatchesToRetain``): a producer has at most five
requests in flight per partition, so a retry is always of one of its last five batches."""

_SEQUENCE_SPAN: Final = 2**31  # sequences are non-negative int32s: 2**31 - 1 is followed by 0
_INT32_MAX: Final = 2**31 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past 2**31 - 1 to 0 (Kafka's incrementSequence)."""
    return (sequence + increment) % _SEQUENCE_SPAN


def decrement_sequence(sequence: int, decrement: int) -> int:
    """`sequence - decrement`, wrapping below 0 to 2**31 - 1 (Kafka's decrementSequence)."""
    return (sequence - decrement) % _SEQUENCE_SPAN


def _in_sequence(last: int, following: int) -> bool:
    return following == last + 1 or (following == 0 and last == _INT32_MAX)


class ProducerBatch(Protocol):
    """The header fields of a batch that producer state reads (a `RecordBatch` has them all)."""

    @property
    def position(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def is_control_batch(self) -> bool: ...
    @property
    def is_transactional(self) -> bool: ...


AnyBatch = RecordBatch | StoredProducerBatch
NO_COORDINATOR_EPOCH: Final = -1


def _marker(batch: AnyBatch) -> EndTransactionMarker | None:
    if isinstance(batch, StoredProducerBatch):
        return batch.end_txn_marker
    return end_txn_marker(batch)


def _last_sequence(batch: ProducerBatch) -> int:
    return increment_sequence(batch.base_sequence, batch.last_offset_delta)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer, as Kafka's ``BatchMetadata`` remembers it."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """A leader append that retries a batch already in the log: the offsets it got then.

    Kafka answers such an append as a success with these offsets and writes nothing.
    """

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class ProducerStateEntry:
    """Kafka's ``ProducerStateEntry``: one producer's epoch and its last five batches.

    The batches are oldest first and all of the current epoch: a new epoch forgets them.
    """

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "producer_epoch",
        "producer_id",
    )

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_TO_RETAIN)
        self.coordinator_epoch = NO_COORDINATOR_EPOCH
        """The epoch of the coordinator that wrote the producer's last marker here."""
        self.current_txn_first_offset: int | None = None
        """The first offset of the producer's open transaction here (None: none is open)."""

    @property
    def last_sequence(self) -> int:
        """The sequence of the producer's last record (-1 without batches)."""
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_offset(self) -> int:
        """The offset of the producer's last record (-1 without batches)."""
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, producer_epoch: int, batch: BatchMetadata) -> None:
        """Remember an appended batch; one of another epoch starts the entry over."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()
        self.batches.append(batch)  # the deque drops the oldest past five

    def maybe_update_epoch(self, producer_epoch: int) -> None:
        """A marker of another epoch (a bump by the coordinator) starts the entry over."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The remembered batch of the same epoch and exactly the same sequence range."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, _last_sequence(batch)
        for metadata in self.batches:
            if metadata.first_sequence == first and metadata.last_sequence == last:
                return metadata
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, batches={list(self.batches)}, "
            f"coordinator_epoch={self.coordinator_epoch}, "
            f"current_txn_first_offset={self.current_txn_first_offset})"
        )


class ProducerStateManager:
    """Kafka's ``ProducerStateManager`` for one partition log: its producers' state and its
    open transactions.

    Pure and not thread-safe: the `Log` calls it under its lock. A leader calls
    `validate_leader_append` (or `check_leader_append` for one batch) before it assigns
    offsets, then `update` for each batch it wrote; a follower calls `update_from_batches`.
    `update` returns the transaction a marker completed, with the LSO its aborted-index entry
    records. See the module docstring for the rules.
    """

    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self.transactions = TransactionTracker()
        self._last_txn_offset = -1  # the largest offset that opened or ended a transaction

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """The entries by producer id (for inspection; do not mutate)."""
        return self._producers

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def last_offset(self) -> int:
        """The largest offset of any producer's last batch (-1 without producers)."""
        return max((entry.last_offset for entry in self._producers.values()), default=-1)

    # -- transactions --------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open or unreplicated transaction (Kafka's
        ``firstUnstableOffset``), None when there is none."""
        return self.transactions.first_unstable_offset

    def on_high_watermark(self, high_watermark: int) -> None:
        """The partition's HW moved: completed transactions below it are stable (Kafka's
        ``onHighWatermarkUpdated``)."""
        self.transactions.on_high_watermark(high_watermark)

    # -- leader validation ---------------------------------------------------------------------

    def check_leader_append(
        self, batch: AnyBatch, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> DuplicateBatch | None:
        """Validate one batch a leader is about to append; see `validate_leader_append`."""
        return self.validate_leader_append((batch,), origin)

    def validate_leader_append(
        self, batches: Iterable[AnyBatch], origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> DuplicateBatch | None:
        """Validate the batches of one leader append, before offsets are assigned.

        Returns the first batch that retries one already in the log (the append is then
        answered with its offsets and nothing is written), else None. Raises
        `InvalidProducerEpochError`, `OutOfOrderSequenceError`, `InvalidTxnStateError` or
        `TransactionCoordinatorFencedError` for a batch that breaks the rules, and
        `CorruptRecordError` for a producer id with a negative base sequence (Kafka's
        LogValidator refuses that). As in Kafka's ``analyzeAndValidateProducerState``,
        duplicates are looked for among the batches already in the log, and a batch follows the
        ones before it in the same append. `AppendOrigin.COORDINATOR` skips the sequence checks
        and duplicates (`REPLICATION` every check). Nothing changes until `update`.
        """
        if origin is AppendOrigin.REPLICATION:
            return None
        client = origin is AppendOrigin.CLIENT
        # producer id -> (epoch, last sequence, transaction open, coordinator epoch)
        pending: dict[int, tuple[int, int, bool, int]] = {}
        for batch in batches:
            producer_id = batch.producer_id
            if producer_id < 0:
                continue
            entry = self._producers.get(producer_id)
            known = pending.get(producer_id)
            if known is None and entry is not None:
                known = (
                    entry.producer_epoch,
                    entry.last_sequence,
                    entry.current_txn_first_offset is not None,
                    entry.coordinator_epoch,
                )
            if batch.is_control_batch:
                marker = _marker(batch)
                if marker is not None:
                    pending[producer_id] = check_marker(
                        producer_id, batch.producer_epoch, marker, known
                    )
                continue
            if client:
                if batch.base_sequence < 0:
                    raise CorruptRecordError(
                        f"invalid sequence number {batch.base_sequence} in a batch of producer "
                        f"{producer_id}",
                        batch.position,
                    )
                original = entry.find_duplicate(batch) if entry is not None else None
                if entry is not None and original is not None:
                    return DuplicateBatch(
                        producer_id=producer_id,
                        producer_epoch=entry.producer_epoch,
                        first_sequence=original.first_sequence,
                        last_sequence=original.last_sequence,
                        first_offset=original.first_offset,
                        last_offset=original.last_offset,
                        max_timestamp=original.max_timestamp,
                    )
            open_txn = False
            coordinator_epoch = NO_COORDINATOR_EPOCH
            if known is not None:  # no state at all: any sequence is accepted (KIP-360)
                epoch, last_sequence, open_txn, coordinator_epoch = known
                check_epoch(producer_id, batch.producer_epoch, epoch)
                if client:
                    _check_sequence(producer_id, batch, epoch, last_sequence)
                if open_txn and not batch.is_transactional:
                    raise InvalidTxnStateError(
                        f"Expected transactional write from producer {producer_id}",
                        producer_id,
                    )
            pending[producer_id] = (
                batch.producer_epoch,
                _last_sequence(batch),
                open_txn or batch.is_transactional,
                coordinator_epoch,
            )
        return None

    # -- updates -------------------------------------------------------------------------------

    def update(
        self,
        batch: AnyBatch,
        first_offset: int,
        last_offset: int,
        max_timestamp: int | None = None,
    ) -> CompletedTxn | None:
        """Record a batch written at `first_offset`..`last_offset` (leader or follower), with
        `max_timestamp` when it was written with another one than `batch` holds (a
        LogAppendTime leader's append time). Returns the transaction a marker completed.

        A batch without a producer id changes nothing. No validation: a follower takes what
        its leader wrote, an older epoch included (Kafka only warns).
        """
        producer_id = batch.producer_id
        if producer_id < 0:
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(
                producer_id, batch.producer_epoch
            )
        if batch.is_control_batch:
            marker = _marker(batch)
            if marker is None:
                return None  # an emptied control batch, or one of another kind
            return self._end_txn(entry, batch.producer_epoch, marker, first_offset)
        entry.add_batch(
            batch.producer_epoch,
            BatchMetadata(
                first_sequence=batch.base_sequence,
                last_sequence=_last_sequence(batch),
                first_offset=first_offset,
                last_offset=last_offset,
                max_timestamp=batch.max_timestamp if max_timestamp is None else max_timestamp,
            ),
        )
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self.transactions.begin(producer_id, first_offset)
            self._last_txn_offset = max(self._last_txn_offset, first_offset)
        return None

    def _end_txn(
        self,
        entry: ProducerStateEntry,
        producer_epoch: int,
        marker: EndTransactionMarker,
        offset: int,
    ) -> CompletedTxn | None:
        """Kafka's ``appendEndTxnMarker`` (checked before, for a leader)."""
        first = entry.current_txn_first_offset
        completed = None
        if first is not None:
            completed = self.transactions.complete(
                entry.producer_id, first, offset, marker.is_abort
            )
        entry.maybe_update_epoch(producer_epoch)
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = marker.coordinator_epoch
        self._last_txn_offset = max(self._last_txn_offset, offset)
        return completed

    def update_from_batches(self, batches: Iterable[AnyBatch]) -> list[CompletedTxn]:
        """Record batches at the offsets they carry (a follower append, a rebuild); returns
        the transactions their markers completed."""
        completed = []
        for batch in batches:
            if batch.producer_id >= 0:
                done = self.update(batch, batch.base_offset, batch.last_offset)
                if done is not None:
                    completed.append(done)
        return completed

    def rebuild(self, batches: Iterable[AnyBatch]) -> None:
        """Forget everything and take the state from a log's batches, oldest first. The
        completed transactions stay unreplicated until `on_high_watermark`."""
        self.clear()
        self.update_from_batches(batches)

    def truncate_to(self, offset: int, log_batches: Callable[[], Iterable[AnyBatch]]) -> bool:
        """The log was cut at `offset`: forget the batches at or past it.

        When no producer's last batch, transaction start or marker reaches `offset` nothing was
        lost. Otherwise the state is rebuilt from `log_batches()`, the batches the log still
        holds: an entry only remembers five batches of one epoch, so what a producer looked
        like before the removed ones is in the log, not in the entry. As in Kafka (which
        truncates only below the high watermark) no transaction is then left unreplicated.
        Returns whether the state was rebuilt.
        """
        if max(self.last_offset, self._last_txn_offset) < offset:
            return False
        self.rebuild(log_batches())
        self.transactions.on_high_watermark(offset)
        return True

    def on_log_start_offset(self, log_start_offset: int) -> None:
        """Kafka's ``onLogStartOffsetIncremented``: completed transactions below it go."""
        self.transactions.on_high_watermark(log_start_offset)

    def clear(self) -> None:
        """Forget every producer (the log was emptied: Kafka's truncateFullyAndStartAt)."""
        self._producers.clear()
        self.transactions.clear()
        self._last_txn_offset = -1

    def __repr__(self) -> str:
        return f"ProducerStateManager(producers={len(self._producers)}, {self.transactions})"


def _check_sequence(
    producer_id: int, batch: AnyBatch, current_epoch: int, last_sequence: int
) -> None:
    """Kafka's checkSequence for a known producer (its epoch checked before)."""
    epoch, first = batch.producer_epoch, batch.base_sequence
    if epoch != current_epoch:
        if first != 0:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} starts epoch {epoch} at sequence {first}, not 0 "
                f"(its epoch was {current_epoch})",
                producer_id,
            )
    elif not _in_sequence(last_sequence, first):
        raise OutOfOrderSequenceError(
            f"producer {producer_id} (epoch {epoch}) sent sequence {first} after "
            f"{last_sequence}: expected {increment_sequence(last_sequence, 1)}",
            producer_id,
        )
