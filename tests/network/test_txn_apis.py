"""The transaction APIs of `KafkaApis` without threads: each request, encoded as a client
writes it at every served version, is decoded as the broker decodes it; the message its step
asks of the transaction coordinator, the group coordinator or the replica manager is checked;
a hand-made answer is fed to the continuation, and the response is read back with kio as a
client reads it. FindCoordinator's transactional lookup, the isolation level of Fetch and
ListOffsets, and WriteTxnMarkers between broker processes are here too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.actors.transaction.transaction_config import transaction_state_topic_config
from kafkactor.actors.transaction.transaction_log import partition_for_transactional_id
from kafkactor.common import TRANSACTION_STATE_TOPIC, BrokerEndpoint
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.group import (
    OffsetFetchPartitionResult,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkactor.messages.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafkactor.messages.replication import (
    AbortedTransaction,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
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
    TxnMarkerEntry,
    TxnMarkerPartitionResult,
    TxnMarkerResult,
    TxnOffsetCommitPartition,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnPartition,
    TxnPartitionError,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import (
    decode_request,
    encode_response,
    request_type,
)
from kafkactor.network.codec import decode_response as client_decode_response
from kafkactor.network.codec import encode_request as broker_encode_request
from kafkactor.network.inter_broker import wire_call
from kafkactor.network.kafka_apis import Admin, Answer, Ask, KafkaApis, KafkaApisConfig, Step
from kafkactor.network.txn_produce import has_transactional_records
from kafkactor.storage import Record, build_batch
from tests.network.wire import (
    GROUP,
    MEMBER,
    PRODUCER_EPOCH,
    PRODUCER_ID,
    TOPIC,
    TXN_ID,
    add_offsets_to_txn_request,
    add_partitions_to_txn_request,
    decode_response,
    describe_transactions_request,
    encode_request,
    end_txn_request,
    fetch_request,
    find_coordinator_request,
    init_transactional_producer_id_request,
    list_transactions_request,
    offset_fetch_request,
    produce_request,
    sample_request,
    served_range,
    txn_offset_commit_request,
    write_txn_markers_request,
)

pytestmark = pytest.mark.timeout(60)
R = TypeVar("R")

BROKER = 1
TXN_COORDINATOR = addresses.transaction_coordinator(BROKER)
GROUP_COORDINATOR = addresses.group_coordinator(BROKER)
REPLICA_MANAGER = addresses.replica_manager(BROKER)
ENDPOINTS = (
    BrokerEndpoint(broker_id=1, host="10.0.0.1", port=9092),
    BrokerEndpoint(broker_id=2, host="10.0.0.2", port=9093),
)


@dataclass
class FakeAdmin:
    """A TopicAdmin recording the topics it is asked to create."""

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

    def registered_brokers(self) -> list[int]:
        return [1, 2]

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        raise AssertionError("no topic is deleted here")


def apis(admin: FakeAdmin | None = None) -> KafkaApis:
    return KafkaApis(BROKER, KafkaApisConfig(), admin=admin)


def handle(kafka_apis: KafkaApis, api: ApiKey, version: int, body: Any) -> Step:
    """Encode `body` as a client does, decode it as the broker does, and handle it."""
    header, decoded = decode_request(encode_request(api, version, body, correlation_id=11))
    assert decoded == body
    return kafka_apis.handle(header, decoded)


@dataclass(frozen=True)
class Asked(Generic[R]):
    """An Ask step, its request typed."""

    request: R
    then: Callable[[Response], Step]


def asked(step: Step, address: str, request_type: type[R]) -> Asked[R]:
    assert isinstance(step, Ask), f"expected an Ask, got {step!r}"
    assert step.address == address
    assert isinstance(step.request, request_type), step.request
    return Asked(step.request, step.then)


def answer(step: Step, api: ApiKey, version: int) -> Any:
    """The step is an Answer; its body as a client reads it off the wire."""
    assert isinstance(step, Answer), f"expected an Answer, got {step!r}"
    correlation_id, body = decode_response(
        encode_response(api, version, 11, step.body)[4:], api, version
    )
    assert correlation_id == 11
    return body


def metadata(*topics: TopicMetadata) -> MetadataResponse:
    return MetadataResponse(brokers=(1, 2), topics=topics, endpoints=ENDPOINTS)


def led(topic: str, *leaders: int) -> TopicMetadata:
    return TopicMetadata(
        topic=topic,
        partitions=tuple(PartitionMetadata(partition=p, leader=b) for p, b in enumerate(leaders)),
    )


def unknown(topic: str) -> TopicMetadata:
    return TopicMetadata(topic=topic, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


FENCED_CASES = [
    (ApiKey.INIT_PRODUCER_ID, 4),
    (ApiKey.ADD_PARTITIONS_TO_TXN, 2),
    (ApiKey.ADD_OFFSETS_TO_TXN, 2),
    (ApiKey.END_TXN, 2),
]


def fenced_code(api: ApiKey, version: int) -> ErrorCode:
    """What a client of this version is told when its producer was fenced (KIP-588)."""
    since = dict(FENCED_CASES)[api]
    return ErrorCode.PRODUCER_FENCED if version >= since else ErrorCode.INVALID_PRODUCER_EPOCH


# -- FindCoordinator for a transactional id ------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3])
def test_find_coordinator_answers_the_leader_of_the_ids_transaction_state_partition(
    version: int,
) -> None:
    partitions = 7  # the existing topic's count, not the setting (50), picks the partition
    wanted = partition_for_transactional_id(TXN_ID, partitions)
    leaders = [1] * partitions
    leaders[wanted] = 2
    body = find_coordinator_request(version, key=TXN_ID, key_type=1)
    step = asked(
        handle(apis(), ApiKey.FIND_COORDINATOR, version, body), REPLICA_MANAGER, MetadataRequest
    )
    assert step.request == MetadataRequest(topics=(TRANSACTION_STATE_TOPIC,), listener="PLAINTEXT")
    found = answer(
        step.then(metadata(led(TRANSACTION_STATE_TOPIC, *leaders))),
        ApiKey.FIND_COORDINATOR,
        version,
    )
    assert (found.error_code, found.node_id, found.host, found.port) == (
        ErrorCode.NONE,
        2,
        "10.0.0.2",
        9093,
    )


@pytest.mark.parametrize("version", [1, 3])
def test_a_missing_transaction_state_topic_is_created_and_answered_not_available(
    version: int,
) -> None:
    admin = FakeAdmin()
    body = find_coordinator_request(version, key=TXN_ID, key_type=1)
    step = asked(
        handle(apis(admin), ApiKey.FIND_COORDINATOR, version, body),
        REPLICA_MANAGER,
        MetadataRequest,
    )
    creation = step.then(metadata(unknown(TRANSACTION_STATE_TOPIC)))
    assert isinstance(creation, Admin)
    found = answer(creation.then(creation.work()), ApiKey.FIND_COORDINATOR, version)
    assert found.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE  # clients ask again
    # 50 partitions, min(transaction.state.log.replication.factor 3, 2 live brokers) replicas
    assert admin.created == [
        (TRANSACTION_STATE_TOPIC, 50, 2, transaction_state_topic_config(None, 2))
    ]
    assert admin.created[0][3]["cleanup.policy"] == "compact"


def test_a_transaction_state_partition_without_leader_is_not_available() -> None:
    leaders = [-1] * 50
    body = find_coordinator_request(2, key=TXN_ID, key_type=1)
    step = asked(handle(apis(), ApiKey.FIND_COORDINATOR, 2, body), REPLICA_MANAGER, MetadataRequest)
    found = answer(
        step.then(metadata(led(TRANSACTION_STATE_TOPIC, *leaders))), ApiKey.FIND_COORDINATOR, 2
    )
    assert (found.error_code, found.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)


# -- InitProducerId with a transactional id ------------------------------------------------------


@pytest.mark.parametrize("version", served_range(ApiKey.INIT_PRODUCER_ID))
def test_init_producer_id_asks_the_transaction_coordinator(version: int) -> None:
    recovering = version >= 3  # KIP-360: the producer names the id and epoch it has
    body = init_transactional_producer_id_request(
        version,
        producer_id=PRODUCER_ID if recovering else -1,
        producer_epoch=PRODUCER_EPOCH if recovering else -1,
    )
    step = asked(
        handle(apis(), ApiKey.INIT_PRODUCER_ID, version, body),
        TXN_COORDINATOR,
        InitProducerIdRequest,
    )
    assert step.request == InitProducerIdRequest(
        transactional_id=TXN_ID,
        transaction_timeout_ms=45_000,
        producer_id=PRODUCER_ID if recovering else -1,
        producer_epoch=PRODUCER_EPOCH if recovering else -1,
    )
    done = answer(
        step.then(InitProducerIdResponse(producer_id=77, producer_epoch=3)),
        ApiKey.INIT_PRODUCER_ID,
        version,
    )
    assert (done.error_code, done.producer_id, done.producer_epoch) == (ErrorCode.NONE, 77, 3)


@pytest.mark.parametrize("version", [3, 4])
def test_init_producer_id_with_an_id_but_no_epoch_is_an_invalid_request(version: int) -> None:
    body = init_transactional_producer_id_request(version, producer_id=PRODUCER_ID)
    done = answer(
        handle(apis(), ApiKey.INIT_PRODUCER_ID, version, body), ApiKey.INIT_PRODUCER_ID, version
    )
    assert (done.error_code, done.producer_id) == (ErrorCode.INVALID_REQUEST, -1)


def test_init_producer_id_without_a_coordinator_actor_is_coordinator_not_available() -> None:
    step = asked(
        handle(apis(), ApiKey.INIT_PRODUCER_ID, 4, init_transactional_producer_id_request(4)),
        TXN_COORDINATOR,
        InitProducerIdRequest,
    )
    undeliverable = ErrorResponse(error_code=ErrorCode.NETWORK_EXCEPTION, message="no actor")
    done = answer(step.then(undeliverable), ApiKey.INIT_PRODUCER_ID, 4)
    assert done.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- AddPartitionsToTxn --------------------------------------------------------------------------


@pytest.mark.parametrize("version", served_range(ApiKey.ADD_PARTITIONS_TO_TXN))
def test_add_partitions_to_txn_checks_the_partitions_then_asks_the_coordinator(
    version: int,
) -> None:
    body = add_partitions_to_txn_request(version, {TOPIC: (0, 1)})
    check = asked(
        handle(apis(), ApiKey.ADD_PARTITIONS_TO_TXN, version, body),
        REPLICA_MANAGER,
        MetadataRequest,
    )
    step = asked(check.then(metadata(led(TOPIC, 1, 2))), TXN_COORDINATOR, AddPartitionsToTxnRequest)
    assert step.request == AddPartitionsToTxnRequest(
        transactional_id=TXN_ID,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        partitions=(TxnPartition(topic=TOPIC, partition=0), TxnPartition(topic=TOPIC, partition=1)),
    )
    reply = AddPartitionsToTxnResponse(
        partitions=(
            TxnPartitionError(
                topic=TOPIC, partition=0, error_code=ErrorCode.CONCURRENT_TRANSACTIONS
            ),
            TxnPartitionError(
                topic=TOPIC, partition=1, error_code=ErrorCode.CONCURRENT_TRANSACTIONS
            ),
        )
    )
    done = answer(step.then(reply), ApiKey.ADD_PARTITIONS_TO_TXN, version)
    assert [
        (t.name, p.partition_index, p.partition_error_code)
        for t in done.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ] == [
        (TOPIC, 0, ErrorCode.CONCURRENT_TRANSACTIONS),
        (TOPIC, 1, ErrorCode.CONCURRENT_TRANSACTIONS),
    ]


@pytest.mark.parametrize("version", [0, 3])
def test_add_partitions_with_an_unknown_partition_adds_none(version: int) -> None:
    # Kafka: the unknown ones UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED,
    # and the coordinator is not asked
    body = add_partitions_to_txn_request(version, {TOPIC: (0, 5), "other": (0,)})
    check = asked(
        handle(apis(), ApiKey.ADD_PARTITIONS_TO_TXN, version, body),
        REPLICA_MANAGER,
        MetadataRequest,
    )
    done = answer(
        check.then(metadata(led(TOPIC, 1), unknown("other"))), ApiKey.ADD_PARTITIONS_TO_TXN, version
    )
    assert [
        (t.name, p.partition_index, p.partition_error_code)
        for t in done.results_by_topic_v3_and_below
        for p in t.results_by_partition
    ] == [
        (TOPIC, 0, ErrorCode.OPERATION_NOT_ATTEMPTED),
        (TOPIC, 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("other", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


# -- AddOffsetsToTxn and EndTxn ------------------------------------------------------------------


@pytest.mark.parametrize("version", served_range(ApiKey.ADD_OFFSETS_TO_TXN))
def test_add_offsets_to_txn_asks_the_coordinator(version: int) -> None:
    body = add_offsets_to_txn_request(version)
    step = asked(
        handle(apis(), ApiKey.ADD_OFFSETS_TO_TXN, version, body),
        TXN_COORDINATOR,
        AddOffsetsToTxnRequest,
    )
    assert step.request == AddOffsetsToTxnRequest(
        transactional_id=TXN_ID,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        group_id=GROUP,
    )
    done = answer(step.then(AddOffsetsToTxnResponse()), ApiKey.ADD_OFFSETS_TO_TXN, version)
    assert done.error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", served_range(ApiKey.END_TXN))
@pytest.mark.parametrize("committed", [True, False], ids=["commit", "abort"])
def test_end_txn_asks_the_coordinator(version: int, committed: bool) -> None:
    body = end_txn_request(version, committed=committed)
    step = asked(handle(apis(), ApiKey.END_TXN, version, body), TXN_COORDINATOR, EndTxnRequest)
    assert step.request == EndTxnRequest(
        transactional_id=TXN_ID,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        committed=committed,
    )
    reply = EndTxnResponse(error_code=ErrorCode.INVALID_TXN_STATE)
    assert (
        answer(step.then(reply), ApiKey.END_TXN, version).error_code == ErrorCode.INVALID_TXN_STATE
    )


def _fenced_step(api: ApiKey, version: int) -> tuple[Step, Response]:
    """A request of `api` at the coordinator, and the coordinator's answer that it is fenced."""
    fenced = ErrorCode.PRODUCER_FENCED
    if api is ApiKey.INIT_PRODUCER_ID:
        step = handle(apis(), api, version, init_transactional_producer_id_request(version))
        return step, InitProducerIdResponse(error_code=fenced)
    if api is ApiKey.ADD_PARTITIONS_TO_TXN:
        check = handle(apis(), api, version, add_partitions_to_txn_request(version, {TOPIC: (0,)}))
        assert isinstance(check, Ask)
        reply = AddPartitionsToTxnResponse(
            partitions=(TxnPartitionError(topic=TOPIC, partition=0, error_code=fenced),)
        )
        return check.then(metadata(led(TOPIC, 1))), reply
    if api is ApiKey.ADD_OFFSETS_TO_TXN:
        return handle(
            apis(), api, version, add_offsets_to_txn_request(version)
        ), AddOffsetsToTxnResponse(error_code=fenced)
    return handle(apis(), api, version, end_txn_request(version)), EndTxnResponse(error_code=fenced)


