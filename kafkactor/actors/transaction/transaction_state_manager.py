"""Kafka's `TransactionStateManager`, the pure part: which `__transaction_state` partitions
this coordinator owns (and in which coordinator epoch), which are loading, and the metadata of
their transactional ids."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafkactor.actors.transaction.transaction_config import TransactionConfig
from kafkactor.actors.transaction.transaction_log import partition_for_transactional_id
from kafkactor.actors.transaction.transaction_metadata import (
    TransactionMetadata,
    TxnTransitMetadata,
)
from kafkactor.actors.transaction.transaction_state import TransactionState
from kafkactor.messages import ErrorCode

__all__ = ["CoordinatorEpochAndMetadata", "TransactionStateManager"]

_S = TransactionState


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndMetadata:
    """A transactional id's metadata (None: not known yet) and the epoch of the coordinator of
    its partition (Kafka's `CoordinatorEpochAndTxnMetadata`)."""

    coordinator_epoch: int
    partition: int
    metadata: TransactionMetadata | None


class TransactionStateManager:
    """The transaction metadata cache of one coordinator (Kafka's `TransactionStateManager`
    without its I/O): a transactional id is served only while its partition is owned and not
    loading (COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR when another broker
    leads it); loading replays the partition's records (last value per key, a tombstone
    removes); resigning drops the partition's ids. Also which transactions have timed out and
    which ids have expired."""

    def __init__(self, config: TransactionConfig) -> None:
        self.config = config
        self.active = True
        self.owned: dict[int, int] = {}  # partition -> coordinator epoch
        self.loading: set[int] = set()
        self.metadata: dict[str, TransactionMetadata] = {}

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_transactional_id(
            transactional_id, self.config.state_log_num_partitions
        )

    def validate_timeout(self, timeout_ms: int) -> bool:
        """Kafka's `validateTransactionTimeoutMs`: within (0, transaction.max.timeout.ms]."""
        return 0 < timeout_ms <= self.config.max_timeout_ms

    def get(self, transactional_id: str) -> CoordinatorEpochAndMetadata | ErrorCode:
        """The id's metadata, or why this coordinator cannot serve it now."""
        partition = self.partition_for(transactional_id)
        if not self.active:
            return ErrorCode.NOT_COORDINATOR
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self.owned.get(partition)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        return CoordinatorEpochAndMetadata(epoch, partition, self.metadata.get(transactional_id))

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        return self.metadata.setdefault(metadata.transactional_id, metadata)

    def still_owned(self, transactional_id: str, coordinator_epoch: int) -> bool:
        """Is the id's partition still ours, in the epoch a write was made in?"""
        return self.owned.get(self.partition_for(transactional_id)) == coordinator_epoch

    # -- loading and unloading -----------------------------------------------------------------

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self.remove_partition(partition)
        self.loading.add(partition)
        self.owned[partition] = coordinator_epoch

    def finish_loading(
        self,
        partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[str, TxnTransitMetadata | None]],
    ) -> list[TransactionMetadata]:
        """Replay the partition's records in log order; returns the ids loaded. Nothing is
        loaded when the partition was resigned (or re-elected) meanwhile."""
        if self.owned.get(partition) != coordinator_epoch or partition not in self.loading:
            return []
        latest: dict[str, TxnTransitMetadata | None] = {}
        for transactional_id, transit in records:
            if self.partition_for(transactional_id) == partition:
                latest[transactional_id] = transit
        loaded = [
            TransactionMetadata.from_transit(tid, transit)
            for tid, transit in latest.items()
            if transit is not None and transit.state is not _S.DEAD
        ]
        for metadata in loaded:
            self.metadata[metadata.transactional_id] = metadata
        self.loading.discard(partition)
        return loaded

    def remove_partition(self, partition: int, coordinator_epoch: int | None = None) -> list[str]:
        """Resign `partition` (only if still in `coordinator_epoch`, when given): its ids go."""
        if coordinator_epoch is not None and self.owned.get(partition, -1) > coordinator_epoch:
            return []
        self.owned.pop(partition, None)
        self.loading.discard(partition)
        gone = [t for t in self.metadata if self.partition_for(t) == partition]
        for transactional_id in gone:
            del self.metadata[transactional_id]
        return gone

    # -- housekeeping --------------------------------------------------------------------------

    def timed_out_transactions(self, now: int) -> list[TransactionMetadata]:
        """Open transactions older than their timeout, without a transition in flight (Kafka's
        `timedOutTransactions`)."""
        return [
            m
            for m in self._served()
            if m.state is _S.ONGOING
            and not m.pending_transition_in_progress
            and m.txn_start_timestamp + m.txn_timeout_ms < now
        ]

    def expirable(self, now: int) -> list[TransactionMetadata]:
        """Ids without a transaction whose last update is `transactional.id.expiration.ms` old
        (Kafka's `removeExpiredTransactionalIds`' choice)."""
        horizon = now - self.config.transactional_id_expiration_ms
        return [
            m
            for m in self._served()
            if m.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
            and not m.pending_transition_in_progress
            and m.txn_last_update_timestamp <= horizon
        ]

    def _served(self) -> list[TransactionMetadata]:
        return [
            m
            for m in self.metadata.values()
            if self.partition_for(m.transactional_id) not in self.loading
        ]
