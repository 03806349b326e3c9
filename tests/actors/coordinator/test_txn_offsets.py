"""Transactional offset commits on the pure core (`txn_offset_commit`, `txn_offsets`), ported
from the behaviours of Kafka's GroupCoordinatorTest, GroupMetadataTest and
GroupMetadataManagerTest transactional cases: a TxnOffsetCommit's checks, its offsets pending
for the producer until the marker (visible on commit, dropped on abort), OffsetFetch with
require_stable, the order of plain and transactional commits in the log, and what a load
replays from a partition holding committed, aborted and still-open transactions."""

from __future__ import annotations

import struct

import pytest

from kafkactor.actors.coordinator.group_state import GroupState
from kafkactor.actors.coordinator.offsets_loader import is_commit_marker
from kafkactor.actors.coordinator.offsets_store import OffsetsReplay, offset_records
from kafkactor.actors.coordinator.txn_offset_commit import (
    complete_txn_offset_write,
    handle_txn_commit_offsets,
    handle_txn_completion,
)
from kafkactor.actors.coordinator.txn_offsets import PendingTxnOffset, TxnCommitOutcome
from kafkactor.common import TopicPartition
from kafkactor.messages.errors import ErrorCode
from kafkactor.storage import Record, StoredRecord, build_batch, iter_batches
from tests.actors.coordinator.shell import GROUP, Shell, offset, tp

pytestmark = pytest.mark.timeout(30)

PID = 1000  # the producer id of the transactions
EPOCH = 3
OTHER_PID = 2000
TP = tp("orders", 0)
NONE = ErrorCode.NONE


def txn_commit(
    shell: Shell,
    offsets: dict[TopicPartition, int],
    *,
    producer_id: int = PID,
    group_id: str = GROUP,
    at: int | None = 10,
    error: ErrorCode = NONE,
    member_id: str = "",
    generation_id: int = -1,
    group_instance_id: str | None = None,
) -> TxnCommitOutcome:
    """A TxnOffsetCommit; its batch is appended at log offset `at` (None: not acknowledged
    yet, the write is returned pending) or fails with `error`."""
    full = {p: offset(o, shell.now, f"txn {o}") for p, o in offsets.items()}
    outcome = handle_txn_commit_offsets(
        shell.core,
        group_id,
        "txn-1",
        producer_id,
        EPOCH,
        full,
        shell.now,
        member_id=member_id,
        generation_id=generation_id,
        group_instance_id=group_instance_id,
    )
    if outcome.write is None or at is None:
        return outcome
    answer = complete_txn_offset_write(shell.core, outcome.write, error, at)
    return TxnCommitOutcome(answer, outcome.write)


def committed(
    shell: Shell, *partitions: TopicPartition, group_id: str = GROUP
) -> dict[TopicPartition, int]:
    error, found = shell.core.handle_fetch_offsets(group_id, list(partitions) or None)
    assert error is NONE
    return {p: f.offset for p, f in found.items() if f.offset >= 0}


def stable_errors(shell: Shell, *partitions: TopicPartition) -> dict[TopicPartition, ErrorCode]:
    error, found = shell.core.handle_fetch_offsets(GROUP, list(partitions), require_stable=True)
    assert error is NONE
    return {p: f.error for p, f in found.items()}


def complete(
    shell: Shell, committed_: bool, producer_id: int = PID, group_id: str = GROUP
) -> list[str]:
    partition = shell.core.partition_for(group_id)
    return handle_txn_completion(shell.core, producer_id, partition, committed_, shell.now)


# -- TxnOffsetCommit and the markers -----------------------------------------------------------


