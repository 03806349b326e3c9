"""Kafka's offset index: a sparse map from offsets to byte positions in a segment's ``.log`` file.

The file format is Kafka's, byte for byte: a sequence of 8-byte big-endian entries, no header::

    offset  size  field
         0     4  relative offset   absolute offset minus the segment's base offset (0 .. 2**31-1)
         4     4  position          byte position of that offset's batch in the .log file

Relative offsets strictly increase and positions never decrease from one entry to the next; no
field is negative. Everything else (preallocation to ``max_index_size``, what a crash leaves in
the file and how it is read, the sanity check and ``CorruptIndexError``, truncation that zeroes
the removed slots, trimming on roll and close) is ``AbstractIndex``'s, in
``kafkactor.storage.abstract_index``, which the time index shares. The errors are re-exported
here.
"""

from __future__ import annotations

import bisect
import operator
import struct
import sys
from array import array
from typing import ClassVar, Final

from kafkactor.storage.abstract_index import (
    INT32_MAX,
    AbstractIndex,
    CorruptIndexError,
    IndexFullError,
    IndexOffsetError,
    IndexOffsetOverflowError,
)

__all__ = [
    "ENTRY_SIZE",
    "AbstractIndex",
    "CorruptIndexError",
    "IndexFullError",
    "IndexOffsetError",
    "IndexOffsetOverflowError",
    "OffsetIndex",
]

ENTRY_SIZE: Final = 8
"""Bytes per offset index entry: a 4-byte relative offset and a 4-byte position."""

_ENTRY: Final = struct.Struct(">ii")
_BIG_ENDIAN_HOST: Final = sys.byteorder == "big"
if array("i").itemsize != 4:  # pragma: no cover - every platform CPython supports has 4-byte C ints
    raise ImportError("kafkactor.storage.index needs 4-byte C ints for array('i')")


class OffsetIndex(AbstractIndex):
    """Kafka's ``OffsetIndex``: one segment's sparse index of offsets to ``.log`` positions.

    ``lookup(target)`` returns the entry with the largest offset at or below ``target`` (a binary
    search over the in-memory array of relative offsets): the position from which a read scans
    forward to find ``target``. Entries are appended by the owning segment, one per
    ``index_interval_bytes`` of log. Not thread-safe: the owning ``Log`` serialises access.

    ``max_entries`` is the configured capacity (``max_index_size // 8``); the file's length is
    only preallocation, so ``resize`` and ``trim_to_valid_size`` never change the capacity (in
    Kafka the capacity follows the mapped length instead, and a trimmed index is full).
    """

    ENTRY_SIZE: ClassVar[int] = ENTRY_SIZE

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or ``base_offset`` when the index is empty."""
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    # ----------------------------------------------------------------------------------------
    # Reads

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry whose offset is <= ``target_offset``.

        ``(base_offset, 0)`` when there is no such entry: an empty index, or a target before the
        first entry. O(log n).
        """
        slot = bisect.bisect_right(self._rel, target_offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[slot], self._values[slot]

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry (0-based) as ``(absolute offset, position)``."""
        self._check_slot(n)
        return self.base_offset + self._rel[n], self._values[n]

    # ----------------------------------------------------------------------------------------
    # Writes

    def append(self, offset: int, position: int) -> None:
        """Add the entry ``offset -> position``; O(1), one ``os.pwrite`` of 8 bytes.

        Raises ``IndexFullError`` when full, ``IndexOffsetError`` when the offset is not above the
        last entry's (or below the base offset) or the position is out of range or below the
        last entry's, and ``IndexOffsetOverflowError`` when the offset is too far above the base.
        """
        self._require_open()
        n = len(self._rel)
        if n >= self.max_entries:
            raise IndexFullError(
                f"cannot append offset {offset} to the full index {self.path} "
                f"({n} of {self.max_entries} entries)"
            )
        if n and offset <= self.base_offset + self._rel[-1]:
            raise IndexOffsetError(
                f"cannot append offset {offset} to index {self.path}: it is not above the last "
                f"offset {self.base_offset + self._rel[-1]}"
            )
        relative = self._relative(offset)
        if not 0 <= position <= INT32_MAX:
            raise IndexOffsetError(
                f"cannot append position {position} to index {self.path}: "
                f"positions must be in 0..{INT32_MAX}"
            )
        if n and position < self._values[-1]:
            raise IndexOffsetError(
                f"cannot append position {position} (offset {offset}) to index {self.path}: it "
                f"is below the last entry's position {self._values[-1]}"
            )
        self._write_entry(_ENTRY.pack(relative, position), relative, position)

    # ----------------------------------------------------------------------------------------
    # Entry layout

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        words = array("i", data)
        if not _BIG_ENDIAN_HOST:
            words.byteswap()
        return words[0::2], words[1::2]

    def _valid_prefix(self, rel: array[int], values: array[int]) -> tuple[int, str | None]:
        if _is_ordered(rel, values):
            return len(rel), None
        return _first_invalid_slot(rel, values, self.base_offset)


def _is_ordered(rel: array[int], pos: array[int]) -> bool:
    """Fast check (C-level iteration) that the entries keep every rule."""
    if not rel:
        return True
    return (
        min(rel) >= 0
        and min(pos) >= 0
        and all(map(operator.lt, rel, rel[1:]))
        and all(map(operator.le, pos, pos[1:]))
    )


def _first_invalid_slot(rel: array[int], pos: array[int], base_offset: int) -> tuple[int, str]:
    """The number of leading valid entries and what is wrong with the slot after them."""
    for k, (r, p) in enumerate(zip(rel, pos, strict=True)):
        if r < 0:
            return k, f"entry {k} has a negative relative offset {r}"
        if p < 0:
            return k, f"entry {k} has a negative position {p}"
        if k and r <= rel[k - 1]:
            return k, (
                f"entry {k} has offset {base_offset + r}, not above the previous entry's "
                f"offset {base_offset + rel[k - 1]}"
            )
        if k and p < pos[k - 1]:
            return k, (
                f"entry {k} has position {p}, below the previous entry's position {pos[k - 1]}"
            )
    raise AssertionError("no invalid slot")  # pragma: no cover - only called when one exists
