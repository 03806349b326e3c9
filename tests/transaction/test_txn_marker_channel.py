"""The marker channel's bookkeeping (Kafka's TransactionMarkerChannelManager behaviours): one
request per leader, partitions without a leader kept for the retry, deleted partitions counted
as written, errors sent again, fencing errors stopping the job; and the DelayedTxnMarker."""

from __future__ import annotations

import pytest

from kafkactor.actors.purgatory import Purgatory
from kafkactor.actors.transaction import MarkerJob, TransactionState, TxnTransitMetadata
from kafkactor.actors.transaction.delayed_txn_marker import DelayedTxnMarker
from kafkactor.actors.transaction.txn_marker_channel import TxnMarkerChannel
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import MetadataResponse, PartitionMetadata, TopicMetadata
from kafkactor.messages.transaction import (
    TxnMarkerPartitionResult,
    TxnMarkerResult,
    WriteTxnMarkersResponse,
)
from kafkactor.timer import ManualClock, Timer

pytestmark = pytest.mark.timeout(30)


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def _job(tid: str, producer_id: int, *partitions: TopicPartition) -> MarkerJob:
    completion = TxnTransitMetadata(
        producer_id=producer_id,
        last_producer_id=-1,
        producer_epoch=3,
        last_producer_epoch=-1,
        txn_timeout_ms=1000,
        state=TransactionState.COMPLETE_COMMIT,
        partitions=frozenset(),
        txn_start_timestamp=1,
        txn_last_update_timestamp=2,
    )
    return MarkerJob(
        transactional_id=tid,
        txn_partition=0,
        coordinator_epoch=5,
        producer_id=producer_id,
        producer_epoch=3,
        committed=True,
        partitions=frozenset(partitions),
        completion=completion,
        cause="client",
        partition_count=len(partitions),
    )


def _metadata(leaders: dict[str, list[int]]) -> MetadataResponse:
    return MetadataResponse(
        topics=tuple(
            TopicMetadata(
                topic=topic,
                partitions=tuple(
                    PartitionMetadata(partition=p, leader=leader) for p, leader in enumerate(ls)
                ),
            )
            for topic, ls in leaders.items()
        )
    )


def _answer(*results: tuple[int, TopicPartition, ErrorCode]) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=tuple(
            TxnMarkerResult(
                producer_id=pid,
                partitions=(
                    TxnMarkerPartitionResult(topic=tp.topic, partition=tp.partition, error_code=e),
                ),
            )
            for pid, tp, e in results
        )
    )


def test_markers_are_grouped_by_leader_and_leaderless_ones_wait() -> None:
    channel = TxnMarkerChannel()
    channel.add(_job("a", 10, _tp("t", 0), _tp("t", 1), _tp("t", 2)))
    channel.add(_job("b", 11, _tp("t", 1)))
    assert channel.topics_to_look_up() == ("t",)
    sends, gone = channel.route(_metadata({"t": [1, 2, -1]}), now=0)
    assert gone == []
    assert {leader: dict(send.entries) for leader, (_, send) in sends.items()} == {
        1: {"a": {_tp("t", 0)}},
        2: {"a": {_tp("t", 1)}, "b": {_tp("t", 1)}},
    }
    entries = channel.entries(sends[2][1])
    assert [(e.producer_id, e.producer_epoch, e.coordinator_epoch) for e in entries] == [
        (10, 3, 5),
        (11, 3, 5),
    ]
    assert channel.unsent == {"a": {_tp("t", 2)}, "b": set()}  # no leader: asked again later
    assert channel.has_unsent


