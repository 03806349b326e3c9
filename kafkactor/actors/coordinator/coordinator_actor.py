"""The group coordinator's actor shell: one per broker, around a `GroupCoordinatorCore`."""

from __future__ import annotations

import functools
import itertools
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkactor.actors.coordinator.coordinator_messages import (
    commit_response,
    committed_offsets,
    join_error,
    join_response,
    offset_fetch_response,
    sync_response,
)
from kafkactor.actors.coordinator.coordinator_txn import TxnOffsetHandlers
from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.group_metadata import GroupMetadataSnapshot
from kafkactor.actors.coordinator.group_purgatories import GroupPurgatories
from kafkactor.actors.coordinator.offsets_loader import load_partition
from kafkactor.actors.coordinator.offsets_store import group_record, offset_records
from kafkactor.actors.coordinator.results import (
    Effects,
    GroupConfig,
    JoinGroupResult,
    MemberIdentity,
    OffsetCommitWrite,
    SyncGroupResult,
)
from kafkactor.actors.purgatory import CompletedBy
from kafkactor.actors.runtime import Directory, TraceContext, addresses, handles
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from kafkactor.messages.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    LeaveGroupMemberResult,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetFetchRequest,
    OffsetsPartitionElected,
    OffsetsPartitionLoading,
    OffsetsPartitionResigned,
    OffsetsPartitionsKnown,
    SyncGroupRequest,
)
from kafkactor.messages.purgatory import OperationsExpired
from kafkactor.messages.replication import ProducePartition, ProduceRequest, ProduceResponse
from kafkactor.storage import Log, Record, build_batch
from kafkactor.timer import Clock, Timer

__all__ = ["GroupCoordinatorActor"]

OFFSETS_COMMIT_TIMEOUT_MS = 5000  # offsets.commit.timeout.ms: how long an append waits for acks
_EXPIRED = CompletedBy("expired")


@dataclass(frozen=True, slots=True)
class _Parked:
    """A JoinGroup or SyncGroup waiting for the rebalance, with the trace to answer it in."""

    request: Request
    trace: TraceContext | None


