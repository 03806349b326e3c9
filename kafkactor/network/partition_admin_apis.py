"""KafkaApis' CreatePartitions (API 37): Kafka's `handleCreatePartitionsRequest` and
`ZkAdminManager.createPartitions`, as translation into steps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from kafkactor.actors.runtime import addresses
from kafkactor.common import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicPartition,
    TopicQueuedForDeletionError,
    UnknownTopicError,
)
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.admin_apis import KafkaApisConfig, controller_for_clients
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import (
    NO_THROTTLE,
    Admin,
    Answer,
    Ask,
    Step,
    error_of,
    legal_topic_name,
    millis,
)
from kafkactor.network.topic_waits import await_led

__all__ = ["DUPLICATE_TOPIC", "PartitionAdmin", "PartitionAdminApis"]

# Kafka's INVALID_REQUEST message for a topic named twice in one CreatePartitions request
DUPLICATE_TOPIC = "Duplicate topic in request."

Outcome = tuple[ErrorCode, str | None]

# the typed errors of a topic admin's create_partitions, as Kafka answers them
_ERRORS: tuple[tuple[type[Exception], ErrorCode], ...] = (
    (TopicQueuedForDeletionError, ErrorCode.INVALID_TOPIC_EXCEPTION),
    (UnknownTopicError, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (InvalidPartitionsError, ErrorCode.INVALID_PARTITIONS),
    (InvalidReplicaAssignmentError, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    (InvalidReplicationFactorError, ErrorCode.INVALID_REPLICATION_FACTOR),
    (TimeoutError, ErrorCode.REQUEST_TIMED_OUT),
)


@runtime_checkable
class PartitionAdmin(Protocol):
    """A topic admin that adds partitions the way this cluster does (`AdminZkClient` through
    ZooKeeper and the controller, or the in-process Cluster); may block."""

    def create_partitions(
        self,
        topic: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        wait: bool = True,
    ) -> Mapping[int, Any]:
        """Grow `topic` to `total` partitions, the new ones on `assignments` (one replica
        list per new partition) or generated; returns the whole assignment (partition ->
        replicas). Raises Kafka's typed errors (`plan_added_partitions`' and
        `UnknownTopicError`, `TopicQueuedForDeletionError`). Without `wait` it returns once
        ZooKeeper has the change, not waiting for the new partitions' leaders."""


class PartitionAdminApis:
    """Kafka's CreatePartitions handling for one broker.

    Only the active controller adds partitions (Kafka 2.8): a broker that is not answers
    NOT_CONTROLLER for every topic. It knows from its metadata cache (the controller id the
    last UpdateMetadata named; without ZooKeeper, the lowest live broker, as
    `controller_for_clients` tells clients). A topic named twice is INVALID_REQUEST ("Duplicate
    topic in request."); the others go, one by one, to the `PartitionAdmin` in an `Admin` step
    (ZooKeeper writes block), its typed errors answered as Kafka's codes with their messages.
    `validate_only` runs every check and writes nothing. The answer then waits in the broker's
    topic purgatory until every partition of the grown topics has a leader in the metadata
    cache, or the request's timeout (REQUEST_TIMED_OUT for the topics still waited for; at
    once for a timeout <= 0), as Kafka's DelayedCreatePartitions does.
    """

    def __init__(self, broker_id: int, config: KafkaApisConfig, *, admin: object | None):
        self.broker_id = broker_id
        self.config = config
        # the broker's topic admin, when it can add partitions
        self.admin = admin if isinstance(admin, PartitionAdmin) else None
        self.replica_manager = addresses.replica_manager(broker_id)

    def create_partitions(self, version: int, body: Any) -> Step:
        topics = list(body.topics)

        def controller_known(response: Response) -> Step:
            if not isinstance(response, MetadataResponse):
                code = error_of(response)
                return self._answer(version, topics, {t.name: (code, None) for t in topics})
            controller = controller_for_clients(response.controller_id, response.endpoints)
            if controller != self.broker_id:
                not_controller = (ErrorCode.NOT_CONTROLLER, None)
                return self._answer(version, topics, {t.name: not_controller for t in topics})
            return self._create(version, body, topics)

        return Ask(self.replica_manager, MetadataRequest(topics=("",)), controller_known)

    def _create(self, version: int, body: Any, topics: list[Any]) -> Step:
        names = [t.name for t in topics]
        refused: dict[str, Outcome] = {
            n: (ErrorCode.INVALID_REQUEST, DUPLICATE_TOPIC) for n in names if names.count(n) > 1
        }
        admin = self.admin
        if admin is None:
            for name in names:
                refused.setdefault(name, (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))
        valid = [t for t in topics if t.name not in refused]
        validate_only = bool(body.validate_only)

        def create() -> dict[str, tuple[Outcome, int]]:
            assert admin is not None
            return {t.name: self._create_one(admin, t, validate_only) for t in valid}

        def created(outcomes: Any) -> Step:
            results = dict(refused)
            written: list[TopicPartition] = []
            for topic in valid:
                if not isinstance(outcomes, dict):  # the whole step failed or timed out
                    results[topic.name] = _outcome_of(outcomes)
                    continue
                results[topic.name], count = outcomes[topic.name]
                if results[topic.name][0] is ErrorCode.NONE and not validate_only:
                    written += [TopicPartition(topic=topic.name, partition=p) for p in range(count)]

            def waited(timed_out: frozenset[str]) -> Step:
                for name in timed_out:
                    results[name] = (ErrorCode.REQUEST_TIMED_OUT, None)
                return self._answer(version, topics, results)

            return await_led(self.broker_id, millis(body.timeout), written, waited)

        if not valid:
            return created({})
        return Admin(create, created)

    def _create_one(
        self, admin: PartitionAdmin, topic: Any, validate_only: bool
    ) -> tuple[Outcome, int]:
        """The topic's outcome, and how many partitions it has now (0 when refused)."""
        if not legal_topic_name(topic.name):  # no znode could be named so
            unknown = f"The topic '{topic.name}' does not exist."
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown), 0
        assignments: list[list[int]] | None = None
        if topic.assignments is not None:
            assignments = [[int(b) for b in a.broker_ids] for a in topic.assignments]
        try:
            whole = admin.create_partitions(
                topic.name,
                int(topic.count),
                assignments,
                validate_only=validate_only,
                max_partitions=self.config.max_partitions_per_topic,
                wait=False,  # the answer waits in the topic purgatory instead
            )
        except Exception as error:
            return _outcome_of(error), 0
        return (ErrorCode.NONE, None), len(whole)

    @staticmethod
    def _answer(version: int, topics: Sequence[Any], results: dict[str, Outcome]) -> Answer:
        schema = response_type(ApiKey.CREATE_PARTITIONS, version)
        result_type = nested(schema, "CreatePartitionsTopicResult")
        entries = []
        for name in dict.fromkeys(t.name for t in topics):  # a duplicated topic answered once
            code, message = results[name]
            entries.append(build(result_type, name=name, error_code=code, error_message=message))
        return Answer(build(schema, throttle_time=NO_THROTTLE, results=tuple(entries)))


def _outcome_of(error: Any) -> Outcome:
    """Kafka's code and message for what a topic admin raised (UNKNOWN_SERVER_ERROR for a
    failure of ZooKeeper or of this broker)."""
    for kind, code in _ERRORS:
        if isinstance(error, kind):
            return code, str(error)
    return ErrorCode.UNKNOWN_SERVER_ERROR, str(error) if error is not None else None
