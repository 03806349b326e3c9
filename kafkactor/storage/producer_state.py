"""What a partition's log knows of its idempotent producers: Kafka's ``ProducerStateManager``.

KIP-98's idempotence without transactions. An idempotent producer (kafka-python 3 and
librdkafka are, by default) gets a producer id and epoch from InitProducerId, then numbers the
records it sends to each partition: a batch carries ``producerId``, ``producerEpoch`` and the
``baseSequence`` of its first record, and the sequence of its last record is the base plus the
batch's last offset delta, wrapping past 2**31 - 1 to 0. The leader of a partition keeps, per
producer, its epoch and the metadata of its last five batches, so that it can answer a retry of
one of them with the offsets it already has and refuse a batch that skips sequences.

The rules (`ProducerStateManager.validate_leader_append`) are Kafka's leader validation of 2.5
and later (``ProducerAppendInfo``, for data batches of an idempotent producer):

- a batch whose epoch and sequence range equal one of the producer's last five batches is a
  duplicate: the append is answered with that batch's offsets and nothing is written;
- an epoch older than the producer's is fenced (INVALID_PRODUCER_EPOCH);
- a newer epoch must start at sequence 0, the same epoch must continue at the last sequence
  + 1, with 2**31 - 1 followed by 0 (else OUT_OF_ORDER_SEQUENCE_NUMBER); so a retry of a batch
  older than the last five is out of order, as in Kafka;
- a producer the log has no state for may start at any sequence. Kafka 0.11 to 2.4 refused a
  sequence other than 0 there with UNKNOWN_PRODUCER_ID; 2.5 (KIP-360) accepts it, because a
  producer whose batches all went to retention (or whose state this broker never saw) cannot
  prove anything else, and refusing it made the producer fail. We follow 2.5 and later, so
  `UnknownProducerIdError` is never raised here.

Batches without a producer id (-1) are ignored, and so are control batches: transactions are
not built, so no marker ever needs to move a producer's epoch. Followers do not validate: they
take the state from the batches they append (`update_from_batches`), so a follower that becomes
leader dedupes a retry of a batch its old leader wrote.

Kafka snapshots this state to ``<offset>.snapshot`` files and reloads from the latest one. We
keep it in memory only: opening a log rebuilds it from every batch header on disk
(`read_producer_batches`, reading headers, never records), and a truncation that removes a
producer's batch rebuilds it from the log that remains. A producer whose batches all went to
retention therefore keeps its state until the log is reopened or rebuilt, where Kafka keeps it
until the producer id expires (``transactional.id.expiration.ms``); neither expiry nor snapshots
are built.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from kafkactor.storage.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from kafkactor.storage.records import _CONTROL_MASK, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD

__all__ = [
    "BATCHES_TO_RETAIN",
    "BatchMetadata",
    "DuplicateBatch",
    "ProducerBatch",
    "ProducerStateEntry",
    "ProducerStateManager",
    "StoredProducerBatch",
    "decrement_sequence",
    "increment_sequence",
    "read_producer_batches",
]

BATCHES_TO_RETAIN: Final = 5
"""Batches remembered per producer (Kafka's ``NumBatchesToRetain``): a producer has at most five
requests in flight per partition, so a retry is always of one of its last five batches."""

_SEQUENCE_SPAN: Final = 2**31  # sequences are non-negative int32s: 2**31 - 1 is followed by 0
_INT32_MAX: Final = 2**31 - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment`, wrapping past 2**31 - 1 to 0 (Kafka's incrementSequence)."""
    return (sequence + increment) % _SEQUENCE_SPAN


def decrement_sequence(sequence: int, decrement: int) -> int:
    """`sequence - decrement`, wrapping below 0 to 2**31 - 1 (Kafka's decrementSequence)."""
    return (sequence - decrement) % _SEQUENCE_SPAN


def _in_sequence(last: int, following: int) -> bool:
    return following == last + 1 or (following == 0 and last == _INT32_MAX)


class ProducerBatch(Protocol):
    """The header fields of a batch that producer state reads (a `RecordBatch` has them all)."""

    @property
    def position(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def is_control_batch(self) -> bool: ...


def _tracked(batch: ProducerBatch) -> bool:
    """Whether the batch counts for producer state: a data batch with a producer id."""
    return batch.producer_id >= 0 and not batch.is_control_batch


def _last_sequence(batch: ProducerBatch) -> int:
    return increment_sequence(batch.base_sequence, batch.last_offset_delta)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer, as Kafka's ``BatchMetadata`` remembers it."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """A leader append that retries a batch already in the log: the offsets it got then.

    Kafka answers such an append as a success with these offsets and writes nothing.
    """

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


class ProducerStateEntry:
    """Kafka's ``ProducerStateEntry``: one producer's epoch and its last five batches.

    The batches are oldest first and all of the current epoch: a new epoch forgets them.
    """

    __slots__ = ("batches", "producer_epoch", "producer_id")

    def __init__(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_TO_RETAIN)

    @property
    def last_sequence(self) -> int:
        """The sequence of the producer's last record (-1 without batches)."""
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_offset(self) -> int:
        """The offset of the producer's last record (-1 without batches)."""
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, producer_epoch: int, batch: BatchMetadata) -> None:
        """Remember an appended batch; one of another epoch starts the entry over."""
        if producer_epoch != self.producer_epoch:
            self.producer_epoch = producer_epoch
            self.batches.clear()
        self.batches.append(batch)  # the deque drops the oldest past five

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        """The remembered batch of the same epoch and exactly the same sequence range."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        first, last = batch.base_sequence, _last_sequence(batch)
        for metadata in self.batches:
            if metadata.first_sequence == first and metadata.last_sequence == last:
                return metadata
        return None

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, "
            f"epoch={self.producer_epoch}, batches={list(self.batches)})"
        )


class ProducerStateManager:
    """Kafka's ``ProducerStateManager`` for one partition log: its producers' state.

    Pure and not thread-safe: the `Log` calls it under its lock. A leader calls
    `validate_leader_append` (or `check_leader_append` for one batch) before it assigns
    offsets, then `update` for each batch it wrote; a follower calls `update_from_batches`.
    See the module docstring for the rules.
    """

    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}

    @property
    def producers(self) -> dict[int, ProducerStateEntry]:
        """The entries by producer id (for inspection; do not mutate)."""
        return self._producers

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    @property
    def last_offset(self) -> int:
        """The largest offset of any producer's last batch (-1 without producers)."""
        return max((entry.last_offset for entry in self._producers.values()), default=-1)

    # -- leader validation ---------------------------------------------------------------------

    def check_leader_append(self, batch: ProducerBatch) -> DuplicateBatch | None:
        """Validate one batch a leader is about to append; see `validate_leader_append`."""
        return self.validate_leader_append((batch,))

    def validate_leader_append(self, batches: Iterable[ProducerBatch]) -> DuplicateBatch | None:
        """Validate the batches of one leader append, before offsets are assigned.

        Returns the first batch that retries one already in the log (the append is then
        answered with its offsets and nothing is written), else None. Raises
        `InvalidProducerEpochError` or `OutOfOrderSequenceError` for a batch that breaks the
        rules, and `CorruptRecordError` for a producer id with a negative base sequence (Kafka's
        LogValidator refuses that). As in Kafka's ``analyzeAndValidateProducerState``,
        duplicates are looked for among the batches already in the log, and a batch follows the
        ones before it in the same append. Nothing changes until `update`.
        """
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence)
        for batch in batches:
            if not _tracked(batch):
                continue
            producer_id = batch.producer_id
            if batch.base_sequence < 0:
                raise CorruptRecordError(
                    f"invalid sequence number {batch.base_sequence} in a batch of producer "
                    f"{producer_id}",
                    batch.position,
                )
            entry = self._producers.get(producer_id)
            if entry is not None:
                original = entry.find_duplicate(batch)
                if original is not None:
                    return DuplicateBatch(
                        producer_id=producer_id,
                        producer_epoch=entry.producer_epoch,
                        first_sequence=original.first_sequence,
                        last_sequence=original.last_sequence,
                        first_offset=original.first_offset,
                        last_offset=original.last_offset,
                        max_timestamp=original.max_timestamp,
                    )
            known = pending.get(producer_id)
            if known is None and entry is not None:
                known = (entry.producer_epoch, entry.last_sequence)
            if known is not None:  # no state at all: any sequence is accepted (KIP-360)
                _check_sequence(producer_id, batch, *known)
            pending[producer_id] = (batch.producer_epoch, _last_sequence(batch))
        return None

    # -- updates -------------------------------------------------------------------------------

    def update(
        self,
        batch: ProducerBatch,
        first_offset: int,
        last_offset: int,
        max_timestamp: int | None = None,
    ) -> None:
        """Record a batch written at `first_offset`..`last_offset` (leader or follower), with
        `max_timestamp` when it was written with another one than `batch` holds (a
        LogAppendTime leader's append time).

        A batch without a producer id, or a control batch, changes nothing. No validation: a
        follower takes what its leader wrote, an older epoch included (Kafka only warns).
        """
        if not _tracked(batch):
            return
        producer_id = batch.producer_id
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(
                producer_id, batch.producer_epoch
            )
        entry.add_batch(
            batch.producer_epoch,
            BatchMetadata(
                first_sequence=batch.base_sequence,
                last_sequence=_last_sequence(batch),
                first_offset=first_offset,
                last_offset=last_offset,
                max_timestamp=batch.max_timestamp if max_timestamp is None else max_timestamp,
            ),
        )

    def update_from_batches(self, batches: Iterable[ProducerBatch]) -> None:
        """Record batches at the offsets they carry (a follower append, a rebuild)."""
        for batch in batches:
            if _tracked(batch):
                self.update(batch, batch.base_offset, batch.last_offset)

    def rebuild(self, batches: Iterable[ProducerBatch]) -> None:
        """Forget everything and take the state from a log's batches, oldest first."""
        self._producers.clear()
        self.update_from_batches(batches)

    def truncate_to(self, offset: int, log_batches: Callable[[], Iterable[ProducerBatch]]) -> bool:
        """The log was cut at `offset`: forget the batches at or past it.

        When no producer's last batch reaches `offset` nothing was lost. Otherwise the state is
        rebuilt from `log_batches()`, the batches the log still holds: an entry only remembers
        five batches of one epoch, so what a producer looked like before the removed ones is in
        the log, not in the entry. Returns whether the state was rebuilt.
        """
        if self.last_offset < offset:
            return False
        self.rebuild(log_batches())
        return True

    def clear(self) -> None:
        """Forget every producer (the log was emptied: Kafka's truncateFullyAndStartAt)."""
        self._producers.clear()

    def __repr__(self) -> str:
        return f"ProducerStateManager(producers={len(self._producers)})"


