"""Transactions across broker processes: a librdkafka transactional producer writes to
partitions led by all three `kafkactor broker` processes, so its transaction coordinator's
markers reach the leaders of the other processes as WriteTxnMarkers requests over the wire
(the coordinator's `WriteTxnMarkersRequest` through the NetworkClient, answered by the leader's
replica manager); read_committed consumers then see the committed transaction whole and nothing
of the aborted one, and the offsets committed inside a transaction reach `__consumer_offsets`
wherever its partition is led.
"""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkactor.network.api_versions import ApiKey
from tests.processes.conftest import ProcessCluster
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 6  # led by every broker process
TXN_S = 30.0


def _create(cluster: ProcessCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
    wait_until(
        lambda: all(cluster.state(topic, p).leader >= 0 for p in range(PARTITIONS)),
        message="leaders for every partition",
    )


def read_all(cluster: ProcessCluster, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    ended: set[int] = set()

    def done() -> bool:
        message = consumer.poll(0.1)
        if message is not None:
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition() or 0)
            elif error is None:
                values.append(bytes(message.value() or b""))
            else:
                raise AssertionError(error)
        return len(ended) == PARTITIONS

    try:
        wait_until(done, timeout_s=TXN_S, message=f"{topic} read to its end ({isolation})")
    finally:
        consumer.close()
    return values


def markers_served(cluster: ProcessCluster) -> set[int]:
    """The brokers whose event log shows a WriteTxnMarkers request read off the wire."""
    found: set[int] = set()
    for path in cluster.event_logs():
        broker = int(path.parent.name.split("-")[1])
        for line in path.read_bytes().splitlines():
            if b'"network.request"' not in line:
                continue
            event = json.loads(line)
            if event.get("api_key") == ApiKey.WRITE_TXN_MARKERS:
                found.add(broker)
                break
    return found


def test_a_transaction_over_every_broker_process_commits_and_aborts_whole(
    process_cluster: ProcessCluster, topic: str
) -> None:
    process_cluster.whole()
    _create(process_cluster, topic)
    leaders = {process_cluster.state(topic, p).leader for p in range(PARTITIONS)}
    producer = Producer(
        {"bootstrap.servers": process_cluster.bootstrap_servers, "transactional.id": topic}
    )
    producer.init_transactions(TXN_S)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"committed-{p}".encode(), partition=p)
    producer.commit_transaction(TXN_S)
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(topic, f"aborted-{p}".encode(), partition=p)
    assert producer.flush(TXN_S) == 0
    producer.abort_transaction(TXN_S)

    committed = sorted(f"committed-{p}".encode() for p in range(PARTITIONS))
    aborted = sorted(f"aborted-{p}".encode() for p in range(PARTITIONS))
    assert sorted(read_all(process_cluster, topic, "read_committed")) == committed
    assert sorted(read_all(process_cluster, topic, "read_uncommitted")) == sorted(
        committed + aborted
    )
    # the coordinator runs in one process: the leaders in the others got its markers as
    # WriteTxnMarkers requests (its own broker's by message)
    assert len(leaders) == 3, leaders
    assert len(markers_served(process_cluster)) >= 2


def test_offsets_commit_with_the_output_across_processes(
    process_cluster: ProcessCluster, topic: str
) -> None:
    process_cluster.whole()
    source, sink, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    _create(process_cluster, source)
    _create(process_cluster, sink)
    plain = Producer({"bootstrap.servers": process_cluster.bootstrap_servers})
    for i in range(12):
        plain.produce(source, f"record-{i}".encode(), partition=i % PARTITIONS)
    assert plain.flush(TXN_S) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": process_cluster.bootstrap_servers,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([source])
    producer = Producer(
        {"bootstrap.servers": process_cluster.bootstrap_servers, "transactional.id": topic}
    )
    producer.init_transactions(TXN_S)
    done = 0

    def transformed_a_batch() -> bool:
        nonlocal done
        messages = [m for m in consumer.consume(12, 0.2) if m.error() is None]
        if messages:
            producer.begin_transaction()
            for message in messages:
                producer.produce(sink, bytes(message.value() or b"").upper())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()),
                consumer.consumer_group_metadata(),
                TXN_S,
            )
            producer.commit_transaction(TXN_S)
            done += len(messages)
        return done == 12

    try:
        wait_until(transformed_a_batch, timeout_s=TXN_S, message="12 records transformed")
    finally:
        consumer.close()
    assert sorted(read_all(process_cluster, sink, "read_committed")) == sorted(
        f"RECORD-{i}".encode() for i in range(12)
    )
    restarted = Consumer(
        {"bootstrap.servers": process_cluster.bootstrap_servers, "group.id": group}
    )
    try:
        committed = restarted.committed(
            [TopicPartition(source, p) for p in range(PARTITIONS)], TXN_S
        )
    finally:
        restarted.close()
    assert [tp.offset for tp in committed] == [2] * PARTITIONS
