"""Reading a `__consumer_offsets` partition back when this broker becomes its leader (Kafka's
GroupMetadataManager.doLoadGroupsAndOffsets): from the log start to the log end, in
`offsets.load.buffer.size` reads, each batch replayed by `OffsetsReplay`."""

from __future__ import annotations

import struct
from collections.abc import Iterator

from kafkactor.actors.coordinator.offsets_store import OffsetsReplay
from kafkactor.storage import Log, RecordBatch, StorageError, StoredRecord, iter_batches

__all__ = ["LOAD_BUFFER_BYTES", "is_commit_marker", "load_partition"]

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # offsets.load.buffer.size: one read while loading
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_COMMIT = 1  # ControlRecordType.COMMIT (ABORT is 0)


def load_partition(log: Log | None) -> tuple[OffsetsReplay, str]:
    """Replay the partition's log (None: no replica here, nothing to load). A transaction's
    offset records stay pending until their producer's marker: a COMMIT makes them committed,
    an ABORT drops them, and those without a marker yet are pending at the end (their
    marker's TxnOffsetsCompleted completes them later). A log that cannot be read stops the
    load: what was read is served, and the error (its repr; "" when none) is returned beside
    the replay."""
    replay = OffsetsReplay()
    error = ""
    try:
        for batch, records in _read(log):
            if batch.is_control_batch:
                if records:  # Kafka reads the first record: any but COMMIT drops the offsets
                    replay.replay_marker(batch.producer_id, is_commit_marker(records[0].key))
            elif batch.is_transactional:
                replay.replay(records, producer_id=batch.producer_id)
            else:
                replay.replay(records)
    except (StorageError, OSError) as failure:  # cannot be read (EMFILE...): serve what was
        error = repr(failure)
    return replay, error


def is_commit_marker(key: bytes | None) -> bool:
    """Whether a control record's key is a COMMIT marker's (Kafka's ControlRecordType: an
    int16 version, then an int16 type, ABORT 0 or COMMIT 1)."""
    if key is None or len(key) < _CONTROL_KEY.size:
        return False
    _version, kind = _CONTROL_KEY.unpack_from(key)
    return bool(kind == _COMMIT)


def _read(log: Log | None) -> Iterator[tuple[RecordBatch, list[StoredRecord]]]:
    if log is None:
        return
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, LOAD_BUFFER_BYTES).records
        if not data:
            return
        for batch in iter_batches(data):
            yield batch, [r for r in batch.records() if r.offset >= offset]
            offset = batch.next_offset
