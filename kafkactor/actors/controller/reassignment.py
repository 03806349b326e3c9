"""Kafka 2.8's partition reassignment (KIP-455) as pure decisions over `ControllerState`:
`KafkaController.onPartitionReassignment` and the checks of AlterPartitionReassignments.

Names as in Kafka's long comment on onPartitionReassignment: RS the partition's replicas, ORS
the original ones, TRS the target ones, AR = TRS - ORS the replicas added, RR = ORS - TRS the
replicas removed. The actor shell (`reassignments.py`) does the ZooKeeper writes and sends.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.actors.controller.state import ControllerState, LeadershipChange
from kafkactor.common import NO_LEADER, TopicPartition
from kafkactor.messages import ErrorCode

PARTITION_DOES_NOT_EXIST = "The partition does not exist."


@dataclass(frozen=True, slots=True)
class ReassignmentError:
    """Kafka's ApiError for one partition of a reassignment request."""

    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentStep:
    """What one run of onPartitionReassignment does for a partition, in the order to do it:

    - `write` (U1): the assignment to write to `/brokers/topics/<t>` before anything else
      (RS = ORS + TRS with AR and RR), or None when it is already there;
    - `change`: the partition's new leadership to write and send as LeaderAndIsr: in phase A
      (TRS not all in the ISR yet) the next leader epoch with RS, so the added replicas start
      and fetch; in phase B (done) the leader moved into TRS if it is not there or not live,
      RR out of the ISR, RS = TRS. Replicas no longer assigned leave the ISR in it too;
    - `delete`: replicas to stop and delete (StopReplica with delete): RR once done, and
      replicas a replaced or cancelled reassignment no longer needs (U3);
    - `completed`: once done, the assignment (RS = TRS) to write last (B6), after which the
      partition is no longer being reassigned.
    """

    key: TopicPartition
    write: ReplicaAssignment | None
    change: LeadershipChange | None
    delete: tuple[int, ...]
    completed: ReplicaAssignment | None


def _scala_seq(values: Iterable[int]) -> str:
    """How Kafka's messages print the replica lists they were given (a Scala buffer)."""
    return f"ArrayBuffer({', '.join(str(v) for v in values)})"


def _scala_set(values: Iterable[int]) -> str:
    items = sorted(values)
    name = "Set" if len(items) <= 4 else "HashSet"
    return f"{name}({', '.join(str(v) for v in items)})"


def current_assignment(state: ControllerState, key: TopicPartition) -> ReplicaAssignment:
    """Kafka's partitionFullReplicaAssignment: empty for a partition it does not know."""
    found = state.reassigning.get(key)
    if found is not None:
        return found
    partition = state.partitions.get(key)
    return ReplicaAssignment(partition.replicas if partition is not None else ())


def validate_replicas(
    state: ControllerState, key: TopicPartition, target: tuple[int, ...]
) -> ReassignmentError | None:
    """Kafka's validateReplicas for a target given through AlterPartitionReassignments: not
    empty, no broker twice, no negative id, and every replica it adds on a live broker."""
    if not target:
        return ReassignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Empty replica list specified in partition reassignment.",
        )
    if len(set(target)) != len(target):
        return ReassignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Duplicate replica ids in partition reassignment replica list: " + _scala_seq(target),
        )
    if any(r < 0 for r in target):
        return ReassignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Invalid broker id in replica list: {_scala_seq(target)}",
        )
    adding = current_assignment(state, key).reassign_to(target).adding
    if not set(adding) <= state.live_brokers:
        return ReassignmentError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Replica assignment has brokers that are not alive. Replica list: "
            f"{_scala_seq(adding)}, live broker list: {_scala_set(state.live_brokers)}",
        )
    return None


def build_reassignment(
    state: ControllerState, key: TopicPartition, target: tuple[int, ...] | None
) -> ReplicaAssignment | None:
    """Kafka's maybeBuildReassignment: the assignment to move to. A target of None cancels:
    back to ORS for a partition being reassigned, None (NO_REASSIGNMENT_IN_PROGRESS) for any
    other. A new target for a partition being reassigned replaces the old one, ORS kept."""
    current = current_assignment(state, key)
    if current.being_reassigned:
        return current.reassign_to(target if target is not None else current.origin)
    if target is None:
        return None
    return current.reassign_to(tuple(target))


