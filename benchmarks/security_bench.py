"""What security costs: confluent-kafka over SSL and SASL_SSL against PLAINTEXT, handshakes per
second, and the broker's memory while 50 connections each announce a 100 MiB request.

Per run, for each protocol (PLAINTEXT, the baseline; SSL; SASL_SSL with SCRAM-SHA-256), a fresh
``Cluster(brokers=3, security=ClusterSecurity(protocol=...))`` (tracing off, a generated test
CA, one SCRAM user) and one confluent-kafka client at its defaults:

1. **Produce.** ``--records`` 100-byte values to a topic of 3 partitions, RF 3, acks=all:
   records/s from the first ``produce()`` to the last delivery callback (a warm-up record to
   every partition first). Ratio SSL / PLAINTEXT and SASL_SSL / PLAINTEXT within the run.
2. **Consume.** A consumer assigned every partition from the beginning reads them all back:
   records/s from ``assign()`` to the last record. Ratios as above.
3. **Handshakes per second.** ``--handshakes`` fresh connections, one after the other, each
   made ready for its first request: TCP connect alone (PLAINTEXT), plus the TLS handshake
   (SSL), plus SaslHandshake / SaslAuthenticate with SCRAM-SHA-256 (4096 iterations, on both
   sides: the client's salted password and the broker's proof check), through kafkactor's own
   inter-broker SASL client (``kafkactor.security.sasl_client``) with asyncio.

Then, once: a socket server with ``queued.max.request.bytes`` of 200 MiB; 50 connections each
send a 100 MiB size prefix and 16 bytes. The pool grants two frames (200 MiB counted, not
allocated: the bytes never arrive) and leaves the others unread; the process's RSS before and
after says what the 5 GiB announced cost.

The clients run in a spawned child process (started before anything is timed), as a real
client never shares the brokers' interpreter. Every figure is the median of ``--runs`` runs with
the min-max range; ratios are per run. Failed deliveries, records not read back or a failed
handshake make the exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import ssl
import struct
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import _harness as h

from kafkactor.actors.runtime import Directory
from kafkactor.network.socket_server import SocketServer
from kafkactor.testing import Cluster
from kafkactor.testing.read_back import wait_for
from kafkactor.testing.security import ClusterSecurity

P = ParamSpec("P")
R = TypeVar("R")

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD, MECHANISM = "bench", "bench-secret", "SCRAM-SHA-256"
VALUE_BYTES = 100
PARTITIONS = 3
MiB = 1024 * 1024
POOL_BYTES = 200 * MiB
ANNOUNCED = 100 * MiB
CONNECTIONS = 50


# -- in the client process --------------------------------------------------------------------


def produce(config: dict[str, str], topic: str, records: int) -> tuple[float, int]:
    """records/s of `records` acks=all values, and the failed deliveries."""
    from confluent_kafka import Producer

    producer = Producer({**config, "acks": "all"})
    failed = 0

    def delivered(error: Any, _message: Any) -> None:
        nonlocal failed
        if error is not None:
            failed += 1

    for partition in range(PARTITIONS):  # warm-up: connections, metadata, followers
        producer.produce(topic, b"w", partition=partition, on_delivery=delivered)
    producer.flush(30)
    value = b"v" * VALUE_BYTES
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - start
    return records / elapsed, failed + remaining


def consume(config: dict[str, str], topic: str, expected: int) -> tuple[float, int]:
    """records/s reading every partition from the beginning, and the records read."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({**config, "group.id": "bench", "enable.auto.commit": False})
    start = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    read = 0
    deadline = start + 120
    while read < expected and time.perf_counter() < deadline:
        for message in consumer.consume(min(10_000, expected - read), timeout=1.0):
            if message.error() is None:
                read += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return read / elapsed, read


