"""`KafkaApis` without threads: a decoded request becomes steps, and hand-made actor answers
drive each `Ask` and `Admin` continuation to the response a client reads.

Every `Answer` reached here is also encoded with the codec and read back with kio, as a client
would read it, so a body built with a field its version lacks (or without one it needs) fails.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from kafkactor.actors.controller.admin_zk import BOTH_SIZES_AND_ASSIGNMENTS, NOT_CONSECUTIVE
from kafkactor.actors.runtime import addresses
from kafkactor.common import (
    OFFSETS_TOPIC,
    BrokerEndpoint,
    InvalidReplicaAssignmentError,
    TopicExistsError,
    TopicPartition,
    UnknownTopicError,
)
from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from kafkactor.messages.controller import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingReassignment,
    PartitionElectionResult,
    ReassignmentResult,
)
from kafkactor.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    LogDirDescription,
    LogDirPartition,
)
from kafkactor.messages.group import (
    DeletedGroup,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMemberInfo,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResult,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeletePartitionResult,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkactor.messages.offsets import (
    EpochEndOffset,
    ListOffsetsPartition,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionError,
    PartitionMetadata,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
    StopReplica,
    StopReplicaResponse,
    TopicMetadata,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.messages.topic_purgatory import TopicOperationResult
from kafkactor.messages.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionDescription,
    TxnMarkerPartitionResult,
    TxnMarkerResult,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnPartition,
    TxnPartitionError,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.codec import UNSUPPORTED_API_VERSIONS, encode_response, nested
from kafkactor.network.kafka_apis import (
    Admin,
    Answer,
    Ask,
    Close,
    KafkaApis,
    KafkaApisConfig,
    NoAnswer,
    Step,
)
from kafkactor.network.request_channel import RequestHeader
from kafkactor.storage import Record, build_batch
from tests.network.wire import (
    TOPIC,
    api_versions_request,
    batch,
    decode_response,
    fetch_request,
    metadata_request,
    produce_request,
    sample_request,
    served_range,
)

BROKER = 1
REPLICA_MANAGER = addresses.replica_manager(BROKER)
ENDPOINTS = (
    BrokerEndpoint(broker_id=1, host="10.0.0.1", port=9092),
    BrokerEndpoint(broker_id=2, host="10.0.0.2", port=9093),
)
R = TypeVar("R", bound=Request)
EVERY = [(api, version) for api in sorted(SUPPORTED) for version in served_range(api)]


# -- a hand-run KafkaApis ------------------------------------------------------------------------


@dataclass
class FakeAdmin:
    """A TopicAdmin that records what it is asked to create, and may refuse."""

    refuse: Exception | None = None
    created: list[tuple[str, int | None, int | None, dict[str, str]]] = field(default_factory=list)
    assigned: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    brokers: list[int] = field(default_factory=lambda: [1, 2, 3])

    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        config: Mapping[str, str],
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        wait: bool = True,
    ) -> Any:
        if self.refuse is not None:
            raise self.refuse
        self.created.append((name, partitions, replication_factor, dict(config)))
        if assignments is not None:
            self.assigned[name] = {p: tuple(r) for p, r in assignments.items()}
        return None

    def registered_brokers(self) -> list[int]:
        return list(self.brokers)

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.deleted.append(name)


@dataclass
class FakeProducerIds:
    next_id: int = 4000

    def generate_producer_id(self) -> int:
        self.next_id += 1
        return self.next_id


def apis(
    *,
    admin: FakeAdmin | None = None,
    auto_create: bool = True,
    producer_ids: FakeProducerIds | None = None,
    replication_factor: int = 3,
) -> KafkaApis:
    return KafkaApis(
        BROKER,
        KafkaApisConfig(
            cluster_id="test-cluster",
            auto_create_topics_enable=auto_create,
            num_partitions=2,
            default_replication_factor=replication_factor,
        ),
        admin=admin,
        producer_ids=producer_ids,
    )


def header(api: ApiKey, version: int, correlation_id: int = 11) -> RequestHeader:
    return RequestHeader(
        api_key=api, api_version=version, correlation_id=correlation_id, client_id="c"
    )


def handle(apis: KafkaApis, api: ApiKey, version: int, body: Any) -> Step:
    return apis.handle(header(api, version), body)


@dataclass(frozen=True)
class Asked(Generic[R]):
    """An Ask step, its request typed."""

    request: R
    then: Callable[[Response], Step]


def ask(step: Step, request_type: type[R]) -> Asked[R]:
    """The step is an Ask of the replica manager with a `request_type`."""
    assert isinstance(step, Ask), f"expected an Ask, got {step!r}"
    assert step.address == REPLICA_MANAGER
    assert isinstance(step.request, request_type), step.request
    return Asked(step.request, step.then)


def answer(step: Step, api: ApiKey, version: int) -> Any:
    """The step is an Answer; its body as a client reads it off the wire (checked to encode)."""
    assert isinstance(step, Answer), f"expected an Answer, got {step!r}"
    wire_version = version if step.version is None else step.version
    frame = encode_response(api, wire_version, 11, step.body)
    correlation_id, body = decode_response(frame[4:], api, wire_version)
    assert correlation_id == 11
    assert body == step.body
    return body


def run_admin(step: Step) -> Step:
    """Run an Admin step's work here (the actor runs it on its worker thread). A CreateTopics
    or DeleteTopics answer then waits in the topic purgatory: here its wait is over at once
    (tests/network/test_topic_waits.py tests the wait)."""
    assert isinstance(step, Admin), f"expected an Admin step, got {step!r}"
    after = step.then(step.work())
    if isinstance(after, Ask) and after.address == addresses.topic_purgatory(BROKER):
        assert isinstance(after.request, DelayOperation)
        return after.then(TopicOperationResult())
    return after


def metadata_of(*topics: TopicMetadata, controller_id: int = 2) -> MetadataResponse:
    return MetadataResponse(
        brokers=(1, 2), topics=topics, endpoints=ENDPOINTS, controller_id=controller_id
    )


def unknown(topic: str) -> TopicMetadata:
    return TopicMetadata(topic=topic, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


LED = TopicMetadata(
    topic=TOPIC,
    partitions=(
        PartitionMetadata(
            partition=0, leader=2, replicas=(2, 1), isr=(2,), leader_epoch=4, offline_replicas=(1,)
        ),
    ),
)


OFFSETS_LED = TopicMetadata(
    topic=OFFSETS_TOPIC,
    partitions=tuple(PartitionMetadata(partition=i, leader=2) for i in range(50)),
)


# -- ApiVersions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_lists_every_supported_api(version: int) -> None:
    step = handle(apis(), ApiKey.API_VERSIONS, version, api_versions_request(version))
    body = answer(step, ApiKey.API_VERSIONS, version)
    assert body.error_code == ErrorCode.NONE
    listed = {(k.api_key, k.min_version, k.max_version) for k in body.api_keys}
    assert listed == {(api, low, high) for api, (low, high) in SUPPORTED.items()}


def test_an_api_versions_newer_than_ours_is_answered_in_v0_with_our_range() -> None:
    step = handle(apis(), ApiKey.API_VERSIONS, 4, UNSUPPORTED_API_VERSIONS)
    assert isinstance(step, Answer)
    assert step.version == 0  # KIP-511: the client reads a v0 body, whatever it asked in
    body = answer(step, ApiKey.API_VERSIONS, 4)
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 3)]


# -- Metadata ------------------------------------------------------------------------------------


def test_metadata_v0_with_no_topics_asks_for_every_topic() -> None:
    step = ask(handle(apis(), ApiKey.METADATA, 0, metadata_request(0, [])), MetadataRequest)
    assert step.request.topics == ()  # the replica manager's "all"
    body = answer(step.then(metadata_of(LED)), ApiKey.METADATA, 0)
    assert [t.name for t in body.topics] == [TOPIC]


@pytest.mark.parametrize("version", [1, 4, 8])
def test_metadata_v1_and_later_null_asks_for_every_topic(version: int) -> None:
    step = ask(
        handle(apis(), ApiKey.METADATA, version, metadata_request(version, None)), MetadataRequest
    )
    assert step.request.topics == ()
    body = answer(step.then(metadata_of(LED)), ApiKey.METADATA, version)
    assert [t.name for t in body.topics] == [TOPIC]


@pytest.mark.parametrize("version", [1, 4, 8])
def test_metadata_v1_and_later_empty_list_asks_for_brokers_only(version: int) -> None:
    step = ask(
        handle(apis(), ApiKey.METADATA, version, metadata_request(version, [])), MetadataRequest
    )
    assert step.request.topics != ()  # not "every topic"
    # even if the replica manager's answer names topics, none is listed
    body = answer(step.then(metadata_of(LED)), ApiKey.METADATA, version)
    assert body.topics == ()
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [
        (1, "10.0.0.1", 9092),
        (2, "10.0.0.2", 9093),
    ]


def test_metadata_names_each_topic_once() -> None:
    body = metadata_request(1, ["a", "b", "a"])
    step = ask(handle(apis(), ApiKey.METADATA, 1, body), MetadataRequest)
    assert step.request.topics == ("a", "b")


@pytest.mark.parametrize("version", [0, 1, 2, 4, 5, 7, 8])
def test_metadata_body_shape_per_version(version: int) -> None:
    step = ask(
        handle(apis(), ApiKey.METADATA, version, metadata_request(version, [TOPIC])),
        MetadataRequest,
    )
    body = answer(step.then(metadata_of(LED)), ApiKey.METADATA, version)
    (topic,) = body.topics
    (partition,) = topic.partitions
    assert (topic.name, topic.error_code) == (TOPIC, ErrorCode.NONE)
    assert (partition.partition_index, partition.leader_id) == (0, 2)
    assert (partition.replica_nodes, partition.isr_nodes) == ((2, 1), (2,))
    assert {(b.node_id, b.host, b.port) for b in body.brokers} == {
        (1, "10.0.0.1", 9092),
        (2, "10.0.0.2", 9093),
    }
    if version >= 1:
        assert body.controller_id == 2
        assert topic.is_internal is False
    if version >= 2:
        assert body.cluster_id == "test-cluster"
    if version >= 5:
        assert partition.offline_replicas == (1,)
    if version >= 7:
        assert partition.leader_epoch == 4
    if version >= 8:
        assert body.cluster_authorized_operations == -(2**31)  # omitted: not asked for


def test_the_controller_told_to_clients_is_a_live_broker() -> None:
    # the in-process Cluster assigns leaders itself (controller 0, no such broker): clients are
    # told the lowest live broker, which takes CreateTopics like any other
    step = ask(handle(apis(), ApiKey.METADATA, 1, metadata_request(1, None)), MetadataRequest)
    body = answer(step.then(metadata_of(controller_id=0)), ApiKey.METADATA, 1)
    assert body.controller_id == 1


def test_metadata_auto_creates_an_unknown_topic_and_says_it_is_on_its_way() -> None:
    admin = FakeAdmin()
    step = ask(
        handle(apis(admin=admin), ApiKey.METADATA, 1, metadata_request(1, ["fresh", TOPIC])),
        MetadataRequest,
    )
    after_lookup = step.then(metadata_of(unknown("fresh"), LED))
    assert admin.created == []  # not on the actor thread: an Admin step
    body = answer(run_admin(after_lookup), ApiKey.METADATA, 1)
    # num.partitions, and default.replication.factor capped at the two live brokers
    assert admin.created == [("fresh", 2, 2, {})]
    codes = {t.name: t.error_code for t in body.topics}
    assert codes == {"fresh": ErrorCode.LEADER_NOT_AVAILABLE, TOPIC: ErrorCode.NONE}


@pytest.mark.parametrize(
    ("auto_create", "version", "allow", "created"),
    [
        (False, 1, True, False),  # auto.create.topics.enable=false
        (True, 3, False, True),  # before v4 the request cannot say no: created
        (True, 4, False, False),  # allow_auto_topic_creation=false
        (True, 4, True, True),
        (True, 8, False, False),
        (True, 8, True, True),
        (False, 8, True, False),
    ],
)
def test_metadata_auto_creation_needs_the_broker_and_from_v4_the_request_to_allow_it(
    auto_create: bool, version: int, allow: bool, created: bool
) -> None:
    admin = FakeAdmin()
    body = metadata_request(version, ["fresh"], allow_auto_topic_creation=allow)
    step = ask(
        handle(apis(admin=admin, auto_create=auto_create), ApiKey.METADATA, version, body),
        MetadataRequest,
    )
    after = step.then(metadata_of(unknown("fresh")))
    if created:
        response = answer(run_admin(after), ApiKey.METADATA, version)
        assert [name for name, *_ in admin.created] == ["fresh"]
        assert response.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    else:
        response = answer(after, ApiKey.METADATA, version)
        assert admin.created == []
        assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_without_a_topic_admin_creates_nothing() -> None:
    step = ask(
        handle(apis(admin=None), ApiKey.METADATA, 1, metadata_request(1, ["fresh"])),
        MetadataRequest,
    )
    body = answer(step.then(metadata_of(unknown("fresh"))), ApiKey.METADATA, 1)
    assert body.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_topic_being_created_is_not_created_twice_and_is_answered_leader_not_available() -> None:
    admin = FakeAdmin()
    kafka_apis = apis(admin=admin)
    first = ask(
        handle(kafka_apis, ApiKey.METADATA, 1, metadata_request(1, ["fresh"])), MetadataRequest
    )
    second = ask(
        handle(kafka_apis, ApiKey.METADATA, 1, metadata_request(1, ["fresh"])), MetadataRequest
    )
    first_admin = first.then(metadata_of(unknown("fresh")))  # creation on its way
    second_body = answer(run_admin(second.then(metadata_of(unknown("fresh")))), ApiKey.METADATA, 1)
    assert second_body.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    answer(run_admin(first_admin), ApiKey.METADATA, 1)
    assert [name for name, *_ in admin.created] == ["fresh"]  # once, by the first
    # once created (or failed), a later request may try again
    third = ask(
        handle(kafka_apis, ApiKey.METADATA, 1, metadata_request(1, ["fresh"])), MetadataRequest
    )
    answer(run_admin(third.then(metadata_of(unknown("fresh")))), ApiKey.METADATA, 1)
    assert len(admin.created) == 2


@pytest.mark.parametrize("name", ["bad name", "a/b", "x" * 250, ""])
def test_an_illegal_topic_name_is_invalid_topic_and_never_created(name: str) -> None:
    admin = FakeAdmin()
    step = ask(
        handle(apis(admin=admin), ApiKey.METADATA, 1, metadata_request(1, [name, "ok"])),
        MetadataRequest,
    )
    after = step.then(metadata_of(unknown(name), unknown("ok")))
    body = answer(run_admin(after), ApiKey.METADATA, 1)
    codes = {t.name: t.error_code for t in body.topics}
    assert [n for n, *_ in admin.created] == ["ok"]
    assert codes["ok"] == ErrorCode.LEADER_NOT_AVAILABLE
    if name:  # (an empty name is the replica manager's "no topic": not listed)
        assert codes[name] == ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_and_dot_dot_are_invalid_topic_names_too(name: str) -> None:
    step = ask(
        handle(apis(admin=FakeAdmin()), ApiKey.METADATA, 1, metadata_request(1, [name])),
        MetadataRequest,
    )
    body = answer(step.then(metadata_of(unknown(name))), ApiKey.METADATA, 1)
    assert body.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_an_auto_creation_that_fails_is_not_answered_as_on_its_way() -> None:
    admin = FakeAdmin(refuse=ValueError("replication factor 3 needs 1..1 live brokers"))
    step = ask(
        handle(apis(admin=admin), ApiKey.METADATA, 1, metadata_request(1, ["fresh"])),
        MetadataRequest,
    )
    body = answer(run_admin(step.then(metadata_of(unknown("fresh")))), ApiKey.METADATA, 1)
    assert body.topics[0].error_code != ErrorCode.LEADER_NOT_AVAILABLE


def test_an_auto_creation_that_lost_a_race_is_answered_leader_not_available() -> None:
    admin = FakeAdmin(refuse=TopicExistsError("topic 'fresh' already exists"))
    step = ask(
        handle(apis(admin=admin), ApiKey.METADATA, 1, metadata_request(1, ["fresh"])),
        MetadataRequest,
    )
    body = answer(run_admin(step.then(metadata_of(unknown("fresh")))), ApiKey.METADATA, 1)
    assert body.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE


def test_metadata_the_replica_manager_failed_answers_its_error_for_each_topic() -> None:
    step = ask(handle(apis(), ApiKey.METADATA, 1, metadata_request(1, ["a", "b"])), MetadataRequest)
    body = answer(step.then(ErrorResponse(error_code=ErrorCode.NOT_CONTROLLER)), ApiKey.METADATA, 1)
    assert [(t.name, t.error_code) for t in body.topics] == [
        ("a", ErrorCode.NOT_CONTROLLER),
        ("b", ErrorCode.NOT_CONTROLLER),
    ]


# -- Produce -------------------------------------------------------------------------------------


def produced(*codes: tuple[int, ErrorCode, int]) -> ProduceResponse:
    return ProduceResponse(
        partitions=tuple(
            ProducePartitionResult(topic=TOPIC, partition=p, error_code=c, base_offset=o)
            for p, c, o in codes
        )
    )


def test_produce_acks_0_is_asked_as_acks_1_and_gets_no_answer_when_it_succeeds() -> None:
    records = batch(b"a", b"b")
    step = ask(
        handle(apis(), ApiKey.PRODUCE, 8, produce_request(8, records, acks=0, timeout_ms=1500)),
        ProduceRequest,
    )
    assert step.request.acks == 1  # the answer decides whether to close the connection
    assert step.request.timeout_ms == 1500
    assert step.request.partitions == (ProducePartition(topic=TOPIC, partition=0, records=records),)
    assert isinstance(step.then(produced((0, ErrorCode.NONE, 7))), NoAnswer)


@pytest.mark.parametrize(
    "failure",
    [
        produced((0, ErrorCode.NOT_LEADER_FOR_PARTITION, -1)),
        ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT),
    ],
    ids=["partition-error", "request-error"],
)
def test_produce_acks_0_that_failed_closes_the_connection(failure: Response) -> None:
    step = ask(
        handle(apis(), ApiKey.PRODUCE, 5, produce_request(5, batch(b"a"), acks=0)), ProduceRequest
    )
    outcome = step.then(failure)
    assert isinstance(outcome, Close)
    assert "acks=0" in outcome.reason


@pytest.mark.parametrize("acks", [1, -1])
@pytest.mark.parametrize("version", [3, 5, 8])
def test_produce_acks_1_and_all_answer_each_partition_with_the_replica_managers_code(
    acks: int, version: int
) -> None:
    schema_body = produce_request(version, batch(b"a"), acks=acks)
    # two partitions of the topic: one appended, one refused
    topic = schema_body.topic_data[0]
    partition_type = type(topic.partition_data[0])
    two = type(schema_body)(
        transactional_id=None,
        acks=schema_body.acks,
        timeout=schema_body.timeout,
        topic_data=(
            type(topic)(
                name=TOPIC,
                partition_data=(
                    topic.partition_data[0],
                    partition_type(index=1, records=batch(b"b")),
                ),
            ),
        ),
    )
    step = ask(handle(apis(), ApiKey.PRODUCE, version, two), ProduceRequest)
    assert step.request.acks == acks
    response = produced((0, ErrorCode.NONE, 41), (1, ErrorCode.NOT_ENOUGH_REPLICAS, -1))
    body = answer(step.then(response), ApiKey.PRODUCE, version)
    ((name, partitions),) = [(t.name, t.partition_responses) for t in body.responses]
    assert name == TOPIC
    assert [(p.index, p.error_code, p.base_offset) for p in partitions] == [
        (0, ErrorCode.NONE, 41),
        (1, ErrorCode.NOT_ENOUGH_REPLICAS, -1),
    ]


@pytest.mark.parametrize("version", [5, 8])
def test_produce_answers_carry_the_leaders_log_start_offset_from_v5(version: int) -> None:
    step = ask(
        handle(apis(), ApiKey.PRODUCE, version, produce_request(version, batch(b"a"))),
        ProduceRequest,
    )
    response = ProduceResponse(
        partitions=(
            ProducePartitionResult(topic=TOPIC, partition=0, base_offset=41, log_start_offset=7),
        )
    )
    body = answer(step.then(response), ApiKey.PRODUCE, version)
    assert body.responses[0].partition_responses[0].log_start_offset == 7


def test_produce_a_partition_the_response_omits_is_an_unknown_server_error() -> None:
    step = ask(handle(apis(), ApiKey.PRODUCE, 8, produce_request(8, batch(b"a"))), ProduceRequest)
    body = answer(step.then(produced()), ApiKey.PRODUCE, 8)
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_produce_refused_as_a_whole_answers_the_code_for_every_partition() -> None:
    step = ask(handle(apis(), ApiKey.PRODUCE, 8, produce_request(8, batch(b"a"))), ProduceRequest)
    body = answer(
        step.then(ErrorResponse(error_code=ErrorCode.INVALID_REQUIRED_ACKS)), ApiKey.PRODUCE, 8
    )
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS


def _transactional_batch() -> bytes:
    return build_batch(
        [Record(None, b"a", 1_000)],
        0,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


@pytest.mark.parametrize("transactional", [False, True], ids=["plain-batch", "txn-batch"])
def test_a_produce_with_a_transactional_id_names_it_to_the_replica_manager(
    transactional: bool,
) -> None:
    records = _transactional_batch() if transactional else batch(b"a")
    body = produce_request(8, records, acks=-1, transactional_id="tx-1")
    asked = ask(handle(apis(), ApiKey.PRODUCE, 8, body), ProduceRequest)
    assert asked.request.transactional_id == "tx-1"
    assert asked.request.from_coordinator is False  # never from the wire


def test_transactional_records_without_a_transactional_id_are_refused_untouched() -> None:
    # Kafka's handleProduceRequest: the whole request fails, nothing is appended
    body = produce_request(8, _transactional_batch(), acks=-1)
    step = handle(apis(), ApiKey.PRODUCE, 8, body)
    response = answer(step, ApiKey.PRODUCE, 8)  # answered at once: no Ask
    code = response.responses[0].partition_responses[0].error_code
    assert code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transactional_records_without_a_transactional_id_and_acks_0_close() -> None:
    body = produce_request(8, _transactional_batch(), acks=0)
    step = handle(apis(), ApiKey.PRODUCE, 8, body)
    assert isinstance(step, Close | NoAnswer)


def test_produce_with_null_records_sends_empty_bytes() -> None:
    body = produce_request(8, b"", acks=1)
    topic = body.topic_data[0]
    partition = type(topic.partition_data[0])(index=0, records=None)
    null_records = type(body)(
        transactional_id=None,
        acks=body.acks,
        timeout=body.timeout,
        topic_data=(type(topic)(name=TOPIC, partition_data=(partition,)),),
    )
    step = ask(handle(apis(), ApiKey.PRODUCE, 8, null_records), ProduceRequest)
    assert step.request.partitions[0].records == b""


# -- Fetch ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 7, 11])
def test_fetch_is_translated_and_an_empty_partition_answers_empty_records_not_null(
    version: int,
) -> None:
    body = fetch_request(version, offset=5, max_wait_ms=300, min_bytes=1000)
    step = ask(handle(apis(), ApiKey.FETCH, version, body), FetchRequest)
    assert step.request.max_wait_ms == 300
    assert step.request.min_bytes == 1000
    assert step.request.partitions == (
        FetchPartition(topic=TOPIC, partition=0, fetch_offset=5, max_bytes=1024 * 1024),
    )
    data = FetchPartitionData(
        topic=TOPIC, partition=0, high_watermark=5, log_end_offset=5, log_start_offset=2
    )
    response = answer(step.then(FetchResponse(partitions=(data,))), ApiKey.FETCH, version)
    (topic,) = response.responses
    (partition,) = topic.partitions
    assert (topic.topic, partition.partition_index, partition.error_code) == (
        TOPIC,
        0,
        ErrorCode.NONE,
    )
    assert partition.records == b""  # librdkafka and kafka-python read a null as an error
    assert partition.records is not None
    assert partition.high_watermark == 5
    if version >= 4:
        assert partition.last_stable_offset == 5
    if version >= 5:
        assert partition.log_start_offset == 2


def test_fetch_returns_the_records_read() -> None:
    records = batch(b"one", b"two")
    step = ask(handle(apis(), ApiKey.FETCH, 11, fetch_request(11)), FetchRequest)
    data = FetchPartitionData(topic=TOPIC, partition=0, high_watermark=2, records=records)
    body = answer(step.then(FetchResponse(partitions=(data,))), ApiKey.FETCH, 11)
    assert body.responses[0].partitions[0].records == records


def test_fetch_failed_as_a_whole_answers_the_code_and_empty_records() -> None:
    step = ask(handle(apis(), ApiKey.FETCH, 11, fetch_request(11)), FetchRequest)
    failed = ErrorResponse(error_code=ErrorCode.NOT_LEADER_FOR_PARTITION)
    partition = answer(step.then(failed), ApiKey.FETCH, 11).responses[0].partitions[0]
    assert partition.error_code == ErrorCode.NOT_LEADER_FOR_PARTITION
    assert partition.records == b""
    assert partition.high_watermark == -1


def test_a_fetch_from_a_replica_reaches_the_replica_manager_as_a_follower_fetch() -> None:
    # a follower in another process fetches with its broker id: it reads up to the log end
    step = handle(apis(), ApiKey.FETCH, 11, fetch_request(11, replica_id=2))
    assert isinstance(step, Ask)
    assert isinstance(step.request, FetchRequest)
    assert step.request.replica_id == 2


def test_a_fetch_with_a_replica_id_below_the_consumers_is_refused() -> None:
    step = handle(apis(), ApiKey.FETCH, 11, fetch_request(11, replica_id=-3))
    body = answer(step, ApiKey.FETCH, 11)
    code = body.responses[0].partitions[0].error_code
    assert code == ErrorCode.INVALID_REQUEST


# -- ListOffsets, OffsetForLeaderEpoch -----------------------------------------------------------


@pytest.mark.parametrize("version", [1, 5])
def test_list_offsets_round_trip(version: int) -> None:
    step = ask(
        handle(apis(), ApiKey.LIST_OFFSETS, version, sample_request(ApiKey.LIST_OFFSETS, version)),
        ListOffsetsRequest,
    )
    assert step.request.partitions == (
        ListOffsetsPartition(topic=TOPIC, partition=0, timestamp=-1, current_leader_epoch=-1),
    )
    result = ListOffsetsPartitionResult(
        topic=TOPIC, partition=0, timestamp=-1, offset=12, leader_epoch=3
    )
    body = answer(
        step.then(ListOffsetsResponse(partitions=(result,))), ApiKey.LIST_OFFSETS, version
    )
    partition = body.topics[0].partitions[0]
    assert (partition.error_code, partition.offset) == (ErrorCode.NONE, 12)
    if version >= 4:
        assert partition.leader_epoch == 3


@pytest.mark.parametrize("version", [2, 3])
def test_offset_for_leader_epoch_round_trip(version: int) -> None:
    body = sample_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    step = ask(
        handle(apis(), ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body), OffsetsForLeaderEpochRequest
    )
    assert step.request.partitions == (
        OffsetForLeaderPartition(topic=TOPIC, partition=0, current_leader_epoch=-1, leader_epoch=0),
    )
    ended = EpochEndOffset(topic=TOPIC, partition=0, leader_epoch=0, end_offset=9)
    response = answer(
        step.then(OffsetsForLeaderEpochResponse(partitions=(ended,))),
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        version,
    )
    partition = response.topics[0].partitions[0]
    assert (partition.error_code, partition.leader_epoch, partition.end_offset) == (
        ErrorCode.NONE,
        0,
        9,
    )


# -- InitProducerId, CreateTopics ----------------------------------------------------------------


def test_init_producer_id_hands_out_ids_from_the_source() -> None:
    body = sample_request(ApiKey.INIT_PRODUCER_ID, 1)
    step = handle(apis(producer_ids=FakeProducerIds()), ApiKey.INIT_PRODUCER_ID, 1, body)
    response = answer(run_admin(step), ApiKey.INIT_PRODUCER_ID, 1)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.NONE,
        4001,
        0,
    )


def test_init_producer_id_without_a_source_is_coordinator_not_available() -> None:
    body = sample_request(ApiKey.INIT_PRODUCER_ID, 0)
    response = answer(handle(apis(), ApiKey.INIT_PRODUCER_ID, 0, body), ApiKey.INIT_PRODUCER_ID, 0)
    assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


def _create_topics(version: int, *topics: tuple[str, int, int], validate_only: bool = False) -> Any:
    sample = sample_request(ApiKey.CREATE_TOPICS, version)
    topic_type = type(sample.topics[0])
    return type(sample)(
        topics=tuple(
            topic_type(
                name=name, num_partitions=p, replication_factor=r, assignments=(), configs=()
            )
            for name, p, r in topics
        ),
        timeout=datetime.timedelta(seconds=5),
        validate_only=validate_only,
    )


def test_create_topics_creates_through_the_admin_and_reports_each_topic() -> None:
    admin = FakeAdmin()
    body = _create_topics(
        4,
        ("new", 3, 1),
        ("bad name", 1, 1),
        ("zero", 0, 1),
        ("dup", 1, 1),
        ("dup", 1, 1),
        ("defaults", -1, -1),
    )
    response = answer(
        run_admin(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 4, body)), ApiKey.CREATE_TOPICS, 4
    )
    codes = [(t.name, t.error_code) for t in response.topics]
    assert codes == [
        ("new", ErrorCode.NONE),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("zero", ErrorCode.INVALID_PARTITIONS),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("dup", ErrorCode.INVALID_REQUEST),
        ("defaults", ErrorCode.NONE),
    ]
    assert admin.created == [("new", 3, 1, {}), ("defaults", 2, 3, {})]


def test_create_topics_validate_only_creates_nothing() -> None:
    admin = FakeAdmin()
    body = _create_topics(2, ("new", 3, 1), validate_only=True)
    response = answer(
        run_admin(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 2, body)), ApiKey.CREATE_TOPICS, 2
    )
    assert response.topics[0].error_code == ErrorCode.NONE
    assert admin.created == []


@pytest.mark.parametrize(
    ("refusal", "code"),
    [
        (TopicExistsError("exists"), ErrorCode.TOPIC_ALREADY_EXISTS),
        (
            ValueError("replication factor 3 needs 1..1 live brokers"),
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
        (ValueError("unknown config 'x'"), ErrorCode.INVALID_CONFIG),
        (
            InvalidReplicaAssignmentError("Unknown broker(s) in replica assignment: 4."),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (RuntimeError("zookeeper is gone"), ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_create_topics_maps_the_admins_refusal_to_an_error_code(
    refusal: Exception, code: ErrorCode
) -> None:
    admin = FakeAdmin(refuse=refusal)
    body = _create_topics(3, ("new", 1, 3))
    response = answer(
        run_admin(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 3, body)), ApiKey.CREATE_TOPICS, 3
    )
    assert response.topics[0].error_code == code
    assert response.topics[0].error_message == str(refusal)


def _assigned_topic(
    version: int,
    name: str,
    assignment: Sequence[tuple[int, Sequence[int]]],
    *,
    partitions: int = -1,
    factor: int = -1,
) -> Any:
    """A CreateTopics topic with a manual assignment: (partition, brokers) entries."""
    sample = sample_request(ApiKey.CREATE_TOPICS, version)
    topic_type = type(sample.topics[0])
    assignment_type = nested(type(sample), "CreatableReplicaAssignment")
    return topic_type(
        name=name,
        num_partitions=partitions,
        replication_factor=factor,
        assignments=tuple(
            assignment_type(partition_index=p, broker_ids=tuple(brokers))
            for p, brokers in assignment
        ),
        configs=(),
    )


def _create_assigned(admin: FakeAdmin, *topics: Any, validate_only: bool = False) -> Any:
    sample = sample_request(ApiKey.CREATE_TOPICS, 4)
    body = type(sample)(
        topics=topics, timeout=datetime.timedelta(seconds=5), validate_only=validate_only
    )
    step = handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 4, body)
    return answer(run_admin(step), ApiKey.CREATE_TOPICS, 4)


def test_create_topics_hands_a_manual_assignment_to_the_admin_without_sizes() -> None:
    admin = FakeAdmin()
    response = _create_assigned(admin, _assigned_topic(4, "manual", [(0, [2, 3]), (1, [3, 1])]))
    assert [(t.error_code, t.error_message) for t in response.topics] == [(ErrorCode.NONE, None)]
    assert admin.created == [("manual", None, None, {})]
    assert admin.assigned == {"manual": {0: (2, 3), 1: (3, 1)}}


def test_create_topics_with_an_assignment_and_a_size_is_invalid_request() -> None:
    admin = FakeAdmin()
    response = _create_assigned(
        admin,
        _assigned_topic(4, "sized", [(0, [1])], partitions=1),
        _assigned_topic(4, "factored", [(0, [1])], factor=1),
    )
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("sized", ErrorCode.INVALID_REQUEST, BOTH_SIZES_AND_ASSIGNMENTS),
        ("factored", ErrorCode.INVALID_REQUEST, BOTH_SIZES_AND_ASSIGNMENTS),
    ]
    assert admin.created == []


def test_create_topics_validate_only_checks_a_manual_assignment_against_the_brokers() -> None:
    admin = FakeAdmin(brokers=[1, 2])
    response = _create_assigned(
        admin,
        _assigned_topic(4, "good", [(0, [2, 1])]),
        _assigned_topic(4, "unknown", [(0, [2, 3])]),
        _assigned_topic(4, "twice", [(0, [1]), (0, [2])]),
        _assigned_topic(4, "gap", [(0, [1]), (2, [2])]),
        validate_only=True,
    )
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("good", ErrorCode.NONE, None),
        (
            "unknown",
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Unknown broker(s) in replica assignment: 3.",
        ),
        ("twice", ErrorCode.INVALID_REPLICA_ASSIGNMENT, NOT_CONSECUTIVE),
        ("gap", ErrorCode.INVALID_REPLICA_ASSIGNMENT, NOT_CONSECUTIVE),
    ]
    assert admin.created == []


def test_create_topics_refuses_an_assignment_over_the_partition_limit() -> None:
    admin = FakeAdmin()
    too_many = [(p, [1]) for p in range(10_001)]
    response = _create_assigned(admin, _assigned_topic(4, "huge", too_many))
    assert response.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert admin.created == []


# -- every served API and version ----------------------------------------------------------------


def _drive(kafka_apis: KafkaApis, api: ApiKey, version: int, body: Any) -> Step:
    """Run a request's steps with plausible answers from the replica manager and the admin."""
    step = kafka_apis.handle(header(api, version), body)
    for _ in range(5):
        if isinstance(step, Admin):
            step = step.then(step.work())
        elif isinstance(step, Ask):
            step = step.then(_plausible_answer(step))
        else:
            return step
    raise AssertionError(f"{api.name} v{version} did not finish: {step!r}")


