"""A client's side of Kafka's wire protocol for the network tests, built with kio alone.

Requests are encoded and responses decoded with kio's entities (generated from Kafka's JSON
message definitions) and its serializers, never through `kafkactor.network.codec`, so a
codec bug cannot cancel itself out. For the versions kio lacks (Kafka 4 removed them) the
transcribed entities of `kafkactor.network.removed_versions` and
`kafkactor.network.inter_broker_schemas` stand in; kafka-python's own encoder cross-checks the
first (test_removed_versions.py), bytes packed from the JSON's field order the second
(test_inter_broker_schemas.py). `WireClient` is a blocking socket with a deadline on every
read: a test that waits for an answer that never comes fails instead of hanging.
"""

from __future__ import annotations

import datetime
import functools
import io
import socket
import struct
import sys
import time
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, fields, is_dataclass
from types import NoneType, TracebackType, UnionType
from typing import Any, Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i16, i32, i64

from kafkactor.network import inter_broker_schemas, removed_versions
from kafkactor.network.api_versions import MIN_SERVED_PRODUCE_VERSION, SUPPORTED, ApiKey
from kafkactor.storage import Record, build_batch

WAIT_S: Final = 5.0  # a generous bound for anything that must happen
TOPIC: Final = "events"
CLIENT_ID: Final = "kafkactor-tests"
GROUP: Final = "a-group"
MEMBER: Final = "kafkactor-tests-7d2c"
COMMIT_TIME_MS: Final = 1_700_000_000_000  # the commit timestamp of an OffsetCommit v1 sample
_SIZE: Final = struct.Struct(">i")

#: The transcribed entities, by (API key, version): what kio lacks because Kafka 4 removed it.
REQUESTS: Final = {**removed_versions.REQUESTS, **inter_broker_schemas.REQUESTS}
RESPONSES: Final = {**removed_versions.RESPONSES, **inter_broker_schemas.RESPONSES}

#: The inter-broker APIs Kafka 4 removed (their samples are `filled` entities).
INTER_BROKER_APIS: Final = (
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
)


# -- request bodies ------------------------------------------------------------------------------


def request_schema(api_key: int, version: int) -> Any:
    """kio's request entity, or for a version Kafka 4 removed (which kio lacks) the transcribed
    one of `kafkactor.network.removed_versions` (tests/network/test_removed_versions.py checks
    those against kafka-python's independent encoder)."""
    transcribed = REQUESTS.get((api_key, version))
    return transcribed if transcribed is not None else load_request_schema(api_key, version)


def response_schema(api_key: int, version: int) -> Any:
    """kio's response entity, or the transcribed one (as `request_schema`)."""
    transcribed = RESPONSES.get((api_key, version))
    return transcribed if transcribed is not None else load_response_schema(api_key, version)


def make(entity: type[Any], **values: Any) -> Any:
    """An instance of `entity` from the `values` it has fields for (the others are dropped):
    one superset of values builds the same request in every version."""
    names = {f.name for f in fields(entity)}
    return entity(**{k: v for k, v in values.items() if k in names})


def nested(entity: type[Any], name: str) -> type[Any]:
    """The entity `name` defined in the same kio module as `entity` (same API and version)."""
    found: type[Any] = getattr(sys.modules[entity.__module__], name)
    return found


def _filler(kafka_type: str, python_type: Any, name: str, seed: int) -> Any:
    """A value of one primitive field that is no default kio or Kafka gives it."""
    if kafka_type == "error_code":
        return ErrorCode.not_leader_or_follower
    values: dict[str, Any] = {
        "int8": i8(2 + seed),
        "int16": i16(300 + seed),
        "int32": i32(70_000 + seed),
        "int64": i64(2**40 + seed),
        "float64": 1.5 + seed,  # DescribeClientQuotas' and AlterClientQuotas' quota values
        "bool": True,
        "string": f"{name}-{seed}",
        "bytes": f"{name}-{seed}".encode(),
        "uuid": uuid.UUID(int=(seed + 1) * 0x1234_5678_9ABC_DEF0),
    }
    value = values[kafka_type]
    return python_type(value) if python_type in (i8, i16, i32, i64) else value


