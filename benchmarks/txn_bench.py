"""Transactions (KIP-98): confluent-kafka (librdkafka) against 3 brokers listening on loopback.

Measures, per run, against a fresh ``Cluster(brokers=3, listen="127.0.0.1")`` (tracing off),
one topic of ``--partitions`` partitions, RF 3, ``min.insync.replicas=2``, 100-byte values:

1. **Transactional produce.** For each size of ``--sizes`` (records per transaction: 1, 10
   and 100), one transactional ``Producer`` (``transactional.id`` set, so idempotent and
   acks=all; librdkafka's default batching) runs ``begin_transaction()``, ``size``
   ``produce()`` calls and ``commit_transaction()``: ``--transactions`` transactions of one
   record, and of a larger size as many records (``--transactions`` / size transactions), but
   at least ``--min-transactions`` transactions. Transactions/s and
   records/s from the first ``begin_transaction()`` to the last commit returned; p50 / p99 /
   max **commit latency**: the time ``commit_transaction()`` takes (librdkafka sends what
   the transaction still holds, waits for every acknowledgement, then EndTxn: the coordinator
   writes PrepareCommit, the markers, CompleteCommit). ``init_transactions()`` and one
   transaction of the same size come first, untimed (the coordinator's ``__transaction_state``
   partition, the connections, the followers' first fetch).
2. **The same records without transactions.** A plain producer (acks=all, idempotence off,
   the same batching) sends the same number of records in the same groups, calling
   ``flush()`` where the transactional one commits: records/s, and the p50 / p99 / max of a
   flush. Ratio transactional / plain records/s, per size, measured in the same run on the
   same cluster. Sizes alternate which goes first from run to run.
3. **read_committed against read_uncommitted.** The topic is first filled up to
   ``--consume-records`` more records in transactions of 1,000 (untimed), so that it holds
   the committed transactions of every size, their commit markers and the plain records.
   Two consumers (``isolation.level`` read_committed, read_uncommitted; ``group.id`` set,
   auto-commit off, nothing committed) assigned every partition at ``OFFSET_BEGINNING`` read
   every record back: records/s from ``assign()`` to the last record. Each level reads the
   topic once untimed first (``__consumer_offsets`` is created by the first consumer's
   FindCoordinator), then once timed, which one first alternating from run to run. Ratio
   read_committed / read_uncommitted.

The clients run in a child process (``spawn``, started before anything is timed), as a real
client never shares the brokers' interpreter and GIL; ``--same-process`` runs them here
instead. Every figure is the median of ``--runs`` runs with the min-max range; ratios are taken
per run. Percentiles are ``_harness.percentile`` (``statistics.quantiles``). A failed
transaction, delivery or record not read back makes the exit code 1.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
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
TOPIC, TOPIC_CONFIG = "txn-bench", {"min.insync.replicas": str(MIN_ISR)}
LISTEN = "127.0.0.1"
CALL_TIMEOUT_S = 60.0  # init / commit / flush bound
STALL_S = 30.0  # a consumer that reads nothing this long gives up
CONSUME_BATCH = 10_000
FILL_SIZE = 1_000  # records per transaction of the fill before consuming
ISOLATION = ("read_committed", "read_uncommitted")

clock = time.perf_counter
P = ParamSpec("P")
R = TypeVar("R")


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupsResult:
    """`groups` groups of `size` records: transactions (commit) or plain sends (flush)."""

    mode: str  # "transactional" or "plain"
    size: int  # records per group
    groups: int
    records: int
    delivered: int
    errors: int  # failed deliveries, transactions or groups + records never answered
    first_error: str
    seconds: float  # first group started to the last one ended
    groups_per_s: float
    records_per_s: float
    p50_ms: float  # commit_transaction() (transactional) / flush() (plain)
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class ConsumeResult:
    isolation: str
    expected: int
    records: int
    errors: int  # error messages + records missing
    first_error: str
    seconds: float  # assign() to the last record
    records_per_s: float


@dataclass(frozen=True, slots=True)
class RunResult:
    run: int
    produce: tuple[tuple[GroupsResult, GroupsResult], ...]  # (transactional, plain) per size
    fill: GroupsResult  # the untimed transactions written before consuming
    consume: tuple[ConsumeResult, ConsumeResult]  # read_committed, read_uncommitted

    @property
    def errors(self) -> int:
        produced = sum(t.errors + p.errors for t, p in self.produce) + self.fill.errors
        return produced + sum(c.errors for c in self.consume)


# --------------------------------------------------------------------------------------------
# The confluent-kafka side: plain functions, run in the clients' process
# --------------------------------------------------------------------------------------------


def client_versions() -> str:
    """confluent-kafka's and librdkafka's versions (the first call also starts the child)."""
    client = importlib.metadata.version("confluent-kafka")
    return f"confluent-kafka {client}, librdkafka {confluent_kafka.libversion()[0]}"


def _produce(producer: Producer, value: bytes, on_delivery: Callable[..., None]) -> None:
    """One record; while librdkafka's queue is full, serve the callbacks and try again."""
    while True:
        try:
            producer.produce(TOPIC, value, on_delivery=on_delivery)
            break
        except BufferError:
            producer.poll(0.001)
    producer.poll(0)


