"""Kafka's controller as an actor: elected through ZooKeeper, it decides partition leadership."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.channel import ControllerChannel
from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.controller.reassignments import PartitionReassignments
from kafkactor.actors.controller.replica_elections import ReplicaElections
from kafkactor.actors.controller.state import (
    ControllerState,
    LeadershipChange,
)
from kafkactor.actors.controller.zk_session import ZooKeeperSession
from kafkactor.actors.runtime import Directory, addresses, handles
from kafkactor.common import (
    LEADER_DURING_DELETE,
    BrokerEndpoint,
    PartitionLeaderState,
    TopicPartition,
)
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.config import TopicUncleanElectionChanged
from kafkactor.messages.controller import (
    BrokersChanged,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    DeleteTopicsChanged,
    IsrChangeNotified,
    PartitionsChanged,
    ResendToBrokers,
    StandForElection,
    TopicsChanged,
    ZooKeeperSessionLost,
    ZooKeeperSessionStarted,
)
from kafkactor.messages.replication import (
    LeaderAndIsr,
    LeaderAndIsrResponse,
    StopReplica,
    StopReplicaResponse,
    UpdateMetadata,
)
from kafkactor.storage import LogConfig
from kafkactor.timer import CallbackTask, Clock, Timer

WRITE_ATTEMPTS = 5  # versioned writes of a partition state retried after a conflict


class ControllerFencedError(RuntimeError):
    """Another controller with a newer epoch wrote the state this one was about to change."""


class ControllerActor(ReplicaElections, PartitionReassignments):
    """Every broker runs one; the one that creates the ephemeral `/controller` is the controller.

    - **Election.** It tries to create `/controller`; the winner increments `/controller_epoch`
      with a versioned set (losing that race means another controller got in first: it
      resigns). The others watch `/controller` and stand again when it goes away.
    - **As controller** it watches `/brokers/ids` (broker failure and return), `/brokers/topics`
      (topic creation), each known topic's `/brokers/topics/<t>` (partitions added) and
      `/isr_change_notification` (ISR changes leaders made). Every decision (`ControllerState`)
      is written to the partition's state znode with a versioned set, then sent as
      `LeaderAndIsr` to the live replicas and `UpdateMetadata` to every live broker, all stamped
      with its controller epoch. One of those lost on the way to a live broker (the network
      answers NETWORK_EXCEPTION or REQUEST_TIMED_OUT) is made good 100 ms later: that broker is
      sent its partitions' states and the metadata again, as they stand then
      (`ControllerChannel`).
    - **Topic deletion** (Kafka's TopicDeletionManager, `delete.topic.enable=true`). It
      watches `/admin/delete_topics`. A topic marked there goes offline (leader -1 in its
      state znodes), every UpdateMetadata from then on gives its partitions leader
      `LEADER_DURING_DELETE` so brokers' caches forget it, and each live replica is sent
      StopReplica(delete_partitions=True). A replica on a dead broker is sent it when the
      broker registers again. Once every replica is deleted, `/brokers/topics/<t>` (with
      its partition states), `/config/topics/<t>` and then `/admin/delete_topics/<t>` are
      deleted and the topic is forgotten. A mark for a topic that does not exist is removed.
    - **Replica elections** (inherited from `ReplicaElections`): the partitions listed in
      `/admin/preferred_replica_election`, ElectLeaders requests, and the leader-imbalance
      check of `auto.leader.rebalance.enable` on the broker's timer.
    - **Fencing.** On losing its ZooKeeper session, or finding a newer controller epoch in a
      znode it was about to write, it resigns and stops acting; brokers reject requests of
      older epochs on their own.
    - **Broker epochs (KIP-380).** A broker's epoch is the czxid of its registration. A
      broker that registers again under the same id (restarted within its session timeout,
      or after its session expired) is handled as a failure followed by a startup: it leaves
      the ISRs, its leaderships move, and it is sent its LeaderAndIsr again. Every request
      carries the recipient's epoch, so one meant for its earlier run is refused. A new
      controller does not know the epochs its predecessor saw: it treats a replica whose
      registration is newer than a partition's state znode (czxid > mzxid) as restarted.

    ZooKeeper calls are synchronous and made on this actor's thread, as Kafka's controller
    thread makes them. Watch callbacks run on the ZooKeeper client's event thread and only
    tell this actor a message.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        clock: Clock,
        broker: int,
        *,
        zk: ZooKeeperSession,
        timer: Timer,
        log_defaults: LogConfig | None = None,
        config: ControllerConfig | None = None,
    ) -> None:
        super().__init__(address, directory, clock, broker)
        self.broker_id = broker
        # the broker's topic-config defaults (log.*, unclean.leader.election.enable, ...):
        # a topic's `/config/topics/<t>` holds only its overrides on top of them
        self.log_defaults = log_defaults if log_defaults is not None else LogConfig()
        self.zk = zk
        self.timer = timer
        self.epoch = 0
        self.epoch_zk_version = -1
        self.is_controller = False
        self.state = ControllerState()
        self._decided_at: dict[TopicPartition, int] = {}  # state znode mzxid, at take-over
        self._ids = itertools.count(1)
        self._endpoints: dict[int, BrokerEndpoint] = {}  # as registered in /brokers/ids
        self._deletes_sent: dict[int, int] = {}  # StopReplica(delete) correlation id -> broker
        self._channel = ControllerChannel()  # LeaderAndIsr / UpdateMetadata not answered yet
        self._resend: CallbackTask | None = None
        self._init_replica_elections(config)  # preferred elections, ElectLeaders, rebalance
        self._init_reassignments()  # /admin/reassign_partitions, AlterPartitionReassignments

    @property
    def _zk(self) -> Any:
        """The broker session's current client."""
        return self.zk.client

    # -- lifecycle ---------------------------------------------------------------------------------

    def on_start(self) -> None:
        super().on_start()
        self.actor_ref.tell(StandForElection())

    def on_stop(self) -> None:
        self.is_controller = False
        self._forget_requests()
        super().on_stop()

    def _tell_self(self, message: Any) -> None:
        self.directory.tell(self.address, message)

    # -- election ----------------------------------------------------------------------------------

    @handles(StandForElection)
    def _on_stand(self, _event: StandForElection) -> None:
        if self.is_controller:
            return
        try:
            self._zk.create(
                zk_data.CONTROLLER,
                zk_data.encode_controller(self.broker_id, self.clock.now_ms()),
                ephemeral=True,
            )
        except NodeExistsError:
            self._watch_controller()
            return
        try:
            self._increment_epoch()
        except (BadVersionError, NodeExistsError):
            self.log_event("controller.resign", reason="lost the controller epoch race")
            self._delete_own_controller_node()
            self._watch_controller()
            return
        self.is_controller = True
        self.log_event("controller.elected", controller=self.broker_id, epoch=self.epoch)
        self._take_over()

    def _watch_controller(self) -> None:
        def gone(event: Any) -> None:
            if _is_change(event):
                self._tell_self(StandForElection())

        if self._zk.exists(zk_data.CONTROLLER, watch=gone) is None:
            self._tell_self(StandForElection())  # it went away before the watch was set

    def _increment_epoch(self) -> None:
        try:
            data, stat = self._zk.get(zk_data.CONTROLLER_EPOCH)
        except NoNodeError:
            self._zk.create(zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(1))
            self.epoch, self.epoch_zk_version = 1, 0
            return
        epoch = zk_data.decode_controller_epoch(data) + 1
        written = self._zk.set(
            zk_data.CONTROLLER_EPOCH,
            zk_data.encode_controller_epoch(epoch),
            version=stat.version,
        )
        self.epoch, self.epoch_zk_version = epoch, written.version

    def _delete_own_controller_node(self) -> None:
        try:
            data, _ = self._zk.get(zk_data.CONTROLLER)
            if zk_data.decode_controller(data) == self.broker_id:
                self._zk.delete(zk_data.CONTROLLER)
        except (NoNodeError, zk_data.MalformedZnodeError):
            pass

    def _resign(self, reason: str) -> None:
        if not self.is_controller:
            return
        self.is_controller = False
        self.state = ControllerState()
        self._forget_requests()
        self.log_event(
            "controller.resign", controller=self.broker_id, epoch=self.epoch, reason=reason
        )

    @handles(ZooKeeperSessionLost)
    def _on_session_lost(self, _event: ZooKeeperSessionLost) -> None:
        self._resign("ZooKeeper session lost")

    @handles(ZooKeeperSessionStarted)
    def _on_session_started(self, _event: ZooKeeperSessionStarted) -> None:
        self._on_stand(StandForElection())

    # -- taking over -------------------------------------------------------------------------------

    def _take_over(self) -> None:
        """Kafka's onControllerFailover: read everything, then make every partition right."""
        self.state = ControllerState()
        self._zk.ensure_path(zk_data.BROKER_TOPICS)
        self._zk.ensure_path(zk_data.BROKER_IDS)
        self._zk.ensure_path(zk_data.ISR_CHANGE_NOTIFICATION)
        self._zk.ensure_path(zk_data.ADMIN_DELETE_TOPICS)
        self._decided_at = {}
        self._deletes_sent = {}
        self._forget_requests()
        epochs = self._live_broker_epochs()
        self.state.broker_epochs = dict(epochs)
        self.state.live_brokers = set(epochs)
        # partitions with no state znode (added, or created, while no controller ran) are
        # new partitions, led by their first live replica: the brokers are read first
        created = self._load_topics(self._watch_children(zk_data.BROKER_TOPICS, TopicsChanged()))
        # topics marked for deletion leave the election rules before anything is elected
        marked = self._watch_children(zk_data.ADMIN_DELETE_TOPICS, DeleteTopicsChanged())
        if self._begin_deletions(marked) is None:
            return  # fenced
        restarted = []
        for key, decided_at in sorted(self._decided_at.items()):
            if key not in self.state.partitions:
                continue  # being deleted
            after = {b for b, epoch in epochs.items() if epoch > decided_at}
            change = self.state.replicas_restarted(key, after) if after else None
            if change is not None:
                restarted.append(change)
        self._decided_at = {}
        self._apply([c for c in created if c.after.topic_partition in self.state.partitions])
        self._apply(restarted)
        self._apply(self.state.brokers_changed(epochs))
        # the new controller tells every live broker everything, in its own epoch
        self._send_leader_and_isr(self.state.partitions.values())
        self._send_update_metadata()
        self._send_deletes(self.state.live_brokers)
        self._on_isr_change(IsrChangeNotified())
        self._start_reassignments()  # Kafka's initializePartitionReassignments
        self._start_replica_elections()

    def _watch_children(self, path: str, event: Any) -> list[str]:
        def changed(watched: Any) -> None:
            if _is_change(watched):
                self._tell_self(event)

        children: list[str] = self._zk.get_children(path, watch=changed)
        return children

    def _live_broker_epochs(self) -> dict[int, int]:
        """The registered brokers and their epochs (the czxid of `/brokers/ids/<id>`); their
        endpoints, as registered, are kept for UpdateMetadata."""
        epochs = {}
        for child in self._watch_children(zk_data.BROKER_IDS, BrokersChanged()):
            if not child.isdigit():
                continue
            broker = int(child)
            try:
                data, stat = self._zk.get(zk_data.broker_path(broker))
            except NoNodeError:  # gone since the listing: not live
                continue
            epochs[broker] = int(stat.czxid)
            try:
                registration = zk_data.BrokerRegistration.decode(broker, data)
            except zk_data.MalformedZnodeError as error:
                self.log_event(
                    "controller.bad_broker_registration",
                    path=zk_data.broker_path(broker),
                    error=str(error),
                )
                self._endpoints.pop(broker, None)
                continue
            self._endpoints[broker] = BrokerEndpoint(
                broker_id=broker, host=registration.host, port=registration.port
            )
        return dict(sorted(epochs.items()))

    def _load_topics(self, topics: Iterable[str]) -> list[LeadershipChange]:
        """Read new topics; partitions without a state znode are new and get leaders."""
        changes: list[LeadershipChange] = []
        known = self.state.topics()  # a topic being deleted stays known until it is gone
        for topic in sorted(set(topics) - known):
            try:
                data, _ = self._zk.get(zk_data.topic_path(topic), watch=self._on_topic_znode)
                assignment = zk_data.decode_assignment(topic, data)
                unclean = self._topic_config(topic).unclean_leader_election_enable
            except (NoNodeError, zk_data.MalformedZnodeError) as error:
                self.log_event("controller.bad_topic", topic=topic, error=str(error))
                continue
            fresh = {}
            for partition, replicas in assignment.items():
                path = zk_data.partition_state_path(topic, partition)
                try:
                    state_data, stat = self._zk.get(path)
                except NoNodeError:
                    fresh[partition] = replicas
                    continue
                try:
                    found = zk_data.decode_partition_state(
                        topic, partition, state_data, replicas=replicas, zk_version=stat.version
                    )
                except zk_data.MalformedZnodeError as error:
                    # Kafka would stop here; we leave that partition alone and go on
                    self.log_event("controller.bad_partition_state", path=path, error=str(error))
                    continue
                self._decided_at[found.topic_partition] = int(stat.mzxid)
                self.state.load(found, unclean=unclean)
            changes += self.state.add_topic(topic, fresh, unclean=unclean)
        return changes

    def _topic_config(self, topic: str) -> LogConfig:
        try:
            data, _ = self._zk.get(zk_data.topic_config_path(topic))
        except NoNodeError:
            return self.log_defaults
        return zk_data.decode_topic_config(topic, data, base=self.log_defaults)

    # -- events ------------------------------------------------------------------------------------

    @handles(BrokersChanged)
    def _on_brokers_changed(self, _event: BrokersChanged) -> None:
        if not self.is_controller:
            return
        before = set(self.state.live_brokers)
        epochs = self._live_broker_epochs()
        live = list(epochs)
        bounced = sorted(self.state.bounced(epochs))
        joined = sorted(set(live) - before)
        left = sorted(before - set(live))
        self.log_event(
            "controller.brokers_changed", live=live, joined=joined, left=left, bounced=bounced
        )
        if bounced:  # Kafka's onBrokerFailure for them first, then onBrokerStartup
            self._apply(self.state.brokers_changed(set(live) - set(bounced)))
        self.state.broker_epochs = dict(epochs)
        self._apply(self.state.brokers_changed(live))
        for broker in (*left, *bounced):
            self._channel.forget(broker)
        starting = set(joined) | set(bounced)
        if starting:  # a returning broker learns its replicas' state
            self._send_leader_and_isr(
                [p for b in sorted(starting) for p in self.state.partitions_of(b)], only=starting
            )
            # deletion resumes: its replicas there of topics being deleted go now
            self._send_deletes(starting)
            self._resume_reassignments(starting)  # Kafka's onBrokerStartup
        self._send_update_metadata()

    @handles(TopicUncleanElectionChanged)
    def _on_unclean_election_changed(self, event: TopicUncleanElectionChanged) -> None:
        """A topic's `unclean.leader.election.enable` changed (Kafka 2.8's TopicConfigHandler
        → enableTopicUncleanLeaderElection): from now on its elections follow it, and when
        it turned true its offline partitions are elected from live out-of-sync replicas."""
        topic = event.topic
        if not self.is_controller or topic not in self.state.topics():
            return
        if not event.enabled or topic in self.state.deleting_topics():
            self.state.unclean_topics.discard(topic)
            return
        self.state.unclean_topics.add(topic)
        changes = []
        for key, state in sorted(self.state.partitions.items()):
            if key.topic == topic and state.leader not in self.state.live_brokers:
                change = self.state.elect(state, "unclean.leader.election.enable set")
                if change is not None:
                    self.state.partitions[key] = change.after
                    changes.append(change)
        if changes:
            self._apply(changes)
            self._send_update_metadata()

    @handles(TopicsChanged)
    def _on_topics_changed(self, _event: TopicsChanged) -> None:
        if not self.is_controller:
            return
        changes = self._load_topics(self._watch_children(zk_data.BROKER_TOPICS, TopicsChanged()))
        self._apply(changes)
        self._send_update_metadata()

    def _on_topic_znode(self, event: Any) -> None:
        """The data watch of a known topic's `/brokers/topics/<t>` (one bound method, so
        ZooKeeper keeps one watch per topic however often it is left)."""
        if getattr(event, "type", None) == EventType.CHANGED:
            self._tell_self(PartitionsChanged(topic=str(event.path).rsplit("/", 1)[-1]))

    @handles(PartitionsChanged)
    def _on_partitions_changed(self, event: PartitionsChanged) -> None:
        """Kafka's processPartitionModifications: partitions added to a known topic's
        assignment become new partitions, as a new topic's do; the watch is left again."""
        topic = event.topic
        if not self.is_controller or topic not in self.state.topics():
            return
        try:
            data, _ = self._zk.get(zk_data.topic_path(topic), watch=self._on_topic_znode)
            found = self.state.partition_modifications(
                topic, zk_data.decode_assignment(topic, data)
            )
        except (NoNodeError, zk_data.MalformedZnodeError) as error:
            self.log_event("controller.bad_topic", topic=topic, error=str(error))
            return
        added = {} if found.deleting else found.added
        if added or found.reassigned:
            self.log_event(
                "controller.partitions_added",
                topic=topic,
                assignment={str(p): list(r) for p, r in added.items()},
                reassignment_ignored=found.reassigned,
            )
        if not added:
            return
        unclean = topic in self.state.unclean_topics
        self._apply(self.state.add_topic(topic, added, unclean=unclean))
        self._send_update_metadata()

    @handles(IsrChangeNotified)
    def _on_isr_change(self, _event: IsrChangeNotified) -> None:
        if not self.is_controller:
            return
        notifications = self._watch_children(zk_data.ISR_CHANGE_NOTIFICATION, IsrChangeNotified())
        changed: set[TopicPartition] = set()
        for name in sorted(notifications):
            path = f"{zk_data.ISR_CHANGE_NOTIFICATION}/{name}"
            try:
                data, _ = self._zk.get(path)
                changed.update(zk_data.decode_isr_change(path, data))
            except (NoNodeError, zk_data.MalformedZnodeError) as error:
                self.log_event("controller.bad_isr_notification", path=path, error=str(error))
            with contextlib.suppress(NoNodeError):
                self._zk.delete(path)
        for tp in sorted(changed):
            try:
                data, stat = self._zk.get(zk_data.partition_state_path(tp.topic, tp.partition))
            except NoNodeError:
                continue
            found = zk_data.decode_partition_state(tp.topic, tp.partition, data)
            self.state.isr_changed(
                found.topic_partition,
                leader=found.leader,
                leader_epoch=found.leader_epoch,
                isr=found.isr,
                zk_version=stat.version,
            )
        self._reassignment_isr_changed(changed)  # a reassignment whose targets caught up
        if changed:
            self._send_update_metadata()

    @handles(LeaderAndIsrResponse)
    def _on_leader_and_isr_response(self, response: LeaderAndIsrResponse) -> None:
        self._channel.answered(
            response.correlation_id,
            response.error_code,
            self.state.broker_epochs,
            self.clock.now_ms(),
        )
        if response.error_code:
            self.log_event(
                "controller.request_refused",
                error=response.error_code.name,
                error_code=int(response.error_code),
            )

    @handles(Response)
    def _on_response(self, response: Response) -> None:
        """UpdateMetadata answers and undeliverable requests. A LeaderAndIsr or UpdateMetadata
        lost on the way to a live broker makes that broker due a resend (`ControllerChannel`);
        a StopReplica(delete) that did not reach its broker is logged (the replica is sent it
        again when that broker registers again)."""
        error = getattr(response, "error_code", ErrorCode.NONE)
        due_at = self._channel.answered(
            response.correlation_id, error, self.state.broker_epochs, self.clock.now_ms()
        )
        if due_at is not None and self.is_controller:
            self._resend_at(due_at)
        broker = self._deletes_sent.pop(response.correlation_id, None)
        if broker is not None and isinstance(response, ErrorResponse):
            self._log_delete_failed(broker, [], response.error_code)

    # -- requests lost on the way (ControllerChannel) --------------------------------------------

    def _resend_at(self, at_ms: int) -> None:
        if self._resend is not None:
            self._resend.cancel()

        def due() -> None:
            self._tell_self(ResendToBrokers())

        self._resend = CallbackTask(max(0, at_ms - self.clock.now_ms()), due)
        self.timer.add(self._resend)

    @handles(ResendToBrokers)
    def _on_resend(self, _event: ResendToBrokers) -> None:
        """A live broker lost a LeaderAndIsr or UpdateMetadata on the way: it is sent the
        state of its partitions and the cluster's metadata as they stand now."""
        self._resend = None
        if not self.is_controller:
            return
        brokers, next_at = self._channel.due(self.state.broker_epochs, self.clock.now_ms())
        for broker in brokers:
            partitions = self.state.partitions_of(broker)
            self.log_event(
                "controller.resend", to_broker=broker, partitions=len(partitions), epoch=self.epoch
            )
            self._send_leader_and_isr(partitions, only={broker})
            self._send_update_metadata(only={broker})
        if next_at is not None:
            self._resend_at(next_at)

    def _forget_requests(self) -> None:
        self._stop_replica_elections()
        self._channel.clear()
        if self._resend is not None:
            self._resend.cancel()
            self._resend = None

    # -- controlled shutdown -----------------------------------------------------------------------

    @handles(ControlledShutdownRequest)
    def _on_controlled_shutdown(self, request: ControlledShutdownRequest) -> None:
        """A broker about to stop asks for its leaderships to move first (KAFKA-340). The
        moves are written and sent as for any election, except to the broker itself: it is
        told to stop the replicas it no longer leads (StopReplica without deletion) instead,
        and answered with the partitions it still leads."""
        broker = request.broker_id
        error = ErrorCode.NONE
        if not self.is_controller:
            error = ErrorCode.NOT_CONTROLLER
        elif broker not in self.state.live_brokers:
            error = ErrorCode.BROKER_NOT_AVAILABLE
        elif 0 <= request.broker_epoch < self.state.broker_epochs.get(broker, -1):
            error = ErrorCode.STALE_BROKER_EPOCH
        if error is not ErrorCode.NONE:
            self._refuse_shutdown(request, error)
            return
        decision = self.state.controlled_shutdown(broker)
        # the broker is not told the moves of what it stops: a LeaderAndIsr would make its
        # replica manager start fetchers after the StopReplica had removed them
        self._apply(decision.changes, stopping=broker)
        if not self.is_controller:  # fenced while writing: the newer controller decides
            self._refuse_shutdown(request, ErrorCode.NOT_CONTROLLER)
            return
        # after the writes, where a conflict may have decided again: what it still leads, or
        # is still in the ISR of under a live leader, is not stopped
        stop = [key for key in decision.stop if not self._still_served_by(key, broker)]
        if stop:
            self.send(
                addresses.replica_manager(broker),
                StopReplica(
                    reply_to=self.address,
                    correlation_id=next(self._ids),
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=self.state.broker_epochs.get(broker, -1),
                    delete_partitions=False,
                    partitions=tuple(stop),
                ),
            )
        if decision.changes:
            self._send_update_metadata()
        remaining = self.state.led_by(broker)  # after the writes: a conflict may re-decide
        self.log_event(
            "controller.controlled_shutdown",
            replica=broker,
            error="NONE",
            error_code=0,
            remaining=[str(tp) for tp in remaining],
        )
        self.reply(request, ControlledShutdownResponse(remaining_partitions=tuple(remaining)))

    def _refuse_shutdown(self, request: ControlledShutdownRequest, error: ErrorCode) -> None:
        self.log_event(
            "controller.controlled_shutdown",
            replica=request.broker_id,
            error=error.name,
            error_code=int(error),
            remaining=[],
        )
        self.reply(request, ControlledShutdownResponse(error_code=error))

    def _still_served_by(self, key: TopicPartition, broker: int) -> bool:
        """`broker` leads `key`, or is in the ISR of its live leader."""
        state = self.state.partitions[key]
        if state.leader == broker:
            return True
        return broker in state.isr and state.leader in self.state.live_brokers

    # -- topic deletion ----------------------------------------------------------------------------

    @handles(DeleteTopicsChanged)
    def _on_delete_topics_changed(self, _event: DeleteTopicsChanged) -> None:
        if not self.is_controller:
            return
        self._zk.ensure_path(zk_data.ADMIN_DELETE_TOPICS)  # a tool may have removed it all
        marked = self._watch_children(zk_data.ADMIN_DELETE_TOPICS, DeleteTopicsChanged())
        begun = self._begin_deletions(marked)
        if not begun:
            return
        self._send_update_metadata()  # brokers forget the topics first, as Kafka's do
        self._send_deletes(self.state.live_brokers, topics=set(begun))

    def _begin_deletions(self, marked: Iterable[str]) -> list[str] | None:
        """Start deleting the topics marked for deletion that are not being deleted yet;
        remove the marks of topics that do not exist. Returns the topics started (None when
        this controller turned out to be fenced, and resigned)."""
        begun: list[str] = []
        for topic in sorted(set(marked) - self.state.deleting_topics()):
            if topic not in self.state.topics() and self._zk.exists(zk_data.topic_path(topic)):
                # created but not loaded yet (its TopicsChanged is still queued)
                self._apply(self._load_topics([topic]))
                if not self.is_controller:
                    return None
            if topic not in self.state.topics():
                self.log_event(
                    "controller.topic_deletion_ignored", topic=topic, reason="no such topic"
                )
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(zk_data.delete_topic_path(topic))
                continue
            try:
                for change in self.state.begin_deletion(topic):
                    self._log_change(self._write_offline(change))
            except ControllerFencedError as fenced:
                self._resign(str(fenced))
                return None
            keys = sorted(tp for tp in self.state.deleting if tp.topic == topic)
            replicas = sorted({b for tp in keys for b in self.state.undeleted[tp]})
            self.log_event(
                "controller.topic_deletion_started",
                topic=topic,
                partitions=len(keys),
                replicas=replicas,
                waiting_for=[b for b in replicas if b not in self.state.live_brokers],
                controller_epoch=self.epoch,
            )
            begun.append(topic)
        return begun

    def _write_offline(self, change: LeadershipChange) -> LeadershipChange:
        """Write a partition of a topic being deleted as offline (leader -1): a versioned set,
        taken again from what is there when a leader changed the ISR meanwhile. A partition
        without a state znode (never led) has nothing to write."""
        state = change.after
        path = zk_data.partition_state_path(state.topic, state.partition)
        for _ in range(WRITE_ATTEMPTS):
            data = zk_data.encode_partition_state(replace(state, controller_epoch=self.epoch))
            try:
                self._zk.set(path, data, version=state.zk_version)
                return replace(change, after=state)
            except NoNodeError:
                return replace(change, after=state)
            except BadVersionError:
                try:
                    current, stat = self._zk.get(path)
                except NoNodeError:
                    return replace(change, after=state)
                found = zk_data.decode_partition_state(state.topic, state.partition, current)
                if found.controller_epoch > self.epoch:
                    raise ControllerFencedError(
                        f"{path} was written by controller epoch {found.controller_epoch}"
                    ) from None
                state = replace(
                    state,
                    leader_epoch=found.leader_epoch + 1,
                    isr=found.isr,
                    zk_version=stat.version,
                )
        raise ControllerFencedError(f"{path} kept changing under controller epoch {self.epoch}")

    def _send_deletes(self, brokers: Iterable[int], topics: set[str] | None = None) -> None:
        """StopReplica(delete_partitions=True) to each live broker among `brokers` for its
        replicas still to delete (of `topics` only, when given)."""
        for broker in sorted(set(brokers) & self.state.live_brokers):
            keys = [
                tp for tp in self.state.deletions_on(broker) if topics is None or tp.topic in topics
            ]
            if not keys:
                continue
            correlation_id = next(self._ids)
            self._deletes_sent[correlation_id] = broker
            self.send(
                addresses.replica_manager(broker),
                StopReplica(
                    reply_to=self.address,
                    correlation_id=correlation_id,
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=self.state.broker_epochs.get(broker, -1),
                    delete_partitions=True,
                    partitions=tuple(keys),
                ),
            )

    @handles(StopReplicaResponse)
    def _on_stop_replica_response(self, response: StopReplicaResponse) -> None:
        broker = self._deletes_sent.pop(response.correlation_id, None)
        if broker is None or not self.is_controller:
            return
        if response.error_code is not ErrorCode.NONE:
            self._log_delete_failed(broker, [], response.error_code)
            return
        failed: dict[ErrorCode, list[str]] = {}
        for part in response.partitions:
            if part.error_code is ErrorCode.NONE:
                self.state.replica_deleted(TopicPartition.of(part), broker)
            else:
                failed.setdefault(part.error_code, []).append(str(TopicPartition.of(part)))
        for error, names in sorted(failed.items()):
            self._log_delete_failed(broker, names, error)
        self._complete_deletions()

    def _log_delete_failed(self, broker: int, partitions: list[str], error: ErrorCode) -> None:
        self.log_event(
            "controller.replica_deletion_failed",
            replica=broker,
            failed_partitions=partitions,
            error=error.name,
            error_code=int(error),
        )

    def _complete_deletions(self) -> None:
        """Remove every topic whose replicas are all deleted: `/brokers/topics/<t>` (with its
        partition states), `/config/topics/<t>`, then the mark `/admin/delete_topics/<t>`."""
        done = self.state.deleted_topics()
        for topic in done:
            for path in (zk_data.topic_path(topic), zk_data.topic_config_path(topic)):
                with contextlib.suppress(NoNodeError):
                    self._zk.delete(path, recursive=True)
            with contextlib.suppress(NoNodeError):
                self._zk.delete(zk_data.delete_topic_path(topic))
            self.state.finish_deletion(topic)
            self.log_event("controller.topic_deleted", topic=topic, controller_epoch=self.epoch)
        if done:
            self._send_update_metadata()

    # -- writing decisions -------------------------------------------------------------------------

    def _apply(self, changes: list[LeadershipChange], *, stopping: int | None = None) -> None:
        """Write each change to its state znode, then tell the replicas (but not `stopping`,
        a broker in a controlled shutdown, of the partitions it does not lead)."""
        written = []
        for change in changes:
            try:
                written.append(self._write(change))
            except ControllerFencedError as fenced:
                self._resign(str(fenced))
                return
        for change in changes:
            self._log_change(change)
        self._send_leader_and_isr(written, stopping=stopping)

    def _log_change(self, change: LeadershipChange) -> None:
        self.log_event(
            "controller.leader_elected"
            if change.before is None or change.before.leader != change.after.leader
            else "controller.isr_changed",
            topic=change.after.topic,
            partition=change.after.partition,
            leader=change.after.leader,
            leader_epoch=change.after.leader_epoch,
            isr=list(change.after.isr),
            previous_leader=change.before.leader if change.before else None,
            reason=change.reason,
            unclean=change.unclean,
            controller_epoch=self.epoch,
        )

    def _write(self, change: LeadershipChange) -> PartitionLeaderState:
        """Write a decision with a versioned set (a create for a new partition).

        When the znode changed under us (a leader updated the ISR), its content is taken as the
        new starting point and the decision made again; a newer controller epoch there means
        this controller is fenced.
        """
        state = change.after
        path = zk_data.partition_state_path(state.topic, state.partition)
        create = change.before is None
        for _ in range(WRITE_ATTEMPTS):
            data = zk_data.encode_partition_state(replace(state, controller_epoch=self.epoch))
            try:
                if create:
                    self._zk.create(path, data, makepath=True)
                    return self.state.written(state, 0)
                stat = self._zk.set(path, data, version=state.zk_version)
                return self.state.written(state, stat.version)
            except (NodeExistsError, BadVersionError):
                create = False
                current, stat = self._zk.get(path)
                found = zk_data.decode_partition_state(state.topic, state.partition, current)
                if found.controller_epoch > self.epoch:
                    raise ControllerFencedError(
                        f"{path} was written by controller epoch {found.controller_epoch}"
                    ) from None
                self.state.isr_changed(
                    state.topic_partition,
                    leader=found.leader,
                    leader_epoch=found.leader_epoch,
                    isr=found.isr,
                    zk_version=stat.version,
                )
                again = self.state.reconsider(state.topic_partition)
                if again is None:
                    return self.state.partitions[state.topic_partition]
                state = again.after
        raise ControllerFencedError(f"{path} kept changing under controller epoch {self.epoch}")

    # -- requests to brokers -----------------------------------------------------------------------

    def _leader_state(self, p: PartitionLeaderState) -> PartitionLeaderState:
        return replace(p, controller_epoch=self.epoch)

    def _send_leader_and_isr(
        self,
        partitions: Iterable[PartitionLeaderState],
        only: set[int] | None = None,
        *,
        stopping: int | None = None,
    ) -> None:
        by_broker: dict[int, list[PartitionLeaderState]] = {}
        for p in partitions:
            for replica in p.replicas:
                if replica == stopping and p.leader != stopping:
                    continue  # it is sent StopReplica for this partition instead
                if replica in self.state.live_brokers and (only is None or replica in only):
                    by_broker.setdefault(replica, []).append(self._leader_state(p))
        for broker, states in sorted(by_broker.items()):
            correlation_id = next(self._ids)
            broker_epoch = self.state.broker_epochs.get(broker, -1)
            self._channel.sent(correlation_id, broker, broker_epoch)
            self.send(
                addresses.replica_manager(broker),
                LeaderAndIsr(
                    reply_to=self.address,
                    correlation_id=correlation_id,
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=broker_epoch,
                    partition_states=tuple(states),
                ),
            )

    def _send_update_metadata(self, only: set[int] | None = None) -> None:
        live = tuple(sorted(self.state.live_brokers))
        states = tuple(self._leader_state(p) for p in self.state.partitions.values()) + tuple(
            replace(self._leader_state(p), leader=LEADER_DURING_DELETE)
            for p in self.state.deleting.values()
        )
        for broker in live:
            if only is not None and broker not in only:
                continue
            correlation_id = next(self._ids)
            broker_epoch = self.state.broker_epochs.get(broker, -1)
            self._channel.sent(correlation_id, broker, broker_epoch)
            self.send(
                addresses.replica_manager(broker),
                UpdateMetadata(
                    reply_to=self.address,
                    correlation_id=correlation_id,
                    controller_id=self.broker_id,
                    controller_epoch=self.epoch,
                    broker_epoch=broker_epoch,
                    partition_states=states,
                    live_brokers=live,
                    endpoints=tuple(self._endpoints[b] for b in live if b in self._endpoints),
                ),
            )

    def describe(self) -> dict[str, Any]:
        return {
            "broker": self.broker_id,
            "is_controller": self.is_controller,
            "epoch": self.epoch,
            "live_brokers": sorted(self.state.live_brokers),
            "deleting_topics": sorted(self.state.deleting_topics()),
        }


_CHANGES = frozenset({EventType.CREATED, EventType.DELETED, EventType.CHANGED, EventType.CHILD})


def _is_change(event: Any) -> bool:
    """A real change of a znode, not the NONE event a client gives its watchers when its
    connection drops (that one says nothing about ZooKeeper's data)."""
    return getattr(event, "type", None) in _CHANGES
