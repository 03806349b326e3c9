"""DeleteRecords' pure parts (KIP-107): the low watermark (Kafka's `lowWatermarkIfLeader`), the
leader's refusals (`deleteRecordsOnLeader`), a follower following its leader's log start, the
replica manager's decision to wait, and DelayedDeleteRecords on a ManualClock."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactor.actors.purgatory import Purgatory
from kafkactor.actors.replication import PartitionState, ReplicaPurgatoryActor
from kafkactor.actors.replication.delayed_delete_records import (
    DelayedDeleteRecords,
    delete_records_outcome,
    plan_delete_records,
)
from kafkactor.actors.replication.delete_records import (
    delete_records_on_leader,
    follow_leader_log_start,
)
from kafkactor.actors.replication.fetcher_state import FetcherState
from kafkactor.actors.replication.log_dirs import describe_log_dirs
from kafkactor.actors.replication.replica_purgatory import LOW_WATERMARK, snapshot_cause
from kafkactor.actors.runtime import Directory
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsSpec,
    DeleteRecordsStatus,
    DescribeLogDirsTopic,
    RecordsDeleted,
)
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    FetcherPartition,
    FetchPartitionData,
    LowWatermarkAdvanced,
    PartitionSnapshot,
)
from kafkactor.storage import Log, LogConfig, LogManager, Record
from kafkactor.timer import ManualClock, Scheduler, Timer
from tests.actors.replication.test_delayed import RecordingMailbox

pytestmark = pytest.mark.timeout(30)

ALIVE = frozenset({1, 2, 3})


def leader(replicas: tuple[int, ...] = (1, 2, 3), high_watermark: int = 0) -> PartitionState:
    state = PartitionState("t", 0, 1, high_watermark=high_watermark)
    state.make_leader(
        PartitionLeaderState(
            topic="t", partition=0, leader=1, leader_epoch=0, isr=replicas, replicas=replicas
        ),
        0,
        high_watermark,
    )
    return state


def fetched(state: PartitionState, replica: int, offset: int, log_start: int) -> None:
    state.update_follower(replica, offset, offset, 0, log_start)


# -- the low watermark ---------------------------------------------------------------------------


def test_the_low_watermark_is_the_smallest_log_start_over_the_live_replicas() -> None:
    state = leader()
    # followers not heard from since this leadership began count as unknown (-1)
    assert state.low_watermark(5, ALIVE.__contains__) == -1
    fetched(state, 2, 10, 4)
    fetched(state, 3, 10, 7)
    assert state.low_watermark(5, ALIVE.__contains__) == 4
    assert state.low_watermark(3, ALIVE.__contains__) == 3  # the leader's own counts
    # a follower on a dead broker does not hold it back, ISR member or not
    assert state.low_watermark(5, {1, 3}.__contains__) == 5
    # a fetch that does not say its log start (an old version) leaves it as it was
    state.update_follower(2, 10, 10, 0)
    assert state.low_watermark(5, ALIVE.__contains__) == 4


def test_a_follower_out_of_the_isr_still_counts() -> None:
    state = leader(replicas=(1, 2, 3))
    state.isr = (1, 2)
    fetched(state, 2, 10, 6)
    fetched(state, 3, 2, 1)
    assert state.low_watermark(6, ALIVE.__contains__) == 1


def test_a_follower_has_no_low_watermark() -> None:
    state = PartitionState("t", 0, 2)
    state.make_follower(
        PartitionLeaderState(topic="t", partition=0, leader=1, isr=(1, 2), replicas=(1, 2)), 0
    )
    assert state.low_watermark(3, ALIVE.__contains__) == -1


# -- the leader's deletion -----------------------------------------------------------------------


@pytest.fixture
def log(tmp_path: Path) -> Log:
    opened = Log(tmp_path / "t-0", LogConfig(segment_bytes=200))
    for i in range(10):
        opened.append_as_leader([Record(b"k", b"v%d" % i, 0)], leader_epoch=0)
    return opened


def test_the_leader_moves_its_start_and_answers_its_low_watermark(log: Log) -> None:
    state = leader(high_watermark=8)
    fetched(state, 2, 8, 0)
    fetched(state, 3, 8, 0)
    answer = delete_records_on_leader(state, log, 5, ALIVE.__contains__)
    assert (answer.error_code, answer.requested_offset, answer.low_watermark) == (
        ErrorCode.NONE,
        5,
        0,
    )
    assert log.log_start_offset == 5
    # -1 is the high watermark
    answer = delete_records_on_leader(state, log, -1, ALIVE.__contains__)
    assert answer.requested_offset == 8
    assert log.log_start_offset == 8


@pytest.mark.parametrize(
    ("offset", "config", "is_leader", "code", "message"),
    [
        (
            9,
            LogConfig(),
            True,
            ErrorCode.OFFSET_OUT_OF_RANGE,
            "Cannot increment the log start offset to 9 of partition t-0 since it is larger "
            "than the high watermark 8",
        ),
        (
            -2,
            LogConfig(),
            True,
            ErrorCode.OFFSET_OUT_OF_RANGE,
            "The offset -2 for partition t-0 is not valid",
        ),
        (
            3,
            LogConfig(cleanup_policy="compact"),
            True,
            ErrorCode.POLICY_VIOLATION,
            "Records of partition t-0 can not be deleted due to the configured policy",
        ),
        (
            3,
            LogConfig(),
            False,
            ErrorCode.NOT_LEADER_FOR_PARTITION,
            "Leader not local for partition t-0 on broker 1",
        ),
    ],
)
def test_kafkas_refusals_change_nothing(  # noqa: PLR0917 - the parametrized case
    log: Log, offset: int, config: LogConfig, is_leader: bool, code: ErrorCode, message: str
) -> None:
    state = leader(high_watermark=8)
    if not is_leader:
        state.stop()
    log.config = config
    answer = delete_records_on_leader(state, log, offset, ALIVE.__contains__)
    assert (answer.error_code, answer.message, answer.low_watermark) == (code, message, -1)
    assert log.log_start_offset == 0


def test_a_follower_follows_its_leaders_start_up_to_its_own_high_watermark(log: Log) -> None:
    state = PartitionState("t", 0, 2, high_watermark=6)
    assert follow_leader_log_start(state, log, 4)
    assert log.log_start_offset == 4
    assert not follow_leader_log_start(state, log, 3)  # never back
    assert follow_leader_log_start(state, log, 9)  # past its HW: as far as its HW
    assert log.log_start_offset == 6


def test_a_fetch_answer_with_a_new_leader_log_start_is_handed_to_the_partition() -> None:
    fetcher = FetcherState(backoff_ms=100)
    fetcher.add([FetcherPartition(topic="t", partition=0, fetch_offset=10, leader_epoch=0)])
    answer = FetchPartitionData(topic="t", partition=0, high_watermark=10, log_start_offset=0)
    first = fetcher.fetched(answer, 0)
    assert first is not None
    assert first.append  # the first answer: the HW is news
    again = fetcher.fetched(answer, 0)
    assert again is not None
    assert not again.append  # nothing new: no append
    moved = fetcher.fetched(
        FetchPartitionData(topic="t", partition=0, high_watermark=10, log_start_offset=4), 0
    )
    assert moved is not None
    assert moved.append  # the leader's log start moved: the follower's must follow


# -- the replica manager: answer now, or wait ----------------------------------------------------


def request(*offsets: tuple[str, int, int]) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(
        reply_to="client/x",
        correlation_id=7,
        timeout_ms=500,
        partitions=tuple(
            DeleteRecordsPartition(topic=t, partition=p, offset=o) for t, p, o in offsets
        ),
    )


def test_the_replica_manager_waits_only_for_low_watermarks_behind() -> None:
    asked = request(("t", 0, 5), ("t", 1, 5), ("__consumer_offsets", 0, 1), ("u", 0, 1))
    plan = plan_delete_records(
        asked,
        lambda topic, _p: "partition/t" if topic == "t" else None,
        lambda _t, _p: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    assert set(plan.orders) == {"t-0", "t-1"}
    assert plan.refused["__consumer_offsets-0"].error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert plan.refused["u-0"].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    done = {
        "t-0": RecordsDeleted(topic="t", partition=0, requested_offset=5, low_watermark=5),
        "t-1": RecordsDeleted(topic="t", partition=1, requested_offset=5, low_watermark=5),
    }
    now = delete_records_outcome(asked, plan, done)
    assert isinstance(now, DeleteRecordsResponse)
    assert [(r.partition, r.low_watermark, r.error_code) for r in now.partitions] == [
        (0, 5, ErrorCode.NONE),
        (1, 5, ErrorCode.NONE),
        (0, -1, ErrorCode.INVALID_TOPIC_EXCEPTION),
        (0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    behind = {
        **done,
        "t-1": RecordsDeleted(topic="t", partition=1, requested_offset=5, low_watermark=2),
    }
    later = delete_records_outcome(asked, plan, behind)
    assert isinstance(later, DelayOperation)
    assert later.keys == ("t-0", "t-1")
    assert later.timeout_ms == 500


# -- DelayedDeleteRecords ------------------------------------------------------------------------


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock(0)
        self.timer = Timer(self.clock, executor=lambda task: task.run())
        self.directory = Directory()
        self.client = RecordingMailbox()
        self.directory.register("client/x", self.client)
        self.actor = ReplicaPurgatoryActor(
            "broker/1/purgatory/delete-records", self.directory, self.timer, self.clock, 1
        )
        self.purgatory = Purgatory("DeleteRecords", self.timer, purge_interval=1)

    def publish(self, partition: int, low: int, *, is_leader: bool = True) -> None:
        key = f"t-{partition}"
        self.actor.snapshots[key] = LowWatermarkAdvanced(
            key=key, topic="t", partition=partition, is_leader=is_leader, low_watermark=low
        )
        self.purgatory.check_and_complete(key)

    def submit(self, *statuses: DeleteRecordsStatus) -> DelayedDeleteRecords:
        operation = DelayedDeleteRecords(
            self.actor,
            DelayOperation(
                reply_to="client/x",
                correlation_id=7,
                operation=DeleteRecordsSpec(partitions=statuses),
                keys=tuple(str(TopicPartition.of(s)) for s in statuses),
                timeout_ms=500,
            ),
        )
        self.purgatory.try_complete_else_watch(operation, operation.request.keys)
        return operation

    def answers(self) -> list[tuple[int, int, ErrorCode]]:
        [response] = self.client.payloads
        assert isinstance(response, DeleteRecordsResponse)
        return [(r.partition, r.low_watermark, r.error_code) for r in response.partitions]


def waiting(partition: int, required: int, low: int) -> DeleteRecordsStatus:
    return DeleteRecordsStatus(
        topic="t", partition=partition, required_offset=required, low_watermark=low
    )


def test_completes_when_every_low_watermark_reached_its_offset() -> None:
    h = Harness()
    h.publish(0, 2)
    h.publish(1, 5)
    h.submit(waiting(0, 5, 2), waiting(1, 5, 5))
    assert h.client.payloads == []
    h.publish(0, 4)
    assert h.client.payloads == []
    h.publish(0, 6)
    assert h.answers() == [(0, 6, ErrorCode.NONE), (1, 5, ErrorCode.NONE)]


def test_at_the_timeout_the_partitions_behind_answer_request_timed_out() -> None:
    h = Harness()
    h.publish(0, 2)
    h.publish(1, 5)
    h.submit(waiting(0, 5, 2), waiting(1, 5, 5))
    h.clock.advance(499)
    h.timer.advance_clock(0)
    assert h.client.payloads == []
    h.clock.advance(1)
    while h.timer.advance_clock(0):
        pass
    # Kafka keeps the low watermark the partition had when its leader applied the deletion
    assert h.answers() == [(0, 2, ErrorCode.REQUEST_TIMED_OUT), (1, 5, ErrorCode.NONE)]


def test_a_partition_that_stops_leading_answers_not_leader() -> None:
    h = Harness()
    h.publish(0, 2)
    h.submit(waiting(0, 5, 2))
    h.publish(0, 2, is_leader=False)
    assert h.answers() == [(0, -1, ErrorCode.NOT_LEADER_FOR_PARTITION)]


def test_a_snapshot_of_the_low_watermark_is_named_as_its_cause() -> None:
    before = PartitionSnapshot(key="t-0", is_leader=True, low_watermark=2)
    after = LowWatermarkAdvanced(key="t-0", is_leader=True, low_watermark=5)
    assert snapshot_cause(before, after) == LOW_WATERMARK


# -- DescribeLogDirs -----------------------------------------------------------------------------


def test_the_log_dir_lists_each_logs_size_and_the_disk(tmp_path: Path) -> None:
    scheduler = Scheduler(ManualClock(0)).startup()
    manager = LogManager(tmp_path / "data", scheduler).startup()
    try:
        for tp in (TopicPartition(topic="b", partition=0), TopicPartition(topic="a", partition=1)):
            manager.get_or_create_log(tp).append_as_leader([Record(b"k", b"v", 0)], leader_epoch=0)
        manager.get_or_create_log(TopicPartition(topic="a", partition=0))
        [described] = describe_log_dirs(manager, None).dirs
        assert described.path == str((tmp_path / "data").resolve())
        assert described.error_code is ErrorCode.NONE
        sizes = [(p.topic, p.partition, p.size) for p in described.partitions]
        one_batch = manager.all_logs()[TopicPartition(topic="b", partition=0)].size_in_bytes
        assert one_batch > 0
        assert sizes == [("a", 0, 0), ("a", 1, one_batch), ("b", 0, one_batch)]
        assert 0 < described.usable_bytes <= described.total_bytes
        asked = (DescribeLogDirsTopic(topic="a", partitions=(1, 5)),)
        [only] = describe_log_dirs(manager, asked).dirs
        assert [(p.topic, p.partition) for p in only.partitions] == [("a", 1)]
    finally:
        manager.shutdown()
        scheduler.shutdown()
