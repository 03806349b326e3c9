"""The socket server against real sockets: what a Kafka client sees on the wire.

Most tests talk to a live `Cluster(1, listen="127.0.0.1", zookeeper=None)` through raw sockets
(tests/network/wire.py). The limits the Cluster has no setting for (connections.max.idle.ms,
queued.max.requests, the per-connection in-flight limit) are tested on a `SocketServer` of
their own, in front of either a real minimal `Broker` or a stub KafkaApis that keeps each
request until the test answers it, in any order it likes.
"""

from __future__ import annotations

import queue
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkactor.actors.broker import Broker
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.messages import Envelope, ErrorCode
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import encode_response, response_type
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse
from kafkactor.network.socket_server import SocketServer, SocketServerConfig
from kafkactor.testing import Cluster
from tests.network.wire import (
    TOPIC,
    WAIT_S,
    WireClient,
    api_versions_request,
    batch,
    decode_response,
    encode_request,
    fetch_request,
    make,
    metadata_request,
    produce_request,
    raw_header,
    request_frame,
    sample_request,
    served_range,
    sized,
)
from tests.replication.support import EventLog, captured_events, wait_until

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes' default
PENDING_S = 0.3  # how long something that must not happen is watched for


@pytest.fixture(autouse=True)
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """One broker with a listener and a one-partition topic, `events`."""
    with Cluster(1, listen="127.0.0.1", zookeeper=None) as started:
        started.create_topic(TOPIC)
        yield started


def connect(cluster: Cluster, broker: int = 1) -> WireClient:
    host, port = cluster.brokers[broker].endpoint
    return WireClient(host, port)


def socket_server(cluster: Cluster, broker: int = 1) -> SocketServer:
    server = cluster.brokers[broker].socket_server
    assert server is not None
    return server


def api_versions_served(client: WireClient, correlation_id: int = 1) -> bool:
    body = client.call(ApiKey.API_VERSIONS, 3, api_versions_request(3), correlation_id)
    listed = {(k.api_key, k.min_version, k.max_version) for k in body.api_keys}
    return body.error_code == ErrorCode.NONE and listed == {
        (api, low, high) for api, (low, high) in SUPPORTED.items()
    }


def produce_offset(client: WireClient, *values: bytes, correlation_id: int = 9) -> int:
    """Produce with acks=-1 on the wire; the base offset the broker answers."""
    body = client.call(
        ApiKey.PRODUCE, 8, produce_request(8, batch(*values), acks=-1), correlation_id
    )
    (partition,) = body.responses[0].partition_responses
    assert partition.error_code == ErrorCode.NONE, partition
    return int(partition.base_offset)


def broker_actors(cluster: Cluster, broker: int = 1) -> set[str]:
    """The addresses of a broker's live actors (and of its socket server)."""
    prefix = addresses.broker_prefix(broker) + "/"
    return {a for a in cluster.directory.addresses() if a.startswith(prefix)}


def healthy(cluster: Cluster, actors_before: set[str]) -> None:
    """The broker still serves a fresh connection and appends a produce, and every actor it
    had is still there (a fuzzed Metadata request may have auto-created a partition: more)."""
    with connect(cluster) as fresh:
        assert api_versions_served(fresh)
        first = produce_offset(fresh, b"still")
        assert produce_offset(fresh, b"serving") == first + 1
    missing = actors_before - broker_actors(cluster)
    assert not missing, f"actors gone: {sorted(missing)}"


def bad_requests(events: EventLog) -> list[dict[str, Any]]:
    return events.named("network.bad_request", broker=1)


# -- ApiVersions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_v0_to_v3_are_answered(cluster: Cluster, version: int) -> None:
    with connect(cluster) as client:
        body = client.call(ApiKey.API_VERSIONS, version, api_versions_request(version), 41)
    assert body.error_code == ErrorCode.NONE
    listed = {(k.api_key, k.min_version, k.max_version) for k in body.api_keys}
    assert listed == {(api, low, high) for api, (low, high) in SUPPORTED.items()}


