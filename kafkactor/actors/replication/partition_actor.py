"""The actor of one partition replica: it alone writes the replica's log."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from kafkactor import tracing
from kafkactor.actors.controller import ZooKeeperSession, zk_data
from kafkactor.actors.replication.delayed_produce import (
    delay_produce,
    produce_result,
    produce_status,
)
from kafkactor.actors.replication.delete_records import (
    DeleteRecordsOnLeader,
    delete_records_on_leader,
    follow_leader_log_start,
)
from kafkactor.actors.replication.epoch_truncation import truncation_point
from kafkactor.actors.replication.high_watermarks import HighWatermarks
from kafkactor.actors.replication.partition import PartitionState, PendingIsrChange
from kafkactor.actors.replication.request_log import log_produce_response
from kafkactor.actors.replication.storage_failures import StorageFailure, log_storage_error
from kafkactor.actors.runtime import Directory, TracedActor, handles
from kafkactor.common import LogOffsetMetadata, PartitionLeaderState, TopicPartition
from kafkactor.kafka_uuid import uuid_from_string, uuid_to_string
from kafkactor.messages import ErrorCode, ErrorResponse, Request
from kafkactor.messages.config import UpdateLogConfig
from kafkactor.messages.offsets import (
    EpochEndOffset,
)
from kafkactor.messages.partition import (
    AppendAsFollower,
    AppendRecords,
    AppendResult,
    AppendTxnMarker,
    BecomeLeaderOrFollower,
    FollowerAppended,
    FollowerFetchPosition,
    FollowerTruncated,
    MaybeShrinkIsr,
    PartitionStateApplied,
    StopPartition,
    TruncateFollower,
)
from kafkactor.messages.replication import (
    DescribePartition,
    HighWatermarkAdvanced,
    LeadershipChanged,
    LogEndOffsetAdvanced,
    LowWatermarkAdvanced,
    PartitionDescription,
    PartitionSnapshot,
    ProduceRecordError,
    ProduceResponse,
)
from kafkactor.storage import (
    AppendOrigin,
    CorruptRecordError,
    InvalidAppendOffsetError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    Log,
    LogClosedError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
    RecordValidationError,
    StorageError,
    UnknownProducerIdError,
    UnsupportedCompressionError,
    build_control_batch,
)
from kafkactor.storage.errors import InvalidTxnStateError, TransactionCoordinatorFencedError
from kafkactor.timer import Clock

_log = tracing.get_logger("kafkactor.partition")


def storage_error_code(error: Exception) -> ErrorCode:  # noqa: PLR0911 - one flat mapping
    """The Kafka error code a producer or follower sees for a failed append."""
    if isinstance(error, RecordTooLargeError):
        return ErrorCode.MESSAGE_TOO_LARGE
    if isinstance(error, InvalidRecordError):
        return ErrorCode.INVALID_RECORD
    if isinstance(error, InvalidTimestampError):
        return ErrorCode.INVALID_TIMESTAMP
    if isinstance(error, CorruptRecordError | UnsupportedCompressionError | ValueError):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(error, LogClosedError):
        return ErrorCode.NOT_LEADER_FOR_PARTITION
    if isinstance(error, InvalidAppendOffsetError):
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if isinstance(error, UnknownProducerIdError):  # before its base class
        return ErrorCode.UNKNOWN_PRODUCER_ID
    if isinstance(error, OutOfOrderSequenceError):
        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    if isinstance(error, InvalidProducerEpochError):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if isinstance(error, TransactionCoordinatorFencedError):  # a marker of an older coordinator
        return ErrorCode.TRANSACTION_COORDINATOR_FENCED
    if isinstance(error, InvalidTxnStateError):  # a plain batch inside the producer's open txn
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.KAFKA_STORAGE_ERROR


class PartitionActor(TracedActor):
    """Kafka's `Partition` for one replica on one broker, as an actor that owns its `Log`.

    As leader it appends producer batches (refusing acks=-1 when the ISR is smaller than
    `min.insync.replicas`), learns each follower's log end from its fetches, advances the high
    watermark and shrinks or expands the ISR (`PartitionState` decides). As follower it appends
    what its fetcher brings and follows the leader's HW. After every change it publishes an
    immutable snapshot (`LogEndOffsetAdvanced`, `HighWatermarkAdvanced`, `LeadershipChanged`)
    to its broker's produce and fetch purgatories, before it answers the request that caused
    the change, so whoever acts on the answer finds the purgatories already up to date.

    Followers publish only leadership changes: nothing waits in a purgatory for a partition
    its broker does not lead. Reads do not pass through this actor: a `Log` is thread-safe, and
    the fetch purgatory reads it directly, as Kafka's request handler threads do.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        clock: Clock,
        broker: int,
        *,
        log: Log,
        state: PartitionState,
        produce_purgatory: str,
        fetch_purgatory: str,
        high_watermarks: HighWatermarks | None = None,
        zk: ZooKeeperSession | None = None,
        delete_records_purgatory: str = "",
        is_alive: Callable[[int], bool] | None = None,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.zk = zk  # the broker's ZooKeeper session; None: no ZooKeeper
        self.log = log
        self.state = state
        self.tp = TopicPartition.of(state)
        self.key = str(self.tp)
        self.produce_purgatory = produce_purgatory
        self.fetch_purgatory = fetch_purgatory
        self.high_watermarks = high_watermarks
        self._hw_position: LogOffsetMetadata | None = None
        self._stopped = False
        self._still_known = False  # when stopped: the broker's metadata still names it
        # the DeleteRecords purgatory hears of low watermark moves (KIP-107); a broker is
        # alive when the metadata cache says so (Kafka's lowWatermarkIfLeader)
        self.delete_records_purgatory = delete_records_purgatory
        self.is_alive: Callable[[int], bool] = is_alive or (lambda _broker: True)
        self._low_watermark = -1
        self._lso_position: LogOffsetMetadata | None = None
        if high_watermarks is not None:
            high_watermarks.update(self.tp, state.high_watermark)
        with contextlib.suppress(StorageError):  # the producer state learns where the HW is
            log.on_high_watermark(state.high_watermark)

    # -- leader: appends and follower positions -----------------------------------------------

    @handles(AppendRecords)
    def _on_append(self, request: AppendRecords) -> None:
        origin = AppendOrigin.COORDINATOR if request.from_coordinator else AppendOrigin.CLIENT
        self._appended(
            request, self._append_as_leader(request, request.records, request.acks, origin)
        )

    @handles(AppendTxnMarker)
    def _on_append_txn_marker(self, request: AppendTxnMarker) -> None:
        """A transaction's COMMIT or ABORT marker (WriteTxnMarkers): appended as Kafka's
        coordinator-origin, acks=-1 append of one control batch; the replica manager waits for
        the ISR. The last stable offset moves once the HW passes it."""
        marker = build_control_batch(
            committed=request.committed,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            coordinator_epoch=request.coordinator_epoch,
            timestamp_ms=self.clock.now_ms(),
            leader_epoch=max(0, self.state.leader_epoch),
        )
        result = self._append_as_leader(request, marker, -1, AppendOrigin.COORDINATOR)
        if result.error_code is ErrorCode.NONE:
            self.log_event(
                "partition.marker_appended",
                topic=self.state.topic,
                partition=self.state.partition,
                producer_id=request.producer_id,
                committed=request.committed,
                offset=result.first_offset,
                coordinator_epoch=request.coordinator_epoch,
            )
        self.reply(request, result)

    def _append_as_leader(
        self,
        request: AppendRecords | AppendTxnMarker,
        records: bytes,
        acks: int,
        origin: AppendOrigin,
    ) -> AppendResult:
        """Append as leader, publish the snapshots, and say what was appended (or refused)."""
        state = self.state
        error = ErrorCode.NOT_LEADER_FOR_PARTITION
        if not self._stopped:
            error = state.append_error(acks)
        if error is not ErrorCode.NONE:
            return self._append_failed(request, error, "")
        previous_log_end = self.log.log_end_offset
        try:
            info = self.log.append_as_leader(records, state.leader_epoch, origin=origin)
        except OSError as failure:  # a file it could not open or write: nothing acknowledged
            why = self._storage_failed("append", failure)
            return self._append_failed(request, ErrorCode.KAFKA_STORAGE_ERROR, why)
        except (StorageError, ValueError) as failure:
            return self._append_failed(request, storage_error_code(failure), str(failure), failure)
        log_end = info.last_offset + 1
        hw_moved = state.maybe_increment_high_watermark(log_end)
        self._publish(LogEndOffsetAdvanced, hw_moved=hw_moved)
        if tracing.is_enabled():
            self.log_event(
                "partition.append",
                topic=state.topic,
                partition=state.partition,
                first_offset=info.first_offset,
                last_offset=info.last_offset,
                records=info.record_count,
                bytes=info.size_in_bytes,
                log_end_offset=log_end,
                high_watermark=state.high_watermark,
            )
            self._log_leo_advance("leader", previous_log_end, log_end)
        return AppendResult(
            topic=state.topic,
            partition=state.partition,
            first_offset=info.first_offset,
            last_offset=info.last_offset,
            log_start_offset=self.log.log_start_offset,
            log_append_time_ms=info.log_append_time,
        )

    def _appended(self, request: AppendRecords, result: AppendResult) -> None:
        """Answer the append: to the replica manager, or (`answers_producer`) finish the
        producer's request as the replica manager would have, one hop sooner. The snapshots
        are published already, so the produce purgatory sees them before the operation."""
        if not request.answers_producer:
            self.reply(request, result)
            return
        status = produce_status(request.topic, request.partition, result)
        if status.error_code is ErrorCode.NONE and request.acks == -1:
            self.send(
                self.produce_purgatory,
                delay_produce(
                    request.reply_to,
                    request.correlation_id,
                    (status,),
                    received_ms=request.received_ms,
                    timeout_ms=request.timeout_ms,
                ),
            )
            return
        results = [produce_result(status)]
        log_produce_response(
            self,
            acks=request.acks,
            correlation_id=request.correlation_id,
            results=results,
            received_ms=request.received_ms,
            waited=False,
        )
        self.reply(request, ProduceResponse(partitions=tuple(results)))

    def _log_leo_advance(self, role: str, previous: int, log_end: int) -> None:
        if log_end > previous:
            self.log_event(
                "partition.leo_advance",
                topic=self.state.topic,
                partition=self.state.partition,
                role=role,
                log_end_offset=log_end,
                previous_log_end_offset=previous,
            )

    def _append_failed(
        self,
        request: AppendRecords | AppendTxnMarker,
        error: ErrorCode,
        reason: str,
        failure: Exception | None = None,
    ) -> AppendResult:
        """The answer of a refused append; a refusal by Kafka's LogValidator names the refused
        records (KIP-467's record errors) and carries its message for the producer."""
        if tracing.is_enabled():
            self.log_event(
                "partition.append_failed",
                topic=self.state.topic,
                partition=self.state.partition,
                error_code=int(error),
                error=error.name,
                reason=reason,
            )
        if isinstance(failure, RecordValidationError):
            return AppendResult(
                topic=request.topic,
                partition=request.partition,
                error_code=error,
                message=reason,
                log_start_offset=self.log.log_start_offset,
                record_errors=tuple(
                    ProduceRecordError(batch_index=e.batch_index, message=e.message)
                    for e in failure.record_errors
                ),
                error_message=failure.message,
            )
        return AppendResult(
            topic=request.topic, partition=request.partition, error_code=error, message=reason
        )

    @handles(FollowerFetchPosition)
    def _on_follower_position(self, event: FollowerFetchPosition) -> None:
        state = self.state
        if self._stopped or not state.is_leader:
            return
        isr_before = state.isr
        hw_before = state.high_watermark
        if event.caught_up_ms >= 0:  # fetches the replica manager did not pass on
            state.follower_caught_up(event.replica_id, event.caught_up_offset, event.caught_up_ms)
        outcome = state.update_follower(
            event.replica_id,
            event.fetch_offset,
            self.log.log_end_offset,
            self.clock.now_ms(),
            event.log_start_offset,
        )
        self._publish_low_watermark()
        change = outcome.isr_change
        changed = change is not None and self._apply_isr_change(change)
        if changed and change is not None and change.is_shrink:  # it lost acknowledged records
            self._log_isr_change(change, isr_before)
            self._publish(HighWatermarkAdvanced, hw_moved=False)
            return
        if changed and change is not None:
            state.maybe_increment_high_watermark(self.log.log_end_offset)
            self._log_isr_change(change, isr_before)
        hw_moved = state.high_watermark != hw_before
        if hw_moved or changed:
            self._publish(HighWatermarkAdvanced, hw_moved=hw_moved)

    @handles(MaybeShrinkIsr)
    def _on_maybe_shrink_isr(self, event: MaybeShrinkIsr) -> None:
        state = self.state
        if self._stopped or not state.is_leader:
            return
        for replica, offset, at_ms in event.caught_up:  # fetches not passed on
            state.follower_caught_up(replica, offset, at_ms)
        isr_before = state.isr
        hw_before = state.high_watermark
        change = state.maybe_shrink_isr(self.clock.now_ms())
        if change is None or not self._apply_isr_change(change):
            return
        state.maybe_increment_high_watermark(self.log.log_end_offset)
        self._log_isr_change(change, isr_before)
        self._publish(HighWatermarkAdvanced, hw_moved=state.high_watermark != hw_before)

    @handles(UpdateLogConfig)
    def _on_update_log_config(self, update: UpdateLogConfig) -> None:
        """A dynamic topic config (Kafka's Log.updateConfig): the log reads the new config
        from its next append, roll or retention check; acks=-1 appends and waiting produces
        follow its `min.insync.replicas` from now on."""
        config = zk_data.log_config_from(dict(update.config))
        self.state.min_insync_replicas = config.min_insync_replicas
        self.log.update_config(config)
        if not self._stopped and self.state.is_leader:  # waiting produces check again
            self._publish(HighWatermarkAdvanced, hw_moved=False, to_produce=True)

    def _log_isr_change(self, change: PendingIsrChange, isr_before: tuple[int, ...]) -> None:
        """`partition.isr_shrink` / `partition.isr_expand` for a committed change."""
        if not tracing.is_enabled():
            return
        state = self.state
        where: dict[str, Any] = {
            "topic": state.topic,
            "partition": state.partition,
            "isr_before": list(isr_before),
            "isr": list(state.isr),
            "high_watermark": state.high_watermark,
        }
        if not change.is_shrink:
            self.log_event("partition.isr_expand", replica=change.added[0], **where)
        elif change.reason:
            self.log_event(
                "partition.isr_shrink", removed=list(change.removed), reason=change.reason, **where
            )
        else:
            self.log_event("partition.isr_shrink", removed=list(change.removed), **where)

    # -- follower: appends from the fetcher ----------------------------------------------------

    @handles(AppendAsFollower)
    def _on_append_as_follower(self, request: AppendAsFollower) -> None:
        state = self.state
        if self._stopped or not state.follows_epoch(request.leader_epoch):
            self.reply(
                request,
                FollowerAppended(
                    topic=state.topic,
                    partition=state.partition,
                    error_code=ErrorCode.NOT_LEADER_FOR_PARTITION,
                    message=self._not_following(request.leader_epoch),
                    log_end_offset=self.log.log_end_offset,
                    latest_epoch=self.log.latest_epoch,
                ),
            )
            return
        error, reason = ErrorCode.NONE, ""
        previous_log_end = self.log.log_end_offset
        try:
            if request.records:
                self.log.append_as_follower(request.records)
        except OSError as failure:
            error = ErrorCode.KAFKA_STORAGE_ERROR
            reason = self._storage_failed("follower_append", failure)
        except (StorageError, ValueError) as failure:
            error, reason = storage_error_code(failure), str(failure)
        log_end = self.log.log_end_offset
        if state.update_follower_high_watermark(request.leader_high_watermark, log_end):
            self._hw_position = None
            self._lso_position = None
            self._record_high_watermark()
        with contextlib.suppress(StorageError):  # the next fetch answer says it again
            follow_leader_log_start(state, self.log, request.leader_log_start_offset)
        if tracing.is_enabled() and request.records and error is ErrorCode.NONE:
            self.log_event(
                "partition.follower_append",
                topic=state.topic,
                partition=state.partition,
                log_end_offset=log_end,
                high_watermark=state.high_watermark,
                bytes=len(request.records),
            )
            self._log_leo_advance("follower", previous_log_end, log_end)
        self.reply(
            request,
            FollowerAppended(
                topic=state.topic,
                partition=state.partition,
                error_code=error,
                message=reason,
                log_end_offset=log_end,
                latest_epoch=self.log.latest_epoch,
                log_start_offset=self.log.log_start_offset,
            ),
        )

    def _not_following(self, leader_epoch: int) -> str:
        state = self.state
        return (
            f"not following leader epoch {leader_epoch} (leader {state.leader}, epoch "
            f"{state.leader_epoch}, following since epoch {state.follow_start_epoch})"
        )

    @handles(TruncateFollower)
    def _on_truncate_follower(self, request: TruncateFollower) -> None:
        """One truncation step of a follower that starts following a leader (KIP-101/279),
        or the restart of a follower that fell behind the leader's log start."""
        state = self.state
        completed = True
        error, reason = ErrorCode.NONE, ""
        if self._stopped or not state.follows_epoch(request.leader_epoch):
            error, reason = (
                ErrorCode.NOT_LEADER_FOR_PARTITION,
                self._not_following(request.leader_epoch),
            )
        else:
            try:
                if request.start_at >= 0:
                    self._truncate_fully_and_start_at(request.start_at)
                elif request.epoch_end is not None:
                    completed = self._truncate_to_epoch_end(request.epoch_end)
            except OSError as failure:
                error = ErrorCode.KAFKA_STORAGE_ERROR
                reason = self._storage_failed("truncate", failure)
            except StorageError as failure:
                error, reason = storage_error_code(failure), str(failure)
        self.reply(
            request,
            FollowerTruncated(
                topic=state.topic,
                partition=state.partition,
                error_code=error,
                message=reason,
                log_end_offset=self.log.log_end_offset,
                latest_epoch=self.log.latest_epoch,
                completed=completed,
                log_start_offset=self.log.log_start_offset,
            ),
        )

    def _truncate_to_epoch_end(self, answer: EpochEndOffset) -> bool:
        latest_before = self.log.latest_epoch
        point = truncation_point(
            answer.leader_epoch,
            answer.end_offset,
            follower_end_offset_for=self.log.end_offset_for_epoch,
            log_end_offset=self.log.log_end_offset,
            high_watermark=self.state.high_watermark,
        )
        self._truncate(point.offset, reason=point.reason)
        self.log_event(
            "partition.epoch_truncation",
            topic=self.state.topic,
            partition=self.state.partition,
            leader=self.state.leader,
            asked_epoch=latest_before,
            answered_epoch=answer.leader_epoch,
            answered_end_offset=answer.end_offset,
            offset=point.offset,
            log_end_offset=self.log.log_end_offset,
            finished=point.completed,
            reason=point.reason,
        )
        # Each incomplete round must remove an epoch; if the cut removed none (the epoch began
        # at the log end and covers no records), there is nothing left to find.
        return point.completed or self.log.latest_epoch >= latest_before

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        before = self.log.log_end_offset
        self.log.truncate_fully_and_start_at(offset)
        self.state.high_watermark = offset
        self._hw_position = None
        self._lso_position = None
        self._record_high_watermark()
        self.log_event(
            "partition.truncate",
            topic=self.state.topic,
            partition=self.state.partition,
            offset=offset,
            log_end_before=before,
            log_end_offset=self.log.log_end_offset,
            reason="fetch offset below the leader's log start: start over there",
        )

    def _truncate(self, offset: int, *, reason: str) -> None:
        before = self.log.log_end_offset
        if self.log.truncate_to(offset):
            self.log_event(
                "partition.truncate",
                topic=self.state.topic,
                partition=self.state.partition,
                offset=offset,
                log_end_before=before,
                log_end_offset=self.log.log_end_offset,
                reason=reason,
            )
        if self.state.high_watermark > self.log.log_end_offset:
            self.state.high_watermark = self.log.log_end_offset
            self._record_high_watermark()
        self._hw_position = None
        self._lso_position = None

    # -- controller decisions ------------------------------------------------------------------

    @handles(BecomeLeaderOrFollower)
    def _on_become(self, request: BecomeLeaderOrFollower) -> None:
        state = self.state
        decision = request.state
        if request.topic_id:  # KIP-516: checked before the epochs, as Kafka 2.8 does
            try:
                consistent = self._check_or_set_topic_id(request.topic_id)
            except OSError as failure:  # partition.metadata not written: KafkaStorageException
                why = self._storage_failed("become", failure)
                self.reply(request, self._applied(ErrorCode.KAFKA_STORAGE_ERROR, message=why))
                return
            if not consistent:
                self.reply(request, self._applied(ErrorCode.INCONSISTENT_TOPIC_ID))
                return
        if not state.accepts(decision):
            self.reply(request, self._applied(ErrorCode.STALE_CONTROLLER_EPOCH))
            return
        self._stopped = False
        was_leader = state.is_leader
        truncate = False
        if decision.leader == self.broker:
            # the new epoch starts at the log end now, so a follower asking for its end learns
            # where this leader's log took over (Kafka 2.1+); first, so a leader-epoch file
            # that cannot be written leaves the replica as it was
            try:
                self.log.assign_leader_epoch(decision.leader_epoch)
            except OSError as failure:
                why = self._storage_failed("become", failure)
                self.reply(request, self._applied(ErrorCode.KAFKA_STORAGE_ERROR, message=why))
                return
            state.make_leader(decision, self.clock.now_ms(), self.log.log_end_offset)
            event = "partition.become_leader"
        else:
            # No truncation here: a follower of a new leader asks it where its epochs end
            # (OffsetsForLeaderEpoch) before fetching; the same leader in a newer epoch (an
            # ISR change) leaves the log alone.
            truncate = state.make_follower(decision, self.log.log_end_offset)
            event = "partition.become_follower"
        self._hw_position = None
        self._lso_position = None
        self._record_high_watermark()
        self.log_event(
            event,
            topic=state.topic,
            partition=state.partition,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            controller_epoch=state.controller_epoch,
            isr=list(state.isr),
            replicas=list(state.assigned_replicas),
            was_leader=was_leader,
            log_end_offset=self.log.log_end_offset,
            high_watermark=state.high_watermark,
        )
        self._publish(LeadershipChanged, hw_moved=True, to_produce=True)
        self.reply(request, self._applied(ErrorCode.NONE, truncate=truncate))

    def _storage_failed(self, operation: str, error: OSError) -> str:
        """An error event: the log's files failed `operation` (EMFILE, ENOSPC, ...); the
        request is answered KAFKA_STORAGE_ERROR and the actor goes on. Returns why, in a
        line (`EMFILE (Too many open files): <file>`)."""
        failure = StorageFailure.of(error)
        log_storage_error(
            self,
            "partition.storage_error",
            topic=self.state.topic,
            partition=self.state.partition,
            failure=failure,
            operation=operation,
        )
        return failure.describe()

    def _handler_failed(self, payload: Any, error: Exception) -> None:
        """An OSError no handler expected (a file of the log that could not be opened while
        answering) is Kafka's KafkaStorageException too: the request is answered
        KAFKA_STORAGE_ERROR, with the event naming its type, rather than UNKNOWN_SERVER_ERROR."""
        if isinstance(error, OSError) and isinstance(payload, Request) and payload.reply_to:
            why = self._storage_failed(type(payload).__name__, error)
            self.reply(
                payload, ErrorResponse(error_code=ErrorCode.KAFKA_STORAGE_ERROR, message=why)
            )
            return
        super()._handler_failed(payload, error)

    def _check_or_set_topic_id(self, topic_id: str) -> bool:
        """Kafka 2.8's `checkOrSetTopicId`: the log's directory records `topic_id` (written now
        if it recorded none), or another topic's (a stale log of a deleted topic of this name:
        refused, the log left as it is, with an event)."""
        if self.log.check_or_set_topic_id(uuid_from_string(topic_id)):
            return True
        recorded = self.log.topic_id
        context = self.trace_context
        _log.error(
            "partition.inconsistent_topic_id",
            actor=self.address,
            broker=self.broker,
            trace_id=context.trace_id if context is not None else "",
            parent_span_id=context.parent_span_id if context is not None else "",
            topic=self.state.topic,
            partition=self.state.partition,
            log_topic_id=uuid_to_string(recorded) if recorded is not None else "",
            request_topic_id=topic_id,
            dir=str(self.log.dir),
        )
        return False

    def _applied(
        self, error: ErrorCode, *, truncate: bool = False, message: str = ""
    ) -> PartitionStateApplied:
        return PartitionStateApplied(
            message=message,
            topic=self.state.topic,
            partition=self.state.partition,
            error_code=error,
            is_leader=self.state.is_leader,
            log_end_offset=self.log.log_end_offset,
            high_watermark=self.state.high_watermark,
            truncate=truncate,
            latest_epoch=self.log.latest_epoch,
        )

    @handles(StopPartition)
    def _on_stop_partition(self, request: StopPartition) -> None:
        self.state.stop()
        self._stopped = True
        self._still_known = request.still_known
        self.log_event(
            "partition.stopped",
            topic=self.state.topic,
            partition=self.state.partition,
            delete=request.delete,
        )
        self._publish(LeadershipChanged, hw_moved=True, to_produce=True, exists=False)
        self.reply(request, self._applied(ErrorCode.NONE))

    @handles(DescribePartition)
    def _on_describe(self, request: DescribePartition) -> None:
        state = self.state
        self.reply(
            request,
            PartitionDescription(
                topic=state.topic,
                partition=state.partition,
                broker=self.broker if self.broker is not None else -1,
                is_leader=state.is_leader and not self._stopped,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                replicas=state.assigned_replicas,
                log_start_offset=self.log.log_start_offset,
                log_end_offset=self.log.log_end_offset,
                high_watermark=state.high_watermark,
                follower_log_end_offsets=tuple(sorted(state.follower_log_end_offsets().items())),
                last_stable_offset=self.log.last_stable_offset(state.high_watermark),
            ),
        )

    # -- ISR changes in ZooKeeper ---------------------------------------------------------------

    def _apply_isr_change(self, change: PendingIsrChange) -> bool:
        """Write a change the partition state decided, then commit it (or abort it when the
        write failed). Without ZooKeeper the change takes effect at once."""
        if self.zk is None:
            return self.state.commit_isr_change(change, self.state.zk_version)
        zk_version = self._write_isr(change.isr)
        if zk_version is None:
            self.state.abort_isr_change(change)
            return False
        return self.state.commit_isr_change(change, zk_version)

    def _write_isr(self, isr: tuple[int, ...]) -> int | None:
        """Kafka's Partition.updateIsr: a versioned set of the state znode, then a notification.
        Returns the znode's new version, or None when the write failed.

        A version conflict (the controller changed the partition meanwhile) leaves the ISR as
        it was; the controller's next LeaderAndIsr brings the new state.
        """
        state = self.state
        assert self.zk is not None  # only called with a session
        client = self.zk.client
        path = zk_data.partition_state_path(state.topic, state.partition)
        data = zk_data.encode_partition_state(
            PartitionLeaderState(
                topic=state.topic,
                partition=state.partition,
                controller_epoch=state.controller_epoch,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=isr,
            )
        )
        try:
            stat = client.set(path, data, version=state.zk_version)
        except (BadVersionError, NoNodeError) as error:
            self.log_event(
                "partition.isr_update_failed",
                topic=state.topic,
                partition=state.partition,
                isr=list(isr),
                zk_version=state.zk_version,
                error=type(error).__name__,
            )
            return None
        except Exception as error:  # ZooKeeper unreachable or session gone
            self.log_event(
                "partition.isr_update_failed",
                topic=state.topic,
                partition=state.partition,
                isr=list(isr),
                error=repr(error),
            )
            return None
        with contextlib.suppress(Exception):  # the ISR is written; the notice is best effort
            client.create(
                f"{zk_data.ISR_CHANGE_NOTIFICATION}/{zk_data.ISR_CHANGE_PREFIX}",
                zk_data.encode_isr_change([self.tp]),
                sequence=True,
                makepath=True,
            )
        return int(stat.version)

    # -- snapshots -------------------------------------------------------------------------------

    def snapshot(
        self, kind: type[PartitionSnapshot] = PartitionSnapshot, *, exists: bool = True
    ) -> PartitionSnapshot:
        state = self.state
        log_end = self.log.log_end_offset_metadata
        hw_position = self._hw_position
        if hw_position is None or hw_position.offset != state.high_watermark:
            if state.high_watermark >= log_end.offset:
                hw_position = log_end
            else:
                hw_position = self.log.offset_metadata(state.high_watermark)
            self._hw_position = hw_position
        return kind(
            last_stable_offset=self._last_stable_offset(hw_position),
            key=self.key,
            topic=state.topic,
            partition=state.partition,
            exists=exists and not self._stopped,
            still_known=self._still_known,
            is_leader=state.is_leader and not self._stopped,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            min_insync_replicas=state.min_insync_replicas,
            log_start_offset=self.log.log_start_offset,
            high_watermark=hw_position,
            log_end=log_end,
        )

    def _last_stable_offset(self, hw_position: LogOffsetMetadata) -> LogOffsetMetadata:
        """Kafka's LSO with its position: the HW's unless a transaction is open below it."""
        lso = self.log.last_stable_offset(hw_position.offset)
        if lso >= hw_position.offset:
            return hw_position
        cached = self._lso_position
        if cached is None or cached.offset != lso:
            try:
                cached = self.log.offset_metadata(lso)
            except StorageError:  # below the log start: a segment no fetch compares with
                cached = LogOffsetMetadata(offset=lso, segment_base_offset=-1, position=0)
            self._lso_position = cached
        return cached

    def _publish(
        self,
        kind: type[PartitionSnapshot],
        *,
        hw_moved: bool,
        to_produce: bool = False,
        exists: bool = True,
    ) -> None:
        """Tell the purgatories: the fetch one always, the produce one when HW/ISR moved."""
        state = self.state
        if hw_moved:
            self._record_high_watermark()
            if tracing.is_enabled() and kind is not LeadershipChanged:
                self.log_event(
                    "partition.hw_advance",
                    topic=state.topic,
                    partition=state.partition,
                    high_watermark=state.high_watermark,
                    log_end_offset=self.log.log_end_offset,
                    follower_log_end_offsets={
                        str(r): leo for r, leo in state.follower_log_end_offsets().items()
                    },
                )
        if not state.is_leader and kind is not LeadershipChanged:
            return
        if hw_moved and kind is LogEndOffsetAdvanced:
            kind = HighWatermarkAdvanced  # one snapshot says both
        snapshot = self.snapshot(kind, exists=exists)
        self.send(self.fetch_purgatory, snapshot)
        if to_produce or kind is not LogEndOffsetAdvanced:
            self.send(self.produce_purgatory, snapshot)
        if kind is LeadershipChanged:
            self._publish_low_watermark(snapshot)

    # -- DeleteRecords (KIP-107) -----------------------------------------------------------------

    @handles(DeleteRecordsOnLeader)
    def _on_delete_records(self, request: DeleteRecordsOnLeader) -> None:
        """Kafka's `Partition.deleteRecordsOnLeader`: move the log start, then tell the
        DeleteRecords purgatory the low watermark before answering (the replica manager then
        hands it the operation that waits for it)."""
        result = delete_records_on_leader(self.state, self.log, request.offset, self.is_alive)
        if result.error_code is ErrorCode.NONE:  # fetches answer the new log start from now on
            self.send(self.fetch_purgatory, self.snapshot(LowWatermarkAdvanced))
        self._publish_low_watermark()
        self.reply(request, result)

    def _publish_low_watermark(self, snapshot: PartitionSnapshot | None = None) -> None:
        """Send the DeleteRecords purgatory a snapshot when the low watermark moved (or
        `snapshot`, a leadership change, with it)."""
        if not self.delete_records_purgatory:
            return
        state = self.state
        low = state.low_watermark(self.log.log_start_offset, self.is_alive)
        if snapshot is None and (low == self._low_watermark or self._stopped):
            return
        self._low_watermark = low
        base = snapshot if snapshot is not None else self.snapshot(LowWatermarkAdvanced)
        self.send(self.delete_records_purgatory, dataclasses.replace(base, low_watermark=low))

    def _record_high_watermark(self) -> None:
        """The HW moved: the checkpoint book and the log's producer state (Kafka's
        `Log.updateHighWatermark`: transactions whose markers the HW passed are stable now,
        on a follower as on the leader) learn it."""
        if self.high_watermarks is not None:
            self.high_watermarks.update(self.tp, self.state.high_watermark)
        with contextlib.suppress(StorageError):  # a closed log: no reader is left to mind
            self.log.on_high_watermark(self.state.high_watermark)
