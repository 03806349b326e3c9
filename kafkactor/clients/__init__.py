"""kafkactor's in-process clients: a Producer and a Consumer that talk to brokers' actors.

Errors carry Kafka's `ErrorCode`: a send's Future fails with `ProduceError`, `Consumer.poll`
raises `ConsumerError`, and both are `ClientError`s (as a metadata lookup raises).
"""

from kafkactor.clients.consumer import Consumer, ConsumerRecord
from kafkactor.clients.errors import ClientError, ConsumerError, ProduceError
from kafkactor.clients.metadata import ClientMetadata
from kafkactor.clients.producer import Producer, RecordMetadata

__all__ = [
    "ClientError",
    "ClientMetadata",
    "Consumer",
    "ConsumerError",
    "ConsumerRecord",
    "ProduceError",
    "Producer",
    "RecordMetadata",
]
