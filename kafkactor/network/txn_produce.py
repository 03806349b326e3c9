"""What Kafka's KafkaApis reads of a Produce request's batches before appending them: whether
any is transactional (ProduceRequest.hasTransactionalRecords). Such a request without a
transactional id fails whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's
handleProduceRequest answers it; every other check of the batches is the log's
(`kafkactor.storage`'s LogValidator: a client's control batch is INVALID_RECORD there)."""

from __future__ import annotations

import struct
from typing import Any, Final

from kafkactor.storage import StorageError, batch_size_at

__all__ = ["has_transactional_records"]

# Kafka's DefaultRecordBatch: the attributes (int16) follow base offset, length, partition
# leader epoch, magic and CRC; bit 4 is the transactional flag
ATTRIBUTES_OFFSET: Final = 21
TRANSACTIONAL_FLAG_MASK: Final = 0x10
_ATTRIBUTES: Final = struct.Struct(">h")


def has_transactional_records(body: Any) -> bool:
    """Whether a batch of the Produce request `body` has the transactional attribute. Each
    batch's length prefix and attributes only (no CRC, no records: this runs on every produce);
    bytes that cannot be walked as batches count as not transactional here and are refused by
    the log, which reads them properly."""
    for topic in body.topic_data:
        for p in topic.partition_data:
            if p.records and _transactional(memoryview(p.records)):
                return True
    return False


def _transactional(records: memoryview) -> bool:
    position = 0
    end = len(records)
    while position + ATTRIBUTES_OFFSET + _ATTRIBUTES.size <= end:
        try:
            size = batch_size_at(records, position)
        except StorageError:
            return False
        if size is None or position + size > end:  # cut short: the log refuses it
            return False
        (attributes,) = _ATTRIBUTES.unpack_from(records, position + ATTRIBUTES_OFFSET)
        if attributes & TRANSACTIONAL_FLAG_MASK:
            return True
        position += size
    return False
