"""The compression codecs of a record batch's records section (Kafka's ``CompressionType``).

Bits 0-2 of a magic-2 batch's attributes name the codec of everything after the 61-byte header;
the header itself is never compressed. A broker stores a compressed batch as the producer sent
it (``compression.type=producer``) and decompresses it only to validate and count its records.
Every codec is ``cramjam``'s (Rust implementations, one wheel); what is Kafka's is the framing:

- **gzip**: a gzip stream (Java's ``GZIPOutputStream``); concatenated members are read on.
- **snappy**: Kafka's Java producer writes snappy-java's *xerial* framing: the 16-byte header
  ``\\x82SNAPPY\\x00`` + int32 version + int32 compatible version, then blocks of
  ``[int32 length][raw snappy block]``, each at most 32 KiB before compression. librdkafka
  writes one *raw* snappy block instead. Readers take both: the xerial magic, else raw snappy
  (snappy-java's ``SnappyInputStream`` falls back the same way). Version and compatible
  version are not checked: some producers write them little-endian.
- **lz4**: one LZ4 frame (Kafka's ``Lz4BlockOutputStream``): 64 KiB blocks, no content size, no
  content checksum, and *independent* blocks, the only kind Kafka's reader accepts.
- **zstd**: a zstd frame as zstd-jni's streaming ``ZstdOutputStream`` writes it, without the
  content size in its header; several frames are read on.

``decompress`` bounds what it produces by ``MAX_DECOMPRESSED_SIZE`` (a decompression bomb is
corruption, not an allocation) and turns every codec failure into ``CorruptRecordError``.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Final, NoReturn

import cramjam

from kafkactor.storage.errors import CorruptRecordError, UnsupportedCompressionError

__all__ = [
    "MAX_DECOMPRESSED_SIZE",
    "CompressionType",
    "compress",
    "decompress",
]


class CompressionType(IntEnum):
    """Bits 0-2 of a batch's attributes: the codec of its records (Kafka's ``CompressionType``).

    Ids 5-7 are unassigned: a batch naming one raises ``UnsupportedCompressionError``.
    """

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


MAX_DECOMPRESSED_SIZE: Final = 256 * 1024 * 1024
"""The most bytes one batch's records may decompress to: 256 x Kafka's default
``max.message.bytes`` (1 MiB). Past it the batch is corrupt, however valid its codec stream:
a ratio that high is a decompression bomb, and no producer builds such a batch."""

_INT32 = struct.Struct(">i")

# snappy-java's stream framing: magic, then version and compatible version (both 1).
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE: Final = 32 * 1024  # snappy-java's default block size
# Snappy's densest element is a 3-byte copy of 64 bytes: no block decompresses to more than
# 64/3 times its size, whatever size its preamble declares.
_SNAPPY_MAX_RATIO: Final = 22

_LZ4_FRAME_MAGIC: Final = b"\x04\x22\x4d\x18"  # 0x184D2204, little-endian
_LZ4_FRAME_HEADER_MIN: Final = 7  # magic, FLG, BD and the header checksum
_LZ4_BLOCK_INDEPENDENCE: Final = 0x20  # FLG bit 5

_ZSTD_LEVEL: Final = 3  # Kafka's default compression.zstd.level (KIP-390)

# The first try decompresses into a buffer this many times the compressed size (at least
# _FIRST_GUESS_MIN bytes): enough for the usual Kafka payload. A larger result is decompressed
# again into a lazily committed buffer of the whole bound.
_FIRST_GUESS_RATIO: Final = 8
_FIRST_GUESS_MIN: Final = 64 * 1024

# cramjam's words (Rust's io::ErrorKind::WriteZero) for "the output buffer is full". Only the
# error message depends on them: any failure at the bound is corruption either way.
_OUTPUT_FULL: Final = "failed to write whole buffer"

_Fail = Callable[[str], NoReturn]
_DecompressInto = Callable[[memoryview, bytearray | mmap.mmap], int]

_DECOMPRESS_INTO: Final[dict[CompressionType, _DecompressInto]] = {
    CompressionType.GZIP: cramjam.gzip.decompress_into,
    CompressionType.LZ4: cramjam.lz4.decompress_into,
    CompressionType.ZSTD: cramjam.zstd.decompress_into,
}


def compress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """``data`` compressed with ``codec`` as Kafka's Java producer frames it (see the module).

    ``NONE`` returns the bytes unchanged. Raises ``ValueError`` for a codec id Kafka does not
    define.
    """
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return bytes(cramjam.gzip.compress(data, level=6))  # Java's default deflate level
    if codec is CompressionType.SNAPPY:
        view = memoryview(data).cast("B")
        parts = [_XERIAL_HEADER]
        for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
            block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec is CompressionType.LZ4:
        compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        compressor.compress(data)
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))


def decompress(
    codec: int,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int = MAX_DECOMPRESSED_SIZE,
    position: int = 0,
) -> bytes:
    """The records section ``data`` of a batch compressed with ``codec``, decompressed.

    ``position`` is where the batch starts, for the errors. Raises ``CorruptRecordError`` when
    ``data`` is not a valid stream of the codec (in Kafka's framing) or would decompress to more
    than ``max_size`` bytes (decompression stops there: no more is ever produced), and
    ``UnsupportedCompressionError`` for codec ids 5-7. ``NONE`` returns the bytes unchanged.
    """
    if codec == CompressionType.NONE:
        return bytes(data)
    if not CompressionType.NONE < codec <= CompressionType.ZSTD:
        raise UnsupportedCompressionError(codec, position)
    codec = CompressionType(codec)
    name = codec.name.lower()

    def fail(message: str) -> NoReturn:
        raise CorruptRecordError(f"{name}-compressed records: {message}", position)

    view = memoryview(data).cast("B")
    try:
        if codec is CompressionType.SNAPPY:
            return _snappy(view, max_size, fail)
        if codec is CompressionType.LZ4:
            _check_lz4_frame(view, fail)
        return _bounded(_DECOMPRESS_INTO[codec], view, max_size)
    except cramjam.DecompressionError as error:
        if _OUTPUT_FULL in str(error):
            fail(_too_large(max_size))
        fail(f"not a valid {name} stream ({error})")


def _too_large(max_size: int) -> str:
    return f"they decompress to more than {max_size} bytes, the bound on one batch's records"


def _bounded(decompress_into: _DecompressInto, data: memoryview, max_size: int) -> bytes:
    """Decompress into a buffer of at most ``max_size`` bytes; cramjam fails when it is full."""
    guess = min(max_size, max(_FIRST_GUESS_MIN, len(data) * _FIRST_GUESS_RATIO))
    out = bytearray(guess)
    try:
        size: int = decompress_into(data, out)
    except cramjam.DecompressionError:
        if guess >= max_size:
            raise
        del out  # not held while the whole bound is written
    else:
        del out[size:]
        return bytes(out)
    # Larger than the guess (or not valid): once more, into max_size bytes of address space
    # that the kernel commits only as the decompressor writes them.
    with mmap.mmap(-1, max_size) as whole:
        size = decompress_into(data, whole)
        return whole[:size]


def _snappy(data: memoryview, max_size: int, fail: _Fail) -> bytes:
    """Xerial-framed or raw snappy. Every raw block declares its decompressed size up front:
    each is checked against what the block can hold, and the total against ``max_size``,
    before anything is allocated or decompressed."""
    if len(data) < len(_XERIAL_HEADER) or data[: len(_XERIAL_MAGIC)].tobytes() != _XERIAL_MAGIC:
        blocks = [data]
    else:
        blocks = []
        position = len(_XERIAL_HEADER)
        end = len(data)
        while position < end:
            if end - position < _INT32.size:
                fail(f"the xerial block length at byte {position} is cut short")
            (length,) = _INT32.unpack_from(data, position)
            position += _INT32.size
            if not 0 < length <= end - position:
                fail(f"a xerial block of {length} bytes at byte {position} overruns the stream")
            blocks.append(data[position : position + length])
            position += length
    sizes = [cramjam.snappy.decompress_raw_len(block) for block in blocks]
    for block, size in zip(blocks, sizes, strict=True):
        if size > len(block) * _SNAPPY_MAX_RATIO:
            fail(f"a snappy block of {len(block)} bytes declares {size}, more than it can hold")
    total = sum(sizes)
    if total > max_size:
        fail(_too_large(max_size))
    out = bytearray(total)
    view = memoryview(out)
    start = 0
    for block, size in zip(blocks, sizes, strict=True):
        if (
            not block
            or cramjam.snappy.decompress_raw_into(block, view[start : start + size]) != size
        ):
            fail(f"a snappy block at byte {start} of the output is empty or short")
        start += size
    view.release()
    return bytes(out)


def _check_lz4_frame(data: memoryview, fail: _Fail) -> None:
    """What Kafka's ``Lz4BlockInputStream`` requires before it reads a block."""
    if (
        len(data) < _LZ4_FRAME_HEADER_MIN
        or data[: len(_LZ4_FRAME_MAGIC)].tobytes() != _LZ4_FRAME_MAGIC
    ):
        fail("not an LZ4 frame (no 0x184D2204 magic at the start)")
    if not data[len(_LZ4_FRAME_MAGIC)] & _LZ4_BLOCK_INDEPENDENCE:
        fail("an LZ4 frame of dependent blocks, which Kafka does not read")
