"""Kafka's `Uuid` (KIP-516): a topic's id, its random generation and its string form."""

from __future__ import annotations

import base64
import binascii
import uuid
from typing import Final

__all__ = [
    "METADATA_TOPIC_ID",
    "ZERO_UUID",
    "InvalidUuidError",
    "random_uuid",
    "uuid_from_string",
    "uuid_to_string",
]

#: Kafka's `Uuid.ZERO_UUID`: "no id" on the wire (an unknown topic, a request without ids).
ZERO_UUID: Final = uuid.UUID(int=0)
#: Kafka's `Uuid.METADATA_TOPIC_ID` (0, 1), reserved: never given to a topic.
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)


class InvalidUuidError(ValueError):
    """A string that is not a Kafka Uuid's base64 form (Kafka's `Uuid.fromString` refuses it)."""


def random_uuid() -> uuid.UUID:
    """Kafka's `Uuid.randomUuid`: a random (version 4) UUID that is neither the zero uuid nor
    the metadata topic's, and whose string form does not start with "-" (Kafka 3.x's rule,
    so that command-line tools never read an id as an option)."""
    while True:
        found = uuid.uuid4()
        if found not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_string(found).startswith(
            "-"
        ):
            return found


def uuid_to_string(value: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: the 16 bytes in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_string(text: str) -> uuid.UUID:
    """Kafka's `Uuid.fromString`: the inverse of `uuid_to_string`."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raise InvalidUuidError(f"Input string `{text}` is not a base64 UUID") from None
    if len(text) != 22 or len(raw) != 16:
        raise InvalidUuidError(
            f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the "
            "expected 16 bytes of a base64-encoded UUID"
        )
    return uuid.UUID(bytes=raw)
