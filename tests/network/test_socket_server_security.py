"""The socket server's listeners, TLS and SASL against real sockets.

A `SocketServer` with four listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, plus an SSL
one that requires client certificates) in front of a stub KafkaApis that keeps what reaches
it: what the network layer hands on, with which principal and listener, and that nothing
reaches it before authentication. The failed-authentication delay runs on a timer the test
holds (`RecordingTimer`): a failed connection stays open, silent, until its task runs.
librdkafka (confluent-kafka) and kafka-python 3 authenticate with PLAIN and SCRAM as clients at
their defaults (a stub answer to kafka-python's Metadata lets its bootstrap finish).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import queue
import random
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkactor.actors.runtime import Directory, addresses
from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, encode_response, nested, response_type
from kafkactor.network.kafka_apis import KafkaApis
from kafkactor.network.request_channel import NetworkResponse, RequestHeader
from kafkactor.network.socket_server import SocketServer, SocketServerConfig
from kafkactor.network.steps import Answer
from kafkactor.security.listener import ListenerConfig, SecurityProtocol
from kafkactor.security.principal import ANONYMOUS, KafkaPrincipal
from kafkactor.security.security_config import SaslServerConfig
from kafkactor.security.ssl_factory import client_context
from kafkactor.timer import TimerTask
from tests.network.test_socket_server import StubApis, answer
from tests.network.wire import (
    WAIT_S,
    WireClient,
    api_versions_request,
    encode_request,
    metadata_request,
    sasl_authenticate_request,
    sasl_handshake_request,
    sized,
)
from tests.replication.support import EventLog, captured_events, wait_until
from tests.security.sasl_support import (
    PLAIN_USERS,
    authenticate_frame,
    handshake_frame,
    plain_token,
    scram_client,
    scram_lookup,
)
from tests.security.tls_support import Pki, make_pki

pytestmark = pytest.mark.timeout(60)

DELAY_MS = 100
HANDSHAKE_TIMEOUT_MS = 400


class RecordingTimer:
    """The broker's timer as the socket server sees it (`add(TimerTask)`): the test runs the
    tasks when it chooses."""

    def __init__(self) -> None:
        self.tasks: list[TimerTask] = []
        self._added = threading.Condition()

    def add(self, task: TimerTask) -> None:
        with self._added:
            self.tasks.append(task)
            self._added.notify_all()

    def run_next(self) -> TimerTask:
        with self._added:
            assert self._added.wait_for(lambda: self.tasks, WAIT_S), "no task was added"
            task = self.tasks.pop(0)
        task.run()
        return task


@pytest.fixture(autouse=True)
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def listeners(pki: Pki) -> tuple[ListenerConfig, ...]:
    return (
        ListenerConfig(name="PLAINTEXT", security_protocol=SecurityProtocol.PLAINTEXT),
        ListenerConfig(name="SSL", security_protocol=SecurityProtocol.SSL, ssl=pki.server()),
        ListenerConfig(
            name="MTLS", security_protocol=SecurityProtocol.SSL, ssl=pki.server("required")
        ),
        ListenerConfig(name="SASL_PLAINTEXT", security_protocol=SecurityProtocol.SASL_PLAINTEXT),
        ListenerConfig(
            name="SASL_SSL", security_protocol=SecurityProtocol.SASL_SSL, ssl=pki.server()
        ),
    )


@pytest.fixture
def timer() -> RecordingTimer:
    return RecordingTimer()


@pytest.fixture
def served(pki: Pki, timer: RecordingTimer) -> Iterator[tuple[SocketServer, StubApis]]:
    directory = Directory()
    apis = StubApis()
    directory.register(addresses.kafka_apis(1), apis)
    server = SocketServer(
        1,
        directory,
        SocketServerConfig(tls_handshake_timeout_ms=HANDSHAKE_TIMEOUT_MS),
        listeners=listeners(pki),
        sasl=SaslServerConfig(
            plain_users=PLAIN_USERS, connection_failed_authentication_delay_ms=DELAY_MS
        ),
        scram=scram_lookup,
        timer=timer,
    ).start()
    try:
        yield server, apis
    finally:
        server.stop()


class TlsWireClient(WireClient):
    """A WireClient over TLS (the handshake done before it returns)."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        super().__init__(host, port)
        self.sock = context.wrap_socket(self.sock, server_hostname="localhost")


