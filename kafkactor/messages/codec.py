"""The msgpack codec: every registered message type to bytes and back.

A message is encoded as a msgpack extension (code 1) holding `[type name, {field: value}]`;
nested messages nest the same way, tuples stay tuples, bytes stay bytes, IntEnum fields come
back as their enum. Anything else is a `DecodeError` naming what was wrong.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import typing
from typing import Any

import msgpack

from kafkactor.messages.base import registered_types

_MESSAGE_EXT = 1
# Messages nest (an Envelope holds a request that may hold a spec); real ones are a few levels
# deep. Each level is a nested msgpack call on the C stack, so depth is bounded both ways.
MAX_DEPTH = 64
_depth = threading.local()


class EncodeError(TypeError):
    """A value that is not a message or cannot be carried by one."""


class DecodeError(ValueError):
    """Bytes that are not an encoded message: garbage, an unknown type or the wrong fields."""


_FIELDS: dict[type[Any], tuple[tuple[str, ...], dict[str, type[enum.IntEnum]]]] = {}


def _fields(cls: type[Any]) -> tuple[tuple[str, ...], dict[str, type[enum.IntEnum]]]:
    """Field names of a message type, and which of them hold an IntEnum (cached per type)."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    names = tuple(field.name for field in dataclasses.fields(cls))
    hints = typing.get_type_hints(cls)
    enums: dict[str, type[enum.IntEnum]] = {}
    for name in names:
        hint = hints.get(name)
        if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
            enums[name] = hint
    _FIELDS[cls] = (names, enums)
    return names, enums


def _default(value: object) -> object:
    cls = type(value)
    if dataclasses.is_dataclass(value) and registered_types().get(cls.__name__) is cls:
        names, _ = _fields(cls)
        body = [cls.__name__, {name: getattr(value, name) for name in names}]
        with _nesting(EncodeError):
            return msgpack.ExtType(_MESSAGE_EXT, _pack(body))
    raise EncodeError(f"cannot encode {value!r} ({cls.__name__}) inside a message")


class _nesting:  # noqa: N801 - used as a context manager
    """Count message nesting on this thread; deeper than MAX_DEPTH raises `error`."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def __enter__(self) -> None:
        depth = getattr(_depth, "value", 0) + 1
        if depth > MAX_DEPTH:
            raise self.error(f"messages nested deeper than {MAX_DEPTH} levels")
        _depth.value = depth

    def __exit__(self, *exc: object) -> None:
        _depth.value -= 1


def _pack(value: object) -> bytes:
    try:
        packed: bytes = msgpack.packb(value, default=_default, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as error:
        if isinstance(error, EncodeError):
            raise
        raise EncodeError(str(error)) from error
    return packed


def _ext_hook(code: int, data: bytes) -> object:
    if code != _MESSAGE_EXT:
        raise DecodeError(f"unknown msgpack extension code {code}")
    with _nesting(DecodeError):
        return _message_from(_unpack(data))


def _holds_foreign_value(value: object) -> bool:
    """msgpack decodes its own timestamp extension without asking us: refuse it in fields."""
    if isinstance(value, msgpack.Timestamp):
        return True
    if isinstance(value, tuple):
        return any(_holds_foreign_value(item) for item in value)
    if isinstance(value, dict):
        return any(_holds_foreign_value(k) or _holds_foreign_value(v) for k, v in value.items())
    return False


def _message_from(body: object) -> object:
    if not (isinstance(body, tuple) and len(body) == 2 and isinstance(body[0], str)):
        raise DecodeError("a message must be [type name, fields]")
    name, fields = body
    cls = registered_types().get(name)
    if cls is None:
        raise DecodeError(f"unknown message type {name!r}")
    if not isinstance(fields, dict):
        raise DecodeError(f"{name}: fields must be a map")
    names, enums = _fields(cls)
    if any(_holds_foreign_value(value) for value in fields.values()):
        raise DecodeError(f"{name}: a field holds a msgpack timestamp, which no message carries")
    if set(fields) != set(names):
        missing = sorted(set(names) - set(fields))
        extra = sorted(str(key) for key in set(fields) - set(names))
        raise DecodeError(f"{name}: wrong fields (missing {missing}, unexpected {extra})")
    try:
        for field_name, enum_type in enums.items():
            fields[field_name] = enum_type(fields[field_name])
        return cls(**fields)
    except (TypeError, ValueError) as error:
        raise DecodeError(f"{name}: {error}") from error


def _unpack(data: bytes) -> object:
    try:
        return msgpack.unpackb(
            data, ext_hook=_ext_hook, raw=False, use_list=False, strict_map_key=False
        )
    except DecodeError:
        raise
    except Exception as error:  # msgpack raises several unrelated types for bad input
        raise DecodeError(f"not an encoded message: {error}") from error


def encode(message: object) -> bytes:
    """The bytes of a registered message (nested messages included)."""
    cls = type(message)
    if registered_types().get(cls.__name__) is not cls:
        raise EncodeError(f"{cls.__name__} is not a registered message type")
    return _pack(message)


def decode(data: bytes) -> Any:
    """The message encoded in `data`; DecodeError on anything else."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    value = _unpack(bytes(data))
    if registered_types().get(type(value).__name__) is not type(value):
        raise DecodeError(f"the bytes hold {type(value).__name__}, not a message")
    return value
