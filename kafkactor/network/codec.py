"""The codec adapter: Kafka's request and response formats through kio, and nothing by hand.

kio's entities are generated from Kafka's own JSON message definitions (every API and version
of Kafka 4) and decode in Rust; the versions and APIs Kafka 4 removed that are still spoken
here have entities transcribed from Kafka 3.9's definitions (`removed_versions`: OffsetCommit
v0-1 and OffsetFetch v0; `inter_broker_schemas`: LeaderAndIsr, StopReplica, UpdateMetadata and
ControlledShutdown), which kio reads and writes alike. This module only picks the entity for an
API key and version, and reads and writes frames.

Entities are loaded per API, on first use: kio imports one API version's module when it is
first asked for, and the transcribed tables, whose making takes a noticeable part of a
broker's start, are imported when an API they hold is first spoken (`_TRANSCRIBED_VERSIONS`
says which, without importing them). A broker that only produces never builds them.

The broker side reads a request frame (header, then body: `decode_request`) and writes a
response frame (size prefix, header, body: `encode_response`). Every way a request frame can be
wrong ends in a `BadRequestError` naming why; the socket server then closes the connection, as
Kafka does. The client side, for a broker that sends requests to another broker, writes a
request frame (`encode_request`) and reads a response frame (`decode_response`); a response
frame that cannot be read raises a `BadResponseError`.

The request header is Kafka's: v1 for a non-flexible version, v2 (KIP-482) for a flexible one,
v0 for ControlledShutdown v0 alone. Header v2 may carry kafkactor's trace context in a tagged
field of its own (`request_headers.TRACE_CONTEXT_TAG`), written by `encode_request(...,
trace=...)` and read into `RequestHeader.trace_id` / `parent_span_id`, so a trace continues
from one broker process into another; a request without it (every real Kafka client's) reads
exactly as before.
"""

from __future__ import annotations

import importlib
import io
import re
import struct
import sys
from dataclasses import fields
from functools import cache
from typing import Any, Final

from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)
from kafkactor.network.api_versions import ApiKey, served
from kafkactor.network.length_guard import MalformedLengthError, check_lengths
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.request_headers import REQUEST_HEADER_V0, TRACED_REQUEST_HEADER

from kio.index import load_request_schema, load_response_schema  # isort: skip
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1  # isort: skip
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0  # isort: skip
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1  # isort: skip
from kio.serial import entity_reader, entity_writer  # isort: skip
from kio.static.primitive import i16, i32  # isort: skip

__all__ = [
    "BadRequestError",
    "BadResponseError",
    "UnsupportedApiVersions",
    "build",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "nested",
    "request_type",
    "response_type",
]

_PREFIX: Final = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE: Final = struct.Struct(">i")

#: The API versions with transcribed entities, and the module of `kafkactor.network` whose
#: `REQUESTS` and `RESPONSES` tables hold them: the versions Kafka 4 removed, and the
#: inter-broker APIs it removed whole. A module is imported on the first request for one of its
#: versions (tests/test_startup_imports.py checks this table against the modules' own).
_TRANSCRIBED_VERSIONS: Final[dict[int, tuple[str, range]]] = {
    ApiKey.OFFSET_COMMIT: ("removed_versions", range(2)),
    ApiKey.OFFSET_FETCH: ("removed_versions", range(1)),
    ApiKey.DESCRIBE_CONFIGS: ("removed_versions", range(1)),
    ApiKey.LEADER_AND_ISR: ("inter_broker_schemas", range(8)),
    ApiKey.STOP_REPLICA: ("inter_broker_schemas", range(5)),
    ApiKey.UPDATE_METADATA: ("inter_broker_schemas", range(9)),
    ApiKey.CONTROLLED_SHUTDOWN: ("inter_broker_schemas", range(4)),
}