def _inner(annotation: Any) -> tuple[Any, bool, bool]:
    """(element type, is an array, is nullable) of a field's type annotation."""
    array = False
    nullable = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is UnionType:
            nullable = True
            annotation = next(a for a in typing.get_args(annotation) if a is not NoneType)
        elif origin is tuple:
            array = True
            annotation = typing.get_args(annotation)[0]
        else:
            return annotation, array, nullable


def filled(entity: type[Any], seed: int = 0) -> Any:
    """An instance of `entity` with every field set to a value that is not its default: two
    elements in every array (each struct filled in turn), a value in every nullable field."""
    values: dict[str, Any] = {}
    for index, f in enumerate(fields(entity)):
        element, array, _ = _inner(f.type)
        at = (seed * 7 + index * 3) % 89  # small, and different from field to field
        if is_dataclass(element):
            assert isinstance(element, type)
            values[f.name] = (filled(element, at + 1), filled(element, at + 2))
            continue
        kafka_type = f.metadata["kafka_type"]
        if array:
            values[f.name] = tuple(_filler(kafka_type, element, f.name, at + i) for i in (1, 2))
        else:
            values[f.name] = _filler(kafka_type, element, f.name, at)
        assert values[f.name] != f.default or f.default is MISSING, (entity, f.name)
    return entity(**values)


def _filled_request(api: ApiKey, version: int) -> Any:
    return filled(request_schema(api, version))


def served_range(api: ApiKey) -> range:
    """The versions of `api` the broker decodes (Produce 0-2 are advertised, not served)."""
    low, high = SUPPORTED[api]
    if api is ApiKey.PRODUCE:
        low = MIN_SERVED_PRODUCE_VERSION
    return range(low, high + 1)


def batch(*values: bytes, timestamp_ms: int = 1_000) -> bytes:
    """One magic-2 record batch as a producer builds it."""
    return build_batch([Record(None, v, timestamp_ms) for v in values], 0)


def api_versions_request(version: int) -> Any:
    schema = request_schema(ApiKey.API_VERSIONS, version)
    return make(schema, client_software_name="kafkactor-tests", client_software_version="1.0")


def sasl_handshake_request(version: int, mechanism: str = "PLAIN") -> Any:
    return make(request_schema(ApiKey.SASL_HANDSHAKE, version), mechanism=mechanism)


def sasl_authenticate_request(version: int, token: bytes = b"\0alice\0alice-secret") -> Any:
    return make(request_schema(ApiKey.SASL_AUTHENTICATE, version), auth_bytes=token)


