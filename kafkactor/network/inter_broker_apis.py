"""The server side of Kafka's ZooKeeper-era controller APIs: LeaderAndIsr, StopReplica and
UpdateMetadata from the controller in another process become the messages the replica
manager takes from an in-process controller, and a ControlledShutdown from another broker
the message the controller takes; their answers become the wire responses.

Every version of Kafka 3.9's definitions is read (`inter_broker_schemas`): a request of a
version before broker epochs (LeaderAndIsr and UpdateMetadata before v2 / v5, StopReplica
before v1, ControlledShutdown before v2) carries none and is not checked against it, as Kafka
did for those versions. The epochs are checked where an in-process request's are: the replica
manager refuses a stale controller epoch (STALE_CONTROLLER_EPOCH) or broker epoch
(STALE_BROKER_EPOCH), the controller a stale broker epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from kafkactor.actors.runtime import addresses
from kafkactor.common import BrokerEndpoint, ListenerEndpoint, PartitionLeaderState, TopicPartition
from kafkactor.kafka_uuid import ZERO_UUID, uuid_to_string
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.controller import ControlledShutdownRequest, ControlledShutdownResponse
from kafkactor.messages.replication import (
    UNKNOWN_BROKER_EPOCH,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    PartitionError,
    StopReplica,
    StopReplicaResponse,
    TopicIdentity,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.inter_broker import by_topic
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import Answer, Ask, Step, error_of

__all__ = ["InterBrokerApis"]

_NO_ZK_VERSION: Final = 0


class InterBrokerApis:
    """The controller-to-broker and broker-to-controller APIs of one broker (Kafka's
    `KafkaApis.handleLeaderAndIsrRequest`, `handleStopReplicaRequest`,
    `handleUpdateMetadataRequest`, `handleControlledShutdownRequest`)."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.replica_manager = addresses.replica_manager(broker_id)
        self.controller = addresses.controller(broker_id)

    # -- LeaderAndIsr --------------------------------------------------------------------------

    def leader_and_isr(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.LEADER_AND_ISR, header.api_version)
        states = tuple(_partition_states(body, "ungrouped_partition_states"))
        request = LeaderAndIsr(
            controller_id=int(body.controller_id),
            controller_epoch=int(body.controller_epoch),
            broker_epoch=_broker_epoch(body),
            partition_states=states,
            topic_ids=_topic_ids(body),  # v5+ (KIP-516)
        )

        def answered(response: Response) -> Step:
            if isinstance(response, LeaderAndIsrResponse):
                code, errors = response.error_code, response.partitions
            else:
                code, errors = error_of(response), ()
            return Answer(_leader_and_isr_response(schema, body, code, errors))

        return Ask(self.replica_manager, request, answered)

    # -- StopReplica ---------------------------------------------------------------------------

    def stop_replica(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.STOP_REPLICA, header.api_version)
        partitions, delete = _stop_replica_partitions(body)
        if delete is None:  # v3+: some partitions to delete and others not, in one request
            errors = tuple(
                PartitionError(topic=tp.topic, partition=tp.partition) for tp in partitions
            )
            return Answer(
                build(
                    schema,
                    error_code=ErrorCode.INVALID_REQUEST,
                    partition_errors=_partition_errors(schema, "StopReplicaPartitionError", errors),
                )
            )
        request = StopReplica(
            controller_id=int(body.controller_id),
            controller_epoch=int(body.controller_epoch),
            broker_epoch=_broker_epoch(body),
            delete_partitions=delete,
            partitions=tuple(partitions),
        )

        def answered(response: Response) -> Step:
            if isinstance(response, StopReplicaResponse):
                code, errors = response.error_code, response.partitions
            else:
                code, errors = error_of(response), ()
            return Answer(
                build(
                    schema,
                    error_code=code,
                    partition_errors=_partition_errors(schema, "StopReplicaPartitionError", errors),
                )
            )

        return Ask(self.replica_manager, request, answered)

    # -- UpdateMetadata ------------------------------------------------------------------------

    def update_metadata(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.UPDATE_METADATA, header.api_version)
        live = tuple(int(_broker_id(b)) for b in body.live_brokers)
        request = UpdateMetadata(
            controller_id=int(body.controller_id),
            controller_epoch=int(body.controller_epoch),
            broker_epoch=_broker_epoch(body),
            partition_states=tuple(_partition_states(body, "ungrouped_partition_states")),
            live_brokers=live,
            endpoints=tuple(e for b in body.live_brokers for e in _endpoints(b)),
            topic_ids=_topic_ids(body),  # v7+ (KIP-516)
        )

        def answered(response: Response) -> Step:
            code = (
                response.error_code
                if isinstance(response, UpdateMetadataResponse)
                else error_of(response)
            )
            return Answer(build(schema, error_code=code))

        return Ask(self.replica_manager, request, answered)

    # -- ControlledShutdown --------------------------------------------------------------------

    def controlled_shutdown(self, header: RequestHeader, body: Any) -> Step:
        schema = response_type(ApiKey.CONTROLLED_SHUTDOWN, header.api_version)
        request = ControlledShutdownRequest(
            broker_id=int(body.broker_id),
            broker_epoch=int(getattr(body, "broker_epoch", UNKNOWN_BROKER_EPOCH)),
        )

        def answered(response: Response) -> Step:
            if isinstance(response, ControlledShutdownResponse):
                code, remaining = response.error_code, response.remaining_partitions
            else:
                code, remaining = error_of(response), ()
            return Answer(
                build(
                    schema,
                    error_code=code,
                    remaining_partitions=tuple(
                        build(
                            nested(schema, "RemainingPartition"),
                            topic_name=tp.topic,
                            partition_index=tp.partition,
                        )
                        for tp in remaining
                    ),
                )
            )

        return Ask(self.controller, request, answered)


