"""The demo's exactly-once stage: a consume-transform-produce loop in Kafka transactions (a
read_committed group member reads orders, a transactional producer writes them transformed and
commits the consumed offsets in the same transaction), one transaction aborted on purpose, then
a read_committed check of the output."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkactor.clients import Consumer, Producer, TransactionError
from kafkactor.clients.completed_fetch import ConsumerRecord
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster

__all__ = ["ExactlyOnceResult", "run_exactly_once_stage"]

INPUT = "orders"
OUTPUT = "orders-priced"
GROUP = "demo-pricing"
TRANSACTIONAL_ID = "demo-pricing-stage"
FEED_ID = "demo-orders-feed"
PARTITIONS = 2
ABORTED_TRANSACTION = 2  # the stage aborts its second transaction on purpose
_WAIT_S = 30.0
_END_TRIES = 4
_STAGE_S = 60.0  # the most the loop may take (a few seconds on an idle machine)


@dataclass(slots=True)
class ExactlyOnceResult:
    """What the check found. `duplicated` and `missing` count inputs seen more than once or
    never in the read_committed output; `aborted_visible` counts records of aborted
    transactions a read_committed reader saw (Kafka promises 0 of each); `aborted_records` is
    how many the transaction aborted on purpose wrote (read_uncommitted sees them, and those of
    any transaction aborted after an error: `read_uncommitted`)."""

    inputs: int
    transactions: int
    aborted_records: int
    committed_output: int
    read_uncommitted: int
    duplicated: int
    missing: int
    aborted_visible: int
    committed_offsets: dict[int, int | None] = field(default_factory=dict)
    input_ends: dict[int, int] = field(default_factory=dict)  # after the last order
    elapsed_s: float = 0.0

    @property
    def proved(self) -> bool:
        """Every input exactly once, nothing aborted visible, the offsets at the input's end."""
        return (
            self.duplicated == self.missing == self.aborted_visible == 0
            and self.committed_output == self.inputs
            and self.committed_offsets == self.input_ends
        )


def _feed(cluster: Cluster, inputs: int) -> dict[int, int]:
    """Write the orders in one transaction (idempotent: a send the ISR was too slow for is
    sent again without a duplicate); the offset after the last order, per partition."""
    config = LogConfig(min_insync_replicas=2)
    for topic in (INPUT, OUTPUT):
        cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3, config=config)
    feeder = cluster.producer(transactional_id=FEED_ID, max_block_ms=15_000, name="demo-orders")
    feeder.init_transactions()
    for _ in range(3):
        try:
            feeder.begin_transaction()
            orders = range(inputs)
            sent = [feeder.send(INPUT, b"order-%03d" % i, partition=i % PARTITIONS) for i in orders]
            _end(feeder, commit=True)
        except TransactionError as error:
            if not error.abortable:
                raise
            _end(feeder, commit=False)  # the orders are written again
            continue
        feeder.close()
        ends: dict[int, int] = {}
        for landed in (future.result() for future in sent):
            ends[landed.partition] = max(ends.get(landed.partition, 0), landed.offset + 1)
        return ends
    raise RuntimeError("the orders could not be written in 3 transactions")


def _end(producer: Producer, *, commit: bool) -> None:
    """Commit or abort; one that timed out (a loaded machine) is asked again, which resumes
    it (Kafka's advice for a `TimeoutException` from commitTransaction / abortTransaction)."""
    end = producer.commit_transaction if commit else producer.abort_transaction
    for attempt in range(_END_TRIES):
        try:
            end()
        except TransactionError as error:
            if error.error_code is not ErrorCode.REQUEST_TIMED_OUT or attempt == _END_TRIES - 1:
                raise
        else:
            return


def _transform(record: ConsumerRecord, transaction: int) -> bytes:
    """The stage's work: an order priced, stamped with the transaction that wrote it."""
    return b"%s priced in transaction %d" % (record.value or b"", transaction)


def _transaction_of(value: bytes) -> int:
    """The transaction that wrote an output value (`_transform`'s stamp)."""
    return int(value.rsplit(b" ", 1)[-1])


def _check(cluster: Cluster, isolation: str, at_least: int) -> list[bytes]:
    """Every value of OUTPUT a reader of `isolation` sees (once `at_least` came, one more
    poll looks for anything beyond)."""
    reader = cluster.consumer(isolation_level=isolation, max_wait_ms=100, name=f"demo-{isolation}")
    reader.assign([(OUTPUT, p) for p in range(PARTITIONS)])
    values: list[bytes] = []
    deadline = time.monotonic() + _WAIT_S
    while len(values) < at_least and time.monotonic() < deadline:
        values.extend(r.value or b"" for r in reader.poll(100))
    values.extend(r.value or b"" for r in reader.poll(300))
    reader.close()
    return values


