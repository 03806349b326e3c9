"""The replication data path's messages: produce, fetch, metadata, controller requests, and the
partition snapshots a partition publishes to its broker's purgatories."""

from __future__ import annotations

from kafkactor.common import (
    NO_LEADER,
    BrokerEndpoint,
    LogOffsetMetadata,
    PartitionLeaderState,
    TopicPartition,
)
from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode
from kafkactor.messages.offsets import CONSUMER_REPLICA_ID, UNDEFINED_EPOCH

UNKNOWN_BROKER_EPOCH = -1  # a request that carries no broker epoch (no ZooKeeper): not checked


# -- produce -------------------------------------------------------------------------------------


@message
class ProducePartition:
    """One partition's part of a produce request: record batches built by the producer."""

    topic: str = ""
    partition: int = 0
    records: bytes = b""


@message
class ProduceRequest(Request):
    """Kafka's ProduceRequest: `acks` is 0 (no response), 1 (the leader's append) or -1 (the
    whole ISR); `timeout_ms` bounds the wait for acks=-1."""

    acks: int = 1
    timeout_ms: int = 30_000
    partitions: tuple[ProducePartition, ...] = ()
    # appended by a coordinator of this broker (Kafka's AppendOrigin.Coordinator): the group
    # coordinator's transactional offset commits skip the client's sequence checks; never set
    # from the wire
    from_coordinator: bool = False
    # the producer's transactional id (Produce v3+), None for a plain or idempotent producer
    transactional_id: str | None = None


@message
class ProduceRecordError:
    """One record a leader refused (KIP-467's BatchIndexAndErrorMessage): its index in its
    batch and Kafka's message for it."""

    batch_index: int = 0
    message: str | None = None


@message
class ProducePartitionResult:
    """How one partition of a produce request ended: an error code and the first offset.

    `log_append_time_ms` is the time the leader stamped the batches with on a
    `message.timestamp.type=LogAppendTime` topic, -1 on a CreateTime topic (Produce v2's
    field). A refusal by Kafka's LogValidator (INVALID_RECORD, INVALID_TIMESTAMP) names the
    refused records in `record_errors` and sums them up in `error_message` (Produce v8's
    fields, KIP-467).
    """

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1  # the leader's (Produce v5's field); -1 on an error
    record_errors: tuple[ProduceRecordError, ...] = ()
    error_message: str | None = None


@message
class ProduceResponse(Response):
    """Kafka's ProduceResponse: one result per partition of the request."""

    partitions: tuple[ProducePartitionResult, ...] = ()


# -- fetch ---------------------------------------------------------------------------------------


@message
class FetchPartition:
    """One partition's part of a fetch request: where to read from and at most how much, and
    the leader epoch the fetcher believes current (KIP-320; UNDEFINED_EPOCH: not checked)."""

    topic: str = ""
    partition: int = 0
    fetch_offset: int = 0
    max_bytes: int = 1024 * 1024
    current_leader_epoch: int = UNDEFINED_EPOCH
    log_start_offset: int = -1  # a follower's (Fetch v5+): the leader's low watermark needs it


@message
class FetchRequest(Request):
    """Kafka's FetchRequest: `replica_id` is the follower broker's id, or -1 for a consumer
    (which reads only up to the high watermark). The leader answers once `min_bytes` are
    available or `max_wait_ms` has passed."""

    replica_id: int = CONSUMER_REPLICA_ID
    max_wait_ms: int = 500
    min_bytes: int = 1
    partitions: tuple[FetchPartition, ...] = ()
    # the whole response's limit (KIP-74; Fetch v3+): partitions read in order, each within its
    # own max_bytes and what is left of this; the first batch read is returned whole anyway
    max_bytes: int = 2**31 - 1
    # Fetch v4+ (KIP-98): READ_UNCOMMITTED (0) reads up to the high watermark, READ_COMMITTED
    # (1) up to the last stable offset and is told the aborted transactions in what it reads
    isolation_level: int = 0


@message
class AbortedTransaction:
    """An aborted transaction in a fetched range (Fetch v4+'s AbortedTransaction): a
    read_committed consumer drops `producer_id`'s records from `first_offset` until that
    producer's ABORT marker."""

    producer_id: int = -1
    first_offset: int = 0


