"""The replica fetcher's loop against stand-ins for its leader and its partitions.

Kafka's ReplicaFetcherThread facts: a partition of a new leader finds its truncation point
before it fetches (OffsetsForLeaderEpoch, repeated while the answer names an epoch the follower
lacks, KIP-279); an error on one partition delays that partition only, for
`replica.fetch.backoff.ms`, while the others keep fetching; a follower behind the leader's log
start starts over there; a follower ahead of it goes back to the epochs. Time is a ManualClock:
the backoff ends only when the test moves it.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pykka
import pytest

from kafkactor.actors.replication import ReplicaFetcherActor, ReplicaManagerConfig
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    EpochEndOffset,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.partition import (
    AppendAsFollower,
    FollowerAppended,
    FollowerTruncated,
    TruncateFollower,
)
from kafkactor.messages.replication import (
    AddFetcherPartitions,
    FetcherPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from kafkactor.timer import ManualClock, Timer

FOLLOWER, LEADER = 1, 2
BACKOFF_MS = 100
WAIT_S = 5.0


@dataclass
class Inbox:
    """A stand-in mailbox that keeps what it is sent (the payload of each envelope)."""

    received: queue.Queue[Any] = field(default_factory=queue.Queue)

    def tell(self, message: Any) -> None:
        self.received.put(getattr(message, "payload", message))

    def next(self, kind: type[Any]) -> Any:
        message = self.received.get(timeout=WAIT_S)
        assert isinstance(message, kind), f"expected a {kind.__name__}, got {message!r}"
        return message

    def nothing(self) -> None:
        with pytest.raises(queue.Empty):
            message = self.received.get(timeout=0.2)
            print(f"unexpected: {message!r}")


@dataclass
class Setup:
    directory: Directory
    clock: ManualClock
    timer: Timer
    fetcher: pykka.ActorRef[Any]
    leader: Inbox
    partitions: Inbox

    def answer(self, message: Any) -> None:
        self.directory.tell(addresses.fetcher(FOLLOWER, LEADER), message)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.timer.advance_clock(0)


@pytest.fixture
def setup() -> Iterator[Setup]:
    directory = Directory()
    clock = ManualClock(0)
    timer = Timer(clock)
    leader, partitions = Inbox(), Inbox()
    directory.register(addresses.replica_manager(LEADER), leader)
    for key in ("t-0", "t-1"):
        directory.register(addresses.partition(FOLLOWER, key), partitions)
    address = addresses.fetcher(FOLLOWER, LEADER)
    config = ReplicaManagerConfig(
        replica_fetch_wait_max_ms=50,
        replica_fetch_backoff_ms=BACKOFF_MS,
        replica_socket_timeout_ms=1_000,
    )
    ref = ReplicaFetcherActor.start(
        address, directory, clock, FOLLOWER, leader=LEADER, timer=timer, config=config
    )
    directory.register(address, ref)
    yield Setup(directory, clock, timer, ref, leader, partitions)
    ref.stop(block=True, timeout=WAIT_S)
    timer.shutdown()


def add(setup: Setup, *partitions: int, truncate: bool = False, latest_epoch: int = 0) -> None:
    setup.fetcher.tell(
        AddFetcherPartitions(
            partitions=tuple(
                FetcherPartition(
                    topic="t",
                    partition=p,
                    fetch_offset=10,
                    leader_epoch=5,
                    truncate=truncate,
                    latest_epoch=latest_epoch,
                )
                for p in partitions
            )
        )
    )


def data(partition: int, error: ErrorCode = ErrorCode.NONE, **fields: Any) -> FetchPartitionData:
    return FetchPartitionData(topic="t", partition=partition, error_code=error, **fields)


def fetched(request: FetchRequest) -> dict[int, int]:
    return {p.partition: p.fetch_offset for p in request.partitions}


def test_an_error_delays_only_its_partition_until_the_backoff_ends(setup: Setup) -> None:
    add(setup, 0, 1)
    first = setup.leader.next(FetchRequest)
    assert fetched(first) == {0: 10, 1: 10}
    assert first.replica_id == FOLLOWER

    setup.answer(
        FetchResponse(
            correlation_id=first.correlation_id,
            partitions=(
                data(0, ErrorCode.NOT_LEADER_FOR_PARTITION),
                data(1, records=b"batch", high_watermark=11),
            ),
        )
    )
    append = setup.partitions.next(AppendAsFollower)
    assert (append.partition, append.leader_epoch, append.records) == (1, 5, b"batch")
    setup.answer(FollowerAppended(correlation_id=append.correlation_id, log_end_offset=12))

    second = setup.leader.next(FetchRequest)
    assert fetched(second) == {1: 12}  # partition 0 waits; partition 1 goes on at once
    nothing_new = (data(1, high_watermark=11),)  # no records, the HW it already has
    setup.answer(FetchResponse(correlation_id=second.correlation_id, partitions=nothing_new))
    third = setup.leader.next(FetchRequest)
    assert fetched(third) == {1: 12}

    setup.advance(BACKOFF_MS)  # partition 0's delay is over
    setup.answer(FetchResponse(correlation_id=third.correlation_id, partitions=nothing_new))
    assert fetched(setup.leader.next(FetchRequest)) == {0: 10, 1: 12}


def test_a_new_leader_is_asked_for_epochs_round_after_round_before_any_fetch(
    setup: Setup,
) -> None:
    add(setup, 0, truncate=True, latest_epoch=3)
    ask = setup.leader.next(OffsetsForLeaderEpochRequest)
    [part] = ask.partitions
    assert (part.leader_epoch, part.current_leader_epoch) == (3, 5)
    answer = EpochEndOffset(topic="t", partition=0, leader_epoch=2, end_offset=9)
    setup.answer(
        OffsetsForLeaderEpochResponse(correlation_id=ask.correlation_id, partitions=(answer,))
    )

    step = setup.partitions.next(TruncateFollower)
    assert (step.epoch_end, step.leader_epoch) == (answer, 5)
    setup.leader.nothing()  # no fetch while truncating
    # the follower lacked epoch 2: it cut to where its epoch 1 ends and asks again (KIP-279)
    setup.answer(
        FollowerTruncated(
            correlation_id=step.correlation_id, log_end_offset=8, latest_epoch=1, completed=False
        )
    )
    again = setup.leader.next(OffsetsForLeaderEpochRequest)
    assert again.partitions[0].leader_epoch == 1
    setup.answer(
        OffsetsForLeaderEpochResponse(
            correlation_id=again.correlation_id,
            partitions=(EpochEndOffset(topic="t", partition=0, leader_epoch=1, end_offset=7),),
        )
    )
    last = setup.partitions.next(TruncateFollower)
    setup.answer(
        FollowerTruncated(
            correlation_id=last.correlation_id, log_end_offset=7, latest_epoch=1, completed=True
        )
    )
    assert fetched(setup.leader.next(FetchRequest)) == {0: 7}


def test_an_epoch_question_refused_by_a_leader_not_ready_yet_is_asked_again(
    setup: Setup,
) -> None:
    add(setup, 0, truncate=True, latest_epoch=3)
    ask = setup.leader.next(OffsetsForLeaderEpochRequest)
    setup.answer(
        OffsetsForLeaderEpochResponse(
            correlation_id=ask.correlation_id,
            partitions=(
                EpochEndOffset(
                    topic="t", partition=0, error_code=ErrorCode.NOT_LEADER_FOR_PARTITION
                ),
            ),
        )
    )
    setup.leader.nothing()  # backing off
    setup.advance(BACKOFF_MS)
    again = setup.leader.next(OffsetsForLeaderEpochRequest)
    assert again.partitions[0].leader_epoch == 3


def test_out_of_range_behind_the_log_start_starts_over_there_and_ahead_asks_the_epochs(
    setup: Setup,
) -> None:
    add(setup, 0, 1)
    first = setup.leader.next(FetchRequest)
    setup.answer(
        FetchResponse(
            correlation_id=first.correlation_id,
            partitions=(
                data(0, ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=40, log_end_offset=50),
                data(1, ErrorCode.OFFSET_OUT_OF_RANGE, log_start_offset=0, log_end_offset=4),
            ),
        )
    )
    restart = setup.partitions.next(TruncateFollower)
    assert (restart.partition, restart.start_at, restart.epoch_end) == (0, 40, None)
    ask = setup.leader.next(OffsetsForLeaderEpochRequest)  # partition 1 is ahead: epochs
    assert [p.partition for p in ask.partitions] == [1]


def test_a_lost_request_times_out_and_the_fetcher_tries_again(setup: Setup) -> None:
    add(setup, 0)
    first = setup.leader.next(FetchRequest)
    setup.advance(50 + 1_000)  # its long poll plus replica.socket.timeout.ms
    setup.leader.nothing()  # the whole fetcher backs off first
    setup.advance(BACKOFF_MS)
    second = setup.leader.next(FetchRequest)
    assert second.correlation_id != first.correlation_id
    # the late answer to the first one is ignored
    setup.answer(
        FetchResponse(correlation_id=first.correlation_id, partitions=(data(0, records=b"x"),))
    )
    setup.partitions.nothing()
