"""The pure `TransactionCoordinatorCore`, with behaviours ported from Kafka's
TransactionCoordinatorTest and TransactionStateManagerTest, on a ManualClock: every write to
`__transaction_state` is a `TxnAppend` the test completes (successfully or with the replica
manager's error), as the actor would once the replica manager answered."""

from __future__ import annotations

import itertools

import pytest

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.transaction import (
    AppendOutcome,
    AppendPurpose,
    Decision,
    TransactionConfig,
    TransactionCoordinatorCore,
    TransactionState,
    TxnTransitMetadata,
    partition_for_transactional_id,
)
from kafkactor.actors.transaction.transaction_metadata import MAX_PRODUCER_EPOCH
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.timer import ManualClock

pytestmark = pytest.mark.timeout(30)

S = TransactionState
E = ErrorCode
TID = "txn-1"
TIMEOUT = 60_000
T0 = TopicPartition(topic="orders", partition=0)
T1 = TopicPartition(topic="orders", partition=1)


class _Ids:
    def __init__(self) -> None:
        self._ids = itertools.count(1000)

    def generate_producer_id(self) -> int:
        return next(self._ids)


class Harness:
    """A core owning every `__transaction_state` partition (epoch 3), time on a ManualClock."""

    def __init__(self, config: TransactionConfig | None = None) -> None:
        self.clock = ManualClock(1_000_000)
        self.core = TransactionCoordinatorCore(config, producer_ids=_Ids())
        for p in range(self.core.config.state_log_num_partitions):
            self.core.state.begin_loading(p, 3)
            self.core.load(p, 3, (), self.now)

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    def write(self, decision: Decision, error: ErrorCode = E.NONE) -> AppendOutcome:
        assert decision.append is not None, decision
        return self.core.complete_append(decision.append, error, self.now)

    def init(self, tid: str = TID, expected: tuple[int, int] | None = None) -> AppendOutcome:
        decision = self.core.handle_init_producer_id(tid, TIMEOUT, expected, self.now)
        if decision.append is None:
            return AppendOutcome(error=decision.error)
        return self.write(decision)

    def begin(self, tid: str = TID) -> tuple[int, int]:
        """InitProducerId, then AddPartitions: an Ongoing transaction; (producer id, epoch)."""
        ids = self.init(tid)
        assert ids.error is E.NONE
        outcome = self.write(
            self.core.handle_add_partitions(
                tid, ids.producer_id, ids.producer_epoch, (T0, T1), self.now
            )
        )
        assert outcome.error is E.NONE
        return ids.producer_id, ids.producer_epoch

    def state(self, tid: str = TID) -> TransactionState:
        return self.core.state.metadata[tid].state

    def finish_markers(self, outcome: AppendOutcome) -> AppendOutcome:
        job = outcome.markers
        assert job is not None
        left = [self.core.marker_written(job, tp) for tp in sorted(job.partitions)]
        assert left[-1] is True
        return self.core.complete_append(job.completion_append(), E.NONE, self.now)


@pytest.fixture
def h() -> Harness:
    return Harness()


# -- InitProducerId -------------------------------------------------------------------------------


def test_init_without_transactional_id_hands_out_an_id_at_epoch_zero(h: Harness) -> None:
    decision = h.core.handle_init_producer_id(None, TIMEOUT, None, h.now)
    assert (decision.error, decision.producer_id, decision.producer_epoch) == (E.NONE, 1000, 0)
    assert decision.append is None


def test_init_with_empty_transactional_id_is_invalid_request(h: Harness) -> None:
    assert h.core.handle_init_producer_id("", TIMEOUT, None, h.now).error is E.INVALID_REQUEST


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_init_outside_the_max_timeout_is_invalid_transaction_timeout(
    h: Harness, timeout: int
) -> None:
    decision = h.core.handle_init_producer_id(TID, timeout, None, h.now)
    assert decision.error is E.INVALID_TRANSACTION_TIMEOUT


def test_init_of_a_new_id_writes_empty_at_epoch_zero(h: Harness) -> None:
    decision = h.core.handle_init_producer_id(TID, TIMEOUT, None, h.now)
    assert decision.append is not None
    assert decision.append.partition == partition_for_transactional_id(TID)
    assert decision.append.coordinator_epoch == 3
    outcome = h.write(decision)
    assert (outcome.error, outcome.producer_id, outcome.producer_epoch) == (E.NONE, 1000, 0)
    assert outcome.transition is not None and outcome.transition.to_state is S.EMPTY


def test_init_again_bumps_the_epoch(h: Harness) -> None:
    h.init()
    outcome = h.init()
    assert (outcome.producer_id, outcome.producer_epoch) == (1000, 1)


