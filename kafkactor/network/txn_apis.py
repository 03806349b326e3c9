"""KafkaApis' transaction APIs (KIP-98): InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions and ListTransactions to the broker's transaction
coordinator; TxnOffsetCommit to its group coordinator; WriteTxnMarkers (a coordinator's markers,
from another broker process) to its replica manager — translated to and from the messages of
`kafkactor.messages.transaction`.

KIP-588's PRODUCER_FENCED is answered only to the versions that know it (InitProducerId v4+,
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn v2+); older ones get INVALID_PRODUCER_EPOCH,
which their clients take for the same fencing, as Kafka's KafkaApis does.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

from kafkactor.actors.runtime import addresses
from kafkactor.messages import ErrorCode, Request, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
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
    TxnOffsetCommitPartition,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    TxnPartition,
    TxnPartitionError,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Ask, Step, ask_expecting, error_of, millis, respond
from kafkactor.network.txn_markers import write_txn_markers

__all__ = ["TxnApis", "fenced_for", "write_txn_markers"]

R = TypeVar("R", bound=Response)

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
#: The first version of each API that may answer PRODUCER_FENCED (KIP-588)
PRODUCER_FENCED_SINCE: Final[dict[ApiKey, int]] = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def fenced_for(api: ApiKey, version: int, code: ErrorCode) -> ErrorCode:
    """`code` as a client of this API version understands it: PRODUCER_FENCED becomes
    INVALID_PRODUCER_EPOCH before KIP-588's version (every version of TxnOffsetCommit)."""
    if code is ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_SINCE.get(api, 2**15):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _coordinator_failure(code: ErrorCode) -> ErrorCode:
    """The code for a request its coordinator did not answer: an undeliverable request (no
    coordinator actor running, e.g. while the broker stops) is COORDINATOR_NOT_AVAILABLE, which
    every client retries after looking the coordinator up again."""
    if code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.UNKNOWN_SERVER_ERROR):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return code