def _error_of(api: ApiKey, body: Any) -> ErrorCode:
    if api is ApiKey.ADD_PARTITIONS_TO_TXN:
        return ErrorCode(
            body.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
        )
    return ErrorCode(body.error_code)


@pytest.mark.parametrize(
    ("api", "version"),
    [(api, v) for api, _ in FENCED_CASES for v in served_range(api)],
    ids=str,
)
def test_producer_fenced_is_invalid_producer_epoch_before_kip_588(
    api: ApiKey, version: int
) -> None:
    step, fenced = _fenced_step(api, version)
    at_coordinator = asked(step, TXN_COORDINATOR, object)
    assert _error_of(api, answer(at_coordinator.then(fenced), api, version)) == fenced_code(
        api, version
    )


# -- TxnOffsetCommit -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", served_range(ApiKey.TXN_OFFSET_COMMIT))
def test_txn_offset_commit_asks_the_group_coordinator(version: int) -> None:
    body = txn_offset_commit_request(version)
    check = asked(
        handle(apis(), ApiKey.TXN_OFFSET_COMMIT, version, body), REPLICA_MANAGER, MetadataRequest
    )
    step = asked(check.then(metadata(led(TOPIC, 1, 2))), GROUP_COORDINATOR, TxnOffsetCommitRequest)
    assert step.request == TxnOffsetCommitRequest(
        transactional_id=TXN_ID,
        group_id=GROUP,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        # KIP-447's member and generation from v3, each offset's leader epoch from v2
        generation_id=3 if version >= 3 else -1,
        member_id=MEMBER if version >= 3 else "",
        group_instance_id=None,
        partitions=tuple(
            TxnOffsetCommitPartition(
                topic=TOPIC,
                partition=p,
                offset=100 + p,
                leader_epoch=5 if version >= 2 else -1,
                metadata=f"m{p}",
            )
            for p in (0, 1)
        ),
    )
    reply = TxnOffsetCommitResponse(
        partitions=(
            TxnPartitionError(topic=TOPIC, partition=0),
            TxnPartitionError(topic=TOPIC, partition=1, error_code=ErrorCode.PRODUCER_FENCED),
        )
    )
    done = answer(step.then(reply), ApiKey.TXN_OFFSET_COMMIT, version)
    assert [(p.partition_index, p.error_code) for t in done.topics for p in t.partitions] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.INVALID_PRODUCER_EPOCH),  # every version: the fencing its clients know
    ]


