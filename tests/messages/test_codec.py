"""Messages as values: every registered type round-trips through the msgpack codec.

The round-trip test walks the registry, so a new message type is covered as soon as it is
registered; a field annotation this file cannot generate values for fails loudly (extend
`_field_values`). Malformed bytes must give a `DecodeError` and unencodable values an
`EncodeError`, never another exception or a crash (DESIGN.md, principles 3 and 5).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import pkgutil
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkactor.messages
import kafkactor.messages.purgatory  # registers the purgatory's message types
from kafkactor.messages import (
    DecodeError,
    EncodeError,
    Envelope,
    ErrorCode,
    ErrorResponse,
    Request,
    Response,
    base,
    decode,
    encode,
    is_message,
    message,
    registered_types,
)
from kafkactor.messages.purgatory import AwaitValue, DelayOperation, OperationResult

# Every message module of the package, so the registry walk sees every type it defines.
for _module in pkgutil.iter_modules(kafkactor.messages.__path__, "kafkactor.messages."):
    importlib.import_module(_module.name)

_MESSAGE_EXT = 1
_ANY_DEPTH = 2  # how deep `Any` fields nest other messages


def _package_types() -> dict[str, type[Any]]:
    """The registered types defined by kafkactor (not test-local types of other test files)."""
    return {
        name: cls
        for name, cls in registered_types().items()
        if cls.__module__.startswith("kafkactor.")
    }


MESSAGE_NAMES = sorted(_package_types())

_INT64 = st.integers(min_value=-(2**63), max_value=2**64 - 1)  # msgpack's integer range
_PRIMITIVES: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    _INT64,
    st.floats(allow_nan=False),
    st.text(max_size=12),
    st.binary(max_size=12),
)


_SIMPLE: dict[Any, st.SearchStrategy[Any]] = {
    bool: st.booleans(),
    int: _INT64,
    float: st.floats(allow_nan=False),
    str: st.text(max_size=20),
    bytes: st.binary(max_size=20),
    type(None): st.none(),
}
_any_cache: dict[int, st.SearchStrategy[Any]] = {}
_message_cache: dict[tuple[type[Any], int], st.SearchStrategy[Any]] = {}


def _any_value(depth: int) -> st.SearchStrategy[Any]:
    """What an `Any` field may hold: a primitive, a tuple of them, or another message."""
    if depth not in _any_cache:
        leaves = st.one_of(_PRIMITIVES, st.lists(_PRIMITIVES, max_size=3).map(tuple))
        if depth == 0:
            _any_cache[depth] = leaves
        else:
            nested = st.sampled_from(MESSAGE_NAMES).flatmap(
                lambda name: _message_of(registered_types()[name], depth - 1)
            )
            _any_cache[depth] = st.one_of(leaves, nested)
    return _any_cache[depth]


def _field_values(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    """Values for a field annotated `hint` (the annotation kinds messages use)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    strategy: st.SearchStrategy[Any] | None = None
    if hint is Any:
        strategy = _any_value(depth)
    elif origin is typing.Union or origin is types.UnionType:
        strategy = st.one_of(*(_field_values(arg, depth) for arg in args))
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        strategy = st.lists(_field_values(args[0], depth), max_size=4).map(tuple)
    elif origin is tuple:
        strategy = st.tuples(*(_field_values(arg, depth) for arg in args))
    elif hint in _SIMPLE:
        strategy = _SIMPLE[hint]
    elif isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        strategy = st.sampled_from(list(hint))
    elif isinstance(hint, type) and hint in registered_types().values():
        strategy = _message_of(hint, depth)
    if strategy is None:
        raise TypeError(f"no values for field type {hint!r}: extend tests/messages/test_codec.py")
    return strategy


def _message_of(cls: type[Any], depth: int = _ANY_DEPTH) -> st.SearchStrategy[Any]:
    """Random instances of message type `cls`, built from its field annotations."""
    key = (cls, depth)
    if key not in _message_cache:
        hints = typing.get_type_hints(cls)
        fields = {f.name: _field_values(hints[f.name], depth) for f in dataclasses.fields(cls)}
        _message_cache[key] = st.builds(cls, **fields)
    return _message_cache[key]


def _assert_same(decoded: object, original: object, path: str = "message") -> None:
    """`decoded` equals `original` with the same type at every level (enums stay enums)."""
    assert type(decoded) is type(original), f"{path}: {type(decoded)} != {type(original)}"
    if is_message(original):
        for field in dataclasses.fields(original):  # type: ignore[arg-type]
            _assert_same(
                getattr(decoded, field.name),
                getattr(original, field.name),
                f"{path}.{field.name}",
            )
    elif isinstance(original, tuple):
        assert isinstance(decoded, tuple)
        assert len(decoded) == len(original), path
        for index, (got, want) in enumerate(zip(decoded, original, strict=True)):
            _assert_same(got, want, f"{path}[{index}]")
    else:
        assert decoded == original, path


