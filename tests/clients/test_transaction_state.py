"""The transactional producer's pure parts: Kafka's client TransactionManager states and legal
transitions, per-partition sequences, and the producer state stamped into a batch."""

from __future__ import annotations

import pytest

from kafkactor.clients import TransactionStateError
from kafkactor.clients.producer_batch import stamp_producer_state
from kafkactor.clients.transaction_state import (
    PartitionSequences,
    TransactionState,
    check_transition,
)
from kafkactor.common import TopicPartition
from kafkactor.storage import Record, RecordBatch, build_batch, build_value_batch

pytestmark = pytest.mark.timeout(10)

S = TransactionState
TP = TopicPartition(topic="t", partition=0)

# Kafka's TransactionManager.State.isTransitionValid, written out as the legal pairs
LEGAL = {
    (S.READY, S.UNINITIALIZED),
    (S.UNINITIALIZED, S.INITIALIZING),
    (S.ABORTING_TRANSACTION, S.INITIALIZING),
    (S.INITIALIZING, S.READY),
    (S.COMMITTING_TRANSACTION, S.READY),
    (S.ABORTING_TRANSACTION, S.READY),
    (S.READY, S.IN_TRANSACTION),
    (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTING_TRANSACTION),
    (S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION),
    (S.IN_TRANSACTION, S.ABORTABLE_ERROR),
    (S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR),
    (S.ABORTABLE_ERROR, S.ABORTABLE_ERROR),
} | {(source, S.FATAL_ERROR) for source in S}


@pytest.mark.parametrize("source", list(S), ids=lambda s: s.name)
@pytest.mark.parametrize("target", list(S), ids=lambda s: s.name)
def test_only_kafkas_transitions_are_legal(source: S, target: S) -> None:
    if (source, target) in LEGAL:
        check_transition("tid", source, target)
    else:
        with pytest.raises(TransactionStateError) as refused:
            check_transition("tid", source, target)
        assert str(refused.value) == (
            f"TransactionalId tid: Invalid transition attempted from state {source.name} "
            f"to state {target.name}"
        )


def test_sequences_grow_by_record_count_per_partition_and_restart_at_zero_on_reset() -> None:
    sequences = PartitionSequences()
    other = TopicPartition(topic="t", partition=1)
    assert sequences.assign(TP, 3) == 0
    assert sequences.assign(TP, 2) == 3
    assert sequences.assign(other, 1) == 0
    assert sequences.next_sequence(TP) == 5
    sequences.reset()
    assert sequences.assign(TP, 1) == 0


def test_sequences_wrap_past_int32_max_as_kafka_increments_them() -> None:
    sequences = PartitionSequences()
    sequences.assign(TP, 2**31 - 2)
    assert sequences.assign(TP, 3) == 2**31 - 2
    assert sequences.next_sequence(TP) == 1


def test_a_batch_is_retried_for_out_of_order_only_while_an_earlier_one_is_in_flight() -> None:
    sequences = PartitionSequences()
    first, second = sequences.assign(TP, 2), sequences.assign(TP, 2)
    assert sequences.earlier_in_flight(TP, second)
    assert not sequences.earlier_in_flight(TP, first)
    sequences.completed(TP, first)
    assert not sequences.earlier_in_flight(TP, second)


def test_the_stamped_batch_is_the_one_build_batch_makes_with_the_producer_state() -> None:
    records = [Record(b"k", b"v", 5), Record(None, b"w", 9)]
    stamped = stamp_producer_state(build_batch(records, 0), 7, 3, 11, True)
    assert stamped == build_batch(
        records, 0, producer_id=7, producer_epoch=3, base_sequence=11, is_transactional=True
    )
    batch = RecordBatch(stamped)  # the CRC was recomputed
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert batch.is_transactional
    values = build_value_batch([b"a", b"b"], 1)
    plain = stamp_producer_state(values, 7, 0, 0, False)
    assert not RecordBatch(plain).is_transactional
    assert [r.value for r in RecordBatch(plain).records()] == [b"a", b"b"]
