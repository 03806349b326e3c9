"""DelayedProduce and DelayedFetch, decided from partition snapshots, without running actors.

A `ReplicaPurgatoryActor` is constructed but never started: the operations read its
`snapshots` and `logs` and answer through its `reply`, which the Directory delivers to a
recording mailbox at the client's address. A `Purgatory` on a ManualClock drives them:
`try_complete_else_watch` when the request arrives, `check_and_complete` when a partition
publishes a new snapshot, and the timer (running expirations inline, errors not swallowed) for
the timeout. The checklist is Kafka's DelayedProduce / DelayedFetch: acks=-1 completes when the
HW passes every partition's last offset, with NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR
shrank below min.insync.replicas, NOT_LEADER_FOR_PARTITION when leadership moved (KAFKA-2960)
and REQUEST_TIMED_OUT for what is still pending at the timeout; a fetch completes on an unknown
or moved partition (cases A and B), a fetch offset on an older segment (case C) or enough bytes
(case D), and a consumer never sees a batch at or past the high watermark.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kafkactor.actors.purgatory import Purgatory, RequestOperation
from kafkactor.actors.purgatory.purgatory_actor import EXPIRED, CompletedBy
from kafkactor.actors.replication import (
    DelayedFetch,
    DelayedProduce,
    ReplicaPurgatoryActor,
    check_enough_replicas_reach_offset,
)
from kafkactor.actors.replication.replica_purgatory import (
    APPEND,
    HIGH_WATERMARK,
    ISR_EXPAND,
    ISR_SHRINK,
    LEADERSHIP,
    snapshot_cause,
)
from kafkactor.actors.runtime import Directory
from kafkactor.common import TopicPartition
from kafkactor.messages import Envelope, ErrorCode
from kafkactor.messages.offsets import (
    CONSUMER_REPLICA_ID,
)
from kafkactor.messages.purgatory import DelayOperation, OperationsExpired
from kafkactor.messages.replication import (
    FetchPartition,
    FetchPartitionData,
    FetchResponse,
    FetchSpec,
    HighWatermarkAdvanced,
    LeadershipChanged,
    LogEndOffsetAdvanced,
    PartitionSnapshot,
    ProducePartitionResult,
    ProducePartitionStatus,
    ProduceRecordError,
    ProduceResponse,
    ProduceSpec,
)
from kafkactor.storage import (
    Log,
    LogConfig,
    LogOffsetMetadata,
    Record,
    build_batch,
    iter_batches,
)
from kafkactor.timer import ManualClock, Timer, TimerTask
from tests.replication.support import EventLog, captured_events

CLIENT = "client/x"
CORRELATION_ID = 7
TIMEOUT_MS = 500
FOLLOWER = 2


class RecordingMailbox:
    """The client's mailbox: keeps every message delivered to it."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    def tell(self, message: Any) -> None:
        self.messages.append(message)

    @property
    def payloads(self) -> list[Any]:
        return [m.payload if isinstance(m, Envelope) else m for m in self.messages]


def run_raising(task: TimerTask) -> None:
    """Run an expired task inline and let its errors fail the test (run_inline logs them)."""
    task.run()


class Harness:
    """An unstarted purgatory actor, its purgatory on a ManualClock, and the client's mailbox."""

    def __init__(self, logs: dict[str, Log]) -> None:
        self.clock = ManualClock(0)
        self.timer = Timer(self.clock, executor=run_raising)
        self.directory = Directory()
        self.client = RecordingMailbox()
        self.directory.register(CLIENT, self.client)
        self.logs = logs
        self.actor = ReplicaPurgatoryActor(
            "broker/1/purgatory", self.directory, self.timer, self.clock, 1, logs=logs
        )
        self.purgatory = Purgatory("Test", self.timer, purge_interval=1000)

    def set(self, *snapshots: PartitionSnapshot) -> None:
        """The partitions' current state, without re-checking anything."""
        for snapshot in snapshots:
            self.actor.snapshots[snapshot.key] = snapshot

    def publish(self, snapshot: PartitionSnapshot, completed_by: object = None) -> int:
        """A partition publishes a snapshot: the operations watching it are re-checked (and
        told `completed_by`, should it complete them)."""
        self.set(snapshot)
        return self.purgatory.check_and_complete(snapshot.key, completed_by)

    def submit(self, request: DelayOperation) -> tuple[RequestOperation, bool]:
        """The request arrives: build its operation, try it, else watch it and time it."""
        operation: RequestOperation
        if isinstance(request.operation, ProduceSpec):
            operation = DelayedProduce(self.actor, request)
        else:
            operation = DelayedFetch(self.actor, request)
        completed = self.purgatory.try_complete_else_watch(operation, request.keys)
        return operation, completed

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        while self.timer.advance_clock(0):
            pass

    @property
    def responses(self) -> list[Any]:
        return self.client.payloads

    def produce_response(self) -> ProduceResponse:
        assert len(self.responses) == 1, self.responses
        response = self.responses[0]
        assert isinstance(response, ProduceResponse)
        assert response.correlation_id == CORRELATION_ID
        return response

    def fetch_response(self) -> FetchResponse:
        assert len(self.responses) == 1, self.responses
        response = self.responses[0]
        assert isinstance(response, FetchResponse)
        assert response.correlation_id == CORRELATION_ID
        return response


