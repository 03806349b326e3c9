"""The transaction coordinator's marker sending (Kafka's `TransactionMarkerChannelManager` and
its "txn-marker" purgatory), as a base class of `TransactionCoordinatorActor`."""

from __future__ import annotations

from typing import Any, Final

from kafkactor.actors.purgatory import CompletedBy, Purgatory
from kafkactor.actors.purgatory.purgatory_actor import log_watched
from kafkactor.actors.runtime import Directory, addresses, handles
from kafkactor.actors.transaction.coordinator_messages import RetryTxnMarkers
from kafkactor.actors.transaction.delayed_txn_marker import DelayedTxnMarker
from kafkactor.actors.transaction.describe_handlers import DescribeHandlers
from kafkactor.actors.transaction.results import MarkerJob, TxnAppend
from kafkactor.actors.transaction.txn_marker_channel import TxnMarkerChannel
from kafkactor.common import TopicPartition
from kafkactor.messages import Request
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.messages.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kafkactor.timer import Timer, TimerTask

__all__ = ["RETRY_BACKOFF_MS", "TxnMarkerSender"]

RETRY_BACKOFF_MS: Final = 100  # how soon unwritten markers are asked again
MARKER_REQUEST_TIMEOUT_MS: Final = 30_000  # request.timeout.ms: a leader's answer to markers


class _Tell(TimerTask):
    """A task of the broker's shared timer that sends one message to an actor (the Reaper
    runs it inline)."""

    def __init__(self, delay_ms: int, directory: Directory, address: str, payload: Any) -> None:
        super().__init__(delay_ms)
        self.directory = directory
        self.address = address
        self.payload = payload

    def run(self) -> None:
        self.directory.tell(self.address, self.payload)


