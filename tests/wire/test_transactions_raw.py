"""What no client library sends, on the wire to a real cluster: a control batch in a Produce
request (a client may not write transaction markers), and transactional records without a
transactional id. Requests are written with kio (tests/network/wire.py's `WireClient`)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.storage import Record, build_batch, build_control_batch
from kafkactor.testing import Cluster
from tests.network.wire import WireClient, produce_request

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def cluster(txn_cluster: Cluster) -> Cluster:
    """The package's transactions cluster (tests/wire/conftest.py), shared with the other
    client modules."""
    return txn_cluster


@pytest.fixture
def topic(topic: str) -> str:
    """This module's topic (and so transactional id and group) apart from the other client
    modules' on the shared cluster."""
    return "raw-" + topic


def produce_to_leader(cluster: Cluster, topic: str, records: bytes, **fields: Any) -> Any:
    """A Produce v8 (acks=-1) of `records` to partition 0, sent to its leader; its one
    partition answer."""
    leader = cluster.leader(topic, 0)
    host, port = cluster.bootstrap_servers.split(",")[leader - 1].rsplit(":", 1)
    with WireClient(host, int(port)) as client:
        response = client.call(
            ApiKey.PRODUCE, 8, produce_request(8, records, topic=topic, **fields)
        )
    return response.responses[0].partition_responses[0]


def test_a_control_batch_from_a_client_is_an_invalid_record(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, 1, 3)
    marker = build_control_batch(
        committed=True, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp_ms=1_000
    )
    answer = produce_to_leader(cluster, topic, marker, transactional_id="a-client")
    assert answer.error_code == ErrorCode.INVALID_RECORD
    assert answer.error_message == (
        f"Clients are not allowed to write control records in topic partition {topic}-0."
    )
    assert cluster.describe_partition(topic, 0).high_watermark == 0  # nothing appended


def test_transactional_records_without_a_transactional_id_are_refused(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, 1, 3)
    records = build_batch(
        [Record(None, b"sneaky", 1_000)],
        0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    answer = produce_to_leader(cluster, topic, records)
    assert answer.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert cluster.describe_partition(topic, 0).high_watermark == 0
