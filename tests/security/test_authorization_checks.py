"""Kafka 2.8's per-API authorization in `KafkaApis`, without threads: requests from `User:alice`
at 10.1.2.3 go through `KafkaApis.handle` with a fake authorizer (a set of allowed
(principal, operation, resource type, name)), hand-made actor answers drive each step, and
every Answer is encoded and read back as a client reads it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import pytest

from kafkactor.messages import ErrorCode, Request
from kafkactor.messages.group import (
    DeletedGroup,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
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
)
from kafkactor.messages.replication import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
)
from kafkactor.messages.transaction import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    TransactionDescription,
    TxnPartition,
)
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.authorization_checks import CHECKS
from kafkactor.network.kafka_apis import (
    Admin,
    Answer,
    Ask,
    Close,
    KafkaApis,
    KafkaApisConfig,
    Step,
)
from kafkactor.network.request_channel import RequestHeader
from kafkactor.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.storage import Record, build_batch
from tests.network.test_kafka_apis import (
    LED,
    FakeAdmin,
    FakeProducerIds,
    answer,
    metadata_of,
    unknown,
)
from tests.network.wire import (
    TOPIC,
    add_partitions_to_txn_request,
    batch,
    delete_groups_request,
    describe_cluster_request,
    describe_configs_request,
    describe_groups_request,
    fetch_request,
    init_transactional_producer_id_request,
    list_groups_request,
    list_transactions_request,
    make,
    metadata_request,
    nested,
    offset_commit_request,
    offset_fetch_request,
    produce_request,
    request_schema,
    sample_request,
    served_range,
)

pytestmark = pytest.mark.timeout(60)

BROKER: Final = 1
ALICE: Final = KafkaPrincipal("User", "alice")
HOST: Final = "10.1.2.3"
SECRET: Final = "secret"  # a topic alice is refused
R = TypeVar("R", bound=Request)

Op = AclOperation
Res = ResourceType
Grant = tuple[AclOperation, ResourceType, str]


@dataclass
class FakeAuthorizer:
    """Allows alice what `grants` names; records every question."""

    grants: set[Grant] = field(default_factory=set)
    asked: list[tuple[str, str, Grant]] = field(default_factory=list)

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        self.asked.append(
            (f"{principal.principal_type}:{principal.name}", host, (operation, resource_type, name))
        )
        return principal == ALICE and (operation, resource_type, name) in self.grants


@dataclass
class AllowAll:
    def authorize(self, *args: Any, **kwargs: Any) -> bool:
        return True


@dataclass
class TopicWriter(FakeAuthorizer):
    """Also answers `authorize_by_resource_type`: WRITE on some topic (KIP-679)."""

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        return (operation, resource_type) == (Op.WRITE, Res.TOPIC)


def apis(authorizer: Any = None, *, auto_create: bool = True) -> KafkaApis:
    return KafkaApis(
        BROKER,
        KafkaApisConfig(
            cluster_id="test-cluster",
            auto_create_topics_enable=auto_create,
            num_partitions=2,
            default_replication_factor=3,
        ),
        admin=FakeAdmin(),
        producer_ids=FakeProducerIds(),
        authorizer=authorizer,
    )


def granting(*grants: Grant, auto_create: bool = True) -> KafkaApis:
    return apis(FakeAuthorizer(set(grants)), auto_create=auto_create)


def handle(kafka_apis: KafkaApis, api: ApiKey, version: int, body: Any) -> Step:
    header = RequestHeader(
        api_key=api,
        api_version=version,
        correlation_id=11,
        client_id="c",
        client_host=HOST,
        principal=ALICE,
    )
    return kafka_apis.handle(header, body)


def asked(step: Step, request_type: type[R]) -> tuple[R, Any]:
    assert isinstance(step, Ask), f"expected an Ask, got {step!r}"
    assert isinstance(step.request, request_type), step.request
    return step.request, step.then


def error_codes(entity: Any) -> set[int]:
    """Every error code in a response body, NONE left out."""
    found: set[int] = set()
    if dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name in ("error_code", "partition_error_code") and int(value):
                found.add(int(value))
            else:
                found |= error_codes(value)
    elif isinstance(entity, tuple):
        for item in entity:
            found |= error_codes(item)
    return found


def by_topic(topics: Iterable[Any], partitions: str = "partitions") -> dict[str, list[Any]]:
    return {t.name if hasattr(t, "name") else t.topic: list(getattr(t, partitions)) for t in topics}


def same(a: Step, b: Step) -> None:
    assert type(a) is type(b), (a, b)
    if isinstance(a, Ask):
        assert isinstance(b, Ask)
        assert (a.address, a.request) == (b.address, b.request)
    elif isinstance(a, Answer):
        assert isinstance(b, Answer)
        assert a.body == b.body
    elif isinstance(a, Close):
        assert isinstance(b, Close)
        assert a.reason == b.reason


def _quota_and_scram_sample(api: int, version: int) -> Any:
    """DescribeClientQuotas, AlterClientQuotas, DescribeUserScramCredentials and
    AlterUserScramCredentials (48-51), which tests/network/wire.py has no sample of."""
    schema = request_schema(api, version)
    if api == 48:
        return make(schema, components=(), strict=False)
    if api == 49:
        entry, entity, op = (nested(schema, n) for n in ("EntryData", "EntityData", "OpData"))
        return make(
            schema,
            entries=(
                entry(
                    entity=(entity(entity_type="user", entity_name="bob"),),
                    ops=(op(key="producer_byte_rate", value=1024.0, remove=False),),
                ),
            ),
            validate_only=False,
        )
    if api == 50:
        return make(schema, users=(nested(schema, "UserName")(name="bob"),))
    deletion = nested(schema, "ScramCredentialDeletion")
    upsertion = nested(schema, "ScramCredentialUpsertion")
    return make(
        schema,
        deletions=(deletion(name="carol", mechanism=1),),
        upsertions=(
            upsertion(name="bob", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p"),
        ),
    )


def sample(api: ApiKey, version: int) -> Any:
    if int(api) in (48, 49, 50, 51):
        return _quota_and_scram_sample(int(api), version)
    return sample_request(api, version)


#: every served API that has a check (the ACL, SCRAM and quota APIs check themselves)
EVERY: Final = [
    (ApiKey(a), v) for a in sorted(CHECKS) if a in SUPPORTED for v in served_range(ApiKey(a))
]


# -- every API, allowed and refused --------------------------------------------------------------


@pytest.mark.parametrize(("api", "version"), EVERY)
def test_everything_allowed_is_served_as_without_an_authorizer(api: ApiKey, version: int) -> None:
    body = sample(api, version)
    same(handle(apis(AllowAll()), api, version, body), handle(apis(), api, version, body))


TXN_REFUSED: Final = {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
TOPIC_REFUSED: Final = {ErrorCode.TOPIC_AUTHORIZATION_FAILED}
GROUP_REFUSED: Final = {ErrorCode.GROUP_AUTHORIZATION_FAILED}
CLUSTER_REFUSED: Final = {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
#: what each API answers at once when nothing is allowed (its sample request)
REFUSED: Final[dict[ApiKey, set[ErrorCode]]] = {
    ApiKey.PRODUCE: TOPIC_REFUSED,
    ApiKey.FETCH: TOPIC_REFUSED,
    ApiKey.LIST_OFFSETS: TOPIC_REFUSED,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: TOPIC_REFUSED,
    ApiKey.DELETE_RECORDS: TOPIC_REFUSED,
    ApiKey.CREATE_TOPICS: TOPIC_REFUSED,
    ApiKey.DELETE_TOPICS: TOPIC_REFUSED,
    ApiKey.CREATE_PARTITIONS: TOPIC_REFUSED,
    ApiKey.DESCRIBE_CONFIGS: TOPIC_REFUSED,
    ApiKey.ALTER_CONFIGS: TOPIC_REFUSED | CLUSTER_REFUSED,  # a topic and a broker
    ApiKey.INCREMENTAL_ALTER_CONFIGS: TOPIC_REFUSED,
    ApiKey.FIND_COORDINATOR: GROUP_REFUSED,
    ApiKey.JOIN_GROUP: GROUP_REFUSED,
    ApiKey.SYNC_GROUP: GROUP_REFUSED,
    ApiKey.HEARTBEAT: GROUP_REFUSED,
    ApiKey.LEAVE_GROUP: GROUP_REFUSED,
    ApiKey.OFFSET_COMMIT: GROUP_REFUSED,
    ApiKey.OFFSET_FETCH: GROUP_REFUSED,
    ApiKey.OFFSET_DELETE: GROUP_REFUSED,
    ApiKey.DESCRIBE_GROUPS: GROUP_REFUSED,
    ApiKey.DELETE_GROUPS: GROUP_REFUSED,
    ApiKey.INIT_PRODUCER_ID: CLUSTER_REFUSED,  # an idempotent producer's
    ApiKey.ADD_PARTITIONS_TO_TXN: TXN_REFUSED,
    ApiKey.ADD_OFFSETS_TO_TXN: TXN_REFUSED,
    ApiKey.END_TXN: TXN_REFUSED,
    ApiKey.TXN_OFFSET_COMMIT: TXN_REFUSED,
    ApiKey.DESCRIBE_TRANSACTIONS: TXN_REFUSED,
    ApiKey.DESCRIBE_LOG_DIRS: CLUSTER_REFUSED,
    ApiKey.ELECT_LEADERS: CLUSTER_REFUSED,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: CLUSTER_REFUSED,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: CLUSTER_REFUSED,
    ApiKey.LEADER_AND_ISR: CLUSTER_REFUSED,
    ApiKey.STOP_REPLICA: CLUSTER_REFUSED,
    ApiKey.UPDATE_METADATA: CLUSTER_REFUSED,
    ApiKey.CONTROLLED_SHUTDOWN: CLUSTER_REFUSED,
    ApiKey.WRITE_TXN_MARKERS: CLUSTER_REFUSED,
}


@pytest.mark.parametrize(
    ("api", "version"), [(a, v) for a, v in EVERY if a in REFUSED or int(a) in (48, 49, 50, 51)]
)
def test_nothing_allowed_is_refused_at_once_with_kafkas_error(api: ApiKey, version: int) -> None:
    authorizer = FakeAuthorizer()
    step = handle(apis(authorizer), api, version, sample(api, version))
    body = answer(step, api, version)
    expected = REFUSED.get(api, CLUSTER_REFUSED)  # the quota and SCRAM APIs: the cluster's
    if api == ApiKey.DESCRIBE_LOG_DIRS and version < 3:
        expected = set()  # Kafka 2.8: no log dirs, no error field before v3
        assert body.results == ()
    assert error_codes(body) == expected
    assert authorizer.asked and all(a[:2] == ("User:alice", HOST) for a in authorizer.asked)


# -- Produce -------------------------------------------------------------------------------------


def two_topic_produce(version: int, *, acks: int = -1) -> Any:
    body = produce_request(version, batch(b"v"), acks=acks)
    other = produce_request(version, batch(b"w"), acks=acks, topic=SECRET, partition=1)
    return dataclasses.replace(body, topic_data=body.topic_data + other.topic_data)


@pytest.mark.parametrize("version", [3, 8])
def test_produce_appends_the_authorized_topic_and_refuses_the_other(version: int) -> None:
    step = handle(
        granting((Op.WRITE, Res.TOPIC, TOPIC)), ApiKey.PRODUCE, version, two_topic_produce(version)
    )
    request, then = asked(step, ProduceRequest)
    assert [(p.topic, p.partition) for p in request.partitions] == [(TOPIC, 0)]
    done = then(
        ProduceResponse(
            partitions=(ProducePartitionResult(topic=TOPIC, partition=0, base_offset=7),)
        )
    )
    topics = by_topic(answer(done, ApiKey.PRODUCE, version).responses, "partition_responses")
    assert [(p.error_code, p.base_offset) for p in topics[TOPIC]] == [(ErrorCode.NONE, 7)]
    assert [(p.index, p.error_code, p.base_offset) for p in topics[SECRET]] == [
        (1, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
    ]


def test_an_acks_0_produce_with_a_refused_topic_appends_the_rest_then_closes() -> None:
    step = handle(
        granting((Op.WRITE, Res.TOPIC, TOPIC)), ApiKey.PRODUCE, 8, two_topic_produce(8, acks=0)
    )
    request, then = asked(step, ProduceRequest)
    assert [p.topic for p in request.partitions] == [TOPIC]
    closed = then(ProduceResponse(partitions=(ProducePartitionResult(topic=TOPIC, partition=0),)))
    assert isinstance(closed, Close)
    assert "TOPIC_AUTHORIZATION_FAILED" in closed.reason
    nothing_allowed = handle(granting(), ApiKey.PRODUCE, 8, two_topic_produce(8, acks=0))
    assert isinstance(nothing_allowed, Close)


def test_transactional_records_need_write_on_the_transactional_id() -> None:
    records = build_batch(
        [Record(key=None, value=b"t", timestamp_ms=1_000)],
        0,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    body = produce_request(8, records, transactional_id="tx")
    step = handle(granting((Op.WRITE, Res.TOPIC, TOPIC)), ApiKey.PRODUCE, 8, body)
    assert error_codes(answer(step, ApiKey.PRODUCE, 8)) == TXN_REFUSED
    allowed = granting((Op.WRITE, Res.TOPIC, TOPIC), (Op.WRITE, Res.TRANSACTIONAL_ID, "tx"))
    asked(handle(allowed, ApiKey.PRODUCE, 8, body), ProduceRequest)


# -- Fetch -------------------------------------------------------------------------------------


def test_a_follower_fetch_needs_cluster_action() -> None:
    body = fetch_request(11, replica_id=2)
    refused = answer(
        handle(granting((Op.READ, Res.TOPIC, TOPIC)), ApiKey.FETCH, 11, body), ApiKey.FETCH, 11
    )
    assert refused.error_code == ErrorCode.NONE
    assert [p.error_code for p in refused.responses[0].partitions] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    ]
    asked(
        handle(granting((Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)), ApiKey.FETCH, 11, body),
        FetchRequest,
    )


def test_a_consumer_fetch_reads_the_topics_it_may_read() -> None:
    body = fetch_request(11)
    secret = fetch_request(11, topic=SECRET)
    body = dataclasses.replace(body, topics=body.topics + secret.topics)
    step = handle(granting((Op.READ, Res.TOPIC, TOPIC)), ApiKey.FETCH, 11, body)
    request, then = asked(step, FetchRequest)
    assert [p.topic for p in request.partitions] == [TOPIC]
    done = answer(
        then(FetchResponse(partitions=(FetchPartitionData(topic=TOPIC, high_watermark=3),))),
        ApiKey.FETCH,
        11,
    )
    assert [
        (t.topic, t.partitions[0].error_code, t.partitions[0].high_watermark)
        for t in done.responses
    ] == [
        (TOPIC, ErrorCode.NONE, 3),
        (SECRET, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1),
    ]


# -- Metadata ------------------------------------------------------------------------------------


def hidden_secret() -> Any:
    return dataclasses.replace(LED, topic=SECRET)


@pytest.mark.parametrize("version", [0, 1, 9, 12])
def test_metadata_of_every_topic_leaves_out_those_alice_may_not_describe(version: int) -> None:
    step = handle(
        granting((Op.DESCRIBE, Res.TOPIC, TOPIC)),
        ApiKey.METADATA,
        version,
        metadata_request(version, None if version else []),
    )
    _, then = asked(step, MetadataRequest)
    body = answer(then(metadata_of(LED, hidden_secret())), ApiKey.METADATA, version)
    assert [t.name for t in body.topics] == [TOPIC]


@pytest.mark.parametrize("version", [1, 4, 12])
def test_metadata_naming_a_topic_alice_may_not_describe_answers_it_refused(version: int) -> None:
    step = handle(
        granting((Op.DESCRIBE, Res.TOPIC, TOPIC)),
        ApiKey.METADATA,
        version,
        metadata_request(version, [TOPIC, SECRET]),
    )
    request, then = asked(step, MetadataRequest)
    assert request.topics == (TOPIC,)  # never looked up: its existence is not disclosed
    body = answer(then(metadata_of(LED)), ApiKey.METADATA, version)
    assert [(t.name, t.error_code, len(t.partitions)) for t in body.topics] == [
        (TOPIC, ErrorCode.NONE, 1),
        (SECRET, ErrorCode.TOPIC_AUTHORIZATION_FAILED, 0),
    ]


def test_auto_creation_needs_create_on_the_cluster_or_the_topic() -> None:
    describe = (Op.DESCRIBE, Res.TOPIC, "fresh")
    for grants, creates in [
        ((describe,), False),
        ((describe, (Op.CREATE, Res.TOPIC, "fresh")), True),
        ((describe, (Op.CREATE, Res.CLUSTER, CLUSTER_NAME)), True),
    ]:
        step = handle(granting(*grants), ApiKey.METADATA, 9, metadata_request(9, ["fresh"]))
        _, then = asked(step, MetadataRequest)
        after = then(metadata_of(unknown("fresh")))
        assert isinstance(after, Admin) is creates, grants
        if not creates:
            body = answer(after, ApiKey.METADATA, 9)
            assert [(t.name, t.error_code) for t in body.topics] == [
                ("fresh", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            ]
    # auto-creation off: an unknown topic stays unknown, whatever alice may create
    off = granting(describe, auto_create=False)
    _, then = asked(
        handle(off, ApiKey.METADATA, 9, metadata_request(9, ["fresh"])), MetadataRequest
    )
    body = answer(then(metadata_of(unknown("fresh"))), ApiKey.METADATA, 9)
    assert body.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_answers_the_authorized_operations_asked_for() -> None:
    schema = request_schema(ApiKey.METADATA, 8)
    topic = nested(schema, "MetadataRequestTopic")
    body = make(
        schema,
        topics=(topic(name=TOPIC),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    grants = [(Op.DESCRIBE, Res.TOPIC, TOPIC), (Op.READ, Res.TOPIC, TOPIC)]
    for cluster, expected in [
        ((), 0),
        (
            ((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME), (Op.ALTER, Res.CLUSTER, CLUSTER_NAME)),
            (1 << 8) | (1 << 7),
        ),
    ]:
        _, then = asked(
            handle(granting(*grants, *cluster), ApiKey.METADATA, 8, body), MetadataRequest
        )
        answered = answer(then(metadata_of(LED)), ApiKey.METADATA, 8)
        assert answered.cluster_authorized_operations == expected
        assert answered.topics[0].topic_authorized_operations == (1 << 8) | (1 << 3)


def test_describe_cluster_answers_its_authorized_operations() -> None:
    body = describe_cluster_request(0, include_authorized_operations=True)
    with_describe = handle(
        granting((Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)), ApiKey.DESCRIBE_CLUSTER, 0, body
    )
    without = handle(granting(), ApiKey.DESCRIBE_CLUSTER, 0, body)
    for step, expected in [(with_describe, 1 << 8), (without, 0)]:
        _, then = asked(step, MetadataRequest)
        assert (
            answer(then(metadata_of(LED)), ApiKey.DESCRIBE_CLUSTER, 0).cluster_authorized_operations
            == expected
        )


# -- groups --------------------------------------------------------------------------------------


def test_list_groups_shows_the_groups_alice_may_describe_or_all_with_describe_on_the_cluster() -> (
    None
):
    groups = ListGroupsResponse(
        groups=(ListedGroup(group_id="mine"), ListedGroup(group_id="theirs"))
    )
    for grants, listed in [
        ([(Op.DESCRIBE, Res.GROUP, "mine")], ["mine"]),
        ([(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)], ["mine", "theirs"]),
    ]:
        _, then = asked(
            handle(granting(*grants), ApiKey.LIST_GROUPS, 4, list_groups_request(4)),
            ListGroupsRequest,
        )
        assert [g.group_id for g in answer(then(groups), ApiKey.LIST_GROUPS, 4).groups] == listed


def test_describe_and_delete_groups_refuse_each_group_on_its_own() -> None:
    kafka_apis = granting((Op.DESCRIBE, Res.GROUP, "another"), (Op.DELETE, Res.GROUP, "another"))
    request, then = asked(
        handle(kafka_apis, ApiKey.DESCRIBE_GROUPS, 5, describe_groups_request(5)),
        DescribeGroupsRequest,
    )
    assert request.group_ids == ("another",)
    body = answer(
        then(DescribeGroupsResponse(groups=(DescribedGroup(group_id="another", state="Empty"),))),
        ApiKey.DESCRIBE_GROUPS,
        5,
    )
    assert [(g.group_id, g.error_code, g.authorized_operations) for g in body.groups] == [
        ("a-group", ErrorCode.GROUP_AUTHORIZATION_FAILED, -2147483648),
        ("another", ErrorCode.NONE, (1 << 8) | (1 << 6)),  # DESCRIBE and DELETE (KIP-430)
    ]
    request2, then2 = asked(
        handle(kafka_apis, ApiKey.DELETE_GROUPS, 2, delete_groups_request(2)), DeleteGroupsRequest
    )
    assert request2.group_ids == ("another",)
    body2 = answer(
        then2(DeleteGroupsResponse(groups=(DeletedGroup(group_id="another"),))),
        ApiKey.DELETE_GROUPS,
        2,
    )
    assert [(r.group_id, r.error_code) for r in body2.results] == [
        ("a-group", ErrorCode.GROUP_AUTHORIZATION_FAILED),
        ("another", ErrorCode.NONE),
    ]


def test_offset_commit_refuses_the_topics_alice_may_not_read() -> None:
    body = offset_commit_request(7)
    secret = dataclasses.replace(body.topics[0], name=SECRET)
    body = dataclasses.replace(body, topics=(*body.topics, secret))
    step = handle(
        granting((Op.READ, Res.GROUP, "a-group"), (Op.READ, Res.TOPIC, TOPIC)),
        ApiKey.OFFSET_COMMIT,
        7,
        body,
    )
    # the handler first checks its topics exist
    _, checked = asked(step, MetadataRequest)
    two = dataclasses.replace(
        LED, partitions=(LED.partitions[0], dataclasses.replace(LED.partitions[0], partition=1))
    )
    request, then = asked(checked(metadata_of(two)), OffsetCommitRequest)
    assert {p.topic for p in request.partitions} == {TOPIC}
    done = then(
        OffsetCommitResponse(
            partitions=tuple(
                OffsetCommitPartitionResult(topic=TOPIC, partition=p.partition)
                for p in request.partitions
            )
        )
    )
    topics = by_topic(answer(done, ApiKey.OFFSET_COMMIT, 7).topics)
    assert {p.error_code for p in topics[TOPIC]} == {ErrorCode.NONE}
    assert {p.error_code for p in topics[SECRET]} == {ErrorCode.TOPIC_AUTHORIZATION_FAILED}


@pytest.mark.parametrize("version", [1, 7])
def test_offset_fetch_answers_unauthorized_topics_without_their_offsets(version: int) -> None:
    body = offset_fetch_request(version)
    secret = dataclasses.replace(body.topics[0], name=SECRET)
    body = dataclasses.replace(body, topics=(*body.topics, secret))
    step = handle(
        granting((Op.DESCRIBE, Res.GROUP, "a-group"), (Op.DESCRIBE, Res.TOPIC, TOPIC)),
        ApiKey.OFFSET_FETCH,
        version,
        body,
    )
    request, then = asked(step, OffsetFetchRequest)
    assert {p.topic for p in request.partitions} == {TOPIC}
    results = tuple(
        OffsetFetchPartitionResult(topic=TOPIC, partition=p.partition, offset=40)
        for p in request.partitions
    )
    topics = by_topic(
        answer(then(OffsetFetchResponse(partitions=results)), ApiKey.OFFSET_FETCH, version).topics
    )
    assert [(p.committed_offset, p.error_code) for p in topics[TOPIC]] == [(40, ErrorCode.NONE)] * 2
    assert [(p.committed_offset, p.error_code) for p in topics[SECRET]] == [
        (-1, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ] * 2


def test_offset_fetch_of_every_partition_leaves_out_the_topics_alice_may_not_describe() -> None:
    step = handle(
        granting((Op.DESCRIBE, Res.GROUP, "a-group"), (Op.DESCRIBE, Res.TOPIC, TOPIC)),
        ApiKey.OFFSET_FETCH,
        7,
        offset_fetch_request(7, every=True),
    )
    _, then = asked(step, OffsetFetchRequest)
    results = (
        OffsetFetchPartitionResult(topic=TOPIC, offset=4),
        OffsetFetchPartitionResult(topic=SECRET, offset=5),
    )
    body = answer(then(OffsetFetchResponse(partitions=results)), ApiKey.OFFSET_FETCH, 7)
    assert [t.name for t in body.topics] == [TOPIC]


# -- admin ---------------------------------------------------------------------------------------


def test_describe_configs_refuses_each_resource_with_its_own_error() -> None:
    body = describe_configs_request(2, ((2, TOPIC, None), (2, SECRET, None), (4, "1", None)))
    step = handle(
        granting((Op.DESCRIBE_CONFIGS, Res.TOPIC, TOPIC)), ApiKey.DESCRIBE_CONFIGS, 2, body
    )
    assert not isinstance(step, Answer)  # the authorized topic is read
    final: Step = step
    while isinstance(final, (Ask, Admin)):
        final = final.then(metadata_of(LED)) if isinstance(final, Ask) else final.then(final.work())
    results = answer(final, ApiKey.DESCRIBE_CONFIGS, 2).results
    assert [(r.resource_name, r.error_code, r.error_message) for r in results] == [
        (TOPIC, ErrorCode.NONE, None),
        (SECRET, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
        ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    ]


def test_create_topics_needs_create_on_the_cluster_or_each_topic() -> None:
    body = sample_request(ApiKey.CREATE_TOPICS, 4)
    names = [t.name for t in body.topics]
    allowed = granting((Op.CREATE, Res.TOPIC, names[0]))
    step = handle(allowed, ApiKey.CREATE_TOPICS, 4, body)
    assert isinstance(step, (Ask, Admin))
    everything = handle(
        granting((Op.CREATE, Res.CLUSTER, CLUSTER_NAME)), ApiKey.CREATE_TOPICS, 4, body
    )
    same(everything, handle(apis(), ApiKey.CREATE_TOPICS, 4, body))
    refused = answer(handle(granting(), ApiKey.CREATE_TOPICS, 4, body), ApiKey.CREATE_TOPICS, 4)
    assert [(t.name, t.error_message) for t in refused.topics] == [
        (n, "Authorization failed.") for n in names
    ]


# -- transactions --------------------------------------------------------------------------------


def test_add_partitions_to_txn_with_one_topic_refused_adds_none() -> None:
    body = add_partitions_to_txn_request(3)
    kafka_apis = granting(
        (Op.WRITE, Res.TRANSACTIONAL_ID, body.v3_and_below_transactional_id),
        (Op.WRITE, Res.TOPIC, TOPIC),
    )
    results = answer(
        handle(kafka_apis, ApiKey.ADD_PARTITIONS_TO_TXN, 3, body), ApiKey.ADD_PARTITIONS_TO_TXN, 3
    )
    codes = {
        t.name: {p.partition_error_code for p in t.results_by_partition}
        for t in results.results_by_topic_v3_and_below
    }
    assert codes == {
        "other": {ErrorCode.TOPIC_AUTHORIZATION_FAILED},
        TOPIC: {ErrorCode.OPERATION_NOT_ATTEMPTED},
    }


def test_init_producer_id_needs_write_on_the_transactional_id_or_idempotent_write() -> None:
    transactional = init_transactional_producer_id_request(4)
    refused = answer(
        handle(granting(), ApiKey.INIT_PRODUCER_ID, 4, transactional), ApiKey.INIT_PRODUCER_ID, 4
    )
    assert (refused.error_code, refused.producer_id) == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        -1,
    )
    tid = transactional.transactional_id
    assert not isinstance(
        handle(
            granting((Op.WRITE, Res.TRANSACTIONAL_ID, tid)),
            ApiKey.INIT_PRODUCER_ID,
            4,
            transactional,
        ),
        Answer,
    )
    idempotent = sample_request(ApiKey.INIT_PRODUCER_ID, 4)
    for authorizer in [
        FakeAuthorizer({(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)}),
        TopicWriter(),
    ]:
        assert isinstance(handle(apis(authorizer), ApiKey.INIT_PRODUCER_ID, 4, idempotent), Admin)


def test_list_transactions_shows_the_transactional_ids_alice_may_describe() -> None:
    step = handle(
        granting((Op.DESCRIBE, Res.TRANSACTIONAL_ID, "mine")),
        ApiKey.LIST_TRANSACTIONS,
        0,
        list_transactions_request(0),
    )
    _, then = asked(step, ListTransactionsRequest)
    states = (
        TransactionDescription(transactional_id="mine"),
        TransactionDescription(transactional_id="theirs"),
    )
    body = answer(then(ListTransactionsResponse(transactions=states)), ApiKey.LIST_TRANSACTIONS, 0)
    assert [s.transactional_id for s in body.transaction_states] == ["mine"]


def test_find_coordinator_of_a_transactional_id_needs_describe_on_it() -> None:
    body = make(request_schema(ApiKey.FIND_COORDINATOR, 3), key="tx", key_type=1)
    refused = answer(
        handle(granting((Op.DESCRIBE, Res.GROUP, "tx")), ApiKey.FIND_COORDINATOR, 3, body),
        ApiKey.FIND_COORDINATOR,
        3,
    )
    assert (refused.error_code, refused.error_message, refused.node_id) == (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "Transactional Id authorization failed.",
        -1,
    )
    assert not isinstance(
        handle(
            granting((Op.DESCRIBE, Res.TRANSACTIONAL_ID, "tx")), ApiKey.FIND_COORDINATOR, 3, body
        ),
        Answer,
    )


def test_the_checks_ask_with_the_requests_principal_and_address() -> None:
    authorizer = FakeAuthorizer({(Op.WRITE, Res.TOPIC, TOPIC)})
    handle(apis(authorizer), ApiKey.PRODUCE, 8, produce_request(8, batch(b"v")))
    assert authorizer.asked == [("User:alice", HOST, (Op.WRITE, Res.TOPIC, TOPIC))]


# -- more partial refusals -----------------------------------------------------------------------


def test_a_transactional_produce_without_a_transactional_id_is_refused_whole() -> None:
    records = build_batch(
        [Record(key=None, value=b"t", timestamp_ms=1_000)],
        0,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    body = produce_request(8, records)
    secret = produce_request(8, records, topic=SECRET)
    body = dataclasses.replace(body, topic_data=body.topic_data + secret.topic_data)
    step = handle(granting((Op.WRITE, Res.TOPIC, TOPIC)), ApiKey.PRODUCE, 8, body)
    assert error_codes(answer(step, ApiKey.PRODUCE, 8)) == TXN_REFUSED


def test_offset_delete_refuses_unreadable_topics_unless_the_group_fails_whole() -> None:
    body = sample_request(ApiKey.OFFSET_DELETE, 0)  # TOPIC 0-1 and "other" 0
    kafka_apis = granting((Op.DELETE, Res.GROUP, "a-group"), (Op.READ, Res.TOPIC, TOPIC))
    two = dataclasses.replace(
        LED, partitions=(LED.partitions[0], dataclasses.replace(LED.partitions[0], partition=1))
    )
    for coordinator, expected in [
        (
            OffsetDeleteResponse(
                partitions=(
                    OffsetDeletePartitionResult(topic=TOPIC, partition=0),
                    OffsetDeletePartitionResult(topic=TOPIC, partition=1),
                )
            ),
            {
                TOPIC: [ErrorCode.NONE, ErrorCode.NONE],
                "other": [ErrorCode.TOPIC_AUTHORIZATION_FAILED],
            },
        ),
        (OffsetDeleteResponse(error_code=ErrorCode.GROUP_ID_NOT_FOUND), {}),
    ]:
        _, checked = asked(handle(kafka_apis, ApiKey.OFFSET_DELETE, 0, body), MetadataRequest)
        request, then = asked(checked(metadata_of(two)), OffsetDeleteRequest)
        assert {p.topic for p in request.partitions} == {TOPIC}
        answered = answer(then(coordinator), ApiKey.OFFSET_DELETE, 0)
        topics = {t.name: [p.error_code for p in t.partitions] for t in answered.topics}
        assert topics == expected
        assert answered.error_code == coordinator.error_code


def test_describe_transactions_refuses_ids_and_hides_topics_alice_may_not_describe() -> None:
    body = make(request_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0), transactional_ids=("a", "b"))
    kafka_apis = granting((Op.DESCRIBE, Res.TRANSACTIONAL_ID, "b"), (Op.DESCRIBE, Res.TOPIC, TOPIC))
    request, then = asked(
        handle(kafka_apis, ApiKey.DESCRIBE_TRANSACTIONS, 0, body), DescribeTransactionsRequest
    )
    assert request.transactional_ids == ("b",)
    described = TransactionDescription(
        transactional_id="b",
        state="Ongoing",
        transaction_start_time_ms=1_000,
        partitions=(
            TxnPartition(topic=TOPIC, partition=0),
            TxnPartition(topic=SECRET, partition=0),
        ),
    )
    states = answer(
        then(DescribeTransactionsResponse(transactions=(described,))),
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
    ).transaction_states
    assert [(s.transactional_id, s.error_code) for s in states] == [
        ("a", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ("b", ErrorCode.NONE),
    ]
    assert [t.topic for t in states[1].topics] == [TOPIC]


def test_alter_configs_refuses_a_broker_without_alter_configs_on_the_cluster() -> None:
    body = sample_request(ApiKey.ALTER_CONFIGS, 1)  # a topic and a broker
    step = handle(granting((Op.ALTER_CONFIGS, Res.TOPIC, TOPIC)), ApiKey.ALTER_CONFIGS, 1, body)
    kept = [r.resource_type for r in body.resources if r.resource_type == 2]
    assert kept  # the topic is altered, the broker refused after it
    final: Step = step
    while isinstance(final, (Ask, Admin)):
        final = final.then(metadata_of(LED)) if isinstance(final, Ask) else final.then(final.work())
    responses = answer(final, ApiKey.ALTER_CONFIGS, 1).responses
    assert [(r.resource_type, r.error_code, r.error_message) for r in responses][-1] == (
        4,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        None,
    )
    assert {r.resource_type for r in responses} == {2, 4}


def test_offset_for_leader_epoch_with_cluster_action_reads_every_topic() -> None:
    body = sample_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 3)
    cluster = granting((Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME))
    same(
        handle(cluster, ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body),
        handle(apis(), ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, body),
    )


def test_api_versions_needs_nothing() -> None:
    authorizer = FakeAuthorizer()
    body = answer(
        handle(apis(authorizer), ApiKey.API_VERSIONS, 3, sample_request(ApiKey.API_VERSIONS, 3)),
        ApiKey.API_VERSIONS,
        3,
    )
    assert body.error_code == ErrorCode.NONE
    assert authorizer.asked == []


def test_a_refused_join_group_answers_kafkas_empty_join_result() -> None:
    body = answer(
        handle(granting(), ApiKey.JOIN_GROUP, 5, sample_request(ApiKey.JOIN_GROUP, 5)),
        ApiKey.JOIN_GROUP,
        5,
    )
    assert (body.error_code, body.generation_id, body.member_id, body.leader, body.members) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        -1,
        "",
        "",
        (),
    )
