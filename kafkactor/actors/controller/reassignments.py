"""The controller actor's partition reassignments (KIP-455, Kafka 2.8 in ZooKeeper mode):
`/admin/reassign_partitions`, AlterPartitionReassignments, ListPartitionReassignments, and
their resumption (the decisions are `reassignment`'s, the znodes `reassignment_zk`'s)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.reassignment import (
    ReassignmentError,
    ReassignmentStep,
    build_reassignment,
    current_assignment,
    forget_gone,
    is_reassignment_complete,
    on_partition_reassignment,
    reassignments_to_resume,
    refusal,
    settle,
    validate_replicas,
)
from kafkactor.actors.controller.reassignment_zk import REASSIGN_PARTITIONS, ReassignmentZk
from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.actors.controller.state import ControllerState, LeadershipChange
from kafkactor.actors.runtime import TracedActor, addresses, handles
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    ReassignmentResult,
    ReassignPartitionsCreated,
)
from kafkactor.messages.replication import StopReplica

ROUNDS = 3  # a decision made again after a leader changed the state znode under its write
NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."
NO_REASSIGNMENT_MESSAGE = "No partition reassignment is in progress."


class _FencedError(Exception):
    """The controller resigned while reassigning (a newer controller epoch)."""


class PartitionReassignments(TracedActor):
    """The handlers `ControllerActor` inherits for moving partitions between brokers.

    - **`/admin/reassign_partitions`** (Kafka's PartitionReassignmentHandler): an exists
      watch, set at take-over and again after each event. When the znode is created (or found
      at take-over) its partitions start reassigning; each entry leaves it when its partition
      completes, or at once when refused or replaced through the API, and the znode is deleted
      when none is left.
    - **AlterPartitionReassignments / ListPartitionReassignments** (`...Request` messages):
      answered once the reassignments are recorded in `/brokers/topics/<t>`; NOT_CONTROLLER
      at the top when this broker's controller is not the active one.
    - **Completion**: checked when leaders' ISR changes are learnt (`_reassignment_isr_changed`)
      and when a broker of a target comes back (`_resume_reassignments`).
    - **Take-over** (`_start_reassignments`): reassignments found in the topic znodes resume.
    """

    state: ControllerState
    is_controller: bool
    epoch: int
    broker_id: int
    _ids: Any
    _reassignment_zk: ReassignmentZk
    _pending_replica_deletes: dict[int, set[TopicPartition]]

    if TYPE_CHECKING:

        @property
        def _zk(self) -> Any: ...

        def _tell_self(self, message: Any) -> None: ...

        def _apply(
            self, changes: list[LeadershipChange], *, stopping: int | None = None
        ) -> None: ...

        def _send_update_metadata(
            self,
            only: set[int] | None = None,
            *,
            partitions: Iterable[TopicPartition] | None = None,
        ) -> None: ...

    def _init_reassignments(self) -> None:
        self._reassignment_zk = ReassignmentZk(lambda: self._zk)
        self._pending_replica_deletes = {}  # broker -> removed replicas to delete when back

    # -- take-over ---------------------------------------------------------------------------------

    def _start_reassignments(self) -> None:
        """Kafka's initializePartitionReassignments: the reassignments recorded in the topic
        znodes are known again, `/admin/reassign_partitions` is processed, and the others
        resume (each is completed if its targets are in the ISR, else sent again)."""
        if not self.is_controller:
            return
        self._pending_replica_deletes = {}
        for topic in sorted({tp.topic for tp in self.state.partitions}):
            try:
                found = self._reassignment_zk.read_topic(topic)
            except (NoNodeError, zk_data.MalformedZnodeError):
                continue  # the controller logged it when it loaded the topic
            for partition, assignment in found.items():
                key = TopicPartition(topic=topic, partition=partition)
                if assignment.being_reassigned and key in self.state.partitions:
                    self.state.reassigning[key] = assignment
        try:
            resumed = self._process_zk_reassignment()
            for key in reassignments_to_resume(self.state):
                if key not in resumed:
                    self._on_partition_reassignment(key, self.state.reassigning[key], "resumed")
        except _FencedError:
            return

    # -- /admin/reassign_partitions --------------------------------------------------------------

    def _on_reassign_partitions_znode(self, event: Any) -> None:
        """The exists watch (one bound method, so ZooKeeper keeps one watch)."""
        kind = getattr(event, "type", None)
        if kind in (EventType.CREATED, EventType.DELETED, EventType.CHANGED):
            self._tell_self(ReassignPartitionsCreated(created=kind != EventType.CHANGED))

    @handles(ReassignPartitionsCreated)
    def _on_reassign_partitions_created(self, event: ReassignPartitionsCreated) -> None:
        """Kafka reads the znode when it is created (a change of it is not acted on: the
        watch is only set again)."""
        if not self.is_controller:
            return
        if not event.created:
            self._reassignment_zk.watch_admin(self._on_reassign_partitions_znode)
            return
        with contextlib.suppress(_FencedError):
            if self._process_zk_reassignment():
                self._send_update_metadata()

    def _process_zk_reassignment(self) -> set[TopicPartition]:
        """Kafka's processZkPartitionReassignment: start the partitions the znode lists (no
        replica check: the tool made it); those refused leave it. Returns those started."""
        data = self._reassignment_zk.watch_admin(self._on_reassign_partitions_znode)
        if data is None:
            return set()
        try:
            targets = self._reassignment_zk.read_admin() or {}
        except zk_data.MalformedZnodeError as error:
            # Kafka logs it and leaves the znode, which then blocks every later reassignment
            # through ZooKeeper; it is deleted instead
            self.log_event(
                "controller.bad_reassign_partitions", path=REASSIGN_PARTITIONS, error=str(error)
            )
            self._reassignment_zk.delete_admin()
            self._reassignment_zk.watch_admin(self._on_reassign_partitions_znode)
            return set()
        wanted: dict[TopicPartition, ReplicaAssignment] = {}
        results: dict[TopicPartition, ReassignmentError | None] = {}
        for key, target in sorted(targets.items()):
            built = build_reassignment(self.state, key, target)
            if built is None:
                results[key] = ReassignmentError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                wanted[key] = built
        results.update(self._trigger(wanted, "/admin/reassign_partitions"))
        failed = {key for key, error in results.items() if error is not None}
        if failed and self._reassignment_zk.remove_from_admin(lambda tp, _r: tp in failed):
            self._tell_self(ReassignPartitionsCreated())
        return {key for key, error in results.items() if error is None}

    # -- the API ---------------------------------------------------------------------------------

    @handles(AlterPartitionReassignmentsRequest)
    def _on_alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> None:
        """Kafka's processApiPartitionReassignment."""
        if not self.is_controller:
            self.reply(
                request,
                AlterPartitionReassignmentsResponse(
                    error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE
                ),
            )
            return
        targets = {
            TopicPartition(topic=t.topic, partition=t.partition): t.replicas
            for t in request.targets
        }
        results: dict[TopicPartition, ReassignmentError | None] = {}
        wanted: dict[TopicPartition, ReplicaAssignment] = {}
        for key, replicas in targets.items():
            error = (
                validate_replicas(self.state, key, tuple(replicas))
                if replicas is not None
                else None
            )
            if error is not None:
                results[key] = error
                continue
            built = build_reassignment(self.state, key, replicas)
            if built is None:
                results[key] = ReassignmentError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT_MESSAGE
                )
            else:
                wanted[key] = built
        # the latest reassignment, by the API or through ZooKeeper, wins
        if self._reassignment_zk.remove_from_admin(lambda tp, _r: tp in wanted):
            self._tell_self(ReassignPartitionsCreated())
        try:
            results.update(self._trigger(wanted, "AlterPartitionReassignments"))
        except _FencedError:
            self.reply(
                request,
                AlterPartitionReassignmentsResponse(
                    error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE
                ),
            )
            return
        if wanted:
            self._send_update_metadata()
        self.reply(
            request,
            AlterPartitionReassignmentsResponse(
                results=tuple(
                    ReassignmentResult(
                        topic=key.topic,
                        partition=key.partition,
                        error_code=error.error if error is not None else ErrorCode.NONE,
                        error_message=error.message if error is not None else None,
                    )
                    for key, error in results.items()
                )
            ),
        )

    @handles(ListPartitionReassignmentsRequest)
    def _on_list_partition_reassignments(self, request: ListPartitionReassignmentsRequest) -> None:
        """Kafka's processListPartitionReassignments: partitions not being reassigned (or not
        known) are left out."""
        if not self.is_controller:
            self.reply(
                request,
                ListPartitionReassignmentsResponse(
                    error_code=ErrorCode.NOT_CONTROLLER, error_message=NOT_CONTROLLER_MESSAGE
                ),
            )
            return
        forget_gone(self.state)
        keys = request.partitions if request.partitions is not None else self.state.reassigning
        ongoing = []
        for key in sorted(set(keys)):
            assignment = current_assignment(self.state, key)
            if assignment.being_reassigned:
                ongoing.append(
                    OngoingReassignment(
                        topic=key.topic,
                        partition=key.partition,
                        replicas=assignment.replicas,
                        adding_replicas=assignment.adding,
                        removing_replicas=assignment.removing,
                    )
                )
        self.reply(request, ListPartitionReassignmentsResponse(reassignments=tuple(ongoing)))

    # -- hooks ---------------------------------------------------------------------------------

    def _reassignment_isr_changed(self, keys: Iterable[TopicPartition]) -> None:
        """Leaders changed these partitions' ISRs (Kafka's PartitionReassignmentIsrChange):
        a reassignment whose targets are all in the ISR now completes."""
        if not self.is_controller:
            return
        forget_gone(self.state)
        done = False
        with contextlib.suppress(_FencedError):
            for key in sorted(set(keys) & set(self.state.reassigning)):
                assignment = self.state.reassigning[key]
                if is_reassignment_complete(self.state, key, assignment):
                    self._on_partition_reassignment(key, assignment, "targets in the ISR")
                    done = True
        if done:
            self._send_update_metadata()

    def _resume_reassignments(self, brokers: Iterable[int]) -> None:
        """Brokers came back (Kafka's onBrokerStartup): reassignments with a target replica on
        them resume, and removed replicas waiting there are deleted."""
        if not self.is_controller:
            return
        starting = set(brokers)
        forget_gone(self.state)
        for broker in sorted(starting):
            waiting = self._pending_replica_deletes.pop(broker, set())
            if waiting:
                self._delete_replicas(broker, waiting)
        with contextlib.suppress(_FencedError):
            for key in reassignments_to_resume(self.state, starting):
                self._on_partition_reassignment(
                    key, self.state.reassigning[key], "broker came back"
                )

    # -- onPartitionReassignment -----------------------------------------------------------------

    def _trigger(
        self, wanted: Mapping[TopicPartition, ReplicaAssignment], trigger: str
    ) -> dict[TopicPartition, ReassignmentError | None]:
        """Kafka's maybeTriggerPartitionReassignment."""
        forget_gone(self.state)
        results: dict[TopicPartition, ReassignmentError | None] = {}
        for key, assignment in sorted(wanted.items()):
            refused = refusal(self.state, key)
            if refused is not None:
                results[key] = refused
                continue
            before = (self.state.partitions[key], self.state.reassigning.get(key))
            try:
                self._on_partition_reassignment(key, assignment, trigger)
            except (KazooException, zk_data.MalformedZnodeError) as error:
                # Kafka answers UNKNOWN_SERVER_ERROR for a partition whose step failed; what
                # the decision changed in memory is undone
                self.state.partitions[key] = before[0]
                if before[1] is None:
                    self.state.reassigning.pop(key, None)
                else:
                    self.state.reassigning[key] = before[1]
                self.log_event(
                    "controller.bad_topic", topic=key.topic, error=f"reassignment: {error!r}"
                )
                results[key] = ReassignmentError(ErrorCode.UNKNOWN_SERVER_ERROR)
                continue
            results[key] = None
        return results

    def _on_partition_reassignment(
        self, key: TopicPartition, assignment: ReplicaAssignment, trigger: str
    ) -> None:
        """Decide (`reassignment.on_partition_reassignment`), then: the topic znode (U1), the
        state znode and LeaderAndIsr (made again when a leader's ISR change got in first),
        StopReplica(delete) to removed replicas, and once done the topic znode again (B6) and
        the partition out of `/admin/reassign_partitions` (B7)."""
        self._refresh_isr(key)
        step = on_partition_reassignment(self.state, key, assignment)
        if step.write is not None:
            self._reassignment_zk.write_assignment(key, step.write)
        self._write_change(step)
        for broker in step.delete:
            self._delete_replicas(broker, {key})
        if step.completed is not None:
            self._reassignment_zk.write_assignment(key, step.completed)
            completed = step.completed.replicas
            if self._reassignment_zk.remove_from_admin(
                lambda tp, replicas: tp == key and tuple(replicas) == completed
            ):
                self._tell_self(ReassignPartitionsCreated())
        self._log_reassignment(step, assignment, trigger)

    def _write_change(self, step: ReassignmentStep) -> None:
        change = step.change
        for _ in range(ROUNDS):
            if change is None:
                return
            self._apply([change])
            if not self.is_controller:
                raise _FencedError
            now = self.state.partitions.get(step.key)
            if now is None or (
                now.leader_epoch >= change.after.leader_epoch
                and now.leader == change.after.leader
                and now.isr == change.after.isr
            ):
                return
            change = settle(self.state, step.key, change.after.replicas, step.delete, change.reason)

    def _refresh_isr(self, key: TopicPartition) -> None:
        """The ISR as the state znode holds it (Kafka's isReassignmentComplete reads it)."""
        try:
            data, stat = self._zk.get(zk_data.partition_state_path(key.topic, key.partition))
            found = zk_data.decode_partition_state(key.topic, key.partition, data)
        except (NoNodeError, zk_data.MalformedZnodeError):
            return
        self.state.isr_changed(
            key,
            leader=found.leader,
            leader_epoch=found.leader_epoch,
            isr=found.isr,
            zk_version=stat.version,
        )

    def _delete_replicas(self, broker: int, keys: set[TopicPartition]) -> None:
        """StopReplica(delete_partitions=True) for removed replicas (Kafka's OfflineReplica,
        then ReplicaDeletionStarted); a broker that is down gets it when it comes back."""
        if broker not in self.state.live_brokers:
            self._pending_replica_deletes.setdefault(broker, set()).update(keys)
            return
        self.send(
            addresses.replica_manager(broker),
            StopReplica(
                reply_to=self.address,
                correlation_id=next(self._ids),
                controller_id=self.broker_id,
                controller_epoch=self.epoch,
                broker_epoch=self.state.broker_epochs.get(broker, -1),
                delete_partitions=True,
                partitions=tuple(sorted(keys)),
            ),
        )

    def _log_reassignment(
        self, step: ReassignmentStep, assignment: ReplicaAssignment, trigger: str
    ) -> None:
        shown = step.completed if step.completed is not None else assignment
        self.log_event(
            "controller.partition_reassignment",
            topic=step.key.topic,
            partition=step.key.partition,
            phase="completed" if step.completed is not None else "started",
            trigger=trigger,
            replicas=list(shown.replicas),
            adding_replicas=list(assignment.adding),
            removing_replicas=list(assignment.removing),
            deleted_replicas=list(step.delete),
            controller_epoch=self.epoch,
        )
