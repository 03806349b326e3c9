"""The consumer-group APIs of `KafkaApis` without threads: a request encoded as a client writes
it is decoded, the step it becomes is checked (the group coordinator message an `Ask` carries,
or the metadata lookup and topic creation of FindCoordinator), and a hand-made answer is fed to
the continuation; the response is encoded and read back with kio, as a client reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import addresses
from kafkactor.common import OFFSETS_TOPIC, BrokerEndpoint, TopicExistsError
from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from kafkactor.messages.group import (
    DeletedGroup,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribedMember,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupProtocol,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMemberInfo,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupMemberResult,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitPartition,
    OffsetCommitPartitionResult,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchPartitionRequest,
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkactor.messages.replication import (
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import decode_request, encode_response
from kafkactor.network.kafka_apis import Admin, Answer, Ask, KafkaApis, KafkaApisConfig, Step
from tests.network.wire import (
    CLIENT_ID,
    COMMIT_TIME_MS,
    GROUP,
    MEMBER,
    TOPIC,
    decode_response,
    describe_groups_request,
    encode_request,
    find_coordinator_request,
    join_group_request,
    leave_group_request,
    offset_commit_request,
    offset_fetch_request,
    sample_request,
    served_range,
    sync_group_request,
)

BROKER = 1
COORDINATOR = addresses.group_coordinator(BROKER)
REPLICA_MANAGER = addresses.replica_manager(BROKER)
ENDPOINTS = (
    BrokerEndpoint(broker_id=1, host="10.0.0.1", port=9092),
    BrokerEndpoint(broker_id=2, host="10.0.0.2", port=9093),
)
PARTITIONS = 4  # offsets.topic.num.partitions in these tests
GROUP_PARTITION = partition_for(GROUP, PARTITIONS)
OMITTED = -2147483648  # authorized operations not computed
R = TypeVar("R", bound=Request)

GROUP_APIS = (
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.HEARTBEAT,
    ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.DELETE_GROUPS,
)
# every group API at its lowest and highest served version
EDGES = [(api, v) for api in GROUP_APIS for v in (served_range(api)[0], served_range(api)[-1])]


# -- a hand-run KafkaApis ------------------------------------------------------------------------


@dataclass
class FakeAdmin:
    """A TopicAdmin that records the topics it is asked to create, and may refuse."""

    refuse: Exception | None = None
    created: list[tuple[str, int | None, int | None, dict[str, str]]] = field(default_factory=list)

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
        self.created.append((name, partitions, replication_factor, dict(config)))
        if self.refuse is not None:
            raise self.refuse
        return None

    def registered_brokers(self) -> list[int]:
        return [1, 2, 3]

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        raise AssertionError("the group APIs delete no topic")


def apis(*, admin: FakeAdmin | None = None, replication_factor: int = 3) -> KafkaApis:
    return KafkaApis(
        BROKER,
        KafkaApisConfig(offsets_topic_replication_factor=replication_factor),
        admin=admin,
        group=GroupConfig(offsets_topic_partitions=PARTITIONS),
    )


CLIENT_ADDRESS = "10.0.0.7"  # the peer address of the connection the requests came on


def handle(kafka_apis: KafkaApis, api: ApiKey, version: int, body: Any) -> Step:
    """Encode `body` as a client does, decode it as the broker does, and handle it."""
    header, decoded = decode_request(encode_request(api, version, body, correlation_id=11))
    assert decoded == body
    # the socket server adds the connection's peer address, which is not on the wire
    return kafka_apis.handle(dataclasses.replace(header, client_host=CLIENT_ADDRESS), decoded)


@dataclass(frozen=True)
class Asked(Generic[R]):
    """An Ask step of the group coordinator, its request typed."""

    request: R
    then: Callable[[Response], Step]


def ask(step: Step, request_type: type[R]) -> Asked[R]:
    assert isinstance(step, Ask), f"expected an Ask, got {step!r}"
    assert step.address == COORDINATOR
    assert isinstance(step.request, request_type), step.request
    return Asked(step.request, step.then)


def asked(api: ApiKey, version: int, body: Any, request_type: type[R]) -> Asked[R]:
    return ask(handle(apis(), api, version, body), request_type)


def answer(step: Step, api: ApiKey, version: int) -> Any:
    """The step is an Answer; its body as a client reads it off the wire (checked to encode)."""
    assert isinstance(step, Answer), f"expected an Answer, got {step!r}"
    assert step.version is None
    correlation_id, body = decode_response(
        encode_response(api, version, 11, step.body)[4:], api, version
    )
    assert correlation_id == 11
    assert body == step.body
    return body


# -- FindCoordinator -----------------------------------------------------------------------------


def offsets_topic(*leaders: int) -> TopicMetadata:
    return TopicMetadata(
        topic=OFFSETS_TOPIC,
        partitions=tuple(
            PartitionMetadata(
                partition=p,
                leader=leader,
                error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            )
            for p, leader in enumerate(leaders)
        ),
    )


def metadata(*topics: TopicMetadata, endpoints: tuple[BrokerEndpoint, ...] = ENDPOINTS) -> Response:
    return MetadataResponse(
        brokers=tuple(e.broker_id for e in endpoints), topics=topics, endpoints=endpoints
    )


def looked_up(kafka_apis: KafkaApis, version: int) -> Callable[[Response], Step]:
    """FindCoordinator for GROUP: the step asks the replica manager for the offsets topic."""
    step = handle(kafka_apis, ApiKey.FIND_COORDINATOR, version, find_coordinator_request(version))
    assert isinstance(step, Ask), step
    assert step.address == REPLICA_MANAGER
    # the offsets topic, its brokers at the endpoints of the request listener
    assert step.request == MetadataRequest(topics=(OFFSETS_TOPIC,), listener="PLAINTEXT")
    return step.then


def coordinator_of(step: Step, version: int) -> tuple[int, int, str, int]:
    body = answer(step, ApiKey.FIND_COORDINATOR, version)
    return (body.error_code, body.node_id, body.host, body.port)


UNAVAILABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_find_coordinator_answers_the_leader_of_the_groups_offsets_partition(version: int) -> None:
    leaders = [1] * PARTITIONS
    leaders[GROUP_PARTITION] = 2  # the group's partition is led by broker 2, the others by 1
    step = looked_up(apis(), version)(metadata(offsets_topic(*leaders)))
    assert coordinator_of(step, version) == (ErrorCode.NONE, 2, "10.0.0.2", 9093)
    if version >= 1:
        assert answer(step, ApiKey.FIND_COORDINATOR, version).error_message is None


@pytest.mark.parametrize("version", [0, 2])
def test_find_coordinator_for_a_leaderless_partition_is_coordinator_not_available(
    version: int,
) -> None:
    leaders = [1] * PARTITIONS
    leaders[GROUP_PARTITION] = -1
    step = looked_up(apis(), version)(metadata(offsets_topic(*leaders)))
    assert coordinator_of(step, version) == UNAVAILABLE


def test_find_coordinator_whose_leader_has_no_listener_is_coordinator_not_available() -> None:
    step = looked_up(apis(), 2)(metadata(offsets_topic(*[3] * PARTITIONS)))  # broker 3: unknown
    assert coordinator_of(step, 2) == UNAVAILABLE


@pytest.mark.parametrize(
    "failure",
    [ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT), HeartbeatResponse()],
    ids=["error", "unexpected"],
)
def test_find_coordinator_without_metadata_is_coordinator_not_available(failure: Response) -> None:
    step = looked_up(apis(), 2)(failure)
    assert coordinator_of(step, 2) == UNAVAILABLE


@pytest.mark.parametrize("version", [1, 2])
def test_find_coordinator_of_an_unknown_key_type_is_an_invalid_request(version: int) -> None:
    # key type 1 (a transactional id) is tests/network/test_txn_apis.py's
    body = find_coordinator_request(version, key="a-key", key_type=2)
    step = handle(apis(), ApiKey.FIND_COORDINATOR, version, body)
    response = answer(step, ApiKey.FIND_COORDINATOR, version)  # answered at once
    assert (response.error_code, response.node_id) == (ErrorCode.INVALID_REQUEST, -1)
    assert response.error_message == "Unknown coordinator type 2 in FindCoordinator request"


@pytest.mark.parametrize(
    ("endpoints", "replication_factor", "expected_factor"),
    [(ENDPOINTS, 3, 2), (ENDPOINTS[:1], 3, 1), (ENDPOINTS, 1, 1)],
    ids=["capped-at-2-live", "capped-at-1-live", "configured-1"],
)
@pytest.mark.parametrize("version", [0, 2])
def test_a_missing_offsets_topic_is_created_compacted_and_answered_not_available(
    version: int,
    endpoints: tuple[BrokerEndpoint, ...],
    replication_factor: int,
    expected_factor: int,
) -> None:
    admin = FakeAdmin()
    missing = TopicMetadata(topic=OFFSETS_TOPIC, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    then = looked_up(apis(admin=admin, replication_factor=replication_factor), version)
    step = then(metadata(missing, endpoints=endpoints))
    assert isinstance(step, Admin), step
    assert admin.created == []  # the creation is blocking work: run off the actor thread
    done = step.then(step.work())
    assert admin.created == [
        (
            OFFSETS_TOPIC,
            PARTITIONS,
            expected_factor,
            {"cleanup.policy": "compact", "segment.bytes": str(100 * 1024 * 1024)},
        )
    ]
    assert coordinator_of(done, version) == UNAVAILABLE  # clients retry until it has leaders


def test_an_offsets_topic_absent_from_the_answer_is_created_too() -> None:
    admin = FakeAdmin()
    step = looked_up(apis(admin=admin), 2)(metadata())
    assert isinstance(step, Admin)
    assert coordinator_of(step.then(step.work()), 2) == UNAVAILABLE
    assert [c[0] for c in admin.created] == [OFFSETS_TOPIC]


def test_the_offsets_topic_is_created_once_at_a_time() -> None:
    admin = FakeAdmin()
    kafka_apis = apis(admin=admin)
    first = looked_up(kafka_apis, 2)(metadata())
    second = looked_up(kafka_apis, 2)(metadata())  # while the first creation is on its way
    assert coordinator_of(second, 2) == UNAVAILABLE
    assert isinstance(first, Admin)
    first.then(first.work())
    assert len(admin.created) == 1
    third = looked_up(kafka_apis, 2)(metadata())  # still unknown after it: tried again
    assert isinstance(third, Admin)


@pytest.mark.parametrize(
    "refusal",
    [TopicExistsError("exists"), RuntimeError("ZooKeeper is gone")],
    ids=["created-meanwhile", "failed"],
)
def test_a_refused_offsets_topic_creation_is_answered_not_available(refusal: Exception) -> None:
    admin = FakeAdmin(refuse=refusal)
    step = looked_up(apis(admin=admin), 2)(metadata())
    assert isinstance(step, Admin)
    assert coordinator_of(step.then(step.work()), 2) == UNAVAILABLE


def test_without_a_topic_admin_a_missing_offsets_topic_is_only_not_available() -> None:
    step = looked_up(apis(), 2)(metadata())
    assert coordinator_of(step, 2) == UNAVAILABLE


# -- JoinGroup -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 3, 4, 5])
def test_join_group_is_asked_of_the_group_coordinator(version: int) -> None:
    body = join_group_request(version)
    instance = "static-instance" if version >= 5 else None  # KIP-345: a static member
    if instance is not None:
        body = dataclasses.replace(body, group_instance_id=instance)
    request = asked(ApiKey.JOIN_GROUP, version, body, JoinGroupRequest).request
    assert request == JoinGroupRequest(
        group_id=GROUP,
        member_id="",
        group_instance_id=instance,
        client_id=CLIENT_ID,
        client_host="/" + CLIENT_ADDRESS,  # as Kafka shows it (InetAddress.toString)
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000 if version == 0 else 45_000,  # v0: the session timeout
        protocol_type="consumer",
        protocols=(
            GroupProtocol(name="range", metadata=b"\x00\x01range-subscription"),
            GroupProtocol(name="roundrobin", metadata=b"\x00\x01rr-subscription"),
        ),
        # KIP-394's round trip is for dynamic members only, as Kafka's KafkaApis asks for it
        require_known_member_id=version >= 4 and instance is None,
    )


def test_join_group_v5_of_a_dynamic_member_requires_a_known_member_id() -> None:
    request = asked(ApiKey.JOIN_GROUP, 5, join_group_request(5), JoinGroupRequest).request
    assert (request.group_instance_id, request.require_known_member_id) == (None, True)


def test_join_group_v5_tells_the_leader_each_members_instance_id() -> None:
    then = asked(ApiKey.JOIN_GROUP, 5, join_group_request(5), JoinGroupRequest).then
    joined = JoinGroupResponse(
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader_id=MEMBER,
        member_id=MEMBER,
        members=(
            JoinGroupMemberInfo(member_id=MEMBER, group_instance_id="one", metadata=b"a"),
            JoinGroupMemberInfo(member_id="other", metadata=b"b"),
        ),
    )
    body = answer(then(joined), ApiKey.JOIN_GROUP, 5)
    assert [(m.member_id, m.group_instance_id) for m in body.members] == [
        (MEMBER, "one"),
        ("other", None),
    ]


def test_sync_heartbeat_and_commit_carry_the_static_members_instance_id() -> None:
    sync = dataclasses.replace(sync_group_request(3), group_instance_id="one")
    assert asked(ApiKey.SYNC_GROUP, 3, sync, SyncGroupRequest).request.group_instance_id == "one"
    beat = dataclasses.replace(sample_request(ApiKey.HEARTBEAT, 3), group_instance_id="one")
    assert asked(ApiKey.HEARTBEAT, 3, beat, HeartbeatRequest).request.group_instance_id == "one"
    commit = dataclasses.replace(offset_commit_request(7), group_instance_id="one")
    assert committed_asked(7, commit).request.group_instance_id == "one"


@pytest.mark.parametrize("version", [0, 2, 5])
def test_join_group_answers_the_leader_with_the_members(version: int) -> None:
    then = asked(ApiKey.JOIN_GROUP, version, join_group_request(version), JoinGroupRequest).then
    joined = JoinGroupResponse(
        generation_id=3,
        protocol_type="consumer",
        protocol_name="range",
        leader_id=MEMBER,
        member_id=MEMBER,
        members=(
            JoinGroupMemberInfo(member_id=MEMBER, metadata=b"leader-sub"),
            JoinGroupMemberInfo(member_id="other", metadata=b"other-sub"),
        ),
    )
    body = answer(then(joined), ApiKey.JOIN_GROUP, version)
    assert (body.error_code, body.generation_id, body.protocol_name) == (0, 3, "range")
    assert (body.leader, body.member_id) == (MEMBER, MEMBER)
    assert [(m.member_id, m.metadata) for m in body.members] == [
        (MEMBER, b"leader-sub"),
        ("other", b"other-sub"),
    ]
    if version >= 2:
        assert body.throttle_time.total_seconds() == 0


@pytest.mark.parametrize("version", [4, 5])
def test_join_group_member_id_required_hands_out_the_id(version: int) -> None:
    then = asked(ApiKey.JOIN_GROUP, version, join_group_request(version), JoinGroupRequest).then
    required = JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=MEMBER)
    body = answer(then(required), ApiKey.JOIN_GROUP, version)
    assert (body.error_code, body.member_id) == (ErrorCode.MEMBER_ID_REQUIRED, MEMBER)
    assert (body.generation_id, body.protocol_name, body.leader, body.members) == (-1, "", "", ())


# -- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3])
def test_sync_group_carries_the_leaders_assignments_and_answers_the_members(version: int) -> None:
    step = asked(ApiKey.SYNC_GROUP, version, sync_group_request(version), SyncGroupRequest)
    assert step.request == SyncGroupRequest(
        group_id=GROUP,
        generation_id=3,
        member_id=MEMBER,
        assignments=(SyncGroupAssignment(member_id=MEMBER, assignment=b"\x00\x01assigned"),),
    )
    body = answer(step.then(SyncGroupResponse(assignment=b"yours")), ApiKey.SYNC_GROUP, version)
    assert (body.error_code, body.assignment) == (ErrorCode.NONE, b"yours")


def test_sync_group_of_a_follower_carries_no_assignment() -> None:
    body = sync_group_request(3, leader=False)
    assert asked(ApiKey.SYNC_GROUP, 3, body, SyncGroupRequest).request.assignments == ()


@pytest.mark.parametrize("version", [0, 3])
def test_heartbeat_round_trip(version: int) -> None:
    step = asked(
        ApiKey.HEARTBEAT, version, sample_request(ApiKey.HEARTBEAT, version), HeartbeatRequest
    )
    assert step.request == HeartbeatRequest(group_id=GROUP, generation_id=3, member_id=MEMBER)
    rebalancing = HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    body = answer(step.then(rebalancing), ApiKey.HEARTBEAT, version)
    assert body.error_code == ErrorCode.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("version", [0, 2])
def test_leave_group_before_v3_is_one_member_whose_error_is_the_requests(version: int) -> None:
    step = asked(ApiKey.LEAVE_GROUP, version, leave_group_request(version), LeaveGroupRequest)
    assert step.request == LeaveGroupRequest(group_id=GROUP, member_ids=(MEMBER,))
    unknown = LeaveGroupResponse(
        members=(LeaveGroupMemberResult(member_id=MEMBER, error_code=ErrorCode.UNKNOWN_MEMBER_ID),)
    )
    assert answer(step.then(unknown), ApiKey.LEAVE_GROUP, version).error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    left = LeaveGroupResponse(members=(LeaveGroupMemberResult(member_id=MEMBER),))
    assert answer(step.then(left), ApiKey.LEAVE_GROUP, version).error_code == ErrorCode.NONE


def test_leave_group_v3_answers_each_member() -> None:
    body = leave_group_request(3, MEMBER, "gone")
    step = asked(ApiKey.LEAVE_GROUP, 3, body, LeaveGroupRequest)
    assert step.request == LeaveGroupRequest(
        group_id=GROUP,
        members=(LeaveGroupMember(member_id=MEMBER), LeaveGroupMember(member_id="gone")),
    )
    response = LeaveGroupResponse(
        members=(
            LeaveGroupMemberResult(member_id=MEMBER),
            LeaveGroupMemberResult(member_id="gone", error_code=ErrorCode.UNKNOWN_MEMBER_ID),
        )
    )
    read = answer(step.then(response), ApiKey.LEAVE_GROUP, 3)
    assert read.error_code == ErrorCode.NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in read.members] == [
        (MEMBER, None, ErrorCode.NONE),
        ("gone", None, ErrorCode.UNKNOWN_MEMBER_ID),
    ]


def test_leave_group_v3_by_instance_id_answers_under_the_identity_given() -> None:
    schema_body = leave_group_request(3, "", MEMBER)
    identities = (
        dataclasses.replace(schema_body.members[0], group_instance_id="one"),
        dataclasses.replace(schema_body.members[1], group_instance_id="two"),
    )
    body = dataclasses.replace(schema_body, members=identities)
    step = asked(ApiKey.LEAVE_GROUP, 3, body, LeaveGroupRequest)
    assert step.request.members == (
        LeaveGroupMember(member_id="", group_instance_id="one"),
        LeaveGroupMember(member_id=MEMBER, group_instance_id="two"),
    )
    response = LeaveGroupResponse(
        members=(
            LeaveGroupMemberResult(member_id="", group_instance_id="one"),
            LeaveGroupMemberResult(
                member_id=MEMBER,
                group_instance_id="two",
                error_code=ErrorCode.FENCED_INSTANCE_ID,
            ),
        )
    )
    read = answer(step.then(response), ApiKey.LEAVE_GROUP, 3)
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in read.members] == [
        ("", "one", ErrorCode.NONE),
        (MEMBER, "two", ErrorCode.FENCED_INSTANCE_ID),
    ]


# -- OffsetCommit and OffsetFetch ----------------------------------------------------------------


def topic_with(*partitions: int, name: str = TOPIC) -> TopicMetadata:
    return TopicMetadata(
        topic=name, partitions=tuple(PartitionMetadata(partition=p, leader=1) for p in partitions)
    )


def committed_asked(
    version: int, body: Any, known: Response | None = None
) -> Asked[OffsetCommitRequest]:
    """An OffsetCommit: first its topics are looked up in the metadata cache (Kafka's
    KafkaApis checks each partition is known), then the known partitions go to the
    coordinator. `known` answers the lookup (by default: TOPIC with partitions 0 and 1)."""
    step = handle(apis(), ApiKey.OFFSET_COMMIT, version, body)
    assert isinstance(step, Ask), step
    assert step.address == REPLICA_MANAGER
    assert step.request == MetadataRequest(topics=(TOPIC,))
    return ask(step.then(known or metadata(topic_with(0, 1))), OffsetCommitRequest)


def commit_errors(body: Any) -> list[tuple[str, int, int]]:
    return [(t.name, p.partition_index, p.error_code) for t in body.topics for p in t.partitions]


@pytest.mark.parametrize("version", [0, 2, 7])
def test_offset_commit_to_a_topic_that_does_not_exist_is_unknown_topic_or_partition(
    version: int,
) -> None:
    step = handle(apis(), ApiKey.OFFSET_COMMIT, version, offset_commit_request(version))
    assert isinstance(step, Ask) and step.address == REPLICA_MANAGER
    missing = TopicMetadata(topic=TOPIC, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    body = answer(step.then(metadata(missing)), ApiKey.OFFSET_COMMIT, version)  # nothing asked
    assert commit_errors(body) == [
        (TOPIC, 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_offset_commit_beyond_a_topics_partitions_commits_the_rest() -> None:
    step = committed_asked(7, offset_commit_request(7), metadata(topic_with(0)))
    assert [(p.topic, p.partition) for p in step.request.partitions] == [(TOPIC, 0)]
    response = OffsetCommitResponse(partitions=(OffsetCommitPartitionResult(topic=TOPIC),))
    assert commit_errors(answer(step.then(response), ApiKey.OFFSET_COMMIT, 7)) == [
        (TOPIC, 0, ErrorCode.NONE),
        (TOPIC, 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


def test_offset_commit_without_metadata_answers_each_partition_the_failure() -> None:
    step = handle(apis(), ApiKey.OFFSET_COMMIT, 7, offset_commit_request(7))
    assert isinstance(step, Ask)
    failed = step.then(ErrorResponse(error_code=ErrorCode.BROKER_NOT_AVAILABLE))
    assert commit_errors(answer(failed, ApiKey.OFFSET_COMMIT, 7)) == [
        (TOPIC, 0, ErrorCode.BROKER_NOT_AVAILABLE),
        (TOPIC, 1, ErrorCode.BROKER_NOT_AVAILABLE),
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 5, 6, 7])
def test_offset_commit_is_translated_per_partition(version: int) -> None:
    request = committed_asked(version, offset_commit_request(version)).request
    epoch = 4 if version >= 6 else -1  # committed_leader_epoch from v6
    stamp = COMMIT_TIME_MS if version == 1 else -1  # commit_timestamp: v1 only
    assert request == OffsetCommitRequest(
        # v0 has no generation nor member: a commit outside group management
        group_id=GROUP,
        generation_id=3 if version >= 1 else -1,
        member_id=MEMBER if version >= 1 else "",
        partitions=(
            OffsetCommitPartition(
                topic=TOPIC,
                partition=0,
                offset=42,
                leader_epoch=epoch,
                metadata="meta",
                commit_timestamp_ms=stamp,
            ),
            OffsetCommitPartition(
                topic=TOPIC, partition=1, offset=7, leader_epoch=epoch, metadata=None
            ),
        ),
    )


@pytest.mark.parametrize("version", [0, 1, 2, 7])
def test_offset_commit_answers_each_partition_and_one_left_out_is_an_unknown_error(
    version: int,
) -> None:
    then = committed_asked(version, offset_commit_request(version)).then
    response = OffsetCommitResponse(
        partitions=(
            OffsetCommitPartitionResult(
                topic=TOPIC, partition=0, error_code=ErrorCode.OFFSET_METADATA_TOO_LARGE
            ),
        )
    )
    body = answer(then(response), ApiKey.OFFSET_COMMIT, version)
    assert [
        (t.name, p.partition_index, p.error_code) for t in body.topics for p in t.partitions
    ] == [
        (TOPIC, 0, ErrorCode.OFFSET_METADATA_TOO_LARGE),
        (TOPIC, 1, ErrorCode.UNKNOWN_SERVER_ERROR),
    ]


FETCHED = OffsetFetchResponse(
    partitions=(
        OffsetFetchPartitionResult(
            topic=TOPIC, partition=0, offset=42, leader_epoch=4, metadata="m"
        ),
        OffsetFetchPartitionResult(topic=TOPIC, partition=1),  # nothing committed
    )
)


def fetched_partitions(body: Any) -> list[tuple[str, int, int, str | None, int]]:
    return [
        (t.name, p.partition_index, p.committed_offset, p.metadata, p.error_code)
        for t in body.topics
        for p in t.partitions
    ]


@pytest.mark.parametrize("version", [0, 1, 2, 5])
def test_offset_fetch_of_named_partitions(version: int) -> None:
    step = asked(ApiKey.OFFSET_FETCH, version, offset_fetch_request(version), OffsetFetchRequest)
    assert step.request == OffsetFetchRequest(
        group_id=GROUP,
        partitions=(
            OffsetFetchPartitionRequest(topic=TOPIC, partition=0),
            OffsetFetchPartitionRequest(topic=TOPIC, partition=1),
        ),
        all_partitions=False,
        require_stable=False,
    )
    body = answer(step.then(FETCHED), ApiKey.OFFSET_FETCH, version)
    assert fetched_partitions(body) == [(TOPIC, 0, 42, "m", 0), (TOPIC, 1, -1, "", 0)]
    if version >= 2:
        assert body.error_code == ErrorCode.NONE
    if version >= 5:
        assert [p.committed_leader_epoch for p in body.topics[0].partitions] == [4, -1]


@pytest.mark.parametrize("version", [2, 5])
def test_offset_fetch_of_null_topics_asks_for_every_partition(version: int) -> None:
    body = offset_fetch_request(version, every=True)
    step = asked(ApiKey.OFFSET_FETCH, version, body, OffsetFetchRequest)
    assert step.request == OffsetFetchRequest(group_id=GROUP, all_partitions=True)
    every = OffsetFetchResponse(
        partitions=(
            OffsetFetchPartitionResult(topic="a", partition=0, offset=1),
            OffsetFetchPartitionResult(topic="b", partition=3, offset=2),
            OffsetFetchPartitionResult(topic="a", partition=1, offset=3),
        )
    )
    read = answer(step.then(every), ApiKey.OFFSET_FETCH, version)
    assert [
        (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions])
        for t in read.topics
    ] == [
        ("a", [(0, 1), (1, 3)]),
        ("b", [(3, 2)]),
    ]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_fetch_v0_v1_have_no_group_error_so_each_partition_carries_it(version: int) -> None:
    then = asked(
        ApiKey.OFFSET_FETCH, version, offset_fetch_request(version), OffsetFetchRequest
    ).then
    loading = OffsetFetchResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    body = answer(then(loading), ApiKey.OFFSET_FETCH, version)
    assert fetched_partitions(body) == [
        (TOPIC, 0, -1, "", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        (TOPIC, 1, -1, "", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
    ]


@pytest.mark.parametrize("version", [2, 5])
def test_offset_fetch_v2_and_later_say_a_group_error_once(version: int) -> None:
    then = asked(
        ApiKey.OFFSET_FETCH, version, offset_fetch_request(version), OffsetFetchRequest
    ).then
    body = answer(
        then(OffsetFetchResponse(error_code=ErrorCode.NOT_COORDINATOR)),
        ApiKey.OFFSET_FETCH,
        version,
    )
    assert (body.error_code, body.topics) == (ErrorCode.NOT_COORDINATOR, ())


def test_offset_fetch_a_partition_left_out_is_an_unknown_error() -> None:
    then = asked(ApiKey.OFFSET_FETCH, 5, offset_fetch_request(5), OffsetFetchRequest).then
    body = answer(
        then(dataclasses.replace(FETCHED, partitions=FETCHED.partitions[:1])),
        ApiKey.OFFSET_FETCH,
        5,
    )
    assert fetched_partitions(body)[1] == (TOPIC, 1, -1, "", ErrorCode.UNKNOWN_SERVER_ERROR)


# -- DescribeGroups, ListGroups, DeleteGroups ----------------------------------------------------

STABLE = DescribedGroup(
    group_id=GROUP,
    state="Stable",
    protocol_type="consumer",
    protocol="range",
    members=(
        DescribedMember(
            member_id=MEMBER,
            group_instance_id="one",
            client_id="rdkafka",
            client_host="/10.1.1.1",
            metadata=b"sub",
            assignment=b"assigned",
        ),
    ),
)


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_describe_groups_round_trip(version: int) -> None:
    step = asked(
        ApiKey.DESCRIBE_GROUPS, version, describe_groups_request(version), DescribeGroupsRequest
    )
    assert step.request == DescribeGroupsRequest(group_ids=(GROUP, "another"))
    response = DescribeGroupsResponse(
        groups=(DescribedGroup(group_id="another", state="Dead"), STABLE)  # any order
    )
    body = answer(step.then(response), ApiKey.DESCRIBE_GROUPS, version)
    described = [
        (g.error_code, g.group_id, g.group_state, g.protocol_type, g.protocol_data)
        for g in body.groups
    ]
    assert described == [(0, GROUP, "Stable", "consumer", "range"), (0, "another", "Dead", "", "")]
    (member,) = body.groups[0].members
    assert (member.member_id, member.client_id, member.client_host) == (
        MEMBER,
        "rdkafka",
        "/10.1.1.1",
    )
    assert (member.member_metadata, member.member_assignment) == (b"sub", b"assigned")
    if version >= 3:  # asked for (include_authorized_operations): there is no authorizer
        assert [g.authorized_operations for g in body.groups] == [OMITTED, OMITTED]
    if version >= 4:  # static membership (KIP-345)
        assert member.group_instance_id == "one"


@pytest.mark.parametrize("version", [0, 3, 4])
def test_list_groups_round_trip(version: int) -> None:
    step = asked(
        ApiKey.LIST_GROUPS, version, sample_request(ApiKey.LIST_GROUPS, version), ListGroupsRequest
    )
    # v4's states filter (KIP-518) goes to the coordinator
    assert step.request == ListGroupsRequest(
        states_filter=("Stable", "Empty") if version >= 4 else ()
    )
    response = ListGroupsResponse(
        groups=(
            ListedGroup(group_id=GROUP, protocol_type="consumer", state="Stable"),
            ListedGroup(group_id="another", protocol_type="", state="Empty"),
        )
    )
    body = answer(step.then(response), ApiKey.LIST_GROUPS, version)
    assert body.error_code == ErrorCode.NONE
    assert [(g.group_id, g.protocol_type) for g in body.groups] == [
        (GROUP, "consumer"),
        ("another", ""),
    ]
    if version >= 4:
        assert [g.group_state for g in body.groups] == ["Stable", "Empty"]


@pytest.mark.parametrize("version", [0, 2])
def test_delete_groups_answers_each_group_in_request_order(version: int) -> None:
    step = asked(
        ApiKey.DELETE_GROUPS,
        version,
        sample_request(ApiKey.DELETE_GROUPS, version),
        DeleteGroupsRequest,
    )
    assert step.request == DeleteGroupsRequest(group_ids=(GROUP, "another"))
    response = DeleteGroupsResponse(
        groups=(
            DeletedGroup(group_id="another", error_code=ErrorCode.NON_EMPTY_GROUP),
            DeletedGroup(group_id=GROUP),
        )
    )
    body = answer(step.then(response), ApiKey.DELETE_GROUPS, version)
    assert [(r.group_id, r.error_code) for r in body.results] == [
        (GROUP, ErrorCode.NONE),
        ("another", ErrorCode.NON_EMPTY_GROUP),
    ]


def test_delete_groups_a_group_left_out_is_an_unknown_error() -> None:
    then = asked(
        ApiKey.DELETE_GROUPS, 2, sample_request(ApiKey.DELETE_GROUPS, 2), DeleteGroupsRequest
    ).then
    body = answer(
        then(DeleteGroupsResponse(groups=(DeletedGroup(group_id=GROUP),))), ApiKey.DELETE_GROUPS, 2
    )
    assert [(r.group_id, r.error_code) for r in body.results] == [
        (GROUP, ErrorCode.NONE),
        ("another", ErrorCode.UNKNOWN_SERVER_ERROR),
    ]


# -- failures, in every shape --------------------------------------------------------------------


def error_codes(api: ApiKey, version: int, body: Any) -> list[int]:
    """Every error code a response carries where a failed request puts its code."""
    if api is ApiKey.OFFSET_COMMIT:
        return [p.error_code for t in body.topics for p in t.partitions]
    if api is ApiKey.OFFSET_FETCH and version < 2:
        return [p.error_code for t in body.topics for p in t.partitions]
    if api is ApiKey.DESCRIBE_GROUPS:
        return [g.error_code for g in body.groups]
    if api is ApiKey.DELETE_GROUPS:
        return [r.error_code for r in body.results]
    return [body.error_code]


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (
            ErrorResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE),
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ),
        (ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT), ErrorCode.REQUEST_TIMED_OUT),
        (MetadataResponse(), ErrorCode.UNKNOWN_SERVER_ERROR),  # not the answer asked for
    ],
    ids=["coordinator-stopping", "timed-out", "unexpected-answer"],
)
@pytest.mark.parametrize("case", EDGES, ids=lambda c: f"{c[0].name}-v{c[1]}")
def test_a_failed_ask_answers_its_code_in_every_shape(
    case: tuple[ApiKey, int], failure: Response, code: ErrorCode
) -> None:
    api, version = case
    sample = sample_request(api, version)
    step = handle(apis(), api, version, sample)
    if api is ApiKey.OFFSET_COMMIT:  # the metadata cache knows every partition: on it goes
        assert isinstance(step, Ask) and step.address == REPLICA_MANAGER
        known = (
            topic_with(*(int(p.partition_index) for p in t.partitions), name=t.name)
            for t in sample.topics
        )
        step = step.then(metadata(*known))
    assert isinstance(step, Ask) and step.address == COORDINATOR
    body = answer(step.then(failure), api, version)
    codes = error_codes(api, version, body)
    assert codes and set(codes) == {code}
    if api is ApiKey.JOIN_GROUP:
        assert (body.generation_id, body.protocol_name, body.leader, body.member_id) == (
            -1,
            "",
            "",
            "",
        )
        assert body.members == ()
    if api is ApiKey.SYNC_GROUP:
        assert body.assignment == b""
    if api in (ApiKey.LEAVE_GROUP, ApiKey.LIST_GROUPS) and version >= 3:
        assert (body.members if api is ApiKey.LEAVE_GROUP else body.groups) == ()
    if api is ApiKey.OFFSET_FETCH and version >= 2:
        assert body.topics == ()
