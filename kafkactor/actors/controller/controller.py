"""Kafka's controller as an actor: elected through ZooKeeper, it decides partition leadership."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.channel import ControllerChannel
from kafkactor.actors.controller.channel_manager import ControllerChannelManager
from kafkactor.actors.controller.controlled_shutdown import ControlledShutdown
from kafkactor.actors.controller.controller_config import ControllerConfig
from kafkactor.actors.controller.partition_state_machine import (
    ControllerFencedError,
    PartitionStateMachine,
)
from kafkactor.actors.controller.reassignments import PartitionReassignments
from kafkactor.actors.controller.replica_elections import ReplicaElections
from kafkactor.actors.controller.state import (
    ControllerState,
    LeadershipChange,
)
from kafkactor.actors.controller.topic_deletion import TopicDeletion
from kafkactor.actors.controller.topic_ids import topic_id_of
from kafkactor.actors.controller.zk_session import ZooKeeperSession
from kafkactor.actors.runtime import Directory, handles
from kafkactor.common import (
    BrokerEndpoint,
    TopicPartition,
)
from kafkactor.messages.config import TopicUncleanElectionChanged
from kafkactor.messages.controller import (
    BrokersChanged,
    DeleteTopicsChanged,
    IsrChangeNotified,
    PartitionsChanged,
    StandForElection,
    TopicsChanged,
    ZooKeeperSessionLost,
    ZooKeeperSessionStarted,
)
from kafkactor.storage import LogConfig
from kafkactor.timer import CallbackTask, Clock, Timer

__all__ = ["ControllerActor", "ControllerFencedError"]


class ControllerActor(  # one actor; its handlers by concern, as Kafka splits KafkaController
    ReplicaElections,
    PartitionReassignments,
    TopicDeletion,
    ControlledShutdown,
    PartitionStateMachine,
    ControllerChannelManager,
):
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
    - **Its other handlers**, one module each: topic deletion (`TopicDeletion`, Kafka's
      TopicDeletionManager, watching `/admin/delete_topics`), controlled shutdown
      (`ControlledShutdown`), partition reassignment (`PartitionReassignments`), writing
      decisions to state znodes (`PartitionStateMachine`) and sending them to brokers, with
      the resend of a lost request (`ControllerChannelManager`).
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
            self._endpoints[broker] = registration.broker_endpoint()  # every listener's
        return dict(sorted(epochs.items()))

    def _load_topics(
        self, topics: Iterable[str], loaded: list[TopicPartition] | None = None
    ) -> list[LeadershipChange]:
        """Read new topics; partitions without a state znode are new and get leaders. The
        partitions of the topics read are added to `loaded` (for their UpdateMetadata)."""
        changes: list[LeadershipChange] = []
        known = self.state.topics()  # a topic being deleted stays known until it is gone
        for topic in sorted(set(topics) - known):
            try:
                data, stat = self._zk.get(zk_data.topic_path(topic), watch=self._on_topic_znode)
                assignment = zk_data.decode_assignment(topic, data)
                self.state.topic_ids[topic], _ = topic_id_of(self._zk, topic, data, stat.version)
                unclean = self._topic_config(topic).unclean_leader_election_enable
            except (NoNodeError, zk_data.MalformedZnodeError) as error:
                self.log_event("controller.bad_topic", topic=topic, error=str(error))
                continue
            fresh = {}
            if loaded is not None:
                loaded += (TopicPartition(topic=topic, partition=p) for p in assignment)
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
        loaded: list[TopicPartition] = []
        changes = self._load_topics(
            self._watch_children(zk_data.BROKER_TOPICS, TopicsChanged()), loaded
        )
        self._apply(changes)
        self._send_update_metadata(partitions=loaded)  # the new topics' partitions alone

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
        self._send_update_metadata(
            partitions=[TopicPartition(topic=topic, partition=p) for p in added]
        )

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
            self._send_update_metadata(partitions=changed)

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
