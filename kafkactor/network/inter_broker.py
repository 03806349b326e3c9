"""The client side of Kafka's inter-broker requests: an actor request to a broker in another
process becomes a wire request, and the wire response becomes the actor response.

Which actor messages cross between brokers, and as what (Kafka's API and the version sent):

| actor request | wire request | sent by |
|---|---|---|
| `LeaderAndIsr` | LeaderAndIsr v5 (topic ids, KIP-516) | the controller |
| `StopReplica` | StopReplica v3 | the controller |
| `UpdateMetadata` | UpdateMetadata v7 (topic ids, KIP-516) | the controller |
| `ControlledShutdownRequest` | ControlledShutdown v3 | a broker shutting down |
| `FetchRequest` (replica id = the follower) | Fetch v12 | a replica fetcher |
| `OffsetsForLeaderEpochRequest` | OffsetForLeaderEpoch v4 | a replica fetcher |
| `WriteTxnMarkersRequest` | WriteTxnMarkers v1 (`txn_markers`) | a transaction coordinator |

Each is the oldest flexible version with every field kafkactor sends (broker epochs: KIP-380;
LeaderAndIsr's and UpdateMetadata's topic ids: KIP-516),
so the request header can carry the trace context as a tagged field. The broker that receives
them translates back in `inter_broker_apis`. Nothing here touches a socket: `NetworkClient`
sends what `wire_call` makes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from kafkactor.common import BrokerEndpoint, ListenerEndpoint, PartitionLeaderState, TopicPartition
from kafkactor.kafka_uuid import ZERO_UUID, uuid_from_string
from kafkactor.messages import ErrorCode, Request, Response
from kafkactor.messages.controller import ControlledShutdownRequest, ControlledShutdownResponse
from kafkactor.messages.offsets import (
    EpochEndOffset,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
)
from kafkactor.messages.replication import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplica,
    StopReplicaResponse,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.messages.transaction import WriteTxnMarkersRequest
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, request_type
from kafkactor.network.txn_markers import MARKERS_VERSION, markers_answer, markers_body

__all__ = ["SENT_VERSIONS", "WireCall", "by_topic", "wire_call"]

#: The version of each inter-broker API this broker sends.
SENT_VERSIONS: Final[dict[ApiKey, int]] = {
    ApiKey.LEADER_AND_ISR: 5,
    ApiKey.STOP_REPLICA: 3,
    ApiKey.UPDATE_METADATA: 7,
    ApiKey.CONTROLLED_SHUTDOWN: 3,
    ApiKey.FETCH: 12,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
    ApiKey.WRITE_TXN_MARKERS: MARKERS_VERSION,
}

#: StopReplica v3's partition leader epoch: "no epoch", so the replica stops whatever its epoch
#: (kafkactor's controller sends StopReplica without leader epochs)
NO_EPOCH_CHECK: Final = -1


@dataclass(frozen=True, slots=True)
class WireCall:
    """One actor request as a wire request: its API, version and body entity, and how to read
    the wire response body back into the actor response (`correlation_id` is the actor
    request's, so the requester matches it up as it would a local answer)."""

    api_key: ApiKey
    version: int
    body: Any
    read: Callable[[Any], Response]
    #: how long the request may take on the server on purpose (a long-poll fetch's wait)
    server_wait_ms: int = 0


def wire_call(request: Request) -> WireCall | None:
    """The wire form of `request`, or None for a message that never crosses processes."""
    make = _CALLS.get(type(request))
    return make(request) if make is not None else None


def by_topic(partitions: Iterable[Any], topic_of: Callable[[Any], str]) -> dict[str, list[Any]]:
    """Items grouped by topic, in first-seen order (Kafka's requests list each topic once)."""
    grouped: dict[str, list[Any]] = {}
    for item in partitions:
        grouped.setdefault(topic_of(item), []).append(item)
    return grouped


def _entity(api_key: ApiKey) -> tuple[int, Any]:
    version = SENT_VERSIONS[api_key]
    return version, request_type(api_key, version)


# -- LeaderAndIsr ---------------------------------------------------------------------------------


def _partition_state(schema: Any, struct: str, state: PartitionLeaderState) -> Any:
    return build(
        nested(schema, struct),
        topic_name=state.topic,
        partition_index=state.partition,
        controller_epoch=state.controller_epoch,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=state.isr,
        zk_version=state.zk_version,
        partition_epoch=state.zk_version,  # Kafka 3's name for ZkVersion
        replicas=state.replicas,
        adding_replicas=(),
        removing_replicas=(),
        is_new=False,
        offline_replicas=(),
    )


def _topic_states(
    schema: Any,
    api: str,
    states: Iterable[PartitionLeaderState],
    topic_ids: Mapping[str, str] | None = None,
) -> tuple[Any, ...]:
    """LeaderAndIsr's or UpdateMetadata's partition states grouped by topic (`api` names the
    structs: `<api>TopicState`, `<api>PartitionState`), with each topic's id when known
    (the zero uuid otherwise, as Kafka sends a topic without one)."""
    ids = topic_ids or {}
    return tuple(
        build(
            nested(schema, f"{api}TopicState"),
            topic_name=topic,
            topic_id=uuid_from_string(ids[topic]) if topic in ids else ZERO_UUID,
            partition_states=tuple(
                _partition_state(schema, f"{api}PartitionState", s) for s in grouped
            ),
        )
        for topic, grouped in by_topic(states, lambda s: s.topic).items()
    )


def _leader_and_isr(request: LeaderAndIsr) -> WireCall:
    version, schema = _entity(ApiKey.LEADER_AND_ISR)
    body = build(
        schema,
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        type_=0,  # v5's "whether all topics are included": kafkactor does not say
        topic_states=_topic_states(
            schema,
            "LeaderAndIsr",
            request.partition_states,
            {i.topic: i.topic_id for i in request.topic_ids},
        ),
        live_leaders=(),
    )

    def read(response: Any) -> Response:
        return LeaderAndIsrResponse(
            correlation_id=request.correlation_id,
            error_code=ErrorCode(response.error_code),
            partitions=_leader_and_isr_errors(request, response),
        )

    return WireCall(ApiKey.LEADER_AND_ISR, version, body, read)


def _leader_and_isr_errors(request: LeaderAndIsr, response: Any) -> tuple[PartitionError, ...]:
    """The response's partition errors: listed with their topic names (v0-4), or grouped
    under topic ids (v5+), named back from the request's ids; a topic sent without an id
    (the zero uuid) is answered in the request's order."""
    topics = getattr(response, "topics", None)
    if topics is None:
        return _partition_errors(response.partition_errors)
    names = {uuid_from_string(i.topic_id): i.topic for i in request.topic_ids}
    unnamed = iter(
        [
            t
            for t in by_topic(request.partition_states, lambda s: s.topic)
            if t not in names.values()
        ]
    )
    errors: list[PartitionError] = []
    for topic in topics:
        name = names.get(topic.topic_id) or next(unnamed, "")
        errors.extend(
            PartitionError(
                topic=name, partition=int(e.partition_index), error_code=ErrorCode(e.error_code)
            )
            for e in topic.partition_errors
        )
    return tuple(errors)


def _partition_errors(errors: Iterable[Any]) -> tuple[PartitionError, ...]:
    return tuple(
        PartitionError(
            topic=e.topic_name, partition=int(e.partition_index), error_code=ErrorCode(e.error_code)
        )
        for e in errors
    )


# -- StopReplica ----------------------------------------------------------------------------------


def _stop_replica(request: StopReplica) -> WireCall:
    version, schema = _entity(ApiKey.STOP_REPLICA)
    topics = by_topic(request.partitions, lambda tp: tp.topic)
    body = build(
        schema,
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=tuple(
            build(
                nested(schema, "StopReplicaTopicState"),
                topic_name=topic,
                partition_states=tuple(
                    build(
                        nested(schema, "StopReplicaPartitionState"),
                        partition_index=tp.partition,
                        leader_epoch=NO_EPOCH_CHECK,
                        delete_partition=request.delete_partitions,
                    )
                    for tp in partitions
                ),
            )
            for topic, partitions in topics.items()
        ),
    )

    def read(response: Any) -> Response:
        return StopReplicaResponse(
            correlation_id=request.correlation_id,
            error_code=ErrorCode(response.error_code),
            partitions=_partition_errors(response.partition_errors),
        )

    return WireCall(ApiKey.STOP_REPLICA, version, body, read)


# -- UpdateMetadata -------------------------------------------------------------------------------


def _update_metadata(request: UpdateMetadata) -> WireCall:
    version, schema = _entity(ApiKey.UPDATE_METADATA)
    endpoints = {e.broker_id: e for e in request.endpoints}
    body = build(
        schema,
        controller_id=request.controller_id,
        controller_epoch=request.controller_epoch,
        broker_epoch=request.broker_epoch,
        topic_states=_topic_states(
            schema,
            "UpdateMetadata",
            request.partition_states,
            {i.topic: i.topic_id for i in request.topic_ids},
        ),
        live_brokers=tuple(
            _live_broker(schema, broker, endpoints.get(broker)) for broker in request.live_brokers
        ),
    )

    def read(response: Any) -> Response:
        return UpdateMetadataResponse(
            correlation_id=request.correlation_id, error_code=ErrorCode(response.error_code)
        )

    return WireCall(ApiKey.UPDATE_METADATA, version, body, read)


PLAINTEXT: Final = 0  # Kafka's SecurityProtocol id of PLAINTEXT
LISTENER_NAME: Final = "PLAINTEXT"


def _live_broker(schema: Any, broker: int, endpoint: BrokerEndpoint | None) -> Any:
    """A live broker with every listener's endpoint (its inter-broker one first); one without
    a listener has none."""
    listed: tuple[ListenerEndpoint, ...] = ()
    if endpoint is not None and endpoint.listeners:
        first = [
            e for e in endpoint.listeners if (e.host, e.port) == (endpoint.host, endpoint.port)
        ]
        listed = (*first[:1], *(e for e in endpoint.listeners if e not in first[:1]))
    elif endpoint is not None and endpoint.port >= 0:
        listed = (ListenerEndpoint(listener=LISTENER_NAME, host=endpoint.host, port=endpoint.port),)
    return build(
        nested(schema, "UpdateMetadataBroker"),
        id_=broker,  # kio's name for `Id` (a builtin's name)
        endpoints=tuple(
            build(
                nested(schema, "UpdateMetadataEndpoint"),
                port=e.port,
                host=e.host,
                listener=e.listener,
                security_protocol=e.security_protocol,
            )
            for e in listed
        ),
        rack=None,
    )


# -- ControlledShutdown ---------------------------------------------------------------------------


def _controlled_shutdown(request: ControlledShutdownRequest) -> WireCall:
    version, schema = _entity(ApiKey.CONTROLLED_SHUTDOWN)
    body = build(schema, broker_id=request.broker_id, broker_epoch=request.broker_epoch)

    def read(response: Any) -> Response:
        return ControlledShutdownResponse(
            correlation_id=request.correlation_id,
            error_code=ErrorCode(response.error_code),
            remaining_partitions=tuple(
                TopicPartition(topic=p.topic_name, partition=int(p.partition_index))
                for p in response.remaining_partitions
            ),
        )

    return WireCall(ApiKey.CONTROLLED_SHUTDOWN, version, body, read)


# -- Fetch (a follower's) -------------------------------------------------------------------------


def _fetch(request: FetchRequest) -> WireCall:
    version, schema = _entity(ApiKey.FETCH)
    topics = by_topic(request.partitions, lambda p: p.topic)
    body = build(
        schema,
        cluster_id=None,
        replica_id=request.replica_id,
        max_wait=timedelta(milliseconds=request.max_wait_ms),
        min_bytes=request.min_bytes,
        max_bytes=min(request.max_bytes, 2**31 - 1),
        isolation_level=0,
        session_id=0,
        session_epoch=-1,  # no fetch session (KIP-227): every fetch lists its partitions
        topics=tuple(
            build(
                nested(schema, "FetchTopic"),
                topic=topic,
                partitions=tuple(
                    build(
                        nested(schema, "FetchPartition"),
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        fetch_offset=p.fetch_offset,
                        last_fetched_epoch=-1,
                        log_start_offset=p.log_start_offset,
                        partition_max_bytes=p.max_bytes,
                    )
                    for p in partitions
                ),
            )
            for topic, partitions in topics.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )

    def read(response: Any) -> Response:
        return FetchResponse(
            correlation_id=request.correlation_id,
            partitions=tuple(
                FetchPartitionData(
                    topic=topic.topic,
                    partition=int(p.partition_index),
                    error_code=ErrorCode(p.error_code),
                    high_watermark=int(p.high_watermark),
                    # not on the wire: the fetcher then asks the leader's epochs (KIP-279)
                    log_end_offset=-1,
                    log_start_offset=int(p.log_start_offset),
                    records=bytes(p.records) if p.records is not None else b"",
                )
                for topic in response.responses
                for p in topic.partitions
            ),
        )

    return WireCall(ApiKey.FETCH, version, body, read, server_wait_ms=request.max_wait_ms)


# -- OffsetForLeaderEpoch (a follower's) ----------------------------------------------------------


def _offsets_for_leader_epoch(request: OffsetsForLeaderEpochRequest) -> WireCall:
    version, schema = _entity(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    topics = by_topic(request.partitions, lambda p: p.topic)
    body = build(
        schema,
        replica_id=request.replica_id,
        topics=tuple(
            build(
                nested(schema, "OffsetForLeaderTopic"),
                topic=topic,
                partitions=tuple(
                    build(
                        nested(schema, "OffsetForLeaderPartition"),
                        partition=p.partition,
                        current_leader_epoch=p.current_leader_epoch,
                        leader_epoch=p.leader_epoch,
                    )
                    for p in partitions
                ),
            )
            for topic, partitions in topics.items()
        ),
    )

    def read(response: Any) -> Response:
        return OffsetsForLeaderEpochResponse(
            correlation_id=request.correlation_id,
            partitions=tuple(
                EpochEndOffset(
                    topic=topic.topic,
                    partition=int(p.partition),
                    error_code=ErrorCode(p.error_code),
                    leader_epoch=int(p.leader_epoch),
                    end_offset=int(p.end_offset),
                )
                for topic in response.topics
                for p in topic.partitions
            ),
        )

    return WireCall(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body, read)


def _write_txn_markers(request: WriteTxnMarkersRequest) -> WireCall:
    version, schema = _entity(ApiKey.WRITE_TXN_MARKERS)
    body = markers_body(request, schema)
    return WireCall(ApiKey.WRITE_TXN_MARKERS, version, body, lambda r: markers_answer(request, r))


_CALLS: Final[dict[type[Any], Callable[[Any], WireCall]]] = {
    LeaderAndIsr: _leader_and_isr,
    StopReplica: _stop_replica,
    UpdateMetadata: _update_metadata,
    ControlledShutdownRequest: _controlled_shutdown,
    FetchRequest: _fetch,
    OffsetsForLeaderEpochRequest: _offsets_for_leader_epoch,
    WriteTxnMarkersRequest: _write_txn_markers,
}
