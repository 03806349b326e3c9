"""Idempotent producers on a partition log: Kafka's ProducerStateManager rules (2.5 and later).

The pure manager is driven with batch headers; the `Log` with real idempotent batches built by
`build_batch` in a tmp_path directory on a ManualClock. A leader dedupes a retry of any of a
producer's last five batches (answering with the original offsets, writing nothing), refuses a
gap, a new epoch not starting at 0 and an older epoch; a follower takes the state from what it
appends; truncation, full truncation and reopening after a crash rebuild the state from what
the log holds.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactor.actors.replication.partition_actor import storage_error_code
from kafkactor.messages import ErrorCode
from kafkactor.storage.config import LogConfig
from kafkactor.storage.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
)
from kafkactor.storage.log import Log
from kafkactor.storage.producer_state import (
    BATCHES_TO_RETAIN,
    ProducerStateManager,
    StoredProducerBatch,
    decrement_sequence,
    increment_sequence,
    read_producer_batches,
)
from kafkactor.storage.record_batch import iter_batches
from kafkactor.storage.records import Record, build_batch
from kafkactor.timer import ManualClock

TS = 1_700_000_000_000
INT32_MAX = 2**31 - 1
PID = 4000
OTHER = 4001
SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=100)


# --------------------------------------------------------------------------------------------
# Helpers


def header(
    seq: int, count: int = 1, *, pid: int = PID, epoch: int = 0, offset: int = 0, ts: int = TS
) -> StoredProducerBatch:
    """A batch header as the manager sees it: `count` records from sequence `seq`."""
    return StoredProducerBatch(
        position=0,
        base_offset=offset,
        last_offset_delta=count - 1,
        max_timestamp=ts,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def leader_append(manager: ProducerStateManager, batch: StoredProducerBatch, offset: int) -> int:
    """Validate and record `batch` as a leader writing it at `offset`; returns the next offset."""
    assert manager.check_leader_append(batch) is None
    last = offset + batch.last_offset_delta
    manager.update(batch, offset, last)
    return last + 1


def idempotent(
    seq: int, count: int = 2, *, pid: int = PID, epoch: int = 0, tag: bytes = b"v"
) -> bytes:
    """A producer's batch as it arrives at the leader (base offset 0, no leader epoch)."""
    records = [Record(b"k", b"%s-%d" % (tag, seq + i), TS + seq + i) for i in range(count)]
    return build_batch(records, 0, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def plain(count: int = 2) -> bytes:
    return build_batch([Record(None, b"plain", TS)] * count, 0)


def open_log(directory: Path, clock: ManualClock) -> Log:
    return Log(directory, SMALL, 0, clock)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> Iterator[Log]:
    opened = open_log(tmp_path / "events-0", clock)
    yield opened
    opened.close()


def values(log: Log) -> list[bytes | None]:
    data = log.read(log.log_start_offset, 1 << 20).records
    return [record.value for batch in iter_batches(data) for record in batch.records()]


# --------------------------------------------------------------------------------------------
# Sequence arithmetic


def test_sequences_wrap_past_int32_max_to_zero() -> None:
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert increment_sequence(5, 3) == 8
    assert decrement_sequence(0, 1) == INT32_MAX
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(8, 3) == 5


# --------------------------------------------------------------------------------------------
# The manager: leader validation


def test_each_of_the_last_five_batches_is_answered_with_its_original_offsets() -> None:
    manager = ProducerStateManager()
    offset, written = 100, []
    for seq in range(0, 2 * (BATCHES_TO_RETAIN + 1), 2):  # six batches of two records
        written.append((seq, offset))
        offset = leader_append(manager, header(seq, 2, ts=TS + seq), offset)
    for seq, first in written[1:]:
        duplicate = manager.check_leader_append(header(seq, 2))
        assert duplicate is not None
        assert (duplicate.first_offset, duplicate.last_offset) == (first, first + 1)
        assert (duplicate.first_sequence, duplicate.last_sequence) == (seq, seq + 1)
        assert duplicate.max_timestamp == TS + seq
        assert (duplicate.producer_id, duplicate.producer_epoch) == (PID, 0)
    # the sixth-oldest is forgotten: its retry is out of order, as in Kafka
    with pytest.raises(OutOfOrderSequenceError) as refused:
        manager.check_leader_append(header(0, 2))
    assert refused.value.producer_id == PID
    assert len(manager.entry(PID).batches) == BATCHES_TO_RETAIN  # type: ignore[union-attr]


def test_a_duplicate_needs_the_same_sequence_range_and_epoch() -> None:
    manager = ProducerStateManager()
    leader_append(manager, header(0, 3), 0)
    with pytest.raises(OutOfOrderSequenceError):  # same first sequence, fewer records
        manager.check_leader_append(header(0, 2))
    with pytest.raises(OutOfOrderSequenceError):  # a range inside the batch
        manager.check_leader_append(header(1, 2))


def test_a_gap_in_the_sequence_is_out_of_order() -> None:
    manager = ProducerStateManager()
    leader_append(manager, header(0, 3), 0)  # sequences 0..2
    with pytest.raises(OutOfOrderSequenceError, match="expected 3"):
        manager.check_leader_append(header(4))
    assert manager.check_leader_append(header(3)) is None


def test_a_new_epoch_starts_at_sequence_zero_and_forgets_the_old_batches() -> None:
    manager = ProducerStateManager()
    offset = leader_append(manager, header(0, 2, epoch=0), 0)
    offset = leader_append(manager, header(2, 2, epoch=0), offset)
    with pytest.raises(OutOfOrderSequenceError, match="not 0"):
        manager.check_leader_append(header(4, epoch=1))
    offset = leader_append(manager, header(0, 2, epoch=1), offset)
    entry = manager.entry(PID)
    assert entry is not None and entry.producer_epoch == 1 and len(entry.batches) == 1
    assert manager.check_leader_append(header(2, epoch=1)) is None
    # a skipped epoch is fine too: only the sequence restarts
    assert manager.check_leader_append(header(0, epoch=5)) is None


def test_an_older_epoch_is_fenced() -> None:
    manager = ProducerStateManager()
    leader_append(manager, header(0, 2, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError) as fenced:
        manager.check_leader_append(header(2, epoch=2))
    assert fenced.value.producer_id == PID
    with pytest.raises(InvalidProducerEpochError):  # even a retry of its old batch
        manager.check_leader_append(header(0, 2, epoch=2))


def test_the_sequence_wraps_at_int32_max() -> None:
    manager = ProducerStateManager()
    offset = leader_append(manager, header(INT32_MAX - 1, 2), 0)  # ends exactly at the max
    offset = leader_append(manager, header(0, 3), offset)  # 0 follows the max
    offset = leader_append(manager, header(3, 1), offset)
    with pytest.raises(OutOfOrderSequenceError):
        manager.check_leader_append(header(INT32_MAX))
    wrapped = ProducerStateManager()
    leader_append(wrapped, header(INT32_MAX - 1, 4), 10)  # INT32_MAX - 1 .. 1, across the wrap
    assert wrapped.entry(PID).last_sequence == 1  # type: ignore[union-attr]
    duplicate = wrapped.check_leader_append(header(INT32_MAX - 1, 4))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (10, 13)
    assert wrapped.check_leader_append(header(2)) is None


def test_an_unknown_producer_may_start_at_any_sequence() -> None:
    """Kafka 2.5+ (KIP-360): no state, no refusal; UNKNOWN_PRODUCER_ID is never raised."""
    manager = ProducerStateManager()
    assert manager.check_leader_append(header(42, epoch=7)) is None
    offset = leader_append(manager, header(42, epoch=7), 0)
    with pytest.raises(OutOfOrderSequenceError) as refused:  # from then on, it is known
        manager.check_leader_append(header(44, epoch=7))
    assert not isinstance(refused.value, UnknownProducerIdError)
    assert leader_append(manager, header(43, epoch=7), offset) == offset + 1


def test_producers_are_independent() -> None:
    manager = ProducerStateManager()
    offset = leader_append(manager, header(0, pid=PID), 0)
    offset = leader_append(manager, header(0, pid=OTHER, epoch=2), offset)
    offset = leader_append(manager, header(1, pid=PID), offset)
    assert manager.check_leader_append(header(1, pid=OTHER, epoch=2)) is None
    duplicate = manager.check_leader_append(header(0, pid=OTHER, epoch=2))
    assert duplicate is not None and duplicate.first_offset == 1


def test_batches_without_a_producer_id_are_ignored() -> None:
    manager = ProducerStateManager()
    for _ in range(3):
        anonymous = header(-1, pid=-1, epoch=-1)
        assert manager.check_leader_append(anonymous) is None
        manager.update(anonymous, 0, 0)
    assert manager.producers == {} and manager.last_offset == -1


def test_a_producer_id_with_a_negative_sequence_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="invalid sequence number -1"):
        ProducerStateManager().check_leader_append(header(-1))


def test_one_append_of_several_batches_is_validated_in_order() -> None:
    manager = ProducerStateManager()
    leader_append(manager, header(0, 2), 0)
    assert (
        manager.validate_leader_append([header(2, 2), header(4, 1), header(0, pid=OTHER)]) is None
    )
    with pytest.raises(OutOfOrderSequenceError):  # the second does not follow the first
        manager.validate_leader_append([header(2, 2), header(2, 2)])
    # a retry anywhere in the append answers the whole append, as Kafka does
    duplicate = manager.validate_leader_append([header(2, 2), header(0, 2)])
    assert duplicate is not None and duplicate.first_offset == 0
    entry = manager.entry(PID)  # validation alone changed nothing
    assert entry is not None and entry.last_sequence == 1


def test_updates_follow_the_log_without_validation() -> None:
    """A follower takes what its leader wrote: a gap, an older epoch, anything."""
    manager = ProducerStateManager()
    manager.update_from_batches([header(0, 2, epoch=3, offset=0), header(9, 1, epoch=3, offset=5)])
    assert manager.entry(PID).last_sequence == 9  # type: ignore[union-attr]
    manager.update_from_batches([header(0, 1, epoch=2, offset=6)])  # Kafka only warns
    entry = manager.entry(PID)
    assert entry is not None and entry.producer_epoch == 2 and entry.last_offset == 6


def test_truncation_rebuilds_only_when_a_producer_batch_is_cut() -> None:
    manager = ProducerStateManager()
    offset = leader_append(manager, header(0, 2), 0)
    leader_append(manager, header(2, 2), offset + 3)  # offsets 5..6
    calls: list[int] = []

    def remaining() -> list[StoredProducerBatch]:
        calls.append(1)
        return [header(0, 2, offset=0)]

    assert not manager.truncate_to(7, remaining) and not calls
    assert manager.truncate_to(5, remaining) and calls == [1]
    assert manager.entry(PID).last_offset == 1  # type: ignore[union-attr]
    manager.clear()
    assert manager.producers == {}


# --------------------------------------------------------------------------------------------
# The errors


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (OutOfOrderSequenceError("gap", PID), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
        (InvalidProducerEpochError("fenced", PID), ErrorCode.INVALID_PRODUCER_EPOCH),
        (UnknownProducerIdError("unknown", PID), ErrorCode.UNKNOWN_PRODUCER_ID),
        (InvalidTxnStateError("open transaction", PID), ErrorCode.INVALID_TXN_STATE),
        (
            TransactionCoordinatorFencedError("zombie", PID),
            ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ),
    ],
)
def test_the_errors_map_to_kafkas_codes_and_pickle(error: Exception, code: ErrorCode) -> None:
    assert storage_error_code(error) is code
    assert int(code) in (45, 47, 48, 52, 59)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    assert copy.producer_id == PID  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------