def _check_sequence(
    producer_id: int, batch: ProducerBatch, current_epoch: int, last_sequence: int
) -> None:
    """Kafka's checkProducerEpoch and checkSequence for a known producer."""
    epoch, first = batch.producer_epoch, batch.base_sequence
    if epoch < current_epoch:
        raise InvalidProducerEpochError(
            f"producer {producer_id} sent epoch {epoch}, older than its epoch {current_epoch}",
            producer_id,
        )
    if epoch != current_epoch:
        if first != 0:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} starts epoch {epoch} at sequence {first}, not 0 "
                f"(its epoch was {current_epoch})",
                producer_id,
            )
    elif not _in_sequence(last_sequence, first):
        raise OutOfOrderSequenceError(
            f"producer {producer_id} (epoch {epoch}) sent sequence {first} after "
            f"{last_sequence}: expected {increment_sequence(last_sequence, 1)}",
            producer_id,
        )


# -- batch headers from a segment file ---------------------------------------------------------

# baseOffset, batchLength, (partitionLeaderEpoch, magic, crc skipped), attributes,
# lastOffsetDelta, (baseTimestamp skipped), maxTimestamp, producerId, producerEpoch,
# baseSequence, (recordCount skipped): the whole 61-byte header
_HEADER = struct.Struct(">qi4x1x4xhi8xqqhi4x")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_SCAN_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class StoredProducerBatch:
    """The producer fields of one batch header read from a segment file."""

    position: int
    base_offset: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_control_batch: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def read_producer_batches(path: Path, size: int) -> Iterator[StoredProducerBatch]:
    """The data batches with a producer id among the first `size` bytes of a segment file.

    Reads headers only, in 1 MiB chunks; the file was recovered (or written by this process),
    so the batches are trusted. Stops at a partial batch.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        position = 0
        chunk = b""
        chunk_start = 0
        while position + _HEADER.size <= size:
            at = position - chunk_start
            if at + _HEADER.size > len(chunk):
                chunk = os.pread(fd, min(_SCAN_CHUNK, size - position), position)
                chunk_start, at = position, 0
                if len(chunk) < _HEADER.size:
                    return
            base, length, attributes, delta, max_ts, pid, epoch, sequence = _HEADER.unpack_from(
                chunk, at
            )
            batch_size = length + LOG_OVERHEAD
            if batch_size < _HEADER.size or position + batch_size > size:
                return
            if pid >= 0 and not attributes & _CONTROL_MASK:
                yield StoredProducerBatch(position, base, delta, max_ts, pid, epoch, sequence)
            position += batch_size
    finally:
        os.close(fd)
