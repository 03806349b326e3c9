"""Log compaction: the cleaner's throughput against a raw read and write of the same files.

A compacted ``Log`` (``--segment-kib`` segments) of ``--compact-mb`` of 10-record batches
(100-byte values) over ``--keys`` keys, built once and copied fresh for each run, cleaned whole
by ``LogCleaner().clean(log, now)`` (every inactive segment is dirty). Baseline in the same
process: the same segment files (the template's, as the run's are replaced by the cleaning)
read with ``os.read`` in the cleaner's buffer size and their bytes written to new files with
``os.write``, each new file fsynced at its end as the cleaner flushes each ``.cleaned``
segment. MB/s are dirty MB (10^6 bytes) over seconds; the ratio is cleaner over raw (who goes
first alternates between runs). The cleaner reads the dirty section twice (offset map, then
copy) and writes only what it keeps.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import _harness as h

from kafkactor.storage import Log, LogConfig, Record, build_batch
from kafkactor.storage.log_cleaner import CleanerStats, LogCleaner

KIB, MB = 1024, 1_000_000
RECORDS_PER_BATCH, VALUE_BYTES, BATCH_POOL = 10, 100, 64


class BenchError(RuntimeError):
    """The cleaner and the raw copy did not see the same bytes: the run has no figure."""


@dataclass(frozen=True, slots=True)
class CompactionRun:
    dirty_bytes: int
    segments: int
    cleaner_s: float
    raw_s: float
    bytes_written: int
    messages_read: int
    messages_written: int
    keys_mapped: int


def build_template(directory: Path, config: LogConfig, args: argparse.Namespace) -> int:
    """The compacted log every run cleans a copy of; its end offset. Its batches cycle through
    a pool in which every key appears (in a shuffled order), so each key is overwritten about
    equally often."""
    rng = random.Random(f"{args.seed}:compaction")
    now_ms = int(time.time() * 1000)
    keys = [f"key-{k:08d}".encode() for k in range(args.keys)]
    rng.shuffle(keys)
    pool_size = max(BATCH_POOL, -(-args.keys // RECORDS_PER_BATCH))
    pool = [
        build_batch(
            [
                Record(
                    keys[(b * RECORDS_PER_BATCH + r) % args.keys],
                    rng.randbytes(VALUE_BYTES),
                    now_ms,
                )
                for r in range(RECORDS_PER_BATCH)
            ],
            0,
        )
        for b in range(pool_size)
    ]
    log = Log(directory, config, recovery_point=0)
    try:
        written = 0
        for batch in itertools.cycle(pool):
            if written >= args.compact_mb * MB:
                break
            log.append_as_leader(batch, leader_epoch=0)
            written += len(batch)
        log.flush()
        return log.log_end_offset
    finally:
        log.close()


def raw_copy(sources: Sequence[Path], out: Path, buffer_size: int) -> tuple[float, int]:
    """Read each file with os.read, write its bytes to a new file, fsync it; the seconds and
    the bytes copied."""
    out.mkdir()
    copied = 0
    started = time.perf_counter()
    for k, source in enumerate(sources):
        src = os.open(source, os.O_RDONLY)
        dst = os.open(out / f"{k}.copy", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            while chunk := os.read(src, buffer_size):
                copied += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view) :]
            os.fsync(dst)
        finally:
            os.close(src)
            os.close(dst)
    return time.perf_counter() - started, copied


def compaction_run(root: Path, template: Path, config: LogConfig, run: int) -> CompactionRun:
    work = root / f"run-{run}"
    log_dir = work / template.name
    shutil.copytree(template, log_dir)
    log = Log(log_dir, config, clean_shutdown=True)
    try:
        sources = [segment.log_path for segment in log.segments[:-1]]  # the active one stays
        dirty = sum(path.stat().st_size for path in sources)
        # the raw side reads the template's identical files: a cleaning replaces the run's
        originals = [template / path.name for path in sources]
        cleaner = LogCleaner()
        stats: CleanerStats | None = None
        with h.gc_paused():
            raw_s = cleaned_s = 0.0
            copied = 0
            for side in ("raw", "clean") if run % 2 == 0 else ("clean", "raw"):
                if side == "raw":
                    raw_s, copied = raw_copy(originals, work / "raw", cleaner.io_buffer_size)
                else:
                    started = time.perf_counter()
                    stats = cleaner.clean(log, int(time.time() * 1000))
                    cleaned_s = time.perf_counter() - started
        if stats is None or stats.bytes_read != dirty or copied != dirty:
            read = stats.bytes_read if stats is not None else 0
            raise BenchError(f"{dirty} dirty bytes: the cleaner read {read}, the raw copy {copied}")
        return CompactionRun(
            dirty, len(sources), cleaned_s, raw_s, stats.bytes_written, stats.messages_read,
            stats.messages_written, stats.keys_mapped,
        )  # fmt: skip
    finally:
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def run_compaction(root: Path, args: argparse.Namespace) -> list[CompactionRun]:
    config = LogConfig(cleanup_policy="compact", segment_bytes=args.segment_kib * KIB)
    template = root / "template" / "compacted-0"  # a Log directory is <topic>-<partition>
    build_template(template, config, args)
    return [compaction_run(root, template, config, run) for run in range(args.runs)]


def compaction_table(runs: Sequence[CompactionRun], args: argparse.Namespace) -> str:
    first = runs[0]
    cleaner = h.Spread.of(r.dirty_bytes / MB / r.cleaner_s for r in runs)
    raw = h.Spread.of(r.dirty_bytes / MB / r.raw_s for r in runs)
    ratio = h.Spread.of(r.raw_s / r.cleaner_s for r in runs)
    head = ["dirty MB", "segments", "records", "keys", "kept MB", "cleaner MB/s", "raw MB/s"]
    head += ["cleaner/raw"]
    rows = [[
        f"{first.dirty_bytes / MB:.1f}", first.segments, f"{first.messages_read:,}",
        f"{first.keys_mapped:,}", f"{first.bytes_written / MB:.2f}", cleaner.format(".1f"),
        raw.format(".0f"), ratio.format(".3f"),
    ]]  # fmt: skip
    notes = [
        f"median (min-max) of {args.runs} run(s), each on a fresh copy of the log;"
        f" {args.segment_kib} KiB segments, {RECORDS_PER_BATCH}-record batches of"
        f" {VALUE_BYTES}-byte values over {args.keys:,} keys; MB = 10^6 bytes of dirty log.",
        "raw: os.read of the same segment files (the template's, byte for byte), their bytes"
        " written with os.write to new files, each fsynced at its end; cleaner:"
        " LogCleaner().clean(log, now) of every inactive segment (it reads them twice: offset"
        " map, then copy).",
    ]
    return h.table(head, rows, notes)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "compaction_bench",
        "Log compaction against a raw read and write of the same segment files.",
        "runs, each on a fresh copy of the log (5; --quick 3)",
    )
    p.add_argument("--compact-mb", type=h.positive_int, help="compacted log size, MB (20)")
    p.add_argument("--segment-kib", type=h.positive_int, help="its segment size, KiB (1024)")
    p.add_argument("--keys", type=h.positive_int, help="distinct keys of the compacted log (1000)")
    p.add_argument("--dir", type=Path, help="where the temporary directory goes")
    return h.fill(
        p.parse_args(argv),
        runs=(5, 3, 1),
        compact_mb=(20, 8, 1),
        segment_kib=(1024, 1024, 128),
        keys=(1000, 1000, 100),
    )


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    base = args.dir if args.dir is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="kafkactor-compaction-bench-", dir=base))
    try:
        h.header(
            f"a compacted Log of {args.compact_mb} MB in {args.segment_kib} KiB segments,"
            f" {args.keys:,} keys, in one process; tracing off; {args.runs} run(s)",
            "command: benchmarks/compaction_bench.py "
            + " ".join(sys.argv[1:] if argv is None else argv),
        )
        with h.traced(False):
            print("Log compaction against a raw read and write of the same files")
            compactions = run_compaction(root, args)
            print(compaction_table(compactions, args), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    h.finish(args, started, {"compactions": compactions})
    return 0


if __name__ == "__main__":
    sys.exit(main())
