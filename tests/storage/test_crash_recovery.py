"""Crash recovery: a child process appends to a Log and is killed with SIGKILL, many times over.

The child appends batches whose content is a pure function of the batch number, flushes every
few batches and reports on stdout (`flushed <LEO>` after each flush, `appended <LEO>` after each
append when asked). The parent kills it at a chosen moment; in the first test, every other time,
it also cuts what was written after the last flush at a random byte, as a power loss could. It
then reopens the log with recovery point 0 (as if no checkpoint had been written) and checks
that everything that had to survive is there, that the files hold only whole, valid batches with
contiguous offsets from 0, and that the log still takes appends. The same directory is reused
across kills, so recovery also runs on logs it already recovered, and each child resumes from
the log end the parent left.

SIGKILL ends the process, not the machine: the page cache survives, so even unflushed appends
that completed must survive a plain kill. What a kill can leave behind is an index preallocated
and never trimmed, a segment rolled but still empty, or a batch whose write it interrupted.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import random
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import pytest

from kafkactor.storage.config import LogConfig
from kafkactor.storage.errors import TruncatedBatchError
from kafkactor.storage.log import Log
from kafkactor.storage.record_batch import iter_batches
from kafkactor.storage.records import Record
from kafkactor.timer import ManualClock

SEGMENT_BYTES = 64 * 1024
INDEX_INTERVAL_BYTES = 512
CONFIG = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL_BYTES)
CLOCK_MS = 1_700_000_000_000  # the records' timestamps are near it: no time-based roll
LINE_TIMEOUT_S = 30.0  # a guard against a hung child, far above the milliseconds a line takes


def batch_records(batch: int) -> list[Record]:
    """The records of batch number `batch`: 1-4 records whose key and values name the batch."""
    return [
        Record(
            b"batch-%d" % batch,
            b"batch-%d-record-%d:" % (batch, i) + bytes([batch % 251]) * ((batch * 37 + i) % 150),
            1_700_000_000_000 + batch,
        )
        for i in range(1 + batch % 4)
    ]


# The child: open the log, check it resumes where the parent left it, then append batch after
# batch, reporting on stdout, until `limit` batches; then wait on stdin to be killed.
CHILD_CODE = (
    textwrap.dedent(
        """
        from __future__ import annotations

        import sys
        from pathlib import Path

        from kafkactor import tracing

        tracing.configure(stream=sys.stderr.buffer)  # the child's events, for a failure's report

        from kafkactor.storage.config import LogConfig
        from kafkactor.storage.log import Log
        from kafkactor.storage.records import Record
        from kafkactor.timer import ManualClock
        """
    )
    + inspect.getsource(batch_records)
    + textwrap.dedent(
        """
        def main() -> None:
            directory, segment_bytes, interval, first, expected_end, flush_every, limit, report = (
                sys.argv[1:]
            )
            config = LogConfig(segment_bytes=int(segment_bytes), index_interval_bytes=int(interval))
            log = Log(Path(directory), config, 0, ManualClock(1_700_000_000_000))
            if log.log_end_offset != int(expected_end):
                sys.exit(f"log end {log.log_end_offset} on open, expected {expected_end}")
            out = sys.stdout
            batch = int(first)
            for n in range(1, int(limit) + 1):
                log.append_as_leader(batch_records(batch), leader_epoch=batch // 100)
                batch += 1
                if report == "1":
                    out.write(f"appended {log.log_end_offset}\\n")
                    out.flush()
                if n % int(flush_every) == 0:
                    log.flush()
                    out.write(f"flushed {log.log_end_offset}\\n")
                    out.flush()
            out.write("done\\n")
            out.flush()
            sys.stdin.read()  # wait for the kill


        main()
        """
    )
)


class ChildLines:
    """The child's stdout, line by line, each read bounded by a timeout (no blocking forever)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._fd = stream.fileno()
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._fd, selectors.EVENT_READ)

    def next(self) -> str | None:
        """The next line, or None at the end of the stream (the child exited)."""
        deadline = time.monotonic() + LINE_TIMEOUT_S
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no line from the child in {LINE_TIMEOUT_S} s")
            if not self._selector.select(remaining):
                continue
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self._selector.close()


