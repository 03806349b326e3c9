"""A broker's "topic" purgatory: Kafka's DelayedCreatePartitions and DelayedDeleteTopics.

Kafka's ZkAdminManager answers CreateTopics and CreatePartitions once every new partition has a
leader in the broker's metadata cache, and DeleteTopics once the topics are gone from it, or at
the request's timeout with REQUEST_TIMED_OUT for the topics still waited for. The operations
wait in a purgatory keyed by topic, on the broker's shared timer; each UpdateMetadata the
metadata cache applies re-checks the topics it changed (Kafka's
`tryCompleteDelayedTopicOperations`).

Here the metadata cache belongs to the replica manager actor, so the purgatory keeps a view of
it (`TopicView`: the partitions of each topic that have a leader), fed by the replica manager
with what each UpdateMetadata changed (`topic_changes`), after the cache has it. The pure part
(the view, the diff, the two operations) is tested on a ManualClock; `TopicPurgatoryActor` is
the thin actor around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkactor import tracing
from kafkactor.actors.purgatory import PurgatoryActor, RequestOperation
from kafkactor.actors.runtime import Directory, handles
from kafkactor.common import PartitionLeaderState
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.topic_purgatory import (
    AwaitPartitionsLed,
    AwaitTopicsDeleted,
    TopicLeaders,
    TopicOperationResult,
    TopicsMetadataChanged,
)
from kafkactor.timer import Clock, Timer

__all__ = [
    "DelayedCreatePartitions",
    "DelayedDeleteTopics",
    "TopicPurgatoryActor",
    "TopicView",
    "topic_changes",
]


class TopicView:
    """What a broker's metadata cache has of each topic: the partitions with a leader (Kafka's
    `metadataCache.getPartitionInfo(...).leader != NoLeader`), and which topics it has."""

    def __init__(self) -> None:
        self.led: dict[str, frozenset[int]] = {}

    def apply(self, change: TopicsMetadataChanged) -> list[str]:
        """Take in a change; returns the topics it touched (the keys to re-check)."""
        for entry in change.topics:
            self.led[entry.topic] = frozenset(entry.led)
        for topic in change.gone:
            self.led.pop(topic, None)
        return [e.topic for e in change.topics] + list(change.gone)

    def has_leader(self, topic: str, partition: int) -> bool:
        return partition in self.led.get(topic, frozenset())

    def contains(self, topic: str) -> bool:
        return topic in self.led


def topic_changes(
    partitions: Mapping[str, Mapping[int, PartitionLeaderState]],
    told: dict[str, frozenset[int]],
    topics: Iterable[str] | None = None,
) -> TopicsMetadataChanged | None:
    """What the metadata cache's `partitions` changed since `told` (the view last sent, updated
    in place): the topics whose led partitions differ, and the topics gone; None when nothing
    changed. Only `topics` are looked at, those an UpdateMetadata named (a topic it did not
    name is as it was), so the cost is the size of the update; None: every topic."""
    names = set(partitions) | set(told) if topics is None else set(topics)
    changed = []
    gone = []
    for topic in sorted(names):
        states = partitions.get(topic)
        if states is None:
            if told.pop(topic, None) is not None:
                gone.append(topic)
            continue
        led = frozenset(p for p, state in states.items() if state.leader >= 0)
        if told.get(topic) != led:
            told[topic] = led
            changed.append(TopicLeaders(topic=topic, led=tuple(sorted(led))))
    if not changed and not gone:
        return None
    return TopicsMetadataChanged(topics=tuple(changed), gone=tuple(gone))


class _TopicOperation(RequestOperation):
    """A topic operation: answered with the topics its condition does not hold for."""

    view: TopicView

    def __init__(self, actor: PurgatoryActor, request: DelayOperation, view: TopicView) -> None:
        super().__init__(actor, request)
        self.view = view

    def waiting_for(self) -> tuple[str, ...]:
        raise NotImplementedError

    def try_complete(self) -> bool:
        return self.force_complete() if not self.waiting_for() else False

    def on_complete(self) -> None:
        self.respond(
            TopicOperationResult(
                correlation_id=self.request.correlation_id, timed_out=self.waiting_for()
            )
        )


class DelayedCreatePartitions(_TopicOperation):
    """Kafka's DelayedCreatePartitions: done once every partition of the spec has a leader."""

    def __init__(self, actor: PurgatoryActor, request: DelayOperation, view: TopicView) -> None:
        super().__init__(actor, request, view)
        spec = request.operation
        assert isinstance(spec, AwaitPartitionsLed)
        self.spec = spec

    def waiting_for(self) -> tuple[str, ...]:
        """The topics with a partition that has no leader in the metadata cache yet."""
        missing = {
            tp.topic
            for tp in self.spec.partitions
            if not self.view.has_leader(tp.topic, tp.partition)
        }
        return tuple(sorted(missing))


class DelayedDeleteTopics(_TopicOperation):
    """Kafka's DelayedDeleteTopics: done once none of the topics is in the metadata cache."""

    def __init__(self, actor: PurgatoryActor, request: DelayOperation, view: TopicView) -> None:
        super().__init__(actor, request, view)
        spec = request.operation
        assert isinstance(spec, AwaitTopicsDeleted)
        self.spec = spec

    def waiting_for(self) -> tuple[str, ...]:
        """The topics the metadata cache still has."""
        return tuple(sorted({t for t in self.spec.topics if self.view.contains(t)}))


class TopicPurgatoryActor(PurgatoryActor):
    """A broker's "topic" purgatory (Kafka's `topicPurgatory` of its AdminManager).

    `DelayOperation` with an `AwaitPartitionsLed` or `AwaitTopicsDeleted` spec, keyed by the
    topics, waits until the metadata cache has the new state or the timeout passes (the
    Reaper's `OperationsExpired`); `TopicsMetadataChanged` from the replica manager updates
    the view and re-checks the topics it names.
    """

    def __init__(
        self,
        address: str,
        directory: Directory,
        timer: Timer,
        clock: Clock | None = None,
        broker: int | None = None,
        *,
        name: str = "topic",
        purge_interval: int = 1000,
    ) -> None:
        super().__init__(
            address, directory, timer, clock, broker, name=name, purge_interval=purge_interval
        )
        self.view = TopicView()

    @handles(TopicsMetadataChanged)
    def _on_metadata_changed(self, change: TopicsMetadataChanged) -> None:
        completed = 0
        for topic in self.view.apply(change):
            completed += self.purgatory.check_and_complete(topic)
        self.purgatory.maybe_purge()
        if completed and tracing.is_enabled():
            self.log_event(
                "purgatory.complete",
                purgatory=self.purgatory.name,
                key=",".join(sorted({e.topic for e in change.topics} | set(change.gone))),
                completed=completed,
                delayed=self.purgatory.num_delayed,
            )


def _create(actor: PurgatoryActor, request: DelayOperation) -> RequestOperation:
    assert isinstance(actor, TopicPurgatoryActor)
    return DelayedCreatePartitions(actor, request, actor.view)


def _delete(actor: PurgatoryActor, request: DelayOperation) -> RequestOperation:
    assert isinstance(actor, TopicPurgatoryActor)
    return DelayedDeleteTopics(actor, request, actor.view)


TopicPurgatoryActor.register_operation(AwaitPartitionsLed, _create)
TopicPurgatoryActor.register_operation(AwaitTopicsDeleted, _delete)
