"""Broker CPU per record: what a `kafkactor serve` process spends to take and serve records.

Each measurement starts a fresh ``python -m kafkactor serve`` process (tracing off, a temporary
data dir, its own ports) and drives it from this process with confluent-kafka at librdkafka's
defaults (acks=all, default batching), so the client's CPU is never the broker's: the figure is
the serve process's own CPU time (``/proc/<pid>/stat`` utime + stime, every thread of it, 10 ms
ticks) over the window, per 100,000 records of 100-byte values.

1. **Produce**: ``--records`` values to a topic of 3 partitions at RF = the brokers (3 brokers:
   RF 3, ``min.insync.replicas=2``; 1 broker: RF 1), from the first ``produce()`` to the last
   delivery report. One record per partition is produced and flushed first (connections,
   metadata, the followers' first fetches), and read by the consumer, outside the window.
2. **Consume**: a consumer (``group.id`` set, auto-commit off) that has already read the
   warm-up records of another topic (so its connections, coordinator lookup and
   ``__consumer_offsets`` are behind it) is assigned every partition of the produced topic
   from the beginning and reads it whole: the window runs from ``assign()`` to the last
   record (assigned any earlier, librdkafka would fetch ahead during the produce).
3. **Idle**: the process's CPU over ``--idle-s`` seconds with nothing to do, once it serves
   (ticks of the timer, fetchers waiting on their leaders): as % of one core, and what that
   rate comes to over each window (``idle share``), so a figure can be read net of it.

The baseline in the same run is the same broker with ``actor.runtime=threads`` (a thread per
actor, ``KAFKACTOR_ACTOR_RUNTIME``) against the default dispatcher; ratios are per run (both
sides measured in the same run, one after the other). Every figure is the median of ``--runs``
runs with the min-max range. The goals printed (the project's, for the pure build): acks=all RF
3 <= 0.19 s per 100,000 records; consume <= 0.05 s.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _harness as h
from _serve_startup import die_with_parent

from kafkactor.actors.runtime.runtime_config import ACTOR_RUNTIME_ENV

VALUE = b"v" * 100
PARTITIONS = 3
PER = 100_000  # CPU is reported per this many records
READY_TIMEOUT_S = 60.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
GOALS = {("produce", 3): 0.19, ("consume", 3): 0.05, ("consume", 1): 0.05}


@dataclass(frozen=True, slots=True)
class Sample:
    """One run of one broker count and runtime: CPU seconds per 100,000 records and rates."""

    produce_cpu: float
    produce_rate: float
    consume_cpu: float
    consume_rate: float
    idle_pct: float  # % of one core while idle
    produce_idle_share: float  # idle rate x produce window, per 100,000 records
    consume_idle_share: float


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid`, every thread of it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


@contextlib.contextmanager
def serve(brokers: int, runtime: str) -> Iterator[tuple[int, str]]:
    """A `kafkactor serve` process on free ports (port 0) and its own data dir: (pid,
    bootstrap servers). Killed with this process however it ends (`die_with_parent`)."""
    with tempfile.TemporaryDirectory(prefix="cpu-bench-") as data:
        env = {**os.environ, ACTOR_RUNTIME_ENV: runtime}
        command = [
            sys.executable,
            "-m",
            "kafkactor",
            "serve",
            "--brokers",
            str(brokers),
            "--port",
            "0",
            "--data-dir",
            data,
        ]
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509  (one foreign call, resolved before)
        )
        try:
            yield process.pid, _bootstrap(process)
        finally:
            with contextlib.suppress(ProcessLookupError):  # thrown away: no clean stop needed
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def _bootstrap(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    for line in process.stdout:
        if line.startswith("bootstrap.servers="):
            return line.strip().partition("=")[2]
        if time.monotonic() > deadline:
            break
    raise RuntimeError(f"kafkactor serve did not print its bootstrap servers: {process.args!r}")


def create_topic(bootstrap: str, name: str, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if rf >= 3 else {}
    futures = admin.create_topics([NewTopic(name, PARTITIONS, rf, config=config)])
    for future in futures.values():
        future.result(timeout=30)


def warm(producer: Any, topic: str, report: Any) -> None:
    """One record per partition, flushed: connections, metadata, the followers' first
    fetches."""
    for partition in range(PARTITIONS):
        producer.produce(topic, VALUE, partition=partition, on_delivery=report)
    if producer.flush(30) != 0:
        raise RuntimeError("the warm-up records were not acknowledged")


def produce(producer: Any, topic: str, records: int, pid: int) -> tuple[float, float, float]:
    """(CPU seconds of the broker process, wall seconds, records) over the produce window."""
    failed: list[Any] = []

    def report(error: Any, message: Any) -> None:
        if error is not None:
            failed.append(error)

    cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, VALUE, on_delivery=report)
                break
            except BufferError:  # librdkafka's queue is full: let it drain
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records still unacknowledged after the flush")
    wall, cpu = time.perf_counter() - wall0, cpu_seconds(pid) - cpu0
    if failed:
        raise RuntimeError(f"{len(failed)} records failed: {failed[0]}")
    return cpu, wall, float(records)


def warm_consumer(bootstrap: str, topic: str) -> Any:
    """A consumer assigned every partition from the beginning that has read the warm-up
    records (one per partition): connections, metadata, its group's coordinator and
    `__consumer_offsets` are behind it before any window opens."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "cpu-bench",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    read_records(consumer, PARTITIONS)
    return consumer


