"""OffsetCommit v0-1, OffsetFetch v0 and DescribeConfigs v0, which Kafka 4 removed (KIP-896)
and kio lacks, checked against an independent encoder: kafka-python's hand-written protocol
structs (`kafka.protocol.old.commit` and `.admin`, not derived from Kafka's JSON files nor from
kio).

A request kafka-python encodes is decoded by kafkactor's codec (through the entities transcribed
in `kafkactor.network.removed_versions`) and handled by KafkaApis; a response kafkactor's codec
encodes is decoded by kafka-python, every byte of it.
"""

from __future__ import annotations

import dataclasses
import io
from typing import Any

import pytest
from kafka.protocol.old.admin import DescribeConfigsRequest_v0, DescribeConfigsResponse_v0
from kafka.protocol.old.api import RequestHeader as KafkaPythonRequestHeader
from kafka.protocol.old.api import ResponseHeader as KafkaPythonResponseHeader
from kafka.protocol.old.commit import (
    OffsetCommitRequest_v0,
    OffsetCommitRequest_v1,
    OffsetCommitResponse_v0,
    OffsetCommitResponse_v1,
    OffsetFetchRequest_v0,
    OffsetFetchResponse_v0,
)

from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    OffsetCommitPartition,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionRequest,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkactor.messages.replication import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from kafkactor.network.api_versions import ApiKey, served
from kafkactor.network.codec import (
    build,
    decode_request,
    encode_response,
    nested,
    request_type,
    response_type,
)
from kafkactor.network.kafka_apis import Answer, Ask, KafkaApis, KafkaApisConfig
from kafkactor.network.removed_versions import REQUESTS, RESPONSES

from kio.index import UnknownEntity, load_request_schema, load_response_schema  # isort: skip

GROUP = "old-group"
CLIENT = "kafka-python-old"
STAMP = 1_650_000_000_000

#: (api, version) -> kafka-python's request and response structs
KAFKA_PYTHON: dict[tuple[ApiKey, int], tuple[Any, Any]] = {
    (ApiKey.OFFSET_COMMIT, 0): (OffsetCommitRequest_v0, OffsetCommitResponse_v0),
    (ApiKey.OFFSET_COMMIT, 1): (OffsetCommitRequest_v1, OffsetCommitResponse_v1),
    (ApiKey.OFFSET_FETCH, 0): (OffsetFetchRequest_v0, OffsetFetchResponse_v0),
    (ApiKey.DESCRIBE_CONFIGS, 0): (DescribeConfigsRequest_v0, DescribeConfigsResponse_v0),
}
TRANSCRIBED = sorted(KAFKA_PYTHON)


def kafka_python_frame(api: ApiKey, version: int, *body: Any) -> bytes:
    """A request frame (without its size prefix) encoded by kafka-python alone."""
    request = KAFKA_PYTHON[(api, version)][0](*body)
    header = KafkaPythonRequestHeader(int(api), version, 21, CLIENT)
    frame: bytes = header.encode() + request.encode()
    return frame


def kafka_python_response(api: ApiKey, version: int, frame: bytes) -> Any:
    """A response frame (with its size prefix) decoded by kafka-python; every byte is read."""
    data = io.BytesIO(frame)
    size = int.from_bytes(data.read(4), "big", signed=True)
    assert size == len(frame) - 4
    assert KafkaPythonResponseHeader.decode(data).correlation_id == 21
    body = KAFKA_PYTHON[(api, version)][1].decode(data)
    assert data.tell() == len(frame), f"{len(frame) - data.tell()} bytes left unread"
    return body


def kafka_apis() -> KafkaApis:
    return KafkaApis(
        1,
        KafkaApisConfig(offsets_topic_replication_factor=1),
        admin=None,
        group=GroupConfig(offsets_topic_partitions=1),
    )


# -- the tables ------------------------------------------------------------------------------------


def test_exactly_the_versions_kio_lacks_are_transcribed_and_served() -> None:
    assert sorted(REQUESTS) == sorted(RESPONSES) == TRANSCRIBED
    for api, version in TRANSCRIBED:
        assert served(api, version)
        with pytest.raises(UnknownEntity):
            load_request_schema(api, version)
        assert request_type(api, version) is REQUESTS[(api, version)]
        assert response_type(api, version) is RESPONSES[(api, version)]
    # the first versions kio has are still kio's
    assert request_type(ApiKey.OFFSET_COMMIT, 2) is load_request_schema(ApiKey.OFFSET_COMMIT, 2)
    assert response_type(ApiKey.OFFSET_FETCH, 1) is load_response_schema(ApiKey.OFFSET_FETCH, 1)