def handshakes(protocol: str, host: str, port: int, ca_file: str | None, count: int) -> float:
    """Connections made ready for a first request per second (see the module doc)."""
    from kafkactor.security.sasl_client import SaslLogin, authenticate

    context: ssl.SSLContext | None = None
    if ca_file is not None:
        context = ssl.create_default_context(cafile=ca_file)
    login = SaslLogin(MECHANISM, USER, PASSWORD)

    async def one() -> None:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context is not None else None
        )
        try:
            if protocol.startswith("SASL"):
                await authenticate(reader, writer, login, "security-bench")
        finally:
            writer.close()
            await writer.wait_closed()

    async def all_of_them() -> float:
        start = time.perf_counter()
        for _ in range(count):
            await one()
        return count / (time.perf_counter() - start)

    return asyncio.run(all_of_them())


def client_versions() -> str:
    import confluent_kafka

    client, library = confluent_kafka.version()[0], confluent_kafka.libversion()[0]
    return f"confluent-kafka {client} (librdkafka {library})"


class Clients:
    """The clients' process: one spawned child, or this process (`--same-process`)."""

    def __init__(self, same_process: bool) -> None:
        context = multiprocessing.get_context("spawn")
        self.pool = None if same_process else ProcessPoolExecutor(1, mp_context=context)

    def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        if self.pool is None:
            return fn(*args, **kwargs)
        return self.pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


# -- the runs ---------------------------------------------------------------------------------


@dataclass
class ProtocolResult:
    protocol: str
    produce_rps: float
    consume_rps: float
    handshakes_per_s: float
    errors: list[str] = field(default_factory=list)


def measure_protocol(protocol: str, args: argparse.Namespace, clients: Clients) -> ProtocolResult:
    security = ClusterSecurity(protocol=protocol, users={USER: PASSWORD}, mechanisms=(MECHANISM,))
    errors: list[str] = []
    with Cluster(args.brokers, security=security) as cluster:
        topic = f"bench-{protocol.lower()}"
        replicas = min(3, args.brokers)
        cluster.create_topic(
            topic, PARTITIONS, replicas, config={"min.insync.replicas": str(min(2, replicas))}
        )
        config = cluster.client_config(
            "confluent-kafka", user=USER if protocol.startswith("SASL") else None
        )
        produce_rps, failed = clients.run(produce, config, topic, args.records)
        if failed:
            errors.append(f"{protocol}: {failed} deliveries failed")
        consume_rps, read = clients.run(consume, config, topic, args.records + PARTITIONS)
        if read != args.records + PARTITIONS:
            errors.append(f"{protocol}: read {read} of {args.records + PARTITIONS} records")
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        ca = str(cluster.ca_file) if protocol in ("SSL", "SASL_SSL") else None
        try:
            per_s = clients.run(handshakes, protocol, host, int(port), ca, args.handshakes)
        except Exception as error:  # reported; the exit code says so
            errors.append(f"{protocol} handshakes: {type(error).__name__}: {error}")
            per_s = float("nan")
    return ProtocolResult(protocol, produce_rps, consume_rps, per_s, errors)


def vm_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class MemoryResult:
    rss_before_mib: float
    rss_after_mib: float
    pool_allocated_mib: float
    waiting_connections: int
    announced_mib: float


def measure_memory() -> MemoryResult:
    """50 connections each announcing a 100 MiB request to a socket server whose pool holds
    200 MiB (nothing answers them: no request is ever complete)."""
    server = SocketServer(1, Directory(), queued_max_request_bytes=POOL_BYTES).start()
    try:
        pool = server.limits.pool
        assert pool is not None
        before = vm_rss()
        socks = [socket.create_connection((server.host, server.port)) for _ in range(CONNECTIONS)]
        try:
            for sock in socks:
                sock.sendall(struct.pack(">i", ANNOUNCED) + b"\x00" * 16)
            wait_for(lambda: server.limits.waiting_for_memory == CONNECTIONS - 2, 10)
            after = vm_rss()
            return MemoryResult(
                before / MiB,
                after / MiB,
                pool.allocated / MiB,
                server.limits.waiting_for_memory,
                CONNECTIONS * ANNOUNCED / MiB,
            )
        finally:
            for sock in socks:
                sock.close()
    finally:
        server.stop()


