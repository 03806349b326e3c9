"""The produce and fetch purgatories of a broker: purgatory actors that judge their operations
by partition snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkactor.actors.purgatory import PurgatoryActor
from kafkactor.actors.replication.delayed_fetch import DelayedFetch
from kafkactor.actors.replication.delayed_produce import DelayedProduce
from kafkactor.actors.runtime import Directory, handles
from kafkactor.messages.replication import FetchSpec, PartitionSnapshot, ProduceSpec
from kafkactor.storage import Log
from kafkactor.timer import Clock, Timer


class ReplicaPurgatoryActor(PurgatoryActor):
    """A broker's produce or fetch purgatory on the replication data path.

    Keeps the latest `PartitionSnapshot` of every partition led here (its partitions publish
    them on every LEO, HW, ISR or leadership change) and re-checks the operations watching a
    partition when its snapshot arrives; DelayedProduce and DelayedFetch decide from those
    snapshots. Fetches read the partitions' logs (thread-safe) through `logs`, keyed by
    `<topic>-<partition>`.
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
        self.logs: Mapping[str, Log] = logs if logs is not None else {}

    @handles(PartitionSnapshot)
    def _on_snapshot(self, snapshot: PartitionSnapshot) -> None:
        self.snapshots[snapshot.key] = snapshot
        completed = self.purgatory.check_and_complete(snapshot.key)
        self.purgatory.maybe_purge()
        if completed:
            self.log_event(
                "purgatory.complete",
                purgatory=self.purgatory.name,
                key=snapshot.key,
                completed=completed,
                delayed=self.purgatory.num_delayed,
                cause=type(snapshot).__name__,
            )

    def describe(self) -> dict[str, Any]:
        return {
            "delayed": self.purgatory.num_delayed,
            "watched_keys": self.purgatory.keys,
            "partitions": len(self.snapshots),
        }


ReplicaPurgatoryActor.register_operation(ProduceSpec, DelayedProduce)
ReplicaPurgatoryActor.register_operation(FetchSpec, DelayedFetch)