def position(
    offset: int, segment_base_offset: int = 0, byte_position: int = 0
) -> LogOffsetMetadata:
    return LogOffsetMetadata(
        offset=offset, segment_base_offset=segment_base_offset, position=byte_position
    )


def snapshot(
    partition: int = 0,
    *,
    hw: int = 0,
    leo: int | None = None,
    is_leader: bool = True,
    exists: bool = True,
    isr: tuple[int, ...] = (1, 2),
    min_isr: int = 2,
    kind: type[PartitionSnapshot] = PartitionSnapshot,
) -> PartitionSnapshot:
    """A snapshot of `t-<partition>` for produce checks (positions are not looked at)."""
    return kind(
        key=str(TopicPartition(topic="t", partition=partition)),
        topic="t",
        partition=partition,
        exists=exists,
        is_leader=is_leader,
        leader=1 if is_leader else 2,
        leader_epoch=0,
        isr=isr,
        min_insync_replicas=min_isr,
        log_start_offset=0,
        high_watermark=position(hw),
        log_end=position(hw if leo is None else leo),
    )


def log_snapshot(
    log: Log,
    hw: int,
    *,
    kind: type[PartitionSnapshot] = PartitionSnapshot,
    is_leader: bool = True,
    hw_position: LogOffsetMetadata | None = None,
) -> PartitionSnapshot:
    """What the partition owning `log` publishes with its high watermark at `hw`."""
    tp = log.topic_partition
    topic, partition = tp.topic, tp.partition
    return kind(
        key=str(TopicPartition(topic=topic, partition=partition)),
        topic=topic,
        partition=partition,
        exists=True,
        is_leader=is_leader,
        leader=1,
        leader_epoch=0,
        isr=(1, 2),
        min_insync_replicas=1,
        log_start_offset=log.log_start_offset,
        high_watermark=hw_position or log.offset_metadata(hw),
        log_end=log.log_end_offset_metadata,
    )


# -- check_enough_replicas_reach_offset --------------------------------------------------------


@pytest.mark.parametrize("kind", [PartitionSnapshot, HighWatermarkAdvanced, LeadershipChanged])
@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (snapshot(exists=False, hw=20), (True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)),
        (
            dataclasses.replace(snapshot(exists=False, hw=20), still_known=True),
            (True, ErrorCode.NOT_LEADER_FOR_PARTITION),
        ),
        (snapshot(is_leader=False, hw=20), (True, ErrorCode.NOT_LEADER_FOR_PARTITION)),
        (snapshot(hw=10, isr=(1, 2), min_isr=2), (True, ErrorCode.NONE)),
        (snapshot(hw=11, isr=(1, 2, 3), min_isr=2), (True, ErrorCode.NONE)),
        (snapshot(hw=10, isr=(1,), min_isr=2), (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)),
        (snapshot(hw=9, isr=(1, 2), min_isr=2), (False, ErrorCode.NONE)),
        (snapshot(hw=9, isr=(1,), min_isr=2), (False, ErrorCode.NONE)),
    ],
    ids=[
        "stopped",
        "moved-away",
        "not-leader",
        "hw-at-required",
        "hw-past-required",
        "isr-below-min",
        "hw-short",
        "hw-short-isr-below-min",
    ],
)
def test_check_enough_replicas_reach_offset(
    kind: type[PartitionSnapshot], case: PartitionSnapshot, expected: tuple[bool, ErrorCode]
) -> None:
    fields = {name: getattr(case, name) for name in PartitionSnapshot.__dataclass_fields__}
    assert check_enough_replicas_reach_offset(kind(**fields), required_offset=10) == expected


def test_check_enough_replicas_reach_offset_without_a_snapshot_is_an_unknown_partition() -> None:
    assert check_enough_replicas_reach_offset(None, 0) == (
        True,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )


# -- DelayedProduce ----------------------------------------------------------------------------


def status(
    partition: int, required_offset: int, error: ErrorCode = ErrorCode.NONE
) -> ProducePartitionStatus:
    return ProducePartitionStatus(
        topic="t",
        partition=partition,
        required_offset=required_offset,
        base_offset=required_offset - 3,
        error_code=error,
    )


