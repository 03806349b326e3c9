"""Transactional offset commits at the group coordinator actor, in a one-broker in-process
cluster: TxnOffsetCommit appends one transactional batch of the producer to the group's
`__consumer_offsets` partition, the offsets stay pending (OffsetFetch require_stable answers
UNSTABLE_OFFSET_COMMIT) until the transaction's marker, written by the replica manager's
WriteTxnMarkers, makes them committed or drops them; a restart reloads the partition's log
with its committed, aborted and still-open transactions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from kafkactor.actors.coordinator.offsets_topic import (
    OffsetKey,
    OffsetValue,
    decode_record,
    partition_for,
)
from kafkactor.actors.runtime import addresses
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.messages import ErrorCode
from kafkactor.messages.transaction import (
    TxnMarkerEntry,
    TxnOffsetCommitPartition,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnPartition,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkactor.storage import iter_batches
from kafkactor.testing import Cluster
from kafkactor.timer import ManualClock
from tests.actors.coordinator.test_coordinator_actor import (
    PARTITIONS,
    TOPIC,
    Groups,
    answer,
    broker_config,
    commit_errors,
    coordinator_view,
    start,
)
from tests.replication.support import settle_actor, wait_until

pytestmark = pytest.mark.timeout(60)

NONE = ErrorCode.NONE
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT
EPOCH = 2


@pytest.fixture(scope="module")
def groups() -> Iterator[Groups]:
    with ExitStack() as stack:
        cluster = Cluster(1, clock=ManualClock(1_000_000), config=broker_config(), zookeeper=None)
        yield start(stack, cluster, replication_factor=1)


def new_group(n: int) -> str:
    """A fresh group of __consumer_offsets partition 1 for each test."""
    names = (f"txn-group-{n}-{i}" for i in range(1000))
    return next(g for g in names if partition_for(g, PARTITIONS) == 1)


def txn_commit(
    groups: Groups,
    group: str,
    offsets: dict[int, int],
    producer_id: int,
    *,
    epoch: int = EPOCH,
    member_id: str = "",
    generation: int = -1,
) -> dict[int, ErrorCode]:
    request = TxnOffsetCommitRequest(
        transactional_id=f"txn-{producer_id}",
        group_id=group,
        producer_id=producer_id,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member_id,
        partitions=tuple(
            TxnOffsetCommitPartition(topic=TOPIC, partition=p, offset=o, metadata=f"txn {o}")
            for p, o in offsets.items()
        ),
    )
    response = answer(groups.send(group, request), TxnOffsetCommitResponse)
    return {p.partition: p.error_code for p in response.partitions}


def marker(groups: Groups, group: str, producer_id: int, *, committed: bool) -> None:
    """The transaction coordinator's WriteTxnMarkers for the group's partition, to the
    replica manager that leads it; the group coordinator hears of it (TxnOffsetsCompleted)."""
    partition = partition_for(group, PARTITIONS)
    entry = TxnMarkerEntry(
        producer_id=producer_id,
        producer_epoch=EPOCH,
        committed=committed,
        coordinator_epoch=0,
        partitions=(TxnPartition(topic=OFFSETS_TOPIC, partition=partition),),
    )
    request = WriteTxnMarkersRequest(markers=(entry,))
    response = answer(
        groups.client.request(addresses.replica_manager(1), request), WriteTxnMarkersResponse
    )
    errors = {p.error_code for m in response.markers for p in m.partitions}
    assert errors == {NONE}, response
    settle_actor(groups.cluster, addresses.group_coordinator(1))


def stable(groups: Groups, group: str, *partitions: int) -> dict[int, tuple[ErrorCode, int]]:
    response = groups.fetch(partitions, group, require_stable=True)
    assert response.error_code is NONE, response
    return {p.partition: (p.error_code, p.offset) for p in response.partitions}


def test_a_transactions_offsets_are_appended_as_its_batch_and_visible_after_the_commit(
    groups: Groups,
) -> None:
    group = new_group(1)
    assert txn_commit(groups, group, {0: 42, 1: 7}, producer_id=5001) == {0: NONE, 1: NONE}

    log = groups.cluster.brokers[1].logs[f"{OFFSETS_TOPIC}-1"]
    batches = [b for b in iter_batches(log.read(0, 1 << 20).records) if b.is_transactional]
    (batch,) = [b for b in batches if b.producer_id == 5001]
    assert (batch.producer_epoch, batch.is_control_batch) == (EPOCH, False)
    decoded = [decode_record(r.key or b"", r.value) for r in batch.records()]
    written = {
        (k.group, k.partition, v.offset)
        for k, v in decoded
        if isinstance(k, OffsetKey) and isinstance(v, OffsetValue)
    }
    assert written == {(group, 0, 42), (group, 1, 7)}

    assert groups.committed(group) == {}  # pending: not committed yet
    assert stable(groups, group, 0, 1) == {0: (UNSTABLE, -1), 1: (UNSTABLE, -1)}
    assert groups.describe(group).state == "Empty"  # created by the commit
    assert coordinator_view(groups.cluster, 1)["txn_pending_groups"] >= 1

    marker(groups, group, 5001, committed=True)

    assert groups.committed(group) == {0: 42, 1: 7}
    assert stable(groups, group, 0, 1) == {0: (NONE, 42), 1: (NONE, 7)}


def test_an_abort_marker_drops_the_offsets_and_a_later_plain_commit_wins(groups: Groups) -> None:
    group = new_group(2)
    assert commit_errors(groups.commit({0: 3}, group=group)) == {NONE}
    assert txn_commit(groups, group, {0: 10}, producer_id=5002) == {0: NONE}
    marker(groups, group, 5002, committed=False)
    assert groups.committed(group) == {0: 3}
    assert stable(groups, group, 0) == {0: (NONE, 3)}

    # a transaction's record, then a plain commit of the same partition, then the commit marker
    assert txn_commit(groups, group, {0: 20}, producer_id=5003) == {0: NONE}
    assert commit_errors(groups.commit({0: 25}, group=group)) == {NONE}
    marker(groups, group, 5003, committed=True)
    assert groups.committed(group) == {0: 25}


def test_kip_447_generation_and_member_are_checked(groups: Groups) -> None:
    group = new_group(3)
    (member,), generation = groups.stable_group(1, group)
    ok = txn_commit(groups, group, {0: 1}, 5004, member_id=member, generation=generation)
    assert ok == {0: NONE}
    stale = txn_commit(groups, group, {0: 1}, 5004, member_id=member, generation=generation - 1)
    assert stale == {0: ErrorCode.ILLEGAL_GENERATION}
    unknown = txn_commit(groups, group, {0: 1}, 5004, member_id="gone", generation=generation)
    assert unknown == {0: ErrorCode.UNKNOWN_MEMBER_ID}
    marker(groups, group, 5004, committed=True)
    assert groups.committed(group) == {0: 1}


def test_a_zombie_producers_older_epoch_is_refused_by_the_log(groups: Groups) -> None:
    group = new_group(4)
    assert txn_commit(groups, group, {0: 1}, producer_id=5005, epoch=EPOCH) == {0: NONE}
    marker(groups, group, 5005, committed=True)
    errors = txn_commit(groups, group, {0: 99}, producer_id=5005, epoch=EPOCH - 1)
    assert errors[0] in {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED}
    assert stable(groups, group, 0) == {0: (NONE, 1)}  # nothing left pending


def test_a_reload_replays_committed_aborted_and_open_transactions(groups: Groups) -> None:
    """Runs last in this module: it restarts the broker."""
    group = new_group(5)
    assert commit_errors(groups.commit({0: 1, 1: 1, 2: 1}, group=group)) == {NONE}
    assert txn_commit(groups, group, {0: 10}, producer_id=6001) == {0: NONE}  # to commit
    assert txn_commit(groups, group, {1: 20}, producer_id=6002) == {1: NONE}  # to abort
    assert txn_commit(groups, group, {2: 30}, producer_id=6003) == {2: NONE}  # left open
    marker(groups, group, 6001, committed=True)
    marker(groups, group, 6002, committed=False)
    before = groups.committed(group)
    assert before == {0: 10, 1: 1, 2: 1}

    cluster = groups.cluster
    cluster.stop_broker(1)
    cluster.restart_broker(1)
    groups.wait_loaded(group)

    assert groups.committed(group) == before
    assert stable(groups, group, 0, 1, 2) == {0: (NONE, 10), 1: (NONE, 1), 2: (UNSTABLE, -1)}

    def marked() -> bool:  # the restarted replica manager leads the partition again
        try:
            marker(groups, group, 6003, committed=True)
        except AssertionError:
            return False
        return True

    wait_until(marked, message="the commit marker of the open transaction to be written")
    assert groups.committed(group) == {0: 10, 1: 1, 2: 30}
    assert coordinator_view(cluster, 1)["txn_pending_groups"] == 0