@pytest.mark.parametrize(("api", "version"), TRANSCRIBED)
def test_transcribed_entities_look_like_kios_next_version(api: ApiKey, version: int) -> None:
    """Same class names, class variables and field names as kio's first version, less the
    fields added later, plus v1's commit timestamp."""
    later = 2 if api is ApiKey.OFFSET_COMMIT else 1
    for mine, kios in (
        (request_type(api, version), load_request_schema(api, later)),
        (response_type(api, version), load_response_schema(api, later)),
    ):
        assert mine.__name__ == kios.__name__
        assert (mine.__type__, mine.__flexible__, mine.__api_key__) == (
            kios.__type__,
            False,
            kios.__api_key__,
        )
        assert mine.__version__ == version
        assert mine.__header_schema__ is kios.__header_schema__
        names = {f.name for f in dataclasses.fields(mine)}
        expected = {f.name for f in dataclasses.fields(kios)} - {
            "retention_time",
            "include_synonyms",
        }
        if version == 0:
            expected -= {"generation_id_or_member_epoch", "member_id"}
        assert names == expected


# -- requests: kafka-python encodes, kafkactor decodes and translates ------------------------------


def commit_body(version: int) -> tuple[Any, ...]:
    partitions = [(0, 42, STAMP, "meta"), (3, 7, -1, None)] if version else [(0, 42, "meta")]
    topics = [("events", partitions)]
    return (GROUP, 5, "member-1", topics) if version else (GROUP, topics)


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_request_from_kafka_python(version: int) -> None:
    header, body = decode_request(
        kafka_python_frame(ApiKey.OFFSET_COMMIT, version, *commit_body(version))
    )
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        ApiKey.OFFSET_COMMIT,
        version,
        21,
        CLIENT,
    )
    assert body.group_id == GROUP
    (topic,) = body.topics
    assert topic.name == "events"
    if version == 0:
        assert not hasattr(body, "generation_id_or_member_epoch")
        assert [
            (p.partition_index, p.committed_offset, p.committed_metadata) for p in topic.partitions
        ] == [(0, 42, "meta")]
        return
    assert (body.generation_id_or_member_epoch, body.member_id) == (5, "member-1")
    assert [
        (p.partition_index, p.committed_offset, p.commit_timestamp, p.committed_metadata)
        for p in topic.partitions
    ] == [(0, 42, STAMP, "meta"), (3, 7, -1, None)]


def committed_asked(version: int) -> Ask:
    """An OffsetCommit of these versions is first checked against the metadata cache (topic
    "events" with partitions 0 to 3 here), then asked of the coordinator."""
    header, body = decode_request(
        kafka_python_frame(ApiKey.OFFSET_COMMIT, version, *commit_body(version))
    )
    step = kafka_apis().handle(header, body)
    assert isinstance(step, Ask)
    assert step.request == MetadataRequest(topics=("events",))
    events = TopicMetadata(
        topic="events", partitions=tuple(PartitionMetadata(partition=p, leader=1) for p in range(4))
    )
    asked = step.then(MetadataResponse(topics=(events,)))
    assert isinstance(asked, Ask)
    return asked


def test_offset_commit_v0_commits_outside_group_management() -> None:
    step = committed_asked(0)
    assert step.request == OffsetCommitRequest(
        group_id=GROUP,
        generation_id=-1,
        member_id="",
        partitions=(
            OffsetCommitPartition(topic="events", partition=0, offset=42, metadata="meta"),
        ),
    )


def test_offset_commit_v1_carries_generation_member_and_commit_timestamps() -> None:
    step = committed_asked(1)
    assert step.request == OffsetCommitRequest(
        group_id=GROUP,
        generation_id=5,
        member_id="member-1",
        partitions=(
            OffsetCommitPartition(
                topic="events", partition=0, offset=42, metadata="meta", commit_timestamp_ms=STAMP
            ),
            OffsetCommitPartition(
                topic="events", partition=3, offset=7, metadata=None, commit_timestamp_ms=-1
            ),
        ),
    )
    # the answer, as kafka-python reads it
    answered = step.then(
        OffsetCommitResponse(
            partitions=(
                OffsetCommitPartitionResult(topic="events", partition=0),
                OffsetCommitPartitionResult(
                    topic="events", partition=3, error_code=ErrorCode.ILLEGAL_GENERATION
                ),
            )
        )
    )
    assert isinstance(answered, Answer)
    read = kafka_python_response(
        ApiKey.OFFSET_COMMIT, 1, encode_response(ApiKey.OFFSET_COMMIT, 1, 21, answered.body)
    )
    assert read.topics == [("events", [(0, 0), (3, ErrorCode.ILLEGAL_GENERATION)])]


