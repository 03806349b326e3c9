"""`/brokers/ids/<id>` with listeners: Kafka's BrokerIdZNode version 4 JSON, and older ones."""

from __future__ import annotations

import json

import pytest

from kafkactor.actors.controller.zk_data import BrokerRegistration, MalformedZnodeError
from kafkactor.common import BrokerEndpoint, ListenerEndpoint, endpoints_on

pytestmark = pytest.mark.timeout(30)

# Kafka's BrokerIdZNode documentation example of a version 4 registration
KAFKA_V4 = (
    b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
    b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
    b'"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},'
    b'"rack":"dc1"}'
)
SASL_SSL = ListenerEndpoint(listener="SASL_SSL", host="localhost", port=9093, security_protocol=3)
PLAIN = ListenerEndpoint(listener="PLAINTEXT", host="localhost", port=9092, security_protocol=0)


def test_kafkas_version_4_registration_decodes_with_each_listeners_protocol() -> None:
    registration = BrokerRegistration.decode(1, KAFKA_V4)

    assert registration.listeners == (
        ListenerEndpoint(listener="CLIENT", host="host1", port=9092, security_protocol=1),
        ListenerEndpoint(listener="REPLICATION", host="host1", port=9093, security_protocol=0),
    )
    assert registration.endpoint("REPLICATION") == ("host1", 9093)
    assert registration.endpoint("EXTERNAL") is None


def test_every_listener_is_registered_with_its_protocol() -> None:
    registration = BrokerRegistration.of(3, (SASL_SSL, PLAIN), 7)
    body = json.loads(registration.encode())

    assert body["version"] == 4
    assert body["endpoints"] == ["SASL_SSL://localhost:9093", "PLAINTEXT://localhost:9092"]
    assert body["listener_security_protocol_map"] == {
        "SASL_SSL": "SASL_SSL",
        "PLAINTEXT": "PLAINTEXT",
    }
    # the top-level pair is the PLAINTEXT listener's, for clients older than listeners
    assert (body["host"], body["port"]) == ("localhost", 9092)
    assert BrokerRegistration.decode(3, registration.encode()) == registration


def test_a_broker_without_a_plaintext_listener_registers_no_top_level_endpoint() -> None:
    registration = BrokerRegistration.of(3, (SASL_SSL,), 7)
    body = json.loads(registration.encode())

    assert (body["host"], body["port"]) == (None, -1)
    decoded = BrokerRegistration.decode(3, registration.encode())
    assert decoded.listeners == (SASL_SSL,)
    # the controller still knows where to reach it
    assert decoded.broker_endpoint("SASL_SSL").port == 9093
    assert decoded.broker_endpoint().port == 9093


def test_listener_names_map_to_their_protocol_before_version_4() -> None:
    data = json.dumps(
        {"version": 2, "host": None, "port": -1, "timestamp": "1", "endpoints": ["SSL://h:9093"]}
    ).encode()

    assert BrokerRegistration.decode(2, data).listeners == (
        ListenerEndpoint(listener="SSL", host="h", port=9093, security_protocol=1),
    )


@pytest.mark.parametrize(
    "endpoints",
    [
        pytest.param('["CUSTOM://h:1"]', id="custom-listener-without-map"),
        pytest.param('["PLAINTEXT:h:1"]', id="no-scheme"),
        pytest.param('["PLAINTEXT://h"]', id="no-port"),
        pytest.param('"PLAINTEXT://h:1"', id="not-a-list"),
        pytest.param("[7]", id="not-a-string"),
    ],
)
def test_malformed_endpoints_are_refused(endpoints: str) -> None:
    data = b'{"host": "h", "port": 1, "timestamp": "1", "endpoints": %s}' % endpoints.encode()

    with pytest.raises(MalformedZnodeError) as caught:
        BrokerRegistration.decode(4, data)
    assert caught.value.path == "/brokers/ids/4"


def test_clients_see_the_brokers_of_their_listener_at_its_endpoints() -> None:
    both = BrokerEndpoint(broker_id=1, host="localhost", port=9092, listeners=(SASL_SSL, PLAIN))
    sasl_only = BrokerEndpoint(
        broker_id=2,
        host="localhost",
        port=9193,
        listeners=(
            ListenerEndpoint(listener="SASL_SSL", host="localhost", port=9193, security_protocol=3),
        ),
    )
    legacy = BrokerEndpoint(broker_id=3, host="localhost", port=9292)

    on_sasl = endpoints_on((both, sasl_only, legacy), "SASL_SSL")
    assert [(e.broker_id, e.port) for e in on_sasl] == [(1, 9093), (2, 9193)]
    on_plain = endpoints_on((both, sasl_only, legacy), "PLAINTEXT")
    assert [(e.broker_id, e.port) for e in on_plain] == [(1, 9092), (3, 9292)]
    # no listener named: every broker at its inter-broker endpoint
    assert [e.port for e in endpoints_on((both, sasl_only, legacy), None)] == [9092, 9193, 9292]
