"""Kafka's time index (0.10.1, KIP-33): a sparse map from timestamps to offsets in one segment.

The file is ``<base offset, 20 digits>.timeindex`` beside the segment's ``.log`` and ``.index``,
in Kafka's format byte for byte: a sequence of 12-byte big-endian entries, no header::

    offset  size  field
         0     8  timestamp         the largest record timestamp the segment held at this entry
         8     4  relative offset   the offset of the batch holding that timestamp (its last
                                    offset), minus the segment's base offset

An entry ``(T, O)`` says that no record before offset ``O``'s batch has a timestamp of ``T`` or
more, so a search for the first record with a timestamp >= a target starts at the entry with the
largest timestamp <= the target (``lookup``) and scans forward from that offset's position.
Timestamps strictly increase from one entry to the next and offsets never decrease; timestamps
are never negative (a record without one, -1, never raises the segment's maximum).

The owning segment offers an entry each time it adds an offset index entry (every
``index_interval_bytes`` of log); the entry is written only when its timestamp is above the last
entry's (``maybe_append``), so a segment whose timestamps stop rising stops growing its time
index. When the segment stops being active (roll) or is closed, it appends the entry of its
largest timestamp, so the last entry of a closed segment's time index is the largest timestamp
in the segment: what retention by time compares after a restart. ``is_full`` keeps the last
slot for that entry, as Kafka does.

The file handling (preallocation to ``max_index_size``, what a crash leaves, the sanity check,
truncation that zeroes the removed slots, trimming) is the offset index's, shared through
``AbstractIndex``; see ``kafkactor.storage.abstract_index``.
"""

from __future__ import annotations

import bisect
import operator
import struct
import sys
from array import array
from typing import ClassVar, Final, NamedTuple

from kafkactor.storage.abstract_index import AbstractIndex, IndexFullError, IndexOffsetError
from kafkactor.storage.records import NO_TIMESTAMP

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "TIME_INDEX_ENTRY_SIZE",
    "OffsetAndTimestamp",
    "TimeIndex",
    "TimestampOffset",
]

TIME_INDEX_ENTRY_SIZE: Final = 12
"""Bytes per time index entry: an 8-byte timestamp and a 4-byte relative offset."""

EARLIEST_TIMESTAMP: Final = -2
"""ListOffsets' target for the log start offset (``ListOffsetsRequest.EARLIEST_TIMESTAMP``)."""

LATEST_TIMESTAMP: Final = -1
"""ListOffsets' target for the log end offset (``ListOffsetsRequest.LATEST_TIMESTAMP``)."""

_ENTRY: Final = struct.Struct(">qi")
_BIG_ENDIAN_HOST: Final = sys.byteorder == "big"
if array("i").itemsize != 4 or array("q").itemsize != 8:  # pragma: no cover - as in CPython
    raise ImportError("kafkactor.storage.time_index needs 4-byte array('i'), 8-byte array('q')")


class TimestampOffset(NamedTuple):
    """One time index entry (Kafka's ``TimestampOffset``): a timestamp and an absolute offset."""

    timestamp: int
    offset: int


class OffsetAndTimestamp(NamedTuple):
    """A record found by timestamp (what Kafka's ListOffsets answers): its offset and timestamp.

    ``timestamp`` is -1 (``NO_TIMESTAMP``) for the earliest and latest targets, which name an
    offset rather than a record.
    """

    offset: int
    timestamp: int