def refusal(state: ControllerState, key: TopicPartition) -> ReassignmentError | None:
    """Kafka's maybeTriggerPartitionReassignment refusals: a topic being deleted, or a
    partition it does not know, is UNKNOWN_TOPIC_OR_PARTITION."""
    if key not in state.partitions:
        return ReassignmentError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, PARTITION_DOES_NOT_EXIST)
    return None


def is_reassignment_complete(
    state: ControllerState, key: TopicPartition, assignment: ReplicaAssignment
) -> bool:
    """Kafka's isReassignmentComplete: nothing to reassign, or every TRS member in the ISR."""
    if not assignment.being_reassigned:
        return True
    partition = state.partitions.get(key)
    return partition is not None and set(assignment.target) <= set(partition.isr)


def on_partition_reassignment(
    state: ControllerState, key: TopicPartition, assignment: ReplicaAssignment
) -> ReassignmentStep:
    """Kafka's onPartitionReassignment for `key` moving to `assignment`, decided at once in
    memory (`state.partitions` holds RS, `state.reassigning` the partitions under way)."""
    current = current_assignment(state, key)
    write = assignment if current != assignment else None
    # U3: replicas of a replaced (or cancelled) reassignment that the new one does not keep
    unneeded = tuple(r for r in current.replicas if r not in assignment.replicas)
    state.partitions[key] = replace(state.partitions[key], replicas=assignment.replicas)
    if assignment.being_reassigned:
        state.reassigning[key] = assignment
    if not is_reassignment_complete(state, key, assignment):
        # A1 + A2: the next leader epoch with RS; the added replicas start when it reaches them
        change = settle(state, key, assignment.replicas, unneeded, "partition reassignment")
        return ReassignmentStep(key, write, change, unneeded, None)
    # B1-B7: RS = TRS, the leader into TRS, RR out of the ISR and deleted
    completed = ReplicaAssignment(assignment.target)
    removed = tuple(dict.fromkeys((*assignment.removing, *unneeded)))
    state.reassigning.pop(key, None)
    reason = "partition reassignment completed"
    change = settle(state, key, completed.replicas, removed, reason)
    return ReassignmentStep(key, write, change, removed, completed)


def settle(
    state: ControllerState,
    key: TopicPartition,
    replicas: tuple[int, ...],
    removed: tuple[int, ...],
    reason: str,
) -> LeadershipChange:
    """The partition with `replicas` assigned and `removed` out of its ISR (never emptying
    it, as Kafka's OfflineReplica transition), in the next leader epoch. A leader that is no
    longer assigned, dead or shutting down hands over to the first of `replicas` that is live,
    not shutting down and in the ISR (Kafka's ReassignPartitionLeaderElectionStrategy); with
    none the partition has no leader until one comes back."""
    before = state.partitions[key]
    isr = tuple(r for r in before.isr if r not in removed) or before.isr
    may_lead = state.live_brokers - state.shutting_down
    leader = before.leader
    if leader not in replicas or leader not in may_lead:
        eligible = [r for r in replicas if r in may_lead and r in isr]
        leader = eligible[0] if eligible else NO_LEADER
    after = replace(
        before,
        replicas=replicas,
        leader=leader,
        isr=isr,
        leader_epoch=before.leader_epoch + 1,
    )
    state.partitions[key] = after
    return LeadershipChange(before, after, reason)


def reassignments_to_resume(
    state: ControllerState, brokers: Iterable[int] | None = None
) -> list[TopicPartition]:
    """The partitions being reassigned (Kafka's maybeResumeReassignments), those whose TRS
    holds one of `brokers` when given (a broker came back: onBrokerStartup)."""
    wanted = set(brokers) if brokers is not None else None
    return sorted(
        key
        for key, assignment in state.reassigning.items()
        if wanted is None or wanted & set(assignment.target)
    )


def forget_gone(state: ControllerState) -> list[TopicPartition]:
    """Reassignments of partitions no longer known (their topic is being deleted): dropped."""
    gone = sorted(key for key in state.reassigning if key not in state.partitions)
    for key in gone:
        del state.reassigning[key]
    return gone
