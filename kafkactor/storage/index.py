"""Kafka's offset index: a sparse map from offsets to byte positions in a segment's ``.log`` file.

The file format is Kafka's, byte for byte: a sequence of 8-byte big-endian entries, no header::

    offset  size  field
         0     4  relative offset   absolute offset minus the segment's base offset (0 .. 2**31-1)
         4     4  position          byte position of that offset's batch in the .log file

Relative offsets strictly increase and positions never decrease from one entry to the next. A new
file is preallocated to ``max_index_size`` (a sparse file of zeros) so that appends never grow it;
``trim_to_valid_size`` (on roll and close) cuts it back to the entries actually written.

Kafka memory-maps the file and searches the map; here the entries live in two in-memory arrays
(relative offsets and positions) that answer every lookup, and each append also goes to the file
with one ``os.pwrite``. The file is what survives a restart.

Loading an existing file
    Kafka treats every 8-byte slot of an existing file as an entry, relying on recovery to rebuild
    the index of a segment that was not shut down cleanly. This index reads what a crash can leave
    behind: the entries are the leading slots that keep the ordering rules, and a preallocated file
    whose owner died before trimming it ends in all-zero slots that are free space, not entries.
    A file whose content is entirely zero holds no entries unless it is exactly one slot long (a
    trimmed index holding the single entry ``(base_offset, 0)``): a lone ``(0, 0)`` slot followed
    by zero padding cannot be told apart from an empty preallocated file, and reading it as empty
    is always safe, since ``lookup`` answers ``(base_offset, 0)`` either way.

    Anything else after the entries (a slot that breaks the ordering, or a non-zero byte in the
    padding), a length that is not a multiple of 8, or a negative field marks the file corrupt:
    the index opens with the valid leading entries, leaves the file untouched, and
    ``sanity_check`` raises ``CorruptIndexError`` so that the owning segment can rebuild it
    (``truncate`` rewrites the file as a sound empty index, ready for the rebuild's appends).
    A sound file is resized to ``max_index_size`` on open (never below its entries), so the
    segment can keep appending, as Kafka re-preallocates the active segment's index.

Removed entries (``truncate_to``, ``truncate``) are zeroed on disk, so a later crash can never
bring them back as entries.
"""

from __future__ import annotations

import bisect
import operator
import os
import pathlib
import struct
import sys
from array import array
from types import TracebackType
from typing import Any, Final, Self

from kafkactor.storage.errors import StorageError

__all__ = [
    "ENTRY_SIZE",
    "CorruptIndexError",
    "IndexFullError",
    "IndexOffsetError",
    "IndexOffsetOverflowError",
    "OffsetIndex",
]

ENTRY_SIZE: Final = 8
"""Bytes per entry: a 4-byte relative offset and a 4-byte position."""

_INT32_MAX: Final = 2**31 - 1
_ENTRY: Final = struct.Struct(">ii")
_BIG_ENDIAN_HOST: Final = sys.byteorder == "big"
if array("i").itemsize != 4:  # pragma: no cover - every platform CPython supports has 4-byte C ints
    raise ImportError("kafkactor.storage.index needs 4-byte C ints for array('i')")


class IndexFullError(StorageError):
    """An append to an index that already holds ``max_entries`` entries.

    Kafka's ``IllegalArgumentException("Attempt to append to a full index")``; a segment rolls
    before its index fills (``is_full``), so seeing this is a bug in the caller.
    """


class IndexOffsetError(StorageError):
    """An entry that breaks the index's ordering or range rules (Kafka's InvalidOffsetException).

    Raised when the offset is not above the last entry's offset, is below the segment's base
    offset, or when the position is negative, above 2**31-1 or below the last entry's position.
    """


class IndexOffsetOverflowError(IndexOffsetError):
    """An offset more than 2**31-1 above the base offset (Kafka's IndexOffsetOverflowException).

    Its relative offset does not fit the 4-byte field: the batch belongs in a new segment.
    """