@message
class FetchPartitionData:
    """One partition's part of a fetch response: whole record batches and the leader's HW."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    log_end_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    # the partition's last stable offset (Fetch v4+); -1 when not known (a follower's fetch)
    last_stable_offset: int = -1
    # read_committed only: the aborted transactions overlapping the records returned
    aborted_transactions: tuple[AbortedTransaction, ...] = ()


@message
class FetchResponse(Response):
    """Kafka's FetchResponse."""

    partitions: tuple[FetchPartitionData, ...] = ()


# -- metadata ------------------------------------------------------------------------------------


@message
class MetadataRequest(Request):
    """Which brokers are alive and who leads each partition of `topics` (all when empty)."""

    topics: tuple[str, ...] = ()
    # the listener the client's request came in on: the brokers are answered at that
    # listener's endpoints, those without it left out (Kafka's Metadata); "": every broker
    # with a listener, at its inter-broker endpoint
    listener: str = ""


@message
class PartitionMetadata:
    """A partition as a broker's metadata cache knows it."""

    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    leader: int = NO_LEADER
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader_epoch: int = -1
    offline_replicas: tuple[int, ...] = ()


@message
class TopicMetadata:
    topic: str = ""
    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[PartitionMetadata, ...] = ()
    topic_id: str = ""  # Kafka's base64 Uuid (KIP-516); "" when unknown (the zero uuid)


@message
class MetadataResponse(Response):
    brokers: tuple[int, ...] = ()
    topics: tuple[TopicMetadata, ...] = ()
    endpoints: tuple[BrokerEndpoint, ...] = ()  # of the live brokers that have a listener
    controller_id: int = -1


# -- controller requests -------------------------------------------------------------------------


@message
class LeaderAndIsr(Request):
    """The controller tells a broker to lead or follow these partitions."""

    controller_id: int = 0
    controller_epoch: int = 0
    # the recipient's broker epoch as the controller knows it (KIP-380): a stale one is refused
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    partition_states: tuple[PartitionLeaderState, ...] = ()
    # the ids of the topics in partition_states (KIP-516; LeaderAndIsr v5+ between processes):
    # a replica whose directory records another id refuses with INCONSISTENT_TOPIC_ID
    topic_ids: tuple[TopicIdentity, ...] = ()


@message
class PartitionError:
    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE


@message
class LeaderAndIsrResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[PartitionError, ...] = ()


@message
class StopReplica(Request):
    """The controller tells a broker to stop serving these replicas (and delete them)."""

    controller_id: int = 0
    controller_epoch: int = 0
    # the recipient's broker epoch as the controller knows it (KIP-380): a stale one is refused
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    delete_partitions: bool = False
    partitions: tuple[TopicPartition, ...] = ()


@message
class StopReplicaResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[PartitionError, ...] = ()


@message
class TopicIdentity:
    """A topic's id (KIP-516) in Kafka's base64 form, as UpdateMetadata v7+ carries it."""

    topic: str = ""
    topic_id: str = ""


@message
class UpdateMetadata(Request):
    """The controller's view of leaders, ISRs and live brokers, for the metadata cache."""

    controller_id: int = 0
    controller_epoch: int = 0
    # the recipient's broker epoch as the controller knows it (KIP-380): a stale one is refused
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    partition_states: tuple[PartitionLeaderState, ...] = ()
    live_brokers: tuple[int, ...] = ()
    endpoints: tuple[BrokerEndpoint, ...] = ()  # the live brokers' registered endpoints
    topic_ids: tuple[TopicIdentity, ...] = ()  # of the topics in partition_states (KIP-516)


@message
class UpdateMetadataResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE


# -- partition snapshots to the purgatories ------------------------------------------------------


