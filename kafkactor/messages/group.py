"""The group coordinator's messages: Kafka's group membership and offset APIs as actor requests.

A broker's `GroupCoordinatorActor` (`broker/<id>/group-coordinator`) answers them; the wire
layer (`kafkactor.network`) and the in-process consumer send them. Field names follow Kafka's
request and response schemas; errors are `ErrorCode`s, never exceptions.
"""

from __future__ import annotations

from kafkactor.messages.base import Request, Response, message
from kafkactor.messages.errors import ErrorCode

NO_GENERATION = -1  # Kafka's JoinGroupRequest.UNKNOWN_GENERATION_ID
NO_MEMBER_ID = ""  # Kafka's JoinGroupRequest.UNKNOWN_MEMBER_ID: a new member
# `group_instance_id` None is a dynamic member; a string names a static member (KIP-345,
# JoinGroup v5+, SyncGroup / Heartbeat / LeaveGroup v3+, OffsetCommit v7+)


# -- membership ----------------------------------------------------------------------------------


@message
class GroupProtocol:
    """One protocol a member supports (JoinGroup's `protocols`): its name (for consumers, an
    assignor such as "range") and the member's metadata for it (its subscription)."""

    name: str = ""
    metadata: bytes = b""


@message
class JoinGroupRequest(Request):
    """Kafka's JoinGroup (api key 11). `member_id` "" is a new member;
    `require_known_member_id` is JoinGroup v4+'s behaviour for a dynamic member (KIP-394: a
    new member first gets its id with MEMBER_ID_REQUIRED). `group_instance_id` (v5+,
    KIP-345) makes the member static: rejoining with "" after a restart, it takes over its
    old member id's place without a rebalance."""

    group_id: str = ""
    member_id: str = NO_MEMBER_ID
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    session_timeout_ms: int = 10_000
    rebalance_timeout_ms: int = -1  # -1: the session timeout (JoinGroup v0 has no field)
    protocol_type: str = ""
    protocols: tuple[GroupProtocol, ...] = ()
    require_known_member_id: bool = False


@message
class JoinGroupMemberInfo:
    """One member in the leader's JoinGroup answer: its id, its group instance id (static
    members, v5+) and its metadata for the chosen protocol."""

    member_id: str = ""
    group_instance_id: str | None = None
    metadata: bytes = b""


@message
class JoinGroupResponse(Response):
    """JoinGroup's answer: the generation, the chosen protocol and the leader; only the
    leader's lists the members."""

    error_code: ErrorCode = ErrorCode.NONE
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: tuple[JoinGroupMemberInfo, ...] = ()


@message
class SyncGroupAssignment:
    """The leader's assignment for one member (SyncGroup's `assignments`)."""

    member_id: str = ""
    assignment: bytes = b""


@message
class SyncGroupRequest(Request):
    """Kafka's SyncGroup (api key 14): the leader sends every member's assignment, the
    others none."""

    group_id: str = ""
    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = ()


@message
class SyncGroupResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@message
class HeartbeatRequest(Request):
    """Kafka's Heartbeat (api key 12); v3+ carries the static member's group instance id."""

    group_id: str = ""
    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None


@message
class HeartbeatResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE


@message
class LeaveGroupMember:
    """One member leaving (LeaveGroup v3+'s `MemberIdentity`): by member id, or a static
    member by its group instance id (member id "" or its current one)."""

    member_id: str = NO_MEMBER_ID
    group_instance_id: str | None = None


@message
class LeaveGroupRequest(Request):
    """Kafka's LeaveGroup (api key 13): one member (v0-v2) or several (v3+). `member_ids`
    are dynamic members; `members` (v3+) may name static members by group instance id."""

    group_id: str = ""
    member_ids: tuple[str, ...] = ()
    members: tuple[LeaveGroupMember, ...] = ()


@message
class LeaveGroupMemberResult:
    """One member's result: its identity as the request gave it, and its error."""

    member_id: str = ""
    group_instance_id: str | None = None
    error_code: ErrorCode = ErrorCode.NONE


@message
class LeaveGroupResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    members: tuple[LeaveGroupMemberResult, ...] = ()


# -- offsets -------------------------------------------------------------------------------------


@message
class OffsetCommitPartition:
    """One partition of an OffsetCommit: the offset, the leader epoch it was read in (-1:
    unknown), the client's metadata string (None: none) and, for v1, a commit timestamp
    (-1: the broker's time)."""

    topic: str = ""
    partition: int = 0
    offset: int = 0
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1


@message
class OffsetCommitRequest(Request):
    """Kafka's OffsetCommit (api key 8). Generation -1 with member "" commits for a consumer
    outside group management; v7+ carries a static member's group instance id."""

    group_id: str = ""
    generation_id: int = NO_GENERATION
    member_id: str = NO_MEMBER_ID
    group_instance_id: str | None = None
    partitions: tuple[OffsetCommitPartition, ...] = ()


@message
class OffsetCommitPartitionResult:
    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE


