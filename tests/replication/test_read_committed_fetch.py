"""DelayedFetch for read_committed consumers, decided from partition snapshots on a ManualClock.

Kafka's DelayedFetch with FetchTxnCommitted: a read_committed consumer's readable end is the
last stable offset, so its bytes are counted up to the LSO and it waits at the LSO while a
transaction is open, whatever the HW; once a snapshot says the LSO moved (the transaction's
marker replicated) it completes and reads to the new LSO. Every answer carries the LSO. A
follower's fetch reads to the log end whatever isolation it names. The purgatory actor is
constructed, never started (tests/actors/replication/test_delayed.py's harness).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import CONSUMER_REPLICA_ID
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    FetchPartition,
    FetchPartitionData,
    FetchSpec,
    HighWatermarkAdvanced,
    PartitionSnapshot,
)
from kafkactor.storage import (
    AppendOrigin,
    Log,
    LogConfig,
    Record,
    build_batch,
    build_control_batch,
    iter_batches,
)
from tests.actors.replication.test_delayed import CLIENT, CORRELATION_ID, TIMEOUT_MS, Harness

pytestmark = pytest.mark.timeout(10)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
PRODUCER_ID = 900
FOLLOWER = 2


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    """t-0: a plain batch (0), an open transaction's batch (1), another plain batch (2)."""
    opened = Log(tmp_path / "t-0", LogConfig())
    opened.append_as_leader([Record(None, b"before", 1_000)], 0)
    opened.append_as_leader(
        build_batch(
            [Record(None, b"in-txn", 1_000)],
            0,
            producer_id=PRODUCER_ID,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        ),
        0,
    )
    opened.append_as_leader([Record(None, b"after", 1_000)], 0)
    yield opened
    opened.close()


@pytest.fixture
def h(log: Log) -> Harness:
    return Harness({"t-0": log})


def published(log: Log, hw: int) -> PartitionSnapshot:
    """What the leader partition publishes with its HW at `hw` (the log told of it first)."""
    log.on_high_watermark(hw)
    lso = log.last_stable_offset(hw)
    return HighWatermarkAdvanced(
        key="t-0",
        topic="t",
        partition=0,
        is_leader=True,
        leader=1,
        isr=(1, 2),
        log_start_offset=log.log_start_offset,
        high_watermark=log.offset_metadata(hw),
        log_end=log.log_end_offset_metadata,
        last_stable_offset=log.offset_metadata(lso),
    )


def commit(log: Log) -> None:
    log.append_as_leader(
        build_control_batch(
            committed=True,
            producer_id=PRODUCER_ID,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp_ms=1_000,
        ),
        0,
        origin=AppendOrigin.COORDINATOR,
    )


def fetch(
    offset: int, isolation: int, *, min_bytes: int = 1, replica_id: int = CONSUMER_REPLICA_ID
) -> DelayOperation:
    part = FetchPartition(topic="t", partition=0, fetch_offset=offset)
    return DelayOperation(
        reply_to=CLIENT,
        correlation_id=CORRELATION_ID,
        operation=FetchSpec(
            replica_id=replica_id,
            min_bytes=min_bytes,
            partitions=(part,),
            isolation_level=isolation,
        ),
        keys=(str(TopicPartition.of(part)),),
        timeout_ms=TIMEOUT_MS,
    )


def answer(h: Harness) -> FetchPartitionData:
    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    return data


def offsets(data: FetchPartitionData) -> list[int]:
    return [b.base_offset for b in iter_batches(data.records)]


def test_read_committed_waits_at_the_lso_where_read_uncommitted_reads_to_the_hw(
    h: Harness, log: Log
) -> None:
    h.set(published(log, 3))

    _, uncommitted_done = h.submit(fetch(1, READ_UNCOMMITTED))
    uncommitted = answer(h)
    h.client.messages.clear()
    operation, committed_done = h.submit(fetch(1, READ_COMMITTED))

    assert uncommitted_done is True
    assert offsets(uncommitted) == [1, 2]
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (3, 1)
    assert committed_done is False
    assert h.responses == []

    commit(log)  # at offset 3; once the HW passes it, the transaction is stable
    assert h.publish(published(log, 3)) == 0  # the HW did not pass the marker yet
    assert h.publish(published(log, 4)) == 1

    data = answer(h)
    assert operation.is_completed()
    assert offsets(data) == [1, 2, 3]
    assert (data.high_watermark, data.last_stable_offset) == (4, 4)
    assert data.aborted_transactions == ()


def test_min_bytes_counts_only_what_lies_below_the_lso(h: Harness, log: Log) -> None:
    below_lso = log.offset_metadata(1).position  # the first batch's bytes
    h.set(published(log, 3))

    _, committed_done = h.submit(fetch(0, READ_COMMITTED, min_bytes=below_lso + 1))
    _, uncommitted_done = h.submit(fetch(0, READ_UNCOMMITTED, min_bytes=below_lso + 1))

    assert committed_done is False
    assert uncommitted_done is True


def test_a_read_committed_fetch_that_times_out_answers_what_is_below_the_lso(
    h: Harness, log: Log
) -> None:
    h.set(published(log, 3))
    _, done = h.submit(fetch(0, READ_COMMITTED, min_bytes=10_000))
    assert done is False

    h.advance(TIMEOUT_MS)

    data = answer(h)
    assert offsets(data) == [0]
    assert data.last_stable_offset == 1


def test_a_followers_fetch_reads_to_the_log_end_whatever_isolation_it_names(
    h: Harness, log: Log
) -> None:
    h.set(published(log, 1))

    _, done = h.submit(fetch(1, READ_COMMITTED, replica_id=FOLLOWER))

    assert done is True
    assert offsets(answer(h)) == [1, 2]


def test_a_snapshot_that_names_no_lso_reads_as_its_hw(log: Log) -> None:
    snapshot = dataclasses.replace(published(log, 3), last_stable_offset=None)
    assert snapshot.stable_end == snapshot.high_watermark
