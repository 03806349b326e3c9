"""A one-line display of Spark's progress on stderr, fed by polling the status tracker."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from types import TracebackType
from typing import Any, Self, TextIO

POLL_S = 0.2
"""How often the tracker is polled."""

LINE_INTERVAL_S = 1.0
"""At most one line this often when stderr is not a terminal (a log file, CI)."""


def _stage_label(name: str, phase: str) -> str:
    """Spark's stage name is `<action> at <call site>`: keep the action (`parquet`, `count`).
    Adaptive execution names its query stages after a closure (`$anonfun$...`): the phase
    says more."""
    action = name.split(" at ", 1)[0].strip()
    if not action or action.startswith("$"):
        return phase or "query"
    return action


class ProgressDisplay:
    """Shows Spark's active stage and its tasks done / total while the analysis runs.

    A daemon thread polls `SparkContext.statusTracker()` every `POLL_S` seconds and writes
    one line, e.g. `spark: stage 3 (parquet) 12/16 tasks  [latency]`: rewritten in place
    (`\\r`) on a terminal, else printed as a new line when it changes, at most once a
    second. `phase` names what the analysis is doing. Use it as a context manager; `stop`
    clears the line and joins the thread.
    """

    def __init__(
        self, spark_context: Any, stream: TextIO | None = None, *, poll_s: float = POLL_S
    ) -> None:
        self._tracker = spark_context.statusTracker()
        self._stream = stream if stream is not None else sys.stderr
        self._poll_s = poll_s
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._phase = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spark-progress", daemon=True)
        self._shown = ""  # the line on screen (terminal) or printed last
        self._printed_at = 0.0
        self.lines_written = 0

    @property
    def phase(self) -> str:
        """What the analysis is doing now, shown after the stage."""
        return self._phase

    @phase.setter
    def phase(self, text: str) -> None:
        self._phase = text

    def start(self) -> Self:
        """Start polling."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling, wait for the thread and clear the line on a terminal."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self._tty and self._shown:
            self._stream.write("\r" + " " * len(self._shown) + "\r")
            self._stream.flush()
            self._shown = ""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def status(self) -> str:
        """The line for the current state of the tracker (empty when nothing to say)."""
        stages = []
        labels = set()
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                label = _stage_label(info.name, self._phase)
                labels.add(label)
                stages.append(
                    f"stage {info.stageId} ({label}) {info.numCompletedTasks}/{info.numTasks} tasks"
                )
        if not stages:
            return f"spark: {self._phase}" if self._phase else ""
        phase = f"  [{self._phase}]" if self._phase and self._phase not in labels else ""
        return "spark: " + ", ".join(stages) + phase

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                line = self.status()
            except Exception:  # the session stopped under us (py4j): nothing left to show
                return
            if line:
                self._show(line)

    def _show(self, line: str) -> None:
        if line == self._shown:
            return
        if self._tty:
            line = line[: max(shutil.get_terminal_size().columns - 1, 20)]  # never wrap
            if line == self._shown:
                return
            padding = " " * max(len(self._shown) - len(line), 0)
            self._stream.write("\r" + line + padding)
        else:
            now = time.monotonic()
            if now - self._printed_at < LINE_INTERVAL_S:
                return
            self._printed_at = now
            self._stream.write(line + "\n")
        self._stream.flush()
        self._shown = line
        self.lines_written += 1
