"""The transactional producer's protocol, against a stub broker that records every request and
answers as a test scripts it: which requests go in which order (AddPartitionsToTxn before a
partition's first record, EndTxn only after the transaction's sends are answered), what the
batches carry, which answers are retried, and the typed errors Kafka's TransactionManager
raises for each failure."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.actors.runtime import Directory, addresses
from kafkactor.clients import (
    ConsumerGroupMetadata,
    ProduceError,
    Producer,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
)
from kafkactor.clients.transaction_state import TransactionState
from kafkactor.common import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    TopicMetadata,
)
from kafkactor.messages.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnPartitionError,
)
from kafkactor.storage import RecordBatch
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(30)

TOPIC = "out"
TID = "stage-1"
PID = 4000


class StubBroker:
    """Broker 1 alone: it leads every partition of TOPIC (2), __transaction_state and
    __consumer_offsets (1 each); its transaction and group coordinators answer NONE unless a
    code is queued for a request type (`script`); produce requests are answered at once, or
    held while `hold_produce` is set."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory
        self.requests: list[Any] = []
        self.script: dict[type, list[ErrorCode | None]] = {}  # None: never answered
        self.hold_produce = False
        self.leaderless = False  # TOPIC's partitions without a leader in the metadata
        self.held: list[ProduceRequest] = []
        self.epoch = 0
        self._lock = threading.Lock()
        self._offset = 0
        for address in (
            addresses.replica_manager(1),
            addresses.transaction_coordinator(1),
            addresses.group_coordinator(1),
        ):
            directory.register(address, self)

    def tell(self, message: Any) -> None:
        request = getattr(message, "payload", message)
        if isinstance(request, MetadataRequest):
            self._reply(request, MetadataResponse(brokers=(1,), topics=_topics(self.leaderless)))
            return
        with self._lock:
            self.requests.append(request)
            queued = self.script.get(type(request))
            code = queued.pop(0) if queued else ErrorCode.NONE
            if isinstance(request, ProduceRequest) and self.hold_produce:
                self.held.append(request)
                return
        if code is not None:
            self._reply(request, self._answer(request, code))

    def _answer(self, request: Any, code: ErrorCode) -> Any:
        if isinstance(request, InitProducerIdRequest):
            if code is ErrorCode.NONE:
                self.epoch += 1
            return InitProducerIdResponse(
                error_code=code, producer_id=PID, producer_epoch=self.epoch
            )
        if isinstance(request, AddPartitionsToTxnRequest | TxnOffsetCommitRequest):
            errors = tuple(
                TxnPartitionError(topic=p.topic, partition=p.partition, error_code=code)
                for p in request.partitions
            )
            if isinstance(request, AddPartitionsToTxnRequest):
                return AddPartitionsToTxnResponse(partitions=errors)
            return TxnOffsetCommitResponse(partitions=errors)
        if isinstance(request, AddOffsetsToTxnRequest):
            return AddOffsetsToTxnResponse(error_code=code)
        if isinstance(request, EndTxnRequest):
            return EndTxnResponse(error_code=code)
        assert isinstance(request, ProduceRequest)
        return self._produced(request, code)

    def _produced(self, request: ProduceRequest, code: ErrorCode) -> ProduceResponse:
        part = request.partitions[0]
        with self._lock:
            offset, self._offset = self._offset, self._offset + 10
        result = ProducePartitionResult(
            topic=part.topic, partition=part.partition, base_offset=offset, error_code=code
        )
        return ProduceResponse(partitions=(result,))

    def release_produce(self) -> None:
        with self._lock:
            held, self.held, self.hold_produce = self.held, [], False
        for request in held:
            self._reply(request, self._produced(request, ErrorCode.NONE))

    def _reply(self, request: Any, response: Any) -> None:
        answer = dataclasses.replace(response, correlation_id=request.correlation_id)
        self.directory.tell(request.reply_to, answer)

    def sent(self, *kinds: type) -> list[Any]:
        with self._lock:
            return [r for r in self.requests if isinstance(r, kinds)]

    def names(self) -> list[str]:
        return [type(r).__name__.removesuffix("Request") for r in self.sent(object)]


