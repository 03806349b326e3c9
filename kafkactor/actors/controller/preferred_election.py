"""Kafka's replica leader elections asked for by an operator, and the leader-imbalance check.

Pure decisions on a `ControllerState`, without I/O: Kafka 2.8's
`KafkaController.processReplicaLeaderElection` (which partitions are elected, which are
answered at once), `PartitionLeaderElectionAlgorithms.preferredReplicaPartitionLeaderElection`
and `offlinePartitionLeaderElection` with unclean election allowed (ElectLeaders v1
`election_type`), and `checkAndTriggerAutoLeaderRebalance` (`auto.leader.rebalance.enable`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from kafkactor.actors.controller.state import ControllerState, LeadershipChange
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages.errors import ErrorCode

# Kafka's election strategies as their `toString` names them in StateChangeFailedException
PREFERRED_STRATEGY = "PreferredReplicaPartitionLeaderElectionStrategy"
UNCLEAN_STRATEGY = "OfflinePartitionLeaderElectionStrategy(true)"
TOPIC_BEING_DELETED = "The topic is being deleted"
NO_SUCH_PARTITION = "The partition does not exist."


class ElectionType(enum.IntEnum):
    """Kafka's `ElectionType` (KIP-460): ElectLeaders' `election_type` (v1+; v0 is PREFERRED)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's answer: NONE with its new leader, or Kafka's error and message."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    leader: int = -1


@dataclass(frozen=True, slots=True)
class ElectionDecision:
    """What an election asked for changes: leaderships to write and send (`changes`, whose
    partitions are answered NONE once written) and the partitions answered at once."""

    changes: list[LeadershipChange] = field(default_factory=list)
    answered: dict[TopicPartition, ElectionResult] = field(default_factory=dict)


def failure_message(key: TopicPartition, election: ElectionType) -> str:
    """Kafka's StateChangeFailedException message for a partition no replica may lead."""
    strategy = PREFERRED_STRATEGY if election is ElectionType.PREFERRED else UNCLEAN_STRATEGY
    return f"Failed to elect leader for partition {key} under strategy {strategy}"


def failure(key: TopicPartition, election: ElectionType) -> ElectionResult:
    error = (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        if election is ElectionType.PREFERRED
        else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    )
    return ElectionResult(error, failure_message(key, election))


def elect_leaders(
    state: ControllerState,
    keys: Iterable[TopicPartition],
    election: ElectionType,
    *,
    reason: str,
) -> ElectionDecision:
    """Elect the leaders of `keys` (Kafka's processReplicaLeaderElection).

    - A partition the controller does not know: UNKNOWN_TOPIC_OR_PARTITION ("The partition
      does not exist."); one of a topic being deleted: INVALID_TOPIC_EXCEPTION ("The topic is
      being deleted").
    - PREFERRED: a partition its preferred replica (the first assigned) leads needs no
      election (ELECTION_NOT_NEEDED). Otherwise the preferred replica leads if it is live, not
      shutting down and in the ISR; the ISR stays as it is. If not:
      PREFERRED_LEADER_NOT_AVAILABLE.
    - UNCLEAN: a partition with a live leader needs no election (ELECTION_NOT_NEEDED). The
      others get the first assigned replica that is live, not shutting down and in the ISR
      (ISR: its live members), else the first live one (ISR: it alone, an unclean election);
      with no live replica: ELIGIBLE_LEADERS_NOT_AVAILABLE.
    - Every change is in the next leader epoch, and is made in `state.partitions`.
    """
    decision = ElectionDecision()
    for key in sorted(set(keys)):
        current = state.partitions.get(key)
        if current is None:
            if key in state.deleting:
                decision.answered[key] = ElectionResult(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, TOPIC_BEING_DELETED
                )
            else:
                decision.answered[key] = ElectionResult(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_SUCH_PARTITION
                )
            continue
        if not needs_election(state, current, election):
            decision.answered[key] = ElectionResult(ErrorCode.ELECTION_NOT_NEEDED)
            continue
        change = (
            _preferred(state, current, reason)
            if election is ElectionType.PREFERRED
            else _unclean(state, current, reason)
        )
        if change is None:
            decision.answered[key] = failure(key, election)
            continue
        state.partitions[key] = change.after
        decision.changes.append(change)
    return decision


def needs_election(
    state: ControllerState, current: PartitionLeaderState, election: ElectionType
) -> bool:
    """Kafka's split of the partitions asked for into electable ones and those whose leader
    is already right: the preferred replica for PREFERRED, a live one for UNCLEAN."""
    if election is ElectionType.PREFERRED:
        return current.leader != current.replicas[0]
    return current.leader not in _may_lead(state)


def _may_lead(state: ControllerState) -> set[int]:
    """Kafka's `liveBrokerIds`: registered brokers that are not shutting down."""
    return state.live_brokers - state.shutting_down


def _preferred(
    state: ControllerState, current: PartitionLeaderState, reason: str
) -> LeadershipChange | None:
    preferred = current.replicas[0]
    if preferred not in _may_lead(state) or preferred not in current.isr:
        return None
    after = replace(current, leader=preferred, leader_epoch=current.leader_epoch + 1)
    return LeadershipChange(current, after, reason)


def _unclean(
    state: ControllerState, current: PartitionLeaderState, reason: str
) -> LeadershipChange | None:
    live = _may_lead(state)
    for replica in current.replicas:
        if replica in live and replica in current.isr:
            isr = tuple(r for r in current.isr if r in live)
            after = replace(current, leader=replica, isr=isr, leader_epoch=current.leader_epoch + 1)
            return LeadershipChange(current, after, reason)
    for replica in current.replicas:
        if replica in live:
            after = replace(
                current, leader=replica, isr=(replica,), leader_epoch=current.leader_epoch + 1
            )
            return LeadershipChange(current, after, f"{reason}; unclean election", unclean=True)
    return None


def imbalance_ratios(state: ControllerState) -> dict[int, float]:
    """Per preferred broker: the share of the partitions it is preferred for (topics being
    deleted left out) that it does not lead (Kafka's leader imbalance ratio)."""
    preferred: dict[int, list[PartitionLeaderState]] = {}
    for p in state.partitions.values():
        preferred.setdefault(p.replicas[0], []).append(p)
    return {
        broker: sum(1 for p in ps if p.leader != broker) / len(ps)
        for broker, ps in sorted(preferred.items())
    }


def imbalanced_partitions(state: ControllerState, percentage: int) -> list[TopicPartition]:
    """Kafka's checkAndTriggerAutoLeaderRebalance: for each broker whose imbalance ratio is
    above `leader.imbalance.per.broker.percentage` / 100, the partitions it is preferred for
    and does not lead, where it can lead now: it is live, not shutting down and in the ISR.
    None while a partition is being reassigned.
    (Kafka filters on live only and lets the election fail for an ISR it is not in: the same
    leaders, without a failed election logged at every check.)"""
    if state.reassigning:  # Kafka elects nothing while any partition is being reassigned
        return []
    ratios = imbalance_ratios(state)
    live = _may_lead(state)
    chosen = []
    for key, p in sorted(state.partitions.items()):
        broker = p.replicas[0]
        if not ratios[broker] > percentage / 100 or p.leader == broker:  # Kafka's comparison
            continue
        if broker in live and broker in p.isr:
            chosen.append(key)
    return chosen
