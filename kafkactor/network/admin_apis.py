"""KafkaApis' cluster and admin APIs: Metadata (with auto-creation) and InitProducerId — the
ones that read the metadata cache or need blocking admin work — and what the admin APIs share
(`TopicAdmin`, `KafkaApisConfig`); CreateTopics and DeleteTopics are `topic_admin_apis`'."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kafkactor.actors.runtime import addresses
from kafkactor.common import BrokerEndpoint, TopicExistsError
from kafkactor.kafka_uuid import uuid_from_string
from kafkactor.messages import ErrorCode, ErrorResponse, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse, TopicMetadata
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.metadata_topic_ids import (
    answer_topic_id,
    invalid_topic_id_request,
    refused_answer,
    requested_topic_ids,
    unknown_topic_id_entries,
)
from kafkactor.network.steps import (
    AUTHORIZED_OPERATIONS_OMITTED,
    NO_THROTTLE,
    Admin,
    Answer,
    Ask,
    Step,
    legal_topic_name,
)

__all__ = [
    "AdminApis",
    "KafkaApisConfig",
    "ProducerIdSource",
    "TopicAdmin",
    "controller_for_clients",
]


class TopicAdmin(Protocol):
    """Creates topics the way this cluster does (through ZooKeeper and its controller, or the
    in-process Cluster's own assignment); may block. Raises `TopicExistsError` for a topic
    that exists, `InvalidReplicaAssignmentError` for a manual assignment Kafka refuses and
    ValueError for another bad request (replication factor, unknown config)."""

    def create_topic(
        self,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        config: Mapping[str, str],
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        wait: bool = True,
    ) -> Any:
        """Create a topic with `assignments` (partition -> replicas, the first the preferred
        leader; `partitions` and `replication_factor` then None) or a generated assignment;
        without `wait`, return once ZooKeeper has it (not waiting for its leaders)."""

    def registered_brokers(self) -> list[int]:
        """The brokers registered in ZooKeeper: those a manual assignment may name."""

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        """Delete a topic; raises `UnknownTopicError` for a topic that does not exist. Without
        `wait`, return once it is marked for deletion."""


class ProducerIdSource(Protocol):
    """Hands out producer ids unique across the cluster (Kafka's ProducerIdManager)."""

    def generate_producer_id(self) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaApisConfig:
    """The broker settings KafkaApis reads (Kafka's names in comments)."""

    cluster_id: str = "kafkactor"
    auto_create_topics_enable: bool = True  # auto.create.topics.enable
    num_partitions: int = 1  # num.partitions: of an auto-created topic
    default_replication_factor: int = 1  # default.replication.factor, capped at live brokers
    delete_topic_enable: bool = True  # delete.topic.enable (Kafka 1.0's default)
    # a CreateTopics asking for more is refused (INVALID_PARTITIONS): every partition is an
    # actor and a log here, so a request for 2**31 - 1 of them must not be tried
    max_partitions_per_topic: int = 10_000
    # offsets.topic.replication.factor: `__consumer_offsets` is created with min(this, live
    # brokers) replicas when FindCoordinator first finds it missing
    offsets_topic_replication_factor: int = 3


class AdminApis:
    """The cluster-level half of Kafka's `KafkaApis` for one broker.

    Metadata asks the replica manager's metadata cache and, for unknown topics when
    auto-creation is on, creates them through the `TopicAdmin` (answering LEADER_NOT_AVAILABLE
    meanwhile, as Kafka does), InitProducerId through the `ProducerIdSource`, both as blocking
    `Admin` steps.
    """

    def __init__(
        self,
        broker_id: int,
        config: KafkaApisConfig,
        *,
        admin: TopicAdmin | None,
        producer_ids: ProducerIdSource | None,
    ) -> None:
        self.config = config
        self.admin = admin
        self.producer_ids = producer_ids
        self.replica_manager = addresses.replica_manager(broker_id)
        self._creating: set[str] = set()  # auto-creations on their way

    # -- Metadata -------------------------------------------------------------------------------

    def metadata(self, version: int, body: Any, listener: str = "") -> Step:
        """Metadata, its brokers at the endpoints of `listener` (the request's)."""
        if body.topics is None or (version == 0 and not body.topics):
            wanted: tuple[str, ...] = ()  # every topic
        else:
            refusal = invalid_topic_id_request(version, body.topics)  # KIP-516, v10-11
            if refusal is not None:
                return Answer(refused_answer(version, body.topics, ErrorCode.INVALID_REQUEST))
            topic_ids = requested_topic_ids(body.topics)
            if topic_ids:  # v12+: the topics named by id (their names ignored, as Kafka does)
                return Ask(
                    self.replica_manager,
                    MetadataRequest(topics=(), listener=listener),
                    lambda r: self._metadata_by_ids(version, r, topic_ids),
                )
            wanted = tuple(dict.fromkeys(t.name for t in body.topics))
            if not wanted:  # v1+: an empty list asks for brokers only
                return Ask(
                    self.replica_manager,
                    MetadataRequest(topics=("",), listener=listener),
                    lambda r: self._metadata_answer(
                        version,
                        r if isinstance(r, MetadataResponse) else MetadataResponse(),
                        (),
                        created=(),
                    ),
                )
        allow_create = self.config.auto_create_topics_enable and (
            version < 4 or bool(body.allow_auto_topic_creation)
        )

        def answered(response: Response) -> Step:
            if not isinstance(response, MetadataResponse):
                return self._metadata_failed(version, response, wanted)
            missing = [
                t.topic
                for t in response.topics
                if t.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                and legal_topic_name(t.topic)
            ]
            if not (allow_create and missing and self.admin is not None):
                return self._metadata_answer(version, response, response.topics, created=())
            return self._auto_create(version, response, missing)

        return Ask(
            self.replica_manager, MetadataRequest(topics=wanted, listener=listener), answered
        )

    def _auto_create(self, version: int, response: MetadataResponse, missing: list[str]) -> Step:
        admin = self.admin
        assert admin is not None
        live = max(1, len(response.endpoints) or len(response.brokers))
        factor = min(self.config.default_replication_factor, live)
        partitions = self.config.num_partitions
        fresh = [t for t in missing if t not in self._creating]
        self._creating.update(fresh)

        def create() -> dict[str, ErrorCode]:
            failures: dict[str, ErrorCode] = {}
            for topic in fresh:
                try:
                    admin.create_topic(topic, partitions, factor, {}, wait=False)
                except TopicExistsError:  # created meanwhile (another broker): on its way
                    pass
                except ValueError as error:  # refused: the client is told why, not to wait
                    failures[topic] = (
                        ErrorCode.INVALID_REPLICATION_FACTOR
                        if "replication factor" in str(error)
                        else ErrorCode.INVALID_CONFIG
                    )
                except Exception:  # ZooKeeper or the controller failed: worth a retry later
                    failures[topic] = ErrorCode.UNKNOWN_SERVER_ERROR
            return failures

        def created(failures: Any) -> Step:
            self._creating.difference_update(fresh)
            failed = failures if isinstance(failures, dict) else {}
            return self._metadata_answer(
                version, response, response.topics, created=missing, failed=failed
            )

        return Admin(create, created)

    def _metadata_by_ids(
        self, version: int, response: Response, topic_ids: Sequence[uuid.UUID]
    ) -> Step:
        """A v12+ request naming topics by id: the known ones answered as by name, the others
        with UNKNOWN_TOPIC_ID (Kafka's handleTopicMetadataRequest; never auto-created)."""
        if not isinstance(response, MetadataResponse):
            return self._metadata_failed(version, response, ())
        known = {uuid_from_string(t.topic_id): t for t in response.topics if t.topic_id}
        return self._metadata_answer(
            version,
            response,
            [known[i] for i in topic_ids if i in known],
            created=(),
            unknown_topic_ids=[i for i in topic_ids if i not in known],
        )

    def _metadata_failed(self, version: int, response: Response, wanted: Sequence[str]) -> Step:
        code = response.error_code if isinstance(response, ErrorResponse) else ErrorCode.NONE
        topics = tuple(
            TopicMetadata(topic=t, error_code=code or ErrorCode.UNKNOWN_SERVER_ERROR)
            for t in wanted
        )
        return self._metadata_answer(version, MetadataResponse(), topics, created=())

    def _metadata_answer(
        self,
        version: int,
        response: MetadataResponse,
        topics: Sequence[TopicMetadata],
        *,
        created: Sequence[str],
        failed: Mapping[str, ErrorCode] | None = None,
        unknown_topic_ids: Sequence[uuid.UUID] = (),
    ) -> Step:
        schema = response_type(ApiKey.METADATA, version)
        broker_type = nested(schema, "MetadataResponseBroker")
        topic_type = nested(schema, "MetadataResponseTopic")
        partition_type = nested(schema, "MetadataResponsePartition")
        endpoints = response.endpoints
        brokers = tuple(
            build(broker_type, node_id=e.broker_id, host=e.host, port=e.port, rack=None)
            for e in endpoints
        )
        topic_entries = list(
            unknown_topic_id_entries(version, unknown_topic_ids, AUTHORIZED_OPERATIONS_OMITTED)
        )
        for topic in topics:
            if not topic.topic:
                continue
            code = topic.error_code
            if failed and topic.topic in failed:
                code = failed[topic.topic]  # its creation was refused
            elif topic.topic in created and code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                code = ErrorCode.LEADER_NOT_AVAILABLE  # being created: ask again shortly
            elif code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not legal_topic_name(topic.topic):
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            topic_entries.append(
                build(
                    topic_type,
                    error_code=code,
                    name=topic.topic,
                    topic_id=answer_topic_id(topic.topic_id),  # v10+ (KIP-516)
                    is_internal=topic.topic.startswith("__"),
                    partitions=tuple(
                        build(
                            partition_type,
                            error_code=p.error_code,
                            partition_index=p.partition,
                            leader_id=p.leader,
                            leader_epoch=p.leader_epoch,
                            replica_nodes=p.replicas,
                            isr_nodes=p.isr,
                            offline_replicas=p.offline_replicas,
                        )
                        for p in topic.partitions
                    ),
                    topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
                )
            )
        return Answer(
            build(
                schema,
                throttle_time=NO_THROTTLE,
                brokers=brokers,
                cluster_id=self.config.cluster_id,
                controller_id=controller_for_clients(response.controller_id, endpoints),
                topics=tuple(topic_entries),
                cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
        )

    # -- InitProducerId -------------------------------------------------------------------------

    def init_producer_id(self, version: int, body: Any) -> Step:
        """InitProducerId of an idempotent producer (no transactional id: KafkaApis sends the
        others to `TxnApis`)."""
        schema = response_type(ApiKey.INIT_PRODUCER_ID, version)

        def answer(code: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Step:
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    error_code=code,
                    producer_id=producer_id,
                    producer_epoch=epoch,
                )
            )

        # v3+ (KIP-360): a producer id without an epoch, or the reverse, is Kafka's
        # INVALID_REQUEST; both given, an idempotent producer still gets a new id (Kafka 2.8)
        producer_id = int(getattr(body, "producer_id", -1))
        if (producer_id == -1) != (int(getattr(body, "producer_epoch", -1)) == -1):
            return answer(ErrorCode.INVALID_REQUEST)
        source = self.producer_ids
        if source is None:
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)

        def generated(producer_id: Any) -> Step:
            if isinstance(producer_id, int) and producer_id >= 0:
                return answer(ErrorCode.NONE, producer_id, 0)
            return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)

        return Admin(_quietly(source.generate_producer_id), generated)


# -- helpers -------------------------------------------------------------------------------------


def controller_for_clients(controller_id: int, endpoints: Sequence[BrokerEndpoint]) -> int:
    """The controller id clients are told: the elected controller, or, when the brokers are
    assigned by the in-process Cluster (no controller broker), the lowest live broker, which
    accepts CreateTopics like any other."""
    ids = [e.broker_id for e in endpoints]
    if controller_id in ids or not ids:
        return controller_id
    return min(ids)


def _quietly(work: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return work()
        except Exception as error:  # handed to the continuation, which answers an error
            return error

    return run
