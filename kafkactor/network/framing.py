"""Size-prefixed frames: Kafka's `NetworkReceive`, as a pure byte-stream splitter."""

from __future__ import annotations

import struct
from collections.abc import Callable
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

    With `allocate` (the broker's request memory pool, KIP-72), a frame's size is asked of
    it as soon as its prefix is read: every frame returned was granted its length (the
    caller releases it once the request is answered; an empty frame is granted nothing).
    Refused, the decoder stops there (`waiting_for_memory`) holding only what was already
    read, and takes up again at the next `feed` (`feed(b"")` once memory was released);
    `granted` is what was granted to the incomplete frame it holds.
    """

    def __init__(self, max_bytes: int, allocate: Callable[[int], bool] | None = None) -> None:
        self.max_bytes = max_bytes
        self.allocate = allocate
        self.waiting_for_memory = False
        self._granted = 0  # granted to the frame at the head of the buffer
        self._buffer = bytearray()

    @property
    def granted(self) -> int:
        return self._granted

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
            if self.allocate is not None and size > 0 and not self._granted:
                if not self.allocate(size):
                    self.waiting_for_memory = True
                    break
                self._granted = size
            self.waiting_for_memory = False
            if end - start - _SIZE.size < size:
                break
            body = start + _SIZE.size
            with memoryview(buffer) as view:  # one copy of the frame, not two
                frames.append(view[body : body + size].tobytes())
            self._granted = 0
            start = body + size
        if start:
            del buffer[:start]
        return frames