def assign_from_start(consumer: Any, topic: str) -> None:
    """Point the warmed consumer at `topic` from its beginning (librdkafka fetches ahead as
    soon as it is assigned, so this happens at the start of the consume window)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])


def read_records(consumer: Any, expected: int) -> None:
    seen, deadline = 0, time.monotonic() + 120
    while seen < expected and time.monotonic() < deadline:
        for message in consumer.consume(10_000, timeout=1.0):
            if message.error() is None:
                seen += 1
    if seen < expected:
        raise RuntimeError(f"read {seen} of {expected} records")


def consume(consumer: Any, expected: int, pid: int) -> tuple[float, float]:
    """(CPU seconds of the broker process, wall seconds) for `consumer` to read `expected`
    more records."""
    cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
    assign_from_start(consumer, "cpu")
    read_records(consumer, expected)
    return cpu_seconds(pid) - cpu0, time.perf_counter() - wall0


def idle_rate(pid: int, seconds: float) -> float:
    """CPU seconds per second of the process while nothing is asked of it."""
    cpu0, wall0 = cpu_seconds(pid), time.perf_counter()
    time.sleep(seconds)  # the measured window itself: nothing to wait for
    return (cpu_seconds(pid) - cpu0) / (time.perf_counter() - wall0)


def measure(brokers: int, runtime: str, args: Any) -> Sample:
    from confluent_kafka import Producer

    with serve(brokers, runtime) as (pid, bootstrap):
        create_topic(bootstrap, "cpu", rf=brokers)
        create_topic(bootstrap, "cpu-warm", rf=brokers)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        warm(producer, "cpu", None)
        warm(producer, "cpu-warm", None)
        # warmed on another topic: assigned to "cpu" now, it would fetch it during the produce
        consumer = warm_consumer(bootstrap, "cpu-warm")
        try:
            idle = idle_rate(pid, args.idle_s)
            cpu_p, wall_p, records = produce(producer, "cpu", args.records, pid)
            cpu_c, wall_c = consume(consumer, args.records + PARTITIONS, pid)
        finally:
            consumer.close()
    scale = PER / records
    return Sample(
        produce_cpu=cpu_p * scale,
        produce_rate=records / wall_p,
        consume_cpu=cpu_c * scale,
        consume_rate=records / wall_c,
        idle_pct=idle * 100,
        produce_idle_share=idle * wall_p * scale,
        consume_idle_share=idle * wall_c * scale,
    )


def main() -> int:
    parser = h.parser("cpu_bench", __doc__.split("\n\n")[0], runs="runs per broker count")
    parser.add_argument("--records", type=h.positive_int, help="records per run (100,000)")
    parser.add_argument("--brokers", type=h.int_list, help="broker counts (3,1)")
    parser.add_argument(
        "--runtime",
        choices=("both", "dispatcher", "threads"),
        help="actor runtimes to measure (both, the default: threads is the baseline)",
    )
    parser.add_argument("--idle-s", type=float, help="the idle window, seconds (3)")
    args = h.fill(
        parser.parse_args(),
        records=(100_000, 30_000, 2_000),
        brokers=((3, 1), (3, 1), (1,)),
        runs=(3, 3, 1),
        idle_s=(3.0, 2.0, 0.5),
        runtime=("both", "both", "dispatcher"),
    )
    runtimes = ("threads", "dispatcher") if args.runtime == "both" else (args.runtime,)
    started = time.perf_counter()
    h.header(
        f"kafkactor serve, one process per measurement; confluent-kafka in this process; "
        f"{args.records:,} records of {len(VALUE)} B, {PARTITIONS} partitions, acks=all; "
        f"{args.runs} run(s), median (min-max); CPU of the serve process per {PER:,} records"
    )
    results: dict[str, Any] = {}
    rows = []
    for brokers in args.brokers:
        samples: dict[str, list[Sample]] = {runtime: [] for runtime in runtimes}
        for _ in range(args.runs):
            for runtime in runtimes:  # side by side within each run
                samples[runtime].append(measure(brokers, runtime, args))
        for runtime in runtimes:
            got = samples[runtime]
            results[f"brokers_{brokers}_{runtime}"] = [vars_of(s) for s in got]
            for phase in ("produce", "consume"):
                cpu = h.Spread.of(getattr(s, f"{phase}_cpu") for s in got)
                rate = h.Spread.of(getattr(s, f"{phase}_rate") for s in got)
                share = h.Spread.of(getattr(s, f"{phase}_idle_share") for s in got)
                if runtime != "threads" and "threads" in samples:
                    ratio = h.Spread.of(
                        h.ratio(getattr(n, f"{phase}_cpu"), getattr(o, f"{phase}_cpu"))
                        for n, o in zip(got, samples["threads"], strict=True)
                    ).format(".2f")
                else:
                    ratio = "-"
                goal = GOALS.get((phase, brokers))
                verdict = (
                    "-"
                    if goal is None
                    else f"<= {goal} " + ("met" if cpu.median <= goal else "not met")
                )
                rows.append(
                    [
                        f"{phase} {brokers} broker{'s' if brokers > 1 else ''} RF {brokers}",
                        runtime,
                        cpu.format(".3f"),
                        ratio,
                        share.format(".3f"),
                        rate.format(",.0f"),
                        h.Spread.of(s.idle_pct for s in got).format(".1f"),
                        verdict,
                    ]
                )
    print(
        h.table(
            [
                "phase",
                "runtime",
                f"CPU s / {PER // 1000}k",
                "vs threads",
                "idle share",
                "records/s",
                "idle % core",
                "goal",
            ],
            rows,
        )
    )
    h.finish(args, started, results)
    return 0


def vars_of(sample: Sample) -> dict[str, float]:
    return {name: getattr(sample, name) for name in Sample.__slots__}


if __name__ == "__main__":
    sys.exit(main())
