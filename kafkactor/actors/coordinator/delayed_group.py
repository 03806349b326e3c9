"""The group coordinator's two delayed operations: Kafka's `DelayedJoin` and `DelayedHeartbeat`.

They live in the coordinator actor's "Rebalance" and "Heartbeat" purgatories, on the broker's
shared timer (the Reaper delivers their expirations to the actor's mailbox). Neither decides
anything: each asks the actor's `GroupCoordinatorCore` through the callbacks it was given, so
every decision stays in the pure core and runs on the actor's thread.
"""

from __future__ import annotations

from collections.abc import Callable

from kafkactor.actors.coordinator.results import HeartbeatDeadline, JoinDeadline
from kafkactor.actors.purgatory import DelayedOperation

__all__ = ["DelayedHeartbeat", "DelayedJoin"]


class DelayedJoin(DelayedOperation):
    """Kafka's `DelayedJoin` (and `InitialDelayedJoin` when `deadline.initial`): the join phase
    of a rebalance, watched under the group id. It completes when `try_join` says every known
    member has rejoined (the core then answers the parked JoinGroups), or when its deadline
    passes (`on_expired`: the core drops the members that did not rejoin, or extends an
    initial delay). An initial delay completes only by its deadline. A DelayedJoin replaced by
    a newer one is `superseded`: its completion does nothing."""

    def __init__(
        self,
        delay_ms: int,
        deadline: JoinDeadline,
        *,
        try_join: Callable[[], bool],
        on_expired: Callable[[JoinDeadline], None],
    ) -> None:
        super().__init__(delay_ms)
        self.deadline = deadline
        self._try_join = try_join
        self._on_expired = on_expired
        self.superseded = False

    def try_complete(self) -> bool:
        if self.deadline.initial or self.superseded:
            return False
        return self.force_complete() if self._try_join() else False

    def on_complete(self) -> None:
        if self.expired and not self.superseded:
            self._on_expired(self.deadline)


class DelayedHeartbeat(DelayedOperation):
    """Kafka's `DelayedHeartbeat`: a member's session (or a new member's join timeout, or a
    handed-out member id's wait), watched under (group id, member id). Every heartbeat, join
    and sync replaces it with a later one (the old one completes without effect); when one
    expires, `on_expired` tells the core, which ignores a deadline that is no longer the
    member's current one."""

    def __init__(
        self,
        delay_ms: int,
        deadline: HeartbeatDeadline,
        *,
        on_expired: Callable[[HeartbeatDeadline], None],
    ) -> None:
        super().__init__(delay_ms)
        self.deadline = deadline
        self._on_expired = on_expired

    def try_complete(self) -> bool:
        return False  # only replaced (force_complete) or expired

    def on_complete(self) -> None:
        if self.expired:
            self._on_expired(self.deadline)
