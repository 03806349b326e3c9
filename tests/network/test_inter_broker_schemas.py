"""The inter-broker APIs Kafka 4 removed (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown), transcribed from Kafka 3.9's JSON definitions, and the flexible-version
support of `transcribed` they need.

Every version's request and response, filled with values that are no field's default, reads
back exactly through kio; the bytes of some versions are checked against bytes packed here with
`struct` in the order of Kafka 3.9's JSON fields (the independent check); and `transcribed`
makes, from a definition with tags, nullable structs and defaults, the same entity kio's
generator made (CreateTopics' `CreatableTopicResult`).
"""

from __future__ import annotations

import dataclasses
import struct
import typing
import uuid
from collections.abc import Iterator, Sequence
from types import NoneType, UnionType
from typing import Any, Final

import pytest
from kio.index import UnknownAPIKey, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from kafkactor.network.api_versions import SUPPORTED, ApiKey, served
from kafkactor.network.codec import build, nested, request_type, response_type
from kafkactor.network.inter_broker_schemas import REQUEST_HEADER_V0, REQUESTS, RESPONSES
from kafkactor.network.transcribed import Field, entity, message
from tests.network.wire import filled

#: api -> (the versions of Kafka 3.9, the first flexible one)
VERSIONS: Final = {
    ApiKey.LEADER_AND_ISR: (range(8), 4),
    ApiKey.STOP_REPLICA: (range(5), 2),
    ApiKey.UPDATE_METADATA: (range(9), 6),
    ApiKey.CONTROLLED_SHUTDOWN: (range(4), 3),
}
CASES: Final = [(api, v) for api, (versions, _) in VERSIONS.items() for v in versions]
TOPIC_ID: Final = uuid.UUID("6f1a9d3c-2b4e-4c8a-9e71-0d5b3f2a8c44")


def _id(case: tuple[ApiKey, int]) -> str:
    return f"{case[0].name}-v{case[1]}"


def _write(value: Any) -> bytes:
    buffer = bytearray()

    class _Sink:
        def write(self, data: bytes) -> int:
            buffer.extend(data)
            return len(data)

    entity_writer(type(value))(_Sink(), value)  # type: ignore[arg-type]
    return bytes(buffer)


def _read_back(value: Any) -> Any:
    """`value` written by kio and read back; every byte must be read."""
    data = _write(value)
    read, used = entity_reader(type(value))(data, 0)
    assert used == len(data)
    return read