def connect(server: SocketServer, listener: str, pki: Pki, **client: Any) -> WireClient:
    port = server.ports[listener]
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        return TlsWireClient("127.0.0.1", port, client_context(pki.client(**client)))
    return WireClient("127.0.0.1", port)


def api_versions_reaches(apis: StubApis, client: WireClient, server: SocketServer) -> RequestHeader:
    """An ApiVersions request goes through to KafkaApis, is answered, and its header is
    returned."""
    client.send_request(ApiKey.API_VERSIONS, 0, api_versions_request(0), 41)
    request = apis.next()
    answer(server, request)
    correlation_id, body = client.read_response(ApiKey.API_VERSIONS, 0)
    assert correlation_id == 41 and body.error_code == ErrorCode.NONE
    return request.header


def plain_login(client: WireClient, user: str, password: str) -> Any:
    """SaslHandshake v1 then SaslAuthenticate v2; the SaslAuthenticate response."""
    assert client.call(ApiKey.SASL_HANDSHAKE, 1, sasl_handshake_request(1, "PLAIN")).error_code == 0
    client.send_request(
        ApiKey.SASL_AUTHENTICATE, 2, sasl_authenticate_request(2, plain_token(user, password)), 2
    )
    return client


# -- listeners ------------------------------------------------------------------------------------


def test_each_listener_has_its_own_port(served: tuple[SocketServer, StubApis]) -> None:
    server, _ = served
    assert set(server.ports) == {"PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL"}
    assert len(set(server.ports.values())) == 5 and all(server.ports.values())
    assert (server.host, server.port) == ("127.0.0.1", server.ports["PLAINTEXT"])


def test_without_listeners_one_plaintext_listener_as_before() -> None:
    directory = Directory()
    server = SocketServer(1, directory).start()
    try:
        assert list(server.ports) == ["PLAINTEXT"]
        assert server.port == server.ports["PLAINTEXT"] != 0
    finally:
        server.stop()


def test_plaintext_requests_carry_anonymous_and_the_listener(
    served: tuple[SocketServer, StubApis], pki: Pki
) -> None:
    server, apis = served
    with connect(server, "PLAINTEXT", pki) as client:
        header = api_versions_reaches(apis, client, server)
    assert (header.principal, header.listener) == (ANONYMOUS, "PLAINTEXT")


# -- TLS ------------------------------------------------------------------------------------------


def test_tls_without_a_client_certificate_is_anonymous(
    served: tuple[SocketServer, StubApis], pki: Pki
) -> None:
    server, apis = served
    with connect(server, "SSL", pki) as client:
        header = api_versions_reaches(apis, client, server)
    assert (header.principal, header.listener) == (ANONYMOUS, "SSL")


def test_a_client_certificate_is_the_principal(
    served: tuple[SocketServer, StubApis], pki: Pki
) -> None:
    server, apis = served
    with connect(server, "MTLS", pki, certificate=True) as client:
        header = api_versions_reaches(apis, client, server)
    assert header.principal == KafkaPrincipal.user("CN=client,OU=clients,O=kafkactor")
    assert header.listener == "MTLS"


def test_a_required_client_certificate_that_is_missing_closes_the_connection(
    served: tuple[SocketServer, StubApis], pki: Pki, events: EventLog
) -> None:
    server, apis = served
    # TLS 1.3: the client hears of the refusal after its side of the handshake
    with (
        pytest.raises((ssl.SSLError, ConnectionError, AssertionError)),
        connect(server, "MTLS", pki) as client,
    ):
        client.send_request(ApiKey.API_VERSIONS, 0, api_versions_request(0), 1)
        client.read_frame()
    assert apis.none_within()
    wait_until(lambda: events.named("network.tls_handshake_failed", listener="MTLS"))


