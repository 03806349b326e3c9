"""Benchmark kafkactor's storage layer: log append against a raw file write, reads, recovery.

Run it as ``.venv/bin/python benchmarks/storage_bench.py`` (``--help`` lists the options;
``--quick`` is a ~20 s version). Everything runs in one process, in a fresh temporary directory
(under ``/tmp`` unless ``--dir``) that is deleted at the end; the free space is checked first.
MB means 10^6 bytes; KiB / MiB are powers of two.

Batch shapes
------------
A batch is what a producer sends: ``build_batch`` of uncompressed records with null keys, no
headers, random (incompressible) values and the current time as timestamp, base offset 0 and no
leader epoch. Four shapes, named by the total size of their values:

- ``1KiB x1``: one record with a 1024-byte value (a 1094-byte batch);
- ``1KiB x10``: ten records with 102-byte values (the same bytes cut into more records);
- ``100KiB x1``: one record with a 102400-byte value;
- ``100KiB x100``: a hundred records with 1024-byte values (what a producer's batch of small
  records looks like).

Each case cycles through a pool of 16 distinct batches of its shape, built before timing.

Part 1: append throughput
-------------------------
``Log.append_as_leader(batch_bytes, leader_epoch=0)`` for every batch: what a broker does with a
producer's request (validation of the batch header, CRC and every record's framing, offset and
epoch re-stamping, write). Two configurations: the default ``LogConfig`` (1 GiB segments: no roll)
and ``segment_bytes`` = 64 MiB (rolls included; note that ``Log`` fsyncs the finished segment
synchronously inside the append that rolls, so those rows include that fsync). The baseline is a
plain sequential ``os.write`` of the same batch objects, one call per batch, to a file opened
``O_WRONLY|O_CREAT|O_TRUNC`` in the same directory, in the same process. The log writes the same
sizes (its copies differ only in the re-stamped offset and epoch fields). No fsync in either,
except the roll fsync just mentioned, unless ``--fsync``: then both fsync once at the end of every
pass (``os.fsync`` / ``Log.flush``) and that time counts.

Each case writes ``--mb`` MB (default 256) to the log and as much to the raw file, interleaved
window by window: the batches are cut into windows of ~1 MiB and window k is written to both, raw
first for even k and log first for odd k, each window timed on its own (``perf_counter_ns``).
Why so fine an interleaving: on this VM the cost of a page-cache write depends on whether the
guest pages it gets are still backed by the host (free pages are reported back to the host after
a few seconds), and other processes come and go; coarse rounds let either drift land on one side
only, ~1 MiB alternation spreads it evenly. A case is then repeated: up to ``--passes`` passes
(default 3), each on a fresh log and raw file, but no new pass starts once the case has run
``--pass-budget`` seconds (default 8: the 100 KiB cases get 3 passes, the slow 1 KiB ones 1 or
2). Every window's time is the minimum over the passes (the windows are the same bytes in every
pass, so a roll falls in the same window each time and its cost is kept, while a burst of outside
load rarely hits the same window twice); rates are total bytes / summed window minima. The
per-pass ratios (plain sums) are printed too, to show the spread. gc is collected before and
disabled during a pass. Median and max window times are reported: the max shows stalls (a
roll's fsync). The files of a pass are deleted before the next pass starts (the data is never
read back; writes go to the page cache).

Target (from the issue): log append at least 50% of the raw write rate for 100 KiB batches;
PASS/FAIL is printed for every 100 KiB row.

Part 2: random-offset reads
---------------------------
A log of ``--read-batches`` (default 100000) ``1KiB x1`` batches (one offset per batch) is
written and then flushed (so no writeback competes with the reads; the data stays in the page
cache), then ``Log.read(offset, max_bytes)`` is timed for uniformly random offsets: ``--reads``
(default 10000) reads with ``max_bytes`` = 1 byte (the read still returns the one batch holding
the offset, KIP-74: this isolates locating the offset, i.e. index lookup + scan to the batch) and
with 64 KiB, and ``--reads`` / 10 reads with 1 MiB. Once with the default
``index_interval_bytes`` (4096) and once with 1 MiB (a much sparser index); the same offsets for
both. Every result is checked (first batch holds the offset, size bound respected) outside the
timed call.

Part 3: recovery
----------------
For each shape, ``--recovery-mb`` MB (default 100) are appended with the default ``LogConfig`` (one
segment), the log is closed without flushing, and the time to reopen it with
``recovery_point=0`` is measured: a full recovery (every batch's CRC and record structure
re-checked, the index rebuilt). The data was just written, so every read hits the page cache
(warm cache, partly dirty): this measures recovery's CPU cost, not the disk. ``--cold-recovery``
instead fsyncs the files and drops them from the page cache (``posix_fadvise(DONTNEED)``) before
every reopen; the log's recovery point is 0 either way, so recovery re-reads everything.
Each reopen is timed ``--recovery-runs`` times (default 3, median reported), closing without a
flush in between, so every run is a full recovery of the same bytes.
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import functools
import gc
import io
import json
import logging
import math
import os
import platform
import pstats
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import structlog

from kafkactor.storage.config import LogConfig
from kafkactor.storage.log import Log
from kafkactor.storage.records import Record, build_batch
from kafkactor.timer import Scheduler

KIB = 1024
MIB = 1024 * 1024
MB = 1_000_000

DEFAULT_MB = 256
QUICK_MB = 64
DEFAULT_ROLL_SEGMENT_MIB = 64
QUICK_ROLL_SEGMENT_MIB = 8  # so that --quick's smaller cases still roll
POOL_SIZE = 16
WINDOW_BYTES = MIB
DEFAULT_PASSES = 3
DEFAULT_PASS_BUDGET_S = 8.0
QUICK_PASS_BUDGET_S = 2.0

DEFAULT_READ_BATCHES = 100_000
QUICK_READ_BATCHES = 20_000
DEFAULT_READS = 10_000
QUICK_READS = 2_000
SPARSE_INDEX_INTERVAL = MIB
READ_SIZES = (1, 64 * KIB, MIB)
LARGE_READ_DIVISOR = 10  # 1 MiB reads are this many times fewer (each walks ~1000 batches)

DEFAULT_RECOVERY_MB = 100
QUICK_RECOVERY_MB = 25
DEFAULT_RECOVERY_RUNS = 3
QUICK_RECOVERY_RUNS = 1

DEFAULT_SEED = 20_240_611
SPACE_MARGIN = 256 * MIB

# Target
TARGET_BATCH_KIB = 100
TARGET_MIN_RATIO = 0.5

LOG_DIR_NAME = "bench-0"  # Log wants <topic>-<partition>
RAW_FILE_NAME = "raw-write.bin"

_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Shape:
    """A producer batch: `records` records whose values total `batch_kib` KiB."""

    batch_kib: int
    records: int

    @property
    def name(self) -> str:
        return f"{self.batch_kib}KiB x{self.records}"

    @property
    def value_bytes(self) -> int:
        return self.batch_kib * KIB // self.records


SHAPES = (Shape(1, 1), Shape(1, 10), Shape(100, 1), Shape(100, 100))
READ_SHAPE = Shape(1, 1)


def build_pool(shape: Shape, seed: int, size: int = POOL_SIZE) -> list[bytes]:
    """`size` distinct producer batches of `shape` (all the same length)."""
    rng = random.Random(f"{seed}:{shape.name}")
    now_ms = time.time_ns() // 1_000_000  # segment.ms counts from the batches' timestamps
    pool = [
        build_batch(
            [Record(None, rng.randbytes(shape.value_bytes), now_ms) for _ in range(shape.records)],
            0,
        )
        for _ in range(size)
    ]
    if len({len(batch) for batch in pool}) != 1:
        raise AssertionError(f"{shape.name}: batches of unequal sizes")
    return pool


def cycle(pool: Sequence[bytes], count: int) -> list[bytes]:
    """`count` batches taken from `pool` in turn."""
    return [pool[i % len(pool)] for i in range(count)]


@functools.cache
def broker_scheduler() -> Scheduler:
    """The background scheduler a broker's LogManager hands its logs (started once, on first use).

    With it a roll's flush of the finished segment runs asynchronously, as in Kafka, instead of
    inside the append that rolled.
    """
    scheduler = Scheduler(threads=1).startup()
    atexit.register(scheduler.shutdown)
    return scheduler


def new_log(directory: Path, config: LogConfig, recovery_point: int = 0) -> Log:
    return Log(directory, config, recovery_point=recovery_point, scheduler=broker_scheduler())


class BenchmarkError(AssertionError):
    """The storage layer did not do what was asked: the numbers would be meaningless."""


# --------------------------------------------------------------------------------------------
# Part 1: append throughput
# --------------------------------------------------------------------------------------------


Writer = Callable[[bytes], object]


def time_window(write: Writer, batches: Sequence[bytes]) -> int:
    """Nanoseconds to call `write` on every batch."""
    clock = time.perf_counter_ns
    start = clock()
    for batch in batches:
        write(batch)
    return clock() - start


def time_finish(finish: Callable[[], None] | None) -> int:
    if finish is None:
        return 0
    start = time.perf_counter_ns()
    finish()
    return time.perf_counter_ns() - start


@dataclass(frozen=True, slots=True)
class Interleaved:
    """Window times (ns) of both writers over the same windows, and their final fsyncs."""

    raw_windows: list[int]
    log_windows: list[int]
    raw_finish: int
    log_finish: int


def interleaved_writes(
    raw: Writer,
    log: Writer,
    batches: Sequence[bytes],
    window: int,
    finishes: tuple[Callable[[], None] | None, Callable[[], None] | None],
) -> Interleaved:
    """Write every window of `window` batches with both writers, alternating who goes first."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        raw_windows: list[int] = []
        log_windows: list[int] = []
        for k, low in enumerate(range(0, len(batches), window)):
            chunk = batches[low : low + window]
            if k % 2 == 0:
                raw_windows.append(time_window(raw, chunk))
                log_windows.append(time_window(log, chunk))
            else:
                log_windows.append(time_window(log, chunk))
                raw_windows.append(time_window(raw, chunk))
        raw_finish = time_finish(finishes[0])
        log_finish = time_finish(finishes[1])
    finally:
        if was_enabled:
            gc.enable()
    return Interleaved(raw_windows, log_windows, raw_finish, log_finish)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """One shape and segment size: the log's and the raw file's rates over the same bytes."""

    shape: str
    records_per_batch: int
    value_bytes: int
    batch_bytes: int
    segment_bytes: int
    batches: int
    total_bytes: int
    passes: int
    pass_ratios: list[float]  # log/raw of each pass on its own (plain sums)
    raw_s: float  # summed per-window minima over the passes (+ the final fsync's minimum)
    log_s: float
    raw_mb_s: float
    log_mb_s: float
    raw_batches_s: float
    log_batches_s: float
    ratio: float  # log rate / raw rate
    raw_window_p50_ms: float  # windows of ~1 MiB of batches
    raw_window_max_ms: float
    log_window_p50_ms: float
    log_window_max_ms: float
    raw_fsync_ms: float  # the final fsync with --fsync, else 0
    log_fsync_ms: float
    segments: int
    fsync: bool