# The log


def test_a_retry_is_answered_with_the_original_offsets_and_not_written(log: Log) -> None:
    log.append_as_leader(plain(3), leader_epoch=0)  # offsets 0..2
    first = [log.append_as_leader(idempotent(seq), leader_epoch=0) for seq in range(0, 12, 2)]
    assert [info.first_offset for info in first] == list(range(3, 15, 2))
    end, size, epochs = log.log_end_offset, log.size_in_bytes, log.leader_epochs
    for seq, original in list(zip(range(0, 12, 2), first, strict=True))[1:]:
        retry = log.append_as_leader(idempotent(seq), leader_epoch=1)
        assert retry.duplicate and not original.duplicate
        assert (retry.first_offset, retry.last_offset) == (
            original.first_offset,
            original.last_offset,
        )
        assert retry.max_timestamp == original.max_timestamp
        assert retry.size_in_bytes == 0 and retry.record_count == 2
    assert (log.log_end_offset, log.size_in_bytes, log.leader_epochs) == (end, size, epochs)
    with pytest.raises(OutOfOrderSequenceError):  # the sixth-oldest
        log.append_as_leader(idempotent(0), leader_epoch=1)
    with pytest.raises(OutOfOrderSequenceError):  # a gap
        log.append_as_leader(idempotent(13), leader_epoch=1)
    assert log.log_end_offset == end  # nothing refused was written
    assert log.append_as_leader(idempotent(12), leader_epoch=1).first_offset == end


