"""What a broker's controller actor tells itself when ZooKeeper watches fire, and what a broker
asks the controller when it shuts down cleanly."""

from __future__ import annotations

from kafkactor.common import TopicPartition
from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode
from kafkactor.messages.replication import UNKNOWN_BROKER_EPOCH


@message
class StandForElection:
    """`/controller` is gone (or was never there): try to become the controller."""


@message
class BrokersChanged:
    """The children of `/brokers/ids` changed: a broker registered or its session ended."""


@message
class ResendToBrokers:
    """Brokers whose controller requests were lost are due them again (`ControllerChannel`)."""


@message
class TopicsChanged:
    """The children of `/brokers/topics` changed: a topic was created."""


@message
class PartitionsChanged:
    """`/brokers/topics/<topic>` changed: partitions may have been added (Kafka's
    PartitionModificationsListener)."""

    topic: str = ""


@message
class IsrChangeNotified:
    """A leader announced ISR changes under `/isr_change_notification`."""


@message
class ZooKeeperSessionLost:
    """This broker's ZooKeeper session expired: a controller resigns at once."""


@message
class ZooKeeperSessionStarted:
    """A new ZooKeeper session is up (after an expiry): register and stand again."""


@message
class DeleteTopicsChanged:
    """The children of `/admin/delete_topics` changed: topics were marked for deletion."""


@message
class ControlledShutdownRequest(Request):
    """A broker asks the controller to move its leaderships away before it stops (Kafka's
    ControlledShutdownRequest, KAFKA-340); `broker_epoch` is its registration's (KIP-380)."""

    broker_id: int = -1
    broker_epoch: int = UNKNOWN_BROKER_EPOCH


@message
class ControlledShutdownResponse(Response):
    """The partitions the broker still leads (none: it may stop without a leader election),
    or why the controller would not act (NOT_CONTROLLER, STALE_BROKER_EPOCH,
    BROKER_NOT_AVAILABLE)."""

    error_code: ErrorCode = ErrorCode.NONE
    remaining_partitions: tuple[TopicPartition, ...] = ()


@message
class PreferredReplicaElectionCreated:
    """`/admin/preferred_replica_election` was created: elect the preferred leaders it lists."""


@message
class CheckLeaderImbalance:
    """The leader-imbalance check is due (`leader.imbalance.check.interval.seconds`); `armed`
    numbers the arming, so a check armed before a resignation is told apart."""

    armed: int = 0


@message
class ElectLeadersRequest(Request):
    """Elect leaders of these partitions (Kafka's ElectLeaders, KIP-183 and KIP-460):
    `election_type` 0 is the preferred replica, 1 an unclean election of offline ones."""

    election_type: int = 0
    partitions: tuple[TopicPartition, ...] = ()


@message
class PartitionElectionResult:
    """One partition's election: NONE with its new leader, or Kafka's error and message."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    leader: int = -1


@message
class ElectLeadersResponse(Response):
    """A result per partition asked for (NOT_CONTROLLER for each when this broker's controller
    is not the active one)."""

    results: tuple[PartitionElectionResult, ...] = ()


@message
class ReassignPartitionsCreated:
    """`/admin/reassign_partitions` was created, or changed (Kafka's
    PartitionReassignmentHandler): reassign the partitions it lists."""

    created: bool = True


@message
class ReassignmentTarget:
    """One partition of AlterPartitionReassignments: its target replicas, or None to cancel."""

    topic: str = ""
    partition: int = 0
    replicas: tuple[int, ...] | None = None


@message
class AlterPartitionReassignmentsRequest(Request):
    """Reassign partitions (KIP-455's AlterPartitionReassignments), answered once each is
    started (recorded in `/brokers/topics/<t>`), or refused."""

    targets: tuple[ReassignmentTarget, ...] = ()


@message
class ReassignmentResult:
    """One partition's answer: NONE, or Kafka's error and message."""

    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@message
class AlterPartitionReassignmentsResponse(Response):
    """A result per partition; a top-level NOT_CONTROLLER (and no results) when this broker's
    controller is not the active one."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    results: tuple[ReassignmentResult, ...] = ()


@message
class ListPartitionReassignmentsRequest(Request):
    """The reassignments under way (KIP-455's ListPartitionReassignments): of `partitions`, or
    of every partition when None."""

    partitions: tuple[TopicPartition, ...] | None = None


@message
class OngoingReassignment:
    """A partition being reassigned: RS, AR and RR."""

    topic: str = ""
    partition: int = 0
    replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@message
class ListPartitionReassignmentsResponse(Response):
    """The partitions asked for that are being reassigned; a top-level NOT_CONTROLLER when
    this broker's controller is not the active one."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    reassignments: tuple[OngoingReassignment, ...] = ()
