"""The transaction coordinator's actor (`TransactionCoordinatorActor`) in in-process clusters.

Requests go from a `Client` to `broker/<id>/transaction-coordinator` of the broker that leads
the transactional id's `__transaction_state` partition, as a producer's would once
FindCoordinator named it. What is checked is what a producer and a read_committed consumer
would notice: answers, epochs, fencing, the markers each partition leader wrote, the state a
DescribeTransactions shows, timeouts and expiration through the broker's scheduler, a
coordinator's failover to the partition's next leader, and the event log.

Clusters: three brokers on the embedded ZooKeeper (`zk_trio`, RF 3 `__transaction_state` of 3
partitions), and one broker on a ManualClock (`single`) where time moves only when a test
moves it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import ExitStack
from importlib.resources import files
from typing import Any

import jsonschema
import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import Client, addresses
from kafkactor.actors.transaction import TransactionConfig, partition_for_transactional_id
from kafkactor.common import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import ProduceRequest
from kafkactor.messages.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    TransactionDescription,
    TxnPartition,
)
from kafkactor.storage import iter_batches
from kafkactor.testing import Cluster
from kafkactor.timer import ManualClock
from tests.replication.support import FAST, WAIT_S, captured_events, settle_actor, wait_until

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3  # of __transaction_state and __consumer_offsets
TIMEOUT_MS = 60_000
E = ErrorCode


def broker_config(base: BrokerConfig = FAST, **txn: int) -> BrokerConfig:
    return dataclasses.replace(
        base,
        transaction=TransactionConfig(state_log_num_partitions=PARTITIONS, **txn),
        group=GroupConfig(offsets_topic_partitions=PARTITIONS, initial_rebalance_delay_ms=0),
    )


class Txns:
    """A test's client of the transaction coordinators of one cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.client = Client("txn-test", cluster.directory, cluster.clock)

    def coordinator(self, tid: str) -> int:
        partition = partition_for_transactional_id(tid, PARTITIONS)
        return self.cluster.leader(TRANSACTION_STATE_TOPIC, partition)

    def ask(self, tid: str, request: Any, broker: int | None = None) -> Any:
        target = self.coordinator(tid) if broker is None else broker
        future: Future[Any] = self.client.request(
            addresses.transaction_coordinator(target), request
        )
        return future.result(WAIT_S)

    def init(self, tid: str, **fields: Any) -> InitProducerIdResponse:
        """InitProducerId as a producer sends it: asked again while the answer is retriable."""
        request = InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=TIMEOUT_MS, **fields
        )

        def answered() -> InitProducerIdResponse | None:
            response: InitProducerIdResponse = self.ask(tid, request)
            return None if response.error_code.retriable else response

        response = wait_until(answered, message=f"InitProducerId of {tid}")
        assert response is not None
        return response

    def add(self, tid: str, ids: InitProducerIdResponse, *tps: TopicPartition) -> ErrorCode:
        request = AddPartitionsToTxnRequest(
            transactional_id=tid,
            producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch,
            partitions=tuple(TxnPartition(topic=t.topic, partition=t.partition) for t in tps),
        )
        response = self.ask(tid, request)
        assert isinstance(response, AddPartitionsToTxnResponse)
        errors = {p.error_code for p in response.partitions}
        assert len(errors) == 1
        return errors.pop()

    def end(self, tid: str, ids: InitProducerIdResponse, *, committed: bool) -> ErrorCode:
        request = EndTxnRequest(
            transactional_id=tid,
            producer_id=ids.producer_id,
            producer_epoch=ids.producer_epoch,
            committed=committed,
        )
        response = self.ask(tid, request)
        assert isinstance(response, EndTxnResponse)
        return response.error_code

    def describe(self, tid: str, broker: int | None = None) -> TransactionDescription:
        response = self.ask(tid, DescribeTransactionsRequest(transactional_ids=(tid,)), broker)
        assert isinstance(response, DescribeTransactionsResponse)
        (description,) = response.transactions
        return description

    def wait_state(self, tid: str, state: str) -> TransactionDescription:
        def reached() -> TransactionDescription | None:
            described = self.describe(tid)
            return described if described.state == state else None

        found = wait_until(reached, message=f"{tid} in {state}")
        assert found is not None
        return found

    def markers(self, tp: TopicPartition) -> list[tuple[int, bool]]:
        """(producer id, committed) of each control batch in the leader's log of `tp`."""
        log = self.cluster.brokers[self.cluster.leader(tp.topic, tp.partition)].logs[str(tp)]
        found = []
        for batch in iter_batches(log.read(log.log_start_offset, 1 << 20).records):
            if batch.is_control_batch:
                (record,) = list(batch.records())
                assert record.key is not None
                found.append((batch.producer_id, record.key[2:4] == b"\x00\x01"))
        return found