class TxnMarkerSender(DescribeHandlers):
    """Sends the markers of ended transactions and completes them (see
    `TransactionCoordinatorActor`): each `MarkerJob` is watched in the "txn-marker"
    purgatory as a `DelayedTxnMarker`, its partitions' leaders are asked of the local
    replica manager's metadata cache, each leader's replica manager gets one
    WriteTxnMarkersRequest, and what is not written (unknown leader, an error, no answer
    within `request.timeout.ms`) is asked again after `RETRY_BACKOFF_MS` on the broker's
    shared timer. When the last marker of a job is written, its DelayedTxnMarker completes
    and the completion (CompleteCommit / CompleteAbort) is written."""

    channel: TxnMarkerChannel
    purgatory: Purgatory
    timer: Timer
    replica_manager: str
    _markers: dict[str, DelayedTxnMarker]
    _lookups: set[int]
    _retry_task: _Tell | None
    _retry_writes: list[TxnAppend]
    _retry_confirms: list[MarkerJob]

    def _write(self, append: TxnAppend, request: Request | None) -> None:
        raise NotImplementedError

    def _confirm_then_send(self, job: MarkerJob) -> None:
        raise NotImplementedError

    def _next_id(self) -> int:
        raise NotImplementedError

    def _start_markers(self, job: MarkerJob) -> None:
        """Kafka's addTxnMarkersToSend: watch the transaction in "txn-marker", then send."""
        self.channel.add(job)
        operation = DelayedTxnMarker(
            job, pending=self.core.markers_pending, on_done=self._markers_done
        )
        operation.owner = self.address
        operation.trace = self.trace_context
        self._markers[job.transactional_id] = operation
        completed = self.purgatory.try_complete_else_watch(operation, (job.transactional_id,))
        log_watched(self.log_event, self.purgatory, operation, [job.transactional_id], completed)
        if not completed:
            self._look_up_leaders()

    def _markers_done(self, job: MarkerJob, written: bool) -> None:
        tid = job.transactional_id
        if self.channel.jobs.get(tid) is job:
            self.channel.remove(tid)
        if self._markers.get(tid) is not None and self._markers[tid].job is job:
            del self._markers[tid]
        if written:
            self._write(job.completion_append(), None)

    def _look_up_leaders(self) -> None:
        topics = self.channel.topics_to_look_up()
        if not topics:
            return
        correlation_id = self._next_id()
        self._lookups.add(correlation_id)
        request = MetadataRequest(
            reply_to=self.address, correlation_id=correlation_id, topics=topics
        )
        if not self.send(self.replica_manager, request):
            self._lookups.discard(correlation_id)

    def _route(self, metadata: MetadataResponse) -> None:
        sends, gone = self.channel.route(metadata, self.clock.now_ms())
        for tid, tp in gone:
            self._marker_written(tid, tp)
        for leader, (correlation_id, send) in sends.items():
            entries = self.channel.entries(send)
            for entry in entries:
                job = self._job_of(entry.producer_id)
                self.log_event(
                    "txn.marker.sent",
                    transactional_id=job.transactional_id if job else "",
                    producer_id=entry.producer_id,
                    committed=entry.committed,
                    leader=leader,
                    partitions=len(entry.partitions),
                )
            request = WriteTxnMarkersRequest(
                reply_to=self.address, correlation_id=correlation_id, markers=entries
            )
            if not self.send(addresses.replica_manager(leader), request):
                self._markers_answered(correlation_id, None)
        if self.channel.has_unsent or self.channel.sends:
            self._arm_retry()

    def _job_of(self, producer_id: int) -> MarkerJob | None:
        return next((j for j in self.channel.jobs.values() if j.producer_id == producer_id), None)

    def _markers_answered(
        self, correlation_id: int, response: WriteTxnMarkersResponse | None
    ) -> None:
        send, written, fenced = self.channel.on_response(correlation_id, response)
        if send is None:
            return
        for tid, partitions in written.items():
            job = self.channel.jobs.get(tid)
            self.log_event(
                "txn.marker.written",
                transactional_id=tid,
                producer_id=job.producer_id if job else -1,
                committed=job.committed if job else False,
                leader=send.leader,
                partitions=len(partitions),
            )
            for tp in partitions:
                self._marker_written(tid, tp)
        for tid in fenced:  # Kafka stops sending: a newer producer or coordinator took over
            operation = self._markers.pop(tid, None)
            self.channel.remove(tid)
            if operation is not None:
                operation.force_complete(CompletedBy("fenced"))
        if self.channel.has_unsent:
            self._arm_retry()

    def _marker_written(self, tid: str, partition: TopicPartition) -> None:
        job = self.channel.jobs.get(tid)
        if job is None:
            return
        self.core.marker_written(job, partition)
        if self.core.markers_pending(job) is not True:
            completed = self.purgatory.check_and_complete(tid, CompletedBy("markers_written"))
            if completed:
                self.log_event(
                    "purgatory.complete",
                    purgatory=self.purgatory.name,
                    key=tid,
                    completed=completed,
                    delayed=self.purgatory.num_delayed,
                    cause="markers_written",
                    completed_by="markers_written",
                )

    def _arm_retry(self) -> None:
        if self._retry_task is None:
            self._retry_task = _Tell(
                RETRY_BACKOFF_MS, self.directory, self.address, RetryTxnMarkers()
            )
            self.timer.add(self._retry_task)

    @handles(RetryTxnMarkers)
    def _on_retry(self, _: RetryTxnMarkers) -> None:
        self._retry_task = None
        for correlation_id in self.channel.stale_sends(
            self.clock.now_ms(), MARKER_REQUEST_TIMEOUT_MS
        ):
            self._markers_answered(correlation_id, None)  # the leader never answered
        writes, self._retry_writes = self._retry_writes, []
        for append in writes:
            self._write(append, None)
        confirms, self._retry_confirms = self._retry_confirms, []
        for job in confirms:
            self._confirm_then_send(job)
        self._look_up_leaders()
        if self.channel.sends:
            self._arm_retry()
