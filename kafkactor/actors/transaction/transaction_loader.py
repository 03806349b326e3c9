"""Reading a `__transaction_state` partition back when this broker becomes its leader (Kafka's
`TransactionStateManager.loadTransactionMetadata`), and the record a transition is written as."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from kafkactor.actors.transaction.results import TxnAppend
from kafkactor.actors.transaction.transaction_log import (
    TransactionLogError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from kafkactor.actors.transaction.transaction_metadata import TxnTransitMetadata
from kafkactor.storage import Log, Record, StorageError, iter_batches

__all__ = ["LOAD_BUFFER_BYTES", "TxnLogReplay", "load_partition", "transition_record"]

LOAD_BUFFER_BYTES = 5 * 1024 * 1024  # transaction.state.log.load.buffer.size


@dataclass(slots=True)
class TxnLogReplay:
    """What a load read: each record in log order as (transactional id, value or None for a
    tombstone), and how many records could not be read (skipped, as Kafka's loader would
    fail on them; see docs/transactions.md)."""

    records: list[tuple[str, TxnTransitMetadata | None]] = field(default_factory=list)
    corrupt: int = 0


def transition_record(append: TxnAppend, now_ms: int) -> Record:
    """The `__transaction_state` record of a transition (a null value for a tombstone)."""
    key = encode_key(append.transactional_id)
    return Record(key, None if append.tombstone else encode_value(append.transit), now_ms)


def load_partition(log: Log | None) -> tuple[TxnLogReplay, str]:
    """Replay the partition's log (None: no replica here). A log that cannot be read stops
    the load: what was read is served, and the error's repr is returned ("" when none)."""
    replay = TxnLogReplay()
    try:
        for key, value in _read(log):
            if key is None:
                replay.corrupt += 1
                continue
            try:
                replay.records.append((decode_key(key), decode_value(value)))
            except TransactionLogError:
                replay.corrupt += 1
    except (StorageError, OSError) as failure:  # a file it could not open or read (EMFILE)
        return replay, repr(failure)
    return replay, ""


def _read(log: Log | None) -> Iterator[tuple[bytes | None, bytes | None]]:
    if log is None:
        return
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, LOAD_BUFFER_BYTES).records
        if not data:
            return
        for batch in iter_batches(data):
            if not batch.is_control_batch:
                for record in batch.records():
                    if record.offset >= offset:
                        yield record.key, record.value
            offset = batch.next_offset
