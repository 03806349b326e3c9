"""The group coordinator's messages to and from its pure core's values (no logic of its own)."""

from __future__ import annotations

from collections.abc import Mapping

from kafkactor.actors.coordinator.group_metadata import GroupSummary, OffsetAndMetadata
from kafkactor.actors.coordinator.results import (
    JoinGroupResult,
    OffsetFetchPartition,
    SyncGroupResult,
)
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    DescribedGroup,
    DescribedMember,
    JoinGroupMemberInfo,
    JoinGroupResponse,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionResult,
    OffsetFetchResponse,
    SyncGroupResponse,
)


def committed_offsets(
    request: OffsetCommitRequest, now_ms: int
) -> dict[TopicPartition, OffsetAndMetadata]:
    """An OffsetCommit's offsets as the core takes them: no leader epoch below 0, no metadata
    as "", the broker's time when the request gave no commit timestamp."""
    return {
        TopicPartition(topic=p.topic, partition=p.partition): OffsetAndMetadata(
            offset=p.offset,
            leader_epoch=None if p.leader_epoch < 0 else p.leader_epoch,
            metadata=p.metadata or "",
            commit_timestamp_ms=now_ms if p.commit_timestamp_ms < 0 else p.commit_timestamp_ms,
        )
        for p in request.partitions
    }


def offset_fetch_response(
    error: ErrorCode, found: Mapping[TopicPartition, OffsetFetchPartition]
) -> OffsetFetchResponse:
    partitions = tuple(
        OffsetFetchPartitionResult(
            topic=tp.topic,
            partition=tp.partition,
            offset=o.offset,
            leader_epoch=-1 if o.leader_epoch is None else o.leader_epoch,
            metadata=o.metadata,
            error_code=o.error,
        )
        for tp, o in found.items()
    )
    return OffsetFetchResponse(error_code=error, partitions=partitions)


def described_group(group_id: str, error: ErrorCode, summary: GroupSummary) -> DescribedGroup:
    return DescribedGroup(
        error_code=error,
        group_id=group_id,
        state=summary.state,
        protocol_type=summary.protocol_type,
        protocol=summary.protocol,
        members=tuple(
            DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=m.metadata,
                assignment=m.assignment,
            )
            for m in summary.members
        ),
    )


def join_error(member_id: str, error: ErrorCode) -> JoinGroupResult:
    """The answer to a parked JoinGroup that is dropped: REBALANCE_IN_PROGRESS when the same
    member sent another (rejoin), NOT_COORDINATOR when its group left this broker."""
    return JoinGroupResult(member_id=member_id, error=error)


def join_response(result: JoinGroupResult) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        leader_id=result.leader_id,
        member_id=result.member_id,
        members=tuple(
            JoinGroupMemberInfo(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ),
    )


def sync_response(result: SyncGroupResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        error_code=result.error,
        assignment=result.assignment,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
    )


def commit_response(
    errors: Mapping[TopicPartition, ErrorCode],
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        partitions=tuple(
            OffsetCommitPartitionResult(topic=tp.topic, partition=tp.partition, error_code=e)
            for tp, e in errors.items()
        )
    )
