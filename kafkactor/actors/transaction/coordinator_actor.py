"""The transaction coordinator's actor shell: one per broker, around a
`TransactionCoordinatorCore`."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kafkactor.actors.purgatory import EXPIRED, CompletedBy, Purgatory
from kafkactor.actors.runtime import Directory, TraceContext, addresses, handles
from kafkactor.actors.transaction.coordinator_messages import (
    AbortTimedOutTransactions,
    ExpireTransactionalIds,
    add_partitions_response,
)
from kafkactor.actors.transaction.delayed_txn_marker import DelayedTxnMarker
from kafkactor.actors.transaction.marker_sender import TxnMarkerSender, _Tell
from kafkactor.actors.transaction.results import (
    AppendOutcome,
    AppendPurpose,
    Decision,
    MarkerJob,
    TxnAppend,
)
from kafkactor.actors.transaction.transaction_config import TransactionConfig
from kafkactor.actors.transaction.transaction_coordinator import (
    ProducerIdGenerator,
    TransactionCoordinatorCore,
)
from kafkactor.actors.transaction.transaction_loader import load_partition, transition_record
from kafkactor.actors.transaction.txn_marker_channel import TxnMarkerChannel
from kafkactor.common import TRANSACTION_STATE_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from kafkactor.messages.purgatory import OperationsExpired
from kafkactor.messages.replication import (
    MetadataResponse,
    ProducePartition,
    ProduceRequest,
    ProduceResponse,
)
from kafkactor.messages.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnStatePartitionElected,
    TxnStatePartitionResigned,
    WriteTxnMarkersResponse,
)
from kafkactor.storage import Log, build_batch
from kafkactor.timer import Clock, ScheduledTask, Scheduler, Timer

__all__ = ["TransactionCoordinatorActor"]

REQUEST_TIMEOUT_MS: Final = 30_000  # request.timeout.ms: an append's wait for acks, a marker's


@dataclass(frozen=True, slots=True)
class _Write:
    """A transition being written, and the request its outcome answers (None: none)."""

    append: TxnAppend
    request: Request | None
    trace: TraceContext | None


class TransactionCoordinatorActor(TxnMarkerSender):
    """Kafka's `TransactionCoordinator` for one broker: the transactional ids of the
    `__transaction_state` partitions this broker leads.

    Every decision is the `TransactionCoordinatorCore`'s. This shell writes each transition
    to `__transaction_state` through the broker's replica manager (acks=-1, as a coordinator's
    own append) and answers once the write is acknowledged. After a PrepareCommit /
    PrepareAbort is written (EndTxn answered), it sends each partition leader's replica
    manager a WriteTxnMarkersRequest (leaders from the local metadata cache), asks again on
    the broker's timer for partitions whose leader is unknown or answered an error, and waits
    in the "txn-marker" purgatory (a `DelayedTxnMarker` per transactional id, on the shared
    timer) until every marker is written; then it writes CompleteCommit / CompleteAbort.

    Loading a partition (TxnStatePartitionElected) replays its log and completes the
    transactions found half-ended; resigning one unloads it (NOT_COORDINATOR). Timed-out
    transactions and idle ids are handled on the broker's scheduler. New producer ids come
    from the broker's producer id manager: a call blocks this actor only when it claims a new
    block of 1000 ids in ZooKeeper (one write per 1000 producers).
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock,
        broker: int,
        *,
        logs: Mapping[str, Log],
        scheduler: Scheduler | None,
        producer_ids: ProducerIdGenerator,
        config: TransactionConfig | None = None,
        offsets_topic_partitions: int = 50,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.core = TransactionCoordinatorCore(
            config, producer_ids=producer_ids, offsets_topic_partitions=offsets_topic_partitions
        )
        self.logs = logs
        self.timer = timer
        self.scheduler = scheduler
        self.purgatory = Purgatory("txn-marker", timer)
        self.channel = TxnMarkerChannel()
        self.replica_manager = addresses.replica_manager(broker)
        self._ids = itertools.count(1)
        self._writes: dict[int, _Write] = {}
        self._lookups: set[int] = set()
        self._markers: dict[str, DelayedTxnMarker] = {}
        self._retry_writes: list[TxnAppend] = []
        self._confirms: dict[int, MarkerJob] = {}  # by correlation id: loaded Prepare* rewritten
        self._retry_confirms: list[MarkerJob] = []
        self._retry_task: _Tell | None = None
        self._epochs: dict[int, int] = {}
        self._jobs: list[ScheduledTask] = []

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    def _next_id(self) -> int:
        return next(self._ids)

    def on_start(self) -> None:
        super().on_start()
        config = self.core.config
        if self.scheduler is None:
            return
        for name, interval, payload in (
            (
                "transaction-abort",
                config.abort_timed_out_transactions_interval_ms,
                AbortTimedOutTransactions(),
            ),
            (
                "transactionalId-expiration",
                config.remove_expired_transactional_ids_interval_ms,
                ExpireTransactionalIds(),
            ),
        ):
            self._jobs.append(
                self.scheduler.schedule(
                    name,
                    functools.partial(self.directory.tell, self.address, payload),
                    delay_ms=interval,
                    period_ms=interval,
                )
            )

    # -- the producer's requests -----------------------------------------------------------------

    @handles(InitProducerIdRequest)
    def _on_init(self, request: InitProducerIdRequest) -> None:
        expected = None
        if request.producer_id != -1 or request.producer_epoch != -1:
            if request.producer_id == -1 or request.producer_epoch == -1:
                self._answer(request, ErrorCode.INVALID_REQUEST)  # KafkaApis' check
                return
            expected = (request.producer_id, request.producer_epoch)
        decision = self.core.handle_init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, expected, self.now
        )
        self._decide(request, decision)

    @handles(AddPartitionsToTxnRequest)
    def _on_add_partitions(self, request: AddPartitionsToTxnRequest) -> None:
        partitions = [TopicPartition.of(p) for p in request.partitions]
        decision = self.core.handle_add_partitions(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            partitions,
            self.now,
        )
        self._decide(request, decision)

    @handles(AddOffsetsToTxnRequest)
    def _on_add_offsets(self, request: AddOffsetsToTxnRequest) -> None:
        decision = self.core.handle_add_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
            self.now,
        )
        self._decide(request, decision)

    @handles(EndTxnRequest)
    def _on_end_txn(self, request: EndTxnRequest) -> None:
        decision = self.core.handle_end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            self.now,
        )
        self._decide(request, decision)

    def _decide(self, request: Request, decision: Decision) -> None:
        if decision.append is None:
            self._answer(request, decision.error, decision.producer_id, decision.producer_epoch)
        else:
            self._write(decision.append, request)

    def _answer(
        self,
        request: Request,
        error: ErrorCode,
        producer_id: int = -1,
        producer_epoch: int = -1,
        trace: TraceContext | None = None,
    ) -> None:
        response: Response
        if isinstance(request, InitProducerIdRequest):
            response = InitProducerIdResponse(
                error_code=error, producer_id=producer_id, producer_epoch=producer_epoch
            )
        elif isinstance(request, AddPartitionsToTxnRequest):
            response = add_partitions_response(request.partitions, error)
        elif isinstance(request, AddOffsetsToTxnRequest):
            response = AddOffsetsToTxnResponse(error_code=error)
        else:
            response = EndTxnResponse(error_code=error)
        self.reply(request, response, trace=trace)

    # -- writes to __transaction_state -----------------------------------------------------------

    def _write(self, append: TxnAppend, request: Request | None) -> None:
        correlation_id = self._next_id()
        self._writes[correlation_id] = _Write(append, request, self.trace_context)
        if not self._send_transition(correlation_id, append):
            self._written(self._writes.pop(correlation_id), ErrorCode.NOT_LEADER_FOR_PARTITION)

    def _send_transition(self, correlation_id: int, append: TxnAppend) -> bool:
        """Append `append`'s record to its `__transaction_state` partition through the
        replica manager (acks=-1, a coordinator's append); False when it cannot be sent."""
        batch = build_batch([transition_record(append, self.now)], 0)
        return self.send(
            self.replica_manager,
            ProduceRequest(
                reply_to=self.address,
                correlation_id=correlation_id,
                acks=-1,
                timeout_ms=REQUEST_TIMEOUT_MS,
                from_coordinator=True,
                partitions=(
                    ProducePartition(
                        topic=TRANSACTION_STATE_TOPIC, partition=append.partition, records=batch
                    ),
                ),
            ),
        )

    def _confirm_then_send(self, job: MarkerJob) -> None:
        """Write a loaded Prepare* transition again, and send its markers only once that write
        is acknowledged. What a new leader of a `__transaction_state` partition loads may lie
        above its high watermark, and a record there can still be truncated by the next
        leader: markers sent for a PrepareCommit that is then lost commit some partitions of
        a transaction the next coordinator aborts (a group's offsets committed with their
        output aborted). An acknowledged write at the log end means every record before it
        is committed, as a Raft leader commits an entry of its own term first."""
        metadata = self.core.state.metadata.get(job.transactional_id)
        if metadata is None or self.core.markers_pending(job) is not True:
            return  # moot: the partition moved away, or the id moved on
        correlation_id = self._next_id()
        self._confirms[correlation_id] = job
        append = TxnAppend(
            transactional_id=job.transactional_id,
            partition=job.txn_partition,
            coordinator_epoch=job.coordinator_epoch,
            transit=metadata.as_transit(),
            purpose=AppendPurpose.END_TXN,
        )
        sent = self._send_transition(correlation_id, append)
        if not sent:
            self._confirmed(self._confirms.pop(correlation_id), ErrorCode.NOT_LEADER_FOR_PARTITION)

    def _confirmed(self, job: MarkerJob, error: ErrorCode) -> None:
        if self.core.markers_pending(job) is not True:
            return
        if error is ErrorCode.NONE:
            self._start_markers(job)
        else:  # asked again after the backoff, for as long as this coordinator owns the id
            self._retry_confirms.append(job)
            self._arm_retry()

    @handles(ProduceResponse, ErrorResponse, MetadataResponse, WriteTxnMarkersResponse)
    def _on_response(self, response: Response) -> None:
        correlation_id = response.correlation_id
        confirm = self._confirms.pop(correlation_id, None)
        if confirm is not None:
            self._confirmed(confirm, _append_error(response))
            return
        write = self._writes.pop(correlation_id, None)
        if write is not None:
            self._written(write, _append_error(response))
        elif correlation_id in self._lookups:
            self._lookups.discard(correlation_id)
            if isinstance(response, MetadataResponse):
                self._route(response)
            else:
                self._arm_retry()
        else:
            markers = response if isinstance(response, WriteTxnMarkersResponse) else None
            self._markers_answered(correlation_id, markers)

    def _written(self, write: _Write, error: ErrorCode) -> None:
        outcome = self.core.complete_append(write.append, error, self.now)
        self._log_outcome(outcome, write.trace)
        if write.request is not None:
            self._answer(
                write.request,
                outcome.error,
                outcome.producer_id,
                outcome.producer_epoch,
                trace=write.trace,
            )
        if outcome.markers is not None:
            self._start_markers(outcome.markers)
        if outcome.retry:
            self._retry_writes.append(write.append)
            self._arm_retry()

    def _log_outcome(self, outcome: AppendOutcome, trace: TraceContext | None) -> None:
        transition = outcome.transition
        if transition is not None:
            self.log_event(
                "txn.transition",
                trace=trace,
                transactional_id=transition.transactional_id,
                producer_id=transition.producer_id,
                producer_epoch=transition.producer_epoch,
                from_state=transition.from_state.kafka_name,
                to_state=transition.to_state.kafka_name,
                partitions=transition.partitions,
            )
        completed = outcome.completed
        if completed is not None:
            self.log_event(
                "txn.completed",
                trace=trace,
                transactional_id=completed.transactional_id,
                producer_id=completed.producer_id,
                committed=completed.committed,
                cause=completed.cause,
                duration_ms=completed.duration_ms,
                partitions=completed.partitions,
            )

    @handles(OperationsExpired)
    def _on_expired(self, event: OperationsExpired) -> None:
        self.purgatory.expire_all(event.operation_ids, CompletedBy(EXPIRED))

    # -- housekeeping ----------------------------------------------------------------------------

    @handles(AbortTimedOutTransactions)
    def _on_abort_timed_out(self, _: AbortTimedOutTransactions) -> None:
        for append in self.core.abort_timed_out(self.now):
            self._write(append, None)

    @handles(ExpireTransactionalIds)
    def _on_expire_ids(self, _: ExpireTransactionalIds) -> None:
        for append in self.core.expire_transactional_ids(self.now):
            self._write(append, None)

    # -- leadership of __transaction_state -------------------------------------------------------

    @handles(TxnStatePartitionElected)
    def _on_elected(self, event: TxnStatePartitionElected) -> None:
        partition, epoch = event.partition, event.leader_epoch
        if epoch < self._epochs.get(partition, -1):
            return  # an older decision arrived late
        if partition in self.core.state.owned:
            # still ours: a newer epoch of the same leadership (an ISR change) is no election.
            # Kafka calls onElection only for a broker that was not the leader; reloading here
            # would answer NOT_COORDINATOR to a transition being written meanwhile.
            self._epochs[partition] = epoch
            return
        self._epochs[partition] = epoch
        self._drop_markers(partition)
        self.core.state.begin_loading(partition, epoch)
        started = time.monotonic()
        log = self.logs.get(str(TopicPartition(topic=TRANSACTION_STATE_TOPIC, partition=partition)))
        replay, error = load_partition(log)
        jobs = self.core.load(partition, epoch, replay.records, self.now)
        self.log_event(
            "txn.load",
            partition=partition,
            leader_epoch=epoch,
            transactional_ids=sum(
                1 for t in self.core.state.metadata if self.core.state.partition_for(t) == partition
            ),
            records=len(replay.records),
            skipped=replay.corrupt,
            duration_ms=int((time.monotonic() - started) * 1000),
            error=error,
        )
        for job in jobs:
            self._confirm_then_send(job)

    @handles(TxnStatePartitionResigned)
    def _on_resigned(self, event: TxnStatePartitionResigned) -> None:
        partition = event.partition
        if 0 <= event.leader_epoch < self._epochs.get(partition, -1):
            return
        if event.leader_epoch >= 0:
            self._epochs[partition] = event.leader_epoch
        else:  # the replica stopped (its topic may be made again, from epoch 0)
            self._epochs.pop(partition, None)
        state = self.core.state
        if partition not in state.owned and partition not in state.loading:
            return  # a follower of it all along: nothing to unload
        self._drop_markers(partition)
        gone = state.remove_partition(partition)
        self.log_event("txn.unload", partition=partition, transactional_ids=len(gone))

    def _drop_markers(self, partition: int) -> None:
        for tid in self.channel.remove_txn_partition(partition):
            operation = self._markers.pop(tid, None)
            if operation is not None:
                operation.force_complete(CompletedBy("resigned"))

    # -- lifecycle -------------------------------------------------------------------------------

    def on_stop(self) -> None:
        """The broker stops: waiting requests are answered NOT_COORDINATOR (the producer finds
        the new coordinator), the scheduler's tasks and the timer's retry are cancelled."""
        self.core.state.active = False
        for job in self._jobs:
            job.cancel()
        if self._retry_task is not None:
            self._retry_task.cancel()
        for write in self._writes.values():
            if write.request is not None:
                self._answer(write.request, ErrorCode.NOT_COORDINATOR, trace=write.trace)
        self._writes.clear()
        for operation in self.purgatory.pending():
            operation.cancel()
        self._markers.clear()
        super().on_stop()

    def describe(self) -> dict[str, Any]:
        return {
            "transactional_ids": len(self.core.state.metadata),
            "owned_partitions": sorted(self.core.state.owned),
            "txn_marker_delayed": self.purgatory.num_delayed,
        }


def _append_error(response: Response) -> ErrorCode:
    """The outcome of a `__transaction_state` append: its partition's code, or the failure's."""
    if isinstance(response, ProduceResponse) and response.partitions:
        return response.partitions[0].error_code
    error: ErrorCode = getattr(response, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return error
