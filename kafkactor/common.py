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


# the listener a connection came in on when no listener is named (Kafka's default listener)
DEFAULT_LISTENER = "PLAINTEXT"


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerEndpoint:
    """One of a broker's listeners as registered and as UpdateMetadata carries it (Kafka's
    `EndPoint`): the listener's name, its advertised host and port, and its security protocol
    by Kafka's id (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL)."""

    listener: str = DEFAULT_LISTENER
    host: str = ""
    port: int = -1
    security_protocol: int = 0

    def url(self) -> str:
        """Kafka's connection string, `SASL_SSL://host:9093` (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    """Where a broker is reached: Kafka's `Broker` with its endpoints, as the broker registers
    them in `/brokers/ids/<id>` and the controller spreads them in UpdateMetadata.

    `host` / `port` are the broker's inter-broker endpoint (the one listener of a broker
    without security); `listeners` every listener's endpoint. Empty `listeners` (a broker
    described before listeners had names) stands for one PLAINTEXT listener at host:port. A
    broker without a listener has port -1."""

    broker_id: int = 0
    host: str = ""
    port: int = -1
    listeners: tuple[ListenerEndpoint, ...] = ()

    def on(self, listener: str) -> BrokerEndpoint | None:
        """This broker as clients of `listener` see it (Kafka's `Broker.node(listenerName)`):
        the host and port of its listener of that name, None when it has none (Kafka leaves
        such a broker out of Metadata answered on that listener)."""
        if not self.listeners:
            return self if listener == DEFAULT_LISTENER and self.port >= 0 else None
        for endpoint in self.listeners:
            if endpoint.listener == listener and endpoint.port >= 0:
                return BrokerEndpoint(
                    broker_id=self.broker_id,
                    host=endpoint.host,
                    port=endpoint.port,
                    listeners=self.listeners,
                )
        return None

    @property
    def reachable(self) -> bool:
        """Whether the broker has any listener at all."""
        return self.port >= 0 or any(e.port >= 0 for e in self.listeners)


def endpoints_on(
    endpoints: tuple[BrokerEndpoint, ...], listener: str | None
) -> tuple[BrokerEndpoint, ...]:
    """The brokers clients of `listener` can reach, at that listener's endpoints (None: every
    broker with a listener, at its inter-broker endpoint)."""
    if listener is None:
        return tuple(e for e in endpoints if e.port >= 0)
    on = (e.on(listener) for e in endpoints)
    return tuple(e for e in on if e is not None)


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
    ListenerEndpoint,
)
"""The shared value types that may travel inside messages (registered with the codec)."""