def _topics(leaderless: bool = False) -> tuple[TopicMetadata, ...]:
    def led(*partitions: int, leader: int = 1) -> tuple[PartitionMetadata, ...]:
        return tuple(
            PartitionMetadata(partition=p, leader=leader, replicas=(1,), isr=(1,))
            for p in partitions
        )

    return (
        TopicMetadata(topic=TOPIC, partitions=led(0, 1, leader=-1 if leaderless else 1)),
        TopicMetadata(topic=TRANSACTION_STATE_TOPIC, partitions=led(0)),
        TopicMetadata(topic=OFFSETS_TOPIC, partitions=led(0)),
    )


@pytest.fixture
def broker() -> StubBroker:
    return StubBroker(Directory())


@pytest.fixture
def producer(broker: StubBroker) -> Iterator[Producer]:
    made = Producer(
        broker.directory,
        lambda: [1],
        transactional_id=TID,
        transaction_timeout_ms=5_000,
        retry_backoff_ms=5,
        max_block_ms=5_000,
        request_timeout_ms=5_000,
    )
    yield made
    made.close()


def pause_then(condition: Any, seconds: float = 0.3) -> Any:
    """`condition()` after `seconds`: for what must NOT happen meanwhile."""
    threading.Event().wait(seconds)
    return condition()


def _batch(request: ProduceRequest) -> RecordBatch:
    return RecordBatch(request.partitions[0].records)


def test_a_transactional_method_in_the_wrong_state_raises_kafkas_illegal_state(
    broker: StubBroker, producer: Producer
) -> None:
    with pytest.raises(TransactionStateError, match="before completing a call to initTransactions"):
        producer.send(TOPIC, b"v", partition=0)
    with pytest.raises(
        TransactionStateError, match="from state UNINITIALIZED to state IN_TRANSACTION"
    ):
        producer.begin_transaction()
    producer.init_transactions()
    with pytest.raises(TransactionStateError, match="Cannot call send in state READY"):
        producer.send(TOPIC, b"v", partition=0)
    with pytest.raises(
        TransactionStateError, match="from state READY to state COMMITTING_TRANSACTION"
    ):
        producer.commit_transaction()
    with pytest.raises(TransactionStateError, match="from state READY to state INITIALIZING"):
        producer.init_transactions()
    with pytest.raises(TransactionStateError, match="not in an active transaction"):
        producer.send_offsets_to_transaction({}, "g")
    plain = Producer(broker.directory, lambda: [1])
    with pytest.raises(TransactionStateError, match="non-transactional producer"):
        plain.begin_transaction()
    plain.close()
    assert broker.names() == ["InitProducerId"]  # nothing else was sent


def test_acks_other_than_all_or_no_retries_are_refused_as_kafka_refuses_them(
    broker: StubBroker,
) -> None:
    with pytest.raises(ValueError, match="Must set acks to all"):
        Producer(broker.directory, lambda: [1], transactional_id=TID, acks=1)
    with pytest.raises(ValueError, match="Must set retries to non-zero"):
        Producer(broker.directory, lambda: [1], transactional_id=TID, retries=0)


def test_init_retries_what_kafka_retries_and_carries_the_id_and_timeout(
    broker: StubBroker, producer: Producer
) -> None:
    broker.script[InitProducerIdRequest] = [
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    ]
    producer.init_transactions()
    inits = broker.sent(InitProducerIdRequest)
    assert len(inits) == 4
    assert {(r.transactional_id, r.transaction_timeout_ms, r.producer_id) for r in inits} == {
        (TID, 5_000, -1)
    }
    assert producer.transactions is not None
    assert producer.transactions.state is TransactionState.READY
    assert (producer.transactions.producer_id, producer.transactions.producer_epoch) == (PID, 1)


