"""The messages between a broker's replica manager, its partition actors and its replica
fetchers (Kafka's calls from `ReplicaManager` into `Partition`, made messages here): appends as
leader and as follower, leadership changes, truncation, ISR shrinking, stopping a replica."""

from __future__ import annotations

from kafkactor.common import PartitionLeaderState
from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode
from kafkactor.messages.offsets import UNDEFINED_EPOCH, EpochEndOffset
from kafkactor.messages.replication import ProduceRecordError


@message
class AppendRecords(Request):
    """Append a producer's batches to a partition as its leader.

    The partition answers `reply_to` with an `AppendResult`, unless `answers_producer`: then
    `reply_to` and `correlation_id` are the producer's (a ProduceRequest of this one partition,
    acks 1 or -1) and the partition finishes the request itself. With acks=1 it answers the
    producer's `ProduceResponse`; with acks=-1 it hands a `DelayOperation` to the produce
    purgatory (`timeout_ms`, and `received_ms` for the request log).
    """

    topic: str = ""
    partition: int = 0
    records: bytes = b""
    acks: int = 1
    answers_producer: bool = False
    timeout_ms: int = 0
    received_ms: int = 0
    # a coordinator of this broker appends (Kafka's AppendOrigin.Coordinator): no sequence
    # checks; from ProduceRequest.from_coordinator, never from the wire
    from_coordinator: bool = False


@message
class AppendTxnMarker(Request):
    """Append one transaction marker (a COMMIT or ABORT control batch of `producer_id` /
    `producer_epoch`, stamped with the coordinator's epoch) to a partition as its leader, with
    Kafka's AppendOrigin.Coordinator, as acks=-1 (refused with NOT_ENOUGH_REPLICAS when the
    ISR is below `min.insync.replicas`). Answered with an `AppendResult` naming the marker's
    offset; the replica manager then waits for the ISR in the produce purgatory."""

    topic: str = ""
    partition: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    committed: bool = True
    coordinator_epoch: int = 0


@message
class AppendResult(Response):
    """What a leader append did: the offsets assigned, or why it failed."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    message: str = ""
    first_offset: int = -1
    last_offset: int = -1
    log_start_offset: int = -1  # the leader's, after the append (Produce v5's field)
    log_append_time_ms: int = -1  # a LogAppendTime topic's stamp, else -1
    record_errors: tuple[ProduceRecordError, ...] = ()  # the records the leader refused
    error_message: str | None = None  # for the producer, with record_errors


@message
class BecomeLeaderOrFollower(Request):
    """Apply a controller's partition state to one partition replica."""

    state: PartitionLeaderState = PartitionLeaderState()
    topic_id: str = ""  # the topic's id the controller sent (KIP-516); "" when it sent none


@message
class PartitionStateApplied(Response):
    """What a replica did with a controller's partition state. `truncate` is True when it
    started following a new leader and must find its truncation point with
    OffsetsForLeaderEpoch before fetching; False when it leads, or follows the same leader
    as before (an ISR change: nothing to truncate)."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    is_leader: bool = False
    log_end_offset: int = 0
    high_watermark: int = 0
    truncate: bool = False
    latest_epoch: int = UNDEFINED_EPOCH
    message: str = ""  # why it refused (KAFKA_STORAGE_ERROR: the errno, message and file)


@message
class FollowerFetchPosition:
    """A follower fetched from `fetch_offset`: everything below it is on the follower's log."""

    topic: str = ""
    partition: int = 0
    replica_id: int = 0
    fetch_offset: int = 0
    log_start_offset: int = -1  # the follower's, as its fetch says (-1: not said)
    # fetches the replica manager did not tell found the follower at the leader's log end,
    # `caught_up_offset`, the latest at `caught_up_ms` (-1: none; `FollowerPositions`)
    caught_up_offset: int = -1
    caught_up_ms: int = -1


@message
class AppendAsFollower(Request):
    """Append batches fetched from the leader, keeping their offsets."""

    topic: str = ""
    partition: int = 0
    records: bytes = b""
    leader_epoch: int = 0  # the epoch the fetcher followed: one from another leader is refused
    leader_high_watermark: int = 0
    leader_log_start_offset: int = -1  # the follower's log start follows it (-1: not known)


@message
class TruncateFollower(Request):
    """Cut a follower's log before it fetches from its leader.

    With `epoch_end` (the leader's OffsetsForLeaderEpoch answer) the follower truncates as
    KIP-101 / KIP-279 say; an undefined answer (no epochs on either side) falls back to the
    follower's high watermark. With `start_at` >= 0 the follower fell behind the leader's log
    start: its log is emptied and starts there (Kafka's truncateFullyAndStartAt).
    """

    topic: str = ""
    partition: int = 0
    leader_epoch: int = 0  # the epoch the fetcher followed: one from another leader is refused
    epoch_end: EpochEndOffset | None = None
    start_at: int = -1


@message
class FollowerTruncated(Response):
    """Where a follower's log ends after a truncation step, and whether truncation is done
    (False: the leader's answer named an epoch this replica does not have; ask again with
    `latest_epoch`, KIP-279)."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    message: str = ""
    log_end_offset: int = 0
    latest_epoch: int = UNDEFINED_EPOCH
    completed: bool = True
    log_start_offset: int = -1


@message
class FollowerAppended(Response):
    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    message: str = ""
    log_end_offset: int = 0
    latest_epoch: int = UNDEFINED_EPOCH  # the latest leader epoch in the follower's log
    log_start_offset: int = -1  # the follower's, which its next fetch tells the leader


@message
class MaybeShrinkIsr:
    """Time to drop followers that have not caught up for `replica.lag.time.max.ms`.
    `caught_up`: (follower, offset, when) of the latest fetches the replica manager did not
    tell the partition, each of which found the follower at the leader's log end, `offset`."""

    caught_up: tuple[tuple[int, int, int], ...] = ()


@message
class StopPartition(Request):
    """Stop serving this replica (StopReplica); its purgatory operations end. `still_known`:
    the broker's metadata still names the partition (its replica moves elsewhere, or the
    broker shuts down), so they end with NOT_LEADER_FOR_PARTITION rather than
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka's `getPartitionOrError` answers."""

    topic: str = ""
    partition: int = 0
    delete: bool = False
    still_known: bool = False
