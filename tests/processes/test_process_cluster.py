"""Three `kafkactor broker` processes on a real ZooKeeper, driven by librdkafka with its
default settings (acks=all): a killed leader's process, the controller's process, a rolling
restart by SIGTERM with controlled shutdown, and a paused (SIGSTOPped) broker. Whatever the
client was told is acknowledged must be read back afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkactor.kafka_uuid import uuid_to_string
from kafkactor.network.api_versions import ApiKey
from kafkactor.server import launcher
from kafkactor.storage import PARTITION_METADATA_FILE
from tests.network.wire import WireClient, make, nested, request_schema
from tests.processes.conftest import ProcessCluster
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
READ_BACK_S = 30.0


def _create(cluster: ProcessCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
    futures[topic].result(30)
    wait_until(
        lambda: all(cluster.state(topic, p).leader >= 0 for p in range(PARTITIONS)),
        message="leaders for every partition",
    )


@dataclass
class Load:
    """A librdkafka producer sending numbered values until stopped; what it was told."""

    acked: list[bytes] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # final failures the client reported
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, err: KafkaError | None, message: Any) -> None:
        with self.lock:
            if err is None:
                self.acked.append(message.value())
            else:
                self.failed.append(f"{err.name()}: {err.str()}")

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


@contextmanager
def producing(cluster: ProcessCluster, topic: str) -> Iterator[Load]:
    load = Load()
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})

    def run() -> None:
        number = 0
        while not stop.is_set():
            producer.produce(topic, value=b"%d" % number, on_delivery=load.delivered)
            number += 1
            producer.poll(0.002)

    thread = threading.Thread(target=run, name="librdkafka-load", daemon=True)
    thread.start()
    try:
        yield load
    finally:
        stop.set()
        thread.join(10)
        remaining = producer.flush(60)
        assert remaining == 0, f"{remaining} records neither acknowledged nor failed"


def _read_all(cluster: ProcessCluster, topic: str, expected: int) -> set[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"reader-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    seen: set[bytes] = set()
    deadline = time.monotonic() + READ_BACK_S
    try:
        consumer.subscribe([topic])
        while len(seen) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            value = message.value() if message is not None and message.error() is None else None
            if value is not None:
                seen.add(value)
    finally:
        consumer.close()
    return seen


def _check_nothing_lost(cluster: ProcessCluster, topic: str, load: Load) -> None:
    assert not load.failed, f"the client was told of failures: {sorted(set(load.failed))[:5]}"
    assert load.count() > 0
    acked = set(load.acked)
    seen = _read_all(cluster, topic, len(acked))
    lost = acked - seen
    assert not lost, f"{len(lost)} acknowledged records are gone, e.g. {sorted(lost)[:5]}"


def _leader_of_a_partition(cluster: ProcessCluster, topic: str, *, controller: bool) -> int:
    for p in range(PARTITIONS):
        leader = cluster.state(topic, p).leader
        if (leader == cluster.controller()) == controller:
            return leader
    pytest.skip("no partition led as the test needs (every leader is or is not the controller)")


def test_a_killed_leader_process_fails_over_and_nothing_acknowledged_is_lost(
    process_cluster: ProcessCluster, topic: str
) -> None:
    cluster = process_cluster
    _create(cluster, topic)
    victim = _leader_of_a_partition(cluster, topic, controller=False)
    with producing(cluster, topic) as load:
        wait_until(lambda: load.count() >= 200, message="200 acknowledged")
        launcher.kill(cluster.root, victim)
        wait_until(
            lambda: all(cluster.state(topic, p).leader != victim for p in range(PARTITIONS)),
            timeout_s=15,
            message="every leadership moved off the killed broker",
        )
        after = load.count()
        wait_until(lambda: load.count() >= after + 200, message="acknowledgements resume")
        launcher.restart(cluster.root, victim)
        wait_until(
            lambda: all(victim in cluster.state(topic, p).isr for p in range(PARTITIONS)),
            timeout_s=30,
            message="the restarted broker back in every ISR",
        )
    cluster.whole()
    _check_nothing_lost(cluster, topic, load)


def test_a_killed_controller_process_is_replaced_and_nothing_acknowledged_is_lost(
    process_cluster: ProcessCluster, topic: str
) -> None:
    cluster = process_cluster
    _create(cluster, topic)
    controller = cluster.controller()
    with producing(cluster, topic) as load:
        wait_until(lambda: load.count() >= 200, message="200 acknowledged")
        launcher.kill(cluster.root, controller)
        wait_until(
            lambda: cluster.controller() not in (controller, -1),
            timeout_s=15,
            message="another controller",
        )
        wait_until(
            lambda: all(cluster.state(topic, p).leader != controller for p in range(PARTITIONS)),
            timeout_s=15,
            message="the new controller moved the old one's leaderships",
        )
        after = load.count()
        wait_until(lambda: load.count() >= after + 200, message="acknowledgements resume")
        launcher.restart(cluster.root, controller)
    cluster.whole()
    _check_nothing_lost(cluster, topic, load)


def test_a_rolling_restart_by_sigterm_moves_leaderships_first_and_loses_nothing(
    process_cluster: ProcessCluster, topic: str
) -> None:
    cluster = process_cluster
    _create(cluster, topic)
    with producing(cluster, topic) as load:
        wait_until(lambda: load.count() >= 200, message="200 acknowledged")
        for broker in (1, 2, 3):
            led = [p for p in range(PARTITIONS) if cluster.state(topic, p).leader == broker]
            stopped = launcher.stop(cluster.root, broker)
            assert "stopped" in str(stopped), stopped
            for p in led:  # moved while it still served: a leader right after it left
                assert cluster.state(topic, p).leader not in (broker, -1)
            before = load.count()
            wait_until(
                lambda n=before: load.count() >= n + 100,  # type: ignore[misc]
                message="acknowledgements go on",
            )
            launcher.restart(cluster.root, broker)
            wait_until(
                lambda b=broker: all(  # type: ignore[misc]
                    b in cluster.state(topic, p).isr for p in range(PARTITIONS)
                ),
                timeout_s=30,
                message=f"broker {broker} back in every ISR",
            )
    cluster.whole()
    _check_nothing_lost(cluster, topic, load)
    answers = [
        event
        for path in cluster.event_logs()
        for event in _events(path)
        if event["event"] == "controller.controlled_shutdown"
    ]
    assert {e["replica"] for e in answers if e["error"] == "NONE"} == {1, 2, 3}


def _events(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as lines:
        for line in lines:
            try:
                yield json.loads(line)
            except ValueError:
                continue  # a line torn by a killed process


def test_a_paused_broker_falls_out_of_the_isr_and_rejoins_when_continued(
    process_cluster: ProcessCluster, topic: str
) -> None:
    cluster = process_cluster
    _create(cluster, topic)
    leader = cluster.state(topic, 0).leader
    follower = next(r for r in cluster.state(topic, 0).isr if r != leader)
    with producing(cluster, topic) as load:
        wait_until(lambda: load.count() >= 100, message="100 acknowledged")
        launcher.pause(cluster.root, follower)
        try:
            wait_until(
                lambda: follower not in cluster.state(topic, 0).isr,
                timeout_s=15,
                message="the paused follower out of the ISR",
            )
            after = load.count()
            wait_until(lambda: load.count() >= after + 100, message="acks=all goes on")
        finally:
            launcher.resume(cluster.root, follower)
        wait_until(
            lambda: follower in cluster.state(topic, 0).isr,
            timeout_s=30,
            message="the continued follower back in the ISR",
        )
    cluster.whole()
    _check_nothing_lost(cluster, topic, load)


def test_delete_records_waits_for_the_followers_in_other_processes(
    process_cluster: ProcessCluster, topic: str
) -> None:
    # the low watermark needs each follower's log start, which only its fetches (Fetch v12 over
    # the inter-broker wire) carry to the leader's process
    cluster = process_cluster
    _create(cluster, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        producer.produce(topic, b"value-%d" % i, partition=0)
    assert producer.flush(READ_BACK_S) == 0
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic, 0, 6)], request_timeout=READ_BACK_S)
    assert next(iter(futures.values())).result(READ_BACK_S).low_watermark == 6
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=READ_BACK_S) == (
            6,
            10,
        )
    finally:
        consumer.close()


def test_every_broker_process_answers_the_topic_id_the_controller_sent(
    process_cluster: ProcessCluster, topic: str
) -> None:
    # the brokers that are not the controller learn it from UpdateMetadata v7 over TCP
    _create(process_cluster, topic)
    schema = request_schema(ApiKey.METADATA, 12)
    request = make(
        schema,
        topics=(make(nested(schema, "MetadataRequestTopic"), name=topic, topic_id=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    def topic_ids() -> set[Any]:
        found = set()
        for address in process_cluster.bootstrap_servers.split(","):
            host, port = address.rsplit(":", 1)
            with WireClient(host, int(port)) as client:
                found |= {t.topic_id for t in client.call(ApiKey.METADATA, 12, request).topics}
        return found

    def agreed() -> bool:
        found = topic_ids()
        return len(found) == 1 and None not in found

    wait_until(agreed, message="the same topic id from every broker")
    # and every replica's directory records it (partition.metadata), from LeaderAndIsr v5
    [topic_id] = topic_ids()
    expected = f"version: 0\ntopic_id: {uuid_to_string(topic_id)}"

    def recorded() -> list[str]:
        files = process_cluster.root.glob(f"broker-*/**/{topic}-*/{PARTITION_METADATA_FILE}")
        return [f.read_text() for f in files]

    wait_until(
        lambda: recorded() == [expected] * (PARTITIONS * 3),
        message="every replica's partition.metadata with the topic's id",
    )


def test_one_produce_is_one_trace_across_the_broker_processes(
    process_cluster: ProcessCluster, topic: str
) -> None:
    """A follower's fetch starts in its broker's process and is served in the leader's: the
    trace context in the request header joins them, so `kafkactor trace` over every broker's
    event log shows one tree spanning two brokers."""
    from kafkactor import trace

    def brokers_of(actors: list[str]) -> set[str]:
        return {a.split("/")[1] for a in actors if a.startswith("broker/")}

    def trace_id(line: bytes) -> bytes:
        start = line.find(b'"trace_id":"') + len(b'"trace_id":"')
        return line[start : line.find(b'"', start)] if start >= len(b'"trace_id":"') else b""

    def joined() -> bool:
        """A follower fetch whose trace id is in two brokers' logs, and whose spans there form
        one tree (the leader's spans hang under the follower's send: no orphans)."""
        logs = [path.read_bytes().splitlines() for path in process_cluster.event_logs()]
        for own in logs:
            sent = {  # the last follower fetches this broker sent
                trace_id(line)
                for line in own[-20_000:]
                if b"msg.send" in line and b"FetchRequest" in line and b"/fetcher/" in line
            }
            for other in logs:
                served = [line for line in other if other is not own and trace_id(line) in sent]
                ids = {trace_id(line) for line in served}
                mine = [line for line in own if trace_id(line) in ids]
                if any(
                    t.orphans == 0 and len(brokers_of(t.actors)) >= 2
                    for t in trace.build_traces(trace.iter_events(mine + served))
                ):
                    return True
        return False

    _create(process_cluster, topic)  # its followers fetch from its leaders
    wait_until(joined, timeout_s=20, message="a trace with events of two broker processes")


def test_a_bad_properties_file_exits_2_naming_the_setting(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:1\nreplica.lag.time.max.ms=ten\n")
    done = subprocess.run(
        [sys.executable, "-m", "kafkactor", "broker", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "replica.lag.time.max.ms" in lines[0] and ":3" in lines[0]
