"""The transactional producer's side of a transaction: Kafka's client `TransactionManager`
(KIP-98), driving InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
EndTxn, and the producer id, epoch and sequences its batches carry."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future, wait
from typing import Any, Protocol

from kafkactor.actors.runtime import Client
from kafkactor.clients.errors import (
    ClientError,
    CommitFailedError,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
)
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.clients.producer_batch import stamp_producer_state
from kafkactor.clients.transaction_state import (
    PartitionSequences,
    TransactionState,
    check_transition,
)
from kafkactor.clients.txn_request_handler import (
    CONCURRENT_TRANSACTIONS_BACKOFF_MS,
    GROUP,
    TRANSACTION,
    Deadline,
    TxnRequestHandler,
    error_code,
    fenced_reason,
    kafka_message,
)
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.transaction import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitPartition,
    TxnOffsetCommitRequest,
    TxnPartition,
)

__all__ = ["SentBatch", "TransactionManager"]

_S = TransactionState
_FENCED = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
# the producer's state on the broker is unknown: an abort bumps the epoch (KIP-360)
_BUMP = frozenset({ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING})
# a batch that overtook an earlier one of its partition (a leader change) is sent again
_OVERTAKEN = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.UNKNOWN_PRODUCER_ID})
# written but not replicated in time: safe to send again with its sequence (the leader answers
# a duplicate with the first write's offsets), as Kafka's idempotent producer retries it
_RESEND_SEQUENCED = frozenset({ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND})


class SentBatch(Protocol):
    """What the transaction manager reads of a producer's batch."""

    topic: str
    partition: int | None
    sequence: int | None


