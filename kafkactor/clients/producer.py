"""The producer client: record batches to partition leaders, acks 0 / 1 / all."""

from __future__ import annotations

import itertools
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

from kafkactor.actors.runtime import Client, Directory, MailboxFullError, addresses
from kafkactor.clients.buffer_pool import BufferPool
from kafkactor.clients.consumer_coordinator import ConsumerGroupMetadata
from kafkactor.clients.errors import ClientError, ProduceError, TransactionStateError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.clients.request_timeouts import Attempt, RequestTimeouts
from kafkactor.clients.transaction_manager import TransactionManager
from kafkactor.clients.txn_request_handler import Deadline
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import ProducePartition, ProduceRequest, ProduceResponse
from kafkactor.storage import Record, build_batch, build_value_batch
from kafkactor.timer import Clock, SystemClock

_names = itertools.count(1)

# Errors after which the producer refreshes metadata and, with retries left, sends again: the
# codes Kafka marks retriable that a resend can cure, and BROKER_NOT_AVAILABLE (the broker
# stopped while the request waited; the partition's next leader may take the records).
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


class RecordMetadata(NamedTuple):
    """Kafka's `RecordMetadata`: where an acknowledged record landed.

    The offset is -1 with acks=0, since no broker said. A named tuple, as kafka-python's is:
    an acknowledged batch makes one per record, so it must be cheap to build (`_landed`).
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)


def _landed(
    topic: str, partition: int, offsets: Iterable[int], timestamps: Sequence[int]
) -> list[RecordMetadata]:
    """A `RecordMetadata` per timestamp, built in C (`tuple.__new__` over zipped fields, no
    Python frame per record): 100 records take ~35 us instead of ~160 us one by one."""
    fields = zip(itertools.repeat(topic), itertools.repeat(partition), offsets, timestamps)
    return list(map(tuple.__new__, itertools.repeat(RecordMetadata), fields))


@dataclass(slots=True, kw_only=True)
class _PendingBatch:
    """A batch on its way (Kafka's `ProducerBatch`): what to send, where, and its Future."""

    topic: str
    partition: int | None  # None until the metadata lets the partitioner choose
    key: bytes | None  # the first record's key, which the partitioner hashes
    data: bytes
    timestamps: list[int]
    result: Future[list[RecordMetadata]]
    retries_left: int
    sequence: int | None = None  # a transactional producer's, given when first sent


RecordLike = bytes | Record


class Producer:
    """Kafka's producer, without its accumulator: each `send` is one request to the leader.

    `send(topic, value, key=None, partition=None)` sends one record; `send_batch` sends many
    records as one batch to one partition (the unit the benchmark measures). Both return a
    Future of `RecordMetadata` (a list for a batch). With `partition=None` a keyed record goes
    to crc32(key) mod the partition count (Kafka hashes with murmur2; only the stability per
    key matters here), an unkeyed one round-robin. acks=0 Futures resolve as soon as the
    request is handed to the leader, with offset -1, since the broker never answers.

    **Errors are Futures.** Every failure of the produce itself fails the Future with
    `ProduceError` and Kafka's error code, never the call: an unknown topic or partition
    (UNKNOWN_TOPIC_OR_PARTITION, after one metadata refresh over the bootstrap brokers), no
    leader (LEADER_NOT_AVAILABLE), a batch above `max_request_size` (MESSAGE_TOO_LARGE, not
    sent), no broker reachable (NETWORK_EXCEPTION), no answer within `request_timeout_ms`
    (REQUEST_TIMED_OUT), and whatever the broker answers (NOT_ENOUGH_REPLICAS,
    INVALID_REQUIRED_ACKS, ...). Only programming errors raise at once, as Kafka's producers
    raise them: a closed producer (RuntimeError), a key, value or topic of the wrong type
    (TypeError), an empty batch or a negative partition (ValueError).

    Retriable errors (leader moved, broker down, not enough replicas, timeout) refresh the
    metadata and resend up to `retries` times, after `retry_backoff_ms`, on the producer's
    sender thread. A metadata refresh blocks `send` for at most `max_block_ms` (Kafka's
    max.block.ms); `timeout_ms` is how long the leader may wait for the ISR with acks=-1.

    **Backpressure** (Kafka's `buffer.memory`). The batches sent and not yet answered may
    hold `buffer_memory` bytes. A `send` that would go past it blocks until answers free
    room, for at most `max_block_ms`; then its Future fails with REQUEST_TIMED_OUT and it is
    not sent. So a caller faster than the brokers is slowed to their pace, and what waits
    for them stays bounded. A batch larger than `buffer_memory` fails at once
    (MESSAGE_TOO_LARGE); one blocked when the producer closes fails with NETWORK_EXCEPTION.
    A send also waits, up to `max_block_ms`, while the leader's replica manager has a full
    mailbox (`Directory.edge_mailbox_limit`); past that it fails with REQUEST_TIMED_OUT.

    **Transactions** (KIP-98). With a `transactional_id` the producer is transactional and
    idempotent (a `TransactionManager`): `init_transactions()` once, then per transaction
    `begin_transaction()`, sends, `send_offsets_to_transaction(offsets, group)` and
    `commit_transaction()` or `abort_transaction()`, each blocking for at most its `timeout_ms`
    (default `max_block_ms`). Its batches carry the producer id, epoch, per-partition sequences
    and the transactional bit; acks must be all (-1, the default then) and retries are
    unbounded unless given (Kafka's idempotence). A send outside a transaction raises
    `TransactionStateError`; after a failed send of the transaction the next transactional call
    raises `TransactionError` until `abort_transaction`; once fenced by a newer producer of the
    same id, `ProducerFencedError`. `transaction_timeout_ms` (Kafka's transaction.timeout.ms,
    60 s) is how long the coordinator lets a transaction stay open before aborting it.
    """

    def __init__(
        self,
        directory: Directory,
        bootstrap: Callable[[], Sequence[int]],
        *,
        acks: int | None = None,
        timeout_ms: int = 30_000,
        retries: int | None = None,
        retry_backoff_ms: int = 100,
        max_block_ms: int = 5_000,
        max_request_size: int = 1024 * 1024,
        request_timeout_ms: int = 30_000,
        buffer_memory: int = 32 * 1024 * 1024,
        name: str | None = None,
        clock: Clock | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60_000,
    ) -> None:
        if buffer_memory <= 0:
            raise ValueError(f"buffer_memory must be > 0, got {buffer_memory}")
        transactional = transactional_id is not None
        if transactional and acks not in (None, -1):  # Kafka's ConfigException
            raise ValueError(
                "Must set acks to all in order to use the idempotent producer. Otherwise we "
                "cannot guarantee idempotence."
            )
        if transactional and retries == 0:
            raise ValueError("Must set retries to non-zero when using the idempotent producer.")
        # acks is not checked here: the broker refuses a bad one (INVALID_REQUIRED_ACKS)
        self.acks = acks if acks is not None else (-1 if transactional else 1)
        self.timeout_ms = timeout_ms
        self.retries = retries if retries is not None else (2**31 - 1 if transactional else 0)
        self._sent_topics: set[str] = set()  # topics whose metadata this producer has had
        self.retry_backoff_ms = retry_backoff_ms
        self.max_request_size = max_request_size
        self.request_timeout_ms = request_timeout_ms
        self.max_block_ms = max_block_ms
        self._buffer = BufferPool(buffer_memory)
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.client = Client(
            name or f"producer-{next(_names)}", directory, self.clock, max_block_ms=max_block_ms
        )
        self.metadata = ClientMetadata(self.client, bootstrap, timeout_s=max_block_ms / 1000)
        self._round_robin = itertools.count()
        self._sender = ThreadPoolExecutor(1, thread_name_prefix=f"{self.client.address}-sender")
        self._timeouts = RequestTimeouts(f"{self.client.address}-timeouts")
        self._closed = threading.Event()
        self.transactions: TransactionManager | None = None
        if transactional_id is not None:
            self.transactions = TransactionManager(
                self.client,
                self.metadata,
                transactional_id,
                transaction_timeout_ms=transaction_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                request_timeout_ms=request_timeout_ms,
                closed=self._closed,
            )

    @property
    def address(self) -> str:
        return self.client.address

    # -- transactions (Kafka's KafkaProducer transactional methods) --------------------------

    def init_transactions(self, timeout_ms: int | None = None) -> None:
        """Get the producer id and epoch of the transactional id (fencing older producers of
        it, whose open transaction is aborted). Once, before the first transaction."""
        self._transactional().init_transactions(self._deadline(timeout_ms))

    def begin_transaction(self) -> None:
        """Start a transaction: the sends until commit or abort belong to it."""
        self._transactional().begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group: str | ConsumerGroupMetadata,
        timeout_ms: int | None = None,
    ) -> None:
        """Commit a consumer group's `offsets` (the next offset to read, per partition) with
        the transaction: visible to the group when it commits, dropped when it aborts. `group`
        is a group id, or a member's `Consumer.group_metadata()` (KIP-447: refused if the group
        moved on from that member)."""
        meta = group if isinstance(group, ConsumerGroupMetadata) else ConsumerGroupMetadata(group)
        self._transactional().send_offsets_to_transaction(
            offsets,
            meta.group_id,
            self._deadline(timeout_ms),
            generation_id=meta.generation_id,
            member_id=meta.member_id,
        )

    def commit_transaction(self, timeout_ms: int | None = None) -> None:
        """Wait for the transaction's sends, then commit it (EndTxn)."""
        self._transactional().commit_transaction(self._deadline(timeout_ms))

    def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Wait for the transaction's sends, then abort it: read_committed consumers never
        see its records, and its offsets are not committed."""
        self._transactional().abort_transaction(self._deadline(timeout_ms))

    def _transactional(self) -> TransactionManager:
        if self._closed.is_set():
            raise RuntimeError("the producer is closed")
        if self.transactions is None:  # Kafka: IllegalStateException
            raise TransactionStateError(
                "Transactional method invoked on a non-transactional producer."
            )
        return self.transactions

    def _deadline(self, timeout_ms: int | None) -> Deadline:
        return Deadline(self.max_block_ms if timeout_ms is None else timeout_ms)

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions; raises `ClientError` (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        return self.metadata.partitions(topic)

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future[RecordMetadata]:
        """Send one record; the Future holds where it landed, or fails with `ProduceError`."""
        self._check_call(topic, partition)
        stamp = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        record = Record(key, value, stamp)
        single: Future[RecordMetadata] = Future()
        batch = self._send(topic, build_batch([record], 0), key, [stamp], partition)

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
        self._check_call(topic, partition)
        if not records:
            raise ValueError("a batch needs at least one record")
        now = self.clock.now_ms()
        if not any(isinstance(r, Record) for r in records):  # bare values: no Record each
            data = build_value_batch(records, now)  # type: ignore[arg-type]
            return self._send(topic, data, None, [now] * len(records), partition)
        built = [r if isinstance(r, Record) else Record(None, r, now) for r in records]
        return self._send(
            topic, build_batch(built, 0), built[0].key, [r.timestamp_ms for r in built], partition
        )

    def _check_call(self, topic: str, partition: int | None) -> None:
        """The programming errors Kafka's producers raise at once rather than in the Future."""
        if self._closed.is_set():
            raise RuntimeError("the producer is closed")
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        if partition is not None:
            if not isinstance(partition, int) or isinstance(partition, bool):
                raise TypeError(f"partition must be an int or None, not {partition!r}")
            if partition < 0:
                raise ValueError(f"partition must be >= 0, got {partition}")
        if self.transactions is not None:
            self.transactions.check_send()

    def _send(
        self,
        topic: str,
        data: bytes,
        key: bytes | None,
        timestamps: list[int],
        partition: int | None,
    ) -> Future[list[RecordMetadata]]:
        batch = _PendingBatch(
            topic=topic,
            partition=partition,
            key=key,
            data=data,
            timestamps=timestamps,
            result=Future(),
            retries_left=self.retries,
        )
        size = len(data)
        if size > self.max_request_size:  # Kafka's RecordTooLargeException, not sent
            self._failed(
                batch,
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the batch is {size} bytes, above max_request_size={self.max_request_size}",
            )
        elif size > self._buffer.total:
            self._failed(
                batch,
                ErrorCode.MESSAGE_TOO_LARGE,
                f"the batch is {size} bytes, above buffer_memory={self._buffer.total}",
            )
        elif not self._buffer.reserve(size, self.max_block_ms / 1000):
            # not sent: no resend, and nothing said about where the leader is
            if self._closed.is_set():
                code, reason = ErrorCode.NETWORK_EXCEPTION, "the producer was closed"
            else:
                code, reason = (
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"buffer_memory={self._buffer.total} bytes still full after "
                    f"max_block_ms={self.max_block_ms}",
                )
            batch.result.set_exception(ProduceError(code, topic, partition, reason))
        else:
            batch.result.add_done_callback(lambda _: self._buffer.release(size))
            if self.transactions is not None:
                self.transactions.track(batch, batch.result)
            self._attempt(batch)
        return batch.result

    def _choose_partition(self, topic: str, key: bytes | None) -> int:
        partitions = self.metadata.partitions(topic)
        if key is not None:
            return partitions[zlib.crc32(key) % len(partitions)]
        return partitions[next(self._round_robin) % len(partitions)]

    def _attempt(self, batch: _PendingBatch) -> None:
        try:
            if batch.partition is None:
                batch.partition = self._choose_partition(batch.topic, batch.key)
            partition = batch.partition
            leader = self.metadata.leader(TopicPartition(topic=batch.topic, partition=partition))
        except ClientError as error:
            # The metadata wait is the bound for a topic or partition this producer never saw,
            # as Kafka's max.block.ms is: no resend. One it has sent to before is only missing
            # from the brokers' metadata for a while (restarted brokers learn it from the
            # controller): retried, as Kafka retries UNKNOWN_TOPIC_OR_PARTITION. No broker
            # reachable is retried like a network error.
            unknown = (
                error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                and batch.topic not in self._sent_topics
            )
            self._failed(batch, error.error_code, error.reason, retry=not unknown)
            return
        self._sent_topics.add(batch.topic)
        if leader < 0:
            self._failed(batch, ErrorCode.LEADER_NOT_AVAILABLE, "the partition has no leader")
            return
        topic, transactions = batch.topic, self.transactions
        if transactions is not None and batch.sequence is None:  # its first time out
            try:
                batch.data, batch.sequence = transactions.prepare_batch(
                    TopicPartition(topic=topic, partition=partition),
                    batch.data,
                    len(batch.timestamps),
                    self._deadline(None),
                )
            except ClientError as error:
                self._failed(batch, error.error_code, error.reason, retry=False)
                return
        request = ProduceRequest(
            acks=self.acks,
            timeout_ms=self.timeout_ms,
            partitions=(ProducePartition(topic=topic, partition=partition, records=batch.data),),
            transactional_id=None if transactions is None else transactions.transactional_id,
        )
        if self.acks == 0:
            try:
                delivered = self.client.tell_request(addresses.replica_manager(leader), request)
            except MailboxFullError as full:
                self._failed(batch, ErrorCode.REQUEST_TIMED_OUT, str(full))
                return
            if not delivered:
                self._failed(batch, ErrorCode.NETWORK_EXCEPTION, f"broker {leader} is unreachable")
                return
            batch.result.set_result(
                _landed(topic, partition, itertools.repeat(-1), batch.timestamps)
            )
            return
        attempt = Attempt()
        sent: Future[Any] = Future()

        def gave_up(code: ErrorCode, reason: str) -> None:  # timed out, or the producer closed
            if attempt.claim():
                self.client.abandon(sent)
                self._failed(batch, code, f"{reason} (broker {leader})")

        answered_in_time = self._timeouts.add(self.request_timeout_ms / 1000, gave_up)
        sent = self.client.request(addresses.replica_manager(leader), request)

        def answered(done: Future[Any]) -> None:
            if not attempt.claim():
                return  # it timed out first: Kafka drops a late answer too
            answered_in_time()
            response = done.result()
            if isinstance(response, ErrorResponse):
                code, reason = response.error_code, response.message
            elif isinstance(response, ProduceResponse) and response.partitions:
                answer = response.partitions[0]
                code, reason = answer.error_code, f"refused by broker {leader}"
                if code is ErrorCode.NONE:
                    first = answer.base_offset
                    batch.result.set_result(
                        _landed(topic, partition, itertools.count(first), batch.timestamps)
                    )
                    return
            else:
                code, reason = ErrorCode.UNKNOWN_SERVER_ERROR, repr(response)
            self._failed(batch, code, reason)

        sent.add_done_callback(answered)

    def _failed(
        self, batch: _PendingBatch, code: ErrorCode, reason: str, *, retry: bool = True
    ) -> None:
        error = ProduceError(code, batch.topic, batch.partition, reason)
        if code in RETRIABLE:
            self.metadata.mark_stale(batch.topic)  # the next send asks where the leader is
        transactions = self.transactions
        if transactions is not None:  # a batch that overtook another is sent again; none
            retriable = code in RETRIABLE or transactions.may_retry(batch, code)  # aborting
            retry = retry and retriable and not transactions.aborting
        else:
            retry = retry and code in RETRIABLE
        retry = retry and batch.retries_left > 0
        if not retry or self._closed.is_set():
            batch.result.set_exception(error)
            return
        batch.retries_left -= 1

        def resend() -> None:
            self._closed.wait(self.retry_backoff_ms / 1000)
            if self._closed.is_set() or (transactions is not None and transactions.aborting):
                batch.result.set_exception(error)
            elif transactions is not None and not transactions.may_resend(batch):
                schedule()  # an earlier batch of its partition goes (or is answered) first
            else:
                try:
                    self._attempt(batch)
                except Exception as unexpected:  # never leave the Future pending
                    if not batch.result.done():
                        batch.result.set_exception(unexpected)

        def schedule() -> None:
            try:
                self._sender.submit(resend)  # off the actor thread that delivered the answer
            except RuntimeError:  # closed meanwhile
                batch.result.set_exception(error)

        schedule()

    def close(self) -> None:
        """Stop sending. Requests still unanswered fail with NETWORK_EXCEPTION (the answer is
        lost, as when a connection drops), resends waiting for their backoff with their last
        error; later `send` calls raise RuntimeError."""
        self._closed.set()
        self._buffer.close()  # a send blocked for room fails now
        self._sender.shutdown(wait=True)  # queued resends see the flag and fail their batch
        self._timeouts.abort_all(ErrorCode.NETWORK_EXCEPTION, "the producer was closed")
        self.client.close()
