"""Kafka's wire protocol: confluent-kafka (librdkafka) against 3 brokers listening on loopback.

Measures, per run, against a fresh ``Cluster(brokers=3, listen="127.0.0.1")`` (tracing off):

1. **Wire produce.** One confluent-kafka ``Producer`` with the client's default batching
   (linger, batch size, in-flight: librdkafka's defaults, nothing set but ``acks``) sends
   ``--records`` 100-byte values, no key, to a topic of ``--partitions`` partitions, RF 3,
   ``min.insync.replicas=2``, with acks=1 and acks=all. Records/s from the first ``produce()``
   to the last delivery callback; p50 / p99 / max per-record latency (delivery callback time -
   ``produce()`` call time; the loop calls ``poll(0)`` after every ``produce()``, so callbacks
   run as soon as librdkafka has the answer). Before the timed window each producer sends one
   record to every partition and waits for it (connections, metadata, the followers' first
   fetch). Records and bytes per request come from librdkafka's statistics (``Produce``
   requests and ``txbytes`` over the window).
2. **Wire consume.** A ``Consumer`` (``group.id`` set, auto-commit off, nothing committed)
   assigned every partition of the acks=all topic at ``OFFSET_BEGINNING`` reads every record
   back (``consume()`` of up to 10,000 records at a time): records/s from ``assign()`` to the
   last record, and after the first batch (without the start: metadata, ListOffsets).
3. **In-process produce.** The same values through kafkactor's own producer
   (``cluster.producer(acks=-1)``, ``send_batch``: one request per batch, no accumulator) in
   batches of the wire producer's records per request (``--batch``), ``--in-flight`` requests
   outstanding, partitions round-robin. Ratio wire acks=all / in-process.
4. **Raw loopback TCP.** The bytes the acks=all producer sent (its ``txbytes``), in frames of
   its mean request size, from the client's process to a sink thread in the brokers' process
   that reads them and answers one byte at the end: the ceiling of the transport. Ratio wire /
   raw (the same bytes, so records/s and bytes/s ratios are one).
5. **Start to first ack.** From ``Cluster(brokers=3, listen=...)`` construction to the first
   acknowledged record of a fresh confluent-kafka producer (acks=all), once with the topic made
   by ``cluster.create_topic`` (``--partitions``, RF 3, min ISR 2) and once auto-created by the
   producer's metadata request (the broker defaults: 1 partition, RF 1). A fresh cluster each.

The clients run in a child process (``spawn``; started once, before anything is timed), as a
real client never shares the brokers' interpreter and GIL; ``--same-process`` runs them in this
process instead. The client's own pace is measured beside it: the same producer loop and
consumer against librdkafka's built-in mock cluster (``test.mock.num.brokers=3``, C brokers in
the client's process, so they share its CPUs; it drops its oldest segments, so the consumer
reads what it still holds): wire figures near it mean the Python client loop, not kafkactor,
sets the pace. Every figure is the median of ``--runs`` runs with the
min-max range; ratios are taken per run (both sides measured in the same run). Goals (from the
issue) are printed beside the numbers as met / not met: acks=all RF 3 >= 100,000 records/s
from one producer, consumption >= 300,000 records/s, first produce acknowledged < 1 s after the
start. Failed deliveries, records not read back or a failed first produce make the exit code 1.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import math
import multiprocessing
import random
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import _harness as h
import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from kafkactor import Cluster

VALUE_BYTES = 100
BROKERS, REPLICATION_FACTOR, MIN_ISR = 3, 3, 2
TOPIC_CONFIG = {"min.insync.replicas": str(MIN_ISR)}
LISTEN = "127.0.0.1"
GOAL_PRODUCE, GOAL_CONSUME, GOAL_FIRST_ACK_S = 100_000, 300_000, 1.0
DELIVERY_TIMEOUT_S = 120.0  # flush bound of a producer's window
STALL_S = 30.0  # a consumer that reads nothing this long gives up
STATS_MS = 250  # librdkafka statistics interval (request counts and bytes)
CONSUME_BATCH = 10_000
SINK_BUFFER = 1 << 20
MOCK_CONFIG = {"test.mock.num.brokers": BROKERS, "log_level": 4}  # no "mock enabled" notice

clock = time.perf_counter
P = ParamSpec("P")
R = TypeVar("R")


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceResult:
    client: str  # "wire", "mock" or "in-process"
    acks: str
    records: int
    delivered: int
    errors: int  # failed deliveries + records never answered
    first_error: str
    seconds: float  # first send to the last acknowledgement
    records_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    requests: int  # produce requests in the window (wire: librdkafka's count)
    bytes_sent: int  # bytes the client sent in the window (wire: txbytes), 0 when unknown
    queue_full_waits: int  # produce() calls refused with BufferError (the local queue full)

    @property
    def records_per_request(self) -> float:
        return h.ratio(self.records, self.requests)

    @property
    def bytes_per_request(self) -> float:
        return h.ratio(self.bytes_sent, self.requests) if self.bytes_sent else math.nan


@dataclass(frozen=True, slots=True)
class ConsumeResult:
    client: str  # "wire" or "mock"
    expected: int
    records: int
    errors: int  # error messages + records missing
    first_error: str
    seconds: float  # assign() to the last record
    first_record_s: float  # assign() to the first record
    records_per_s: float
    steady_records_per_s: float  # after the first batch (NaN when it held every record)


@dataclass(frozen=True, slots=True)
class RawResult:
    total_bytes: int
    frame_bytes: int
    seconds: float
    bytes_per_s: float


@dataclass(frozen=True, slots=True)
class StartupResult:
    auto_create: bool
    start_s: float  # Cluster(...) construction and start()
    create_topic_s: float  # cluster.create_topic (0 with auto-creation)
    first_ack_s: float  # a new producer's first record acknowledged
    total_s: float
    error: str


@dataclass(frozen=True, slots=True)
class RunResult:
    run: int
    acks_1: ProduceResult
    acks_all: ProduceResult
    consume: ConsumeResult
    in_process: ProduceResult
    raw: RawResult
    mock_produce: ProduceResult
    mock_consume: ConsumeResult
    first_ack_created: StartupResult
    first_ack_auto: StartupResult

    @property
    def errors(self) -> int:
        produced = (self.acks_1, self.acks_all, self.in_process, self.mock_produce)
        startups = (self.first_ack_created, self.first_ack_auto)
        return (
            sum(p.errors for p in produced)
            + self.consume.errors
            + self.mock_consume.errors
            + sum(1 for s in startups if s.error)
        )


# --------------------------------------------------------------------------------------------
# The confluent-kafka side: plain functions, run in the clients' process
# --------------------------------------------------------------------------------------------


def client_versions() -> str:
    """confluent-kafka's and librdkafka's versions (the first call also starts the child)."""
    client = importlib.metadata.version("confluent-kafka")
    return f"confluent-kafka {client}, librdkafka {confluent_kafka.libversion()[0]}"


def _stats_after(producer: Producer, stats: list[str], timeout_s: float = 2.0) -> dict[str, Any]:
    """librdkafka's next statistics emission (its counters cover everything before it)."""
    seen, deadline = len(stats), clock() + timeout_s
    while len(stats) == seen and clock() < deadline:
        producer.poll(0.05)
    return json.loads(stats[-1]) if stats else {}


