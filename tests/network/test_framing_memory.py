"""`FrameDecoder` with the request memory pool: a frame's body is read only once its size is
granted (KIP-72), whatever the chunking."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.network.framing import FrameDecoder
from kafkactor.security.memory_pool import SimpleMemoryPool

pytestmark = pytest.mark.timeout(60)

MAX = 1024


def sized(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def waiting(decoder: FrameDecoder) -> bool:
    return decoder.waiting_for_memory


def test_a_frame_waits_for_its_memory_holding_only_what_was_read() -> None:
    pool = SimpleMemoryPool(100, 100)
    decoder = FrameDecoder(MAX, pool.try_allocate)
    assert decoder.feed(sized(b"x" * 100)[:10]) == []
    assert (pool.allocated, decoder.granted) == (100, 100)  # granted at its prefix
    second = FrameDecoder(MAX, pool.try_allocate)
    assert second.feed(sized(b"y" * 50)[:20]) == []
    assert waiting(second) and second.granted == 0
    assert second.buffered == 20  # what was read already: nothing more is asked of it
    assert decoder.feed(sized(b"x" * 100)[10:]) == [b"x" * 100]
    assert decoder.granted == 0 and pool.allocated == 100  # the caller releases on answer
    assert second.feed(b"") == []  # still no memory
    pool.release(100)
    assert second.feed(b"") == [] and not waiting(second)
    assert second.feed(sized(b"y" * 50)[20:]) == [b"y" * 50]
    assert pool.allocated == 50


def test_empty_frames_take_no_memory() -> None:
    pool = SimpleMemoryPool(1)
    assert pool.try_allocate(1)
    decoder = FrameDecoder(MAX, pool.try_allocate)
    assert decoder.feed(sized(b"") * 3) == [b"", b"", b""]


@settings(max_examples=100, deadline=None)
@given(frames=st.lists(st.binary(max_size=64), max_size=8), data=st.data())
def test_every_frame_is_granted_its_length_whatever_the_chunking(
    frames: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(sized(f) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=20)))
    grants: list[int] = []

    def grant(size: int) -> bool:
        grants.append(size)
        return True

    decoder = FrameDecoder(MAX, grant)
    out: list[bytes] = []
    start = 0
    for end in [*cuts, len(stream)]:
        out += decoder.feed(stream[start:end])
        start = end
    assert out == frames
    assert grants == [len(f) for f in frames if f]