@message
class PartitionSnapshot:
    """A partition replica's state as its purgatories need it, at one moment.

    `exists` is False once the replica stopped (`still_known`: while the broker's metadata
    still names the partition, a replica moved away rather than a topic deleted); `is_leader`
    says whether this broker leads it.
    DelayedProduce reads the HW, ISR size and min ISR; DelayedFetch the HW, last stable offset
    and log end positions. `last_stable_offset` is Kafka's LSO (KIP-98): the first offset of
    a transaction still open (or whose marker the ISR does not have yet), the HW when there is
    none; None in a snapshot that does not say it (read as the HW).
    """

    key: str = ""
    topic: str = ""
    partition: int = 0
    exists: bool = True
    still_known: bool = False
    is_leader: bool = False
    leader: int = NO_LEADER
    leader_epoch: int = 0
    isr: tuple[int, ...] = ()
    min_insync_replicas: int = 1
    log_start_offset: int = 0
    high_watermark: LogOffsetMetadata = LogOffsetMetadata()
    log_end: LogOffsetMetadata = LogOffsetMetadata()
    low_watermark: int = -1  # to the DeleteRecords purgatory only; -1 elsewhere
    last_stable_offset: LogOffsetMetadata | None = None

    @property
    def stable_end(self) -> LogOffsetMetadata:
        """Where a read_committed consumer's reads end: the LSO (the HW when not said)."""
        lso = self.last_stable_offset
        return lso if lso is not None else self.high_watermark


@message
class LogEndOffsetAdvanced(PartitionSnapshot):
    """The leader appended: follower fetches waiting on this partition may complete."""


@message
class HighWatermarkAdvanced(PartitionSnapshot):
    """The HW moved (or the ISR changed): acks=-1 produces and consumer fetches may complete."""


@message
class LowWatermarkAdvanced(PartitionSnapshot):
    """The low watermark moved (a DeleteRecords, or a follower's log start): DeleteRecords
    waiting on this partition may complete."""


@message
class LeadershipChanged(PartitionSnapshot):
    """The replica became leader or follower, or stopped: waiting operations re-check."""


# -- delayed operation specs ---------------------------------------------------------------------


@message
class ProducePartitionStatus:
    """One partition of a delayed produce: the offset the ISR must reach, or an early error."""

    topic: str = ""
    partition: int = 0
    required_offset: int = 0
    base_offset: int = -1
    error_code: ErrorCode = ErrorCode.NONE
    log_start_offset: int = -1
    log_append_time_ms: int = -1
    record_errors: tuple[ProduceRecordError, ...] = ()
    error_message: str | None = None


@message
class ProduceSpec:
    """A DelayedProduce: acks=-1 waits until every partition's HW passes its last offset."""

    partitions: tuple[ProducePartitionStatus, ...] = ()
    received_ms: int = -1  # when the replica manager received the request (its latency base)


@message
class FetchSpec:
    """A DelayedFetch: the fetch request, waiting for `min_bytes` or its max wait."""

    replica_id: int = CONSUMER_REPLICA_ID
    min_bytes: int = 1
    partitions: tuple[FetchPartition, ...] = ()
    max_bytes: int = 2**31 - 1  # the whole response's (KIP-74)
    received_ms: int = -1  # when the replica manager received the request (its latency base)
    isolation_level: int = 0  # the request's: READ_COMMITTED (1) waits on and reads to the LSO
    offline: tuple[str, ...] = ()  # partitions whose log the broker could not open


# -- replica fetchers ----------------------------------------------------------------------------


@message
class FetcherPartition:
    """A partition a fetcher replicates: where its follower log ends, the leader's epoch, and
    whether it must first find its truncation point (a new leader) from its `latest_epoch`."""

    topic: str = ""
    partition: int = 0
    fetch_offset: int = 0
    leader_epoch: int = 0
    truncate: bool = False
    latest_epoch: int = UNDEFINED_EPOCH


@message
class AddFetcherPartitions:
    partitions: tuple[FetcherPartition, ...] = ()


@message
class RemoveFetcherPartitions:
    partitions: tuple[TopicPartition, ...] = ()


@message
class FetchAgain:
    """A fetcher's backoff has passed: fetch again."""


@message
class FetchTimedOut:
    """A fetcher's request got no answer within its max wait plus the socket timeout."""

    correlation_id: int = 0


# -- introspection -------------------------------------------------------------------------------


@message
class DescribePartition(Request):
    """Ask a partition actor for its state (tests, tools, the CLI)."""


@message
class PartitionDescription(Response):
    """A partition replica's state as its actor holds it."""

    topic: str = ""
    partition: int = 0
    broker: int = 0
    is_leader: bool = False
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    log_start_offset: int = 0
    log_end_offset: int = 0
    high_watermark: int = 0
    follower_log_end_offsets: tuple[tuple[int, int], ...] = ()
    last_stable_offset: int = 0  # KIP-98's LSO: the HW unless a transaction is open below it
