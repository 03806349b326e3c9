"""The codec: request frames of every served API and version read back exactly, every way a frame
can be wrong ends in a `BadRequestError` (and only that), and responses carry the header their
version calls for.

The requests are written with kio directly (tests/network/wire.py), not with the codec, as a
client would write them.
"""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import SERVED_NOT_ADVERTISED, SUPPORTED, ApiKey, served
from kafkactor.network.codec import (
    UNSUPPORTED_API_VERSIONS,
    BadRequestError,
    decode_request,
    encode_response,
    response_type,
)
from kafkactor.network.request_channel import RequestHeader
from tests.network.wire import (
    api_versions_request,
    decode_response,
    encode_request,
    make,
    metadata_request,
    nested,
    produce_request,
    raw_header,
    sample_request,
    served_range,
)

# every served API at its lowest and highest served version
EDGES = sorted(
    {
        (api, version)
        for api in SUPPORTED
        for version in (served_range(api)[0], served_range(api)[-1])
    }
)
EVERY = [(api, version) for api in sorted(SUPPORTED) for version in served_range(api)]


def _id(case: tuple[ApiKey, int]) -> str:
    return f"{case[0].name}-v{case[1]}"


# -- requests that decode ------------------------------------------------------------------------


@pytest.mark.parametrize("case", EDGES, ids=_id)
@pytest.mark.parametrize("client_id", ["rdkafka", None, ""])
def test_every_served_api_at_its_edge_versions_reads_back_exactly(
    case: tuple[ApiKey, int], client_id: str | None
) -> None:
    api, version = case
    body = sample_request(api, version)
    frame = encode_request(api, version, body, correlation_id=2**31 - 1, client_id=client_id)
    header, decoded = decode_request(frame)
    if (api, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0):
        client_id = ""  # request header v0 has no client id: Kafka reads ""
    assert header == RequestHeader(
        api_key=api, api_version=version, correlation_id=2**31 - 1, client_id=client_id
    )
    assert decoded == body


@pytest.mark.parametrize("case", EVERY, ids=_id)
def test_every_served_version_decodes(case: tuple[ApiKey, int]) -> None:
    api, version = case
    body = sample_request(api, version)
    header, decoded = decode_request(encode_request(api, version, body, correlation_id=-7))
    assert (header.api_key, header.api_version, header.correlation_id) == (api, version, -7)
    assert decoded == body


def test_the_served_versions_are_the_advertised_ones_but_produce_0_to_2_plus_fetch_12() -> None:
    for api, (low, high) in SUPPORTED.items():
        extra = SERVED_NOT_ADVERTISED.get(api, (high + 10, high + 10))
        for version in range(low - 2, high + 3):
            expected = (
                low <= version <= high and not (api is ApiKey.PRODUCE and version < 3)
            ) or extra[0] <= version <= extra[1]
            assert served(api, version) is expected, (api, version)
    assert SERVED_NOT_ADVERTISED == {
        ApiKey.FETCH: (12, 12),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (4, 4),
    }


# -- frames that cannot be served ----------------------------------------------------------------


def _refused(frame: bytes) -> BadRequestError:
    with pytest.raises(BadRequestError) as raised:
        decode_request(frame)
    return raised.value


@pytest.mark.parametrize("frame", [b"", b"\x00", b"\x00\x12\x00\x03\x00\x00\x00"])
def test_a_frame_shorter_than_a_header_prefix_is_refused(frame: bytes) -> None:
    assert "shorter than a request header" in _refused(frame).reason


@pytest.mark.parametrize("api_key", [-1, 34, 38, 74, 9999, 32767])
def test_an_api_key_not_served_is_refused(api_key: int) -> None:
    # 34 (AlterReplicaLogDirs) and 38 (CreateDelegationToken) are Kafka's, just not served here
    error = _refused(raw_header(api_key, 0, 5, b"client") + b"\x00" * 16)
    assert "unknown api key" in error.reason
    assert (error.api_key, error.api_version) == (api_key, 0)


@pytest.mark.parametrize(
    ("api", "version"),
    [
        (ApiKey.PRODUCE, 0),  # advertised (as Kafka 4 does) but magic 0/1: refused
        (ApiKey.PRODUCE, 1),
        (ApiKey.PRODUCE, 2),
        (ApiKey.PRODUCE, 9),
        (ApiKey.FETCH, 3),
        (ApiKey.FETCH, 13),  # 12 is served, not advertised
        (ApiKey.METADATA, 13),
        (ApiKey.LEADER_AND_ISR, 8),
        (ApiKey.STOP_REPLICA, 5),
        (ApiKey.UPDATE_METADATA, 9),
        (ApiKey.CONTROLLED_SHUTDOWN, 4),
        (ApiKey.LIST_OFFSETS, 0),
        (ApiKey.API_VERSIONS, -1),
        (ApiKey.CREATE_TOPICS, 1),
        (ApiKey.OFFSET_FOR_LEADER_EPOCH, -32768),
    ],
)
def test_an_unsupported_version_is_refused(api: ApiKey, version: int) -> None:
    error = _refused(raw_header(api, version, 5, b"client") + b"\x00" * 16)
    assert "unsupported version" in error.reason
    assert (error.api_key, error.api_version) == (api, version)


