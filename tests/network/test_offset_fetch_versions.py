"""OffsetFetch (api key 9) v1-v7 on the wire, checked against an independent encoder:
kafka-python 3's message classes (`kafka.protocol.consumer`, its own encoder and decoder of
Kafka's JSON definitions, not kio).

A request kafka-python encodes is decoded by kafkactor's codec and handled by KafkaApis, which
asks the group coordinator; the coordinator's answer becomes a response frame that kafka-python
decodes and encodes again to the same bytes. v2 adds the group-level error, v3 the throttle
time, v5 the committed leader epoch, v6 the flexible encoding (compact strings and arrays,
tagged fields, request header v2, response header v1), v7 `require_stable` (KIP-447): only a
v7 request that sets it asks the coordinator for stable offsets, and a partition whose offset
a transaction has pending answers UNSTABLE_OFFSET_COMMIT (88) with offset -1, the group's
error staying NONE, as Kafka 2.8's OffsetFetchResponse says it. v0 is tested with the versions
Kafka 4 removed (test_removed_versions.py); v8 (several groups per request) is not served.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest as KafkaPythonRequest
from kafka.protocol.consumer import OffsetFetchResponse as KafkaPythonResponse

from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    OffsetFetchPartitionRequest,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkactor.network.api_versions import ApiKey, served
from kafkactor.network.codec import decode_request, encode_response
from kafkactor.network.kafka_apis import Answer, Ask, KafkaApis, KafkaApisConfig
from tests.network.wire import served_range

pytestmark = pytest.mark.timeout(30)

GROUP = "stable-group"
TOPIC = "events"
CORRELATION_ID = 21
VERSIONS = range(1, 8)
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT

#: the coordinator's answer: a committed offset, none, and one a transaction has pending
ANSWERED = OffsetFetchResponse(
    partitions=(
        OffsetFetchPartitionResult(
            topic=TOPIC, partition=0, offset=42, leader_epoch=4, metadata="m"
        ),
        OffsetFetchPartitionResult(topic=TOPIC, partition=1),
        OffsetFetchPartitionResult(topic=TOPIC, partition=2, error_code=UNSTABLE),
    )
)


def kafka_apis() -> KafkaApis:
    return KafkaApis(
        1,
        KafkaApisConfig(offsets_topic_replication_factor=1),
        admin=None,
        group=GroupConfig(offsets_topic_partitions=1),
    )


def asked(version: int, *, stable: bool, every: bool = False) -> Ask:
    """KafkaApis' step for an OffsetFetch kafka-python encoded at `version` (require_stable
    `stable`, which kafka-python leaves out below v7)."""
    topic = KafkaPythonRequest.OffsetFetchRequestTopic
    request = KafkaPythonRequest(
        group_id=GROUP,
        topics=None if every else [topic(name=TOPIC, partition_indexes=[0, 1, 2])],
        require_stable=stable,
    )
    request.with_header(correlation_id=CORRELATION_ID, client_id="kafka-python")
    header, body = decode_request(bytes(request.encode(version=version, header=True)))
    assert (header.api_key, header.api_version) == (ApiKey.OFFSET_FETCH, version)
    step = kafka_apis().handle(header, body)
    assert isinstance(step, Ask)
    assert step.address == addresses.group_coordinator(1)
    assert isinstance(step.request, OffsetFetchRequest)
    return step


def read_back(version: int, step: Ask, answer: OffsetFetchResponse) -> Any:
    """The response to `answer`, as kafka-python decodes it, after checking that
    kafka-python's own encoding of what it read is the very same frame."""
    answered = step.then(answer)
    assert isinstance(answered, Answer)
    frame = encode_response(ApiKey.OFFSET_FETCH, version, CORRELATION_ID, answered.body)
    read = KafkaPythonResponse.decode(frame, version=version, header=True, framed=True)
    assert read.header.correlation_id == CORRELATION_ID
    read.with_header(correlation_id=CORRELATION_ID)
    assert bytes(read.encode(header=True, framed=True)) == frame
    return read


def partitions(read: Any) -> list[tuple[str, int, int, str | None, int]]:
    return [
        (t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for t in read.topics
        for p in t.partitions
    ]


def test_offset_fetch_is_served_up_to_v7() -> None:
    assert served_range(ApiKey.OFFSET_FETCH) == range(0, 8)
    assert not served(ApiKey.OFFSET_FETCH, 8)  # several groups per request (KIP-709)


@pytest.mark.parametrize("version", VERSIONS)
def test_offset_fetch_round_trip(version: int) -> None:
    step = asked(version, stable=True)
    assert step.request == OffsetFetchRequest(
        group_id=GROUP,
        partitions=tuple(OffsetFetchPartitionRequest(topic=TOPIC, partition=p) for p in range(3)),
        all_partitions=False,
        require_stable=version >= 7,  # the field exists from v7
    )
    read = read_back(version, step, ANSWERED)
    assert partitions(read) == [
        (TOPIC, 0, 42, "m", ErrorCode.NONE),
        (TOPIC, 1, -1, "", ErrorCode.NONE),
        (TOPIC, 2, -1, "", UNSTABLE),  # no offset while its transaction is open
    ]
    if version >= 2:
        assert read.error_code == ErrorCode.NONE  # the group's error: a partition's stays its own
    if version >= 3:
        assert read.throttle_time_ms == 0
    if version >= 5:
        assert [p.committed_leader_epoch for p in read.topics[0].partitions] == [4, -1, -1]
    assert KafkaPythonResponse.flexible_version_q(version) is (version >= 6)


def test_offset_fetch_v7_without_require_stable_asks_for_any_offset() -> None:
    request = asked(7, stable=False).request
    assert isinstance(request, OffsetFetchRequest)
    assert request.require_stable is False


@pytest.mark.parametrize("version", [6, 7])
def test_offset_fetch_of_every_partition_with_require_stable(version: int) -> None:
    step = asked(version, stable=True, every=True)
    assert step.request == OffsetFetchRequest(
        group_id=GROUP, all_partitions=True, require_stable=version >= 7
    )
    read = read_back(version, step, ANSWERED)
    assert [(p[1], p[4]) for p in partitions(read)] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.NONE),
        (2, UNSTABLE),
    ]


@pytest.mark.parametrize("version", [6, 7])
@pytest.mark.parametrize(
    "code",
    [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR],
    ids=["loading", "not-coordinator"],
)
def test_offset_fetch_group_error_in_flexible_versions(version: int, code: ErrorCode) -> None:
    read = read_back(version, asked(version, stable=True), OffsetFetchResponse(error_code=code))
    assert (read.error_code, read.topics) == (code, [])
