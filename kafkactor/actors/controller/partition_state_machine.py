"""Kafka's ZkPartitionStateMachine, for the controller actor: a decision written to its
partition's state znode with a versioned set, then sent to the replicas as LeaderAndIsr."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.state import (
    ControllerState,
    LeadershipChange,
)
from kafkactor.actors.runtime import TracedActor
from kafkactor.common import (
    PartitionLeaderState,
)

WRITE_ATTEMPTS = 5  # versioned writes of a partition state retried after a conflict


class ControllerFencedError(RuntimeError):
    """Another controller with a newer epoch wrote the state this one was about to change."""


class PartitionStateMachine(TracedActor):
    """The handlers and steps `ControllerActor` inherits to carry out `ControllerState`'s
    decisions: `_apply` writes each `LeadershipChange` to its state znode (a create for a new
    partition, else a versioned set taken again from what a leader wrote meanwhile; a newer
    controller epoch there fences this one) and sends the written states as LeaderAndIsr."""

    # the ControllerActor's own, which these handlers use
    state: ControllerState
    epoch: int

    if TYPE_CHECKING:

        @property
        def _zk(self) -> Any: ...

        def _resign(self, reason: str) -> None: ...

        def _send_leader_and_isr(
            self,
            partitions: Iterable[PartitionLeaderState],
            only: set[int] | None = None,
            *,
            stopping: int | None = None,
        ) -> None: ...

    def _apply(self, changes: list[LeadershipChange], *, stopping: int | None = None) -> None:
        """Write each change to its state znode, then tell the replicas (but not `stopping`,
        a broker in a controlled shutdown, of the partitions it does not lead)."""
        written = []
        for change in changes:
            try:
                written.append(self._write(change))
            except ControllerFencedError as fenced:
                self._resign(str(fenced))
                return
        for change in changes:
            self._log_change(change)
        self._send_leader_and_isr(written, stopping=stopping)

    def _log_change(self, change: LeadershipChange) -> None:
        self.log_event(
            "controller.leader_elected"
            if change.before is None or change.before.leader != change.after.leader
            else "controller.isr_changed",
            topic=change.after.topic,
            partition=change.after.partition,
            leader=change.after.leader,
            leader_epoch=change.after.leader_epoch,
            isr=list(change.after.isr),
            previous_leader=change.before.leader if change.before else None,
            reason=change.reason,
            unclean=change.unclean,
            controller_epoch=self.epoch,
        )

    def _write(self, change: LeadershipChange) -> PartitionLeaderState:
        """Write a decision with a versioned set (a create for a new partition).

        When the znode changed under us (a leader updated the ISR), its content is taken as the
        new starting point and the decision made again; a newer controller epoch there means
        this controller is fenced.
        """
        state = change.after
        path = zk_data.partition_state_path(state.topic, state.partition)
        create = change.before is None
        for _ in range(WRITE_ATTEMPTS):
            data = zk_data.encode_partition_state(replace(state, controller_epoch=self.epoch))
            try:
                if create:
                    self._zk.create(path, data, makepath=True)
                    return self.state.written(state, 0)
                stat = self._zk.set(path, data, version=state.zk_version)
                return self.state.written(state, stat.version)
            except (NodeExistsError, BadVersionError):
                create = False
                current, stat = self._zk.get(path)
                found = zk_data.decode_partition_state(state.topic, state.partition, current)
                if found.controller_epoch > self.epoch:
                    raise ControllerFencedError(
                        f"{path} was written by controller epoch {found.controller_epoch}"
                    ) from None
                self.state.isr_changed(
                    state.topic_partition,
                    leader=found.leader,
                    leader_epoch=found.leader_epoch,
                    isr=found.isr,
                    zk_version=stat.version,
                )
                again = self.state.reconsider(state.topic_partition)
                if again is None:
                    return self.state.partitions[state.topic_partition]
                state = again.after
        raise ControllerFencedError(f"{path} kept changing under controller epoch {self.epoch}")