def _plausible_answer(step: Ask) -> Response:
    request = step.request
    if isinstance(request, MetadataRequest):
        offsets = request.topics == (OFFSETS_TOPIC,)  # FindCoordinator's: all led by broker 2
        return metadata_of(OFFSETS_LED) if offsets else metadata_of(LED, unknown("other"))
    if step.address == addresses.group_coordinator(BROKER) and not isinstance(
        request, TxnOffsetCommitRequest
    ):
        return _plausible_group_answer(request)
    answer_to = _PLAUSIBLE.get(type(request))
    if answer_to is None:
        raise AssertionError(f"no plausible answer to {request!r}")
    return answer_to(request)


_PLAUSIBLE: dict[type[Request], Callable[[Any], Response]] = {
    DelayOperation: lambda _: TopicOperationResult(),  # the topic purgatory's wait is over
    ProduceRequest: lambda request: ProduceResponse(
        partitions=tuple(
            ProducePartitionResult(topic=p.topic, partition=p.partition, base_offset=3)
            for p in request.partitions
        )
    ),
    FetchRequest: lambda request: FetchResponse(
        partitions=tuple(
            FetchPartitionData(topic=p.topic, partition=p.partition, high_watermark=1)
            for p in request.partitions
        )
    ),
    ListOffsetsRequest: lambda request: ListOffsetsResponse(
        partitions=tuple(
            ListOffsetsPartitionResult(topic=p.topic, partition=p.partition, offset=1)
            for p in request.partitions
        )
    ),
    OffsetsForLeaderEpochRequest: lambda request: OffsetsForLeaderEpochResponse(
        partitions=tuple(
            EpochEndOffset(topic=p.topic, partition=p.partition, leader_epoch=0, end_offset=1)
            for p in request.partitions
        )
    ),
    LeaderAndIsr: lambda _: LeaderAndIsrResponse(
        partitions=(PartitionError(topic=TOPIC, partition=0),)
    ),
    StopReplica: lambda _: StopReplicaResponse(
        partitions=(PartitionError(topic=TOPIC, partition=0),)
    ),
    UpdateMetadata: lambda _: UpdateMetadataResponse(),
    ControlledShutdownRequest: lambda _: ControlledShutdownResponse(
        remaining_partitions=(TopicPartition(topic=TOPIC, partition=0),)
    ),
    ElectLeadersRequest: lambda request: ElectLeadersResponse(
        results=tuple(
            PartitionElectionResult(topic=p.topic, partition=p.partition, leader=1)
            for p in request.partitions
        )
    ),
    AlterPartitionReassignmentsRequest: lambda request: AlterPartitionReassignmentsResponse(
        results=tuple(
            ReassignmentResult(topic=t.topic, partition=t.partition) for t in request.targets
        )
    ),
    ListPartitionReassignmentsRequest: lambda _: ListPartitionReassignmentsResponse(
        reassignments=(
            OngoingReassignment(
                topic=TOPIC,
                partition=0,
                replicas=(2, 3, 1),
                adding_replicas=(3,),
                removing_replicas=(1,),
            ),
        )
    ),
    DeleteRecordsRequest: lambda request: DeleteRecordsResponse(
        partitions=tuple(
            DeleteRecordsPartitionResult(topic=p.topic, partition=p.partition, low_watermark=3)
            for p in request.partitions
        )
    ),
    InitProducerIdRequest: lambda _: InitProducerIdResponse(producer_id=4000, producer_epoch=2),
    AddPartitionsToTxnRequest: lambda request: AddPartitionsToTxnResponse(
        partitions=tuple(
            TxnPartitionError(topic=p.topic, partition=p.partition) for p in request.partitions
        )
    ),
    AddOffsetsToTxnRequest: lambda _: AddOffsetsToTxnResponse(),
    EndTxnRequest: lambda _: EndTxnResponse(),
    TxnOffsetCommitRequest: lambda request: TxnOffsetCommitResponse(
        partitions=tuple(
            TxnPartitionError(topic=p.topic, partition=p.partition) for p in request.partitions
        )
    ),
    WriteTxnMarkersRequest: lambda request: WriteTxnMarkersResponse(
        markers=tuple(
            TxnMarkerResult(
                producer_id=m.producer_id,
                partitions=tuple(
                    TxnMarkerPartitionResult(topic=p.topic, partition=p.partition)
                    for p in m.partitions
                ),
            )
            for m in request.markers
        )
    ),
    DescribeTransactionsRequest: lambda request: DescribeTransactionsResponse(
        transactions=tuple(
            TransactionDescription(
                transactional_id=t,
                state="Ongoing",
                transaction_start_time_ms=1_700_000_000_000,  # kio reads no negative time
                partitions=(TxnPartition(topic=TOPIC, partition=0),),
            )
            for t in request.transactional_ids
        )
    ),
    ListTransactionsRequest: lambda _: ListTransactionsResponse(
        transactions=(TransactionDescription(transactional_id="t", state="Ongoing"),)
    ),
    DescribeLogDirsRequest: lambda _: DescribeLogDirsResponse(
        dirs=(
            LogDirDescription(
                path="/data",
                partitions=(LogDirPartition(topic=TOPIC, partition=0, size=120),),
                total_bytes=1000,
                usable_bytes=500,
            ),
        )
    ),
}