def test_a_transactions_offsets_are_pending_until_its_commit_marker() -> None:
    shell = Shell()
    outcome = txn_commit(shell, {TP: 42})
    assert outcome.errors == {TP: NONE}
    assert shell.state() is GroupState.EMPTY  # an unknown group is created Empty

    assert committed(shell, TP) == {}  # not visible as committed
    assert stable_errors(shell, TP) == {TP: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    assert committed(shell) == {}

    assert complete(shell, True) == [GROUP]
    assert committed(shell, TP) == {TP: 42}
    assert stable_errors(shell, TP) == {TP: NONE}
    assert shell.group().offset(TP) == offset(42, shell.now, "txn 42")


def test_an_abort_marker_drops_the_transactions_offsets() -> None:
    shell = Shell()
    shell.commit({TP: 7})
    txn_commit(shell, {TP: 42, tp("orders", 1): 5})
    complete(shell, False)
    assert committed(shell, TP, tp("orders", 1)) == {TP: 7}
    assert stable_errors(shell, TP, tp("orders", 1)) == {TP: NONE, tp("orders", 1): NONE}
    complete(shell, True)  # a second marker finds nothing pending
    assert committed(shell, TP) == {TP: 7}


def test_a_marker_completes_only_its_producers_offsets() -> None:
    shell = Shell()
    txn_commit(shell, {TP: 1})
    txn_commit(shell, {tp("orders", 1): 2}, producer_id=OTHER_PID, at=11)
    complete(shell, True, OTHER_PID)
    assert committed(shell) == {tp("orders", 1): 2}
    assert stable_errors(shell, TP) == {TP: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    complete(shell, True)
    assert committed(shell) == {TP: 1, tp("orders", 1): 2}


def test_a_marker_on_another_offsets_partition_completes_nothing() -> None:
    """Kafka's testFetchTxnOffsetsIgnoreSpuriousCommit."""
    shell = Shell()
    txn_commit(shell, {TP: 42})
    other = (shell.core.partition_for(GROUP) + 1) % shell.core.config.offsets_topic_partitions
    assert handle_txn_completion(shell.core, PID, other, True, shell.now) == []
    assert stable_errors(shell, TP) == {TP: ErrorCode.UNSTABLE_OFFSET_COMMIT}


def test_one_producers_marker_completes_only_the_groups_of_its_partition() -> None:
    """One transaction commits offsets of two groups in two partitions of __consumer_offsets:
    each partition's marker completes its own group."""
    shell = Shell()
    partitions = shell.core.config.offsets_topic_partitions
    names = (f"group-{n}" for n in range(1000))
    second = next(
        g for g in names if shell.core.partition_for(g) != shell.core.partition_for(GROUP)
    )
    assert partitions > 1
    txn_commit(shell, {TP: 1})
    txn_commit(shell, {TP: 2}, group_id=second, at=11)
    assert complete(shell, True, group_id=second) == [second]
    assert committed(shell, TP, group_id=second) == {TP: 2}
    assert committed(shell, TP) == {}
    assert complete(shell, True) == [GROUP]
    assert committed(shell, TP) == {TP: 1}


def test_a_plain_commit_written_after_the_transactions_record_wins() -> None:
    """Kafka orders the two by their offsets in __consumer_offsets: the transaction's record
    at 10, a plain commit at 12, then the marker: the plain commit stays."""
    shell = Shell()
    txn_commit(shell, {TP: 42}, at=10)
    write = shell.core.handle_commit_offsets(GROUP, "", -1, {TP: offset(50)}, shell.now).write
    assert write is not None
    assert shell.core.complete_offset_write(write, NONE, 12) == {TP: NONE}
    complete(shell, True)
    assert committed(shell, TP) == {TP: 50}


def test_a_transaction_written_after_a_plain_commit_wins() -> None:
    shell = Shell()
    write = shell.core.handle_commit_offsets(GROUP, "", -1, {TP: offset(50)}, shell.now).write
    assert write is not None
    shell.core.complete_offset_write(write, NONE, 5)
    txn_commit(shell, {TP: 42}, at=10)
    complete(shell, True)
    assert committed(shell, TP) == {TP: 42}


@pytest.mark.parametrize("commit", [True, False])
def test_a_marker_before_the_append_is_acknowledged_applies_on_the_acknowledgement(
    commit: bool,
) -> None:
    """The record was sent before the marker: its marker's outcome waits for its append's
    acknowledgement (Kafka fails this case)."""
    shell = Shell()
    outcome = txn_commit(shell, {TP: 42}, at=None)
    complete(shell, commit)
    assert committed(shell, TP) == {}
    assert stable_errors(shell, TP) == {TP: ErrorCode.UNSTABLE_OFFSET_COMMIT}  # in flight
    assert outcome.write is not None
    assert complete_txn_offset_write(shell.core, outcome.write, NONE, 10) == {TP: NONE}
    assert committed(shell, TP) == ({TP: 42} if commit else {})
    assert stable_errors(shell, TP) == {TP: NONE}


def test_a_fenced_zombies_refused_commit_leaves_its_successors_pending_offset() -> None:
    """Same producer id, older epoch: the log refuses the zombie's batch. Kafka drops the
    partition's pending offset of the producer id with it; here the successor's stays."""
    shell = Shell()
    txn_commit(shell, {TP: 42}, at=10)  # the successor's, acknowledged
    assert txn_commit(shell, {TP: 13}, error=ErrorCode.PRODUCER_FENCED).errors == {
        TP: ErrorCode.PRODUCER_FENCED
    }
    assert stable_errors(shell, TP) == {TP: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    complete(shell, True)
    assert committed(shell, TP) == {TP: 42}


@pytest.mark.parametrize(
    ("error", "answered"),
    [
        (ErrorCode.NOT_LEADER_FOR_PARTITION, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_COMMIT_OFFSET_SIZE),
        (ErrorCode.PRODUCER_FENCED, ErrorCode.PRODUCER_FENCED),  # a zombie's epoch
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
    ],
)
def test_a_failed_append_answers_kafkas_error_and_leaves_nothing_pending(
    error: ErrorCode, answered: ErrorCode
) -> None:
    shell = Shell()
    assert txn_commit(shell, {TP: 42}, error=error).errors == {TP: answered}
    assert stable_errors(shell, TP) == {TP: NONE}
    complete(shell, True)
    assert committed(shell, TP) == {}


def test_too_large_metadata_is_refused_per_partition() -> None:
    shell = Shell()
    limit = shell.core.config.offset_metadata_max_bytes
    big = {TP: offset(1, metadata="x" * (limit + 1)), tp("orders", 1): offset(2)}
    outcome = handle_txn_commit_offsets(shell.core, GROUP, "t", PID, EPOCH, big, shell.now)
    assert outcome.write is not None
    answer = complete_txn_offset_write(shell.core, outcome.write, NONE, 3)
    assert answer == {TP: ErrorCode.OFFSET_METADATA_TOO_LARGE, tp("orders", 1): NONE}
    only_big = {TP: big[TP]}
    outcome = handle_txn_commit_offsets(shell.core, GROUP, "t", PID, EPOCH, only_big, shell.now)
    assert outcome.errors == {TP: ErrorCode.OFFSET_METADATA_TOO_LARGE}


# -- the group's checks ------------------------------------------------------------------------


def test_the_coordinators_status_is_checked_as_for_an_offset_commit() -> None:
    shell = Shell()
    shell.core.owned_partitions.discard(shell.core.partition_for(GROUP))
    assert txn_commit(shell, {TP: 1}).errors == {TP: ErrorCode.NOT_COORDINATOR}
    shell.core.begin_loading(shell.core.partition_for(GROUP))
    assert txn_commit(shell, {TP: 1}).errors == {TP: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    assert txn_commit(shell, {TP: 1}, group_id="").errors == {TP: ErrorCode.INVALID_GROUP_ID}
    assert shell.core.group(GROUP) is None


def test_a_commit_without_a_producer_is_refused() -> None:
    shell = Shell()
    assert txn_commit(shell, {TP: 1}, producer_id=-1).errors == {
        TP: ErrorCode.INVALID_PRODUCER_ID_MAPPING
    }


def test_kip_447_member_and_generation_are_checked_when_given() -> None:
    shell = Shell()
    (leader, other), generation = shell.stable_group(2)
    assert txn_commit(shell, {TP: 1}, member_id=leader, generation_id=generation).errors == {
        TP: NONE
    }
    assert txn_commit(shell, {TP: 1}, member_id="stranger", generation_id=generation).errors == {
        TP: ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert txn_commit(shell, {TP: 1}, member_id=other, generation_id=generation + 1).errors == {
        TP: ErrorCode.ILLEGAL_GENERATION
    }
    # v0-v2: no member, no generation: not checked
    assert txn_commit(shell, {TP: 1}).errors == {TP: NONE}
    # a rebalance in progress does not refuse it (Kafka checks no state)
    shell.join()  # a new member: the group rebalances
    assert shell.state() is GroupState.PREPARING_REBALANCE
    assert txn_commit(shell, {TP: 2}, member_id=leader, generation_id=generation).errors == {
        TP: NONE
    }


def test_a_fenced_static_member_is_answered_fenced_instance_id() -> None:
    shell = Shell()
    first = shell.join(instance="instance-a").result
    shell.sync(first.member_id, first.generation_id, {first.member_id: b"a"}, instance="instance-a")
    fenced = txn_commit(
        shell,
        {TP: 1},
        member_id="old-id",
        generation_id=first.generation_id,
        group_instance_id="instance-a",
    )
    assert fenced.errors == {TP: ErrorCode.FENCED_INSTANCE_ID}


# -- the group's life while a transaction is open ----------------------------------------------


def test_a_group_deleted_while_its_transaction_is_open_comes_back_with_the_commit() -> None:
    """The transaction's records are in the log before its marker: the marker makes them the
    group's offsets, in the cache as at the next load of the partition."""
    shell = Shell()
    txn_commit(shell, {TP: 42})
    outcome = shell.core.handle_delete_groups([GROUP], shell.now)
    assert outcome.errors == {GROUP: NONE}
    assert shell.core.group(GROUP) is None
    assert stable_errors(shell, TP) == {TP: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    complete(shell, True)
    assert shell.state() is GroupState.EMPTY
    assert committed(shell, TP) == {TP: 42}


def test_offset_delete_keeps_an_empty_group_with_a_transactions_offsets_pending() -> None:
    """Kafka's hasOffsets counts the pending transactional offsets: an Empty group whose last
    committed offset is deleted stays while a transaction has offsets pending there."""
    shell = Shell()
    (member,), generation = shell.stable_group(1)
    shell.commit({TP: 3}, member, generation)
    shell.leave(member)
    txn_commit(shell, {tp("orders", 1): 42})
    outcome = shell.core.handle_delete_offsets(GROUP, [TP], shell.now)
    assert outcome.partitions == {TP: NONE}
    assert not outcome.group_removed
    assert outcome.tombstones is not None and not outcome.tombstones.metadata
    assert shell.state() is GroupState.EMPTY
    complete(shell, True)
    assert committed(shell) == {tp("orders", 1): 42}
    assert shell.group().generation_id == generation + 1  # the same group, not a new one


def test_an_abort_after_the_groups_deletion_leaves_no_group() -> None:
    shell = Shell()
    txn_commit(shell, {TP: 42})
    shell.core.handle_delete_groups([GROUP], shell.now)
    complete(shell, False)
    assert shell.core.group(GROUP) is None
    assert stable_errors(shell, TP) == {TP: NONE}


def test_a_resigned_partition_forgets_its_pending_offsets_and_ignores_markers() -> None:
    shell = Shell()
    txn_commit(shell, {TP: 42})
    partition = shell.core.partition_for(GROUP)
    shell.core.resign(partition, shell.now)
    assert complete(shell, True) == []  # its new leader loads the marker from the log
    shell.core.finish_loading(partition)
    assert shell.core.group(GROUP) is None
    assert committed(shell, TP) == {}


# -- the load ----------------------------------------------------------------------------------


def stored(
    records: list[Record], base_offset: int, producer_id: int | None = None
) -> list[StoredRecord]:
    if producer_id is None:
        data = build_batch(records, base_offset)
    else:
        data = build_batch(
            records,
            base_offset,
            producer_id=producer_id,
            producer_epoch=EPOCH,
            base_sequence=0,
            is_transactional=True,
        )
    return [r for batch in iter_batches(data) for r in batch.records()]


def test_a_load_commits_aborts_and_keeps_open_transactions_as_their_markers_say() -> None:
    """A partition with a committed, an aborted and a still-open transaction, and a plain
    commit between a transaction's record and its marker."""
    now = 1_700_000_000_000
    tp1, tp2, tp3 = tp("orders", 1), tp("orders", 2), tp("orders", 3)

    def records(offsets: dict[TopicPartition, int]) -> list[Record]:
        return offset_records(GROUP, {p: offset(o, now) for p, o in offsets.items()}, now)

    replay = OffsetsReplay()
    replay.replay(stored(records({TP: 1, tp1: 1}), 0))
    replay.replay(stored(records({TP: 10, tp2: 10}), 2, PID), producer_id=PID)  # commits
    replay.replay(stored(records({tp1: 20}), 4, OTHER_PID), producer_id=OTHER_PID)  # aborts
    replay.replay(stored(records({tp2: 30}), 5))  # a plain commit after PID's record
    replay.replay(stored(records({tp3: 40}), 6, 3000), producer_id=3000)  # stays open
    replay.replay_marker(PID, committed=True)
    replay.replay_marker(OTHER_PID, committed=False)

    (group,) = replay.loaded()
    assert {p: o.offset for p, o in group.offsets.items()} == {TP: 10, tp1: 1, tp2: 30}
    assert group.pending == {3000: {tp3: PendingTxnOffset(offset(40, now), 6)}}

    shell = Shell()  # the coordinator serves what the load found
    shell.core.load_group(GROUP, group.snapshot, group.offsets, shell.now)
    shell.core.txn_offsets.load(GROUP, group.pending, group.positions)
    assert stable_errors(shell, tp3) == {tp3: ErrorCode.UNSTABLE_OFFSET_COMMIT}
    handle_txn_completion(shell.core, 3000, shell.core.partition_for(GROUP), True, shell.now)
    assert committed(shell) == {TP: 10, tp1: 1, tp2: 30, tp3: 40}


def test_a_group_with_only_pending_offsets_is_loaded() -> None:
    now = 1_700_000_000_000
    replay = OffsetsReplay()
    replay.replay(stored(offset_records(GROUP, {TP: offset(5, now)}, now), 0, PID), producer_id=PID)
    (group,) = replay.loaded()
    assert (group.snapshot, dict(group.offsets)) == (None, {})
    assert set(group.pending) == {PID}


@pytest.mark.parametrize(
    ("key", "commit"),
    [
        (struct.pack(">hh", 0, 1), True),
        (struct.pack(">hh", 0, 0), False),
        (struct.pack(">hh", 0, 7), False),  # an unknown type: dropped as Kafka's loader does
        (b"\x00", False),
        (None, False),
    ],
)
def test_control_record_keys(key: bytes | None, commit: bool) -> None:
    assert is_commit_marker(key) is commit
