"""Transactions in a partition's log: markers, open transactions and the last stable offset.

The behaviours of Kafka's ProducerStateManagerTest (transactions, markers, coordinator and
producer epochs) and the LSO cases of LogTest, on the producer state and on a `Log`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.storage import (
    AppendOrigin,
    CompletedTxn,
    ControlRecordType,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    Log,
    LogConfig,
    Record,
    RecordBatch,
    TransactionCoordinatorFencedError,
    build_batch,
    build_control_batch,
    end_txn_marker,
    iter_batches,
)
from kafkactor.storage.producer_state import ProducerStateManager
from kafkactor.timer import ManualClock

pytestmark = pytest.mark.timeout(60)

TS = 1_700_000_000_000
PID = 5000
OTHER = 5001
SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=100)
COORDINATOR = AppendOrigin.COORDINATOR
CLIENT = AppendOrigin.CLIENT


def txn(seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, tx: bool = True) -> bytes:
    """A producer's (transactional) batch of `count` records from sequence `seq`."""
    records = [Record(b"k%d" % (seq + i), b"v%d" % (seq + i), TS) for i in range(count)]
    return build_batch(
        records, 0, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=tx
    )


def marker(committed: bool, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(
        committed=committed,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=TS,
    )


def commit(log: Log, **kwargs: int) -> int:
    """Append a COMMIT marker as the coordinator; returns its offset."""
    return log.append_as_leader(marker(True, **kwargs), 0, origin=COORDINATOR).first_offset


def abort(log: Log, **kwargs: int) -> int:
    return log.append_as_leader(marker(False, **kwargs), 0, origin=COORDINATOR).first_offset


def unstable(log: Log) -> int | None:
    """The log's first unstable offset (read through a call: it changes under mypy's feet)."""
    return log.first_unstable_offset


def append(log: Log, data: bytes) -> int:
    return log.append_as_leader(data, 0).first_offset


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Iterator[Log]:
    opened = Log(tmp_path / "txn-0", SMALL, 0, clock)
    yield opened
    opened.close()


# --------------------------------------------------------------------------------------------
# The control batch format


@pytest.mark.parametrize(("committed", "type_id"), [(True, 1), (False, 0)])
def test_a_marker_is_kafkas_control_batch(committed: bool, type_id: int) -> None:
    data = build_control_batch(
        committed=committed,
        producer_id=7,
        producer_epoch=3,
        coordinator_epoch=11,
        timestamp_ms=TS,
        leader_epoch=4,
        base_offset=40,
    )
    batch = RecordBatch(data)  # CRC checked
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, -1)
    assert (batch.base_offset, batch.leader_epoch, batch.record_count) == (40, 4, 1)
    (record,) = batch.records()
    assert record.key == b"\x00\x00\x00" + bytes([type_id])  # version 0, type
    assert record.value == b"\x00\x00" + (11).to_bytes(4, "big")  # version 0, coordinator epoch
    found = end_txn_marker(batch)
    assert found is not None
    assert found.control_type is ControlRecordType(type_id)
    assert found.coordinator_epoch == 11 and found.committed is committed


def test_a_data_batch_has_no_marker_and_unknown_control_types_end_nothing() -> None:
    assert end_txn_marker(RecordBatch(txn(0))) is None
    assert ControlRecordType.parse(b"\x00\x00\x00\x05") is ControlRecordType.UNKNOWN
    with pytest.raises(InvalidRecordError, match="Invalid version found for control record"):
        ControlRecordType.parse(b"\xff\xff\x00\x00")


def test_a_marker_needs_a_producer() -> None:
    with pytest.raises(ValueError, match="producer_id"):
        build_control_batch(
            committed=True, producer_id=-1, producer_epoch=0, coordinator_epoch=0, timestamp_ms=0
        )


# --------------------------------------------------------------------------------------------
# Who may append a marker


def test_a_client_may_not_write_a_control_batch(log: Log) -> None:
    with pytest.raises(InvalidRecordError) as raised:
        log.append_as_leader(marker(True), 0)
    assert raised.value.message == (
        "Clients are not allowed to write control records in topic partition txn-0."
    )
    assert log.log_end_offset == 0


def test_the_coordinator_writes_markers_without_sequence_checks(log: Log) -> None:
    append(log, txn(0, 2))
    # the coordinator's own transactional batches (offset commits) repeat sequence 0
    assert log.append_as_leader(txn(0, 2), 0, origin=COORDINATOR).first_offset == 2
    assert commit(log) == 4
    assert log.log_end_offset == 5


