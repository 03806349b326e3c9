"""`FrameDecoder`: a byte stream split into size-prefixed frames, whatever its chunking."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.network.framing import FrameDecoder, FrameSizeError

MAX = 1024


def sized(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


def feed_in_chunks(decoder: FrameDecoder, stream: bytes, cuts: list[int]) -> list[bytes]:
    """Feed `stream` cut at `cuts` (sorted offsets); the frames completed, in order."""
    frames: list[bytes] = []
    start = 0
    for end in [*cuts, len(stream)]:
        frames += decoder.feed(stream[start:end])
        start = end
    return frames


@settings(max_examples=150, deadline=None)
@given(
    frames=st.lists(st.binary(max_size=64), max_size=8),
    data=st.data(),
)
def test_any_chunking_of_a_stream_of_frames_yields_the_same_frames(
    frames: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(sized(f) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(min_value=0, max_value=len(stream)), max_size=20)))
    decoder = FrameDecoder(MAX)
    assert feed_in_chunks(decoder, stream, cuts) == frames
    assert decoder.buffered == 0  # nothing left over once every frame is complete


@settings(max_examples=100, deadline=None)
@given(frame=st.binary(min_size=1, max_size=64), cut=st.data())
def test_an_incomplete_frame_is_held_until_its_last_byte(frame: bytes, cut: st.DataObject) -> None:
    stream = sized(frame)
    at = cut.draw(st.integers(min_value=0, max_value=len(stream) - 1))
    decoder = FrameDecoder(MAX)
    assert decoder.feed(stream[:at]) == []
    assert decoder.buffered == at
    assert decoder.feed(stream[at:]) == [frame]
    assert decoder.buffered == 0


def test_one_byte_at_a_time() -> None:
    frames = [b"a", b"", b"bc" * 100, b"\x00\x00\x00\x05"]
    stream = b"".join(sized(f) for f in frames)
    decoder = FrameDecoder(MAX)
    assert feed_in_chunks(decoder, stream, list(range(1, len(stream)))) == frames


def test_a_zero_length_frame_is_an_empty_frame() -> None:
    decoder = FrameDecoder(MAX)
    assert decoder.feed(sized(b"")) == [b""]
    assert decoder.feed(sized(b"") + sized(b"x") + sized(b"")) == [b"", b"x", b""]
    assert decoder.buffered == 0


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(MAX)
    assert decoder.feed(sized(b"x" * MAX)) == [b"x" * MAX]


@pytest.mark.parametrize("size", [MAX + 1, 2**31 - 1, -1, -(2**31)])
def test_a_bad_size_prefix_is_refused_as_soon_as_its_four_bytes_arrive(size: int) -> None:
    decoder = FrameDecoder(MAX)
    prefix = struct.pack(">i", size)
    assert decoder.feed(prefix[:3]) == []  # not yet a size: nothing to judge
    with pytest.raises(FrameSizeError) as raised:
        decoder.feed(prefix[3:])  # the body has not arrived: it is refused before it does
    assert raised.value.size == size
    assert raised.value.limit == MAX
    assert decoder.buffered <= 4  # nothing of the body was buffered


def test_a_bad_size_prefix_after_good_frames_is_refused_too() -> None:
    decoder = FrameDecoder(MAX)
    assert decoder.feed(sized(b"ok")) == [b"ok"]
    with pytest.raises(FrameSizeError):
        decoder.feed(struct.pack(">i", MAX + 1))
    assert decoder.buffered <= 4


def test_the_error_says_what_is_wrong() -> None:
    assert "negative" in str(FrameSizeError(-1, MAX))
    assert "socket.request.max.bytes (1024)" in str(FrameSizeError(MAX + 1, MAX))