class GroupCoordinatorActor(TxnOffsetHandlers):
    """Kafka's `GroupCoordinator` for one broker: the groups of the `__consumer_offsets`
    partitions this broker leads.

    Every decision is the `GroupCoordinatorCore`'s; this shell parks JoinGroups and
    SyncGroups until the core answers them, keeps Kafka's two group purgatories on the
    broker's shared timer ("Rebalance": a `DelayedJoin` per group; "Heartbeat": a
    `DelayedHeartbeat` per member, both expired by the broker's Reaper), appends group
    metadata and committed offsets to `__consumer_offsets` through the broker's replica
    manager with acks=-1, and answers only once the append is acknowledged. When the replica
    manager says this broker became leader of an offsets partition, it replays that
    partition's log (last value per key wins) before serving its groups; when it stops
    leading one, its groups are unloaded and their waiting requests answered NOT_COORDINATOR.
    DescribeGroups, ListGroups, DeleteGroups and OffsetDelete are `GroupAdminHandlers`';
    TxnOffsetCommit and TxnOffsetsCompleted `TxnOffsetHandlers`'.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock,
        broker: int,
        *,
        logs: Mapping[str, Log],
        config: GroupConfig | None = None,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.broker_id = broker
        self.logs = logs
        self.core = GroupCoordinatorCore(config, owned_partitions=())
        self.purgatories = GroupPurgatories(
            self.core,
            timer,
            self.clock,
            owner=address,
            apply=self._apply,
            log_event=self.log_event,
            trace=lambda: self.trace_context,
        )
        self.replica_manager = addresses.replica_manager(broker)
        self._parked_joins: dict[tuple[str, str], _Parked] = {}
        self._parked_syncs: dict[tuple[str, str], _Parked] = {}
        self._appends: dict[int, Callable[[ErrorCode, int], None]] = {}  # by correlation id
        self._ids = itertools.count(1)
        self._epochs: dict[int, int] = {}  # offsets partition -> the leader epoch last heard of
        self._effects: deque[Effects | Callable[[], None]] = deque()
        self._draining = False

    @property
    def now(self) -> int:
        return self.clock.now_ms()

    # -- the rebalance protocol ------------------------------------------------------------------

    @handles(JoinGroupRequest)
    def _on_join(self, request: JoinGroupRequest) -> None:
        rebalance_timeout = request.rebalance_timeout_ms
        outcome = self.core.handle_join_group(
            request.group_id,
            request.member_id,
            request.protocol_type,
            [(p.name, p.metadata) for p in request.protocols],
            request.session_timeout_ms,
            request.session_timeout_ms if rebalance_timeout < 0 else rebalance_timeout,
            request.client_id,
            request.client_host,
            self.now,
            require_known_member_id=request.require_known_member_id,
            group_instance_id=request.group_instance_id,
        )
        if outcome.result is not None:
            self.reply(request, join_response(outcome.result))
        else:
            key = (request.group_id, outcome.member_id)
            replaced = self._parked_joins.pop(key, None)
            if replaced is not None:  # Kafka never answers the first: tell it to rejoin
                self._answer_join(
                    replaced, join_error(outcome.member_id, ErrorCode.REBALANCE_IN_PROGRESS)
                )
            self._parked_joins[key] = _Parked(request, self.trace_context)
        self._apply(outcome.effects)

    @handles(SyncGroupRequest)
    def _on_sync(self, request: SyncGroupRequest) -> None:
        outcome = self.core.handle_sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            {a.member_id: a.assignment for a in request.assignments},
            self.now,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            group_instance_id=request.group_instance_id,
        )
        if outcome.result is not None:
            self.reply(request, sync_response(outcome.result))
        else:
            key = (request.group_id, request.member_id)
            replaced = self._parked_syncs.pop(key, None)
            if replaced is not None:
                self._answer_sync(replaced, SyncGroupResult(error=ErrorCode.REBALANCE_IN_PROGRESS))
            self._parked_syncs[key] = _Parked(request, self.trace_context)
        self._apply(outcome.effects)

    @handles(HeartbeatRequest)
    def _on_heartbeat(self, request: HeartbeatRequest) -> None:
        outcome = self.core.handle_heartbeat(
            request.group_id,
            request.member_id,
            request.generation_id,
            self.now,
            group_instance_id=request.group_instance_id,
        )
        self.reply(request, HeartbeatResponse(error_code=outcome.error))
        self._apply(outcome.effects)

    @handles(LeaveGroupRequest)
    def _on_leave(self, request: LeaveGroupRequest) -> None:
        leaving = [
            *(MemberIdentity(m) for m in request.member_ids),
            *(MemberIdentity(m.member_id, m.group_instance_id) for m in request.members),
        ]
        outcome = self.core.handle_leave_group(request.group_id, leaving, self.now)
        members = tuple(
            LeaveGroupMemberResult(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in outcome.members
        )
        self.reply(request, LeaveGroupResponse(error_code=outcome.error, members=members))
        self._apply(outcome.effects)

    # -- offsets ---------------------------------------------------------------------------------

    @handles(OffsetCommitRequest)
    def _on_commit(self, request: OffsetCommitRequest) -> None:
        now = self.now
        offsets = committed_offsets(request, now)
        outcome = self.core.handle_commit_offsets(
            request.group_id,
            request.member_id,
            request.generation_id,
            offsets,
            now,
            group_instance_id=request.group_instance_id,
        )
        self._apply(outcome.effects)
        if outcome.errors is not None:
            self.reply(request, commit_response(outcome.errors))
            return
        write = outcome.write
        assert write is not None

        def appended(error: ErrorCode, at: int, write: OffsetCommitWrite = write) -> None:
            self.reply(request, commit_response(self.core.complete_offset_write(write, error, at)))

        batch = build_batch(offset_records(write.group_id, write.offsets, now), 0)
        self._append_batch(self.core.partition_for(write.group_id), batch, appended)

    @handles(OffsetFetchRequest)
    def _on_fetch_offsets(self, request: OffsetFetchRequest) -> None:
        wanted = (
            None
            if request.all_partitions
            else [TopicPartition(topic=p.topic, partition=p.partition) for p in request.partitions]
        )
        error, found = self.core.handle_fetch_offsets(
            request.group_id, wanted, require_stable=request.require_stable
        )
        if wanted is not None and error is not ErrorCode.NONE:
            found = {}
        self.reply(request, offset_fetch_response(error, found))

    # -- leadership of __consumer_offsets --------------------------------------------------------

    @handles(OffsetsPartitionsKnown)
    def _on_known(self, event: OffsetsPartitionsKnown) -> None:
        self.core.learn_partitions(event.partitions)

    @handles(OffsetsPartitionLoading)
    def _on_loading(self, event: OffsetsPartitionLoading) -> None:
        """The window opens: the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS until
        `_on_elected` has read the partition back (the replica manager says so once the
        partition has become leader and its log is final)."""
        self._begin_loading(event)

    def _begin_loading(self, event: OffsetsPartitionLoading | OffsetsPartitionElected) -> bool:
        """Mark the partition loading unless the event is older than the last leadership heard
        of, or the partition is already served (a newer epoch of the same leadership); True
        when it was marked."""
        partition = event.partition
        if event.leader_epoch < self._epochs.get(partition, -1):
            return False  # an older decision arrived late
        self._epochs[partition] = event.leader_epoch
        if partition in self.core.owned_partitions:
            return False  # still ours (a newer epoch of the same leadership)
        self.core.begin_loading(partition)
        return True

    @handles(OffsetsPartitionElected)
    def _on_elected(self, event: OffsetsPartitionElected) -> None:
        if not self._begin_loading(event):
            return
        partition = event.partition
        started = time.monotonic()
        log = self.logs.get(str(TopicPartition(topic=OFFSETS_TOPIC, partition=partition)))
        replay, error = load_partition(log)
        now = self.now
        loaded_groups = replay.loaded()
        for loaded in loaded_groups:
            known = loaded.group_id in self.core.groups  # kept as it is (Kafka's addGroup)
            self._apply(self.core.load_group(loaded.group_id, loaded.snapshot, loaded.offsets, now))
            if not known:
                self.core.txn_offsets.load(loaded.group_id, loaded.pending, loaded.positions)
        self.core.finish_loading(partition)
        self.log_event(
            "group.load",
            partition=partition,
            leader_epoch=event.leader_epoch,
            groups=len(loaded_groups),
            records=replay.records,
            skipped=replay.skipped + replay.corrupt,
            open_transactions=sum(1 for offsets in replay.pending.values() if offsets),
            duration_ms=int((time.monotonic() - started) * 1000),
            error=error,
        )

    @handles(OffsetsPartitionResigned)
    def _on_resigned(self, event: OffsetsPartitionResigned) -> None:
        partition = event.partition
        if 0 <= event.leader_epoch < self._epochs.get(partition, -1):
            return
        if event.leader_epoch >= 0:
            self._epochs[partition] = event.leader_epoch
        else:  # the replica stopped (its topic may be deleted and made again, from epoch 0)
            self._epochs.pop(partition, None)
        self.core.learn_partitions((partition,))  # told of it: a follower's answer is definite
        if partition not in self.core.owned_partitions | self.core.loading_partitions:
            return
        unloaded = self.core.resign(partition, self.now)
        for effects in unloaded:
            self._apply(effects)
        self._answer_orphans(lambda group: self.core.partition_for(group) == partition)
        self.log_event("group.unload", partition=partition, groups=len(unloaded))

    def _answer_orphans(self, belongs: Callable[[str], bool]) -> None:
        """Answer NOT_COORDINATOR to parked requests of groups that are no longer here."""
        for key in [k for k in self._parked_joins if belongs(k[0])]:
            self._answer_join(
                self._parked_joins.pop(key), join_error(key[1], ErrorCode.NOT_COORDINATOR)
            )
        for key in [k for k in self._parked_syncs if belongs(k[0])]:
            self._answer_sync(
                self._parked_syncs.pop(key), SyncGroupResult(error=ErrorCode.NOT_COORDINATOR)
            )

    # -- effects ---------------------------------------------------------------------------------

    def _apply(self, effects: Effects | Callable[[], None]) -> None:
        """Carry out the core's effects, in order; effects that arise while doing so (from a
        DelayedJoin's completion, say) wait their turn, so the purgatories are never entered
        from inside themselves."""
        self._effects.append(effects)
        if self._draining:
            return
        self._draining = True
        try:
            while self._effects:
                item = self._effects.popleft()
                if isinstance(item, Effects):
                    self._apply_one(item)
                else:
                    item()
        finally:
            self._draining = False

    def _apply_one(self, effects: Effects) -> None:
        group_id = effects.group_id
        for member_id, join in effects.join_answers.items():
            parked = self._parked_joins.pop((group_id, member_id), None)
            if parked is not None:
                self._answer_join(parked, join)
        for member_id, sync in effects.sync_answers.items():
            parked = self._parked_syncs.pop((group_id, member_id), None)
            if parked is not None:
                self._answer_sync(parked, sync)
        purgatories = self.purgatories
        for member_id in effects.cancelled_heartbeats:
            purgatories.cancel_heartbeat(group_id, member_id)
        for deadline in effects.heartbeats:
            purgatories.schedule_heartbeat(deadline)
        for snapshot in effects.group_writes:
            self._store_group(snapshot)
        if effects.join_deadline is not None:
            purgatories.watch_join(effects.join_deadline)
        if effects.check_join:
            purgatories.check_join(group_id)

    @handles(OperationsExpired)
    def _on_expired(self, event: OperationsExpired) -> None:
        trace = self.trace_context  # the Reaper's: what expired them
        self._apply(lambda: self.purgatories.expire(event.operation_ids, trace))

    # -- answers ---------------------------------------------------------------------------------

    def _answer_join(self, parked: _Parked, result: JoinGroupResult) -> None:
        self.reply(parked.request, join_response(result), trace=parked.trace)

    def _answer_sync(self, parked: _Parked, result: SyncGroupResult) -> None:
        self.reply(parked.request, sync_response(result), trace=parked.trace)

    # -- appends to __consumer_offsets -----------------------------------------------------------

    def _store_group(self, snapshot: GroupMetadataSnapshot) -> None:
        def appended(error: ErrorCode) -> None:
            self._apply(self.core.complete_group_write(snapshot, error, self.now))

        record = group_record(snapshot, self.now)
        self._append(self.core.partition_for(snapshot.group_id), [record], appended)

    def _append(
        self, partition: int, records: list[Record], done: Callable[[ErrorCode], None]
    ) -> None:
        """Append `records` to this broker's leader replica of an offsets partition, acks=-1;
        `done` gets the outcome (NONE once the ISR has them)."""
        self._append_batch(partition, build_batch(records, 0), lambda error, _at: done(error))

    def _append_batch(
        self,
        partition: int,
        batch: bytes,
        done: Callable[[ErrorCode, int], None],
        *,
        transactional_id: str | None = None,
    ) -> None:
        """Append one batch as `_append` does; `done` also gets the offset it was written at
        (-1 on failure). A transaction's batch (`transactional_id`) is appended as the
        coordinator's (Kafka's AppendOrigin.Coordinator: no sequence checks)."""
        correlation_id = next(self._ids)
        self._appends[correlation_id] = done
        self.send(
            self.replica_manager,
            ProduceRequest(
                reply_to=self.address,
                correlation_id=correlation_id,
                acks=-1,
                timeout_ms=OFFSETS_COMMIT_TIMEOUT_MS,
                partitions=(
                    ProducePartition(topic=OFFSETS_TOPIC, partition=partition, records=batch),
                ),
                from_coordinator=transactional_id is not None,
                transactional_id=transactional_id,
            ),
        )

    @handles(ProduceResponse, ErrorResponse)
    def _on_appended(self, response: Response) -> None:
        done = self._appends.pop(response.correlation_id, None)
        if done is None:
            return
        at = -1
        if isinstance(response, ProduceResponse) and response.partitions:
            error = response.partitions[0].error_code
            at = response.partitions[0].base_offset if error is ErrorCode.NONE else -1
        else:
            error = getattr(response, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
        self._apply(lambda: done(error, at))

    # -- lifecycle -------------------------------------------------------------------------------

    def on_stop(self) -> None:
        """The broker stops: every waiting request is answered (the clients find the new
        coordinator), appends in flight count as failed, the purgatories are emptied."""
        self.core.active = False
        for correlation_id in list(self._appends):
            done = self._appends.pop(correlation_id)
            self._apply(functools.partial(done, ErrorCode.NOT_LEADER_FOR_PARTITION, -1))
        self._answer_orphans(lambda _group: True)
        self.purgatories.shutdown()
        super().on_stop()

    def describe(self) -> dict[str, Any]:
        return {
            "groups": len(self.core.groups),
            "owned_partitions": sorted(self.core.owned_partitions),
            # groups with a transaction's offsets pending (their marker not yet written)
            "txn_pending_groups": len(self.core.txn_offsets.pending),
            **self.purgatories.describe(),
        }
