"""The pure core of Kafka's controller: which replica leads each partition, and with what ISR."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.common import NO_LEADER, PartitionLeaderState, TopicPartition


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """A partition's new leadership, to write to its state znode and send as LeaderAndIsr."""

    before: PartitionLeaderState | None
    after: PartitionLeaderState
    reason: str
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class ShutdownDecision:
    """What a controlled shutdown changes: leaderships and ISRs to write and send, the
    replicas the broker is to stop, and the partitions it still leads."""

    changes: list[LeadershipChange]
    stop: list[TopicPartition]
    remaining: list[TopicPartition]


@dataclass(frozen=True, slots=True)
class PartitionModifications:
    """What a change of `/brokers/topics/<t>` means (Kafka's processPartitionModifications):
    partitions the controller did not know (`added`, partition -> replicas, to create as
    new partitions), known partitions whose replicas differ (`reassigned`: left alone, Kafka
    does not reassign this way), and whether the topic is being deleted (then nothing is
    added)."""

    added: dict[int, tuple[int, ...]]
    reassigned: list[int]
    deleting: bool = False


class ControllerState:
    """Kafka's controller decisions (its partition and replica state machines), without I/O.

    - A new partition is led by its first live replica, with its live replicas as ISR.
    - When a broker dies, every partition it led elects a new leader from the live ISR members
      (in ISR order, Kafka's OfflinePartitionLeaderSelector). With no ISR member alive the
      partition goes offline (leader -1, ISR kept so a returning member can lead again), unless
      the topic enables unclean leader election: then the first live assigned replica leads
      with ISR = [it], and what the old ISR had acknowledged beyond it may be lost.
    - A dead follower leaves the ISR of the partitions it followed (Kafka's
      OfflineReplica transition), never emptying it: the leader stays.
    - When a broker returns, offline partitions it can lead are elected again.
    - Every change bumps the leader epoch. Changes leaders make themselves (ISR shrink and
      expand through the state znode) are learnt with `isr_changed`.
    - A topic being deleted (Kafka's TopicDeletionManager) leaves `partitions`, so none of the
      rules above touch it again: its partitions go offline into `deleting`, and `undeleted`
      holds, per partition, the replicas not yet known deleted. A replica is deleted when its
      broker answers StopReplica; one on a dead broker waits for that broker to come back.
      Once none is left the topic's znodes go and `finish_deletion` forgets it.
    - A broker shutting down cleanly (Kafka's controlled shutdown, KAFKA-340) hands its
      leaderships to other live ISR members and leaves the ISRs it is in, never emptying one;
      until its registration goes it stays live but is never elected leader.
    """

    def __init__(self) -> None:
        self.live_brokers: set[int] = set()
        self.broker_epochs: dict[int, int] = {}  # live broker -> czxid of its registration
        self.partitions: dict[TopicPartition, PartitionLeaderState] = {}
        self.unclean_topics: set[str] = set()
        self.deleting: dict[TopicPartition, PartitionLeaderState] = {}  # topics being deleted
        self.undeleted: dict[TopicPartition, set[int]] = {}  # their replicas still to delete
        self.shutting_down: set[int] = set()  # live brokers in a controlled shutdown
        # partitions being reassigned (KIP-455, `reassignment.py`): their RS, AR and RR;
        # `partitions` holds RS as their replicas meanwhile
        self.reassigning: dict[TopicPartition, ReplicaAssignment] = {}
        self.topic_ids: dict[str, str] = {}  # topic -> its id (KIP-516, Kafka's base64 form)

    # -- topics ----------------------------------------------------------------------------------

    def add_topic(
        self, topic: str, assignment: Mapping[int, tuple[int, ...]], *, unclean: bool = False
    ) -> list[LeadershipChange]:
        """A new topic's partitions, led by their first live replica."""
        if unclean:
            self.unclean_topics.add(topic)
        else:
            self.unclean_topics.discard(topic)
        changes = []
        for partition, replicas in sorted(assignment.items()):
            if TopicPartition(topic=topic, partition=partition) in self.partitions:
                continue
            live = tuple(r for r in replicas if r in self.live_brokers)
            leaders = tuple(r for r in live if r not in self.shutting_down)
            state = PartitionLeaderState(
                topic=topic,
                partition=partition,
                replicas=tuple(replicas),
                leader=leaders[0] if leaders else NO_LEADER,
                leader_epoch=0,
                isr=live,
            )
            self.partitions[state.topic_partition] = state
            changes.append(LeadershipChange(None, state, "new partition"))
        return changes

    def partition_modifications(
        self, topic: str, assignment: Mapping[int, tuple[int, ...]]
    ) -> PartitionModifications:
        """Compare a known topic's assignment, as its znode now holds it, with what the
        controller knows of it."""
        if topic in self.deleting_topics():
            return PartitionModifications({}, [], deleting=True)
        added: dict[int, tuple[int, ...]] = {}
        reassigned = []
        for partition, replicas in sorted(assignment.items()):
            known = self.partitions.get(TopicPartition(topic=topic, partition=partition))
            if known is None:
                added[partition] = tuple(replicas)
            elif known.replicas != tuple(replicas):
                reassigned.append(partition)
        return PartitionModifications(added, reassigned)

    def load(self, state: PartitionLeaderState, *, unclean: bool = False) -> None:
        """Take over a partition as found in ZooKeeper (controller failover)."""
        self.partitions[state.topic_partition] = state
        if unclean:
            self.unclean_topics.add(state.topic)

    def offline_partitions(self) -> list[PartitionLeaderState]:
        """Partitions without a live leader."""
        return [p for p in self.partitions.values() if p.leader not in self.live_brokers]

    # -- brokers ---------------------------------------------------------------------------------

    def brokers_changed(self, live: Iterable[int]) -> list[LeadershipChange]:
        """The set of live brokers is now `live`: elect, shrink and recover as needed."""
        now = set(live)
        dead = self.live_brokers - now
        self.live_brokers = now
        self.shutting_down &= now  # a broker whose shutdown is done is simply gone
        changes = []
        for key in sorted(self.partitions):
            state = self.partitions[key]
            change = self._reconsider(state, dead)
            if change is not None:
                self.partitions[key] = change.after
                changes.append(change)
        return changes

    def _reconsider(self, state: PartitionLeaderState, dead: set[int]) -> LeadershipChange | None:
        live = self.live_brokers
        if state.leader in live:
            gone = tuple(r for r in state.isr if r in dead)
            if not gone:
                return None
            isr = tuple(r for r in state.isr if r not in dead)
            after = replace(state, isr=isr, leader_epoch=state.leader_epoch + 1)
            return LeadershipChange(state, after, f"replicas {list(gone)} went offline")
        return self.elect(state, "leader went offline" if state.online else "offline partition")

    def bounced(self, epochs: Mapping[int, int]) -> set[int]:
        """Live brokers registered again under the same id since the epochs last given
        (KIP-380): a restart within the session timeout, or a new session after expiry."""
        return {
            broker
            for broker, epoch in epochs.items()
            if broker in self.broker_epochs and self.broker_epochs[broker] != epoch
        }

    def replicas_restarted(
        self, key: TopicPartition, restarted: Iterable[int]
    ) -> LeadershipChange | None:
        """Replicas of `key` that registered again after its state was decided: what the state
        says of them describes an earlier run, which may have lost unflushed records. As for a
        broker that failed and came back, they leave the ISR (never emptying it), and a
        restarted leader hands over to a live ISR member that did not restart (or the
        partition goes offline until `brokers_changed` elects again)."""
        state = self.partitions[key]
        gone = set(restarted) & {*state.isr, state.leader}
        if not gone:
            return None
        live = self.live_brokers
        self.live_brokers = live - gone
        try:
            change = self._reconsider(state, gone)
        finally:
            self.live_brokers = live
        if change is not None:
            change = replace(change, reason=f"replicas {sorted(gone)} restarted: {change.reason}")
            self.partitions[key] = change.after
        return change

    def reconsider(self, key: TopicPartition) -> LeadershipChange | None:
        """Decide again for one partition (after its znode changed under us): dead brokers
        leave it, and so do brokers in a controlled shutdown (a shutdown decision whose write
        met a leader's ISR change is made again, not dropped)."""
        state = self.partitions[key]
        change = self._reconsider(state, set(state.isr) - self.live_brokers)
        decided = change.after if change is not None else state
        without = self._without_shutting_down(decided)
        if without is not None:
            going = sorted(self.shutting_down & {decided.leader, *decided.isr})
            reason = f"controlled shutdown of brokers {going}"
            if change is not None:
                reason = f"{change.reason}; {reason}"
                without = replace(without, leader_epoch=decided.leader_epoch)  # one bump
            change = LeadershipChange(
                state, without, reason, unclean=bool(change and change.unclean)
            )
        if change is not None:
            self.partitions[key] = change.after
        return change

    def elect(self, state: PartitionLeaderState, reason: str) -> LeadershipChange | None:
        """A new leader for `state` from its live ISR (or uncleanly); None when nothing changes."""
        live = self.live_brokers - self.shutting_down  # who may lead
        live_replicas = tuple(r for r in state.replicas if r in live)
        if not state.isr and live_replicas:
            # never led (created while none of its replicas was up): as for a new partition
            after = replace(
                state,
                leader=live_replicas[0],
                isr=live_replicas,
                leader_epoch=state.leader_epoch + 1,
            )
            return LeadershipChange(state, after, "first replica came up")
        live_isr = tuple(r for r in state.isr if r in live)
        if live_isr:
            after = replace(
                state, leader=live_isr[0], isr=live_isr, leader_epoch=state.leader_epoch + 1
            )
            return LeadershipChange(state, after, reason)
        if live_replicas and state.topic in self.unclean_topics:
            after = replace(
                state,
                leader=live_replicas[0],
                isr=(live_replicas[0],),
                leader_epoch=state.leader_epoch + 1,
            )
            return LeadershipChange(state, after, reason + "; unclean election", unclean=True)
        if not state.online:
            return None  # still nobody to lead
        after = replace(state, leader=NO_LEADER, leader_epoch=state.leader_epoch + 1)
        return LeadershipChange(state, after, reason + "; no live ISR member")

    def controlled_shutdown(self, broker: int) -> ShutdownDecision:
        """`broker` asks to shut down cleanly (Kafka's `KafkaController.shutdownBroker`).

        Each partition with other replicas that it leads moves to the first other live ISR
        member (Kafka's ControlledShutdownLeaderSelector), with the shutting-down brokers out
        of the new ISR; one with no such member stays and is reported `remaining` (the broker
        asks again later, or shuts down anyway). Each partition it follows loses it from the
        ISR (the leader stays). Every partition it holds and no longer leads is to be stopped
        on it (StopReplica without deletion), so it neither serves nor fetches them.
        """
        self.shutting_down.add(broker)
        changes: list[LeadershipChange] = []
        stop: list[TopicPartition] = []
        for key in sorted(self.partitions):
            state = self.partitions[key]
            if broker not in state.replicas:
                continue
            after = self._without_shutting_down(state)
            if after is not None:
                self.partitions[key] = after
                changes.append(
                    LeadershipChange(state, after, f"controlled shutdown of broker {broker}")
                )
            if self.partitions[key].leader != broker:
                stop.append(key)
        return ShutdownDecision(changes=changes, stop=stop, remaining=self.led_by(broker))

    def _without_shutting_down(self, state: PartitionLeaderState) -> PartitionLeaderState | None:
        """`state` with the brokers in a controlled shutdown out of it, in the next leader
        epoch: a leadership of theirs moves to the first other live ISR member, with them out
        of the new ISR (with no such member nothing changes: the leader asks again later); a
        partition led by another broker loses them from its ISR. None when nothing changes (a
        partition with a single replica, or an offline one, is left alone)."""
        if len(state.replicas) < 2 or state.leader not in self.live_brokers:
            return None
        going = self.shutting_down
        if state.leader in going:
            leaders = [r for r in state.isr if r in self.live_brokers and r not in going]
            if not leaders:
                return None
            isr = tuple(r for r in state.isr if r not in going)
            return replace(state, leader=leaders[0], isr=isr, leader_epoch=state.leader_epoch + 1)
        isr = tuple(r for r in state.isr if r not in going)
        if isr == state.isr:
            return None
        return replace(state, isr=isr, leader_epoch=state.leader_epoch + 1)

    def led_by(self, broker: int) -> list[TopicPartition]:
        """Partitions `broker` leads."""
        return sorted(key for key, state in self.partitions.items() if state.leader == broker)

    # -- what leaders and ZooKeeper say ------------------------------------------------------------

    def isr_changed(
        self,
        key: TopicPartition,
        *,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        zk_version: int,
    ) -> PartitionLeaderState | None:
        """A leader changed the ISR in the state znode; the cached state follows it."""
        state = self.partitions.get(key)
        if state is None:
            return None
        updated = replace(
            state, leader=leader, leader_epoch=leader_epoch, isr=isr, zk_version=zk_version
        )
        self.partitions[key] = updated
        return updated

    def written(self, state: PartitionLeaderState, zk_version: int) -> PartitionLeaderState:
        """The state znode now holds `state` at `zk_version`."""
        updated = replace(state, zk_version=zk_version)
        self.partitions[state.topic_partition] = updated
        return updated

    def partitions_of(self, broker: int) -> list[PartitionLeaderState]:
        """Partitions with a replica on `broker`."""
        return [p for p in self.partitions.values() if broker in p.replicas]

    # -- topic deletion --------------------------------------------------------------------------

    def topics(self) -> set[str]:
        """Every topic known, those being deleted included."""
        return {tp.topic for tp in self.partitions} | self.deleting_topics()

    def deleting_topics(self) -> set[str]:
        return {tp.topic for tp in self.deleting}

    def begin_deletion(self, topic: str) -> list[LeadershipChange]:
        """Start deleting `topic`: its partitions leave `partitions` for `deleting`, offline
        (leader -1 in a new leader epoch, the ISR kept), with every assigned replica still to
        delete. Returns the partitions that went offline, to write; nothing for a topic that is
        unknown or already being deleted."""
        changes = []
        for key in sorted(tp for tp in self.partitions if tp.topic == topic):
            state = self.partitions.pop(key)
            after = state
            if state.online:
                after = replace(state, leader=NO_LEADER, leader_epoch=state.leader_epoch + 1)
                changes.append(LeadershipChange(state, after, "topic deletion"))
            self.deleting[key] = after
            self.undeleted[key] = set(state.replicas)
        return changes

    def replica_deleted(self, key: TopicPartition, broker: int) -> None:
        """`broker` answered that its replica of `key` is deleted."""
        pending = self.undeleted.get(key)
        if pending is not None:
            pending.discard(broker)

    def deletions_on(self, broker: int) -> list[TopicPartition]:
        """The replicas on `broker` still to delete."""
        return sorted(key for key, pending in self.undeleted.items() if broker in pending)

    def deleted_topics(self) -> list[str]:
        """Topics being deleted with no replica left to delete: their znodes can go."""
        waiting = {key.topic for key, pending in self.undeleted.items() if pending}
        return sorted(self.deleting_topics() - waiting)

    def finish_deletion(self, topic: str) -> None:
        """Forget `topic` (its znodes are gone): the name may be used again."""
        for key in [k for k in self.deleting if k.topic == topic]:
            del self.deleting[key]
            self.undeleted.pop(key, None)
        self.unclean_topics.discard(topic)
