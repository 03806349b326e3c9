"""A partition's open and completed transactions, for the last stable offset (KIP-98).

The part of Kafka's ``ProducerStateManager`` that follows transactions rather than sequences:

- a producer's first transactional batch in the partition opens its transaction there, at that
  batch's offset (``currentTxnFirstOffset``; Kafka's ``ongoingTxns``, by first offset);
- the producer's COMMIT or ABORT marker completes it (``CompletedTxn``); a completed
  transaction stays *unreplicated* until the high watermark passes its marker
  (``unreplicatedTxns``, ``onHighWatermarkUpdated``);
- the **first unstable offset** is the smallest first offset of a transaction that is open or
  unreplicated; the **last stable offset** (LSO) is the smaller of it and the high watermark:
  read_committed consumers read below it;
- an aborted transaction is indexed with the LSO at the moment its marker was written
  (``lastStableOffset(completedTxn)``: the first offset of the earliest transaction of another
  producer still open, else the marker's offset + 1), so a fetch knows when it can stop looking
  for aborted transactions (``kafkactor.storage.transaction_index``).

``AppendOrigin`` names who appends: a client (every check), the coordinator (its markers and
its transactional offset commits: no sequence checks, no duplicate detection) or a follower
replicating its leader (no checks at all, Kafka only logs).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkactor.storage.control_batch import EndTransactionMarker
from kafkactor.storage.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from kafkactor.storage.transaction_index import AbortedTxn

__all__ = [
    "AppendOrigin",
    "CompletedTxn",
    "TransactionTracker",
    "TxnMetadata",
    "check_epoch",
    "check_marker",
]


class AppendOrigin(enum.Enum):
    """Who appends to a leader's log (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"
    """A producer: every check, and a control batch is refused (INVALID_RECORD)."""
    COORDINATOR = "coordinator"
    """A transaction or group coordinator: markers allowed, sequences not checked."""
    REPLICATION = "replication"
    """A follower's copy of its leader: nothing checked."""


class TxnMetadata:
    """One transaction in one partition (Kafka's ``TxnMetadata``): its producer, its first
    offset here and, once completed, its marker's offset."""

    __slots__ = ("first_offset", "last_offset", "producer_id")

    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id = producer_id
        self.first_offset = first_offset
        self.last_offset: int | None = None

    def __repr__(self) -> str:
        return (
            f"TxnMetadata(producer_id={self.producer_id}, first_offset={self.first_offset}, "
            f"last_offset={self.last_offset})"
        )


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker completed (Kafka's ``CompletedTxn``): `last_offset` is the
    marker's offset, `last_stable_offset` the LSO when the marker was written (what the
    aborted-transaction index records)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int

    def aborted_txn(self) -> AbortedTxn:
        """The `.txnindex` entry of this (aborted) transaction."""
        return AbortedTxn(
            self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


class TransactionTracker:
    """The open and unreplicated transactions of one partition (Kafka's ``ongoingTxns`` and
    ``unreplicatedTxns``), each by its first offset. Pure, not thread-safe: the producer state
    (under its log's lock) drives it."""

    __slots__ = ("_ongoing", "_unreplicated", "_unreplicated_first")

    def __init__(self) -> None:
        # Appends come in offset order, so the ongoing dict's first key is its smallest.
        self._ongoing: dict[int, TxnMetadata] = {}
        self._unreplicated: dict[int, TxnMetadata] = {}
        self._unreplicated_first: int | None = None

    @property
    def ongoing(self) -> dict[int, TxnMetadata]:
        """The open transactions by first offset (for inspection; do not mutate)."""
        return self._ongoing

    @property
    def unreplicated(self) -> dict[int, TxnMetadata]:
        """Completed transactions whose marker the high watermark has not passed."""
        return self._unreplicated

    @property
    def is_empty(self) -> bool:
        return not self._ongoing and not self._unreplicated

    def begin(self, producer_id: int, first_offset: int) -> None:
        """A producer's first transactional batch here, at `first_offset`."""
        in_order = not self._ongoing or next(reversed(self._ongoing)) < first_offset
        self._ongoing[first_offset] = TxnMetadata(producer_id, first_offset)
        if not in_order:  # never from appends (their offsets grow); keep the order anyway
            self._ongoing = dict(sorted(self._ongoing.items()))

    def complete(
        self, producer_id: int, first_offset: int, marker_offset: int, aborted: bool
    ) -> CompletedTxn:
        """The producer's marker at `marker_offset` ended its transaction opened at
        `first_offset`: Kafka's ``lastStableOffset(completedTxn)`` then ``completeTxn``."""
        last_stable = marker_offset + 1
        for txn in self._ongoing.values():
            if txn.producer_id != producer_id:
                last_stable = txn.first_offset
                break
        completed = CompletedTxn(producer_id, first_offset, marker_offset, aborted, last_stable)
        txn = self._ongoing.get(first_offset) or TxnMetadata(producer_id, first_offset)
        self._ongoing.pop(first_offset, None)
        txn.last_offset = marker_offset
        self._unreplicated[first_offset] = txn
        if self._unreplicated_first is None or first_offset < self._unreplicated_first:
            self._unreplicated_first = first_offset
        return completed

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget the completed transactions whose marker is below `high_watermark`."""
        if not self._unreplicated:
            return
        done = [
            first
            for first, txn in self._unreplicated.items()
            if txn.last_offset is not None and txn.last_offset < high_watermark
        ]
        if not done:
            return
        for first in done:
            del self._unreplicated[first]
        self._unreplicated_first = min(self._unreplicated, default=None)

    @property
    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction (Kafka's firstUndecidedOffset)."""
        return next(iter(self._ongoing), None)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open or unreplicated transaction."""
        undecided = next(iter(self._ongoing), None)
        unreplicated = self._unreplicated_first
        if undecided is None:
            return unreplicated
        if unreplicated is None or undecided < unreplicated:
            return undecided
        return unreplicated

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated.clear()
        self._unreplicated_first = None

    def __repr__(self) -> str:
        return (
            f"TransactionTracker(ongoing={list(self._ongoing.values())}, "
            f"unreplicated={list(self._unreplicated.values())})"
        )


def check_epoch(producer_id: int, epoch: int, current_epoch: int) -> None:
    """Kafka's checkProducerEpoch for a leader append: an older epoch is fenced."""
    if epoch < current_epoch:
        raise InvalidProducerEpochError(
            f"producer {producer_id} sent epoch {epoch}, older than its epoch {current_epoch}",
            producer_id,
        )


def check_marker(
    producer_id: int,
    epoch: int,
    marker: EndTransactionMarker,
    known: tuple[int, int, bool, int] | None,
) -> tuple[int, int, bool, int]:
    """Kafka's checks of a leader's marker of epoch `epoch` (``checkProducerEpoch``,
    ``checkCoordinatorEpoch``) against the producer's `known` (epoch, last sequence, open
    transaction, coordinator epoch); returns those after the marker."""
    if known is None:
        return (epoch, -1, False, marker.coordinator_epoch)
    current_epoch, last_sequence, _, coordinator_epoch = known
    check_epoch(producer_id, epoch, current_epoch)
    if coordinator_epoch > marker.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"Invalid coordinator epoch for producerId {producer_id}: "
            f"{marker.coordinator_epoch} (zombie), {coordinator_epoch} (current)",
            producer_id,
        )
    return (epoch, last_sequence if epoch == current_epoch else -1, False, marker.coordinator_epoch)