class CorruptIndexError(StorageError):
    """An index file that fails the sanity check (Kafka's ``CorruptIndexException``).

    ``path`` names the file and ``reason`` says what is wrong with it. The owning segment is
    expected to delete the index and rebuild it from its ``.log`` file.
    """

    def __init__(self, path: pathlib.Path, reason: str) -> None:
        super().__init__(f"corrupt index file {path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.reason))


class OffsetIndex:
    """Kafka's ``OffsetIndex``: one segment's sparse index of offsets to ``.log`` positions.

    ``lookup(target)`` returns the entry with the largest offset at or below ``target`` (a binary
    search over the in-memory array of relative offsets): the position from which a read scans
    forward to find ``target``. Entries are appended by the owning segment, one per
    ``index_interval_bytes`` of log. Not thread-safe: the owning ``Log`` serialises access.

    ``max_entries`` is the configured capacity (``max_index_size // 8``); the file's length is
    only preallocation, so ``resize`` and ``trim_to_valid_size`` never change the capacity (in
    Kafka the capacity follows the mapped length instead, and a trimmed index is full).
    """

    def __init__(
        self, path: pathlib.Path, base_offset: int, max_index_size: int = 10 * 1024 * 1024
    ) -> None:
        rounded = max_index_size - max_index_size % ENTRY_SIZE
        if rounded < ENTRY_SIZE:
            raise ValueError(
                f"invalid max index size {max_index_size} for {path}: "
                f"must hold at least one {ENTRY_SIZE}-byte entry"
            )
        if base_offset < 0:
            raise ValueError(f"invalid base offset {base_offset} for index {path}")
        self.path = pathlib.Path(path)
        self.base_offset = base_offset
        self.max_index_size = rounded
        self.max_entries = rounded // ENTRY_SIZE
        self._rel: array[int] = array("i")
        self._pos: array[int] = array("i")
        self._problem: str | None = None
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._load()
            if self._problem is None:
                self._set_length(max(self.max_index_size, self.size_in_bytes))
        except BaseException:
            self._close_fd()
            raise

    # ----------------------------------------------------------------------------------------
    # State

    @property
    def entries(self) -> int:
        """Number of entries in the index."""
        return len(self._rel)

    @property
    def is_full(self) -> bool:
        """True when no further entry can be appended."""
        return len(self._rel) >= self.max_entries

    @property
    def last_offset(self) -> int:
        """Absolute offset of the last entry, or ``base_offset`` when the index is empty."""
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the file that hold entries (``entries * 8``)."""
        return len(self._rel) * ENTRY_SIZE

    @property
    def closed(self) -> bool:
        """True once ``close`` or ``delete`` has released the file."""
        return self._fd is None

    def __repr__(self) -> str:
        return (
            f"OffsetIndex(path={str(self.path)!r}, base_offset={self.base_offset}, "
            f"entries={self.entries}, max_entries={self.max_entries})"
        )

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
        return self.base_offset + self._rel[slot], self._pos[slot]

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry (0-based) as ``(absolute offset, position)``."""
        if not 0 <= n < len(self._rel):
            raise IndexError(
                f"entry {n} requested from index {self.path}, which has {len(self._rel)} entries"
            )
        return self.base_offset + self._rel[n], self._pos[n]

    # ----------------------------------------------------------------------------------------
    # Writes

    def append(self, offset: int, position: int) -> None:
        """Add the entry ``offset -> position``; O(1), one ``os.pwrite`` of 8 bytes.

        Raises ``IndexFullError`` when full, ``IndexOffsetError`` when the offset is not above the
        last entry's (or below the base offset) or the position is out of range or below the
        last entry's, and ``IndexOffsetOverflowError`` when the offset is too far above the base.
        """
        fd = self._require_open()
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
        relative = offset - self.base_offset
        if relative < 0:
            raise IndexOffsetError(
                f"cannot append offset {offset} to index {self.path}: it is below the base "
                f"offset {self.base_offset}"
            )
        if relative > _INT32_MAX:
            raise IndexOffsetOverflowError(
                f"cannot append offset {offset} to index {self.path}: its offset relative to the "
                f"base offset {self.base_offset} does not fit in 4 bytes"
            )
        if not 0 <= position <= _INT32_MAX:
            raise IndexOffsetError(
                f"cannot append position {position} to index {self.path}: "
                f"positions must be in 0..{_INT32_MAX}"
            )
        if n and position < self._pos[-1]:
            raise IndexOffsetError(
                f"cannot append position {position} (offset {offset}) to index {self.path}: it "
                f"is below the last entry's position {self._pos[-1]}"
            )
        written = os.pwrite(fd, _ENTRY.pack(relative, position), n * ENTRY_SIZE)
        if written != ENTRY_SIZE:  # pragma: no cover - a short write of 8 bytes to a regular file
            raise OSError(f"short write to index {self.path}: {written} of {ENTRY_SIZE} bytes")
        self._rel.append(relative)
        self._pos.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's ``truncateTo``).

        Truncating to an offset above the last entry removes nothing. The removed slots are
        zeroed in the file; its length is unchanged. On an index whose file was corrupt when
        opened (see ``sanity_check``), everything after the kept entries is zeroed and the file
        is preallocated again: afterwards the file is sound and holds exactly the entries.
        """
        keep = bisect.bisect_left(self._rel, offset - self.base_offset)
        self._truncate_to_entries(keep)

    def truncate(self) -> None:
        """Remove all entries (and, like ``truncate_to``, repair a file found corrupt)."""
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, keep: int) -> None:
        keep = min(keep, len(self._rel))
        if keep == len(self._rel) and self._problem is None:
            return
        fd = self._require_open()
        length = os.fstat(fd).st_size
        if self._problem is not None:
            # The file was corrupt when opened: its kept entries are valid, and rewriting the tail
            # as zeros (to a whole number of slots) makes it sound again, e.g. before a rebuild.
            length = max(self.max_index_size, keep * ENTRY_SIZE)
            self._problem = None
        # Shrinking then regrowing the file zero-fills the removed slots, so a crash before the
        # next trim cannot resurrect them as entries.
        os.ftruncate(fd, keep * ENTRY_SIZE)
        os.ftruncate(fd, length)
        del self._rel[keep:]
        del self._pos[keep:]

    # ----------------------------------------------------------------------------------------
    # File management

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the bytes that hold entries (on roll and close)."""
        self._set_length(self.size_in_bytes)

    def resize(self, new_size: int) -> None:
        """Set the file's length to ``new_size`` rounded down to a multiple of 8 (preallocation).

        The entries and ``max_entries`` are unchanged; a size below ``size_in_bytes`` is refused
        with ``ValueError``.
        """
        rounded = new_size - new_size % ENTRY_SIZE
        if rounded < self.size_in_bytes:
            raise ValueError(
                f"cannot resize index {self.path} to {new_size} bytes: its {self.entries} "
                f"entries need {self.size_in_bytes}"
            )
        self._set_length(rounded)

    def flush(self) -> None:
        """``fsync`` the file."""
        os.fsync(self._require_open())

    def dup_fd(self) -> int:
        """A duplicate of the file descriptor (the caller closes it), for an fsync elsewhere."""
        return os.dup(self._require_open())

    def close(self) -> None:
        """Trim the file to its entries and close it. Idempotent; lookups keep working."""
        if self._fd is None:
            return
        try:
            self.trim_to_valid_size()
        finally:
            self._close_fd()

    def delete(self) -> None:
        """Close the file (without trimming) and remove it; a missing file is fine."""
        self._close_fd()
        self.path.unlink(missing_ok=True)

    def rename_to(self, path: pathlib.Path) -> None:
        """Rename the file (e.g. to add or drop a ``.deleted`` suffix); the index stays usable."""
        target = pathlib.Path(path)
        os.replace(self.path, target)
        self.path = target

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` (naming the file) if the index is not sound.

        Kafka checks that the file length is a multiple of 8 and that the last offset is not below
        the base offset. Here: the file as opened had a length that is a multiple of 8, every
        entry has a non-negative relative offset and position, relative offsets strictly increase,
        positions never decrease, and nothing but zero padding followed the entries; and the file
        now is a multiple of 8 long and holds every entry.
        """
        if self._problem is not None:
            raise CorruptIndexError(self.path, self._problem)
        if self._fd is not None:
            length = os.fstat(self._fd).st_size
            if length % ENTRY_SIZE:
                raise CorruptIndexError(
                    self.path, f"its length {length} is not a multiple of {ENTRY_SIZE}"
                )
            if length < self.size_in_bytes:
                raise CorruptIndexError(
                    self.path,
                    f"its length {length} is shorter than its {self.entries} entries",
                )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------
    # Internals

    def _require_open(self) -> int:
        if self._fd is None:
            raise ValueError(f"index {self.path} is closed")
        return self._fd

    def _set_length(self, length: int) -> None:
        fd = self._require_open()
        if os.fstat(fd).st_size != length:
            os.ftruncate(fd, length)

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _load(self) -> None:
        fd = self._require_open()
        data = _read_all(fd)
        length = len(data)
        if length % ENTRY_SIZE:
            self._problem = f"its length {length} is not a multiple of {ENTRY_SIZE}"
        slots = length // ENTRY_SIZE
        used = data if length % ENTRY_SIZE == 0 else data[: slots * ENTRY_SIZE]
        # Slots up to the last non-zero byte hold entries; all-zero slots after them are the
        # preallocated free space a crash leaves behind (see the module docstring).
        content = len(used.rstrip(b"\0"))
        candidates = -(-content // ENTRY_SIZE)
        if candidates == 0 and slots == 1:
            candidates = 1  # a trimmed index holding the single entry (base_offset, 0)
        words = array("i", used[: candidates * ENTRY_SIZE])
        if not _BIG_ENDIAN_HOST:
            words.byteswap()
        rel, pos = words[0::2], words[1::2]
        if _is_ordered(rel, pos):
            valid = candidates
        else:
            valid, problem = _first_invalid_slot(rel, pos, self.base_offset)
            self._problem = self._problem or problem
        self._rel = rel[:valid]
        self._pos = pos[:valid]


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    done = 0
    while done < size:
        chunk = os.pread(fd, size - done, done)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


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