def produce_request(*statuses: ProducePartitionStatus) -> DelayOperation:
    return DelayOperation(
        reply_to=CLIENT,
        correlation_id=CORRELATION_ID,
        operation=ProduceSpec(partitions=statuses),
        keys=tuple(str(TopicPartition.of(s)) for s in statuses),
        timeout_ms=TIMEOUT_MS,
    )


def outcomes(response: ProduceResponse) -> list[tuple[int, ErrorCode, int]]:
    return [(r.partition, r.error_code, r.base_offset) for r in response.partitions]


def test_produce_completes_only_once_every_partition_reached_its_offset(h: Harness) -> None:
    h.set(snapshot(0, hw=0), snapshot(1, hw=0))

    operation, completed = h.submit(produce_request(status(0, 10), status(1, 5)))
    assert completed is False
    assert h.responses == []

    assert h.publish(snapshot(0, hw=9, kind=HighWatermarkAdvanced)) == 0
    assert h.publish(snapshot(0, hw=10, kind=HighWatermarkAdvanced)) == 0  # t-1 still short
    assert h.responses == []
    assert not operation.is_completed()

    assert h.publish(snapshot(1, hw=5, kind=HighWatermarkAdvanced)) == 1

    response = h.produce_response()
    assert outcomes(response) == [(0, ErrorCode.NONE, 7), (1, ErrorCode.NONE, 2)]
    assert all(isinstance(r, ProducePartitionResult) for r in response.partitions)
    assert h.purgatory.num_delayed == 0
    assert h.timer.size == 0


def test_produce_already_satisfied_completes_at_once(h: Harness) -> None:
    h.set(snapshot(0, hw=10))

    _, completed = h.submit(produce_request(status(0, 10)))

    assert completed is True
    assert outcomes(h.produce_response()) == [(0, ErrorCode.NONE, 7)]
    assert h.timer.size == 0


def test_produce_reports_each_partitions_own_outcome(h: Harness) -> None:
    h.set(snapshot(0, hw=0), snapshot(1, hw=0), snapshot(2, hw=0))
    h.submit(produce_request(status(0, 10), status(1, 10), status(2, 10)))

    h.publish(snapshot(1, hw=10, isr=(1,), min_isr=2))  # the ISR shrank below min meanwhile
    h.publish(snapshot(2, hw=4, is_leader=False, kind=LeadershipChanged))
    assert h.responses == []
    h.publish(snapshot(0, hw=10))

    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
        (2, ErrorCode.NOT_LEADER_FOR_PARTITION),
    ]


def test_produce_reports_a_partitions_early_error(h: Harness) -> None:
    h.set(snapshot(0, hw=0), snapshot(1, hw=100))
    request = produce_request(status(0, 10), status(1, 10, ErrorCode.MESSAGE_TOO_LARGE))

    _, completed = h.submit(request)
    assert completed is False  # t-1 failed before the append; t-0 still waits

    h.publish(snapshot(0, hw=10))

    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.MESSAGE_TOO_LARGE),  # not overwritten by t-1's satisfied snapshot
    ]


def test_produce_keeps_a_refused_partitions_record_errors_while_another_waits(
    h: Harness,
) -> None:
    """An acks=-1 produce whose t-1 batch Kafka's LogValidator refused answers t-1 with its
    record errors, message and log start offset (KIP-467), as acks 1 would, once t-0 is done."""
    h.set(snapshot(0, hw=0))
    refused = replace(
        status(1, 0, ErrorCode.INVALID_RECORD),
        base_offset=-1,
        log_start_offset=4,
        record_errors=(ProduceRecordError(batch_index=1, message="no key"),),
        error_message="One or more records have been rejected",
    )
    h.submit(produce_request(status(0, 10), refused))
    h.publish(snapshot(0, hw=10))

    answered = {r.partition: r for r in h.produce_response().partitions}
    assert answered[0].error_code is ErrorCode.NONE
    assert (
        answered[1].error_code,
        answered[1].record_errors,
        answered[1].error_message,
        answered[1].log_start_offset,
    ) == (ErrorCode.INVALID_RECORD, refused.record_errors, refused.error_message, 4)


def test_produce_whose_partitions_all_failed_early_completes_at_once(h: Harness) -> None:
    request = produce_request(
        status(0, 10, ErrorCode.NOT_LEADER_FOR_PARTITION),
        status(1, 10, ErrorCode.CORRUPT_MESSAGE),
    )

    _, completed = h.submit(request)

    assert completed is True
    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.NOT_LEADER_FOR_PARTITION),
        (1, ErrorCode.CORRUPT_MESSAGE),
    ]