def produce_groups(
    bootstrap: str, mode: str, size: int, groups: int, value: bytes, transactional_id: str
) -> GroupsResult:
    """`groups` groups of `size` records: each a transaction, or plain sends and a flush."""
    transactional = mode == "transactional"
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    config |= {"transactional.id": transactional_id} if transactional else {"acks": "all"}
    producer = Producer(config)
    failures: list[str] = []
    answered = [0]

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        answered[0] += 1
        if err is not None:
            failures.append(str(err))

    def group() -> float:
        """One group; the seconds its commit_transaction() / flush() took."""
        if transactional:
            producer.begin_transaction()
        for _ in range(size):
            _produce(producer, value, delivered)
        started = clock()
        if transactional:
            producer.commit_transaction(CALL_TIMEOUT_S)
        elif producer.flush(CALL_TIMEOUT_S):
            raise TimeoutError("flush left records unanswered")
        return clock() - started

    ends: list[float] = []
    errors, first_error = 0, ""
    try:
        if transactional:
            producer.init_transactions(CALL_TIMEOUT_S)
        group()  # warm-up: untimed (partitions, connections, the followers' first fetch)
        producer.flush(CALL_TIMEOUT_S)  # its delivery callbacks served
        answered[0] = 0
        del failures[:]
        started = clock()
        for _ in range(groups):
            try:
                ends.append(group())
            except confluent_kafka.KafkaException as error:  # a failed transaction
                errors += 1
                first_error = first_error or str(error.args[0])
                if transactional and error.args[0].txn_requires_abort():
                    producer.abort_transaction(CALL_TIMEOUT_S)
                elif transactional and not error.args[0].retriable():
                    break
            except TimeoutError as error:
                errors += 1
                first_error = first_error or str(error)
        seconds = clock() - started
    except confluent_kafka.KafkaException as error:  # init or the warm-up failed
        seconds, errors = math.nan, errors + 1
        first_error = first_error or f"setup: {error.args[0]}"
    finally:
        producer.flush(CALL_TIMEOUT_S)
    records = groups * size
    unanswered = records - answered[0]
    milliseconds = [s * 1000 for s in ends]
    return GroupsResult(
        mode, size, groups, records, answered[0] - len(failures),
        errors + len(failures) + max(0, unanswered), (failures or [first_error])[0],
        seconds, h.ratio(len(ends), seconds), h.ratio(len(ends) * size, seconds),
        h.percentile(milliseconds, 50), h.percentile(milliseconds, 99),
        max(milliseconds, default=math.nan),
    )  # fmt: skip


