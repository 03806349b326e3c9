"""Clocks, Kafka's hierarchical timing wheel and SystemTimer, and the KafkaScheduler."""

from kafkactor.timer.clock import Clock, ManualClock, SystemClock
from kafkactor.timer.delay_queue import BucketQueue
from kafkactor.timer.scheduler import ScheduledTask, Scheduler
from kafkactor.timer.system_timer import Timer, run_inline
from kafkactor.timer.task import CallbackTask, TimerTask, TimerTaskEntry, TimerTaskList
from kafkactor.timer.wheel import TimingWheel

__all__ = [
    "BucketQueue",
    "CallbackTask",
    "Clock",
    "ManualClock",
    "ScheduledTask",
    "Scheduler",
    "SystemClock",
    "Timer",
    "TimerTask",
    "TimerTaskEntry",
    "TimerTaskList",
    "TimingWheel",
    "run_inline",
]
