"""Kafka's `TransactionState`: the states a transactional id's transaction goes through, their
ids as `__transaction_state` stores them, and which state each may be entered from."""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["TransactionState", "is_valid_transition"]


class TransactionState(enum.IntEnum):
    """The state of a transactional id (Kafka's `TransactionState`, its byte ids as written in
    a `TransactionLogValue`'s status).

    - Empty: no transaction open (after InitProducerId).
    - Ongoing: partitions were added; records may be written.
    - PrepareCommit / PrepareAbort: EndTxn was accepted and written; markers are on their way.
    - CompleteCommit / CompleteAbort: every marker is written.
    - Dead: the transactional id expired (its tombstone is being written).
    - PrepareEpochFence: the producer's epoch is being bumped to abort its open transaction
      (an InitProducerId of a new instance, or a timed-out transaction). Never written: the
      transition is the PrepareAbort that follows, with the bumped epoch.
    """

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka gives the state (DescribeTransactions, ListTransactions)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state Kafka names `name` (None for an unknown name)."""
        return _BY_NAME.get(name)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)


_S = TransactionState

_NAMES: Final = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME: Final = {name: state for state, name in _NAMES.items()}

#: each state -> the states it may be entered from (Kafka's `validPreviousStates`)
VALID_PREVIOUS_STATES: Final[dict[TransactionState, frozenset[TransactionState]]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def is_valid_transition(current: TransactionState, target: TransactionState) -> bool:
    """May a transaction in `current` move to `target`? (Kafka's `isValidTransition`)"""
    return current in VALID_PREVIOUS_STATES[target]
