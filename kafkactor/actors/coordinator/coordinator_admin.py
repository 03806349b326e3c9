"""The group coordinator's actor shell, its administrative half: DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete, answered from the `GroupCoordinatorCore` (the tombstones of the
last two appended to `__consumer_offsets` before the answer)."""

from __future__ import annotations

from collections.abc import Callable

from kafkactor.actors.coordinator.coordinator_messages import described_group
from kafkactor.actors.coordinator.group_coordinator import GroupCoordinatorCore
from kafkactor.actors.coordinator.offsets_store import tombstone_records
from kafkactor.actors.coordinator.results import GroupTombstones
from kafkactor.actors.runtime import TracedActor, handles
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    DeletedGroup,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetDeletePartitionResult,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
)
from kafkactor.storage import Record

__all__ = ["GroupAdminHandlers"]


class GroupAdminHandlers(TracedActor):
    """The handlers of Kafka's group administration APIs in `GroupCoordinatorActor` (which
    derives from this class and owns the core and the appends to `__consumer_offsets`)."""

    core: GroupCoordinatorCore

    def _append(
        self, partition: int, records: list[Record], done: Callable[[ErrorCode], None]
    ) -> None:
        raise NotImplementedError  # the actor's: append to an offsets partition, acks=-1

    def _append_tombstones(self, tombstones: GroupTombstones, done: Callable[[], None]) -> None:
        """Append a group's tombstones; `done` once the append is over, whatever its outcome
        (Kafka answers without waiting for the replicas: a lost tombstone lets the offsets
        come back at the next load of the partition)."""
        partition = self.core.partition_for(tombstones.group_id)
        records = tombstone_records(tombstones, self.clock.now_ms())
        self._append(partition, records, lambda _error: done())

    @handles(DescribeGroupsRequest)
    def _on_describe(self, request: DescribeGroupsRequest) -> None:
        groups = tuple(
            described_group(group_id, *self.core.handle_describe_group(group_id))
            for group_id in request.group_ids
        )
        self.reply(request, DescribeGroupsResponse(groups=groups))

    @handles(ListGroupsRequest)
    def _on_list(self, request: ListGroupsRequest) -> None:
        error, overviews = self.core.handle_list_groups(request.states_filter)
        groups = tuple(
            ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, state=g.state)
            for g in overviews
        )
        self.reply(request, ListGroupsResponse(error_code=error, groups=groups))

    @handles(DeleteGroupsRequest)
    def _on_delete(self, request: DeleteGroupsRequest) -> None:
        outcome = self.core.handle_delete_groups(request.group_ids, self.clock.now_ms())
        errors = dict(outcome.errors)
        waiting = {t.group_id for t in outcome.tombstones}
        trace = self.trace_context  # the request's, to answer in after the appends

        def answer() -> None:
            groups = tuple(DeletedGroup(group_id=g, error_code=e) for g, e in errors.items())
            self.reply(request, DeleteGroupsResponse(groups=groups), trace=trace)

        for tombstones in outcome.tombstones:
            # Kafka answers a deleted group NONE whatever its tombstones' append did (the
            # group is gone from the coordinator; a failed append lets it come back at the
            # next load of its partition): answer once the append is done, either way
            def appended(group_id: str = tombstones.group_id) -> None:
                waiting.discard(group_id)
                if not waiting:
                    answer()

            self._append_tombstones(tombstones, appended)
        if not waiting:
            answer()

    @handles(OffsetDeleteRequest)
    def _on_delete_offsets(self, request: OffsetDeleteRequest) -> None:
        wanted = [TopicPartition(topic=p.topic, partition=p.partition) for p in request.partitions]
        outcome = self.core.handle_delete_offsets(request.group_id, wanted, self.clock.now_ms())
        partitions = tuple(
            OffsetDeletePartitionResult(topic=tp.topic, partition=tp.partition, error_code=e)
            for tp, e in outcome.partitions.items()
        )
        response = OffsetDeleteResponse(error_code=outcome.error, partitions=partitions)
        trace = self.trace_context  # the request's, to answer in after the append
        if outcome.tombstones is None:
            self.reply(request, response)
            return

        def appended() -> None:  # as DeleteGroups: once the append is over, whatever it did
            self.reply(request, response, trace=trace)

        self._append_tombstones(outcome.tombstones, appended)