@pytest.mark.parametrize(
    "frame",
    [
        raw_header(ApiKey.METADATA, 1, 9, b"ab")[:-1],  # the client id cut short
        raw_header(ApiKey.METADATA, 1, 9, b"\xff\xfe") + b"\x00\x00\x00\x00",  # not UTF-8
        struct.pack(">hhih", ApiKey.METADATA, 1, 9, 200) + b"short",  # a length past the end
        struct.pack(">hhi", ApiKey.METADATA, 1, 9),  # no client id at all
        # a flexible header (v2) with an unknown tagged field
        raw_header(ApiKey.API_VERSIONS, 3, 9, b"ab") + b"\x01\x01\x00",
        raw_header(ApiKey.API_VERSIONS, 7, 9, b"ab")[:-1],  # KIP-511, and still malformed
    ],
    ids=["truncated-client-id", "invalid-utf8", "length-past-end", "no-client-id", "tag", "kip511"],
)
def test_a_malformed_header_is_refused(frame: bytes) -> None:
    error = _refused(frame)
    assert "malformed header" in error.reason
    assert error.api_key in (ApiKey.METADATA, ApiKey.API_VERSIONS)


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">i", -5),  # a negative array length that is not null
        struct.pack(">i", 2**31 - 1),  # two billion topics announced, none sent
        struct.pack(">ih", 1, 2) + b"\xff\xfe",  # a topic name that is not UTF-8
        struct.pack(">ih", 1, 10) + b"abc",  # a topic name cut short
    ],
    ids=["negative-array", "huge-array", "invalid-utf8", "short-string"],
)
def test_a_malformed_body_is_refused(body: bytes) -> None:
    error = _refused(raw_header(ApiKey.METADATA, 1, 9, b"client") + body)
    assert "malformed body" in error.reason
    assert (error.api_key, error.api_version) == (ApiKey.METADATA, 1)


@pytest.mark.parametrize(
    "case", [c for c in EDGES if c[0] is not ApiKey.API_VERSIONS or c[1] == 3], ids=_id
)  # (an ApiVersions v0-2 body is empty: there is nothing to cut)
def test_a_body_cut_anywhere_is_refused(case: tuple[ApiKey, int]) -> None:
    api, version = case
    body = sample_request(api, version)
    frame = encode_request(api, version, body, client_id="c")
    # header v1, and header v2's empty tagged fields for a flexible version; header v0 (no
    # client id) for ControlledShutdown v0
    header_size = len(raw_header(api, version, 1, b"c")) + (1 if body.__flexible__ else 0)
    if (api, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0):
        header_size = 8
    assert decode_request(frame)[1] == body
    for cut in range(header_size, len(frame)):
        error = _refused(frame[:cut])
        assert "malformed body" in error.reason, (cut, error.reason)


def test_a_produce_without_records_at_the_wire_level_is_a_truncated_body() -> None:
    frame = encode_request(ApiKey.PRODUCE, 8, produce_request(8, b"x" * 100, acks=1))
    error = _refused(frame[:-50])  # the records' length says 100, 50 arrived
    assert (error.api_key, error.api_version) == (ApiKey.PRODUCE, 8)
    assert "malformed body" in error.reason


# -- KIP-511: an ApiVersions request newer than the broker --------------------------------------


@pytest.mark.parametrize("version", [4, 5, 127, 32767])
def test_an_api_versions_request_newer_than_v3_decodes_to_unsupported(version: int) -> None:
    # the client writes it in a version we cannot read (flexible header v2 with tagged
    # fields, a body of fields we do not know): only the header's first fields are read
    frame = raw_header(ApiKey.API_VERSIONS, version, 77, b"librdkafka") + b"\x00\x05junk!"
    header, body = decode_request(frame)
    assert header == RequestHeader(
        api_key=ApiKey.API_VERSIONS, api_version=version, correlation_id=77, client_id="librdkafka"
    )
    assert body is UNSUPPORTED_API_VERSIONS


