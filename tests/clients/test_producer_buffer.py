"""Backpressure at the producer (Kafka's `buffer.memory` and `max.block.ms`).

The batches a producer has sent and not had answered may hold `buffer_memory` bytes. A send
that would go past it blocks until answers free room, for at most `max_block_ms`, then fails
its Future with REQUEST_TIMED_OUT, unsent. A leader stub that keeps produce requests until the
test answers them makes the order of events exact.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from kafkactor.actors.runtime import Directory, addresses
from kafkactor.clients import ProduceError, Producer
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
from kafkactor.storage import build_value_batch
from tests.replication.support import WAIT_S, wait_until

pytestmark = pytest.mark.timeout(30)

TOPIC = "held"
VALUE = b"v" * 100
BATCH_BYTES = len(build_value_batch([VALUE] * 10, 0))  # what send_batch(10 x VALUE) sends


class HoldingLeader:
    """Broker 1's replica manager: answers metadata (it leads partition 0 of TOPIC) and keeps
    every produce request unanswered until `answer_next`."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory
        self.held: list[ProduceRequest] = []
        self._lock = threading.Lock()
        self._offset = 0
        directory.register(addresses.replica_manager(1), self)

    def tell(self, message: Any) -> None:
        request = getattr(message, "payload", message)
        if isinstance(request, MetadataRequest):
            partition = PartitionMetadata(partition=0, leader=1, replicas=(1,), isr=(1,))
            self.directory.tell(
                request.reply_to,
                MetadataResponse(
                    correlation_id=request.correlation_id,
                    brokers=(1,),
                    topics=(TopicMetadata(topic=TOPIC, partitions=(partition,)),),
                ),
            )
        elif isinstance(request, ProduceRequest):
            with self._lock:
                self.held.append(request)

    def count(self) -> int:
        with self._lock:
            return len(self.held)

    @property
    def actor_inbox(self) -> HoldingLeader:
        """What the directory measures a mailbox by: the held requests are its messages."""
        return self

    def qsize(self) -> int:
        return self.count()

    def answer_next(self) -> None:
        with self._lock:
            request = self.held.pop(0)
            offset, self._offset = self._offset, self._offset + 10
        result = ProducePartitionResult(topic=TOPIC, partition=0, base_offset=offset)
        self.directory.tell(
            request.reply_to,
            ProduceResponse(correlation_id=request.correlation_id, partitions=(result,)),
        )


@pytest.fixture
def leader() -> HoldingLeader:
    return HoldingLeader(Directory())


@pytest.fixture
def producer(leader: HoldingLeader) -> Iterator[Producer]:
    """Room for two batches; a send waits up to 20 s for room."""
    made = Producer(
        leader.directory,
        lambda: [1],
        acks=1,
        buffer_memory=2 * BATCH_BYTES,
        max_block_ms=20_000,
    )
    yield made
    made.close()


def _send(producer: Producer) -> Future[Any]:
    return producer.send_batch(TOPIC, [VALUE] * 10, partition=0)


def test_a_send_past_buffer_memory_waits_for_an_answer_to_free_room(
    leader: HoldingLeader, producer: Producer
) -> None:
    first, second = _send(producer), _send(producer)  # the buffer is full now
    wait_until(lambda: leader.count() == 2, message="two requests held")
    returned = threading.Event()
    third: list[Future[Any]] = []

    def send_third() -> None:
        third.append(_send(producer))
        returned.set()

    sender = threading.Thread(target=send_third, daemon=True)
    sender.start()
    assert not returned.wait(0.3), "the third send returned while the buffer was full"
    assert leader.count() == 2  # and nothing more was sent
    leader.answer_next()  # the first answer frees one batch's room
    assert first.result(WAIT_S)[0].offset == 0
    assert returned.wait(WAIT_S), "the third send still blocked after an answer"
    wait_until(lambda: leader.count() == 2, message="the third request sent")
    leader.answer_next()
    leader.answer_next()
    assert second.result(WAIT_S)[0].offset == 10
    assert third[0].result(WAIT_S)[0].offset == 20
    sender.join(WAIT_S)


def test_a_send_that_finds_no_room_within_max_block_ms_fails_unsent(
    leader: HoldingLeader,
) -> None:
    producer = Producer(
        leader.directory, lambda: [1], acks=1, buffer_memory=BATCH_BYTES, max_block_ms=200
    )
    try:
        first = _send(producer)
        error = _send(producer).exception(WAIT_S)
        assert isinstance(error, ProduceError)
        assert error.error_code is ErrorCode.REQUEST_TIMED_OUT
        assert "buffer_memory" in error.reason
        assert leader.count() == 1  # the second batch was never sent
        leader.answer_next()
        assert first.result(WAIT_S)[0].offset == 0
        assert _send(producer).done() is False  # room again: sent, held
        assert leader.count() == 1
    finally:
        producer.close()


def test_a_batch_larger_than_buffer_memory_fails_at_once(leader: HoldingLeader) -> None:
    producer = Producer(leader.directory, lambda: [1], buffer_memory=BATCH_BYTES - 1)
    try:
        error = _send(producer).exception(WAIT_S)
        assert isinstance(error, ProduceError)
        assert error.error_code is ErrorCode.MESSAGE_TOO_LARGE
        assert "buffer_memory" in error.reason
        assert leader.count() == 0
    finally:
        producer.close()


def test_closing_the_producer_fails_a_send_blocked_for_room(
    leader: HoldingLeader, producer: Producer
) -> None:
    _send(producer), _send(producer)
    blocked: list[Future[Any]] = []
    sender = threading.Thread(target=lambda: blocked.append(_send(producer)), daemon=True)
    sender.start()
    wait_until(lambda: leader.count() == 2, message="two requests held")
    producer.close()
    sender.join(WAIT_S)
    assert not sender.is_alive(), "close left a send blocked"
    error = blocked[0].exception(WAIT_S)
    assert isinstance(error, ProduceError)
    assert error.error_code is ErrorCode.NETWORK_EXCEPTION
    assert leader.count() == 2


def test_buffer_memory_must_be_positive(leader: HoldingLeader) -> None:
    with pytest.raises(ValueError, match="buffer_memory"):
        Producer(leader.directory, lambda: [1], buffer_memory=0)


@pytest.mark.parametrize("acks", [1, 0])
def test_a_send_to_a_leader_with_a_full_mailbox_fails_unsent_after_max_block_ms(acks: int) -> None:
    leader = HoldingLeader(Directory(edge_mailbox_limit=1))
    producer = Producer(leader.directory, lambda: [1], acks=acks, retries=0, max_block_ms=100)
    try:
        first = _send(producer)
        wait_until(lambda: leader.count() == 1, message="one request held: the mailbox is full")
        error = _send(producer).exception(WAIT_S)
        assert isinstance(error, ProduceError)
        assert error.error_code is ErrorCode.REQUEST_TIMED_OUT
        assert "mailbox" in error.reason and "max_block_ms=100" in error.reason
        assert leader.count() == 1  # the second batch was never sent
        if acks:
            leader.answer_next()
            assert first.result(WAIT_S)[0].offset == 0
            _send(producer)  # room again: sent
            wait_until(lambda: leader.count() == 1, message="the next request sent")
    finally:
        producer.close()
