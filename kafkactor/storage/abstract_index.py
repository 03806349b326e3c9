"""Kafka's ``AbstractIndex``: what a segment's offset index and time index files share.

Both are sparse files of fixed-size big-endian entries with no header, each entry holding an
offset relative to the segment's base offset and one other field; ``kafkactor.storage.index``
(``OffsetIndex``, 8-byte entries) and ``kafkactor.storage.time_index`` (``TimeIndex``, 12-byte
entries) give the layouts. A new file is preallocated to ``max_index_size`` (a sparse file of
zeros) so that appends never grow it; ``trim_to_valid_size`` (on roll and close) cuts it back to
the entries actually written.

Kafka memory-maps the file and searches the map; here the entries live in two in-memory arrays
that answer every lookup, and each append also goes to the file with one ``os.pwrite``. The file
is what survives a restart.

Loading an existing file
    Kafka treats every slot of an existing file as an entry, relying on recovery to rebuild the
    indexes of a segment that was not shut down cleanly. These indexes read what a crash can
    leave behind: the entries are the leading slots that keep the ordering rules, and a
    preallocated file whose owner died before trimming it ends in all-zero slots that are free
    space, not entries. A file whose content is entirely zero holds no entries unless it is
    exactly one slot long (a trimmed index holding a single all-zero entry): a lone zero slot
    followed by zero padding cannot be told apart from an empty preallocated file, and reading
    it as empty is always safe (the offset index answers ``(base_offset, 0)`` either way, and a
    time index search then starts at the segment's start, as it would from that entry).

    Anything else after the entries (a slot that breaks the ordering, or a non-zero byte in the
    padding), a length that is not a whole number of entries, or a negative field marks the file
    corrupt: the index opens with the valid leading entries, leaves the file untouched, and
    ``sanity_check`` raises ``CorruptIndexError`` so that the owning segment can rebuild it
    (``truncate`` rewrites the file as a sound empty index, ready for the rebuild's appends).
    A sound file is resized to ``max_index_size`` on open (never below its entries), so the
    segment can keep appending, as Kafka re-preallocates the active segment's index.

Removed entries (``truncate_to``, ``truncate``) are zeroed on disk, so a later crash can never
bring them back as entries.
"""

from __future__ import annotations

import bisect
import os
import pathlib
from abc import ABC, abstractmethod
from array import array
from types import TracebackType
from typing import Any, ClassVar, Final, Self

from kafkactor.storage.errors import StorageError

__all__ = [
    "INT32_MAX",
    "AbstractIndex",
    "CorruptIndexError",
    "IndexFullError",
    "IndexOffsetError",
    "IndexOffsetOverflowError",
]

INT32_MAX: Final = 2**31 - 1
"""The largest relative offset (and offset index position) an entry holds."""


class IndexFullError(StorageError):
    """An append to an index that already holds ``max_entries`` entries.

    Kafka's ``IllegalArgumentException("Attempt to append to a full index")``; a segment rolls
    before its index fills (``is_full``), so seeing this is a bug in the caller.
    """