def _client_hello() -> bytes:
    """The first flight of a real TLS client."""
    bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(bio_in, bio_out, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        hello.do_handshake()
    return bio_out.read()


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("garbage", b"\x00\x00\x00\x0e" + b"not a tls hello"),
        ("http", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("stopped-mid-handshake", _client_hello()[:20]),
        ("nothing", b""),
    ],
    ids=["garbage", "http", "stopped-mid-handshake", "nothing"],
)
def test_a_bad_or_stalled_tls_handshake_closes_only_its_connection(
    served: tuple[SocketServer, StubApis], pki: Pki, events: EventLog, name: str, sent: bytes
) -> None:
    server, apis = served
    with connect(server, "SSL", pki) as healthy:
        bad = socket.create_connection(("127.0.0.1", server.ports["SSL"]), timeout=WAIT_S)
        try:
            bad.sendall(sent)
            bad.settimeout(WAIT_S)
            received = b""
            while chunk := _recv(bad):  # the server's alert, if any, then the close
                received += chunk
        finally:
            bad.close()
        assert api_versions_reaches(apis, healthy, server).listener == "SSL"
    (failed,) = wait_until(lambda: events.named("network.tls_handshake_failed", listener="SSL"))
    assert failed["client_address"].startswith("127.0.0.1:")
    assert failed["reason"]
    if name in ("stopped-mid-handshake", "nothing"):
        assert "longer than" in failed["reason"] or "Timeout" in failed["reason"]


def test_a_handshake_the_server_cuts_short_is_not_a_failed_handshake(
    pki: Pki, events: EventLog
) -> None:
    """An idle close (connections.max.idle.ms shorter than the handshake bound) ends a stalled
    handshake: the close says why, no handshake failure is claimed."""
    directory = Directory()
    tls = ListenerConfig(name="SSL", security_protocol=SecurityProtocol.SSL, ssl=pki.server())
    config = SocketServerConfig(connections_max_idle_ms=200, tls_handshake_timeout_ms=30_000)
    server = SocketServer(1, directory, config, listeners=(tls,)).start()
    stalled = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S)
    try:
        stalled.sendall(_client_hello()[:20])
        assert _recv(stalled) == b""
        (closed,) = wait_until(lambda: events.named("network.connection_closed"))
        assert closed["reason"] == "idle for longer than connections.max.idle.ms"
        wait_until(lambda: server.connection_count == 0)
    finally:
        stalled.close()
        server.stop()
    assert not events.named("network.tls_handshake_failed")


def test_a_tls_client_that_ignores_the_close_is_cut_off(pki: Pki) -> None:
    """The server closes a TLS connection (a failed authentication, no delay): a client that
    never answers its close_notify holds the connection no longer than the TLS bound."""
    directory = Directory()
    sasl_ssl = ListenerConfig(
        name="SASL_SSL", security_protocol=SecurityProtocol.SASL_SSL, ssl=pki.server()
    )
    server = SocketServer(
        1,
        directory,
        SocketServerConfig(tls_handshake_timeout_ms=300),
        listeners=(sasl_ssl,),
        sasl=SaslServerConfig(plain_users=PLAIN_USERS),
    ).start()
    try:
        with connect(server, "SASL_SSL", pki) as client:
            plain_login(client, "alice", "wrong")
            _, body = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
            assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            wait_until(lambda: server.connection_count == 0, timeout_s=3.0)
    finally:
        server.stop()


def _recv(sock: socket.socket) -> bytes:
    try:
        return sock.recv(4096)
    except ConnectionResetError:
        return b""


# -- SASL -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_plain_then_every_request_carries_the_principal(
    served: tuple[SocketServer, StubApis], pki: Pki, events: EventLog, listener: str
) -> None:
    server, apis = served
    with connect(server, listener, pki) as client:
        plain_login(client, "alice", "alice-secret")
        _, body = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        assert body.error_code == ErrorCode.NONE
        header = api_versions_reaches(apis, client, server)
    assert (header.principal, header.listener) == (KafkaPrincipal.user("alice"), listener)
    (authenticated,) = events.named("security.authenticated", listener=listener)
    assert authenticated["principal"] == "User:alice"
    assert authenticated["mechanism"] == "PLAIN"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_over_sasl_ssl(
    served: tuple[SocketServer, StubApis], pki: Pki, mechanism: str
) -> None:
    server, apis = served
    with connect(server, "SASL_SSL", pki, certificate=True) as client:
        client.send(sized(handshake_frame(mechanism, 1, 1)))
        scram = scram_client(mechanism, "bob", "bob-secret")
        client.read_response(ApiKey.SASL_HANDSHAKE, 1)
        client.send(sized(authenticate_frame(scram.get_client_first().encode(), 1, 2)))
        _, first = client.read_response(ApiKey.SASL_AUTHENTICATE, 1)
        scram.set_server_first(bytes(first.auth_bytes).decode())
        client.send(sized(authenticate_frame(scram.get_client_final().encode(), 1, 3)))
        _, final = client.read_response(ApiKey.SASL_AUTHENTICATE, 1)
        assert final.error_code == ErrorCode.NONE
        scram.set_server_final(bytes(final.auth_bytes).decode())
        header = api_versions_reaches(apis, client, server)
    # the SASL principal, not the client certificate's (Kafka's principal builder)
    assert header.principal == KafkaPrincipal.user("bob")


