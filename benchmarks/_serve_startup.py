"""scale_bench's start-up part: ``kafkactor serve`` from spawn to the first acknowledged record.

Each run spawns ``python -m kafkactor serve --brokers N --port 0 --data-dir <tmp>
--default-replication-factor N`` in a session of its own (the actor runtime from
``KAFKACTOR_ACTOR_RUNTIME``), reads its stdout until the ``bootstrap.servers=...`` line
(printed once every broker listens: the "ready" time), then a new confluent-kafka producer
(librdkafka's defaults, acks=all) sends one 100-byte record to a topic the broker auto-creates
(RF N) and waits for its delivery report: the "first ack" time. Both from the spawn. Then the
process group gets SIGTERM (the clean shutdown is timed: "exit"), and SIGKILL if it has not
exited within ``KILL_AFTER_S``, always, whatever happened before.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

TOPIC = "scale-startup"
VALUE = b"x" * 100
KILL_AFTER_S = 15.0
READER_JOIN_S = 5.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# resolved here, not in the forked child (where another thread may hold the loader's lock)
_PRCTL = getattr(ctypes.CDLL(None), "prctl", None) if sys.platform == "linux" else None


@dataclass(frozen=True, slots=True)
class Startup:
    """One spawn of `kafkactor serve`: seconds from the spawn (NaN: not reached)."""

    runtime: str
    brokers: int
    ready_s: float
    first_ack_s: float
    exit_s: float
    error: str


def _lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def die_with_parent() -> None:
    """In the child before exec: SIGKILL when this process dies (Linux's PR_SET_PDEATHSIG),
    so a benchmark killed outright leaves no server behind (its session is its own)."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


def _drained(lines: queue.Queue[str | None]) -> list[str]:
    """The non-empty lines read so far."""
    said: list[str] = []
    with contextlib.suppress(queue.Empty):
        while (line := lines.get_nowait()) is not None:
            if line:
                said.append(line)
    return said


def _first_ack(bootstrap: str, timeout_s: float) -> str:
    """A new acks=all producer's first record: "" once acknowledged, else why not."""
    from confluent_kafka import Producer  # imported by the caller already (not timed)

    outcome: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(TOPIC, VALUE, on_delivery=lambda err, _msg: outcome.append(str(err or "")))
    producer.flush(timeout_s)
    return outcome[0] if outcome else f"no delivery report within {timeout_s:g} s"


def _stop(process: subprocess.Popen[str]) -> float:
    """SIGTERM to the group; SIGKILL after KILL_AFTER_S. Seconds to exit (NaN: killed)."""
    started = time.perf_counter()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(KILL_AFTER_S)
        return time.perf_counter() - started
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return math.nan


def spawn_to_first_ack(
    brokers: int, runtime: str, env: Mapping[str, str], timeout_s: float
) -> Startup:
    """One run (see the module's docstring); an error is a result, never a raise or a hang."""
    import confluent_kafka  # noqa: F401  (loaded before the clock starts)

    root = Path(tempfile.mkdtemp(prefix="scale-bench-serve-"))
    command = [
        sys.executable, "-m", "kafkactor", "serve", "--brokers", str(brokers), "--port", "0",
        "--data-dir", str(root / "data"), "--default-replication-factor", str(brokers),
    ]  # fmt: skip
    lines: queue.Queue[str | None] = queue.Queue()
    ready = first_ack = exit_s = math.nan
    error = ""
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
        start_new_session=True,  # its own process group: see `_stop`
        preexec_fn=die_with_parent,  # noqa: PLW1509  (one foreign call, resolved before)
    )
    assert process.stdout is not None and process.stderr is not None
    errors: queue.Queue[str | None] = queue.Queue()  # drained as it comes: never blocking
    readers = [
        threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True),
        threading.Thread(target=_lines, args=(process.stderr, errors), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        bootstrap = ""
        while not bootstrap:
            left = started + timeout_s - time.perf_counter()
            line = lines.get(timeout=left) if left > 0 else None
            if line is None:
                said = _drained(errors)
                last = f": {said[-1]}" if said else ""
                raise RuntimeError(f"no bootstrap.servers line (exit code {process.poll()}){last}")
            if line.startswith("bootstrap.servers="):
                bootstrap = line.partition("=")[2]
        ready = time.perf_counter() - started
        error = _first_ack(bootstrap, max(1.0, started + timeout_s - time.perf_counter()))
        if not error:
            first_ack = time.perf_counter() - started
    except (queue.Empty, RuntimeError) as failed:
        error = str(failed) or f"nothing within {timeout_s:g} s"
    finally:
        exit_s = _stop(process)
        for reader in readers:
            reader.join(READER_JOIN_S)
        shutil.rmtree(root, ignore_errors=True)
    return Startup(runtime, brokers, ready, first_ack, exit_s, error)