class _Stage:
    """The consume-transform-produce loop: each chunk of read orders is one transaction of
    its outputs and the offsets past it; an aborted one is read again from the committed
    offsets, as a real stage does after a failure."""

    def __init__(self, reader: Consumer, producer: Producer, note: Callable[[str], None]) -> None:
        self.reader, self.producer, self.note = reader, producer, note
        self.committed: dict[TopicPartition, int] = {}
        self.transactions = self.processed = self.aborted_records = 0
        self.aborted: set[int] = set()  # the transactions aborted, on purpose or after an error

    def run(self, inputs: int, per_transaction: int) -> None:
        pending: list[ConsumerRecord] = []
        deadline = time.monotonic() + _STAGE_S
        while self.processed < inputs and time.monotonic() < deadline:
            if not pending:
                pending = self.reader.poll(200)
                continue
            chunk, pending = pending[:per_transaction], pending[per_transaction:]
            if not self._transaction(chunk):
                pending = []  # read again from the committed offsets
                for tp in self.reader.assignment():
                    self.reader.seek(tp, self.committed.get(tp, 0))

    def _transaction(self, chunk: list[ConsumerRecord]) -> bool:
        """One transaction of `chunk`: whether it committed."""
        self.transactions += 1
        number, producer = self.transactions, self.producer
        offsets = dict(self.committed)
        try:
            producer.begin_transaction()
            for record in chunk:
                producer.send(OUTPUT, _transform(record, number), partition=record.partition)
                offsets[record.topic_partition] = record.offset + 1
            producer.send_offsets_to_transaction(offsets, self.reader.group_metadata())
            if number != ABORTED_TRANSACTION:
                _end(producer, commit=True)
                self.committed = offsets
                self.processed += len(chunk)
                return True
            _end(producer, commit=False)
            self.aborted_records = len(chunk)
            self.note(
                f"transaction {number} ({len(chunk)} records and its offsets) aborted on "
                "purpose; the stage reads them again from the committed offsets"
            )
        except TransactionError as error:  # a send failed (the ISR shrank, ...): abort, redo
            if not error.abortable:
                raise
            _end(producer, commit=False)
            self.note(f"transaction {number} aborted after {error.error_code.name}; redone")
        self.aborted.add(number)
        return False


def run_exactly_once_stage(
    cluster: Cluster, note: Callable[[str], None], *, inputs: int = 200, per_transaction: int = 25
) -> ExactlyOnceResult:
    """Feed `inputs` orders, run the stage until every one is committed (transactions of at
    most `per_transaction` records, the second aborted and redone), then check the output."""
    started = time.monotonic()
    input_ends = _feed(cluster, inputs)
    reader: Consumer = cluster.consumer(
        group_id=GROUP,
        isolation_level="read_committed",
        enable_auto_commit=False,
        max_wait_ms=100,
        heartbeat_interval_ms=500,
        name="demo-pricing-reader",
    )
    reader.subscribe([INPUT])
    producer = cluster.producer(
        transactional_id=TRANSACTIONAL_ID, max_block_ms=15_000, name="demo-pricing-writer"
    )
    producer.init_transactions()
    note(
        f"exactly-once stage: group {GROUP!r} reads {inputs} {INPUT!r} (read_committed); "
        f"transactional id {TRANSACTIONAL_ID!r} writes {OUTPUT!r} and commits the read "
        "offsets in the same transaction"
    )
    stage = _Stage(reader, producer, note)
    stage.run(inputs, per_transaction)
    producer.close()
    tps = [TopicPartition(topic=INPUT, partition=p) for p in range(PARTITIONS)]
    committed_offsets = {tp.partition: reader.committed(tp) for tp in tps}
    reader.close()

    seen = _check(cluster, "read_committed", inputs)
    everything = _check(cluster, "read_uncommitted", inputs + stage.aborted_records)
    orders = Counter(value.split(b" ")[0] for value in seen)
    result = ExactlyOnceResult(
        inputs=inputs,
        transactions=stage.transactions,
        aborted_records=stage.aborted_records,
        committed_output=len(seen),
        read_uncommitted=len(everything),
        duplicated=sum(1 for n in orders.values() if n > 1),
        missing=sum(1 for i in range(inputs) if b"order-%03d" % i not in orders),
        aborted_visible=sum(1 for value in seen if _transaction_of(value) in stage.aborted),
        committed_offsets=committed_offsets,
        input_ends=dict(input_ends),
        elapsed_s=time.monotonic() - started,
    )
    offsets_text = ", ".join(f"p{p}@{o}" for p, o in committed_offsets.items())
    note(
        f"exactly-once check (read_committed): {result.committed_output} outputs for "
        f"{inputs} inputs, duplicated {result.duplicated}, missing {result.missing}, records "
        f"of aborted transactions visible {result.aborted_visible} (read_uncommitted sees "
        f"{result.read_uncommitted - result.committed_output}); group committed {offsets_text}"
    )
    return result
