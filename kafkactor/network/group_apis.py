"""KafkaApis' consumer-group APIs: FindCoordinator, the classic rebalance protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup), DescribeGroups, ListGroups and DeleteGroups — translated to
and from the group coordinator's messages (`kafkactor.messages.group`), which the broker's group
coordinator actor answers. OffsetCommit and OffsetFetch are `OffsetApis`' (`offset_apis`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import addresses
from kafkactor.actors.transaction.transaction_config import (
    TransactionConfig,
    transaction_state_topic_config,
)
from kafkactor.actors.transaction.transaction_log import partition_for_transactional_id
from kafkactor.common import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from kafkactor.messages import ErrorCode, Request, Response
from kafkactor.messages.group import (
    DeletedGroup,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupProtocol,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkactor.network.admin_apis import KafkaApisConfig, TopicAdmin
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.coordinator_lookup import CoordinatorLookup, InternalTopic
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import (
    AUTHORIZED_OPERATIONS_OMITTED,
    Step,
    ask_expecting,
    group_instance_id,
    millis,
    respond,
)

__all__ = ["OFFSETS_TOPIC_CONFIG", "GroupApis"]

R = TypeVar("R", bound=Response)

GROUP_KEY_TYPE: Final = 0  # FindCoordinator's key_type for a group
TRANSACTION_KEY_TYPE: Final = 1  # ... and for a transactional id
#: The topic configs `__consumer_offsets` is created with (Kafka's offsets.topic.segment.bytes
#: default, and compaction: only a group's latest metadata and offsets matter)
OFFSETS_TOPIC_CONFIG: Final = {
    "cleanup.policy": "compact",
    "segment.bytes": str(100 * 1024 * 1024),
}


class GroupApis:
    """The consumer-group half of Kafka's `KafkaApis` for one broker.

    FindCoordinator reads the metadata cache for the leader of the group's `__consumer_offsets`
    partition, or of the transactional id's `__transaction_state` partition (creating the topic
    through the `TopicAdmin` when it is missing, as Kafka does on the first lookup:
    `coordinator_lookup`); every other group API is asked of the broker's group coordinator actor,
    whose answer (or failure) becomes the response of the request's version.
    """

    def __init__(
        self,
        broker_id: int,
        config: KafkaApisConfig,
        group: GroupConfig,
        *,
        admin: TopicAdmin | None,
        transaction: TransactionConfig | None = None,
    ) -> None:
        self.config = config
        self.group = group
        self.admin = admin
        self.replica_manager = addresses.replica_manager(broker_id)
        self.coordinator = addresses.group_coordinator(broker_id)
        self._lookup = CoordinatorLookup(self.replica_manager, admin)
        txn = transaction if transaction is not None else TransactionConfig()
        self._internal_topics = {
            GROUP_KEY_TYPE: InternalTopic(
                OFFSETS_TOPIC,
                group.offsets_topic_partitions,
                config.offsets_topic_replication_factor,
                partition_for,
                lambda _factor: OFFSETS_TOPIC_CONFIG,
            ),
            TRANSACTION_KEY_TYPE: InternalTopic(
                TRANSACTION_STATE_TOPIC,
                txn.state_log_num_partitions,
                txn.state_log_replication_factor,
                partition_for_transactional_id,
                lambda factor: transaction_state_topic_config(txn, factor),
                count_from_metadata=True,
            ),
        }

    def _ask(
        self, request: Request, answered: type[R], answer: Callable[[R | None, ErrorCode], Step]
    ) -> Step:
        """Ask the group coordinator; `answer(its response, the code for what it omits)`, or
        `answer(None, the failure's code)` when it answered something else (an ErrorResponse)."""
        return ask_expecting(self.coordinator, request, answered, answer)

    # -- FindCoordinator -----------------------------------------------------------------------

    def find_coordinator(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.FIND_COORDINATOR, header.api_version)
        key_type = int(getattr(body, "key_type", GROUP_KEY_TYPE))  # v1+
        topic = self._internal_topics.get(key_type)
        if topic is None:  # Kafka: "Unknown coordinator type in FindCoordinator request"
            return respond(
                schema,
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Unknown coordinator type {key_type} in FindCoordinator request",
                node_id=-1,
                host="",
                port=-1,
            )
        return self._lookup.find(schema, topic, body.key, header.listener)

    # -- the rebalance protocol -----------------------------------------------------------------

    def join_group(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        schema = response_type(ApiKey.JOIN_GROUP, version)
        member_type = nested(schema, "JoinGroupResponseMember")
        session_timeout_ms = millis(body.session_timeout)
        instance = group_instance_id(body)  # v5+ (KIP-345): a static member
        request = JoinGroupRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            group_instance_id=instance,
            client_id=header.client_id or "",
            client_host=_client_host(header),
            session_timeout_ms=session_timeout_ms,
            # v0 has no rebalance timeout: the session timeout bounds the join phase
            rebalance_timeout_ms=millis(body.rebalance_timeout) if version else session_timeout_ms,
            protocol_type=body.protocol_type,
            protocols=tuple(
                GroupProtocol(name=p.name, metadata=p.metadata) for p in body.protocols
            ),
            # KIP-394, for dynamic members only (as Kafka's KafkaApis asks for it)
            require_known_member_id=version >= 4 and instance is None,
        )

        def joined(response: JoinGroupResponse | None, code: ErrorCode) -> Step:
            r = response if response is not None else JoinGroupResponse(error_code=code)
            members = tuple(
                build(
                    member_type,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,  # v5+
                    metadata=m.metadata,
                )
                for m in r.members
            )
            return respond(
                schema,
                error_code=r.error_code,
                generation_id=r.generation_id,
                protocol_name=r.protocol_name or "",  # not nullable before v7
                leader=r.leader_id,
                member_id=r.member_id,
                members=members,
            )

        return self._ask(request, JoinGroupResponse, joined)

    def sync_group(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.SYNC_GROUP, header.api_version)
        request = SyncGroupRequest(
            group_id=body.group_id,
            generation_id=int(body.generation_id),
            member_id=body.member_id,
            group_instance_id=group_instance_id(body),  # v3+
            assignments=tuple(
                SyncGroupAssignment(member_id=a.member_id, assignment=a.assignment)
                for a in body.assignments
            ),
        )

        def synced(response: SyncGroupResponse | None, code: ErrorCode) -> Step:
            r = response if response is not None else SyncGroupResponse(error_code=code)
            return respond(schema, error_code=r.error_code, assignment=r.assignment)

        return self._ask(request, SyncGroupResponse, synced)

    def heartbeat(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.HEARTBEAT, header.api_version)
        request = HeartbeatRequest(
            group_id=body.group_id,
            generation_id=int(body.generation_id),
            member_id=body.member_id,
            group_instance_id=group_instance_id(body),  # v3+
        )

        def beaten(response: HeartbeatResponse | None, code: ErrorCode) -> Step:
            return respond(schema, error_code=response.error_code if response is not None else code)

        return self._ask(request, HeartbeatResponse, beaten)

    def leave_group(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        schema = response_type(ApiKey.LEAVE_GROUP, version)
        # v3+ names members by identity: a static member by its group instance id
        leaving = (
            tuple(
                LeaveGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id)
                for m in body.members
            )
            if version >= 3
            else ()
        )

        def left(response: LeaveGroupResponse | None, code: ErrorCode) -> Step:
            r = response if response is not None else LeaveGroupResponse(error_code=code)
            if version < 3:  # one member and no member list: its error is the request's
                failed = [m.error_code for m in r.members if m.error_code is not ErrorCode.NONE]
                top = failed[0] if r.error_code is ErrorCode.NONE and failed else r.error_code
                return respond(schema, error_code=top)
            member_type = nested(schema, "MemberResponse")
            return respond(
                schema,
                error_code=r.error_code,
                members=tuple(
                    build(
                        member_type,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        error_code=m.error_code,
                    )
                    for m in r.members
                ),
            )

        request = LeaveGroupRequest(
            group_id=body.group_id,
            member_ids=() if version >= 3 else (body.member_id,),
            members=leaving,
        )
        return self._ask(request, LeaveGroupResponse, left)

    # -- administration -------------------------------------------------------------------------

    def describe_groups(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.DESCRIBE_GROUPS, header.api_version)
        group_ids = tuple(body.groups)

        def described(response: DescribeGroupsResponse | None, code: ErrorCode) -> Step:
            found = {g.group_id: g for g in response.groups} if response is not None else {}
            groups = (found.get(g, DescribedGroup(error_code=code, group_id=g)) for g in group_ids)
            return respond(schema, groups=tuple(_described(schema, g) for g in groups))

        request = DescribeGroupsRequest(group_ids=group_ids)
        return self._ask(request, DescribeGroupsResponse, described)

    def list_groups(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.LIST_GROUPS, header.api_version)
        listed_type = nested(schema, "ListedGroup")
        # v4's states_filter (KIP-518); the coordinator filters
        request = ListGroupsRequest(states_filter=tuple(getattr(body, "states_filter", ())))

        def listed(response: ListGroupsResponse | None, code: ErrorCode) -> Step:
            r = response if response is not None else ListGroupsResponse(error_code=code)
            groups = tuple(
                build(
                    listed_type,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                )
                for g in r.groups
            )
            return respond(schema, error_code=r.error_code, groups=groups)

        return self._ask(request, ListGroupsResponse, listed)

    def delete_groups(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.DELETE_GROUPS, header.api_version)
        result_type = nested(schema, "DeletableGroupResult")
        group_ids = tuple(body.groups_names)

        def deleted(response: DeleteGroupsResponse | None, code: ErrorCode) -> Step:
            found = {g.group_id: g for g in response.groups} if response is not None else {}
            results = (found.get(g, DeletedGroup(group_id=g, error_code=code)) for g in group_ids)
            return respond(
                schema,
                results=tuple(
                    build(result_type, group_id=r.group_id, error_code=r.error_code)
                    for r in results
                ),
            )

        request = DeleteGroupsRequest(group_ids=group_ids)
        return self._ask(request, DeleteGroupsResponse, deleted)


# -- helpers -------------------------------------------------------------------------------------


def _described(schema: type[Any], group: DescribedGroup) -> Any:
    """One group of a DescribeGroups response."""
    member_type = nested(schema, "DescribedGroupMember")
    members = tuple(
        build(
            member_type,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,  # v4+
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata,
            member_assignment=m.assignment,
        )
        for m in group.members
    )
    return build(
        nested(schema, "DescribedGroup"),
        error_code=group.error_code,
        group_id=group.group_id,
        group_state=group.state,
        protocol_type=group.protocol_type,
        protocol_data=group.protocol,
        members=members,
        # v3+ may ask for them (include_authorized_operations): no authorizer computes them
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _client_host(header: RequestHeader) -> str:
    """A member's client host as Kafka shows it (Java's `InetAddress.toString()` of the
    connection's peer: "/127.0.0.1"), or "" when the connection's address is not known."""
    return f"/{header.client_host}" if header.client_host else ""