class IndexOffsetError(StorageError):
    """An entry that breaks the index's ordering or range rules (Kafka's InvalidOffsetException).

    Raised when the offset is not above the last entry's offset (for a time index: below it), is
    below the segment's base offset, when the position is negative, above 2**31-1 or below the
    last entry's position, or when a time index entry's timestamp is below the last entry's.
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


class AbstractIndex(ABC):
    """Kafka's ``AbstractIndex``: one segment's sparse index file of fixed-size entries.

    Each entry holds a 4-byte offset relative to the segment's base offset and one other field
    (a position in the offset index, a timestamp in the time index); relative offsets never
    decrease. This class owns the file: preallocation to ``max_index_size``, loading what a
    crash left (see the module docstring), the sanity check, truncation that zeroes the removed
    slots, trimming, renaming, closing. A subclass gives the entry layout (``ENTRY_SIZE``,
    ``_decode``), its ordering rules (``_valid_prefix``) and its appends and lookups. Not
    thread-safe: the owning ``Log`` serialises access.

    ``max_entries`` is the configured capacity (``max_index_size // ENTRY_SIZE``); the file's
    length is only preallocation, so ``resize`` and ``trim_to_valid_size`` never change it.
    """

    ENTRY_SIZE: ClassVar[int]
    """Bytes per entry in the file."""
    _MIN_ENTRIES: ClassVar[int] = 1
    """The smallest capacity accepted for ``max_index_size``."""

    def __init__(
        self,
        path: pathlib.Path,
        base_offset: int,
        max_index_size: int = 10 * 1024 * 1024,
        *,
        defer_create: bool = False,
    ) -> None:
        size = self.ENTRY_SIZE
        rounded = max_index_size - max_index_size % size
        if max_index_size < 0 or rounded < self._MIN_ENTRIES * size:
            need = f"one {size}-byte entry" if self._MIN_ENTRIES else "zero bytes"
            raise ValueError(
                f"invalid max index size {max_index_size} for {path}: must hold at least {need}"
            )
        if base_offset < 0:
            raise ValueError(f"invalid base offset {base_offset} for index {path}")
        self.path = pathlib.Path(path)
        self.base_offset = base_offset
        self.max_index_size = rounded
        self.max_entries = rounded // size
        self._rel: array[int] = array("i")  # relative offsets
        self._values: array[int] = array("i")  # the entries' other field
        self._problem: str | None = None
        self._fd: int | None = None
        # A new index of a new log (Kafka's `LazyIndex`): no file until the first entry (or an
        # fsync or dup) needs one; until then it is empty and costs no descriptor. Its owner
        # says so only when the index has no file worth loading (its segment has no log file):
        # one left over is truncated when the file is created.
        self._deferred = defer_create
        if self._deferred:
            self._rel, self._values = self._decode(b"")  # the subclass's array types
            return
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._load()
            if self._is_sound():
                self._set_length(max(self.max_index_size, self.size_in_bytes))
        except BaseException:
            self._close_fd()
            raise

    # ----------------------------------------------------------------------------------------
    # Entry layout (the subclass's)

    @abstractmethod
    def _decode(self, data: bytes) -> tuple[array[int], array[int]]:
        """The relative offsets and the other fields of the whole entries in ``data``."""

    @abstractmethod
    def _valid_prefix(self, rel: array[int], values: array[int]) -> tuple[int, str | None]:
        """How many leading entries keep the ordering rules, and what breaks the next one."""

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
    def size_in_bytes(self) -> int:
        """Bytes of the file that hold entries (``entries * ENTRY_SIZE``)."""
        return len(self._rel) * self.ENTRY_SIZE

    @property
    def closed(self) -> bool:
        """True once ``close`` or ``delete`` has released the file."""
        return self._fd is None and not self._deferred

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(path={str(self.path)!r}, base_offset={self.base_offset}, "
            f"entries={self.entries}, max_entries={self.max_entries})"
        )

    def _check_slot(self, n: int) -> None:
        if not 0 <= n < len(self._rel):
            raise IndexError(
                f"entry {n} requested from index {self.path}, which has {len(self._rel)} entries"
            )

    def _relative(self, offset: int) -> int:
        """``offset`` relative to the base offset, checked to fit an entry."""
        relative = offset - self.base_offset
        if relative < 0:
            raise IndexOffsetError(
                f"cannot append offset {offset} to index {self.path}: it is below the base "
                f"offset {self.base_offset}"
            )
        if relative > INT32_MAX:
            raise IndexOffsetOverflowError(
                f"cannot append offset {offset} to index {self.path}: its offset relative to the "
                f"base offset {self.base_offset} does not fit in 4 bytes"
            )
        return relative

    def _write_entry(self, entry: bytes, relative: int, value: int) -> None:
        """Write ``entry`` (packed) in the next slot and keep its fields in memory."""
        fd = self._require_open()
        written = os.pwrite(fd, entry, len(self._rel) * self.ENTRY_SIZE)
        if written != len(entry):  # pragma: no cover - a short write of a few bytes to a file
            raise OSError(f"short write to index {self.path}: {written} of {len(entry)} bytes")
        self._rel.append(relative)
        self._values.append(value)

    # ----------------------------------------------------------------------------------------
    # Truncation

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
            length = max(self.max_index_size, keep * self.ENTRY_SIZE)
            self._problem = None
        # Shrinking then regrowing the file zero-fills the removed slots, so a crash before the
        # next trim cannot resurrect them as entries.
        os.ftruncate(fd, keep * self.ENTRY_SIZE)
        os.ftruncate(fd, length)
        del self._rel[keep:]
        del self._values[keep:]

    # ----------------------------------------------------------------------------------------
    # File management

    def trim_to_valid_size(self) -> None:
        """Shrink the file to the bytes that hold entries (on roll and close)."""
        if not self._deferred:
            self._set_length(self.size_in_bytes)

    def resize(self, new_size: int) -> None:
        """Set the file's length to ``new_size`` rounded down to whole entries (preallocation).

        The entries and ``max_entries`` are unchanged; a size below ``size_in_bytes`` is refused
        with ``ValueError``.
        """
        rounded = new_size - new_size % self.ENTRY_SIZE
        if rounded < self.size_in_bytes:
            raise ValueError(
                f"cannot resize index {self.path} to {new_size} bytes: its {self.entries} "
                f"entries need {self.size_in_bytes}"
            )
        if not self._deferred:  # a deferred file is preallocated when it is created
            self._set_length(rounded)

    def flush(self) -> None:
        """``fsync`` the file (nothing to do while it is deferred)."""
        if not self._deferred:
            os.fsync(self._require_open())

    def create_file(self) -> None:
        """Create a deferred index's file now (preallocated); a no-op once it exists."""
        if self._deferred:
            self._require_open()

    def dup_fd(self) -> int:
        """A duplicate of the file descriptor (the caller closes it), for an fsync elsewhere."""
        return os.dup(self._require_open())

    def close(self) -> None:
        """Trim the file to its entries and close it. Idempotent; lookups keep working."""
        self._deferred = False  # a closed index never creates its file
        if self._fd is None:
            return
        try:
            self.trim_to_valid_size()
        finally:
            self._close_fd()

    def delete(self) -> None:
        """Close the file (without trimming) and remove it; a missing file is fine."""
        self._deferred = False
        self._close_fd()
        self.path.unlink(missing_ok=True)

    def rename_to(self, path: pathlib.Path) -> None:
        """Rename the file (e.g. to add or drop a ``.deleted`` suffix); the index stays usable."""
        target = pathlib.Path(path)
        if not self._deferred:
            os.replace(self.path, target)
        self.path = target

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` (naming the file) if the index is not sound.

        Kafka checks that the file length is a multiple of the entry size and that the last
        offset is not below the base offset (and, for a time index, that the last timestamp is
        not below the first). Here: the file as opened had a length that is a multiple of the
        entry size, every entry keeps the index's ordering rules, and nothing but zero padding
        followed the entries; and the file now is a whole number of entries long and holds
        every entry.
        """
        if self._problem is not None:
            raise CorruptIndexError(self.path, self._problem)
        if self._fd is not None:
            length = os.fstat(self._fd).st_size
            if length % self.ENTRY_SIZE:
                raise CorruptIndexError(
                    self.path, f"its length {length} is not a multiple of {self.ENTRY_SIZE}"
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
            if not self._deferred:
                raise ValueError(f"index {self.path} is closed")
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            self._deferred = False
            os.ftruncate(self._fd, self.max_index_size)  # preallocated, as an eager index is
        return self._fd

    def _set_length(self, length: int) -> None:
        fd = self._require_open()
        if os.fstat(fd).st_size != length:
            os.ftruncate(fd, length)

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def _is_sound(self) -> bool:
        """No problem found on load. (A method, not a test of `_problem` right after `__init__`
        set it to None: mypyc would keep that narrowing across `_load` and refuse the str.)"""
        return self._problem is None

    def _load(self) -> None:
        size = self.ENTRY_SIZE
        data = _read_all(self._require_open())
        length = len(data)
        if length % size:
            self._problem = f"its length {length} is not a multiple of {size}"
        slots = length // size
        used = data if length % size == 0 else data[: slots * size]
        # Slots up to the last non-zero byte hold entries; all-zero slots after them are the
        # preallocated free space a crash leaves behind (see the module docstring).
        content = len(used.rstrip(b"\0"))
        candidates = -(-content // size)
        if candidates == 0 and slots == 1:
            candidates = 1  # a trimmed index holding the single all-zero entry
        rel, values = self._decode(used[: candidates * size])
        valid, problem = self._valid_prefix(rel, values)
        self._problem = self._problem or problem
        self._rel = rel[:valid]
        self._values = values[:valid]


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
