"""`Cluster.elect_leaders`: Kafka's ElectLeaders asked of the active controller actor."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kazoo.exceptions import NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.preferred_election import ElectionType
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import (
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionElectionResult,
)

ELECTIONS = {"preferred": ElectionType.PREFERRED, "unclean": ElectionType.UNCLEAN}


def every_partition(zk: Any) -> list[TopicPartition]:
    """Every partition assigned under `/brokers/topics`."""
    keys = []
    for topic in sorted(zk.get_children(zk_data.BROKER_TOPICS)):
        try:
            data, _ = zk.get(zk_data.topic_path(topic))
        except NoNodeError:
            continue
        for partition in zk_data.decode_assignment(topic, data):
            keys.append(TopicPartition(topic=topic, partition=partition))
    return keys


def elect_request(
    zk: Any, partitions: Iterable[tuple[str, int]] | None, election: str
) -> ElectLeadersRequest:
    """The request for `partitions` (None: every partition) and `election` ("preferred" or
    "unclean")."""
    if election not in ELECTIONS:
        raise ValueError(f"election must be one of {sorted(ELECTIONS)}, got {election!r}")
    keys = (
        every_partition(zk)
        if partitions is None
        else [TopicPartition(topic=t, partition=p) for t, p in partitions]
    )
    return ElectLeadersRequest(election_type=ELECTIONS[election], partitions=tuple(keys))


def elect_results(
    response: ElectLeadersResponse, *, everything: bool
) -> dict[tuple[str, int], PartitionElectionResult]:
    """Each partition's result; for every partition, only those where an election happened
    or failed (ELECTION_NOT_NEEDED left out), as Kafka's handleElectReplicaLeader answers."""
    return {
        (r.topic, r.partition): r
        for r in response.results
        if not (everything and r.error_code is ErrorCode.ELECTION_NOT_NEEDED)
    }
