"""`/config/topics/<t>` holds a topic's overrides alone, as Kafka's AdminZkClient writes it,
and every reader puts them over the broker's defaults: a topic created on brokers whose
`log.*` defaults differ from Kafka's keeps following those defaults (and DescribeConfigs
reports only the real overrides as DYNAMIC_TOPIC_CONFIG, tests/wire/test_alter_configs.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.admin_zk import AdminZkClient
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster
from kafkactor.testing.read_back import wait_for
from tests.controller.support import settled_controller

pytestmark = pytest.mark.timeout(60)

BROKER_DEFAULTS = {"log.retention.ms": "5000", "log.segment.bytes": "200000"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(2, properties=BROKER_DEFAULTS) as started:
        settled_controller(started)
        yield started


def _znode(cluster: Cluster, topic: str) -> dict[str, object]:
    data, _ = cluster._zk.get(zk_data.topic_config_path(topic))
    found: dict[str, object] = json.loads(data)
    return found


def test_a_topic_created_with_overrides_stores_only_them(cluster: Cluster) -> None:
    cluster.create_topic("given", 1, 2, config={"segment.bytes": "100000"})
    assert _znode(cluster, "given") == {"version": 1, "config": {"segment.bytes": "100000"}}
    cluster.create_topic("plain", 1, 2)
    assert _znode(cluster, "plain") == {"version": 1, "config": {}}
    # a LogConfig: what differs from the brokers' defaults
    defaults = cluster.config.log_manager.default_log_config
    cluster.create_topic("typed", 1, 1, config=LogConfig(retention_ms=5000, segment_bytes=9999))
    assert defaults.retention_ms == 5000
    assert _znode(cluster, "typed") == {"version": 1, "config": {"segment.bytes": "9999"}}


def test_the_admin_zk_client_writes_only_the_overrides(cluster: Cluster) -> None:
    defaults = cluster.config.log_manager.default_log_config
    admin = AdminZkClient(lambda: cluster._zk, defaults=defaults, timeout_s=10)
    admin.create_topic("by-admin", 1, 1, {"min.insync.replicas": "1", "retention.ms": "70"})
    assert _znode(cluster, "by-admin") == {
        "version": 1,
        "config": {"min.insync.replicas": "1", "retention.ms": "70"},
    }


def test_brokers_open_logs_with_the_overrides_over_their_defaults(cluster: Cluster) -> None:
    cluster.create_topic("opened", 1, 2, config={"segment.bytes": "100000"})
    # create_topic returns once the leader is elected; the follower opens its log when its
    # LeaderAndIsr arrives, which may be a moment later
    assert wait_for(lambda: all("opened-0" in b.logs for b in cluster.brokers.values()), 10)
    for broker in cluster.brokers.values():
        log = broker.logs["opened-0"]
        assert log.config.segment_bytes == 100000
        assert log.config.retention_ms == 5000  # the brokers' log.retention.ms
