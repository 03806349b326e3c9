"""The consumer's reading of fetched batches (Kafka's Fetcher.CompletedFetch): control batches
are never records, read_committed drops aborted transactions' batches, and the position moves
past everything read, skipped batches included. A read_committed group member asks for stable
offsets (KIP-447)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kafkactor.actors.runtime import Directory, addresses
from kafkactor.clients import Consumer
from kafkactor.clients.completed_fetch import READ_COMMITTED, READ_UNCOMMITTED, read_fetched
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkactor.messages.replication import (
    AbortedTransaction,
    FetchPartitionData,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from kafkactor.storage import Record, build_batch, build_control_batch

pytestmark = pytest.mark.timeout(10)

COMMITTED_PID, ABORTED_PID = 5, 6


def _data(offset: int, pid: int, *values: bytes) -> bytes:
    records = [Record(None, v, 1) for v in values]
    return build_batch(
        records, offset, producer_id=pid, producer_epoch=0, base_sequence=0, is_transactional=True
    )


def _marker(offset: int, pid: int, *, committed: bool) -> bytes:
    return build_control_batch(
        committed=committed,
        producer_id=pid,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp_ms=1,
        base_offset=offset,
    )


# offsets: 0-1 committed txn (pid 5), 2-3 aborted txn (pid 6), 4 plain, 5 ABORT(6), 6 COMMIT(5)
LOG = b"".join(
    (
        _data(0, COMMITTED_PID, b"c0", b"c1"),
        _data(2, ABORTED_PID, b"a0", b"a1"),
        build_batch([Record(None, b"plain", 1)], 4),
        _marker(5, ABORTED_PID, committed=False),
        _marker(6, COMMITTED_PID, committed=True),
    )
)


def _fetched(position: int, isolation: int, aborted: bool = True) -> tuple[list[bytes], int | None]:
    listed = (AbortedTransaction(producer_id=ABORTED_PID, first_offset=2),) if aborted else ()
    data = FetchPartitionData(
        topic="t", partition=0, records=LOG, high_watermark=7, aborted_transactions=listed
    )
    got = read_fetched(data, position, isolation)
    return [r.value or b"" for r in got.records], got.next_offset


def test_read_committed_drops_the_aborted_transaction_and_never_returns_markers() -> None:
    values, next_offset = _fetched(0, READ_COMMITTED)
    assert values == [b"c0", b"c1", b"plain"]
    assert next_offset == 7  # past both markers: the next fetch does not ask for them again


def test_read_uncommitted_returns_every_data_record_but_no_marker() -> None:
    values, next_offset = _fetched(0, READ_UNCOMMITTED)
    assert values == [b"c0", b"c1", b"a0", b"a1", b"plain"]
    assert next_offset == 7


def test_without_the_aborted_list_read_committed_keeps_the_records() -> None:
    # the leader's list is what names an aborted transaction before its marker
    values, _ = _fetched(0, READ_COMMITTED, aborted=False)
    assert values == [b"c0", b"c1", b"a0", b"a1", b"plain"]


def test_a_producer_is_read_again_after_its_abort_marker_and_the_position_skips() -> None:
    values, _ = _fetched(1, READ_COMMITTED)
    assert values == [b"c1", b"plain"]
    # the same producer's later transaction, after its ABORT marker, is read again
    later = LOG + _data(7, ABORTED_PID, b"again") + _marker(8, ABORTED_PID, committed=True)
    data = FetchPartitionData(
        topic="t",
        partition=0,
        records=later,
        high_watermark=9,
        aborted_transactions=(AbortedTransaction(producer_id=ABORTED_PID, first_offset=2),),
    )
    got = read_fetched(data, 0, READ_COMMITTED)
    assert [r.value for r in got.records] == [b"c0", b"c1", b"plain", b"again"]
    assert [r.offset for r in got.records] == [0, 1, 4, 7]
    assert got.next_offset == 9


class OffsetsStub:
    """Broker 1 leading __consumer_offsets (1 partition); its group coordinator answers
    OffsetFetch UNSTABLE_OFFSET_COMMIT for partition 0 while `pending` transactions' offsets
    wait for their marker, then offset 7."""

    def __init__(self, directory: Directory, pending: int) -> None:
        self.directory, self.pending = directory, pending
        self.fetches: list[OffsetFetchRequest] = []
        directory.register(addresses.replica_manager(1), self)
        directory.register(addresses.group_coordinator(1), self)

    def tell(self, message: Any) -> None:
        request = getattr(message, "payload", message)
        if isinstance(request, MetadataRequest):
            partition = PartitionMetadata(partition=0, leader=1, replicas=(1,), isr=(1,))
            topic = TopicMetadata(topic=OFFSETS_TOPIC, partitions=(partition,))
            answer: Any = MetadataResponse(brokers=(1,), topics=(topic,))
        else:
            assert isinstance(request, OffsetFetchRequest)
            self.fetches.append(request)
            unstable = request.require_stable and len(self.fetches) <= self.pending
            result = OffsetFetchPartitionResult(
                topic="t",
                partition=0,
                offset=-1 if unstable else 7,
                error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT if unstable else ErrorCode.NONE,
            )
            answer = OffsetFetchResponse(partitions=(result,))
        answer = dataclasses.replace(answer, correlation_id=request.correlation_id)
        self.directory.tell(request.reply_to, answer)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_a_read_committed_member_asks_for_stable_offsets_and_waits_out_pending_ones(
    isolation: str,
) -> None:
    # KIP-447: a transaction's offsets wait for its marker; a read_committed consumer that
    # took the last stable one would read the transaction's input again
    stub = OffsetsStub(Directory(), pending=2)
    consumer = Consumer(
        stub.directory, lambda: [1], group_id="g", isolation_level=isolation, retry_backoff_ms=5
    )
    try:
        assert consumer.committed(("t", 0)) == 7
    finally:
        consumer.client.close()
    committed = isolation == "read_committed"
    assert [f.require_stable for f in stub.fetches] == [committed] * (3 if committed else 1)
