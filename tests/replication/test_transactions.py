"""Transactions on the replication path, as a transaction coordinator and consumers see it.

A three-broker cluster on the in-memory ZooKeeper, shared by the module (each test on its own
topic, the failover last). Markers are written as the transaction coordinator writes them: a
WriteTxnMarkersRequest to the leader's replica manager (Kafka's handleWriteTxnMarkersRequest:
appended with the coordinator's origin, answered once the ISR has them). Transactional data
comes as a producer sends it: a transactional batch of a producer id and epoch.

- a marker on RF 3 is answered only after both followers fetched past it;
- a partition this broker follows is NOT_LEADER_FOR_PARTITION, one it does not hold
  UNKNOWN_TOPIC_OR_PARTITION, each on its own in one answer;
- the last stable offset (KIP-98): read_committed fetches stop at the first offset of an open
  transaction and read to the HW once its COMMIT marker is replicated; they are told the
  aborted transactions in what they read (read_uncommitted fetches are not); a long-poll
  read_committed fetch waiting at the LSO completes when the marker lands; ListOffsets
  LATEST answers the LSO to read_committed;
- a follower that becomes leader has the same LSO: its producer state came from replication.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import TRANSACTION_STATE_TOPIC
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafkactor.messages.replication import (
    AbortedTransaction,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProduceRequest,
)
from kafkactor.messages.transaction import (
    TxnMarkerEntry,
    TxnPartition,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkactor.storage import Record, build_batch, iter_batches
from kafkactor.testing import Cluster
from tests.replication.support import (
    FAST,
    MIN_ISR_2,
    WAIT_S,
    EventLog,
    batch,
    produce_results,
    purgatory_state,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
EPOCH = 0


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3, config=FAST) as started:
        yield started


@pytest.fixture(scope="module")
def client(cluster: Cluster) -> Iterator[Client]:
    client = Client("txn-test", cluster.directory)
    yield client
    client.close()


# -- what producers, coordinators and consumers send --------------------------------------------


def now_ms() -> int:
    """Records stamped now: the markers are (an old timestamp would roll a segment first)."""
    return int(time.time() * 1000)


def plain(*values: bytes) -> bytes:
    return batch(*values, timestamp_ms=now_ms())


def txn_batch(producer_id: int, *values: bytes, sequence: int = 0) -> bytes:
    """A transactional producer's batch (offsets are the leader's to assign)."""
    return build_batch(
        [Record(None, v, now_ms()) for v in values],
        0,
        producer_id=producer_id,
        producer_epoch=EPOCH,
        base_sequence=sequence,
        is_transactional=True,
    )


def produce(client: Client, cluster: Cluster, topic: str, records: bytes) -> int:
    """acks=all to the leader of `topic`-0; the batch's first offset."""
    leader = cluster.leader(topic, 0)
    response = client.call(
        addresses.replica_manager(leader),
        ProduceRequest(
            acks=-1,
            timeout_ms=5_000,
            partitions=(ProducePartition(topic=topic, partition=0, records=records),),
        ),
        WAIT_S,
    )
    result = produce_results(response)[(topic, 0)]
    assert result.error_code is ErrorCode.NONE, result
    return result.base_offset


def marker(producer_id: int, *parts: tuple[str, int], committed: bool) -> TxnMarkerEntry:
    return TxnMarkerEntry(
        producer_id=producer_id,
        producer_epoch=EPOCH,
        committed=committed,
        coordinator_epoch=3,
        partitions=tuple(TxnPartition(topic=t, partition=p) for t, p in parts),
    )


def write_markers(
    client: Client, broker: int, *entries: TxnMarkerEntry
) -> list[list[tuple[str, int, ErrorCode]]]:
    """The coordinator's WriteTxnMarkers to `broker`: each entry's (topic, partition, error)."""
    response = client.call(
        addresses.replica_manager(broker), WriteTxnMarkersRequest(markers=entries), WAIT_S
    )
    assert isinstance(response, WriteTxnMarkersResponse), response
    assert [m.producer_id for m in response.markers] == [e.producer_id for e in entries]
    return [[(p.topic, p.partition, p.error_code) for p in m.partitions] for m in response.markers]


def end_txn(
    client: Client, cluster: Cluster, topic: str, producer_id: int, *, committed: bool
) -> None:
    leader = cluster.leader(topic, 0)
    outcome = write_markers(client, leader, marker(producer_id, (topic, 0), committed=committed))
    assert outcome == [[(topic, 0, ErrorCode.NONE)]]