def _leader_and_isr_response(
    schema: Any, body: Any, code: ErrorCode, errors: tuple[PartitionError, ...]
) -> Any:
    """A LeaderAndIsr response: partition errors listed one by one (v0-4), or grouped under
    the topic ids the request gave (v5+)."""
    if "topics" not in schema.__dataclass_fields__:
        return build(
            schema,
            error_code=code,
            partition_errors=_partition_errors(schema, "LeaderAndIsrPartitionError", errors),
        )
    topic_ids = {t.topic_name: t.topic_id for t in getattr(body, "topic_states", ())}
    return build(
        schema,
        error_code=code,
        topics=tuple(
            build(
                nested(schema, "LeaderAndIsrTopicError"),
                topic_id=topic_ids.get(topic),
                partition_errors=_partition_errors(schema, "LeaderAndIsrPartitionError", found),
            )
            for topic, found in by_topic(errors, lambda e: e.topic).items()
        ),
    )


def _topic_ids(body: Any) -> tuple[TopicIdentity, ...]:
    """The topic ids of a LeaderAndIsr (v5+) or UpdateMetadata (v7+) body; the zero uuid is a
    topic sent without one."""
    return tuple(
        TopicIdentity(topic=t.topic_name, topic_id=uuid_to_string(t.topic_id))
        for t in getattr(body, "topic_states", ())
        if getattr(t, "topic_id", None) not in (None, ZERO_UUID)
    )


def _broker_epoch(body: Any) -> int:
    return int(getattr(body, "broker_epoch", UNKNOWN_BROKER_EPOCH))


def _partition_states(body: Any, ungrouped: str) -> Iterable[PartitionLeaderState]:
    """Every partition state of a LeaderAndIsr or UpdateMetadata body: listed one by one with
    their topic (v0-1 / v0-4) or grouped by topic (later versions)."""
    for s in getattr(body, ungrouped, ()):
        yield _state(s.topic_name, s)
    for topic in getattr(body, "topic_states", ()):
        for s in topic.partition_states:
            yield _state(topic.topic_name, s)


def _state(topic: str, s: Any) -> PartitionLeaderState:
    zk_version = getattr(s, "zk_version", getattr(s, "partition_epoch", _NO_ZK_VERSION))
    return PartitionLeaderState(
        topic=topic,
        partition=int(s.partition_index),
        controller_epoch=int(s.controller_epoch),
        leader=int(s.leader),
        leader_epoch=int(s.leader_epoch),
        isr=tuple(int(r) for r in s.isr),
        replicas=tuple(int(r) for r in s.replicas),
        zk_version=int(zk_version),
    )


def _stop_replica_partitions(body: Any) -> tuple[list[TopicPartition], bool | None]:
    """A StopReplica body's partitions and whether to delete them (None: mixed, v3+)."""
    if hasattr(body, "topic_states"):  # v3+: per partition
        partitions, flags = [], set()
        for topic in body.topic_states:
            for p in topic.partition_states:
                partitions.append(
                    TopicPartition(topic=topic.topic_name, partition=int(p.partition_index))
                )
                flags.add(bool(p.delete_partition))
        if len(flags) > 1:
            return partitions, None
        return partitions, flags.pop() if flags else False
    delete = bool(body.delete_partitions)
    if hasattr(body, "ungrouped_partitions"):  # v0
        return [
            TopicPartition(topic=p.topic_name, partition=int(p.partition_index))
            for p in body.ungrouped_partitions
        ], delete
    return [  # v1-2
        TopicPartition(topic=t.name, partition=int(index))
        for t in body.topics
        for index in t.partition_indexes
    ], delete


def _broker_id(broker: Any) -> int:
    return int(broker.id_)  # kio's name for `Id` (a builtin's name)


def _endpoints(broker: Any) -> list[BrokerEndpoint]:
    """A live broker with its endpoints (v1+: its endpoint list, the first its inter-broker
    one, each listener named from v3; v0: its one host and port)."""
    broker_id = _broker_id(broker)
    if not hasattr(broker, "endpoints"):
        return [BrokerEndpoint(broker_id=broker_id, host=broker.v0_host, port=int(broker.v0_port))]
    listeners = tuple(
        ListenerEndpoint(
            listener=str(
                getattr(e, "listener", "")
                or _PROTOCOL_NAMES.get(int(e.security_protocol), "PLAINTEXT")
            ),
            host=e.host,
            port=int(e.port),
            security_protocol=int(e.security_protocol),
        )
        for e in broker.endpoints
    )
    if not listeners:
        return []
    first = listeners[0]
    if listeners == (ListenerEndpoint(host=first.host, port=first.port),):
        listeners = ()  # one PLAINTEXT listener: the endpoint of a broker without security
    return [
        BrokerEndpoint(broker_id=broker_id, host=first.host, port=first.port, listeners=listeners)
    ]


_PROTOCOL_NAMES = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _partition_errors(
    schema: Any, struct: str, errors: Iterable[PartitionError]
) -> tuple[Any, ...]:
    return tuple(
        build(
            nested(schema, struct),
            topic_name=e.topic,
            partition_index=e.partition,
            error_code=e.error_code,
        )
        for e in errors
    )