def _plausible_group_answer(request: Request) -> Response:
    answers: dict[type[Request], Response] = {
        JoinGroupRequest: JoinGroupResponse(
            generation_id=1,
            protocol_type="consumer",
            protocol_name="range",
            leader_id="m",
            member_id="m",
            members=(JoinGroupMemberInfo(member_id="m", metadata=b"sub"),),
        ),
        SyncGroupRequest: SyncGroupResponse(assignment=b"assigned"),
        HeartbeatRequest: HeartbeatResponse(),
        LeaveGroupRequest: LeaveGroupResponse(members=(LeaveGroupMemberResult(member_id="m"),)),
        OffsetFetchRequest: OffsetFetchResponse(
            partitions=(OffsetFetchPartitionResult(topic=TOPIC, partition=0, offset=5),)
        ),
        DescribeGroupsRequest: DescribeGroupsResponse(
            groups=(DescribedGroup(group_id="a-group", state="Empty"),)
        ),
        ListGroupsRequest: ListGroupsResponse(groups=(ListedGroup(group_id="a-group"),)),
        DeleteGroupsRequest: DeleteGroupsResponse(groups=(DeletedGroup(group_id="a-group"),)),
        OffsetDeleteRequest: OffsetDeleteResponse(
            partitions=(OffsetDeletePartitionResult(topic=TOPIC, partition=0),)
        ),
    }
    if isinstance(request, OffsetCommitRequest):
        return OffsetCommitResponse(
            partitions=tuple(
                OffsetCommitPartitionResult(topic=p.topic, partition=p.partition)
                for p in request.partitions
            )
        )
    return answers[type(request)]