def test_a_deleted_partition_counts_as_written() -> None:
    channel = TxnMarkerChannel()
    channel.add(_job("a", 10, _tp("gone", 0), _tp("t", 0)))
    unknown = TopicMetadata(topic="gone", error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    metadata = MetadataResponse(topics=(*_metadata({"t": [1]}).topics, unknown))
    sends, gone = channel.route(metadata, now=0)
    assert gone == [("a", _tp("gone", 0))] and set(sends) == {1}


def test_an_answer_that_does_not_name_a_topic_leaves_its_markers_unsent() -> None:
    """Leader lookups overlap: one asked before a job came names only the topics of its time.
    Its answer must not count the later job's other topics as deleted: that dropped the
    marker of a `__consumer_offsets` partition and left its transaction open there forever
    (the LSO stuck below the HW: nemesis --transactions, seed 25)."""
    channel = TxnMarkerChannel()
    channel.add(_job("a", 10, _tp("out", 0)))
    asked_first = channel.topics_to_look_up()
    channel.add(_job("b", 11, _tp("out", 1), _tp("__consumer_offsets", 0)))
    assert asked_first == ("out",)
    sends, gone = channel.route(_metadata({"out": [1, 1]}), now=0)
    assert gone == [] and set(sends) == {1}
    assert channel.unsent["b"] == {_tp("__consumer_offsets", 0)}  # waits for its own answer
    sends, gone = channel.route(_metadata({"__consumer_offsets": [2]}), now=0)
    assert gone == [] and dict(sends[2][1].entries) == {"b": {_tp("__consumer_offsets", 0)}}


def test_answers_split_into_written_retried_and_fenced() -> None:
    channel = TxnMarkerChannel()
    channel.add(_job("a", 10, _tp("t", 0), _tp("t", 1)))
    channel.add(_job("b", 11, _tp("t", 0)))
    sends, _ = channel.route(_metadata({"t": [1, 1]}), now=0)
    correlation_id, _send = sends[1]
    answer = _answer(
        (10, _tp("t", 0), ErrorCode.NONE),
        (10, _tp("t", 1), ErrorCode.NOT_LEADER_FOR_PARTITION),
        (11, _tp("t", 0), ErrorCode.INVALID_PRODUCER_EPOCH),
    )
    send, written, fenced = channel.on_response(correlation_id, answer)
    assert send is not None and send.leader == 1
    assert written == {"a": [_tp("t", 0)]}
    assert fenced == {"b"}
    assert channel.unsent["a"] == {_tp("t", 1)}
    assert channel.on_response(correlation_id, answer)[0] is None  # answered once


def test_a_request_without_answer_is_sent_again_after_the_timeout() -> None:
    channel = TxnMarkerChannel()
    channel.add(_job("a", 10, _tp("t", 0)))
    sends, _ = channel.route(_metadata({"t": [2]}), now=1000)
    (correlation_id, _send) = sends[2]
    assert list(channel.stale_sends(1000 + 29_999, 30_000)) == []
    assert list(channel.stale_sends(1000 + 30_000, 30_000)) == [correlation_id]
    channel.on_response(correlation_id, None)  # the request failed as a whole
    assert channel.unsent["a"] == {_tp("t", 0)}


def test_delayed_txn_marker_completes_once_no_marker_is_pending() -> None:
    clock = ManualClock()
    purgatory = Purgatory("txn-marker", Timer(clock))
    pending = {"left": True}
    done: list[tuple[str, bool]] = []
    job = _job("a", 10, _tp("t", 0))
    operation = DelayedTxnMarker(
        job,
        pending=lambda _job: pending["left"],
        on_done=lambda j, written: done.append((j.transactional_id, written)),
    )
    assert not purgatory.try_complete_else_watch(operation, ("a",))
    assert purgatory.check_and_complete("a") == 0
    pending["left"] = False
    assert purgatory.check_and_complete("a") == 1
    assert done == [("a", True)]


def test_a_moot_delayed_txn_marker_completes_without_writing() -> None:
    purgatory = Purgatory("txn-marker", Timer(ManualClock()))
    done: list[bool] = []
    operation = DelayedTxnMarker(
        _job("a", 10, _tp("t", 0)),
        pending=lambda _job: None,  # the coordinator resigned the partition
        on_done=lambda _j, written: done.append(written),
    )
    assert purgatory.try_complete_else_watch(operation, ("a",))
    assert done == [False]
