"""A follower broker's fetcher: the long-poll loop that copies a leader's logs."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafkactor import tracing
from kafkactor.actors import addresses
from kafkactor.actors.base import TraceContext, TracedActor, handles
from kafkactor.actors.directory import Directory
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import (
    AddFetcherPartitions,
    AppendAsFollower,
    FetchAgain,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTimedOut,
    FollowerAppended,
    RemoveFetcherPartitions,
    partition_key,
)
from kafkactor.timer import CallbackTask, Clock, Timer

if TYPE_CHECKING:
    from kafkactor.actors.replica_manager import ReplicaManagerConfig


@dataclass(slots=True)
class FetchState:
    """Where one follower partition stands: its log end (the next fetch offset) and epoch."""

    topic: str
    partition: int
    fetch_offset: int
    leader_epoch: int
    high_watermark: int = -1


class ReplicaFetcherActor(TracedActor):
    """Kafka's `ReplicaFetcherThread` for one (follower broker, leader broker) pair.

    Sends one long-poll `FetchRequest` (replica id = this broker, `replica.fetch.wait.max.ms`,
    `replica.fetch.min.bytes`) for all its partitions to the leader's replica manager; hands
    each partition's batches (and the leader's HW) to the local `PartitionActor` as
    `AppendAsFollower`; fetches again once every append is answered. A partition whose offset
    is out of range on the leader is truncated first (to the leader's log end when the
    follower is ahead, else to the leader's log start). When the leader cannot be reached or
    answers with an error, it backs off for `replica.fetch.backoff.ms` on the broker's timer.
    Partitions removed (leadership moved) are dropped, and answers about them ignored; with no
    partitions left the fetcher idles.
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
        self._in_flight: int | None = None
        self._appending: dict[int, str] = {}
        self._backoff: CallbackTask | None = None
        self._deadline: CallbackTask | None = None
        self._failed = False
        self.fetches = 0

    def on_stop(self) -> None:
        for task in (self._backoff, self._deadline):
            if task is not None:
                task.cancel()
        super().on_stop()

    # -- membership ------------------------------------------------------------------------------

    @handles(AddFetcherPartitions)
    def _on_add(self, request: AddFetcherPartitions) -> None:
        for p in request.partitions:
            self.partitions[partition_key(p.topic, p.partition)] = FetchState(
                topic=p.topic,
                partition=p.partition,
                fetch_offset=p.fetch_offset,
                leader_epoch=p.leader_epoch,
            )
        self._maybe_fetch()

    @handles(RemoveFetcherPartitions)
    def _on_remove(self, request: RemoveFetcherPartitions) -> None:
        for p in request.partitions:
            self.partitions.pop(partition_key(p.topic, p.partition), None)

    # -- the loop ----------------------------------------------------------------------------------

    def _maybe_fetch(self) -> None:
        if self._in_flight is not None or self._appending or self._backoff is not None:
            return
        if not self.partitions:
            return
        if self._failed:
            self._failed = False
            self._back_off()
            return
        correlation_id = next(self._ids)
        self._in_flight = correlation_id
        self.fetches += 1
        max_bytes = self.config.replica_fetch_max_bytes
        self.send(
            self.leader_address,
            FetchRequest(
                reply_to=self.address,
                correlation_id=correlation_id,
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
                    for s in self.partitions.values()
                ),
            ),
            trace=TraceContext(tracing.new_id(), ""),  # each fetch is a trace of its own
        )
        # Kafka's replica.socket.timeout.ms: an answer lost on the way must not stall the loop
        if self._deadline is not None:
            self._deadline.cancel()
        timed_out = FetchTimedOut(correlation_id=correlation_id)
        self._deadline = CallbackTask(
            self.config.replica_fetch_wait_max_ms + self.config.replica_socket_timeout_ms,
            lambda: self.directory.tell(self.address, timed_out),
        )
        self.timer.add(self._deadline)

    def _back_off(self) -> None:
        if self._backoff is not None:
            return

        def again() -> None:
            self.directory.tell(self.address, FetchAgain())

        self._backoff = CallbackTask(self.config.replica_fetch_backoff_ms, again)
        self.timer.add(self._backoff)

    @handles(FetchAgain)
    def _on_fetch_again(self, _event: FetchAgain) -> None:
        self._backoff = None
        self._maybe_fetch()

    @handles(FetchTimedOut)
    def _on_fetch_timed_out(self, event: FetchTimedOut) -> None:
        if event.correlation_id != self._in_flight:
            return  # answered meanwhile
        self._in_flight = None
        self.log_event("fetcher.timeout", leader=self.leader, correlation_id=event.correlation_id)
        self._failed = True
        self._maybe_fetch()

    def _answered(self) -> None:
        self._in_flight = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    @handles(FetchResponse)
    def _on_fetch_response(self, response: FetchResponse) -> None:
        if response.correlation_id != self._in_flight:
            return
        self._answered()
        for data in response.partitions:
            key = partition_key(data.topic, data.partition)
            state = self.partitions.get(key)
            if state is None:
                continue  # removed while the fetch was out
            if data.error_code is ErrorCode.NONE:
                if data.records or data.high_watermark != state.high_watermark:
                    state.high_watermark = data.high_watermark
                    self._append(state, key, data.records, data.high_watermark, -1)
            elif data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                if state.fetch_offset > data.log_end_offset:
                    cut = data.log_end_offset  # the follower is ahead of the leader
                else:
                    cut = data.log_start_offset  # it fell behind the leader's retention
                self._append(state, key, b"", data.high_watermark, max(cut, 0))
            else:
                self._failed = True  # e.g. leadership moved: wait for the controller
        self._maybe_fetch()

    def _append(
        self, state: FetchState, key: str, records: bytes, high_watermark: int, truncate_to: int
    ) -> None:
        correlation_id = next(self._ids)
        self._appending[correlation_id] = key
        self.send(
            addresses.partition(self.broker_id, key),
            AppendAsFollower(
                reply_to=self.address,
                correlation_id=correlation_id,
                topic=state.topic,
                partition=state.partition,
                records=records,
                leader_epoch=state.leader_epoch,
                leader_high_watermark=high_watermark,
                truncate_to=truncate_to,
            ),
        )

    @handles(FollowerAppended)
    def _on_appended(self, response: FollowerAppended) -> None:
        key = self._appending.pop(response.correlation_id, None)
        if key is None:
            return
        state = self.partitions.get(key)
        if state is not None:
            if response.error_code is ErrorCode.NONE:
                state.fetch_offset = response.log_end_offset
            else:
                self._failed = True
                state.fetch_offset = response.log_end_offset
        self._maybe_fetch()

    @handles(ErrorResponse)
    def _on_error(self, response: ErrorResponse) -> None:
        """The leader (or a local partition) could not be reached or failed the request."""
        if response.correlation_id == self._in_flight:
            self._answered()
            self.log_event(
                "fetcher.error",
                leader=self.leader,
                error_code=int(response.error_code),
                error=response.error_code.name,
                reason=response.message,
            )
            self._failed = True
        elif self._appending.pop(response.correlation_id, None) is not None:
            self._failed = True
        self._maybe_fetch()
