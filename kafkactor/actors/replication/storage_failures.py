"""Storage failures of a broker's replicas: Kafka's `KafkaStorageException` as this broker
sees it, without Kafka's offline log directories.

In Kafka an `IOException` while a log is created, appended to, read or flushed goes to the
`LogDirFailureChannel`, which takes the whole log directory offline; the replica manager then
answers KAFKA_STORAGE_ERROR for every partition in it (`HostedPartition.Offline`) until the
broker restarts. Here one partition is offline, not its directory: the one whose log could
not be opened or created (an `OSError` such as EMFILE, "Too many open files", or a
`StorageError`), or whose replica could not apply a LeaderAndIsr for one (its leader-epoch
file). It stays offline until a later LeaderAndIsr for it is applied (a shortage of file
descriptors passes), or a StopReplica forgets it.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any

from kafkactor import tracing

_log = tracing.get_logger("kafkactor.storage_failures")


@dataclass(frozen=True, slots=True)
class StorageFailure:
    """Why a replica's log failed: the errno's name (EMFILE, ENOSPC, ...; "" for an error
    without one), its message and the file it was about ("" when unknown)."""

    errno: str
    message: str
    path: str = ""

    @classmethod
    def of(cls, error: BaseException) -> StorageFailure:
        if isinstance(error, OSError):
            code = error.errno
            name = errno.errorcode.get(code, str(code)) if code is not None else ""
            path = error.filename if error.filename is not None else ""
            return cls(errno=name, message=error.strerror or str(error), path=str(path))
        return cls(errno="", message=str(error) or type(error).__name__)

    def describe(self) -> str:
        """One line a user reads: `EMFILE (Too many open files): /data/t-0/00.log`."""
        head = f"{self.errno} ({self.message})" if self.errno else self.message
        return f"{head}: {self.path}" if self.path else head

    def fields(self) -> dict[str, str]:
        """The event fields that say why (`errno`, `error`, `path`)."""
        return {"errno": self.errno, "error": self.message, "path": self.path}


class OfflinePartitions:
    """Kafka's `HostedPartition.Offline` entries of `ReplicaManager.allPartitions`: the
    partitions whose log this broker could not open (or whose replica failed a LeaderAndIsr
    with a storage error), each with why. Produce and fetch for one answer
    KAFKA_STORAGE_ERROR while it stays here."""

    def __init__(self) -> None:
        self._failures: dict[str, StorageFailure] = {}

    def mark(self, key: str, error: BaseException) -> StorageFailure:
        failure = StorageFailure.of(error)
        self._failures[key] = failure
        return failure

    def hold(self, key: str, failure: StorageFailure) -> None:
        """Offline for `failure`, as its replica said (a LeaderAndIsr it could not apply)."""
        self._failures[key] = failure

    def clear(self, key: str) -> None:
        self._failures.pop(key, None)

    def failure(self, key: str) -> StorageFailure | None:
        return self._failures.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._failures

    def __len__(self) -> int:
        return len(self._failures)

    def describe(self) -> dict[str, str]:
        """Each offline partition (`topic-partition`) with why, for tests and tools."""
        return {key: failure.describe() for key, failure in sorted(self._failures.items())}


def log_storage_error(
    actor: Any, event: str, *, topic: str, partition: int, failure: StorageFailure, **fields: Any
) -> None:
    """An error-level event of `actor` (a TracedActor) in its current trace: a replica's
    storage failed, and why (the errno's name, its message, the file)."""
    context = actor.trace_context
    _log.error(
        event,
        actor=actor.address,
        broker=actor.broker,
        trace_id=context.trace_id if context is not None else "",
        parent_span_id=context.parent_span_id if context is not None else "",
        topic=topic,
        partition=partition,
        **failure.fields(),
        **fields,
    )
