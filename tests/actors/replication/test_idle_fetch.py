"""What an idle partition costs a fetch, and what its fetchers still learn.

A follower's fetch at the leader's log end (a consumer's at the high watermark) has nothing to
read: DelayedFetch answers it from the partition's snapshot without reading the log, and a
partition idle across many fetches gives the same answer until its snapshot changes. The
fetcher sends the same request part for a partition whose position did not move, and the
high watermark checkpoint is not rewritten while no high watermark moved. What must not
change: the offsets each answer carries, and new records or a new HW reaching the fetcher.
Driven without running actors, on a ManualClock (see test_delayed's Harness).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkactor.actors.replication import FetcherState, HighWatermarks
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    FetcherPartition,
    FetchPartitionData,
    LogEndOffsetAdvanced,
)
from kafkactor.storage import Log
from kafkactor.storage.checkpoint import OffsetCheckpoint
from tests.actors.replication.test_delayed import (
    FOLLOWER,
    TIMEOUT_MS,
    Harness,
    append,
    batch_offsets,
    fetch_request,
    log_snapshot,
    open_log,
    wanted,
)

pytestmark = pytest.mark.timeout(20)


def expire_fetch(
    h: Harness, fetch_offset: int, *, replica_id: int = FOLLOWER
) -> FetchPartitionData:
    """A fetch of t-0 at `fetch_offset` that waits out its max wait: its one partition's answer."""
    h.client.messages.clear()
    _, completed = h.submit(fetch_request(wanted(fetch_offset=fetch_offset), replica_id=replica_id))
    assert completed is False
    h.advance(TIMEOUT_MS)
    (data,) = h.fetch_response().partitions
    return data


def test_an_idle_followers_fetch_expires_with_the_partitions_offsets_and_no_records(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log, count=2)
    h.set(log_snapshot(log, hw=2))

    data = expire_fetch(h, 2)

    assert data.error_code is ErrorCode.NONE
    assert data.records == b""
    assert (data.high_watermark, data.log_end_offset) == (2, 2)
    assert data.log_start_offset == log.log_start_offset
    assert data.last_stable_offset == 2


def test_an_idle_partitions_answer_follows_its_snapshot(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log, count=2)
    h.set(log_snapshot(log, hw=1))
    assert expire_fetch(h, 2).high_watermark == 1
    assert expire_fetch(h, 2).high_watermark == 1

    h.set(log_snapshot(log, hw=2))  # the last follower caught up: the HW moved, nothing else

    assert expire_fetch(h, 2).high_watermark == 2  # the fetcher learns it at its next fetch


def test_a_consumer_at_the_high_watermark_gets_its_offsets_and_no_records(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    log = open_log(logs, tmp_path)
    append(log, count=3)
    h.set(log_snapshot(log, hw=1))

    data = expire_fetch(h, 1, replica_id=-1)

    assert (data.records, data.high_watermark, data.log_end_offset) == (b"", 1, 3)


def test_records_the_snapshot_does_not_show_yet_come_with_the_snapshot(
    h: Harness, logs: dict[str, Log], tmp_path: Path
) -> None:
    """The log ran ahead of the snapshot the purgatory holds (the partition appended and its
    snapshot is on the way): a fetch at the snapshot's log end reads nothing yet, and the
    snapshot, when it arrives, completes the follower's next fetch with the records."""
    log = open_log(logs, tmp_path)
    append(log)
    h.set(log_snapshot(log, hw=1))
    append(log, count=2)  # offsets 1-2, not yet published

    assert expire_fetch(h, 1).records == b""

    h.client.messages.clear()
    _, completed = h.submit(fetch_request(wanted(fetch_offset=1), replica_id=FOLLOWER))
    assert completed is False
    assert h.publish(log_snapshot(log, hw=1, kind=LogEndOffsetAdvanced)) == 1
    assert batch_offsets(h.fetch_response().partitions[0]) == [(1, 2)]


# -- the fetcher's side ----------------------------------------------------------------------


T0 = TopicPartition(topic="t", partition=0)


def test_a_partition_that_did_not_move_sends_the_same_request_part() -> None:
    state = FetcherState(backoff_ms=1000)
    state.add([FetcherPartition(topic="t", partition=0, fetch_offset=5, leader_epoch=3)])
    fetching = state.partitions[T0]

    first = fetching.fetch_partition(1024)
    assert (first.fetch_offset, first.current_leader_epoch, first.max_bytes) == (5, 3, 1024)
    assert fetching.fetch_partition(1024) is first  # idle: the same message again

    fetching.fetch_offset = 7  # an append moved it
    moved = fetching.fetch_partition(1024)
    assert (moved.fetch_offset, moved.current_leader_epoch) == (7, 3)

    state.add([FetcherPartition(topic="t", partition=0, fetch_offset=7, leader_epoch=4)])
    assert fetching.fetch_partition(1024).current_leader_epoch == 4  # KIP-320 needs the new one
    fetching.log_start_offset = 2
    assert fetching.fetch_partition(1024).log_start_offset == 2  # the low watermark needs it


# -- the high watermark checkpoint -------------------------------------------------------------


def test_the_checkpoint_is_written_again_only_once_a_high_watermark_moved(tmp_path: Path) -> None:
    book = HighWatermarks(tmp_path)
    file = tmp_path / "replication-offset-checkpoint"
    book.update(T0, 3)
    book.checkpoint()
    written = file.stat().st_ino  # each write is a new file renamed over the old one

    assert book.checkpoint() == {T0: 3}
    assert file.stat().st_ino == written  # nothing moved: not written again

    book.update(T0, 4)
    book.checkpoint()
    assert file.stat().st_ino != written
    assert OffsetCheckpoint(file).read() == {T0: 4}

    book.remove(T0)
    book.checkpoint()
    assert OffsetCheckpoint(file).read() == {}