def test_an_epoch_bump_through_the_log(log: Log) -> None:
    log.append_as_leader(idempotent(0), leader_epoch=0)
    log.append_as_leader(idempotent(2), leader_epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(4, epoch=1), leader_epoch=0)
    assert log.append_as_leader(idempotent(0, epoch=1), leader_epoch=0).first_offset == 4
    with pytest.raises(InvalidProducerEpochError):  # the old epoch's next batch: a zombie
        log.append_as_leader(idempotent(4, epoch=0), leader_epoch=0)
    assert log.append_as_leader(idempotent(0, epoch=1), leader_epoch=0).duplicate


def test_batches_without_a_producer_id_are_never_deduped(log: Log) -> None:
    same = plain(2)
    assert [log.append_as_leader(same, leader_epoch=0).first_offset for _ in range(3)] == [0, 2, 4]
    log.append_as_leader([Record(b"k", b"records", TS)], leader_epoch=0)
    log.append_as_leader(idempotent(0), leader_epoch=0)
    assert log.append_as_leader(same, leader_epoch=0).first_offset == 9
    assert set(log.producer_state.producers) == {PID}
    assert log.append_as_leader(idempotent(0), leader_epoch=0).duplicate
    assert values(log).count(b"plain") == 8


def test_a_follower_that_becomes_leader_dedupes_the_old_leaders_batches(
    tmp_path: Path, clock: ManualClock
) -> None:
    leader = open_log(tmp_path / "a" / "events-0", clock)
    follower = open_log(tmp_path / "b" / "events-0", clock)
    try:
        leader.append_as_leader(plain(), leader_epoch=0)
        originals = [leader.append_as_leader(idempotent(s), leader_epoch=0) for s in (0, 2, 4)]
        leader.append_as_leader(idempotent(0, pid=OTHER), leader_epoch=0)
        follower.append_as_follower(leader.read(0, 1 << 20).records)
        assert follower.log_end_offset == leader.log_end_offset
        # the producer's retry of its last batch reaches the new leader
        retry = follower.append_as_leader(idempotent(4), leader_epoch=1)
        assert retry.duplicate and retry.first_offset == originals[-1].first_offset
        assert follower.append_as_leader(idempotent(0, pid=OTHER), leader_epoch=1).duplicate
        assert follower.append_as_leader(idempotent(6), leader_epoch=1).first_offset == 10
        with pytest.raises(OutOfOrderSequenceError):
            follower.append_as_leader(idempotent(9), leader_epoch=1)
    finally:
        leader.close()
        follower.close()


