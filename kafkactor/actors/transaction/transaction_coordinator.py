"""Kafka's `TransactionCoordinator`, the pure core: every decision on InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, timed-out transactions and expired ids, as values
(`Decision`, `TxnAppend`, `AppendOutcome`, `MarkerJob`) the actor carries out."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.transaction.results import (
    AppendOutcome,
    AppendPurpose,
    CompletedTxn,
    Decision,
    MarkerJob,
    Transition,
    TxnAppend,
)
from kafkactor.actors.transaction.transaction_config import TransactionConfig
from kafkactor.actors.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kafkactor.actors.transaction.transaction_state import TransactionState
from kafkactor.actors.transaction.transaction_state_manager import (
    CoordinatorEpochAndMetadata,
    TransactionStateManager,
)
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode

__all__ = ["ProducerIdGenerator", "TransactionCoordinatorCore"]

_S = TransactionState
_E = ErrorCode

#: a write's error as the client hears it (Kafka's appendTransactionToLog)
_APPEND_ERRORS = {
    _E.UNKNOWN_TOPIC_OR_PARTITION: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _E.COORDINATOR_NOT_AVAILABLE,
    _E.REQUEST_TIMED_OUT: _E.COORDINATOR_NOT_AVAILABLE,
    _E.NOT_LEADER_FOR_PARTITION: _E.NOT_COORDINATOR,
    _E.KAFKA_STORAGE_ERROR: _E.NOT_COORDINATOR,
}


class ProducerIdGenerator(Protocol):
    """The broker's producer id manager (blocks claimed in ZooKeeper)."""

    def generate_producer_id(self) -> int: ...


