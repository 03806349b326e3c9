"""A broker's ReplicaManager: the front door of produce, fetch and the controller's requests."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import pykka

from kafkactor.actors.controller import ZooKeeperSession, zk_data
from kafkactor.actors.replication.config import VALID_ACKS, ReplicaManagerConfig
from kafkactor.actors.replication.delayed_delete_records import (
    DeleteRecordsRequest,
    DescribeLogDirsRequest,
    delete_records_outcome,
    plan_delete_records,
)
from kafkactor.actors.replication.delayed_produce import (
    delay_produce,
    produce_result,
    produce_status,
)
from kafkactor.actors.replication.fetcher_manager import ReplicaFetcherManager
from kafkactor.actors.replication.follower_positions import FollowerPositions
from kafkactor.actors.replication.high_watermarks import HighWatermarks
from kafkactor.actors.replication.list_offsets import READ_COMMITTED, offset_for_timestamp
from kafkactor.actors.replication.log_dirs import describe_log_dirs
from kafkactor.actors.replication.metadata_cache import MetadataCache
from kafkactor.actors.replication.partition import PartitionState
from kafkactor.actors.replication.partition_actor import PartitionActor
from kafkactor.actors.replication.request_log import (
    log_fetch_request,
    log_fetch_response,
    log_produce_request,
    log_produce_response,
)
from kafkactor.actors.replication.scatter_gather import ScatterGather
from kafkactor.actors.replication.storage_failures import (
    OfflinePartitions,
    StorageFailure,
    log_storage_error,
)
from kafkactor.actors.replication.topic_purgatory import topic_changes
from kafkactor.actors.replication.txn_markers import (
    marker_waits,
    markers_outcome,
    plan_write_txn_markers,
)
from kafkactor.actors.runtime import (
    Directory,
    TraceContext,
    TracedActor,
    addresses,
    handles,
    stop_actor,
)
from kafkactor.common import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    PartitionLeaderState,
    TopicPartition,
    endpoints_on,
)
from kafkactor.messages import ErrorCode, ErrorResponse, Request, Response
from kafkactor.messages.config import TopicConfigChanged, UpdateLogConfig
from kafkactor.messages.group import (
    OffsetsPartitionElected,
    OffsetsPartitionLoading,
    OffsetsPartitionResigned,
    OffsetsPartitionsKnown,
)
from kafkactor.messages.offsets import (
    UNDEFINED_EPOCH,
    EpochEndOffset,
    ListOffsetsPartitionResult,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.partition import (
    AppendRecords,
    BecomeLeaderOrFollower,
    FollowerFetchPosition,
    MaybeShrinkIsr,
    PartitionStateApplied,
    StopPartition,
)
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import (
    FetcherPartition,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchSpec,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionError,
    ProducePartitionResult,
    ProducePartitionStatus,
    ProduceRequest,
    ProduceResponse,
    StopReplica,
    StopReplicaResponse,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.messages.transaction import (
    TxnStatePartitionElected,
    TxnStatePartitionResigned,
    WriteTxnMarkersRequest,
)
from kafkactor.storage import Log, LogConfig, LogManager, StorageError
from kafkactor.timer import Clock, Scheduler, Timer


@dataclass(slots=True)
class LocalReplica:
    """A partition replica this broker holds: its actor and what the RM knows of it."""

    topic: str
    partition: int
    address: str
    ref: pykka.ActorRef[Any]
    log: Log
    is_leader: bool = False
    leader: int = -1
    leader_epoch: int = -1
    stopped: bool = False  # a StopReplica is stopping it: no LeaderAndIsr may revive it
    followers: FollowerPositions | None = None  # what its actor was told of their fetches
    replicas: tuple[int, ...] = ()  # its assigned replicas, as the last LeaderAndIsr applied


class ReplicaManagerActor(TracedActor):
    """Kafka's `ReplicaManager` for one broker, as an actor.

    - **Produce** (acks 0, 1 or -1; any other value is INVALID_REQUIRED_ACKS): each partition's
      batches go to its `PartitionActor`; acks=1 answers when the appends are done, acks=0
      never answers, acks=-1 hands a `DelayedProduce` to the produce purgatory, which answers
      the producer itself.
    - **Fetch**: a follower's fetch first tells each partition where the follower is (its log
      end); then every fetch becomes a `DelayedFetch` in the fetch purgatory, which answers.
    - **Controller requests**: `LeaderAndIsr` creates partition actors and logs as needed and
      makes each replica leader or follower (a follower's fetcher is started or moved);
      `StopReplica` stops (and maybe deletes) replicas; `UpdateMetadata` fills the metadata
      cache that answers `MetadataRequest`. A request from an older controller epoch is
      rejected with STALE_CONTROLLER_EPOCH, one meant for an earlier registration of this
      broker (an older broker epoch, KIP-380) with STALE_BROKER_EPOCH.
    - **OffsetsForLeaderEpoch**: a follower of a partition this broker leads asks where one of
      its epochs ends in the leader's log (KIP-101); the answer comes from the log's leader
      epoch cache.
    - Periodically it asks its leader partitions to shrink their ISR and checkpoints the high
      watermarks.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        clock: Clock,
        broker: int,
        *,
        log_manager: LogManager,
        high_watermarks: HighWatermarks,
        timer: Timer,
        scheduler: Scheduler,
        topic_configs: MutableMapping[str, LogConfig],
        logs: MutableMapping[str, Log],
        config: ReplicaManagerConfig | None = None,
        zk: ZooKeeperSession | None = None,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.broker_id = broker
        self.zk = zk  # leaders write ISR changes through it (None: no ZooKeeper)
        self.log_manager = log_manager
        self.high_watermarks = high_watermarks
        self.timer = timer
        self.scheduler = scheduler
        self.topic_configs = topic_configs
        self.logs = logs
        self.config = config if config is not None else ReplicaManagerConfig()
        self.controller_epoch = -1
        self.replicas: dict[str, LocalReplica] = {}
        self.fetcher_manager = ReplicaFetcherManager(
            broker=broker,
            directory=directory,
            clock=clock,
            timer=timer,
            config=self.config,
            send=self.send,
        )
        self.metadata_cache = MetadataCache()
        self.offline = OfflinePartitions()  # logs that failed to open: KAFKA_STORAGE_ERROR
        self._offsets_partitions_told: frozenset[int] = frozenset()
        self._topics_told: dict[str, frozenset[int]] = {}  # the topic purgatory's view
        self._fan_outs = ScatterGather()
        self._jobs: list[Any] = []

    # -- lifecycle -------------------------------------------------------------------------------

    def on_start(self) -> None:
        super().on_start()
        lag = self.config.replica_lag_time_max_ms
        checkpoint_every = self.config.high_watermark_checkpoint_interval_ms
        self._jobs = [
            self.scheduler.schedule(
                "isr-expiration",
                lambda: self.directory.tell(self.address, MaybeShrinkIsr()),
                delay_ms=max(1, lag // 2),
                period_ms=max(1, lag // 2),
            ),
            self.scheduler.schedule(
                "highwatermark-checkpoint",
                self.high_watermarks.checkpoint,
                delay_ms=checkpoint_every,
                period_ms=checkpoint_every,
            ),
        ]

    def on_stop(self) -> None:
        for job in self._jobs:
            job.cancel()
        for ref in [*self.fetcher_manager.refs(), *(r.ref for r in self.replicas.values())]:
            stop_actor(ref, timeout=10)  # inline for a partition on this actor's dispatcher
        self._abort_gathers()
        super().on_stop()

    def _abort_gathers(self) -> None:
        """Answer every request still waiting for its partitions: the broker is going away."""
        for gather in self._fan_outs.abort():
            origin = gather.origin
            if origin is None:
                continue
            if isinstance(origin, ProduceRequest) and origin.acks == 0:
                continue
            self.reply(
                origin,
                ErrorResponse(
                    error_code=ErrorCode.BROKER_NOT_AVAILABLE,
                    message=f"broker {self.broker_id} stopped while serving the request",
                ),
                trace=gather.trace,
            )

    # -- produce ---------------------------------------------------------------------------------

    @handles(ProduceRequest)
    def _on_produce(self, request: ProduceRequest) -> None:
        received_ms = self.clock.now_ms()
        log_produce_request(self, request)
        if request.acks not in VALID_ACKS:
            self._answer_produce(
                request,
                received_ms,
                [
                    ProducePartitionResult(
                        topic=p.topic,
                        partition=p.partition,
                        error_code=ErrorCode.INVALID_REQUIRED_ACKS,
                    )
                    for p in request.partitions
                ],
                force=True,
            )
            return
        early: dict[str, ProducePartitionResult] = {}
        appends: dict[str, tuple[LocalReplica, AppendRecords]] = {}
        for part in request.partitions:
            key = str(TopicPartition.of(part))
            replica = self.replicas.get(key)
            error = self._leader_error(part.topic, part.partition, replica)
            if error is not ErrorCode.NONE or replica is None:
                early[key] = ProducePartitionResult(
                    topic=part.topic, partition=part.partition, error_code=error
                )
                continue
            appends[key] = (
                replica,
                AppendRecords(
                    topic=part.topic,
                    partition=part.partition,
                    records=part.records,
                    acks=request.acks,
                    from_coordinator=request.from_coordinator,
                ),
            )
        if not appends:
            self._answer_produce(request, received_ms, [early[k] for k in early])
            return
        if len(appends) == 1 and not early and request.acks != 0:
            # One partition: nothing to gather, so the partition finishes the request itself
            # (answers acks=1, hands acks=-1 to the produce purgatory); one hop fewer.
            [(replica, append)] = appends.values()
            self.send(
                replica.address,
                dataclasses.replace(
                    append,
                    reply_to=request.reply_to,
                    correlation_id=request.correlation_id,
                    answers_producer=True,
                    timeout_ms=request.timeout_ms,
                    received_ms=received_ms,
                ),
            )
            return
        trace = self.trace_context

        def appended(responses: dict[str, Response]) -> None:
            self._appended(request, received_ms, trace, early, responses)

        self._fan_out(
            {key: (replica.address, append) for key, (replica, append) in appends.items()},
            appended,
            origin=request,
        )

    def _appended(
        self,
        request: ProduceRequest,
        received_ms: int,
        trace: TraceContext | None,
        early: dict[str, ProducePartitionResult],
        responses: dict[str, Response],
    ) -> None:
        statuses = []
        for part in request.partitions:
            key = str(TopicPartition.of(part))
            if key in early:
                status = ProducePartitionStatus(
                    topic=part.topic, partition=part.partition, error_code=early[key].error_code
                )
            else:
                status = produce_status(part.topic, part.partition, responses.get(key))
            statuses.append(status)
        waiting = any(s.error_code is ErrorCode.NONE for s in statuses)
        if request.acks != -1 or not waiting:
            results = [produce_result(s) for s in statuses]
            self._answer_produce(request, received_ms, results, trace=trace)
            return
        self.send(
            addresses.produce_purgatory(self.broker_id),
            delay_produce(
                request.reply_to,
                request.correlation_id,
                tuple(statuses),
                received_ms=received_ms,
                timeout_ms=request.timeout_ms,
            ),
        )

    def _answer_produce(
        self,
        request: ProduceRequest,
        received_ms: int,
        results: list[ProducePartitionResult],
        *,
        trace: TraceContext | None = None,
        force: bool = False,
    ) -> None:
        if request.acks == 0 and not force:
            return  # acks=0: the producer expects no response
        log_produce_response(
            self,
            acks=request.acks,
            correlation_id=request.correlation_id,
            results=results,
            received_ms=received_ms,
            waited=False,
            trace=trace,
        )
        self.reply(request, ProduceResponse(partitions=tuple(results)), trace=trace)

    def _leader_error(
        self,
        topic: str,
        partition: int,
        replica: LocalReplica | None,
        current_leader_epoch: int = UNDEFINED_EPOCH,
    ) -> ErrorCode:
        """NONE when this broker leads the partition (in `current_leader_epoch`, when the
        caller names one: an older one is FENCED_LEADER_EPOCH, a newer UNKNOWN_LEADER_EPOCH)."""
        if self.offline and f"{topic}-{partition}" in self.offline:
            return ErrorCode.KAFKA_STORAGE_ERROR  # Kafka's HostedPartition.Offline
        if replica is not None and replica.is_leader:
            if current_leader_epoch < 0 or current_leader_epoch == replica.leader_epoch:
                return ErrorCode.NONE
            if current_leader_epoch < replica.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if replica is None and not self.metadata_cache.knows(topic, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return ErrorCode.NOT_LEADER_FOR_PARTITION

    # -- transaction markers (KIP-98) --------------------------------------------------------------

    @handles(WriteTxnMarkersRequest)
    def _on_write_txn_markers(self, request: WriteTxnMarkersRequest) -> None:
        """Kafka's `handleWriteTxnMarkersRequest` (txn_markers.py): each marker appended by the
        partitions this broker leads, acks=all through the produce purgatory, one answer; the
        group coordinator hears of each acknowledged marker on `__consumer_offsets`."""
        received_ms = self.clock.now_ms()
        trace = self.trace_context
        plan = plan_write_txn_markers(request, self._marker_target)

        def acknowledged(acks: dict[str, Response]) -> None:
            outcome = markers_outcome(request, plan, acks)
            for completed in outcome.offsets_completed:
                self.send(addresses.group_coordinator(self.broker_id), completed, trace=trace)
            self.reply(request, outcome.response, trace=trace)

        def appended(answers: dict[str, Response]) -> None:
            waits = marker_waits(request, plan, answers, received_ms=received_ms)
            purgatory = addresses.produce_purgatory(self.broker_id)
            if not waits:
                acknowledged({})
                return
            self._fan_out(
                {key: (purgatory, wait) for key, wait in waits.items()},
                acknowledged,
                origin=request,
            )

        if not plan.orders:
            appended({})
            return
        self._fan_out(dict(plan.orders), appended, origin=request)

    def _marker_target(self, topic: str, partition: int) -> tuple[str | None, ErrorCode]:
        """The leader partition's address, or why a marker cannot go there: no replica here
        is UNKNOWN_TOPIC_OR_PARTITION (Kafka's `getMagic` finds no log), a follower's
        NOT_LEADER_FOR_PARTITION."""
        replica = self.replicas.get(f"{topic}-{partition}")
        if f"{topic}-{partition}" in self.offline:
            return None, ErrorCode.KAFKA_STORAGE_ERROR
        if replica is None:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not replica.is_leader or replica.stopped:
            return None, ErrorCode.NOT_LEADER_FOR_PARTITION
        return replica.address, ErrorCode.NONE

    # -- fetch -----------------------------------------------------------------------------------

    @handles(FetchRequest)
    def _on_fetch(self, request: FetchRequest) -> None:
        received_ms = self.clock.now_ms()
        log_fetch_request(self, request)
        if not request.partitions:
            self._answer_fetch(request, received_ms, ())
            return
        if any(p.max_bytes < 0 for p in request.partitions):
            self._answer_fetch(
                request,
                received_ms,
                tuple(
                    FetchPartitionData(
                        topic=p.topic,
                        partition=p.partition,
                        error_code=ErrorCode.INVALID_FETCH_SIZE,
                    )
                    for p in request.partitions
                ),
            )
            return
        keys = tuple(f"{p.topic}-{p.partition}" for p in request.partitions)  # str(tp)
        if request.replica_id >= 0:  # a follower: its fetch offset is its log end
            for key, part in zip(keys, request.partitions, strict=True):
                replica = self.replicas.get(key)
                # a fetch in an older (or not yet known) leader epoch moves nothing: it is
                # answered FENCED_LEADER_EPOCH (UNKNOWN_LEADER_EPOCH) by the purgatory (KIP-320)
                if (
                    replica is not None
                    and replica.is_leader
                    and (
                        part.current_leader_epoch < 0
                        or part.current_leader_epoch == replica.leader_epoch
                    )
                ):
                    self._follower_fetched(replica, request.replica_id, part, received_ms)
        self.send(
            addresses.fetch_purgatory(self.broker_id),
            DelayOperation(
                reply_to=request.reply_to,
                correlation_id=request.correlation_id,
                operation=FetchSpec(
                    replica_id=request.replica_id,
                    min_bytes=request.min_bytes,
                    partitions=request.partitions,
                    max_bytes=request.max_bytes,
                    received_ms=received_ms,
                    isolation_level=request.isolation_level,
                    offline=tuple(
                        key
                        for p in request.partitions
                        if (key := str(TopicPartition.of(p))) in self.offline
                    )
                    if self.offline
                    else (),
                ),
                keys=keys,
                timeout_ms=max(0, request.max_wait_ms),
            ),
        )

    def _follower_fetched(
        self, replica: LocalReplica, follower: int, part: FetchPartition, now_ms: int
    ) -> None:
        """Tell the leader partition's actor a follower's position, unless it changes nothing
        there (`FollowerPositions`: caught up as last told)."""
        if replica.followers is None:
            replica.followers = FollowerPositions(self.config.replica_lag_time_max_ms)
        caught_up = replica.followers.fetched(
            follower,
            leader_epoch=replica.leader_epoch,
            fetch_offset=part.fetch_offset,
            log_start_offset=part.log_start_offset,
            leader_log_end=replica.log.log_end_offset,
            now_ms=now_ms,
        )
        if caught_up is None:
            return
        self.send(
            replica.address,
            FollowerFetchPosition(
                topic=part.topic,
                partition=part.partition,
                replica_id=follower,
                fetch_offset=part.fetch_offset,
                log_start_offset=part.log_start_offset,
                caught_up_offset=caught_up[0],
                caught_up_ms=caught_up[1],
            ),
        )

    def _answer_fetch(
        self, request: FetchRequest, received_ms: int, partitions: tuple[FetchPartitionData, ...]
    ) -> None:
        log_fetch_response(
            self,
            replica_id=request.replica_id,
            correlation_id=request.correlation_id,
            partitions=partitions,
            received_ms=received_ms,
            waited=False,
        )
        self.reply(request, FetchResponse(partitions=partitions))

    # -- leader epochs -----------------------------------------------------------------------------

    @handles(OffsetsForLeaderEpochRequest)
    def _on_offsets_for_leader_epoch(self, request: OffsetsForLeaderEpochRequest) -> None:
        """Where each asked epoch ends in this leader's log (Kafka's
        `Partition.lastOffsetForLeaderEpoch`). A follower whose current leader epoch is older
        than this leader's gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH (this
        broker has not heard of it yet); both retry after the controller's news arrives."""
        answers = []
        for part in request.partitions:
            replica = self.replicas.get(str(TopicPartition.of(part)))
            error = self._leader_error(
                part.topic, part.partition, replica, part.current_leader_epoch
            )
            if replica is None or error is not ErrorCode.NONE:
                answers.append(
                    EpochEndOffset(topic=part.topic, partition=part.partition, error_code=error)
                )
                continue
            epoch, end_offset = replica.log.end_offset_for_epoch(part.leader_epoch)
            answers.append(
                EpochEndOffset(
                    topic=part.topic,
                    partition=part.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        self.reply(request, OffsetsForLeaderEpochResponse(partitions=tuple(answers)))

    # -- DeleteRecords (KIP-107) and DescribeLogDirs ----------------------------------------------

    @handles(DeleteRecordsRequest)
    def _on_delete_records(self, request: DeleteRecordsRequest) -> None:
        """Kafka's `ReplicaManager.deleteRecords`: each leader partition moves its log start;
        the answer comes now, or from the DeleteRecords purgatory once the low watermarks
        reach what was deleted (DelayedDeleteRecords)."""

        def leader(topic: str, partition: int) -> str | None:
            replica = self.replicas.get(f"{topic}-{partition}")
            return replica.address if replica is not None and replica.is_leader else None

        def error(topic: str, partition: int) -> ErrorCode:
            return self._leader_error(topic, partition, self.replicas.get(f"{topic}-{partition}"))

        plan = plan_delete_records(request, leader, error)

        def deleted(answers: dict[str, Response]) -> None:
            outcome = delete_records_outcome(request, plan, answers)
            if isinstance(outcome, DelayOperation):
                self.send(addresses.delete_records_purgatory(self.broker_id), outcome)
            else:
                self.reply(request, outcome)

        if plan.orders:
            self._fan_out(dict(plan.orders), deleted, origin=request)
        else:
            deleted({})

    @handles(DescribeLogDirsRequest)
    def _on_describe_log_dirs(self, request: DescribeLogDirsRequest) -> None:
        """Kafka's `ReplicaManager.describeLogDirs`: this broker's data directory and the size
        of every log in it."""
        self.reply(request, describe_log_dirs(self.log_manager, request.topics))

    # -- list offsets ----------------------------------------------------------------------------

    @handles(ListOffsetsRequest)
    def _on_list_offsets(self, request: ListOffsetsRequest) -> None:
        answers = []
        for part in request.partitions:
            tp = TopicPartition.of(part)
            replica = self.replicas.get(str(tp))
            error = self._leader_error(
                part.topic, part.partition, replica, part.current_leader_epoch
            )
            high_watermark = self.high_watermarks.current(tp)
            if replica is None or high_watermark is None or error is not ErrorCode.NONE:
                code = error if error is not ErrorCode.NONE else ErrorCode.LEADER_NOT_AVAILABLE
                answers.append(
                    ListOffsetsPartitionResult(
                        topic=part.topic, partition=part.partition, error_code=code
                    )
                )
                continue
            fetchable = (  # Kafka's lastFetchableOffset: the LSO for read_committed
                replica.log.last_stable_offset(high_watermark)
                if request.isolation_level == READ_COMMITTED
                else high_watermark
            )
            timestamp, offset = offset_for_timestamp(replica.log, fetchable, part.timestamp)
            answers.append(
                ListOffsetsPartitionResult(
                    topic=part.topic,
                    partition=part.partition,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=replica.leader_epoch,
                )
            )
        self.reply(request, ListOffsetsResponse(partitions=tuple(answers)))

    # -- metadata --------------------------------------------------------------------------------

    @handles(MetadataRequest)
    def _on_metadata(self, request: MetadataRequest) -> None:
        cache = self.metadata_cache
        self.reply(
            request,
            MetadataResponse(
                brokers=cache.live_brokers,
                topics=cache.topic_metadata(request.topics),
                endpoints=endpoints_on(cache.endpoints, request.listener or None),
                controller_id=cache.controller_id,
            ),
        )

    @handles(UpdateMetadata)
    def _on_update_metadata(self, request: UpdateMetadata) -> None:
        refused = self._refusal(request)
        if refused is not ErrorCode.NONE:
            self.reply(request, UpdateMetadataResponse(error_code=refused))
            return
        self.metadata_cache.update(request)
        offsets_partitions = frozenset(self.metadata_cache.partitions.get(OFFSETS_TOPIC, {}))
        if offsets_partitions - self._offsets_partitions_told:
            # the coordinator can now tell "another broker leads it" from "not told yet"
            self._offsets_partitions_told |= offsets_partitions
            self.send(
                addresses.group_coordinator(self.broker_id),
                OffsetsPartitionsKnown(partitions=tuple(sorted(offsets_partitions))),
            )
        # Kafka's tryCompleteDelayedTopicOperations: topic admin answers waiting for this
        changed = topic_changes(  # only the topics it named can have changed
            self.metadata_cache.partitions,
            self._topics_told,
            {s.topic for s in request.partition_states},
        )
        topics = addresses.topic_purgatory(self.broker_id)
        if changed is not None and self.directory.resolve(topics) is not None:
            self.send(topics, changed)
        self.reply(request, UpdateMetadataResponse())

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch: the czxid of its registration (-1 without ZooKeeper)."""
        return self.zk.broker_epoch if self.zk is not None else -1

    def _refusal(self, request: LeaderAndIsr | StopReplica | UpdateMetadata) -> ErrorCode:
        """Why a controller request must be refused: an older controller epoch, or an older
        broker epoch than this registration's (it was meant for this broker before it
        restarted or lost its session). NONE when it may be applied."""
        own = self.broker_epoch
        if 0 <= request.broker_epoch < own:
            self.log_event(
                "replica_manager.stale_broker_epoch",
                msg_type=type(request).__name__,
                request_broker_epoch=request.broker_epoch,
                broker_epoch=own,
            )
            return ErrorCode.STALE_BROKER_EPOCH
        if request.controller_epoch < self.controller_epoch:
            self.log_event(
                "replica_manager.stale_controller",
                controller_epoch=request.controller_epoch,
                known_controller_epoch=self.controller_epoch,
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = request.controller_epoch
        return ErrorCode.NONE

    # -- controller: leader and ISR ----------------------------------------------------------------

    @handles(LeaderAndIsr)
    def _on_leader_and_isr(self, request: LeaderAndIsr) -> None:
        refused = self._refusal(request)
        if refused is not ErrorCode.NONE:
            self.reply(request, LeaderAndIsrResponse(error_code=refused))
            return
        errors: dict[str, ErrorCode] = {}
        orders: dict[str, tuple[str, Any]] = {}
        topic_ids = {i.topic: i.topic_id for i in request.topic_ids}  # KIP-516
        for state in request.partition_states:
            key = str(TopicPartition.of(state))
            if self.broker_id not in state.replicas:
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            replica = self._open_replica(state)
            if replica is None:  # its log could not be opened: Kafka's KafkaStorageException
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if state.leader == self.broker_id:
                self.fetcher_manager.remove(TopicPartition.of(state))  # a leader stops fetching
                if state.topic == OFFSETS_TOPIC:
                    # Kafka's onElection marks the partition loading inside this handling:
                    # before this broker answers the controller, so before any broker's
                    # metadata names it leader, its coordinator answers LOAD_IN_PROGRESS
                    self.send(
                        addresses.group_coordinator(self.broker_id),
                        OffsetsPartitionLoading(
                            partition=state.partition, leader_epoch=state.leader_epoch
                        ),
                    )
            orders[key] = (
                replica.address,
                BecomeLeaderOrFollower(state=state, topic_id=topic_ids.get(state.topic, "")),
            )
        states = {str(TopicPartition.of(s)): s for s in request.partition_states}
        targets = {key: self.replicas[key] for key in orders}

        def applied(responses: dict[str, Response]) -> None:
            self._applied(request, states, errors, responses, targets)

        if not orders:
            applied({})
            return
        self._fan_out(orders, applied, origin=request)

    def _applied(
        self,
        request: LeaderAndIsr,
        states: dict[str, PartitionLeaderState],
        errors: dict[str, ErrorCode],
        responses: dict[str, Response],
        targets: dict[str, LocalReplica],
    ) -> None:
        follow: dict[int, list[FetcherPartition]] = {}
        for key, response in responses.items():
            state = states[key]
            replica = targets[key]
            if replica.stopped or self.replicas.get(key) is not replica:
                # a StopReplica came while this LeaderAndIsr was being applied: the replica is
                # gone (or going), and must not get a fetcher back
                errors[key] = getattr(response, "error_code", ErrorCode.NONE)
                continue
            if not isinstance(response, PartitionStateApplied):
                errors[key] = getattr(response, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
                self._close_load_window(state, leads=replica.is_leader)
                continue
            errors[key] = response.error_code
            if response.error_code is ErrorCode.KAFKA_STORAGE_ERROR:  # markPartitionOffline
                self.offline.hold(key, StorageFailure("", response.message or "storage error"))
            if response.error_code is not ErrorCode.NONE:
                self._close_load_window(state, leads=response.is_leader)
                continue
            self.offline.clear(key)
            if state.leader_epoch < replica.leader_epoch:
                # A newer LeaderAndIsr for this partition finished its fan-out first (it had
                # fewer partitions to wait for): this older decision must not undo its fetcher.
                continue
            replica.is_leader = response.is_leader
            replica.leader = state.leader
            replica.leader_epoch = state.leader_epoch
            replica.replicas = state.replicas
            if state.topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
                self._tell_group_coordinator(state, leads=response.is_leader)
            if response.is_leader:
                continue
            # Following the same leader in a newer epoch (an ISR change): the fetcher only
            # learns the epoch. A new leader: the partition leaves its old fetcher and joins
            # this leader's, first finding its truncation point from the epochs.
            tp = TopicPartition.of(state)
            same_fetcher = (
                not response.truncate and self.fetcher_manager.leader_of(tp) == state.leader
            )
            if not same_fetcher:
                self.fetcher_manager.remove(tp)
            if state.leader >= 0:
                follow.setdefault(state.leader, []).append(
                    FetcherPartition(
                        topic=state.topic,
                        partition=state.partition,
                        fetch_offset=response.log_end_offset,
                        leader_epoch=state.leader_epoch,
                        truncate=not same_fetcher,
                        latest_epoch=response.latest_epoch,
                    )
                )
        for leader, partitions in follow.items():
            self.fetcher_manager.add(leader, partitions)
        self.reply(
            request,
            LeaderAndIsrResponse(
                partitions=tuple(
                    PartitionError(topic=s.topic, partition=s.partition, error_code=errors[k])
                    for k, s in states.items()
                )
            ),
        )

    def _close_load_window(self, state: PartitionLeaderState, *, leads: bool) -> None:
        """The partition refused this LeaderAndIsr: unless it `leads` all the same (the
        request repeated an epoch it already has), the load window that
        `OffsetsPartitionLoading` opened closes (a newer epoch's own message wins at the
        coordinator)."""
        if (
            state.topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
            and state.leader == self.broker_id
            and not leads
        ):
            self._tell_group_coordinator(state, leads=False)

    def _tell_group_coordinator(self, state: PartitionLeaderState, *, leads: bool) -> None:
        """Kafka's onLeadershipChange for `__consumer_offsets`: the broker's group coordinator
        loads the groups of a partition it now leads and unloads those of one it follows; for
        `__transaction_state` the transaction coordinator likewise."""
        partition, epoch = state.partition, state.leader_epoch
        if state.topic == TRANSACTION_STATE_TOPIC:
            self._tell_transaction_coordinator(
                TxnStatePartitionElected(partition=partition, leader_epoch=epoch)
                if leads
                else TxnStatePartitionResigned(partition=partition, leader_epoch=epoch)
            )
            return
        message: OffsetsPartitionElected | OffsetsPartitionResigned = (
            OffsetsPartitionElected(partition=state.partition, leader_epoch=state.leader_epoch)
            if leads
            else OffsetsPartitionResigned(
                partition=state.partition, leader_epoch=state.leader_epoch
            )
        )
        self.send(addresses.group_coordinator(self.broker_id), message)

    def _tell_transaction_coordinator(
        self, message: TxnStatePartitionElected | TxnStatePartitionResigned
    ) -> None:
        """A broker may run without a transaction coordinator (a test's broker, one starting):
        then nobody is told, and nothing else changes."""
        address = addresses.transaction_coordinator(self.broker_id)
        if self.directory.resolve(address) is not None:
            self.send(address, message)

    def _open_replica(self, state: PartitionLeaderState) -> LocalReplica | None:
        """The replica a LeaderAndIsr names, or None when its log cannot be opened or created
        (an OSError: EMFILE when the broker is out of file descriptors, ENOSPC, ...). Then the
        partition is offline here, with an error event saying why, and this actor goes on with
        the others (Kafka's makeLeaders/makeFollowers and `markPartitionOffline`); a later
        LeaderAndIsr tries again."""
        key = str(TopicPartition.of(state))
        new = key not in self.replicas
        try:
            replica = self._replica(state.topic, state.partition)
        except (OSError, StorageError) as error:
            failure = self.offline.mark(key, error)
            log_storage_error(
                self,
                "replica_manager.log_failed",
                topic=state.topic,
                partition=state.partition,
                failure=failure,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
            )
            return None
        if new:  # its log opens after all: whether it is online again, its answer says
            self.offline.clear(key)
        return replica

    def _replica(self, topic: str, partition: int) -> LocalReplica:
        """The local replica's actor (started on first use) with its log (opened or created)."""
        tp = TopicPartition(topic=topic, partition=partition)
        key = str(tp)
        replica = self.replicas.get(key)
        if replica is not None:
            return replica
        log = self.log_manager.get_or_create_log(tp, self.topic_configs.get(topic))
        state = PartitionState(
            topic,
            partition,
            self.broker_id,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            min_insync_replicas=log.config.min_insync_replicas,
            high_watermark=min(self.high_watermarks.initial(tp), log.log_end_offset),
        )
        address = addresses.partition(self.broker_id, key)
        ref = PartitionActor.start_on(
            self.dispatcher,  # its own: the broker's partitions share it (None: a thread each)
            address,
            self.directory,
            self.clock,
            self.broker_id,
            log=log,
            state=state,
            produce_purgatory=addresses.produce_purgatory(self.broker_id),
            fetch_purgatory=addresses.fetch_purgatory(self.broker_id),
            high_watermarks=self.high_watermarks,
            zk=self.zk,
            delete_records_purgatory=addresses.delete_records_purgatory(self.broker_id),
            is_alive=lambda broker: broker in self.metadata_cache.live_brokers,
        )
        self.directory.register(address, ref)  # at once: messages follow before it runs
        replica = LocalReplica(topic=topic, partition=partition, address=address, ref=ref, log=log)
        self.replicas[key] = replica
        self.logs[key] = log
        return replica

    # -- controller: stop replica ------------------------------------------------------------------

    @handles(StopReplica)
    def _on_stop_replica(self, request: StopReplica) -> None:
        """Stop serving the replicas (their fetchers and actors stop); with
        `delete_partitions` (topic deletion) also delete their logs and high watermarks, those
        of replicas no actor serves included (logs loaded from disk by a broker that was down
        when its topic was deleted). Answers per partition."""
        refused = self._refusal(request)
        if refused is not ErrorCode.NONE:
            self.reply(request, StopReplicaResponse(error_code=refused))
            return
        orders: dict[str, tuple[str, Any]] = {}
        stopping: dict[str, LocalReplica] = {}
        for ref in request.partitions:
            key = str(TopicPartition.of(ref))
            self.offline.clear(key)  # stopped: nothing to answer KAFKA_STORAGE_ERROR for
            replica = self.replicas.get(key)
            if replica is None:
                continue
            self.fetcher_manager.remove(TopicPartition.of(ref))
            replica.stopped = True
            stopping[key] = replica
            orders[key] = (
                replica.address,
                StopPartition(
                    topic=ref.topic,
                    partition=ref.partition,
                    delete=request.delete_partitions,
                    still_known=self.metadata_cache.knows(ref.topic, ref.partition),
                ),
            )

        def stopped(_responses: dict[str, Response]) -> None:
            for key, replica in stopping.items():
                if self.replicas.get(key) is not replica:
                    continue  # another StopReplica stopped it first
                if replica.topic == OFFSETS_TOPIC:
                    self.send(
                        addresses.group_coordinator(self.broker_id),
                        OffsetsPartitionResigned(partition=replica.partition),
                    )
                elif replica.topic == TRANSACTION_STATE_TOPIC:
                    self._tell_transaction_coordinator(
                        TxnStatePartitionResigned(partition=replica.partition)
                    )
                del self.replicas[key]
                self.logs.pop(key, None)
                # off the directory now, so a replica created again (the topic re-created)
                # can register at this address while this actor is still stopping
                self.directory.unregister(replica.address, replica.ref)
                replica.ref.stop(block=False)
            errors = (
                self._delete_partitions(request.partitions) if request.delete_partitions else {}
            )
            self.reply(
                request,
                StopReplicaResponse(
                    partitions=tuple(
                        PartitionError(
                            topic=p.topic,
                            partition=p.partition,
                            error_code=errors.get(TopicPartition.of(p), ErrorCode.NONE),
                        )
                        for p in request.partitions
                    )
                ),
            )

        if not orders:
            stopped({})
            return
        self._fan_out(orders, stopped, origin=request)

    def _delete_partitions(
        self, partitions: tuple[TopicPartition, ...]
    ) -> dict[TopicPartition, ErrorCode]:
        """Delete the logs and high watermarks of stopped replicas; the checkpoints are written
        at once, so a topic created again under the same name starts from an empty log and a
        high watermark of 0 even after a crash. Returns the partitions that failed."""
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            if str(tp) in self.replicas:
                continue  # served again since (a newer LeaderAndIsr): not this request's
            self.high_watermarks.remove(tp)
            try:
                self.log_manager.delete_log(tp)
            except (OSError, StorageError):
                errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR  # the controller retries it later
        self._forget_topic_configs({tp.topic for tp in partitions})
        self.high_watermarks.checkpoint()
        self.log_manager.checkpoint_recovery_points()
        return errors

    # -- ISR expiration ----------------------------------------------------------------------------

    @handles(MaybeShrinkIsr)
    def _on_isr_expiration(self, event: MaybeShrinkIsr) -> None:
        since = self.clock.now_ms() - self.config.replica_lag_time_max_ms
        for replica in self.replicas.values():
            if not replica.is_leader:
                continue
            followers = replica.followers
            others = [r for r in replica.replicas if r != self.broker_id]
            if followers is not None and followers.all_caught_up_since(others, since):
                continue  # every follower caught up lately: nothing to shrink, no message
            caught_up = followers.caught_up() if followers is not None else ()
            self.send(replica.address, MaybeShrinkIsr(caught_up=caught_up))

    # -- dynamic topic configs ---------------------------------------------------------------------

    def _forget_topic_configs(self, topics: set[str]) -> None:
        """A deleted topic's config is forgotten once no replica or log of it is left here, so
        a topic created again under its name is read afresh from `/config/topics/<t>`."""
        held = {r.topic for r in self.replicas.values()}
        held |= {tp.topic for tp in self.log_manager.all_logs()}
        for topic in topics - held:
            self.topic_configs.pop(topic, None)

    @handles(TopicConfigChanged)
    def _on_topic_config_changed(self, event: TopicConfigChanged) -> None:
        """Kafka's TopicConfigHandler: the overrides over the broker's defaults are the topic's
        config for logs opened from now on and for its open logs; a partition actor serving
        one swaps its log's config itself (`UpdateLogConfig`), so its own state follows."""
        topic = event.topic
        try:
            config = zk_data.log_config_from(
                dict(event.overrides), base=self.log_manager.config.default_log_config
            )
        except ValueError as error:  # a znode Kafka's LogConfig.fromProps refuses: kept as is
            self.log_event("config_change.invalid", entity=f"topics/{topic}", error=str(error))
            return
        served = {r.log.topic_partition: r for r in self.replicas.values() if r.topic == topic}
        self.topic_configs[topic] = config
        self.log_manager.update_topic_config(topic, config, except_for=served)
        update = UpdateLogConfig(config=tuple(zk_data.topic_config_overrides(config).items()))
        for replica in served.values():
            self.send(replica.address, update)

    # -- fan-out of sub-requests to partitions ----------------------------------------------------

    def _fan_out(
        self,
        orders: dict[str, tuple[str, Any]],
        on_done: Callable[[dict[str, Response]], None],
        *,
        origin: Request | None = None,
    ) -> None:
        """Send each keyed sub-request; `on_done` gets every response once the last arrives.

        `origin` (the request being served) is answered with BROKER_NOT_AVAILABLE if the broker
        stops before the last response arrives."""
        ids = self._fan_outs.scatter(orders, on_done, origin=origin, trace=self.trace_context)
        for key, (address, sub_request) in orders.items():
            correlation_id = ids[key]
            self.send(
                address,
                dataclasses.replace(
                    sub_request, reply_to=self.address, correlation_id=correlation_id
                ),
            )

    @handles(Response)
    def _on_sub_response(self, response: Response) -> None:
        self._fan_outs.gather(response)

    # -- introspection for tests and tools ---------------------------------------------------------

    def offline_partitions(self) -> dict[str, str]:
        """The partitions whose log could not be opened here (`topic-partition`), each with
        why: what `Cluster.create_topic` names instead of waiting for them."""
        return self.offline.describe()

    def describe(self) -> dict[str, Any]:
        return {
            "controller_epoch": self.controller_epoch,
            "leaders": sorted(k for k, r in self.replicas.items() if r.is_leader),
            "followers": sorted(k for k, r in self.replicas.items() if not r.is_leader),
            "fetchers": sorted(self.fetcher_manager.fetchers),
            "offline": self.offline.describe(),
        }