class Child:
    """One appending child process; killed with SIGKILL on exit from the `with` block."""

    def __init__(
        self,
        log_dir: Path,
        stderr_path: Path,
        *,
        first_batch: int,
        expected_end: int,
        flush_every: int,
        limit: int,
        report_appends: bool,
    ) -> None:
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("wb")
        args = [
            str(log_dir),
            str(SEGMENT_BYTES),
            str(INDEX_INTERVAL_BYTES),
            str(first_batch),
            str(expected_end),
            str(flush_every),
            str(limit),
            "1" if report_appends else "0",
        ]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD_CODE, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        assert self.proc.stdout is not None
        self.lines = ChildLines(self.proc.stdout)

    def next_line(self) -> str:
        line = self.lines.next()
        if line is None or line == "done":
            self.proc.wait(timeout=LINE_TIMEOUT_S)
            self._stderr.flush()
            raise AssertionError(
                f"the child stopped early (exit {self.proc.returncode}, line {line!r}):\n"
                + self.stderr_path.read_text()
            )
        return line

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=LINE_TIMEOUT_S)
        assert self.proc.returncode == -signal.SIGKILL, self.stderr_path.read_text()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=LINE_TIMEOUT_S)
        self.lines.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self._stderr.close()


@dataclass(frozen=True, slots=True)
class Reopened:
    next_batch: int
    log_end_offset: int
    segments: int
    truncated_bytes: int


def check_files(log_dir: Path) -> list[tuple[int, int, list[Record]]]:
    """Every batch in the segment files, as (base offset, last offset, records).

    Each file must parse whole (no partial or damaged batch: iter_batches raises on one) and
    start with a batch at its own base offset.
    """
    found: list[tuple[int, int, list[Record]]] = []
    names = sorted(name for name in os.listdir(log_dir) if name.endswith(".log"))
    assert names, "no segment file"
    for name in names:
        data = (log_dir / name).read_bytes()
        batches = list(iter_batches(data, deep=True))
        if batches:
            assert batches[0].base_offset == int(name[:20]), name
        else:
            assert name == names[-1], f"empty segment {name} before the last one"
        found.extend(
            (b.base_offset, b.last_offset, [r.to_record() for r in b.records()]) for b in batches
        )
    return found


