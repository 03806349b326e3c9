"""A started `Scheduler` whose tasks run only when a test says so: a log's background work
(a roll's flush, the partition.metadata write) caught before it happens."""

from __future__ import annotations

from collections.abc import Callable

from kafkactor.timer import ManualClock
from kafkactor.timer.scheduler import ScheduledTask, Scheduler


class HeldScheduler(Scheduler):
    """Holds every task it is given: `held` names them, `run_held` runs them (once each)."""

    def __init__(self) -> None:
        super().__init__(ManualClock(0))
        self.held: list[str] = []
        self._tasks_held: list[ScheduledTask] = []

    @property
    def is_started(self) -> bool:
        return True

    def schedule(
        self,
        name: str,
        fn: Callable[[], object],
        delay_ms: int = 0,
        period_ms: int | None = None,
    ) -> ScheduledTask:
        task = ScheduledTask(
            self, name=name, fn=fn, delay_ms=delay_ms, period_ms=period_ms, due_ms=0
        )
        self.held.append(name)
        self._tasks_held.append(task)
        return task

    def run_held(self) -> list[str]:
        """Run the tasks held so far, oldest first; returns their names."""
        tasks, self._tasks_held, self.held = self._tasks_held, [], []
        for task in tasks:
            task.fn()
        return [task.name for task in tasks]
