"""A follower broker's fetcher: the long-poll loop that copies a leader's logs."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkactor import tracing
from kafkactor.actors.runtime import Directory, TraceContext, TracedActor, addresses, handles
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse, Request
from kafkactor.messages.replication import (
    UNDEFINED_EPOCH,
    AddFetcherPartitions,
    AppendAsFollower,
    EpochEndOffset,
    FetchAgain,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTimedOut,
    FollowerAppended,
    FollowerTruncated,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    RemoveFetcherPartitions,
    TruncateFollower,
)
from kafkactor.timer import CallbackTask, Clock, Timer

if TYPE_CHECKING:
    from kafkactor.actors.replication.config import ReplicaManagerConfig

_FETCH = "fetch"
_EPOCHS = "epochs"


@dataclass(slots=True)
class FetchState:
    """Where one follower partition stands (Kafka's PartitionFetchState).

    `truncating`: it follows a new leader and must find its truncation point
    (OffsetsForLeaderEpoch from `latest_epoch`) before it fetches. `busy`: a request about it
    is out (an epoch question, a truncation or an append). `retry_at_ms`: after an error it
    waits until then, on its own (Kafka's per-partition delay).
    """

    topic: str
    partition: int
    key: str  # `<topic>-<partition>`, its key in the fetcher's table
    fetch_offset: int
    leader_epoch: int
    high_watermark: int = -1
    truncating: bool = False
    latest_epoch: int = UNDEFINED_EPOCH
    busy: bool = False
    retry_at_ms: int = 0


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
        self.partitions: dict[str, FetchState] = {}
        self._ids = itertools.count(1)
        self._in_flight: dict[int, str] = {}  # correlation id -> _FETCH or _EPOCHS
        self._deadlines: dict[int, CallbackTask] = {}
        # what is out, by correlation id: an epoch question's partitions, a local truncation's
        # or append's partition (the state object: a partition re-added meanwhile is another)
        self._asked: dict[int, tuple[FetchState, ...]] = {}
        self._busy: dict[int, FetchState] = {}
        self._wakeup: CallbackTask | None = None
        self._wakeup_at_ms = -1
        self._backoff_until_ms = 0  # the whole fetcher (the leader did not answer)
        self.fetches = 0

    def on_stop(self) -> None:
        for task in [*self._deadlines.values(), self._wakeup]:
            if task is not None:
                task.cancel()
        super().on_stop()

    # -- membership ------------------------------------------------------------------------------

    @handles(AddFetcherPartitions)
    def _on_add(self, request: AddFetcherPartitions) -> None:
        for p in request.partitions:
            key = str(TopicPartition.of(p))
            current = self.partitions.get(key)
            if current is not None and not p.truncate:
                current.leader_epoch = p.leader_epoch  # same leader, newer epoch
                continue
            self.partitions[key] = FetchState(
                topic=p.topic,
                partition=p.partition,
                key=key,
                fetch_offset=p.fetch_offset,
                leader_epoch=p.leader_epoch,
                truncating=p.truncate,
                latest_epoch=p.latest_epoch,
            )
        self._maybe_fetch()

    @handles(RemoveFetcherPartitions)
    def _on_remove(self, request: RemoveFetcherPartitions) -> None:
        for p in request.partitions:
            self.partitions.pop(str(TopicPartition.of(p)), None)

    # -- the loop ----------------------------------------------------------------------------------

    def _maybe_fetch(self) -> None:
        now = self.clock.now_ms()
        if now < self._backoff_until_ms:
            self._wake_at(self._backoff_until_ms)
            return
        ready = [s for s in self.partitions.values() if not s.busy and s.retry_at_ms <= now]
        if _EPOCHS not in self._in_flight.values():
            asking = [s for s in ready if s.truncating]
            if asking:
                self._ask_epochs(asking)
        fetching = [s for s in ready if not s.truncating]
        if fetching and _FETCH not in self._in_flight.values() and not self._appending():
            self._fetch(fetching)
        waiting = [s.retry_at_ms for s in self.partitions.values() if s.retry_at_ms > now]
        if waiting:
            self._wake_at(min(waiting))

    def _appending(self) -> bool:
        return any(self._is_current(state) for state in self._busy.values())

    def _is_current(self, state: FetchState) -> bool:
        """Whether `state` is still this partition's state (not removed or replaced)."""
        return self.partitions.get(state.key) is state

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

    def _fetch(self, states: list[FetchState]) -> None:
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
                partitions=tuple(
                    FetchPartition(
                        topic=s.topic,
                        partition=s.partition,
                        fetch_offset=s.fetch_offset,
                        max_bytes=max_bytes,
                    )
                    for s in states
                ),
            ),
        )

    def _ask_epochs(self, asking: list[FetchState]) -> None:
        correlation_id = next(self._ids)
        for state in asking:
            state.busy = True
        self._asked[correlation_id] = tuple(asking)
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

    def _back_off(self, states: Iterable[FetchState]) -> None:
        """These partitions wait `replica.fetch.backoff.ms` before they are tried again."""
        retry_at = self.clock.now_ms() + self.config.replica_fetch_backoff_ms
        for state in states:
            state.retry_at_ms = retry_at

    def _leader_failed(self, correlation_id: int) -> None:
        """The leader did not answer (unreachable, or no answer in time): the whole fetcher
        waits, and partitions that were asking about their epochs ask again later."""
        self._in_flight.pop(correlation_id, None)
        deadline = self._deadlines.pop(correlation_id, None)
        if deadline is not None:
            deadline.cancel()
        for state in self._asked.pop(correlation_id, ()):
            state.busy = False
        self._backoff_until_ms = self.clock.now_ms() + self.config.replica_fetch_backoff_ms

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
        failed: list[FetchState] = []
        for data in response.partitions:
            key = str(TopicPartition.of(data))
            state = self.partitions.get(key)
            if state is None or state.truncating or state.busy:
                continue  # removed, or re-added for a new leader, while the fetch was out
            if data.error_code is ErrorCode.NONE:
                if data.records or data.high_watermark != state.high_watermark:
                    state.high_watermark = data.high_watermark
                    self._append(state, data.records, data.high_watermark)
            elif data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(state, data)
            else:
                failed.append(state)  # e.g. leadership moved: wait for the controller
        self._back_off(failed)
        self._maybe_fetch()

    def _out_of_range(self, state: FetchState, data: FetchPartitionData) -> None:
        if data.log_start_offset <= state.fetch_offset <= data.log_end_offset:
            self._back_off([state])  # in range by now (the log moved meanwhile): try again
            return
        if state.fetch_offset > data.log_end_offset:
            # Ahead of the leader: find where the logs agree from the epochs again, never by
            # cutting blindly to the leader's log end.
            state.truncating = True
            return
        # Behind the leader's log start (retention): start over at the leader's log start.
        self._truncate(state, start_at=max(data.log_start_offset, 0))

    @handles(OffsetsForLeaderEpochResponse)
    def _on_epochs(self, response: OffsetsForLeaderEpochResponse) -> None:
        asked = self._asked.pop(response.correlation_id, ())
        if not self._answered(response.correlation_id):
            return
        answers = {str(TopicPartition.of(a)): a for a in response.partitions}
        failed: list[FetchState] = []
        for state in asked:
            state.busy = False
            if not self._is_current(state):
                continue
            answer = answers.get(state.key)
            if answer is None or answer.error_code is not ErrorCode.NONE:
                failed.append(state)
                if answer is not None:
                    self.log_event(
                        "fetcher.error",
                        leader=self.leader,
                        error_code=int(answer.error_code),
                        error=answer.error_code.name,
                        reason=f"OffsetsForLeaderEpoch for {state.key}",
                    )
                continue
            self._truncate(state, epoch_end=answer)
        self._back_off(failed)
        self._maybe_fetch()

    # -- local requests to the partitions ----------------------------------------------------------

    def _append(self, state: FetchState, records: bytes, high_watermark: int) -> None:
        self._ask_partition(
            state,
            AppendAsFollower(
                topic=state.topic,
                partition=state.partition,
                records=records,
                leader_epoch=state.leader_epoch,
                leader_high_watermark=high_watermark,
            ),
        )

    def _truncate(
        self,
        state: FetchState,
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
        self, state: FetchState, request: AppendAsFollower | TruncateFollower
    ) -> None:
        """Send a request to the local partition; the partition is busy until it answers."""
        correlation_id = next(self._ids)
        self._busy[correlation_id] = state
        state.busy = True
        self.send(
            addresses.partition(self.broker_id, state.key),
            dataclasses.replace(request, reply_to=self.address, correlation_id=correlation_id),
        )

    def _local_answer(self, correlation_id: int) -> FetchState | None:
        """The partition a local answer is about, if it is still the current one."""
        state = self._busy.pop(correlation_id, None)
        if state is None:
            return None
        state.busy = False
        return state if self._is_current(state) else None

    def _partition_answered(
        self, response: FollowerAppended | FollowerTruncated
    ) -> FetchState | None:
        """Where the local log now ends; the partition backs off if it failed. Returns the
        partition's state when the step succeeded and the partition is still current."""
        state = self._local_answer(response.correlation_id)
        if state is None:
            return None
        state.fetch_offset = response.log_end_offset
        state.latest_epoch = response.latest_epoch
        if response.error_code is not ErrorCode.NONE:
            self._back_off([state])
            return None
        return state

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
            state = self._local_answer(response.correlation_id)
            if state is not None:
                self._back_off([state])
        self._maybe_fetch()
