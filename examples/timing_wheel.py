"""The hierarchical timing wheel on its own, on a manual clock: tasks expire at their tick,
overflow wheels are created for long delays, and cancelling is O(1).

Run: .venv/bin/python examples/timing_wheel.py
"""

from collections.abc import Callable

from kafkactor.timer import CallbackTask, ManualClock, Timer

clock = ManualClock(0)
timer = Timer(clock, tick_ms=1, wheel_size=20)  # Kafka's SystemTimer defaults
fired: list[tuple[int, str]] = []


def record(name: str) -> Callable[[], None]:
    return lambda: fired.append((clock.now_ms(), name))


for delay in (5, 19, 20, 250, 8000):
    timer.add(CallbackTask(delay, record(f"{delay}ms task")))
cancelled = CallbackTask(100, record("cancelled task"))
timer.add(cancelled)
cancelled.cancel()
print("pending:", timer.size, "wheel levels:", len(timer.wheel.levels()))

for _ in range(8000):
    clock.advance(1)
    while timer.advance_clock(0):
        pass
for at, name in fired:
    print(f"t={at:5d}ms  {name}")
print("pending:", timer.size)
