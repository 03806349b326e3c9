"""ElectLeaders (api key 43) through `KafkaApis` without threads: the request becomes an
`ElectLeadersRequest` to the broker's own controller actor, its results the response, as Kafka
2.8's handleElectReplicaLeader answers (every answer encoded and read back as a client reads
it)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.controller import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
)
from kafkactor.messages.replication import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import encode_response
from kafkactor.network.kafka_apis import KafkaApis
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Answer, Ask, Step
from tests.network.wire import decode_response, elect_leaders_request

pytestmark = pytest.mark.timeout(10)

BROKER = 2
VERSIONS = range(SUPPORTED[ApiKey.ELECT_LEADERS][0], SUPPORTED[ApiKey.ELECT_LEADERS][1] + 1)


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def request(version: int, partitions: dict[str, list[int]] | None, election: int = 0) -> Any:
    return elect_leaders_request(version, partitions, election)


def start(version: int, body: Any) -> Step:
    header = RequestHeader(
        api_key=ApiKey.ELECT_LEADERS, api_version=version, correlation_id=7, client_id="c"
    )
    return KafkaApis(BROKER).handle(header, body)


def decoded(version: int, step: Step) -> Any:
    assert isinstance(step, Answer), step
    frame = encode_response(ApiKey.ELECT_LEADERS, version, 7, step.body)
    correlation_id, body = decode_response(frame[4:], ApiKey.ELECT_LEADERS, version)
    assert correlation_id == 7
    return body


def answered(version: int, step: Step, response: Response) -> dict[tuple[str, int], Any]:
    assert isinstance(step, Ask), step
    assert step.address == addresses.controller(BROKER)
    body = decoded(version, step.then(response))
    if version >= 1:
        assert body.error_code == ErrorCode.NONE
    return {
        (t.topic, p.partition_id): (p.error_code, p.error_message)
        for t in body.replica_election_results
        for p in t.partition_result
    }


def results(*entries: tuple[str, int, ErrorCode, str | None]) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        results=tuple(
            PartitionElectionResult(topic=t, partition=p, error_code=e, error_message=m, leader=1)
            for t, p, e, m in entries
        )
    )


def test_versions_zero_to_two_are_served() -> None:
    assert SUPPORTED[ApiKey.ELECT_LEADERS] == (0, 2)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_partitions_asked_for_go_to_the_controller_and_each_gets_its_result(
    version: int,
) -> None:
    step = start(version, request(version, {"a": [1, 0], "b": [0]}))
    assert isinstance(step, Ask)
    assert step.request == ElectLeadersRequest(
        election_type=0, partitions=(tp("a", 0), tp("a", 1), tp("b", 0))
    )
    got = answered(
        version,
        step,
        results(
            ("a", 0, ErrorCode.NONE, None),
            ("a", 1, ErrorCode.ELECTION_NOT_NEEDED, None),
            ("b", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader"),
        ),
    )
    assert got == {
        ("a", 0): (ErrorCode.NONE, None),
        ("a", 1): (ErrorCode.ELECTION_NOT_NEEDED, None),  # asked for by name: reported
        ("b", 0): (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "Failed to elect leader"),
    }


def test_v1_asks_for_the_election_type() -> None:
    step = start(1, request(1, {"a": [0]}, election=1))
    assert isinstance(step, Ask)
    assert step.request == ElectLeadersRequest(election_type=1, partitions=(tp("a", 0),))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_partition_is_the_metadata_caches_and_not_needed_ones_are_left_out(
    version: int,
) -> None:
    step = start(version, request(version, None))
    assert isinstance(step, Ask)
    assert step.address == addresses.replica_manager(BROKER)
    assert step.request == MetadataRequest()
    cache = MetadataResponse(
        topics=(
            TopicMetadata(
                topic="a",
                partitions=(PartitionMetadata(partition=0), PartitionMetadata(partition=1)),
            ),
        )
    )
    step = step.then(cache)
    assert isinstance(step, Ask)
    assert step.request == ElectLeadersRequest(partitions=(tp("a", 0), tp("a", 1)))
    got = answered(
        version,
        step,
        results(("a", 0, ErrorCode.NONE, None), ("a", 1, ErrorCode.ELECTION_NOT_NEEDED, None)),
    )
    assert got == {("a", 0): (ErrorCode.NONE, None)}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_broker_without_a_controller_actor_answers_not_controller(version: int) -> None:
    step = start(version, request(version, {"a": [0]}))
    undeliverable = ErrorResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
    assert answered(version, step, undeliverable) == {("a", 0): (ErrorCode.NOT_CONTROLLER, None)}


@pytest.mark.parametrize("version", [1, 2])
def test_an_unknown_election_type_is_kafkas_illegal_argument(version: int) -> None:
    body = decoded(version, start(version, request(version, {"a": [0]}, election=5)))
    message = "Value 5 must be one of [PREFERRED, UNCLEAN]"
    assert body.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    (topic,) = body.replica_election_results
    assert [(p.partition_id, p.error_code, p.error_message) for p in topic.partition_result] == [
        (0, ErrorCode.UNKNOWN_SERVER_ERROR, message)
    ]


def test_an_empty_request_is_answered_at_once() -> None:
    body = decoded(2, start(2, request(2, {})))
    assert (body.error_code, body.replica_election_results) == (ErrorCode.NONE, ())
