"""Each listener's endpoint from the registration to the client: UpdateMetadata carries every
listener of every broker (in a message and on the wire), and Metadata, DescribeCluster and
FindCoordinator ask the metadata cache for the endpoints of the listener the request came in
on, leaving out brokers without it, as Kafka does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v9.request import MetadataRequest as MetadataV9
from kio.schema.metadata.v9.request import MetadataRequestTopic
from kio.schema.types import TopicName

from kafkactor import zk_model
from kafkactor.actors.broker import Broker
from kafkactor.actors.controller.zk_data import BrokerRegistration
from kafkactor.actors.replication.metadata_cache import MetadataCache
from kafkactor.actors.runtime import Directory
from kafkactor.common import BrokerEndpoint, ListenerEndpoint, endpoints_on
from kafkactor.messages import decode, encode
from kafkactor.messages.replication import MetadataRequest, UpdateMetadata
from kafkactor.network.inter_broker import wire_call
from kafkactor.network.inter_broker_apis import InterBrokerApis
from kafkactor.network.kafka_apis import KafkaApis, KafkaApisConfig
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Ask
from kafkactor.security.listener import ListenerConfig, SecurityProtocol, plaintext
from kafkactor.security.security_config import BrokerSecurityConfig, SaslServerConfig
from kafkactor.zk_model import EmbeddedZooKeeper
from tests.replication.support import wait_until

pytestmark = pytest.mark.timeout(30)

SASL_SSL = ListenerEndpoint(listener="SASL_SSL", host="localhost", port=9093, security_protocol=3)
PLAIN = ListenerEndpoint(listener="PLAINTEXT", host="localhost", port=9092, security_protocol=0)
BOTH = BrokerEndpoint(broker_id=1, host="localhost", port=9092, listeners=(PLAIN, SASL_SSL))
SASL_ONLY = BrokerEndpoint(
    broker_id=2,
    host="localhost",
    port=9193,
    listeners=(
        ListenerEndpoint(listener="SASL_SSL", host="localhost", port=9193, security_protocol=3),
    ),
)
UPDATE = UpdateMetadata(controller_id=1, live_brokers=(1, 2), endpoints=(BOTH, SASL_ONLY))


def test_update_metadata_carries_every_listener_through_the_message_codec() -> None:
    assert decode(encode(UPDATE)) == UPDATE


def test_update_metadata_carries_every_listener_between_processes() -> None:
    call = wire_call(UPDATE)
    assert call is not None
    header = RequestHeader(
        api_key=call.api_key, api_version=call.version, correlation_id=1, client_id="c"
    )
    step = InterBrokerApis(2).update_metadata(header, call.body)

    assert isinstance(step, Ask)
    assert isinstance(step.request, UpdateMetadata)
    assert step.request.endpoints == (BOTH, SASL_ONLY)


def test_a_broker_without_security_crosses_processes_as_before() -> None:
    legacy = BrokerEndpoint(broker_id=1, host="h", port=9092)
    call = wire_call(UpdateMetadata(live_brokers=(1,), endpoints=(legacy,)))
    assert call is not None
    (broker,) = call.body.live_brokers
    assert [(e.listener, e.security_protocol) for e in broker.endpoints] == [("PLAINTEXT", 0)]
    header = RequestHeader(
        api_key=call.api_key, api_version=call.version, correlation_id=1, client_id="c"
    )
    step = InterBrokerApis(2).update_metadata(header, call.body)
    assert isinstance(step, Ask)
    assert isinstance(step.request, UpdateMetadata)
    assert step.request.endpoints == (legacy,)


def test_the_metadata_cache_answers_the_endpoints_of_one_listener() -> None:
    cache = MetadataCache()
    cache.update(UPDATE)

    sasl = endpoints_on(cache.endpoints, "SASL_SSL")
    assert [(e.broker_id, e.port) for e in sasl] == [(1, 9093), (2, 9193)]
    assert [(e.broker_id, e.port) for e in endpoints_on(cache.endpoints, "PLAINTEXT")] == [
        (1, 9092)
    ]


def _header(api_key: int, version: int, listener: str) -> RequestHeader:
    return RequestHeader(
        api_key=api_key, api_version=version, correlation_id=1, client_id="c", listener=listener
    )


def _asked(step: Any) -> MetadataRequest:
    assert isinstance(step, Ask)
    assert isinstance(step.request, MetadataRequest)
    return step.request


@pytest.mark.parametrize("listener", ["SASL_SSL", "PLAINTEXT"])
def test_metadata_asks_for_the_endpoints_of_the_request_listener(listener: str) -> None:
    apis = KafkaApis(1, KafkaApisConfig(), admin=None, producer_ids=None)
    body = MetadataV9(
        topics=(MetadataRequestTopic(name=TopicName("t")),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )

    assert _asked(apis.handle(_header(3, 9, listener), body)).listener == listener


# -- one broker, two listeners: each client sees the brokers at its own listener ---------------


def test_a_client_sees_the_brokers_at_the_listener_it_came_in_on(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient

    zookeeper = EmbeddedZooKeeper(tick_ms=3000)
    security = BrokerSecurityConfig(
        listeners=(
            plaintext(),
            ListenerConfig(
                name="CLIENTS",
                security_protocol=SecurityProtocol.SASL_PLAINTEXT,
                sasl_mechanisms=("PLAIN",),
            ),
        ),
        sasl=SaslServerConfig(plain_users={"alice": "alice-secret"}),
    )
    broker = Broker(
        1,
        tmp_path / "broker-1",
        Directory(),
        zookeeper=lambda: zk_model.connect("embedded", embedded=zookeeper),
        security=security,
    ).start()
    try:
        assert broker.security is not None
        ports = {e.listener: e.port for e in broker.security.endpoints}
        registration = BrokerRegistration.decode(1, zookeeper_data(zookeeper, "/brokers/ids/1"))
        assert {e.listener: e.port for e in registration.listeners} == ports
        assert registration.port == ports["PLAINTEXT"]

        def brokers_seen(settings: dict[str, Any]) -> dict[int, int]:
            seen = AdminClient(settings).list_topics(timeout=10).brokers
            return {b.id: b.port for b in seen.values()}

        plain = {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"}
        sasl = {
            "bootstrap.servers": f"127.0.0.1:{ports['CLIENTS']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
        wait_until(lambda: brokers_seen(plain) == {1: ports["PLAINTEXT"]}, 20, "PLAINTEXT view")
        wait_until(lambda: brokers_seen(sasl) == {1: ports["CLIENTS"]}, 20, "CLIENTS view")
    finally:
        broker.shutdown()
        zookeeper.close()


def zookeeper_data(zookeeper: EmbeddedZooKeeper, path: str) -> bytes:
    client = zk_model.connect("embedded", embedded=zookeeper)
    try:
        data, _ = client.get(path)
        return bytes(data)
    finally:
        client.stop()
        client.close()