def start(stack: ExitStack, cluster: Cluster) -> Txns:
    stack.enter_context(cluster)
    cluster.create_transaction_state_topic()
    cluster.ensure_offsets_topic()
    txns = Txns(cluster)
    stack.callback(txns.client.close)
    return txns


@pytest.fixture(scope="module")
def zk_trio() -> Iterator[Txns]:
    with ExitStack() as stack:
        cluster = Cluster(3, config=broker_config(), zookeeper="embedded", session_timeout_ms=600)
        yield start(stack, cluster)


@pytest.fixture(scope="module")
def single() -> Iterator[tuple[Txns, ManualClock]]:
    clock = ManualClock(1_700_000_000_000)
    config = broker_config(
        BrokerConfig(),
        max_timeout_ms=120_000,
        transactional_id_expiration_ms=3_600_000,
        abort_timed_out_transactions_interval_ms=1_000,
        remove_expired_transactional_ids_interval_ms=60_000,
    )
    with ExitStack() as stack:
        yield start(stack, Cluster(1, clock=clock, config=config, zookeeper=None)), clock


@pytest.fixture(scope="module")
def validate() -> Any:
    schema = json.loads(files("kafkactor").joinpath("events.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema).validate


def _topic(cluster: Cluster, name: str, partitions: int = 2) -> list[TopicPartition]:
    cluster.create_topic(name, partitions, min(3, len(cluster.live_brokers())))
    return [TopicPartition(topic=name, partition=p) for p in range(partitions)]


# -- commit and abort ---------------------------------------------------------------------------


def test_commit_writes_a_commit_marker_on_every_partition(zk_trio: Txns, validate: Any) -> None:
    tps = _topic(zk_trio.cluster, "commit-orders")
    with captured_events() as events:
        ids = zk_trio.init("commit-1")
        assert (ids.error_code, ids.producer_epoch) == (E.NONE, 0)
        assert zk_trio.add("commit-1", ids, *tps) is E.NONE
        assert zk_trio.end("commit-1", ids, committed=True) is E.NONE
        zk_trio.wait_state("commit-1", "CompleteCommit")
    for tp in tps:
        assert zk_trio.markers(tp) == [(ids.producer_id, True)]
    states = [
        (e["from_state"], e["to_state"])
        for e in events.named("txn.transition", transactional_id="commit-1")
    ]
    assert states == [
        ("Empty", "Empty"),
        ("Empty", "Ongoing"),
        ("Ongoing", "PrepareCommit"),
        ("PrepareCommit", "CompleteCommit"),
    ]
    (completed,) = events.named("txn.completed", transactional_id="commit-1")
    assert completed["committed"] and completed["cause"] == "client"
    assert completed["partitions"] == 2
    written = events.named("txn.marker.written", transactional_id="commit-1")
    assert sum(e["partitions"] for e in written) == 2
    assert {e["leader"] for e in written} == {
        zk_trio.cluster.leader(t.topic, t.partition) for t in tps
    }
    for event in events.all():
        if event["event"].startswith("txn."):
            validate(event)


def test_abort_writes_abort_markers_and_a_retry_of_it_is_answered_none(zk_trio: Txns) -> None:
    tps = _topic(zk_trio.cluster, "abort-orders")
    ids = zk_trio.init("abort-1")
    assert zk_trio.add("abort-1", ids, *tps) is E.NONE
    assert zk_trio.end("abort-1", ids, committed=False) is E.NONE
    zk_trio.wait_state("abort-1", "CompleteAbort")
    assert [zk_trio.markers(tp) for tp in tps] == [[(ids.producer_id, False)]] * 2
    assert zk_trio.end("abort-1", ids, committed=False) is E.NONE  # a retried EndTxn
    assert zk_trio.end("abort-1", ids, committed=True) is E.INVALID_TXN_STATE


def test_offsets_partition_joins_the_transaction_and_gets_the_marker(zk_trio: Txns) -> None:
    ids = zk_trio.init("offsets-1")
    request = AddOffsetsToTxnRequest(
        transactional_id="offsets-1",
        producer_id=ids.producer_id,
        producer_epoch=ids.producer_epoch,
        group_id="eos-group",
    )
    assert zk_trio.ask("offsets-1", request).error_code is E.NONE
    offsets = TopicPartition(topic=OFFSETS_TOPIC, partition=partition_for("eos-group", PARTITIONS))
    description = zk_trio.describe("offsets-1")
    assert description.partitions == (
        TxnPartition(topic=OFFSETS_TOPIC, partition=offsets.partition),
    )
    assert zk_trio.end("offsets-1", ids, committed=True) is E.NONE
    zk_trio.wait_state("offsets-1", "CompleteCommit")
    assert (ids.producer_id, True) in zk_trio.markers(offsets)


def test_a_deleted_partition_does_not_hold_the_commit(zk_trio: Txns) -> None:
    kept = _topic(zk_trio.cluster, "kept-orders", 1)
    doomed = _topic(zk_trio.cluster, "doomed-orders", 1)
    ids = zk_trio.init("deleted-1")
    assert zk_trio.add("deleted-1", ids, *kept, *doomed) is E.NONE
    zk_trio.cluster.delete_topic("doomed-orders")
    assert zk_trio.end("deleted-1", ids, committed=True) is E.NONE
    zk_trio.wait_state("deleted-1", "CompleteCommit")
    assert zk_trio.markers(kept[0]) == [(ids.producer_id, True)]


# -- fencing --------------------------------------------------------------------------------------


def test_a_second_producer_fences_the_first_and_aborts_its_transaction(zk_trio: Txns) -> None:
    tps = _topic(zk_trio.cluster, "zombie-orders")
    zombie = zk_trio.init("zombie-1")
    assert zk_trio.add("zombie-1", zombie, *tps) is E.NONE
    # the new instance hears CONCURRENT_TRANSACTIONS until the zombie's transaction is aborted
    fresh = zk_trio.init("zombie-1")
    assert fresh.error_code is E.NONE
    assert (fresh.producer_id, fresh.producer_epoch) == (zombie.producer_id, 2)
    assert [zk_trio.markers(tp) for tp in tps] == [[(zombie.producer_id, False)]] * 2
    assert zk_trio.end("zombie-1", zombie, committed=True) is E.PRODUCER_FENCED
    assert zk_trio.add("zombie-1", zombie, tps[0]) is E.PRODUCER_FENCED
    assert zk_trio.describe("zombie-1").state == "Empty"  # the new instance's


def test_kip360_a_producer_recovers_its_epoch(zk_trio: Txns) -> None:
    ids = zk_trio.init("recover-1")
    again = zk_trio.init("recover-1", producer_id=ids.producer_id, producer_epoch=0)
    assert (again.error_code, again.producer_epoch) == (E.NONE, 1)
    stale = zk_trio.init("recover-1", producer_id=ids.producer_id + 1, producer_epoch=1)
    assert stale.error_code is E.PRODUCER_FENCED
    half = zk_trio.init("recover-1", producer_id=ids.producer_id, producer_epoch=-1)
    assert half.error_code is E.INVALID_REQUEST


def test_bad_requests_get_kafkas_errors(zk_trio: Txns) -> None:
    long = InitProducerIdRequest(transactional_id="bad-1", transaction_timeout_ms=900_001)
    assert zk_trio.ask("bad-1", long).error_code is E.INVALID_TRANSACTION_TIMEOUT
    unknown = InitProducerIdResponse(producer_id=424242, producer_epoch=0)
    assert zk_trio.end("bad-1", unknown, committed=True) is E.INVALID_PRODUCER_ID_MAPPING
    ids = zk_trio.init("bad-1")
    assert zk_trio.end("bad-1", ids, committed=True) is E.INVALID_TXN_STATE
    others = [b for b in zk_trio.cluster.live_brokers() if b != zk_trio.coordinator("bad-1")]
    request = InitProducerIdRequest(transactional_id="bad-1", transaction_timeout_ms=TIMEOUT_MS)
    assert zk_trio.ask("bad-1", request, broker=others[0]).error_code is E.NOT_COORDINATOR
    described = zk_trio.describe("never-seen")
    assert described.error_code is E.TRANSACTIONAL_ID_NOT_FOUND
    listed = zk_trio.ask("bad-1", ListTransactionsRequest(state_filters=("Empty",)))
    assert "bad-1" in {t.transactional_id for t in listed.transactions}


# -- failover -------------------------------------------------------------------------------------


def test_a_new_coordinator_completes_a_prepared_commit(zk_trio: Txns) -> None:
    """The commit is written (PrepareCommit) while its partition has no leader; the
    coordinator then moves (controlled shutdown); the new one loads PrepareCommit and writes
    the markers once the partition is back."""
    cluster = zk_trio.cluster
    tid = "failover-1"
    coordinator = zk_trio.coordinator(tid)
    holder = next(b for b in cluster.live_brokers() if b != coordinator)
    cluster.create_topic("failover-orders", assignments={0: (holder,)})
    tp = TopicPartition(topic="failover-orders", partition=0)
    ids = zk_trio.init(tid)
    assert zk_trio.add(tid, ids, tp) is E.NONE
    with captured_events() as events:
        cluster.stop_broker(holder)  # the partition goes offline: its marker cannot be written
        wait_until(lambda: cluster.leader(tp.topic, 0) == -1, message="offline partition")
        assert zk_trio.end(tid, ids, committed=True) is E.NONE
        assert zk_trio.describe(tid).state == "PrepareCommit"
        cluster.stop_broker(coordinator, controlled=True)
        # ZooKeeper names the new leader before its LeaderAndIsr reaches it: until then that
        # broker answers NOT_COORDINATOR, which a producer retries
        successor = wait_until(
            lambda: (
                (b := zk_trio.coordinator(tid)) not in (-1, coordinator)
                and zk_trio.describe(tid, b).error_code is E.NONE
                and b
            ),
            message="a new coordinator serving the transactional id",
        )
        assert zk_trio.describe(tid, successor).state == "PrepareCommit"
        cluster.restart_broker(holder)
        zk_trio.wait_state(tid, "CompleteCommit")
        (completed,) = events.named("txn.completed", transactional_id=tid)
        assert completed["cause"] == "init" and completed["broker"] == successor
        assert events.named("txn.load", broker=successor)
    assert zk_trio.markers(tp) == [(ids.producer_id, True)]
    cluster.restart_broker(coordinator)
    wait_until(lambda: set(cluster.live_brokers()) == {1, 2, 3}, message="all brokers back")
    # the preferred replica leads again: the successor unloads, the first coordinator loads
    # the completed transaction back from the log
    partition = partition_for_transactional_id(tid, PARTITIONS)
    with captured_events() as events:
        assert cluster.replicas(TRANSACTION_STATE_TOPIC, partition)[0] == coordinator

        def preferred_leads() -> bool:
            if zk_trio.coordinator(tid) == coordinator:
                return True
            if coordinator in cluster.isr(TRANSACTION_STATE_TOPIC, partition):
                cluster.elect_leaders([(TRANSACTION_STATE_TOPIC, partition)])
            return False

        wait_until(preferred_leads, timeout_s=3 * WAIT_S, message="the first coordinator leads")
        wait_until(
            lambda: zk_trio.describe(tid, coordinator).error_code is E.NONE,
            message="the id loaded back",
        )
        assert zk_trio.describe(tid, coordinator).state == "CompleteCommit"
        wait_until(
            lambda: events.named("txn.unload", broker=successor, partition=partition),
            message="txn.unload",
        )
        (unload,) = events.named("txn.unload", broker=successor, partition=partition)
        assert unload["transactional_ids"] >= 1
    request = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=TIMEOUT_MS)
    assert zk_trio.ask(tid, request, broker=successor).error_code is E.NOT_COORDINATOR


def test_a_loaded_prepare_is_acknowledged_again_before_its_markers_go(zk_trio: Txns) -> None:
    """What a new coordinator loads may lie above its high watermark, where the next leader
    can still truncate it: markers sent for a PrepareCommit that is then lost commit part of
    a transaction the next coordinator aborts (nemesis --transactions seeds 53 and 70: a
    group's offsets committed with their output aborted). The successor writes the loaded
    PrepareCommit again and sends markers only once that write is acknowledged."""
    cluster = zk_trio.cluster
    tid = "failover-confirm"
    coordinator = zk_trio.coordinator(tid)
    partition = partition_for_transactional_id(tid, PARTITIONS)
    holder = next(b for b in cluster.live_brokers() if b != coordinator)
    cluster.create_topic("confirm-orders", assignments={0: (holder,)})
    tp = TopicPartition(topic="confirm-orders", partition=0)
    ids = zk_trio.init(tid)
    assert zk_trio.add(tid, ids, tp) is E.NONE
    refused: list[str] = []

    def refuse_state_writes(address: str, message: Any) -> bool:
        payload = getattr(message, "payload", message)
        if isinstance(payload, ProduceRequest) and any(
            p.topic == TRANSACTION_STATE_TOPIC and p.partition == partition
            for p in payload.partitions
        ):
            refused.append(address)
            return True
        return False

    with captured_events() as events:
        cluster.stop_broker(holder)  # the marker cannot be written: PrepareCommit stays
        wait_until(lambda: cluster.leader(tp.topic, 0) == -1, message="offline partition")
        assert zk_trio.end(tid, ids, committed=True) is E.NONE
        cluster.directory.drop = refuse_state_writes
        try:
            cluster.stop_broker(coordinator, controlled=True)
            successor = wait_until(
                lambda: (b := zk_trio.coordinator(tid)) not in (-1, coordinator) and b,
                message="a new coordinator",
            )
            cluster.restart_broker(holder)
            wait_until(lambda: cluster.leader(tp.topic, 0) == holder, message="holder leads")
            seen = len(refused)
            wait_until(lambda: len(refused) >= seen + 3, message="the confirmation retried")
            assert not events.named("txn.marker.sent", transactional_id=tid, broker=successor)
            assert zk_trio.markers(tp) == []
        finally:
            cluster.directory.drop = None
        zk_trio.wait_state(tid, "CompleteCommit")
        assert events.named("txn.marker.sent", transactional_id=tid, broker=successor)
    assert zk_trio.markers(tp) == [(ids.producer_id, True)]
    cluster.restart_broker(coordinator)
    wait_until(lambda: set(cluster.live_brokers()) == {1, 2, 3}, message="all brokers back")


# -- time -----------------------------------------------------------------------------------------


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(
    single: tuple[Txns, ManualClock],
) -> None:
    txns, clock = single
    tps = _topic(txns.cluster, "timeout-orders")
    ids = txns.init("timeout-1")
    assert txns.add("timeout-1", ids, *tps) is E.NONE
    clock.advance(TIMEOUT_MS)  # not older than its timeout yet
    settle_actor(txns.cluster, addresses.transaction_coordinator(1))
    assert txns.describe("timeout-1").state == "Ongoing"
    with captured_events() as events:
        clock.advance(1_000)  # the abort task runs: aborted, with the epoch bumped
        described = txns.wait_state("timeout-1", "CompleteAbort")
    assert described.producer_epoch == ids.producer_epoch + 1
    (completed,) = events.named("txn.completed", transactional_id="timeout-1")
    assert (completed["committed"], completed["cause"]) == (False, "timeout")
    assert [txns.markers(tp) for tp in tps] == [[(ids.producer_id, False)]] * 2
    assert txns.end("timeout-1", ids, committed=True) is E.PRODUCER_FENCED


def test_an_idle_transactional_id_expires(single: tuple[Txns, ManualClock]) -> None:
    txns, clock = single
    ids = txns.init("idle-1")
    assert ids.error_code is E.NONE
    clock.advance(3_600_000 + 60_000)
    wait_until(
        lambda: txns.describe("idle-1").error_code is E.TRANSACTIONAL_ID_NOT_FOUND,
        message="idle-1 expired",
    )
    again = txns.init("idle-1")  # a new producer id for the id, from epoch 0
    assert again.producer_id != ids.producer_id and again.producer_epoch == 0