def test_offset_fetch_v0_from_kafka_python_reads_the_coordinator() -> None:
    frame = kafka_python_frame(ApiKey.OFFSET_FETCH, 0, GROUP, [("events", [0, 2])])
    header, body = decode_request(frame)
    assert body.group_id == GROUP
    assert [(t.name, t.partition_indexes) for t in body.topics] == [("events", (0, 2))]
    step = kafka_apis().handle(header, body)
    assert isinstance(step, Ask)
    assert step.request == OffsetFetchRequest(
        group_id=GROUP,
        partitions=(
            OffsetFetchPartitionRequest(topic="events", partition=0),
            OffsetFetchPartitionRequest(topic="events", partition=2),
        ),
    )
    answered = step.then(
        OffsetFetchResponse(
            partitions=(
                OffsetFetchPartitionResult(topic="events", partition=0, offset=9, metadata="m"),
                OffsetFetchPartitionResult(topic="events", partition=2),  # none committed
            )
        )
    )
    assert isinstance(answered, Answer)
    read = kafka_python_response(
        ApiKey.OFFSET_FETCH, 0, encode_response(ApiKey.OFFSET_FETCH, 0, 21, answered.body)
    )
    assert read.topics == [("events", [(0, 9, "m", 0), (2, -1, "", 0)])]


# -- responses: kafkactor encodes, kafka-python decodes ------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_response_read_by_kafka_python(version: int) -> None:
    schema = response_type(ApiKey.OFFSET_COMMIT, version)
    topic = nested(schema, "OffsetCommitResponseTopic")
    partition = nested(schema, "OffsetCommitResponsePartition")
    body = build(
        schema,
        topics=(
            build(
                topic,
                name="a",
                partitions=(
                    build(partition, partition_index=0, error_code=ErrorCode.NONE),
                    build(
                        partition, partition_index=1, error_code=ErrorCode.OFFSET_METADATA_TOO_LARGE
                    ),
                ),
            ),
            build(topic, name="b", partitions=()),
        ),
    )
    read = kafka_python_response(
        ApiKey.OFFSET_COMMIT, version, encode_response(ApiKey.OFFSET_COMMIT, version, 21, body)
    )
    assert read.topics == [("a", [(0, 0), (1, ErrorCode.OFFSET_METADATA_TOO_LARGE)]), ("b", [])]


def test_offset_fetch_v0_response_read_by_kafka_python() -> None:
    schema = response_type(ApiKey.OFFSET_FETCH, 0)
    topic = nested(schema, "OffsetFetchResponseTopic")
    partition = nested(schema, "OffsetFetchResponsePartition")
    body = build(
        schema,
        topics=(
            build(
                topic,
                name="a",
                partitions=(
                    build(
                        partition,
                        partition_index=4,
                        committed_offset=2**40,
                        metadata=None,
                        error_code=ErrorCode.NONE,
                    ),
                    build(
                        partition,
                        partition_index=5,
                        committed_offset=-1,
                        metadata="",
                        error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    ),
                ),
            ),
        ),
    )
    read = kafka_python_response(
        ApiKey.OFFSET_FETCH, 0, encode_response(ApiKey.OFFSET_FETCH, 0, 21, body)
    )
    assert read.topics == [
        ("a", [(4, 2**40, None, 0), (5, -1, "", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)])
    ]


# -- DescribeConfigs v0 ---------------------------------------------------------------------------


def test_describe_configs_v0_from_kafka_python_is_answered_with_is_default() -> None:
    frame = kafka_python_frame(
        ApiKey.DESCRIBE_CONFIGS, 0, [(2, "events", ["retention.ms", "segment.bytes"])]
    )
    header, body = decode_request(frame)
    (resource,) = body.resources
    assert (resource.resource_type, resource.resource_name) == (2, "events")
    assert resource.configuration_keys == ("retention.ms", "segment.bytes")
    apis = KafkaApis(1)
    step = apis.handle(header, body)
    assert isinstance(step, Ask)
    answered = step.then(MetadataResponse(topics=(TopicMetadata(topic="events"),)))
    assert isinstance(answered, Answer)  # no repository: a topic without overrides
    read = kafka_python_response(
        ApiKey.DESCRIBE_CONFIGS, 0, encode_response(ApiKey.DESCRIBE_CONFIGS, 0, 21, answered.body)
    )
    assert read.throttle_time_ms == 0
    assert read.results == [
        (
            0,
            None,
            2,
            "events",
            [
                ("segment.bytes", "1073741824", False, True, False),  # LogConfig's order
                ("retention.ms", "604800000", False, True, False),
            ],
        )
    ]