@pytest.mark.parametrize("version", [4, 9, 32767])
def test_api_versions_newer_than_v3_gets_the_v0_unsupported_version_body(
    cluster: Cluster, version: int
) -> None:
    """KIP-511: what kafka-python and librdkafka rely on to find the version to speak."""
    if version == 4:  # as a client writes it (flexible header v2, tagged fields)
        frame = request_frame(ApiKey.API_VERSIONS, 4, api_versions_request(4), correlation_id=7)
    else:  # a body we cannot know the shape of
        frame = sized(raw_header(ApiKey.API_VERSIONS, version, 7, b"future") + b"\x00\x01?\x00")
    with connect(cluster) as client:
        client.send(frame)
        correlation_id, body = decode_response(client.read_frame(), ApiKey.API_VERSIONS, 0)
        assert correlation_id == 7
        assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 3)]
        # the connection stays open: the client asks again, in a version we speak
        assert api_versions_served(client, correlation_id=8)


# -- pipelining ----------------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_request_order(
    cluster: Cluster, events: EventLog
) -> None:
    # a long poll on an empty partition first (answered after max_wait), then fast ones
    slow = fetch_request(11, max_wait_ms=400, min_bytes=1024 * 1024)
    requests: list[tuple[int, int, Any]] = [(ApiKey.FETCH, 11, slow)]
    for i in range(20):
        requests.append(
            [
                (ApiKey.METADATA, 8, metadata_request(8, [TOPIC])),
                (ApiKey.API_VERSIONS, 3, api_versions_request(3)),
                (ApiKey.METADATA, 0, metadata_request(0, [])),
                (ApiKey.API_VERSIONS, 0, api_versions_request(0)),
            ][i % 4]
        )
    stream = b"".join(
        request_frame(api, version, body, correlation_id=100 + i)
        for i, (api, version, body) in enumerate(requests)
    )
    with connect(cluster) as client:
        started = time.monotonic()
        client.send(stream)  # back to back, before reading anything
        answered = [client.read_response(api, version)[0] for api, version, _ in requests]
        elapsed = time.monotonic() - started
    assert answered == list(range(100, 100 + len(requests)))
    assert elapsed >= 0.35  # the fetch did wait, so the fast answers were held behind it
    # ...and they were ready first: KafkaApis answered the fetch after the others
    fetch_trace = events.named("network.request", correlation_id=100)[0]["trace_id"]
    sent = [e["trace_id"] for e in events.named("msg.send", msg_type="NetworkResponse")]
    assert sent.index(fetch_trace) > 0


def test_pipelined_produces_are_appended_and_answered_in_order(cluster: Cluster) -> None:
    stream = b"".join(
        request_frame(
            ApiKey.PRODUCE, 8, produce_request(8, batch(b"v%d" % i), acks=-1), correlation_id=i
        )
        for i in range(30)
    )
    with connect(cluster) as client:
        client.send(stream)
        answers = [client.read_response(ApiKey.PRODUCE, 8) for _ in range(30)]
    assert [cid for cid, _ in answers] == list(range(30))
    offsets = [body.responses[0].partition_responses[0].base_offset for _, body in answers]
    assert offsets == list(range(30))  # appended in request order too
    starts = {body.responses[0].partition_responses[0].log_start_offset for _, body in answers}
    assert starts == {0}  # the leader's log start, as Produce v5+ carries it


# -- frames that cannot be served ----------------------------------------------------------------


@pytest.mark.parametrize("size", [MAX_REQUEST_BYTES + 1, 2**31 - 1, -1])
def test_a_size_prefix_over_the_limit_closes_the_connection_before_the_body(
    cluster: Cluster, events: EventLog, size: int
) -> None:
    actors = broker_actors(cluster)
    with connect(cluster) as other, connect(cluster) as client:
        assert api_versions_served(other)
        client.send(struct.pack(">i", size))  # the prefix alone: no body follows
        assert client.read_until_closed() == b""  # closed, nothing answered
        assert api_versions_served(other, correlation_id=2)  # the other one is still served
    (event,) = bad_requests(events)
    assert event["bytes"] == size
    assert "negative" in event["reason"] or "socket.request.max.bytes" in event["reason"]
    healthy(cluster, actors)


def _truncated_produce() -> bytes:
    whole = encode_request(ApiKey.PRODUCE, 8, produce_request(8, batch(b"x" * 50), acks=1))
    return sized(whole[:-20])  # the size prefix agrees: the request inside is cut short


