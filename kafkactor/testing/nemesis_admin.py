"""The nemesis's admin steps: partition reassignments (KIP-455) and preferred replica
elections, run against a live cluster while the acks=all load runs.

`AssignmentChanges` drops a replica of a partition or reorders its replicas, remembers the
original replica list, and puts it back (`restore`, or `restore_all` at HEAL_ALL), each time
waiting (bounded) until the controller has completed the reassignment: a replica added back
has been rebuilt from the leader and joined the ISR. `elect_preferred` asks for Kafka's
preferred replica election. Each returns the line the step prints.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import PartitionElectionResult
from kafkactor.testing.read_back import wait_for
from kafkactor.testing.schedule import Action

Partition = tuple[str, int]


class AdminTarget(Protocol):
    """What the admin steps need of a cluster (part of the nemesis's `FaultTarget`): the
    in-process `Cluster`'s methods, which a cluster of broker processes offers through
    ZooKeeper's admin znodes."""

    def leader(self, topic: str, partition: int) -> int: ...

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]: ...

    def reassign_partitions(
        self, targets: Mapping[Partition, Sequence[int] | None]
    ) -> Mapping[Partition, tuple[ErrorCode, str | None]]: ...

    def wait_for_reassignments(
        self, partitions: Iterable[Partition] | None = None, *, timeout_s: float = 30.0
    ) -> None: ...

    def elect_leaders(
        self, partitions: Iterable[Partition] | None = None, election: str = "preferred"
    ) -> Mapping[Partition, PartitionElectionResult]: ...


def _listed(replicas: Sequence[int]) -> str:
    return "[" + ",".join(map(str, replicas)) + "]"


class AssignmentChanges:
    """The replica lists the schedule changed and has not restored yet (`originals`), and
    the reassignments and elections that change and restore them. `notes` gets a line for
    each wait that timed out."""

    def __init__(
        self,
        target: AdminTarget,
        topic: str,
        partitions: int,
        *,
        timeout_s: float,
        notes: list[str],
    ) -> None:
        self.target = target
        self.topic = topic
        self.partitions = partitions
        self.timeout_s = timeout_s
        self.originals: dict[int, tuple[int, ...]] = {}
        self.notes = notes

    def change(self, action: Action, partition: int, broker: int) -> str:
        """DROP_REPLICA: `partition` reassigned without `broker`; REORDER: the same replicas
        with `broker` first. Waits until the controller has completed it."""
        current = self.target.replicas(self.topic, partition)
        if broker not in current:
            raise ValueError(f"broker {broker} is no replica of p{partition} {_listed(current)}")
        others = tuple(r for r in current if r != broker)
        new = others if action is Action.DROP_REPLICA else (broker, *others)
        self.originals.setdefault(partition, current)
        self._reassign({partition: new})
        did = "dropped" if action is Action.DROP_REPLICA else "put first"
        return f"p{partition} {_listed(current)} -> {_listed(new)} (broker {broker} {did}), " + (
            self._wait([partition])
        )

    def restore(self, partition: int) -> str:
        """The partition's original replicas again, waited for (a dropped replica is rebuilt
        from the leader and joins the ISR)."""
        original = self.originals.get(partition)
        if original is None:
            return "nothing to do (its change was skipped)"
        current = self.target.replicas(self.topic, partition)
        self._reassign_back({partition: original})
        waited = self._wait([partition])
        del self.originals[partition]
        leader = self.target.leader(self.topic, partition)
        return f"p{partition} {_listed(current)} -> {_listed(original)}, {waited}, leader {leader}"

    def restore_all(self) -> str:
        """HEAL_ALL's part: every changed partition back to its original replicas, waited for."""
        if not self.originals:
            return ""
        moved = dict(self.originals)
        self._reassign_back(moved)
        waited = self._wait(list(moved))
        self.originals.clear()
        back = ", ".join(f"p{p} {_listed(r)}" for p, r in sorted(moved.items()))
        return f"replicas restored: {back}, {waited}"

    def elect_preferred(self, partition: int | None) -> str:
        """Kafka's preferred replica election of `partition` (None: every partition of the
        topic): each result, and the leader it left."""
        keys = [partition] if partition is not None else list(range(self.partitions))
        before = {p: self.target.leader(self.topic, p) for p in keys}
        results = self.target.elect_leaders([(self.topic, p) for p in keys], "preferred")
        said = []
        for p in keys:
            result = results.get((self.topic, p))
            leader = self.target.leader(self.topic, p)
            moved = f"leader {before[p]} -> {leader}" if leader != before[p] else f"leader {leader}"
            if result is None or result.error_code is ErrorCode.NONE:
                said.append(f"p{p} {moved}")
            elif result.error_code is ErrorCode.ELECTION_NOT_NEEDED:
                said.append(f"p{p} {moved} (already preferred)")
            else:
                said.append(f"p{p} {result.error_code.name} ({moved})")
        return "; ".join(said)

    def _reassign(self, targets: Mapping[int, Sequence[int]]) -> None:
        outcome = self.target.reassign_partitions(
            {(self.topic, p): tuple(replicas) for p, replicas in targets.items()}
        )
        refused = [
            f"p{p}: {code.name} {message or ''}".rstrip()
            for (_, p), (code, message) in sorted(outcome.items())
            if code is not ErrorCode.NONE
        ]
        if refused:
            raise RuntimeError("reassignment refused: " + "; ".join(refused))

    def _reassign_back(self, targets: Mapping[int, Sequence[int]]) -> None:
        """`_reassign`, tried again (within `timeout_s`) while it fails: a restore must not be
        lost to a controller that is moving, or not elected yet after restarts."""
        failed: list[Exception] = []

        def accepted() -> bool:
            try:
                self._reassign(targets)
            except Exception as error:
                failed[:] = [error]
                return False
            return True

        if not wait_for(accepted, self.timeout_s, poll_s=0.2):
            raise failed[0]

    def _wait(self, partitions: Sequence[int]) -> str:
        started = time.monotonic()
        try:
            self.target.wait_for_reassignments(
                [(self.topic, p) for p in partitions], timeout_s=self.timeout_s
            )
        except Exception as error:  # still moving: noted, the run goes on
            where = ",".join(f"p{p}" for p in partitions)
            self.notes.append(f"reassignment of {where} not done in {self.timeout_s:.0f}s")
            return f"NOT DONE in {self.timeout_s:.0f}s ({error})"
        return f"done in {time.monotonic() - started:.2f}s"