def _ext(body: object, code: int = _MESSAGE_EXT) -> bytes:
    """Hand-made bytes: a msgpack extension holding `body`."""
    packed: bytes = msgpack.packb(msgpack.ExtType(code, msgpack.packb(body)))
    return packed


# --- round trips over the registry ------------------------------------------------------------


def test_registry_holds_the_base_and_purgatory_types() -> None:
    expected = {
        "Request",
        "Response",
        "ErrorResponse",
        "Envelope",
        "DelayOperation",
        "KeyChanged",
        "CancelForKey",
        "OperationsExpired",
        "AwaitValue",
        "OperationResult",
    }
    assert expected <= set(MESSAGE_NAMES)
    for name in MESSAGE_NAMES:
        assert registered_types()[name].__name__ == name


@pytest.mark.parametrize("name", MESSAGE_NAMES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_message_type_round_trips(name: str, data: st.DataObject) -> None:
    original = data.draw(_message_of(registered_types()[name]))
    decoded = decode(encode(original))
    assert decoded == original
    assert type(decoded) is type(original)
    _assert_same(decoded, original)


def test_nested_messages_and_enums_keep_their_types() -> None:
    spec = AwaitValue(key="events-0", at_least=7)
    delay = DelayOperation(
        reply_to="client/1", correlation_id=3, operation=spec, keys=("a", "b"), timeout_ms=50
    )
    envelope = Envelope(payload=delay, trace_id="t", span_id="s", sender="x", sent_ms=9)
    decoded = decode(encode(envelope))
    assert decoded == envelope
    assert type(decoded.payload) is DelayOperation
    assert type(decoded.payload.operation) is AwaitValue
    assert type(decoded.payload.keys) is tuple

    error = ErrorResponse(correlation_id=1, error_code=ErrorCode.NOT_LEADER_FOR_PARTITION)
    decoded_error = decode(encode(Envelope(payload=error))).payload
    assert type(decoded_error.error_code) is ErrorCode
    assert decoded_error.error_code is ErrorCode.NOT_LEADER_FOR_PARTITION


def test_enum_travels_as_its_integer_code() -> None:
    data = encode(ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT, message="late"))
    ext = msgpack.unpackb(data, raw=False)
    name, fields = msgpack.unpackb(ext.data, raw=False)
    assert (ext.code, name) == (_MESSAGE_EXT, "ErrorResponse")
    assert fields == {"correlation_id": 0, "error_code": 7, "message": "late"}


def test_moderately_deep_nesting_round_trips() -> None:
    nested: object = OperationResult(operation_id=1, expired=True)
    for depth in range(50):
        nested = Envelope(payload=nested, sent_ms=depth)
    assert decode(encode(nested)) == nested


def test_decode_accepts_any_bytes_like() -> None:
    data = encode(Request(reply_to="a", correlation_id=2))
    # decode() is annotated `bytes` but documents and checks bytes | bytearray | memoryview.
    from_bytearray = decode(bytearray(data))  # type: ignore[arg-type]
    from_memoryview = decode(memoryview(data))  # type: ignore[arg-type]
    assert from_bytearray == from_memoryview == Request(reply_to="a", correlation_id=2)