def _produce_counters(document: dict[str, Any]) -> tuple[int, int]:
    """(Produce requests, bytes sent) over every broker connection in a statistics document."""
    brokers = document.get("brokers", {}).values()
    return (
        sum(b.get("req", {}).get("Produce", 0) for b in brokers),
        sum(b.get("txbytes", 0) for b in brokers),
    )


def _partitions(producer: Producer, topic: str) -> int:
    """The topic's partition count as the producer's metadata has it (auto-created if need be)."""
    for _ in range(50):
        topics = producer.list_topics(topic, timeout=10).topics
        found = topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return len(found.partitions)
        time.sleep(0.1)  # being auto-created: LEADER_NOT_AVAILABLE for a moment
    raise RuntimeError(f"no metadata for topic {topic!r}")


def produce_records(
    config: dict[str, Any], topic: str, acks: str, records: int, value: bytes, client: str
) -> ProduceResult:
    """`records` copies of `value` through one Producer (librdkafka's default batching)."""
    stats: list[str] = []
    producer = Producer(
        {**config, "acks": acks, "statistics.interval.ms": STATS_MS, "stats_cb": stats.append}
    )
    failures: list[str] = []  # of the timed records
    warm_failures: list[str] = []
    latencies: list[float] = []
    last = [0.0]

    def warmed(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            warm_failures.append(f"warm-up: {err}")

    def delivered(sent: float, err: KafkaError | None, _msg: Message) -> None:
        now = clock()
        latencies.append(now - sent)
        last[0] = now
        if err is not None:
            failures.append(str(err))

    try:
        for partition in range(_partitions(producer, topic)):  # connections, metadata, ISR
            producer.produce(topic, value, partition=partition, on_delivery=warmed)
        producer.flush(DELIVERY_TIMEOUT_S)
        before = _produce_counters(_stats_after(producer, stats))
        produce, poll, waits = producer.produce, producer.poll, 0
        started = clock()
        for _ in range(records):
            while True:
                try:
                    produce(topic, value, on_delivery=functools.partial(delivered, clock()))
                    break
                except BufferError:  # queue.buffering.max.messages reached: serve the callbacks
                    waits += 1
                    poll(0.001)
            poll(0)
        producer.flush(DELIVERY_TIMEOUT_S)
        after = _produce_counters(_stats_after(producer, stats))
    finally:
        producer.close()
    seconds = last[0] - started if latencies else math.nan
    milliseconds = [s * 1000 for s in latencies]
    errors = len(failures) + len(warm_failures) + records - len(latencies)  # + unanswered
    return ProduceResult(
        client, acks, records, len(latencies) - len(failures), errors,
        (failures + warm_failures or [""])[0], seconds, h.ratio(len(latencies), seconds),
        h.percentile(milliseconds, 50), h.percentile(milliseconds, 99),
        max(milliseconds, default=math.nan), after[0] - before[0], after[1] - before[1], waits,
    )  # fmt: skip


def consume_records(
    config: dict[str, Any], topic: str, expected: int, client: str
) -> ConsumeResult:
    """Read `expected` records from every partition of `topic`, from the beginning."""
    consumer = Consumer({**config, "group.id": "wire-bench", "enable.auto.commit": False})
    got, errors, first_error = 0, 0, ""
    first_at = first_batch = math.nan
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        started = progress = clock()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while got < expected:
            batch = consumer.consume(min(CONSUME_BATCH, expected - got), 0.5)
            now = clock()
            for message in batch:
                error = message.error()
                if error is None:
                    got += 1
                else:
                    errors += 1
                    first_error = first_error or str(error)
            if batch:
                progress = now
                if math.isnan(first_at):
                    first_at, first_batch = now, float(got)
            elif now - progress > STALL_S:
                break
        seconds = clock() - started
    finally:
        consumer.close()
    return ConsumeResult(
        client, expected, got, errors + expected - got, first_error, seconds,
        first_at - started, h.ratio(got, seconds),
        h.ratio(got - first_batch, started + seconds - first_at) if got > first_batch
        else math.nan,
    )  # fmt: skip


def mock_reference(records: int, value: bytes) -> tuple[ProduceResult, ConsumeResult]:
    """The same producer loop and consumer against librdkafka's mock cluster (acks=all)."""
    # the mock cluster lives as long as this producer
    holder = Producer(MOCK_CONFIG)
    try:
        holder.produce("mock-bench", b"")  # the mock auto-creates the topic
        holder.flush(10)
        bootstrap = ",".join(
            f"{b.host}:{b.port}" for b in holder.list_topics(timeout=10).brokers.values()
        )
        config = {"bootstrap.servers": bootstrap}
        produced = produce_records(config, "mock-bench", "all", records, value, "mock")
        consumed = consume_records(config, "mock-bench", _held(config, "mock-bench"), "mock")
    finally:
        holder.close()
    return produced, consumed


def _held(config: dict[str, Any], topic: str) -> int:
    """The records the topic's partitions hold (high - low watermark): the mock cluster drops
    its oldest segments, so it keeps fewer than were produced once they are many."""
    consumer = Consumer({**config, "group.id": "wire-bench"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        marks = [consumer.get_watermark_offsets(TopicPartition(topic, p), 10) for p in partitions]
    finally:
        consumer.close()
    return sum(high - low for low, high in marks)


def first_ack(bootstrap: str, topic: str, value: bytes) -> str:
    """A new acks=all producer's first record: "" once acknowledged, else the error."""
    outcome: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    try:
        producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(str(err or "")))
        producer.flush(DELIVERY_TIMEOUT_S)
    finally:
        producer.close()
    return outcome[0] if outcome else "no delivery report"


def raw_send(port: int, total: int, frame_bytes: int) -> float:
    """`total` bytes in `frame_bytes` frames to the sink; seconds until it acknowledged all."""
    frame = bytes(frame_bytes)
    full, rest = divmod(total, frame_bytes)
    with socket.create_connection((LISTEN, port), timeout=60) as sock:
        started = clock()
        for _ in range(full):
            sock.sendall(frame)
        if rest:
            sock.sendall(frame[:rest])
        if sock.recv(1) != b"\x01":
            raise ConnectionError("the sink closed without acknowledging")
        return clock() - started


# --------------------------------------------------------------------------------------------
# The brokers' side
# --------------------------------------------------------------------------------------------


class Clients:
    """Where the confluent-kafka clients run: one spawned child process, or this process."""

    def __init__(self, same_process: bool) -> None:
        self.pool = (
            None
            if same_process
            else ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        )

    def run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        if self.pool is None:
            return fn(*args, **kwargs)
        return self.pool.submit(fn, *args, **kwargs).result()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)


class Sink:
    """A TCP sink on loopback in a thread of this process: reads `total` bytes, answers one."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.server = socket.create_server((LISTEN, 0))
        self.port: int = self.server.getsockname()[1]
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="wire-bench-sink", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.server.settimeout(60)
            conn, _ = self.server.accept()
            with conn:
                buffer, left = memoryview(bytearray(SINK_BUFFER)), self.total
                while left > 0:
                    n = conn.recv_into(buffer, min(left, SINK_BUFFER))
                    if n == 0:
                        raise ConnectionError(f"the sender closed with {left} bytes to go")
                    left -= n
                conn.sendall(b"\x01")
        except BaseException as error:  # reported by join()
            self.error = error
        finally:
            self.server.close()

    def join(self) -> None:
        self.thread.join(60)
        if self.error is not None:
            raise self.error


def raw_ceiling(clients: Clients, total: int, frame_bytes: int) -> RawResult:
    sink = Sink(total)
    seconds = clients.run(raw_send, sink.port, total, frame_bytes)
    sink.join()
    return RawResult(total, frame_bytes, seconds, h.ratio(total, seconds))


def produce_in_process(
    cluster: Cluster, topic: str, records: int, value: bytes, batch: int, in_flight: int
) -> ProduceResult:
    """kafkactor's producer, acks=-1: `batch`-record requests, `in_flight` outstanding."""
    producer = cluster.producer(acks=-1)
    partitions = producer.partitions_for(topic)
    for warm in [producer.send_batch(topic, [value], partition=p) for p in partitions]:
        warm.result(timeout=DELIVERY_TIMEOUT_S)  # metadata, the followers' first fetch
    slots = threading.Semaphore(in_flight)
    latencies: list[float] = []  # per record (a record waits as long as its request)
    failures: list[tuple[int, str]] = []  # (records, error) of each failed request
    last = [0.0]
    values = [value] * batch

    def answered(sent: float, size: int, future: Future[Any]) -> None:
        now = clock()
        error = future.exception()
        if error is not None:
            failures.append((size, repr(error)))
        latencies.extend([now - sent] * size)
        last[0] = now
        slots.release()

    requests = math.ceil(records / batch)
    started = clock()
    for k in range(requests):
        size = min(batch, records - k * batch)
        slots.acquire()
        sent = producer.send_batch(
            topic,
            values if size == batch else values[:size],
            partition=partitions[k % len(partitions)],
        )
        sent.add_done_callback(functools.partial(answered, clock(), size))
    deadline = clock() + DELIVERY_TIMEOUT_S
    for _ in range(in_flight):  # every request answered (or the deadline passed)
        slots.acquire(timeout=max(0.0, deadline - clock()))
    seconds = last[0] - started if latencies else math.nan
    milliseconds = [s * 1000 for s in latencies]
    failed = sum(size for size, _ in failures)
    return ProduceResult(
        "in-process", "-1", records, len(latencies) - failed, failed + records - len(latencies),
        failures[0][1] if failures else "", seconds, h.ratio(len(latencies), seconds),
        h.percentile(milliseconds, 50), h.percentile(milliseconds, 99),
        max(milliseconds, default=math.nan), requests, 0, 0,
    )  # fmt: skip


def start_to_first_ack(
    clients: Clients, *, auto_create: bool, partitions: int, value: bytes
) -> StartupResult:
    """A fresh cluster, from construction to a new producer's first acknowledged record."""
    topic = "auto-created" if auto_create else "created"
    started = clock()
    cluster = Cluster(brokers=BROKERS, listen=LISTEN)
    try:
        cluster.start()
        up = clock()
        if not auto_create:
            cluster.create_topic(topic, partitions, REPLICATION_FACTOR, TOPIC_CONFIG)
        created = clock()
        error = clients.run(first_ack, cluster.bootstrap_servers, topic, value)
        acknowledged = clock()
    finally:
        cluster.stop()
    return StartupResult(
        auto_create,
        up - started,
        created - up,
        acknowledged - created,
        acknowledged - started,
        error,
    )


def measure_run(run: int, args: argparse.Namespace, clients: Clients, value: bytes) -> RunResult:
    """One run: the startup clusters, then one cluster for the throughputs, then the ceilings."""
    created = start_to_first_ack(
        clients, auto_create=False, partitions=args.partitions, value=value
    )
    auto = start_to_first_ack(clients, auto_create=True, partitions=args.partitions, value=value)
    cluster = Cluster(brokers=BROKERS, listen=LISTEN)
    try:
        cluster.start()
        for topic in ("wire-acks-1", "wire-acks-all", "in-process"):
            cluster.create_topic(topic, args.partitions, REPLICATION_FACTOR, TOPIC_CONFIG)
        config = {"bootstrap.servers": cluster.bootstrap_servers}
        records = args.records
        acks_1 = clients.run(produce_records, config, "wire-acks-1", "1", records, value, "wire")
        acks_all = clients.run(
            produce_records, config, "wire-acks-all", "all", records, value, "wire"
        )
        expected = args.records + args.partitions  # with the warm-up records
        consume = clients.run(consume_records, config, "wire-acks-all", expected, "wire")
        batch = args.batch or max(1, round(acks_all.records_per_request))
        in_process = produce_in_process(
            cluster, "in-process", args.records, value, batch, args.in_flight
        )
    finally:
        cluster.stop()
    frame = max(1, round(acks_all.bytes_per_request)) if acks_all.bytes_sent else 16_384
    total = acks_all.bytes_sent or args.records * (VALUE_BYTES + 20)
    raw = raw_ceiling(clients, total, frame)
    mock_produce, mock_consume = clients.run(mock_reference, args.records, value)
    return RunResult(
        run, acks_1, acks_all, consume, in_process, raw, mock_produce, mock_consume, created, auto
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

HEAD = ["measure", "median (min-max)", "unit", "goal", "goal met"]


def judged(s: h.Spread, goal: float, *, at_most: bool = False) -> str:
    if math.isnan(s.median):
        return "not met"
    return "met" if (s.median < goal if at_most else s.median >= goal) else "not met"


class Rows:
    """The summary table's rows: a name, a spread over the runs, a unit, a goal and its verdict."""

    def __init__(self) -> None:
        self.rows: list[list[object]] = []

    def add(
        self,
        name: str,
        values: Iterable[float],
        unit: str,
        spec: str = ",.0f",
        goal: float | None = None,
        at_most: bool = False,
    ) -> None:
        s = h.Spread.of(values)
        if goal is None:
            self.rows.append([name, s.format(spec), unit, "", ""])
        else:
            text = f"{'<' if at_most else '>='} {goal:,g}{' s' if unit == 's' else ''}"
            self.rows.append([name, s.format(spec), unit, text, judged(s, goal, at_most=at_most)])


def summary_rows(runs: Sequence[RunResult], args: argparse.Namespace) -> list[list[object]]:
    t = Rows()
    for label, produced in (
        ("acks=1", [r.acks_1 for r in runs]),
        ("acks=all", [r.acks_all for r in runs]),
    ):
        goal = GOAL_PRODUCE if label == "acks=all" else None
        t.add(f"wire produce {label}", (p.records_per_s for p in produced), "records/s", goal=goal)
        t.add(f"  {label} latency p50", (p.p50_ms for p in produced), "ms", ",.1f")
        t.add(f"  {label} latency p99", (p.p99_ms for p in produced), "ms", ",.1f")
        t.add(f"  {label} records / request", (p.records_per_request for p in produced), "")
        t.add(f"  {label} bytes / request", (p.bytes_per_request for p in produced), "B")
    consumed = [r.consume for r in runs]
    t.add("wire consume, assign to last record", (c.records_per_s for c in consumed),
          "records/s", goal=GOAL_CONSUME)  # fmt: skip
    t.add("  after the first batch", (c.steady_records_per_s for c in consumed), "records/s")
    t.add("  assign to first record", (c.first_record_s for c in consumed), "s", ".3f")
    in_process = [r.in_process for r in runs]
    batch = args.batch or "= wire acks=all"
    t.add(f"in-process producer acks=-1, batch {batch}, {args.in_flight} in flight",
          (p.records_per_s for p in in_process), "records/s")  # fmt: skip
    t.add("  latency p50 (per request)", (p.p50_ms for p in in_process), "ms", ",.1f")
    t.add("  latency p99 (per request)", (p.p99_ms for p in in_process), "ms", ",.1f")
    t.add("  records / request", (p.records_per_request for p in in_process), "")
    t.add("wire acks=all / in-process",
          (h.ratio(r.acks_all.records_per_s, r.in_process.records_per_s) for r in runs),
          "x", ".2f")  # fmt: skip
    t.add("raw loopback TCP, the acks=all bytes", (r.raw.bytes_per_s / 1e6 for r in runs),
          "MB/s", ",.1f")  # fmt: skip
    t.add("  as records/s", (h.ratio(r.acks_all.records, r.raw.seconds) for r in runs),
          "records/s")  # fmt: skip
    t.add("wire acks=all / raw TCP", (h.ratio(r.raw.seconds, r.acks_all.seconds) for r in runs),
          "x", ".3f")  # fmt: skip
    t.add("client reference: produce acks=all to mock",
          (r.mock_produce.records_per_s for r in runs), "records/s")  # fmt: skip
    t.add("wire acks=all / mock produce",
          (h.ratio(r.acks_all.records_per_s, r.mock_produce.records_per_s) for r in runs),
          "x", ".2f")  # fmt: skip
    t.add("client reference: consume from mock", (r.mock_consume.records_per_s for r in runs),
          "records/s")  # fmt: skip
    t.add("wire consume / mock consume",
          (h.ratio(r.consume.records_per_s, r.mock_consume.records_per_s) for r in runs),
          "x", ".2f")  # fmt: skip
    for label, startups in (
        ("topic from create_topic", [r.first_ack_created for r in runs]),
        ("auto-created topic", [r.first_ack_auto for r in runs]),
    ):
        t.add(f"start to first ack, {label}", (s.total_s for s in startups), "s", ".3f",
              goal=GOAL_FIRST_ACK_S, at_most=True)  # fmt: skip
        t.add("  Cluster(...) and start()", (s.start_s for s in startups), "s", ".3f")
        if not startups[0].auto_create:
            t.add("  create_topic", (s.create_topic_s for s in startups), "s", ".3f")
        t.add("  new producer to first ack", (s.first_ack_s for s in startups), "s", ".3f")
    errors = sum(r.errors for r in runs)
    t.rows.append(["errors (deliveries, reads, first acks)", errors, "", "", ""])
    return t.rows


def progress_line(r: RunResult) -> str:
    cells = [
        r.run + 1, h.num(r.acks_1.records_per_s), h.num(r.acks_all.records_per_s),
        h.num(r.acks_all.p99_ms, ".1f"), h.num(r.consume.records_per_s),
        h.num(r.in_process.records_per_s), f"{r.raw.bytes_per_s / 1e6:,.0f}",
        h.num(r.mock_produce.records_per_s), f"{r.first_ack_created.total_s:.3f}",
        f"{r.first_ack_auto.total_s:.3f}", r.errors,
    ]  # fmt: skip
    head = ["run", "acks1/s", "acksall/s", "p99ms", "consume/s", "inproc/s", "rawMB/s", "mock/s",
            "first_ack_s", "auto_ack_s", "errors"]  # fmt: skip
    return h.pairs(head, cells)


def first_errors(runs: Iterable[RunResult]) -> list[str]:
    notes = []
    for r in runs:
        for name, error in (
            ("acks=1", r.acks_1.first_error), ("acks=all", r.acks_all.first_error),
            ("consume", r.consume.first_error), ("in-process", r.in_process.first_error),
            ("mock produce", r.mock_produce.first_error),
            ("mock consume", r.mock_consume.first_error),
            ("first ack (create_topic)", r.first_ack_created.error),
            ("first ack (auto-created)", r.first_ack_auto.error),
        ):  # fmt: skip
            if error:
                notes.append(f"run {r.run + 1} {name}: {error}")
        if r.consume.records < r.consume.expected:
            notes.append(
                f"run {r.run + 1} consume: {r.consume.records} of {r.consume.expected} read"
            )
    return notes


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "wire_bench",
        "confluent-kafka against 3 brokers on loopback; in-process and raw TCP baselines.",
        "runs, each on fresh clusters (3)",
    )
    p.add_argument("--records", type=h.positive_int, help="records per client (200,000)")
    p.add_argument("--partitions", type=h.positive_int, default=6, help="topic partitions (6)")
    p.add_argument(
        "--batch", type=h.positive_int, help="in-process records per request (the wire's)"
    )
    p.add_argument(
        "--in-flight", type=h.positive_int, default=16, help="in-process requests out (16)"
    )
    p.add_argument(
        "--same-process", action="store_true", help="the clients in this process, not a child"
    )
    return h.fill(p.parse_args(argv), records=(200_000, 50_000, 2_000), runs=(3, 2, 1))


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    value = random.Random(args.seed).randbytes(VALUE_BYTES)
    clients = Clients(args.same_process)
    runs: list[RunResult] = []
    try:
        versions = clients.run(client_versions)  # the child starts here, before any timing
        h.header(
            f"{BROKERS} brokers on {LISTEN} (kafkactor.Cluster, tracing off); topics:"
            f" {args.partitions} partitions, RF {REPLICATION_FACTOR}, min ISR {MIN_ISR}; fresh"
            f" clusters per run; {args.records:,} records of {VALUE_BYTES} B per client;"
            f" {args.runs} run(s)",
            f"{versions}, default batching;"
            f" clients in {'this process' if args.same_process else 'a child process'}",
        )
        with h.traced(False):
            for run in range(args.runs):
                result = measure_run(run, args, clients, value)
                print(" ", progress_line(result), flush=True)
                runs.append(result)
    finally:
        clients.close()
    print(f"\n== Wire protocol: median (min-max) of {args.runs} run(s)")
    notes = [
        "ratios per run (both sides in the same run); wire / raw TCP = raw seconds / wire"
        " seconds for the same bytes; consume counts the warm-up records too",
        *first_errors(runs),
    ]
    rows = summary_rows(runs, args)
    print(h.table(HEAD, rows, notes))
    summary = [dict(zip(("measure", "value", "unit", "goal", "met"), row, strict=True))
               for row in rows]  # fmt: skip
    h.finish(args, started, {"runs": runs, "summary": summary})
    errors = sum(r.errors for r in runs)
    if errors:
        print(
            f"{errors} error(s): failed deliveries, records not read, first acks", file=sys.stderr
        )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
