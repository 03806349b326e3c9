"""Immutable messages between actors, Kafka's error codes, and the msgpack codec.

The codec's names (`encode`, `decode` and their errors) are imported on first use: a broker
passes its messages between actors as they are and never loads msgpack.
"""

from typing import TYPE_CHECKING, Any

from kafkactor.messages.base import (
    Envelope,
    ErrorResponse,
    Request,
    Response,
    is_message,
    message,
    registered_types,
)
from kafkactor.messages.errors import ErrorCode

if TYPE_CHECKING:
    from kafkactor.messages.codec import DecodeError, EncodeError, decode, encode

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


def __getattr__(name: str) -> Any:
    if name in ("DecodeError", "EncodeError", "decode", "encode"):
        from kafkactor.messages import codec

        return getattr(codec, name)
    raise AttributeError(f"module 'kafkactor.messages' has no attribute {name!r}")
