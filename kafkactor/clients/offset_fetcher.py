"""Where a consumer starts reading a partition it has no position for: Kafka's `OffsetFetcher`
(ListOffsets for the log start or the high watermark, as `auto_offset_reset` says)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import wait

from kafkactor.actors.runtime import Client, addresses
from kafkactor.clients.errors import ClientError, ConsumerError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)

__all__ = ["list_offsets", "reset_positions"]

RESET_TIMESTAMPS = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP}


def list_offsets(
    client: Client,
    metadata: ClientMetadata,
    partitions: Sequence[TopicPartition],
    strategy: str,
    timeout_s: float,
    *,
    isolation_level: int = 0,
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, ClientError]]:
    """Kafka's `resetPositionsIfNeeded`: one ListOffsets per leader, for the log start offset
    (`strategy` "earliest") or the high watermark ("latest"; the last stable offset with
    `isolation_level` 1, read_committed), waited for `timeout_s` at most.

    Returns the offsets the leaders gave, and the partitions whose leader lookup failed, with
    why. A partition in neither (no leader yet, an error, a leader that moved or did not
    answer in time) is for the caller to try again later.
    """
    by_leader: dict[int, list[TopicPartition]] = {}
    failed: dict[TopicPartition, ClientError] = {}
    for tp in partitions:
        try:
            leader = metadata.leader(tp)
        except ClientError as error:
            failed[tp] = error
            continue
        if leader >= 0:
            by_leader.setdefault(leader, []).append(tp)
    timestamp = RESET_TIMESTAMPS[strategy]
    return _ask_leaders(client, by_leader, timestamp, timeout_s, isolation_level), failed


def reset_positions(
    client: Client,
    metadata: ClientMetadata,
    partitions: Sequence[TopicPartition],
    strategy: str,
    timeout_s: float,
    *,
    isolation_level: int = 0,
) -> tuple[dict[TopicPartition, int], list[ConsumerError]]:
    """Positions for `partitions` by `strategy` (`auto_offset_reset`), and the errors `poll`
    raises: each partition with "none" (Kafka's NoOffsetForPartitionException; OFFSET_OUT_OF_
    RANGE here), and UNKNOWN_TOPIC_OR_PARTITION. The rest are for a later try."""
    if strategy == "none":
        reason = "no committed offset, and auto_offset_reset is none: seek first"
        return {}, [ConsumerError(ErrorCode.OFFSET_OUT_OF_RANGE, tp, reason) for tp in partitions]
    found, failed = list_offsets(
        client, metadata, partitions, strategy, timeout_s, isolation_level=isolation_level
    )
    errors = [
        ConsumerError(error.error_code, tp, error.reason)
        for tp, error in failed.items()
        if error.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ]
    return found, errors


def _ask_leaders(
    client: Client,
    by_leader: Mapping[int, Sequence[TopicPartition]],
    timestamp: int,
    timeout_s: float,
    isolation_level: int,
) -> dict[TopicPartition, int]:
    futures = {
        leader: client.request(
            addresses.replica_manager(leader),
            ListOffsetsRequest(
                partitions=tuple(
                    ListOffsetsPartition(
                        topic=tp.topic, partition=tp.partition, timestamp=timestamp
                    )
                    for tp in partitions
                ),
                isolation_level=isolation_level,
            ),
        )
        for leader, partitions in by_leader.items()
    }
    wait(list(futures.values()), timeout=timeout_s)
    found: dict[TopicPartition, int] = {}
    for future in futures.values():
        if not future.done():
            client.abandon(future)
            continue
        response = future.result()
        if not isinstance(response, ListOffsetsResponse):
            continue  # the leader is unreachable or stopped
        for result in response.partitions:
            if result.error_code is ErrorCode.NONE and result.offset >= 0:
                found[TopicPartition.of(result)] = result.offset
    return found
