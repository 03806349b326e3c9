"""The consumer client: partitions assigned by hand or by a consumer group, read by long-poll
fetches from their leaders."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, overload

from kafkactor.actors.runtime import Client, Directory, addresses
from kafkactor.clients.completed_fetch import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ConsumerRecord,
    read_fetched,
)
from kafkactor.clients.consumer_coordinator import ConsumerCoordinator, ConsumerGroupMetadata
from kafkactor.clients.errors import ClientError, ConsumerError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.clients.offset_fetcher import reset_positions
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.offsets import (
    CONSUMER_REPLICA_ID,
)
from kafkactor.messages.replication import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from kafkactor.storage import StorageError
from kafkactor.timer import Clock, SystemClock

__all__ = ["Consumer", "ConsumerRecord"]

_names = itertools.count(1)

# A fetch failed because its leader could not be reached or did not answer: wait and ask
# again for as long as it takes (Kafka's consumer never gives up on these).
_UNREACHABLE = frozenset(
    {ErrorCode.NETWORK_EXCEPTION, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)
_ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


@dataclass(frozen=True, slots=True)
class _Fetch:
    """A fetch request out to one leader: what it asked for, and when to give up on it."""

    future: Future[Any]
    sent: dict[TopicPartition, int]
    expires_at: float


def _as_topic_partition(value: TopicPartition | tuple[str, int]) -> TopicPartition:
    """The edge where a plain `(topic, partition)` pair becomes a `TopicPartition`."""
    if isinstance(value, TopicPartition):
        return value
    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
    ):
        return TopicPartition(topic=value[0], partition=value[1])
    raise TypeError(f"expected a TopicPartition or a (topic, partition) pair, not {value!r}")


class Consumer:
    """Kafka's consumer: partitions by hand (`assign`) or from a group (`subscribe`);
    `seek`, `position`, `poll`, and with a group `commit` and `committed`.

    Partitions are `TopicPartition`s (`assign` also takes `(topic, partition)` pairs, and
    `seek` / `position` a topic and a partition, for brevity). `poll(timeout_ms)` sends one
    long-poll `FetchRequest` (replica id -1, `min_bytes`, max wait = the poll timeout capped at
    `max_wait_ms`) per partition leader, and returns as soon as any of them brings records, or
    empty once the timeout passes. A fetch still out when `poll` returns stays out and is used
    by the next poll, so no request is wasted; one unanswered for `request_timeout_ms` past its
    max wait is given up. Brokers never return records above the high watermark.

    Transient trouble is retried inside `poll`, never raised, as Kafka's consumer does: when
    the leader moved or cannot be reached, the metadata is refreshed and the partition fetched
    again after `retry_backoff_ms`; a partition without a leader waits for one (a poll with
    nothing to fetch returns after at most one backoff). What a user must see is raised by
    `poll` as `ConsumerError` with Kafka's code:

    - OFFSET_OUT_OF_RANGE when the position is outside the log and `auto_offset_reset` is
      "none" (otherwise the position resets to the log start, "earliest", the default, or the
      high watermark, "latest");
    - UNKNOWN_TOPIC_OR_PARTITION for an assigned partition that no broker knows;
    - NOT_LEADER_FOR_PARTITION (or another leader error) when a partition's fetches fail with it
      more than `partition_error_retries` times in a row, each after a metadata refresh;
    - CORRUPT_MESSAGE for fetched bytes that do not parse, and any non-retriable fetch error.

    Records already fetched are returned first; the error is raised by the next poll.

    **Consumer groups.** With a `group_id`, `subscribe` lets the group assign partitions (a
    `ConsumerCoordinator` does the rebalancing and the commits); `poll` returns empty while it
    rebalances. A partition starts at the group's committed offset, or by `auto_offset_reset`
    ("none": `poll` raises OFFSET_OUT_OF_RANGE until a `seek`).

    **Isolation** (Kafka's `isolation.level`). "read_uncommitted" (the default) reads up to
    the high watermark; "read_committed" fetches with isolation level 1, so leaders return
    records only below the last stable offset (no transaction still open), and `poll` drops
    the records of aborted transactions (from the fetch's aborted transactions and the ABORT
    markers, as Kafka's Fetcher does). Transaction markers (control batches) are never
    returned; the position moves past them.
    """

    def __init__(
        self,
        directory: Directory,
        bootstrap: Callable[[], Sequence[int]],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_partition_fetch_bytes: int = 1024 * 1024,
        auto_offset_reset: str = "earliest",
        retry_backoff_ms: int = 100,
        partition_error_retries: int = 10,
        request_timeout_ms: int = 30_000,
        name: str | None = None,
        clock: Clock | None = None,
        group_id: str | None = None,
        session_timeout_ms: int = 10_000,
        heartbeat_interval_ms: int = 3_000,
        max_poll_interval_ms: int = 300_000,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        partition_assignment_strategy: Sequence[str] = ("range",),
        isolation_level: str = "read_uncommitted",
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none: {auto_offset_reset}"
            )
        if isolation_level not in _ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be read_uncommitted or read_committed: {isolation_level}"
            )
        self.isolation_level = isolation_level
        self._isolation = _ISOLATION_LEVELS[isolation_level]
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.auto_offset_reset = auto_offset_reset
        self.retry_backoff_ms = retry_backoff_ms
        self.partition_error_retries = partition_error_retries
        self.request_timeout_ms = request_timeout_ms
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.client = Client(name or f"consumer-{next(_names)}", directory, self.clock)
        self.metadata = ClientMetadata(self.client, bootstrap)
        self.high_watermarks: dict[TopicPartition, int] = {}
        self._positions: dict[TopicPartition, int] = {}
        self._in_flight: dict[int, _Fetch] = {}
        # partition -> (monotonic time of its next try, whether poll should wait for it)
        self._backoff: dict[TopicPartition, tuple[float, bool]] = {}
        self._failures: dict[TopicPartition, int] = {}  # leader errors in a row
        self._pending_error: ConsumerError | None = None
        self._pause = threading.Event()  # never set: a bounded wait between retries
        self._resetting: set[TopicPartition] = set()  # assigned, with no position yet
        self.coordinator: ConsumerCoordinator | None = None
        if group_id is not None:
            self.coordinator = ConsumerCoordinator(
                self.client,
                self.metadata,
                group_id,
                positions=lambda: dict(self._positions),
                on_assigned=self._on_assigned,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=max_poll_interval_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                retry_backoff_ms=retry_backoff_ms,
                request_timeout_ms=request_timeout_ms,
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
                assignors=partition_assignment_strategy,
                require_stable=self._isolation == READ_COMMITTED,
            )

    @property
    def address(self) -> str:
        return self.client.address

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read these partitions (from offset 0 unless `seek` says otherwise).

        As in Kafka, nothing is checked here: a partition no broker knows makes `poll` raise.
        ValueError while subscribed (`unsubscribe` first).
        """
        wanted = [_as_topic_partition(p) for p in partitions]
        if self.subscription():
            raise ValueError("assign and subscribe are mutually exclusive: unsubscribe first")
        self._on_assigned({tp: self._positions.get(tp, 0) for tp in wanted})

    def _on_assigned(self, positions: dict[TopicPartition, int | None]) -> None:
        """Read these partitions from these positions (None: by `auto_offset_reset`)."""
        self._positions = {tp: at for tp, at in positions.items() if at is not None}
        self._resetting = {tp for tp, at in positions.items() if at is None}
        for state in (self.high_watermarks, self._backoff, self._failures):
            for tp in [tp for tp in state if tp not in positions]:
                del state[tp]
        for leader, fetch in list(self._in_flight.items()):
            if not fetch.sent.keys() <= self._positions.keys():  # revoked: its answer is moot
                del self._in_flight[leader]
                self.client.abandon(fetch.future)
        error = self._pending_error
        if error is not None and error.topic_partition not in positions:
            self._pending_error = None

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions.keys() | self._resetting)

    def subscribe(self, topics: Iterable[str]) -> None:
        """Consume what the group assigns of these topics ([]: `unsubscribe`). ValueError
        without a `group_id`, or after `assign` (Kafka: IllegalStateException)."""
        if not self.subscription() and self.assignment():
            raise ValueError("assign and subscribe are mutually exclusive: assign([]) first")
        wanted = list(topics)
        if wanted:
            self._group("subscribe").subscribe(wanted)
        else:
            self.unsubscribe()

    def _group(self, what: str) -> ConsumerCoordinator:
        if self.coordinator is None:  # Kafka: InvalidGroupIdException
            raise ValueError(f"{what} needs a group_id")
        return self.coordinator

    def unsubscribe(self) -> None:
        """Give up every partition: leave the group, or forget the manual assignment."""
        if self.coordinator is not None and self.coordinator.subscription:
            self.coordinator.unsubscribe()
        self._on_assigned({})

    def subscription(self) -> list[str]:
        return list(self.coordinator.subscription) if self.coordinator is not None else []

    @overload
    def seek(self, partition: TopicPartition, offset: int, /) -> None: ...
    @overload
    def seek(self, topic: str, partition: int, offset: int, /) -> None: ...
    def seek(self, *args: Any) -> None:
        """Fetch from `offset` next: `seek(tp, offset)` or `seek(topic, partition, offset)`."""
        tp = self._assigned(*args[:-1])
        self._positions[tp] = int(args[-1])
        self._resetting.discard(tp)
        self._failures.pop(tp, None)
        if self._pending_error is not None and self._pending_error.topic_partition == tp:
            self._pending_error = None  # an out-of-range position the user just moved

    @overload
    def position(self, partition: TopicPartition, /) -> int: ...
    @overload
    def position(self, topic: str, partition: int, /) -> int: ...
    def position(self, *args: Any) -> int:
        """The offset of the next record to fetch: `position(tp)` or `position(topic, p)`.

        A group's partition with nothing committed gets one by `auto_offset_reset` first.
        """
        tp = self._assigned(*args)
        if tp not in self._positions:
            errors: list[ConsumerError] = []
            self._reset_positions(time.monotonic() + self.request_timeout_ms / 1000, errors)
            if tp not in self._positions:
                raise errors[0] if errors else ConsumerError(ErrorCode.LEADER_NOT_AVAILABLE, tp)
        return self._positions[tp]

    def _assigned(self, *args: Any) -> TopicPartition:
        tp = _as_topic_partition(args[0] if len(args) == 1 else tuple(args))
        if tp not in self._positions and tp not in self._resetting:
            raise KeyError(f"{tp} is not assigned")  # Kafka: IllegalStateException
        return tp

    def poll(self, timeout_ms: int) -> list[ConsumerRecord]:
        """Records from the assigned partitions; waits up to `timeout_ms` for some.

        Raises `ConsumerError` (see the class docstring) for what retrying cannot cure.
        """
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            raise error
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        if self.coordinator is not None and not self.coordinator.poll(deadline):
            return []  # the group is rebalancing
        records: list[ConsumerRecord] = []
        errors: list[ConsumerError] = []
        waited_for_leaders = False
        while True:
            self._reset_positions(deadline, errors)
            self._send_fetches(timeout_ms, errors)
            now = time.monotonic()
            if self._in_flight and not errors:
                self._await_fetches(min(deadline, self._next_wake(waiting_only=True)), now)
                for leader, fetch in list(self._in_flight.items()):
                    if fetch.future.done():
                        del self._in_flight[leader]
                        records.extend(self._handle(fetch.future.result(), fetch.sent, errors))
            elif not errors and now < deadline:
                retry_at = self._next_wake(waiting_only=True)
                if retry_at == math.inf and not waited_for_leaders:
                    # nothing to fetch: give leaderless partitions one backoff, then return
                    retry_at, waited_for_leaders = self._next_wake(waiting_only=False), True
                if retry_at == math.inf:
                    return records
                self._pause.wait(max(min(retry_at, deadline) - now, 0))
                continue
            if errors:
                if records:
                    self._pending_error = errors[0]
                    return records
                raise errors[0]
            if records or time.monotonic() >= deadline:
                return records

    def _await_fetches(self, until: float, now: float) -> None:
        """Wait until a fetch is answered or `until`; give up fetches past their deadline."""
        expiry = min(fetch.expires_at for fetch in self._in_flight.values())
        futures = [fetch.future for fetch in self._in_flight.values()]
        wait(futures, timeout=max(min(until, expiry) - now, 0), return_when=FIRST_COMPLETED)
        now = time.monotonic()
        for leader, fetch in list(self._in_flight.items()):
            if not fetch.future.done() and fetch.expires_at <= now:
                del self._in_flight[leader]  # Kafka's request.timeout.ms: a late answer is dropped
                self.client.abandon(fetch.future)
                for tp in fetch.sent:
                    self._retry_later(tp, waiting=True)

    def _next_wake(self, *, waiting_only: bool) -> float:
        """When the earliest partition in backoff may be fetched again (inf: none is)."""
        now = time.monotonic()
        busy = {tp for fetch in self._in_flight.values() for tp in fetch.sent}
        return min(
            (
                at
                for tp, (at, waiting) in self._backoff.items()
                if at > now and tp not in busy and (waiting or not waiting_only)
            ),
            default=math.inf,
        )

    def _retry_later(self, tp: TopicPartition, *, waiting: bool) -> None:
        """Fetch `tp` again after the backoff, from the leader fresh metadata names. `waiting`:
        poll waits for that retry (a failed fetch) rather than returning (no leader yet)."""
        self.metadata.mark_stale(tp.topic)
        self._backoff[tp] = (time.monotonic() + self.retry_backoff_ms / 1000, waiting)

    def _send_fetches(self, timeout_ms: int, errors: list[ConsumerError]) -> None:
        now = time.monotonic()
        busy = {tp for fetch in self._in_flight.values() for tp in fetch.sent}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in self._positions:
            if tp in busy or self._backoff.get(tp, (0.0, False))[0] > now:
                continue
            try:
                leader = self.metadata.leader(tp)
            except ClientError as error:
                if error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    errors.append(ConsumerError(error.error_code, tp, error.reason))
                self._retry_later(tp, waiting=False)  # or no broker answered: wait for one
                continue
            if leader < 0:
                self._retry_later(tp, waiting=False)
            elif leader not in self._in_flight:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            sent = {tp: self._positions[tp] for tp in tps}
            max_wait_ms = max(0, min(timeout_ms, self.max_wait_ms))
            request = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=max_wait_ms,
                min_bytes=self.min_bytes,
                isolation_level=self._isolation,
                partitions=tuple(
                    FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=offset,
                        max_bytes=self.max_partition_fetch_bytes,
                    )
                    for tp, offset in sent.items()
                ),
            )
            future = self.client.request(addresses.replica_manager(leader), request)
            expires_at = now + (max_wait_ms + self.request_timeout_ms) / 1000
            self._in_flight[leader] = _Fetch(future, sent, expires_at)

    def _handle(
        self, response: Any, sent: dict[TopicPartition, int], errors: list[ConsumerError]
    ) -> list[ConsumerRecord]:
        if isinstance(response, ErrorResponse) or not isinstance(response, FetchResponse):
            for tp in sent:  # the leader is unreachable or stopped: ask again, without limit
                self._retry_later(tp, waiting=True)
            return []
        records: list[ConsumerRecord] = []
        for data in response.partitions:
            tp = TopicPartition.of(data)
            if tp not in self._positions or self._positions[tp] != sent.get(tp):
                continue  # unassigned or moved by seek while the fetch was out
            code = data.error_code
            if code is ErrorCode.NONE:
                self._backoff.pop(tp, None)
                self._failures.pop(tp, None)
                self.high_watermarks[tp] = data.high_watermark
                try:
                    got = read_fetched(data, self._positions[tp], self._isolation)
                except StorageError as error:  # Kafka: CorruptRecordException
                    errors.append(ConsumerError(ErrorCode.CORRUPT_MESSAGE, tp, str(error)))
                    continue
                if got.next_offset is not None and got.next_offset > self._positions[tp]:
                    self._positions[tp] = got.next_offset  # past control and aborted batches
                records.extend(got.records)
            elif code is ErrorCode.OFFSET_OUT_OF_RANGE:
                self._reset(tp, data, errors)
            elif code in _UNREACHABLE:
                self._retry_later(tp, waiting=True)
            elif code.retriable:
                failures = self._failures.get(tp, 0) + 1
                self._failures[tp] = failures
                self._retry_later(tp, waiting=True)
                if failures > self.partition_error_retries:
                    self._failures.pop(tp)
                    errors.append(
                        ConsumerError(code, tp, f"{failures} fetches in a row, metadata refreshed")
                    )
            else:
                errors.append(ConsumerError(code, tp, "the leader refused the fetch"))
        return records

    def _reset(
        self, tp: TopicPartition, data: FetchPartitionData, errors: list[ConsumerError]
    ) -> None:
        if self.auto_offset_reset == "none":
            errors.append(
                ConsumerError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    tp,
                    f"offset {self._positions[tp]} is outside "
                    f"[{data.log_start_offset}, {data.log_end_offset}] and auto_offset_reset "
                    "is none",
                )
            )
            return
        latest = data.high_watermark
        if self._isolation == READ_COMMITTED and data.last_stable_offset >= 0:
            latest = data.last_stable_offset
        earliest = self.auto_offset_reset == "earliest"
        self._positions[tp] = data.log_start_offset if earliest else latest

    def _reset_positions(self, deadline: float, errors: list[ConsumerError]) -> None:
        """Positions for partitions without one, by `auto_offset_reset` (ListOffsets)."""
        now = time.monotonic()
        due = sorted(tp for tp in self._resetting if self._backoff.get(tp, (0.0, False))[0] <= now)
        if due:
            timeout_s = max(deadline - now, self.retry_backoff_ms / 1000)
            found, failed = reset_positions(
                self.client,
                self.metadata,
                due,
                self.auto_offset_reset,
                timeout_s,
                isolation_level=self._isolation,
            )
            errors.extend(failed)
            for tp in due:
                if tp in found:
                    self._resetting.discard(tp)
                    self._positions[tp] = found[tp]
                else:
                    self._retry_later(tp, waiting=True)

    def commit(self, offsets: Mapping[TopicPartition, int] | None = None) -> None:
        """Kafka's `commitSync`: the positions, or `offsets` (the next offset to read, per
        partition). `CommitFailedError` when the group rebalanced without this consumer,
        `ClientError` for any other failure; ValueError without a `group_id`."""
        self._group("commit").commit(dict(self._positions) if offsets is None else offsets)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Kafka's `groupMetadata()`: for `send_offsets_to_transaction`; needs a `group_id`."""
        return self._group("group_metadata").group_metadata()

    def committed(self, partition: TopicPartition | tuple[str, int]) -> int | None:
        """The group's committed offset for a partition (None: none); needs a `group_id`."""
        tp = _as_topic_partition(partition)
        return self._group("committed").committed([tp])[tp]

    def close(self) -> None:
        """Commit (auto-commit) and leave the group, if in one; then stop for good."""
        if self.coordinator is not None:
            self.coordinator.close()
        self.client.close()