def consume_all(bootstrap: str, isolation: str, expected: int) -> ConsumeResult:
    """Read `expected` records from every partition of the topic, from the beginning."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"txn-bench-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    got, errors, first_error = 0, 0, ""
    try:
        partitions = consumer.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
        started = progress = clock()
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in partitions])
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
            elif now - progress > STALL_S:
                break
        seconds = clock() - started
    finally:
        consumer.close()
    return ConsumeResult(
        isolation, expected, got, errors + expected - got, first_error, seconds,
        h.ratio(got, seconds),
    )  # fmt: skip


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


def group_counts(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(records per transaction, transactions) per size: `--transactions` records in all, but
    at least `--min-transactions` transactions."""
    return [(size, max(args.min_transactions, args.transactions // size)) for size in args.sizes]


def measure_run(run: int, args: argparse.Namespace, clients: Clients, value: bytes) -> RunResult:
    """One run on a fresh cluster: every size transactional and plain, then both consumers."""
    cluster = Cluster(brokers=BROKERS, listen=LISTEN)
    try:
        cluster.start()
        cluster.create_topic(TOPIC, args.partitions, REPLICATION_FACTOR, TOPIC_CONFIG)
        bootstrap = cluster.bootstrap_servers
        produced: list[tuple[GroupsResult, GroupsResult]] = []
        for size, groups in group_counts(args):
            modes = ["transactional", "plain"]
            if run % 2:
                modes.reverse()
            results = {
                mode: clients.run(
                    produce_groups, bootstrap, mode, size, groups, value, f"txn-bench-{size}"
                )
                for mode in modes
            }
            produced.append((results["transactional"], results["plain"]))
        fill_groups = max(1, args.consume_records // FILL_SIZE)
        fill = clients.run(
            produce_groups, bootstrap, "transactional", FILL_SIZE, fill_groups, value, "fill"
        )
        # every record delivered, with each producer's warm-up group
        expected = fill.delivered + FILL_SIZE
        expected += sum(t.delivered + p.delivered + 2 * t.size for t, p in produced)
        order = list(ISOLATION) if run % 2 == 0 else list(reversed(ISOLATION))
        for level in order:  # untimed: __consumer_offsets, connections
            clients.run(consume_all, bootstrap, level, expected)
        consumed = {level: clients.run(consume_all, bootstrap, level, expected) for level in order}
    finally:
        cluster.stop()
    return RunResult(
        run, tuple(produced), fill, (consumed["read_committed"], consumed["read_uncommitted"])
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

HEAD = ["measure", "median (min-max)", "unit"]


def summary_rows(runs: Sequence[RunResult]) -> list[list[object]]:
    rows: list[list[object]] = []

    def add(name: str, values: Iterable[float], unit: str, spec: str = ",.0f") -> None:
        rows.append([name, h.Spread.of(values).format(spec), unit])

    for k, (first, _) in enumerate(runs[0].produce):
        txn = [r.produce[k][0] for r in runs]
        plain = [r.produce[k][1] for r in runs]
        size = first.size
        add(f"{size} record(s) / transaction: transactions", (t.groups_per_s for t in txn), "/s")
        add("  records", (t.records_per_s for t in txn), "records/s")
        add("  commit latency p50", (t.p50_ms for t in txn), "ms", ",.1f")
        add("  commit latency p99", (t.p99_ms for t in txn), "ms", ",.1f")
        add("  commit latency max", (t.max_ms for t in txn), "ms", ",.1f")
        add(f"  same records without transactions, flush per {size}",
            (p.records_per_s for p in plain), "records/s")  # fmt: skip
        add("    flush p50", (p.p50_ms for p in plain), "ms", ",.1f")
        add("    flush p99", (p.p99_ms for p in plain), "ms", ",.1f")
        add("  transactional / plain records/s",
            (h.ratio(t.records_per_s, p.records_per_s) for t, p in zip(txn, plain, strict=True)),
            "x", ".2f")  # fmt: skip
    committed = [r.consume[0] for r in runs]
    uncommitted = [r.consume[1] for r in runs]
    add(f"fill: transactions of {FILL_SIZE:,} (untimed before consuming)",
        (f.records_per_s for f in (r.fill for r in runs)), "records/s")  # fmt: skip
    add("  commit latency p50", (r.fill.p50_ms for r in runs), "ms", ",.1f")
    add("topic read back", (c.expected for c in committed), "records")
    add("consume read_committed", (c.records_per_s for c in committed), "records/s")
    add("consume read_uncommitted", (c.records_per_s for c in uncommitted), "records/s")
    add("read_committed / read_uncommitted",
        (h.ratio(c.records_per_s, u.records_per_s)
         for c, u in zip(committed, uncommitted, strict=True)), "x", ".2f")  # fmt: skip
    rows.append(["errors (transactions, deliveries, reads)", sum(r.errors for r in runs), ""])
    return rows


def progress_line(r: RunResult) -> str:
    head, cells = ["run"], [str(r.run + 1)]
    for txn, plain in r.produce:
        head += [f"txn{txn.size}/s", f"p99ms{txn.size}", f"x{txn.size}"]
        cells += [
            h.num(txn.groups_per_s),
            h.num(txn.p99_ms, ".1f"),
            h.num(h.ratio(txn.records_per_s, plain.records_per_s), ".2f"),
        ]
    head += ["rc/s", "ru/s", "errors"]
    cells += [h.num(r.consume[0].records_per_s), h.num(r.consume[1].records_per_s), str(r.errors)]
    return h.pairs(head, cells)


def first_errors(runs: Iterable[RunResult]) -> list[str]:
    notes = []
    for r in runs:
        for result in (*(g for pair in r.produce for g in pair), r.fill):
            if result.first_error:
                notes.append(f"run {r.run + 1} {result.mode} x{result.size}: {result.first_error}")
        for consumed in r.consume:
            if consumed.first_error or consumed.records < consumed.expected:
                notes.append(
                    f"run {r.run + 1} {consumed.isolation}: {consumed.records} of "
                    f"{consumed.expected} read {consumed.first_error}".rstrip()
                )
    return notes


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "txn_bench",
        "confluent-kafka transactions against 3 brokers on loopback; the same records plain; "
        "read_committed against read_uncommitted.",
        "runs, each on a fresh cluster (3)",
    )
    p.add_argument("--sizes", type=h.int_list, default=(1, 10, 100),
                   help="records per transaction (1,10,100)")  # fmt: skip
    p.add_argument("--transactions", type=h.positive_int,
                   help="records per size (1,000): transactions of one record")  # fmt: skip
    p.add_argument("--min-transactions", type=h.positive_int,
                   help="transactions of any size at least (100)")  # fmt: skip
    p.add_argument("--partitions", type=h.positive_int, default=6, help="topic partitions (6)")
    p.add_argument("--consume-records", type=h.positive_int,
                   help="records added before consuming (200,000)")  # fmt: skip
    p.add_argument(
        "--same-process", action="store_true", help="the clients in this process, not a child"
    )
    return h.fill(
        p.parse_args(argv),
        transactions=(1_000, 300, 5),
        min_transactions=(100, 50, 2),
        consume_records=(200_000, 50_000, 2_000),
        runs=(3, 3, 1),
    )


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    value = random.Random(args.seed).randbytes(VALUE_BYTES)
    clients = Clients(args.same_process)
    runs: list[RunResult] = []
    try:
        versions = clients.run(client_versions)  # the child starts here, before any timing
        counts = ", ".join(f"{n:,} x {size}" for size, n in group_counts(args))
        h.header(
            f"{BROKERS} brokers on {LISTEN} (kafkactor.Cluster, tracing off); topic:"
            f" {args.partitions} partitions, RF {REPLICATION_FACTOR}, min ISR {MIN_ISR}; a fresh"
            f" cluster per run; transactions x records: {counts}; {VALUE_BYTES} B values;"
            f" {args.runs} run(s)",
            f"{versions}, default batching;"
            f" clients in {'this process' if args.same_process else 'a child process'};"
            f" load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the start",
        )
        with h.traced(False):
            for run in range(args.runs):
                result = measure_run(run, args, clients, value)
                print(" ", progress_line(result), flush=True)
                runs.append(result)
    finally:
        clients.close()
    print(f"\n== Transactions: median (min-max) of {args.runs} run(s)")
    notes = [
        "commit latency: commit_transaction() as the client sees it; plain: the same records in"
        " the same groups, acks=all, a flush() where the transaction commits; ratios per run",
        *first_errors(runs),
    ]
    rows = summary_rows(runs)
    print(h.table(HEAD, rows, notes))
    summary = [dict(zip(("measure", "value", "unit"), row, strict=True)) for row in rows]
    h.finish(args, started, {"runs": runs, "summary": summary})
    errors = sum(r.errors for r in runs)
    if errors:
        print(f"{errors} error(s): failed transactions, deliveries, records not read",
              file=sys.stderr)  # fmt: skip
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