def _transcribed(api_key: int, version: int, table: str) -> Any:
    """The transcribed entity of this API version from `table` ("REQUESTS" or "RESPONSES") of
    its module, imported now if it is not yet; None for a version kio has."""
    where = _TRANSCRIBED_VERSIONS.get(api_key)
    if where is None or version not in where[1]:
        return None
    module = importlib.import_module(f"kafkactor.network.{where[0]}")
    return getattr(module, table).get((api_key, version))


class BadRequestError(Exception):
    """A frame that cannot be served: unknown API, unsupported version, malformed bytes."""

    def __init__(self, reason: str, *, api_key: int = -1, api_version: int = -1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version


class BadResponseError(Exception):
    """A response frame that cannot be read as the answer to the request sent (its API and
    version): malformed, truncated, or longer than its body. The sender's connection to that
    broker can no longer be trusted (Kafka's NetworkClient closes it)."""

    def __init__(self, reason: str, *, api_key: int = -1, api_version: int = -1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.api_key = api_key
        self.api_version = api_version


class UnsupportedApiVersions:
    """The body of an ApiVersions request of a version newer than ours (KIP-511): the
    broker cannot read it, and answers with a v0 body saying UNSUPPORTED_VERSION."""

    def __repr__(self) -> str:
        return "UnsupportedApiVersions()"


UNSUPPORTED_API_VERSIONS: Final = UnsupportedApiVersions()


@cache
def request_type(api_key: int, version: int) -> Any:
    """The request entity class of this API and version: kio's, or for what Kafka 4 removed,
    the transcribed one (`removed_versions`, `inter_broker_schemas`)."""
    transcribed = _transcribed(api_key, version, "REQUESTS")
    return transcribed if transcribed is not None else load_request_schema(api_key, version)


@cache
def response_type(api_key: int, version: int) -> Any:
    """The response entity class of this API and version: kio's, or for what Kafka 4 removed,
    the transcribed one (`removed_versions`, `inter_broker_schemas`)."""
    transcribed = _transcribed(api_key, version, "RESPONSES")
    return transcribed if transcribed is not None else load_response_schema(api_key, version)


@cache
def _request_header_type(api_key: int, version: int) -> Any:
    """The request header of this API and version (Kafka's `requestHeaderVersion`): v0 for
    ControlledShutdown v0, v2 (with kafkactor's tagged trace context) for a flexible version,
    v1 otherwise."""
    if (api_key, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0):
        return REQUEST_HEADER_V0
    return TRACED_REQUEST_HEADER if request_type(api_key, version).__flexible__ else RequestHeaderV1


@cache
def _request_reader(api_key: int, version: int) -> tuple[Any, Any]:
    header = _request_header_type(api_key, version)
    return entity_reader(header), entity_reader(request_type(api_key, version))


@cache
def _request_writer(api_key: int, version: int) -> tuple[Any, Any]:
    header = _request_header_type(api_key, version)
    return entity_writer(header), entity_writer(request_type(api_key, version))


@cache
def _header_v1_reader() -> Any:
    return entity_reader(RequestHeaderV1)


def _response_header_type(api_key: int, version: int) -> Any:
    """Response header v1 for a flexible version, v0 otherwise; ApiVersions responses always
    use header v0, whatever the version (KIP-511: a client reads it before knowing)."""
    flexible = bool(response_type(api_key, version).__flexible__)
    return ResponseHeaderV1 if flexible and api_key != ApiKey.API_VERSIONS else ResponseHeaderV0


@cache
def _response_writer(api_key: int, version: int) -> tuple[Any, Any, Any]:
    header = _response_header_type(api_key, version)
    return entity_writer(header), entity_writer(response_type(api_key, version)), header


@cache
def _response_reader(api_key: int, version: int) -> tuple[Any, Any]:
    header = _response_header_type(api_key, version)
    return entity_reader(header), entity_reader(response_type(api_key, version))


# -- the trace context in request header v2 --------------------------------------------------------

#: One id of a trace context: hex digits, at most 32 (a W3C trace id; kafkactor's ids,
#: `tracing.new_id`, are 16).
_TRACE_ID: Final = re.compile(r"[0-9a-f]{1,32}")


def _trace_text(trace: tuple[str, str] | None) -> bytes:
    """The tagged field's value for `trace` (trace id, span id): "<trace id>-<span id>", as in
    a W3C traceparent; b"" (no tag written) for no trace, or ids left empty (tracing off).
    Ids that are not hex digits are a caller's bug: ValueError."""
    if trace is None or not trace[0] or not trace[1]:
        return b""
    trace_id, span_id = trace
    if not (_TRACE_ID.fullmatch(trace_id) and _TRACE_ID.fullmatch(span_id)):
        raise ValueError(f"a trace context of hex ids, not {trace!r}")
    return f"{trace_id}-{span_id}".encode("ascii")


def _trace_context(value: bytes) -> tuple[str, str]:
    """(trace id, parent span id) from the tagged field's value; ("", "") when it is absent or
    is not two hex ids joined by "-" (a malformed value is ignored, never refused)."""
    try:
        text = value.decode("ascii")
    except UnicodeDecodeError:
        return "", ""
    trace_id, dash, span_id = text.partition("-")
    if dash and _TRACE_ID.fullmatch(trace_id) and _TRACE_ID.fullmatch(span_id):
        return trace_id, span_id
    return "", ""


# -- the broker side: requests in, responses out ---------------------------------------------------


def decode_request(frame: bytes) -> tuple[RequestHeader, Any]:
    """Read one request frame (without its size prefix): its header and its body entity.

    An ApiVersions request newer than we speak decodes to `UNSUPPORTED_API_VERSIONS`.
    """
    if len(frame) < _PREFIX.size:
        raise BadRequestError(f"a {len(frame)}-byte frame is shorter than a request header")
    api_key, version, _ = _PREFIX.unpack_from(frame)
    if api_key == ApiKey.API_VERSIONS and version > 3:
        header, _ = _read(
            _header_v1_reader(), frame, 0, api_key=api_key, version=version, part="header"
        )
        return _header(header), UNSUPPORTED_API_VERSIONS
    if not served(api_key, version):
        known = api_key in ApiKey._value2member_map_
        what = "an unsupported version" if known else "an unknown api key"
        raise BadRequestError(
            f"{what}: api key {api_key} version {version}", api_key=api_key, api_version=version
        )
    header_reader, body_reader = _request_reader(api_key, version)
    header, used = _read(header_reader, frame, 0, api_key=api_key, version=version, part="header")
    try:  # before kio sizes an array from a count the bytes cannot hold (length_guard)
        check_lengths(request_type(api_key, version), frame, used)
    except MalformedLengthError as error:
        raise BadRequestError(
            f"malformed body of api key {api_key} version {version}: {error}",
            api_key=api_key,
            api_version=version,
        ) from None
    body, _ = _read(body_reader, frame, used, api_key=api_key, version=version, part="body")
    return _header(header), body


def _read(
    reader: Any, frame: bytes, offset: int, *, api_key: int, version: int, part: str
) -> tuple[Any, int]:
    try:
        value, used = reader(frame, offset)
    except Exception as error:  # kio raises its own DecodeErrors, and ValueErrors on bad values
        raise BadRequestError(
            f"malformed {part} of api key {api_key} version {version}: "
            f"{type(error).__name__}: {error}",
            api_key=api_key,
            api_version=version,
        ) from None
    return value, int(used) + (offset if part == "body" else 0)


def _header(header: Any) -> RequestHeader:
    """kafkactor's `RequestHeader` of a header entity of any version: header v0 has no client
    id (Kafka reads it as ""), only header v2 a trace context."""
    trace_id, parent_span_id = _trace_context(getattr(header, "trace_context", b""))
    return RequestHeader(
        api_key=int(header.request_api_key),
        api_version=int(header.request_api_version),
        correlation_id=int(header.correlation_id),
        client_id=getattr(header, "client_id", ""),
        trace_id=trace_id,
        parent_span_id=parent_span_id,
    )


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """One response frame: size prefix, the response header this version uses, the body."""
    header_writer, body_writer, header_type = _response_writer(api_key, version)
    return _framed(
        header_writer, header_type(correlation_id=i32(correlation_id)), body_writer, body
    )


def _framed(header_writer: Any, header: Any, body_writer: Any, body: Any) -> bytes:
    """Size prefix, header, body: one frame as it goes on the wire."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    header_writer(buffer, header)
    body_writer(buffer, body)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - _SIZE.size)
    del frame
    return buffer.getvalue()


# -- the client side: requests out, responses in ---------------------------------------------------


def encode_request(
    api_key: int,
    version: int,
    correlation_id: int,
    client_id: str | None,
    body: Any,
    *,
    trace: tuple[str, str] | None = None,
) -> bytes:
    """One request frame, as a client (here: a broker calling another) sends it: size prefix,
    the request header this version uses, the body.

    `body` must be the request entity of this API and version (`request_type`; TypeError
    otherwise). `trace` (trace id, span id of the sending hop) goes into header v2's tagged
    trace context, so only a flexible version carries it; None, or empty ids (tracing off),
    write no tag. Header v0 (ControlledShutdown v0) has no client id: `client_id` is dropped.
    """
    schema = request_type(api_key, version)
    if not isinstance(body, schema):
        raise TypeError(
            f"the body of api key {api_key} version {version} is a {schema.__name__} of that "
            f"version, not {type(body).__name__} v{getattr(body, '__version__', '?')}"
        )
    header_type = _request_header_type(api_key, version)
    values: dict[str, Any] = {
        "request_api_key": i16(api_key),
        "request_api_version": i16(version),
        "correlation_id": i32(correlation_id),
    }
    if header_type is not REQUEST_HEADER_V0:
        values["client_id"] = client_id
    if header_type is TRACED_REQUEST_HEADER:
        values["trace_context"] = _trace_text(trace)
    header_writer, body_writer = _request_writer(api_key, version)
    return _framed(header_writer, header_type(**values), body_writer, body)


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body entity) of one response frame (without its size prefix) to a
    request of this API and version. Its header is v1 for a flexible version, v0 otherwise and
    for every ApiVersions response (KIP-511). A frame that is malformed, cut short, or longer
    than its body raises `BadResponseError`."""
    header_reader, body_reader = _response_reader(api_key, version)
    try:
        header, header_size = header_reader(frame, 0)
        body, body_size = body_reader(frame, header_size)
    except Exception as error:  # kio raises its own DecodeErrors, and ValueErrors on bad values
        raise BadResponseError(
            f"malformed response of api key {api_key} version {version}: "
            f"{type(error).__name__}: {error}",
            api_key=api_key,
            api_version=version,
        ) from None
    left = len(frame) - int(header_size) - int(body_size)
    if left:
        raise BadResponseError(
            f"{left} bytes past the body of a response of api key {api_key} version {version}",
            api_key=api_key,
            api_version=version,
        )
    return int(header.correlation_id), body


# -- entities --------------------------------------------------------------------------------------


def build(entity: type[Any], **values: Any) -> Any:
    """An instance of `entity` from `values`, dropping the fields this version does not have.

    The KafkaApis role builds one superset of fields per response; each version's entity
    takes the ones it knows (a field added in v5 is simply absent from v4's entity).
    """
    names = {f.name for f in fields(entity)}
    return entity(**{k: v for k, v in values.items() if k in names})


def nested(entity: type[Any], name: str) -> type[Any]:
    """The nested entity `name` defined beside `entity` (the same API and version)."""
    found: type[Any] = getattr(sys.modules[entity.__module__], name)
    return found
