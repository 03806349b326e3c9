"""kafkactor's in-process clients: a Producer and a Consumer that talk to brokers' actors.

Errors carry Kafka's `ErrorCode`: a send's Future fails with `ProduceError`, `Consumer.poll`
raises `ConsumerError`, a consumer group's refused commit `CommitFailedError`, and all are
`ClientError`s (as a metadata lookup raises). A `Consumer` with a `group_id` is a member of a
consumer group through its `ConsumerCoordinator`. A `Producer` with a `transactional_id` runs
transactions (`TransactionError`, `ProducerFencedError`, `TransactionStateError`); a `Consumer`
with `isolation_level="read_committed"` reads only what committed transactions wrote.
"""

from kafkactor.clients.consumer import Consumer, ConsumerRecord
from kafkactor.clients.consumer_coordinator import ConsumerCoordinator, ConsumerGroupMetadata
from kafkactor.clients.errors import (
    ClientError,
    CommitFailedError,
    ConsumerError,
    ProduceError,
    ProducerFencedError,
    TransactionError,
    TransactionStateError,
)
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.clients.producer import Producer, RecordMetadata

__all__ = [
    "ClientError",
    "ClientMetadata",
    "CommitFailedError",
    "Consumer",
    "ConsumerCoordinator",
    "ConsumerError",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "ProduceError",
    "Producer",
    "ProducerFencedError",
    "RecordMetadata",
    "TransactionError",
    "TransactionStateError",
]
