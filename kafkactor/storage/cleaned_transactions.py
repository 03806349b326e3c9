"""What the log cleaner knows of transactions while it copies: Kafka's
``CleanedTransactionMetadata``.

The cleaner reads batches in offset order. Before it reads a range it collects, from the
`.txnindex` files, the aborted transactions overlapping it; an aborted transaction becomes
*ongoing* when the cleaner reaches its first offset and stops at its producer's ABORT marker.
A transactional data batch of a producer whose aborted transaction is ongoing is aborted data:
its records are never put in the offset map (they must not supersede a committed value of
their key) and are removed from the cleaned segment. Markers themselves are kept here (see
docs/storage.md); committed transactional records are compacted by key like any other.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkactor.storage.control_batch import end_txn_marker
from kafkactor.storage.errors import StorageError
from kafkactor.storage.record_batch import RecordBatch

__all__ = ["CleanedTransactions"]


class CleanedTransactions:
    """Kafka's ``CleanedTransactionMetadata`` for one pass of the cleaner over a range."""

    __slots__ = ("_aborted", "_next", "_ongoing")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # (producer id, first offset) of the aborted transactions, by first offset
        self._aborted = sorted(aborted, key=lambda txn: txn[1])
        self._next = 0
        self._ongoing: set[int] = set()

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """Whether `batch` is aborted data (read in offset order, every batch of the range)."""
        aborted, last = self._aborted, batch.last_offset
        while self._next < len(aborted) and aborted[self._next][1] <= last:
            self._ongoing.add(aborted[self._next][0])
            self._next += 1
        if not self._ongoing:
            return False
        if batch.is_control_batch:
            if batch.producer_id in self._ongoing:
                try:
                    marker = end_txn_marker(batch)
                except StorageError:
                    marker = None
                if marker is not None and marker.is_abort:
                    self._ongoing.discard(batch.producer_id)
            return False
        return batch.is_transactional and batch.producer_id in self._ongoing
