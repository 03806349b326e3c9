"""The local launcher's child processes: start one (detached or not), find it again by pid,
signal it and wait for it, the way Kafka's `bin/*-start.sh` and `bin/*-stop.sh` scripts do
with `nohup`, `ps` and `kill`.

A pid outlives the process it named: the OS hands it out again. So a process is "ours" only
while its `/proc/<pid>/cmdline` still names its marker (a broker's properties file, a
ZooKeeper's zoo.cfg); nothing here signals a pid that fails that test. A zombie has no command
line any more, so it counts as dead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

__all__ = [
    "START_MARKER",
    "ProcessState",
    "accepts",
    "exit_status",
    "free_port",
    "log_tail",
    "process_state",
    "send_signal",
    "spawn",
    "terminate",
    "wait_until_dead",
]

ProcessState = Literal["running", "paused", "dead"]
START_MARKER = "--- kafkactor: starting "  # opens each start's part of a log file
POLL_S = 0.02

# The pids this process spawned: only these may be reaped here (waitpid), so that a zombie of
# ours does not linger as "alive" and no one else's child is reaped behind its back; and the
# exit codes of those reaped.
_SPAWNED: set[int] = set()
_EXIT_CODES: dict[int, int] = {}


def spawn(
    command: Sequence[str],
    log_path: Path,
    *,
    detached: bool,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start `command` with stdin from /dev/null and stdout and stderr appended to `log_path`
    (after a line naming the command and the time); returns its pid.

    `detached`: in a session of its own (`setsid`), so it outlives the command that started it
    and is not sent the terminal's SIGINT or SIGHUP.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"{START_MARKER}{now}: {' '.join(command)}\n")
    file_actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log_path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    pid = os.posix_spawnp(
        command[0],
        list(command),
        dict(os.environ if env is None else env),
        file_actions=file_actions,
        setsid=detached,
    )
    _SPAWNED.add(pid)
    _EXIT_CODES.pop(pid, None)
    return pid


def exit_status(pid: int) -> int | None:
    """The exit code of `pid` (-N: killed by signal N) once it has exited, if this process
    spawned it (reaping it). None when it is still running or is not a child of this one."""
    if pid in _SPAWNED:
        try:
            reaped, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            _SPAWNED.discard(pid)
        else:
            if reaped:
                _SPAWNED.discard(pid)
                _EXIT_CODES[pid] = os.waitstatus_to_exitcode(status)
    return _EXIT_CODES.get(pid)


def _stat_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name may hold spaces and parens
    return fields[0] if fields else None


def _arguments(pid: int) -> list[str]:
    """The process's command line: of its main thread, or, once that thread has exited while
    others still run (its line then reads empty), of another of its threads."""
    paths = [Path(f"/proc/{pid}/cmdline")]
    with contextlib.suppress(OSError):
        tasks = os.listdir(f"/proc/{pid}/task")
        paths += [Path(f"/proc/{pid}/task/{task}/cmdline") for task in tasks]
    for path in paths:
        try:
            cmdline = path.read_bytes()
        except OSError:
            continue
        if cmdline:
            return cmdline.decode(errors="replace").split("\0")
    return []


def _is_ours(pid: int, marker: str) -> bool:
    return marker in _arguments(pid)


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def process_state(pid: int | None, marker: str) -> ProcessState:
    """The process's state: "running", "paused" (stopped by SIGSTOP: state T) or "dead" (gone,
    a zombie, or the pid now names a process none of whose arguments is `marker`)."""
    if pid is None or pid <= 0:
        return "dead"
    exit_status(pid)  # reap our own zombie, so that the pid reads as gone
    state = _stat_state(pid)
    # A zombie main thread whose process still has other threads is a process on its way out
    # (a JVM's main thread may end first): still alive until its last thread has gone.
    if state is None or state in "Xx" or (state == "Z" and _threads(pid) <= 1):
        exit_status(pid)  # it may have died since the first look
        return "dead"
    # A child of this process that is not reaped yet keeps its pid: it is ours even while its
    # command line still reads empty (for a moment after exec).
    if pid not in _SPAWNED and not _is_ours(pid, marker):
        return "dead"
    return "paused" if state in "Tt" else "running"


def send_signal(pid: int, marker: str, signum: int) -> bool:
    """Send `signum` to `pid` if it is still ours (see the module doc); whether it was sent."""
    if process_state(pid, marker) == "dead":
        return False
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True


def wait_until_dead(pid: int, marker: str, timeout_s: float) -> bool:
    """Poll until `pid` is no longer our live process; False when `timeout_s` passed first."""
    deadline = time.monotonic() + timeout_s
    while process_state(pid, marker) != "dead":
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def terminate(pid: int, marker: str, grace_s: float) -> Literal["exited", "killed", "gone"]:
    """SIGTERM (and SIGCONT, so that a paused process can act on it), then SIGKILL when it has
    not exited within `grace_s`. "exited": it stopped on SIGTERM; "killed": it needed SIGKILL;
    "gone": it was not running (or not ours)."""
    if not send_signal(pid, marker, signal.SIGTERM):
        return "gone"
    send_signal(pid, marker, signal.SIGCONT)
    if wait_until_dead(pid, marker, grace_s):
        return "exited"
    send_signal(pid, marker, signal.SIGKILL)
    wait_until_dead(pid, marker, 10.0)
    return "killed"


def free_port(avoid: Collection[int] = ()) -> int:
    """A loopback TCP port nobody listens on now (another process may still take it)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port not in avoid:
            return port


def accepts(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """Whether something accepts a TCP connection on host:port."""
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout_s):
        return True
    return False


def log_tail(path: Path, lines: int = 30) -> str:
    """The last `lines` lines of `path` written since its last start marker (see `spawn`)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"(no {path})"
    last_start = text.rfind(START_MARKER)
    if last_start >= 0:
        text = text[last_start:].partition("\n")[2]
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(no output)"
