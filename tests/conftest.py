"""Suite-wide: commands that start with the session, for the slowest subprocess tests.

A test marked ``@pytest.mark.early(*argv, timeout_s=N)`` runs a command as a user would (its
own process, in an empty directory of its own). When the test is among those selected, the
command starts long before the test, and runs beside the tests before it; the test takes it
with the `early_run` fixture and waits for it. It runs at a lower priority, so the tests in
the foreground keep their core. It starts once the tests that use this process's own Spark
session (the `spark` fixture) are done, or when collection ends if none is selected: a
JVM beside that session slowed both down. The demo and the example that each
start Spark's JVM spend most of a minute waiting on it, while the rest of the suite leaves one
of the machine's two cores idle: started early, they cost the run almost nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest


def _niced(argv: Sequence[str]) -> list[str]:
    """`argv` at a lower priority (nice 10), as `./dev test`'s compiled-build job runs: the
    tests in the foreground keep their core, and the early command takes what is left."""
    nice = shutil.which("nice")
    return [nice, "-n", "10", *argv] if nice else list(argv)


class EarlyRun:
    """One command started early: its directory, and its exit status and output once done."""

    def __init__(self, argv: Sequence[str], timeout_s: float) -> None:
        self.argv = list(argv)
        self.timeout_s = timeout_s
        self._scratch = Path(tempfile.mkdtemp(prefix="kafkactor-early-"))
        self.cwd = self._scratch / "cwd"  # the command's working directory, empty at start
        self.cwd.mkdir()
        # output to files, not pipes: nobody reads a pipe until the test runs, and a full one
        # would stall the command
        self._stdout = (self._scratch / "stdout").open("w+", encoding="utf-8")
        self._stderr = (self._scratch / "stderr").open("w+", encoding="utf-8")
        self._deadline = time.monotonic() + timeout_s
        self.process = subprocess.Popen(
            _niced(self.argv),
            cwd=self.cwd,
            stdout=self._stdout,
            stderr=self._stderr,
            text=True,
            start_new_session=True,  # its own process group: `stop` ends its children too
        )

    def wait(self) -> subprocess.CompletedProcess[str]:
        """The finished command (TimeoutExpired past `timeout_s` from its start)."""
        try:
            self.process.wait(timeout=max(self._deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        self._stdout.seek(0)
        self._stderr.seek(0)
        return subprocess.CompletedProcess(
            self.argv, self.process.returncode, self._stdout.read(), self._stderr.read()
        )

    def stop(self) -> None:
        """End the command and whatever it left running, and remove its directory."""
        with contextlib.suppress(ProcessLookupError):  # the group is gone: nothing left
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self._stdout.close()
        self._stderr.close()
        shutil.rmtree(self._scratch, ignore_errors=True)


class _EarlyRuns:
    """The session's early commands: those waiting for their start, and those started."""

    def __init__(self) -> None:
        self.started: dict[str, EarlyRun] = {}
        self.pending: list[pytest.Item] = []
        self.start_after: str | None = None  # the last selected test using the `spark` fixture

    def plan(self, items: Sequence[pytest.Item]) -> None:
        self.pending = [item for item in items if item.get_closest_marker("early")]
        spark = [item.nodeid for item in items if "spark" in getattr(item, "fixturenames", ())]
        self.start_after = spark[-1] if spark else None
        if self.start_after is None:
            self.start_pending()

    def start_pending(self) -> None:
        for item in self.pending:
            self.started[item.nodeid] = _start(item)
        self.pending.clear()

    def take(self, item: pytest.Item) -> EarlyRun:
        """`item`'s run (started now if it was not: its test came before its start)."""
        run = self.started.pop(item.nodeid, None)
        if run is None:
            self.pending = [other for other in self.pending if other is not item]
            run = _start(item)
        return run

    def stop_all(self) -> None:
        for run in self.started.values():  # the tests that never ran (a failure with -x, say)
            run.stop()
        self.started.clear()
        self.pending.clear()


_EARLY = _EarlyRuns()


def _start(item: pytest.Item) -> EarlyRun:
    marker = item.get_closest_marker("early")
    assert marker is not None, f"{item.nodeid} takes early_run but has no early marker"
    return EarlyRun(marker.args, marker.kwargs["timeout_s"])


def pytest_collection_finish(session: pytest.Session) -> None:
    if not session.config.option.collectonly:
        _EARLY.plan(session.items)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if item.nodeid == _EARLY.start_after:
        _EARLY.start_pending()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _EARLY.stop_all()


@pytest.fixture
def early_run(request: pytest.FixtureRequest) -> Iterator[EarlyRun]:
    """This test's early command."""
    node = request.node
    assert isinstance(node, pytest.Item)
    run = _EARLY.take(node)
    try:
        yield run
    finally:
        run.stop()
