"""Kafka's leader epoch cache (KIP-101, KIP-279): which leader epoch wrote which offsets.

Every leader stamps its epoch into the batches it appends. A partition's replica remembers, for
each epoch it has seen, the first offset written in it: the entries ``(epoch, start offset)``,
epochs strictly increasing and start offsets increasing with them. An epoch covers its start
offset up to the next entry's start (the latest one up to the log end). A follower that lost
its place asks the leader where an epoch ends (OffsetsForLeaderEpoch) and truncates there,
instead of to its high watermark, which could lose acknowledged records or let the replicas'
logs diverge.

The entries live in ``leader-epoch-checkpoint`` in the partition's directory, in the format of
Kafka's ``LeaderEpochCheckpointFile``::

    0                      version (only 0 exists)
    2                      number of entries
    0 0                    epoch and start offset, separated by a single space
    3 120

with ``\\n`` line ends. Writes are atomic and durable like every checkpoint (see
``checkpoint.py``); reading is strict: a malformed file raises ``CheckpointError`` naming the
file and the 1-based line.
"""

from __future__ import annotations

import itertools
import pathlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from kafkactor.storage.checkpoint import (
    VERSION,
    CheckpointError,
    entry_lines,
    parse_number,
    write_atomically,
)

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
    "LeaderEpochCheckpoint",
]

UNDEFINED_EPOCH: Final = -1
"""No epoch: an empty cache's latest epoch, or the answer for an epoch not known."""
UNDEFINED_EPOCH_OFFSET: Final = -1
"""No offset: the end offset answered with ``UNDEFINED_EPOCH``."""

_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One entry of Kafka's leader epoch cache: leader epoch `epoch` wrote from `start_offset`."""

    epoch: int
    start_offset: int


def _check_order(entries: Sequence[EpochEntry]) -> None:
    for before, after in itertools.pairwise(entries):
        if after.epoch <= before.epoch:
            raise ValueError(f"epochs must strictly increase: {before!r} then {after!r}")
        if after.start_offset < before.start_offset:
            raise ValueError(f"start offsets must not decrease: {before!r} then {after!r}")


class LeaderEpochCheckpoint:
    """Kafka's ``LeaderEpochCheckpointFile``: the epoch entries in ``leader-epoch-checkpoint``.

    ``write`` replaces the whole file atomically and durably; ``read`` returns the entries of the
    last completed write. Not thread-safe: its ``LeaderEpochCache`` (under its log's lock)
    serialises the calls.

    The file's first write (it does not exist yet: a new log's first leader epoch) is atomic
    but not fsynced. There is no older file it could fall back to, so an OS crash that loses
    it leaves the file missing or damaged, and the log loader rebuilds a missing or damaged
    checkpoint from the epochs stamped in the batches, which is what the lost file said. It
    spares a new replica two fsyncs on its way to leading.
    """

    def __init__(self, path: pathlib.Path) -> None:
        self.path = pathlib.Path(path)

    def __repr__(self) -> str:
        return f"LeaderEpochCheckpoint({str(self.path)!r})"

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the file's content with `entries`, atomically and durably.

        Raises ``ValueError`` (before touching any file) for a negative or out-of-range value,
        or entries out of order (epochs must strictly increase, start offsets not decrease).
        """
        ordered = list(entries)
        for entry in ordered:
            if not 0 <= entry.epoch <= _INT32_MAX:
                raise ValueError(f"invalid leader epoch {entry.epoch} in {entry!r}")
            if not 0 <= entry.start_offset <= _INT64_MAX:
                raise ValueError(f"invalid start offset {entry.start_offset} in {entry!r}")
        _check_order(ordered)
        lines = [str(VERSION), str(len(ordered))]
        lines += [f"{entry.epoch} {entry.start_offset}" for entry in ordered]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        write_atomically(self.path, data, durable=self.path.exists())

    def read(self) -> list[EpochEntry]:
        """The entries in the file, oldest epoch first; ``[]`` when the file does not exist.

        Raises ``CheckpointError`` (naming the file and the line) when the file is malformed:
        a bad version or count, a line that is not ``epoch start_offset``, a value that is not a
        plain non-negative decimal in range, or entries out of order.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        entries: list[EpochEntry] = []
        for n, line in enumerate(entry_lines(self.path, data), start=3):
            fields = line.split(" ")
            if len(fields) != 2:
                raise CheckpointError(
                    self.path,
                    n,
                    f"expected 2 fields 'epoch start_offset' separated by a single space, "
                    f"found {len(fields)}: {line!r}",
                )
            epoch = parse_number(self.path, n, fields[0], "epoch", _INT32_MAX)
            start = parse_number(self.path, n, fields[1], "start offset", _INT64_MAX)
            if entries and epoch <= entries[-1].epoch:
                raise CheckpointError(
                    self.path,
                    n,
                    f"epoch {epoch} does not follow epoch {entries[-1].epoch} of line {n - 1}: "
                    "epochs must strictly increase",
                )
            if entries and start < entries[-1].start_offset:
                raise CheckpointError(
                    self.path,
                    n,
                    f"start offset {start} is below start offset {entries[-1].start_offset} of "
                    f"line {n - 1}: start offsets must not decrease",
                )
            entries.append(EpochEntry(epoch, start))
        return entries


