"""Kafka's `KafkaApis`, pure: a wire request becomes actor requests, their answers a response.

`KafkaApis.handle` turns one decoded request into a `Step` (`kafkactor.network.steps`); the
actor shell (`KafkaApisActor`) runs the steps. The data APIs (Produce, OffsetForLeaderEpoch)
and ApiVersions are here, Fetch and ListOffsets `fetch_apis`'; the transaction APIs are
`TxnApis`' (`txn_apis`, WriteTxnMarkers `txn_markers`); Metadata and InitProducerId are
`AdminApis`', CreateTopics and DeleteTopics `TopicAdminApis`', CreatePartitions
`PartitionAdminApis`'; the consumer-group ones (FindCoordinator, JoinGroup to DeleteGroups,
the offset APIs) `GroupApis`'; DescribeConfigs is `ConfigApis`', DescribeCluster
`ClusterApis`'. Everything is plain translation, tested without threads.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import addresses
from kafkactor.actors.transaction.transaction_config import TransactionConfig
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.offsets import (
    CONSUMER_REPLICA_ID,
    OffsetForLeaderPartition,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.replication import (
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
)
from kafkactor.network.admin_apis import AdminApis, KafkaApisConfig, ProducerIdSource, TopicAdmin
from kafkactor.network.alter_config_apis import AlterConfigApis, TopicConfigAdmin
from kafkactor.network.api_versions import SUPPORTED, ApiKey
from kafkactor.network.cluster_apis import ClusterApis
from kafkactor.network.codec import UnsupportedApiVersions, build, nested, response_type
from kafkactor.network.config_apis import BrokerProperties, ConfigApis, TopicConfigRepository
from kafkactor.network.delete_records_apis import delete_records
from kafkactor.network.elect_leaders_apis import elect_leaders
from kafkactor.network.fetch_apis import fetch, list_offsets
from kafkactor.network.group_apis import GroupApis
from kafkactor.network.inter_broker_apis import InterBrokerApis
from kafkactor.network.log_dir_apis import describe_log_dirs
from kafkactor.network.offset_apis import OffsetApis
from kafkactor.network.offset_delete_apis import offset_delete
from kafkactor.network.partition_admin_apis import PartitionAdminApis
from kafkactor.network.partition_answers import (
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    per_partition,
    storage_error_for,
)
from kafkactor.network.reassignment_apis import (
    alter_partition_reassignments,
    list_partition_reassignments,
)
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.sasl_apis import sasl_authenticate, sasl_handshake
from kafkactor.network.scram_quota_apis import EntityConfigAdmin, ScramQuotaApis
from kafkactor.network.steps import (
    NO_THROTTLE,
    Admin,
    Answer,
    Ask,
    Close,
    NoAnswer,
    Step,
    error_of,
    millis,
)
from kafkactor.network.topic_admin_apis import TopicAdminApis
from kafkactor.network.txn_apis import TxnApis, write_txn_markers
from kafkactor.network.txn_produce import has_transactional_records

if TYPE_CHECKING:  # the authorizer and its checks are loaded only when a broker has one
    from kafkactor.security.acl import Authorizer

__all__ = [
    "Admin",
    "Answer",
    "Ask",
    "Close",
    "KafkaApis",
    "KafkaApisConfig",
    "NoAnswer",
    "ProducerIdSource",
    "Step",
    "TopicAdmin",
]

Handler = Callable[["KafkaApis", RequestHeader, Any], Step]


def _group(handler: Callable[[GroupApis, RequestHeader, Any], Step]) -> Handler:
    """A `GroupApis` method as a KafkaApis handler."""
    return lambda apis, header, body: handler(apis.group_apis, header, body)


def _txn(handler: Callable[[TxnApis, int, Any], Step]) -> Handler:
    """A `TxnApis` method as a KafkaApis handler."""
    return lambda apis, header, body: handler(apis.txn_apis, header.api_version, body)


def _inter_broker(handler: Callable[[InterBrokerApis, RequestHeader, Any], Step]) -> Handler:
    """An `InterBrokerApis` method as a KafkaApis handler."""
    return lambda apis, header, body: handler(apis.inter_broker_apis, header, body)


def _scram_quota(handler: Callable[[ScramQuotaApis, int, Any], Step]) -> Handler:
    """A `ScramQuotaApis` method (client quotas, SCRAM credentials) as a KafkaApis handler."""
    return lambda apis, header, body: handler(apis.scram_quota_apis, header.api_version, body)


class KafkaApis:
    """Kafka's `KafkaApis` for one broker: every API it serves, as translation.

    Produce, Fetch, ListOffsets, Metadata and OffsetForLeaderEpoch go to the broker's replica
    manager as the messages the in-process clients send; ApiVersions is answered here;
    CreateTopics and auto-creation go through the `TopicAdmin`; InitProducerId through the
    `ProducerIdSource` (with a transactional id: the transaction coordinator); the transaction
    APIs to the broker's transaction coordinator, group coordinator and replica manager
    (`TxnApis`); the consumer-group APIs to the broker's group coordinator (`GroupApis`);
    DescribeConfigs to `ConfigApis`, with the broker's `properties` and its `topic_configs`;
    DescribeCluster to `ClusterApis`. With an `authorizer`, every API but ApiVersions and
    SASL's first goes through Kafka's authorization check of it (`authorization_checks`).
    """

    def __init__(
        self,
        broker_id: int,
        config: KafkaApisConfig | None = None,
        *,
        admin: TopicAdmin | None = None,
        producer_ids: ProducerIdSource | None = None,
        group: GroupConfig | None = None,
        properties: BrokerProperties | None = None,
        topic_configs: TopicConfigRepository | None = None,
        transaction: TransactionConfig | None = None,
        entity_configs: EntityConfigAdmin | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.authorizer = authorizer  # None: everything allowed (no authorizer.class.name)
        self.config = config if config is not None else KafkaApisConfig()
        self.replica_manager = addresses.replica_manager(broker_id)
        self.admin_apis = AdminApis(broker_id, self.config, admin=admin, producer_ids=producer_ids)
        self.group_apis = GroupApis(
            broker_id,
            self.config,
            group if group is not None else GroupConfig(),
            admin=admin,
            transaction=transaction,
        )
        self.inter_broker_apis = InterBrokerApis(broker_id)
        self.offset_apis = OffsetApis(broker_id)
        self.config_apis = ConfigApis(broker_id, properties, topic_configs)
        self.alter_config_apis = AlterConfigApis(
            broker_id,
            admin if isinstance(admin, TopicConfigAdmin) else None,
            properties.log_config if properties is not None else None,
        )
        self.cluster_apis = ClusterApis(broker_id, self.config.cluster_id)
        self.partition_admin_apis = PartitionAdminApis(broker_id, self.config, admin=admin)
        self.topic_admin_apis = TopicAdminApis(broker_id, self.config, admin=admin)
        self.txn_apis = TxnApis(broker_id)
        # the users / clients entity configs (ZooKeeper's): SCRAM credentials, client quotas
        self.scram_quota_apis = ScramQuotaApis(broker_id, entity_configs)

    def handle(self, header: RequestHeader, body: Any) -> Step:
        api = header.api_key
        handler = self._handlers.get(api)
        if handler is None:  # the codec lets through only what SUPPORTED names
            return Close(f"api key {api} has no handler")
        if self.authorizer is None:
            return handler(self, header, body)
        # Kafka's per-API authorization (authorization_checks), before and around the handler;
        # imported here: a broker without an authorizer never loads the checks
        from kafkactor.network.authorization_checks import authorized

        return authorized(
            self.authorizer,
            header,
            body,
            lambda checked: handler(self, header, checked),
            auto_create_topics=self.config.auto_create_topics_enable,
        )

    # -- ApiVersions ----------------------------------------------------------------------------

    def _api_versions(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        if isinstance(body, UnsupportedApiVersions):  # KIP-511: a v0 body naming our range
            response = response_type(ApiKey.API_VERSIONS, 0)
            low, high = SUPPORTED[ApiKey.API_VERSIONS]
            entry = nested(response, "ApiVersion")
            return Answer(
                response(
                    error_code=ErrorCode.UNSUPPORTED_VERSION,
                    api_keys=(
                        entry(api_key=ApiKey.API_VERSIONS, min_version=low, max_version=high),
                    ),
                ),
                version=0,
            )
        response = response_type(ApiKey.API_VERSIONS, version)
        entry = nested(response, "ApiVersion")
        return Answer(
            build(
                response,
                error_code=ErrorCode.NONE,
                api_keys=tuple(
                    entry(api_key=int(api), min_version=low, max_version=high)
                    for api, (low, high) in sorted(SUPPORTED.items())
                ),
                throttle_time=NO_THROTTLE,
            )
        )

    # -- Produce --------------------------------------------------------------------------------

    def _produce(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        acks = int(body.acks)
        transactional_id = body.transactional_id
        if transactional_id is None and has_transactional_records(body):
            # Kafka's handleProduceRequest: transactional batches need the producer's
            # transactional id (its authorization, without which the request fails whole)
            if acks == 0:  # no answer is read: closing is the only way to say no
                return Close("transactional records without a transactional id")
            return self._produce_refused(
                version, body, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            )
        parts = tuple(
            ProducePartition(
                topic=topic.name,
                partition=int(p.index),
                records=bytes(p.records) if p.records is not None else b"",
            )
            for topic in body.topic_data
            for p in topic.partition_data
        )
        # acks=0 is asked as acks=1: the append is the same, and its answer says whether to
        # close the connection (Kafka's only way to tell an acks=0 producer of an error)
        request = ProduceRequest(
            acks=1 if acks == 0 else acks,
            timeout_ms=millis(body.timeout),
            partitions=parts,
            transactional_id=transactional_id,
        )

        def answered(response: Response) -> Step:
            if acks == 0:
                return _acks0_outcome(response)
            return self._produce_answer(version, body, response)

        return Ask(self.replica_manager, request, answered)

    def _produce_refused(self, version: int, body: Any, code: ErrorCode) -> Step:
        return self._produce_answer(version, body, ErrorResponse(error_code=code))

    def _produce_answer(self, version: int, body: Any, response: Response) -> Step:
        schema = response_type(ApiKey.PRODUCE, version)
        # v8+ (KIP-467) names the records Kafka's LogValidator refused
        record_error = nested(schema, "BatchIndexAndErrorMessage") if version >= 8 else None

        def entry(p: Any, r: ProducePartitionResult | None, fallback: ErrorCode) -> dict[str, Any]:
            if r is None:  # the whole answer failed: Kafka's "nothing appended" values
                r = ProducePartitionResult(error_code=fallback)
            return {
                "index": p.index,
                "error_code": storage_error_for("produce", version, r.error_code),
                "base_offset": r.base_offset,
                "log_append_time": _log_append_time(r.log_append_time_ms),
                "log_start_offset": r.log_start_offset,
                "record_errors": tuple(
                    build(
                        record_error,
                        batch_index=e.batch_index,
                        batch_index_error_message=e.message,
                    )
                    for e in r.record_errors
                )
                if record_error is not None
                else (),
                "error_message": r.error_message,
            }

        topics = per_partition(
            schema, body, PRODUCE, response, answered_type=ProduceResponse, entry=entry
        )
        return Answer(build(schema, responses=topics, throttle_time=NO_THROTTLE))

    # -- Fetch and ListOffsets (fetch_apis) ---------------------------------------------------

    def _fetch(self, header: RequestHeader, body: Any) -> Step:
        return fetch(self.replica_manager, header.api_version, body)

    def _list_offsets(self, header: RequestHeader, body: Any) -> Step:
        return list_offsets(self.replica_manager, header.api_version, body)

    # -- OffsetForLeaderEpoch -------------------------------------------------------------------

    def _offset_for_leader_epoch(self, header: RequestHeader, body: Any) -> Step:
        version = header.api_version
        request = OffsetsForLeaderEpochRequest(
            replica_id=int(getattr(body, "replica_id", CONSUMER_REPLICA_ID)),
            partitions=tuple(
                OffsetForLeaderPartition(
                    topic=topic.topic,
                    partition=int(p.partition),
                    current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                    leader_epoch=int(p.leader_epoch),
                )
                for topic in body.topics
                for p in topic.partitions
            ),
        )

        def answered(response: Response) -> Step:
            schema = response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
            topics = per_partition(
                schema,
                body,
                OFFSET_FOR_LEADER_EPOCH,
                response,
                answered_type=OffsetsForLeaderEpochResponse,
                entry=lambda p, r, fallback: {
                    "error_code": r.error_code if r is not None else fallback,
                    "partition": p.partition,
                    "leader_epoch": r.leader_epoch if r is not None else -1,
                    "end_offset": r.end_offset if r is not None else -1,
                },
            )
            return Answer(build(schema, throttle_time=NO_THROTTLE, topics=topics))

        return Ask(self.replica_manager, request, answered)

    def _metadata(self, header: RequestHeader, body: Any) -> Step:
        return self.admin_apis.metadata(header.api_version, body, header.listener)

    def _create_topics(self, header: RequestHeader, body: Any) -> Step:
        return self.topic_admin_apis.create_topics(header.api_version, body)

    def _delete_topics(self, header: RequestHeader, body: Any) -> Step:
        return self.topic_admin_apis.delete_topics(header.api_version, body)

    def _init_producer_id(self, header: RequestHeader, body: Any) -> Step:
        if body.transactional_id is not None:  # the transaction coordinator's
            return self.txn_apis.init_producer_id(header.api_version, body)
        return self.admin_apis.init_producer_id(header.api_version, body)

    def _describe_configs(self, header: RequestHeader, body: Any) -> Step:
        return self.config_apis.describe_configs(header.api_version, body)

    def _alter_configs(self, header: RequestHeader, body: Any) -> Step:
        return self.alter_config_apis.alter_configs(header.api_version, body)

    def _incremental_alter_configs(self, header: RequestHeader, body: Any) -> Step:
        return self.alter_config_apis.incremental_alter_configs(header.api_version, body)

    def _describe_cluster(self, header: RequestHeader, body: Any) -> Step:
        return self.cluster_apis.describe_cluster(header.api_version, body, header.listener)

    # the ACL APIs: imported on their first request (they load the authorizer's code)

    def _describe_acls(self, header: RequestHeader, body: Any) -> Step:
        from kafkactor.network.acl_apis import describe_acls

        return describe_acls(self.authorizer, header, body)

    def _create_acls(self, header: RequestHeader, body: Any) -> Step:
        from kafkactor.network.acl_apis import create_acls

        return create_acls(self.authorizer, header, body)

    def _delete_acls(self, header: RequestHeader, body: Any) -> Step:
        from kafkactor.network.acl_apis import delete_acls

        return delete_acls(self.authorizer, header, body)

    def _offset_commit(self, header: RequestHeader, body: Any) -> Step:
        return self.offset_apis.offset_commit(header, body)

    def _offset_fetch(self, header: RequestHeader, body: Any) -> Step:
        return self.offset_apis.offset_fetch(header, body)

    _handlers: Final[dict[int, Handler]] = {
        ApiKey.API_VERSIONS: _api_versions,
        ApiKey.SASL_HANDSHAKE: lambda apis, header, body: sasl_handshake(header, body),
        ApiKey.SASL_AUTHENTICATE: lambda apis, header, body: sasl_authenticate(header, body),
        ApiKey.METADATA: _metadata,
        ApiKey.PRODUCE: _produce,
        ApiKey.FETCH: _fetch,
        ApiKey.LIST_OFFSETS: _list_offsets,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
        ApiKey.INIT_PRODUCER_ID: _init_producer_id,
        ApiKey.ADD_PARTITIONS_TO_TXN: _txn(TxnApis.add_partitions_to_txn),
        ApiKey.ADD_OFFSETS_TO_TXN: _txn(TxnApis.add_offsets_to_txn),
        ApiKey.END_TXN: _txn(TxnApis.end_txn),
        ApiKey.WRITE_TXN_MARKERS: lambda apis, header, body: write_txn_markers(
            apis.broker_id, header.api_version, body
        ),
        ApiKey.TXN_OFFSET_COMMIT: lambda apis, h, b: apis.txn_apis.txn_offset_commit(h, b),
        ApiKey.DESCRIBE_TRANSACTIONS: _txn(TxnApis.describe_transactions),
        ApiKey.LIST_TRANSACTIONS: _txn(TxnApis.list_transactions),
        ApiKey.CREATE_TOPICS: _create_topics,
        ApiKey.DELETE_TOPICS: _delete_topics,
        ApiKey.DESCRIBE_CONFIGS: _describe_configs,
        ApiKey.ALTER_CONFIGS: _alter_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: _incremental_alter_configs,
        ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
        ApiKey.DELETE_RECORDS: lambda apis, header, body: delete_records(
            apis.broker_id, header.api_version, body
        ),
        ApiKey.DESCRIBE_LOG_DIRS: lambda apis, header, body: describe_log_dirs(
            apis.broker_id, header.api_version, body
        ),
        ApiKey.CREATE_PARTITIONS: lambda apis, header, body: (
            apis.partition_admin_apis.create_partitions(header.api_version, body)
        ),
        ApiKey.FIND_COORDINATOR: _group(GroupApis.find_coordinator),
        ApiKey.JOIN_GROUP: _group(GroupApis.join_group),
        ApiKey.SYNC_GROUP: _group(GroupApis.sync_group),
        ApiKey.HEARTBEAT: _group(GroupApis.heartbeat),
        ApiKey.LEAVE_GROUP: _group(GroupApis.leave_group),
        ApiKey.OFFSET_COMMIT: _offset_commit,
        ApiKey.OFFSET_FETCH: _offset_fetch,
        ApiKey.OFFSET_DELETE: lambda apis, h, b: offset_delete(apis.broker_id, h.api_version, b),
        ApiKey.DESCRIBE_GROUPS: _group(GroupApis.describe_groups),
        ApiKey.LIST_GROUPS: _group(GroupApis.list_groups),
        ApiKey.DELETE_GROUPS: _group(GroupApis.delete_groups),
        ApiKey.LEADER_AND_ISR: _inter_broker(InterBrokerApis.leader_and_isr),
        ApiKey.STOP_REPLICA: _inter_broker(InterBrokerApis.stop_replica),
        ApiKey.UPDATE_METADATA: _inter_broker(InterBrokerApis.update_metadata),
        ApiKey.CONTROLLED_SHUTDOWN: _inter_broker(InterBrokerApis.controlled_shutdown),
        ApiKey.ELECT_LEADERS: lambda apis, header, body: elect_leaders(
            apis.broker_id, header.api_version, body
        ),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: lambda apis, header, body: (
            alter_partition_reassignments(apis.broker_id, header.api_version, body)
        ),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda apis, header, body: (
            list_partition_reassignments(apis.broker_id, header.api_version, body)
        ),
        ApiKey.DESCRIBE_ACLS: _describe_acls,
        ApiKey.CREATE_ACLS: _create_acls,
        ApiKey.DELETE_ACLS: _delete_acls,
        ApiKey.DESCRIBE_CLIENT_QUOTAS: _scram_quota(ScramQuotaApis.describe_client_quotas),
        ApiKey.ALTER_CLIENT_QUOTAS: _scram_quota(ScramQuotaApis.alter_client_quotas),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _scram_quota(
            ScramQuotaApis.describe_user_scram_credentials
        ),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _scram_quota(
            ScramQuotaApis.alter_user_scram_credentials
        ),
    }


# -- helpers -------------------------------------------------------------------------------------

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _log_append_time(millis: int) -> datetime.datetime | None:
    """Produce's `log_append_time` (a kio datetime): None writes Kafka's -1 (CreateTime)."""
    if millis < 0:
        return None
    return _EPOCH + datetime.timedelta(milliseconds=millis)


def _acks0_outcome(response: Response) -> Step:
    if isinstance(response, ProduceResponse) and all(
        r.error_code is ErrorCode.NONE for r in response.partitions
    ):
        return NoAnswer()
    if isinstance(response, ProduceResponse):
        failed = [r for r in response.partitions if r.error_code is not ErrorCode.NONE]
        reason = ", ".join(f"{r.topic}-{r.partition}: {r.error_code.name}" for r in failed)
    else:
        reason = error_of(response).name
    return Close(f"an acks=0 produce failed ({reason})")
