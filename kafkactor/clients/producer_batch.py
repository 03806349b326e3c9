"""The producer state of a batch on its way: Kafka's `ProducerBatch.setProducerState`, written
into the batch's header when an idempotent or transactional producer sends it."""

from __future__ import annotations

import struct
from typing import Final

import crc32c

from kafkactor.storage import RecordBatch

__all__ = ["stamp_producer_state"]

# Offsets in a magic-2 batch header (Kafka's DefaultRecordBatch): the CRC-32C at 17 covers
# everything from the attributes at 21; producerId, producerEpoch and baseSequence at 43.
_CRC_OFFSET: Final = 17
_ATTRIBUTES_OFFSET: Final = 21
_PRODUCER_OFFSET: Final = 43
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER = struct.Struct(">qhi")
_CRC = struct.Struct(">I")
_TRANSACTIONAL: Final = 0x10


def stamp_producer_state(
    data: bytes, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool
) -> bytes:
    """`data` (one batch, as `build_batch` makes it without a producer) with the producer id,
    epoch, base sequence and transactional bit set, and its CRC recomputed.

    The records are left as they are: stamping costs one copy and one CRC of the batch rather
    than encoding the records again. Raises `StorageError` for anything but exactly one batch.
    """
    RecordBatch(data, verify_crc=False)  # exactly one batch (StorageError otherwise)
    stamped = bytearray(data)
    (attributes,) = _ATTRIBUTES.unpack_from(stamped, _ATTRIBUTES_OFFSET)
    if transactional:
        attributes |= _TRANSACTIONAL
    else:
        attributes &= ~_TRANSACTIONAL
    _ATTRIBUTES.pack_into(stamped, _ATTRIBUTES_OFFSET, attributes)
    _PRODUCER.pack_into(stamped, _PRODUCER_OFFSET, producer_id, producer_epoch, base_sequence)
    crc = crc32c.crc32c(memoryview(stamped)[_ATTRIBUTES_OFFSET:])
    _CRC.pack_into(stamped, _CRC_OFFSET, crc)
    return bytes(stamped)