def test_produce_to_an_unknown_or_stopped_partition_completes_at_once(h: Harness) -> None:
    h.set(snapshot(1, hw=100, exists=False))

    _, completed = h.submit(produce_request(status(0, 10), status(1, 10)))

    assert completed is True
    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_produce_times_out_only_the_partitions_still_pending(h: Harness) -> None:
    h.set(snapshot(0, hw=0), snapshot(1, hw=0), snapshot(2, hw=0))
    h.submit(produce_request(status(0, 10), status(1, 10), status(2, 10)))
    h.publish(snapshot(0, hw=10))
    h.publish(snapshot(1, hw=10, isr=(1,), min_isr=2))

    h.advance(TIMEOUT_MS - 1)
    assert h.responses == []
    h.advance(1)

    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
        (2, ErrorCode.REQUEST_TIMED_OUT),
    ]


def test_produce_answers_exactly_once_when_the_hw_arrives_after_the_timeout(h: Harness) -> None:
    h.set(snapshot(0, hw=0))
    operation, _ = h.submit(produce_request(status(0, 10)))

    h.advance(TIMEOUT_MS)
    assert operation.is_completed()
    assert h.publish(snapshot(0, hw=10)) == 0
    assert h.purgatory.check_and_complete("t-0") == 0
    h.advance(10 * TIMEOUT_MS)

    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.REQUEST_TIMED_OUT)
    ]


def test_produce_completed_by_the_hw_is_not_answered_again_at_its_timeout(h: Harness) -> None:
    h.set(snapshot(0, hw=0))
    h.submit(produce_request(status(0, 10)))
    assert h.publish(snapshot(0, hw=10)) == 1

    h.advance(10 * TIMEOUT_MS)
    h.publish(snapshot(0, hw=20))

    assert outcomes(h.produce_response()) == [(0, ErrorCode.NONE, 7)]
    assert h.timer.size == 0


def test_produce_fails_with_not_leader_once_leadership_moves_kafka_2960(h: Harness) -> None:
    h.set(snapshot(0, hw=0))
    h.submit(produce_request(status(0, 10)))

    assert h.publish(snapshot(0, hw=0, is_leader=False, kind=LeadershipChanged)) == 1
    # leadership comes back and the HW passes the offset: the answer was already given
    h.publish(snapshot(0, hw=10, kind=LeadershipChanged))

    assert [(p, e) for p, e, _ in outcomes(h.produce_response())] == [
        (0, ErrorCode.NOT_LEADER_FOR_PARTITION)
    ]


# -- DelayedFetch ------------------------------------------------------------------------------


def open_log(logs: dict[str, Log], tmp_path: Path, partition: int = 0, **config: Any) -> Log:
    log = Log(tmp_path / f"t-{partition}", LogConfig(**config))
    logs[str(TopicPartition(topic="t", partition=partition))] = log
    return log


def append(log: Log, count: int = 1, value_size: int = 20) -> int:
    """Append one batch of `count` records; its size in bytes."""
    records = [Record(b"k", bytes(value_size), 1_000 + i) for i in range(count)]
    return log.append_as_leader(records, leader_epoch=0).size_in_bytes


def fetch_request(
    *partitions: FetchPartition,
    replica_id: int = CONSUMER_REPLICA_ID,
    min_bytes: int = 1,
) -> DelayOperation:
    return DelayOperation(
        reply_to=CLIENT,
        correlation_id=CORRELATION_ID,
        operation=FetchSpec(replica_id=replica_id, min_bytes=min_bytes, partitions=partitions),
        keys=tuple(str(TopicPartition.of(p)) for p in partitions),
        timeout_ms=TIMEOUT_MS,
    )


def wanted(partition: int = 0, fetch_offset: int = 0, max_bytes: int = 1 << 20) -> FetchPartition:
    return FetchPartition(
        topic="t", partition=partition, fetch_offset=fetch_offset, max_bytes=max_bytes
    )


def batch_offsets(data: FetchPartitionData) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(data.records)]


def test_consumer_fetch_waits_at_the_hw_while_the_leo_moves_on(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    for _ in range(3):
        append(log)
    h.set(log_snapshot(log, hw=1))

    operation, completed = h.submit(fetch_request(wanted(fetch_offset=1)))
    assert completed is False

    append(log)
    assert h.publish(log_snapshot(log, hw=1, kind=LogEndOffsetAdvanced)) == 0
    assert h.responses == []
    assert not operation.is_completed()

    assert h.publish(log_snapshot(log, hw=3, kind=HighWatermarkAdvanced)) == 1

    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    assert (data.high_watermark, data.log_end_offset) == (3, 4)
    assert batch_offsets(data) == [(1, 1), (2, 2)]


def test_follower_fetch_reads_up_to_the_log_end(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    for _ in range(3):
        append(log)
    h.set(log_snapshot(log, hw=1))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=1), replica_id=FOLLOWER))

    assert completed is True
    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    assert batch_offsets(data) == [(1, 1), (2, 2)]  # past the HW: a follower reads to the LEO