# --------------------------------------------------------------------------------------------
# Open transactions and the last stable offset (LogTest's LSO cases)


def test_without_transactions_the_lso_is_the_high_watermark(log: Log) -> None:
    append(log, txn(0, 3, tx=False))
    assert unstable(log) is None
    assert log.last_stable_offset(2) == 2


def test_an_open_transaction_holds_the_lso_at_its_first_offset(log: Log) -> None:
    append(log, txn(0, 2, tx=False))  # 0-1: idempotent, not transactional
    first = append(log, txn(2, 3))  # 2-4: the transaction
    append(log, txn(5, 2))  # 5-6: the same transaction
    log.on_high_watermark(7)
    assert first == 2
    assert unstable(log) == 2
    assert log.last_stable_offset(7) == 2
    assert log.last_stable_offset(1) == 1  # never above the high watermark


def test_a_completed_transaction_is_unstable_until_the_hw_passes_its_marker(log: Log) -> None:
    append(log, txn(0, 2))
    at = commit(log)
    assert at == 2
    log.on_high_watermark(2)  # the marker is not replicated yet
    assert unstable(log) == 0
    assert log.last_stable_offset(2) == 0
    log.on_high_watermark(3)
    assert unstable(log) is None
    assert log.last_stable_offset(3) == 3


def test_the_lso_is_the_earliest_open_transaction_of_several(log: Log) -> None:
    append(log, txn(0, 1, pid=PID))  # 0
    append(log, txn(0, 1, pid=OTHER))  # 1
    commit(log, pid=PID)  # 2
    log.on_high_watermark(3)
    assert unstable(log) == 1  # OTHER's is open
    abort(log, pid=OTHER)  # 3
    assert unstable(log) == 1  # its abort marker is not below the HW
    log.on_high_watermark(4)
    assert unstable(log) is None


def test_a_producers_next_transaction_starts_after_its_marker(log: Log) -> None:
    append(log, txn(0))
    commit(log)
    second = append(log, txn(1))
    log.on_high_watermark(log.log_end_offset)
    assert unstable(log) == second == 2


def test_the_first_unstable_offset_is_never_below_the_log_start(log: Log) -> None:
    append(log, txn(0, 1, pid=OTHER, tx=False))
    append(log, txn(0, 3))  # 1-3, open
    log.maybe_increment_log_start_offset(2, "ClientRecordDeletion")
    assert unstable(log) == 2
    assert log.last_stable_offset(4) == 2


def test_a_marker_without_an_open_transaction_changes_no_offset(log: Log) -> None:
    append(log, txn(0, 1, tx=False))
    commit(log)
    log.on_high_watermark(1)  # the marker itself is not replicated: no transaction to wait for
    assert unstable(log) is None


# --------------------------------------------------------------------------------------------
# Markers against the producer's and the coordinator's epochs


def test_a_marker_of_an_older_producer_epoch_is_fenced(log: Log) -> None:
    append(log, txn(0, epoch=2))
    with pytest.raises(InvalidProducerEpochError) as raised:
        commit(log, epoch=1)
    assert raised.value.producer_id == PID
    assert log.log_end_offset == 1
    assert unstable(log) == 0  # still open


def test_a_marker_bumping_the_epoch_fences_the_producers_old_epoch(log: Log) -> None:
    append(log, txn(0, epoch=0))
    abort(log, epoch=1)  # the coordinator aborted with a bumped epoch (a timeout, a fence)
    with pytest.raises(InvalidProducerEpochError):
        append(log, txn(1, epoch=0))
    assert append(log, txn(0, epoch=1)) == 2  # the new epoch starts at sequence 0


def test_a_zombie_coordinators_marker_is_fenced(log: Log) -> None:
    append(log, txn(0))
    commit(log, coordinator_epoch=2)
    append(log, txn(1))
    with pytest.raises(TransactionCoordinatorFencedError) as raised:
        abort(log, coordinator_epoch=1)
    assert raised.value.producer_id == PID
    assert "1 (zombie), 2 (current)" in str(raised.value)
    assert commit(log, coordinator_epoch=2) == 3  # the current coordinator's marker is taken


