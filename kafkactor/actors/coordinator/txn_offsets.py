"""Transactional offset commits (KIP-98) as Kafka's group coordinator keeps them: the offsets a
transactional producer committed to a group through TxnOffsetCommit, pending until the
transaction's marker reaches the group's `__consumer_offsets` partition (Kafka's
`GroupMetadata.pendingTransactionalOffsetCommits`), and where in the log each committed offset
was written, which decides whether a transaction's offset or a plain commit is the newer one
(Kafka's `CommitRecordMetadataAndOffset.appendedBatchOffset` and `olderThan`). Pure state."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from kafkactor.actors.coordinator.group_metadata import OffsetAndMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode

__all__ = [
    "PendingTxnOffset",
    "TxnCommitOutcome",
    "TxnOffsetCommitWrite",
    "TxnOffsetCommits",
]


@dataclass(frozen=True, slots=True)
class PendingTxnOffset:
    """One partition's offset a transaction committed, and the offset in `__consumer_offsets`
    of the batch that holds it (None while its append is not acknowledged yet)."""

    offset: OffsetAndMetadata
    log_offset: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitWrite:
    """A TxnOffsetCommit's offsets to append to `__consumer_offsets` as one transactional
    batch of the producer; once appended (or failed) call `complete_txn_offset_write` with it
    to get the answer. `too_large` are the partitions refused for their metadata size."""

    group_id: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    too_large: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class TxnCommitOutcome:
    """A TxnOffsetCommit's outcome: `errors` answers it now, or `write` must be appended first."""

    errors: Mapping[TopicPartition, ErrorCode] | None
    write: TxnOffsetCommitWrite | None = None


Pending = dict[int, dict[TopicPartition, PendingTxnOffset]]  # producer id -> partition -> offset


class TxnOffsetCommits:
    """Every group's pending transactional offsets (by group, then producer id, then
    partition) and the log offset of each committed offset (by group, then partition).

    Kept beside the groups rather than in them so that a transaction's offsets outlive what
    happens to their group's cache entry while the transaction is open (a DeleteGroups, an
    OffsetDelete): the records are in the log, and a commit marker after them makes them the
    group's offsets, in the cache as at the next load of the partition."""

    def __init__(self) -> None:
        self.pending: dict[str, Pending] = {}
        self.positions: dict[str, dict[TopicPartition, int]] = {}

    # -- a TxnOffsetCommit -----------------------------------------------------------------------

    def prepare(
        self, group_id: str, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Kafka's prepareTxnOffsetCommit: pending for the producer before the append."""
        producer = self.pending.setdefault(group_id, {}).setdefault(producer_id, {})
        for tp, offset in offsets.items():
            producer[tp] = PendingTxnOffset(offset)

    def on_append(
        self,
        group_id: str,
        producer_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        log_offset: int,
    ) -> None:
        """Kafka's onTxnOffsetCommitAppend: the append is acknowledged at `log_offset`; a
        partition whose pending offset is still this one learns where it was written."""
        producer = self.pending.get(group_id, {}).get(producer_id)
        if producer is None:
            return  # completed (an abort marker came first) or unloaded meanwhile
        for tp, offset in offsets.items():
            current = producer.get(tp)
            if current is not None and current.offset == offset:
                producer[tp] = PendingTxnOffset(offset, log_offset)

    def fail(self, group_id: str, producer_id: int, offsets: Iterable[TopicPartition]) -> None:
        """Kafka's failPendingTxnOffsetCommit: the append failed, the client will retry."""
        producer = self.pending.get(group_id, {}).get(producer_id)
        if producer is None:
            return
        for tp in offsets:
            producer.pop(tp, None)
        self._drop_empty(group_id, producer_id)

    # -- a transaction's marker ------------------------------------------------------------------

    def groups_of(self, producer_id: int, belongs: Callable[[str], bool]) -> list[str]:
        """The groups (of the partitions `belongs` accepts) where the producer has pending
        offsets (Kafka's groupsBelongingToPartitions)."""
        return [g for g, p in self.pending.items() if producer_id in p and belongs(g)]

    def complete(
        self,
        group_id: str,
        producer_id: int,
        committed: bool,
        current: Collection[TopicPartition],
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's completePendingTxnOffsetCommit: the producer's pending offsets in the group
        go; on a commit, those that become the group's committed offsets are returned for the
        caller to apply. One replaces the group's `current` offset of its partition unless
        that one was written later in the log (a plain commit after the transaction's record
        keeps its place: Kafka orders them by log offset); one whose append is not
        acknowledged yet is taken (its record precedes the marker in the log)."""
        producer = self.pending.get(group_id, {}).pop(producer_id, None)
        self._drop_empty(group_id, None)
        if producer is None or not committed:
            return {}
        positions = self.positions.setdefault(group_id, {})
        won = {}
        for tp, pending in producer.items():
            written = positions.get(tp) if tp in current else None
            if written is None or pending.log_offset is None or written < pending.log_offset:
                won[tp] = pending.offset
                if pending.log_offset is None:
                    positions.pop(tp, None)
                else:
                    positions[tp] = pending.log_offset
        return won

    def record_commit(self, group_id: str, tp: TopicPartition, log_offset: int) -> None:
        """A plain OffsetCommit of `tp` was written at `log_offset` (-1: not known) and is now
        committed."""
        if log_offset < 0:
            self.positions.get(group_id, {}).pop(tp, None)
        else:
            self.positions.setdefault(group_id, {})[tp] = log_offset

    # -- queries ---------------------------------------------------------------------------------

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction has an offset of `tp` pending in the group (Kafka's
        hasPendingOffsetCommitsForTopicPartition, the transactional half)."""
        return any(tp in p for p in self.pending.get(group_id, {}).values())

    def has_any(self, group_id: str) -> bool:
        return bool(self.pending.get(group_id))

    def producers(self, group_id: str) -> list[int]:
        """Kafka's activeProducers: the producers with offsets pending in the group."""
        return list(self.pending.get(group_id, {}))

    # -- loading and unloading -------------------------------------------------------------------

    def load(
        self,
        group_id: str,
        pending: Mapping[int, Mapping[TopicPartition, PendingTxnOffset]],
        positions: Mapping[TopicPartition, int],
    ) -> None:
        """What a load of the group's partition found (Kafka's initializeOffsets)."""
        self.positions[group_id] = dict(positions)
        if pending:
            self.pending[group_id] = {pid: dict(offsets) for pid, offsets in pending.items()}

    def unload(self, belongs: Callable[[str], bool]) -> None:
        """Forget the groups `belongs` accepts (their partition has another leader now)."""
        for table in (self.pending, self.positions):
            for group_id in [g for g in table if belongs(g)]:
                del table[group_id]

    def _drop_empty(self, group_id: str, producer_id: int | None) -> None:
        producers = self.pending.get(group_id)
        if producers is None:
            return
        if producer_id is not None and not producers.get(producer_id, True):
            del producers[producer_id]
        if not producers:
            del self.pending[group_id]
