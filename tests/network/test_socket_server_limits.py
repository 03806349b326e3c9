"""The socket server's limits across connections, as a client sees them: the request memory
pool (queued.max.request.bytes, KIP-72), max.connections / max.connections.per.ip, and a
throttled client's connection muted until a task on the broker's timer fires (KIP-219) —
last, a real producer and a real consumer held to their byte-rate quotas."""

from __future__ import annotations

import queue
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer

from kafkactor import zk_model
from kafkactor.actors.controller.entity_admin_zk import EntityAdminZkClient
from kafkactor.actors.runtime import Directory, addresses
from kafkactor.messages import Envelope, ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import encode_response, response_type
from kafkactor.network.request_channel import NetworkRequest, NetworkResponse
from kafkactor.network.socket_server import SocketServer, SocketServerConfig
from kafkactor.security.client_quota_manager import ClientQuotaManagerConfig, QuotaType
from kafkactor.security.entity_configs import QuotaEntity
from kafkactor.security.security_config import BrokerSecurityConfig
from kafkactor.testing import Cluster
from kafkactor.timer import TimerTask
from tests.network.wire import (
    WAIT_S,
    WireClient,
    api_versions_request,
    make,
    request_frame,
    request_schema,
)
from tests.replication.support import EventLog, captured_events, wait_until

pytestmark = pytest.mark.timeout(90)

MiB = 1024 * 1024
PENDING_S = 0.3  # how long something that must not happen is watched for


class StubApis:
    """Stands in for the KafkaApis actor: keeps each request until the test answers it."""

    def __init__(self) -> None:
        self.requests: queue.Queue[NetworkRequest] = queue.Queue()

    def tell(self, message: Any) -> None:
        assert isinstance(message, Envelope) and isinstance(message.payload, NetworkRequest)
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


class HeldTimer:
    """The broker's timer as the socket server uses it (`add(TimerTask)`): the test runs the
    tasks when it chooses."""

    def __init__(self) -> None:
        self.tasks: list[TimerTask] = []

    def add(self, task: TimerTask) -> None:
        self.tasks.append(task)


@contextmanager
def limited_server(
    config: SocketServerConfig | None = None, **limits: Any
) -> Iterator[tuple[SocketServer, StubApis]]:
    directory = Directory()
    apis = StubApis()
    directory.register(addresses.kafka_apis(1), apis)
    server = SocketServer(1, directory, config, **limits).start()
    try:
        yield server, apis
    finally:
        server.stop()


@pytest.fixture
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


def answer(server: SocketServer, request: NetworkRequest, *, throttle_ms: int = 0) -> None:
    """Answer an ApiVersions v0 request (an empty list of APIs)."""
    body = make(response_type(ApiKey.API_VERSIONS, 0), error_code=ErrorCode.NONE, api_keys=())
    frame = encode_response(ApiKey.API_VERSIONS, 0, request.header.correlation_id, body)
    server.tell(
        NetworkResponse(
            connection_id=request.connection_id,
            sequence=request.sequence,
            frame=frame,
            throttle_ms=throttle_ms,
        )
    )


def padded(pad: int) -> Any:
    schema = request_schema(ApiKey.API_VERSIONS, 3)
    return make(schema, client_software_name="x" * pad, client_software_version="1")


def api_versions(client: WireClient, correlation_id: int, *, pad: int = 0) -> None:
    """ApiVersions v0, or v3 with a client software name of `pad` bytes to make it larger."""
    if pad:
        client.send_request(ApiKey.API_VERSIONS, 3, padded(pad), correlation_id)
    else:
        client.send_request(ApiKey.API_VERSIONS, 0, api_versions_request(0), correlation_id)


