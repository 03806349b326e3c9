"""A consumer's reading of one partition's fetched batches (Kafka's `Fetcher.CompletedFetch`):
the records at or past the position, never a control batch, and for read_committed never a
record of an aborted transaction."""

from __future__ import annotations

import heapq
import struct
from dataclasses import dataclass
from typing import Final

from kafkactor.common import TopicPartition
from kafkactor.messages.replication import FetchPartitionData
from kafkactor.storage import RecordBatch, iter_batches
from kafkactor.storage.records import Headers

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "ConsumerRecord", "FetchedRecords", "read_fetched"]

READ_UNCOMMITTED: Final = 0  # Kafka's IsolationLevel ids, as FetchRequest carries them
READ_COMMITTED: Final = 1

_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_ABORT: Final = 0  # ControlRecordType.ABORT (COMMIT is 1)


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """Kafka's `ConsumerRecord`: a record as a consumer sees it, with its offset."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    """What a fetch answer gave: the records to return, and the position after the last batch
    read (None when no whole batch came): past skipped control and aborted batches too, so
    that the next fetch does not ask for them again."""

    records: list[ConsumerRecord]
    next_offset: int | None


def _is_abort_marker(batch: RecordBatch) -> bool:
    """Whether a control batch holds an ABORT marker (Kafka's containsAbortMarker)."""
    if not batch.is_control_batch:
        return False
    records = batch.records()
    key = records[0].key if records else None
    if key is None or len(key) < _CONTROL_KEY.size:
        return False
    record_type: int = _CONTROL_KEY.unpack_from(key)[1]
    return record_type == _ABORT


def read_fetched(data: FetchPartitionData, position: int, isolation_level: int) -> FetchedRecords:
    """The records of `data` at or past `position`.

    Control batches (transaction markers) are never returned. For read_committed, Kafka's
    rule: walking the batches in order, the aborted transactions whose first offset is at or
    before a batch's last offset name producers whose transactional batches are dropped, until
    that producer's ABORT marker. `data.aborted_transactions` lists them (the leader answers
    read_committed fetches with the aborted transactions overlapping the range it returns).
    Raises `StorageError` for bytes that do not parse (the consumer's CORRUPT_MESSAGE).
    """
    read_committed = isolation_level == READ_COMMITTED
    aborted = [(a.first_offset, a.producer_id) for a in data.aborted_transactions]
    heapq.heapify(aborted)
    aborted_producers: set[int] = set()
    out: list[ConsumerRecord] = []
    next_offset: int | None = None
    for batch in iter_batches(data.records):  # records() checks the framing
        next_offset = batch.next_offset
        if read_committed and batch.producer_id >= 0:
            while aborted and aborted[0][0] <= batch.last_offset:
                aborted_producers.add(heapq.heappop(aborted)[1])
            if _is_abort_marker(batch):
                aborted_producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_producers:
                continue  # a record of an aborted transaction
        if batch.is_control_batch or batch.last_offset < position:
            continue
        for record in batch.records():
            if record.offset >= position:
                out.append(
                    ConsumerRecord(
                        topic=data.topic,
                        partition=data.partition,
                        offset=record.offset,
                        timestamp_ms=record.timestamp_ms,
                        key=record.key,
                        value=record.value,
                        headers=record.headers,
                    )
                )
    return FetchedRecords(out, next_offset)
