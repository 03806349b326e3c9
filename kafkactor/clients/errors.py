"""The errors the clients report: one type per place they surface, each with Kafka's error code.

Kafka's clients turn a failed request into an `ApiException` of the matching `Errors` code
(`NotEnoughReplicasException` for NOT_ENOUGH_REPLICAS, ...). Here that is a `ClientError`
carrying the `ErrorCode` itself: `ProduceError` fails a send's Future, `ConsumerError` is
raised by `Consumer.poll`, `CommitFailedError` by a consumer group's commit, and `ClientError`
itself by a metadata lookup (`partitions_for`). A transactional producer's methods raise
`TransactionError` (`ProducerFencedError` once another producer took its transactional id) and,
for a call in the wrong state, `TransactionStateError`.
"""

from __future__ import annotations

from typing import Any

from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode

__all__ = [
    "ClientError",
    "CommitFailedError",
    "ConsumerError",
    "ProduceError",
    "ProducerFencedError",
    "TransactionError",
    "TransactionStateError",
]


class ClientError(Exception):
    """Kafka's `ApiException`: a request failed with an `ErrorCode`, and why.

    `error_code` is Kafka's code, `reason` a human-readable detail, and `retriable` says whether
    Kafka marks the code retriable (trying again later may succeed). Errors pickle with their
    fields, like every other value that may cross a process.
    """

    def __init__(self, error_code: ErrorCode, reason: str = "") -> None:
        super().__init__(self._describe(error_code, reason))
        self.error_code = error_code
        self.reason = reason

    def _describe(self, error_code: ErrorCode, reason: str) -> str:
        return f"{error_code.name}: {reason}" if reason else error_code.name

    @property
    def retriable(self) -> bool:
        """Whether Kafka marks the code retriable (`ErrorCode.retriable`)."""
        return self.error_code.retriable

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.error_code, self.reason))


class ProduceError(ClientError):
    """Why a produce failed: the exception a Kafka producer's send Future fails with.

    `topic` and `partition` name where the records were going (`partition` is None when the
    topic was unknown before a partition could be chosen). Kafka's producer fails the Future
    with the partition's error from the broker (NOT_ENOUGH_REPLICAS, MESSAGE_TOO_LARGE,
    REQUEST_TIMED_OUT, ...) or with what it found itself (an unknown topic or partition, a
    record above `max_request_size`, no broker reachable, no answer within
    `request_timeout_ms`).
    """

    def __init__(
        self, error_code: ErrorCode, topic: str, partition: int | None, reason: str = ""
    ) -> None:
        self.topic = topic
        self.partition = partition
        super().__init__(error_code, reason)

    def _describe(self, error_code: ErrorCode, reason: str) -> str:
        where = self.topic if self.partition is None else f"{self.topic}-{self.partition}"
        detail = f": {reason}" if reason else ""
        return f"{error_code.name} producing to {where}{detail}"

    @property
    def topic_partition(self) -> TopicPartition | None:
        """Where the records were going, once a partition was chosen."""
        if self.partition is None:
            return None
        return TopicPartition(topic=self.topic, partition=self.partition)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.error_code, self.topic, self.partition, self.reason))


class ConsumerError(ClientError):
    """What a Kafka consumer's `poll` throws, with the partition it is about.

    Kafka names these by exception (`OffsetOutOfRangeException`, `UnknownTopicOrPartition`,
    ...); here the `error_code` says which: OFFSET_OUT_OF_RANGE with `auto_offset_reset`
    "none", UNKNOWN_TOPIC_OR_PARTITION for an assigned partition no broker knows,
    NOT_LEADER_FOR_PARTITION (or another leader error) that outlasted the consumer's retries,
    CORRUPT_MESSAGE for fetched bytes that do not parse, and any non-retriable fetch error.
    """

    def __init__(
        self, error_code: ErrorCode, topic_partition: TopicPartition, reason: str = ""
    ) -> None:
        self.topic_partition = topic_partition
        super().__init__(error_code, reason)

    def _describe(self, error_code: ErrorCode, reason: str) -> str:
        detail = f": {reason}" if reason else ""
        return f"{error_code.name} consuming {self.topic_partition}{detail}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.error_code, self.topic_partition, self.reason))


class CommitFailedError(ClientError):
    """Kafka's `CommitFailedException`: the group refused an offset commit because this
    consumer is no longer a member of the group's current generation.

    The group rebalanced without it (its session expired, or it was too slow to rejoin) and
    its partitions may already belong to another member, so the offsets are not committed.
    `error_code` says what the coordinator answered: UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION
    (the member was removed, or the generation moved on), or REBALANCE_IN_PROGRESS (the group
    is rebalancing). The consumer rejoins on its next `poll`; a commit can succeed again once
    it holds an assignment of the new generation.
    """


class TransactionError(ClientError):
    """A transactional producer's method failed (Kafka's `KafkaException` from
    `initTransactions`, `sendOffsetsToTransaction`, `commitTransaction`, ...), with the error
    code that caused it: the coordinator's answer, a failed send's code, or REQUEST_TIMED_OUT
    when the call's timeout passed first (Kafka's `TimeoutException`: calling the method again
    resumes it).

    `abortable` says what the producer can still do, as Kafka's `ABORTABLE_ERROR` and
    `FATAL_ERROR` states do: an abortable error (a send of the transaction failed, the group
    refused the offsets) leaves `abort_transaction` to call, then a new transaction may begin;
    a fatal one (fenced, an invalid transaction state) leaves only `close`.
    """

    def __init__(self, error_code: ErrorCode, reason: str = "", abortable: bool = False) -> None:
        self.abortable = abortable
        super().__init__(error_code, reason)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.error_code, self.reason, self.abortable))


class ProducerFencedError(TransactionError):
    """Kafka's `ProducerFencedException`: another producer initialized the same
    transactional id with a newer epoch (or the coordinator aborted this producer's timed-out
    transaction and bumped the epoch), so this one may never write in its name again. Fatal:
    every later transactional call raises it; only `close` is left.
    """

    def __init__(self, error_code: ErrorCode = ErrorCode.PRODUCER_FENCED, reason: str = "") -> None:
        super().__init__(error_code, reason, abortable=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.error_code, self.reason))


class TransactionStateError(RuntimeError):
    """A transactional method called in a state that does not allow it: Kafka's
    `IllegalStateException` / `KafkaException` "Invalid transition attempted from state X to
    state Y" (`begin_transaction` twice, `commit_transaction` with no transaction, a send
    before `init_transactions` or outside a transaction, a transactional method on a producer
    without a `transactional_id`). A programming error, raised at once; the producer's state is
    unchanged.
    """