def test_a_zombie_coordinator_is_fenced_even_without_a_transaction(log: Log) -> None:
    commit(log, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        commit(log, coordinator_epoch=4)


def test_a_plain_batch_inside_an_open_transaction_is_refused(log: Log) -> None:
    append(log, txn(0))
    with pytest.raises(InvalidTxnStateError):
        append(log, txn(1, tx=False))
    assert log.log_end_offset == 1


def test_a_retried_transactional_batch_is_a_duplicate(log: Log) -> None:
    append(log, txn(0, 2))
    info = log.append_as_leader(txn(0, 2), 0)
    assert info.duplicate and (info.first_offset, info.last_offset) == (0, 1)
    assert log.log_end_offset == 2


# --------------------------------------------------------------------------------------------
# Followers, truncation and restarts


def leader_bytes(log: Log) -> bytes:
    return log.read(0, 1 << 20).records


def test_a_follower_learns_open_transactions_and_markers(log: Log, tmp_path: Path) -> None:
    append(log, txn(0, 2))
    append(log, txn(0, 1, pid=OTHER))
    commit(log)
    follower = Log(tmp_path / "txn-1", SMALL, 0, ManualClock(TS))
    try:
        follower.append_as_follower(leader_bytes(log))
        follower.on_high_watermark(follower.log_end_offset)
        assert unstable(follower) == 2  # OTHER's transaction is open
        entry = follower.producer_state.entry(PID)
        assert entry is not None and entry.current_txn_first_offset is None
    finally:
        follower.close()


def test_open_transactions_survive_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "txn-0"
    log = Log(directory, SMALL, 0, clock)
    append(log, txn(0, 1, pid=OTHER))
    commit(log, pid=OTHER)
    append(log, txn(0, 2))  # open when the broker crashes
    log.crash()
    reopened = Log(directory, SMALL, 0, clock)
    try:
        reopened.on_high_watermark(reopened.log_end_offset)
        assert unstable(reopened) == 2
        abort(reopened)  # its marker arrives after the restart
        reopened.on_high_watermark(reopened.log_end_offset)
        assert unstable(reopened) is None
    finally:
        reopened.close()


def test_completed_transactions_wait_for_the_hw_after_a_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "txn-0"
    log = Log(directory, SMALL, 0, clock)
    append(log, txn(0, 2))
    commit(log)
    log.close()
    reopened = Log(directory, SMALL, 0, clock)
    try:
        assert unstable(reopened) == 0  # the HW is not known yet
        reopened.on_high_watermark(3)
        assert reopened.last_stable_offset(3) == 3
    finally:
        reopened.close()


def test_truncating_a_marker_reopens_its_transaction(log: Log) -> None:
    append(log, txn(0, 2))
    commit(log)
    append(log, txn(0, 1, tx=False, pid=OTHER))
    log.on_high_watermark(4)
    assert unstable(log) is None
    log.truncate_to(2)  # the marker was not on the new leader
    assert unstable(log) == 0
    log.truncate_to(0)
    assert unstable(log) is None


# --------------------------------------------------------------------------------------------
# The producer state alone (ProducerStateManagerTest)


def build_at(data: bytes, offset: int) -> bytes:
    (batch,) = iter_batches(data)
    return batch.restamp(base_offset=offset)


def apply(manager: ProducerStateManager, data: bytes, offset: int) -> CompletedTxn | None:
    (batch,) = iter_batches(build_at(data, offset))
    manager.validate_leader_append([batch], COORDINATOR if batch.is_control_batch else CLIENT)
    return manager.update(batch, offset, batch.last_offset)


def test_a_completed_transaction_records_the_lso_of_its_marker() -> None:
    manager = ProducerStateManager()
    apply(manager, txn(0, pid=PID), 0)
    apply(manager, txn(0, pid=OTHER), 1)
    assert apply(manager, marker(False, pid=PID), 2) == CompletedTxn(
        PID,
        0,
        2,
        is_aborted=True,
        last_stable_offset=1,  # OTHER's is still open
    )
    assert apply(manager, marker(True, pid=OTHER), 3) == CompletedTxn(
        OTHER, 1, 3, is_aborted=False, last_stable_offset=4
    )
    assert manager.first_unstable_offset == 0  # neither marker is below a HW yet
    manager.on_high_watermark(3)
    assert manager.first_unstable_offset == 1
    manager.on_high_watermark(4)
    assert manager.first_unstable_offset is None


def test_the_coordinator_epoch_is_remembered_across_a_restart(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "txn-0"
    log = Log(directory, SMALL, 0, clock)
    append(log, txn(0))
    commit(log, coordinator_epoch=3)
    append(log, txn(1))
    log.close()
    reopened = Log(directory, SMALL, 0, clock)
    try:
        with pytest.raises(TransactionCoordinatorFencedError):
            abort(reopened, coordinator_epoch=2)  # a zombie coordinator after the restart
        assert abort(reopened, coordinator_epoch=3) == 3
    finally:
        reopened.close()
