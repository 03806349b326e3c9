"""The wire formats of Kafka's ZooKeeper-era inter-broker APIs, which Kafka 4.0 removed and kio
lacks: LeaderAndIsr (api key 4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7).

In a ZooKeeper-mode Kafka cluster the controller sends LeaderAndIsr, StopReplica and
UpdateMetadata to every broker, and a broker that shuts down cleanly sends ControlledShutdown to
the controller. KRaft replaced them, so Kafka 4.0's message definitions keep only their api keys
(`"validVersions": "none"`), and kio, generated from Kafka 4, has no entity for any version.
kafkactor's brokers, run as separate processes, speak them to each other in Kafka's own formats,
so every version Kafka 3.9 defines is transcribed here, field by field, from Kafka 3.9's
`clients/src/main/resources/common/message/` files `LeaderAndIsrRequest.json`,
`LeaderAndIsrResponse.json`, `StopReplicaRequest.json`, `StopReplicaResponse.json`,
`UpdateMetadataRequest.json`, `UpdateMetadataResponse.json`, `ControlledShutdownRequest.json`
and `ControlledShutdownResponse.json`: LeaderAndIsr 0-7 (flexible from 4), StopReplica 0-4
(from 2), UpdateMetadata 0-8 (from 6), ControlledShutdown 0-3 (from 3). Fields are in the
JSON's order under kio's snake-case names (`isKRaftController` is `is_k_raft_controller`,
`Type` is `type_`, `Id` is `id_`), nested structs under the JSON's names, common structs
(`LeaderAndIsrPartitionState`, `LeaderAndIsrPartitionError`, `UpdateMetadataPartitionState`)
shared by the positions that use them. The entities are made by
`kafkactor.network.transcribed`, and kio's `entity_reader` / `entity_writer` do every byte.

The two request headers kio lacks (request header v0, of ControlledShutdown v0 alone, and
kafkactor's header v2 with a trace context, `TRACED_REQUEST_HEADER`) are in `request_headers`,
re-exported here.

`REQUESTS` and `RESPONSES` map (API key, version) to the entity class, like
`removed_versions`; codec.py consults both tables before kio, and imports this module (making
its ~130 classes takes a while) only when one of these four APIs is first spoken.
"""

from __future__ import annotations

from typing import Any, Final

from kafkactor.network.api_versions import ApiKey
from kafkactor.network.request_headers import (
    REQUEST_HEADER_V0,
    TRACE_CONTEXT_TAG,
    TRACED_REQUEST_HEADER,
)
from kafkactor.network.transcribed import EntityType, Field, message

__all__ = [
    "REQUESTS",
    "REQUEST_HEADER_V0",
    "RESPONSES",
    "TRACED_REQUEST_HEADER",
    "TRACE_CONTEXT_TAG",
]

# -- LeaderAndIsr (api key 4): v0-7, flexible from v4 --------------------------------------------

_LEADER_AND_ISR_PARTITION_STATE: Final = (
    "LeaderAndIsrPartitionState",
    (
        Field("topic_name", "string", 0, last=1),
        Field("partition_index", "int32", 0),
        Field("controller_epoch", "int32", 0),
        Field("leader", "int32", 0),
        Field("leader_epoch", "int32", 0),
        Field("isr", "[]int32", 0),
        Field("partition_epoch", "int32", 0),  # the state znode's version, in ZooKeeper mode
        Field("replicas", "[]int32", 0),
        Field("adding_replicas", "[]int32", 3),
        Field("removing_replicas", "[]int32", 3),
        Field("is_new", "bool", 1, default="false"),
        Field("leader_recovery_state", "int8", 6, default="0"),
    ),
)

_LEADER_AND_ISR_REQUEST: Final = (
    Field("controller_id", "int32", 0),
    Field("is_k_raft_controller", "bool", 7, default="false"),
    Field("controller_epoch", "int32", 0),
    Field("broker_epoch", "int64", 2, default="-1"),
    Field("type_", "int8", 5),
    Field(
        "ungrouped_partition_states",
        "[]LeaderAndIsrPartitionState",
        0,
        last=1,
        nested=_LEADER_AND_ISR_PARTITION_STATE,
    ),
    Field(
        "topic_states",
        "[]LeaderAndIsrTopicState",
        2,
        nested=(
            "LeaderAndIsrTopicState",
            (
                Field("topic_name", "string", 2),
                Field("topic_id", "uuid", 5),
                Field(
                    "partition_states",
                    "[]LeaderAndIsrPartitionState",
                    2,
                    nested=_LEADER_AND_ISR_PARTITION_STATE,
                ),
            ),
        ),
    ),
    Field(
        "live_leaders",
        "[]LeaderAndIsrLiveLeader",
        0,
        nested=(
            "LeaderAndIsrLiveLeader",
            (
                Field("broker_id", "int32", 0),
                Field("host_name", "string", 0),
                Field("port", "int32", 0),
            ),
        ),
    ),
)

