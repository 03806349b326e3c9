"""Kafka's SimpleMemoryPool (KIP-72, queued.max.request.bytes)."""

from __future__ import annotations

import pytest

from kafkactor.security.memory_pool import UNBOUNDED, SimpleMemoryPool

pytestmark = pytest.mark.timeout(30)


def test_grants_while_memory_is_left_and_may_overdraw_by_one_request() -> None:
    pool = SimpleMemoryPool(1000, 800)
    assert pool.try_allocate(600)
    assert pool.try_allocate(800)  # 400 left: non-strict, as Kafka's broker builds it
    assert pool.allocated == 1400 and pool.available == -400
    assert pool.is_out_of_memory()
    assert not pool.try_allocate(1)
    pool.release(800)
    assert not pool.is_out_of_memory() and pool.available == 400


def test_strict_grants_only_what_fits() -> None:
    pool = SimpleMemoryPool(1000, strict=True)
    assert pool.try_allocate(600)
    assert not pool.try_allocate(500)
    assert pool.try_allocate(400)
    assert pool.available == 0


def test_listeners_are_told_when_memory_comes_back() -> None:
    pool = SimpleMemoryPool(100)
    woken: list[int] = []
    pool.add_listener(lambda: woken.append(pool.available))
    assert pool.try_allocate(60)
    pool.release(60)
    assert woken == []  # never ran out
    assert pool.try_allocate(100)
    assert not pool.try_allocate(10)
    pool.release(30)
    assert woken == [30]
    pool.release(70)
    assert woken == [30]  # already available: told once


def test_removed_listener_is_not_called() -> None:
    pool = SimpleMemoryPool(10)
    woken: list[bool] = []

    def listener() -> None:
        woken.append(True)

    pool.add_listener(listener)
    pool.remove_listener(listener)
    assert pool.try_allocate(10)
    pool.release(10)
    assert woken == []


def test_unbounded_pool_only_counts() -> None:
    pool = SimpleMemoryPool(UNBOUNDED)
    assert pool.try_allocate(10**12)
    assert not pool.is_out_of_memory()
    pool.release(10**12)
    assert pool.allocated == 0


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="positive or -1"):
        SimpleMemoryPool(0)
    with pytest.raises(ValueError, match=r"socket\.request\.max\.bytes must not exceed"):
        SimpleMemoryPool(100, 200)
    pool = SimpleMemoryPool(100, 50)
    with pytest.raises(ValueError, match="positive"):
        pool.try_allocate(0)
    with pytest.raises(ValueError, match="more than one allocation"):
        pool.try_allocate(51)
    with pytest.raises(ValueError, match="more than were allocated"):
        pool.release(1)
    assert pool.allocated == 0
