"""Group membership, whatever the group is for: Kafka's client-side `AbstractCoordinator`.

Finding the group's coordinator, the JoinGroup / SyncGroup round of the classic rebalance
protocol, the heartbeat thread and LeaveGroup. What the protocol's metadata and assignments
mean is the subclass's business (`ConsumerCoordinator`, in `consumer_coordinator.py`). The
broker's side is the `GroupCoordinatorActor` (docs/coordinator.md).
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.runtime import Client, RequestTimeoutError, addresses
from kafkactor.clients.errors import ClientError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.common import NO_LEADER, OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse, Request
from kafkactor.messages.group import (
    NO_GENERATION,
    NO_MEMBER_ID,
    GroupProtocol,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = ["COORDINATOR_ERRORS", "FENCED", "AbstractCoordinator", "InFlight", "MemberState"]

#: The coordinator moved, is loading, or cannot be reached: find it again after a backoff.
COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
#: The group no longer knows this member or its generation: rejoin as a new member.
FENCED: Final = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION})
JOIN_GROUP_TIMEOUT_LAPSE_MS: Final = (
    5000  # Kafka's: how much longer than the rebalance a join waits
)


class MemberState(Enum):
    """Kafka's `MemberState`: where the member is in the rebalance protocol."""

    UNJOINED = "unjoined"  # no generation: before the first join, or fenced out
    REBALANCING = "rebalancing"  # JoinGroup or SyncGroup sent
    STABLE = "stable"  # a member of the current generation, heartbeating


@dataclass(frozen=True, slots=True)
class InFlight:
    """A request kept across polls: its kind, where it went, and when to give up on it."""

    kind: str  # "join", "sync", or the subclass's ("offsets", "commit")
    coordinator: int
    future: Future[Any]
    expires_at: float
    generation: int = NO_GENERATION


def error_code(response: Any) -> ErrorCode:
    """The error a coordinator's answer carries (a commit's or fetch's first partition error)."""
    if isinstance(response, OffsetCommitResponse):
        codes = [p.error_code for p in response.partitions]
    elif isinstance(response, OffsetFetchResponse):
        codes = [response.error_code, *(p.error_code for p in response.partitions)]
    else:
        code = getattr(response, "error_code", None)
        return code if isinstance(code, ErrorCode) else ErrorCode.UNKNOWN_SERVER_ERROR
    return next((c for c in codes if c is not ErrorCode.NONE), ErrorCode.NONE)


