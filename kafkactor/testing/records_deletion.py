"""The in-process harness's DeleteRecords: Kafka's `AdminClient.deleteRecords`, sent to each
partition's leader broker as a DeleteRecordsRequest to its replica manager."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafkactor.clients.errors import ClientError
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
)

__all__ = ["DeleteRecordsError", "delete_records"]


class DeleteRecordsError(ClientError):
    """Some partitions' records could not be deleted: `errors` names each one's code (the
    first one's is the error's `error_code`); `low_watermarks` holds the partitions that
    succeeded."""

    def __init__(
        self, errors: dict[TopicPartition, ErrorCode], low_watermarks: dict[TopicPartition, int]
    ) -> None:
        first = next(iter(errors.values()))
        super().__init__(
            first,
            "; ".join(f"{tp}: {code.name}" for tp, code in errors.items()),
        )
        self.errors = errors
        self.low_watermarks = low_watermarks


def delete_records(
    offsets: Mapping[TopicPartition | tuple[str, int], int],
    *,
    leader: Callable[[TopicPartition], int],
    ask: Callable[[int, Any], Response],
    timeout_ms: int,
) -> dict[TopicPartition, int]:
    """Each partition's low watermark once its records below the offset are deleted on every
    live replica (-1 as an offset: below the high watermark). `leader(tp)` is the partition's
    leader broker (-1 when it has none or the topic is unknown), `ask(broker, request)` the
    replica manager's answer. Raises DeleteRecordsError when a partition failed."""
    by_leader: dict[int, list[DeleteRecordsPartition]] = {}
    errors: dict[TopicPartition, ErrorCode] = {}
    for key, offset in offsets.items():
        tp = (
            key
            if isinstance(key, TopicPartition)
            else TopicPartition(topic=key[0], partition=key[1])
        )
        broker = leader(tp)
        if broker < 0:
            errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        by_leader.setdefault(broker, []).append(
            DeleteRecordsPartition(topic=tp.topic, partition=tp.partition, offset=offset)
        )
    low_watermarks: dict[TopicPartition, int] = {}
    for broker, partitions in by_leader.items():
        response = ask(
            broker, DeleteRecordsRequest(partitions=tuple(partitions), timeout_ms=timeout_ms)
        )
        answered = response.partitions if isinstance(response, DeleteRecordsResponse) else ()
        codes = {TopicPartition.of(r): r for r in answered}
        for part in partitions:
            tp = TopicPartition.of(part)
            result = codes.get(tp)
            if result is None:
                errors[tp] = getattr(response, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
            elif result.error_code is not ErrorCode.NONE:
                errors[tp] = result.error_code
            else:
                low_watermarks[tp] = result.low_watermark
    if errors:
        raise DeleteRecordsError(errors, low_watermarks)
    return low_watermarks
