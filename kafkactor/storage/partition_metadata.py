"""Kafka 2.8's `partition.metadata` file (KIP-516): the topic id a partition directory belongs to.

Each `<topic>-<partition>/` directory records the id of the topic its log was written for, so
that a stale log of a deleted topic (one whose deletion never reached this directory) is not
taken for the log of a new topic created later under the same name. The format, as Kafka's
`PartitionMetadataFile` writes it::

    version: 0
    topic_id: bxqdPCtOTIqecQ1bPyqMRA

two lines, `\\n` after the first and none after the last, the id in Kafka's string form (URL-safe
base64 of its 16 bytes, no padding). The write is atomic (`<file>.tmp`, fsynced, renamed over
the file, as the offset checkpoints are written). A missing or empty file is "no id yet" (Kafka
2.8 creates the file empty when it opens a log); a version other than 0, a malformed line or
the zero uuid raises `PartitionMetadataError`, as Kafka's reader raises an IOException.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Final

from kafkactor.kafka_uuid import ZERO_UUID, uuid_from_string, uuid_to_string
from kafkactor.storage.checkpoint import write_atomically
from kafkactor.storage.errors import StorageError

__all__ = [
    "PARTITION_METADATA_FILE",
    "PartitionMetadataError",
    "PartitionMetadataFile",
    "format_partition_metadata",
    "parse_partition_metadata",
]

#: The file's name in a partition directory (Kafka's `PartitionMetadataFile` name).
PARTITION_METADATA_FILE: Final = "partition.metadata"
#: The only version Kafka defines.
CURRENT_VERSION: Final = 0


class PartitionMetadataError(StorageError):
    """A `partition.metadata` file Kafka could not read either: an unknown version, a malformed
    line or the zero uuid (Kafka's `IOException` from `PartitionMetadataReadBuffer.read`)."""


def format_partition_metadata(topic_id: uuid.UUID) -> bytes:
    """The file's bytes for `topic_id`, as Kafka's `PartitionMetadataFileFormatter.toFile`."""
    return f"version: {CURRENT_VERSION}\ntopic_id: {uuid_to_string(topic_id)}".encode()


def parse_partition_metadata(path: Path, data: bytes) -> uuid.UUID | None:
    """The topic id `data` (the file at `path`) records; None for an empty file."""
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        return None
    lines = text.split("\n")
    version = _value(path, lines[0], "version")
    if version != str(CURRENT_VERSION):
        if not version.isdigit():
            raise _malformed(path, lines[0])
        raise PartitionMetadataError(
            f"Unrecognized version of partition metadata file ({path}): {version}"
        )
    if len(lines) < 2:
        raise _malformed(path, "null")
    raw = _value(path, lines[1], "topic_id")
    try:
        topic_id = uuid_from_string(raw)
    except ValueError as e:
        raise _malformed(path, lines[1]) from e
    if topic_id == ZERO_UUID:
        raise PartitionMetadataError(f"Invalid topic ID in partition metadata file ({path})")
    return topic_id


def _malformed(path: Path, line: str) -> PartitionMetadataError:
    return PartitionMetadataError(f"Malformed line in checkpoint file ({path}): '{line}'")


def _value(path: Path, line: str, key: str) -> str:
    parts = line.split()
    if len(parts) != 2 or parts[0] != f"{key}:":
        raise _malformed(path, line)
    return parts[1]


class PartitionMetadataFile:
    """A partition directory's `partition.metadata` (Kafka's `PartitionMetadataFile`)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / PARTITION_METADATA_FILE

    def __repr__(self) -> str:
        return f"PartitionMetadataFile({self.path})"

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> uuid.UUID | None:
        """The recorded topic id; None when the file is missing or empty."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return parse_partition_metadata(self.path, data)

    def write(self, topic_id: uuid.UUID) -> None:
        """Record `topic_id` (atomically); the zero uuid is no id and is refused."""
        if topic_id == ZERO_UUID:
            raise ValueError("the zero uuid is no topic id")
        write_atomically(self.path, format_partition_metadata(topic_id))
