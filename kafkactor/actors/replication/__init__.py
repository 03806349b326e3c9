"""The replication data path: Kafka's ReplicaManager, Partition, ReplicaFetcher and delayed ops.

`PartitionState` is the pure core of one replica (leader, ISR, log end offsets, high
watermark); a `PartitionActor` owns it and the replica's log. The `ReplicaManagerActor` is a
broker's front door for produce, fetch and the controller's requests; `ReplicaFetcherActor`
copies a leader's logs to a follower; `DelayedProduce` and `DelayedFetch` wait in the
`ReplicaPurgatoryActor`s."""

from kafkactor.actors.replication import request_log
from kafkactor.actors.replication.config import VALID_ACKS, ReplicaManagerConfig
from kafkactor.actors.replication.delayed_fetch import DelayedFetch
from kafkactor.actors.replication.delayed_produce import (
    DelayedProduce,
    check_enough_replicas_reach_offset,
)
from kafkactor.actors.replication.epoch_truncation import TruncationPoint, truncation_point
from kafkactor.actors.replication.fetcher_manager import ReplicaFetcherManager
from kafkactor.actors.replication.fetcher_state import (
    FetcherState,
    NextRequests,
    PartitionFetchState,
)
from kafkactor.actors.replication.high_watermarks import (
    REPLICATION_OFFSET_CHECKPOINT,
    HighWatermarks,
)
from kafkactor.actors.replication.metadata_cache import MetadataCache
from kafkactor.actors.replication.partition import (
    UNKNOWN_OFFSET,
    FollowerFetchOutcome,
    FollowerProgress,
    PartitionState,
    PendingIsrChange,
)
from kafkactor.actors.replication.partition_actor import PartitionActor, storage_error_code
from kafkactor.actors.replication.replica_fetcher import ReplicaFetcherActor
from kafkactor.actors.replication.replica_manager import ReplicaManagerActor
from kafkactor.actors.replication.replica_purgatory import ReplicaPurgatoryActor
from kafkactor.actors.replication.scatter_gather import Gather, ScatterGather

__all__ = [
    "REPLICATION_OFFSET_CHECKPOINT",
    "UNKNOWN_OFFSET",
    "VALID_ACKS",
    "DelayedFetch",
    "DelayedProduce",
    "FetcherState",
    "FollowerFetchOutcome",
    "FollowerProgress",
    "Gather",
    "HighWatermarks",
    "MetadataCache",
    "NextRequests",
    "PartitionActor",
    "PartitionFetchState",
    "PartitionState",
    "PendingIsrChange",
    "ReplicaFetcherActor",
    "ReplicaFetcherManager",
    "ReplicaManagerActor",
    "ReplicaManagerConfig",
    "ReplicaPurgatoryActor",
    "ScatterGather",
    "TruncationPoint",
    "check_enough_replicas_reach_offset",
    "request_log",
    "storage_error_code",
    "truncation_point",
]