class TransactionCoordinatorCore:
    """The decisions of Kafka's `TransactionCoordinator` for one broker, on a
    `TransactionStateManager`; no I/O, no clock (each call is given `now`).

    A request is answered by a `Decision`: an error at once, or a `TxnAppend` of the prepared
    transition whose write outcome `complete_append` turns into the answer (and, after a
    PrepareCommit / PrepareAbort, the `MarkerJob` to carry out). As in Kafka, a transactional
    id with a transition in flight answers CONCURRENT_TRANSACTIONS.
    """

    def __init__(
        self,
        config: TransactionConfig | None = None,
        *,
        producer_ids: ProducerIdGenerator,
        offsets_topic_partitions: int = 50,
    ) -> None:
        self.config = config if config is not None else TransactionConfig()
        self.state = TransactionStateManager(self.config)
        self.producer_ids = producer_ids
        self.offsets_topic_partitions = offsets_topic_partitions

    # -- InitProducerId ------------------------------------------------------------------------

    def handle_init_producer_id(  # noqa: PLR0911 - one flat chain of checks, as Kafka's
        self,
        transactional_id: str | None,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        now: int,
    ) -> Decision:
        """`expected`: KIP-360's (producer id, epoch) of a producer recovering, else None."""
        if transactional_id is None:  # an idempotent producer: any id will do
            return Decision(producer_id=self.producer_ids.generate_producer_id(), producer_epoch=0)
        if not transactional_id:
            return Decision(error=_E.INVALID_REQUEST)
        if not self.state.validate_timeout(timeout_ms):
            return Decision(error=_E.INVALID_TRANSACTION_TIMEOUT)
        found = self.state.get(transactional_id)
        if isinstance(found, ErrorCode):
            return Decision(error=found)
        metadata = found.metadata
        if metadata is None:
            metadata = self.state.put_if_absent(
                TransactionMetadata(
                    transactional_id=transactional_id,
                    producer_id=self.producer_ids.generate_producer_id(),
                    txn_timeout_ms=timeout_ms,
                    txn_last_update_timestamp=now,
                )
            )
        if metadata.pending_transition_in_progress:
            return Decision(error=_E.CONCURRENT_TRANSACTIONS)
        if expected is not None and not _valid_expected(metadata, *expected):
            return Decision(error=_E.PRODUCER_FENCED)
        state = metadata.state
        if state.is_prepare:
            return Decision(error=_E.CONCURRENT_TRANSACTIONS)
        if state is _S.ONGOING:
            # abort the open transaction with a bumped epoch first; the producer hears
            # CONCURRENT_TRANSACTIONS and asks again, which bumps the epoch once more
            fence = metadata.prepare_fence_producer_epoch()
            return self._end(
                found,
                metadata,
                producer_epoch=fence.producer_epoch,
                committed=False,
                now=now,
                purpose=AppendPurpose.FENCE_ABORT,
                cause="fenced",
            )
        if metadata.is_producer_epoch_exhausted and (
            expected is None or expected[1] == metadata.producer_epoch
        ):
            transit: TxnTransitMetadata | ErrorCode = metadata.prepare_producer_id_rotation(
                self.producer_ids.generate_producer_id(),
                timeout_ms,
                now,
                record_last_epoch=expected is not None,
            )
        else:
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
        if isinstance(transit, ErrorCode):
            return Decision(error=transit)
        return self._write(found, transactional_id, transit, AppendPurpose.INIT)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

    def handle_add_partitions(  # noqa: PLR0911 - one flat chain of checks, as Kafka's
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        now: int,
    ) -> Decision:
        if not transactional_id:
            return Decision(error=_E.INVALID_REQUEST)
        found = self.state.get(transactional_id)
        if isinstance(found, ErrorCode):
            return Decision(error=found)
        metadata = found.metadata
        added = frozenset(partitions)
        if metadata is None or metadata.producer_id != producer_id:
            return Decision(error=_E.INVALID_PRODUCER_ID_MAPPING)
        if metadata.producer_epoch != producer_epoch:
            return Decision(error=_E.PRODUCER_FENCED)
        if metadata.pending_transition_in_progress or metadata.state.is_prepare:
            return Decision(error=_E.CONCURRENT_TRANSACTIONS)
        if metadata.state is _S.ONGOING and added <= metadata.partitions:
            return Decision()  # nothing new: answered at once
        transit = metadata.prepare_add_partitions(added, now)
        return self._write(found, transactional_id, transit, AppendPurpose.ADD_PARTITIONS)

    def handle_add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, now: int
    ) -> Decision:
        """AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction."""
        offsets = TopicPartition(
            topic=OFFSETS_TOPIC, partition=partition_for(group_id, self.offsets_topic_partitions)
        )
        return self.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, (offsets,), now
        )

    # -- EndTxn ----------------------------------------------------------------------------------

    def handle_end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now: int,
    ) -> Decision:
        if not transactional_id:
            return Decision(error=_E.INVALID_REQUEST)
        found = self.state.get(transactional_id)
        if isinstance(found, ErrorCode):
            return Decision(error=found)
        metadata = found.metadata
        if metadata is None or metadata.producer_id != producer_id:
            return Decision(error=_E.INVALID_PRODUCER_ID_MAPPING)
        if producer_epoch != metadata.producer_epoch:
            return Decision(error=_E.PRODUCER_FENCED)
        return self._end(
            found,
            metadata,
            producer_epoch=producer_epoch,
            committed=committed,
            now=now,
            purpose=AppendPurpose.END_TXN,
            cause="client",
        )

    def _end(
        self,
        found: CoordinatorEpochAndMetadata,
        metadata: TransactionMetadata,
        *,
        producer_epoch: int,
        committed: bool,
        now: int,
        purpose: AppendPurpose,
        cause: str,
    ) -> Decision:
        """Kafka's `endTransaction` (from the client, or to abort a fenced / timed-out one)."""
        pending = metadata.pending_state
        if producer_epoch < metadata.producer_epoch:
            return Decision(error=_E.PRODUCER_FENCED)
        if pending is not None and pending is not _S.PREPARE_EPOCH_FENCE:
            return Decision(error=_E.CONCURRENT_TRANSACTIONS)
        state = metadata.state
        if state is _S.ONGOING:
            if pending is _S.PREPARE_EPOCH_FENCE:  # the bumped epoch goes into the abort
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            target = _S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT
            transit = metadata.prepare_abort_or_commit(target, now)
            return self._write(found, metadata.transactional_id, transit, purpose, cause=cause)
        metadata.pending_state = None if pending is _S.PREPARE_EPOCH_FENCE else pending
        if (state is _S.COMPLETE_COMMIT and committed) or (
            state is _S.COMPLETE_ABORT and not committed
        ):
            return Decision()  # a retry of an ended transaction
        if (state is _S.PREPARE_COMMIT and committed) or (
            state is _S.PREPARE_ABORT and not committed
        ):
            return Decision(error=_E.CONCURRENT_TRANSACTIONS)
        return Decision(error=_E.INVALID_TXN_STATE)

    # -- housekeeping ----------------------------------------------------------------------------

    def abort_timed_out(self, now: int) -> list[TxnAppend]:
        """Abort every transaction open longer than its timeout, with a bumped epoch (Kafka
        2.5+'s `prepareFenceProducerEpoch`: the producer is fenced, its records aborted)."""
        appends = []
        for metadata in self.state.timed_out_transactions(now):
            found = self.state.get(metadata.transactional_id)
            if isinstance(found, ErrorCode):
                continue
            fence = metadata.prepare_fence_producer_epoch()
            decision = self._end(
                found,
                metadata,
                producer_epoch=fence.producer_epoch,
                committed=False,
                now=now,
                purpose=AppendPurpose.TIMEOUT_ABORT,
                cause="timeout",
            )
            if decision.append is not None:
                appends.append(decision.append)
        return appends

    def expire_transactional_ids(self, now: int) -> list[TxnAppend]:
        """Tombstones for ids idle longer than `transactional.id.expiration.ms`."""
        appends = []
        for metadata in self.state.expirable(now):
            found = self.state.get(metadata.transactional_id)
            if isinstance(found, ErrorCode):
                continue
            transit = metadata.prepare_dead()
            decision = self._write(found, metadata.transactional_id, transit, AppendPurpose.EXPIRE)
            assert decision.append is not None
            appends.append(decision.append)
        return appends

    # -- write outcomes --------------------------------------------------------------------------

    def _write(
        self,
        found: CoordinatorEpochAndMetadata,
        transactional_id: str,
        transit: TxnTransitMetadata,
        purpose: AppendPurpose,
        *,
        cause: str = "client",
    ) -> Decision:
        append = TxnAppend(
            transactional_id=transactional_id,
            partition=found.partition,
            coordinator_epoch=found.coordinator_epoch,
            transit=transit,
            purpose=purpose,
            tombstone=purpose is AppendPurpose.EXPIRE,
            cause=cause,
            partition_count=len(transit.partitions),
        )
        return Decision(append=append)

    def complete_append(  # noqa: PLR0911 - one answer per kind of write
        self, append: TxnAppend, error: ErrorCode, now: int
    ) -> AppendOutcome:
        """The write of `append` ended with `error` (the replica manager's, NONE: the ISR has
        it): apply the transition, or forget it, and say what to answer and do next."""
        tid = append.transactional_id
        metadata = self.state.metadata.get(tid)
        owned = self.state.still_owned(tid, append.coordinator_epoch) and metadata is not None
        if error is not _E.NONE:
            mapped = _APPEND_ERRORS.get(error, _E.UNKNOWN_SERVER_ERROR)
            retry = (
                append.purpose is AppendPurpose.COMPLETE and mapped is _E.COORDINATOR_NOT_AVAILABLE
            )
            if owned and metadata is not None and not retry:
                metadata.pending_state = None
                if append.purpose in (AppendPurpose.FENCE_ABORT, AppendPurpose.TIMEOUT_ABORT):
                    metadata.has_failed_epoch_fence = True
            return AppendOutcome(error=mapped, retry=retry and owned)
        if not owned or metadata is None:
            return AppendOutcome(error=_E.NOT_COORDINATOR)
        if append.purpose is AppendPurpose.EXPIRE:
            if (
                metadata.pending_state is _S.DEAD
                and metadata.producer_id == append.transit.producer_id
            ):
                del self.state.metadata[tid]
            return AppendOutcome(transition=_transition(tid, metadata, metadata.state, _S.DEAD))
        before = metadata.state
        after = metadata.complete_transition(append.transit)
        transition = _transition(tid, metadata, before, after, len(append.transit.partitions))
        if append.purpose is AppendPurpose.INIT:
            return AppendOutcome(
                producer_id=metadata.producer_id,
                producer_epoch=metadata.producer_epoch,
                transition=transition,
            )
        if append.purpose is AppendPurpose.COMPLETE:
            completed = CompletedTxn(
                transactional_id=tid,
                producer_id=metadata.producer_id,
                committed=after is _S.COMPLETE_COMMIT,
                cause=append.cause,
                duration_ms=max(0, now - metadata.txn_start_timestamp),
                partitions=append.partition_count,
            )
            return AppendOutcome(transition=transition, completed=completed)
        if after.is_prepare:
            markers = self.markers_for(
                append.partition, append.coordinator_epoch, metadata, now, append.cause
            )
            answer = (
                _E.CONCURRENT_TRANSACTIONS
                if append.purpose is AppendPurpose.FENCE_ABORT
                else _E.NONE
            )
            return AppendOutcome(error=answer, transition=transition, markers=markers)
        return AppendOutcome(transition=transition)

    def markers_for(
        self,
        txn_partition: int,
        coordinator_epoch: int,
        metadata: TransactionMetadata,
        now: int,
        cause: str,
    ) -> MarkerJob:
        """A transaction in PrepareCommit / PrepareAbort: prepare its completion and say which
        markers to write first."""
        partitions = frozenset(metadata.partitions)
        completion = metadata.prepare_complete(now)
        return MarkerJob(
            transactional_id=metadata.transactional_id,
            txn_partition=txn_partition,
            coordinator_epoch=coordinator_epoch,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            committed=metadata.state is _S.PREPARE_COMMIT,
            partitions=partitions,
            completion=completion,
            cause=cause,
            partition_count=len(partitions),
        )

    def marker_written(self, job: MarkerJob, partition: TopicPartition) -> bool:
        """A marker of `job` is written (or its partition is gone); True when none is left."""
        metadata = self.state.metadata.get(job.transactional_id)
        if metadata is None or not self.state.still_owned(
            job.transactional_id, job.coordinator_epoch
        ):
            return False
        if metadata.state.is_prepare:
            metadata.remove_partition(partition)
        return not metadata.partitions

    def markers_pending(self, job: MarkerJob) -> bool | None:
        """True while markers of `job` are unwritten; None when the job is moot (the
        coordinator resigned the partition, or the id moved on)."""
        metadata = self.state.metadata.get(job.transactional_id)
        if metadata is None or not self.state.still_owned(
            job.transactional_id, job.coordinator_epoch
        ):
            return None
        if not metadata.state.is_prepare or metadata.producer_epoch != job.producer_epoch:
            return None
        return bool(metadata.partitions)

    # -- loading -------------------------------------------------------------------------------

    def load(
        self,
        partition: int,
        coordinator_epoch: int,
        records: Iterable[tuple[str, TxnTransitMetadata | None]],
        now: int,
    ) -> list[MarkerJob]:
        """Replay a partition this broker now leads; transactions found in PrepareCommit /
        PrepareAbort get their markers written again (Kafka completes them on load)."""
        loaded = self.state.finish_loading(partition, coordinator_epoch, records)
        return [
            self.markers_for(partition, coordinator_epoch, m, now, "init")
            for m in loaded
            if m.state.is_prepare
        ]


def _valid_expected(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """KIP-360: may a producer naming (producer_id, epoch) have the id's epoch bumped? A new
    id (no epoch yet), its current producer id, or its previous one with the epochs used up
    (a retry of a rotation whose answer was lost)."""
    return (
        metadata.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == metadata.producer_id
        or (producer_id == metadata.last_producer_id and is_epoch_exhausted(epoch))
    )


def _transition(
    tid: str,
    metadata: TransactionMetadata,
    before: TransactionState,
    after: TransactionState,
    partitions: int = 0,
) -> Transition:
    return Transition(
        transactional_id=tid,
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        from_state=before,
        to_state=after,
        partitions=partitions,
    )