def test_truncation_forgets_the_truncated_batches(log: Log) -> None:
    for seq in (0, 2, 4):
        log.append_as_leader(idempotent(seq), leader_epoch=0)  # offsets 0..5
    assert log.truncate_to(4)
    # the producer never got an answer for sequences 4..5: its retry is a new batch
    retry = log.append_as_leader(idempotent(4, tag=b"again"), leader_epoch=1)
    assert not retry.duplicate and retry.first_offset == 4
    assert log.append_as_leader(idempotent(2), leader_epoch=1).duplicate
    assert values(log)[-2:] == [b"again-4", b"again-5"]


def test_truncating_an_epoch_bump_brings_back_the_old_epoch(log: Log) -> None:
    """Only a rebuild from the log can: the bumped entry forgot the epoch-0 batches."""
    log.append_as_leader(idempotent(0, epoch=0), leader_epoch=0)
    log.append_as_leader(idempotent(2, epoch=0), leader_epoch=0)
    log.append_as_leader(idempotent(0, epoch=1), leader_epoch=0)  # offsets 4..5
    log.truncate_to(4)
    entry = log.producer_state.entry(PID)
    assert entry is not None and entry.producer_epoch == 0 and entry.last_offset == 3
    assert log.append_as_leader(idempotent(2, epoch=0), leader_epoch=1).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(6, epoch=0), leader_epoch=1)


