"""Kafka's `ReplicaManager.describeLogDirs`: a broker's log directory and the replicas in it."""

from __future__ import annotations

import shutil

from kafkactor.messages import ErrorCode
from kafkactor.messages.delete_records import (
    DescribeLogDirsResponse,
    DescribeLogDirsTopic,
    LogDirDescription,
    LogDirPartition,
)
from kafkactor.storage import LogManager, StorageError


def describe_log_dirs(
    log_manager: LogManager, topics: tuple[DescribeLogDirsTopic, ...] | None
) -> DescribeLogDirsResponse:
    """The broker's one data directory (its absolute path, as Kafka names a log dir) with, for
    every log it holds that `topics` asks for (None: every log), its size in bytes (the sum of
    its segments' `.log` files, Kafka's `Log.size`), an offset lag of 0 (Kafka's
    `getLogEndOffsetLag` for a current replica: max(HW - LEO, 0), never above 0) and no future
    replica (there is no JBOD replica movement); and the disk's total and usable bytes (KIP-827,
    DescribeLogDirs v4). A directory that cannot be read answers KAFKA_STORAGE_ERROR."""
    wanted = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
    path = str(log_manager.data_dir.resolve())
    partitions = []
    try:
        for tp, log in sorted(
            log_manager.all_logs().items(), key=lambda item: (item[0].topic, item[0].partition)
        ):
            if wanted is not None and (tp.topic, tp.partition) not in wanted:
                continue
            partitions.append(
                LogDirPartition(topic=tp.topic, partition=tp.partition, size=log.size_in_bytes)
            )
        usage = shutil.disk_usage(path)
    except (OSError, StorageError):
        return DescribeLogDirsResponse(
            dirs=(LogDirDescription(path=path, error_code=ErrorCode.KAFKA_STORAGE_ERROR),)
        )
    return DescribeLogDirsResponse(
        dirs=(
            LogDirDescription(
                path=path,
                partitions=tuple(partitions),
                total_bytes=usage.total,
                usable_bytes=usage.free,
            ),
        )
    )
