"""Transactional offset commits (KIP-98) as Kafka's group coordinator keeps them: the offsets a
transactional producer committed to a group through TxnOffsetCommit, pending until the
transaction's marker reaches the group's `__consumer_offsets` partition (Kafka's
`GroupMetadata.pendingTransactionalOffsetCommits`), and where in the log each committed offset
was written, which decides whether a transaction's offset or a plain commit is the newer one
(Kafka's `CommitRecordMetadataAndOffset.appendedBatchOffset` and `olderThan`). Pure state."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

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
    """One partition's offset a transaction committed (its append acknowledged, or read back
    by a load), and the offset in `__consumer_offsets` of the batch that holds it (Kafka's
    appendedBatchOffset; None: not known)."""

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


@dataclass(slots=True)
class _InFlight:
    """An offset whose transactional append is not acknowledged yet; `outcome` is the marker
    of its producer that came before the acknowledgement (True: COMMIT), if one did."""

    offset: OffsetAndMetadata
    outcome: bool | None = None


class TxnOffsetCommits:
    """Every group's pending transactional offsets (by group, then producer id, then
    partition) and the log offset of each committed offset (by group, then partition).

    Kept beside the groups rather than in them so that a transaction's offsets outlive what
    happens to their group's cache entry while the transaction is open (a DeleteGroups, an
    OffsetDelete): the records are in the log, and a commit marker after them makes them the
    group's offsets, in the cache as at the next load of the partition.

    An offset whose append is not acknowledged yet is held apart (in flight) until it is:
    Kafka stages it among the producer's pending offsets at once, so that a fenced zombie of
    the same producer id whose append the log refuses takes the offset its successor had
    pending for that partition with it. Here the refusal drops only the zombie's own offset.
    An in-flight offset counts as pending for OffsetFetch's require_stable; a marker that
    comes before its acknowledgement is applied to it on the acknowledgement (Kafka fails
    that case)."""

    def __init__(self) -> None:
        self.pending: dict[str, Pending] = {}
        self.positions: dict[str, dict[TopicPartition, int]] = {}
        self.in_flight: dict[str, dict[int, dict[TopicPartition, list[_InFlight]]]] = {}

    # -- a TxnOffsetCommit -----------------------------------------------------------------------

    def prepare(
        self, group_id: str, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Kafka's prepareTxnOffsetCommit: pending for the producer before the append."""
        producer = self.in_flight.setdefault(group_id, {}).setdefault(producer_id, {})
        for tp, offset in offsets.items():
            producer.setdefault(tp, []).append(_InFlight(offset))

    def on_append(
        self,
        group_id: str,
        producer_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        log_offset: int,
        current: Collection[TopicPartition],
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's onTxnOffsetCommitAppend: the append is acknowledged at `log_offset`, its
        offsets are pending for the producer. Returns those a marker already committed, to
        apply to the group as `complete` returns them (`current`: the group's partitions with
        a committed offset)."""
        won = {}
        for tp, offset in offsets.items():
            entry = self._take(group_id, producer_id, tp, offset)
            if entry is None:
                continue  # unloaded meanwhile
            if entry.outcome is None:
                producer = self.pending.setdefault(group_id, {}).setdefault(producer_id, {})
                producer[tp] = PendingTxnOffset(offset, log_offset)
            elif entry.outcome and self._wins(group_id, tp, log_offset, current):
                won[tp] = offset
        return won

    def fail(
        self, group_id: str, producer_id: int, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> None:
        """Kafka's failPendingTxnOffsetCommit: the append failed (the client retries, or it is
        a fenced zombie): its offsets stop being pending; the producer's others stay."""
        for tp, offset in offsets.items():
            self._take(group_id, producer_id, tp, offset)

    # -- a transaction's marker ------------------------------------------------------------------

    def groups_of(self, producer_id: int, belongs: Callable[[str], bool]) -> list[str]:
        """The groups (of the partitions `belongs` accepts) where the producer has pending
        offsets (Kafka's groupsBelongingToPartitions)."""
        groups = dict.fromkeys(
            g
            for table in (self.pending, self.in_flight)
            for g, p in table.items()
            if producer_id in p
        )
        return [g for g in groups if belongs(g)]

    def complete(
        self,
        group_id: str,
        producer_id: int,
        committed: bool,
        current: Collection[TopicPartition],
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Kafka's completePendingTxnOffsetCommit: the producer's pending offsets in the group
        go; on a commit, those that become the group's committed offsets are returned for the
        caller to apply (`current`: the group's partitions with a committed offset). One
        replaces the group's offset of its partition unless that one was written later in
        the log (a plain commit after the transaction's record keeps its place: Kafka orders
        them by log offset). Offsets still in flight get the marker's outcome when their
        append is acknowledged (`on_append`)."""
        for entries in self.in_flight.get(group_id, {}).get(producer_id, {}).values():
            for entry in entries:
                entry.outcome = committed if entry.outcome is None else entry.outcome
        producer = self.pending.get(group_id, {}).pop(producer_id, None)
        if not self.pending.get(group_id, True):
            del self.pending[group_id]
        if producer is None or not committed:
            return {}
        return {
            tp: txn.offset
            for tp, txn in producer.items()
            if self._wins(group_id, tp, txn.log_offset, current)
        }

    def _wins(
        self,
        group_id: str,
        tp: TopicPartition,
        log_offset: int | None,
        current: Collection[TopicPartition],
    ) -> bool:
        """Whether a transaction's offset written at `log_offset` replaces the group's
        committed one (recording where it was written when it does)."""
        positions = self.positions.setdefault(group_id, {})
        written = positions.get(tp) if tp in current else None
        if written is not None and log_offset is not None and written >= log_offset:
            return False
        if log_offset is None:
            positions.pop(tp, None)
        else:
            positions[tp] = log_offset
        return True

    def _take(
        self, group_id: str, producer_id: int, tp: TopicPartition, offset: OffsetAndMetadata
    ) -> _InFlight | None:
        """Remove and return the in-flight entry of this offset (None: not found)."""
        producers = self.in_flight.get(group_id, {})
        entries = producers.get(producer_id, {}).get(tp, [])
        entry = next((e for e in entries if e.offset == offset), None)
        if entry is None:
            return None
        entries.remove(entry)
        if not entries:
            del producers[producer_id][tp]
            if not producers[producer_id]:
                del producers[producer_id]
                if not producers:
                    del self.in_flight[group_id]
        return entry

    def record_commit(self, group_id: str, tp: TopicPartition, log_offset: int) -> None:
        """A plain OffsetCommit of `tp` was written at `log_offset` (-1: not known) and is now
        committed."""
        if log_offset < 0:
            self.positions.get(group_id, {}).pop(tp, None)
        else:
            self.positions.setdefault(group_id, {})[tp] = log_offset

    # -- queries ---------------------------------------------------------------------------------

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction has an offset of `tp` pending in the group, acknowledged or
        in flight (Kafka's hasPendingOffsetCommitsForTopicPartition, the transactional half)."""
        return any(tp in p for p in self.pending.get(group_id, {}).values()) or any(
            tp in p for p in self.in_flight.get(group_id, {}).values()
        )

    def has_any(self, group_id: str) -> bool:
        """Whether a transaction has any offset pending in the group (acknowledged or not)."""
        return bool(self.pending.get(group_id)) or bool(self.in_flight.get(group_id))

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
        tables: tuple[dict[str, Any], ...] = (self.pending, self.positions, self.in_flight)
        for table in tables:
            for group_id in [g for g in table if belongs(g)]:
                del table[group_id]