# --- decode errors ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary())
def test_garbage_bytes_are_a_decode_error(garbage: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(garbage)


_REQUEST_FIELDS = {"reply_to": "", "correlation_id": 0}
_ENVELOPE_TRACE = {
    **dict.fromkeys(("trace_id", "span_id", "parent_span_id", "sender"), ""),
    "sent_ms": 0,
}

MALFORMED = {
    "unknown type name": _ext(["NoSuchMessage", {}]),
    "missing field": _ext(["Request", {"reply_to": ""}]),
    "unexpected extra field": _ext(["Request", {**_REQUEST_FIELDS, "bogus": 1}]),
    "non-string field name": _ext(["Response", {1: 0}]),
    "wrong extension code": _ext(["Request", _REQUEST_FIELDS], code=2),
    "fields not a map": _ext(["Request", [1, 2]]),
    "body not a pair": _ext(["Request"]),
    "body not a list": _ext(5),
    "type name not a string": _ext([7, _REQUEST_FIELDS]),
    "enum value out of range": _ext(
        ["ErrorResponse", {"correlation_id": 0, "error_code": 999, "message": ""}]
    ),
    "bad nested message": _ext(["Envelope", {"payload": msgpack.ExtType(1, b"\xc1")}]),
    "top-level int": msgpack.packb(5),
    "top-level nil": msgpack.packb(None),
    "top-level list": msgpack.packb([1, 2]),
    "top-level map": msgpack.packb({"reply_to": "", "correlation_id": 0}),
    "trailing bytes": encode(Request()) + b"\x00",
    "truncated": encode(Request(reply_to="somewhere"))[:-3],
    "empty": b"",
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_messages_are_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


def test_wrong_extension_code_inside_a_message_is_a_decode_error() -> None:
    inner = msgpack.ExtType(2, msgpack.packb(["Request", _REQUEST_FIELDS]))
    with pytest.raises(DecodeError):
        decode(_ext(["Envelope", {"payload": inner, **_ENVELOPE_TRACE}]))


def test_timestamp_extension_inside_a_message_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode(_ext(["Envelope", {"payload": msgpack.Timestamp(1, 0), **_ENVELOPE_TRACE}]))


def test_decode_of_a_non_bytes_value_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode("not bytes")  # type: ignore[arg-type]  # deliberately wrong


# The children decode on a thread with an 8 MiB stack (what an actor thread gets from a default
# Linux `ulimit -s`), so the outcome does not depend on the main thread's stack limit.
_DEEP_DECODE = """
import sys
import threading
import msgpack
from kafkactor.messages import DecodeError, decode
data = msgpack.packb(["Request", {"reply_to": "", "correlation_id": 0}])
names = ("trace_id", "span_id", "parent_span_id", "sender")
for _ in range(int(sys.argv[1])):
    fields = {"payload": msgpack.ExtType(1, data), **dict.fromkeys(names, ""), "sent_ms": 0}
    data = msgpack.packb(["Envelope", fields])
data = msgpack.packb(msgpack.ExtType(1, data))
def run():
    try:
        decode(data)
        print("decoded")
    except DecodeError:
        print("DecodeError")
threading.stack_size(8 << 20)
thread = threading.Thread(target=run)
thread.start()
thread.join()
"""

_ENCODE_THEN_DECODE = """
import sys
import threading
from kafkactor.messages import EncodeError, Envelope, Request, decode, encode
message = Request()
for _ in range(int(sys.argv[1])):
    message = Envelope(payload=message)
def run():
    try:
        data = encode(message)
    except EncodeError:
        print("EncodeError")
    else:
        print("decoded" if decode(data) == message else "different")
threading.stack_size(8 << 20)
thread = threading.Thread(target=run)
thread.start()
thread.join()
"""


def _run_child(script: str, depth: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, str(depth)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_deeply_nested_bytes_do_not_crash_the_decoder() -> None:
    result = _run_child(_DEEP_DECODE, 1000)
    assert result.returncode == 0, f"decoder died: rc={result.returncode} {result.stderr[-300:]}"
    assert result.stdout.strip() in {"decoded", "DecodeError"}


def test_whatever_encode_accepts_decode_accepts() -> None:
    result = _run_child(_ENCODE_THEN_DECODE, 250)
    assert result.returncode == 0, f"decoder died: rc={result.returncode} {result.stderr[-300:]}"
    assert result.stdout.strip() in {"decoded", "EncodeError"}


# --- encode errors ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _UnregisteredDataclass:
    value: int = 0


class _UnregisteredSubclass(Request):
    """A subclass of a message that was never decorated (so never registered)."""


@pytest.mark.parametrize(
    "value",
    [
        object(),
        5,
        None,
        "text",
        b"bytes",
        {"a": 1},
        _UnregisteredDataclass(),
        _UnregisteredSubclass(),
    ],
    ids=repr,
)
def test_encoding_a_non_message_is_an_encode_error(value: object) -> None:
    with pytest.raises(EncodeError):
        encode(value)


@pytest.mark.parametrize(
    "message",
    [
        Envelope(payload={1, 2}),
        Envelope(payload=object()),
        Envelope(payload=(1, frozenset({2}))),
        Envelope(payload=_UnregisteredDataclass()),
        Envelope(payload=_UnregisteredSubclass()),
        Envelope(payload=Envelope(payload=object())),
        DelayOperation(operation=object()),
        Envelope(payload=2**64),
        Request(correlation_id=-(2**63) - 1),
        Request(reply_to="\ud800"),  # a lone surrogate has no UTF-8 encoding
        Envelope(payload=("ok", "\udfff")),
    ],
    ids=repr,
)
def test_encoding_an_unencodable_field_is_an_encode_error(message: object) -> None:
    with pytest.raises(EncodeError):
        encode(message)


def test_encoding_a_too_deep_message_is_an_encode_error() -> None:
    nested: object = Request()
    for _ in range(2000):
        nested = Envelope(payload=nested)
    with pytest.raises(EncodeError):
        encode(nested)


# --- messages are frozen, slotted, keyword-only values ----------------------------------------


@pytest.mark.parametrize("name", MESSAGE_NAMES)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_messages_are_frozen_slotted_and_keyword_only(name: str, data: st.DataObject) -> None:
    cls = registered_types()[name]
    instance = data.draw(_message_of(cls, 0))
    fields = dataclasses.fields(cls)
    for field in fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(instance, field.name, getattr(instance, field.name))
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(instance, field.name)
    # A new attribute is refused too (Python 3.11's slotted frozen __setattr__ raises TypeError
    # from its super() call rather than FrozenInstanceError; either way nothing is stored).
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        instance.not_a_field = 1
    assert not hasattr(instance, "__dict__")
    positional = [getattr(instance, field.name) for field in fields] or [0]
    with pytest.raises(TypeError):
        cls(*positional)
    assert all(field.kw_only for field in fields)


def test_equal_messages_are_equal_and_hashable() -> None:
    one = DelayOperation(operation=AwaitValue(key="k"), keys=("k",), timeout_ms=5)
    two = DelayOperation(operation=AwaitValue(key="k"), keys=("k",), timeout_ms=5)
    assert one == two
    assert hash(one) == hash(two)
    assert one != DelayOperation(operation=AwaitValue(key="k"), keys=("k",), timeout_ms=6)
    assert Response(correlation_id=1) != ErrorResponse(correlation_id=1)


# --- the registry ----------------------------------------------------------------------------


@pytest.fixture
def scratch_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register test-only types in a copy of the registry, restored after the test."""
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))


@pytest.mark.usefixtures("scratch_registry")
def test_two_message_types_with_the_same_name_are_refused() -> None:
    def first() -> type[Any]:
        @message
        class Duplicate:
            value: int = 0

        return Duplicate

    def second() -> type[Any]:
        @message
        class Duplicate:
            other: str = ""

        return Duplicate

    registered = first()
    assert registered_types()["Duplicate"] is registered
    with pytest.raises(TypeError, match="Duplicate"):
        second()
    assert registered_types()["Duplicate"] is registered
    assert decode(encode(registered(value=3))) == registered(value=3)


@pytest.mark.usefixtures("scratch_registry")
def test_the_scratch_registry_does_not_leak() -> None:
    assert "Duplicate" not in registered_types()
    assert sorted(_package_types()) == MESSAGE_NAMES


@pytest.mark.usefixtures("scratch_registry")
def test_same_name_in_two_modules_is_refused() -> None:
    def define(module: str) -> type[Any]:
        namespace = {"__annotations__": {"value": int}, "value": 0, "__module__": module}
        return message(type("Clash", (), namespace))

    first = define("kafkactor_test_a")
    with pytest.raises(TypeError):
        define("kafkactor_test_b")
    assert decode(encode(first(value=1))) == first(value=1)


# --- error codes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NONE", 0),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("LEADER_NOT_AVAILABLE", 5),
        ("NOT_LEADER_FOR_PARTITION", 6),
        ("REQUEST_TIMED_OUT", 7),
        ("MESSAGE_TOO_LARGE", 10),
        ("STALE_CONTROLLER_EPOCH", 11),
        ("NOT_ENOUGH_REPLICAS", 19),
        ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20),
        ("INVALID_REQUIRED_ACKS", 21),
        ("NOT_CONTROLLER", 41),
    ],
)
def test_error_codes_match_kafka(name: str, code: int) -> None:
    assert ErrorCode[name] == code
    assert ErrorCode(code).name == name


def test_error_codes_are_unique() -> None:
    assert len({int(code) for code in ErrorCode}) == len(ErrorCode.__members__)


@pytest.mark.parametrize(
    ("code", "retriable"),
    [
        (ErrorCode.NOT_LEADER_FOR_PARTITION, True),
        (ErrorCode.LEADER_NOT_AVAILABLE, True),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, True),
        (ErrorCode.REQUEST_TIMED_OUT, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True),
        (ErrorCode.NETWORK_EXCEPTION, True),
        (ErrorCode.CORRUPT_MESSAGE, True),
        (ErrorCode.NONE, False),
        (ErrorCode.UNKNOWN_SERVER_ERROR, False),
        (ErrorCode.STALE_CONTROLLER_EPOCH, False),
        (ErrorCode.INVALID_REQUIRED_ACKS, False),
        (ErrorCode.MESSAGE_TOO_LARGE, False),
        (ErrorCode.INVALID_TOPIC_EXCEPTION, False),
        (ErrorCode.TOPIC_ALREADY_EXISTS, False),
    ],
)
def test_retriable_matches_kafka(code: ErrorCode, retriable: bool) -> None:
    assert code.retriable is retriable
