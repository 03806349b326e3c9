"""Kafka's request memory pool (KIP-72, `SimpleMemoryPool`): `queued.max.request.bytes`.

Every request's bytes, from the moment its size prefix is read until it is answered, are
counted against one pool per broker; when the pool is empty a connection that needs memory
stops being read (Kafka mutes it) and is read again when memory is released. So many
connections announcing large frames hold at most the pool, not their announced sizes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

__all__ = ["UNBOUNDED", "MemoryPool", "SimpleMemoryPool"]

UNBOUNDED: Final = -1  # queued.max.request.bytes's default: no pool (Kafka's MemoryPool.NONE)


class SimpleMemoryPool:
    """Kafka's `SimpleMemoryPool` (non-strict, as the broker builds it): `try_allocate(size)`
    grants `size` bytes while any memory is left (`available` >= 1), so the pool may be
    overdrawn by at most one request (a request larger than what is left still gets through
    once the pool is not empty, rather than waiting for ever); `strict` grants only what fits.
    `release(size)` gives bytes back; listeners added with `add_listener` are called (outside
    the lock) when a release makes memory available again after the pool was out of it.

    `size` -1 (`UNBOUNDED`) is Kafka's `MemoryPool.NONE`: every allocation is granted and
    only counted. Thread-safe.
    """

    def __init__(
        self,
        size: int = UNBOUNDED,
        max_single_allocation: int | None = None,
        *,
        strict: bool = False,
    ) -> None:
        if size != UNBOUNDED and size < 1:
            raise ValueError(f"queued.max.request.bytes must be positive or -1, got {size}")
        if (
            size != UNBOUNDED
            and max_single_allocation is not None
            and not 0 < max_single_allocation <= size
        ):
            raise ValueError(
                f"a pool of {size} bytes cannot grant a single allocation of up to "
                f"{max_single_allocation} bytes (socket.request.max.bytes must not exceed "
                "queued.max.request.bytes)"
            )
        self.size = size
        self.max_single_allocation = max_single_allocation
        self.strict = strict
        self._allocated = 0
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], object]] = []

    @property
    def bounded(self) -> bool:
        return self.size != UNBOUNDED

    @property
    def allocated(self) -> int:
        """Bytes granted and not yet released."""
        return self._allocated

    @property
    def available(self) -> int:
        """Bytes left (negative while overdrawn; very large when unbounded)."""
        return self.size - self._allocated if self.bounded else 2**63 - 1

    def is_out_of_memory(self) -> bool:
        return self.bounded and self.size - self._allocated < 1

    def try_allocate(self, size: int) -> bool:
        """Grant `size` bytes (True), or nothing (False: the caller waits for a release)."""
        if size < 1:
            raise ValueError(f"an allocation must be positive, got {size}")
        if self.max_single_allocation is not None and size > self.max_single_allocation:
            raise ValueError(f"{size} bytes is more than one allocation may take")
        with self._lock:
            if self.bounded:
                threshold = size if self.strict else 1
                if self.size - self._allocated < threshold:
                    return False
            self._allocated += size
            return True

    def release(self, size: int) -> None:
        """Give back bytes an allocation granted."""
        if size < 1:
            raise ValueError(f"a release must be positive, got {size}")
        with self._lock:
            was_out = self.bounded and self.size - self._allocated < 1
            self._allocated -= size
            if self._allocated < 0:
                self._allocated += size
                raise ValueError(f"released {size} bytes more than were allocated")
            woke = was_out and self.size - self._allocated >= 1
            listeners = list(self._listeners) if woke else []
        for listener in listeners:
            listener()

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Call `listener` whenever memory becomes available after the pool ran out."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], object]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def __repr__(self) -> str:
        size = "unbounded" if not self.bounded else f"{self.size}"
        return f"SimpleMemoryPool(size={size}, allocated={self._allocated})"


MemoryPool = SimpleMemoryPool  # the name of Kafka's interface, which the broker holds it as