def test_a_wrong_password_is_answered_and_closed_after_the_delay(
    served: tuple[SocketServer, StubApis], pki: Pki, timer: RecordingTimer, events: EventLog
) -> None:
    server, apis = served
    with connect(server, "SASL_PLAINTEXT", pki) as client:
        plain_login(client, "alice", "not-alices-password")
        (failed,) = wait_until(lambda: events.named("security.authentication_failed"))
        assert client.is_open_after(0.2)  # held, silent, until the timer's task runs
        task = timer.run_next()
        assert task.delay_ms == DELAY_MS
        _, body = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert body.error_message == "Authentication failed: Invalid username or password"
        assert client.read_until_closed() == b""
    assert apis.none_within(0.1)
    assert failed["mechanism"] == "PLAIN" and failed["error"] == "SASL_AUTHENTICATION_FAILED"
    assert "not-alices-password" not in str(events.all())


@pytest.mark.parametrize(
    "frame",
    [
        authenticate_frame(plain_token("alice", "alice-secret")),
        encode_request(ApiKey.METADATA, 1, metadata_request(1, ["t"])),
    ],
    ids=["sasl-authenticate-first", "metadata-first"],
)
def test_a_request_before_the_handshake_closes_after_the_delay_without_an_answer(
    served: tuple[SocketServer, StubApis],
    pki: Pki,
    timer: RecordingTimer,
    events: EventLog,
    frame: bytes,
) -> None:
    server, apis = served
    with connect(server, "SASL_PLAINTEXT", pki) as client:
        client.send(sized(frame))
        (failed,) = wait_until(lambda: events.named("security.authentication_failed"))
        assert failed["error"] == "ILLEGAL_SASL_STATE"
        timer.run_next()
        assert client.read_until_closed() == b""
    assert apis.none_within(0.1)


@pytest.mark.parametrize(
    "sent",
    [sized(b"\xff" * 12), sized(b""), b"\x7f\xff\xff\xff"],
    ids=["garbage-frame", "empty-frame", "size-over-limit"],
)
def test_malformed_sasl_frames_close_only_their_connection(
    served: tuple[SocketServer, StubApis], pki: Pki, events: EventLog, sent: bytes
) -> None:
    server, apis = served
    with connect(server, "SASL_PLAINTEXT", pki) as good:
        plain_login(good, "alice", "alice-secret")
        good.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        with connect(server, "SASL_PLAINTEXT", pki) as bad:
            bad.send(sent)
            assert bad.read_until_closed() == b""  # at once: no timer task needed
        assert api_versions_reaches(apis, good, server).principal == KafkaPrincipal.user("alice")


def test_without_a_timer_a_failed_authentication_closes_at_once(pki: Pki) -> None:
    directory = Directory()
    sasl = ListenerConfig(name="SASL_PLAINTEXT", security_protocol=SecurityProtocol.SASL_PLAINTEXT)
    server = SocketServer(
        1, directory, listeners=(sasl,), sasl=SaslServerConfig(plain_users=PLAIN_USERS)
    ).start()
    try:
        with WireClient("127.0.0.1", server.port) as client:
            plain_login(client, "alice", "wrong")
            _, body = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
            assert body.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert client.read_until_closed() == b""
    finally:
        server.stop()


# -- SaslHandshake / SaslAuthenticate reaching KafkaApis -----------------------------------------


