"""The consume-transform-produce workload of `kafkactor nemesis --transactions` (Kafka's
exactly-once pattern: KIP-98's read-process-write loop, as Kafka Streams runs it).

An input topic is filled before the faults (`fill_input`: acks=all, distinct values). One
worker per input partition, each with a fixed transactional id, loops: read from its
partition where the group last committed, begin a transaction, send one output record per
input record (`txn_verdict.output_value`, spread over the output partitions so that a
transaction spans several), `send_offsets_to_transaction` the next input offset, then commit
or, with a seeded probability, abort on purpose. Every attempt is kept with its outcome
(`txn_verdict.Attempt`). An error before the commit was asked aborts; if the abort fails too
(fenced, fatal) or the commit itself failed, the worker replaces its producer with a new one
of the same transactional id (its `init_transactions` fences the old one and completes or
aborts what it left open) and reads the group's committed offset again. With a seeded
probability a worker also plays the zombie on purpose: it starts the new producer while the
old one's transaction is open, then asks the old one to commit, which must fail.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from kafkactor.clients import Consumer, ConsumerRecord, Producer
from kafkactor.common import TopicPartition
from kafkactor.testing.cluster import Cluster
from kafkactor.testing.txn_verdict import Attempt, Outcome, output_value
from kafkactor.testing.verdict import Ack

INPUT_TOPIC = "nemesis-in"
OUTPUT_TOPIC = "nemesis-out"
GROUP = "nemesis-txn"
SEND_TIMEOUT_S = 35.0  # how long a transaction waits for its sends (request.timeout.ms + 5 s)
BACKOFF_S = 0.1  # between a failed step and the next try (retry.backoff.ms)
FILL_CHUNK = 50  # input records per batch of the fill


def fill_input(
    cluster: Cluster, partitions: int, per_partition: int, seed: int, timeout_s: float = 60.0
) -> list[Ack]:
    """Write `per_partition` distinct values (`s<seed>-p<partition>-<n>`) to each input
    partition with acks=all, before any fault; the acknowledged records."""
    producer = cluster.producer(acks=-1)
    futures: list[tuple[list[bytes], int, Future[Any]]] = []
    for partition in range(partitions):
        values = [b"s%d-p%d-%d" % (seed, partition, n) for n in range(per_partition)]
        for start in range(0, per_partition, FILL_CHUNK):
            chunk = values[start : start + FILL_CHUNK]
            futures.append((chunk, partition, producer.send_batch(INPUT_TOPIC, chunk, partition)))
    acked = []
    for chunk, partition, future in futures:
        for value, landed in zip(chunk, future.result(timeout_s), strict=True):
            acked.append(Ack(value, partition, landed.offset))
    producer.close()
    return acked


class _Worker:
    """One transactional worker: input partition `index`, transactional id
    `nemesis-txn-<index>` (the same after every replacement of its producer)."""

    def __init__(self, workload: TxnWorkload, index: int, end: int) -> None:
        self.workload = workload
        self.index = index
        self.end = end  # the input partition's high watermark after the fill
        self.tid = f"nemesis-txn-{index}"
        self.tp = TopicPartition(topic=INPUT_TOPIC, partition=index)
        self.rng = random.Random(workload.seed * 1000 + index)
        self.producer: Producer | None = None
        self.consumer: Consumer | None = None
        self.position = 0  # the committed offset as this worker knows it
        self.buffer: list[ConsumerRecord] = []
        self.attempts: list[Attempt] = []
        self.zombie_commits: list[str] = []
        self.errors: Counter[str] = Counter()
        self.replaced = 0  # producers replaced after an error
        self.zombies = 0
        self.thread = threading.Thread(target=self.run, name=f"nemesis-{self.tid}", daemon=True)

    @property
    def finished(self) -> bool:
        return self.position >= self.end

    def run(self) -> None:
        stop = self.workload.stop_event
        while not stop.is_set():
            try:
                if self.consumer is None:
                    self.consumer = self.workload.cluster.consumer(
                        group_id=GROUP,
                        enable_auto_commit=False,
                        isolation_level="read_committed",
                        max_wait_ms=100,
                    )
                    self.consumer.assign([self.tp])
                if self.producer is None:
                    self.producer = self._new_producer()
                    self._rewind(self._committed())
                if self.finished:
                    stop.wait(0.05)  # done: idle until stopped
                    continue
                self._one_transaction()
            except Exception as error:
                self._failed(error)
                if self.producer is not None:
                    self.replaced += 1
                self._drop_producer()
                stop.wait(BACKOFF_S)
            if self.workload.paced.is_set():
                stop.wait(self.workload.interval_s)  # pacing while the faults run
        self._drop_producer()
        if self.consumer is not None:
            self.consumer.close()

    def _failed(self, error: BaseException) -> None:
        code = getattr(error, "error_code", None)
        name = getattr(code, "name", None)
        what = name if name else str(error)[:80]
        self.errors[f"{type(error).__name__}({what})"] += 1

    def _new_producer(self) -> Producer:
        """A producer of this worker's transactional id, initialized (fencing the last one)."""
        producer = self.workload.cluster.producer(
            transactional_id=self.tid,
            transaction_timeout_ms=self.workload.transaction_timeout_ms,
            max_block_ms=self.workload.max_block_ms,
        )
        try:
            producer.init_transactions()
        except BaseException:
            producer.close()
            raise
        return producer

    def _drop_producer(self) -> None:
        if self.producer is not None:
            producer, self.producer = self.producer, None
            try:
                producer.close()
            except Exception as error:
                self._failed(error)

    def _committed(self) -> int:
        assert self.consumer is not None
        return self.consumer.committed(self.tp) or 0

    def _rewind(self, position: int) -> None:
        assert self.consumer is not None
        self.position, self.buffer = position, []
        self.consumer.seek(self.tp, position)

    def _take(self, want: int) -> list[ConsumerRecord]:
        """Up to `want` input records from `position` on (fewer if no more came in a poll)."""
        assert self.consumer is not None
        if len(self.buffer) < want:
            self.buffer.extend(self.consumer.poll(100))
        if self.buffer and self.buffer[0].offset != self.position:  # not where we stand
            self._rewind(self.position)
            return []
        taken, self.buffer = self.buffer[:want], self.buffer[want:]
        return taken

    def _one_transaction(self) -> None:
        workload = self.workload
        records = self._take(self.rng.randint(1, workload.max_batch))
        if not records:
            return
        producer = self.producer
        assert producer is not None
        end = records[-1].offset + 1
        txn = f"w{self.index}-{len(self.attempts)}"
        attempt = Attempt(
            txn=txn,
            worker=self.index,
            input_partition=self.index,
            first_offset=records[0].offset,
            end_offset=end,
            outputs=tuple(output_value(r.value or b"", self.index, r.offset, txn) for r in records),
        )
        self.attempts.append(attempt)  # aborted until the commit is asked
        try:
            producer.begin_transaction()
            futures = [
                producer.send(
                    OUTPUT_TOPIC, value, partition=(r.offset + self.index) % workload.partitions
                )
                for r, value in zip(records, attempt.outputs, strict=True)
            ]
            producer.send_offsets_to_transaction({self.tp: end}, GROUP)
            for future in futures:
                future.result(SEND_TIMEOUT_S)
        except Exception as error:  # the commit was not asked: abort, or replace the producer
            self._failed(error)
            producer.abort_transaction()  # raises if it cannot: the producer is replaced
            self._rewind(self.position)
            return
        if self.rng.random() < workload.zombie_probability:
            self._play_zombie(attempt)
            return
        if self.rng.random() < workload.abort_probability:
            producer.abort_transaction()  # as above: raises if it cannot
            self._rewind(self.position)
            return
        attempt.outcome = Outcome.UNKNOWN
        producer.commit_transaction()
        attempt.outcome = Outcome.COMMITTED
        self.position = end

    def _play_zombie(self, attempt: Attempt) -> None:
        """Fence this worker's own producer while its transaction is open, then ask the
        fenced one to commit: Kafka must refuse it (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH)."""
        zombie, self.producer = self.producer, None
        assert zombie is not None
        attempt.zombie = True
        self.zombies += 1
        try:
            self.producer = self._new_producer()
            try:
                zombie.commit_transaction()
            except Exception:
                pass  # refused, as it must be
            else:
                attempt.outcome = Outcome.COMMITTED
                self.zombie_commits.append(attempt.txn)
        finally:
            zombie.close()
        self._rewind(self._committed())


