"""The producer's memory bound (Kafka's `buffer.memory` and `max.block.ms`)."""

from __future__ import annotations

import threading
import time


class BufferPool:
    """Kafka's producer `BufferPool`, the bound `buffer.memory` sets: the bytes of batches
    sent and not yet answered.

    `reserve` waits while another batch would not fit, until answers free room or the deadline
    passes (Kafka's `max.block.ms`); `release` frees a batch's bytes once its Future is done.
    `close` wakes every waiter. So a caller that sends faster than the brokers answer is slowed
    down to their pace, and what waits for them stays bounded.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._cond = threading.Condition()
        self._closed = False

    def reserve(self, size: int, timeout_s: float) -> bool:
        """Take `size` bytes (at most `total`); False when they were not free in time or the
        producer closed meanwhile."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.used + size > self.total and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            if self._closed:
                return False
            self.used += size
            return True

    def release(self, size: int) -> None:
        with self._cond:
            self.used -= size
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
