"""A follower broker's fetcher: the long-poll loop that copies a leader's logs."""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING

from kafkactor import tracing
from kafkactor.actors.replication.fetcher_state import FetcherState, PartitionFetchState
from kafkactor.actors.runtime import Directory, TraceContext, TracedActor, addresses, handles
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorResponse, Request
from kafkactor.messages.offsets import (
    EpochEndOffset,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.partition import (
    AppendAsFollower,
    FollowerAppended,
    FollowerTruncated,
    TruncateFollower,
)
from kafkactor.messages.replication import (
    AddFetcherPartitions,
    FetchAgain,
    FetchRequest,
    FetchResponse,
    FetchTimedOut,
    RemoveFetcherPartitions,
)
from kafkactor.timer import CallbackTask, Clock, Timer

if TYPE_CHECKING:
    from kafkactor.actors.replication.config import ReplicaManagerConfig

_FETCH = "fetch"
_EPOCHS = "epochs"


class ReplicaFetcherActor(TracedActor):
    """Kafka's `ReplicaFetcherThread` for one (follower broker, leader broker) pair.

    A partition that starts following this leader first finds where its log and the
    leader's agree: it asks the leader's replica manager for the end offset of its latest
    epoch (`OffsetsForLeaderEpochRequest`, api key 23) and has the local partition cut its log
    there (`TruncateFollower`), asking again for an earlier epoch when the leader named one the
    follower lacks (KIP-279). Then it fetches: one long-poll `FetchRequest` (replica id = this
    broker, `replica.fetch.wait.max.ms`, `replica.fetch.min.bytes`) for all its fetching
    partitions, each partition's batches (and the leader's HW) handed to the local
    `PartitionActor` as `AppendAsFollower`, the next fetch once every append is answered.
    What to send and how each answer moves a partition is decided by the pure
    `FetcherState`; this actor sends, times out and wakes up.

    Out of range: a follower ahead of the leader finds its truncation point again from the
    epochs; one behind the leader's log start empties its log and starts there. A partition
    whose fetch, truncation or append fails waits `replica.fetch.backoff.ms` on its own; a
    leader that cannot be reached or does not answer backs the whole fetcher off. Partitions
    removed (leadership moved) are dropped and answers about them ignored.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        clock: Clock,
        broker: int,
        *,
        leader: int,
        timer: Timer,
        config: ReplicaManagerConfig,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.broker_id = broker
        self.leader = leader
        self.leader_address = addresses.replica_manager(leader)
        self.timer = timer
        self.config = config
        self.state = FetcherState(backoff_ms=config.replica_fetch_backoff_ms)
        self._ids = itertools.count(1)
        self._in_flight: dict[int, str] = {}  # correlation id -> _FETCH or _EPOCHS
        self._deadlines: dict[int, CallbackTask] = {}
        self._wakeup: CallbackTask | None = None
        self._wakeup_at_ms = -1
        self.fetches = 0

    @property
    def partitions(self) -> dict[TopicPartition, PartitionFetchState]:
        return self.state.partitions

    def on_stop(self) -> None:
        for task in [*self._deadlines.values(), self._wakeup]:
            if task is not None:
                task.cancel()
        super().on_stop()

    # -- membership ------------------------------------------------------------------------------

    @handles(AddFetcherPartitions)
    def _on_add(self, request: AddFetcherPartitions) -> None:
        self.state.add(request.partitions)
        self._maybe_fetch()

    @handles(RemoveFetcherPartitions)
    def _on_remove(self, request: RemoveFetcherPartitions) -> None:
        self.state.remove(TopicPartition.of(p) for p in request.partitions)

    # -- the loop ----------------------------------------------------------------------------------

    def _maybe_fetch(self) -> None:
        kinds = self._in_flight.values()
        next_requests = self.state.next_requests(
            self.clock.now_ms(), epochs_out=_EPOCHS in kinds, fetch_out=_FETCH in kinds
        )
        if next_requests.ask_epochs:
            self._ask_epochs(next_requests.ask_epochs)
        if next_requests.fetch:
            self._fetch(next_requests.fetch)
        if next_requests.wake_at_ms is not None:
            self._wake_at(next_requests.wake_at_ms)

    def _send_to_leader(self, kind: str, request: Request) -> None:
        self._in_flight[request.correlation_id] = kind
        self.send(
            self.leader_address, request, trace=TraceContext(tracing.new_id(), "")
        )  # each fetch or epoch question is a trace of its own
        # Kafka's replica.socket.timeout.ms: an answer lost on the way must not stall the loop
        timed_out = FetchTimedOut(correlation_id=request.correlation_id)
        wait = self.config.replica_fetch_wait_max_ms if kind == _FETCH else 0
        deadline = CallbackTask(
            wait + self.config.replica_socket_timeout_ms,
            lambda: self.directory.tell(self.address, timed_out),
        )
        self._deadlines[request.correlation_id] = deadline
        self.timer.add(deadline)

    def _fetch(self, states: tuple[PartitionFetchState, ...]) -> None:
        self.fetches += 1
        max_bytes = self.config.replica_fetch_max_bytes
        self._send_to_leader(
            _FETCH,
            FetchRequest(
                reply_to=self.address,
                correlation_id=next(self._ids),
                replica_id=self.broker_id,
                max_wait_ms=self.config.replica_fetch_wait_max_ms,
                min_bytes=self.config.replica_fetch_min_bytes,
                partitions=tuple(s.fetch_partition(max_bytes) for s in states),
            ),
        )

    def _ask_epochs(self, asking: tuple[PartitionFetchState, ...]) -> None:
        correlation_id = next(self._ids)
        self.state.asking(correlation_id, asking)
        self._send_to_leader(
            _EPOCHS,
            OffsetsForLeaderEpochRequest(
                reply_to=self.address,
                correlation_id=correlation_id,
                replica_id=self.broker_id,
                partitions=tuple(
                    OffsetForLeaderPartition(
                        topic=s.topic,
                        partition=s.partition,
                        current_leader_epoch=s.leader_epoch,
                        leader_epoch=s.latest_epoch,
                    )
                    for s in asking
                ),
            ),
        )

    def _wake_at(self, at_ms: int) -> None:
        if self._wakeup is not None and self._wakeup_at_ms <= at_ms:
            return  # an earlier wake-up is set: it will look again
        if self._wakeup is not None:
            self._wakeup.cancel()

        def again() -> None:
            self.directory.tell(self.address, FetchAgain())

        self._wakeup_at_ms = at_ms
        self._wakeup = CallbackTask(max(0, at_ms - self.clock.now_ms()), again)
        self.timer.add(self._wakeup)

    @handles(FetchAgain)
    def _on_fetch_again(self, _event: FetchAgain) -> None:
        self._wakeup = None
        self._wakeup_at_ms = -1
        self._maybe_fetch()

    def _leader_failed(self, correlation_id: int) -> None:
        """The leader did not answer (unreachable, or no answer in time): the whole fetcher
        waits, and partitions that were asking about their epochs ask again later."""
        self._in_flight.pop(correlation_id, None)
        deadline = self._deadlines.pop(correlation_id, None)
        if deadline is not None:
            deadline.cancel()
        self.state.leader_failed(correlation_id, self.clock.now_ms())

    def _answered(self, correlation_id: int) -> bool:
        """Whether `correlation_id` is an outstanding request of this fetcher (now answered)."""
        if self._in_flight.pop(correlation_id, None) is None:
            return False
        deadline = self._deadlines.pop(correlation_id, None)
        if deadline is not None:
            deadline.cancel()
        return True

    @handles(FetchTimedOut)
    def _on_fetch_timed_out(self, event: FetchTimedOut) -> None:
        if event.correlation_id not in self._in_flight:
            return  # answered meanwhile
        self.log_event("fetcher.timeout", leader=self.leader, correlation_id=event.correlation_id)
        self._leader_failed(event.correlation_id)
        self._maybe_fetch()

    # -- answers from the leader -------------------------------------------------------------------

    @handles(FetchResponse)
    def _on_fetch_response(self, response: FetchResponse) -> None:
        if not self._answered(response.correlation_id):
            return
        now = self.clock.now_ms()
        for data in response.partitions:
            fetched = self.state.fetched(data, now)
            if fetched is None:
                continue
            if fetched.append:
                self._append(
                    fetched.state, data.records, data.high_watermark, data.log_start_offset
                )
            elif fetched.truncate_from is not None:
                self._truncate(fetched.state, start_at=fetched.truncate_from)
        self._maybe_fetch()

    @handles(OffsetsForLeaderEpochResponse)
    def _on_epochs(self, response: OffsetsForLeaderEpochResponse) -> None:
        if not self._answered(response.correlation_id):
            return  # timed out meanwhile: the partitions asked were released then
        answers = {TopicPartition.of(a): a for a in response.partitions}
        outcome = self.state.epochs_answered(response.correlation_id, answers, self.clock.now_ms())
        for state, error_code in outcome.errors:
            self.log_event(
                "fetcher.error",
                leader=self.leader,
                error_code=int(error_code),
                error=error_code.name,
                reason=f"OffsetsForLeaderEpoch for {state.topic_partition}",
            )
        for state, epoch_end in outcome.truncate:
            self._truncate(state, epoch_end=epoch_end)
        self._maybe_fetch()

    # -- local requests to the partitions ----------------------------------------------------------

    def _append(
        self, state: PartitionFetchState, records: bytes, high_watermark: int, log_start: int
    ) -> None:
        self._ask_partition(
            state,
            AppendAsFollower(
                topic=state.topic,
                partition=state.partition,
                records=records,
                leader_epoch=state.leader_epoch,
                leader_high_watermark=high_watermark,
                leader_log_start_offset=log_start,
            ),
        )

    def _truncate(
        self,
        state: PartitionFetchState,
        *,
        epoch_end: EpochEndOffset | None = None,
        start_at: int = -1,
    ) -> None:
        self._ask_partition(
            state,
            TruncateFollower(
                topic=state.topic,
                partition=state.partition,
                leader_epoch=state.leader_epoch,
                epoch_end=epoch_end,
                start_at=start_at,
            ),
        )

    def _ask_partition(
        self, state: PartitionFetchState, request: AppendAsFollower | TruncateFollower
    ) -> None:
        """Send a request to the local partition; the partition is busy until it answers."""
        correlation_id = next(self._ids)
        self.state.stepping(correlation_id, state)
        self.send(
            addresses.partition(self.broker_id, str(state.topic_partition)),
            dataclasses.replace(request, reply_to=self.address, correlation_id=correlation_id),
        )

    def _partition_answered(
        self, response: FollowerAppended | FollowerTruncated
    ) -> PartitionFetchState | None:
        """Where the local log now ends; the partition backs off if it failed. Returns the
        partition's state when the step succeeded and the partition is still current."""
        return self.state.step_answered(
            response.correlation_id,
            log_end_offset=response.log_end_offset,
            latest_epoch=response.latest_epoch,
            error_code=response.error_code,
            now_ms=self.clock.now_ms(),
            log_start_offset=response.log_start_offset,
        )

    @handles(FollowerAppended)
    def _on_appended(self, response: FollowerAppended) -> None:
        self._partition_answered(response)
        self._maybe_fetch()

    @handles(FollowerTruncated)
    def _on_truncated(self, response: FollowerTruncated) -> None:
        state = self._partition_answered(response)
        if state is not None:
            state.truncating = not response.completed
        self._maybe_fetch()

    @handles(ErrorResponse)
    def _on_error(self, response: ErrorResponse) -> None:
        """The leader (or a local partition) could not be reached or failed the request."""
        if response.correlation_id in self._in_flight:
            self.log_event(
                "fetcher.error",
                leader=self.leader,
                error_code=int(response.error_code),
                error=response.error_code.name,
                reason=response.message,
            )
            self._leader_failed(response.correlation_id)
        else:
            self.state.local_failed(response.correlation_id, self.clock.now_ms())
        self._maybe_fetch()