class TxnWorkload:
    """The transactional workers, one per input partition, and what they attempted."""

    def __init__(
        self,
        cluster: Cluster,
        ends: Sequence[int],
        *,
        seed: int,
        partitions: int,
        transaction_timeout_ms: int,
        rate: float = 20.0,
        max_batch: int = 5,
        abort_probability: float = 0.1,
        zombie_probability: float = 0.02,
        max_block_ms: int = 5000,
    ) -> None:
        self.cluster = cluster
        self.seed = seed
        self.partitions = partitions  # of the output topic
        self.transaction_timeout_ms = transaction_timeout_ms
        self.interval_s = 1.0 / rate if rate > 0 else 0.0
        self.max_batch = max_batch
        self.abort_probability = abort_probability
        self.zombie_probability = zombie_probability
        self.max_block_ms = max_block_ms  # how long a transactional call may block
        self.stop_event = threading.Event()
        self.paced = threading.Event()
        self.paced.set()
        self.workers = [_Worker(self, index, end) for index, end in enumerate(ends)]

    def start(self) -> TxnWorkload:
        for worker in self.workers:
            worker.thread.start()
        return self

    def finish(self, stall_s: float, limit_s: float) -> bool:
        """Stop pacing and wait until every worker consumed its input; False once no worker
        moved on for `stall_s` (stuck), or after `limit_s` in all (slow as well as stuck
        on a loaded machine is told apart from stuck by the first)."""
        self.paced.clear()
        started = last_move = time.monotonic()
        seen = [w.position for w in self.workers]
        while not all(w.finished for w in self.workers):
            now = time.monotonic()
            positions = [w.position for w in self.workers]
            if positions != seen:
                seen, last_move = positions, now
            if now - last_move >= stall_s or now - started >= limit_s:
                return False
            self.stop_event.wait(0.05)
        return True

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the workers (a transaction in flight ends first) and close their clients."""
        self.stop_event.set()
        for worker in self.workers:
            worker.thread.join(timeout_s)

    # what they did, once stopped

    def attempts(self) -> list[Attempt]:
        return [a for w in self.workers for a in w.attempts]

    def outcomes(self) -> Counter[str]:
        return Counter(str(a.outcome) for a in self.attempts())

    def errors(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for worker in self.workers:
            total.update(worker.errors)
        return total

    def zombie_commits(self) -> list[str]:
        return [txn for w in self.workers for txn in w.zombie_commits]

    def unfinished(self) -> list[str]:
        """Each worker that did not finish its input: where it stands, its last transaction,
        its errors, and the call it is in (so that a hang can be read without a rerun)."""
        frames = sys._current_frames()
        lines = []
        for w in self.workers:
            if w.finished:
                continue
            last = w.attempts[-1] if w.attempts else None
            frame = frames.get(w.thread.ident or -1)
            calls: list[str] = []
            while frame is not None and len(calls) < 4:
                calls.append(frame.f_code.co_name)
                frame = frame.f_back
            lines.append(
                f"worker {w.index} at {w.position} of {w.end}, last "
                + (f"{last.txn} {last.outcome}" if last else "none")
                + f", errors {dict(w.errors)}, in {' < '.join(calls) or '-'}"
            )
        return lines


__all__ = ["GROUP", "INPUT_TOPIC", "OUTPUT_TOPIC", "TxnWorkload", "fill_input"]
