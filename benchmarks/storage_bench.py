"""kafkactor's storage layer: log append against a raw file write, random reads, recovery.

Part 1 measures ``Log.append_as_leader`` (batch validation, CRC, offset and epoch re-stamping,
write) against the baseline in the same process: a plain ``os.write`` of the same batches to a
file in the same directory; the ratio log/raw is the result (target: >= 0.5 for 100 KiB
batches). Part 2 measures ``Log.read`` at random offsets with a dense and a sparse index; part 3
the full recovery of an unflushed log.

Batches: uncompressed, null keys, random values, four shapes named by their values' total size:
``1KiB x1``, ``1KiB x10``, ``100KiB x1`` and ``100KiB x100`` (a producer's batch of small
records); each case cycles 16 distinct prebuilt batches. MB = 10^6 bytes, KiB / MiB = 2^10 / 2^20.

Part 1: ``--mb`` per case, default segments (1 GiB: no roll) and ``--roll-segment-mib`` ones
(a roll's flush runs on the broker's background scheduler, as in Kafka). Raw and log writes are
interleaved window by window (~1 MiB, who goes first alternating), each window timed on its own,
so drift of the machine lands on both sides alike. Up to ``--runs`` passes per case (none started
after ``--pass-budget`` s), each on fresh files; rates come from the per-window minima over the
passes. No fsync unless ``--fsync`` (then both fsync at the end of every pass, timed).

Part 2: a log of ``--read-batches`` ``1KiB x1`` batches, flushed; ``--reads`` reads at uniformly
random offsets with max_bytes 1 B (the read still returns the batch holding the offset, KIP-74:
the cost of finding it), 64 KiB and (a tenth as many) 1 MiB; index interval 4 KiB and 1 MiB,
the same offsets for both; every result checked outside the timed call.

Part 3: ``--recovery-mb`` per shape appended to one segment, closed unflushed, and reopened with
recovery point 0 ``--runs`` times (every batch re-validated, the index rebuilt): warm page cache,
or ``--cold-recovery`` (fsync + POSIX_FADV_DONTNEED before each reopen).
"""

from __future__ import annotations

import argparse
import atexit
import functools
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import _harness as h

from kafkactor.storage import Log, LogConfig, Record, build_batch, iter_batches
from kafkactor.timer import Scheduler

KIB, MIB, MB = 1024, 1024 * 1024, 1_000_000
POOL_SIZE = 16
SPARSE_INDEX_INTERVAL = MIB
READ_SIZES = (1, 64 * KIB, MIB)
TARGET_KIB, TARGET_RATIO = 100, 0.5
LOG_DIR = "bench-0"  # a Log directory is <topic>-<partition>


@dataclass(frozen=True, slots=True)
class Shape:
    batch_kib: int
    records: int

    @property
    def name(self) -> str:
        return f"{self.batch_kib}KiB x{self.records}"


SHAPES = (Shape(1, 1), Shape(1, 10), Shape(100, 1), Shape(100, 100))


