"""Array lengths checked against the frame before kio reads a request body.

kio's native reader sizes an array's storage from the count the frame declares, before it
reads an element: a count of 2**31 - 1 in a 30-byte frame asks the allocator for hundreds of
gigabytes, and the process aborts (an allocation failure is not an exception). Every element
of a Kafka array takes at least one byte on the wire, so a count larger than the bytes left is
malformed. `check_lengths` walks a body by its entity's schema (the same field order, types
and flexible encodings kio reads) and raises `MalformedLengthError` at the first array, string
or bytes length that cannot fit in what remains; it reads nothing else and allocates nothing
per element. The walk is compiled once per entity class.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)

__all__ = ["MalformedLengthError", "check_lengths"]

# bytes of each fixed-size kafka_type
_FIXED: Final[dict[str, int]] = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_LENGTH_PREFIXED: Final = frozenset({"string", "bytes", "records"})

Step = Callable[[bytes, int, int], int]  # (frame, offset, end) -> offset after the field


class MalformedLengthError(ValueError):
    """A length or count in the frame that cannot fit in the bytes that follow it."""


def check_lengths(entity: type[Any], frame: bytes, offset: int) -> None:
    """Walk the body of `entity` in `frame` from `offset`; raise `MalformedLengthError` at an
    impossible length (a body cut short is left for kio to report)."""
    try:
        _entity_step(entity)(frame, offset, len(frame))
    except _CutShortError:
        return  # kio reads the same bytes and says what is missing


class _CutShortError(Exception):
    """The frame ends inside a field: not this module's to report."""


def _int(frame: bytes, offset: int, size: int, end: int) -> int:
    if offset + size > end:
        raise _CutShortError
    return int.from_bytes(frame[offset : offset + size], "big", signed=True)


def _uvarint(frame: bytes, offset: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= end or shift > 28:
            raise _CutShortError
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7


def _length(frame: bytes, offset: int, end: int, *, flexible: bool, width: int) -> tuple[int, int]:
    """(length, offset after it) of a length-prefixed value or array; -1 for null."""
    if flexible:
        raw, offset = _uvarint(frame, offset, end)
        length = raw - 1
    else:
        length = _int(frame, offset, width, end)
        offset += width
    if length > end - offset:
        raise MalformedLengthError(
            f"a length of {length} at byte {offset} with {end - offset} bytes left"
        )
    return max(length, -1), offset


def _primitive_step(kafka_type: str, flexible: bool) -> Step:
    size = _FIXED.get(kafka_type)
    if size is not None:

        def fixed(frame: bytes, offset: int, end: int) -> int:
            if offset + size > end:
                raise _CutShortError
            return offset + size

        return fixed
    if kafka_type not in _LENGTH_PREFIXED:
        raise TypeError(f"no length rule for kafka_type {kafka_type!r}")
    width = 2 if kafka_type == "string" else 4

    def prefixed(frame: bytes, offset: int, end: int) -> int:
        length, offset = _length(frame, offset, end, flexible=flexible, width=width)
        return offset + max(length, 0)

    return prefixed


def _array_step(element: Step, flexible: bool) -> Step:
    def array(frame: bytes, offset: int, end: int) -> int:
        count, offset = _length(frame, offset, end, flexible=flexible, width=4)
        for _ in range(count):
            offset = element(frame, offset, end)
        return offset

    return array


def _field_step(field: dataclasses.Field[Any], flexible: bool) -> Step:
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        return _entity_step(kind.type_)
    if isinstance(kind, EntityTupleField):
        return _array_step(_entity_step(kind.type_), flexible)
    primitive = _primitive_step(get_schema_field_type(field), flexible)
    if isinstance(kind, PrimitiveTupleField):
        return _array_step(primitive, flexible)
    return primitive


def _entity_step(entity: type[Any]) -> Step:
    found = _STEPS.get(entity)
    if found is None:
        found = _STEPS[entity] = _compile_entity(entity)
    return found


_STEPS: dict[type[Any], Step] = {}


def _compile_entity(entity: type[Any]) -> Step:
    flexible = bool(getattr(entity, "__flexible__", False))
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(entity):
        tag = get_field_tag(field)
        if tag is None:
            steps.append(_field_step(field, flexible))
        else:
            tagged[int(tag)] = _field_step(field, flexible)

    def walk(frame: bytes, offset: int, end: int) -> int:
        for step in steps:
            offset = step(frame, offset, end)
        if not flexible:
            return offset
        count, offset = _uvarint(frame, offset, end)
        if count > end - offset:
            raise MalformedLengthError(f"{count} tagged fields with {end - offset} bytes left")
        for _ in range(count):
            tag, offset = _uvarint(frame, offset, end)
            size, offset = _uvarint(frame, offset, end)
            if size > end - offset:
                raise MalformedLengthError(
                    f"a tagged field of {size} bytes with {end - offset} bytes left"
                )
            known = tagged.get(tag)
            if known is not None:  # kio reads it: its own lengths count, within its size
                known(frame, offset, offset + size)
            offset += size
        return offset

    return walk