def test_follower_fetch_at_the_log_end_completes_on_the_next_append(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    h.set(log_snapshot(log, hw=1))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=1), replica_id=FOLLOWER))
    assert completed is False

    append(log, count=2)
    assert h.publish(log_snapshot(log, hw=1, kind=LogEndOffsetAdvanced)) == 1

    assert batch_offsets(h.fetch_response().partitions[0]) == [(1, 2)]


def test_min_bytes_accumulate_across_partitions(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    logs_by_partition = [open_log(logs, tmp_path, p) for p in (0, 1)]
    sizes = [append(log) for log in logs_by_partition]
    t0, t1 = logs_by_partition
    h.set(log_snapshot(t0, hw=1), log_snapshot(t1, hw=0))

    _, completed = h.submit(fetch_request(wanted(0), wanted(1), min_bytes=sum(sizes)))
    assert completed is False  # t-0's batch alone is not enough

    assert h.publish(log_snapshot(t1, hw=1, kind=HighWatermarkAdvanced)) == 1

    assert [batch_offsets(d) for d in h.fetch_response().partitions] == [[(0, 0)], [(0, 0)]]


def test_min_bytes_one_more_than_available_keeps_waiting(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    t0, t1 = (open_log(logs, tmp_path, p) for p in (0, 1))
    sizes = [append(t0), append(t1)]
    h.set(log_snapshot(t0, hw=1), log_snapshot(t1, hw=1))

    _, completed = h.submit(fetch_request(wanted(0), wanted(1), min_bytes=sum(sizes) + 1))

    assert completed is False
    assert h.responses == []


def test_each_partition_counts_at_most_its_max_bytes_towards_min_bytes(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    t0, t1 = (open_log(logs, tmp_path, p) for p in (0, 1))
    size = append(t0, value_size=200)
    assert append(t1, value_size=200) == size
    h.set(log_snapshot(t0, hw=1), log_snapshot(t1, hw=1))
    cap = size // 4

    # uncapped, 2 * size bytes are there; capped, size + cap
    _, over = h.submit(fetch_request(wanted(0, max_bytes=cap), wanted(1), min_bytes=size + cap + 1))
    assert over is False
    assert h.responses == []

    _, exact = h.submit(fetch_request(wanted(0, max_bytes=cap), wanted(1), min_bytes=size + cap))
    assert exact is True
    assert len(h.responses) == 1


def test_fetch_from_an_older_segment_than_the_readable_end_completes_at_once(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path, segment_bytes=100)
    append(log)
    log.roll()
    append(log)
    assert log.num_segments == 2
    h.set(log_snapshot(log, hw=2))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=0), min_bytes=1 << 20))

    assert completed is True
    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    assert batch_offsets(data)[0] == (0, 0)


def test_fetch_on_the_readable_ends_segment_waits_for_min_bytes(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    append(log)
    h.set(log_snapshot(log, hw=2))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=0), min_bytes=1 << 20))

    assert completed is False


def test_fetch_at_a_hw_left_on_the_segment_before_a_roll_keeps_waiting(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    hw_before_roll = log.log_end_offset_metadata  # offset 1, end of segment 0
    log.roll()
    append(log)
    h.set(log_snapshot(log, hw=1, hw_position=hw_before_roll))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=1)))

    assert completed is False  # nothing below the HW to read: not "case C"
    assert h.responses == []


@pytest.mark.parametrize("replica_id", [CONSUMER_REPLICA_ID, FOLLOWER])
def test_fetch_of_an_unknown_partition_completes_at_once(
    h: Harness, logs: dict[str, Log], tmp_path: Path, replica_id: int
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    h.set(log_snapshot(log, hw=1))

    _, completed = h.submit(
        fetch_request(wanted(0, fetch_offset=1), wanted(1), replica_id=replica_id)
    )

    assert completed is True
    known, unknown = h.fetch_response().partitions
    assert (known.partition, known.error_code, known.records) == (0, ErrorCode.NONE, b"")
    assert (unknown.partition, unknown.error_code) == (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_waiting_fetch_completes_with_not_leader_when_leadership_moves(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    h.set(log_snapshot(log, hw=1))
    _, completed = h.submit(fetch_request(wanted(fetch_offset=1)))
    assert completed is False

    assert h.publish(log_snapshot(log, hw=1, is_leader=False, kind=LeadershipChanged)) == 1

    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NOT_LEADER_FOR_PARTITION
    assert data.records == b""


def test_fetch_from_a_replica_that_does_not_lead_completes_at_once(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    h.set(log_snapshot(log, hw=1, is_leader=False))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=0), replica_id=FOLLOWER))

    assert completed is True
    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NOT_LEADER_FOR_PARTITION
    assert data.records == b""


@pytest.mark.parametrize("replica_id", [CONSUMER_REPLICA_ID, FOLLOWER])
def test_fetch_past_the_log_end_is_out_of_range_at_once(
    h: Harness, logs: dict[str, Log], tmp_path: Path, replica_id: int
) -> None:
    log = open_log(logs, tmp_path)
    append(log, count=2)
    h.set(log_snapshot(log, hw=2))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=3), replica_id=replica_id))

    assert completed is True
    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert (data.high_watermark, data.log_end_offset, data.log_start_offset) == (2, 2, 0)
    assert data.records == b""


