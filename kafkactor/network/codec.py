"""The codec adapter: Kafka's request and response formats through kio, and nothing by hand.

kio's entities are generated from Kafka's own JSON message definitions (every API and version
of Kafka 4) and decode in Rust; the versions Kafka 4 removed that are still served have entities
transcribed from Kafka 3's definitions (`removed_versions`), which kio reads and writes alike.
This module only picks the entity for an API key and version, reads a request frame (header,
then body) and writes a response frame (size prefix, header, body). Every way a frame can be
wrong ends in a `BadRequestError` naming why; the socket server then closes the connection, as
Kafka does.
"""

from __future__ import annotations

import io
import struct
import sys
from dataclasses import fields
from functools import cache
from typing import Any, Final

from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)
from kafkactor.network.api_versions import ApiKey, served
from kafkactor.network.removed_versions import REQUESTS, RESPONSES
from kafkactor.network.request_channel import RequestHeader

from kio.index import load_request_schema, load_response_schema  # isort: skip
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1  # isort: skip
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2  # isort: skip
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0  # isort: skip
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1  # isort: skip
from kio.serial import entity_reader, entity_writer  # isort: skip
from kio.static.primitive import i32  # isort: skip

__all__ = [
    "BadRequestError",
    "UnsupportedApiVersions",
    "build",
    "decode_request",
    "encode_response",
    "nested",
    "request_type",
    "response_type",
]

_PREFIX: Final = struct.Struct(">hhi")  # api key, api version, correlation id
_SIZE: Final = struct.Struct(">i")


class BadRequestError(Exception):
    """A frame that cannot be served: unknown API, unsupported version, malformed bytes."""

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
    """The request entity class of this API and version: kio's, or for a version Kafka 4
    removed, the transcribed one (`kafkactor.network.removed_versions`)."""
    transcribed = REQUESTS.get((api_key, version))
    return transcribed if transcribed is not None else load_request_schema(api_key, version)


@cache
def _request_reader(api_key: int, version: int) -> tuple[Any, Any, Any]:
    schema = request_type(api_key, version)
    header = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    return entity_reader(header), entity_reader(schema), schema


@cache
def _header_v1_reader() -> Any:
    return entity_reader(RequestHeaderV1)


@cache
def response_type(api_key: int, version: int) -> Any:
    """The response entity class of this API and version: kio's, or for a version Kafka 4
    removed, the transcribed one (`kafkactor.network.removed_versions`)."""
    transcribed = RESPONSES.get((api_key, version))
    return transcribed if transcribed is not None else load_response_schema(api_key, version)


@cache
def _response_writer(api_key: int, version: int) -> tuple[Any, Any, bool]:
    schema = response_type(api_key, version)
    # ApiVersions responses always use header v0, whatever the version (KIP-511)
    flexible = bool(schema.__flexible__) and api_key != ApiKey.API_VERSIONS
    header = ResponseHeaderV1 if flexible else ResponseHeaderV0
    return entity_writer(header), entity_writer(schema), flexible


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
    header_reader, body_reader, _ = _request_reader(api_key, version)
    header, used = _read(header_reader, frame, 0, api_key=api_key, version=version, part="header")
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
    return RequestHeader(
        api_key=int(header.request_api_key),
        api_version=int(header.request_api_version),
        correlation_id=int(header.correlation_id),
        client_id=header.client_id,
    )


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """One response frame: size prefix, the response header this version uses, the body."""
    header_writer, body_writer, flexible = _response_writer(api_key, version)
    header_type = ResponseHeaderV1 if flexible else ResponseHeaderV0
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    header_writer(buffer, header_type(correlation_id=i32(correlation_id)))
    body_writer(buffer, body)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - _SIZE.size)
    del frame
    return buffer.getvalue()


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
