"""DescribeCluster (api key 60) through real clients: kafka-python's
`KafkaAdminClient.describe_cluster()` reads the cluster id Metadata answers, the elected
controller and the three brokers with their ports; the event log shows it asked DescribeCluster
itself (it falls back to Metadata on a broker without it). confluent-kafka's
`AdminClient.describe_cluster()` must read the same: librdkafka 2.16 builds its answer from a
Metadata request (v8 here), not from DescribeCluster.

The tests share the module's three-broker cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from kafkactor.network.admin_apis import KafkaApisConfig
from kafkactor.testing import Cluster
from tests.replication.support import EventLog
from tests.wire.support import READ_S

pytestmark = pytest.mark.timeout(60)

CLUSTER_ID = KafkaApisConfig().cluster_id  # what Metadata answers too


def brokers_of(cluster: Cluster) -> set[tuple[int, str, int]]:
    """(broker id, host, port) of every broker's listener."""
    found = set()
    for broker_id, address in zip(
        cluster.broker_ids, cluster.bootstrap_servers.split(","), strict=True
    ):
        host, port = address.rsplit(":", 1)
        found.add((broker_id, host, int(port)))
    return found


def asked_describe_cluster(events: EventLog) -> list[int]:
    """The versions of the DescribeCluster requests the brokers read."""
    return [e["api_version"] for e in events.named("network.request", api="DESCRIBE_CLUSTER")]


def test_confluent_kafka_describes_the_same_cluster_through_metadata(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = admin.describe_cluster(request_timeout=READ_S).result(timeout=READ_S)
    assert described.cluster_id == CLUSTER_ID
    assert {(n.id, n.host, n.port) for n in described.nodes} == brokers_of(cluster)
    assert all(n.rack is None for n in described.nodes)
    assert described.controller is not None
    assert described.controller.id == cluster.controller_id()
    assert described.authorized_operations is None  # not asked for


@pytest.fixture
def kafka_python_admin(cluster: Cluster) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    yield client
    client.close()


def test_kafka_python_describes_the_cluster_id_controller_and_brokers(
    cluster: Cluster, kafka_python_admin: KafkaAdminClient, events: EventLog
) -> None:
    described = kafka_python_admin.describe_cluster()
    assert described["cluster_id"] == CLUSTER_ID
    assert described["controller_id"] == cluster.controller_id()
    assert {(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]} == brokers_of(
        cluster
    )
    assert all(b["rack"] is None for b in described["brokers"])
    assert asked_describe_cluster(events) == [1]  # the newest version served
