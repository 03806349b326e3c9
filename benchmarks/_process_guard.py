"""process_bench's guard: takes its clusters down once the benchmark has exited, however it
exited. Run by ``process_bench.py`` (``python _process_guard.py ROOT``), not by hand.

The brokers and the ZooKeeper that ``kafkactor.server.launcher`` starts are detached (each in a
session of its own), so a benchmark that dies, or the kill of its process group that
``tests/test_benchmarks.py`` sends at teardown, does not reach them. This guard is detached as
well, its stdin a pipe whose other end only the benchmark holds: the read below ends when the
benchmark exits, a SIGKILL included. Then every cluster directory under ``ROOT`` (a
``cluster.json`` one level down) is thrown away (``launcher.kill`` of each broker, then
``launcher.down`` for its ZooKeeper) and ``ROOT`` removed; a directory that could not be taken
down keeps ``ROOT``, for ``kafkactor cluster down --dir``. After a normal run the benchmark
has taken its clusters down itself, so this only removes the directory.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

GRACE_S = 10.0  # ZooKeeper: SIGTERM, then SIGKILL


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        print("usage: _process_guard.py ROOT (run by process_bench.py)", file=sys.stderr)
        return 2
    root = Path(argv[1])
    sys.stdin.buffer.read()  # end of file: the benchmark has exited
    from kafkactor.server import launcher  # only now: the benchmark's start does not wait on it

    failed = False
    for state in sorted(root.glob("*/cluster.json")):
        directory = state.parent
        try:
            for broker in sorted(directory.glob("broker-*")):  # thrown away: no need to wait
                with contextlib.suppress(launcher.ClusterError):  # not running
                    launcher.kill(directory, int(broker.name.partition("-")[2]))
            launcher.down(directory, timeout_s=GRACE_S)  # ZooKeeper
        except Exception:  # the next directory all the same; this one stays for `cluster down`
            failed = True
    if not failed:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