def test_init_answers_not_coordinator_and_load_in_progress() -> None:
    h = Harness(TransactionConfig(state_log_num_partitions=2))
    partition = partition_for_transactional_id(TID, 2)
    h.core.state.remove_partition(partition)
    assert h.core.handle_init_producer_id(TID, TIMEOUT, None, h.now).error is E.NOT_COORDINATOR
    h.core.state.begin_loading(partition, 4)
    decision = h.core.handle_init_producer_id(TID, TIMEOUT, None, h.now)
    assert decision.error is E.COORDINATOR_LOAD_IN_PROGRESS


def test_init_during_a_transition_is_concurrent_transactions(h: Harness) -> None:
    h.init()
    pending = h.core.handle_add_partitions(TID, 1000, 0, (T0,), h.now)
    assert pending.append is not None
    assert h.init().error is E.CONCURRENT_TRANSACTIONS


def test_init_with_an_ongoing_transaction_aborts_it_with_a_bumped_epoch(h: Harness) -> None:
    producer_id, epoch = h.begin()
    outcome = h.init()
    assert outcome.error is E.CONCURRENT_TRANSACTIONS
    assert h.state() is S.PREPARE_ABORT
    job = outcome.markers
    assert job is not None and not job.committed
    assert (job.producer_id, job.producer_epoch) == (producer_id, epoch + 1)
    assert job.partitions == {T0, T1} and job.cause == "fenced"
    assert h.init().error is E.CONCURRENT_TRANSACTIONS  # still writing markers
    completed = h.finish_markers(outcome).completed
    assert completed is not None and not completed.committed and completed.cause == "fenced"
    retry = h.init()  # the producer asks again: a second bump
    assert (retry.error, retry.producer_epoch) == (E.NONE, epoch + 2)


def test_a_failed_fence_write_does_not_bump_the_epoch_twice(h: Harness) -> None:
    _, epoch = h.begin()
    fence = h.core.handle_init_producer_id(TID, TIMEOUT, None, h.now)
    assert fence.append is not None and fence.append.transit.producer_epoch == epoch + 1
    assert h.write(fence, E.NOT_ENOUGH_REPLICAS).error is E.COORDINATOR_NOT_AVAILABLE
    again = h.core.handle_init_producer_id(TID, TIMEOUT, None, h.now)
    assert again.append is not None and again.append.transit.producer_epoch == epoch + 1


def test_exhausted_epochs_rotate_to_a_new_producer_id(h: Harness) -> None:
    h.init()
    h.core.state.metadata[TID].producer_epoch = MAX_PRODUCER_EPOCH - 1
    outcome = h.init()
    assert (outcome.producer_id, outcome.producer_epoch) == (1001, 0)


def test_fencing_an_ongoing_transaction_at_the_last_epoch(h: Harness) -> None:
    h.begin()
    h.core.state.metadata[TID].producer_epoch = MAX_PRODUCER_EPOCH - 1
    outcome = h.init()
    assert outcome.markers is not None and outcome.markers.producer_epoch == MAX_PRODUCER_EPOCH
    h.finish_markers(outcome)
    assert h.init().producer_id == 1001  # epochs used up: a new producer id


def test_kip360_recovery_bumps_with_the_current_epoch(h: Harness) -> None:
    ids = h.init()
    outcome = h.init(expected=(ids.producer_id, ids.producer_epoch))
    assert (outcome.error, outcome.producer_epoch) == (E.NONE, 1)
    retry = h.init(expected=(ids.producer_id, 0))  # the answer was lost: same epoch again
    assert (retry.error, retry.producer_epoch) == (E.NONE, 1)


def test_kip360_a_stale_or_foreign_producer_is_fenced(h: Harness) -> None:
    h.init()
    h.init()
    h.init()  # epoch 2, last -1
    assert h.init(expected=(1000, 0)).error is E.PRODUCER_FENCED
    assert h.init(expected=(4242, 2)).error is E.PRODUCER_FENCED


def test_kip360_unknown_id_with_expected_producer_gets_a_new_one(h: Harness) -> None:
    outcome = h.init(expected=(77, 3))
    assert (outcome.error, outcome.producer_id, outcome.producer_epoch) == (E.NONE, 1000, 0)


# -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------


def test_add_partitions_errors(h: Harness) -> None:
    add = h.core.handle_add_partitions
    assert add("", 1000, 0, (T0,), h.now).error is E.INVALID_REQUEST
    assert add(TID, 1000, 0, (T0,), h.now).error is E.INVALID_PRODUCER_ID_MAPPING
    h.init()
    assert add(TID, 999, 0, (T0,), h.now).error is E.INVALID_PRODUCER_ID_MAPPING
    assert add(TID, 1000, 1, (T0,), h.now).error is E.PRODUCER_FENCED