def append_pass(
    root: Path, shape: Shape, segment_bytes: int, batches: Sequence[bytes], *, fsync: bool
) -> tuple[Interleaved, int]:
    """One pass: `batches` to a fresh log and a fresh raw file, interleaved; and the segments."""
    batch_bytes = len(batches[0])
    window = max(1, WINDOW_BYTES // batch_bytes)
    log_dir = root / LOG_DIR_NAME
    log = new_log(log_dir, LogConfig(segment_bytes=segment_bytes))
    raw_path = log_dir / RAW_FILE_NAME
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        raw_write = functools.partial(os.write, fd)
        log_write = functools.partial(log.append_as_leader, leader_epoch=0)
        raw_finish: Callable[[], None] | None = functools.partial(os.fsync, fd) if fsync else None
        log_finish: Callable[[], None] | None = log.flush if fsync else None
        timed = interleaved_writes(raw_write, log_write, batches, window, (raw_finish, log_finish))
        raw_size = os.fstat(fd).st_size
        written = len(batches) * batch_bytes
        if raw_size != written or log.size_in_bytes != written:
            raise BenchmarkError(
                f"{shape.name}: wrote {written} bytes, raw file has {raw_size}, log has "
                f"{log.size_in_bytes}"
            )
        if log.log_end_offset != len(batches) * shape.records:
            raise BenchmarkError(
                f"{shape.name}: log end offset {log.log_end_offset}, expected "
                f"{len(batches) * shape.records}"
            )
        return timed, log.num_segments
    finally:
        os.close(fd)
        raw_path.unlink()
        log.delete()


def elementwise_min(series: Sequence[Sequence[int]]) -> list[int]:
    return [min(values) for values in zip(*series, strict=True)]


def run_append_case(
    root: Path,
    shape: Shape,
    segment_bytes: int,
    total_bytes: int,
    *,
    max_passes: int,
    pass_budget_s: float,
    fsync: bool,
    seed: int,
) -> AppendResult:
    """Up to `max_passes` passes (no new pass once `pass_budget_s` is spent); per-window minima."""
    pool = build_pool(shape, seed)
    batch_bytes = len(pool[0])
    count = max(1, total_bytes // batch_bytes)
    batches = cycle(pool, count)
    started = time.perf_counter()
    passes: list[Interleaved] = []
    segments = 0
    while len(passes) < max_passes and (
        not passes or time.perf_counter() - started < pass_budget_s
    ):
        timed, segments = append_pass(root, shape, segment_bytes, batches, fsync=fsync)
        passes.append(timed)
    raw_windows = elementwise_min([p.raw_windows for p in passes])
    log_windows = elementwise_min([p.log_windows for p in passes])
    raw_finish = min(p.raw_finish for p in passes)
    log_finish = min(p.log_finish for p in passes)
    raw_s = (sum(raw_windows) + raw_finish) / 1e9
    log_s = (sum(log_windows) + log_finish) / 1e9
    written = count * batch_bytes
    return AppendResult(
        shape=shape.name,
        records_per_batch=shape.records,
        value_bytes=shape.value_bytes,
        batch_bytes=batch_bytes,
        segment_bytes=segment_bytes,
        batches=count,
        total_bytes=written,
        passes=len(passes),
        pass_ratios=[
            (sum(p.raw_windows) + p.raw_finish) / (sum(p.log_windows) + p.log_finish)
            for p in passes
        ],
        raw_s=raw_s,
        log_s=log_s,
        raw_mb_s=written / MB / raw_s,
        log_mb_s=written / MB / log_s,
        raw_batches_s=count / raw_s,
        log_batches_s=count / log_s,
        ratio=raw_s / log_s,
        raw_window_p50_ms=statistics.median(raw_windows) / 1e6,
        raw_window_max_ms=max(raw_windows) / 1e6,
        log_window_p50_ms=statistics.median(log_windows) / 1e6,
        log_window_max_ms=max(log_windows) / 1e6,
        raw_fsync_ms=raw_finish / 1e6,
        log_fsync_ms=log_finish / 1e6,
        segments=segments,
        fsync=fsync,
    )


def size_label(n: int) -> str:
    """Bytes as a short power-of-two label (1 GiB, 64 MiB, 4 KiB, 4096 B)."""
    for unit, name in ((1 << 30, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


def format_append_table(results: Sequence[AppendResult]) -> str:
    header = (
        f"{'shape':<13}{'segment':>9}{'batch B':>9}{'batches':>9}{'MB':>6}"
        f"{'raw MB/s':>10}{'log MB/s':>10}{'raw batch/s':>13}{'log batch/s':>13}"
        f"{'log/raw':>8}{'segs':>5}{'pass':>5}{'raw 1MiB ms':>13}{'log 1MiB ms':>13}"
    )
    lines = [header]
    for r in results:
        lines.append(
            f"{r.shape:<13}{size_label(r.segment_bytes):>9}{r.batch_bytes:>9}{r.batches:>9}"
            f"{r.total_bytes / MB:>6.0f}{r.raw_mb_s:>10.0f}{r.log_mb_s:>10.0f}"
            f"{r.raw_batches_s:>13.0f}{r.log_batches_s:>13.0f}{r.ratio:>8.2f}{r.segments:>5}{r.passes:>5}"
            f"{r.raw_window_p50_ms:>7.1f}/{r.raw_window_max_ms:<5.1f}"
            f"{r.log_window_p50_ms:>7.1f}/{r.log_window_max_ms:<5.1f}"
        )
    lines.append(
        "log/raw: log rate / raw write rate over the same bytes; pass: passes run (rates from the"
        " per-window minima). 1MiB ms: median/max time of a window of ~1 MiB of batches (a stall,"
        " e.g. a roll's fsync, shows in the max)."
    )
    for r in results:
        if r.fsync:
            lines.append(
                f"  {r.shape} {size_label(r.segment_bytes)}: final fsync raw {r.raw_fsync_ms:.1f}"
                f" ms, log {r.log_fsync_ms:.1f} ms (included in the rates)"
            )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Part 2: random-offset reads
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Latency of `Log.read` at random offsets for one index interval and one max_bytes."""

    index_interval_bytes: int
    index_entries: int
    log_batches: int
    max_bytes: int
    reads: int
    p50_us: float
    p99_us: float
    mean_us: float
    max_us: float
    mean_bytes_returned: float


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def check_read(data: bytes, offset: int, max_bytes: int) -> None:
    """The first batch returned holds `offset`, and the size bound is respected."""
    if len(data) < _LAST_OFFSET_DELTA_AT + 4:
        raise BenchmarkError(f"read at {offset} returned {len(data)} bytes")
    base, length = _PREFIX.unpack_from(data, 0)
    (last_delta,) = _LAST_OFFSET_DELTA.unpack_from(data, _LAST_OFFSET_DELTA_AT)
    if not base <= offset <= base + last_delta:
        raise BenchmarkError(f"read at {offset} starts with offsets {base}..{base + last_delta}")
    if len(data) > max(max_bytes, length + 12):
        raise BenchmarkError(f"read at {offset} returned {len(data)} bytes > {max_bytes}")


def time_reads(log: Log, offsets: Sequence[int], max_bytes: int) -> tuple[list[float], float]:
    """Latency (µs) of `log.read(offset, max_bytes)` for each offset, and the mean bytes read."""
    read = log.read
    clock = time.perf_counter_ns
    latencies: list[float] = []
    returned = 0
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for offset in offsets:
            start = clock()
            result = read(offset, max_bytes)
            latencies.append((clock() - start) / 1e3)
            check_read(result.records, offset, max_bytes)
            returned += len(result.records)
    finally:
        if was_enabled:
            gc.enable()
    return latencies, returned / len(offsets)


def run_read_case(
    root: Path, index_interval: int, batches: int, reads: int, seed: int
) -> tuple[list[ReadResult], float]:
    """Write a log of `batches` 1 KiB batches, then time random reads; also µs per append."""
    pool = build_pool(READ_SHAPE, seed)
    log = new_log(root / LOG_DIR_NAME, LogConfig(index_interval_bytes=index_interval))
    try:
        append = log.append_as_leader
        started = time.perf_counter()
        for batch in cycle(pool, batches):
            append(batch, leader_epoch=0)
        append_us = (time.perf_counter() - started) / batches * 1e6
        log.flush()
        end = log.log_end_offset
        if end != batches:
            raise BenchmarkError(f"log end offset {end} after {batches} one-record batches")
        entries = sum(segment.index.entries for segment in log.segments)
        results = []
        for max_bytes in READ_SIZES:
            count = reads if max_bytes < MIB else max(1, reads // LARGE_READ_DIVISOR)
            rng = random.Random(f"{seed}:reads:{max_bytes}")  # same offsets for both indexes
            offsets = [rng.randrange(end) for _ in range(count)]
            latencies, mean_bytes = time_reads(log, offsets, max_bytes)
            latencies.sort()
            results.append(
                ReadResult(
                    index_interval_bytes=index_interval,
                    index_entries=entries,
                    log_batches=batches,
                    max_bytes=max_bytes,
                    reads=count,
                    p50_us=percentile(latencies, 0.50),
                    p99_us=percentile(latencies, 0.99),
                    mean_us=statistics.fmean(latencies),
                    max_us=latencies[-1],
                    mean_bytes_returned=mean_bytes,
                )
            )
    finally:
        log.delete()
    return results, append_us


def format_read_table(results: Sequence[ReadResult]) -> str:
    header = (
        f"{'index interval':>15}{'entries':>9}{'max_bytes':>11}{'reads':>7}"
        f"{'p50 us':>10}{'p99 us':>10}{'mean us':>10}{'max us':>10}{'mean B read':>13}"
    )
    lines = [header]
    for r in results:
        lines.append(
            f"{size_label(r.index_interval_bytes):>15}{r.index_entries:>9}"
            f"{size_label(r.max_bytes):>11}{r.reads:>7}{r.p50_us:>10.1f}{r.p99_us:>10.1f}"
            f"{r.mean_us:>10.1f}{r.max_us:>10.1f}{r.mean_bytes_returned:>13.0f}"
        )
    lines.append(
        "max_bytes 1 B: the read returns just the batch holding the offset (KIP-74), i.e. the"
        " cost of locating it."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Part 3: recovery
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """Full recovery (recovery_point=0) of one shape's unflushed log."""

    shape: str
    batch_bytes: int
    batches: int
    total_bytes: int
    runs_s: list[float]
    median_s: float
    s_per_100mb: float
    mb_s: float
    batches_s: float
    index_entries_written: int
    index_entries_recovered: int
    cold: bool


def drop_from_page_cache(directory: Path) -> None:
    """Fsync every file of `directory` and ask the kernel to drop its cached pages."""
    for path in directory.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_recovery_case(
    root: Path, shape: Shape, total_bytes: int, runs: int, *, cold: bool, seed: int
) -> RecoveryResult:
    """Append `total_bytes` of `shape`, close without flushing, time full-recovery reopens."""
    pool = build_pool(shape, seed)
    batch_bytes = len(pool[0])
    count = max(1, total_bytes // batch_bytes)
    log_dir = root / LOG_DIR_NAME
    config = LogConfig()
    log = new_log(log_dir, config)
    try:
        append = log.append_as_leader
        for batch in cycle(pool, count):
            append(batch, leader_epoch=0)
        end = log.log_end_offset
        entries_written = sum(segment.index.entries for segment in log.segments)
        log.close()  # no flush: the recovery point stays 0
        times: list[float] = []
        entries_recovered = 0
        for _ in range(runs):
            if cold:
                drop_from_page_cache(log_dir)
            gc.collect()
            started = time.perf_counter()
            log = new_log(log_dir, config, recovery_point=0)
            times.append(time.perf_counter() - started)
            if log.log_end_offset != end or log.recovered_bytes_truncated:
                raise BenchmarkError(
                    f"{shape.name}: recovery ended at offset {log.log_end_offset} (expected "
                    f"{end}) and truncated {log.recovered_bytes_truncated} bytes"
                )
            entries_recovered = sum(segment.index.entries for segment in log.segments)
            log.close()
    finally:
        log.delete()
    written = count * batch_bytes
    median = statistics.median(times)
    return RecoveryResult(
        shape=shape.name,
        batch_bytes=batch_bytes,
        batches=count,
        total_bytes=written,
        runs_s=times,
        median_s=median,
        s_per_100mb=median * 100 * MB / written,
        mb_s=written / MB / median,
        batches_s=count / median,
        index_entries_written=entries_written,
        index_entries_recovered=entries_recovered,
        cold=cold,
    )


def format_recovery_table(results: Sequence[RecoveryResult]) -> str:
    header = (
        f"{'shape':<13}{'batch B':>9}{'batches':>9}{'MB':>6}{'median s':>10}{'s/100MB':>9}"
        f"{'MB/s':>8}{'batch/s':>10}{'index entries w/r':>19}  runs s"
    )
    lines = [header]
    for r in results:
        runs = "/".join(f"{t:.3f}" for t in r.runs_s)
        lines.append(
            f"{r.shape:<13}{r.batch_bytes:>9}{r.batches:>9}{r.total_bytes / MB:>6.0f}"
            f"{r.median_s:>10.3f}{r.s_per_100mb:>9.3f}{r.mb_s:>8.0f}{r.batches_s:>10.0f}"
            f"{r.index_entries_written:>10}/{r.index_entries_recovered:<8}  {runs}"
        )
    lines.append(
        "index entries w/r: entries after the appends / after recovery (the same rule builds both)."
    )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Profile of the append path
# --------------------------------------------------------------------------------------------


def profile_appends(root: Path, shape: Shape, total_bytes: int, seed: int, top: int) -> str:
    """cProfile of `append_as_leader` for `total_bytes` of `shape` (no roll), top by tottime."""
    pool = build_pool(shape, seed)
    batches = cycle(pool, max(1, total_bytes // len(pool[0])))
    log = new_log(root / LOG_DIR_NAME, LogConfig())
    profiler = cProfile.Profile()
    try:
        append = log.append_as_leader
        profiler.enable()
        for batch in batches:
            append(batch, leader_epoch=0)
        profiler.disable()
    finally:
        log.delete()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return "\n".join(line for line in out.getvalue().splitlines() if line.strip())


# --------------------------------------------------------------------------------------------
# Targets, space, report
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetResult:
    name: str
    status: str
    detail: str


def evaluate_targets(results: Sequence[AppendResult]) -> list[TargetResult]:
    """log/raw >= 0.5 for every 100 KiB row of part 1."""
    targets = []
    for r in results:
        if r.batch_bytes < TARGET_BATCH_KIB * KIB:
            continue
        name = (
            f"log append >= {TARGET_MIN_RATIO:.0%} of raw write rate, {r.shape}, "
            f"{size_label(r.segment_bytes)} segments"
        )
        detail = f"log {r.log_mb_s:.0f} MB/s, raw {r.raw_mb_s:.0f} MB/s, ratio {r.ratio:.2f}"
        status = "PASS" if r.ratio >= TARGET_MIN_RATIO else "FAIL"
        targets.append(TargetResult(name, status, detail))
    return targets


def space_needed(args: argparse.Namespace) -> int:
    """Peak bytes on disk: a part-1 case holds its log and its raw file at once."""
    part1 = 2 * args.mb * MB if 1 in args.parts else 0
    part2 = args.read_batches * 1200 if 2 in args.parts else 0
    part3 = args.recovery_mb * MB if 3 in args.parts else 0
    return int(max(part1, part2, part3) * 1.1) + SPACE_MARGIN


def parse_parts(text: str) -> tuple[int, ...]:
    parts = tuple(sorted({int(p) for p in text.split(",") if p.strip()}))
    if not parts or not set(parts) <= {1, 2, 3}:
        raise argparse.ArgumentTypeError(f"parts are 1, 2 and 3, not {text!r}")
    return parts


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="kafkactor storage: log append vs raw write, random reads, recovery."
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a ~20 s run: {QUICK_MB} MB per append case with {QUICK_ROLL_SEGMENT_MIB} MiB "
        f"roll segments, {QUICK_READ_BATCHES} batches / {QUICK_READS} reads, "
        f"{QUICK_RECOVERY_MB} MB recoveries run once",
    )
    parser.add_argument("--mb", type=int, help=f"MB per append case (default {DEFAULT_MB})")
    parser.add_argument(
        "--roll-segment-mib",
        type=int,
        help=f"segment_bytes of the rolling case, MiB (default {DEFAULT_ROLL_SEGMENT_MIB})",
    )
    parser.add_argument(
        "--passes",
        type=int,
        default=DEFAULT_PASSES,
        help=f"most passes per append case (default {DEFAULT_PASSES})",
    )
    parser.add_argument(
        "--pass-budget",
        type=float,
        help=f"seconds after which an append case starts no new pass (default "
        f"{DEFAULT_PASS_BUDGET_S:.0f}, --quick {QUICK_PASS_BUDGET_S:.0f})",
    )
    parser.add_argument(
        "--fsync",
        action="store_true",
        help="fsync both files at the end of every append pass (timed)",
    )
    parser.add_argument(
        "--read-batches", type=int, help=f"1 KiB batches in the read log ({DEFAULT_READ_BATCHES})"
    )
    parser.add_argument(
        "--reads", type=int, help=f"random reads per case (default {DEFAULT_READS})"
    )
    parser.add_argument(
        "--recovery-mb", type=int, help=f"MB per recovery case (default {DEFAULT_RECOVERY_MB})"
    )
    parser.add_argument(
        "--recovery-runs", type=int, help=f"reopens per recovery case ({DEFAULT_RECOVERY_RUNS})"
    )
    parser.add_argument(
        "--cold-recovery",
        action="store_true",
        help="fsync and drop the log from the page cache before every recovery",
    )
    parser.add_argument(
        "--parts", type=parse_parts, default=(1, 2, 3), help="which parts to run (default 1,2,3)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print a cProfile summary of the append path for every shape",
    )
    parser.add_argument("--dir", type=Path, help="where to create the temporary directory")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results as JSON")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = {
        "mb": QUICK_MB if quick else DEFAULT_MB,
        "roll_segment_mib": QUICK_ROLL_SEGMENT_MIB if quick else DEFAULT_ROLL_SEGMENT_MIB,
        "read_batches": QUICK_READ_BATCHES if quick else DEFAULT_READ_BATCHES,
        "reads": QUICK_READS if quick else DEFAULT_READS,
        "recovery_mb": QUICK_RECOVERY_MB if quick else DEFAULT_RECOVERY_MB,
        "recovery_runs": QUICK_RECOVERY_RUNS if quick else DEFAULT_RECOVERY_RUNS,
    }
    if args.pass_budget is None:
        args.pass_budget = QUICK_PASS_BUDGET_S if quick else DEFAULT_PASS_BUDGET_S
    if args.passes < 1:
        parser.error("--passes must be >= 1")
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
        elif getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def print_header(args: argparse.Namespace, root: Path) -> None:
    usage = shutil.disk_usage(root)
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}) on "
        f"{platform.platform()}, {os.cpu_count()} CPUs"
    )
    print(f"work dir {root} ({usage.free / 2**30:.0f} GiB free); MB = 10^6 bytes")
    print(
        "batches: null keys, no headers, random values, CREATE_TIME now; "
        + ", ".join(f"{s.name} = {s.records} x {s.value_bytes} B" for s in SHAPES)
        + f"; each case cycles {POOL_SIZE} distinct batches"
    )
    if 1 in args.parts:
        print(
            f"part 1: {args.mb} MB per case, raw and log interleaved per ~1 MiB window, up to "
            f"{args.passes} passes (none started after {args.pass_budget:g} s), per-window minima;"
            " segments "
            f"1 GiB (default) and {args.roll_segment_mib} MiB; "
            + (
                "fsync at the end of every pass (timed)"
                if args.fsync
                else "no fsync in the timed path (a roll's flush of the finished segment runs on "
                "the broker's background scheduler, as in Kafka)"
            )
        )
    if 2 in args.parts:
        print(
            f"part 2: log of {args.read_batches} {READ_SHAPE.name} batches, flushed; "
            f"{args.reads} random reads (1 MiB reads: {max(1, args.reads // LARGE_READ_DIVISOR)})"
            f"; index intervals 4 KiB and {size_label(SPARSE_INDEX_INTERVAL)}"
        )
    if 3 in args.parts:
        cache = (
            "cold: fsync + POSIX_FADV_DONTNEED before each reopen"
            if args.cold_recovery
            else "warm: data just written, in the page cache"
        )
        print(
            f"part 3: {args.recovery_mb} MB per shape, closed unflushed, reopened with "
            f"recovery_point=0, {args.recovery_runs} run(s), median; {cache}"
        )
    print(f"gc disabled in timed loops; seed={args.seed}")
    print(flush=True)


def write_json(path: Path, args: argparse.Namespace, document: dict[str, object]) -> None:
    params = {
        key: (list(value) if isinstance(value, tuple) else value)
        for key, value in vars(args).items()
        if key not in {"json", "dir"}
    }
    full = {
        "python": sys.version,
        "platform": platform.platform(),
        "parameters": params,
        **document,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(full, indent=2) + "\n")


def run(args: argparse.Namespace, root: Path) -> dict[str, object]:
    """Run the selected parts, printing as they go; return the results for JSON."""
    document: dict[str, object] = {}
    if 1 in args.parts:
        print("Part 1: append throughput, Log.append_as_leader vs os.write of the same batches")
        appends: list[AppendResult] = []
        segment_sizes = (LogConfig().segment_bytes, args.roll_segment_mib * MIB)
        for segment_bytes in segment_sizes:
            for shape in SHAPES:
                started = time.perf_counter()
                result = run_append_case(
                    root,
                    shape,
                    segment_bytes,
                    args.mb * MB,
                    max_passes=args.passes,
                    pass_budget_s=args.pass_budget,
                    fsync=args.fsync,
                    seed=args.seed,
                )
                appends.append(result)
                print(
                    f"  {shape.name:<12} {size_label(segment_bytes):>7}: log/raw {result.ratio:.2f}"
                    f"; {result.passes} pass(es), each pass's log/raw "
                    + "/".join(f"{ratio:.2f}" for ratio in result.pass_ratios)
                    + f" ({time.perf_counter() - started:.1f} s)",
                    flush=True,
                )
        print()
        print(format_append_table(appends))
        print()
        targets = evaluate_targets(appends)
        for target in targets:
            print(f"[{target.status}] {target.name}: {target.detail}")
        print(flush=True)
        document["append"] = [asdict(r) for r in appends]
        document["targets"] = [asdict(t) for t in targets]
    if 2 in args.parts:
        print("Part 2: Log.read at uniformly random offsets")
        reads: list[ReadResult] = []
        append_us: dict[int, float] = {}
        for interval in (LogConfig().index_interval_bytes, SPARSE_INDEX_INTERVAL):
            started = time.perf_counter()
            results, append_us[interval] = run_read_case(
                root, interval, args.read_batches, args.reads, args.seed
            )
            reads.extend(results)
            print(
                f"  index interval {size_label(interval)}: "
                f"{results[0].index_entries} index entries "
                f"({time.perf_counter() - started:.1f} s)",
                flush=True,
            )
        print()
        print(format_read_table(reads))
        print(flush=True)
        document["reads"] = [asdict(r) for r in reads]
    if 3 in args.parts:
        print("Part 3: full recovery of an unflushed log (reopen with recovery_point=0)")
        recoveries: list[RecoveryResult] = []
        for shape in SHAPES:
            started = time.perf_counter()
            recovery = run_recovery_case(
                root,
                shape,
                args.recovery_mb * MB,
                args.recovery_runs,
                cold=args.cold_recovery,
                seed=args.seed,
            )
            recoveries.append(recovery)
            print(
                f"  {shape.name:<12}: {recovery.s_per_100mb:.3f} s per 100 MB "
                f"({time.perf_counter() - started:.1f} s)",
                flush=True,
            )
        print()
        print(format_recovery_table(recoveries))
        print(flush=True)
        document["recovery"] = [asdict(r) for r in recoveries]
    if args.profile:
        print("Profile: cProfile of Log.append_as_leader, 1 GiB segments (profiler overhead ")
        print("inflates Python-level calls; compare the shares, not absolute times)")
        for shape in SHAPES:
            print(f"--- {shape.name}, {min(args.mb, 32)} MB")
            print(profile_appends(root, shape, min(args.mb, 32) * MB, args.seed, top=12))
    return document


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    # Log rolls are logged at INFO; keep the table output clean (warnings still show).
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = args.dir if args.dir is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    needed = space_needed(args)
    free = shutil.disk_usage(base).free
    if free < needed:
        print(
            f"not enough space in {base}: {free / MB:.0f} MB free, {needed / MB:.0f} MB needed",
            file=sys.stderr,
        )
        return 2
    root = Path(tempfile.mkdtemp(prefix="kafkactor-storage-bench-", dir=base))
    try:
        print_header(args, root)
        document = run(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    wall_s = time.perf_counter() - started
    print(f"total wall time {wall_s:.1f} s")
    if args.json is not None:
        document["wall_time_s"] = wall_s
        write_json(args.json, args, document)
        print(f"results written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
