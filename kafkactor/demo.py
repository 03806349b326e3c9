"""The demo topology: three brokers on an embedded ZooKeeper, acks=all and acks=1 producers, a
consumer group of two long-poll consumers, and a partition leader that crashes and comes back;
then an exactly-once consume-transform-produce stage in transactions (`demo_exactly_once`)."""

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
from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.actors.transaction import TransactionConfig
from kafkactor.clients import Consumer, ProduceError, Producer, RecordMetadata
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.demo_exactly_once import ExactlyOnceResult, run_exactly_once_stage
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster

TOPIC = "events"
GROUP = "demo-readers"
PARTITIONS = 2  # leaders on brokers 1 and 2 at first
CRASHED_PARTITION = 0  # the leader of this partition crashes
# Kafka's settings, scaled down so that a crash shows within seconds
DEMO_CONFIG = BrokerConfig(
    replica=ReplicaManagerConfig(
        replica_lag_time_max_ms=1000,
        replica_fetch_wait_max_ms=250,
        replica_fetch_backoff_ms=100,
        high_watermark_checkpoint_interval_ms=1000,
    ),
    # Kafka's own config/server.properties sets this to 0 for development: the group's first
    # rebalance does not wait 3 s for more members
    group=GroupConfig(initial_rebalance_delay_ms=0),
    # __transaction_state with 10 partitions rather than 50: created in a second, not several
    transaction=TransactionConfig(state_log_num_partitions=10),
)


@dataclass(slots=True)
class ProducerStats:
    acks: int
    sent: int = 0
    acked: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    acked_values: set[bytes] = field(default_factory=set)

    def percentile(self, q: float) -> float:
        if not self.latencies_ms:
            return 0.0
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass(slots=True)
class DemoResult:
    """What the demo saw. `missing_acked` counts acks=all records acknowledged but never
    consumed (Kafka promises none); `missing_by_acks` counts them per acks setting (acks=1 may
    lose records its crashed leader had not replicated yet). `exactly_once` is what the
    transactional stage's check found (None when it was not run)."""

    producers: list[ProducerStats]
    consumed: int
    missing_acked: int
    missing_by_acks: dict[int, int]
    events_path: Path
    events: Counter[str]
    timeline: list[str]
    exactly_once: ExactlyOnceResult | None = None


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

        def done(
            future: Future[list[RecordMetadata]],
            started: float = started,
            values: list[bytes] = values,
        ) -> None:
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                error = future.exception()
                if error is None:
                    metadata = future.result()
                    stats.acked += len(metadata)
                    stats.latencies_ms.append(elapsed)
                    stats.acked_values.update(values)
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


def _drain(consumers: list[Consumer], consumed: set[bytes], acked: set[bytes]) -> None:
    """Read until every acknowledged record was seen, or 5 s pass."""
    deadline = time.monotonic() + 5
    while not acked <= consumed and time.monotonic() < deadline:
        for consumer in consumers:
            for record in consumer.poll(100):
                if record.value is not None:
                    consumed.add(record.value)


def _start_readers(
    cluster: Cluster, stop: threading.Event, consumed: set[bytes]
) -> tuple[list[Consumer], list[threading.Thread]]:
    """Two members of the consumer group GROUP, each polling in a thread of its own."""
    readers = [
        cluster.consumer(group_id=GROUP, max_wait_ms=500, name=f"demo-reader-{i}") for i in (1, 2)
    ]

    def consume(consumer: Consumer) -> None:
        while not stop.is_set():
            for record in consumer.poll(200):
                if record.value is not None:
                    consumed.add(record.value)

    threads = []
    for consumer in readers:
        consumer.subscribe([TOPIC])
        thread = threading.Thread(
            target=consume, args=(consumer,), name=f"demo-{consumer.address}", daemon=True
        )
        thread.start()
        threads.append(thread)
    return readers, threads


def _group_summary(readers: list[Consumer]) -> str:
    """Which partitions each member read, and the offsets it committed."""
    members = []
    for consumer in readers:
        tps = consumer.assignment()
        read = ", ".join(f"p{tp.partition}" for tp in tps)
        committed = ", ".join(f"p{tp.partition}@{consumer.committed(tp)}" for tp in tps)
        members.append(f"{consumer.address} read {read} (committed {committed})")
    return f"group {GROUP!r}: " + "; ".join(members)


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
    exactly_once: bool = True,
) -> DemoResult:
    """Run the topology for `seconds`; the leader of partition 0 crashes at 1/3 of the run
    and comes back at 2/3. Then, with `exactly_once`, the transactional stage runs on the same
    cluster (a few seconds more)."""
    tracing.configure(path=events_path)
    timeline: list[str] = []
    started = time.monotonic()

    def note(text: str) -> None:
        line = f"t={time.monotonic() - started:5.1f}s  {text}"
        timeline.append(line)
        print_fn(line)

    with Cluster(3, config=DEMO_CONFIG, session_timeout_ms=1500) as cluster:
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
        producers = [
            cluster.producer(acks=s.acks, timeout_ms=5000, retries=100, retry_backoff_ms=100)
            for s in stats
        ]
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
        consumed: set[bytes] = set()
        readers, reader_threads = _start_readers(cluster, stop, consumed)
        for thread in threads:
            thread.start()
        note(
            f"consumer group {GROUP!r}: 2 members subscribe to {TOPIC!r}; the coordinator "
            f"(the leader of {OFFSETS_TOPIC}-{partition_for(GROUP)}, broker "
            f"{cluster.leader(OFFSETS_TOPIC, partition_for(GROUP))}) gives each a partition"
        )

        def report() -> None:
            isr = ", ".join(
                f"p{p} leader={cluster.leader(TOPIC, p)} isr={list(cluster.isr(TOPIC, p))}"
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
                victim = cluster.leader(TOPIC, CRASHED_PARTITION)
                controller = cluster.controller_id()
                cluster.kill_broker(victim)
                note(
                    f"broker {victim} (leader of p{CRASHED_PARTITION}"
                    + (", and the controller" if controller == victim else "")
                    + ") crashed, no flush: when its ZooKeeper session expires, a new leader "
                    "is elected from the ISR; producers retry meanwhile"
                )
            elif action == "restart":
                cluster.restart_broker(victim)
                note(
                    f"broker {victim} restarted: recovers its logs, registers again, "
                    "follows, cuts its log where the new leader's epochs say they part, "
                    "catches up and rejoins the ISR"
                )
        stop.set()
        for thread in threads:
            thread.join(10)
        for producer in producers:
            producer.close()  # every answer is in: the producer threads waited for them
        # Read everything the HW exposes, then compare with what was acknowledged.
        for thread in reader_threads:
            thread.join(5)
        _drain(readers, consumed, set().union(*(s.acked_values for s in stats)))
        for consumer in readers:
            consumer.commit()
        note(_group_summary(readers))
        stage = run_exactly_once_stage(cluster, note) if exactly_once else None
        missing_by_acks = {s.acks: len(s.acked_values - consumed) for s in stats}
        missing = missing_by_acks[-1]
        note(
            f"stopped; {len(consumed)} records consumed; acknowledged but never consumed: "
            f"acks=all {missing}, acks=1 {missing_by_acks[1]}"
        )
    tracing.flush()
    tracing.close()
    events = _count_events(events_path)
    return DemoResult(
        producers=stats,
        consumed=len(consumed),
        missing_acked=missing,
        missing_by_acks=missing_by_acks,
        events_path=events_path,
        events=events,
        timeline=timeline,
        exactly_once=stage,
    )
