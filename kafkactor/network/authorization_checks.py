"""Which authorization check each API goes through before its KafkaApis handler (Kafka 2.8's
`KafkaApis`, one check per API; the checks are in `authorization_data_checks`,
`authorization_group_checks`, `authorization_admin_checks` and `authorization_txn_checks`).

ApiVersions, SaslHandshake and SaslAuthenticate have none: a client asks them before it is
anyone. The ACL APIs check the cluster themselves (`acl_apis`: they need the authorizer's
ACLs anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kafkactor.network import (
    authorization_admin_checks as admin,
)
from kafkactor.network import (
    authorization_data_checks as data,
)
from kafkactor.network import (
    authorization_group_checks as group,
)
from kafkactor.network import (
    authorization_txn_checks as txn,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.authorization import Check, RequestAuthorization, Serve
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Step
from kafkactor.security.acl import Authorizer

__all__ = ["CHECKS", "authorized"]

CHECKS: Final[Mapping[int, Check]] = {
    ApiKey.PRODUCE: data.produce,
    ApiKey.FETCH: data.fetch,
    ApiKey.LIST_OFFSETS: data.list_offsets,
    ApiKey.METADATA: data.metadata,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: data.offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: data.delete_records,
    ApiKey.FIND_COORDINATOR: group.find_coordinator,
    ApiKey.JOIN_GROUP: group.join_group,
    ApiKey.SYNC_GROUP: group.sync_group,
    ApiKey.HEARTBEAT: group.heartbeat,
    ApiKey.LEAVE_GROUP: group.leave_group,
    ApiKey.OFFSET_COMMIT: group.offset_commit,
    ApiKey.OFFSET_FETCH: group.offset_fetch,
    ApiKey.OFFSET_DELETE: group.offset_delete,
    ApiKey.DESCRIBE_GROUPS: group.describe_groups,
    ApiKey.LIST_GROUPS: group.list_groups,
    ApiKey.DELETE_GROUPS: group.delete_groups,
    ApiKey.CREATE_TOPICS: admin.create_topics,
    ApiKey.DELETE_TOPICS: admin.delete_topics,
    ApiKey.CREATE_PARTITIONS: admin.create_partitions,
    ApiKey.DESCRIBE_CONFIGS: admin.describe_configs,
    ApiKey.ALTER_CONFIGS: admin.alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: admin.incremental_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: admin.describe_log_dirs,
    ApiKey.ELECT_LEADERS: admin.elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: admin.alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: admin.list_partition_reassignments,
    ApiKey.DESCRIBE_CLUSTER: admin.describe_cluster,
    admin.DESCRIBE_CLIENT_QUOTAS: admin.describe_client_quotas,
    admin.ALTER_CLIENT_QUOTAS: admin.alter_client_quotas,
    admin.DESCRIBE_USER_SCRAM_CREDENTIALS: admin.describe_user_scram_credentials,
    admin.ALTER_USER_SCRAM_CREDENTIALS: admin.alter_user_scram_credentials,
    ApiKey.INIT_PRODUCER_ID: txn.init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: txn.add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: txn.add_offsets_to_txn,
    ApiKey.END_TXN: txn.end_txn,
    ApiKey.TXN_OFFSET_COMMIT: txn.txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: txn.describe_transactions,
    ApiKey.LIST_TRANSACTIONS: txn.list_transactions,
    ApiKey.LEADER_AND_ISR: txn.cluster_action,
    ApiKey.STOP_REPLICA: txn.cluster_action,
    ApiKey.UPDATE_METADATA: txn.cluster_action,
    ApiKey.CONTROLLED_SHUTDOWN: txn.cluster_action,
    ApiKey.WRITE_TXN_MARKERS: txn.cluster_action,
}


def authorized(
    authorizer: Authorizer | None,
    header: RequestHeader,
    body: Any,
    serve: Serve,
    *,
    auto_create_topics: bool = False,
) -> Step:
    """The request through its API's check (served as it is without an authorizer, or for an
    API without a check); `auto_create_topics` is the broker's auto.create.topics.enable."""
    check = CHECKS.get(header.api_key)
    if authorizer is None or check is None:
        return serve(body)
    auth = RequestAuthorization.of(authorizer, header, auto_create_topics=auto_create_topics)
    return check(auth, header, body, serve)
