"""The producer client: record batches to partition leaders, acks 0 / 1 / all."""

from __future__ import annotations

import itertools
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kafkactor.actors.runtime import Client, Directory, addresses
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import ProducePartition, ProduceRequest, ProduceResponse
from kafkactor.storage import Record, build_batch
from kafkactor.timer import Clock, SystemClock

_names = itertools.count(1)

# Errors after which the producer refreshes metadata and, with retries left, sends again.
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_FOR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record landed (offset -1 with acks=0: nobody said)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(slots=True, kw_only=True)
class PendingBatch:
    """A batch on its way: what to send, where, and the Future its sender waits on."""

    topic: str
    partition: int
    data: bytes
    timestamps: list[int]
    result: Future[list[RecordMetadata]]
    retries_left: int


class ProduceError(Exception):
    """The broker refused a produce: Kafka's error code for the partition."""

    def __init__(self, error_code: ErrorCode, topic: str, partition: int, reason: str = "") -> None:
        detail = f": {reason}" if reason else ""
        super().__init__(f"{error_code.name} producing to {topic}-{partition}{detail}")
        self.error_code = error_code
        self.topic = topic
        self.partition = partition


RecordLike = bytes | Record


class Producer:
    """Kafka's producer, without its accumulator: each `send` is one request to the leader.

    `send(topic, value, key=None, partition=None)` sends one record; `send_batch` sends many
    records as one batch to one partition (the unit the benchmark measures). Both return a
    Future of `RecordMetadata` (a list for a batch) that fails with `ProduceError`. With
    `partition=None` a keyed record goes to crc32(key) mod the partition count (Kafka hashes
    with murmur2; only the stability per key matters here), an unkeyed one round-robin.
    acks=0 Futures resolve at once with offset -1, since the broker never answers. Retriable
    errors (leader moved, broker down, not enough replicas, timeout) refresh the metadata and
    resend up to `retries` times, after `retry_backoff_ms`, on the producer's sender thread.
    """

    def __init__(
        self,
        directory: Directory,
        bootstrap: Callable[[], Sequence[int]],
        *,
        acks: int = 1,
        timeout_ms: int = 30_000,
        retries: int = 0,
        retry_backoff_ms: int = 100,
        name: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.client = Client(name or f"producer-{next(_names)}", directory, self.clock)
        self.metadata = ClientMetadata(self.client, bootstrap)
        self._round_robin = itertools.count()
        self._sender = ThreadPoolExecutor(1, thread_name_prefix=f"{self.client.address}-sender")
        self._closed = threading.Event()

    @property
    def address(self) -> str:
        return self.client.address

    def partitions_for(self, topic: str) -> list[int]:
        return self.metadata.partitions(topic)

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future[RecordMetadata]:
        """Send one record; the Future holds where it landed."""
        stamp = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        record = Record(key, value, stamp)
        single: Future[RecordMetadata] = Future()
        batch = self.send_batch(topic, [record], partition=partition)

        def unwrap(done: Future[list[RecordMetadata]]) -> None:
            error = done.exception()
            if error is not None:
                single.set_exception(error)
            else:
                single.set_result(done.result()[0])

        batch.add_done_callback(unwrap)
        return single

    def send_batch(
        self, topic: str, records: Sequence[RecordLike], partition: int | None = None
    ) -> Future[list[RecordMetadata]]:
        """Send records (values, or `Record`s) as one batch to one partition."""
        if self._closed.is_set():
            raise RuntimeError("the producer is closed")
        if not records:
            raise ValueError("a batch needs at least one record")
        now = self.clock.now_ms()
        built = [r if isinstance(r, Record) else Record(None, r, now) for r in records]
        if partition is None:
            partition = self._choose_partition(topic, built[0].key)
        data = build_batch(built, 0)
        batch = PendingBatch(
            topic=topic,
            partition=partition,
            data=data,
            timestamps=[r.timestamp_ms for r in built],
            result=Future(),
            retries_left=self.retries,
        )
        self._attempt(batch)
        return batch.result

    def _choose_partition(self, topic: str, key: bytes | None) -> int:
        partitions = self.metadata.partitions(topic)
        if key is not None:
            return partitions[zlib.crc32(key) % len(partitions)]
        return partitions[next(self._round_robin) % len(partitions)]

    def _attempt(self, batch: PendingBatch) -> None:
        topic, partition = batch.topic, batch.partition
        try:
            leader = self.metadata.leader(topic, partition)
        except Exception as error:  # unknown topic, no broker reachable
            batch.result.set_exception(error)
            return
        if leader < 0:
            self._failed(batch, ErrorCode.LEADER_NOT_AVAILABLE, "no leader")
            return
        request = ProduceRequest(
            acks=self.acks,
            timeout_ms=self.timeout_ms,
            partitions=(ProducePartition(topic=topic, partition=partition, records=batch.data),),
        )
        if self.acks == 0:
            self.client.tell_request(addresses.replica_manager(leader), request)
            batch.result.set_result(
                [RecordMetadata(topic, partition, -1, stamp) for stamp in batch.timestamps]
            )
            return
        sent = self.client.request(addresses.replica_manager(leader), request)

        def answered(done: Future[Any]) -> None:
            response = done.result()
            if isinstance(response, ErrorResponse):
                code, reason = response.error_code, response.message
            elif isinstance(response, ProduceResponse) and response.partitions:
                answer = response.partitions[0]
                code, reason = answer.error_code, ""
                if code is ErrorCode.NONE:
                    batch.result.set_result(
                        [
                            RecordMetadata(topic, partition, answer.base_offset + i, stamp)
                            for i, stamp in enumerate(batch.timestamps)
                        ]
                    )
                    return
            else:
                code, reason = ErrorCode.UNKNOWN_SERVER_ERROR, repr(response)
            self._failed(batch, code, reason)

        sent.add_done_callback(answered)

    def _failed(self, batch: PendingBatch, code: ErrorCode, reason: str) -> None:
        error = ProduceError(code, batch.topic, batch.partition, reason)
        if code in RETRIABLE:
            self.metadata.mark_stale(batch.topic)  # the next send asks where the leader is
        if code not in RETRIABLE or batch.retries_left <= 0 or self._closed.is_set():
            batch.result.set_exception(error)
            return
        batch.retries_left -= 1

        def retry() -> None:
            self._closed.wait(self.retry_backoff_ms / 1000)
            self._attempt(batch)

        try:
            self._sender.submit(retry)  # off the actor thread that delivered the answer
        except RuntimeError:  # closed meanwhile
            batch.result.set_exception(error)

    def close(self) -> None:
        self._closed.set()
        self._sender.shutdown(wait=True, cancel_futures=True)
        self.client.close()