def _element(annotation: Any) -> Any:
    """The element type of a field's annotation (through `tuple[...]` and `| None`)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is tuple:
            annotation = typing.get_args(annotation)[0]
        elif origin is UnionType:
            annotation = next(a for a in typing.get_args(annotation) if a is not NoneType)
        else:
            return annotation


def _structs(cls: type[Any]) -> Iterator[type[Any]]:
    """`cls` and every struct nested in it."""
    yield cls
    for f in dataclasses.fields(cls):
        element = _element(f.type)
        if isinstance(element, type) and dataclasses.is_dataclass(element):
            yield from _structs(element)


# -- the tables ----------------------------------------------------------------------------------


def test_every_version_of_kafka_3_9_is_transcribed_served_and_absent_from_kio() -> None:
    assert sorted(REQUESTS) == sorted(RESPONSES) == sorted(CASES)
    for api, (versions, _) in VERSIONS.items():
        assert SUPPORTED[api] == (versions[0], versions[-1])
        with pytest.raises(UnknownAPIKey):
            load_request_schema(api, 0)
        with pytest.raises(UnknownAPIKey):
            load_response_schema(api, 0)
    for api, version in CASES:
        assert served(api, version)
        assert request_type(api, version) is REQUESTS[(api, version)]
        assert response_type(api, version) is RESPONSES[(api, version)]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_flexible_versions_and_class_variables_as_kio_generates_them(
    case: tuple[ApiKey, int],
) -> None:
    api, version = case
    flexible = version >= VERSIONS[api][1]
    request, response = REQUESTS[case], RESPONSES[case]
    assert request.__name__ == "".join(w.capitalize() for w in api.name.split("_")) + "Request"
    assert response.__name__ == request.__name__.removesuffix("Request") + "Response"
    for cls, kind in ((request, EntityType.request), (response, EntityType.response)):
        assert (cls.__type__, cls.__version__, cls.__api_key__) == (kind, version, api)
        for struct_type in _structs(cls):
            assert struct_type.__flexible__ is flexible, struct_type
            assert struct_type.__module__ == cls.__module__
            assert nested(cls, struct_type.__name__) is struct_type
    if case == (ApiKey.CONTROLLED_SHUTDOWN, 0):
        assert request.__header_schema__ is REQUEST_HEADER_V0
    else:
        assert request.__header_schema__ is (RequestHeaderV2 if flexible else RequestHeaderV1)
    assert response.__header_schema__ is (ResponseHeaderV1 if flexible else ResponseHeaderV0)


def _names(cls: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def test_the_field_names_of_the_versions_kafkactor_sends() -> None:
    """kio's snake case of the JSON names, in the JSON's order (pinned: the translation of
    the actor messages names them)."""
    lai = REQUESTS[(ApiKey.LEADER_AND_ISR, 4)]
    assert _names(lai) == [
        "controller_id",
        "controller_epoch",
        "broker_epoch",
        "topic_states",
        "live_leaders",
    ]
    assert _names(nested(lai, "LeaderAndIsrTopicState")) == ["topic_name", "partition_states"]
    assert _names(nested(lai, "LeaderAndIsrPartitionState")) == [
        "partition_index",
        "controller_epoch",
        "leader",
        "leader_epoch",
        "isr",
        "partition_epoch",
        "replicas",
        "adding_replicas",
        "removing_replicas",
        "is_new",
    ]
    assert _names(nested(lai, "LeaderAndIsrLiveLeader")) == ["broker_id", "host_name", "port"]
    lai_response = RESPONSES[(ApiKey.LEADER_AND_ISR, 4)]
    assert _names(lai_response) == ["error_code", "partition_errors"]
    assert _names(nested(lai_response, "LeaderAndIsrPartitionError")) == [
        "topic_name",
        "partition_index",
        "error_code",
    ]
    stop = REQUESTS[(ApiKey.STOP_REPLICA, 3)]
    assert _names(stop) == ["controller_id", "controller_epoch", "broker_epoch", "topic_states"]
    assert _names(nested(stop, "StopReplicaTopicState")) == ["topic_name", "partition_states"]
    assert _names(nested(stop, "StopReplicaPartitionState")) == [
        "partition_index",
        "leader_epoch",
        "delete_partition",
    ]
    stop_response = RESPONSES[(ApiKey.STOP_REPLICA, 3)]
    assert _names(stop_response) == ["error_code", "partition_errors"]
    assert _names(nested(stop_response, "StopReplicaPartitionError")) == [
        "topic_name",
        "partition_index",
        "error_code",
    ]
    update = REQUESTS[(ApiKey.UPDATE_METADATA, 6)]
    assert _names(update) == [
        "controller_id",
        "controller_epoch",
        "broker_epoch",
        "topic_states",
        "live_brokers",
    ]
    assert _names(nested(update, "UpdateMetadataTopicState")) == [
        "topic_name",
        "partition_states",
    ]
    assert _names(nested(update, "UpdateMetadataPartitionState")) == [
        "partition_index",
        "controller_epoch",
        "leader",
        "leader_epoch",
        "isr",
        "zk_version",
        "replicas",
        "offline_replicas",
    ]
    assert _names(nested(update, "UpdateMetadataBroker")) == ["id_", "endpoints", "rack"]
    assert _names(nested(update, "UpdateMetadataEndpoint")) == [
        "port",
        "host",
        "listener",
        "security_protocol",
    ]
    assert _names(RESPONSES[(ApiKey.UPDATE_METADATA, 6)]) == ["error_code"]
    shutdown = REQUESTS[(ApiKey.CONTROLLED_SHUTDOWN, 3)]
    assert _names(shutdown) == ["broker_id", "broker_epoch"]
    shutdown_response = RESPONSES[(ApiKey.CONTROLLED_SHUTDOWN, 3)]
    assert _names(shutdown_response) == ["error_code", "remaining_partitions"]
    assert _names(nested(shutdown_response, "RemainingPartition")) == [
        "topic_name",
        "partition_index",
    ]


def test_fields_added_and_removed_across_versions() -> None:
    lai = {v: REQUESTS[(ApiKey.LEADER_AND_ISR, v)] for v in range(8)}
    assert "ungrouped_partition_states" in _names(lai[1])
    assert "topic_states" not in _names(lai[1])
    assert "topic_states" in _names(lai[2])
    assert "ungrouped_partition_states" not in _names(lai[2])
    assert "topic_name" in _names(nested(lai[1], "LeaderAndIsrPartitionState"))
    assert "topic_name" not in _names(nested(lai[2], "LeaderAndIsrPartitionState"))
    assert _names(lai[7])[:5] == [
        "controller_id",
        "is_k_raft_controller",
        "controller_epoch",
        "broker_epoch",
        "type_",
    ]
    assert _names(nested(lai[5], "LeaderAndIsrTopicState")) == [
        "topic_name",
        "topic_id",
        "partition_states",
    ]
    assert _names(nested(lai[6], "LeaderAndIsrPartitionState"))[-1] == "leader_recovery_state"
    lai_response = RESPONSES[(ApiKey.LEADER_AND_ISR, 5)]
    assert _names(lai_response) == ["error_code", "topics"]
    assert _names(nested(lai_response, "LeaderAndIsrPartitionError")) == [
        "partition_index",
        "error_code",
    ]
    stop = {v: REQUESTS[(ApiKey.STOP_REPLICA, v)] for v in range(5)}
    assert _names(stop[0])[-2:] == ["delete_partitions", "ungrouped_partitions"]
    assert _names(stop[2])[-2:] == ["delete_partitions", "topics"]
    assert _names(stop[4])[:2] == ["controller_id", "is_k_raft_controller"]
    update = {v: REQUESTS[(ApiKey.UPDATE_METADATA, v)] for v in range(9)}
    assert _names(nested(update[0], "UpdateMetadataBroker")) == ["id_", "v0_host", "v0_port"]
    assert _names(nested(update[1], "UpdateMetadataBroker")) == ["id_", "endpoints"]
    assert _names(nested(update[2], "UpdateMetadataEndpoint")) == [
        "port",
        "host",
        "security_protocol",
    ]
    assert _names(update[8])[:3] == ["controller_id", "is_k_raft_controller", "type_"]
    type_field = dataclasses.fields(update[8])[2]
    assert dict(type_field.metadata) == {"kafka_type": "int8", "tag": 0}
    assert _names(REQUESTS[(ApiKey.CONTROLLED_SHUTDOWN, 1)]) == ["broker_id"]


# -- every version reads back --------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_version_with_every_field_set_reads_back_exactly(case: tuple[ApiKey, int]) -> None:
    for cls in (REQUESTS[case], RESPONSES[case]):
        value = filled(cls)
        assert _read_back(value) == value


def test_null_values_read_back() -> None:
    update = REQUESTS[(ApiKey.UPDATE_METADATA, 7)]
    broker = nested(update, "UpdateMetadataBroker")(id_=1, endpoints=(), rack=None)
    topic = nested(update, "UpdateMetadataTopicState")(
        topic_name="t", topic_id=None, partition_states=()
    )
    value = update(
        controller_id=1, controller_epoch=2, topic_states=(topic,), live_brokers=(broker,)
    )
    assert _read_back(value) == value


@pytest.mark.parametrize("version", [6, 7, 8])
def test_a_flexible_version_round_trips_tagged_fields(version: int) -> None:
    update = REQUESTS[(ApiKey.UPDATE_METADATA, version)]
    plain = build(update, controller_id=1, controller_epoch=2, topic_states=(), live_brokers=())
    # no tagged field has a value other than its default: an empty tagged-field section
    assert _write(plain)[-1:] == b"\x00"
    # a tag kio's own reader does not know is refused (so a wrong tag number would show)
    with pytest.raises(KeyError):
        entity_reader(update)(_write(plain)[:-1] + b"\x01\x07\x01\x00", 0)
    if version < 8:
        return
    typed = build(update, **{**_values(plain), "type_": 2})
    data = _write(typed)
    assert data == _write(plain)[:-1] + b"\x01\x00\x01\x02"  # one tag: 0, 1 byte, value 2
    assert _read_back(typed) == typed
    assert _read_back(plain).type_ == 0


def _values(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def test_fields_with_json_defaults_can_be_left_out() -> None:
    lai = REQUESTS[(ApiKey.LEADER_AND_ISR, 7)]
    state = build(
        nested(lai, "LeaderAndIsrPartitionState"),
        partition_index=0,
        controller_epoch=1,
        leader=2,
        leader_epoch=3,
        partition_epoch=4,
    )
    assert (state.is_new, state.leader_recovery_state) == (False, 0)
    assert (state.isr, state.replicas, state.adding_replicas) == ((), (), ())
    request = build(
        lai, controller_id=1, controller_epoch=2, type_=0, topic_states=(), live_leaders=()
    )
    assert (request.is_k_raft_controller, request.broker_epoch) == (False, -1)
    stop = nested(REQUESTS[(ApiKey.STOP_REPLICA, 3)], "StopReplicaPartitionState")
    assert stop(partition_index=0, delete_partition=True).leader_epoch == -1
    assert REQUESTS[(ApiKey.CONTROLLED_SHUTDOWN, 2)](broker_id=3).broker_epoch == -1
    with pytest.raises(TypeError):  # no default in the JSON: required
        REQUESTS[(ApiKey.CONTROLLED_SHUTDOWN, 2)]()


# -- bytes, packed here in the order of Kafka 3.9's JSON fields -----------------------------------


def int8(value: int) -> bytes:
    return struct.pack(">b", value)


def int16(value: int) -> bytes:
    return struct.pack(">h", value)


def int32(value: int) -> bytes:
    return struct.pack(">i", value)


def int64(value: int) -> bytes:
    return struct.pack(">q", value)


def boolean(value: bool) -> bytes:
    return struct.pack(">?", value)


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def string(value: str | None) -> bytes:
    """A non-flexible string: int16 length (-1: null), UTF-8 bytes."""
    if value is None:
        return int16(-1)
    data = value.encode()
    return int16(len(data)) + data


def compact_string(value: str | None) -> bytes:
    """A flexible string: uvarint length + 1 (0: null), UTF-8 bytes."""
    if value is None:
        return uvarint(0)
    data = value.encode()
    return uvarint(len(data) + 1) + data


def array(items: Sequence[bytes]) -> bytes:
    return int32(len(items)) + b"".join(items)


def compact_array(items: Sequence[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def int32s(values: Sequence[int]) -> bytes:
    return array([int32(v) for v in values])


def compact_int32s(values: Sequence[int]) -> bytes:
    return compact_array([int32(v) for v in values])


NO_TAGS: Final = uvarint(0)


def _entity(api: ApiKey, version: int, kind: str = "request") -> Any:
    return (REQUESTS if kind == "request" else RESPONSES)[(api, version)]


def test_leader_and_isr_v0_bytes() -> None:
    schema = _entity(ApiKey.LEADER_AND_ISR, 0)
    state = nested(schema, "LeaderAndIsrPartitionState")(
        topic_name="events",
        partition_index=i32(3),
        controller_epoch=i32(7),
        leader=i32(2),
        leader_epoch=i32(11),
        isr=(i32(2), i32(1)),
        partition_epoch=i32(41),
        replicas=(i32(1), i32(2), i32(3)),
    )
    leader = nested(schema, "LeaderAndIsrLiveLeader")(
        broker_id=i32(2), host_name="broker-2", port=i32(9093)
    )
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(7),
        ungrouped_partition_states=(state,),
        live_leaders=(leader,),
    )
    expected = (
        int32(1)  # ControllerId
        + int32(7)  # ControllerEpoch
        + array(
            [
                string("events")
                + int32(3)
                + int32(7)
                + int32(2)
                + int32(11)
                + int32s([2, 1])
                + int32(41)
                + int32s([1, 2, 3])
            ]
        )
        + array([int32(2) + string("broker-2") + int32(9093)])
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_leader_and_isr_v4_bytes() -> None:
    schema = _entity(ApiKey.LEADER_AND_ISR, 4)
    state = nested(schema, "LeaderAndIsrPartitionState")(
        partition_index=i32(0),
        controller_epoch=i32(7),
        leader=i32(3),
        leader_epoch=i32(12),
        isr=(i32(3),),
        partition_epoch=i32(5),
        replicas=(i32(3), i32(1)),
        adding_replicas=(i32(1),),
        removing_replicas=(),
        is_new=True,
    )
    topic = nested(schema, "LeaderAndIsrTopicState")(topic_name="t", partition_states=(state,))
    leader = nested(schema, "LeaderAndIsrLiveLeader")(
        broker_id=i32(3), host_name="h3", port=i32(9094)
    )
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(7),
        broker_epoch=i64(2**33),
        topic_states=(topic,),
        live_leaders=(leader,),
    )
    partition = (
        int32(0)
        + int32(7)
        + int32(3)
        + int32(12)
        + compact_int32s([3])
        + int32(5)
        + compact_int32s([3, 1])
        + compact_int32s([1])
        + compact_int32s([])
        + boolean(True)
        + NO_TAGS
    )
    expected = (
        int32(1)
        + int32(7)
        + int64(2**33)
        + compact_array([compact_string("t") + compact_array([partition]) + NO_TAGS])
        + compact_array([int32(3) + compact_string("h3") + int32(9094) + NO_TAGS])
        + NO_TAGS
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_leader_and_isr_v7_bytes() -> None:
    schema = _entity(ApiKey.LEADER_AND_ISR, 7)
    state = nested(schema, "LeaderAndIsrPartitionState")(
        partition_index=i32(1),
        controller_epoch=i32(2),
        leader=i32(3),
        leader_epoch=i32(4),
        isr=(),
        partition_epoch=i32(5),
        replicas=(),
        adding_replicas=(),
        removing_replicas=(i32(9),),
        is_new=False,
        leader_recovery_state=i8(1),
    )
    topic = nested(schema, "LeaderAndIsrTopicState")(
        topic_name="t", topic_id=TOPIC_ID, partition_states=(state,)
    )
    body = schema(
        controller_id=i32(1),
        is_k_raft_controller=True,
        controller_epoch=i32(7),
        broker_epoch=i64(-1),
        type_=i8(2),
        topic_states=(topic,),
        live_leaders=(),
    )
    partition = (
        int32(1)
        + int32(2)
        + int32(3)
        + int32(4)
        + compact_int32s([])
        + int32(5)
        + compact_int32s([])
        + compact_int32s([])
        + compact_int32s([9])
        + boolean(False)
        + int8(1)  # LeaderRecoveryState
        + NO_TAGS
    )
    expected = (
        int32(1)
        + boolean(True)  # isKRaftController
        + int32(7)
        + int64(-1)
        + int8(2)  # Type
        + compact_array(
            [compact_string("t") + TOPIC_ID.bytes + compact_array([partition]) + NO_TAGS]
        )
        + compact_array([])
        + NO_TAGS
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_leader_and_isr_responses_v0_and_v5_bytes() -> None:
    v0 = _entity(ApiKey.LEADER_AND_ISR, 0, "response")
    error = nested(v0, "LeaderAndIsrPartitionError")
    body0 = v0(
        error_code=ErrorCode.none,
        partition_errors=(
            error(
                topic_name="t", partition_index=i32(2), error_code=ErrorCode.stale_controller_epoch
            ),
        ),
    )
    assert _write(body0) == int16(0) + array([string("t") + int32(2) + int16(11)])
    v5 = _entity(ApiKey.LEADER_AND_ISR, 5, "response")
    topic = nested(v5, "LeaderAndIsrTopicError")(
        topic_id=TOPIC_ID,
        partition_errors=(
            nested(v5, "LeaderAndIsrPartitionError")(
                partition_index=i32(2), error_code=ErrorCode.kafka_storage_error
            ),
        ),
    )
    body5 = v5(error_code=ErrorCode.none, topics=(topic,))
    expected = (
        int16(0)
        + compact_array(
            [TOPIC_ID.bytes + compact_array([int32(2) + int16(56) + NO_TAGS]) + NO_TAGS]
        )
        + NO_TAGS
    )
    assert _write(body5) == expected
    assert entity_reader(v5)(expected, 0) == (body5, len(expected))


def test_stop_replica_v0_bytes() -> None:
    schema = _entity(ApiKey.STOP_REPLICA, 0)
    partition = nested(schema, "StopReplicaPartitionV0")
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(3),
        delete_partitions=True,
        ungrouped_partitions=(
            partition(topic_name="a", partition_index=i32(0)),
            partition(topic_name="b", partition_index=i32(5)),
        ),
    )
    expected = (
        int32(1)
        + int32(3)
        + boolean(True)
        + array([string("a") + int32(0), string("b") + int32(5)])
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_stop_replica_v1_bytes() -> None:
    schema = _entity(ApiKey.STOP_REPLICA, 1)
    topic = nested(schema, "StopReplicaTopicV1")(name="a", partition_indexes=(i32(0), i32(4)))
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(3),
        broker_epoch=i64(99),
        delete_partitions=False,
        topics=(topic,),
    )
    expected = (
        int32(1) + int32(3) + int64(99) + boolean(False) + array([string("a") + int32s([0, 4])])
    )
    assert _write(body) == expected


def test_stop_replica_v3_bytes() -> None:
    schema = _entity(ApiKey.STOP_REPLICA, 3)
    state = nested(schema, "StopReplicaPartitionState")
    topic = nested(schema, "StopReplicaTopicState")(
        topic_name="a",
        partition_states=(
            state(partition_index=i32(0), leader_epoch=i32(6), delete_partition=True),
            state(partition_index=i32(1), delete_partition=False),
        ),
    )
    body = schema(
        controller_id=i32(1), controller_epoch=i32(3), broker_epoch=i64(99), topic_states=(topic,)
    )
    expected = (
        int32(1)
        + int32(3)
        + int64(99)
        + compact_array(
            [
                compact_string("a")
                + compact_array(
                    [
                        int32(0) + int32(6) + boolean(True) + NO_TAGS,
                        int32(1) + int32(-1) + boolean(False) + NO_TAGS,  # LeaderEpoch default
                    ]
                )
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_stop_replica_response_v3_bytes() -> None:
    schema = _entity(ApiKey.STOP_REPLICA, 3, "response")
    error = nested(schema, "StopReplicaPartitionError")(
        topic_name="a", partition_index=i32(1), error_code=ErrorCode.fenced_leader_epoch
    )
    body = schema(error_code=ErrorCode.none, partition_errors=(error,))
    expected = (
        int16(0) + compact_array([compact_string("a") + int32(1) + int16(74) + NO_TAGS]) + NO_TAGS
    )
    assert _write(body) == expected


def test_update_metadata_v0_bytes() -> None:
    schema = _entity(ApiKey.UPDATE_METADATA, 0)
    state = nested(schema, "UpdateMetadataPartitionState")(
        topic_name="t",
        partition_index=i32(1),
        controller_epoch=i32(2),
        leader=i32(3),
        leader_epoch=i32(4),
        isr=(i32(3),),
        zk_version=i32(5),
        replicas=(i32(3), i32(4)),
    )
    broker = nested(schema, "UpdateMetadataBroker")(id_=i32(3), v0_host="h", v0_port=i32(9092))
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(2),
        ungrouped_partition_states=(state,),
        live_brokers=(broker,),
    )
    expected = (
        int32(1)
        + int32(2)
        + array(
            [
                string("t")
                + int32(1)
                + int32(2)
                + int32(3)
                + int32(4)
                + int32s([3])
                + int32(5)
                + int32s([3, 4])
            ]
        )
        + array([int32(3) + string("h") + int32(9092)])
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_update_metadata_v3_bytes() -> None:
    schema = _entity(ApiKey.UPDATE_METADATA, 3)
    endpoint = nested(schema, "UpdateMetadataEndpoint")(
        port=i32(9092), host="h", listener="PLAINTEXT", security_protocol=i16(0)
    )
    broker = nested(schema, "UpdateMetadataBroker")(id_=i32(3), endpoints=(endpoint,), rack=None)
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(2),
        ungrouped_partition_states=(),
        live_brokers=(broker,),
    )
    expected = (
        int32(1)
        + int32(2)
        + array([])
        + array(
            [
                int32(3)
                + array([int32(9092) + string("h") + string("PLAINTEXT") + int16(0)])
                + string(None)  # Rack, null
            ]
        )
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_update_metadata_v6_bytes() -> None:
    schema = _entity(ApiKey.UPDATE_METADATA, 6)
    state = nested(schema, "UpdateMetadataPartitionState")(
        partition_index=i32(1),
        controller_epoch=i32(2),
        leader=i32(3),
        leader_epoch=i32(4),
        isr=(i32(3),),
        zk_version=i32(5),
        replicas=(i32(3),),
        offline_replicas=(i32(4),),
    )
    topic = nested(schema, "UpdateMetadataTopicState")(topic_name="t", partition_states=(state,))
    endpoint = nested(schema, "UpdateMetadataEndpoint")(
        port=i32(9092), host="h", listener="PLAINTEXT", security_protocol=i16(0)
    )
    broker = nested(schema, "UpdateMetadataBroker")(id_=i32(3), endpoints=(endpoint,), rack="r1")
    body = schema(
        controller_id=i32(1),
        controller_epoch=i32(2),
        broker_epoch=i64(77),
        topic_states=(topic,),
        live_brokers=(broker,),
    )
    expected = (
        int32(1)
        + int32(2)
        + int64(77)
        + compact_array(
            [
                compact_string("t")
                + compact_array(
                    [
                        int32(1)
                        + int32(2)
                        + int32(3)
                        + int32(4)
                        + compact_int32s([3])
                        + int32(5)
                        + compact_int32s([3])
                        + compact_int32s([4])
                        + NO_TAGS
                    ]
                )
                + NO_TAGS
            ]
        )
        + compact_array(
            [
                int32(3)
                + compact_array(
                    [
                        int32(9092)
                        + compact_string("h")
                        + compact_string("PLAINTEXT")
                        + int16(0)
                        + NO_TAGS
                    ]
                )
                + compact_string("r1")
                + NO_TAGS
            ]
        )
        + NO_TAGS
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_update_metadata_v8_bytes_with_its_tagged_type() -> None:
    schema = _entity(ApiKey.UPDATE_METADATA, 8)
    topic = nested(schema, "UpdateMetadataTopicState")(
        topic_name="t", topic_id=TOPIC_ID, partition_states=()
    )
    body = schema(
        controller_id=i32(1),
        is_k_raft_controller=True,
        type_=i8(2),
        controller_epoch=i32(2),
        broker_epoch=i64(77),
        topic_states=(topic,),
        live_brokers=(),
    )
    expected = (
        int32(1)
        + boolean(True)
        + int32(2)  # Type is tagged: not here, in the tagged fields at the end
        + int64(77)
        + compact_array([compact_string("t") + TOPIC_ID.bytes + compact_array([]) + NO_TAGS])
        + compact_array([])
        + uvarint(1)  # one tagged field
        + uvarint(0)  # tag 0
        + uvarint(1)  # of 1 byte
        + int8(2)
    )
    assert _write(body) == expected
    assert entity_reader(schema)(expected, 0) == (body, len(expected))


def test_update_metadata_responses_v0_and_v6_bytes() -> None:
    v0 = _entity(ApiKey.UPDATE_METADATA, 0, "response")
    v6 = _entity(ApiKey.UPDATE_METADATA, 6, "response")
    assert _write(v0(error_code=ErrorCode.stale_controller_epoch)) == int16(11)
    assert _write(v6(error_code=ErrorCode.none)) == int16(0) + NO_TAGS


def test_controlled_shutdown_v1_bytes() -> None:
    schema = _entity(ApiKey.CONTROLLED_SHUTDOWN, 1)
    assert _write(schema(broker_id=i32(4))) == int32(4)
    response = _entity(ApiKey.CONTROLLED_SHUTDOWN, 1, "response")
    remaining = nested(response, "RemainingPartition")
    body = response(
        error_code=ErrorCode.none,
        remaining_partitions=(
            remaining(topic_name="t", partition_index=i32(0)),
            remaining(topic_name="u", partition_index=i32(7)),
        ),
    )
    expected = int16(0) + array([string("t") + int32(0), string("u") + int32(7)])
    assert _write(body) == expected
    assert entity_reader(response)(expected, 0) == (body, len(expected))


def test_controlled_shutdown_v3_bytes() -> None:
    schema = _entity(ApiKey.CONTROLLED_SHUTDOWN, 3)
    body = schema(broker_id=i32(4), broker_epoch=i64(2**40))
    assert _write(body) == int32(4) + int64(2**40) + NO_TAGS
    response = _entity(ApiKey.CONTROLLED_SHUTDOWN, 3, "response")
    remaining = nested(response, "RemainingPartition")(topic_name="t", partition_index=i32(7))
    answer = response(error_code=ErrorCode.none, remaining_partitions=(remaining,))
    expected = int16(0) + compact_array([compact_string("t") + int32(7) + NO_TAGS]) + NO_TAGS
    assert _write(answer) == expected
    assert entity_reader(response)(expected, 0) == (answer, len(expected))


# -- `transcribed` makes what kio's generator made ------------------------------------------------

#: CreateTopics' CreatableTopicResult (Kafka 3.9's CreateTopicsResponse.json, v5-7): a uuid,
#: a nullable string without default, a tagged int16 without default, JSON defaults, and a
#: nullable array of structs, in a flexible message. kio generates it; it is transcribed here
#: only to compare.
_CREATABLE_TOPIC_RESULT: Final = (
    Field("name", "string", 0),
    Field("topic_id", "uuid", 7),
    Field("error_code", "int16", 0),
    Field("error_message", "string", 1, nullable=True),
    Field("topic_config_error_code", "int16", 5, tag=0),
    Field("num_partitions", "int32", 5, default="-1"),
    Field("replication_factor", "int16", 5, default="-1"),
    Field(
        "configs",
        "[]CreatableTopicConfigs",
        5,
        nullable=True,
        nested=(
            "CreatableTopicConfigs",
            (
                Field("name", "string", 5),
                Field("value", "string", 5, nullable=True),
                Field("read_only", "bool", 5),
                Field("config_source", "int8", 5, default="-1"),
                Field("is_sensitive", "bool", 5),
            ),
        ),
    ),
)


def _nullable(annotation: Any) -> bool:
    return typing.get_origin(annotation) is UnionType and NoneType in typing.get_args(annotation)


@pytest.mark.parametrize("version", [5, 6, 7])
def test_transcribed_entities_match_kios_generated_ones(version: int) -> None:
    kios = nested(load_response_schema(ApiKey.CREATE_TOPICS, version), "CreatableTopicResult")
    mine = entity(
        "CreatableTopicResult",
        version,
        _CREATABLE_TOPIC_RESULT,
        EntityType.nested,
        module=__name__,
        flexible_from=5,
    )
    assert mine.__flexible__ is kios.__flexible__ is True
    mine_fields, kio_fields = dataclasses.fields(mine), dataclasses.fields(kios)
    assert [f.name for f in mine_fields] == [f.name for f in kio_fields]
    for a, b in zip(mine_fields, kio_fields, strict=True):
        assert dict(a.metadata) == dict(b.metadata), a.name
        assert a.default == b.default, a.name
        assert type(a.default) is type(b.default), a.name
        assert _nullable(a.type) is _nullable(b.type), a.name
    # and the same values are the same bytes, tagged field included
    value = filled(mine)
    kio_value = filled(kios)
    assert _write(value) == _write(kio_value)
    assert _read_back(value) == value


def test_a_tagged_field_in_a_non_flexible_version_is_refused() -> None:
    with pytest.raises(ValueError, match="tagged field"):
        entity("Bad", 4, (Field("x", "int8", 0, tag=0),), EntityType.data, module=__name__)
    with pytest.raises(ValueError, match="tagged field"):
        entity(
            "Bad",
            4,
            (Field("x", "int8", 0, tag=0),),
            EntityType.data,
            module=__name__,
            flexible_from=5,
        )


def test_a_null_default_needs_a_nullable_field() -> None:
    with pytest.raises(ValueError, match="null"):
        entity("Bad", 0, (Field("x", "string", 0, default="null"),), EntityType.data, module="m")
    made = entity(
        "Good",
        0,
        (Field("x", "string", 0, nullable=True, default="null"),),
        EntityType.data,
        module="m",
    )
    assert made().x is None


def test_a_message_without_flexible_versions_is_as_before() -> None:
    request = message(
        "SomeRequest",
        99,
        3,
        EntityType.request,
        (Field("a", "int32", 0), Field("b", "[]int32", 0)),
        package="tests.network.transcribed_sample",
    )
    assert request.__flexible__ is False
    assert request.__header_schema__ is RequestHeaderV1
    value = request(a=i32(1))
    assert value.b == ()
    assert _write(value) == int32(1) + int32s([])