def test_sasl_apis_reaching_kafka_apis_are_illegal_sasl_state() -> None:
    apis = KafkaApis(1)
    for version in (0, 1):
        header = RequestHeader(api_key=17, api_version=version, correlation_id=1, client_id="c")
        step = apis.handle(header, sasl_handshake_request(version, "PLAIN"))
        assert isinstance(step, Answer)
        assert step.body.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert tuple(step.body.mechanisms) == ()
    for version in (0, 1, 2):
        header = RequestHeader(api_key=36, api_version=version, correlation_id=1, client_id="c")
        step = apis.handle(header, sasl_authenticate_request(version))
        assert isinstance(step, Answer)
        assert step.body.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert step.body.error_message == (
            "SaslAuthenticate request received after successful authentication"
        )


def test_a_sasl_handshake_on_a_plaintext_listener_goes_to_kafka_apis(
    served: tuple[SocketServer, StubApis], pki: Pki
) -> None:
    server, apis = served
    with connect(server, "PLAINTEXT", pki) as client:
        client.send_request(ApiKey.SASL_HANDSHAKE, 1, sasl_handshake_request(1, "PLAIN"), 5)
        request = apis.next()
    assert request.header.api_key == ApiKey.SASL_HANDSHAKE


# -- a real client: librdkafka ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "bob", "bob-secret"),
        ("SCRAM-SHA-512", "carol", "carol secret, with = and ,"),
    ],
)
def test_librdkafka_authenticates(
    served: tuple[SocketServer, StubApis], pki: Pki, mechanism: str, user: str, password: str
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    server, apis = served
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{server.ports['SASL_SSL']}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }
    )
    try:
        request = apis.next()  # its first request after authentication (Metadata)
        assert request.header.principal == KafkaPrincipal.user(user)
        assert request.header.listener == "SASL_SSL"
    finally:
        producer.flush(0)


def test_librdkafka_hears_kafkas_message_for_a_wrong_password(pki: Pki, tmp_path: Path) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    directory = Directory()
    apis = StubApis()
    directory.register(addresses.kafka_apis(1), apis)
    sasl = ListenerConfig(name="SASL_PLAINTEXT", security_protocol=SecurityProtocol.SASL_PLAINTEXT)
    server = SocketServer(
        1, directory, listeners=(sasl,), sasl=SaslServerConfig(plain_users=PLAIN_USERS)
    ).start()
    errors: list[Any] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{server.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "wrong",
            "error_cb": errors.append,
        }
    )
    try:
        wait_until(lambda: producer.poll(0.1) is not None and errors, message="an auth error")
        error = errors[0]
        assert error.code() == confluent_kafka.KafkaError._AUTHENTICATION
        assert "Authentication failed: Invalid username or password" in error.str()
        assert apis.none_within(0.1)
    finally:
        server.stop()


# -- a real client: kafka-python 3 ----------------------------------------------------------------


class MetadataAnswers:
    """Answers every Metadata request that reaches KafkaApis with this one broker and no topics
    (enough for kafka-python's bootstrap), keeping each request's principal."""

    def __init__(self, server: SocketServer, apis: StubApis) -> None:
        self.server, self.apis = server, apis
        self.principals: list[KafkaPrincipal] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MetadataAnswers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                request = self.apis.requests.get(timeout=0.05)
            except queue.Empty:
                continue
            self.principals.append(request.header.principal)
            version = request.header.api_version
            schema = response_type(ApiKey.METADATA, version)
            broker = nested(schema, "MetadataResponseBroker")
            body = build(
                schema,
                throttle_time=datetime.timedelta(0),
                brokers=(broker(node_id=1, host="127.0.0.1", port=self.server.port, rack=None),),
                cluster_id="kafkactor",
                controller_id=1,
                topics=(),
                cluster_authorized_operations=-(2**31),
            )
            frame = encode_response(ApiKey.METADATA, version, request.header.correlation_id, body)
            self.server.tell(
                NetworkResponse(
                    connection_id=request.connection_id, sequence=request.sequence, frame=frame
                )
            )