class TimeIndex(AbstractIndex):
    """Kafka's ``TimeIndex``: one segment's sparse index of timestamps to offsets (KIP-33).

    ``lookup(timestamp)`` returns the entry with the largest timestamp at or below the target
    (``(-1, base_offset)`` when there is none): the offset from which a search for the first
    record with a timestamp >= the target scans forward. ``last_entry`` is the segment's largest
    timestamp once the segment has been rolled or closed. Not thread-safe: the owning ``Log``
    serialises access.

    ``max_entries`` is ``max_index_size // 12``, and ``is_full`` is true one entry early: the
    last slot is kept for the entry a roll or close appends (``maybe_append(...,
    skip_full_check=True)``).
    """

    ENTRY_SIZE: ClassVar[int] = TIME_INDEX_ENTRY_SIZE
    # A log's segment.index.bytes may be as small as one offset index entry (8 bytes), which
    # holds no time index entry: such a time index keeps only the entries of rolls and closes.
    _MIN_ENTRIES: ClassVar[int] = 0

    # ----------------------------------------------------------------------------------------
    # State

    @property
    def is_full(self) -> bool:
        """True when only the slot kept for the roll or close entry is left (or none is)."""
        return len(self._rel) >= self.max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(-1, base_offset)`` when the index is empty."""
        if not self._rel:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._values[-1], self.base_offset + self._rel[-1])

    # ----------------------------------------------------------------------------------------
    # Reads

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``target_timestamp`` (Kafka's ``lookup``).

        ``(-1, base_offset)`` when there is none: an empty index, or a target before the first
        entry's timestamp (the search then starts at the segment's start). O(log n).
        """
        slot = bisect.bisect_right(self._values, target_timestamp) - 1
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return TimestampOffset(self._values[slot], self.base_offset + self._rel[slot])

    def entry(self, n: int) -> TimestampOffset:
        """The ``n``-th entry (0-based) as ``(timestamp, absolute offset)``."""
        self._check_slot(n)
        return TimestampOffset(self._values[n], self.base_offset + self._rel[n])

    # ----------------------------------------------------------------------------------------
    # Writes

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp, offset)`` if ``timestamp`` is above the last entry's.

        Returns whether an entry was written (one ``os.pwrite`` of 12 bytes). An entry equal to
        the last one, or any entry with a timestamp equal to the last one's (what a second roll
        or close offers), is ignored; so is a timestamp of -1 on an empty index. Raises
        ``IndexFullError`` when ``is_full`` (unless ``skip_full_check``, which a roll and a
        close pass to use the kept slot), ``IndexOffsetError`` when the offset is below the last
        entry's or the base offset or the timestamp is below the last entry's, and
        ``IndexOffsetOverflowError`` when the offset is too far above the base.
        """
        self._require_open()
        if not skip_full_check and self.is_full:
            raise IndexFullError(
                f"cannot append timestamp {timestamp} to the full time index {self.path} "
                f"({len(self._rel)} of {self.max_entries} entries, the last one kept for a roll)"
            )
        last = self.last_entry
        if self._rel and offset < last.offset:
            raise IndexOffsetError(
                f"cannot append offset {offset} to time index {self.path}: it is below the last "
                f"offset {last.offset}"
            )
        if self._rel and timestamp < last.timestamp:
            raise IndexOffsetError(
                f"cannot append timestamp {timestamp} (offset {offset}) to time index "
                f"{self.path}: it is below the last entry's timestamp {last.timestamp}"
            )
        if timestamp <= last.timestamp:
            return False
        relative = self._relative(offset)
        self._write_entry(_ENTRY.pack(timestamp, relative), relative, timestamp)
        return True

    # ----------------------------------------------------------------------------------------
    # Entry layout

    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        # Three 4-byte words an entry: the timestamp's high and low halves, the relative offset.
        # Strided copies (C loops) put each timestamp's halves side by side in native order.
        words = array("i", data)
        if not _BIG_ENDIAN_HOST:
            words.byteswap()
        halves = array("i", bytes(len(words) // 3 * 8))
        high, low = words[0::3], words[1::3]
        halves[0::2], halves[1::2] = (high, low) if _BIG_ENDIAN_HOST else (low, high)
        timestamps = array("q")
        timestamps.frombytes(halves.tobytes())
        return words[2::3], timestamps

    def _valid_prefix(self, rel: array[int], values: array[int]) -> tuple[int, str | None]:
        if not rel or (
            min(rel) >= 0
            and min(values) >= 0
            and all(map(operator.le, rel, rel[1:]))
            and all(map(operator.lt, values, values[1:]))
        ):
            return len(rel), None
        for k, (relative, timestamp) in enumerate(zip(rel, values, strict=True)):
            if relative < 0:
                return k, f"entry {k} has a negative relative offset {relative}"
            if timestamp < 0:
                return k, f"entry {k} has a negative timestamp {timestamp}"
            if k and relative < rel[k - 1]:
                return k, (
                    f"entry {k} has offset {self.base_offset + relative}, below the previous "
                    f"entry's offset {self.base_offset + rel[k - 1]}"
                )
            if k and timestamp <= values[k - 1]:
                return k, (
                    f"entry {k} has timestamp {timestamp}, not above the previous entry's "
                    f"timestamp {values[k - 1]}"
                )
        raise AssertionError("no invalid slot")  # pragma: no cover - only called when one exists
