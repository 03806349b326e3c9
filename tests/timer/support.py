"""Test doubles shared by the timer tests."""

from __future__ import annotations

from kafkactor.timer import Clock, TimerTask


class RecordingTask(TimerTask):
    """A task that records when (on the test's clock) and how often it ran."""

    __slots__ = ("clock", "label", "ran_at")

    def __init__(self, delay_ms: int, clock: Clock, label: object = None) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.label = label
        self.ran_at: list[int] = []

    def run(self) -> None:
        self.ran_at.append(self.clock.now_ms())

    @property
    def runs(self) -> int:
        return len(self.ran_at)
