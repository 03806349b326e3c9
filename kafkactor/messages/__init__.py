"""Immutable messages between actors, Kafka's error codes, and the msgpack codec."""

from kafkactor.messages.base import (
    Envelope,
    ErrorResponse,
    Request,
    Response,
    is_message,
    message,
    registered_types,
)
from kafkactor.messages.codec import DecodeError, EncodeError, decode, encode
from kafkactor.messages.errors import ErrorCode

__all__ = [
    "DecodeError",
    "EncodeError",
    "Envelope",
    "ErrorCode",
    "ErrorResponse",
    "Request",
    "Response",
    "decode",
    "encode",
    "is_message",
    "message",
    "registered_types",
]