def reopen_and_check(
    log_dir: Path, rng: random.Random, *, survived_end: int, recovery_point: int = 0
) -> Reopened:
    """Reopen after a kill; check content, files and reads against `batch_records`; append one
    more batch and read it back; close. `survived_end` is the log end that must have survived."""
    log = Log(log_dir, CONFIG, recovery_point, ManualClock(CLOCK_MS))
    try:
        truncated = log.recovered_bytes_truncated
        batches = check_files(log_dir)
        # Offsets contiguous from 0, batch n holding batch_records(n).
        expected_base = 0
        for number, (base, last, records) in enumerate(batches):
            assert base == expected_base, (number, base, expected_base)
            assert records == batch_records(number), number
            assert last == base + len(records) - 1
            expected_base = last + 1
        end = log.log_end_offset
        assert end == expected_base
        assert end >= survived_end, f"lost offsets {end}..{survived_end - 1}"
        assert log.log_start_offset == 0
        # Reads (through the rebuilt indexes) agree with the files.
        for _ in range(20):
            if not end:
                break
            offset = rng.randrange(end)
            data = log.read(offset, 1).records
            batch = next(iter(iter_batches(data, deep=True)))
            assert batch.base_offset <= offset <= batch.last_offset
            number = next(n for n, (b, _, _) in enumerate(batches) if b == batch.base_offset)
            assert [r.to_record() for r in batch.records()] == batch_records(number)
        # The log takes appends again, and they read back.
        number = len(batches)
        info = log.append_as_leader(batch_records(number), leader_epoch=number // 100)
        assert info.first_offset == end
        appended = next(iter(iter_batches(log.read(end, 10**6).records, deep=True)))
        assert [r.to_record() for r in appended.records()] == batch_records(number)
        assert log.log_end_offset == info.last_offset + 1
        return Reopened(number + 1, log.log_end_offset, log.num_segments, truncated)
    finally:
        log.close()


def lose_unflushed_tail(log_dir: Path, flushed_end: int, rng: random.Random) -> None:
    """Simulate a power loss after the kill: the last segment loses a random part of what was
    written after the last flush, and may end in a run of zeros (blocks allocated, never
    written). Flushed data is never touched. The loss always leaves a torn tail for recovery
    to cut (a partial batch or zeros), however much the child wrote before the kill."""
    last = sorted(name for name in os.listdir(log_dir) if name.endswith(".log"))[-1]
    path = log_dir / last
    data = path.read_bytes()
    keep = 0  # where the flushed part of this file ends
    boundaries = {0}  # file positions where a whole batch ends
    with contextlib.suppress(TruncatedBatchError):  # the kill may have torn the last write
        for batch in iter_batches(data):
            boundaries.add(batch.position + batch.size_in_bytes)
            if batch.next_offset <= flushed_end:
                keep = batch.position + batch.size_in_bytes
    cut = rng.randint(keep, len(data))
    # A cut between batches still loses power mid-write: the unwritten blocks read as zeros.
    clean_cut = cut in boundaries
    zeros = rng.randint(1, 4096) if clean_cut else rng.choice([0, 0, rng.randint(1, 4096)])
    path.write_bytes(data[:cut] + bytes(zeros))


def parse(line: str) -> tuple[str, int]:
    kind, value = line.split()
    assert kind in ("flushed", "appended"), line
    return kind, int(value)


@pytest.mark.timeout(120)
def test_every_flushed_batch_survives_repeated_kills(tmp_path: Path) -> None:
    rng = random.Random(1234)
    log_dir = tmp_path / "crash-0"
    flush_every = 5
    state = Reopened(next_batch=0, log_end_offset=0, segments=1, truncated_bytes=0)
    for iteration in range(30):
        flushes = rng.randint(1, 20)
        with Child(
            log_dir,
            tmp_path / f"child-{iteration}.stderr",
            first_batch=state.next_batch,
            expected_end=state.log_end_offset,
            flush_every=flush_every,
            limit=25 * flush_every,
            report_appends=False,
        ) as child:
            flushed_end = -1
            for _ in range(flushes):
                kind, flushed_end = parse(child.next_line())
                assert kind == "flushed"
            child.kill()  # the child is still appending: the kill lands mid-loop
        assert flushed_end > state.log_end_offset
        power_loss = iteration % 2 == 1
        if power_loss:
            lose_unflushed_tail(log_dir, flushed_end, rng)
        state = reopen_and_check(log_dir, rng, survived_end=flushed_end)
        if power_loss:
            assert state.truncated_bytes > 0, f"recovery kept the torn tail ({iteration})"
    assert state.segments >= 4, "the test should have rolled segments"


@pytest.mark.timeout(120)
def test_a_kill_at_any_moment_keeps_every_completed_append(tmp_path: Path) -> None:
    rng = random.Random(1234)
    log_dir = tmp_path / "crash-1"
    state = Reopened(next_batch=0, log_end_offset=0, segments=1, truncated_bytes=0)
    for iteration in range(25):
        flush_every = rng.randint(1, 10)
        lines = rng.randint(1, 300)
        with Child(
            log_dir,
            tmp_path / f"child-{iteration}.stderr",
            first_batch=state.next_batch,
            expected_end=state.log_end_offset,
            flush_every=flush_every,
            limit=400,
            report_appends=True,
        ) as child:
            flushed_end = appended_end = state.log_end_offset
            for _ in range(lines):
                kind, end = parse(child.next_line())
                if kind == "flushed":
                    flushed_end = end
                else:
                    appended_end = end
            child.kill()
        assert flushed_end <= appended_end
        # A checkpoint would hold the flushed end: recover from there or from the start.
        recovery_point = rng.choice([0, flushed_end])
        # The page cache outlives a killed process: every completed append must survive.
        state = reopen_and_check(
            log_dir, rng, survived_end=appended_end, recovery_point=recovery_point
        )
    assert state.segments >= 4, "the test should have rolled segments"