@pytest.mark.parametrize("case", EVERY, ids=lambda c: f"{c[0].name}-v{c[1]}")
def test_every_served_version_answers_a_body_its_version_encodes(
    case: tuple[ApiKey, int],
) -> None:
    # every advertised API has a handler, and every version's answer is a valid body
    api, version = case
    kafka_apis = apis(admin=FakeAdmin(), producer_ids=FakeProducerIds())
    step = _drive(kafka_apis, api, version, sample_request(api, version))
    answer(step, api, version)


@pytest.mark.parametrize("version", [1, 3])
def test_delete_topics_deletes_through_the_admin(version: int) -> None:
    admin = FakeAdmin()
    body = sample_request(ApiKey.DELETE_TOPICS, version)
    response = answer(
        run_admin(handle(apis(admin=admin), ApiKey.DELETE_TOPICS, version, body)),
        ApiKey.DELETE_TOPICS,
        version,
    )
    assert [(r.name, r.error_code) for r in response.responses] == [("old", ErrorCode.NONE)]
    assert admin.deleted == ["old"]


@pytest.mark.parametrize(
    ("admin", "code"),
    [
        (
            FakeAdmin(refuse=UnknownTopicError("no topic 'old'")),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (None, ErrorCode.TOPIC_DELETION_DISABLED),
    ],
    ids=["unknown", "no-admin"],
)
def test_delete_topics_refused(admin: FakeAdmin | None, code: ErrorCode) -> None:
    body = sample_request(ApiKey.DELETE_TOPICS, 3)
    step = handle(apis(admin=admin), ApiKey.DELETE_TOPICS, 3, body)
    response = answer(run_admin(step), ApiKey.DELETE_TOPICS, 3)
    assert [(r.name, r.error_code) for r in response.responses] == [("old", code)]
