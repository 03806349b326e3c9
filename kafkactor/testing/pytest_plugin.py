"""The pytest plugin (entry point `pytest11`): Kafka in your tests, without Docker.

Installed with kafkactor, it gives every test suite a `kafka_cluster` fixture: a fresh
`Cluster` of brokers in the test's process, each listening for Kafka's wire protocol on a
free loopback port, stopped (and its data removed) when the test ends::

    def test_orders(kafka_cluster):
        producer = KafkaProducer(bootstrap_servers=kafka_cluster.bootstrap_servers)
        ...
        kafka_cluster.kill_broker(kafka_cluster.leader("orders", 0))  # faults, as the Cluster's

The `kafka_cluster` marker passes options to the Cluster (anything `Cluster` takes but
`listen`): `@pytest.mark.kafka_cluster(brokers=1, zookeeper=None)`. Kafka's broker settings go
in `properties`, under Kafka's names, shared by every broker and checked as `kafkactor broker`
checks its file::

    @pytest.mark.kafka_cluster(
        properties={"num.partitions": "4", "group.initial.rebalance.delay.ms": "0"}
    )
    def test_groups(kafka_cluster): ...

`properties` are laid over `config` (a `BrokerConfig`) when both are given; a property the
Cluster cannot take (`broker.id`, `log.dirs`, ...) fails the test's setup with a `ConfigError`
naming it.

A secured cluster takes a `ClusterSecurity` (TLS with a generated test CA, SASL users, ACLs;
docs/security.md), and tells each client what to set::

    @pytest.mark.kafka_cluster(
        security=ClusterSecurity(protocol="SASL_SSL", users={"alice": "alice-secret"})
    )
    def test_login(kafka_cluster):
        settings = kafka_cluster.client_config("confluent-kafka", user="alice")
        producer = confluent_kafka.Producer(settings)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafkactor.testing.cluster import Cluster

DEFAULT_OPTIONS: dict[str, Any] = {"brokers": 3}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_cluster(**options): options for the kafka_cluster fixture's Cluster "
        "(brokers=3, zookeeper='embedded', session_timeout_ms, config, "
        "properties={'num.partitions': '4', ...}: Kafka's broker properties, "
        "security=ClusterSecurity(...): TLS, SASL users, ACLs)",
    )


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A started cluster (3 brokers by default) with `bootstrap_servers` for any Kafka client."""
    options = dict(DEFAULT_OPTIONS)
    marker = request.node.get_closest_marker("kafka_cluster")
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("kafka_cluster takes keyword options only")
        options.update(marker.kwargs)
    if "listen" in options:
        raise pytest.UsageError("kafka_cluster always listens on 127.0.0.1")
    with Cluster(listen="127.0.0.1", **options) as cluster:
        yield cluster