class LeaderEpochCache:
    """Kafka's ``LeaderEpochFileCache``: a replica's leader epochs and where each one starts.

    The cache is given the entries read from its checkpoint (or rebuilt from the log) and writes
    the checkpoint whenever a change alters the entries; without a checkpoint it lives in memory
    only. Not thread-safe: the owning ``Log`` calls it under its lock.
    """

    def __init__(
        self,
        checkpoint: LeaderEpochCheckpoint | None = None,
        entries: Iterable[EpochEntry] = (),
    ) -> None:
        self.checkpoint = checkpoint
        self._entries = list(entries)
        for entry in self._entries:
            if entry.epoch < 0 or entry.start_offset < 0:
                raise ValueError(f"invalid {entry!r}: epoch and start offset must be >= 0")
        _check_order(self._entries)

    def __repr__(self) -> str:
        entries = ", ".join(f"({e.epoch}, {e.start_offset})" for e in self._entries)
        return f"LeaderEpochCache([{entries}])"

    def __len__(self) -> int:
        return len(self._entries)

    # -- state ---------------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """Every entry, oldest epoch first."""
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch known, or ``UNDEFINED_EPOCH`` when the cache is empty."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The oldest entry (None when empty)."""
        return self._entries[0] if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The newest entry (None when empty)."""
        return self._entries[-1] if self._entries else None

    # -- queries -------------------------------------------------------------------------------

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's answer to OffsetsForLeaderEpoch: ``(epoch, end offset)`` for `requested_epoch`.

        The end offset is the start of the first epoch after `requested_epoch` (the log end for
        the latest epoch), and the epoch the largest known one at or below `requested_epoch`; a
        request below every known epoch keeps its own epoch. ``(UNDEFINED_EPOCH,
        UNDEFINED_EPOCH_OFFSET)`` answers an undefined request, an empty cache, and an epoch
        newer than any known.
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return undefined
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        later = [entry for entry in self._entries if entry.epoch > requested_epoch]
        if not later:
            return undefined
        earlier = [entry for entry in self._entries if entry.epoch <= requested_epoch]
        epoch = earlier[-1].epoch if earlier else requested_epoch
        return epoch, later[0].start_offset

    # -- changes -------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that leader epoch `epoch` starts at `start_offset`; returns whether it did.

        An epoch at or below the latest one changes nothing (already known, or stale). A newer
        epoch first removes the entries starting at or past `start_offset` (they describe no
        records any more), then becomes the latest entry.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(
                f"cannot assign epoch {epoch} at offset {start_offset}: both must be >= 0"
            )
        if epoch <= self.latest_epoch:
            return False
        kept = [entry for entry in self._entries if entry.start_offset < start_offset]
        self._entries = [*kept, EpochEntry(epoch, start_offset)]
        self.flush()
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """The log was truncated to `end_offset`: drop the entries starting at or past it.

        A negative `end_offset` (undefined) changes nothing. Returns whether entries went.
        """
        if end_offset < 0:
            return False
        kept = [entry for entry in self._entries if entry.start_offset < end_offset]
        return self._replace(kept)

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log start moved up to `start_offset` (retention, or a follower's new start).

        Entries wholly below it go; the latest entry starting at or below it stays, moved to
        start at `start_offset`, since its epoch wrote the first offset the log still has.
        Returns whether the entries changed.
        """
        below = [entry for entry in self._entries if entry.start_offset <= start_offset]
        if not below:
            return False
        rest = self._entries[len(below) :]
        return self._replace([EpochEntry(below[-1].epoch, start_offset), *rest])

    def clear(self) -> bool:
        """Forget every entry (the log was emptied); returns whether there were any."""
        return self._replace([])

    def flush(self) -> None:
        """Write the entries to the checkpoint (nothing without one)."""
        if self.checkpoint is not None:
            self.checkpoint.write(self._entries)

    def _replace(self, entries: list[EpochEntry]) -> bool:
        if entries == self._entries:
            return False
        self._entries = entries
        self.flush()
        return True