def test_partitions_are_added_before_their_first_record_and_batches_carry_sequences(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    producer.send_batch(TOPIC, [b"a", b"b", b"c"], partition=0).result(5)
    producer.send(TOPIC, b"d", partition=0).result(5)
    producer.send(TOPIC, b"e", partition=1).result(5)
    producer.commit_transaction()
    assert broker.names() == [
        "InitProducerId",
        "AddPartitionsToTxn",
        "Produce",
        "Produce",
        "AddPartitionsToTxn",
        "Produce",
        "EndTxn",
    ]
    added = [p.partition for r in broker.sent(AddPartitionsToTxnRequest) for p in r.partitions]
    assert added == [0, 1]
    produced = broker.sent(ProduceRequest)
    assert [(_batch(r).base_sequence, r.partitions[0].partition) for r in produced] == [
        (0, 0),
        (3, 0),
        (0, 1),
    ]
    for request in produced:
        batch = _batch(request)
        assert (batch.producer_id, batch.producer_epoch, batch.is_transactional) == (PID, 1, True)
        assert (request.acks, request.transactional_id) == (-1, TID)
    (end,) = broker.sent(EndTxnRequest)
    assert (end.committed, end.producer_id, end.producer_epoch) == (True, PID, 1)
    # the next transaction adds its partitions again and keeps counting sequences
    producer.begin_transaction()
    producer.send(TOPIC, b"f", partition=0).result(5)
    assert _batch(broker.sent(ProduceRequest)[-1]).base_sequence == 4
    assert broker.names()[-2:] == ["AddPartitionsToTxn", "Produce"]


def test_commit_waits_for_the_transactions_sends_and_an_empty_one_sends_no_end_txn(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    producer.commit_transaction()  # nothing was added: Kafka skips EndTxn
    assert broker.names() == ["InitProducerId"]
    producer.begin_transaction()
    broker.hold_produce = True
    sent = producer.send(TOPIC, b"v", partition=0)
    committing = threading.Thread(target=producer.commit_transaction)
    committing.start()
    wait_until(lambda: len(broker.held) == 1, message="the produce request held")
    committing.join(0.2)
    assert committing.is_alive() and not broker.sent(EndTxnRequest)  # waits for the send
    broker.release_produce()
    committing.join(5)
    assert sent.result(5).offset == 0
    assert broker.names()[-1] == "EndTxn"


def test_a_failed_send_makes_commit_fail_and_abort_bumps_the_epoch(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    broker.script[ProduceRequest] = [ErrorCode.INVALID_RECORD]
    failed = producer.send(TOPIC, b"bad", partition=0)
    with pytest.raises(ProduceError) as produce_error:
        failed.result(5)
    assert produce_error.value.error_code is ErrorCode.INVALID_RECORD
    with pytest.raises(TransactionError) as commit_error:
        producer.commit_transaction()
    assert commit_error.value.abortable
    assert commit_error.value.error_code is ErrorCode.INVALID_RECORD
    assert not broker.sent(EndTxnRequest)
    with pytest.raises(TransactionError, match="Cannot perform send"):
        producer.send(TOPIC, b"v", partition=0)
    producer.abort_transaction()
    (end,) = broker.sent(EndTxnRequest)
    assert end.committed is False
    bump = broker.sent(InitProducerIdRequest)[-1]
    assert (bump.producer_id, bump.producer_epoch) == (PID, 1)  # KIP-360: bump, not fence
    # a new transaction, with the new epoch and sequences from 0 again
    producer.begin_transaction()
    producer.send(TOPIC, b"good", partition=0).result(5)
    batch = _batch(broker.sent(ProduceRequest)[-1])
    assert (batch.producer_epoch, batch.base_sequence) == (2, 0)


@pytest.mark.parametrize("code", [ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH])
def test_a_fenced_producer_raises_producer_fenced_from_then_on(
    broker: StubBroker, producer: Producer, code: ErrorCode
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(TOPIC, b"v", partition=0).result(5)
    broker.script[EndTxnRequest] = [code]
    with pytest.raises(ProducerFencedError) as fenced:
        producer.commit_transaction()
    assert fenced.value.error_code is ErrorCode.PRODUCER_FENCED
    assert not fenced.value.abortable
    for call in (
        producer.begin_transaction,
        producer.abort_transaction,
        producer.commit_transaction,
    ):
        with pytest.raises(ProducerFencedError):
            call()
    with pytest.raises(ProducerFencedError):
        producer.send(TOPIC, b"v", partition=0)


def test_a_fenced_send_makes_the_producer_fenced(broker: StubBroker, producer: Producer) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    broker.script[ProduceRequest] = [ErrorCode.INVALID_PRODUCER_EPOCH]
    with pytest.raises(ProduceError):
        producer.send(TOPIC, b"v", partition=0).result(5)
    with pytest.raises(ProducerFencedError):
        producer.commit_transaction()


def test_a_call_past_its_timeout_raises_request_timed_out_and_resumes_when_called_again(
    broker: StubBroker, producer: Producer
) -> None:
    broker.script[InitProducerIdRequest] = [None]  # the first is never answered
    with pytest.raises(TransactionError) as timed_out:
        producer.init_transactions(timeout_ms=200)
    assert timed_out.value.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert "Timeout expired after 200ms while awaiting InitProducerId" in str(timed_out.value)
    producer.init_transactions()  # resumes: asks again
    assert producer.transactions is not None
    assert producer.transactions.state is TransactionState.READY


def test_offsets_go_to_the_transaction_then_to_the_groups_coordinator(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    offsets = {TopicPartition(topic="in", partition=0): 42}
    producer.send_offsets_to_transaction(offsets, ConsumerGroupMetadata("readers", 3, "m-1"))
    producer.commit_transaction()
    assert broker.names() == ["InitProducerId", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn"]
    (added,) = broker.sent(AddOffsetsToTxnRequest)
    assert (added.group_id, added.producer_id, added.producer_epoch) == ("readers", PID, 1)
    (commit,) = broker.sent(TxnOffsetCommitRequest)
    assert (commit.group_id, commit.transactional_id, commit.generation_id) == ("readers", TID, 3)
    assert [(p.topic, p.partition, p.offset) for p in commit.partitions] == [("in", 0, 42)]


def test_a_group_that_moved_on_makes_the_offsets_abortable(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    broker.script[TxnOffsetCommitRequest] = [ErrorCode.ILLEGAL_GENERATION]
    with pytest.raises(TransactionError) as refused:
        producer.send_offsets_to_transaction({TopicPartition(topic="in", partition=0): 1}, "g")
    assert refused.value.abortable
    assert "consumer group metadata mismatch" in str(refused.value)
    producer.abort_transaction()
    assert broker.sent(EndTxnRequest)[-1].committed is False


def test_a_batch_that_overtook_an_earlier_one_is_sent_again_with_its_sequence(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    broker.hold_produce = True
    first = producer.send(TOPIC, b"first", partition=0)
    wait_until(lambda: len(broker.held) == 1, message="the first batch held")
    broker.hold_produce = False
    # the leader saw the second batch first (a leader change): out of order, while the first
    # is still unanswered, so it is sent again, with the same sequence, once the first is
    # answered (Kafka resends a partition's batches in sequence order)
    broker.script[ProduceRequest] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
    second = producer.send(TOPIC, b"second", partition=0)
    wait_until(lambda: len(broker.sent(ProduceRequest)) == 2, message="the second refused")
    assert not pause_then(lambda: len(broker.sent(ProduceRequest)) > 2)  # it waits
    broker.release_produce()
    wait_until(lambda: len(broker.sent(ProduceRequest)) == 3, message="the second sent again")
    assert first.result(5).offset >= 0 and second.result(5).offset >= 0
    sequences = [_batch(r).base_sequence for r in broker.sent(ProduceRequest)]
    assert sequences == [0, 1, 1]
    producer.commit_transaction()
    # out of order with nothing earlier in flight is a real gap: the transaction must abort
    producer.begin_transaction()
    broker.script[ProduceRequest] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
    with pytest.raises(ProduceError):
        producer.send(TOPIC, b"third", partition=0).result(5)
    with pytest.raises(TransactionError) as refused:
        producer.commit_transaction()
    assert refused.value.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_batch_written_but_not_replicated_in_time_is_sent_again_as_a_duplicate(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    broker.script[ProduceRequest] = [ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
    assert producer.send(TOPIC, b"v", partition=0).result(5).offset >= 0
    assert [_batch(r).base_sequence for r in broker.sent(ProduceRequest)] == [0, 0]
    producer.commit_transaction()


def test_a_send_still_waiting_for_a_leader_when_commit_begins_goes_out_before_end_txn(
    broker: StubBroker, producer: Producer
) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    broker.leaderless = True
    sent = producer.send(TOPIC, b"late", partition=0)  # retried until a leader shows up
    committing = threading.Thread(target=producer.commit_transaction)
    committing.start()
    transactions = producer.transactions
    assert transactions is not None
    wait_until(lambda: transactions.state is TransactionState.COMMITTING_TRANSACTION)
    broker.leaderless = False
    committing.join(5)
    assert not committing.is_alive()
    assert sent.result(5).offset >= 0
    assert broker.names()[-3:] == ["AddPartitionsToTxn", "Produce", "EndTxn"]
    assert transactions.state is TransactionState.READY