class TxnApis:
    """The transaction half of Kafka's `KafkaApis` for one broker.

    Every request is asked of the actor that owns it (`addresses.transaction_coordinator`,
    `addresses.group_coordinator`, `addresses.replica_manager`); AddPartitionsToTxn and
    TxnOffsetCommit first ask the metadata cache which partitions exist, as Kafka's
    handleAddPartitionToTxnRequest and handleTxnOffsetCommitRequest do.
    """

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.coordinator = addresses.transaction_coordinator(broker_id)
        self.group_coordinator = addresses.group_coordinator(broker_id)
        self.replica_manager = addresses.replica_manager(broker_id)

    def _ask(
        self, request: Request, answered: type[R], answer: Callable[[R | None, ErrorCode], Step]
    ) -> Step:
        return ask_expecting(
            self.coordinator,
            request,
            answered,
            lambda response, code: answer(response, _coordinator_failure(code)),
        )

    # -- InitProducerId (with a transactional id) ----------------------------------------------

    def init_producer_id(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.INIT_PRODUCER_ID, version)

        def answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Step:
            return respond(
                schema,
                error_code=fenced_for(ApiKey.INIT_PRODUCER_ID, version, code),
                producer_id=producer_id,
                producer_epoch=epoch,
            )

        # v3+ (KIP-360): a producer recovering names its id and epoch; one without the other
        # is Kafka's INVALID_REQUEST
        producer_id = int(getattr(body, "producer_id", NO_PRODUCER_ID))
        epoch = int(getattr(body, "producer_epoch", NO_PRODUCER_EPOCH))
        if (producer_id == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return answer(ErrorCode.INVALID_REQUEST)
        request = InitProducerIdRequest(
            transactional_id=body.transactional_id,
            transaction_timeout_ms=millis(body.transaction_timeout),
            producer_id=producer_id,
            producer_epoch=epoch,
        )

        def initialized(response: InitProducerIdResponse | None, code: ErrorCode) -> Step:
            if response is None:
                return answer(code)
            return answer(response.error_code, response.producer_id, response.producer_epoch)

        return self._ask(request, InitProducerIdResponse, initialized)

    # -- AddPartitionsToTxn ----------------------------------------------------------------------

    def add_partitions_to_txn(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        topic_type = nested(schema, "AddPartitionsToTxnTopicResult")
        partition_type = nested(schema, "AddPartitionsToTxnPartitionResult")
        topics = body.v3_and_below_topics
        wanted = tuple(
            TxnPartition(topic=t.name, partition=int(p)) for t in topics for p in t.partitions
        )

        def answer(errors: Iterable[TxnPartitionError], fallback: ErrorCode) -> Step:
            codes = {(e.topic, e.partition): e.error_code for e in errors}

            def code(topic: str, partition: int) -> ErrorCode:
                found = codes.get((topic, partition), fallback)
                return fenced_for(ApiKey.ADD_PARTITIONS_TO_TXN, version, found)

            return respond(
                schema,
                results_by_topic_v3_and_below=tuple(
                    build(
                        topic_type,
                        name=t.name,
                        results_by_partition=tuple(
                            build(
                                partition_type,
                                partition_index=int(p),
                                partition_error_code=code(t.name, int(p)),
                            )
                            for p in t.partitions
                        ),
                    )
                    for t in topics
                ),
            )

        request = AddPartitionsToTxnRequest(
            transactional_id=body.v3_and_below_transactional_id,
            producer_id=int(body.v3_and_below_producer_id),
            producer_epoch=int(body.v3_and_below_producer_epoch),
            partitions=wanted,
        )

        def added(response: AddPartitionsToTxnResponse | None, code: ErrorCode) -> Step:
            return answer(response.partitions if response is not None else (), code)

        def checked(unknown: frozenset[tuple[str, int]] | ErrorCode) -> Step:
            if isinstance(unknown, ErrorCode):
                return answer((), unknown)
            if unknown:
                # Kafka: any partition failing its check fails the whole request, the others
                # OPERATION_NOT_ATTEMPTED (not added to the transaction)
                return answer(
                    (
                        TxnPartitionError(
                            topic=topic,
                            partition=p,
                            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        )
                        for topic, p in unknown
                    ),
                    ErrorCode.OPERATION_NOT_ATTEMPTED,
                )
            return self._ask(request, AddPartitionsToTxnResponse, added)

        return self._unknown_partitions(wanted, checked)

    # -- AddOffsetsToTxn and EndTxn --------------------------------------------------------------

    def add_offsets_to_txn(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.ADD_OFFSETS_TO_TXN, version)
        request = AddOffsetsToTxnRequest(
            transactional_id=body.transactional_id,
            producer_id=int(body.producer_id),
            producer_epoch=int(body.producer_epoch),
            group_id=body.group_id,
        )

        def added(response: AddOffsetsToTxnResponse | None, code: ErrorCode) -> Step:
            found = response.error_code if response is not None else code
            return respond(schema, error_code=fenced_for(ApiKey.ADD_OFFSETS_TO_TXN, version, found))

        return self._ask(request, AddOffsetsToTxnResponse, added)

    def end_txn(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.END_TXN, version)
        request = EndTxnRequest(
            transactional_id=body.transactional_id,
            producer_id=int(body.producer_id),
            producer_epoch=int(body.producer_epoch),
            committed=bool(body.committed),
        )

        def ended(response: EndTxnResponse | None, code: ErrorCode) -> Step:
            found = response.error_code if response is not None else code
            return respond(schema, error_code=fenced_for(ApiKey.END_TXN, version, found))

        return self._ask(request, EndTxnResponse, ended)

    # -- TxnOffsetCommit (to the group coordinator) ----------------------------------------------

    def txn_offset_commit(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        schema = response_type(ApiKey.TXN_OFFSET_COMMIT, version)
        topic_type = nested(schema, "TxnOffsetCommitResponseTopic")
        partition_type = nested(schema, "TxnOffsetCommitResponsePartition")
        # v2+ carries each offset's leader epoch, v3+ the group generation and member (KIP-447)
        request = TxnOffsetCommitRequest(
            transactional_id=body.transactional_id,
            group_id=body.group_id,
            producer_id=int(body.producer_id),
            producer_epoch=int(body.producer_epoch),
            generation_id=int(getattr(body, "generation_id", -1)),
            member_id=getattr(body, "member_id", ""),
            group_instance_id=getattr(body, "group_instance_id", None),
            partitions=tuple(
                TxnOffsetCommitPartition(
                    topic=t.name,
                    partition=int(p.partition_index),
                    offset=int(p.committed_offset),
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=p.committed_metadata,
                )
                for t in body.topics
                for p in t.partitions
            ),
        )
        unknown: frozenset[tuple[str, int]] = frozenset()

        def committed(response: TxnOffsetCommitResponse | None, code: ErrorCode) -> Step:
            codes = (
                {(e.topic, e.partition): e.error_code for e in response.partitions}
                if (response is not None)
                else {}
            )
            codes.update({tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in unknown})

            def entry(topic: str, p: Any) -> Any:
                index = int(p.partition_index)
                found = codes.get((topic, index), code)
                return build(
                    partition_type,
                    partition_index=index,
                    error_code=fenced_for(ApiKey.TXN_OFFSET_COMMIT, version, found),
                )

            return respond(
                schema,
                topics=tuple(
                    build(
                        topic_type,
                        name=t.name,
                        partitions=tuple(entry(t.name, p) for p in t.partitions),
                    )
                    for t in body.topics
                ),
            )

        def checked(found: frozenset[tuple[str, int]] | ErrorCode) -> Step:
            # Kafka's handleTxnOffsetCommitRequest: an unknown partition answers
            # UNKNOWN_TOPIC_OR_PARTITION, the others go to the group coordinator
            nonlocal unknown
            if isinstance(found, ErrorCode):
                return committed(None, found)
            unknown = found
            kept = tuple(p for p in request.partitions if (p.topic, p.partition) not in unknown)
            if not kept and request.partitions:
                return committed(TxnOffsetCommitResponse(), ErrorCode.UNKNOWN_SERVER_ERROR)
            return ask_expecting(
                self.group_coordinator,
                dataclasses.replace(request, partitions=kept),
                TxnOffsetCommitResponse,
                lambda response, code: committed(response, _coordinator_failure(code)),
            )

        wanted = tuple(
            TxnPartition(topic=p.topic, partition=p.partition) for p in request.partitions
        )
        return self._unknown_partitions(wanted, checked)

    # -- DescribeTransactions and ListTransactions (KIP-664) -------------------------------------

    def describe_transactions(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.DESCRIBE_TRANSACTIONS, version)
        state_type = nested(schema, "TransactionState")
        topic_type = nested(schema, "TopicData")
        ids = tuple(body.transactional_ids)

        def described(response: DescribeTransactionsResponse | None, code: ErrorCode) -> Step:
            found = {t.transactional_id: t for t in response.transactions} if response else {}
            states = []
            for tid in ids:
                t = found.get(tid, TransactionDescription(transactional_id=tid, error_code=code))
                grouped: dict[str, list[int]] = {}
                for p in t.partitions:
                    grouped.setdefault(p.topic, []).append(p.partition)
                states.append(
                    build(
                        state_type,
                        error_code=t.error_code,
                        transactional_id=tid,
                        transaction_state=t.state,
                        transaction_timeout=datetime.timedelta(
                            milliseconds=t.transaction_timeout_ms
                        ),
                        transaction_start_time=_timestamp(t.transaction_start_time_ms),
                        producer_id=t.producer_id,
                        producer_epoch=t.producer_epoch,
                        topics=tuple(
                            build(topic_type, topic=topic, partitions=tuple(ps))
                            for topic, ps in grouped.items()
                        ),
                    )
                )
            return respond(schema, transaction_states=tuple(states))

        request = DescribeTransactionsRequest(transactional_ids=ids)
        return self._ask(request, DescribeTransactionsResponse, described)

    def list_transactions(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.LIST_TRANSACTIONS, version)
        state_type = nested(schema, "TransactionState")
        filters = tuple(body.state_filters)

        def listed(response: ListTransactionsResponse | None, code: ErrorCode) -> Step:
            r = response if response is not None else ListTransactionsResponse(error_code=code)
            return respond(
                schema,
                error_code=r.error_code,
                unknown_state_filters=tuple(f for f in filters if f not in TRANSACTION_STATES),
                transaction_states=tuple(
                    build(
                        state_type,
                        transactional_id=t.transactional_id,
                        producer_id=t.producer_id,
                        transaction_state=t.state,
                    )
                    for t in r.transactions
                ),
            )

        request = ListTransactionsRequest(
            state_filters=filters,
            producer_id_filters=tuple(int(p) for p in body.producer_id_filters),
        )
        return self._ask(request, ListTransactionsResponse, listed)

    # -- helpers ---------------------------------------------------------------------------------

    def _unknown_partitions(
        self,
        wanted: Sequence[TxnPartition],
        then: Callable[[frozenset[tuple[str, int]] | ErrorCode], Step],
    ) -> Step:
        """Ask the metadata cache which of `wanted` it does not know (a missing topic or an
        index beyond its partitions): `then(those)`, or `then(the failure's code)`."""
        topics = tuple(dict.fromkeys(p.topic for p in wanted))
        if not topics:
            return then(frozenset())

        def answered(response: Response) -> Step:
            if not isinstance(response, MetadataResponse):
                return then(error_of(response))
            known = {
                (t.topic, p.partition)
                for t in response.topics
                if t.error_code is not ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                for p in t.partitions
            }
            return then(
                frozenset(
                    (p.topic, p.partition) for p in wanted if (p.topic, p.partition) not in known
                )
            )

        return Ask(self.replica_manager, MetadataRequest(topics=topics), answered)


#: The states a transaction can be in, as DescribeTransactions and ListTransactions name them
#: (Kafka's TransactionState.name); a ListTransactions filter naming another is listed back
#: as unknown
TRANSACTION_STATES: Final = frozenset(
    {
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    }
)


def _timestamp(millis: int) -> datetime.datetime:
    """A kio datetime_i64 field: -1 (no transaction started) is written as the epoch's -1 ms."""
    return _EPOCH + datetime.timedelta(milliseconds=millis)