@pytest.mark.parametrize("committed", [True, False])
def test_add_partitions_while_ending_is_concurrent_transactions(
    h: Harness, committed: bool
) -> None:
    producer_id, epoch = h.begin()
    h.write(h.core.handle_end_txn(TID, producer_id, epoch, committed, h.now))
    decision = h.core.handle_add_partitions(TID, producer_id, epoch, (T0,), h.now)
    assert decision.error is E.CONCURRENT_TRANSACTIONS


def test_add_partitions_starts_the_transaction_and_known_ones_answer_at_once(h: Harness) -> None:
    h.clock.advance(5)
    producer_id, epoch = h.begin()
    metadata = h.core.state.metadata[TID]
    assert metadata.state is S.ONGOING and metadata.txn_start_timestamp == h.now
    again = h.core.handle_add_partitions(TID, producer_id, epoch, (T1,), h.now)
    assert again == Decision()  # nothing to write


def test_add_offsets_adds_the_groups_offsets_partition(h: Harness) -> None:
    ids = h.init()
    decision = h.core.handle_add_offsets(TID, ids.producer_id, ids.producer_epoch, "grp", h.now)
    h.write(decision)
    offsets = TopicPartition(topic=OFFSETS_TOPIC, partition=partition_for("grp"))
    assert h.core.state.metadata[TID].partitions == {offsets}


def test_a_failed_add_partitions_write_leaves_the_transaction_as_it_was(h: Harness) -> None:
    ids = h.init()
    decision = h.core.handle_add_partitions(TID, ids.producer_id, 0, (T0,), h.now)
    assert h.write(decision, E.NOT_LEADER_FOR_PARTITION).error is E.NOT_COORDINATOR
    metadata = h.core.state.metadata[TID]
    assert metadata.state is S.EMPTY and metadata.pending_state is None
    assert h.write(h.core.handle_add_partitions(TID, 1000, 0, (T0,), h.now)).error is E.NONE


# -- EndTxn -------------------------------------------------------------------------------------


def test_commit_writes_prepare_commit_then_markers_then_complete_commit(h: Harness) -> None:
    producer_id, epoch = h.begin()
    h.clock.advance(40)
    outcome = h.write(h.core.handle_end_txn(TID, producer_id, epoch, True, h.now))
    assert outcome.error is E.NONE and h.state() is S.PREPARE_COMMIT
    job = outcome.markers
    assert job is not None and job.committed and job.partitions == {T0, T1}
    assert job.coordinator_epoch == 3 and job.completion.state is S.COMPLETE_COMMIT
    assert h.core.marker_written(job, T0) is False
    assert h.core.markers_pending(job) is True
    done = h.finish_markers(outcome)
    assert h.state() is S.COMPLETE_COMMIT
    assert done.completed is not None and done.completed.committed
    assert (done.completed.duration_ms, done.completed.partitions) == (40, 2)


def test_end_txn_errors(h: Harness) -> None:
    end = h.core.handle_end_txn
    assert end("", 1000, 0, True, h.now).error is E.INVALID_REQUEST
    assert end(TID, 1000, 0, True, h.now).error is E.INVALID_PRODUCER_ID_MAPPING
    h.init()
    assert end(TID, 999, 0, True, h.now).error is E.INVALID_PRODUCER_ID_MAPPING
    assert end(TID, 1000, 1, True, h.now).error is E.PRODUCER_FENCED
    assert end(TID, 1000, 0, True, h.now).error is E.INVALID_TXN_STATE  # Empty


def test_end_txn_retries_and_mismatches(h: Harness) -> None:
    producer_id, epoch = h.begin()
    prepared = h.write(h.core.handle_end_txn(TID, producer_id, epoch, True, h.now))
    end = h.core.handle_end_txn
    # markers on their way: the completion is pending
    assert end(TID, producer_id, epoch, True, h.now).error is E.CONCURRENT_TRANSACTIONS
    h.finish_markers(prepared)
    assert end(TID, producer_id, epoch, True, h.now).error is E.NONE  # a retry of the commit
    assert end(TID, producer_id, epoch, False, h.now).error is E.INVALID_TXN_STATE


