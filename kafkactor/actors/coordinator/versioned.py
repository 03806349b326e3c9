"""Version-prefixed structs: a big-endian int16 version, then a kio struct of that version.

Kafka writes `__consumer_offsets` record keys and values, and the consumer protocol's
subscriptions and assignments, this way (`MessageUtil.toVersionPrefixedBytes`). kio's
`entity_reader` / `entity_writer` do every byte of the struct; only the prefix is packed here.
"""

from __future__ import annotations

import io
import struct
from dataclasses import fields
from typing import Any, Final, get_args

from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)

from kio.serial import entity_reader, entity_writer  # isort: skip
from kio.serial.errors import SerialError  # isort: skip

VERSION: Final = struct.Struct(">h")


class OffsetsRecordError(ValueError):
    """Bytes that are not a record of `__consumer_offsets` this coordinator can read (truncated,
    malformed, of an unknown or too-new version), or a value it cannot write."""


class ConsumerProtocolError(OffsetsRecordError):
    """Bytes that are not a consumer protocol subscription or assignment (Kafka's
    `SchemaException` from `ConsumerProtocol`)."""


def nested(entity: Any, name: str) -> Any:
    """The element class of `entity`'s struct-array field `name`."""
    return get_args({f.name: f.type for f in fields(entity)}[name])[0]


def write(
    version: int, entity: Any, value: Any, error: type[OffsetsRecordError], what: str
) -> bytes:
    """The version prefix, then `value` (an instance of the kio entity `entity`)."""
    buffer = io.BytesIO()
    buffer.write(VERSION.pack(version))
    try:
        entity_writer(entity)(buffer, value)
    # kio's OutOfBoundValue (a string or array too long for its length prefix), struct.error
    # (an int out of its field's range), TypeError (None in a non-nullable field), ValueError (a
    # str that is not UTF-8 encodable: a lone surrogate)
    except (SerialError, struct.error, TypeError, ValueError) as exc:
        raise error(f"cannot write {what} v{version}: {type(exc).__name__}: {exc}") from None
    return buffer.getvalue()


def read_version(data: bytes, error: type[OffsetsRecordError], what: str) -> int:
    if len(data) < VERSION.size:
        raise error(f"{len(data)} bytes are too few for the version of a {what}")
    version: int = VERSION.unpack_from(data)[0]
    return version


def read(data: bytes, entity: Any, error: type[OffsetsRecordError], what: str) -> Any:
    """The struct after the version prefix; bytes after it are ignored, as Kafka ignores them."""
    try:
        value, _ = entity_reader(entity)(data, VERSION.size)
    except (SerialError, ValueError) as exc:  # kio's DecodeErrors; ValueError: negative lengths
        raise error(f"malformed {what}: {type(exc).__name__}: {exc}") from None
    return value


def non_null(items: tuple[Any, ...] | None, error: type[OffsetsRecordError], what: str) -> Any:
    """A non-nullable array field (kio reads a length of -1 as None; Kafka's generated readers
    refuse a null non-nullable field)."""
    if items is None:
        raise error(f"non-nullable field {what} was serialized as null")
    return items
