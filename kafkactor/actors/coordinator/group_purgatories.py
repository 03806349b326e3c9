"""The group coordinator's "Rebalance" and "Heartbeat" purgatories, on the broker's shared timer."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any

from kafkactor import tracing
from kafkactor.actors.coordinator.delayed_group import DelayedHeartbeat, DelayedJoin
from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.results import Effects, HeartbeatDeadline, JoinDeadline
from kafkactor.actors.purgatory import EXPIRED, CompletedBy, DelayedOperation, Purgatory
from kafkactor.actors.purgatory.purgatory_actor import log_watched
from kafkactor.actors.runtime import TraceContext
from kafkactor.timer import Clock, Timer

__all__ = ["Apply", "GroupPurgatories"]

Apply = Callable[[Effects | Callable[[], None]], None]
"""The actor's queue of work: core `Effects` to carry out, or a step to run, in order."""

CHECK_JOIN = "check_join"  # what completed a DelayedJoin a request's effects re-checked
HEARTBEAT = "heartbeat"  # a member's new session deadline completed its previous one
MEMBER_LEFT = "member_left"  # the member left (or its group went): no session to watch


class GroupPurgatories:
    """Kafka's two group purgatories of one coordinator (`DelayedJoin` keyed by group id in
    "Rebalance", `DelayedHeartbeat` keyed by (group id, member id) in "Heartbeat"), on the
    broker's shared `Timer`: the Reaper delivers their expirations to the coordinator actor
    (`owner`), which hands them to `expire`.

    What an operation's completion or expiry means is the core's to say: the operations call
    back into the `GroupCoordinatorCore`, and whatever the core returns goes to `apply`, the
    actor's queue, so nothing re-enters a purgatory from inside itself. Every watch,
    completion and expiry is an event, as in the produce and fetch purgatories.
    """

    def __init__(
        self,
        core: GroupCoordinatorCore,
        timer: Timer,
        clock: Clock,
        *,
        owner: str,
        apply: Apply,
        log_event: Callable[..., None],
        trace: Callable[[], TraceContext | None],
    ) -> None:
        self.core = core
        self.clock = clock
        self.owner = owner
        self.rebalance = Purgatory("Rebalance", timer)
        self.heartbeat = Purgatory("Heartbeat", timer)
        self._apply = apply
        self._log_event = log_event
        self._trace = trace
        self._joins: dict[str, DelayedJoin] = {}
        self._heartbeats: dict[tuple[str, str], DelayedHeartbeat] = {}

    # -- Heartbeat -------------------------------------------------------------------------------

    def schedule_heartbeat(self, deadline: HeartbeatDeadline) -> None:
        """A member's new session deadline; it replaces the member's previous one."""
        key = (deadline.group_id, deadline.member_id)
        self._end_heartbeat(key, HEARTBEAT)
        operation = DelayedHeartbeat(
            max(0, deadline.deadline_ms - self.clock.now_ms()),
            deadline,
            on_expired=lambda d: self._apply(lambda: self._heartbeat_expired(d)),
        )
        self._heartbeats[key] = operation
        self._watch(self.heartbeat, operation, key)

    def cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        """The member's DelayedHeartbeat completes without effect: it left the group."""
        self._end_heartbeat((group_id, member_id), MEMBER_LEFT)

    def _end_heartbeat(self, key: tuple[str, str], kind: str) -> None:
        """Complete the member's current DelayedHeartbeat, if any (Kafka's checkAndComplete
        of the member's key after a heartbeat, join, sync or leave)."""
        previous = self._heartbeats.pop(key, None)
        if previous is not None and previous.force_complete(CompletedBy(kind)):
            self._log_completed(self.heartbeat, key, 1, kind)

    def _heartbeat_expired(self, deadline: HeartbeatDeadline) -> None:
        key = (deadline.group_id, deadline.member_id)
        current = self._heartbeats.get(key)
        if current is not None and current.deadline == deadline:
            del self._heartbeats[key]
        effects = self.core.on_heartbeat_expired(
            deadline.group_id,
            deadline.member_id,
            deadline.deadline_ms,
            self.clock.now_ms(),
            pending=deadline.pending,
        )
        self._apply(effects)

    # -- Rebalance -------------------------------------------------------------------------------

    def watch_join(self, deadline: JoinDeadline) -> None:
        """Kafka's tryCompleteElseWatch of a group's DelayedJoin (a newer one replaces the
        group's previous one, which then completes without effect)."""
        group_id = deadline.group_id
        previous = self._joins.pop(group_id, None)
        if previous is not None and not previous.is_completed():
            previous.superseded = True
            previous.force_complete(CompletedBy("replaced"))

        def try_join() -> bool:
            effects = self.core.try_complete_join(group_id, self.clock.now_ms())
            if effects is None:
                return False
            self._forget_join(group_id, operation)
            self._apply(effects)
            return True

        def expired(d: JoinDeadline) -> None:
            self._forget_join(group_id, operation)
            self._apply(lambda: self._join_expired(d))

        operation = DelayedJoin(
            max(0, deadline.deadline_ms - self.clock.now_ms()),
            deadline,
            try_join=try_join,
            on_expired=expired,
        )
        self._joins[group_id] = operation
        self._watch(self.rebalance, operation, group_id)

    def _join_expired(self, deadline: JoinDeadline) -> None:
        self._apply(self.core.on_join_expired(deadline.group_id, self.clock.now_ms()))

    def check_join(self, group_id: str) -> None:
        """Kafka's checkAndComplete on the group's DelayedJoin, if it has one."""
        if group_id in self._joins:
            self._complete(self.rebalance, group_id, CHECK_JOIN)

    def _forget_join(self, group_id: str, operation: DelayedJoin) -> None:
        if self._joins.get(group_id) is operation:
            del self._joins[group_id]

    # -- both ------------------------------------------------------------------------------------

    def expire(self, operation_ids: Iterable[int], trace: TraceContext | None) -> None:
        """The Reaper's timer expired these operations (of either purgatory)."""
        ids = tuple(operation_ids)
        completed_by = (
            CompletedBy(EXPIRED, trace.trace_id, trace.parent_span_id)
            if trace is not None
            else CompletedBy(EXPIRED)
        )
        for purgatory in (self.rebalance, self.heartbeat):
            for operation in purgatory.expire_all(ids, completed_by):
                if tracing.is_enabled():
                    self._log_event(
                        "purgatory.expire",
                        purgatory=purgatory.name,
                        operation_id=operation.operation_id,
                        delayed=purgatory.num_delayed,
                    )

    def _watch(self, purgatory: Purgatory, operation: DelayedOperation, key: Hashable) -> None:
        operation.owner = self.owner
        operation.trace = self._trace()
        completed = purgatory.try_complete_else_watch(operation, (key,))
        if tracing.is_enabled():
            log_watched(self._log_event, purgatory, operation, [_key_name(key)], completed)

    def _complete(self, purgatory: Purgatory, key: Hashable, kind: str) -> None:
        completed = purgatory.check_and_complete(key, CompletedBy(kind))
        purgatory.maybe_purge()
        if completed:
            self._log_completed(purgatory, key, completed, kind)

    def _log_completed(
        self, purgatory: Purgatory, key: Hashable, completed: int, kind: str
    ) -> None:
        """`purgatory.complete` for the operations of `key` that `kind` completed."""
        if tracing.is_enabled():
            self._log_event(
                "purgatory.complete",
                purgatory=purgatory.name,
                key=_key_name(key),
                completed=completed,
                delayed=purgatory.num_delayed,
                cause=kind,
                completed_by=kind,
            )

    def shutdown(self) -> None:
        """Take every operation off the timer (the coordinator stops)."""
        for operation in [*self.rebalance.pending(), *self.heartbeat.pending()]:
            operation.cancel()
        self._joins.clear()
        self._heartbeats.clear()

    def describe(self) -> dict[str, Any]:
        return {
            "rebalance_delayed": self.rebalance.num_delayed,
            "heartbeat_delayed": self.heartbeat.num_delayed,
        }


def _key_name(key: Hashable) -> str:
    return "/".join(key) if isinstance(key, tuple) else str(key)