def test_txn_offset_commit_of_an_unknown_partition_is_unknown_topic_or_partition() -> None:
    body = txn_offset_commit_request(3)
    check = asked(
        handle(apis(), ApiKey.TXN_OFFSET_COMMIT, 3, body), REPLICA_MANAGER, MetadataRequest
    )
    step = asked(check.then(metadata(led(TOPIC, 1))), GROUP_COORDINATOR, TxnOffsetCommitRequest)
    assert [p.partition for p in step.request.partitions] == [0]  # only the known one is asked
    done = answer(
        step.then(
            TxnOffsetCommitResponse(partitions=(TxnPartitionError(topic=TOPIC, partition=0),))
        ),
        ApiKey.TXN_OFFSET_COMMIT,
        3,
    )
    assert [(p.partition_index, p.error_code) for t in done.topics for p in t.partitions] == [
        (0, ErrorCode.NONE),
        (1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]


# -- WriteTxnMarkers -----------------------------------------------------------------------------

MARKERS = WriteTxnMarkersRequest(
    markers=(
        TxnMarkerEntry(
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            committed=True,
            coordinator_epoch=4,
            partitions=(
                TxnPartition(topic=TOPIC, partition=0),
                TxnPartition(topic=TOPIC, partition=1),
                TxnPartition(topic="__consumer_offsets", partition=12),
            ),
        ),
        TxnMarkerEntry(
            producer_id=PRODUCER_ID + 1,
            producer_epoch=0,
            committed=False,
            coordinator_epoch=4,
            partitions=(TxnPartition(topic=TOPIC, partition=2),),
        ),
    )
)


def test_write_txn_markers_asks_the_replica_manager_and_answers_every_partition() -> None:
    body = write_txn_markers_request(1)
    step = asked(
        handle(apis(), ApiKey.WRITE_TXN_MARKERS, 1, body), REPLICA_MANAGER, WriteTxnMarkersRequest
    )
    assert step.request == MARKERS
    reply = WriteTxnMarkersResponse(
        markers=(
            TxnMarkerResult(
                producer_id=PRODUCER_ID,
                partitions=(
                    TxnMarkerPartitionResult(topic=TOPIC, partition=0),
                    TxnMarkerPartitionResult(
                        topic=TOPIC, partition=1, error_code=ErrorCode.NOT_LEADER_FOR_PARTITION
                    ),
                    TxnMarkerPartitionResult(topic="__consumer_offsets", partition=12),
                ),
            ),
        )  # the second marker not answered: the code of the whole answer
    )
    done = answer(step.then(reply), ApiKey.WRITE_TXN_MARKERS, 1)
    assert [
        (m.producer_id, t.name, p.partition_index, p.error_code)
        for m in done.markers
        for t in m.topics
        for p in t.partitions
    ] == [
        (PRODUCER_ID, TOPIC, 0, ErrorCode.NONE),
        (PRODUCER_ID, TOPIC, 1, ErrorCode.NOT_LEADER_FOR_PARTITION),
        (PRODUCER_ID, "__consumer_offsets", 12, ErrorCode.NONE),
        (PRODUCER_ID + 1, TOPIC, 2, ErrorCode.UNKNOWN_SERVER_ERROR),
    ]


def test_write_txn_markers_cross_broker_processes_and_back_unchanged() -> None:
    # the coordinator's broker writes the request (inter_broker.wire_call), the leader's
    # broker reads it and asks its replica manager the same message; the answer goes back
    call = wire_call(dataclasses.replace(MARKERS, correlation_id=42))
    assert call is not None and call.api_key is ApiKey.WRITE_TXN_MARKERS and call.version == 1
    frame = broker_encode_request(call.api_key, call.version, 9, "broker-2", call.body)
    header, body = decode_request(frame[4:])
    step = asked(apis().handle(header, body), REPLICA_MANAGER, WriteTxnMarkersRequest)
    assert step.request == MARKERS
    results = WriteTxnMarkersResponse(
        markers=tuple(
            TxnMarkerResult(
                producer_id=m.producer_id,
                partitions=tuple(
                    TxnMarkerPartitionResult(
                        topic=p.topic, partition=p.partition, error_code=ErrorCode.NONE
                    )
                    for p in m.partitions
                ),
            )
            for m in MARKERS.markers
        )
    )
    answered = step.then(results)
    assert isinstance(answered, Answer)
    response_frame = encode_response(ApiKey.WRITE_TXN_MARKERS, 1, 9, answered.body)
    _, wire_body = client_decode_response(ApiKey.WRITE_TXN_MARKERS, 1, response_frame[4:])
    assert call.read(wire_body) == dataclasses.replace(results, correlation_id=42)
    assert type(call.body) is request_type(ApiKey.WRITE_TXN_MARKERS, 1)


# -- DescribeTransactions and ListTransactions ---------------------------------------------------


def test_describe_transactions_answers_every_id_asked() -> None:
    step = asked(
        handle(apis(), ApiKey.DESCRIBE_TRANSACTIONS, 0, describe_transactions_request(0)),
        TXN_COORDINATOR,
        DescribeTransactionsRequest,
    )
    assert step.request.transactional_ids == (TXN_ID, "unknown-id")
    reply = DescribeTransactionsResponse(
        transactions=(
            TransactionDescription(
                transactional_id=TXN_ID,
                state="Ongoing",
                transaction_timeout_ms=60_000,
                transaction_start_time_ms=1_700_000_000_000,
                producer_id=PRODUCER_ID,
                producer_epoch=PRODUCER_EPOCH,
                partitions=(
                    TxnPartition(topic=TOPIC, partition=0),
                    TxnPartition(topic=TOPIC, partition=3),
                ),
            ),
            TransactionDescription(
                transactional_id="unknown-id",
                error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                transaction_start_time_ms=1_700_000_000_000,
            ),
        )
    )
    done = answer(step.then(reply), ApiKey.DESCRIBE_TRANSACTIONS, 0)
    first, second = done.transaction_states
    assert (first.transactional_id, first.transaction_state, first.producer_id) == (
        TXN_ID,
        "Ongoing",
        PRODUCER_ID,
    )
    assert [(t.topic, t.partitions) for t in first.topics] == [(TOPIC, (0, 3))]
    assert int(first.transaction_start_time.timestamp() * 1000) == 1_700_000_000_000
    assert second.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


def test_list_transactions_names_the_unknown_state_filters() -> None:
    step = asked(
        handle(apis(), ApiKey.LIST_TRANSACTIONS, 0, list_transactions_request(0)),
        TXN_COORDINATOR,
        ListTransactionsRequest,
    )
    assert step.request == ListTransactionsRequest(
        state_filters=("Ongoing", "Nonsense"), producer_id_filters=(PRODUCER_ID,)
    )
    reply = ListTransactionsResponse(
        transactions=(
            TransactionDescription(
                transactional_id=TXN_ID, producer_id=PRODUCER_ID, state="Ongoing"
            ),
        )
    )
    done = answer(step.then(reply), ApiKey.LIST_TRANSACTIONS, 0)
    assert done.unknown_state_filters == ("Nonsense",)
    assert [
        (t.transactional_id, t.producer_id, t.transaction_state) for t in done.transaction_states
    ] == [(TXN_ID, PRODUCER_ID, "Ongoing")]


# -- Fetch and ListOffsets: the isolation level --------------------------------------------------


def _fetched(version: int, isolation: int, data: FetchPartitionData) -> Any:
    body = dataclasses.replace(
        fetch_request(version, offset=3, max_wait_ms=100), isolation_level=isolation
    )
    step = asked(handle(apis(), ApiKey.FETCH, version, body), REPLICA_MANAGER, FetchRequest)
    assert step.request.isolation_level == isolation
    done = answer(step.then(FetchResponse(partitions=(data,))), ApiKey.FETCH, version)
    return done.responses[0].partitions[0]


@pytest.mark.parametrize("version", [4, 11])
def test_a_read_committed_fetch_is_answered_its_lso_and_aborted_transactions(version: int) -> None:
    data = FetchPartitionData(
        topic=TOPIC,
        partition=0,
        high_watermark=20,
        last_stable_offset=12,
        log_start_offset=0,
        aborted_transactions=(AbortedTransaction(producer_id=9, first_offset=5),),
    )
    read = _fetched(version, 1, data)
    assert (read.high_watermark, read.last_stable_offset) == (20, 12)
    assert [(a.producer_id, a.first_offset) for a in read.aborted_transactions] == [(9, 5)]


@pytest.mark.parametrize("version", [4, 11])
def test_a_read_uncommitted_fetch_has_null_aborted_transactions(version: int) -> None:
    data = FetchPartitionData(topic=TOPIC, partition=0, high_watermark=20, last_stable_offset=12)
    read = _fetched(version, 0, data)
    assert read.last_stable_offset == 12
    assert read.aborted_transactions is None  # Kafka: null for read_uncommitted


def test_a_read_committed_fetch_without_aborted_transactions_has_an_empty_list() -> None:
    read = _fetched(
        11, 1, FetchPartitionData(topic=TOPIC, partition=0, high_watermark=4, last_stable_offset=4)
    )
    assert read.aborted_transactions == ()


def test_a_fetch_of_an_unknown_isolation_level_is_an_invalid_request() -> None:
    body = dataclasses.replace(fetch_request(11, offset=3, max_wait_ms=100), isolation_level=5)
    done = answer(handle(apis(), ApiKey.FETCH, 11, body), ApiKey.FETCH, 11)
    assert done.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("version", [2, 5])
@pytest.mark.parametrize("isolation", [0, 1])
def test_list_offsets_passes_its_isolation_level(version: int, isolation: int) -> None:
    body = dataclasses.replace(
        sample_request(ApiKey.LIST_OFFSETS, version), isolation_level=isolation
    )
    step = asked(
        handle(apis(), ApiKey.LIST_OFFSETS, version, body), REPLICA_MANAGER, ListOffsetsRequest
    )
    assert step.request.isolation_level == isolation
    assert isinstance(step.then(ListOffsetsResponse()), Answer)


# -- the codes every API answers as a whole ------------------------------------------------------

_WHOLE: dict[ApiKey, Callable[[int], Any]] = {
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn_request,
    ApiKey.END_TXN: end_txn_request,
}


@pytest.mark.parametrize("api", list(_WHOLE), ids=lambda a: a.name)
def test_a_coordinator_failure_is_answered_coordinator_not_available(api: ApiKey) -> None:
    step = asked(handle(apis(), api, 3, _WHOLE[api](3)), TXN_COORDINATOR, object)
    failed = ErrorResponse(error_code=ErrorCode.NETWORK_EXCEPTION)
    assert answer(step.then(failed), api, 3).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- OffsetFetch v7: stable offsets (KIP-447) ----------------------------------------------------


@pytest.mark.parametrize("stable", [False, True], ids=["any", "require-stable"])
def test_offset_fetch_v7_asks_for_stable_offsets(stable: bool) -> None:
    body = dataclasses.replace(offset_fetch_request(7), require_stable=stable)
    step = asked(
        handle(apis(), ApiKey.OFFSET_FETCH, 7, body), GROUP_COORDINATOR, OffsetFetchRequest
    )
    assert step.request.require_stable is stable
    pending = ErrorCode.UNSTABLE_OFFSET_COMMIT  # a transaction's offset waits for its marker
    reply = OffsetFetchResponse(
        partitions=tuple(
            OffsetFetchPartitionResult(topic=p.topic, partition=p.partition, error_code=pending)
            for p in step.request.partitions
        )
    )
    done = answer(step.then(reply), ApiKey.OFFSET_FETCH, 7)
    assert {p.error_code for t in done.topics for p in t.partitions} == {pending}


@pytest.mark.parametrize("version", [3, 4])
def test_an_idempotent_init_producer_id_with_an_id_but_no_epoch_is_an_invalid_request(
    version: int,
) -> None:
    body = dataclasses.replace(sample_request(ApiKey.INIT_PRODUCER_ID, version), producer_id=5)
    assert body.transactional_id is None
    done = answer(
        handle(apis(), ApiKey.INIT_PRODUCER_ID, version, body), ApiKey.INIT_PRODUCER_ID, version
    )
    assert (done.error_code, done.producer_id) == (ErrorCode.INVALID_REQUEST, -1)


# -- Produce: transactional records --------------------------------------------------------------


def _batch(*, transactional: bool) -> bytes:
    if not transactional:
        return build_batch([Record(None, b"plain", 1_000)], 0)
    return build_batch(
        [Record(None, b"txn", 1_000)],
        0,
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (_batch(transactional=False), False),
        (_batch(transactional=True), True),
        (_batch(transactional=False) + _batch(transactional=True), True),  # the second batch
        (_batch(transactional=True)[:30], False),  # unreadable: the log refuses it
        (b"", False),
    ],
    ids=["plain", "transactional", "second-of-two", "cut", "empty"],
)
def test_transactional_records_are_found_by_their_attributes(
    records: bytes, expected: bool
) -> None:
    body = produce_request(8, records, acks=1)
    assert has_transactional_records(body) is expected
