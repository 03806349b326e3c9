"""The message base: frozen, slotted, keyword-only dataclasses with a registry of types."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

from kafkactor.common import VALUE_TYPES
from kafkactor.messages.errors import ErrorCode

T = TypeVar("T")

_REGISTRY: dict[str, type[Any]] = {}


@dataclass_transform(frozen_default=True, kw_only_default=True)
def message(cls: type[T]) -> type[T]:
    """Make `cls` a message: a frozen, slotted, keyword-only dataclass registered by name.

    Fields hold ints, floats, str, bytes, bool, None, IntEnums, tuples of those, and other
    messages (docs/architecture.md); every message round-trips through the codec.
    """
    data_cls = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
    name = data_cls.__name__
    existing = _REGISTRY.get(name)
    if existing is not None and (existing.__module__, existing.__qualname__) != (
        data_cls.__module__,
        data_cls.__qualname__,
    ):
        raise TypeError(f"two message types are named {name}: {existing} and {data_cls}")
    _REGISTRY[name] = data_cls
    return data_cls


for _value_type in VALUE_TYPES:  # the shared value types travel inside messages
    _REGISTRY[_value_type.__name__] = _value_type


def registered_types() -> dict[str, type[Any]]:
    """Every registered message type by name (for the codec and for tests that walk them)."""
    return dict(_REGISTRY)


def is_message(value: object) -> bool:
    return type(value).__name__ in _REGISTRY and _REGISTRY[type(value).__name__] is type(value)


@message
class Request:
    """A message that expects a response: where to send it and how to match it up.

    `reply_to` is an actor or client address; `correlation_id` is chosen by the requester.
    A handler that fails answers with an `ErrorResponse` carrying the same correlation id.
    """

    reply_to: str = ""
    correlation_id: int = 0


@message
class Response:
    """A reply to a `Request`, matched by `correlation_id`."""

    correlation_id: int = 0


@message
class ErrorResponse(Response):
    """A request could not be served: Kafka's error code and a human-readable reason."""

    error_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    message: str = ""


@message
class Envelope:
    """How every message travels between actors: the payload plus its trace context.

    contextvars do not cross actor threads, so the trace rides here (docs/architecture.md):
    `trace_id` names one request's whole causal tree, `span_id` this hop, `parent_span_id`
    the hop during which it was sent; `sent_ms` lets the receiver log its mailbox delay.
    """

    payload: Any = None
    trace_id: str = ""
    span_id: str = ""
    parent_span_id: str = ""
    sender: str = ""
    sent_ms: int = 0
