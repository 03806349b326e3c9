"""A killed broker is gone entirely; the partitions it did not lead keep serving."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from kafkactor.actors.runtime import addresses
from kafkactor.clients import ProduceError
from kafkactor.messages import ErrorCode
from kafkactor.testing import Cluster
from tests.replication.support import (
    MIN_ISR_2,
    TOPIC,
    WAIT_S,
    EventLog,
    actor_ref,
    purgatory_state,
    result_or_error,
    wait_until,
)

PARTITIONS = 6


def test_kill_broker_stops_every_actor_of_that_broker(cluster: Cluster) -> None:
    cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
    prefix = addresses.broker_prefix(3) + "/"
    doomed = {
        a: actor_ref(cluster, a) for a in cluster.directory.addresses() if a.startswith(prefix)
    }
    # Its reaper, four purgatories (produce, fetch, DeleteRecords, topic), replica manager,
    # group and transaction coordinators, six partitions and a fetcher per leader.
    assert len(doomed) == 8 + PARTITIONS + 2, sorted(doomed)
    assert cluster.brokers[3].actor_count() == len(doomed)
    others = {b: cluster.brokers[b].actor_count() for b in (1, 2)}

    cluster.kill_broker(3)

    assert cluster.brokers[3].actor_count() == 0
    assert not [a for a in cluster.directory.addresses() if a.startswith(prefix)]
    alive = [a for a, ref in doomed.items() if ref.is_alive()]
    assert not alive, f"actors of the killed broker still running: {alive}"
    assert not cluster.brokers[3].alive
    assert cluster.live_brokers() == [1, 2]
    assert {b: cluster.brokers[b].actor_count() for b in (1, 2)} == others


def test_partitions_with_a_live_leader_keep_serving_after_a_broker_dies(cluster: Cluster) -> None:
    assignment = cluster.create_topic(
        TOPIC, partitions=PARTITIONS, replication_factor=3, config=MIN_ISR_2
    )
    producer = cluster.producer(acks=-1, timeout_ms=5_000)
    for p in range(PARTITIONS):
        assert producer.send(TOPIC, f"before-{p}".encode(), partition=p).result(WAIT_S).offset == 0
    cluster.kill_broker(3)
    orphaned = {p for p, replicas in assignment.items() if replicas[0] == 3}
    served = set(range(PARTITIONS)) - orphaned
    assert orphaned == {2, 5}

    after = cluster.producer(acks=-1, timeout_ms=5_000)
    futures = {p: after.send(TOPIC, f"after-{p}".encode(), partition=p) for p in range(PARTITIONS)}

    for p in served:
        assert futures[p].result(WAIT_S).offset == 1  # acks=all, once the ISR dropped broker 3
    for p in orphaned:
        error = result_or_error(futures[p])
        assert isinstance(error, ProduceError), error
        assert error.error_code is ErrorCode.LEADER_NOT_AVAILABLE
    consumer = cluster.consumer(max_wait_ms=200)
    consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])  # orphans must not block the rest
    seen: dict[int, list[bytes | None]] = {p: [] for p in range(PARTITIONS)}

    def everything_served() -> bool:
        for record in consumer.poll(200):
            seen[record.partition].append(record.value)
        return all(len(seen[p]) >= 2 for p in served)

    wait_until(everything_served, message="the records of every served partition")
    for p in served:
        assert seen[p] == [f"before-{p}".encode(), f"after-{p}".encode()]
        assert 3 not in cluster.describe_partition(TOPIC, p).isr
    assert all(seen[p] == [] for p in orphaned)


def test_requests_waiting_on_a_broker_are_answered_when_it_is_killed(
    sticky_cluster: Cluster, events: EventLog
) -> None:
    cluster = sticky_cluster
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3, config=MIN_ISR_2)
    producer = cluster.producer(acks=-1, timeout_ms=30_000)
    producer.send(TOPIC, b"committed").result(WAIT_S)
    cluster.kill_broker(3)  # stays in the ISR: the next acks=all produce waits
    waiting_produce = producer.send(TOPIC, b"waiting")
    consumer = cluster.consumer(max_wait_ms=30_000)
    consumer.assign([(TOPIC, 0)])
    consumer.seek(TOPIC, 0, 1)
    wait_until(lambda: purgatory_state(cluster, 1, "produce")["delayed"] == 1)

    with ThreadPoolExecutor(1, thread_name_prefix="poller") as pool:
        waiting_poll = pool.submit(consumer.poll, 30_000)
        wait_until(  # the consumer's fetch waits too (besides follower 2's)
            lambda: purgatory_state(cluster, 1, "fetch")["delayed"] == 2,
            message="the consumer's fetch to wait in the fetch purgatory",
        )
        started = time.monotonic()
        cluster.kill_broker(1)

        error = result_or_error(waiting_produce)
        records = waiting_poll.result(WAIT_S)
        elapsed = time.monotonic() - started

    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.BROKER_NOT_AVAILABLE
    assert records == []
    assert elapsed < 2.0, f"waiters were answered {elapsed:.2f}s after the kill"
    # the request log has each aborted waiter as an error after waiting, with the abort's code
    not_available = [int(ErrorCode.BROKER_NOT_AVAILABLE)]
    committed, produced = events.named("produce.response", actor=addresses.produce_purgatory(1))
    assert committed["outcome"] == "completed"
    assert (produced["outcome"], produced["error_codes"], produced["waited"]) == (
        "error",
        not_available,
        True,
    )
    consumed = events.named(
        "fetch.response", actor=addresses.fetch_purgatory(1), fetcher="consumer"
    )
    assert [(e["outcome"], e["error_codes"], e["waited"]) for e in consumed] == [
        ("error", not_available, True)
    ]


def test_producer_without_retries_recovers_once_the_partition_has_a_leader_again(
    cluster: Cluster,
) -> None:
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    assert cluster.leader(TOPIC, 2) == 3
    cluster.kill_broker(3)
    producer = cluster.producer(acks=1)  # retries=0, the default
    error = result_or_error(producer.send(TOPIC, b"no-leader", partition=2))
    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.LEADER_NOT_AVAILABLE

    cluster.restart_broker(3)  # it leads partition 2 again
    assert cluster.producer(acks=1).send(TOPIC, b"fresh", partition=2).result(WAIT_S).offset == 0

    # The same producer's next send should find the leader (Kafka's producer asks for new
    # metadata after any invalid-metadata or network error, whether or not it retries).
    assert producer.send(TOPIC, b"again", partition=2).result(WAIT_S).offset == 1
