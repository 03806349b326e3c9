"""What Kafka's KafkaApis reads of a Produce request's batches before appending them: whether
any is transactional (ProduceRequest.hasTransactionalRecords). Such a request without a
transactional id fails whole with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's
handleProduceRequest answers it; every other check of the batches is the log's
(`kafkactor.storage`'s LogValidator: a client's control batch is INVALID_RECORD there)."""

from __future__ import annotations

from typing import Any

from kafkactor.storage import StorageError, iter_batches

__all__ = ["has_transactional_records"]


def has_transactional_records(body: Any) -> bool:
    """Whether a batch of the Produce request `body` has the transactional attribute. Batch
    headers only (no CRC, no records); bytes that cannot be read as batches count as not
    transactional here and are refused by the log, which reads them properly."""
    for topic in body.topic_data:
        for p in topic.partition_data:
            if not p.records:
                continue
            try:
                for batch in iter_batches(bytes(p.records), verify_crc=False):
                    if batch.is_transactional:
                        return True
            except (StorageError, ValueError):
                continue
    return False
