"""KafkaApis' AlterPartitionReassignments (api key 45) and ListPartitionReassignments (46),
KIP-455, as Kafka 2.8's `KafkaApis.handleAlterPartitionReassignmentsRequest` and
`handleListPartitionReassignmentsRequest` answer them.

Pure translation: the request becomes a message to this broker's own controller actor, whose
answer becomes the response. Only the active controller reassigns: elsewhere the answer is a
top-level NOT_CONTROLLER with no partitions (the clients send both to the controller their
metadata names, and look it up again on NOT_CONTROLLER). A broker without ZooKeeper has no
controller actor, and answers NOT_CONTROLLER too. AlterPartitionReassignments is answered
once each partition's reassignment is started (recorded in `/brokers/topics/<t>`) or
refused; the moves complete later, as in Kafka. A null `replicas` cancels a partition's
reassignment. ListPartitionReassignments with null `topics` lists every partition being
reassigned; partitions asked for that are not being reassigned are left out.
"""

from __future__ import annotations

from typing import Any

from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.controller import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignmentTarget,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import NO_THROTTLE, Answer, Ask, Step, error_of

__all__ = [
    "PartitionReassignmentApis",
    "alter_partition_reassignments",
    "list_partition_reassignments",
]

NOT_CONTROLLER_MESSAGE = "This is not the correct controller for this cluster."


def _top_error(response: Response) -> tuple[ErrorCode, str | None]:
    """The top-level error of an answer that is not the controller's: no controller actor
    (no ZooKeeper) is NOT_CONTROLLER, an actor that failed is its error."""
    error = error_of(response)
    if error is ErrorCode.NETWORK_EXCEPTION:
        return ErrorCode.NOT_CONTROLLER, NOT_CONTROLLER_MESSAGE
    return error, getattr(response, "message", None) or None


class PartitionReassignmentApis:
    """AlterPartitionReassignments and ListPartitionReassignments for one broker: both ask
    its controller actor."""

    def __init__(self, broker_id: int) -> None:
        self.controller = addresses.controller(broker_id)

    # -- AlterPartitionReassignments -----------------------------------------------------------

    def alter_partition_reassignments(self, version: int, body: Any) -> Step:
        targets = tuple(
            ReassignmentTarget(
                topic=str(topic.name),
                partition=int(p.partition_index),
                replicas=tuple(int(r) for r in p.replicas) if p.replicas is not None else None,
            )
            for topic in body.topics
            for p in topic.partitions
        )

        def answered(response: Response) -> Step:
            if not isinstance(response, AlterPartitionReassignmentsResponse):
                error, message = _top_error(response)
                return self._alter_answer(version, error, message, {})
            results: dict[str, list[Any]] = {}
            entry = nested(
                response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version),
                "ReassignablePartitionResponse",
            )
            for r in response.results:
                results.setdefault(r.topic, []).append(
                    build(
                        entry,
                        partition_index=r.partition,
                        error_code=r.error_code,
                        error_message=r.error_message,
                    )
                )
            return self._alter_answer(version, response.error_code, response.error_message, results)

        return Ask(self.controller, AlterPartitionReassignmentsRequest(targets=targets), answered)

    def _alter_answer(
        self,
        version: int,
        error: ErrorCode,
        message: str | None,
        results: dict[str, list[Any]],
    ) -> Step:
        schema = response_type(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
        topic_entry = nested(schema, "ReassignableTopicResponse")
        return Answer(
            build(
                schema,
                throttle_time=NO_THROTTLE,
                error_code=error,
                error_message=message,
                responses=tuple(
                    build(topic_entry, name=topic, partitions=tuple(parts))
                    for topic, parts in results.items()
                ),
            )
        )

    # -- ListPartitionReassignments ------------------------------------------------------------

    def list_partition_reassignments(self, version: int, body: Any) -> Step:
        partitions = (
            tuple(
                TopicPartition(topic=str(t.name), partition=int(p))
                for t in body.topics
                for p in t.partition_indexes
            )
            if body.topics is not None
            else None
        )

        def answered(response: Response) -> Step:
            schema = response_type(ApiKey.LIST_PARTITION_REASSIGNMENTS, version)
            if not isinstance(response, ListPartitionReassignmentsResponse):
                error, message = _top_error(response)
                return Answer(
                    build(
                        schema,
                        throttle_time=NO_THROTTLE,
                        error_code=error,
                        error_message=message,
                        topics=(),
                    )
                )
            topic_entry = nested(schema, "OngoingTopicReassignment")
            partition_entry = nested(schema, "OngoingPartitionReassignment")
            by_topic: dict[str, list[Any]] = {}
            for r in response.reassignments:
                by_topic.setdefault(r.topic, []).append(
                    build(
                        partition_entry,
                        partition_index=r.partition,
                        replicas=r.replicas,
                        adding_replicas=r.adding_replicas,
                        removing_replicas=r.removing_replicas,
                    )
                )
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    error_code=response.error_code,
                    error_message=response.error_message,
                    topics=tuple(
                        build(topic_entry, name=topic, partitions=tuple(parts))
                        for topic, parts in by_topic.items()
                    ),
                )
            )

        return Ask(
            self.controller, ListPartitionReassignmentsRequest(partitions=partitions), answered
        )


def alter_partition_reassignments(broker_id: int, version: int, body: Any) -> Step:
    """KafkaApis' handler: an AlterPartitionReassignments request to broker `broker_id`."""
    return PartitionReassignmentApis(broker_id).alter_partition_reassignments(version, body)


def list_partition_reassignments(broker_id: int, version: int, body: Any) -> Step:
    """KafkaApis' handler: a ListPartitionReassignments request to broker `broker_id`."""
    return PartitionReassignmentApis(broker_id).list_partition_reassignments(version, body)
