"""The pure core of a replica fetcher: where each follower partition stands and what to do next.

Kafka keeps this in `AbstractFetcherThread.partitionStates` (a `PartitionFetchState` per
partition) and in the thread's own backoff; here it is a plain class with no messages, timers
or clock, driven by the `ReplicaFetcherActor` and tested with explicit times.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    UNDEFINED_EPOCH,
    EpochEndOffset,
)
from kafkactor.messages.replication import (
    FetcherPartition,
    FetchPartition,
    FetchPartitionData,
)


@dataclass(slots=True, eq=False)
class PartitionFetchState:
    """Where one follower partition stands (Kafka's `PartitionFetchState`).

    `truncating`: it follows a new leader and must find its truncation point
    (OffsetsForLeaderEpoch from `latest_epoch`) before it fetches. `busy`: a request about it
    is out (an epoch question, a truncation or an append). `retry_at_ms`: after an error it
    waits until then, on its own (Kafka's per-partition delay). States compare by identity:
    a partition removed and added again is another state, and answers about the old one are
    ignored.
    """

    topic_partition: TopicPartition
    fetch_offset: int
    leader_epoch: int
    high_watermark: int = -1
    truncating: bool = False
    latest_epoch: int = UNDEFINED_EPOCH
    busy: bool = False
    retry_at_ms: int = 0
    early_retries: int = 0  # epoch questions retried soon since the leader last answered
    log_start_offset: int = -1  # the follower's, which each fetch tells the leader
    leader_log_start_offset: int = -1  # the leader's, as its last fetch answer said
    # the part of a fetch request last built for it, sent again while it still says the same
    request: FetchPartition | None = None

    def fetch_partition(self, max_bytes: int) -> FetchPartition:
        """Its part of the next fetch request: the fetch offset, the leader epoch it follows
        (KIP-320: a fetch sent before a newer epoch is fenced, and so cannot put this replica
        back in an ISR the controller just took it out of) and its log start (the leader's
        low watermark needs it). An idle partition's part is the same message every time."""
        request = self.request
        if (
            request is None
            or request.fetch_offset != self.fetch_offset
            or request.current_leader_epoch != self.leader_epoch
            or request.log_start_offset != self.log_start_offset
            or request.max_bytes != max_bytes
        ):
            request = self.request = FetchPartition(
                topic=self.topic_partition.topic,
                partition=self.topic_partition.partition,
                fetch_offset=self.fetch_offset,
                max_bytes=max_bytes,
                current_leader_epoch=self.leader_epoch,
                log_start_offset=self.log_start_offset,
            )
        return request

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition(self) -> int:
        return self.topic_partition.partition


@dataclass(frozen=True, slots=True)
class NextRequests:
    """What the fetcher should send now: epoch questions, one fetch, and when to look again."""

    ask_epochs: tuple[PartitionFetchState, ...] = ()
    fetch: tuple[PartitionFetchState, ...] = ()
    wake_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class FetchedData:
    """What one partition's part of a fetch response asks of the fetcher.

    `append`: hand the records and HW to the local partition. `truncate_from`: the follower
    is behind the leader's log start; empty the log and start there. Neither: nothing to do
    (or the partition now finds its truncation point from the epochs, or it backs off).
    """

    state: PartitionFetchState
    append: bool = False
    truncate_from: int | None = None


@dataclass(frozen=True, slots=True)
class EpochAnswers:
    """The outcome of an OffsetsForLeaderEpoch answer: partitions to truncate, and errors."""

    truncate: tuple[tuple[PartitionFetchState, EpochEndOffset], ...] = ()
    errors: tuple[tuple[PartitionFetchState, ErrorCode], ...] = ()


# Answers to an epoch question that mean the leader has not yet applied the LeaderAndIsr that
# made it leader (the controller told the follower first): asked again after
# EARLY_RETRY_MS, up to EARLY_RETRIES times, instead of after the whole fetch backoff.
# Kafka waits replica.fetch.backoff.ms (1 s) here too; topics created just before a produce
# (tests, examples) would wait that long for their first acks=all answer.
LEADER_NOT_READY = frozenset({ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.UNKNOWN_LEADER_EPOCH})
EARLY_RETRY_MS = 20
EARLY_RETRIES = 10


@dataclass(slots=True)
class FetcherState:
    """The partitions one fetcher (follower broker, leader broker) replicates, and its backoff.

    - Partitions added for a new leader first find their truncation point (`truncating`);
      re-added for the same leader in a newer epoch, they only learn the epoch.
    - At most one epoch question and one fetch are out at a time; no fetch goes out while
      a local append is out (the next fetch starts where the append ended).
    - A partition whose fetch, truncation or append failed waits `backoff_ms` on its own; a
      leader that cannot be reached or does not answer backs the whole fetcher off.
    - A leader that answers an epoch question as if it did not lead yet (LEADER_NOT_READY)
      is asked again after EARLY_RETRY_MS, up to EARLY_RETRIES times in a row: it has most
      likely not yet applied the LeaderAndIsr the follower already has.
    """

    backoff_ms: int
    partitions: dict[TopicPartition, PartitionFetchState] = field(default_factory=dict)
    backoff_until_ms: int = 0
    # what is out, by correlation id: an epoch question's partitions, a local step's partition
    _asked: dict[int, tuple[PartitionFetchState, ...]] = field(default_factory=dict)
    _busy: dict[int, PartitionFetchState] = field(default_factory=dict)

    # -- membership ------------------------------------------------------------------------------

    def add(self, partitions: Iterable[FetcherPartition]) -> None:
        for p in partitions:
            tp = TopicPartition.of(p)
            current = self.partitions.get(tp)
            if current is not None and not p.truncate:
                current.leader_epoch = p.leader_epoch  # same leader, newer epoch
                continue
            self.partitions[tp] = PartitionFetchState(
                topic_partition=tp,
                fetch_offset=p.fetch_offset,
                leader_epoch=p.leader_epoch,
                truncating=p.truncate,
                latest_epoch=p.latest_epoch,
            )

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.partitions.pop(tp, None)

    def is_current(self, state: PartitionFetchState) -> bool:
        """Whether `state` is still its partition's state (not removed or replaced)."""
        return self.partitions.get(state.topic_partition) is state

    # -- what to send ------------------------------------------------------------------------------

    def next_requests(self, now_ms: int, *, epochs_out: bool, fetch_out: bool) -> NextRequests:
        """Epoch questions for truncating partitions and a fetch for the others, among those
        not busy and not backing off; and when the next backoff ends."""
        if now_ms < self.backoff_until_ms:
            return NextRequests(wake_at_ms=self.backoff_until_ms)
        ready = [s for s in self.partitions.values() if not s.busy and s.retry_at_ms <= now_ms]
        ask = () if epochs_out else tuple(s for s in ready if s.truncating)
        fetch: tuple[PartitionFetchState, ...] = ()
        if not fetch_out and not self._appending():
            fetch = tuple(s for s in ready if not s.truncating)
        waiting = [s.retry_at_ms for s in self.partitions.values() if s.retry_at_ms > now_ms]
        return NextRequests(ask_epochs=ask, fetch=fetch, wake_at_ms=min(waiting, default=None))

    def _appending(self) -> bool:
        return any(self.is_current(state) for state in self._busy.values())

    def asking(self, correlation_id: int, states: Iterable[PartitionFetchState]) -> None:
        """An epoch question about `states` went out: they are busy until it is answered."""
        asked = tuple(states)
        for state in asked:
            state.busy = True
        self._asked[correlation_id] = asked

    def stepping(self, correlation_id: int, state: PartitionFetchState) -> None:
        """A truncation or an append went to the local partition: busy until it answers."""
        self._busy[correlation_id] = state
        state.busy = True

    # -- answers -----------------------------------------------------------------------------------

    def back_off(self, states: Iterable[PartitionFetchState], now_ms: int) -> None:
        """These partitions wait `backoff_ms` before they are tried again."""
        for state in states:
            state.retry_at_ms = now_ms + self.backoff_ms

    def leader_failed(self, correlation_id: int, now_ms: int) -> None:
        """The leader did not answer (unreachable, or no answer in time): the whole fetcher
        waits, and partitions that were asking about their epochs ask again later."""
        for state in self._asked.pop(correlation_id, ()):
            state.busy = False
        self.backoff_until_ms = now_ms + self.backoff_ms

    def fetched(self, data: FetchPartitionData, now_ms: int) -> FetchedData | None:
        """One partition's part of a fetch response; None when it is no longer current, or
        fetching for it meanwhile became pointless (re-added for a new leader, busy)."""
        state = self.partitions.get(TopicPartition.of(data))
        if state is None or state.truncating or state.busy:
            return None
        if data.error_code is ErrorCode.NONE:
            changed = (
                bool(data.records)
                or data.high_watermark != state.high_watermark
                or data.log_start_offset != state.leader_log_start_offset
            )
            state.high_watermark = data.high_watermark
            state.leader_log_start_offset = data.log_start_offset
            return FetchedData(state, append=changed)
        if data.error_code is not ErrorCode.OFFSET_OUT_OF_RANGE:
            self.back_off([state], now_ms)  # e.g. leadership moved: wait for the controller
            return FetchedData(state)
        if state.fetch_offset < data.log_start_offset:
            # Behind the leader's log start (retention): start over at the leader's log start.
            return FetchedData(state, truncate_from=max(data.log_start_offset, 0))
        if state.fetch_offset <= data.log_end_offset:
            self.back_off([state], now_ms)  # in range by now (the log moved meanwhile)
            return FetchedData(state)
        # Ahead of the leader (or its log end unknown: a fetch response over the wire does not
        # carry it): find where the logs agree from the epochs again, never by cutting blindly
        # to the leader's log end.
        state.truncating = True
        return FetchedData(state)

    def epochs_answered(
        self, correlation_id: int, answers: Mapping[TopicPartition, EpochEndOffset], now_ms: int
    ) -> EpochAnswers:
        """The leader's epoch end offsets: where each asking partition truncates; partitions
        the leader could not answer for back off."""
        truncate: list[tuple[PartitionFetchState, EpochEndOffset]] = []
        errors: list[tuple[PartitionFetchState, ErrorCode]] = []
        failed: list[PartitionFetchState] = []
        for state in self._asked.pop(correlation_id, ()):
            state.busy = False
            if not self.is_current(state):
                continue
            answer = answers.get(state.topic_partition)
            if answer is None or answer.error_code is not ErrorCode.NONE:
                if answer is not None:
                    errors.append((state, answer.error_code))
                if (
                    answer is not None
                    and answer.error_code in LEADER_NOT_READY
                    and state.early_retries < EARLY_RETRIES
                ):
                    state.early_retries += 1
                    state.retry_at_ms = now_ms + min(EARLY_RETRY_MS, self.backoff_ms)
                else:
                    failed.append(state)
                continue
            state.early_retries = 0
            truncate.append((state, answer))
        self.back_off(failed, now_ms)
        return EpochAnswers(truncate=tuple(truncate), errors=tuple(errors))

    def local_answer(self, correlation_id: int) -> PartitionFetchState | None:
        """The partition a local answer is about, if it is still the current one."""
        state = self._busy.pop(correlation_id, None)
        if state is None:
            return None
        state.busy = False
        return state if self.is_current(state) else None

    def step_answered(
        self,
        correlation_id: int,
        *,
        log_end_offset: int,
        latest_epoch: int,
        error_code: ErrorCode,
        now_ms: int,
        log_start_offset: int = -1,
    ) -> PartitionFetchState | None:
        """A local append or truncation answered with where the log now ends (and starts);
        the partition backs off if the step failed. Returns its state when the step succeeded
        and the partition is still current."""
        state = self.local_answer(correlation_id)
        if state is None:
            return None
        state.fetch_offset = log_end_offset
        state.latest_epoch = latest_epoch
        state.log_start_offset = log_start_offset
        if error_code is not ErrorCode.NONE:
            self.back_off([state], now_ms)
            return None
        return state

    def local_failed(self, correlation_id: int, now_ms: int) -> None:
        """A local partition could not be reached or failed a step: it backs off."""
        state = self.local_answer(correlation_id)
        if state is not None:
            self.back_off([state], now_ms)
