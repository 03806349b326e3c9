"""Messages of transactions (KIP-98, Kafka 0.11 / 2.x): the transaction coordinator's requests,
the markers it has partition leaders write, and what the replica manager tells the coordinators.

The in-process `Producer` and the broker's `KafkaApis` send the same requests to
`broker/<id>/transaction-coordinator`; the coordinator sends `WriteTxnMarkersRequest` to each
partition leader's replica manager (in process by message, between processes over the wire as
WriteTxnMarkers, api key 27). Error codes are Kafka's; the wire layer maps PRODUCER_FENCED to
INVALID_PRODUCER_EPOCH for request versions older than KIP-588's.
"""

from __future__ import annotations

from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode

__all__ = [
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "TransactionDescription",
    "TxnMarkerEntry",
    "TxnMarkerPartitionResult",
    "TxnMarkerResult",
    "TxnOffsetCommitPartition",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "TxnOffsetsCompleted",
    "TxnPartition",
    "TxnPartitionError",
    "TxnStatePartitionElected",
    "TxnStatePartitionResigned",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


@message
class TxnPartition:
    """A topic partition named inside a transaction message."""

    topic: str = ""
    partition: int = 0


@message
class TxnPartitionError:
    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE


# -- the producer's requests to the transaction coordinator -------------------------------------


@message
class InitProducerIdRequest(Request):
    """Kafka's InitProducerId (api key 22) for a transactional id (None: an idempotent producer,
    answered from the broker's producer id blocks). `producer_id` / `producer_epoch` are v3+'s
    (KIP-360): a producer recovering from an abortable error names the id and epoch it has, and
    the coordinator bumps that epoch instead of fencing it."""

    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@message
class InitProducerIdResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@message
class AddPartitionsToTxnRequest(Request):
    """Kafka's AddPartitionsToTxn (api key 24): the partitions the producer is about to write in
    its open transaction (the coordinator records them before the producer sends records)."""

    transactional_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TxnPartition, ...] = ()


@message
class AddPartitionsToTxnResponse(Response):
    """One result per partition of the request (Kafka answers OPERATION_NOT_ATTEMPTED for the
    others when one partition fails its check)."""

    partitions: tuple[TxnPartitionError, ...] = ()


@message
class AddOffsetsToTxnRequest(Request):
    """Kafka's AddOffsetsToTxn (api key 25): the consumer group whose offsets the transaction
    will commit; the coordinator adds that group's `__consumer_offsets` partition."""

    transactional_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    group_id: str = ""


@message
class AddOffsetsToTxnResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE


@message
class EndTxnRequest(Request):
    """Kafka's EndTxn (api key 26): commit (`committed=True`) or abort the open transaction."""

    transactional_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    committed: bool = True


@message
class EndTxnResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE


# -- the producer's request to the group coordinator -------------------------------------------


@message
class TxnOffsetCommitPartition:
    topic: str = ""
    partition: int = 0
    offset: int = 0
    leader_epoch: int = -1
    metadata: str | None = ""


@message
class TxnOffsetCommitRequest(Request):
    """Kafka's TxnOffsetCommit (api key 28), sent to the group's coordinator: the offsets are
    written to `__consumer_offsets` as transactional records and stay pending until the
    transaction's marker reaches that partition (visible on COMMIT, dropped on ABORT). v3+
    carries the group generation and member (KIP-447); -1 / "" skip that check."""

    transactional_id: str = ""
    group_id: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    partitions: tuple[TxnOffsetCommitPartition, ...] = ()


@message
class TxnOffsetCommitResponse(Response):
    partitions: tuple[TxnPartitionError, ...] = ()


# -- the coordinator's markers to partition leaders ---------------------------------------------


@message
class TxnMarkerEntry:
    """One transaction's marker (Kafka's WritableTxnMarker): a COMMIT (`committed=True`) or
    ABORT control batch for producer id / epoch, stamped with the coordinator's epoch (the
    leader epoch of its `__transaction_state` partition), on each of `partitions`."""

    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    committed: bool = True
    coordinator_epoch: int = 0
    partitions: tuple[TxnPartition, ...] = ()


@message
class WriteTxnMarkersRequest(Request):
    """Kafka's WriteTxnMarkers (api key 27), to a broker's replica manager: append each entry's
    control batch to each named partition this broker leads (acks=all: answered once the ISR
    has it, or with the partition's error)."""

    markers: tuple[TxnMarkerEntry, ...] = ()


@message
class TxnMarkerPartitionResult:
    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE


@message
class TxnMarkerResult:
    producer_id: int = NO_PRODUCER_ID
    partitions: tuple[TxnMarkerPartitionResult, ...] = ()


@message
class WriteTxnMarkersResponse(Response):
    markers: tuple[TxnMarkerResult, ...] = ()


# -- from the replica manager to the coordinators ------------------------------------------------


@message
class TxnStatePartitionElected:
    """This broker became leader of `__transaction_state` partition `partition` in
    `leader_epoch` (the coordinator epoch): load its transactional ids, then complete the
    transactions it finds in PrepareCommit / PrepareAbort by sending their markers again."""

    partition: int = 0
    leader_epoch: int = 0


@message
class TxnStatePartitionResigned:
    """This broker no longer leads `__transaction_state` partition `partition`: unload its
    transactional ids and answer their waiting requests NOT_COORDINATOR."""

    partition: int = 0
    leader_epoch: int = -1


@message
class TxnOffsetsCompleted:
    """A transaction marker was written to `__consumer_offsets` partition `partition`: the
    group coordinator makes the producer's pending offsets there visible (`committed`) or drops
    them (Kafka's `GroupCoordinator.scheduleHandleTxnCompletion`)."""

    producer_id: int = NO_PRODUCER_ID
    committed: bool = True
    partition: int = 0


# -- describing transactions (KIP-664) -----------------------------------------------------------


@message
class DescribeTransactionsRequest(Request):
    transactional_ids: tuple[str, ...] = ()


@message
class TransactionDescription:
    transactional_id: str = ""
    error_code: ErrorCode = ErrorCode.NONE
    state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TxnPartition, ...] = ()


@message
class DescribeTransactionsResponse(Response):
    transactions: tuple[TransactionDescription, ...] = ()


@message
class ListTransactionsRequest(Request):
    state_filters: tuple[str, ...] = ()
    producer_id_filters: tuple[int, ...] = ()


@message
class ListTransactionsResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    transactions: tuple[TransactionDescription, ...] = ()
