"""The produce and fetch purgatories of a broker: purgatory actors that judge their operations
by partition snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkactor.actors.purgatory import PurgatoryActor
from kafkactor.actors.purgatory.purgatory_actor import CompletedBy
from kafkactor.actors.replication.delayed_delete_records import DelayedDeleteRecords
from kafkactor.actors.replication.delayed_fetch import DelayedFetch
from kafkactor.actors.replication.delayed_produce import DelayedProduce
from kafkactor.actors.runtime import Directory, handles
from kafkactor.messages.delete_records import DeleteRecordsSpec
from kafkactor.messages.replication import (
    FetchPartitionData,
    FetchSpec,
    HighWatermarkAdvanced,
    LeadershipChanged,
    LowWatermarkAdvanced,
    PartitionSnapshot,
    ProduceSpec,
)
from kafkactor.storage import Log
from kafkactor.timer import Clock, Timer

# What a partition's new snapshot says happened (the `CompletedBy.kind` of what it completes).
LEADERSHIP = "leadership"  # it became leader or follower, stopped, or its leader epoch moved
ISR_SHRINK = "isr_shrink"  # replicas left the ISR (the HW may have advanced with it)
HIGH_WATERMARK = "high_watermark"  # the HW advanced (a follower's fetch, or an append)
ISR_EXPAND = "isr_expand"  # a follower rejoined the ISR
APPEND = "append"  # the leader's log end advanced, and nothing above changed
LOW_WATERMARK = "low_watermark"  # the low watermark advanced (the DeleteRecords purgatory's)
SNAPSHOT_CAUSES = (LEADERSHIP, ISR_SHRINK, HIGH_WATERMARK, ISR_EXPAND, APPEND, LOW_WATERMARK)


def snapshot_cause(previous: PartitionSnapshot | None, snapshot: PartitionSnapshot) -> str:
    """What changed from a partition's `previous` snapshot to `snapshot`, as one kind.

    The most consequential change wins, in the order of `SNAPSHOT_CAUSES`: a leadership change
    (or a snapshot that says so) over an ISR shrink, over an HW advance (an ISR shrink that
    advanced the HW is named as the shrink), over an ISR expansion, over an append. Without a
    previous snapshot (or when nothing compared changed) the snapshot's type says it.
    """
    if isinstance(snapshot, LeadershipChanged) or not (snapshot.exists and snapshot.is_leader):
        return LEADERSHIP
    if isinstance(snapshot, LowWatermarkAdvanced):
        return LOW_WATERMARK
    by_type = HIGH_WATERMARK if isinstance(snapshot, HighWatermarkAdvanced) else APPEND
    if previous is None:
        return by_type
    isr, isr_before = snapshot.isr, previous.isr
    if not (previous.exists and previous.is_leader) or (
        previous.leader_epoch != snapshot.leader_epoch
    ):
        cause = LEADERSHIP
    elif isr != isr_before and not set(isr_before) <= set(isr):
        cause = ISR_SHRINK
    elif snapshot.high_watermark.offset != previous.high_watermark.offset:
        cause = HIGH_WATERMARK
    elif isr != isr_before:
        cause = ISR_EXPAND
    elif snapshot.log_end.offset != previous.log_end.offset:
        cause = APPEND
    else:
        cause = by_type
    return cause


class ReplicaPurgatoryActor(PurgatoryActor):
    """A broker's produce or fetch purgatory on the replication data path.

    Keeps the latest `PartitionSnapshot` of every partition led here (its partitions publish
    them on every LEO, HW, ISR or leadership change) and re-checks the operations watching a
    partition when its snapshot arrives; DelayedProduce and DelayedFetch decide from those
    snapshots. Fetches read the partitions' logs (thread-safe) through `logs`, keyed by
    `<topic>-<partition>`.

    The operations a snapshot completes are told what did (`CompletedBy`): the change from
    the partition's previous snapshot (`snapshot_cause`), and the span the partition was
    handling when it published: the parent of the snapshot's own hop, since a partition
    publishes from inside the handler that changed it (the snapshot's hop itself when it has
    no parent).
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock | None = None,
        broker: int | None = None,
        *,
        name: str = "Produce",
        purge_interval: int = 1000,
        logs: Mapping[str, Log] | None = None,
    ) -> None:
        super().__init__(
            address, directory, timer, clock, broker, name=name, purge_interval=purge_interval
        )
        self.snapshots: dict[str, PartitionSnapshot] = {}
        # DelayedFetch's answers with nothing to read, by partition, with their snapshot
        self.idle_answers: dict[str, tuple[PartitionSnapshot, FetchPartitionData]] = {}
        self.logs: Mapping[str, Log] = logs if logs is not None else {}

    @handles(PartitionSnapshot)
    def _on_snapshot(self, snapshot: PartitionSnapshot) -> None:
        key = snapshot.key
        previous = self.snapshots.get(key)
        self.snapshots[key] = snapshot
        kind, completed = "", 0
        if self.purgatory.is_watched(key):  # else nothing to complete, nor a cause to work out
            kind = snapshot_cause(previous, snapshot)
            completed = self.purgatory.check_and_complete(key, self._completed_by(kind))
        self.purgatory.maybe_purge()
        if completed:
            self.log_event(
                "purgatory.complete",
                purgatory=self.purgatory.name,
                key=key,
                completed=completed,
                delayed=self.purgatory.num_delayed,
                cause=type(snapshot).__name__,
                completed_by=kind,
            )

    def _completed_by(self, kind: str) -> CompletedBy:
        """`kind`, in the span the publisher of the message being handled was handling."""
        current = self._current
        if current is None:
            return CompletedBy(kind)
        return CompletedBy(kind, current.trace_id, current.parent_span_id or current.span_id)

    def describe(self) -> dict[str, Any]:
        return {
            "delayed": self.purgatory.num_delayed,
            "watched_keys": self.purgatory.keys,
            "partitions": len(self.snapshots),
        }


ReplicaPurgatoryActor.register_operation(ProduceSpec, DelayedProduce)
ReplicaPurgatoryActor.register_operation(FetchSpec, DelayedFetch)
ReplicaPurgatoryActor.register_operation(DeleteRecordsSpec, DelayedDeleteRecords)
