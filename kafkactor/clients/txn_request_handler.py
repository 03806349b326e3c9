"""How a transactional producer asks its coordinators (Kafka's `TxnRequestHandler` and its
FindCoordinator): find the coordinator, send, and on the answers Kafka retries (the coordinator
moved, is loading, or the previous transaction is still completing) find it again and resend
after a backoff, until the caller's deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.runtime import Client, RequestTimeoutError, addresses
from kafkactor.actors.transaction import partition_for_transactional_id
from kafkactor.clients.errors import ClientError, TransactionError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.common import NO_LEADER, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse, Request

__all__ = [
    "CoordinatorType",
    "Deadline",
    "TxnRequestHandler",
    "error_code",
    "fenced_reason",
    "kafka_message",
]

# The coordinator cannot take the request now, or is not the coordinator any more: find it
# again and resend (Kafka's handlers call lookupCoordinator and reenqueue).
_FIND_AGAIN = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
# The same coordinator will take it later: resend after the backoff (reenqueue).
_RESEND = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
# Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS: the first AddPartitionsToTxn of a transaction that
# meets CONCURRENT_TRANSACTIONS (the previous one still writing its markers) retries sooner.
CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20


@dataclass(frozen=True, slots=True)
class CoordinatorType:
    """Kafka's FindCoordinator key types: the internal topic whose partition of a key
    (`partition_for(key, partitions)`) has the key's coordinator as its leader."""

    topic: str
    partition_for: Callable[[str, int], int]
    address: Callable[[int], str]


TRANSACTION = CoordinatorType(
    TRANSACTION_STATE_TOPIC, partition_for_transactional_id, addresses.transaction_coordinator
)
GROUP = CoordinatorType(OFFSETS_TOPIC, partition_for, addresses.group_coordinator)


class Deadline:
    """A blocking transactional call's bound (Kafka's `max.block.ms`, or the call's timeout):
    `expired(operation)` is Kafka's "Timeout expired after Xms while awaiting Op"."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self.at = time.monotonic() + timeout_ms / 1000

    def remaining_s(self) -> float:
        return self.at - time.monotonic()

    def expired(self, operation: str) -> TransactionError:
        return TransactionError(
            ErrorCode.REQUEST_TIMED_OUT,
            f"Timeout expired after {self.timeout_ms}ms while awaiting {operation}",
        )


def error_code(response: Any) -> ErrorCode:
    """The code of an answer with one (`error_code`), else of its first failed partition."""
    code = getattr(response, "error_code", None)
    if isinstance(code, ErrorCode):
        return code
    for part in getattr(response, "partitions", ()):
        if part.error_code not in (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED):
            return ErrorCode(part.error_code)
    return ErrorCode.NONE


class TxnRequestHandler:
    """Sends a transactional producer's requests to the coordinator of a key.

    The coordinator of a transactional id is the leader of its `__transaction_state` partition,
    that of a group the leader of its `__consumer_offsets` partition, both found from the
    client's metadata (what FindCoordinator answers over the wire). `ask` returns the first
    answer that is not to be retried; `TransactionError(REQUEST_TIMED_OUT)` when the deadline
    passes first.
    """

    def __init__(
        self,
        client: Client,
        metadata: ClientMetadata,
        *,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        closed: threading.Event,
    ) -> None:
        self.client = client
        self.metadata = metadata
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._closed = closed
        self._lock = threading.Lock()
        self._coordinators: dict[tuple[str, str], int] = {}

    def coordinator(self, kind: CoordinatorType, key: str) -> int:
        """The broker coordinating `key`, from fresh metadata; -1 while there is none."""
        with self._lock:
            known = self._coordinators.get((kind.topic, key))
        if known is not None:
            return known
        leader = NO_LEADER
        try:
            self.metadata.mark_stale(kind.topic)
            count = len(self.metadata.partitions(kind.topic))
            partition = kind.partition_for(key, count)
            leader = self.metadata.leader(TopicPartition(topic=kind.topic, partition=partition))
        except ClientError:
            pass  # the topic is not there yet, or no broker answered: looked up again later
        if leader >= 0:
            with self._lock:
                self._coordinators[(kind.topic, key)] = leader
        return leader

    def forget(self, kind: CoordinatorType, key: str) -> None:
        with self._lock:
            self._coordinators.pop((kind.topic, key), None)

    def ask(
        self,
        kind: CoordinatorType,
        key: str,
        request: Request,
        deadline: Deadline,
        operation: str,
        *,
        concurrent_backoff_ms: int | None = None,
    ) -> Any:
        """The coordinator's answer to `request`, retried as Kafka's handlers retry it."""
        while True:
            if self._closed.is_set():
                raise TransactionError(ErrorCode.NETWORK_EXCEPTION, "the producer was closed")
            if deadline.remaining_s() <= 0:
                raise deadline.expired(operation)
            coordinator = self.coordinator(kind, key)
            if coordinator < 0:
                self._backoff(deadline, self.retry_backoff_ms)
                continue
            timeout_s = max(min(deadline.remaining_s(), self.request_timeout_ms / 1000), 0.001)
            try:
                response = self.client.call(kind.address(coordinator), request, timeout_s)
            except RequestTimeoutError:
                response = ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
            code = error_code(response)
            if isinstance(response, ErrorResponse) or code in _FIND_AGAIN:
                self.forget(kind, key)
                self._backoff(deadline, self.retry_backoff_ms)
            elif code in _RESEND:
                backoff = self.retry_backoff_ms
                if code is ErrorCode.CONCURRENT_TRANSACTIONS and concurrent_backoff_ms is not None:
                    backoff = min(backoff, concurrent_backoff_ms)
                self._backoff(deadline, backoff)
            else:
                return response

    def _backoff(self, deadline: Deadline, backoff_ms: int) -> None:
        self._closed.wait(max(0.0, min(backoff_ms / 1000, deadline.remaining_s())))


# Kafka's Errors messages of the codes a transactional call may fail with
_KAFKA_MESSAGES = {
    ErrorCode.INVALID_TXN_STATE: (
        "The producer attempted a transactional operation in an invalid state."
    ),
    ErrorCode.INVALID_PRODUCER_ID_MAPPING: (
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."
    ),
    ErrorCode.INVALID_TRANSACTION_TIMEOUT: (
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms)."
    ),
}


def kafka_message(code: ErrorCode) -> str:
    """Kafka's message for `code` (its name when this client has none for it)."""
    return _KAFKA_MESSAGES.get(code, code.name)


def fenced_reason(operation: str) -> str:
    """Why a transactional call was fenced (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH)."""
    return (
        f"{operation}: there is a newer producer with the same transactional id, or this "
        "producer's transaction timed out and was aborted (its epoch was bumped)"
    )
