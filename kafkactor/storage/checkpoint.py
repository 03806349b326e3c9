"""Kafka's offset checkpoint files: one offset per topic-partition, in Kafka's text format.

A broker keeps several of these per data directory (``recovery-point-offset-checkpoint``,
``replication-offset-checkpoint`` for high watermarks, ...). The format, as Kafka's
``OffsetCheckpointFile`` writes it::

    0                      version (only 0 exists)
    3                      number of entries
    audit 3 42             topic, partition and offset, separated by single spaces
    events 0 5
    events 1 17

with ``\\n`` line ends, the last line included. Entries are written sorted by topic, then by
partition number, so the same offsets always give the same bytes.

A write is atomic: the text goes to ``<file>.tmp``, which is flushed and fsynced, renamed over the
file, and then the directory is fsynced so the rename itself survives a crash. A reader therefore
sees the old file or the new one, never a mix, and a ``.tmp`` left by a crash is ignored (and
replaced by the next write).

Reading is strict where Kafka is lenient, because a damaged checkpoint must not silently become
"no offsets": an empty file, a missing count line, a version other than 0, a count that does not
match the entries, a line that is not exactly ``topic partition offset``, a number that is not a
plain decimal in range, a negative partition or offset, or the same partition twice all raise
``CheckpointError`` naming the file, the 1-based line and what is wrong. (Kafka reads an empty
file, or one with only a version line, as no entries; it creates an empty file when it opens one.)
A missing file is simply no entries.
"""

from __future__ import annotations

import os
import pathlib
import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from kafkactor.common import TopicPartition
from kafkactor.storage.errors import StorageError

__all__ = ["CheckpointError", "OffsetCheckpoint", "TopicPartition"]

VERSION: Final = 0
_INT32_MAX: Final = 2**31 - 1
_INT64_MAX: Final = 2**63 - 1
_DECIMAL: Final = re.compile(r"-?[0-9]+")


class CheckpointError(StorageError):
    """A checkpoint file that cannot be read: malformed, or of an unsupported version.

    ``path`` names the file, ``line`` the 1-based line at fault (``None`` when no single line is),
    ``reason`` what is wrong.
    """

    def __init__(self, path: pathlib.Path, line: int | None, reason: str) -> None:
        where = f"{path}" if line is None else f"{path}, line {line}"
        super().__init__(f"cannot read checkpoint file {where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.reason))


class OffsetCheckpoint:
    """Kafka's ``OffsetCheckpointFile``: a map of topic-partitions to offsets kept in one file.

    Used for the recovery points and the high watermarks of a data directory. ``write`` replaces
    the whole file atomically and durably; ``read`` returns what the last completed write wrote.
    Calls on one instance are serialised by a lock (a scheduler thread writes while others read),
    as Kafka's ``CheckpointFile`` does.
    """

    def __init__(self, path: pathlib.Path) -> None:
        self.path = pathlib.Path(path)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OffsetCheckpoint({str(self.path)!r})"

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Replace the file's content with ``offsets``, atomically and durably.

        Raises ``ValueError`` (before touching any file) for an empty topic name, a topic name
        containing whitespace, a partition outside 0..2**31-1 or an offset outside 0..2**63-1.
        """
        entries = sorted(
            (_check_key(key), _check_offset(key, offset)) for key, offset in offsets.items()
        )
        lines = [str(VERSION), str(len(entries))]
        lines += [f"{tp.topic} {tp.partition} {offset}" for tp, offset in entries]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with self._lock:
            write_atomically(self.path, data)

    def read(self) -> dict[TopicPartition, int]:
        """The offsets in the file; ``{}`` when the file does not exist.

        Raises ``CheckpointError`` when the file is malformed or of an unsupported version.
        """
        with self._lock:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                return {}
        return _parse(self.path, data)


def _check_key(key: TopicPartition) -> TopicPartition:
    if not isinstance(key, TopicPartition):
        raise ValueError(f"invalid key {key!r}: not a TopicPartition")
    topic, partition = key.topic, key.partition
    if not isinstance(topic, str) or not topic:
        raise ValueError(f"invalid topic name {topic!r}: must be a non-empty string")
    if any(c.isspace() for c in topic):
        raise ValueError(f"invalid topic name {topic!r}: topic names cannot contain whitespace")
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise ValueError(f"invalid partition {partition!r} for topic {topic!r}: not an int")
    if not 0 <= partition <= _INT32_MAX:
        raise ValueError(f"invalid partition {partition} for topic {topic!r}")
    return TopicPartition(topic=topic, partition=partition)


def _check_offset(key: TopicPartition, offset: int) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise ValueError(f"invalid offset {offset!r} for {key}: not an int")
    if not 0 <= offset <= _INT64_MAX:
        raise ValueError(f"invalid offset {offset} for {key}")
    return offset


def write_atomically(path: pathlib.Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path``'s content with ``data`` so that a crash leaves the old or the new file.

    The bytes go to ``<file>.tmp``, which is fsynced, renamed over ``path``, and then the
    directory is fsynced so the rename survives a crash too. Callers serialise writes to one file.
    ``durable=False`` skips both fsyncs: a process crash still leaves the old or the new file,
    an OS crash may leave either, none, or a damaged one, which only a reader that rebuilds
    the file from elsewhere may accept.
    """
    tmp_path = path.with_name(path.name + ".tmp")
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp_path, path)
    if durable:
        _fsync_directory(path.parent)


