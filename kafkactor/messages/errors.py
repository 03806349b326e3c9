"""Kafka's protocol error codes (org.apache.kafka.common.protocol.Errors), by code and name."""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Kafka's error codes, named as the 0.9-era broker names them (NOT_LEADER_FOR_PARTITION)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_FOR_PARTITION = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    # (61-67, 70-72: delegation tokens, fetch sessions and listeners, not modelled)
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80  # KIP-183/460: the preferred replica cannot lead now
    FENCED_INSTANCE_ID = 82  # KIP-345: a static member's instance id now has another member id
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83  # KIP-460: no live replica for an unclean election
    ELECTION_NOT_NEEDED = 84  # KIP-460: the partition already has the leader asked for
    NO_REASSIGNMENT_IN_PROGRESS = 85  # KIP-455: cancelling a partition not being reassigned
    GROUP_SUBSCRIBED_TO_TOPIC = 86  # KIP-496: OffsetDelete of a topic the group's members consume
    INVALID_RECORD = 87  # a record Kafka's LogValidator refuses (KIP-467), e.g. keyless compacted
    UNSTABLE_OFFSET_COMMIT = 88
    PRODUCER_FENCED = (
        90  # KIP-588: an older epoch of a transactional id (INVALID_PRODUCER_EPOCH before)
    )
    RESOURCE_NOT_FOUND = 91  # KIP-554: describing a user without SCRAM credentials
    DUPLICATE_RESOURCE = 92  # KIP-554: one user's credential altered twice in a request
    UNACCEPTABLE_CREDENTIAL = 93  # KIP-554: an empty user name, iterations out of bounds
    UNKNOWN_TOPIC_ID = 100  # KIP-516: a request names a topic by an id no topic has
    INCONSISTENT_TOPIC_ID = 103  # KIP-516: a replica's log holds another topic id
    TRANSACTIONAL_ID_NOT_FOUND = 105  # KIP-664: DescribeTransactions of an unknown id
    # KIP-919: a DescribeCluster (v1+) for controllers sent to a broker, or for an unknown type
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115

    @property
    def retriable(self) -> bool:
        """Whether Kafka marks the error retriable (a client may try the request again)."""
        return self in _RETRIABLE


_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_FOR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        # Kafka's InvalidMetadataException subclasses (KIP-460's election errors)
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.ELECTION_NOT_NEEDED,
        # KIP-516's UnknownTopicIdException and InconsistentTopicIdException
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)