def test_an_api_versions_v4_as_kio_writes_it_is_unsupported_too() -> None:
    frame = encode_request(ApiKey.API_VERSIONS, 4, api_versions_request(4), correlation_id=3)
    header, body = decode_request(frame)
    assert (header.api_version, header.correlation_id, header.client_id) == (
        4,
        3,
        "kafkactor-tests",
    )
    assert body is UNSUPPORTED_API_VERSIONS


# -- responses -----------------------------------------------------------------------------------


def _api_versions_body(version: int) -> object:
    schema = response_type(ApiKey.API_VERSIONS, version)
    entry = nested(schema, "ApiVersion")
    return make(
        schema,
        error_code=ErrorCode.NONE,
        api_keys=(entry(api_key=18, min_version=0, max_version=3),),
        throttle_time=datetime.timedelta(0),
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_api_versions_response_has_header_v0_even_when_flexible(version: int) -> None:
    body = _api_versions_body(version)
    frame = encode_response(ApiKey.API_VERSIONS, version, 1234, body)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    # header v0 is the correlation id alone: the body's error code follows at once (v1 would
    # put a tagged-fields byte in between, which a client reading header v0 would misread)
    assert frame[4:8] == struct.pack(">i", 1234)
    assert frame[8:10] == struct.pack(">h", ErrorCode.NONE)
    header, used = entity_reader(ResponseHeaderV0)(frame, 4)
    assert (header.correlation_id, used) == (1234, 4)
    assert decode_response(frame[4:], ApiKey.API_VERSIONS, version) == (1234, body)


def test_a_flexible_response_other_than_api_versions_has_header_v1() -> None:
    # no served version other than ApiVersions v3 is flexible, but the rule is the codec's:
    # Metadata v9 is the first flexible Metadata
    schema = response_type(ApiKey.METADATA, 9)
    assert schema.__flexible__
    body = make(
        schema,
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id="c",
        controller_id=1,
        topics=(),
        cluster_authorized_operations=-2147483648,
    )
    frame = encode_response(ApiKey.METADATA, 9, 99, body)
    assert frame[4:9] == struct.pack(">i", 99) + b"\x00"  # correlation id, no tagged fields
    assert decode_response(frame[4:], ApiKey.METADATA, 9) == (99, body)


@pytest.mark.parametrize("version", [0, 8])
def test_a_non_flexible_response_has_header_v0(version: int) -> None:
    schema = response_type(ApiKey.METADATA, version)
    body = make(
        schema,
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id="c",
        controller_id=1,
        topics=(),
        cluster_authorized_operations=-2147483648,
    )
    frame = encode_response(ApiKey.METADATA, version, -1, body)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, -1)
    assert decode_response(frame[4:], ApiKey.METADATA, version) == (-1, body)


# -- fuzz ----------------------------------------------------------------------------------------

VALID_FRAMES = [
    encode_request(api, version, sample_request(api, version), correlation_id=5)
    for api, version in EVERY
] + [encode_request(ApiKey.METADATA, 1, metadata_request(1, None))]


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    """A valid request frame with some bytes changed, cut, inserted or a length overwritten."""
    frame = bytearray(draw(st.sampled_from(VALID_FRAMES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "length"]))
        at = draw(st.integers(min_value=0, max_value=max(0, len(frame) - 1)))
        if kind == "flip" and frame:
            frame[at] = draw(st.integers(min_value=0, max_value=255))
        elif kind == "cut":
            frame = frame[:at]
        elif kind == "insert":
            frame[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            value = draw(st.sampled_from([-2, -1, 0, 1, 0x7FFF, 0xFFFF, 2**31 - 1]))
            frame[at : at + 4] = struct.pack(">i", value)
    return bytes(frame)


def _decodes_or_is_refused(frame: bytes) -> None:
    try:
        header, _ = decode_request(frame)
    except BadRequestError as error:
        assert error.reason
    else:  # decoded: it names a version the broker serves (or the KIP-511 fallback)
        assert served(header.api_key, header.api_version) or (
            header.api_key == ApiKey.API_VERSIONS and header.api_version > 3
        )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=st.binary(max_size=200))
def test_random_bytes_never_raise_anything_but_bad_request(frame: bytes) -> None:
    _decodes_or_is_refused(frame)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.tuples(st.sampled_from(sorted(SUPPORTED)), st.integers(min_value=-2, max_value=12)),
    correlation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1),
    rest=st.binary(max_size=200),
)
def test_random_bodies_behind_a_plausible_header_never_raise_anything_but_bad_request(
    prefix: tuple[ApiKey, int], correlation_id: int, rest: bytes
) -> None:
    api, version = prefix
    _decodes_or_is_refused(struct.pack(">hhi", api, version, correlation_id) + rest)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=mutated_frames())
def test_mutated_requests_never_raise_anything_but_bad_request(frame: bytes) -> None:
    _decodes_or_is_refused(frame)
