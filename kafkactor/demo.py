"""The demo topology: three brokers, acks=all and acks=1 producers, a long-poll consumer, and a
follower that crashes and comes back."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.cluster import Cluster
from kafkactor.actors.consumer import Consumer
from kafkactor.actors.producer import ProduceError, Producer, RecordMetadata
from kafkactor.actors.replica_manager import ReplicaManagerConfig
from kafkactor.storage import LogConfig

TOPIC = "events"
PARTITIONS = 2  # leaders on brokers 1 and 2: broker 3 only follows, so it can crash safely
FOLLOWER = 3


@dataclass(slots=True)
class ProducerStats:
    acks: int
    sent: int = 0
    acked: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    acked_offsets: set[tuple[int, int]] = field(default_factory=set)

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(slots=True)
class DemoResult:
    producers: list[ProducerStats]
    consumed: int
    missing_acked: int
    events_path: Path
    events: Counter[str]
    timeline: list[str]


def _produce_loop(
    producer: Producer,
    stats: ProducerStats,
    stop: threading.Event,
    *,
    batch: int,
    in_flight: int,
) -> None:
    slots = threading.BoundedSemaphore(in_flight)
    lock = threading.Lock()
    partition = 0
    while not stop.is_set():
        if not slots.acquire(timeout=0.1):
            continue
        values = [b"%d-%d" % (stats.acks, stats.sent + i) for i in range(batch)]
        started = time.perf_counter()

        def done(future: Future[list[RecordMetadata]], started: float = started) -> None:
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                error = future.exception()
                if error is None:
                    metadata = future.result()
                    stats.acked += len(metadata)
                    stats.latencies_ms.append(elapsed)
                    stats.acked_offsets.update((m.partition, m.offset) for m in metadata)
                else:
                    code = error.error_code.name if isinstance(error, ProduceError) else repr(error)
                    stats.errors[code] += 1
            slots.release()

        stats.sent += batch
        producer.send_batch(TOPIC, values, partition=partition).add_done_callback(done)
        partition = (partition + 1) % PARTITIONS
        time.sleep(0.002)  # a steady trickle, not a flood: the demo is for watching
    for _ in range(in_flight):  # wait for the answers still out (bounded by the timeout)
        slots.acquire(timeout=10)


def _drain(consumer: Consumer, consumed: set[tuple[int, int]], acked: set[tuple[int, int]]) -> int:
    """Read until every acknowledged record was seen (or 10 s pass); how many are missing."""
    deadline = time.monotonic() + 10
    while not acked <= consumed and time.monotonic() < deadline:
        for record in consumer.poll(200):
            consumed.add((record.partition, record.offset))
    return len(acked - consumed)


def _count_events(path: Path) -> Counter[str]:
    events: Counter[str] = Counter()
    with path.open("rb") as lines:
        for line in lines:
            try:
                events[orjson.loads(line)["event"]] += 1
            except (orjson.JSONDecodeError, KeyError):
                events["<unreadable>"] += 1
    return events


def run_demo(
    *,
    seconds: float = 12.0,
    events_path: Path = Path("kafkactor-demo-events.jsonl"),
    batch: int = 10,
    print_fn: Callable[[str], None] = print,
) -> DemoResult:
    """Run the topology for `seconds`, crash broker 3 at 1/3 and restart it at 2/3."""
    tracing.configure(path=events_path)
    config = BrokerConfig(
        replica=ReplicaManagerConfig(
            replica_lag_time_max_ms=1000,
            replica_fetch_wait_max_ms=250,
            replica_fetch_backoff_ms=100,
            high_watermark_checkpoint_interval_ms=1000,
        )
    )
    timeline: list[str] = []
    started = time.monotonic()

    def note(text: str) -> None:
        line = f"t={time.monotonic() - started:5.1f}s  {text}"
        timeline.append(line)
        print_fn(line)

    with Cluster(3, config=config, session_timeout_ms=1500) as cluster:
        cluster.create_topic(
            TOPIC,
            partitions=PARTITIONS,
            replication_factor=3,
            config=LogConfig(min_insync_replicas=2),
        )
        note(
            f"topic {TOPIC!r}: {PARTITIONS} partitions, RF 3, min ISR 2; leaders "
            + ", ".join(f"p{p}->broker {cluster.leader(TOPIC, p)}" for p in range(PARTITIONS))
        )
        stop = threading.Event()
        stats = [ProducerStats(acks=-1), ProducerStats(acks=1)]
        producers = [cluster.producer(acks=s.acks, timeout_ms=5000) for s in stats]
        threads = [
            threading.Thread(
                target=_produce_loop,
                args=(p, s, stop),
                kwargs={"batch": batch, "in_flight": 4},
                name=f"demo-producer-acks{s.acks}",
                daemon=True,
            )
            for p, s in zip(producers, stats, strict=True)
        ]
        consumer = cluster.consumer(max_wait_ms=500)
        consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
        consumed: set[tuple[int, int]] = set()

        def consume() -> None:
            while not stop.is_set():
                for record in consumer.poll(200):
                    consumed.add((record.partition, record.offset))

        reader = threading.Thread(target=consume, name="demo-consumer", daemon=True)
        for thread in [*threads, reader]:
            thread.start()

        def report() -> None:
            isr = ", ".join(
                f"p{p} isr={list(cluster.describe_partition(TOPIC, p).isr)}"
                for p in range(PARTITIONS)
            )
            print_fn(
                f"t={time.monotonic() - started:5.1f}s  acks=all {stats[0].acked:6d} acked"
                f"  acks=1 {stats[1].acked:6d} acked  consumed {len(consumed):6d}  {isr}"
            )

        phases = [(seconds / 3, "crash"), (2 * seconds / 3, "restart"), (seconds, "end")]
        for at, action in phases:
            while time.monotonic() - started < at:
                time.sleep(min(1.0, max(0.0, at - (time.monotonic() - started))))
                report()
            if action == "crash":
                cluster.kill_broker(FOLLOWER)
                note(
                    f"broker {FOLLOWER} crashed (no flush); acks=all waits for the ISR "
                    "to shrink, then goes on with 2 replicas"
                )
            elif action == "restart":
                cluster.restart_broker(FOLLOWER)
                note(
                    f"broker {FOLLOWER} restarted: recovers its logs, truncates to its HW, "
                    "catches up and rejoins the ISR"
                )
        stop.set()
        for thread in threads:
            thread.join(10)
        for producer in producers:
            producer.close()  # every answer is in: the producer threads waited for them
        # Read everything the HW exposes, then compare with what was acknowledged.
        reader.join(5)
        acked = set().union(*(s.acked_offsets for s in stats))
        missing = _drain(consumer, consumed, acked)
        note(f"stopped; {len(consumed)} records consumed, {missing} acknowledged records missing")
    tracing.flush()
    tracing.close()
    events = _count_events(events_path)
    return DemoResult(
        producers=stats,
        consumed=len(consumed),
        missing_acked=missing,
        events_path=events_path,
        events=events,
        timeline=timeline,
    )
