"""KafkaApis' offset APIs: OffsetCommit (its partitions checked against the metadata cache first)
and OffsetFetch, translated to and from the group coordinator's messages
(`kafkactor.messages.group`), which the broker's group coordinator actor answers."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.group import (
    NO_GENERATION,
    NO_MEMBER_ID,
    OffsetCommitPartition,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionRequest,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import (
    Ask,
    Step,
    ask_expecting,
    error_of,
    group_instance_id,
    respond,
)

__all__ = ["OffsetApis"]


class OffsetApis:
    """The offset APIs of Kafka's `KafkaApis` for one broker (`KafkaApis` dispatches them here).

    OffsetCommit first asks the replica manager's metadata cache which of its partitions
    exist, as Kafka's handleOffsetCommitRequest does; OffsetCommit and OffsetFetch are then
    asked of the broker's group coordinator actor, whose answer (or failure) becomes the
    response of the request's version.
    """

    def __init__(self, broker_id: int) -> None:
        self.replica_manager = addresses.replica_manager(broker_id)
        self.coordinator = addresses.group_coordinator(broker_id)

    def offset_commit(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.OFFSET_COMMIT, header.api_version)
        topic_type = nested(schema, "OffsetCommitResponseTopic")
        partition_type = nested(schema, "OffsetCommitResponsePartition")
        # v0 has no generation nor member: a commit outside group management (generation -1,
        # member ""), as Kafka's v0 was. v1 alone has a commit timestamp per partition (-1: the
        # broker's time). v2-v4's retention_time is ignored (offsets do not expire here); from
        # v6 each offset carries the leader epoch it was read in, from v7 a static member's
        # group instance id
        request = OffsetCommitRequest(
            group_id=body.group_id,
            generation_id=int(getattr(body, "generation_id_or_member_epoch", NO_GENERATION)),
            member_id=getattr(body, "member_id", NO_MEMBER_ID),
            group_instance_id=group_instance_id(body),
            partitions=tuple(
                OffsetCommitPartition(
                    topic=topic.name,
                    partition=int(p.partition_index),
                    offset=int(p.committed_offset),
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=p.committed_metadata,
                    commit_timestamp_ms=int(getattr(p, "commit_timestamp", -1)),
                )
                for topic in body.topics
                for p in topic.partitions
            ),
        )

        unknown: tuple[OffsetCommitPartitionResult, ...] = ()

        def committed(response: OffsetCommitResponse | None, code: ErrorCode) -> Step:
            results = (*(response.partitions if response is not None else ()), *unknown)
            codes = {(p.topic, p.partition): p.error_code for p in results}

            def partition(topic: str, p: Any) -> Any:
                index = int(p.partition_index)
                error = codes.get((topic, index), code)
                return build(partition_type, partition_index=index, error_code=error)

            topics = tuple(
                build(
                    topic_type,
                    name=t.name,
                    partitions=tuple(partition(t.name, p) for p in t.partitions),
                )
                for t in body.topics
            )
            return respond(schema, topics=topics)

        topics = tuple(dict.fromkeys(p.topic for p in request.partitions))
        if not topics:
            return ask_expecting(self.coordinator, request, OffsetCommitResponse, committed)

        def checked(response: Response) -> Step:
            # Kafka's handleOffsetCommitRequest: a partition its metadata cache does not know
            # (no such topic, or an index beyond the topic's partitions) answers
            # UNKNOWN_TOPIC_OR_PARTITION; the others go to the coordinator, which is not asked
            # at all when none is left
            nonlocal unknown
            if not isinstance(response, MetadataResponse):
                return committed(None, error_of(response))
            known = {
                (t.topic, p.partition)
                for t in response.topics
                if t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                for p in t.partitions
            }
            kept = tuple(p for p in request.partitions if (p.topic, p.partition) in known)
            unknown = tuple(
                OffsetCommitPartitionResult(
                    topic=p.topic,
                    partition=p.partition,
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                )
                for p in request.partitions
                if (p.topic, p.partition) not in known
            )
            if not kept:
                return committed(OffsetCommitResponse(), ErrorCode.UNKNOWN_SERVER_ERROR)
            return ask_expecting(
                self.coordinator,
                dataclasses.replace(request, partitions=kept),
                OffsetCommitResponse,
                committed,
            )

        return Ask(self.replica_manager, MetadataRequest(topics=topics), checked)

    def offset_fetch(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        schema = response_type(ApiKey.OFFSET_FETCH, version)
        every = body.topics is None  # null from v2: every partition the group committed
        wanted = tuple(
            OffsetFetchPartitionRequest(topic=topic.name, partition=int(index))
            for topic in body.topics or ()
            for index in topic.partition_indexes
        )
        # v0 read ZooKeeper in Kafka 0.8.2; here it reads the coordinator, as v1 does.
        # v7's require_stable (KIP-447): a partition with a transaction's offset still waiting
        # for its marker answers UNSTABLE_OFFSET_COMMIT (the coordinator decides)
        request = OffsetFetchRequest(
            group_id=body.group_id,
            partitions=wanted,
            all_partitions=every,
            require_stable=bool(getattr(body, "require_stable", False)),
        )

        def fetched(response: OffsetFetchResponse | None, code: ErrorCode) -> Step:
            r = response if response is not None else OffsetFetchResponse(error_code=code)
            results: Iterable[OffsetFetchPartitionResult]
            if r.error_code is not ErrorCode.NONE:
                # a group-level error: v2+ says it once; v0-v1 have no field for it, so every
                # partition asked for carries it (Kafka's error response for those versions)
                results = () if version >= 2 else (_unfetched(w, r.error_code) for w in wanted)
            elif every:
                results = r.partitions
            else:
                found = {(p.topic, p.partition): p for p in r.partitions}
                results = (found.get((w.topic, w.partition), _unfetched(w, code)) for w in wanted)
            return respond(schema, error_code=r.error_code, topics=_fetched_topics(schema, results))

        return ask_expecting(self.coordinator, request, OffsetFetchResponse, fetched)


# -- helpers -------------------------------------------------------------------------------------


def _unfetched(wanted: OffsetFetchPartitionRequest, code: ErrorCode) -> OffsetFetchPartitionResult:
    return OffsetFetchPartitionResult(
        topic=wanted.topic, partition=wanted.partition, error_code=code
    )


def _fetched_topics(
    schema: type[Any], results: Iterable[OffsetFetchPartitionResult]
) -> tuple[Any, ...]:
    """OffsetFetch's topics: the results grouped by topic, in the order they come."""
    topic_type = nested(schema, "OffsetFetchResponseTopic")
    partition_type = nested(schema, "OffsetFetchResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for p in results:
        by_topic.setdefault(p.topic, []).append(
            build(
                partition_type,
                partition_index=p.partition,
                committed_offset=p.offset,
                committed_leader_epoch=p.leader_epoch,  # v5+
                metadata=p.metadata,
                error_code=p.error_code,
            )
        )
    return tuple(build(topic_type, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
