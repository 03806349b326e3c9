"""The nemesis's verdict read from disk, after a cluster of broker processes has stopped.

A stopped cluster has no leader to ask, but every broker's data dir still holds its replicas'
logs and its `replication-offset-checkpoint` (the high watermark of each replica, written at a
clean shutdown). The claims are those `read_back.check_after` makes of a live cluster:

- **The high watermark** of a partition is the highest one known: the largest checkpointed by
  any replica, or seen by a client before the cluster stopped. Everything below it was
  committed (replicated to the whole ISR of its time).
- **Lost.** An acknowledged (partition, offset, value) whose value is not at that offset below
  the high watermark, in the reference replica's log: the last leader, as ZooKeeper named it
  before the cluster stopped (else the in-sync replica with the highest checkpointed HW).
- **Divergence.** Every replica of the last ISR holds the same record batches, byte for byte,
  below the high watermark (one that ends short of it diverges). A replica outside that ISR
  must match below its own checkpointed high watermark: above it, its log may hold an
  uncommitted tail that it would truncate on rejoining.
- **Duplicates.** Values found more than once in the reference replica's log.

A replica with no log for the partition counts as an empty one. Each log is read from a copy of
its directory, opened with kafkactor's own `Log` as a restarted broker would open it (every
batch's CRC checked again, a torn tail cut), so nothing in the data dirs changes.

`judge` is pure (replicas in, verdict out); `read_replica` and `check_data_dirs` read the disk.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafkactor.actors.replication.high_watermarks import REPLICATION_OFFSET_CHECKPOINT
from kafkactor.common import TopicPartition
from kafkactor.storage import CheckpointError, Log, OffsetCheckpoint, RecordBatch, StorageError
from kafkactor.testing.read_back import stored_batches
from kafkactor.testing.verdict import (
    Ack,
    Divergence,
    LostRecord,
    StoredBatch,
    count_duplicates,
    find_divergence,
    find_lost,
)


@dataclass(frozen=True, slots=True)
class ReplicaOnDisk:
    """One replica as a stopped broker left it: every batch of its log and its checkpointed
    high watermark (None: the checkpoint has no entry for it)."""

    broker: int
    high_watermark: int | None
    batches: tuple[StoredBatch, ...] = ()

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    def below(self, offset: int) -> list[StoredBatch]:
        """The batches that end below `offset`."""
        return [batch for batch in self.batches if batch.last_offset < offset]

    def records(self, below: int) -> dict[int, bytes | None]:
        """offset -> value of every record below `below`."""
        found: dict[int, bytes | None] = {}
        for batch in self.below(below):
            for record in RecordBatch(batch.data).records():
                found[record.offset] = record.value
        return found


@dataclass(frozen=True, slots=True)
class PartitionEnd:
    """What the live cluster said of a partition before it was stopped (None: not known)."""

    leader: int | None = None
    isr: frozenset[int] | None = None
    high_watermark: int | None = None  # as a client read it (ListOffsets, latest)


@dataclass(slots=True)
class DiskVerdict:
    lost: list[LostRecord] = field(default_factory=list)
    divergent: list[Divergence] = field(default_factory=list)
    duplicates: int = 0
    high_watermarks: dict[int, int] = field(default_factory=dict)  # partition -> the one used
    notes: list[str] = field(default_factory=list)


def _reference(held: Mapping[int, ReplicaOnDisk], end: PartitionEnd) -> int | None:
    if end.leader is not None and end.leader in held:
        return end.leader
    in_sync = [b for b in held if end.isr is None or b in end.isr] or list(held)
    return max(
        in_sync,
        key=lambda b: (held[b].high_watermark or 0, held[b].log_end_offset, -b),
        default=None,
    )


def judge_partition(
    partition: int, held: Mapping[int, ReplicaOnDisk], end: PartitionEnd, verdict: DiskVerdict
) -> dict[int, bytes | None]:
    """Check one partition's replicas (see the module doc) into `verdict`; returns what the
    reference replica holds below the high watermark (offset -> value)."""
    high_watermark = max([end.high_watermark or 0, *(r.high_watermark or 0 for r in held.values())])
    verdict.high_watermarks[partition] = high_watermark
    ends = {b: r.log_end_offset for b, r in sorted(held.items())}
    hws = {b: r.high_watermark for b, r in sorted(held.items())}
    if len(set(ends.values())) > 1 or any(hw != ends[b] for b, hw in hws.items()):
        verdict.notes.append(
            f"p{partition}: not settled on disk: log ends {ends}, checkpointed HWs {hws}"
        )
    lagging = set() if end.isr is None else {b for b in held if b not in end.isr}
    compared = {
        broker: replica.below(
            high_watermark
            if broker not in lagging
            else min(high_watermark, replica.high_watermark or 0)
        )
        for broker, replica in held.items()
    }
    divergence = find_divergence(partition, high_watermark, compared, may_lag=lagging)
    if divergence is not None:
        verdict.divergent.append(divergence)
    reference = _reference(held, end)
    if reference is None:
        return {}
    return held[reference].records(high_watermark)


def judge(
    replicas: Mapping[int, Mapping[int, ReplicaOnDisk]],
    ends: Mapping[int, PartitionEnd],
    acked: Sequence[Ack],
) -> DiskVerdict:
    """The verdict on every partition's replicas (partition -> broker -> replica), given what
    the cluster said of each before it stopped (`ends`) and what was acknowledged."""
    verdict = DiskVerdict()
    consumed: dict[int, dict[int, bytes | None]] = {}
    for partition, held in sorted(replicas.items()):
        end = ends.get(partition, PartitionEnd())
        consumed[partition] = judge_partition(partition, held, end, verdict)
    verdict.lost = find_lost([a for a in acked if a.partition in consumed], consumed)
    verdict.duplicates = count_duplicates(consumed)
    return verdict


# -- reading the data dirs ---------------------------------------------------------------------


def read_replica(
    data_dir: Path, topic: str, partition: int, broker: int, notes: list[str] | None = None
) -> ReplicaOnDisk:
    """Broker `broker`'s replica of `topic`-`partition` in its data dir `data_dir`, read from a
    copy; an empty replica when it has no log there or its log cannot be read (said in
    `notes`)."""
    say = notes.append if notes is not None else (lambda _: None)
    tp = TopicPartition(topic=topic, partition=partition)
    try:
        high_watermark = OffsetCheckpoint(data_dir / REPLICATION_OFFSET_CHECKPOINT).read().get(tp)
    except CheckpointError as error:
        say(f"p{partition}: broker {broker}: {error}")
        high_watermark = None
    source = data_dir / str(tp)
    if not source.is_dir():
        say(f"p{partition}: broker {broker} has no log {source}")
        return ReplicaOnDisk(broker, high_watermark)
    with tempfile.TemporaryDirectory(prefix="kafkactor-verdict-") as scratch:
        copy = Path(scratch) / source.name
        shutil.copytree(source, copy)
        try:
            log = Log(copy)  # recovered from offset 0, as after a crash: every batch checked
        except StorageError as error:
            say(f"p{partition}: broker {broker}: its log does not open: {error!r}")
            return ReplicaOnDisk(broker, high_watermark)
        try:
            if log.recovered_bytes_truncated:
                say(
                    f"p{partition}: broker {broker}: {log.recovered_bytes_truncated} bytes of a"
                    " torn tail cut on opening"
                )
            batches = stored_batches(log, log.log_end_offset)
        except StorageError as error:
            say(f"p{partition}: broker {broker}: its log does not read: {error!r}")
            batches = []
        finally:
            log.close()
    return ReplicaOnDisk(broker, high_watermark, tuple(batches))


def check_data_dirs(
    data_dirs: Mapping[int, Path],
    topic: str,
    partitions: int,
    acked: Sequence[Ack],
    ends: Mapping[int, PartitionEnd],
    *,
    replicas: Mapping[int, Collection[int]] | None = None,
) -> DiskVerdict:
    """Read every replica of `topic` from the stopped brokers' data dirs (broker -> dir) and
    judge them. `replicas` (partition -> brokers) defaults to every broker."""
    notes: list[str] = []
    held = {
        p: {
            b: read_replica(data_dirs[b], topic, p, b, notes)
            for b in sorted(replicas[p] if replicas is not None else data_dirs)
        }
        for p in range(partitions)
    }
    verdict = judge(held, ends, acked)
    verdict.notes[:0] = notes
    return verdict
