"""WriteTxnMarkers on a partition leader's broker: Kafka's `KafkaApis.handleWriteTxnMarkersRequest`.

The transaction coordinator asks the leader's broker to append each transaction's marker (a
COMMIT or ABORT control batch) to the partitions named. Kafka appends each marker entry with
`requiredAcks = -1`, origin Coordinator and `request.timeout.ms` as its timeout, and answers
once every entry's appends are acknowledged by the ISR (or failed). Here that is three steps
of the replica manager, planned by the pure functions of this module:

1. `plan_write_txn_markers`: each (entry, partition) becomes an `AppendTxnMarker` to the
   partition's actor, or an error at once: UNKNOWN_TOPIC_OR_PARTITION when this broker holds
   no replica of it (Kafka's `getMagic` finds no log), NOT_LEADER_FOR_PARTITION (Kafka's
   NOT_LEADER_OR_FOLLOWER, code 6) when its replica here follows.
2. `marker_waits`: the appended partitions of each entry wait as one DelayedProduce in the
   produce purgatory (acks=all), as Kafka's one `appendRecords` call per entry does.
3. `markers_outcome`: one `WriteTxnMarkersResponse` (per entry, per partition), and a
   `TxnOffsetsCompleted` to the group coordinator for each `__consumer_offsets` partition
   whose marker was acknowledged (Kafka's `scheduleHandleTxnCompletion`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafkactor.actors.replication.delayed_produce import delay_produce, produce_status
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.partition import AppendTxnMarker
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import ProducePartitionStatus, ProduceResponse
from kafkactor.messages.transaction import (
    TxnMarkerPartitionResult,
    TxnMarkerResult,
    TxnOffsetsCompleted,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

# Kafka's request.timeout.ms (30 s): how long a marker waits for the ISR (WriteTxnMarkers
# carries no timeout of its own)
MARKER_TIMEOUT_MS = 30_000


def marker_key(index: int, topic: str, partition: int) -> str:
    """The key of one partition of the request's `index`th marker entry."""
    return f"{index}/{topic}-{partition}"


def wait_key(index: int) -> str:
    """The key of the `index`th marker entry's wait in the produce purgatory."""
    return f"wait/{index}"


@dataclass(slots=True)
class MarkerPlan:
    """What the replica manager sends for a WriteTxnMarkersRequest, and what failed at once."""

    orders: dict[str, tuple[str, AppendTxnMarker]] = field(default_factory=dict)
    errors: dict[str, ErrorCode] = field(default_factory=dict)


def plan_write_txn_markers(
    request: WriteTxnMarkersRequest,
    target: Callable[[str, int], tuple[str | None, ErrorCode]],
) -> MarkerPlan:
    """Each entry's partitions: an append to the leader partition's actor (`target` gives its
    address), or the error `target` gives (no address)."""
    plan = MarkerPlan()
    for index, entry in enumerate(request.markers):
        for part in entry.partitions:
            key = marker_key(index, part.topic, part.partition)
            if key in plan.orders or key in plan.errors:
                continue  # named twice in one entry: one append
            address, error = target(part.topic, part.partition)
            if address is None:
                plan.errors[key] = error
                continue
            plan.orders[key] = (
                address,
                AppendTxnMarker(
                    topic=part.topic,
                    partition=part.partition,
                    producer_id=entry.producer_id,
                    producer_epoch=entry.producer_epoch,
                    committed=entry.committed,
                    coordinator_epoch=entry.coordinator_epoch,
                ),
            )
    return plan


def marker_waits(
    request: WriteTxnMarkersRequest,
    plan: MarkerPlan,
    answers: Mapping[str, Response],
    *,
    received_ms: int,
    timeout_ms: int = MARKER_TIMEOUT_MS,
) -> dict[str, DelayOperation]:
    """The appends answered: a refused one joins `plan.errors`; the appended partitions of
    each entry wait as one DelayedProduce (acks=all) in the produce purgatory, keyed by
    `wait_key` (`reply_to` and the correlation id are the caller's to fill in)."""
    waits: dict[str, DelayOperation] = {}
    for index, entry in enumerate(request.markers):
        statuses: list[ProducePartitionStatus] = []
        for part in entry.partitions:
            key = marker_key(index, part.topic, part.partition)
            if key not in plan.orders or key in plan.errors:
                continue
            status = produce_status(part.topic, part.partition, answers.get(key))
            if status.error_code is not ErrorCode.NONE:
                plan.errors[key] = status.error_code
                continue
            if all((s.topic, s.partition) != (part.topic, part.partition) for s in statuses):
                statuses.append(status)
        if statuses:
            waits[wait_key(index)] = delay_produce(
                "", 0, tuple(statuses), received_ms=received_ms, timeout_ms=timeout_ms
            )
    return waits


@dataclass(frozen=True, slots=True)
class MarkersOutcome:
    """The answer to a WriteTxnMarkersRequest and the group coordinator's notices."""

    response: WriteTxnMarkersResponse
    offsets_completed: tuple[TxnOffsetsCompleted, ...] = ()


def markers_outcome(
    request: WriteTxnMarkersRequest, plan: MarkerPlan, acks: Mapping[str, Response]
) -> MarkersOutcome:
    """Each entry's partitions as their appends and waits ended (a wait that ended without a
    ProduceResponse, the broker stopping, answers its error for each of its partitions)."""
    results: list[TxnMarkerResult] = []
    completed: list[TxnOffsetsCompleted] = []
    for index, entry in enumerate(request.markers):
        waited = acks.get(wait_key(index))
        acked = (
            {(r.topic, r.partition): r.error_code for r in waited.partitions}
            if isinstance(waited, ProduceResponse)
            else {}
        )
        fallback = getattr(waited, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
        partitions: list[TxnMarkerPartitionResult] = []
        for part in entry.partitions:
            key = marker_key(index, part.topic, part.partition)
            error = plan.errors.get(key)
            if error is None:
                error = acked.get((part.topic, part.partition), fallback)
            partitions.append(
                TxnMarkerPartitionResult(
                    topic=part.topic, partition=part.partition, error_code=error
                )
            )
        results.append(TxnMarkerResult(producer_id=entry.producer_id, partitions=tuple(partitions)))
        for offsets in sorted(
            {
                r.partition
                for r in partitions
                if r.topic == OFFSETS_TOPIC and r.error_code is ErrorCode.NONE
            }
        ):
            completed.append(
                TxnOffsetsCompleted(
                    producer_id=entry.producer_id, committed=entry.committed, partition=offsets
                )
            )
    return MarkersOutcome(
        response=WriteTxnMarkersResponse(markers=tuple(results)),
        offsets_completed=tuple(completed),
    )