def _fsync_directory(directory: pathlib.Path) -> None:
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def parse_number(
    path: pathlib.Path, line: int, text: str, what: str, maximum: int, *, signed: bool = False
) -> int:
    """The plain decimal ``text`` found on ``line`` of checkpoint file ``path``.

    Raises ``CheckpointError`` for anything but ``-?[0-9]+``, for a negative value unless
    ``signed``, and for a magnitude above ``maximum``; ``what`` names the field in the message.
    """
    if not _DECIMAL.fullmatch(text):
        raise CheckpointError(path, line, f"the {what} {text!r} is not a decimal integer")
    try:
        value = int(text)
    except ValueError:  # more digits than int() converts: far out of range anyway
        raise CheckpointError(path, line, f"the {what} {text[:30]}... is out of range") from None
    if value < 0 and not signed:
        raise CheckpointError(path, line, f"negative {what} {value}")
    if abs(value) > maximum:
        raise CheckpointError(path, line, f"the {what} {value} is out of range (at most {maximum})")
    return value


def entry_lines(path: pathlib.Path, data: bytes) -> list[str]:
    """The entry lines of a version-0 checkpoint file's ``data``; entry ``i`` is on line ``3 + i``.

    Checks what every checkpoint file shares: UTF-8 text, the version line (0), and an entry
    count line that matches the lines that follow. A final line end is optional, and ``\r\n``
    line ends are read as ``\n``. Raises ``CheckpointError`` naming ``path`` and the line.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(
            path, data.count(b"\n", 0, e.start) + 1, "not valid UTF-8 text"
        ) from None
    if not text:
        raise CheckpointError(path, 1, "the file is empty; expected the version line")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the line end of the last line
    lines = [line.removesuffix("\r") for line in lines]  # Kafka on Windows writes \r\n

    version = parse_number(path, 1, lines[0], "version", _INT32_MAX, signed=True)
    if version != VERSION:
        raise CheckpointError(
            path, 1, f"unsupported version {version} (only version {VERSION} is supported)"
        )
    if len(lines) < 2:
        raise CheckpointError(path, 2, "missing the entry count line")
    count = parse_number(path, 2, lines[1], "entry count", _INT32_MAX)
    body = lines[2:]
    if len(body) > count:
        raise CheckpointError(
            path, 3 + count, f"unexpected line after the {count} entries announced on line 2"
        )
    if len(body) < count:
        raise CheckpointError(
            path, 2, f"the count announces {count} entries but the file has {len(body)}"
        )
    return body


def _parse(path: pathlib.Path, data: bytes) -> dict[TopicPartition, int]:
    offsets: dict[TopicPartition, int] = {}
    first_seen: dict[TopicPartition, int] = {}
    for n, line in enumerate(entry_lines(path, data), start=3):
        fields = line.split(" ")
        if len(fields) != 3:
            raise CheckpointError(
                path,
                n,
                f"expected 3 fields 'topic partition offset' separated by single spaces, "
                f"found {len(fields)}: {line!r}",
            )
        topic, partition_text, offset_text = fields
        if not topic or any(c.isspace() for c in topic):
            raise CheckpointError(path, n, f"invalid topic name {topic!r}")
        partition = parse_number(path, n, partition_text, "partition", _INT32_MAX)
        offset = parse_number(path, n, offset_text, "offset", _INT64_MAX)
        key = TopicPartition(topic=topic, partition=partition)
        if key in offsets:
            raise CheckpointError(
                path, n, f"duplicate entry for {key} (first on line {first_seen[key]})"
            )
        offsets[key] = offset
        first_seen[key] = n
    return offsets
