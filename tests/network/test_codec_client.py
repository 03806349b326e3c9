"""The client side of the codec (a broker calling another broker): `encode_request` writes what
`decode_request` reads, header v0 / v1 / v2 as Kafka chooses them, kafkactor's trace context in
a tagged field of header v2 that real clients never send (and a garbage value of which is
ignored); `decode_response` reads what `encode_response` writes and refuses a cut or padded
frame with a `BadResponseError`. Also: Fetch v12 and OffsetForLeaderEpoch v4 are decoded but
not advertised, and ApiVersions lists the inter-broker APIs.

Frames as a real client writes them come from kio directly (tests/network/wire.py), and the
tagged field's bytes are packed here by hand.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any, Final

import pytest
from kio.static.primitive import i32

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import SUPPORTED, ApiKey, served
from kafkactor.network.codec import (
    BadRequestError,
    BadResponseError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_type,
    response_type,
)
from kafkactor.network.inter_broker_schemas import TRACE_CONTEXT_TAG
from kafkactor.network.kafka_apis import Answer, KafkaApis, KafkaApisConfig
from kafkactor.network.request_channel import RequestHeader
from tests.network import wire
from tests.network.wire import fetch_request, filled, sample_request

TRACE: Final = ("4bf92f3577b34da6", "00f067aa0ba902b7")
INTER_BROKER: Final = {
    ApiKey.LEADER_AND_ISR: range(8),
    ApiKey.STOP_REPLICA: range(5),
    ApiKey.UPDATE_METADATA: range(9),
    ApiKey.CONTROLLED_SHUTDOWN: range(4),
}
CASES: Final = [(api, v) for api, versions in INTER_BROKER.items() for v in versions]


def _id(case: tuple[ApiKey, int]) -> str:
    return f"{case[0].name}-v{case[1]}"


def _unsized(frame: bytes) -> bytes:
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


def _tag(value: bytes) -> bytes:
    """The tagged-field section of a header v2 holding the trace context `value`, packed by
    hand: one field, its tag, its size, then the compact string (length + 1, bytes)."""
    assert len(value) < 126 and TRACE_CONTEXT_TAG == 10_000
    tag = bytes([0x90, 0x4E])  # 10_000 as an unsigned varint
    data = bytes([len(value) + 1]) + value
    return b"\x01" + tag + bytes([len(data)]) + data


# -- encode_request, decode_request ---------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_id)
@pytest.mark.parametrize("trace", [TRACE, None])
def test_every_inter_broker_request_round_trips(
    case: tuple[ApiKey, int], trace: tuple[str, str] | None
) -> None:
    api, version = case
    body = filled(request_type(api, version))
    frame = encode_request(api, version, 2**31 - 1, "broker-1", body, trace=trace)
    header, decoded = decode_request(_unsized(frame))
    flexible = bool(body.__flexible__)
    carried = trace if trace is not None and flexible else ("", "")
    assert header == RequestHeader(
        api_key=api,
        api_version=version,
        correlation_id=2**31 - 1,
        client_id="" if (api, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0) else "broker-1",
        trace_id=carried[0],
        parent_span_id=carried[1],
    )
    assert decoded == body


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_without_a_trace_the_frame_is_the_one_a_kafka_client_writes(
    case: tuple[ApiKey, int],
) -> None:
    api, version = case
    body = filled(request_type(api, version))
    mine = encode_request(api, version, 5, "c", body)
    assert _unsized(mine) == wire.encode_request(
        api, version, body, correlation_id=5, client_id="c"
    )


def test_the_trace_context_is_one_tagged_field_of_header_v2() -> None:
    body = sample_request(ApiKey.CONTROLLED_SHUTDOWN, 3)
    plain = wire.encode_request(ApiKey.CONTROLLED_SHUTDOWN, 3, body, correlation_id=9)
    header_size = len(wire.raw_header(ApiKey.CONTROLLED_SHUTDOWN, 3, 9, wire.CLIENT_ID.encode()))
    assert plain[header_size] == 0  # header v2 as kio writes it: no tagged fields
    traced = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 3, 9, wire.CLIENT_ID, body, trace=TRACE)
    text = f"{TRACE[0]}-{TRACE[1]}".encode()
    assert _unsized(traced) == plain[:header_size] + _tag(text) + plain[header_size + 1 :]


def test_a_non_flexible_version_carries_no_trace() -> None:
    body = sample_request(ApiKey.LEADER_AND_ISR, 3)
    frame = encode_request(ApiKey.LEADER_AND_ISR, 3, 1, "c", body, trace=TRACE)
    assert _unsized(frame) == wire.encode_request(
        ApiKey.LEADER_AND_ISR, 3, body, correlation_id=1, client_id="c"
    )
    header, _ = decode_request(_unsized(frame))
    assert (header.trace_id, header.parent_span_id) == ("", "")


def test_controlled_shutdown_v0_uses_request_header_v0() -> None:
    body = request_type(ApiKey.CONTROLLED_SHUTDOWN, 0)(broker_id=i32(3))
    frame = encode_request(ApiKey.CONTROLLED_SHUTDOWN, 0, 77, "ignored", body)
    assert _unsized(frame) == struct.pack(">hhii", 7, 0, 77, 3)
    header, decoded = decode_request(_unsized(frame))
    assert (header.correlation_id, header.client_id, decoded.broker_id) == (77, "", 3)


@pytest.mark.parametrize("trace", [("", ""), ("", "00f067aa0ba902b7"), ("4bf92f3577b34da6", "")])
def test_empty_ids_write_no_tag(trace: tuple[str, str]) -> None:
    body = sample_request(ApiKey.STOP_REPLICA, 3)
    frame = encode_request(ApiKey.STOP_REPLICA, 3, 1, "c", body, trace=trace)
    assert frame == encode_request(ApiKey.STOP_REPLICA, 3, 1, "c", body)


def test_ids_of_tracing_new_ids_form_are_carried() -> None:
    trace = (f"{2**64 - 1:016x}", f"{1:016x}")  # 16 lower-case hex digits, as tracing.new_id
    body = sample_request(ApiKey.UPDATE_METADATA, 6)
    header, _ = decode_request(
        _unsized(encode_request(ApiKey.UPDATE_METADATA, 6, 1, "c", body, trace=trace))
    )
    assert (header.trace_id, header.parent_span_id) == trace


@pytest.mark.parametrize(
    "trace", [("not hex!", "00"), ("ab", "x-y"), ("AB", "cd"), ("a" * 33, "b")]
)
def test_ids_that_are_not_hex_are_a_callers_bug(trace: tuple[str, str]) -> None:
    body = sample_request(ApiKey.STOP_REPLICA, 3)
    with pytest.raises(ValueError, match="hex"):
        encode_request(ApiKey.STOP_REPLICA, 3, 1, "c", body, trace=trace)


def test_a_body_of_another_version_is_refused() -> None:
    body = sample_request(ApiKey.LEADER_AND_ISR, 3)
    with pytest.raises(TypeError, match="LeaderAndIsrRequest"):
        encode_request(ApiKey.LEADER_AND_ISR, 4, 1, "c", body)


# -- what a real client sends, and garbage in the tag ---------------------------------------------


@pytest.mark.parametrize(
    ("api", "version"),
    [
        (ApiKey.FETCH, 12),
        (ApiKey.LIST_GROUPS, 4),
        (ApiKey.API_VERSIONS, 3),
        (ApiKey.STOP_REPLICA, 2),
    ],
)
def test_a_header_v2_as_kio_writes_it_decodes_without_a_trace(api: ApiKey, version: int) -> None:
    body = sample_request(api, version)
    frame = wire.encode_request(api, version, body, correlation_id=4, client_id="rdkafka")
    header, decoded = decode_request(frame)
    assert header == RequestHeader(
        api_key=api, api_version=version, correlation_id=4, client_id="rdkafka"
    )
    assert decoded == body


def _with_tag(value: bytes, api: ApiKey = ApiKey.FETCH, version: int = 12) -> tuple[bytes, Any]:
    """A kio-written header v2 frame whose empty tagged-field section is replaced with the
    trace-context tag holding `value`."""
    body = sample_request(api, version)
    frame = wire.encode_request(api, version, body, correlation_id=4, client_id="c")
    header_size = len(wire.raw_header(api, version, 4, b"c"))
    assert frame[header_size] == 0  # no tagged fields
    return frame[:header_size] + _tag(value) + frame[header_size + 1 :], body


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"garbage",
        b"\xff\xfe\x00",  # not even UTF-8
        b"4bf92f3577b34da6",  # no span id
        b"4bf92f3577b34da6-",
        b"-00f067aa0ba902b7",
        b"4bf92f3577b34da6-00f067aa0ba902b7-01",  # a third part
        b"4BF92F3577B34DA6-00F067AA0BA902B7",  # not lower case
        b"xyz-abc",
        b"0" * 33 + b"-1",  # too long for a trace id
    ],
)
def test_a_malformed_trace_context_is_ignored(value: bytes) -> None:
    frame, body = _with_tag(value)
    header, decoded = decode_request(frame)
    assert (header.trace_id, header.parent_span_id) == ("", "")
    assert (header.correlation_id, header.client_id) == (4, "c")
    assert decoded == body


def test_a_hand_packed_trace_context_is_read() -> None:
    frame, body = _with_tag(b"0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331")  # W3C's
    header, decoded = decode_request(frame)
    assert (header.trace_id, header.parent_span_id) == (
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
    )
    assert decoded == body


def test_another_unknown_tag_in_the_header_is_still_refused() -> None:
    frame, _ = _with_tag(b"x")
    header_size = len(wire.raw_header(ApiKey.FETCH, 12, 4, b"c"))
    other = frame[:header_size] + b"\x01\x05\x01\x00" + frame[header_size + 1 + 6 :]
    with pytest.raises(BadRequestError, match="malformed header"):
        decode_request(other)


@pytest.mark.parametrize("case", [(ApiKey.FETCH, 12), (ApiKey.LEADER_AND_ISR, 7)], ids=_id)
def test_a_traced_request_cut_anywhere_is_refused(case: tuple[ApiKey, int]) -> None:
    api, version = case
    frame = _unsized(
        encode_request(api, version, 1, "c", sample_request(api, version), trace=TRACE)
    )
    for cut in range(8, len(frame)):
        with pytest.raises(BadRequestError):
            decode_request(frame[:cut])


# -- decode_response -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_inter_broker_response_round_trips(case: tuple[ApiKey, int]) -> None:
    api, version = case
    body = filled(response_type(api, version))
    frame = encode_response(api, version, -5, body)
    assert decode_response(api, version, _unsized(frame)) == (-5, body)
    assert wire.decode_response(_unsized(frame), api, version) == (-5, body)


@pytest.mark.parametrize("case", [(ApiKey.LEADER_AND_ISR, 0), (ApiKey.UPDATE_METADATA, 8)], ids=_id)
def test_a_cut_or_padded_response_is_a_bad_response(case: tuple[ApiKey, int]) -> None:
    api, version = case
    frame = _unsized(encode_response(api, version, 3, filled(response_type(api, version))))
    for cut in range(len(frame)):
        with pytest.raises(BadResponseError) as raised:
            decode_response(api, version, frame[:cut])
        assert (raised.value.api_key, raised.value.api_version) == (api, version)
        assert "malformed response" in raised.value.reason
    with pytest.raises(BadResponseError, match="1 bytes past the body"):
        decode_response(api, version, frame + b"\x00")


def test_an_api_versions_response_is_read_with_header_v0() -> None:
    schema = response_type(ApiKey.API_VERSIONS, 3)
    body = wire.make(
        schema,
        error_code=ErrorCode.NONE,
        api_keys=(wire.nested(schema, "ApiVersion")(api_key=4, min_version=0, max_version=7),),
        throttle_time=datetime.timedelta(0),
    )
    frame = _unsized(encode_response(ApiKey.API_VERSIONS, 3, 12, body))
    assert frame[:6] == struct.pack(">ih", 12, 0)  # no tagged-field byte after the id
    assert decode_response(ApiKey.API_VERSIONS, 3, frame) == (12, body)


def test_a_fetch_v12_response_is_read_with_header_v1() -> None:
    schema = response_type(ApiKey.FETCH, 12)
    body = wire.make(
        schema,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.NONE,
        session_id=0,
        responses=(),
    )
    frame = _unsized(encode_response(ApiKey.FETCH, 12, 12, body))
    assert frame[:5] == struct.pack(">i", 12) + b"\x00"
    assert decode_response(ApiKey.FETCH, 12, frame) == (12, body)


# -- served, not advertised; the advertised list -------------------------------------------------


@pytest.mark.parametrize(
    ("api", "version"), [(ApiKey.FETCH, 12), (ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)]
)
def test_the_first_flexible_fetch_and_offset_for_leader_epoch_decode(
    api: ApiKey, version: int
) -> None:
    assert served(api, version)
    assert not served(api, version + 1)
    body = sample_request(api, version)
    header, decoded = decode_request(
        _unsized(encode_request(api, version, 6, "f", body, trace=TRACE))
    )
    assert (header.api_version, header.trace_id, header.parent_span_id) == (version, *TRACE)
    assert decoded == body


def test_a_followers_fetch_v12_keeps_its_fields() -> None:
    body = fetch_request(12, offset=42, replica_id=2, partition=3)
    _, decoded = decode_request(_unsized(encode_request(ApiKey.FETCH, 12, 1, "b2", body)))
    assert decoded.replica_id == 2
    (topic,) = decoded.topics
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition, partition.fetch_offset) == (wire.TOPIC, 3, 42)
    assert partition.last_fetched_epoch == -1


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_advertises_fetch_up_to_11_and_the_inter_broker_apis(version: int) -> None:
    apis = KafkaApis(1, KafkaApisConfig(cluster_id="c"))
    header = RequestHeader(
        api_key=ApiKey.API_VERSIONS, api_version=version, correlation_id=1, client_id="c"
    )
    step = apis.handle(header, sample_request(ApiKey.API_VERSIONS, version))
    assert isinstance(step, Answer)
    frame = encode_response(ApiKey.API_VERSIONS, version, 1, step.body)
    _, body = decode_response(ApiKey.API_VERSIONS, version, _unsized(frame))
    listed = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    assert listed[ApiKey.FETCH] == (4, 11)
    assert listed[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (2, 3)
    assert {k: listed[k] for k in (4, 5, 6, 7)} == {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3)}
    assert listed == {int(api): ranges for api, ranges in SUPPORTED.items()}
