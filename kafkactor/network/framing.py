"""Size-prefixed frames: Kafka's `NetworkReceive`, as a pure byte-stream splitter."""

from __future__ import annotations

import struct
from typing import Final

_SIZE: Final = struct.Struct(">i")


class FrameSizeError(Exception):
    """A size prefix that is negative or larger than `socket.request.max.bytes`."""

    def __init__(self, size: int, limit: int) -> None:
        what = "negative" if size < 0 else f"larger than socket.request.max.bytes ({limit})"
        super().__init__(f"a frame size of {size} bytes is {what}")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Splits a connection's bytes into frames: a 4-byte big-endian size, then that many bytes.

    A size prefix over `max_bytes` (or negative) raises `FrameSizeError` as soon as its four
    bytes arrive, before any of the body is buffered, so memory per connection stays below
    `max_bytes` plus one read. `buffered` is what is held of an incomplete frame.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Take `data`; return the frames it completes, in order (each without its prefix)."""
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= _SIZE.size:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0 or size > self.max_bytes:
                raise FrameSizeError(size, self.max_bytes)
            if end - start - _SIZE.size < size:
                break
            body = start + _SIZE.size
            frames.append(bytes(buffer[body : body + size]))
            start = body + size
        if start:
            del buffer[:start]
        return frames
