"""Reading a `__consumer_offsets` partition back when this broker becomes its leader (Kafka's
GroupMetadataManager.doLoadGroupsAndOffsets): from the log start to the log end, in
`offsets.load.buffer.size` reads, each batch replayed by `OffsetsReplay`."""

from __future__ import annotations

from collections.abc import Iterator

from kafkactor.actors.coordinator.offsets_store import OffsetsReplay
from kafkactor.storage import Log, StorageError, StoredRecord, iter_batches

__all__ = ["LOAD_BUFFER_BYTES", "load_partition"]

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size: one read while loading


def load_partition(log: Log | None) -> tuple[OffsetsReplay, str]:
    """Replay the partition's log (None: no replica here, nothing to load). A log that cannot
    be read stops the load: what was read is served, and the error (its repr; "" when none)
    is returned beside the replay."""
    replay = OffsetsReplay()
    error = ""
    try:
        for records in _read(log):
            replay.replay(records)
    except StorageError as failure:  # a log that cannot be read: serve what was read
        error = repr(failure)
    return replay, error


def _read(log: Log | None) -> Iterator[list[StoredRecord]]:
    if log is None:
        return
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, LOAD_BUFFER_BYTES).records
        if not data:
            return
        for batch in iter_batches(data):
            if batch.is_control_batch:
                offset = batch.next_offset
                continue
            yield [r for r in batch.records() if r.offset >= offset]
            offset = batch.next_offset
