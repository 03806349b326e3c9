"""Three `kafkactor broker` processes on a real ZooKeeper whose inter-broker listener is
SASL_SSL with SCRAM-SHA-256 (a trustme CA's certificate for 127.0.0.1; the brokers' own login
from the listener's JAAS entry, its credential written to /config/users/broker before they
start, as `kafka-configs --zookeeper` does), clients on a PLAINTEXT listener: the controller's
requests and the replica fetchers check each peer's certificate and authenticate to it, so a
topic at replication factor 3 takes acks=all writes and reads them back."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient

from kafkactor.actors.controller.entity_admin_zk import EntityAdminZkClient
from kafkactor.server import launcher, processes
from kafkactor.server.zookeeper import LocalZooKeeper
from tests.processes.conftest import (
    SESSION_TIMEOUT_MS,
    SETTINGS,
    ZOOKEEPER_TICK_MS,
    ProcessCluster,
)
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(180)

BROKERS = 3
CHROOT = "/kafkactor-sasl"
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="broker" password="broker-secret";'
)
SECURITY = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
    "inter.broker.listener.name": "INTERNAL",
    "sasl.enabled.mechanisms": "SCRAM-SHA-256",
    "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
    "listener.name.internal.scram-sha-256.sasl.jaas.config": JAAS,
}


def _pems(directory: Path) -> dict[str, str]:
    """A test CA and the brokers' certificate (127.0.0.1 and localhost), as PEM files: the
    INTERNAL listener's key store, and the trust store its clients (the brokers) check it by."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    keystore, truststore = directory / "broker.pem", directory / "ca.pem"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(truststore))
    return {
        "listener.name.internal.ssl.keystore.location": str(keystore),
        "ssl.truststore.location": str(truststore),
    }


def _scram_user(hosts: str) -> None:
    """The brokers' SCRAM credential in the cluster's chroot, before any broker starts."""
    root = KazooClient(hosts=hosts, timeout=5.0)
    root.start(timeout=10)
    try:
        root.ensure_path(CHROOT)
    finally:
        root.stop()
        root.close()
    client = KazooClient(hosts=hosts + CHROOT, timeout=5.0)
    client.start(timeout=10)
    try:
        EntityAdminZkClient(lambda: client).set_scram_credential(
            "broker", "SCRAM-SHA-256", "broker-secret"
        )
    finally:
        client.stop()
        client.close()


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
    zookeeper = LocalZooKeeper(root / "zookeeper", tick_time_ms=ZOOKEEPER_TICK_MS).start()
    try:
        _scram_user(zookeeper.hosts)
        yield from _cluster(root, zookeeper.hosts + CHROOT)
    finally:
        zookeeper.stop()


def _cluster(root: Path, connect: str) -> Iterator[ProcessCluster]:
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
        zookeeper=connect,
        settings={**SETTINGS, **SECURITY, **_pems(root)},
        per_broker=per_broker,
        session_timeout_ms=SESSION_TIMEOUT_MS,
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


def test_brokers_replicate_over_a_sasl_ssl_inter_broker_listener(
    sasl_cluster: ProcessCluster,
) -> None:
    topic = "sasl-replicated"
    admin = AdminClient({"bootstrap.servers": sasl_cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    wait_until(
        lambda: len(sasl_cluster.state(topic, 0).isr) == BROKERS,
        timeout_s=30,
        message="every replica in the ISR (followers fetched over SASL_SSL)",
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

    # the brokers logged in to each other by SCRAM as the JAAS entry's user, on INTERNAL, and
    # no event holds the password
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
        logins = {
            (e.get("principal"), e.get("mechanism"))
            for e in _events(log)
            if e.get("event") == "security.authenticated"
        }
        assert logins == {("User:broker", "SCRAM-SHA-256")}


def _poll_into(consumer: Consumer, read: list[bytes]) -> bool:
    message = consumer.poll(0.5)
    if message is not None and message.error() is None:
        value = message.value()
        assert value is not None
        read.append(value)
    return True
