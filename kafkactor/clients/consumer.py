"""The consumer client: assigned partitions read by long-poll fetches from their leaders."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from typing import Any

from kafkactor.actors.runtime import Client, Directory, addresses
from kafkactor.clients.metadata import ClientMetadata, NoBrokersAvailableError, UnknownTopicError
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from kafkactor.storage.records import Headers, iter_batches
from kafkactor.timer import Clock, SystemClock

_names = itertools.count(1)


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """A record as a consumer sees it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class OffsetOutOfRangeError(LookupError):
    """A fetch position is outside the partition's log and `auto_offset_reset` is "none"."""


TopicPartitionKey = tuple[str, int]


class Consumer:
    """Kafka's consumer with manual assignment: `assign`, `seek`, `position`, `poll`.

    `poll(timeout_ms)` sends one long-poll `FetchRequest` (replica id -1, `min_bytes`, max wait
    = the poll timeout capped at `max_wait_ms`) per partition leader, and returns as soon as
    any of them brings records, or empty once the timeout passes. A fetch still out when
    `poll` returns stays out and is used by the next poll, so no request is wasted. Brokers
    never return records above the high watermark. When the leader moved or cannot be
    reached, the metadata is refreshed before the next fetch; an out-of-range position is
    reset to the log start ("earliest", the default) or the high watermark ("latest"), or
    raises `OffsetOutOfRangeError` ("none").
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
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.client = Client(name or f"consumer-{next(_names)}", directory, self.clock)
        self.metadata = ClientMetadata(self.client, bootstrap)
        self._positions: dict[TopicPartitionKey, int] = {}
        self._in_flight: dict[int, tuple[Future[Any], dict[TopicPartitionKey, int]]] = {}
        self.high_watermarks: dict[TopicPartitionKey, int] = {}

    @property
    def address(self) -> str:
        return self.client.address

    def assign(self, partitions: Iterable[TopicPartitionKey]) -> None:
        """Read these partitions (from offset 0 unless `seek` says otherwise)."""
        wanted = [(str(t), int(p)) for t, p in partitions]
        self._positions = {tp: self._positions.get(tp, 0) for tp in wanted}

    def assignment(self) -> list[TopicPartitionKey]:
        return sorted(self._positions)

    def seek(self, topic: str, partition: int, offset: int) -> None:
        tp = (topic, partition)
        if tp not in self._positions:
            raise KeyError(f"{topic}-{partition} is not assigned")
        self._positions[tp] = offset

    def position(self, topic: str, partition: int) -> int:
        return self._positions[(topic, partition)]

    def poll(self, timeout_ms: int) -> list[ConsumerRecord]:
        """Records from the assigned partitions; waits up to `timeout_ms` for some."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        records: list[ConsumerRecord] = []
        while True:
            self._send_fetches(timeout_ms)
            remaining = deadline - time.monotonic()
            futures = [future for future, _ in self._in_flight.values()]
            if not futures:
                return records
            done, _ = wait(futures, timeout=max(remaining, 0), return_when=FIRST_COMPLETED)
            for leader, (future, sent) in list(self._in_flight.items()):
                if future in done:
                    del self._in_flight[leader]
                    records.extend(self._handle(future.result(), sent))
            if records or time.monotonic() >= deadline:
                return records

    def _send_fetches(self, timeout_ms: int) -> None:
        by_leader: dict[int, list[TopicPartitionKey]] = {}
        for tp in self._positions:
            try:
                leader = self.metadata.leader(*tp)
            except (UnknownTopicError, NoBrokersAvailableError):
                continue
            if leader >= 0 and leader not in self._in_flight:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            sent = {tp: self._positions[tp] for tp in tps}
            request = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID,
                max_wait_ms=max(0, min(timeout_ms, self.max_wait_ms)),
                min_bytes=self.min_bytes,
                partitions=tuple(
                    FetchPartition(
                        topic=t,
                        partition=p,
                        fetch_offset=o,
                        max_bytes=self.max_partition_fetch_bytes,
                    )
                    for (t, p), o in sent.items()
                ),
            )
            future = self.client.request(addresses.replica_manager(leader), request)
            self._in_flight[leader] = (future, sent)

    def _handle(self, response: Any, sent: dict[TopicPartitionKey, int]) -> list[ConsumerRecord]:
        if isinstance(response, ErrorResponse) or not isinstance(response, FetchResponse):
            for topic in {t for t, _ in sent}:
                self.metadata.mark_stale(topic)
            return []
        records: list[ConsumerRecord] = []
        for data in response.partitions:
            tp = (data.topic, data.partition)
            if tp not in self._positions or self._positions[tp] != sent.get(tp):
                continue  # unassigned or moved by seek while the fetch was out
            if data.error_code is ErrorCode.NONE:
                self.high_watermarks[tp] = data.high_watermark
                got = self._records(data, self._positions[tp])
                if got:
                    self._positions[tp] = got[-1].offset + 1
                records.extend(got)
            elif data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE:
                self._reset(tp, data)
            else:
                self.metadata.mark_stale(data.topic)
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

    def _reset(self, tp: TopicPartitionKey, data: FetchPartitionData) -> None:
        if self.auto_offset_reset == "none":
            raise OffsetOutOfRangeError(
                f"{tp[0]}-{tp[1]}: offset {self._positions[tp]} is outside "
                f"[{data.log_start_offset}, {data.log_end_offset}]"
            )
        earliest = self.auto_offset_reset == "earliest"
        self._positions[tp] = data.log_start_offset if earliest else data.high_watermark

    def close(self) -> None:
        self.client.close()
