"""WriteTxnMarkers on a leader's broker, planned without actors (replication/txn_markers.py).

Kafka's `handleWriteTxnMarkersRequest`: a partition with no replica here is
UNKNOWN_TOPIC_OR_PARTITION, one whose replica here follows NOT_LEADER_FOR_PARTITION (Kafka's
NOT_LEADER_OR_FOLLOWER, 6); each entry's appended partitions wait as one acks=all produce of
`request.timeout.ms`; the answer lists every entry's partitions in the request's order, and an
acknowledged marker on `__consumer_offsets` tells the group coordinator.
"""

from __future__ import annotations

import pytest

from kafkactor.actors.replication.txn_markers import (
    MARKER_TIMEOUT_MS,
    marker_key,
    marker_waits,
    markers_outcome,
    plan_write_txn_markers,
    wait_key,
)
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.partition import AppendResult, AppendTxnMarker
from kafkactor.messages.replication import (
    ProducePartitionResult,
    ProduceResponse,
    ProduceSpec,
)
from kafkactor.messages.transaction import (
    TxnMarkerEntry,
    TxnOffsetsCompleted,
    TxnPartition,
    WriteTxnMarkersRequest,
)

pytestmark = pytest.mark.timeout(10)

LED = {("t", 0): "broker/1/partition/t-0", (OFFSETS_TOPIC, 7): "broker/1/partition/o-7"}
FOLLOWED = {("t", 1)}


def target(topic: str, partition: int) -> tuple[str | None, ErrorCode]:
    if (topic, partition) in LED:
        return LED[(topic, partition)], ErrorCode.NONE
    if (topic, partition) in FOLLOWED:
        return None, ErrorCode.NOT_LEADER_FOR_PARTITION
    return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def request(*entries: TxnMarkerEntry) -> WriteTxnMarkersRequest:
    return WriteTxnMarkersRequest(markers=entries)


def entry(producer_id: int, *parts: tuple[str, int], committed: bool = True) -> TxnMarkerEntry:
    return TxnMarkerEntry(
        producer_id=producer_id,
        producer_epoch=3,
        committed=committed,
        coordinator_epoch=5,
        partitions=tuple(TxnPartition(topic=t, partition=p) for t, p in parts),
    )


def appended(topic: str, partition: int, offset: int) -> AppendResult:
    return AppendResult(topic=topic, partition=partition, first_offset=offset, last_offset=offset)


def test_a_marker_goes_to_led_partitions_and_others_fail_with_kafkas_codes() -> None:
    asked = request(entry(10, ("t", 0), ("t", 1), ("gone", 0), ("t", 0)))

    plan = plan_write_txn_markers(asked, target)

    assert list(plan.orders) == [marker_key(0, "t", 0)]  # named twice: appended once
    address, append = plan.orders[marker_key(0, "t", 0)]
    assert address == "broker/1/partition/t-0"
    assert append == AppendTxnMarker(
        topic="t",
        partition=0,
        producer_id=10,
        producer_epoch=3,
        committed=True,
        coordinator_epoch=5,
    )
    assert plan.errors == {
        marker_key(0, "t", 1): ErrorCode.NOT_LEADER_FOR_PARTITION,
        marker_key(0, "gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert int(ErrorCode.NOT_LEADER_FOR_PARTITION) == 6


def test_each_entry_waits_for_the_isr_as_one_acks_all_produce_of_the_request_timeout() -> None:
    asked = request(
        entry(10, ("t", 0), (OFFSETS_TOPIC, 7)),
        entry(11, ("t", 0), committed=False),
        entry(12, ("t", 1)),
    )
    plan = plan_write_txn_markers(asked, target)
    answers = {
        marker_key(0, "t", 0): appended("t", 0, 40),
        marker_key(0, OFFSETS_TOPIC, 7): appended(OFFSETS_TOPIC, 7, 9),
        marker_key(1, "t", 0): AppendResult(
            topic="t", partition=0, error_code=ErrorCode.NOT_ENOUGH_REPLICAS
        ),
    }

    waits = marker_waits(asked, plan, answers, received_ms=1_000)

    assert list(waits) == [wait_key(0)]  # entry 1 was refused, entry 2 never appended
    wait = waits[wait_key(0)]
    assert wait.timeout_ms == MARKER_TIMEOUT_MS == 30_000
    assert sorted(wait.keys) == sorted(["t-0", f"{OFFSETS_TOPIC}-7"])
    spec = wait.operation
    assert isinstance(spec, ProduceSpec)
    assert {(s.topic, s.partition, s.required_offset) for s in spec.partitions} == {
        ("t", 0, 41),
        (OFFSETS_TOPIC, 7, 10),
    }
    assert plan.errors[marker_key(1, "t", 0)] is ErrorCode.NOT_ENOUGH_REPLICAS


def test_the_answer_lists_every_partition_and_acknowledged_offsets_markers_complete() -> None:
    asked = request(
        entry(10, ("t", 0), (OFFSETS_TOPIC, 7), ("t", 1)),
        entry(11, (OFFSETS_TOPIC, 7), committed=False),
    )
    plan = plan_write_txn_markers(asked, target)
    answers = {
        marker_key(0, "t", 0): appended("t", 0, 40),
        marker_key(0, OFFSETS_TOPIC, 7): appended(OFFSETS_TOPIC, 7, 9),
        marker_key(1, OFFSETS_TOPIC, 7): appended(OFFSETS_TOPIC, 7, 10),
    }
    marker_waits(asked, plan, answers, received_ms=0)
    acks = {
        wait_key(0): ProduceResponse(
            partitions=(
                ProducePartitionResult(topic="t", partition=0),
                ProducePartitionResult(topic=OFFSETS_TOPIC, partition=7),
            )
        ),
        wait_key(1): ProduceResponse(
            partitions=(
                ProducePartitionResult(
                    topic=OFFSETS_TOPIC, partition=7, error_code=ErrorCode.REQUEST_TIMED_OUT
                ),
            )
        ),
    }

    outcome = markers_outcome(asked, plan, acks)

    first, second = outcome.response.markers
    assert first.producer_id == 10
    assert [(p.topic, p.partition, p.error_code) for p in first.partitions] == [
        ("t", 0, ErrorCode.NONE),
        (OFFSETS_TOPIC, 7, ErrorCode.NONE),
        ("t", 1, ErrorCode.NOT_LEADER_FOR_PARTITION),
    ]
    assert second.producer_id == 11
    assert [p.error_code for p in second.partitions] == [ErrorCode.REQUEST_TIMED_OUT]
    # only the acknowledged marker on __consumer_offsets reaches the group coordinator
    assert outcome.offsets_completed == (
        TxnOffsetsCompleted(producer_id=10, committed=True, partition=7),
    )


def test_a_wait_ended_by_the_broker_stopping_answers_its_error_for_its_partitions() -> None:
    asked = request(entry(10, ("t", 0)))
    plan = plan_write_txn_markers(asked, target)
    marker_waits(asked, plan, {marker_key(0, "t", 0): appended("t", 0, 0)}, received_ms=0)

    outcome = markers_outcome(
        asked, plan, {wait_key(0): ErrorResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE)}
    )

    (result,) = outcome.response.markers
    assert [p.error_code for p in result.partitions] == [ErrorCode.BROKER_NOT_AVAILABLE]
    assert outcome.offsets_completed == ()