def fetch_request(topic: str, offset: int, isolation: int, max_wait_ms: int = 0) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        isolation_level=isolation,
        partitions=(FetchPartition(topic=topic, partition=0, fetch_offset=offset),),
    )


def fetch(
    client: Client, cluster: Cluster, topic: str, offset: int, isolation: int
) -> FetchPartitionData:
    response = client.call(
        addresses.replica_manager(cluster.leader(topic, 0)),
        fetch_request(topic, offset, isolation),
        WAIT_S,
    )
    assert isinstance(response, FetchResponse), response
    (data,) = response.partitions
    assert data.error_code is ErrorCode.NONE, data
    return data


def batch_offsets(records: bytes) -> list[tuple[int, int]]:
    """(first, last) offset of each batch fetched, control batches included."""
    return [(b.base_offset, b.last_offset) for b in iter_batches(records)]


def latest(client: Client, broker: int, topic: str, isolation: int) -> int | None:
    """ListOffsets LATEST on `broker`; None when it answers an error (not leader yet)."""
    response = client.call(
        addresses.replica_manager(broker),
        ListOffsetsRequest(
            isolation_level=isolation,
            partitions=(ListOffsetsPartition(topic=topic, timestamp=LATEST_TIMESTAMP),),
        ),
        WAIT_S,
    )
    assert isinstance(response, ListOffsetsResponse), response
    (result,) = response.partitions
    return result.offset if result.error_code is ErrorCode.NONE else None


def open_transaction(client: Client, cluster: Cluster, topic: str, producer_id: int) -> None:
    """Offsets 0 (plain), 1 (the open transaction's) and 2 (plain, another producer)."""
    cluster.create_topic(topic, partitions=1, replication_factor=3, config=MIN_ISR_2)
    assert produce(client, cluster, topic, plain(b"before")) == 0
    assert produce(client, cluster, topic, txn_batch(producer_id, b"in-txn")) == 1
    assert produce(client, cluster, topic, plain(b"after")) == 2


# -- markers ------------------------------------------------------------------------------------


