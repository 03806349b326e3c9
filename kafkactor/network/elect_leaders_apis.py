"""KafkaApis' ElectLeaders (api key 43; KIP-183, KIP-460): elect the preferred (or, v1+, an
unclean) leader of partitions, as Kafka 2.8's `KafkaApis.handleElectReplicaLeader` does.

Pure translation: the request becomes an `ElectLeadersRequest` to this broker's own controller
actor, whose per-partition results become the response. A broker whose controller is not the
active one gets NOT_CONTROLLER for every partition, with error NONE at the top (v1+), as
Kafka's answers (`KafkaController.processReplicaLeaderElection` when not active); the clients
send ElectLeaders to the controller their metadata names. `topic_partitions` null means every
partition of this broker's metadata cache, and then partitions that needed no election
(ELECTION_NOT_NEEDED) are left out of the answer. An `election_type` other than 0 and 1 is
Kafka's IllegalArgumentException: UNKNOWN_SERVER_ERROR at the top and for each partition,
with its message.

Kafka answers through a DelayedElectLeader once the new leaders are in the broker's metadata
cache (or REQUEST_TIMED_OUT for those not there within `timeout_ms`). Here the controller
answers once it has written the partitions' state znodes and sent LeaderAndIsr and
UpdateMetadata; its own broker's replica manager has that UpdateMetadata queued before the
answer, so a Metadata request to this broker afterwards names the new leaders. `timeout_ms` is
not used.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.controller import (
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from kafkactor.messages.replication import MetadataRequest, MetadataResponse
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import NO_THROTTLE, Answer, Ask, Step, error_of

__all__ = ["ElectLeadersApis", "elect_leaders"]

ELECTION_TYPES = "[PREFERRED, UNCLEAN]"  # Kafka's ElectionType.values(), as its message lists


class ElectLeadersApis:
    """ElectLeaders for one broker: asks its controller actor (and, for "every partition", its
    replica manager's metadata cache first)."""

    def __init__(self, broker_id: int) -> None:
        self.controller = addresses.controller(broker_id)
        self.replica_manager = addresses.replica_manager(broker_id)

    def elect_leaders(self, version: int, body: Any) -> Step:
        election = int(getattr(body, "election_type", 0))
        asked = body.topic_partitions
        if election not in (0, 1):
            keys = [
                TopicPartition(topic=t.topic, partition=int(p))
                for t in asked or ()
                for p in t.partitions
            ]
            message = f"Value {election} must be one of {ELECTION_TYPES}"
            return self._answer(
                version,
                {k: (ErrorCode.UNKNOWN_SERVER_ERROR, message) for k in keys},
                top=ErrorCode.UNKNOWN_SERVER_ERROR,
            )
        if asked is None:
            return Ask(
                self.replica_manager,
                MetadataRequest(),
                lambda response: self._ask(version, election, _cached(response), everything=True),
            )
        keys = [
            TopicPartition(topic=t.topic, partition=int(p)) for t in asked for p in t.partitions
        ]
        return self._ask(version, election, keys, everything=False)

    def _ask(
        self, version: int, election: int, keys: Iterable[TopicPartition], *, everything: bool
    ) -> Step:
        wanted = sorted(set(keys))
        if not wanted:
            return self._answer(version, {})

        def answered(response: Response) -> Step:
            if not isinstance(response, ElectLeadersResponse):
                error = error_of(response)
                if error is ErrorCode.NETWORK_EXCEPTION:  # no controller actor: no ZooKeeper
                    error = ErrorCode.NOT_CONTROLLER
                return self._answer(version, {k: (error, None) for k in wanted})
            results = {
                TopicPartition(topic=r.topic, partition=r.partition): (
                    r.error_code,
                    r.error_message,
                )
                for r in response.results
                if not (everything and r.error_code is ErrorCode.ELECTION_NOT_NEEDED)
            }
            return self._answer(version, results)

        request = ElectLeadersRequest(election_type=election, partitions=tuple(wanted))
        return Ask(self.controller, request, answered)

    def _answer(
        self,
        version: int,
        results: dict[TopicPartition, tuple[ErrorCode, str | None]],
        *,
        top: ErrorCode = ErrorCode.NONE,
    ) -> Step:
        schema = response_type(ApiKey.ELECT_LEADERS, version)
        topic_entry = nested(schema, "ReplicaElectionResult")
        partition_entry = nested(schema, "PartitionResult")
        by_topic: dict[str, list[Any]] = {}
        for key, (error, message) in sorted(results.items()):
            by_topic.setdefault(key.topic, []).append(
                build(
                    partition_entry,
                    partition_id=key.partition,
                    error_code=error,
                    error_message=message,
                )
            )
        return Answer(
            build(
                schema,
                throttle_time=NO_THROTTLE,
                error_code=top,
                replica_election_results=tuple(
                    build(topic_entry, topic=topic, partition_result=tuple(parts))
                    for topic, parts in by_topic.items()
                ),
            )
        )


def _cached(response: Response) -> list[TopicPartition]:
    """Every partition of the metadata cache (none when it did not answer)."""
    if not isinstance(response, MetadataResponse):
        return []
    return [
        TopicPartition(topic=t.topic, partition=p.partition)
        for t in response.topics
        for p in t.partitions
    ]


def elect_leaders(broker_id: int, version: int, body: Any) -> Step:
    """KafkaApis' handler: `body`, an ElectLeaders request of `version`, to broker `broker_id`."""
    return ElectLeadersApis(broker_id).elect_leaders(version, body)
