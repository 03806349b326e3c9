"""Reading a healed cluster back after a fault schedule: what each replica holds below the
high watermark, and the verdict on it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kafkactor.common import TopicPartition
from kafkactor.storage import Log, StorageError, iter_batches
from kafkactor.testing.cluster import Cluster
from kafkactor.testing.verdict import (
    Ack,
    ScheduleResult,
    StoredBatch,
    count_duplicates,
    find_divergence,
    find_lost,
)

READ_S = 10.0  # how long reading one partition back may take


def wait_for(condition: Callable[[], bool], timeout_s: float, poll_s: float = 0.05) -> bool:
    """Poll `condition` until it holds (True) or `timeout_s` passes (False)."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        pause.wait(poll_s)


# -- reading back ------------------------------------------------------------------------------


def stored_batches(log: Log, high_watermark: int) -> list[StoredBatch]:
    """The log's batches that end below `high_watermark`, read from its log start."""
    batches: list[StoredBatch] = []
    offset = log.log_start_offset
    while offset < high_watermark:
        data = log.read(offset, 1 << 20, max_offset=high_watermark).records
        before = offset
        for batch in iter_batches(data):
            if batch.last_offset >= high_watermark or batch.last_offset < offset:
                continue
            start = batch.position
            batches.append(
                StoredBatch(
                    batch.base_offset,
                    batch.last_offset,
                    bytes(data[start : start + batch.size_in_bytes]),
                )
            )
            offset = batch.next_offset
        if offset == before:  # nothing more below the high watermark
            break
    return batches


class _Check:
    """The checks after a run, against the healed cluster."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.partitions = partitions
        self.notes: list[str] = []

    def settle(self, timeout_s: float) -> bool:
        """Wait until every leader's HW is its log end, and every replica's log end too."""
        cluster, topic = self.cluster, self.topic

        def settled() -> bool:
            try:
                for p in range(self.partitions):
                    leader = cluster.describe_partition(topic, p)
                    if not leader.is_leader or leader.high_watermark != leader.log_end_offset:
                        return False
                    for replica in cluster.replicas(topic, p):
                        follower = cluster.describe_partition(topic, p, broker=replica)
                        if follower.log_end_offset != leader.log_end_offset:
                            return False
            except Exception:  # a replica not there yet
                return False
            return True

        if wait_for(settled, timeout_s):
            return True
        self.notes.append(f"replicas not settled (HW = log end everywhere) in {timeout_s:.0f}s")
        return False

    def high_watermark(self, partition: int) -> int:
        return self.cluster.describe_partition(self.topic, partition).high_watermark

    def read(self, partition: int, high_watermark: int) -> dict[int, bytes | None]:
        """Every record from offset 0 up to the high watermark, by offset (a consumer)."""
        consumer = self.cluster.consumer(max_wait_ms=100)
        consumer.assign([(self.topic, partition)])
        found: dict[int, bytes | None] = {}

        def read_up() -> bool:
            for record in consumer.poll(100):
                found[record.offset] = record.value
            return consumer.position(self.topic, partition) >= high_watermark

        if not wait_for(read_up, READ_S, poll_s=0.01):
            self.notes.append(
                f"p{partition}: read stopped at {consumer.position(self.topic, partition)}"
                f" of {high_watermark}"
            )
        consumer.close()
        return found

    def replicas(
        self, partition: int, high_watermark: int
    ) -> tuple[dict[int, list[StoredBatch]], set[int]]:
        """Every live replica's batches below the high watermark, read from its `Log`, and
        the replicas outside the ISR (they may lag, but must not differ)."""
        cluster, key = self.cluster, str(TopicPartition(topic=self.topic, partition=partition))
        isr = set(cluster.isr(self.topic, partition))
        held: dict[int, list[StoredBatch]] = {}
        for broker in cluster.replicas(self.topic, partition):
            node = cluster.brokers.get(broker)
            log = node.logs.get(key) if node is not None and node.alive else None
            if log is None:
                self.notes.append(f"p{partition}: broker {broker} has no log to compare")
                continue
            for _attempt in range(3):
                try:
                    held[broker] = stored_batches(log, high_watermark)
                    break
                except StorageError as error:  # truncated or closed under us: read again
                    self.notes.append(f"p{partition}: broker {broker} read failed: {error!r}")
        return held, {b for b in held if b not in isr}


# -- one schedule ------------------------------------------------------------------------------


def check_after(
    cluster: Cluster,
    topic: str,
    partitions: int,
    acked: list[Ack],
    result: ScheduleResult,
    *,
    settle_s: float,
) -> None:
    check = _Check(cluster, topic, partitions)
    check.settle(settle_s)
    consumed: dict[int, dict[int, bytes | None]] = {}
    for p in range(partitions):
        try:
            high_watermark = check.high_watermark(p)
        except Exception as error:  # no leader to ask (a liveness failure, reported as such)
            check.notes.append(f"p{p}: not checked, no high watermark to read: {error!r}")
            continue
        consumed[p] = check.read(p, high_watermark)
        held, lagging = check.replicas(p, high_watermark)
        divergence = find_divergence(p, high_watermark, held, may_lag=lagging)
        if divergence is not None:
            result.divergent.append(divergence)
    # The records of a partition that could not be read are neither found nor lost.
    result.lost = find_lost([a for a in acked if a.partition in consumed], consumed)
    result.duplicates = count_duplicates(consumed)
    result.notes.extend(check.notes)
