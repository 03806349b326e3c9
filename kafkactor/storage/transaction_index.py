"""The aborted-transaction index of a segment: Kafka's ``TransactionIndex`` (``.txnindex``).

Each entry is one aborted transaction whose ABORT marker is in the segment, 34 bytes, big-endian
(Kafka's ``AbortedTxn``)::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 |
    lastStableOffset int64

`lastOffset` is the marker's offset, `lastStableOffset` the partition's LSO when the marker was
written. Entries are in marker order. A read_committed fetch from offset F with data up to U
asks for the aborted transactions overlapping [F, U) (their records are dropped by the
consumer): it reads the segment holding F and the following ones, and may stop at the first
entry whose lastStableOffset reaches U, since no transaction still open then can have been
aborted in an earlier marker.

The file is created by the first entry; a segment without aborted transactions has none.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kafkactor.storage.errors import StorageError

__all__ = [
    "ABORTED_TXN_SIZE",
    "TXN_INDEX_SUFFIX",
    "AbortedTxn",
    "CorruptTransactionIndexError",
    "TransactionIndex",
    "collect_aborted_transactions",
]

TXN_INDEX_SUFFIX: Final = ".txnindex"
ABORTED_TXN_VERSION: Final = 0
_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE: Final = _ENTRY.size
assert ABORTED_TXN_SIZE == 34


class CorruptTransactionIndexError(StorageError):
    """A `.txnindex` whose size is not a whole number of entries, or whose entries are not
    Kafka's (Kafka's ``CorruptIndexException``): the segment's index is rebuilt."""


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of a `.txnindex` (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


class TransactionIndex:
    """Kafka's ``TransactionIndex`` for the segment at `base_offset`, at `path`.

    The entries are read from the file on first use and kept in memory (aborted transactions
    are few); appends go to the file at once. Not thread-safe: its segment's log serialises.
    """

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # None: not read yet
        self._fd: int | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        """The entries, in marker order (read from the file the first time)."""
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        if len(data) % ABORTED_TXN_SIZE:
            raise CorruptTransactionIndexError(
                f"{self.path}: size {len(data)} is not a multiple of {ABORTED_TXN_SIZE}"
            )
        entries = []
        for version, producer_id, first, last, stable in _ENTRY.iter_unpack(data):
            if version != ABORTED_TXN_VERSION:
                raise CorruptTransactionIndexError(
                    f"{self.path}: unexpected aborted transaction version {version}"
                )
            if last < self.base_offset:
                raise CorruptTransactionIndexError(
                    f"{self.path}: last offset of aborted transaction {last} is less than "
                    f"the segment's base offset {self.base_offset}"
                )
            entries.append(AbortedTxn(producer_id, first, last, stable))
        return entries

    def sanity_check(self) -> None:
        """Raise `CorruptTransactionIndexError` when the file is not a valid index."""
        self._entries = self._read()

    def append(self, entry: AbortedTxn) -> None:
        """Add an aborted transaction; its marker must follow the last one's."""
        entries = self.entries
        if entries and entry.last_offset <= entries[-1].last_offset:
            raise ValueError(
                "the last offset of appended transactions must increase: "
                f"{entry.last_offset} follows {entries[-1].last_offset}"
            )
        fd = self._open()
        data = entry.encode()
        if os.write(fd, data) != len(data):
            raise StorageError(f"short write to {self.path}")
        entries.append(entry)

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def reset(self, entries: list[AbortedTxn]) -> None:
        """Replace every entry (a recovered segment's index rebuilt); no entries, no file."""
        self.close()
        self.path.unlink(missing_ok=True)
        self._entries = []
        for entry in entries:
            self.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or past `offset` (Kafka's ``truncateTo``)."""
        entries = self.entries
        kept = [entry for entry in entries if entry.last_offset < offset]
        if len(kept) != len(entries):
            self.reset(kept)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether
        the search is complete (an entry's LSO reached the upper bound): Kafka's
        ``collectAbortedTxns``."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def dup_fd(self) -> int | None:
        """A duplicate of the open file's descriptor to fsync, None when nothing was written."""
        return None if self._fd is None else os.dup(self._fd)

    def rename_to(self, path: Path) -> None:
        """Rename the file (if any) to `path`; the open descriptor follows it."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, path)
        self.path = path

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={len(self.entries)})"


def collect_aborted_transactions(
    indexes: Iterable[TransactionIndex], start_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start_offset, upper_bound_offset) in `indexes`,
    those of the segment holding `start_offset` and of every later one, oldest first; the
    search stops at the first entry whose LSO reaches the upper bound (Kafka's
    ``Log.collectAbortedTransactions``)."""
    found: list[AbortedTxn] = []
    for index in indexes:
        entries, complete = index.collect(start_offset, upper_bound_offset)
        found.extend(entries)
        if complete:
            break
    return found
