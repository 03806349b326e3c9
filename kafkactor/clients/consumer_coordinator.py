"""A consumer's side of its group: Kafka's client-side `ConsumerCoordinator`.

What membership means for a consumer (eager protocol): the subscription as JoinGroup metadata,
the leader's partition assignment, revoking every partition before a rebalance, and the
group's committed offsets. Membership itself (coordinator lookup, JoinGroup / SyncGroup,
heartbeats, LeaveGroup) is the `AbstractCoordinator`'s (`abstract_coordinator.py`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkactor.actors.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkactor.actors.runtime import Client
from kafkactor.clients.abstract_coordinator import (
    COORDINATOR_ERRORS,
    FENCED,
    AbstractCoordinator,
    InFlight,
    MemberState,
    error_code,
)
from kafkactor.clients.assignors import ASSIGNORS, assign
from kafkactor.clients.errors import ClientError, CommitFailedError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    NO_GENERATION,
    NO_MEMBER_ID,
    GroupProtocol,
    JoinGroupResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetFetchPartitionRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupAssignment,
)

__all__ = ["ConsumerCoordinator", "ConsumerGroupMetadata"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Kafka's `ConsumerGroupMetadata` (KIP-447): the group, generation and member a consumer
    is. A transactional producer's `send_offsets_to_transaction` sends them with the offsets
    (TxnOffsetCommit v3), so the group coordinator refuses the offsets of a member the group
    moved on from (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID). Generation -1 and member "" skip
    that check (a group id alone)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""


def _committed(response: Any) -> dict[TopicPartition, int]:
    """An OffsetFetch answer's committed offsets (partitions with none left out)."""
    if not isinstance(response, OffsetFetchResponse):
        return {}
    return {TopicPartition.of(p): p.offset for p in response.partitions if p.offset >= 0}


def _offset_fetch(
    group_id: str, partitions: Sequence[TopicPartition], require_stable: bool
) -> OffsetFetchRequest:
    return OffsetFetchRequest(
        group_id=group_id,
        partitions=tuple(
            OffsetFetchPartitionRequest(topic=tp.topic, partition=tp.partition) for tp in partitions
        ),
        require_stable=require_stable,
    )


def _fetch_error(response: Any) -> ErrorCode:
    """An OffsetFetch answer's error; UNSTABLE_OFFSET_COMMIT when a partition's offset is
    still pending in a transaction (KIP-447: Kafka's consumer retries the whole fetch)."""
    code = error_code(response)
    unstable = isinstance(response, OffsetFetchResponse) and any(
        p.error_code is ErrorCode.UNSTABLE_OFFSET_COMMIT for p in response.partitions
    )
    return ErrorCode.UNSTABLE_OFFSET_COMMIT if code is ErrorCode.NONE and unstable else code


