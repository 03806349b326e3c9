"""The consumer client: assigned partitions read by long-poll fetches from their leaders."""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any, overload

from kafkactor.actors.runtime import Client, Directory, addresses
from kafkactor.clients.errors import ClientError, ConsumerError
from kafkactor.clients.metadata import ClientMetadata
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
from kafkactor.storage import StorageError, iter_batches
from kafkactor.storage.records import Headers
from kafkactor.timer import Clock, SystemClock

_names = itertools.count(1)

# A fetch failed because its leader could not be reached or did not answer: wait and ask
# again for as long as it takes (Kafka's consumer never gives up on these).
_UNREACHABLE = frozenset(
    {ErrorCode.NETWORK_EXCEPTION, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT}
)


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """Kafka's `ConsumerRecord`: a record as a consumer sees it, with its offset."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)


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
    """Kafka's consumer with manual assignment: `assign`, `seek`, `position`, `poll`.

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
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none: {auto_offset_reset}"
            )
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

    @property
    def address(self) -> str:
        return self.client.address

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read these partitions (from offset 0 unless `seek` says otherwise).

        As in Kafka, nothing is checked here: a partition no broker knows makes `poll` raise.
        """
        wanted = [_as_topic_partition(p) for p in partitions]
        self._positions = {tp: self._positions.get(tp, 0) for tp in wanted}
        for state in (self.high_watermarks, self._backoff, self._failures):
            for tp in [tp for tp in state if tp not in self._positions]:
                del state[tp]
        error = self._pending_error
        if error is not None and error.topic_partition not in self._positions:
            self._pending_error = None

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions)

    @overload
    def seek(self, partition: TopicPartition, offset: int, /) -> None: ...
    @overload
    def seek(self, topic: str, partition: int, offset: int, /) -> None: ...
    def seek(self, *args: Any) -> None:
        """Fetch from `offset` next: `seek(tp, offset)` or `seek(topic, partition, offset)`."""
        tp = self._assigned(*args[:-1])
        self._positions[tp] = int(args[-1])
        self._failures.pop(tp, None)
        if self._pending_error is not None and self._pending_error.topic_partition == tp:
            self._pending_error = None  # an out-of-range position the user just moved

    @overload
    def position(self, partition: TopicPartition, /) -> int: ...
    @overload
    def position(self, topic: str, partition: int, /) -> int: ...
    def position(self, *args: Any) -> int:
        """The offset of the next record to fetch: `position(tp)` or `position(topic, p)`."""
        return self._positions[self._assigned(*args)]

    def _assigned(self, *args: Any) -> TopicPartition:
        tp = _as_topic_partition(args[0] if len(args) == 1 else tuple(args))
        if tp not in self._positions:
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
        records: list[ConsumerRecord] = []
        errors: list[ConsumerError] = []
        waited_for_leaders = False
        while True:
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
                    got = self._records(data, self._positions[tp])
                except StorageError as error:  # Kafka: CorruptRecordException
                    errors.append(ConsumerError(ErrorCode.CORRUPT_MESSAGE, tp, str(error)))
                    continue
                if got:
                    self._positions[tp] = got[-1].offset + 1
                records.extend(got)
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

    @staticmethod
    def _records(data: FetchPartitionData, position: int) -> list[ConsumerRecord]:
        out = []
        for batch in iter_batches(data.records):  # records() checks the framing
            for record in batch.records():
                if record.offset >= position:
                    out.append(
                        ConsumerRecord(
                            topic=data.topic,
                            partition=data.partition,
                            offset=record.offset,
                            timestamp_ms=record.timestamp_ms,
                            key=record.key,
                            value=record.value,
                            headers=record.headers,
                        )
                    )
        return out

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
        earliest = self.auto_offset_reset == "earliest"
        self._positions[tp] = data.log_start_offset if earliest else data.high_watermark

    def close(self) -> None:
        self.client.close()