_LEADER_AND_ISR_PARTITION_ERROR: Final = (
    "LeaderAndIsrPartitionError",
    (
        Field("topic_name", "string", 0, last=4),
        Field("partition_index", "int32", 0),
        Field("error_code", "int16", 0),
    ),
)

_LEADER_AND_ISR_RESPONSE: Final = (
    Field("error_code", "int16", 0),
    Field(
        "partition_errors",
        "[]LeaderAndIsrPartitionError",
        0,
        last=4,
        nested=_LEADER_AND_ISR_PARTITION_ERROR,
    ),
    Field(
        "topics",
        "[]LeaderAndIsrTopicError",
        5,
        nested=(
            "LeaderAndIsrTopicError",
            (
                Field("topic_id", "uuid", 5),
                Field(
                    "partition_errors",
                    "[]LeaderAndIsrPartitionError",
                    5,
                    nested=_LEADER_AND_ISR_PARTITION_ERROR,
                ),
            ),
        ),
    ),
)

# -- StopReplica (api key 5): v0-4, flexible from v2 ---------------------------------------------

_STOP_REPLICA_REQUEST: Final = (
    Field("controller_id", "int32", 0),
    Field("is_k_raft_controller", "bool", 4, default="false"),
    Field("controller_epoch", "int32", 0),
    Field("broker_epoch", "int64", 1, default="-1"),
    Field("delete_partitions", "bool", 0, last=2),
    Field(
        "ungrouped_partitions",
        "[]StopReplicaPartitionV0",
        0,
        last=0,
        nested=(
            "StopReplicaPartitionV0",
            (
                Field("topic_name", "string", 0, last=0),
                Field("partition_index", "int32", 0, last=0),
            ),
        ),
    ),
    Field(
        "topics",
        "[]StopReplicaTopicV1",
        1,
        last=2,
        nested=(
            "StopReplicaTopicV1",
            (
                Field("name", "string", 1, last=2),
                Field("partition_indexes", "[]int32", 1, last=2),
            ),
        ),
    ),
    Field(
        "topic_states",
        "[]StopReplicaTopicState",
        3,
        nested=(
            "StopReplicaTopicState",
            (
                Field("topic_name", "string", 3),
                Field(
                    "partition_states",
                    "[]StopReplicaPartitionState",
                    3,
                    nested=(
                        "StopReplicaPartitionState",
                        (
                            Field("partition_index", "int32", 3),
                            Field("leader_epoch", "int32", 3, default="-1"),
                            Field("delete_partition", "bool", 3),
                        ),
                    ),
                ),
            ),
        ),
    ),
)

_STOP_REPLICA_RESPONSE: Final = (
    Field("error_code", "int16", 0),
    Field(
        "partition_errors",
        "[]StopReplicaPartitionError",
        0,
        nested=(
            "StopReplicaPartitionError",
            (
                Field("topic_name", "string", 0),
                Field("partition_index", "int32", 0),
                Field("error_code", "int16", 0),
            ),
        ),
    ),
)

# -- UpdateMetadata (api key 6): v0-8, flexible from v6 ------------------------------------------

_UPDATE_METADATA_PARTITION_STATE: Final = (
    "UpdateMetadataPartitionState",
    (
        Field("topic_name", "string", 0, last=4),
        Field("partition_index", "int32", 0),
        Field("controller_epoch", "int32", 0),
        Field("leader", "int32", 0),
        Field("leader_epoch", "int32", 0),
        Field("isr", "[]int32", 0),
        Field("zk_version", "int32", 0),
        Field("replicas", "[]int32", 0),
        Field("offline_replicas", "[]int32", 4),
    ),
)