@pytest.mark.parametrize("replica_id", [CONSUMER_REPLICA_ID, FOLLOWER])
def test_fetch_below_the_log_start_is_out_of_range_at_once(
    h: Harness, logs: dict[str, Log], tmp_path: Path, replica_id: int
) -> None:
    log = open_log(logs, tmp_path)
    log.append_as_follower(build_batch([Record(b"k", b"v", 1_000)] * 2, 5, 0))  # offsets 5, 6
    assert log.log_start_offset == 5
    h.set(log_snapshot(log, hw=7))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=4), replica_id=replica_id))

    assert completed is True
    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert data.log_start_offset == 5
    assert data.records == b""


def test_fetch_at_its_timeout_returns_nothing_without_an_error(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    h.set(log_snapshot(log, hw=1))
    h.submit(fetch_request(wanted(fetch_offset=1)))

    h.advance(TIMEOUT_MS - 1)
    assert h.responses == []
    h.advance(1)

    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    assert data.records == b""
    assert data.high_watermark == 1


def test_fetch_at_its_timeout_returns_the_bytes_short_of_min_bytes(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    append(log)
    h.set(log_snapshot(log, hw=2))
    h.submit(fetch_request(wanted(fetch_offset=0), min_bytes=1 << 20))

    h.advance(TIMEOUT_MS)
    h.publish(log_snapshot(log, hw=2))  # a late re-check does not answer again

    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    assert batch_offsets(data) == [(0, 0), (1, 1)]


def test_fetch_with_min_bytes_zero_completes_at_once_even_without_data(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    h.set(log_snapshot(log, hw=0))

    _, completed = h.submit(fetch_request(wanted(fetch_offset=0), min_bytes=0))

    assert completed is True
    assert h.fetch_response().partitions[0].records == b""


def test_consumer_fetch_past_the_hw_but_within_the_log_gets_nothing(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    for _ in range(3):
        append(log)
    h.set(log_snapshot(log, hw=1))
    h.submit(fetch_request(wanted(fetch_offset=2)))

    h.advance(TIMEOUT_MS)

    (data,) = h.fetch_response().partitions
    assert data.error_code is ErrorCode.NONE
    assert data.records == b""


@pytest.mark.parametrize("hw", range(1, 10))
@pytest.mark.parametrize("fetch_offset", [0, 3])
def test_a_consumer_never_receives_a_batch_that_reaches_the_hw(
    h: Harness, logs: dict[str, Log], tmp_path: Path, hw: int, fetch_offset: int
) -> None:
    log = open_log(logs, tmp_path)
    for _ in range(3):
        append(log, count=3)  # batches [0, 2], [3, 5], [6, 8]
    h.set(log_snapshot(log, hw=hw))

    h.submit(fetch_request(wanted(fetch_offset=fetch_offset)))
    h.advance(TIMEOUT_MS)  # completes it if it had not completed already

    (data,) = h.fetch_response().partitions
    assert data.high_watermark == hw
    if fetch_offset >= hw:
        assert data.records == b""
        return
    assert data.error_code is ErrorCode.NONE
    offsets = batch_offsets(data)
    assert all(last < hw for _, last in offsets), offsets
    complete_batches = [(b, b + 2) for b in range(fetch_offset, 9, 3) if b + 2 < hw]
    assert offsets == complete_batches  # every whole batch below the HW is there


# -- what completed an operation ------------------------------------------------------------------

TRACE = "a1" * 8
CAUSE_TRACE = "b2" * 8
CAUSE_SPAN = "c3" * 8  # the span the partition was handling when it published
SNAPSHOT_SPAN = "d4" * 8  # the snapshot's own hop
PARTITION = "broker/1/partition/t-0"


@pytest.fixture
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("previous", "current", "cause"),
    [
        (None, snapshot(hw=5, kind=LogEndOffsetAdvanced), APPEND),
        (None, snapshot(hw=5, kind=HighWatermarkAdvanced), HIGH_WATERMARK),
        (None, snapshot(hw=5, kind=LeadershipChanged), LEADERSHIP),
        (snapshot(hw=5), snapshot(hw=5, kind=LeadershipChanged), LEADERSHIP),
        (snapshot(hw=5), snapshot(hw=6, is_leader=False), LEADERSHIP),
        (snapshot(hw=5), snapshot(hw=6, exists=False), LEADERSHIP),
        (snapshot(hw=5, is_leader=False), snapshot(hw=6, kind=HighWatermarkAdvanced), LEADERSHIP),
        (snapshot(hw=5, isr=(1, 2, 3)), snapshot(hw=5, isr=(1, 2)), ISR_SHRINK),
        # the shrink is what let the HW advance: it is named, not the HW
        (snapshot(hw=5, isr=(1, 2, 3)), snapshot(hw=9, isr=(1, 2)), ISR_SHRINK),
        (snapshot(hw=5, leo=9), snapshot(hw=9, leo=9), HIGH_WATERMARK),
        (snapshot(hw=5, isr=(1,)), snapshot(hw=9, isr=(1, 2)), HIGH_WATERMARK),
        (snapshot(hw=5, isr=(1,)), snapshot(hw=5, isr=(1, 2)), ISR_EXPAND),
        (snapshot(hw=5, leo=5), snapshot(hw=5, leo=7, kind=LogEndOffsetAdvanced), APPEND),
        (snapshot(hw=5), snapshot(hw=5, kind=HighWatermarkAdvanced), HIGH_WATERMARK),
    ],
)
def test_a_snapshot_says_what_changed_most_consequentially(
    previous: PartitionSnapshot | None, current: PartitionSnapshot, cause: str
) -> None:
    assert snapshot_cause(previous, current) == cause


@pytest.mark.timeout(10)
def test_a_leader_epoch_change_is_leadership() -> None:
    previous = snapshot(hw=5)
    moved = PartitionSnapshot(**{**fields_of(snapshot(hw=9)), "leader_epoch": 1})
    assert snapshot_cause(previous, moved) == LEADERSHIP


def fields_of(snapshot: PartitionSnapshot) -> dict[str, Any]:
    return {name: getattr(snapshot, name) for name in PartitionSnapshot.__dataclass_fields__}


def completion_fields(event: dict[str, Any]) -> tuple[str, str, str]:
    return (
        event["completed_by"],
        event["completed_by_trace_id"],
        event["completed_by_span_id"],
    )


@pytest.mark.timeout(10)
def test_the_produce_response_names_what_completed_its_wait(h: Harness, events: EventLog) -> None:
    h.set(snapshot(0, hw=0))
    h.submit(produce_request(status(0, 10)))

    cause = CompletedBy(ISR_SHRINK, CAUSE_TRACE, CAUSE_SPAN)
    assert h.publish(snapshot(0, hw=10, isr=(1,), min_isr=1), completed_by=cause) == 1

    assert outcomes(h.produce_response()) == [(0, ErrorCode.NONE, 7)]
    (response,) = events.named("produce.response")
    assert completion_fields(response) == (ISR_SHRINK, CAUSE_TRACE, CAUSE_SPAN)
    assert (response["waited"], response["outcome"]) == (True, "completed")


@pytest.mark.timeout(10)
def test_responses_that_did_not_wait_or_expired_by_the_timer_alone_say_so(
    h: Harness, logs: dict[str, Log], tmp_path: Path, events: EventLog
) -> None:
    h.set(snapshot(0, hw=10), snapshot(1, hw=0))
    h.submit(produce_request(status(0, 10)))  # satisfied on arrival: nothing completed it
    h.submit(produce_request(status(1, 10)))  # expired by a timer run inline: no span to name
    log = open_log(logs, tmp_path, 2)
    h.set(log_snapshot(log, hw=0))
    h.submit(fetch_request(wanted(2)))
    h.advance(TIMEOUT_MS)

    at_once, expired = events.named("produce.response")
    assert at_once["waited"] is False and "completed_by" not in at_once
    assert completion_fields(expired) == (EXPIRED, "", "")
    (fetched,) = events.named("fetch.response")
    assert (fetched["outcome"], completion_fields(fetched)) == ("expired", (EXPIRED, "", ""))


def hop(payload: Any, *, trace_id: str, span_id: str, parent_span_id: str = "") -> Envelope:
    return Envelope(
        payload=payload,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        sender=PARTITION,
    )


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("parent_span_id", "named_span"),
    [(CAUSE_SPAN, CAUSE_SPAN), ("", SNAPSHOT_SPAN)],
    ids=["the span the partition was handling", "the snapshot's hop when it has no parent"],
)
def test_a_snapshot_completes_operations_in_the_span_its_partition_published_it_from(
    h: Harness, events: EventLog, parent_span_id: str, named_span: str
) -> None:
    actor = h.actor  # never started: its handlers run here, on the test's thread
    actor.on_receive(
        hop(snapshot(0, hw=0, kind=LeadershipChanged), trace_id=CAUSE_TRACE, span_id="e5" * 8)
    )
    actor.on_receive(hop(produce_request(status(0, 10)), trace_id=TRACE, span_id="f6" * 8))
    assert h.responses == []

    actor.on_receive(
        hop(
            snapshot(0, hw=10, kind=HighWatermarkAdvanced),
            trace_id=CAUSE_TRACE,
            span_id=SNAPSHOT_SPAN,
            parent_span_id=parent_span_id,
        )
    )

    assert outcomes(h.produce_response()) == [(0, ErrorCode.NONE, 7)]
    (response,) = events.named("produce.response")
    assert response["trace_id"] == TRACE
    assert completion_fields(response) == (HIGH_WATERMARK, CAUSE_TRACE, named_span)
    (complete,) = events.named("purgatory.complete", key="t-0")
    assert (complete["trace_id"], complete["completed_by"]) == (CAUSE_TRACE, HIGH_WATERMARK)


@pytest.mark.timeout(10)
def test_an_expiry_from_the_reaper_names_its_hop(h: Harness, events: EventLog) -> None:
    actor = h.actor
    actor.on_receive(
        hop(snapshot(0, hw=0, kind=LeadershipChanged), trace_id=CAUSE_TRACE, span_id="e5" * 8)
    )
    actor.on_receive(hop(produce_request(status(0, 10)), trace_id=TRACE, span_id="f6" * 8))
    (operation,) = actor.purgatory.pending()

    expiry_span = "07" * 8
    actor.on_receive(
        hop(
            OperationsExpired(operation_ids=(operation.operation_id,)),
            trace_id=TRACE,
            span_id=expiry_span,
            parent_span_id="f6" * 8,
        )
    )

    assert outcomes(h.produce_response()) == [(0, ErrorCode.REQUEST_TIMED_OUT, -1)]
    (response,) = events.named("produce.response")
    assert completion_fields(response) == (EXPIRED, TRACE, expiry_span)
    assert response["outcome"] == "expired"


@pytest.mark.parametrize(
    ("current_leader_epoch", "expected"),
    [
        (-1, ErrorCode.NONE),  # named no epoch: not checked (a follower, an old client)
        (3, ErrorCode.NONE),
        (2, ErrorCode.FENCED_LEADER_EPOCH),  # the fetcher's metadata is stale
        (4, ErrorCode.UNKNOWN_LEADER_EPOCH),  # this leader has not learned of that epoch yet
    ],
)
def test_a_consumer_naming_another_leader_epoch_is_told_at_once_kip_320(
    h: Harness,
    logs: dict[str, Log],
    tmp_path: Path,
    current_leader_epoch: int,
    expected: ErrorCode,
) -> None:
    log = open_log(logs, tmp_path)
    append(log)
    h.set(replace(log_snapshot(log, hw=1), leader_epoch=3))
    named = replace(wanted(fetch_offset=1), current_leader_epoch=current_leader_epoch)

    _, completed = h.submit(fetch_request(named))

    # at the HW with nothing new: only a fetch with an epoch error is answered without waiting
    assert completed is (expected is not ErrorCode.NONE)
    if completed:
        (data,) = h.fetch_response().partitions
        assert data.error_code is expected


def test_the_responses_max_bytes_bounds_the_partitions_read_after_the_first_kip_74(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    """Partitions are read in order within what the response's max_bytes leaves: the first one
    with data gets a batch even past the limit, the next ones only what fits."""
    logs_by_partition = [open_log(logs, tmp_path, partition=p) for p in range(3)]
    size = 0
    for log in logs_by_partition:
        for _ in range(3):
            size = append(log, value_size=100)
        h.set(log_snapshot(log, hw=3))
    request = fetch_request(*(wanted(p) for p in range(3)))
    spec = request.operation
    assert isinstance(spec, FetchSpec)
    limited = replace(request, operation=replace(spec, max_bytes=size + size // 2))

    _, completed = h.submit(limited)

    assert completed is True
    first, second, third = h.fetch_response().partitions
    assert batch_offsets(first) == [(0, 0)]  # one batch: half of the next would not fit
    assert batch_offsets(second) == []  # what is left is less than a batch
    assert batch_offsets(third) == []
    assert all(d.error_code is ErrorCode.NONE for d in (first, second, third))
    assert sum(len(d.records) for d in (first, second, third)) <= size + size // 2


def test_without_a_responses_max_bytes_every_partition_returns_its_first_batch(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    """Followers and the in-process consumer name no response limit: as before KIP-74's
    response limit, each partition returns at least its first batch."""
    for p in range(2):
        log = open_log(logs, tmp_path, partition=p)
        append(log, value_size=400)
        h.set(log_snapshot(log, hw=1))

    _, completed = h.submit(fetch_request(wanted(0, max_bytes=10), wanted(1, max_bytes=10)))

    assert completed is True
    assert [batch_offsets(d) for d in h.fetch_response().partitions] == [[(0, 0)], [(0, 0)]]