def metadata_request(
    version: int, topics: Sequence[str] | None, *, allow_auto_topic_creation: bool = True
) -> Any:
    schema = request_schema(ApiKey.METADATA, version)
    topic = nested(schema, "MetadataRequestTopic")
    return make(
        schema,
        topics=None
        if topics is None
        else tuple(make(topic, name=t, topic_id=None) for t in topics),
        allow_auto_topic_creation=allow_auto_topic_creation,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def produce_request(
    version: int,
    records: bytes,
    *,
    topic: str = TOPIC,
    partition: int = 0,
    acks: int = -1,
    timeout_ms: int = 5_000,
    transactional_id: str | None = None,
) -> Any:
    schema = request_schema(ApiKey.PRODUCE, version)
    topic_type = nested(schema, "TopicProduceData")
    partition_type = nested(schema, "PartitionProduceData")
    return make(
        schema,
        transactional_id=transactional_id,
        acks=i16(acks),
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=(
            topic_type(
                name=topic,
                partition_data=(partition_type(index=i32(partition), records=records),),
            ),
        ),
    )


def fetch_request(
    version: int,
    *,
    topic: str = TOPIC,
    partition: int = 0,
    offset: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    replica_id: int = -1,
) -> Any:
    schema = request_schema(ApiKey.FETCH, version)
    topic_type = nested(schema, "FetchTopic")
    partition_type = nested(schema, "FetchPartition")
    return make(
        schema,
        replica_id=i32(replica_id),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=i32(min_bytes),
        max_bytes=i32(1024 * 1024),
        isolation_level=0,
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            topic_type(
                topic=topic,
                partitions=(
                    make(
                        partition_type,
                        partition=i32(partition),
                        current_leader_epoch=i32(-1),
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=i32(1024 * 1024),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def _list_offsets_request(version: int) -> Any:
    schema = request_schema(ApiKey.LIST_OFFSETS, version)
    topic_type = nested(schema, "ListOffsetsTopic")
    partition_type = nested(schema, "ListOffsetsPartition")
    partition = make(
        partition_type, partition_index=i32(0), current_leader_epoch=i32(-1), timestamp=-1
    )
    return make(
        schema,
        replica_id=i32(-1),
        isolation_level=0,
        topics=(topic_type(name=TOPIC, partitions=(partition,)),),
    )


def _create_topics_request(version: int) -> Any:
    schema = request_schema(ApiKey.CREATE_TOPICS, version)
    topic_type = nested(schema, "CreatableTopic")
    config_type = nested(schema, "CreatableTopicConfig")
    topic = topic_type(
        name="created",
        num_partitions=i32(3),
        replication_factor=i16(1),
        assignments=(),
        configs=(config_type(name="retention.ms", value="1000"),),
    )
    return make(schema, topics=(topic,), timeout=datetime.timedelta(seconds=5), validate_only=True)


def _delete_topics_request(version: int) -> Any:
    schema = request_schema(ApiKey.DELETE_TOPICS, version)
    return make(schema, topic_names=("old",), timeout=datetime.timedelta(seconds=5))


def _init_producer_id_request(version: int) -> Any:
    schema = request_schema(ApiKey.INIT_PRODUCER_ID, version)
    return make(schema, transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60))


# -- transactions ----------------------------------------------------------------------------

TXN_ID: Final = "a-transactional-id"
PRODUCER_ID: Final = 4_000_000_001
PRODUCER_EPOCH: Final = 7


def init_transactional_producer_id_request(
    version: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    timeout_ms: int = 45_000,
) -> Any:
    """InitProducerId with a transactional id (v3+: the id and epoch of a recovering producer)."""
    schema = request_schema(ApiKey.INIT_PRODUCER_ID, version)
    return make(
        schema,
        transactional_id=TXN_ID,
        transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
    )


def add_partitions_to_txn_request(
    version: int, partitions: Mapping[str, Sequence[int]] | None = None
) -> Any:
    schema = request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    topic = nested(schema, "AddPartitionsToTxnTopic")
    wanted = partitions if partitions is not None else {TOPIC: (0, 1), "other": (2,)}
    return make(
        schema,
        v3_and_below_transactional_id=TXN_ID,
        v3_and_below_producer_id=i64(PRODUCER_ID),
        v3_and_below_producer_epoch=i16(PRODUCER_EPOCH),
        v3_and_below_topics=tuple(
            make(topic, name=t, partitions=tuple(i32(p) for p in ps)) for t, ps in wanted.items()
        ),
    )


def add_offsets_to_txn_request(version: int) -> Any:
    schema = request_schema(ApiKey.ADD_OFFSETS_TO_TXN, version)
    return make(
        schema,
        transactional_id=TXN_ID,
        producer_id=i64(PRODUCER_ID),
        producer_epoch=i16(PRODUCER_EPOCH),
        group_id=GROUP,
    )


def end_txn_request(version: int, *, committed: bool = True) -> Any:
    schema = request_schema(ApiKey.END_TXN, version)
    return make(
        schema,
        transactional_id=TXN_ID,
        producer_id=i64(PRODUCER_ID),
        producer_epoch=i16(PRODUCER_EPOCH),
        committed=committed,
    )


def txn_offset_commit_request(version: int) -> Any:
    schema = request_schema(ApiKey.TXN_OFFSET_COMMIT, version)
    topic = nested(schema, "TxnOffsetCommitRequestTopic")
    partition = nested(schema, "TxnOffsetCommitRequestPartition")
    return make(
        schema,
        transactional_id=TXN_ID,
        group_id=GROUP,
        producer_id=i64(PRODUCER_ID),
        producer_epoch=i16(PRODUCER_EPOCH),
        generation_id=i32(3),
        member_id=MEMBER,
        group_instance_id=None,
        topics=(
            make(
                topic,
                name=TOPIC,
                partitions=tuple(
                    make(
                        partition,
                        partition_index=i32(p),
                        committed_offset=i64(100 + p),
                        committed_leader_epoch=i32(5),
                        committed_metadata=f"m{p}",
                    )
                    for p in (0, 1)
                ),
            ),
        ),
    )


def write_txn_markers_request(version: int) -> Any:
    schema = request_schema(ApiKey.WRITE_TXN_MARKERS, version)
    marker = nested(schema, "WritableTxnMarker")
    topic = nested(schema, "WritableTxnMarkerTopic")
    return make(
        schema,
        markers=(
            make(
                marker,
                producer_id=i64(PRODUCER_ID),
                producer_epoch=i16(PRODUCER_EPOCH),
                transaction_result=True,
                coordinator_epoch=i32(4),
                topics=(
                    make(topic, name=TOPIC, partition_indexes=(i32(0), i32(1))),
                    make(topic, name="__consumer_offsets", partition_indexes=(i32(12),)),
                ),
            ),
            make(
                marker,
                producer_id=i64(PRODUCER_ID + 1),
                producer_epoch=i16(0),
                transaction_result=False,
                coordinator_epoch=i32(4),
                topics=(make(topic, name=TOPIC, partition_indexes=(i32(2),)),),
            ),
        ),
    )


def describe_transactions_request(version: int) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_TRANSACTIONS, version)
    return make(schema, transactional_ids=(TXN_ID, "unknown-id"))


def list_transactions_request(version: int) -> Any:
    schema = request_schema(ApiKey.LIST_TRANSACTIONS, version)
    return make(
        schema, state_filters=("Ongoing", "Nonsense"), producer_id_filters=(i64(PRODUCER_ID),)
    )


def describe_configs_request(
    version: int,
    resources: Sequence[tuple[int, str, Sequence[str] | None]] = ((2, TOPIC, None),),
    *,
    include_synonyms: bool = False,
) -> Any:
    """DescribeConfigs of each (resource type, name, configuration keys or None for all)."""
    schema = request_schema(ApiKey.DESCRIBE_CONFIGS, version)
    resource = nested(schema, "DescribeConfigsResource")
    return make(
        schema,
        resources=tuple(
            make(
                resource,
                resource_type=kind,
                resource_name=name,
                configuration_keys=tuple(keys) if keys is not None else None,
            )
            for kind, name, keys in resources
        ),
        include_synonyms=include_synonyms,
    )


def elect_leaders_request(
    version: int, partitions: dict[str, list[int]] | None, election: int = 0
) -> Any:
    """ElectLeaders of `partitions` (topic -> partition ids; None: every partition); v1+ names
    the election type (0 preferred, 1 unclean)."""
    schema = request_schema(ApiKey.ELECT_LEADERS, version)
    entry = sys.modules[schema.__module__].TopicPartitions
    topics = (
        None
        if partitions is None
        else tuple(make(entry, topic=t, partitions=tuple(ps)) for t, ps in partitions.items())
    )
    return make(schema, election_type=election, topic_partitions=topics)


def describe_cluster_request(
    version: int, *, endpoint_type: int = 1, include_authorized_operations: bool = True
) -> Any:
    """DescribeCluster; v1+ names the endpoint type (KIP-919: 1 brokers, 2 controllers)."""
    return make(
        request_schema(ApiKey.DESCRIBE_CLUSTER, version),
        include_cluster_authorized_operations=include_authorized_operations,
        endpoint_type=endpoint_type,
    )


def delete_records_request(version: int, offsets: dict[int, int] | None = None) -> Any:
    """DeleteRecords of TOPIC's partitions below their offsets (-1: the high watermark)."""
    schema = request_schema(ApiKey.DELETE_RECORDS, version)
    topic_type, partition_type = (
        nested(schema, "DeleteRecordsTopic"),
        nested(schema, "DeleteRecordsPartition"),
    )
    wanted = offsets if offsets is not None else {0: 3, 1: -1}
    return make(
        schema,
        topics=(
            topic_type(
                name=TOPIC,
                partitions=tuple(
                    partition_type(partition_index=i32(p), offset=i64(o)) for p, o in wanted.items()
                ),
            ),
        ),
        timeout=datetime.timedelta(milliseconds=5000),
    )


def describe_log_dirs_request(version: int, partitions: tuple[int, ...] | None = (0, 1)) -> Any:
    """DescribeLogDirs of TOPIC's `partitions` (None: every partition the broker holds)."""
    schema = request_schema(ApiKey.DESCRIBE_LOG_DIRS, version)
    topic_type = nested(schema, "DescribableLogDirTopic")
    topics = (
        None
        if partitions is None
        else (topic_type(topic=TOPIC, partitions=tuple(i32(p) for p in partitions)),)
    )
    return make(schema, topics=topics)


def find_coordinator_request(version: int, key: str = GROUP, key_type: int = 0) -> Any:
    schema = request_schema(ApiKey.FIND_COORDINATOR, version)
    return make(schema, key=key, key_type=key_type)


def join_group_request(version: int, *, member_id: str = "") -> Any:
    schema = request_schema(ApiKey.JOIN_GROUP, version)
    protocol = nested(schema, "JoinGroupRequestProtocol")
    return make(
        schema,
        group_id=GROUP,
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=45),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(
            protocol(name="range", metadata=b"\x00\x01range-subscription"),
            protocol(name="roundrobin", metadata=b"\x00\x01rr-subscription"),
        ),
    )


def sync_group_request(version: int, *, leader: bool = True) -> Any:
    schema = request_schema(ApiKey.SYNC_GROUP, version)
    assignment = nested(schema, "SyncGroupRequestAssignment")
    return make(
        schema,
        group_id=GROUP,
        generation_id=i32(3),
        member_id=MEMBER,
        group_instance_id=None,
        assignments=(assignment(member_id=MEMBER, assignment=b"\x00\x01assigned"),)
        if leader
        else (),
    )


def heartbeat_request(version: int) -> Any:
    schema = request_schema(ApiKey.HEARTBEAT, version)
    return make(
        schema, group_id=GROUP, generation_id=i32(3), member_id=MEMBER, group_instance_id=None
    )


def leave_group_request(version: int, *members: str) -> Any:
    schema = request_schema(ApiKey.LEAVE_GROUP, version)
    leaving = members or (MEMBER,)
    if version < 3:
        return make(schema, group_id=GROUP, member_id=leaving[0])
    identity = nested(schema, "MemberIdentity")
    return make(
        schema,
        group_id=GROUP,
        members=tuple(identity(member_id=m, group_instance_id=None) for m in leaving),
    )


def offset_commit_request(version: int) -> Any:
    schema = request_schema(ApiKey.OFFSET_COMMIT, version)
    topic_type = nested(schema, "OffsetCommitRequestTopic")
    partition_type = nested(schema, "OffsetCommitRequestPartition")
    partitions = tuple(
        make(
            partition_type,
            partition_index=i32(index),
            committed_offset=i64(offset),
            committed_leader_epoch=i32(4),
            commit_timestamp=i64(timestamp),  # v1 only; -1: the broker's time
            committed_metadata=metadata,
        )
        for index, offset, metadata, timestamp in (
            (0, 42, "meta", COMMIT_TIME_MS),
            (1, 7, None, -1),
        )
    )
    return make(
        schema,
        group_id=GROUP,
        generation_id_or_member_epoch=i32(3),
        member_id=MEMBER,
        group_instance_id=None,
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=(topic_type(name=TOPIC, partitions=partitions),),
    )


def offset_fetch_request(version: int, *, every: bool = False) -> Any:
    schema = request_schema(ApiKey.OFFSET_FETCH, version)
    topic_type = nested(schema, "OffsetFetchRequestTopic")
    return make(
        schema,
        group_id=GROUP,
        topics=None if every else (topic_type(name=TOPIC, partition_indexes=(i32(0), i32(1))),),
        require_stable=False,
    )


def describe_groups_request(version: int) -> Any:
    schema = request_schema(ApiKey.DESCRIBE_GROUPS, version)
    return make(schema, groups=(GROUP, "another"), include_authorized_operations=True)


def list_groups_request(version: int) -> Any:
    schema = request_schema(ApiKey.LIST_GROUPS, version)
    return make(schema, states_filter=("Stable", "Empty"))


def delete_groups_request(version: int) -> Any:
    schema = request_schema(ApiKey.DELETE_GROUPS, version)
    return make(schema, groups_names=(GROUP, "another"))


def offset_delete_request(
    version: int, partitions: Mapping[str, Sequence[int]] | None = None
) -> Any:
    """OffsetDelete of GROUP: by default partitions 0 and 1 of TOPIC and 0 of "other"."""
    schema = request_schema(ApiKey.OFFSET_DELETE, version)
    topic_type = nested(schema, "OffsetDeleteRequestTopic")
    partition_type = nested(schema, "OffsetDeleteRequestPartition")
    wanted = {TOPIC: [0, 1], "other": [0]} if partitions is None else partitions
    topics = tuple(
        make(
            topic_type,
            name=name,
            partitions=tuple(make(partition_type, partition_index=i32(p)) for p in indexes),
        )
        for name, indexes in wanted.items()
    )
    return make(schema, group_id=GROUP, topics=topics)


def _offset_for_leader_epoch_request(version: int) -> Any:
    schema = request_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    topic_type = nested(schema, "OffsetForLeaderTopic")
    partition_type = nested(schema, "OffsetForLeaderPartition")
    partition = make(
        partition_type, partition=i32(0), current_leader_epoch=i32(-1), leader_epoch=i32(0)
    )
    return make(
        schema, replica_id=i32(-1), topics=(topic_type(topic=TOPIC, partitions=(partition,)),)
    )


def _create_partitions_request(version: int) -> Any:
    schema = request_schema(ApiKey.CREATE_PARTITIONS, version)
    topic_type = nested(schema, "CreatePartitionsTopic")
    assignment_type = nested(schema, "CreatePartitionsAssignment")
    return make(
        schema,
        topics=(
            topic_type(name=TOPIC, count=i32(3), assignments=None),
            topic_type(
                name="other",
                count=i32(2),
                assignments=(assignment_type(broker_ids=(i32(2), i32(1))),),
            ),
        ),
        timeout=datetime.timedelta(milliseconds=5000),
        validate_only=False,
    )


def alter_configs_request(version: int) -> Any:
    """AlterConfigs of the topic (one override) and of broker 1 (refused: not dynamic)."""
    schema = request_schema(ApiKey.ALTER_CONFIGS, version)
    resource, entry = nested(schema, "AlterConfigsResource"), nested(schema, "AlterableConfig")
    return make(
        schema,
        validate_only=False,
        resources=(
            make(
                resource,
                resource_type=2,
                resource_name=TOPIC,
                configs=(make(entry, name="retention.ms", value="60000"),),
            ),
            make(
                resource,
                resource_type=4,
                resource_name="1",
                configs=(make(entry, name="log.retention.ms", value="1"),),
            ),
        ),
    )


def incremental_alter_configs_request(version: int) -> Any:
    """IncrementalAlterConfigs of the topic: one SET, one DELETE."""
    schema = request_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
    resource, entry = nested(schema, "AlterConfigsResource"), nested(schema, "AlterableConfig")
    configs = (
        make(entry, name="retention.ms", config_operation=0, value="60000"),
        make(entry, name="segment.bytes", config_operation=1, value=None),
    )
    return make(
        schema,
        validate_only=False,
        resources=(make(resource, resource_type=2, resource_name=TOPIC, configs=configs),),
    )


def alter_partition_reassignments_request(
    version: int, targets: dict[str, dict[int, list[int] | None]] | None = None
) -> Any:
    """AlterPartitionReassignments: by default TOPIC-0 to brokers [2, 3] and TOPIC-1's
    reassignment cancelled (null replicas)."""
    schema = request_schema(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
    topic_type = nested(schema, "ReassignableTopic")
    partition_type = nested(schema, "ReassignablePartition")
    wanted = {TOPIC: {0: [2, 3], 1: None}} if targets is None else targets
    return make(
        schema,
        topics=tuple(
            make(
                topic_type,
                name=name,
                partitions=tuple(
                    make(
                        partition_type,
                        partition_index=p,
                        replicas=tuple(r) if r is not None else None,
                    )
                    for p, r in partitions.items()
                ),
            )
            for name, partitions in wanted.items()
        ),
    )


def list_partition_reassignments_request(
    version: int, partitions: dict[str, list[int]] | None = None
) -> Any:
    """ListPartitionReassignments of `partitions` (topic -> ids; None: every partition)."""
    schema = request_schema(ApiKey.LIST_PARTITION_REASSIGNMENTS, version)
    topic_type = nested(schema, "ListPartitionReassignmentsTopics")
    topics = (
        None
        if partitions is None
        else tuple(
            make(topic_type, name=t, partition_indexes=tuple(ps)) for t, ps in partitions.items()
        )
    )
    return make(schema, topics=topics)


_SAMPLES: Final[dict[ApiKey, Callable[[int], Any]]] = {
    ApiKey.PRODUCE: lambda version: produce_request(version, batch(b"sample"), acks=1),
    ApiKey.FETCH: lambda version: fetch_request(version, offset=3, max_wait_ms=100),
    ApiKey.METADATA: lambda version: metadata_request(version, [TOPIC, "other"]),
    ApiKey.API_VERSIONS: api_versions_request,
    ApiKey.LIST_OFFSETS: _list_offsets_request,
    ApiKey.DESCRIBE_ACLS: functools.partial(_filled_request, ApiKey.DESCRIBE_ACLS),
    ApiKey.CREATE_ACLS: functools.partial(_filled_request, ApiKey.CREATE_ACLS),
    ApiKey.DELETE_ACLS: functools.partial(_filled_request, ApiKey.DELETE_ACLS),
    ApiKey.CREATE_TOPICS: _create_topics_request,
    ApiKey.DELETE_TOPICS: _delete_topics_request,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id_request,
    ApiKey.ADD_PARTITIONS_TO_TXN: add_partitions_to_txn_request,
    ApiKey.ADD_OFFSETS_TO_TXN: add_offsets_to_txn_request,
    ApiKey.END_TXN: end_txn_request,
    ApiKey.WRITE_TXN_MARKERS: write_txn_markers_request,
    ApiKey.TXN_OFFSET_COMMIT: txn_offset_commit_request,
    ApiKey.DESCRIBE_TRANSACTIONS: describe_transactions_request,
    ApiKey.LIST_TRANSACTIONS: list_transactions_request,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch_request,
    ApiKey.FIND_COORDINATOR: find_coordinator_request,
    ApiKey.JOIN_GROUP: join_group_request,
    ApiKey.SYNC_GROUP: sync_group_request,
    ApiKey.HEARTBEAT: heartbeat_request,
    ApiKey.LEAVE_GROUP: leave_group_request,
    ApiKey.OFFSET_COMMIT: offset_commit_request,
    ApiKey.OFFSET_FETCH: offset_fetch_request,
    ApiKey.DESCRIBE_GROUPS: describe_groups_request,
    ApiKey.LIST_GROUPS: list_groups_request,
    ApiKey.DELETE_GROUPS: delete_groups_request,
    ApiKey.OFFSET_DELETE: offset_delete_request,
    ApiKey.DESCRIBE_CONFIGS: describe_configs_request,
    ApiKey.ALTER_CONFIGS: alter_configs_request,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs_request,
    ApiKey.DESCRIBE_CLUSTER: describe_cluster_request,
    ApiKey.DELETE_RECORDS: delete_records_request,
    ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs_request,
    ApiKey.SASL_HANDSHAKE: sasl_handshake_request,
    ApiKey.SASL_AUTHENTICATE: sasl_authenticate_request,
    ApiKey.ELECT_LEADERS: lambda version: elect_leaders_request(version, {TOPIC: [0, 1]}),
    ApiKey.CREATE_PARTITIONS: _create_partitions_request,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments_request,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: lambda version: list_partition_reassignments_request(
        version, {TOPIC: [0, 1]}
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: functools.partial(
        _filled_request, ApiKey.DESCRIBE_CLIENT_QUOTAS
    ),
    ApiKey.ALTER_CLIENT_QUOTAS: functools.partial(_filled_request, ApiKey.ALTER_CLIENT_QUOTAS),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: functools.partial(
        _filled_request, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: functools.partial(
        _filled_request, ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    ),
    **{api: functools.partial(_filled_request, api) for api in INTER_BROKER_APIS},
}


def sample_request(api: ApiKey, version: int) -> Any:
    """A realistic request of `api` in `version`, every field set (what a client would send)."""
    return _SAMPLES[api](version)


# -- frames --------------------------------------------------------------------------------------


def encode_request(
    api_key: int,
    version: int,
    body: Any,
    *,
    correlation_id: int = 1,
    client_id: str | None = CLIENT_ID,
) -> bytes:
    """A request without its size prefix: header (v2 for flexible versions, else v1; v0, with
    no client id, for ControlledShutdown v0), body."""
    schema = type(body)
    buffer = io.BytesIO()
    if (api_key, version) == (ApiKey.CONTROLLED_SHUTDOWN, 0):
        buffer.write(struct.pack(">hhi", api_key, version, correlation_id))
        entity_writer(schema)(buffer, body)
        return buffer.getvalue()
    header_type = RequestHeaderV2 if schema.__flexible__ else RequestHeaderV1
    entity_writer(header_type)(
        buffer,
        header_type(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    entity_writer(schema)(buffer, body)
    return buffer.getvalue()


def sized(payload: bytes) -> bytes:
    """`payload` behind its 4-byte big-endian size prefix."""
    return _SIZE.pack(len(payload)) + payload


def request_frame(
    api_key: int,
    version: int,
    body: Any,
    *,
    correlation_id: int = 1,
    client_id: str | None = CLIENT_ID,
) -> bytes:
    return sized(
        encode_request(api_key, version, body, correlation_id=correlation_id, client_id=client_id)
    )


def raw_header(
    api_key: int, version: int, correlation_id: int = 1, client_id: bytes = b""
) -> bytes:
    """A request header v1 written by hand, for API keys and versions kio has no entity for."""
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def response_header_version(api_key: int, version: int) -> int:
    """The response header a client expects: v1 for flexible versions, except ApiVersions,
    which always answers with v0 (KIP-511: a client must read it before knowing the version)."""
    flexible = bool(response_schema(api_key, version).__flexible__)
    return 1 if flexible and api_key != ApiKey.API_VERSIONS else 0


def decode_response(payload: bytes, api_key: int, version: int) -> tuple[int, Any]:
    """(correlation id, body) of one response frame without its size prefix; every byte of it
    must be read (a response longer than its body is as wrong as a shorter one)."""
    header_type: type[Any] = (
        ResponseHeaderV1 if response_header_version(api_key, version) else ResponseHeaderV0
    )
    header, used = entity_reader(header_type)(payload, 0)
    body, body_size = entity_reader(response_schema(api_key, version))(payload, used)
    assert used + body_size == len(payload), (
        f"{len(payload) - used - body_size} bytes left after the response of api {api_key} "
        f"v{version}"
    )
    return int(header.correlation_id), body


# -- a blocking client ---------------------------------------------------------------------------


class WireClient:
    """One TCP connection to a broker's listener; every read waits at most `WAIT_S`."""

    def __init__(self, host: str, port: int, *, timeout_s: float = WAIT_S) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout_s = timeout_s

    def __enter__(self) -> WireClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_request(self, api_key: int, version: int, body: Any, correlation_id: int) -> None:
        self.send(request_frame(api_key, version, body, correlation_id=correlation_id))

    def _read_exactly(self, size: int) -> bytes:
        chunks = bytearray()
        deadline = time.monotonic() + self.timeout_s
        while len(chunks) < size:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError(
                    f"the broker closed the connection after {len(chunks)} of {size} bytes"
                )
            chunks += chunk
        return bytes(chunks)

    def read_frame(self) -> bytes:
        """The next response frame, without its size prefix."""
        (size,) = _SIZE.unpack(self._read_exactly(_SIZE.size))
        return self._read_exactly(size)

    def read_response(self, api_key: int, version: int) -> tuple[int, Any]:
        return decode_response(self.read_frame(), api_key, version)

    def call(self, api_key: int, version: int, body: Any, correlation_id: int = 1) -> Any:
        """Send one request and return the body of its response (checking its correlation id)."""
        self.send_request(api_key, version, body, correlation_id)
        answered, response = self.read_response(api_key, version)
        assert answered == correlation_id, f"answer to {answered}, asked {correlation_id}"
        return response

    def read_until_closed(self) -> bytes:
        """Every byte the broker still sends, until it closes the connection; fails if it is
        still open at the deadline."""
        received = bytearray()
        deadline = time.monotonic() + self.timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"the connection is still open after {self.timeout_s}s")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return bytes(received)
            except TimeoutError:
                continue
            if not chunk:
                return bytes(received)
            received += chunk

    def is_open_after(self, watch_s: float) -> bool:
        """Whether the connection is still open, with nothing sent, after `watch_s` seconds."""
        self.sock.settimeout(watch_s)
        try:
            chunk = self.sock.recv(1)
        except TimeoutError:
            return True
        except ConnectionResetError:
            return False
        assert not chunk, f"the broker sent unasked bytes: {chunk!r}"
        return False
