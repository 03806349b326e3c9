"""The inter-broker NetworkClient on a peer's SASL_SSL listener (the broker's own SocketServer,
a trustme CA's certificate): with the right login its requests reach the peer's KafkaApis as
User:broker on that listener; a wrong password, a certificate for another host or an untrusted
CA is a failed connect — retried with backoff, the request answered REQUEST_TIMED_OUT, the
reason in `network.client_connect_failed`, never the password."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trustme
from scramp import ScramMechanism

from kafkactor.actors.runtime import Client, Directory, addresses
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import FetchPartition, FetchRequest
from kafkactor.network.network_client import NetworkClient, NetworkClientConfig
from kafkactor.network.socket_server import SocketServer
from kafkactor.security.listener import ListenerConfig, SecurityProtocol, SslConfig
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.scram_credential import ScramCredential
from kafkactor.security.security_config import InterBrokerSecurity, SaslServerConfig
from tests.network.test_socket_server import StubApis
from tests.replication.support import EventLog, captured_events, wait_until

pytestmark = pytest.mark.timeout(60)

PEER = 9
PASSWORD = "broker-secret"
CREDENTIAL = ScramCredential(
    *ScramMechanism("SCRAM-SHA-256").make_auth_info(PASSWORD, iteration_count=4096)
)


class Pems:
    """A CA, the peer's key store (certificate for `host`) and the trust store, as PEM files."""

    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        ca = trustme.CA()
        self.keystore = directory / f"peer-{host}.pem"
        self.truststore = directory / "ca.pem"
        ca.issue_cert(host).private_key_and_cert_chain_pem.write_to_path(str(self.keystore))
        ca.cert_pem.write_to_path(str(self.truststore))


@pytest.fixture
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


@contextmanager
def peer(keystore: Path) -> Iterator[tuple[SocketServer, StubApis]]:
    """Broker 9's SASL_SSL listener INTERNAL (SCRAM-SHA-256, the user `broker`)."""
    directory = Directory()
    apis = StubApis()
    directory.register(addresses.kafka_apis(PEER), apis)
    listener = ListenerConfig(
        name="INTERNAL",
        security_protocol=SecurityProtocol.SASL_SSL,
        ssl=SslConfig(keystore=keystore),
        sasl_mechanisms=("SCRAM-SHA-256",),
    )
    server = SocketServer(
        PEER,
        directory,
        listeners=(listener,),
        sasl=SaslServerConfig(connection_failed_authentication_delay_ms=0),
        scram=lambda mechanism, user: CREDENTIAL if user == "broker" else None,
    ).start()
    try:
        yield server, apis
    finally:
        server.stop()


@contextmanager
def client(
    port: int, truststore: Path, password: str = PASSWORD
) -> Iterator[tuple[NetworkClient, Client]]:
    """Broker 1's network client, its inter-broker side SASL_SSL with SCRAM-SHA-256."""
    directory = Directory()
    security = InterBrokerSecurity(
        listener="INTERNAL",
        mechanism="SCRAM-SHA-256",
        username="broker",
        password=password,
        ssl=SslConfig(truststore=truststore),
    )
    network = NetworkClient(
        1,
        directory,
        lambda _broker: ("127.0.0.1", port),
        config=NetworkClientConfig(request_timeout_ms=800),
        security=security,
    ).start()
    directory.remote = network.remote
    asker = Client("asker", directory)
    try:
        yield network, asker
    finally:
        asker.close()
        network.close()


def _fetch() -> FetchRequest:
    return FetchRequest(replica_id=1, max_wait_ms=0, partitions=(FetchPartition(topic="t"),))


def test_requests_reach_the_peer_as_the_brokers_principal(tmp_path: Path) -> None:
    pems = Pems(tmp_path)
    with (
        peer(pems.keystore) as (server, apis),
        client(server.ports["INTERNAL"], pems.truststore) as (_, asker),
    ):
        asker.request(addresses.replica_manager(PEER), _fetch())
        request = apis.next()
    assert request.header.principal == KafkaPrincipal.user("broker")
    assert request.header.listener == "INTERNAL"


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("wrong password", "SASL authentication failed: SCRAM-SHA-256 authentication refused"),
        ("certificate for another host", "CERTIFICATE_VERIFY_FAILED"),
        ("untrusted CA", "CERTIFICATE_VERIFY_FAILED"),
    ],
)
def test_a_refused_connection_is_a_failed_connect_retried_with_backoff(
    tmp_path: Path, events: EventLog, case: str, needle: str
) -> None:
    host = "broker.example" if case == "certificate for another host" else "127.0.0.1"
    pems = Pems(tmp_path, host)
    truststore = pems.truststore
    if case == "untrusted CA":
        (tmp_path / "other").mkdir()
        truststore = Pems(tmp_path / "other").truststore
    password = "not-the-password" if case == "wrong password" else PASSWORD
    with (
        peer(pems.keystore) as (server, apis),
        client(server.ports["INTERNAL"], truststore, password) as (_, asker),
    ):
        answer = asker.request(addresses.replica_manager(PEER), _fetch()).result(10)
        assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert apis.none_within(0.2)  # nothing reached the peer's KafkaApis
        wait_until(
            lambda: len(events.named("network.client_connect_failed")) >= 1,
            message="the failed connect's event",
        )
    (failed, *_) = events.named("network.client_connect_failed")
    assert needle in failed["reason"], failed
    if case == "wrong password":  # tried again (with backoff) while the request waited
        assert len(events.named("security.authentication_failed", broker=PEER)) >= 2
    everything = str(events.all())
    assert "not-the-password" not in everything and PASSWORD not in everything