def test_a_completion_write_failing_unavailable_is_retried(h: Harness) -> None:
    producer_id, epoch = h.begin()
    prepared = h.write(h.core.handle_end_txn(TID, producer_id, epoch, False, h.now))
    job = prepared.markers
    assert job is not None
    for tp in job.partitions:
        h.core.marker_written(job, tp)
    failed = h.core.complete_append(job.completion_append(), E.NOT_ENOUGH_REPLICAS, h.now)
    assert failed.retry and h.core.state.metadata[TID].pending_state is S.COMPLETE_ABORT
    done = h.core.complete_append(job.completion_append(), E.NONE, h.now)
    assert h.state() is S.COMPLETE_ABORT and done.completed is not None


# -- timeouts and expiration ----------------------------------------------------------------------


def test_a_timed_out_transaction_is_aborted_with_a_bumped_epoch(h: Harness) -> None:
    producer_id, epoch = h.begin()
    h.clock.advance(TIMEOUT)
    assert h.core.abort_timed_out(h.now) == []  # not older than its timeout yet
    h.clock.advance(1)
    (append,) = h.core.abort_timed_out(h.now)
    assert append.purpose is AppendPurpose.TIMEOUT_ABORT
    assert append.transit.state is S.PREPARE_ABORT
    assert append.transit.producer_epoch == epoch + 1
    outcome = h.core.complete_append(append, E.NONE, h.now)
    assert outcome.markers is not None and outcome.markers.cause == "timeout"
    # the zombie producer is fenced
    decision = h.core.handle_end_txn(TID, producer_id, epoch, True, h.now)
    assert decision.error is E.PRODUCER_FENCED


def test_a_pending_transition_is_not_timed_out(h: Harness) -> None:
    producer_id, epoch = h.begin()
    extra = TopicPartition(topic="x", partition=9)
    assert h.core.handle_add_partitions(TID, producer_id, epoch, (extra,), h.now).append
    h.clock.advance(TIMEOUT + 1)
    assert h.core.abort_timed_out(h.now) == []


def test_idle_ids_expire_with_a_tombstone() -> None:
    h = Harness(TransactionConfig(transactional_id_expiration_ms=1000))
    producer_id, epoch = h.begin()
    h.clock.advance(5000)
    assert h.core.expire_transactional_ids(h.now) == []  # open transactions never expire
    h.finish_markers(h.write(h.core.handle_end_txn(TID, producer_id, epoch, True, h.now)))
    h.init("other")
    h.clock.advance(1000)
    appends = h.core.expire_transactional_ids(h.now)
    assert {a.transactional_id for a in appends} == {TID, "other"}
    assert all(a.tombstone and a.transit.state is S.DEAD for a in appends)
    for append in appends:
        h.core.complete_append(append, E.NONE, h.now)
    assert h.core.state.metadata == {}


# -- loading and resigning ----------------------------------------------------------------------


def _value(state: TransactionState, epoch: int = 4) -> TxnTransitMetadata:
    partitions = frozenset() if state is S.EMPTY else frozenset({T0})
    return TxnTransitMetadata(
        producer_id=7,
        last_producer_id=-1,
        producer_epoch=epoch,
        last_producer_epoch=-1,
        txn_timeout_ms=TIMEOUT,
        state=state,
        partitions=partitions,
        txn_start_timestamp=-1 if state is S.EMPTY else 10,
        txn_last_update_timestamp=20,
    )


def test_loading_keeps_the_last_value_and_resends_markers_of_prepared_ones() -> None:
    h = Harness(TransactionConfig(state_log_num_partitions=1))
    h.core.state.remove_partition(0)
    h.core.state.begin_loading(0, 9)
    assert h.core.handle_end_txn("a", 7, 4, True, h.now).error is E.COORDINATOR_LOAD_IN_PROGRESS
    records = [
        ("a", _value(S.EMPTY)),
        ("a", _value(S.ONGOING)),
        ("a", _value(S.PREPARE_COMMIT)),
        ("b", _value(S.ONGOING)),
        ("b", None),  # expired
        ("c", _value(S.COMPLETE_ABORT)),
    ]
    (job,) = h.core.load(0, 9, records, h.now)
    assert set(h.core.state.metadata) == {"a", "c"}
    assert job.transactional_id == "a" and job.committed and job.coordinator_epoch == 9
    assert job.partitions == {T0} and job.cause == "init"
    assert h.core.handle_end_txn("a", 7, 4, True, h.now).error is E.CONCURRENT_TRANSACTIONS


def test_resigning_drops_the_partitions_ids_and_moots_their_writes(h: Harness) -> None:
    producer_id, epoch = h.begin()
    decision = h.core.handle_end_txn(TID, producer_id, epoch, True, h.now)
    partition = partition_for_transactional_id(TID)
    assert h.core.state.remove_partition(partition) == [TID]
    assert h.write(decision).error is E.NOT_COORDINATOR
    assert h.init().error is E.NOT_COORDINATOR
