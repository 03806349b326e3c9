"""Kafka's TransactionMetadataTest: the epoch rules of InitProducerId (KIP-360), fencing, the
rotation of an exhausted producer id, and the transitions `complete_transition` accepts."""

from __future__ import annotations

import pytest

from kafkactor.actors.transaction import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
)
from kafkactor.actors.transaction.transaction_metadata import MAX_PRODUCER_EPOCH
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode

pytestmark = pytest.mark.timeout(30)

S = TransactionState
NOW = 1_000


def _metadata(
    epoch: int = 735, state: TransactionState = S.EMPTY, last_epoch: int = -1
) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id="txn",
        producer_id=23,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        txn_timeout_ms=30_000,
        state=state,
        txn_last_update_timestamp=0,
    )


def _tp(p: int) -> TopicPartition:
    return TopicPartition(topic="t", partition=p)


def test_a_new_id_starts_at_epoch_zero() -> None:
    metadata = _metadata(epoch=-1)
    transit = metadata.prepare_increment_producer_epoch(30_000, None, NOW)
    assert not isinstance(transit, ErrorCode)
    metadata.complete_transition(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (0, -1)
    assert metadata.state is S.EMPTY and metadata.txn_last_update_timestamp == NOW


def test_a_bump_without_expected_epoch_forgets_the_last_one() -> None:
    metadata = _metadata()
    transit = metadata.prepare_increment_producer_epoch(30_000, None, NOW)
    assert not isinstance(transit, ErrorCode)
    metadata.complete_transition(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (736, -1)


def test_kip360_bump_with_the_current_epoch_records_it_as_last() -> None:
    metadata = _metadata()
    transit = metadata.prepare_increment_producer_epoch(30_000, 735, NOW)
    assert not isinstance(transit, ErrorCode)
    metadata.complete_transition(transit)
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (736, 735)


def test_kip360_retry_with_the_last_epoch_answers_the_same_epoch() -> None:
    metadata = _metadata(epoch=736, last_epoch=735)
    transit = metadata.prepare_increment_producer_epoch(30_000, 735, NOW)
    assert not isinstance(transit, ErrorCode)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (736, 735)


def test_kip360_another_epoch_is_fenced() -> None:
    metadata = _metadata(epoch=736, last_epoch=735)
    assert metadata.prepare_increment_producer_epoch(30_000, 733, NOW) is ErrorCode.PRODUCER_FENCED
    assert metadata.pending_state is None


def test_no_bump_once_the_epochs_are_exhausted() -> None:
    with pytest.raises(IllegalTransitionError):
        _metadata(epoch=MAX_PRODUCER_EPOCH - 1).prepare_increment_producer_epoch(1, None, NOW)


def test_fencing_takes_the_last_epoch_but_never_overflows() -> None:
    metadata = _metadata(epoch=MAX_PRODUCER_EPOCH - 1, state=S.ONGOING)
    fence = metadata.prepare_fence_producer_epoch()
    assert fence.producer_epoch == MAX_PRODUCER_EPOCH and fence.state is S.PREPARE_EPOCH_FENCE
    with pytest.raises(IllegalTransitionError):
        _metadata(epoch=MAX_PRODUCER_EPOCH, state=S.ONGOING).prepare_fence_producer_epoch()


def test_a_failed_fence_is_not_bumped_again() -> None:
    metadata = _metadata(state=S.ONGOING)
    metadata.has_failed_epoch_fence = True
    assert metadata.prepare_fence_producer_epoch().producer_epoch == 735


def test_rotation_gives_a_new_producer_id_at_epoch_zero() -> None:
    metadata = _metadata(epoch=MAX_PRODUCER_EPOCH - 1, state=S.COMPLETE_COMMIT)
    transit = metadata.prepare_producer_id_rotation(99, 30_000, NOW, record_last_epoch=True)
    metadata.complete_transition(transit)
    assert (metadata.producer_id, metadata.producer_epoch) == (99, 0)
    assert (metadata.last_producer_id, metadata.last_producer_epoch) == (23, MAX_PRODUCER_EPOCH - 1)
    with pytest.raises(IllegalTransitionError):
        _metadata(state=S.ONGOING).prepare_producer_id_rotation(
            100, 1, NOW, record_last_epoch=False
        )


def test_adding_partitions_starts_the_transaction_then_keeps_its_start() -> None:
    metadata = _metadata()
    metadata.complete_transition(metadata.prepare_add_partitions(frozenset({_tp(0)}), NOW))
    assert metadata.state is S.ONGOING and metadata.txn_start_timestamp == NOW
    metadata.complete_transition(metadata.prepare_add_partitions(frozenset({_tp(1)}), NOW + 5))
    assert metadata.partitions == {_tp(0), _tp(1)} and metadata.txn_start_timestamp == NOW


def test_commit_then_complete_clears_the_partitions() -> None:
    metadata = _metadata()
    metadata.complete_transition(metadata.prepare_add_partitions(frozenset({_tp(0)}), NOW))
    metadata.complete_transition(metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW + 1))
    completion = metadata.prepare_complete(NOW + 2)
    assert completion.state is S.COMPLETE_COMMIT and metadata.pending_state is S.COMPLETE_COMMIT
    metadata.remove_partition(_tp(0))
    metadata.complete_transition(completion)
    assert metadata.state is S.COMPLETE_COMMIT and not metadata.partitions
    assert metadata.txn_last_update_timestamp == NOW + 2


def test_illegal_transitions_are_refused() -> None:
    metadata = _metadata()
    with pytest.raises(IllegalTransitionError, match="PrepareCommit cannot follow Empty"):
        metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, NOW)
    metadata.prepare_add_partitions(frozenset({_tp(0)}), NOW)
    with pytest.raises(IllegalTransitionError, match="pending"):
        metadata.prepare_add_partitions(frozenset({_tp(1)}), NOW)
    with pytest.raises(IllegalTransitionError):
        metadata.remove_partition(_tp(0))  # only while markers are written


def test_a_transition_other_than_the_prepared_one_is_refused() -> None:
    metadata = _metadata()
    other = _metadata().prepare_increment_producer_epoch(30_000, None, NOW)
    assert not isinstance(other, ErrorCode)
    with pytest.raises(IllegalTransitionError):
        metadata.complete_transition(other)  # nothing pending
    metadata.prepare_add_partitions(frozenset({_tp(0)}), NOW)
    with pytest.raises(IllegalTransitionError):
        metadata.complete_transition(other)  # Empty was not what was prepared
