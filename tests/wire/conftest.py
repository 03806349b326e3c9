"""Fixtures of the wire-protocol tests: clusters whose brokers listen on loopback ports, for
real Kafka clients (kafka-python, aiokafka, confluent-kafka, kcat) with their default settings.

Clusters run on the embedded ZooKeeper (the default), so a controller moves leaders when a
broker fails. Tests that inject no fault share a module's cluster, each on topics of its own
(`topic`); fault tests get a fresh cluster each (`failover_cluster`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from kafkactor.actors.broker import BrokerConfig
from kafkactor.network.kafka_apis import KafkaApisConfig
from kafkactor.testing import Cluster
from tests.replication.support import FAST, EventLog, captured_events
from tests.wire.groups import quickstart_cluster
from tests.wire.transactions import transactions_cluster

LISTEN = "127.0.0.1"
# A crashed broker's ZooKeeper session expires this fast, so the controller moves its
# partitions within about a second (tests/controller uses the same).
FAILOVER_SESSION_TIMEOUT_MS = 600


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Three brokers with Kafka's default broker settings (topic auto-creation on)."""
    with Cluster(3, listen=LISTEN) as started:
        yield started


@pytest.fixture(scope="package")
def txn_cluster() -> Iterator[Cluster]:
    """The transactional wire modules' one cluster (tests/wire/transactions.py), shared by
    `test_offset_fetch_stable` and the four `test_transactions_*` modules, which run last in
    this package: each first use
    creates `__transaction_state` and `__consumer_offsets` (100 partitions at RF 3), which
    costs seconds. Each module names its topics, transactional ids and groups apart."""
    with transactions_cluster() as started:
        yield started


@pytest.fixture(scope="package")
def quick() -> Iterator[Cluster]:
    """Three brokers with Kafka's quickstart group settings (tests/wire/groups.py), shared by
    the consumer-group modules (`test_groups_*`, `test_offset_delete`), which inject no fault
    into it: on a cluster of its own, each module's first group created `__consumer_offsets`
    (50 partitions at RF 3), and its end shut those 150 replicas down again. Each test names
    its topic and so its group apart (`topic`, `groups.group_of`)."""
    with quickstart_cluster() as started:
        yield started


@pytest.fixture(scope="module")
def strict_cluster() -> Iterator[Cluster]:
    """Three brokers with `auto.create.topics.enable=false`."""
    config = BrokerConfig(apis=KafkaApisConfig(auto_create_topics_enable=False))
    with Cluster(3, listen=LISTEN, config=config) as started:
        yield started


@pytest.fixture
def failover_cluster() -> Iterator[Cluster]:
    """A fresh cluster per test for killing brokers: sessions expire in 0.6 s and followers
    fetch again 50 ms after losing their leader."""
    with Cluster(
        3, listen=LISTEN, config=FAST, session_timeout_ms=FAILOVER_SESSION_TIMEOUT_MS
    ) as started:
        yield started


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (clusters are shared within a module)."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:200]
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def events() -> Iterator[EventLog]:
    """kafkactor's event log of this test alone (every request a broker read is one event)."""
    with captured_events() as captured:
        yield captured