def batches(shape: Shape, count_or_bytes: int, seed: int, *, by_bytes: bool = True) -> list[bytes]:
    """Batches of `shape` cycled from a pool of distinct ones: enough for `count_or_bytes`
    bytes, or that many batches."""
    rng = random.Random(f"{seed}:{shape.name}")
    now_ms = time.time_ns() // 1_000_000
    value_bytes = shape.batch_kib * KIB // shape.records
    pool = [
        build_batch(
            [Record(None, rng.randbytes(value_bytes), now_ms) for _ in range(shape.records)], 0
        )
        for _ in range(POOL_SIZE)
    ]
    count = max(1, count_or_bytes // len(pool[0])) if by_bytes else count_or_bytes
    return [pool[i % POOL_SIZE] for i in range(count)]


@functools.cache
def scheduler() -> Scheduler:
    """The background scheduler a broker's LogManager gives its logs (a roll's flush runs there)."""
    started = Scheduler(threads=1).startup()
    atexit.register(started.shutdown)
    return started


def new_log(directory: Path, config: LogConfig) -> Log:
    return Log(directory, config, recovery_point=0, scheduler=scheduler())


def check(condition: bool, what: str) -> None:
    """The storage layer did not do what was asked: the figures would mean nothing."""
    if not condition:
        sys.exit(f"storage_bench: {what}")


def size_label(n: int) -> str:
    for unit, name in ((1 << 30, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------
# Part 1: append throughput against raw writes
# --------------------------------------------------------------------------------------------


def timed(write: Callable[[bytes], object], chunk: Sequence[bytes]) -> int:
    started = time.perf_counter_ns()
    for batch in chunk:
        write(batch)
    return time.perf_counter_ns() - started


def timed_call(call: Callable[[], object] | None) -> int:
    """ns to run `call` (0 when there is none)."""
    return timed(lambda _: call(), [b""]) if call is not None else 0


def append_pass(
    root: Path, data: Sequence[bytes], segment_bytes: int, fsync: bool
) -> tuple[list[int], list[int], int]:
    """Raw and log window times (ns, a final timed fsync last) of one pass; the segments."""
    log = new_log(root / LOG_DIR, LogConfig(segment_bytes=segment_bytes))
    raw_path = root / LOG_DIR / "raw-write.bin"
    fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    window = max(1, MIB // len(data[0]))
    raw_write = functools.partial(os.write, fd)
    log_write = functools.partial(log.append_as_leader, leader_epoch=0)
    raw: list[int] = []
    logged: list[int] = []
    try:
        with h.gc_paused():
            sides = ((raw, raw_write), (logged, log_write))
            for k, low in enumerate(range(0, len(data), window)):
                for times, write in sides if k % 2 == 0 else sides[::-1]:
                    times.append(timed(write, data[low : low + window]))
            raw.append(timed_call(functools.partial(os.fsync, fd) if fsync else None))
            logged.append(timed_call(log.flush if fsync else None))
        written = len(data) * len(data[0])
        check(os.fstat(fd).st_size == written == log.size_in_bytes, "sizes differ")
        return raw, logged, log.num_segments
    finally:
        os.close(fd)
        raw_path.unlink()
        log.delete()


@dataclass(frozen=True, slots=True)
class AppendResult:
    shape: str
    segment_bytes: int
    batch_bytes: int
    total_bytes: int
    raw_mb_s: float
    log_mb_s: float
    ratio: float  # log rate / raw rate, from the per-window minima
    pass_ratios: list[float]  # each pass on its own
    raw_window_ms: tuple[float, float]  # median, max of the ~1 MiB windows
    log_window_ms: tuple[float, float]
    segments: int


def run_append_case(
    root: Path, shape: Shape, segment_bytes: int, args: argparse.Namespace
) -> AppendResult:
    data = batches(shape, args.mb * MB, args.seed)
    started = time.perf_counter()
    passes: list[tuple[list[int], list[int], int]] = []
    while len(passes) < args.runs and (
        not passes or time.perf_counter() - started < args.pass_budget
    ):
        passes.append(append_pass(root, data, segment_bytes, args.fsync))
    raw = [min(ns) for ns in zip(*(p[0] for p in passes), strict=True)]
    logged = [min(ns) for ns in zip(*(p[1] for p in passes), strict=True)]
    written = len(data) * len(data[0])
    return AppendResult(
        shape.name, segment_bytes, len(data[0]), written, written / MB / (sum(raw) / 1e9),
        written / MB / (sum(logged) / 1e9), sum(raw) / sum(logged),
        [sum(p[0]) / sum(p[1]) for p in passes],
        (statistics.median(raw[:-1]) / 1e6, max(raw[:-1]) / 1e6),
        (statistics.median(logged[:-1]) / 1e6, max(logged[:-1]) / 1e6), passes[-1][2],
    )  # fmt: skip


def append_table(results: Sequence[AppendResult]) -> str:
    head = ["shape", "segment", "batch B", "MB", "raw MB/s", "log MB/s", "log/raw", "passes"]
    head += ["segs", "raw 1MiB ms", "log 1MiB ms"]
    note = "log/raw: log rate / raw write rate over the same bytes (per-window minima over the"
    note += " passes); passes: each pass's own log/raw; 1MiB ms: median/max window time."
    return h.table(head, [append_row(r) for r in results], [note])


def append_row(r: AppendResult) -> list[object]:
    return [
        r.shape, size_label(r.segment_bytes), r.batch_bytes, f"{r.total_bytes / MB:.0f}",
        f"{r.raw_mb_s:,.0f}", f"{r.log_mb_s:,.0f}", f"{r.ratio:.2f}",
        "/".join(f"{x:.2f}" for x in r.pass_ratios), r.segments,
        "{:.1f}/{:.1f}".format(*r.raw_window_ms), "{:.1f}/{:.1f}".format(*r.log_window_ms),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# Part 2: random-offset reads
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadResult:
    index_interval_bytes: int
    index_entries: int
    max_bytes: int
    reads: int
    p50_us: float
    p99_us: float
    max_us: float
    mean_bytes: float


def time_reads(log: Log, offsets: Sequence[int], max_bytes: int) -> tuple[list[float], float]:
    """µs per `log.read` at each offset (each result checked untimed), and mean bytes read."""
    latencies: list[float] = []
    returned = 0
    with h.gc_paused():
        for offset in offsets:
            started = time.perf_counter_ns()
            data = log.read(offset, max_bytes).records
            latencies.append((time.perf_counter_ns() - started) / 1e3)
            first = next(iter_batches(data, verify_crc=False), None)  # holds the offset
            ok = first is not None and first.base_offset <= offset <= first.last_offset
            check(
                ok and len(data) <= max(max_bytes, first.size_in_bytes if first else 0),
                f"read at {offset}",
            )
            returned += len(data)
    return latencies, returned / len(offsets)


def run_reads(root: Path, interval: int, args: argparse.Namespace) -> list[ReadResult]:
    log = new_log(root / LOG_DIR, LogConfig(index_interval_bytes=interval))
    try:
        for batch in batches(Shape(1, 1), args.read_batches, args.seed, by_bytes=False):
            log.append_as_leader(batch, leader_epoch=0)
        log.flush()
        check(log.log_end_offset == args.read_batches, "the read log's end offset")
        entries = sum(segment.index.entries for segment in log.segments)
        results = []
        for max_bytes in READ_SIZES:
            count = args.reads if max_bytes < MIB else max(1, args.reads // 10)
            rng = random.Random(f"{args.seed}:reads:{max_bytes}")  # the same for both indexes
            offsets = [rng.randrange(args.read_batches) for _ in range(count)]
            us, mean_bytes = time_reads(log, offsets, max_bytes)
            p50, p99 = h.percentile(us, 50), h.percentile(us, 99)
            results.append(
                ReadResult(interval, entries, max_bytes, count, p50, p99, max(us), mean_bytes)
            )
    finally:
        log.delete()
    return results


def read_table(results: Sequence[ReadResult]) -> str:
    dense = {r.max_bytes: r.p50_us for r in results if r.index_interval_bytes < MIB}
    head = ["index interval", "entries", "max_bytes", "reads", "p50 us", "p99 us", "max us"]
    head += ["mean B read", "p50 vs 4 KiB index"]
    rows = [
        [size_label(r.index_interval_bytes), r.index_entries, size_label(r.max_bytes), r.reads,
         f"{r.p50_us:.1f}", f"{r.p99_us:.1f}", f"{r.max_us:.1f}", f"{r.mean_bytes:,.0f}",
         f"{h.ratio(r.p50_us, dense.get(r.max_bytes, 0)):.2f}"]
        for r in results
    ]  # fmt: skip
    return h.table(head, rows, ["max_bytes 1 B returns just the batch holding the offset."])


# --------------------------------------------------------------------------------------------
# Part 3: recovery
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    shape: str
    batch_bytes: int
    total_bytes: int
    seconds: h.Spread
    mb_s: float  # at the median
    index_entries: tuple[int, int]  # after the appends, after recovery


def run_recovery(root: Path, shape: Shape, args: argparse.Namespace) -> RecoveryResult:
    data = batches(shape, args.recovery_mb * MB, args.seed)
    log_dir, config = root / LOG_DIR, LogConfig()
    log = new_log(log_dir, config)
    try:
        for batch in data:
            log.append_as_leader(batch, leader_epoch=0)
        end, entries = log.log_end_offset, [sum(s.index.entries for s in log.segments), 0]
        log.close()  # unflushed: the recovery point stays 0

        def reopen() -> float:
            nonlocal log
            if args.cold_recovery:
                for path in log_dir.iterdir():
                    fd = os.open(path, os.O_RDONLY)
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    os.close(fd)
            with h.gc_paused():
                started = time.perf_counter()
                log = new_log(log_dir, config)
                seconds = time.perf_counter() - started
            check(log.log_end_offset == end and not log.recovered_bytes_truncated, "recovery")
            entries[1] = sum(s.index.entries for s in log.segments)
            log.close()
            return seconds

        spread = h.repeat(args.runs, reopen)
    finally:
        log.delete()
    written = len(data) * len(data[0])
    return RecoveryResult(
        shape.name,
        len(data[0]),
        written,
        spread,
        written / MB / spread.median,
        (entries[0], entries[1]),
    )


def recovery_table(results: Sequence[RecoveryResult]) -> str:
    head = ["shape", "batch B", "MB", "seconds", "s per 100 MB", "MB/s", "index entries w/r"]
    rows = [
        [r.shape, r.batch_bytes, f"{r.total_bytes / MB:.0f}", r.seconds.format(".3f"),
         f"{r.seconds.median * 100 * MB / r.total_bytes:.3f}", f"{r.mb_s:,.0f}",
         "{}/{}".format(*r.index_entries)]
        for r in results
    ]  # fmt: skip
    return h.table(head, rows, ["seconds: median (min-max) of the reopens."])


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "storage_bench",
        "Log append vs raw write, random reads, recovery.",
        "append passes and recovery reopens per case (3; --quick 2)",
    )
    p.add_argument("--mb", type=h.positive_int, help="MB per append case (256; --quick 64)")
    p.add_argument("--roll-segment-mib", type=h.positive_int, help="rolling segments, MiB (64)")
    p.add_argument("--pass-budget", type=float, help="s after which no append pass starts (8)")
    p.add_argument("--fsync", action="store_true", help="fsync at the end of every append pass")
    p.add_argument("--read-batches", type=h.positive_int, help="batches of the read log (1e5)")
    p.add_argument("--reads", type=h.positive_int, help="random reads per case (1e4)")
    p.add_argument("--recovery-mb", type=h.positive_int, help="MB per recovery case (100)")
    p.add_argument("--cold-recovery", action="store_true", help="drop the page cache first")
    p.add_argument("--parts", type=h.int_list, default=(1, 2, 3), help="parts to run (1,2,3)")
    p.add_argument("--dir", type=Path, help="where the temporary directory goes")
    return h.fill(
        p.parse_args(argv),
        mb=(256, 64, 2),
        roll_segment_mib=(64, 8, 1),
        pass_budget=(8.0, 2.0, 0.5),
        read_batches=(100_000, 20_000, 2_000),
        reads=(10_000, 2_000, 200),
        recovery_mb=(100, 25, 1),
        runs=(3, 2, 1),
    )


def run(args: argparse.Namespace, root: Path) -> dict[str, object]:
    results: dict[str, object] = {}
    if 1 in args.parts:
        print("Part 1: Log.append_as_leader against os.write of the same batches")
        appends = []
        for segment_bytes in (LogConfig().segment_bytes, args.roll_segment_mib * MIB):
            for shape in SHAPES:
                appends.append(run_append_case(root, shape, segment_bytes, args))
                print(
                    f"  {shape.name} {size_label(segment_bytes)}: log/raw {appends[-1].ratio:.2f}",
                    flush=True,
                )
        print(append_table(appends))
        for r in appends:
            if r.batch_bytes >= TARGET_KIB * KIB:
                verdict = "PASS" if r.ratio >= TARGET_RATIO else "FAIL"
                print(
                    f"[{verdict}] log append >= {TARGET_RATIO:.0%} of the raw write rate,"
                    f" {r.shape}, {size_label(r.segment_bytes)} segments: {r.ratio:.2f}"
                )
        results["append"] = appends
    if 2 in args.parts:
        print("\nPart 2: Log.read at uniformly random offsets")
        reads = [
            r
            for i in (LogConfig().index_interval_bytes, SPARSE_INDEX_INTERVAL)
            for r in run_reads(root, i, args)
        ]
        print(read_table(reads))
        results["reads"] = reads
    if 3 in args.parts:
        print("\nPart 3: full recovery of an unflushed log (reopened with recovery point 0)")
        recoveries = [run_recovery(root, shape, args) for shape in SHAPES]
        print(recovery_table(recoveries))
        results["recovery"] = recoveries
    return results


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    base = args.dir if args.dir is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    needed = (
        max(2 * args.mb * MB, args.read_batches * 1200, args.recovery_mb * MB) * 1.1 + 256 * MIB
    )
    if shutil.disk_usage(base).free < needed:
        sys.exit(f"storage_bench: {needed / MB:.0f} MB needed in {base}")
    root = Path(tempfile.mkdtemp(prefix="kafkactor-storage-bench-", dir=base))
    try:
        h.header(
            f"work dir {root}; parts {','.join(map(str, args.parts))}; append {args.mb} MB per"
            f" case, up to {args.runs} pass(es) in {args.pass_budget:g} s, segments 1 GiB and"
            f" {args.roll_segment_mib} MiB{', fsync per pass' if args.fsync else ''}",
            f"reads: {args.read_batches} batches, {args.reads} reads; recovery:"
            f" {args.recovery_mb} MB per shape, {args.runs} reopen(s),"
            f" {'cold' if args.cold_recovery else 'warm'} page cache",
        )
        results = run(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    h.finish(args, started, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