def vm_rss() -> int:
    """This process's resident memory (bytes), from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def closed_by_broker(sock: socket.socket, timeout_s: float = WAIT_S) -> bool:
    """Whether the broker closed `sock` (EOF or a reset) within `timeout_s`."""
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# -- the request memory pool -------------------------------------------------------------------


def test_fifty_connections_announcing_100_mib_frames_hold_only_the_pool() -> None:
    """Each connection sends a 100 MiB size prefix and a few bytes: two are granted the pool
    (200 MiB, counted, not allocated: nothing more arrives), the 48 others wait unread; the
    process does not grow by the frames announced, and the pool drains when they close."""
    with limited_server(queued_max_request_bytes=200 * MiB) as (server, apis):
        pool = server.limits.pool
        assert pool is not None
        before = vm_rss()
        socks = [socket.create_connection((server.host, server.port)) for _ in range(50)]
        try:
            for sock in socks:
                sock.sendall(struct.pack(">i", 100 * MiB) + b"\x00" * 16)
            wait_until(
                lambda: server.limits.waiting_for_memory == 48 and pool.allocated == 200 * MiB,
                message="two frames granted, 48 waiting for memory",
            )
            assert pool.allocated <= pool.size
            grown = vm_rss() - before
            assert grown < 64 * MiB, f"the process grew by {grown / MiB:.1f} MiB"
            assert apis.none_within(0.1)
        finally:
            for sock in socks:
                sock.close()
        wait_until(
            lambda: pool.allocated == 0 and server.connection_count == 0,
            message="the pool drained as the connections closed",
        )
        assert server.limits.waiting_for_memory == 0


def test_reading_stops_while_the_pool_is_full_and_resumes_when_it_drains() -> None:
    config = SocketServerConfig(socket_request_max_bytes=1000)
    with (
        limited_server(config, queued_max_request_bytes=1000) as (server, apis),
        WireClient(server.host, server.port) as first,
        WireClient(server.host, server.port) as second,
    ):
        pool = server.limits.pool
        assert pool is not None
        pad = 1000 - len(request_frame(ApiKey.API_VERSIONS, 3, padded(0))) + 4
        pad -= len(request_frame(ApiKey.API_VERSIONS, 3, padded(pad))) - 4 - 1000  # varint
        api_versions(first, 1, pad=pad)  # exactly the pool: it is out of memory
        held = apis.next()
        assert held.size == 1000 and pool.allocated == 1000
        api_versions(second, 2)
        assert apis.none_within(), "a request was read while the pool was out of memory"
        answer(server, held)
        assert first.read_response(ApiKey.API_VERSIONS, 0)[0] == 1
        waited = apis.next()  # read once the answer released its memory
        assert waited.header.correlation_id == 2
        answer(server, waited)
        assert second.read_response(ApiKey.API_VERSIONS, 0)[0] == 2
        wait_until(lambda: pool.allocated == 0, message="every answered request released")


def test_a_pool_smaller_than_one_request_is_refused() -> None:
    with pytest.raises(ValueError, match=r"socket\.request\.max\.bytes must not exceed"):
        SocketServer(1, Directory(), queued_max_request_bytes=1000)


# -- connection quotas ---------------------------------------------------------------------------


def test_a_flood_past_max_connections_is_refused_and_the_existing_client_is_served(
    events: EventLog,
) -> None:
    with (
        limited_server(max_connections=5) as (server, apis),
        WireClient(server.host, server.port) as existing,
    ):
        api_versions(existing, 1)
        answer(server, apis.next())
        assert existing.read_response(ApiKey.API_VERSIONS, 0)[0] == 1
        flood = [socket.create_connection((server.host, server.port)) for _ in range(20)]
        try:
            refused = [sock for sock in flood if closed_by_broker(sock, 0.2)]
            assert len(refused) == 16
            assert server.connection_count == 5
            api_versions(existing, 2)  # the existing client is still served
            answer(server, apis.next())
            assert existing.read_response(ApiKey.API_VERSIONS, 0)[0] == 2
        finally:
            for sock in flood:
                sock.close()
        seen = events.named("network.connection_refused", broker=1)
        assert len(seen) == 16
        assert {e["reason"] for e in seen} == {"max.connections (5) reached"}
        assert all(e["peer_address"].startswith("127.0.0.1:") for e in seen)
        wait_until(lambda: server.connection_count == 1, message="the flood's connections gone")
        with socket.create_connection((server.host, server.port)) as again:
            assert not closed_by_broker(again, 0.2), "closed connections were not counted off"


def test_max_connections_per_ip_and_its_overrides(events: EventLog) -> None:
    with limited_server(
        max_connections_per_ip=1, max_connections_per_ip_overrides={"127.0.0.1": 2}
    ) as (server, _apis):
        socks = [socket.create_connection((server.host, server.port)) for _ in range(3)]
        try:
            assert [closed_by_broker(sock, 0.2) for sock in socks] == [False, False, True]
        finally:
            for sock in socks:
                sock.close()
        (refused,) = events.named("network.connection_refused")
        assert refused["reason"] == "max.connections.per.ip.overrides (2) reached for 127.0.0.1"


def test_limits_come_from_the_brokers_security_config_unless_given() -> None:
    security = BrokerSecurityConfig(
        queued_max_request_bytes=200 * MiB,
        max_connections=7,
        max_connections_per_ip=1,
        max_connections_per_ip_overrides={"127.0.0.1": 3},
    )
    limits = SocketServer(1, Directory(), security=security, max_connections=9).limits
    assert limits.pool is not None and limits.pool.size == 200 * MiB
    quotas = limits.quotas
    assert (quotas.max_connections, quotas.max_connections_per_ip) == (9, 1)
    assert quotas.max_connections_for("127.0.0.1") == 3
    assert limits.inter_broker_listener == "PLAINTEXT"  # bound per address only
    default = SocketServer(1, Directory()).limits
    assert default.pool is None and default.inter_broker_listener is None


# -- a throttled connection ----------------------------------------------------------------------


def test_a_throttled_connection_is_read_again_when_its_timer_task_fires() -> None:
    timer = HeldTimer()
    with (
        limited_server(timer=timer) as (server, apis),
        WireClient(server.host, server.port) as client,
    ):
        api_versions(client, 1)
        answer(server, apis.next(), throttle_ms=5000)
        assert client.read_response(ApiKey.API_VERSIONS, 0)[0] == 1  # answered at once
        api_versions(client, 2)
        assert apis.none_within(), "a throttled connection was read before its delay passed"
        (task,) = timer.tasks
        assert task.delay_ms == 5000
        task.run()  # the broker's timer: the delay has passed
        assert apis.next().header.correlation_id == 2


# -- real clients held to their quotas ----------------------------------------------------------

QUOTA = 512 * 1024  # producer_byte_rate and consumer_byte_rate, bytes per second
WARM_UP = int(1.5 * QUOTA)  # bytes past the first window's burst
MEASURED = 6 * QUOTA  # bytes over which the rate is taken: six seconds at the quota
OUTSTANDING = 1024  # records a producer may have unacknowledged: two seconds at the quota
RECORD = b"v" * 1024
PRODUCE, FETCH = QuotaType.PRODUCE.value, QuotaType.FETCH.value


@pytest.fixture(scope="module")
def quota_cluster() -> Iterator[Cluster]:
    """One broker (ZooKeeper, a PLAINTEXT listener and no security settings: quotas apply to
    every broker, as in Kafka) and byte-rate quotas on two client ids, written to ZooKeeper as
    `kafka-configs --alter --entity-type clients` writes them and read by the broker from its
    entity-config cache. The quota managers sample two windows of 1 s (`quota.window.num` 2;
    the cluster has no setting for it), so the first burst is short."""
    with Cluster(1, listen="127.0.0.1") as cluster:
        assert cluster.brokers[1].security is None
        quotas = cluster.brokers[1].quotas
        windows = ClientQuotaManagerConfig(num_quota_samples=2, quota_window_size_seconds=1)
        quotas.produce.config = quotas.fetch.config = windows
        assert cluster.embedded_zookeeper is not None
        zk = zk_model.connect("embedded", embedded=cluster.embedded_zookeeper)
        try:
            admin = EntityAdminZkClient(lambda: zk)
            admin.set_client_quotas(QuotaEntity(client_id="fast-producer"), {PRODUCE: QUOTA})
            admin.set_client_quotas(QuotaEntity(client_id="slow-consumer"), {FETCH: QUOTA})
        finally:
            zk.stop()
            zk.close()
        wait_until(
            lambda: (
                quotas.produce.quota("ANONYMOUS", "fast-producer") == QUOTA
                and quotas.fetch.quota("ANONYMOUS", "slow-consumer") == QUOTA
            ),
            message="the quotas read from ZooKeeper by the broker",
        )
        yield cluster


def measured_rate(progress: list[tuple[float, int]]) -> float:
    """Bytes per second between the moment WARM_UP bytes were through and the moment
    WARM_UP + MEASURED were, from (time, bytes) steps."""
    total, started = 0, None
    for at, size in progress:
        total += size
        if started is None and total >= WARM_UP:
            started, base = at, total
        elif started is not None and total >= WARM_UP + MEASURED:
            return (total - base) / (at - started)
    raise AssertionError(f"only {total} bytes went through")


def through(progress: list[tuple[float, int]]) -> int:
    return sum(size for _, size in list(progress))


def test_a_fast_producer_is_throttled_to_its_quota(
    quota_cluster: Cluster, events: EventLog
) -> None:
    """kafka-python at its defaults sends 1 KiB records as fast as it can; a quota of 512 KiB/s
    on its client id holds the acknowledged bytes to the quota's rate (3.8 MiB/s without it
    on the machine this was written on), every record acknowledged. The bound is loose for a
    loaded machine (the records' bytes are a little less than the requests' the quota counts)."""
    cluster = quota_cluster
    cluster.create_topic("quota-produce")
    acked: list[tuple[float, int]] = []
    errors: list[BaseException] = []
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, client_id="fast-producer")
    stop = threading.Event()
    # as fast as the producer takes them, with at most OUTSTANDING unacknowledged (so that
    # closing it does not wait for a buffer of 32 MB to drain at the quota)
    room = threading.Semaphore(OUTSTANDING)

    def done(_result: Any) -> None:
        acked.append((time.monotonic(), len(RECORD)))
        room.release()

    def failed(error: BaseException) -> None:
        errors.append(error)
        room.release()

    def produce() -> None:
        while not stop.is_set():
            if room.acquire(timeout=0.1):
                future = producer.send("quota-produce", RECORD, partition=0)
                future.add_callback(done)
                future.add_errback(failed)

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        wait_until(
            lambda: through(acked) >= WARM_UP + MEASURED or errors,
            timeout_s=30,
            message="the measured bytes acknowledged",
        )
    finally:
        stop.set()
        worker.join(WAIT_S)
        producer.flush(30)
        producer.close(10)
    assert not errors, errors[:3]
    rate = measured_rate(acked)
    assert 0.8 * QUOTA <= rate <= 1.1 * QUOTA, f"{rate / 1024:.0f} KiB/s for {QUOTA / 1024:.0f}"
    throttled = events.named("quota.throttled", client_id="fast-producer", kind="produce")
    assert throttled and all(e["throttle_ms"] > 0 for e in throttled)


def test_a_fast_consumer_is_throttled_to_its_quota(
    quota_cluster: Cluster, events: EventLog
) -> None:
    """kafka-python consumes a topic written beforehand as fast as it polls; a quota of
    512 KiB/s on its client id holds what it receives to the quota's rate, and it reads every
    record in order. `max_partition_fetch_bytes` is lowered from 1 MiB to 64 KiB so that the
    rate is measured over many responses, not a handful. It runs a little under the quota (about
    -10% here), as with Kafka: a throttled fetch's delay is computed with its response counted,
    and that response is then not sent."""
    cluster = quota_cluster
    cluster.create_topic("quota-fetch")
    count = (WARM_UP + MEASURED) // len(RECORD) + 256
    loader = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, client_id="loader")
    try:
        for _ in range(count):
            loader.send("quota-fetch", RECORD, partition=0)
        loader.flush(30)
    finally:
        loader.close(10)
    consumer = KafkaConsumer(
        "quota-fetch",
        bootstrap_servers=cluster.bootstrap_servers,
        client_id="slow-consumer",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=64 * 1024,
    )
    received: list[tuple[float, int]] = []
    offsets: list[int] = []
    try:

        def poll() -> bool:
            for records in consumer.poll(timeout_ms=200).values():
                received.append((time.monotonic(), sum(len(r.value) for r in records)))
                offsets.extend(r.offset for r in records)
            return through(received) >= WARM_UP + MEASURED

        wait_until(poll, timeout_s=30, message="the measured bytes consumed")
    finally:
        consumer.close()
    assert offsets == list(range(len(offsets)))
    rate = measured_rate(received)
    assert 0.8 * QUOTA <= rate <= 1.1 * QUOTA, f"{rate / 1024:.0f} KiB/s for {QUOTA / 1024:.0f}"
    throttled = events.named("quota.throttled", client_id="slow-consumer", kind="fetch")
    assert throttled and all(e["throttle_ms"] > 0 for e in throttled)
