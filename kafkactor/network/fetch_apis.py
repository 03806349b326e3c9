"""KafkaApis' read APIs: Fetch (a consumer's or a follower's) and ListOffsets, translated to and
from the replica manager's messages, with their isolation level (KIP-98): a read_committed
fetch reads up to the last stable offset and is told the aborted transactions in what it
reads; a read_committed ListOffsets answers LATEST with the last stable offset."""

from __future__ import annotations

from typing import Any, Final

from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.offsets import (
    CONSUMER_REPLICA_ID,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafkactor.messages.replication import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.partition_answers import (
    FETCH,
    LIST_OFFSETS,
    per_partition,
    storage_error_for,
)
from kafkactor.network.steps import NO_THROTTLE, Answer, Ask, Step, millis

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "fetch", "list_offsets"]

READ_UNCOMMITTED: Final = 0
READ_COMMITTED: Final = 1


def _isolation_level(body: Any) -> int | None:
    """The request's isolation level (Fetch v4+, ListOffsets v2+; 0 before), None when it is
    neither of Kafka's two (IsolationLevel.forId refuses it)."""
    level = int(getattr(body, "isolation_level", READ_UNCOMMITTED))
    return level if level in (READ_UNCOMMITTED, READ_COMMITTED) else None


# -- Fetch ----------------------------------------------------------------------------------------


def fetch(replica_manager: str, version: int, body: Any) -> Step:
    # a follower's fetch names its broker id (replica id >= 0): it reads up to the log end
    # and moves the leader's view of its log end and the ISR, as one in this process does
    replica_id = int(body.replica_id)
    isolation = _isolation_level(body)
    if replica_id < CONSUMER_REPLICA_ID or isolation is None:
        refused = ErrorResponse(error_code=ErrorCode.INVALID_REQUEST)
        return _fetch_answer(version, body, refused, READ_UNCOMMITTED)
    if replica_id >= 0:  # a follower reads everything, whatever it says
        isolation = READ_UNCOMMITTED
    request = FetchRequest(
        replica_id=replica_id,
        max_wait_ms=millis(body.max_wait),
        min_bytes=int(body.min_bytes),
        max_bytes=max(0, int(body.max_bytes)),  # every served version (4+) has it
        isolation_level=isolation,
        partitions=tuple(
            FetchPartition(
                topic=topic.topic,
                partition=int(p.partition),
                fetch_offset=int(p.fetch_offset),
                max_bytes=int(p.partition_max_bytes),
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                log_start_offset=int(getattr(p, "log_start_offset", -1)),  # a follower's
            )
            for topic in body.topics
            for p in topic.partitions
        ),
    )
    return Ask(replica_manager, request, lambda r: _fetch_answer(version, body, r, isolation))


def _fetch_answer(version: int, body: Any, response: Response, isolation: int) -> Step:
    schema = response_type(ApiKey.FETCH, version)
    aborted_type = nested(schema, "AbortedTransaction")

    def entry(p: Any, r: FetchPartitionData | None, fallback: ErrorCode) -> dict[str, Any]:
        if r is None:
            r = FetchPartitionData(error_code=fallback)
        # Kafka's FetchResponse: null aborted transactions for read_uncommitted, the list
        # (maybe empty) for read_committed
        aborted = (
            tuple(
                build(aborted_type, producer_id=a.producer_id, first_offset=a.first_offset)
                for a in r.aborted_transactions
            )
            if isolation == READ_COMMITTED
            else None
        )
        # an answer without a last stable offset (-1) had none to give: its high watermark
        # stands in (they are equal while no transaction is open on the partition)
        stable = r.last_stable_offset if r.last_stable_offset >= 0 else r.high_watermark
        return {
            "partition_index": p.partition,
            "error_code": storage_error_for("fetch", version, r.error_code),
            "high_watermark": r.high_watermark,
            "last_stable_offset": stable,
            "log_start_offset": r.log_start_offset,
            "aborted_transactions": aborted,
            "preferred_read_replica": -1,
            "records": r.records,  # empty, never null
        }

    topics = per_partition(schema, body, FETCH, response, answered_type=FetchResponse, entry=entry)
    return Answer(
        build(
            schema,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.NONE,
            session_id=0,
            responses=topics,
        )
    )


# -- ListOffsets ----------------------------------------------------------------------------------


def list_offsets(replica_manager: str, version: int, body: Any) -> Step:
    schema = response_type(ApiKey.LIST_OFFSETS, version)
    isolation = _isolation_level(body)

    def answered(response: Response) -> Step:
        topics = per_partition(
            schema,
            body,
            LIST_OFFSETS,
            response,
            answered_type=ListOffsetsResponse,
            entry=lambda p, r, fallback: {
                "partition_index": p.partition_index,
                "error_code": r.error_code if r is not None else fallback,
                "timestamp": r.timestamp if r is not None else -1,
                "offset": r.offset if r is not None else -1,
                "leader_epoch": r.leader_epoch if r is not None else -1,
            },
        )
        return Answer(build(schema, throttle_time=NO_THROTTLE, topics=topics))

    if isolation is None:
        return answered(ErrorResponse(error_code=ErrorCode.INVALID_REQUEST))
    request = ListOffsetsRequest(
        isolation_level=isolation,
        partitions=tuple(
            ListOffsetsPartition(
                topic=topic.name,
                partition=int(p.partition_index),
                timestamp=int(p.timestamp),
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
            )
            for topic in body.topics
            for p in topic.partitions
        ),
    )
    return Ask(replica_manager, request, answered)
