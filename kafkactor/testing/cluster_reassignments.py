"""`Cluster.reassign_partitions` and `Cluster.list_partition_reassignments`: KIP-455's
AlterPartitionReassignments and ListPartitionReassignments asked of the active controller."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.controller import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ReassignmentTarget,
)


class ReassignmentRequestError(RuntimeError):
    """The controller refused the whole request (NOT_CONTROLLER: it moved meanwhile)."""

    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(f"{error.name}: {message}")
        self.error = error


def alter_request(
    targets: Mapping[tuple[str, int], Sequence[int] | None],
) -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(
        targets=tuple(
            ReassignmentTarget(
                topic=topic,
                partition=partition,
                replicas=tuple(replicas) if replicas is not None else None,
            )
            for (topic, partition), replicas in sorted(targets.items())
        )
    )


def _refused(response: Response) -> ReassignmentRequestError:
    """A response that is not the answer expected (an actor that failed on the request)."""
    error = getattr(response, "error_code", ErrorCode.UNKNOWN_SERVER_ERROR)
    return ReassignmentRequestError(error, getattr(response, "message", None) or str(response))


def alter_results(response: Response) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
    if not isinstance(response, AlterPartitionReassignmentsResponse):
        raise _refused(response)
    if response.error_code is not ErrorCode.NONE:
        raise ReassignmentRequestError(response.error_code, response.error_message)
    return {(r.topic, r.partition): (r.error_code, r.error_message) for r in response.results}


def list_request(
    partitions: Iterable[tuple[str, int]] | None,
) -> ListPartitionReassignmentsRequest:
    return ListPartitionReassignmentsRequest(
        partitions=(
            tuple(TopicPartition(topic=t, partition=p) for t, p in partitions)
            if partitions is not None
            else None
        )
    )


def list_results(response: Response) -> dict[tuple[str, int], dict[str, tuple[int, ...]]]:
    if not isinstance(response, ListPartitionReassignmentsResponse):
        raise _refused(response)
    if response.error_code is not ErrorCode.NONE:
        raise ReassignmentRequestError(response.error_code, response.error_message)
    return {
        (r.topic, r.partition): {
            "replicas": r.replicas,
            "adding_replicas": r.adding_replicas,
            "removing_replicas": r.removing_replicas,
        }
        for r in response.reassignments
    }