def test_a_marker_on_rf3_is_answered_only_once_both_followers_have_it(
    cluster: Cluster, client: Client, events: EventLog
) -> None:
    topic = "txn-acks"
    cluster.create_topic(topic, partitions=1, replication_factor=3, config=MIN_ISR_2)
    leader = cluster.leader(topic, 0)
    assert produce(client, cluster, topic, txn_batch(7001, b"a", b"b")) == 0

    outcome = write_markers(client, leader, marker(7001, (topic, 0), committed=True))

    assert outcome == [[(topic, 0, ErrorCode.NONE)]]
    (appended,) = events.named("partition.marker_appended", topic=topic)
    assert appended["producer_id"] == 7001
    assert appended["committed"] is True
    assert appended["offset"] == 2
    assert appended["coordinator_epoch"] == 3
    schema = json.loads((files("kafkactor") / "events.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(schema).validate(appended)
    # When the answer is in, both followers have fetched past the marker, and so has the HW
    described = cluster.describe_partition(topic, 0)
    followers = dict(described.follower_log_end_offsets)
    assert len(followers) == 2
    assert all(leo >= 3 for leo in followers.values()), followers
    assert described.high_watermark >= 3
    # ... and had before it was sent: the leader's HW passed the marker before the answer came
    trace_id = events.trace_of(client.address, "WriteTxnMarkersRequest")
    answered = events.receipt_index(client.address, trace_id, "WriteTxnMarkersResponse")
    advanced = events.index_of(
        lambda e: (
            e["event"] == "partition.hw_advance"
            and e["topic"] == topic
            and e["high_watermark"] >= 3
        )
    )
    assert 0 <= advanced < answered, (advanced, answered)


def test_a_partition_not_led_here_is_not_leader_and_an_unknown_one_unknown(
    cluster: Cluster, client: Client
) -> None:
    topic = "txn-not-leader"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    leader = cluster.leader(topic, 0)
    follower = next(b for b in cluster.replicas(topic, 0) if b != leader)
    assert produce(client, cluster, topic, txn_batch(7002, b"x")) == 0

    on_follower = write_markers(client, follower, marker(7002, (topic, 0), committed=True))
    on_leader = write_markers(
        client,
        leader,
        marker(7002, (topic, 0), ("no-such-topic", 0), committed=True),
    )

    assert on_follower == [[(topic, 0, ErrorCode.NOT_LEADER_FOR_PARTITION)]]
    assert int(ErrorCode.NOT_LEADER_FOR_PARTITION) == 6
    assert on_leader == [
        [(topic, 0, ErrorCode.NONE), ("no-such-topic", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    ]
    # the follower wrote nothing: only the leader's marker is in the log
    assert batch_offsets(fetch(client, cluster, topic, 0, READ_UNCOMMITTED).records) == [
        (0, 0),
        (1, 1),
    ]


def test_a_coordinators_append_skips_the_sequence_checks_a_clients_gets(
    cluster: Cluster, client: Client
) -> None:
    topic = "txn-origin"
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    leader = cluster.leader(topic, 0)

    def produce_at(sequence: int, *, from_coordinator: bool) -> ErrorCode:
        records = txn_batch(7010, b"v", sequence=sequence)
        response = client.call(
            addresses.replica_manager(leader),
            ProduceRequest(
                acks=-1,
                timeout_ms=5_000,
                from_coordinator=from_coordinator,
                partitions=(ProducePartition(topic=topic, partition=0, records=records),),
            ),
            WAIT_S,
        )
        return produce_results(response)[(topic, 0)].error_code

    assert produce_at(0, from_coordinator=False) is ErrorCode.NONE
    # the producer's next batch must carry sequence 1 (Kafka's checkSequence) ...
    assert produce_at(5, from_coordinator=False) is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # ... unless a coordinator of the broker appends it (AppendOrigin.Coordinator)
    assert produce_at(5, from_coordinator=True) is ErrorCode.NONE


# -- the last stable offset -----------------------------------------------------------------------


def test_read_committed_stops_at_the_lso_until_the_commit_marker_is_replicated(
    cluster: Cluster, client: Client
) -> None:
    topic = "txn-lso"
    open_transaction(client, cluster, topic, 7003)

    uncommitted = fetch(client, cluster, topic, 0, READ_UNCOMMITTED)
    committed = fetch(client, cluster, topic, 0, READ_COMMITTED)
    at_lso = fetch(client, cluster, topic, 1, READ_COMMITTED)

    assert batch_offsets(uncommitted.records) == [(0, 0), (1, 1), (2, 2)]
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (3, 1)
    assert batch_offsets(committed.records) == [(0, 0)]  # below the open transaction only
    assert (committed.high_watermark, committed.last_stable_offset) == (3, 1)
    assert at_lso.records == b""

    end_txn(client, cluster, topic, 7003, committed=True)

    after = fetch(client, cluster, topic, 0, READ_COMMITTED)
    assert batch_offsets(after.records) == [(0, 0), (1, 1), (2, 2), (3, 3)]  # the marker at 3
    assert (after.high_watermark, after.last_stable_offset) == (4, 4)
    assert after.aborted_transactions == ()


def test_aborted_transactions_are_listed_to_read_committed_fetches_only(
    cluster: Cluster, client: Client
) -> None:
    topic = "txn-aborted"
    open_transaction(client, cluster, topic, 7004)
    end_txn(client, cluster, topic, 7004, committed=False)

    committed = fetch(client, cluster, topic, 0, READ_COMMITTED)
    uncommitted = fetch(client, cluster, topic, 0, READ_UNCOMMITTED)
    at_its_marker = fetch(client, cluster, topic, 3, READ_COMMITTED)

    assert committed.aborted_transactions == (AbortedTransaction(producer_id=7004, first_offset=1),)
    assert batch_offsets(committed.records) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert committed.last_stable_offset == 4
    assert uncommitted.aborted_transactions == ()
    # a range that holds only its ABORT marker still overlaps it (Kafka's collectAbortedTxns:
    # the transaction ends at its marker)
    assert at_its_marker.aborted_transactions == committed.aborted_transactions


def test_a_read_committed_long_poll_waiting_at_the_lso_completes_when_the_marker_lands(
    cluster: Cluster, client: Client
) -> None:
    topic = "txn-long-poll"
    open_transaction(client, cluster, topic, 7005)
    leader = cluster.leader(topic, 0)
    purgatory = addresses.fetch_purgatory(leader)
    waiting_before = purgatory_state(cluster, leader, "fetch")["delayed"]

    started = time.monotonic()
    future = client.request(
        addresses.replica_manager(leader), fetch_request(topic, 1, READ_COMMITTED, 20_000)
    )
    wait_until(
        lambda: purgatory_state(cluster, leader, "fetch")["delayed"] > waiting_before,
        message=f"the read_committed fetch waiting in {purgatory}",
    )
    assert not future.done()

    end_txn(client, cluster, topic, 7005, committed=True)

    response = future.result(WAIT_S)
    assert time.monotonic() - started < 20.0 - 5.0  # the marker completed it, not its max wait
    assert isinstance(response, FetchResponse)
    (data,) = response.partitions
    assert batch_offsets(data.records) == [(1, 1), (2, 2), (3, 3)]
    assert data.last_stable_offset == 4


def test_list_offsets_latest_is_the_lso_for_read_committed(
    cluster: Cluster, client: Client
) -> None:
    topic = "txn-list-offsets"
    open_transaction(client, cluster, topic, 7006)
    leader = cluster.leader(topic, 0)

    assert latest(client, leader, topic, READ_COMMITTED) == 1
    assert latest(client, leader, topic, READ_UNCOMMITTED) == 3

    end_txn(client, cluster, topic, 7006, committed=True)

    assert latest(client, leader, topic, READ_COMMITTED) == 4
    assert latest(client, leader, topic, READ_UNCOMMITTED) == 4


# -- the transaction coordinator's partitions ------------------------------------------------------


def test_the_transaction_coordinator_loads_what_its_broker_leads_and_unloads_what_it_follows(
    cluster: Cluster, events: EventLog
) -> None:
    cluster.create_topic(TRANSACTION_STATE_TOPIC, partitions=1, replication_factor=2)
    first, second = cluster.replicas(TRANSACTION_STATE_TOPIC, 0)
    assert cluster.leader(TRANSACTION_STATE_TOPIC, 0) == first

    def loaded(broker: int) -> list[dict[str, Any]]:
        return events.named(
            "txn.load", actor=addresses.transaction_coordinator(broker), partition=0
        )

    wait_until(lambda: loaded(first), message=f"broker {first} loading partition 0")
    assert loaded(first)[0]["leader_epoch"] == 0
    assert not loaded(second)  # a follower is not told it leads

    # the preferred replica changes and is elected: the leadership moves to `second`
    moved = {(TRANSACTION_STATE_TOPIC, 0): [second, first]}
    assert cluster.reassign_partitions(moved)[(TRANSACTION_STATE_TOPIC, 0)][0] is ErrorCode.NONE
    cluster.wait_for_reassignments([(TRANSACTION_STATE_TOPIC, 0)])
    election = cluster.elect_leaders([(TRANSACTION_STATE_TOPIC, 0)])
    assert election[(TRANSACTION_STATE_TOPIC, 0)].leader == second

    wait_until(lambda: loaded(second), message=f"broker {second} loading partition 0")
    assert loaded(second)[0]["leader_epoch"] > 0
    unloaded = wait_until(
        lambda: events.named(
            "txn.unload", actor=addresses.transaction_coordinator(first), partition=0
        ),
        message=f"broker {first} unloading partition 0",
    )
    assert unloaded


# -- failover (last: it stops a broker) -----------------------------------------------------------


def test_a_follower_that_becomes_leader_has_the_same_lso(cluster: Cluster, client: Client) -> None:
    topic = "txn-failover"
    cluster.create_topic(topic, partitions=1, replication_factor=3, config=MIN_ISR_2)
    assert produce(client, cluster, topic, plain(b"before")) == 0
    assert produce(client, cluster, topic, txn_batch(7008, b"committed")) == 1
    end_txn(client, cluster, topic, 7008, committed=True)  # its marker at 2
    assert produce(client, cluster, topic, txn_batch(7007, b"open")) == 3
    assert produce(client, cluster, topic, plain(b"after")) == 4
    old_leader = cluster.leader(topic, 0)
    # every follower's producer state came from replication, and its HW passed 7008's marker:
    # its LSO is the open transaction's first offset
    wait_until(
        lambda: all(
            (d.high_watermark, d.last_stable_offset) == (5, 3)
            for d in (cluster.describe_partition(topic, 0, broker=b) for b in (1, 2, 3))
        ),
        message="every replica at HW 5 and LSO 3",
    )

    cluster.stop_broker(old_leader)  # its session closes: the controller elects at once
    new_leader = cluster.wait_for_leader(topic, 0, not_broker=old_leader)

    wait_until(
        lambda: latest(client, new_leader, topic, READ_UNCOMMITTED) == 5,
        message="the new leader answers its HW",
    )
    assert latest(client, new_leader, topic, READ_COMMITTED) == 3  # 7007's still open
    assert cluster.describe_partition(topic, 0).last_stable_offset == 3
    data = fetch(client, cluster, topic, 0, READ_COMMITTED)
    assert (data.high_watermark, data.last_stable_offset) == (5, 3)
    assert batch_offsets(data.records) == [(0, 0), (1, 1), (2, 2)]

    end_txn(client, cluster, topic, 7007, committed=True)

    assert latest(client, new_leader, topic, READ_COMMITTED) == 6