_UPDATE_METADATA_REQUEST: Final = (
    Field("controller_id", "int32", 0),
    Field("is_k_raft_controller", "bool", 8, default="false"),
    Field("type_", "int8", 8, default="0", tag=0),
    Field("controller_epoch", "int32", 0),
    Field("broker_epoch", "int64", 5, default="-1"),
    Field(
        "ungrouped_partition_states",
        "[]UpdateMetadataPartitionState",
        0,
        last=4,
        nested=_UPDATE_METADATA_PARTITION_STATE,
    ),
    Field(
        "topic_states",
        "[]UpdateMetadataTopicState",
        5,
        nested=(
            "UpdateMetadataTopicState",
            (
                Field("topic_name", "string", 5),
                Field("topic_id", "uuid", 7),
                Field(
                    "partition_states",
                    "[]UpdateMetadataPartitionState",
                    5,
                    nested=_UPDATE_METADATA_PARTITION_STATE,
                ),
            ),
        ),
    ),
    Field(
        "live_brokers",
        "[]UpdateMetadataBroker",
        0,
        nested=(
            "UpdateMetadataBroker",
            (
                Field("id_", "int32", 0),
                Field("v0_host", "string", 0, last=0),
                Field("v0_port", "int32", 0, last=0),
                Field(
                    "endpoints",
                    "[]UpdateMetadataEndpoint",
                    1,
                    nested=(
                        "UpdateMetadataEndpoint",
                        (
                            Field("port", "int32", 1),
                            Field("host", "string", 1),
                            Field("listener", "string", 3),
                            Field("security_protocol", "int16", 1),
                        ),
                    ),
                ),
                Field("rack", "string", 2, nullable=True),
            ),
        ),
    ),
)

_UPDATE_METADATA_RESPONSE: Final = (Field("error_code", "int16", 0),)

# -- ControlledShutdown (api key 7): v0-3, flexible from v3 --------------------------------------

_CONTROLLED_SHUTDOWN_REQUEST: Final = (
    Field("broker_id", "int32", 0),
    Field("broker_epoch", "int64", 2, default="-1"),
)

_CONTROLLED_SHUTDOWN_RESPONSE: Final = (
    Field("error_code", "int16", 0),
    Field(
        "remaining_partitions",
        "[]RemainingPartition",
        0,
        nested=(
            "RemainingPartition",
            (
                Field("topic_name", "string", 0),
                Field("partition_index", "int32", 0),
            ),
        ),
    ),
)

# -- the tables ----------------------------------------------------------------------------------

#: (api key, versions, first flexible version, kio-style module stem, request, response)
_TRANSCRIBED: Final = (
    (
        ApiKey.LEADER_AND_ISR,
        range(8),
        4,
        "leader_and_isr",
        ("LeaderAndIsrRequest", _LEADER_AND_ISR_REQUEST),
        ("LeaderAndIsrResponse", _LEADER_AND_ISR_RESPONSE),
    ),
    (
        ApiKey.STOP_REPLICA,
        range(5),
        2,
        "stop_replica",
        ("StopReplicaRequest", _STOP_REPLICA_REQUEST),
        ("StopReplicaResponse", _STOP_REPLICA_RESPONSE),
    ),
    (
        ApiKey.UPDATE_METADATA,
        range(9),
        6,
        "update_metadata",
        ("UpdateMetadataRequest", _UPDATE_METADATA_REQUEST),
        ("UpdateMetadataResponse", _UPDATE_METADATA_RESPONSE),
    ),
    (
        ApiKey.CONTROLLED_SHUTDOWN,
        range(4),
        3,
        "controlled_shutdown",
        ("ControlledShutdownRequest", _CONTROLLED_SHUTDOWN_REQUEST),
        ("ControlledShutdownResponse", _CONTROLLED_SHUTDOWN_RESPONSE),
    ),
)


def _messages(kind: EntityType) -> dict[tuple[int, int], Any]:
    made: dict[tuple[int, int], Any] = {}
    for api_key, versions, flexible_from, stem, request, response in _TRANSCRIBED:
        name, schema = request if kind is EntityType.request else response
        for version in versions:
            v0_header = kind is EntityType.request and (api_key, version) == (
                ApiKey.CONTROLLED_SHUTDOWN,
                0,
            )
            made[(api_key, version)] = message(
                name,
                api_key,
                version,
                kind,
                schema,
                package=f"{__name__}.{stem}",
                flexible_from=flexible_from,
                header=REQUEST_HEADER_V0 if v0_header else None,
            )
    return made


REQUESTS: Final[dict[tuple[int, int], Any]] = _messages(EntityType.request)
"""(API key, version) -> the transcribed request entity class."""
RESPONSES: Final[dict[tuple[int, int], Any]] = _messages(EntityType.response)
"""(API key, version) -> the transcribed response entity class."""
