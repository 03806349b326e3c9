"""kafkactor's in-process clients: a Producer and a Consumer that talk to brokers' actors."""

from kafkactor.clients.consumer import Consumer, ConsumerRecord, OffsetOutOfRangeError
from kafkactor.clients.metadata import ClientMetadata, NoBrokersAvailableError, UnknownTopicError
from kafkactor.clients.producer import ProduceError, Producer, RecordMetadata

__all__ = [
    "ClientMetadata",
    "Consumer",
    "ConsumerRecord",
    "NoBrokersAvailableError",
    "OffsetOutOfRangeError",
    "ProduceError",
    "Producer",
    "RecordMetadata",
    "UnknownTopicError",
]
