"""The wait of a topic admin answer, Kafka's ZkAdminManager way: after the ZooKeeper writes,
a CreateTopics, CreatePartitions or DeleteTopics answer waits in the broker's "topic"
purgatory until the metadata cache has the new state (or the request's timeout passes); with
a timeout <= 0 it is answered at once, the topics written being REQUEST_TIMED_OUT."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition
from kafkactor.messages import Response
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.topic_purgatory import (
    AwaitPartitionsLed,
    AwaitTopicsDeleted,
    TopicOperationResult,
)
from kafkactor.network.steps import Ask, Step

__all__ = ["await_deleted", "await_led"]

# continues with the topics still waited for when the wait ended (REQUEST_TIMED_OUT for them)
Then = Callable[[frozenset[str]], Step]


def await_led(
    broker_id: int, timeout_ms: int, partitions: Iterable[TopicPartition], then: Then
) -> Step:
    """Wait until every one of `partitions` has a leader in the broker's metadata cache
    (Kafka's DelayedCreatePartitions)."""
    wanted = tuple(sorted(set(partitions)))
    spec = AwaitPartitionsLed(partitions=wanted)
    return _await(broker_id, timeout_ms, {tp.topic for tp in wanted}, spec, then)


def await_deleted(broker_id: int, timeout_ms: int, topics: Iterable[str], then: Then) -> Step:
    """Wait until none of `topics` is in the broker's metadata cache (Kafka's
    DelayedDeleteTopics)."""
    names = tuple(sorted(set(topics)))
    return _await(broker_id, timeout_ms, set(names), AwaitTopicsDeleted(topics=names), then)


def _await(broker_id: int, timeout_ms: int, topics: set[str], spec: object, then: Then) -> Step:
    if not topics:
        return then(frozenset())
    if timeout_ms <= 0:
        return then(frozenset(topics))

    def answered(response: Response) -> Step:
        if isinstance(response, TopicOperationResult):
            return then(frozenset(response.timed_out))
        return then(frozenset(topics))  # the purgatory is gone (the broker is stopping)

    request = DelayOperation(operation=spec, keys=tuple(sorted(topics)), timeout_ms=timeout_ms)
    return Ask(addresses.topic_purgatory(broker_id), request, answered)
