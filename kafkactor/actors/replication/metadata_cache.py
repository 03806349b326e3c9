"""A broker's metadata cache: what the controller last told it of every partition and broker."""

from __future__ import annotations

from kafkactor.common import LEADER_DURING_DELETE, BrokerEndpoint, PartitionLeaderState
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import PartitionMetadata, TopicMetadata, UpdateMetadata


class MetadataCache:
    """Kafka's `MetadataCache`: filled by the controller's UpdateMetadata requests, it answers
    clients' MetadataRequests (which broker leads each partition, its replicas and ISR).

    A partition whose leader is not among the live brokers is reported with no leader and
    LEADER_NOT_AVAILABLE; a topic the controller never mentioned, with
    UNKNOWN_TOPIC_OR_PARTITION. A partition the controller sends with leader
    `LEADER_DURING_DELETE` (-2) belongs to a topic being deleted: the cache drops it, and the
    topic with its last partition, so clients get UNKNOWN_TOPIC_OR_PARTITION for it.

    It also keeps each topic's id (KIP-516, UpdateMetadata v7+), dropped with the topic: a
    topic deleted and created again under its name comes back with its new id.
    """

    def __init__(self) -> None:
        self.partitions: dict[str, dict[int, PartitionLeaderState]] = {}
        self.live_brokers: tuple[int, ...] = ()
        self.endpoints: tuple[BrokerEndpoint, ...] = ()
        self.controller_id = -1
        self.topic_ids: dict[str, str] = {}  # topic -> Kafka's base64 Uuid

    def update(self, request: UpdateMetadata) -> None:
        for state in request.partition_states:
            if state.leader == LEADER_DURING_DELETE:
                self._forget(state.topic, state.partition)
                continue
            self.partitions.setdefault(state.topic, {})[state.partition] = state
        for identity in request.topic_ids:
            if identity.topic in self.partitions:
                self.topic_ids[identity.topic] = identity.topic_id
        self.live_brokers = tuple(sorted(request.live_brokers))
        live = set(self.live_brokers)
        self.endpoints = tuple(
            sorted(
                (e for e in request.endpoints if e.broker_id in live and e.port >= 0),
                key=lambda e: e.broker_id,
            )
        )
        self.controller_id = request.controller_id

    def _forget(self, topic: str, partition: int) -> None:
        states = self.partitions.get(topic)
        if states is None:
            return
        states.pop(partition, None)
        if not states:
            del self.partitions[topic]
            self.topic_ids.pop(topic, None)

    def topic_name(self, topic_id: str) -> str | None:
        """Kafka's `getTopicName`: the known topic with this id."""
        return next((t for t, i in self.topic_ids.items() if i == topic_id), None)

    def knows(self, topic: str, partition: int) -> bool:
        return partition in self.partitions.get(topic, {})

    def topic_metadata(self, topics: tuple[str, ...]) -> tuple[TopicMetadata, ...]:
        """The metadata of `topics` (every known topic when empty)."""
        names = topics or tuple(sorted(self.partitions))
        return tuple(self._topic(name) for name in names)

    def _topic(self, name: str) -> TopicMetadata:
        states = self.partitions.get(name)
        if not states:
            return TopicMetadata(topic=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        live = self.live_brokers
        return TopicMetadata(
            topic=name,
            topic_id=self.topic_ids.get(name, ""),
            partitions=tuple(
                PartitionMetadata(
                    partition=p,
                    error_code=ErrorCode.NONE
                    if s.leader in live
                    else ErrorCode.LEADER_NOT_AVAILABLE,
                    leader=s.leader if s.leader in live else -1,
                    replicas=s.replicas,
                    isr=s.isr,
                    leader_epoch=s.leader_epoch,
                    offline_replicas=tuple(r for r in s.replicas if r not in live),
                )
                for p, s in sorted(states.items())
            ),
        )
