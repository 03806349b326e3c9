"""The high watermarks of a broker's partitions and their checkpoint file."""

from __future__ import annotations

import threading
from pathlib import Path

from kafkactor.storage.checkpoint import OffsetCheckpoint, TopicPartition

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"


class HighWatermarks:
    """Kafka's `highWatermarkCheckpoints`: the HW of every replica a broker holds, written to
    `replication-offset-checkpoint` in its data dir.

    Each PartitionActor records its own partition's HW here whenever it moves (a dict write
    under a lock, no message hop); the replica manager checkpoints the lot periodically and
    at a clean shutdown. A restarted broker starts each replica from its checkpointed HW.
    """

    def __init__(self, data_dir: Path) -> None:
        self._checkpoint = OffsetCheckpoint(Path(data_dir) / REPLICATION_OFFSET_CHECKPOINT)
        self._lock = threading.Lock()
        self._offsets: dict[TopicPartition, int] = {}
        self._loaded: dict[TopicPartition, int] = {}
        self._written: dict[TopicPartition, int] | None = None  # the file's content, as written

    def load(self) -> dict[TopicPartition, int]:
        """Read the checkpoint (empty when there is none); `initial` answers from it."""
        self._loaded = self._checkpoint.read()
        return dict(self._loaded)

    def initial(self, tp: TopicPartition) -> int:
        """The HW a replica starts from: its checkpointed value, else 0."""
        return self._loaded.get(tp, 0)

    def update(self, tp: TopicPartition, high_watermark: int) -> None:
        with self._lock:
            self._offsets[tp] = high_watermark

    def current(self, tp: TopicPartition) -> int | None:
        """The HW its partition last recorded (None for a replica not served here)."""
        with self._lock:
            return self._offsets.get(tp)

    def remove(self, tp: TopicPartition) -> None:
        with self._lock:
            self._offsets.pop(tp, None)
            self._loaded.pop(tp, None)

    def checkpoint(self) -> dict[TopicPartition, int]:
        """Write every known HW (atomically: temp file, fsync, rename); returns what it wrote.

        Replicas loaded from the file but not yet served keep their checkpointed value. When
        nothing changed since this book's last write the file already says it, and is not
        written again: an idle broker leading thousands of partitions would otherwise rewrite
        and fsync the same file every `replica.high.watermark.checkpoint.interval.ms` (Kafka
        writes it each time)."""
        with self._lock:
            offsets = {**self._loaded, **self._offsets}
        if offsets == self._written:
            return offsets
        self._checkpoint.write(offsets)
        self._written = offsets
        return offsets
