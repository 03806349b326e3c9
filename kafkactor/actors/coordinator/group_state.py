"""The states of a consumer group and the moves between them (Kafka's `GroupState`, from
GroupMetadata.scala)."""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """Kafka's `GroupState`: where a group is in its rebalance protocol.

    - Empty: no members; the group may still hold committed offsets (a group that only commits,
      or one whose members all left). A JoinGroup starts a rebalance.
    - PreparingRebalance: JoinGroups are parked until every known member has rejoined or the
      rebalance timeout passes; heartbeats answer REBALANCE_IN_PROGRESS.
    - CompletingRebalance (0.9's AwaitingSync): the generation is chosen and the JoinGroups
      answered; SyncGroups are parked until the leader sends the assignment.
    - Stable: the assignment is out; heartbeats keep members alive.
    - Dead: the group is gone from this coordinator (deleted, or its offsets-topic partition
      moved elsewhere); it never leaves this state.
    """

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous_states(self) -> frozenset[GroupState]:
        """The states from which a group may move to this one."""
        return _VALID_PREVIOUS_STATES[self]


_VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalGroupStateError(RuntimeError):
    """Kafka's IllegalStateException from GroupMetadata: an invalid state transition, or an
    operation the group's state does not allow (a bug in the caller, never a client error)."""