BAD_FRAMES = {
    "garbage": sized(bytes(range(256)) * 2),
    "zero-length": sized(b""),
    "unknown-api-key": sized(raw_header(1000, 1, 1, b"client") + b"\x00" * 20),
    "produce-v2": sized(raw_header(ApiKey.PRODUCE, 2, 1, b"client") + b"\x00" * 20),
    "fetch-v3": sized(raw_header(ApiKey.FETCH, 3, 1, b"client") + b"\x00" * 20),
    "malformed-header": sized(struct.pack(">hhih", ApiKey.METADATA, 1, 1, 300) + b"abc"),
    "truncated-body": _truncated_produce(),
}


@pytest.mark.parametrize("frame", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_a_bad_frame_closes_only_its_connection(
    cluster: Cluster, events: EventLog, frame: bytes
) -> None:
    server = socket_server(cluster)
    actors = broker_actors(cluster)
    with connect(cluster) as other, connect(cluster) as client:
        assert api_versions_served(other)
        assert api_versions_served(client)  # a good request first, on the same connection
        client.send(frame)
        assert client.read_until_closed() == b""
        (event,) = bad_requests(events)
        assert event["bytes"] == len(frame) - 4
        assert event["reason"]
        # the other connection is served, reads and writes alike
        assert api_versions_served(other, correlation_id=2)
        produce_offset(other, b"after a bad frame")
        wait_until(lambda: server.connection_count == 1, message="the bad connection gone")
    healthy(cluster, actors)
    assert broker_actors(cluster) == actors


# -- clients that go away ------------------------------------------------------------------------


def test_a_client_that_disconnects_mid_request_leaves_the_server_healthy(
    cluster: Cluster,
) -> None:
    server = socket_server(cluster)
    actors = broker_actors(cluster)
    produce = request_frame(ApiKey.PRODUCE, 8, produce_request(8, batch(b"gone"), acks=-1))
    slow = request_frame(
        ApiKey.FETCH, 11, fetch_request(11, max_wait_ms=300, min_bytes=1024 * 1024)
    )
    for sent in (
        produce[: len(produce) // 2],  # half a frame
        produce[:2],  # half a size prefix
        produce,  # a whole request, gone before its answer
        slow,  # a long poll, gone while it waits
        slow + produce + produce[:10],  # several, and a part
    ):
        client = connect(cluster)
        client.send(sent)
        client.close()
    wait_until(lambda: server.connection_count == 0, message="every connection closed")
    healthy(cluster, actors)


def test_a_client_that_resets_the_connection_leaves_the_server_healthy(cluster: Cluster) -> None:
    server = socket_server(cluster)
    actors = broker_actors(cluster)
    for _ in range(3):
        client = connect(cluster)
        client.send(request_frame(ApiKey.METADATA, 8, metadata_request(8, None)))
        # SO_LINGER 0: close() sends a RST, not a FIN
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
    wait_until(lambda: server.connection_count == 0, message="every connection closed")
    healthy(cluster, actors)


# -- a live fuzz ---------------------------------------------------------------------------------

# Mutations of requests whose side effects stay small (no CreateTopics, no DeleteTopics: a
# mutated partition count or name could create or delete anything)
_FUZZED_APIS = (
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.METADATA,
    ApiKey.API_VERSIONS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
)
_FUZZ_SEEDS = [
    encode_request(api, version, sample_request(api, version), correlation_id=3)
    for api in _FUZZED_APIS
    for version in (served_range(api)[0], served_range(api)[-1])
]


@st.composite
def wire_bytes(draw: st.DrawFn) -> bytes:
    """What a broken or hostile client might send: random bytes, or a request with some bytes
    changed, cut or inserted, behind a size prefix that may or may not agree."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    payload = bytearray(draw(st.sampled_from(_FUZZ_SEEDS)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=max(0, len(payload) - 1)))
        kind = draw(st.sampled_from(["flip", "cut", "insert"]))
        if kind == "flip" and payload:
            payload[at] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "cut":
            payload = payload[:at]
        else:
            payload[at:at] = draw(st.binary(min_size=1, max_size=6))
    prefix = draw(st.sampled_from(["agrees", "agrees", "random"]))
    size = len(payload) if prefix == "agrees" else draw(st.integers(-(2**31), 2**31 - 1))
    return struct.pack(">i", size) + bytes(payload)


@pytest.mark.timeout(120)
def test_random_and_mutated_frames_never_stop_the_listener() -> None:
    with Cluster(1, listen="127.0.0.1", zookeeper=None) as cluster:
        cluster.create_topic(TOPIC)
        server = socket_server(cluster)
        actors = broker_actors(cluster)

        @settings(
            max_examples=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(sent=wire_bytes())
        def check(sent: bytes) -> None:
            tried.append(sent)
            with connect(cluster) as client:
                client.send(sent)
                client.sock.shutdown(socket.SHUT_WR)  # done sending: the broker closes too
                client.read_until_closed()
            with connect(cluster) as fresh:
                assert api_versions_served(fresh)

        tried: list[bytes] = []
        check()
        assert len(tried) >= 50
        wait_until(lambda: server.connection_count == 0, message="every connection closed")
        healthy(cluster, actors)


# -- a SocketServer of its own, in front of a stub KafkaApis -------------------------------------


class StubApis:
    """Stands in for the KafkaApis actor: keeps each request until the test answers it."""

    def __init__(self) -> None:
        self.requests: queue.Queue[NetworkRequest] = queue.Queue()

    def tell(self, message: Any) -> None:
        assert isinstance(message, Envelope)
        assert isinstance(message.payload, NetworkRequest)
        self.requests.put(message.payload)

    def next(self) -> NetworkRequest:
        try:
            return self.requests.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no request reached KafkaApis within {WAIT_S}s") from None

    def none_within(self, watch_s: float = PENDING_S) -> bool:
        try:
            request = self.requests.get(timeout=watch_s)
        except queue.Empty:
            return True
        self.requests.put(request)
        return False


@contextmanager
def stub_server(
    *,
    register: bool = True,
    queued_max_requests: int = 500,
    max_in_flight_per_connection: int = 16,
    connections_max_idle_ms: int = 600_000,
) -> Iterator[tuple[SocketServer, StubApis, Directory]]:
    directory = Directory()
    apis = StubApis()
    if register:
        directory.register(addresses.kafka_apis(1), apis)
    config = SocketServerConfig(
        queued_max_requests=queued_max_requests,
        max_in_flight_per_connection=max_in_flight_per_connection,
        connections_max_idle_ms=connections_max_idle_ms,
    )
    server = SocketServer(1, directory, config).start()
    try:
        yield server, apis, directory
    finally:
        server.stop()


def stub_client(server: SocketServer) -> WireClient:
    return WireClient(server.host, server.port)


def send_api_versions(client: WireClient, correlation_id: int) -> None:
    client.send_request(ApiKey.API_VERSIONS, 0, api_versions_request(0), correlation_id)


def answer(server: SocketServer, request: NetworkRequest, *, close: bool = False) -> None:
    """Answer an ApiVersions v0 request (an empty list of APIs: only its order matters)."""
    schema = response_type(ApiKey.API_VERSIONS, 0)
    body = make(schema, error_code=ErrorCode.NONE, api_keys=())
    frame = encode_response(ApiKey.API_VERSIONS, 0, request.header.correlation_id, body)
    server.tell(
        NetworkResponse(
            connection_id=request.connection_id,
            sequence=request.sequence,
            frame=frame,
            close=close,
            reason="told to" if close else "",
        )
    )


def no_answer(server: SocketServer, request: NetworkRequest) -> None:
    """A request that gets no response (a produce with acks=0)."""
    server.tell(
        NetworkResponse(connection_id=request.connection_id, sequence=request.sequence, frame=None)
    )


def read_ids(client: WireClient, count: int) -> list[int]:
    return [client.read_response(ApiKey.API_VERSIONS, 0)[0] for _ in range(count)]


def test_a_request_carries_the_address_of_the_client_that_sent_it() -> None:
    """Not on the wire: the socket server adds the connection's peer (Kafka's
    RequestContext.clientAddress), which DescribeGroups shows as each member's client host."""
    with stub_server() as (server, apis, _), stub_client(server) as client:
        client.send(request_frame(ApiKey.API_VERSIONS, 0, api_versions_request(0)))
        assert apis.next().header.client_host == "127.0.0.1"


def test_answers_in_any_order_are_written_in_request_order() -> None:
    with stub_server() as (server, apis, _), stub_client(server) as client:
        client.send(
            b"".join(
                request_frame(ApiKey.API_VERSIONS, 0, api_versions_request(0), correlation_id=i)
                for i in range(6)
            )
        )
        requests = [apis.next() for _ in range(6)]
        assert [r.header.correlation_id for r in requests] == list(range(6))
        for i in (5, 3, 4, 1):  # answered out of order: nothing can be written yet
            answer(server, requests[i])
        assert client.is_open_after(PENDING_S)  # (and nothing was sent meanwhile)
        no_answer(server, requests[2])  # an acks=0 produce in the middle: no frame at all
        answer(server, requests[0])
        assert read_ids(client, 5) == [0, 1, 3, 4, 5]


def test_a_close_after_an_answer_writes_the_earlier_answers_first() -> None:
    with stub_server() as (server, apis, _), stub_client(server) as client:
        for i in range(3):
            send_api_versions(client, i)
        requests = [apis.next() for _ in range(3)]
        answer(server, requests[2])
        answer(server, requests[1], close=True)
        answer(server, requests[0])
        assert read_ids(client, 2) == [0, 1]
        assert client.read_until_closed() == b""  # the one after the close is dropped


def test_an_idle_connection_is_closed_after_connections_max_idle_ms(events: EventLog) -> None:
    with stub_server(connections_max_idle_ms=200) as (server, _, _):
        started = time.monotonic()  # before the connection: its idle time cannot start earlier
        with stub_client(server) as client:
            assert client.read_until_closed() == b""
        assert time.monotonic() - started >= 0.2
    closed = events.named("network.connection_closed", broker=1)
    assert len(closed) == 1
    assert "connections.max.idle.ms" in closed[0]["reason"]


def test_a_connection_waiting_for_an_answer_is_not_idle() -> None:
    with (
        stub_server(connections_max_idle_ms=100) as (server, apis, _),
        stub_client(server) as client,
    ):
        send_api_versions(client, 1)
        request = apis.next()
        # three idle periods with no byte either way: the request is being worked on
        assert client.is_open_after(PENDING_S)
        answer(server, request)
        assert read_ids(client, 1) == [1]
        assert client.read_until_closed() == b""  # idle once answered: closed


def test_queued_max_requests_stops_reading_every_connection_until_answers_drain() -> None:
    with (
        stub_server(queued_max_requests=2) as (server, apis, _),
        stub_client(server) as a,
        stub_client(server) as b,
        stub_client(server) as c,
    ):
        send_api_versions(a, 1)
        first = apis.next()
        send_api_versions(b, 2)
        second = apis.next()  # two queued: the limit
        send_api_versions(c, 3)
        send_api_versions(a, 4)
        assert apis.none_within()  # not read: they wait in the sockets
        answer(server, first)
        assert read_ids(a, 1) == [1]
        third = apis.next()  # one answered, one more read
        assert apis.none_within()
        answer(server, second)
        fourth = apis.next()
        assert {third.header.correlation_id, fourth.header.correlation_id} == {3, 4}
        for request in (third, fourth):
            answer(server, request)
        assert read_ids(b, 1) == [2]
        assert read_ids(c, 1) == [3]
        assert read_ids(a, 1) == [4]


def test_a_new_connection_is_not_read_while_queued_max_requests_is_reached() -> None:
    with (
        stub_server(queued_max_requests=1) as (server, apis, _),
        stub_client(server) as a,
        stub_client(server) as late,
    ):
        send_api_versions(a, 1)
        held = apis.next()
        send_api_versions(late, 2)
        assert apis.none_within()
        answer(server, held)
        answer(server, apis.next())
        assert read_ids(late, 1) == [2]


def test_the_in_flight_limit_of_one_connection_stops_reading_it_alone() -> None:
    with (
        stub_server(max_in_flight_per_connection=2) as (server, apis, _),
        stub_client(server) as busy,
        stub_client(server) as other,
    ):
        send_api_versions(busy, 1)
        first = apis.next()
        send_api_versions(busy, 2)
        second = apis.next()
        send_api_versions(busy, 3)
        assert apis.none_within()  # two in flight on `busy`: its third waits
        send_api_versions(other, 10)
        assert apis.next().header.correlation_id == 10  # others are still read
        answer(server, first)
        third = apis.next()
        assert third.header.correlation_id == 3
        answer(server, second)
        answer(server, third)
        assert read_ids(busy, 3) == [1, 2, 3]


def test_a_request_the_broker_cannot_take_closes_its_connection_and_holds_no_capacity(
    events: EventLog,
) -> None:
    with stub_server(register=False, queued_max_requests=1) as (server, apis, directory):
        with stub_client(server) as refused:
            send_api_versions(refused, 1)  # no KafkaApis registered: nowhere to hand it on
            assert refused.read_until_closed() == b""
        (closed,) = events.named("network.connection_closed", broker=1)
        assert closed["reason"] == "the broker is not serving requests"
        directory.register(addresses.kafka_apis(1), apis)
        # the refused request was never queued, so the limit of one still holds
        with stub_client(server) as a, stub_client(server) as b:
            send_api_versions(a, 2)
            held = apis.next()
            send_api_versions(b, 3)
            assert apis.none_within()
            answer(server, held)
            answer(server, apis.next())
            assert read_ids(a, 1) == [2]
            assert read_ids(b, 1) == [3]


def test_requests_of_a_client_gone_before_its_answers_hold_no_capacity() -> None:
    with stub_server(queued_max_requests=3) as (server, apis, _):
        with stub_client(server) as gone:
            send_api_versions(gone, 1)
            send_api_versions(gone, 2)
            abandoned = [apis.next(), apis.next()]
        # below the limit, the connection is still read: its end is seen at once
        wait_until(lambda: server.connection_count == 0, message="the connection closed")
        for request in abandoned:  # late answers, for a connection that is gone
            answer(server, request)
        clients = [stub_client(server) for _ in range(4)]
        try:
            for n, client in enumerate(clients[:3]):
                send_api_versions(client, 10 + n)
            held = [apis.next() for _ in range(3)]  # the whole limit is free again...
            send_api_versions(clients[3], 13)
            assert apis.none_within()  # ...and is still the limit: counted off once only
            for request in held:
                answer(server, request)
            answer(server, apis.next())
            assert [read_ids(client, 1)[0] for client in clients] == [10, 11, 12, 13]
        finally:
            for client in clients:
                client.close()


def test_a_client_gone_while_reading_is_paused_is_cleaned_up_once_answered() -> None:
    # at the limit no connection is read, so a client's end is seen only when its answers
    # have drained; its capacity then comes back
    with stub_server(queued_max_requests=2) as (server, apis, _):
        with stub_client(server) as gone:
            send_api_versions(gone, 1)
            send_api_versions(gone, 2)
            abandoned = [apis.next(), apis.next()]
        for request in abandoned:
            answer(server, request)
        wait_until(lambda: server.connection_count == 0, message="the connection closed")
        with stub_client(server) as a, stub_client(server) as b:
            send_api_versions(a, 3)
            send_api_versions(b, 4)
            for request in (apis.next(), apis.next()):
                answer(server, request)
            assert read_ids(a, 1) == [3]
            assert read_ids(b, 1) == [4]


# -- a minimal Broker with tiny limits -----------------------------------------------------------


def test_with_tiny_queue_limits_many_pipelined_requests_are_all_answered_in_order(
    tmp_path: Path,
) -> None:
    broker = Broker(
        1,
        tmp_path / "broker-1",
        Directory(),
        listener=SocketServerConfig(queued_max_requests=2, max_in_flight_per_connection=1),
    ).start()
    try:
        host, port = broker.endpoint
        clients = [WireClient(host, port) for _ in range(3)]
        kinds = [
            (ApiKey.API_VERSIONS, 3, api_versions_request(3)),
            (ApiKey.METADATA, 8, metadata_request(8, None)),
            (ApiKey.API_VERSIONS, 0, api_versions_request(0)),
        ]
        count = 150
        for n, client in enumerate(clients):
            client.send(
                b"".join(request_frame(*kinds[(i + n) % 3], correlation_id=i) for i in range(count))
            )
        for n, client in enumerate(clients):
            ids = [client.read_response(*kinds[(i + n) % 3][:2])[0] for i in range(count)]
            assert ids == list(range(count))
            client.close()
    finally:
        broker.shutdown()