class AbstractCoordinator:
    """Kafka's client-side `AbstractCoordinator`: one member of group `group_id`.

    **Finding the coordinator.** The group lives in partition `partition_for(group_id, n)` of
    `__consumer_offsets` (n: its partition count in the client's metadata), and that
    partition's leader coordinates it. An answer saying the coordinator moved, is loading or
    cannot be reached (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
    COORDINATOR_LOAD_IN_PROGRESS, NETWORK_EXCEPTION, BROKER_NOT_AVAILABLE, or no answer in
    time) marks it unknown; it is looked up again, from fresh metadata, after
    `retry_backoff_ms`.

    **Joining** (`ensure_active_group`, called from the client's poll): JoinGroup with the
    subclass's protocols (KIP-394: the first answer is MEMBER_ID_REQUIRED with the member's id,
    and the member rejoins with it). UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION rejoin as a new
    member, REBALANCE_IN_PROGRESS rejoins, coordinator errors rejoin once it is found again;
    anything else is raised as `ClientError`. The leader's SyncGroup carries the subclass's
    assignment of every member. JoinGroup and SyncGroup wait in the coordinator until the
    rebalance completes, so they stay in flight across polls: a short poll returns, the next
    waits on.

    **Heartbeats.** A thread sends Heartbeat every `heartbeat_interval_ms` while the member is
    stable. REBALANCE_IN_PROGRESS asks for a rejoin, UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION
    drop the generation and ask for one, coordinator errors mark it unknown (the thread looks
    it up again after the backoff). The rejoin itself happens in the client's next poll. A
    client that does not poll for `rebalance_timeout_ms` (the consumer's
    `max.poll.interval.ms`) leaves the group from the heartbeat thread, as Kafka's does.

    Only the client's thread and the heartbeat thread block, each wait bounded.
    """

    protocol_type = ""  # the subclass's (JoinGroup's protocol_type)

    def __init__(
        self,
        client: Client,
        metadata: ClientMetadata,
        group_id: str,
        *,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
    ) -> None:
        if not 0 < heartbeat_interval_ms < session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be positive and below session_timeout_ms")
        self.client = client
        self.metadata = metadata
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._client_id = client.address.split("/", 1)[-1]
        self._lock = threading.RLock()  # the member's state, shared with the heartbeat thread
        self._lookup_lock = threading.Lock()
        self._coordinator: int | None = None
        self._retry_at = 0.0  # no coordinator lookup or request before this (monotonic)
        self._generation = NO_GENERATION
        self._member_id = NO_MEMBER_ID
        self._state = MemberState.UNJOINED
        self._rejoin_needed = True
        self._joining: InFlight | None = None  # the JoinGroup or SyncGroup out
        self._last_poll = time.monotonic()
        self._stop = threading.Event()  # the heartbeat thread ends
        self._pause = threading.Event()  # never set: a bounded wait between retries
        self._heartbeats: threading.Thread | None = None
        self._heartbeat_future: Future[Any] | None = None

    # -- the subclass's part -------------------------------------------------------------------

    def _protocols(self) -> tuple[GroupProtocol, ...]:
        """JoinGroup's protocols, most preferred first (Kafka's `metadata()`)."""
        raise NotImplementedError

    def _on_join_prepare(self) -> None:
        """Before a JoinGroup is sent (Kafka's `onJoinPrepare`)."""

    def _perform_assignment(self, response: JoinGroupResponse) -> tuple[SyncGroupAssignment, ...]:
        """The leader's assignment of every member in `response.members`."""
        raise NotImplementedError

    def _on_join_complete(self, assignment: bytes) -> None:
        """This member's assignment in the new generation (Kafka's `onJoinComplete`)."""

    # -- what the member is ------------------------------------------------------------------

    @property
    def member_id(self) -> str:
        with self._lock:
            return self._member_id

    @property
    def generation_id(self) -> int:
        with self._lock:
            return self._generation

    @property
    def state(self) -> MemberState:
        with self._lock:
            return self._state

    @property
    def coordinator_id(self) -> int | None:
        """The broker believed to coordinate the group (None while unknown)."""
        with self._lock:
            return self._coordinator

    def request_rejoin(self) -> None:
        with self._lock:
            self._rejoin_needed = True

    def _is_joined(self) -> bool:
        with self._lock:
            return self._state is MemberState.STABLE and not self._rejoin_needed

    # -- joining -------------------------------------------------------------------------------

    def ensure_active_group(self, deadline: float) -> bool:
        """Join (or rejoin) until a member of a stable generation, or `deadline` (monotonic):
        True once joined, False at the deadline (a JoinGroup or SyncGroup may stay out)."""
        self._last_poll = time.monotonic()
        while True:
            pending = self._joining
            if pending is None:
                if self._is_joined():
                    return True
                coordinator = self.ensure_coordinator(deadline)
                if coordinator is None:
                    return False
                self._on_join_prepare()
                self._send_join(coordinator)
                continue
            if not self.wait(pending.future, min(deadline, pending.expires_at)):
                if time.monotonic() < pending.expires_at:
                    return False  # the poll's time is up: the next one waits on
                self.client.abandon(pending.future)
                self._joining = None
                self._join_failed(ErrorCode.REQUEST_TIMED_OUT, pending)
                continue
            self._joining = None
            response = pending.future.result()
            code = error_code(response)
            if code is not ErrorCode.NONE:
                self._join_failed(code, pending, response)
            elif isinstance(response, JoinGroupResponse):
                self._joined(response, pending.coordinator)
            elif isinstance(response, SyncGroupResponse):
                with self._lock:
                    self._state = MemberState.STABLE
                self._on_join_complete(response.assignment)
                self._start_heartbeats()

    def send(self, kind: str, coordinator: int, request: Request, timeout_ms: int) -> InFlight:
        """`request` to the coordinator, answered into the returned `InFlight`'s future."""
        future = self.client.request(addresses.group_coordinator(coordinator), request)
        expires_at = time.monotonic() + timeout_ms / 1000
        return InFlight(kind, coordinator, future, expires_at, self.generation_id)

    def _send_join(self, coordinator: int) -> None:
        with self._lock:
            self._state = MemberState.REBALANCING
            self._rejoin_needed = False
            member_id = self._member_id
        request = JoinGroupRequest(
            group_id=self.group_id,
            member_id=member_id,
            client_id=self._client_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            protocol_type=self.protocol_type,
            protocols=self._protocols(),
            require_known_member_id=True,  # JoinGroup v4+ (KIP-394)
        )
        timeout_ms = max(
            self.request_timeout_ms, self.rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS
        )
        self._joining = self.send("join", coordinator, request, timeout_ms)

    def _joined(self, response: JoinGroupResponse, coordinator: int) -> None:
        with self._lock:
            self._generation = response.generation_id
            self._member_id = response.member_id
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if response.leader_id == response.member_id:
            assignments = self._perform_assignment(response)
        request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=response.generation_id,
            member_id=response.member_id,
            protocol_type=self.protocol_type,
            protocol_name=response.protocol_name,
            assignments=assignments,
        )
        timeout_ms = max(self.request_timeout_ms, self.rebalance_timeout_ms)
        self._joining = self.send("sync", coordinator, request, timeout_ms)

    def _join_failed(self, code: ErrorCode, pending: InFlight, response: Any = None) -> None:
        """A JoinGroup or SyncGroup failed: rejoin, after what the error calls for."""
        self.request_rejoin()
        if code in COORDINATOR_ERRORS:
            self.mark_coordinator_unknown(pending.coordinator)
        elif code is ErrorCode.MEMBER_ID_REQUIRED and isinstance(response, JoinGroupResponse):
            with self._lock:
                self._member_id = response.member_id  # KIP-394: rejoin at once with it
        elif code in FENCED:
            self.reset_generation()
        elif code is not ErrorCode.REBALANCE_IN_PROGRESS:
            with self._lock:
                self._state = MemberState.UNJOINED
            raise ClientError(code, f"{pending.kind} of group {self.group_id!r} refused")

    def reset_generation(self, generation: int | None = None) -> None:
        """Forget the generation and member id (unless it moved on past `generation`)."""
        with self._lock:
            if generation is not None and generation != self._generation:
                return
            self._generation, self._member_id = NO_GENERATION, NO_MEMBER_ID
            self._state, self._rejoin_needed = MemberState.UNJOINED, True

    # -- the coordinator -----------------------------------------------------------------------

    def ensure_coordinator(self, deadline: float) -> int | None:
        """The coordinator, looked up (after the backoff) until `deadline`; None then."""
        while True:
            with self._lock:
                coordinator, retry_at = self._coordinator, self._retry_at
            now = time.monotonic()
            if retry_at > now:
                self._pause.wait(max(0.0, min(retry_at, deadline) - now))
                if retry_at > deadline:
                    return None
                continue
            if coordinator is not None:
                return coordinator
            self.lookup_coordinator()
            if self.coordinator_id is None and time.monotonic() >= deadline:
                return None

    def lookup_coordinator(self) -> None:
        """One lookup: the leader of the group's `__consumer_offsets` partition, from fresh
        metadata (Kafka's FindCoordinator answers from a broker's metadata cache)."""
        with self._lookup_lock:
            if self.coordinator_id is not None:
                return
            leader = NO_LEADER
            try:
                self.metadata.mark_stale(OFFSETS_TOPIC)
                count = len(self.metadata.partitions(OFFSETS_TOPIC))
                partition = partition_for(self.group_id, count)
                leader = self.metadata.leader(
                    TopicPartition(topic=OFFSETS_TOPIC, partition=partition)
                )
            except ClientError:
                pass  # no such topic yet, or no broker answered: try again after the backoff
            with self._lock:
                if leader >= 0:
                    self._coordinator = leader
                else:
                    self._retry_at = time.monotonic() + self.retry_backoff_ms / 1000

    def mark_coordinator_unknown(self, coordinator: int) -> None:
        with self._lock:
            if self._coordinator == coordinator:
                self._coordinator = None
            self._retry_at = time.monotonic() + self.retry_backoff_ms / 1000

    def backoff(self) -> None:
        """No request to the coordinator for `retry_backoff_ms`."""
        with self._lock:
            self._retry_at = time.monotonic() + self.retry_backoff_ms / 1000

    @staticmethod
    def wait(future: Future[Any], until: float) -> bool:
        """Wait for `future` until `until` (monotonic): whether it holds an answer."""
        with contextlib.suppress(FutureTimeout, CancelledError):
            future.result(timeout=max(0.0, until - time.monotonic()))
        return future.done() and not future.cancelled()

    def ask(self, request: Request, deadline: float) -> Any:
        """Ask the coordinator, finding it again after each coordinator error, until
        `deadline`: the first other answer (`ClientError` when none came by then)."""
        last = ErrorCode.COORDINATOR_NOT_AVAILABLE
        while True:
            coordinator = self.ensure_coordinator(deadline)
            if coordinator is None:
                raise ClientError(last, f"no coordinator of group {self.group_id!r} answered")
            address = addresses.group_coordinator(coordinator)
            try:
                timeout_s = max(deadline - time.monotonic(), 0.001)
                response = self.client.call(address, request, timeout_s)
            except RequestTimeoutError as timeout:
                response = ErrorResponse(
                    error_code=ErrorCode.REQUEST_TIMED_OUT, message=str(timeout)
                )
            last = error_code(response)
            if last not in COORDINATOR_ERRORS:
                return response
            self.mark_coordinator_unknown(coordinator)

    # -- heartbeats ----------------------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._heartbeats is None and not self._stop.is_set():
            self._heartbeats = threading.Thread(
                target=self._heartbeat_loop, name=f"{self.client.address}-heartbeat", daemon=True
            )
            self._heartbeats.start()

    def _heartbeat_loop(self) -> None:
        wait_s = self.heartbeat_interval_ms / 1000
        while not self._stop.wait(wait_s):
            wait_s = self._heartbeat()

    def _heartbeat(self) -> float:
        """One turn of Kafka's `HeartbeatThread`; returns how long to wait for the next."""
        interval, backoff = self.heartbeat_interval_ms / 1000, self.retry_backoff_ms / 1000
        with self._lock:
            if self._state is not MemberState.STABLE:
                return interval
            coordinator, generation, member = self._coordinator, self._generation, self._member_id
        if time.monotonic() - self._last_poll > self.rebalance_timeout_ms / 1000:
            self.leave_group()  # Kafka: "consumer poll timeout has expired"
        elif coordinator is None:
            self.lookup_coordinator()
            return backoff
        else:
            code = self._send_heartbeat(coordinator, generation, member)
            with self._lock:
                if (self._generation, self._member_id, self._state) != (
                    generation,
                    member,
                    MemberState.STABLE,
                ):
                    return interval  # about a generation that is gone, or a rejoin under way
                if code in COORDINATOR_ERRORS:
                    self.mark_coordinator_unknown(coordinator)
                    return backoff
                if code in FENCED:
                    self.reset_generation(generation)
                elif code is not ErrorCode.NONE:  # REBALANCE_IN_PROGRESS, or unexpected
                    self._rejoin_needed = True
        return interval

    def _send_heartbeat(self, coordinator: int, generation: int, member_id: str) -> ErrorCode:
        request = HeartbeatRequest(
            group_id=self.group_id, generation_id=generation, member_id=member_id
        )
        future = self.client.request(addresses.group_coordinator(coordinator), request)
        self._heartbeat_future = future
        timeout_ms = min(self.request_timeout_ms, self.session_timeout_ms)
        if self.wait(future, time.monotonic() + timeout_ms / 1000):
            return error_code(future.result())
        self.client.abandon(future)
        return ErrorCode.REQUEST_TIMED_OUT

    def stop_heartbeats(self) -> None:
        """Stop the heartbeat thread for good (joined, with a bound).

        Also a test hook, not Kafka API: a consumer whose heartbeats stop this way, and that
        is never polled or closed again, is a consumer whose process hung or died without
        leaving its group; the coordinator removes it once its session timeout passes.
        """
        self._stop.set()
        future = self._heartbeat_future
        if future is not None:
            future.cancel()  # wakes the thread if it waits for an answer
        thread = self._heartbeats
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=self.request_timeout_ms / 1000)

    # -- leaving -------------------------------------------------------------------------------

    def leave_group(self) -> None:
        """Kafka's `maybeLeaveGroup`: LeaveGroup when a member and the coordinator is known
        (its answer is not waited for), then forget the generation."""
        with self._lock:
            coordinator, member_id = self._coordinator, self._member_id
            self._generation, self._member_id = NO_GENERATION, NO_MEMBER_ID
            self._state, self._rejoin_needed = MemberState.UNJOINED, True
        if coordinator is not None and member_id != NO_MEMBER_ID:
            self.client.tell_request(
                addresses.group_coordinator(coordinator),
                LeaveGroupRequest(group_id=self.group_id, member_ids=(member_id,)),
            )

    def abandon_join(self) -> None:
        """Forget a JoinGroup or SyncGroup still out."""
        pending, self._joining = self._joining, None
        if pending is not None:
            self.client.abandon(pending.future)

    def close(self) -> None:
        """Kafka's `AbstractCoordinator.close`: stop the heartbeats and leave the group."""
        self.stop_heartbeats()
        self.abandon_join()
        self.leave_group()
