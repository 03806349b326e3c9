"""The value types every part of kafkactor shares (Kafka's `org.apache.kafka.common` idea).

One type per concept: a topic-partition is a `TopicPartition` wherever it appears (storage,
checkpoints, actors, clients, messages), a position in a log is a `LogOffsetMetadata`, and a
partition's leadership (leader, leader epoch, ISR, assigned replicas, the controller epoch that
decided it and the version of its state znode) is a `PartitionLeaderState`, whether the
controller holds it, ZooKeeper stores it or a LeaderAndIsr request carries it.

These are frozen, slotted, keyword-only dataclasses with plain fields, and the message codec
knows them (`kafkactor.messages` registers them), so they travel inside messages. Nothing here
imports the rest of kafkactor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

NO_LEADER = -1  # a partition without a leader
# the leader an UpdateMetadata gives a partition of a topic being deleted (Kafka's
# LeaderAndIsr.LeaderDuringDelete): the broker's metadata cache drops the partition
LEADER_DURING_DELETE = -2
# Kafka's internal topic of committed offsets and group metadata (Topic.GROUP_METADATA_TOPIC_NAME)
OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's internal topic of transaction metadata (Topic.TRANSACTION_STATE_TOPIC_NAME)
TRANSACTION_STATE_TOPIC = "__transaction_state"


class _NamesAPartition(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class TopicPartition:
    """Kafka's `TopicPartition`: a topic name and a partition number; `str()` is `topic-N`.

    `str(tp)` is the name a partition goes by in log directory names, actor addresses,
    purgatory keys and events.
    """

    topic: str = ""
    partition: int = 0

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"

    @staticmethod
    def of(value: _NamesAPartition) -> TopicPartition:
        """The topic-partition a message part names with its `topic` and `partition` fields."""
        return TopicPartition(topic=value.topic, partition=value.partition)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogOffsetMetadata:
    """Kafka's `LogOffsetMetadata`: an offset with the segment and byte position where it sits.

    DelayedFetch compares these to decide whether a fetch offset and the log end (or high
    watermark) are on the same segment and how many bytes lie between them.
    """

    offset: int = 0
    segment_base_offset: int = 0
    position: int = 0

    def on_older_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset < other.segment_base_offset

    def on_same_segment(self, other: LogOffsetMetadata) -> bool:
        return self.segment_base_offset == other.segment_base_offset

    def position_diff(self, other: LogOffsetMetadata) -> int:
        """Bytes from `other` to this position (both on the same segment)."""
        if not self.on_same_segment(other):
            raise ValueError(f"{self} and {other} are on different segments")
        return self.position - other.position


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLeaderState:
    """A partition's leadership: Kafka's `LeaderIsrAndControllerEpoch` with the assignment.

    The controller decides it (`ControllerState`), writes leader, leader epoch, ISR and
    controller epoch to `/brokers/topics/<t>/partitions/<p>/state` (whose version is
    `zk_version`) and sends it whole in LeaderAndIsr requests; leaders change the ISR in it.
    """

    topic: str = ""
    partition: int = 0
    controller_epoch: int = 0
    leader: int = NO_LEADER
    leader_epoch: int = 0
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    zk_version: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(topic=self.topic, partition=self.partition)

    @property
    def online(self) -> bool:
        return self.leader != NO_LEADER


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    """Where a broker's clients connect: Kafka's `Broker` with its one PLAINTEXT endpoint, as
    the broker registers it in `/brokers/ids/<id>` and the controller spreads it in
    UpdateMetadata. A broker without a listener is registered with port -1."""

    broker_id: int = 0
    host: str = ""
    port: int = -1


class TopicExistsError(ValueError):
    """A topic of that name already exists (Kafka's TOPIC_ALREADY_EXISTS)."""


class UnknownTopicError(ValueError):
    """No topic of that name exists (Kafka's UNKNOWN_TOPIC_OR_PARTITION)."""


class InvalidReplicaAssignmentError(ValueError):
    """A manual replica assignment Kafka refuses (INVALID_REPLICA_ASSIGNMENT): partition ids
    not 0..n-1, an empty or duplicated replica list, unequal replica counts, or a broker that
    is not registered."""


class InvalidPartitionsError(ValueError):
    """A partition count Kafka refuses (INVALID_PARTITIONS): CreatePartitions asking for no
    more partitions than the topic has, or for more than a topic may have here."""


class InvalidReplicationFactorError(ValueError):
    """A replication factor Kafka refuses (INVALID_REPLICATION_FACTOR): more replicas than
    there are registered brokers to hold them."""


class TopicQueuedForDeletionError(ValueError):
    """The topic is marked for deletion (`/admin/delete_topics/<t>`): Kafka refuses to add
    partitions to it (INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")."""


VALUE_TYPES: tuple[type[object], ...] = (
    TopicPartition,
    LogOffsetMetadata,
    PartitionLeaderState,
    BrokerEndpoint,
)
"""The shared value types that may travel inside messages (registered with the codec)."""