@message
class OffsetCommitResponse(Response):
    """One result per partition of the request."""

    partitions: tuple[OffsetCommitPartitionResult, ...] = ()


@message
class OffsetFetchPartitionRequest:
    topic: str = ""
    partition: int = 0


@message
class OffsetFetchRequest(Request):
    """Kafka's OffsetFetch (api key 9): `all_partitions` (v2+'s null topics) asks for every
    partition the group committed; `require_stable` is KIP-447's."""

    group_id: str = ""
    partitions: tuple[OffsetFetchPartitionRequest, ...] = ()
    all_partitions: bool = False
    require_stable: bool = False


@message
class OffsetFetchPartitionResult:
    """A committed offset: -1 (and metadata "") when none; leader epoch -1 when unknown."""

    topic: str = ""
    partition: int = 0
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error_code: ErrorCode = ErrorCode.NONE


@message
class OffsetFetchResponse(Response):
    """A group-level error (v2+) and one result per partition."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[OffsetFetchPartitionResult, ...] = ()


@message
class OffsetDeleteRequest(Request):
    """Kafka's OffsetDelete (api key 47, KIP-496): these partitions' committed offsets go, for
    an Empty group, or for topics a consumer group's members do not subscribe to."""

    group_id: str = ""
    partitions: tuple[OffsetFetchPartitionRequest, ...] = ()


@message
class OffsetDeletePartitionResult:
    topic: str = ""
    partition: int = 0
    error_code: ErrorCode = ErrorCode.NONE


@message
class OffsetDeleteResponse(Response):
    """A group-level error (then no partition), or one result per partition asked for."""

    error_code: ErrorCode = ErrorCode.NONE
    partitions: tuple[OffsetDeletePartitionResult, ...] = ()


# -- administration ------------------------------------------------------------------------------


@message
class DescribeGroupsRequest(Request):
    """Kafka's DescribeGroups (api key 15), for groups this coordinator owns."""

    group_ids: tuple[str, ...] = ()


@message
class DescribedMember:
    """One member as DescribeGroups shows it (`group_instance_id` from v4)."""

    member_id: str = ""
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    metadata: bytes = b""
    assignment: bytes = b""


@message
class DescribedGroup:
    """One group as DescribeGroups shows it: state "Dead" for a group not known here."""

    error_code: ErrorCode = ErrorCode.NONE
    group_id: str = ""
    state: str = ""
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@message
class DescribeGroupsResponse(Response):
    groups: tuple[DescribedGroup, ...] = ()


@message
class ListGroupsRequest(Request):
    """Kafka's ListGroups (api key 16): the groups this coordinator owns, those in
    `states_filter` when given (v4, KIP-518)."""

    states_filter: tuple[str, ...] = ()


@message
class ListedGroup:
    group_id: str = ""
    protocol_type: str = ""
    state: str = ""


@message
class ListGroupsResponse(Response):
    error_code: ErrorCode = ErrorCode.NONE
    groups: tuple[ListedGroup, ...] = ()


@message
class DeleteGroupsRequest(Request):
    """Kafka's DeleteGroups (api key 42): Empty groups go, with their offsets."""

    group_ids: tuple[str, ...] = ()


@message
class DeletedGroup:
    group_id: str = ""
    error_code: ErrorCode = ErrorCode.NONE


@message
class DeleteGroupsResponse(Response):
    groups: tuple[DeletedGroup, ...] = ()


# -- from the replica manager --------------------------------------------------------------------


@message
class OffsetsPartitionLoading:
    """A LeaderAndIsr makes this broker leader of `__consumer_offsets` partition `partition`
    in `leader_epoch`: its groups answer COORDINATOR_LOAD_IN_PROGRESS from now until the load
    that `OffsetsPartitionElected` starts has ended (Kafka's `onElection`, whose
    `addLoadingPartition` runs inside the LeaderAndIsr handling). Sent before the broker's
    partitions apply the request, so before any metadata can name this broker as the leader."""

    partition: int = 0
    leader_epoch: int = 0


@message
class OffsetsPartitionsKnown:
    """The `__consumer_offsets` partitions this broker's metadata cache now shows (after an
    UpdateMetadata): for a group of one of them that it does not lead, the coordinator answers
    NOT_COORDINATOR rather than COORDINATOR_LOAD_IN_PROGRESS."""

    partitions: tuple[int, ...] = ()


@message
class OffsetsPartitionElected:
    """This broker became leader of `__consumer_offsets` partition `partition` in
    `leader_epoch`: load its groups (Kafka's `onElection`)."""

    partition: int = 0
    leader_epoch: int = 0


@message
class OffsetsPartitionResigned:
    """This broker no longer leads `__consumer_offsets` partition `partition` (it follows,
    or the replica stopped): unload its groups (Kafka's `onResignation`). `leader_epoch` is
    the epoch it follows in, or -1 when the replica stopped (the coordinator then forgets the
    partition's epochs: a topic deleted and created again starts from epoch 0)."""

    partition: int = 0
    leader_epoch: int = -1