class ThreadTimer:
    """Runs each task on a thread of its own after its delay (the broker's timer, for a client
    that must see the failure response before the close, as with Kafka's delay)."""

    def add(self, task: TimerTask) -> None:
        thread = threading.Timer(task.delay_ms / 1000, task.run)
        thread.daemon = True
        thread.start()


@pytest.fixture
def sasl_plaintext() -> Iterator[tuple[SocketServer, StubApis]]:
    directory = Directory()
    apis = StubApis()
    directory.register(addresses.kafka_apis(1), apis)
    sasl = ListenerConfig(name="SASL_PLAINTEXT", security_protocol=SecurityProtocol.SASL_PLAINTEXT)
    server = SocketServer(
        1,
        directory,
        listeners=(sasl,),
        sasl=SaslServerConfig(plain_users=PLAIN_USERS),
        scram=scram_lookup,
        timer=ThreadTimer(),
    ).start()
    try:
        yield server, apis
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("PLAIN", "alice", "alice-secret"),
        ("SCRAM-SHA-256", "bob", "bob-secret"),
        ("SCRAM-SHA-512", "carol", "carol secret, with = and ,"),
    ],
)
def test_kafka_python_authenticates(
    sasl_plaintext: tuple[SocketServer, StubApis], mechanism: str, user: str, password: str
) -> None:
    kafka = pytest.importorskip("kafka")
    server, apis = sasl_plaintext
    with MetadataAnswers(server, apis) as answers:
        admin = kafka.KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{server.port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username=user,
            sasl_plain_password=password,
        )
        try:
            assert admin.list_topics() == []
        finally:
            admin.close()
    assert answers.principals
    assert set(answers.principals) == {KafkaPrincipal.user(user)}


def test_kafka_python_hears_kafkas_message_for_a_wrong_password(
    sasl_plaintext: tuple[SocketServer, StubApis], caplog: pytest.LogCaptureFixture
) -> None:
    kafka = pytest.importorskip("kafka")
    server, apis = sasl_plaintext
    caplog.set_level(logging.WARNING, logger="kafka")
    # kafka-python retries until its bootstrap timeout; the first failure must come before it
    # even on a loaded machine (the SCRAM exchange, then the failed-authentication delay)
    with pytest.raises(kafka.errors.KafkaTimeoutError):
        kafka.KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{server.port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256",
            sasl_plain_username="bob",
            sasl_plain_password="wrong",
            bootstrap_timeout_ms=4000,
        )
    assert (
        "SaslAuthenticationFailedError: Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-256"
    ) in caplog.text
    assert apis.none_within(0.05)


# -- random frames on the wire, at each step of the exchange --------------------------------------


def _drive(client: WireClient, state: str) -> None:
    if state == "initial":
        return
    if state == "after-api-versions":
        client.call(ApiKey.API_VERSIONS, 3, api_versions_request(3))
        return
    client.call(ApiKey.SASL_HANDSHAKE, 1, sasl_handshake_request(1, "SCRAM-SHA-256"))
    if state == "scram-mid-exchange":
        first = scram_client("SCRAM-SHA-256", "bob", "bob-secret").get_client_first()
        client.call(ApiKey.SASL_AUTHENTICATE, 2, sasl_authenticate_request(2, first.encode()))


@pytest.mark.parametrize(
    "state", ["initial", "after-api-versions", "handshaken", "scram-mid-exchange"]
)
def test_random_frames_at_each_step_close_only_their_connection(
    sasl_plaintext: tuple[SocketServer, StubApis], state: str
) -> None:
    """100 random frames per step, each on a connection of its own: answered or closed, never
    handed to KafkaApis, and the listener still authenticates a client afterwards."""
    server, apis = sasl_plaintext
    rng = random.Random(f"wire-fuzz-{state}")
    for _ in range(100):
        with WireClient("127.0.0.1", server.port) as client:
            _drive(client, state)
            client.send(sized(rng.randbytes(rng.randrange(0, 40))))
            client.sock.settimeout(0.05)
            with contextlib.suppress(TimeoutError, ConnectionError):
                client.sock.recv(65536)
    assert apis.none_within(0.05)
    with WireClient("127.0.0.1", server.port) as healthy:
        plain_login(healthy, "alice", "alice-secret")
        _, body = healthy.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        assert body.error_code == ErrorCode.NONE
