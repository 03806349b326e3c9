"""Three `kafkactor broker` processes on a real ZooKeeper whose inter-broker listener is
SASL_PLAINTEXT (PLAIN, the brokers' own login from the listener's JAAS entry), clients on a
PLAINTEXT listener: the controller's requests and the replica fetchers authenticate to each
peer, so a topic at replication factor 3 takes acks=all writes and reads them back."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient

from kafkactor.server import launcher, processes
from tests.processes.conftest import (
    SESSION_TIMEOUT_MS,
    SETTINGS,
    ZOOKEEPER_TICK_MS,
    ProcessCluster,
)
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(180)

BROKERS = 3
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="broker" password="broker-secret" user_broker="broker-secret";'
)
SECURITY = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "sasl.enabled.mechanisms": "PLAIN",
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.internal.plain.sasl.jaas.config": JAAS,
}


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_run(count: int, avoid: set[int]) -> int:
    """The first of `count` consecutive free ports (the launcher numbers brokers' ports)."""
    while True:
        base = processes.free_port(avoid)
        run = range(base, base + count)
        if base + count <= 65535 and all(p not in avoid and _bindable(p) for p in run):
            return base


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    root = tmp_path_factory.mktemp("kc-sasl")
    base = _free_run(BROKERS, set())
    internal: dict[int, int] = {}
    for broker_id in range(1, BROKERS + 1):
        avoid = {*range(base, base + BROKERS), *internal.values()}
        internal[broker_id] = processes.free_port(avoid)
    per_broker = {
        broker_id: {
            "listeners": f"PLAINTEXT://127.0.0.1:{base + broker_id - 1},"
            f"INTERNAL://127.0.0.1:{internal[broker_id]}"
        }
        for broker_id in internal
    }
    started = launcher.up(
        root,
        BROKERS,
        base_port=base,
        settings={**SETTINGS, **SECURITY},
        per_broker=per_broker,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        zookeeper_tick_ms=ZOOKEEPER_TICK_MS,
    )
    zk = KazooClient(hosts=started.zookeeper_connect, timeout=5.0)
    try:
        zk.start(timeout=10)
        yield ProcessCluster(root, started.bootstrap_servers, zk)
    finally:
        zk.stop()
        zk.close()
        launcher.down(root, timeout_s=20)


def _events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def test_brokers_replicate_over_a_sasl_inter_broker_listener(sasl_cluster: ProcessCluster) -> None:
    topic = "sasl-replicated"
    admin = AdminClient({"bootstrap.servers": sasl_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_until(
        lambda: len(sasl_cluster.state(topic, 0).isr) == BROKERS,
        timeout_s=30,
        message="every replica in the ISR (followers fetched over SASL)",
    )
    producer = Producer({"bootstrap.servers": sasl_cluster.bootstrap_servers, "acks": "all"})
    failures: list[str] = []
    values = [f"v{i}".encode() for i in range(50)]
    for value in values:
        producer.produce(
            topic, value, on_delivery=lambda err, _m: failures.append(str(err)) if err else None
        )
    assert producer.flush(30) == 0
    assert failures == []
    consumer = Consumer(
        {
            "bootstrap.servers": sasl_cluster.bootstrap_servers,
            "group.id": "sasl-readers",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    read: list[bytes] = []
    try:
        wait_until(
            lambda: _poll_into(consumer, read) and len(read) >= len(values),
            timeout_s=30,
            message="every value read back",
        )
    finally:
        consumer.close()
    assert read == values
    assert len(sasl_cluster.state(topic, 0).isr) == BROKERS

    # the brokers logged in to each other as the JAAS entry's user, on INTERNAL, and no event
    # holds the password
    logs = sasl_cluster.event_logs()
    assert len(logs) == BROKERS
    wait_until(
        lambda: all(
            any(
                e.get("event") == "security.authenticated" and e.get("listener") == "INTERNAL"
                for e in _events(log)
            )
            for log in logs
        ),
        timeout_s=10,
        message="every broker authenticated a peer on INTERNAL",
    )
    for log in logs:
        text = log.read_text(encoding="utf-8")
        assert "broker-secret" not in text
        principals = {
            e.get("principal") for e in _events(log) if e.get("event") == "security.authenticated"
        }
        assert principals == {"User:broker"}


def _poll_into(consumer: Consumer, read: list[bytes]) -> bool:
    message = consumer.poll(0.5)
    if message is not None and message.error() is None:
        value = message.value()
        assert value is not None
        read.append(value)
    return True