def summary_rows(runs: Sequence[dict[str, ProtocolResult]]) -> list[list[object]]:
    rows: list[list[object]] = []
    base = [r["PLAINTEXT"] for r in runs]
    for protocol in PROTOCOLS:
        mine = [r[protocol] for r in runs]
        rows.append(
            [
                protocol,
                h.Spread.of(m.produce_rps for m in mine).format(),
                h.Spread.of(
                    h.ratio(m.produce_rps, b.produce_rps) for m, b in zip(mine, base, strict=True)
                ).format(".2f"),
                h.Spread.of(m.consume_rps for m in mine).format(),
                h.Spread.of(
                    h.ratio(m.consume_rps, b.consume_rps) for m, b in zip(mine, base, strict=True)
                ).format(".2f"),
                h.Spread.of(m.handshakes_per_s for m in mine).format(",.1f"),
            ]
        )
    return rows


HEAD = ["protocol", "produce rec/s", "x PLAINTEXT", "consume rec/s", "x PLAINTEXT", "handshakes/s"]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "security_bench",
        "confluent-kafka over SSL and SASL_SSL (SCRAM-SHA-256) against PLAINTEXT, 3 brokers on "
        "loopback; handshakes per second; memory under 50 announced 100 MiB requests.",
        "runs, each on fresh clusters (3)",
    )
    p.add_argument("--records", type=h.positive_int, help="records produced (100,000)")
    p.add_argument("--handshakes", type=h.positive_int, help="connections per protocol (200)")
    p.add_argument("--brokers", type=h.positive_int, help="brokers per cluster (3; smoke: 1)")
    p.add_argument(
        "--same-process", action="store_true", help="the clients in this process, not a child"
    )
    return h.fill(
        p.parse_args(argv),
        records=(100_000, 30_000, 500),
        handshakes=(200, 60, 5),
        brokers=(3, 3, 1),
        runs=(3, 3, 1),
    )


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    clients = Clients(args.same_process)
    runs: list[dict[str, ProtocolResult]] = []
    try:
        versions = clients.run(client_versions)  # the child starts here, before any timing
        h.header(
            f"{args.brokers} broker(s) on 127.0.0.1 (kafkactor.Cluster, tracing off), one cluster"
            f" per protocol and run; topic: {PARTITIONS} partitions, RF {min(3, args.brokers)},"
            f" acks=all; {args.records:,} x"
            f" {VALUE_BYTES} B values; {args.handshakes} handshakes; {args.runs} run(s)",
            f"{versions}, its defaults; clients in"
            f" {'this process' if args.same_process else 'a child process'};"
            f" load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the start",
        )
        with h.traced(False):
            for run in range(args.runs):
                results = {p: measure_protocol(p, args, clients) for p in PROTOCOLS}
                line = " ".join(
                    f"{p}={r.produce_rps:,.0f}/{r.consume_rps:,.0f}/{r.handshakes_per_s:,.1f}"
                    for p, r in results.items()
                )
                print(f"  run {run + 1}: produce/consume rec/s, handshakes/s: {line}", flush=True)
                runs.append(results)
            memory = measure_memory()
    finally:
        clients.close()
    print(f"\n== Throughput by security protocol: median (min-max) of {args.runs} run(s)")
    errors = [e for r in runs for p in r.values() for e in p.errors]
    print(
        h.table(
            HEAD,
            summary_rows(runs),
            [
                "ratios per run against PLAINTEXT; SASL_SSL: SCRAM-SHA-256; handshakes: connect"
                " (+ TLS) (+ SASL) of a fresh connection, one at a time",
                *errors,
            ],
        )
    )
    print("\n== Memory: 50 connections each announcing a 100 MiB request, pool 200 MiB")
    print(
        h.table(
            ["announced MiB", "pool granted MiB", "unread connections", "RSS before", "RSS after"],
            [
                [
                    h.num(memory.announced_mib),
                    h.num(memory.pool_allocated_mib),
                    memory.waiting_connections,
                    h.num(memory.rss_before_mib, ",.1f"),
                    h.num(memory.rss_after_mib, ",.1f"),
                ]
            ],
        )
    )
    h.finish(args, started, {"runs": runs, "memory": memory, "errors": errors})
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