class TransactionManager:
    """Kafka's producer `TransactionManager` for one `transactional_id`.

    The producer calls `init_transactions` once (InitProducerId to the transactional id's
    coordinator: the producer id and a new epoch, fencing older producers of the id), then per
    transaction `begin_transaction`, its sends, optionally `send_offsets_to_transaction`, and
    `commit_transaction` or `abort_transaction`. Before the first record of a transaction goes
    to a partition, AddPartitionsToTxn must be acknowledged (`prepare_batch`, on the send's
    path); every batch carries the producer id, epoch, its partition's next sequence and the
    transactional bit. Committing first waits for every send of the transaction (Kafka's flush),
    then EndTxn(commit); aborting waits too, then EndTxn(abort).

    Errors follow Kafka's states: a send of the transaction that fails makes it
    ABORTABLE_ERROR (commit raises, abort clears it, bumping the epoch when the failed batch
    had a sequence, KIP-360); PRODUCER_FENCED / INVALID_PRODUCER_EPOCH make it FATAL_ERROR
    (`ProducerFencedError` from then on). A method called in the wrong state raises
    `TransactionStateError` and changes nothing. Every blocking method takes a timeout; when
    it passes first, `TransactionError(REQUEST_TIMED_OUT)`, and calling it again resumes.
    """

    def __init__(
        self,
        client: Client,
        metadata: ClientMetadata,
        transactional_id: str,
        *,
        transaction_timeout_ms: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        closed: threading.Event,
    ) -> None:
        if not isinstance(transactional_id, str) or not transactional_id:
            raise ValueError(f"transactional_id must be a non-empty str, not {transactional_id!r}")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.requests = TxnRequestHandler(
            client,
            metadata,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
            closed=closed,
        )
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._state = _S.UNINITIALIZED
        self._last_error: TransactionError | None = None
        self._lock = threading.RLock()  # the state, partitions, sequences, pending sends
        self._calls = threading.Lock()  # one transactional method at a time
        self._adding = threading.Lock()  # one AddPartitionsToTxn at a time
        self._sequences = PartitionSequences()
        self._partitions: set[TopicPartition] = set()  # acknowledged by the coordinator
        self._pending: set[Future[Any]] = set()  # sends of the transaction not yet answered
        self._started = False  # the coordinator knows a partition or group of this one
        self._epoch_bump_required = False

    # -- state ------------------------------------------------------------------------------

    @property
    def state(self) -> TransactionState:
        return self._state

    @property
    def aborting(self) -> bool:
        """Ending by abort: a send waiting to be retried fails instead (Kafka aborts the
        batches it has not sent yet)."""
        return self._state is _S.ABORTING_TRANSACTION

    def _transition(self, target: TransactionState, error: TransactionError | None = None) -> None:
        with self._lock:
            check_transition(self.transactional_id, self._state, target)
            self._state = target
            if error is not None:
                self._last_error = error
            elif target in (_S.READY, _S.IN_TRANSACTION):
                self._last_error = None

    def _fatal(self, error: TransactionError) -> TransactionError:
        with self._lock:
            self._transition(_S.FATAL_ERROR, error)
        return error

    def _abortable(self, error: TransactionError) -> TransactionError:
        with self._lock:
            if self._state is not _S.ABORTING_TRANSACTION:  # (Kafka: already aborting)
                self._transition(_S.ABORTABLE_ERROR, error)
        return error

    def _maybe_fail_with_error(self) -> None:
        """Kafka's maybeFailWithError: a fatal error again, or why an abort is due."""
        with self._lock:
            error = self._last_error
            if self._state is _S.FATAL_ERROR and error is not None:
                raise error
            if self._state is _S.ABORTABLE_ERROR and error is not None:
                raise TransactionError(
                    error.error_code,
                    "Cannot execute transactional method because we are in an error state: "
                    f"{error.reason or error.error_code.name}; abort the transaction",
                    abortable=True,
                )

    def check_send(self) -> None:
        """Kafka's failIfNotReadyForSend: a send needs an open transaction."""
        with self._lock:
            if self._state in (_S.ABORTABLE_ERROR, _S.FATAL_ERROR):
                error = self._last_error
                code = error.error_code if error is not None else ErrorCode.UNKNOWN_SERVER_ERROR
                if isinstance(error, ProducerFencedError):
                    raise error
                raise TransactionError(
                    code,
                    "Cannot perform send because at least one previous transactional or "
                    "idempotent request has failed with errors.",
                    abortable=self._state is _S.ABORTABLE_ERROR,
                )
            if self.producer_id == NO_PRODUCER_ID:
                raise TransactionStateError(
                    "Cannot perform a 'send' before completing a call to initTransactions "
                    "when transactions are enabled."
                )
            if self._state is not _S.IN_TRANSACTION:
                raise TransactionStateError(f"Cannot call send in state {self._state.name}")

    # -- the producer's methods --------------------------------------------------------------

    def init_transactions(self, deadline: Deadline) -> None:
        with self._calls:
            if self._state is not _S.INITIALIZING:  # (again after a timeout: resume)
                self._transition(_S.INITIALIZING)
            self._init_producer_id(deadline, bump=False)

    def begin_transaction(self) -> None:
        with self._calls:
            self._maybe_fail_with_error()
            self._transition(_S.IN_TRANSACTION)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        deadline: Deadline,
        *,
        generation_id: int = -1,
        member_id: str = "",
    ) -> None:
        with self._calls:
            self._maybe_fail_with_error()
            if self._state is not _S.IN_TRANSACTION:
                raise TransactionStateError(
                    "Cannot send offsets to transaction either because the producer is not in "
                    "an active transaction"
                )
            request = AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                group_id=group_id,
            )
            self._coordinator_answer(request, deadline, "AddOffsetsToTxn")
            with self._lock:
                self._started = True
            self._txn_offset_commit(offsets, group_id, deadline, generation_id, member_id)

    def commit_transaction(self, deadline: Deadline) -> None:
        with self._calls:
            if self._state is not _S.COMMITTING_TRANSACTION:  # (again after a timeout: resume)
                self._maybe_fail_with_error()
                self._transition(_S.COMMITTING_TRANSACTION)
            self._flush(deadline, "EndTxn(true)")
            self._maybe_fail_with_error()  # a send of the transaction failed: abort it
            self._end_transaction(deadline, committed=True)

    def abort_transaction(self, deadline: Deadline) -> None:
        with self._calls:
            if self._state is _S.INITIALIZING and self._epoch_bump_required:
                self._init_producer_id(deadline, bump=True)  # an abort that timed out in it
                return
            if self._state is not _S.ABORTING_TRANSACTION:
                if self._state is not _S.ABORTABLE_ERROR:
                    self._maybe_fail_with_error()
                self._transition(_S.ABORTING_TRANSACTION)
            self._flush(deadline, "EndTxn(false)")
            self._end_transaction(deadline, committed=False)

    # -- the send path -----------------------------------------------------------------------

    def prepare_batch(
        self, tp: TopicPartition, data: bytes, record_count: int, deadline: Deadline
    ) -> tuple[bytes, int]:
        """The batch to send to `tp` with this producer's id, epoch, the partition's next
        sequence and the transactional bit, once the coordinator knows `tp` is in the
        transaction (AddPartitionsToTxn, sent before the first record to it). Raises
        `ClientError` when it may not go: the producer fails the batch with its code."""
        with self._adding:
            try:
                self._check_batch()
                with self._lock:
                    added = tp in self._partitions
                if not added:
                    self._add_partition(tp, deadline)
                with self._lock:
                    self._check_batch()
                    sequence = self._sequences.assign(tp, record_count)
                    producer_id, epoch = self.producer_id, self.producer_epoch
            except TransactionStateError as late:  # the transaction ended while it waited
                raise TransactionError(ErrorCode.INVALID_TXN_STATE, str(late)) from late
        return stamp_producer_state(data, producer_id, epoch, sequence, True), sequence

    def _check_batch(self) -> None:
        """A batch `send` took in the transaction goes out while it commits too (Kafka drains
        the accumulator before EndTxn): one whose first try waited for a leader, say."""
        if self._state is not _S.COMMITTING_TRANSACTION:
            self.check_send()

    def track(self, batch: SentBatch, result: Future[Any]) -> None:
        """Follow a send of the transaction until it is answered (a commit waits for it)."""
        with self._lock:
            self._pending.add(result)
        result.add_done_callback(lambda done: self._completed(batch, done))

    def may_retry(self, batch: SentBatch, code: ErrorCode) -> bool:
        """Whether a batch refused with `code` is sent again besides the producer's retriable
        codes: one that overtook an earlier batch of its partition (OUT_OF_ORDER_SEQUENCE
        while that one is unanswered), or NOT_ENOUGH_REPLICAS_AFTER_APPEND (a duplicate)."""
        if batch.sequence is None or batch.partition is None:
            return False
        if code in _RESEND_SEQUENCED:
            return True
        if code not in _OVERTAKEN:
            return False
        tp = TopicPartition(topic=batch.topic, partition=batch.partition)
        with self._lock:
            return self._sequences.earlier_in_flight(tp, batch.sequence)

    def may_resend(self, batch: SentBatch) -> bool:
        """Whether a failed batch may go again now: only as the first of its partition still
        unanswered, so that resends keep sequence order across a leader change (Kafka's
        sender drains a retried batch only when it is the first in flight)."""
        if batch.sequence is None or batch.partition is None:
            return True
        tp = TopicPartition(topic=batch.topic, partition=batch.partition)
        with self._lock:
            return not self._sequences.earlier_in_flight(tp, batch.sequence)

    def _completed(self, batch: SentBatch, result: Future[Any]) -> None:
        error = result.exception()
        with self._lock:
            self._pending.discard(result)
            if batch.sequence is not None and batch.partition is not None:
                tp = TopicPartition(topic=batch.topic, partition=batch.partition)
                self._sequences.completed(tp, batch.sequence)
            if error is None or self._state in (_S.FATAL_ERROR, _S.READY, _S.UNINITIALIZED):
                return
            code = (
                error.error_code
                if isinstance(error, ClientError)
                else ErrorCode.UNKNOWN_SERVER_ERROR
            )
            if code in _FENCED:
                self._fatal(ProducerFencedError(ErrorCode.PRODUCER_FENCED, str(error)))
                return
            if batch.sequence is not None:
                self._epoch_bump_required = True  # its sequence may be lost: a new epoch
            if self._state is not _S.INITIALIZING:
                self._abortable(TransactionError(code, str(error), abortable=True))

    def _flush(self, deadline: Deadline, operation: str) -> None:
        """Wait for every send of the transaction to be answered."""
        with self._lock:
            pending = list(self._pending)
        if pending:
            _, not_done = wait(pending, timeout=max(deadline.remaining_s(), 0))
            if not_done:
                raise deadline.expired(operation)

    # -- requests ----------------------------------------------------------------------------

    def _coordinator_answer(self, request: Any, deadline: Deadline, operation: str) -> None:
        """Send to the transaction coordinator; raise the error its answer means, if any
        (Kafka's handlers: fenced and INVALID_TXN_STATE fatal; an unknown producer id
        abortable with an epoch bump; anything else unexpected fatal)."""
        backoff = CONCURRENT_TRANSACTIONS_BACKOFF_MS if not self._partitions else None
        response = self.requests.ask(
            TRANSACTION,
            self.transactional_id,
            request,
            deadline,
            operation,
            concurrent_backoff_ms=backoff,
        )
        code = error_code(response)
        if code is ErrorCode.NONE:
            return
        if code in _FENCED:
            raise self._fatal(
                ProducerFencedError(ErrorCode.PRODUCER_FENCED, fenced_reason(operation))
            )
        if code in _BUMP:
            with self._lock:
                self._epoch_bump_required = True
            raise self._abortable(
                TransactionError(code, f"{operation}: {kafka_message(code)}", True)
            )
        raise self._fatal(
            TransactionError(
                code, f"Unexpected error in {operation}Response; {kafka_message(code)}"
            )
        )

    def _init_producer_id(self, deadline: Deadline, *, bump: bool) -> None:
        request = InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id if bump else NO_PRODUCER_ID,
            producer_epoch=self.producer_epoch if bump else NO_PRODUCER_EPOCH,
        )
        response = self.requests.ask(
            TRANSACTION, self.transactional_id, request, deadline, "InitProducerId"
        )
        code = error_code(response)
        if code in _FENCED:
            raise self._fatal(
                ProducerFencedError(ErrorCode.PRODUCER_FENCED, fenced_reason("InitProducerId"))
            )
        if code is not ErrorCode.NONE:
            raise self._fatal(
                TransactionError(
                    code, f"Unexpected error in InitProducerIdResponse; {kafka_message(code)}"
                )
            )
        with self._lock:
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self._sequences.reset()
            self._epoch_bump_required = False
            self._transition(_S.READY)

    def _add_partition(self, tp: TopicPartition, deadline: Deadline) -> None:
        request = AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            partitions=(TxnPartition(topic=tp.topic, partition=tp.partition),),
        )
        try:
            self._coordinator_answer(request, deadline, "AddPartitionsToTxn")
        except TransactionError as error:
            if error.error_code is ErrorCode.REQUEST_TIMED_OUT:
                raise  # not added, nothing else changed: a later send asks again
            if error.error_code is ErrorCode.INVALID_TXN_STATE or isinstance(
                error, ProducerFencedError
            ):
                raise
            raise self._abortable(
                TransactionError(error.error_code, f"could not add {tp} to the transaction", True)
            ) from error
        with self._lock:
            self._partitions.add(tp)
            self._started = True

    def _txn_offset_commit(
        self,
        offsets: Mapping[TopicPartition, int],
        group_id: str,
        deadline: Deadline,
        generation_id: int,
        member_id: str,
    ) -> None:
        request = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=generation_id,
            member_id=member_id,
            partitions=tuple(
                TxnOffsetCommitPartition(topic=tp.topic, partition=tp.partition, offset=offset)
                for tp, offset in offsets.items()
            ),
        )
        response = self.requests.ask(GROUP, group_id, request, deadline, "TxnOffsetCommit")
        code = error_code(response)
        if code is ErrorCode.NONE:
            return
        if code in _FENCED:
            raise self._fatal(
                ProducerFencedError(ErrorCode.PRODUCER_FENCED, fenced_reason("TxnOffsetCommit"))
            )
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            cause = CommitFailedError(code, "the group's generation moved on")
            raise self._abortable(
                TransactionError(
                    code,
                    "Transaction offset Commit failed due to consumer group metadata mismatch: "
                    f"{cause}",
                    abortable=True,
                )
            )
        if code in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.FENCED_INSTANCE_ID):
            raise self._abortable(TransactionError(code, f"group {group_id!r}", abortable=True))
        raise self._fatal(
            TransactionError(
                code, f"Unexpected error in TxnOffsetCommitResponse; {kafka_message(code)}"
            )
        )

    def _end_transaction(self, deadline: Deadline, *, committed: bool) -> None:
        """EndTxn, if the coordinator knows of the transaction (Kafka skips it otherwise), then
        READY, or a new epoch first when the abort must bump it (KIP-360)."""
        operation = f"EndTxn({str(committed).lower()})"
        if self._started:
            request = EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=committed,
            )
            self._coordinator_answer(request, deadline, operation)
        with self._lock:
            self._started = False
            self._partitions.clear()
            bump = self._epoch_bump_required
            self._transition(_S.INITIALIZING if bump else _S.READY)
        if bump:
            self._init_producer_id(deadline, bump=True)