def test_a_truncation_that_keeps_every_producer_batch_keeps_the_state(log: Log) -> None:
    log.append_as_leader(idempotent(0), leader_epoch=0)
    log.append_as_leader(plain(3), leader_epoch=0)  # offsets 2..4
    before = log.producer_state.entry(PID)
    assert log.truncate_to(3)
    assert log.producer_state.entry(PID) is before
    assert log.append_as_leader(idempotent(0), leader_epoch=0).duplicate


def test_full_truncation_forgets_every_producer(log: Log) -> None:
    log.append_as_leader(idempotent(0), leader_epoch=0)
    log.truncate_fully_and_start_at(100)
    assert log.producer_state.producers == {}
    retry = log.append_as_leader(idempotent(0), leader_epoch=0)
    assert not retry.duplicate and retry.first_offset == 100


def test_reopening_after_a_crash_rebuilds_the_state(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "events-0"
    log = open_log(directory, clock)
    for seq in range(0, 40, 4):  # several segments of 2 KiB
        log.append_as_leader(idempotent(seq, 4, pid=PID, tag=b"x" * 40), leader_epoch=0)
        log.append_as_leader(plain(), leader_epoch=0)
    log.append_as_leader(idempotent(0, 1, pid=OTHER, epoch=3), leader_epoch=0)
    assert log.num_segments > 1
    before = {pid: repr(entry) for pid, entry in log.producer_state.producers.items()}
    log.crash()  # nothing flushed, nothing lost
    reopened = open_log(directory, clock)
    try:
        after = {pid: repr(entry) for pid, entry in reopened.producer_state.producers.items()}
        assert after == before
        retry = reopened.append_as_leader(idempotent(36, 4, tag=b"x" * 40), leader_epoch=0)
        assert retry.duplicate
        next_one = reopened.append_as_leader(idempotent(1, 1, pid=OTHER, epoch=3), leader_epoch=0)
        assert not next_one.duplicate and next_one.first_offset == retry.last_offset + 4
    finally:
        reopened.close()


def test_a_power_loss_forgets_the_state_of_what_it_lost(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "events-0"
    log = open_log(directory, clock)
    log.append_as_leader(idempotent(0), leader_epoch=0)
    log.flush()
    log.append_as_leader(idempotent(2), leader_epoch=0)  # never flushed
    log.crash(lose_unflushed=True)
    reopened = open_log(directory, clock)
    try:
        assert reopened.log_end_offset == 2
        assert reopened.append_as_leader(idempotent(0), leader_epoch=0).duplicate
        again = reopened.append_as_leader(idempotent(2), leader_epoch=0)
        assert not again.duplicate and again.first_offset == 2
    finally:
        reopened.close()


def test_segment_headers_are_read_as_the_batches_say(log: Log) -> None:
    log.append_as_leader(plain(), leader_epoch=0)
    log.append_as_leader(idempotent(7, 3, epoch=2), leader_epoch=0)
    log.append_as_leader(idempotent(0, 1, pid=OTHER), leader_epoch=0)
    segment = log.segments[-1]
    found = list(read_producer_batches(segment.log_path, segment.size))
    stored = [
        batch for batch in iter_batches(log.read(0, 1 << 20).records) if batch.producer_id >= 0
    ]
    assert [
        (b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence)
        for b in found
    ] == [
        (b.base_offset, b.last_offset, b.producer_id, b.producer_epoch, b.base_sequence)
        for b in stored
    ]
    assert [b.max_timestamp for b in found] == [b.max_timestamp for b in stored]
    assert list(read_producer_batches(segment.log_path, segment.size - 1)) == found[:1]