class ConsumerCoordinator(AbstractCoordinator):
    """Kafka's client-side `ConsumerCoordinator`: a consumer's membership of group
    `group_id` with the eager protocol, and the group's offsets.

    **Rebalancing** (from `poll`, which the consumer calls from its own): before rejoining,
    the partitions held are revoked, all of them (`on_assigned({})`), after committing their
    positions when auto-commit is on (not when the generation is already lost). JoinGroup
    advertises one protocol per assignor in `assignors` ("range", "roundrobin"), each with the
    subscription (`encode_subscription` of the sorted topics). The leader runs the group's
    chosen assignor over every member's subscription and the partition counts of its
    metadata, and sends each member's encoded assignment in SyncGroup. Each member decodes
    its own, fetches the group's committed offsets for it (OffsetFetch; coordinator errors
    are retried), and hands the consumer its partitions with their committed offsets
    (`on_assigned`; None: nothing committed, the consumer's `auto_offset_reset` applies).

    **Offsets.** `commit` is synchronous and retries coordinator errors for
    `request_timeout_ms`; a commit the group refuses (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS) raises `CommitFailedError` and asks for a rejoin. With auto-commit,
    `poll` commits `positions()` every `auto_commit_interval_ms` without waiting (a later
    poll reads the answer), and `close` commits them before leaving. A consumer with a group
    but without a subscription (manual assignment) commits outside group management
    (generation -1, member "").
    """

    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(
        self,
        client: Client,
        metadata: ClientMetadata,
        group_id: str,
        *,
        positions: Callable[[], dict[TopicPartition, int]],
        on_assigned: Callable[[dict[TopicPartition, int | None]], None],
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 300_000,
        heartbeat_interval_ms: int = 3_000,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30_000,
        enable_auto_commit: bool = True,
        auto_commit_interval_ms: int = 5_000,
        assignors: Sequence[str] = ("range",),
        require_stable: bool = False,
    ) -> None:
        if not assignors or any(name not in ASSIGNORS for name in assignors):
            raise ValueError(f"partition assignment strategies must be among {sorted(ASSIGNORS)}")
        super().__init__(
            client,
            metadata,
            group_id,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            retry_backoff_ms=retry_backoff_ms,
            request_timeout_ms=request_timeout_ms,
        )
        self.positions = positions
        self.on_assigned = on_assigned
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.assignors = tuple(assignors)
        self.require_stable = require_stable  # a read_committed consumer's (KIP-447)
        self._subscription: tuple[str, ...] = ()
        self._to_fetch: tuple[TopicPartition, ...] | None = None  # assigned, offsets unknown
        self._fetching: InFlight | None = None  # their OffsetFetch
        self._owns_assignment = False  # the consumer holds this generation's partitions
        self._auto_commit: InFlight | None = None
        self._next_auto_commit = time.monotonic() + auto_commit_interval_ms / 1000
        self._closed = False

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._subscription

    def subscribe(self, topics: Sequence[str]) -> None:
        """Consume these topics (sorted, without repeats); a change asks for a rejoin."""
        wanted = tuple(sorted(set(topics)))
        if wanted != self._subscription:
            self._subscription = wanted
            self.request_rejoin()

    def unsubscribe(self) -> None:
        """Give the partitions up and leave the group (Kafka's `unsubscribe`)."""
        self._revoke()
        self.abandon_join()
        self.leave_group()
        self._subscription = ()

    # -- poll ----------------------------------------------------------------------------------

    def poll(self, deadline: float) -> bool:
        """Kafka's `ConsumerCoordinator.poll`, until `deadline` (monotonic) at most: rejoin if
        needed, fetch the committed offsets of a new assignment, auto-commit when due.

        True when the consumer may fetch: it holds its generation's partitions (or has no
        subscription); False while a rebalance is under way. Raises `ClientError` for what
        rejoining cannot cure (INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, ...).
        """
        self._last_poll = time.monotonic()
        self._check_auto_commit()
        if self._subscription:
            while not (self._owns_assignment and self._is_joined()):
                if not self.ensure_active_group(deadline):
                    return False
                if self._to_fetch is None:  # joined, but what it was assigned is gone
                    self.request_rejoin()
                if not self._is_joined():
                    continue  # (or the heartbeat thread asked for another rebalance meanwhile)
                if not self._refresh_committed_offsets(deadline):
                    return False
        self._maybe_auto_commit()
        return True

    def _protocols(self) -> tuple[GroupProtocol, ...]:
        metadata = encode_subscription(self._subscription)
        return tuple(GroupProtocol(name=name, metadata=metadata) for name in self.assignors)

    def _on_join_prepare(self) -> None:
        """Eager: commit the positions held (auto-commit; not when the generation is already
        lost) and revoke every partition before rejoining."""
        if self._owns_assignment and self.enable_auto_commit and self.generation_id >= 0:
            with contextlib.suppress(ClientError):
                self.commit(self.positions())
        self._revoke()

    def _revoke(self) -> None:
        self._to_fetch = None
        fetching, self._fetching = self._fetching, None
        if fetching is not None:
            self.client.abandon(fetching.future)
        if self._owns_assignment:
            self._owns_assignment = False
            self.on_assigned({})  # revoked

    def _perform_assignment(self, response: JoinGroupResponse) -> tuple[SyncGroupAssignment, ...]:
        """The leader's part: the group's assignor over every member's subscription, with
        partition counts from fresh metadata (a topic nobody knows is left out)."""
        subscriptions: dict[str, tuple[str, ...]] = {}
        for member in response.members:
            try:
                subscriptions[member.member_id] = decode_subscription(member.metadata).topics
            except ConsumerProtocolError:
                subscriptions[member.member_id] = ()  # unreadable: it gets nothing
        counts: dict[str, int] = {}
        for topic in sorted({t for topics in subscriptions.values() for t in topics}):
            self.metadata.mark_stale(topic)
            with contextlib.suppress(ClientError):
                counts[topic] = len(self.metadata.partitions(topic))
        name = response.protocol_name or ""
        if name not in ASSIGNORS:
            raise ClientError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"no assignor {name!r}")
        return tuple(
            SyncGroupAssignment(member_id=member, assignment=encode_assignment(partitions))
            for member, partitions in assign(name, subscriptions, counts).items()
        )

    def _on_join_complete(self, assignment: bytes) -> None:
        try:
            assigned = decode_assignment(assignment).partitions if assignment else ()
        except ConsumerProtocolError as error:
            self.request_rejoin()
            raise ClientError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, str(error)) from None
        self._to_fetch = tuple(
            sorted(TopicPartition(topic=t, partition=p) for t, ps in assigned for p in ps)
        )

    def _refresh_committed_offsets(self, deadline: float) -> bool:
        """Fetch the new assignment's committed offsets (an OffsetFetch kept across polls)
        and hand the partitions to the consumer; False at `deadline`."""
        while self._to_fetch is not None:
            pending = self._fetching
            if pending is None:
                if not self._to_fetch:
                    self._assigned({})
                    break
                coordinator = self.ensure_coordinator(deadline)
                if coordinator is None:
                    return False
                request = _offset_fetch(self.group_id, self._to_fetch, self.require_stable)
                self._fetching = self.send("offsets", coordinator, request, self.request_timeout_ms)
                continue
            if not self.wait(pending.future, min(deadline, pending.expires_at)):
                if time.monotonic() < pending.expires_at:
                    return False
                self.client.abandon(pending.future)
            self._fetching = None
            code = _fetch_error(pending.future.result()) if pending.future.done() else None
            if code is ErrorCode.NONE:
                self._assigned(_committed(pending.future.result()))
            elif code is None or code in COORDINATOR_ERRORS:
                self.mark_coordinator_unknown(pending.coordinator)
            elif code.retriable:
                self.backoff()
            else:
                raise ClientError(code, f"fetching the offsets of group {self.group_id!r}")
        return True

    def _assigned(self, committed: Mapping[TopicPartition, int]) -> None:
        """Hand the consumer its partitions, each with its committed offset (None: none)."""
        partitions, self._to_fetch = self._to_fetch or (), None
        self._owns_assignment = True
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        self.on_assigned({tp: committed.get(tp) for tp in partitions})

    # -- offsets -------------------------------------------------------------------------------

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit `offsets` (the next offset to read, per partition) and wait for the answer.

        Raises `CommitFailedError` when the group refuses it (this member left the current
        generation, or the group is rebalancing), and `ClientError` for any other refusal, or
        when no coordinator answered within `request_timeout_ms`.
        """
        if not offsets:
            return
        request = self._commit_request(offsets)
        response = self.ask(request, time.monotonic() + self.request_timeout_ms / 1000)
        code = error_code(response)
        if code is ErrorCode.NONE:
            return
        if code in FENCED:
            self.reset_generation(request.generation_id)
        elif code is ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin()
        else:
            raise ClientError(code, f"committing offsets of group {self.group_id!r}")
        raise CommitFailedError(
            code,
            f"group {self.group_id!r} rebalanced without this member (or is rebalancing); "
            "its partitions may belong to another member now",
        )

    def _commit_request(self, offsets: Mapping[TopicPartition, int]) -> OffsetCommitRequest:
        generation, member_id = NO_GENERATION, NO_MEMBER_ID
        if self._subscription:  # group management: commit for the current generation
            with self._lock:
                if self._state is not MemberState.STABLE:
                    code = (
                        ErrorCode.REBALANCE_IN_PROGRESS
                        if self._state is MemberState.REBALANCING
                        else ErrorCode.UNKNOWN_MEMBER_ID
                    )
                    raise CommitFailedError(code, "not a member of the group's active generation")
                generation, member_id = self._generation, self._member_id
        return OffsetCommitRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=member_id,
            partitions=tuple(
                OffsetCommitPartition(topic=tp.topic, partition=tp.partition, offset=offset)
                for tp, offset in sorted(offsets.items())
            ),
        )

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation and member id, as it knows them now."""
        return ConsumerGroupMetadata(self.group_id, self.generation_id, self.member_id)

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The group's committed offsets (None for a partition without one), via OffsetFetch;
        with `require_stable`, asked again while a transaction's offset is pending."""
        deadline = time.monotonic() + self.request_timeout_ms / 1000
        request = _offset_fetch(self.group_id, partitions, self.require_stable)
        while True:
            response = self.ask(request, deadline)
            code = _fetch_error(response)
            if code is not ErrorCode.UNSTABLE_OFFSET_COMMIT or time.monotonic() >= deadline:
                break
            self._pause.wait(min(self.retry_backoff_ms / 1000, deadline - time.monotonic()))
        if code is not ErrorCode.NONE:
            raise ClientError(code, f"fetching the offsets of group {self.group_id!r}")
        found = _committed(response)
        return {tp: found.get(tp) for tp in partitions}

    def _maybe_auto_commit(self) -> None:
        """Send the positions as an OffsetCommit when auto-commit is due (read by a later poll)."""
        now = time.monotonic()
        if not self.enable_auto_commit or self._auto_commit is not None:
            return
        if now < self._next_auto_commit or (self._subscription and not self._owns_assignment):
            return
        offsets = self.positions()
        coordinator = self.coordinator_id
        if coordinator is None and offsets and now >= self._retry_at:
            self.lookup_coordinator()
            coordinator = self.coordinator_id
        if coordinator is None:
            self._next_auto_commit = now + self.retry_backoff_ms / 1000
            return
        self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
        if not offsets:
            return
        try:
            request = self._commit_request(offsets)
        except CommitFailedError:
            return
        self._auto_commit = self.send("commit", coordinator, request, self.request_timeout_ms)

    def _check_auto_commit(self) -> None:
        pending = self._auto_commit
        if pending is None:
            return
        if not pending.future.done():
            if time.monotonic() >= pending.expires_at:
                self.client.abandon(pending.future)
                self._auto_commit = None
                self.mark_coordinator_unknown(pending.coordinator)
            return
        self._auto_commit = None
        code = error_code(pending.future.result())
        if code in COORDINATOR_ERRORS:
            self.mark_coordinator_unknown(pending.coordinator)
            self._next_auto_commit = time.monotonic() + self.retry_backoff_ms / 1000
        elif code in FENCED:
            self.reset_generation(pending.generation)
        elif code is ErrorCode.REBALANCE_IN_PROGRESS and self._is_joined():
            self.request_rejoin()
        # any other refusal: tried again at the next interval, as Kafka's auto-commit does

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Kafka's `ConsumerCoordinator.close`: commit the positions (auto-commit; a refusal
        is swallowed), then stop the heartbeats and leave the group."""
        if self._closed:
            return
        self._closed = True
        auto_commit, self._auto_commit = self._auto_commit, None
        if auto_commit is not None:
            self.client.abandon(auto_commit.future)
        if self.enable_auto_commit and (self._owns_assignment or not self._subscription):
            with contextlib.suppress(ClientError):
                self.commit(self.positions())
        self._revoke()
        super().close()
