"""The topic purgatory's operations, deterministically (a ManualClock, a Timer that runs
expirations inline): Kafka's DelayedCreatePartitions completes once every partition has a
leader in the metadata cache, DelayedDeleteTopics once the topics are gone from it, each re-checked
when the replica manager reports a change of the topics it watches, and a timeout answers
REQUEST_TIMED_OUT for the topics still waited for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kafkactor.actors.purgatory import Purgatory, RequestOperation
from kafkactor.actors.replication.topic_purgatory import (
    DelayedCreatePartitions,
    DelayedDeleteTopics,
    TopicView,
    topic_changes,
)
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.topic_purgatory import (
    AwaitPartitionsLed,
    AwaitTopicsDeleted,
    TopicOperationResult,
)
from kafkactor.timer import ManualClock, Timer

pytestmark = pytest.mark.timeout(30)


@dataclass
class Answers:
    """Stands in for the purgatory actor: records what each operation answered."""

    sent: list[TopicOperationResult] = field(default_factory=list)

    def reply(self, request: Any, response: Any, trace: Any = None) -> None:
        assert isinstance(response, TopicOperationResult)
        self.sent.append(response)


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock(0)
        self.timer = Timer(self.clock)
        self.purgatory = Purgatory("topic", self.timer)
        self.view = TopicView()
        self.cache: dict[str, dict[int, PartitionLeaderState]] = {}
        self.told: dict[str, frozenset[int]] = {}
        self.answers = Answers()

    def lead(self, topic: str, partition: int, leader: int = 1) -> None:
        """The metadata cache takes an UpdateMetadata naming this partition's leader."""
        self.cache.setdefault(topic, {})[partition] = PartitionLeaderState(
            topic=topic, partition=partition, leader=leader
        )
        self._changed()

    def forget(self, topic: str) -> None:
        """The metadata cache drops a deleted topic."""
        self.cache.pop(topic, None)
        self._changed()

    def _changed(self) -> None:
        change = topic_changes(self.cache, self.told)
        if change is not None:
            for topic in self.view.apply(change):
                self.purgatory.check_and_complete(topic)

    def watch(self, operation: RequestOperation, *topics: str) -> bool:
        return self.purgatory.try_complete_else_watch(operation, topics)

    def create(self, *partitions: tuple[str, int], timeout_ms: int = 1000) -> RequestOperation:
        spec = AwaitPartitionsLed(
            partitions=tuple(TopicPartition(topic=t, partition=p) for t, p in partitions)
        )
        request = DelayOperation(operation=spec, timeout_ms=timeout_ms)
        return DelayedCreatePartitions(self.answers, request, self.view)  # type: ignore[arg-type]

    def delete(self, *topics: str, timeout_ms: int = 1000) -> RequestOperation:
        request = DelayOperation(operation=AwaitTopicsDeleted(topics=topics), timeout_ms=timeout_ms)
        return DelayedDeleteTopics(self.answers, request, self.view)  # type: ignore[arg-type]

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        while self.timer.advance_clock(0):
            pass


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_create_completes_once_every_partition_has_a_leader_in_the_cache(h: Harness) -> None:
    h.lead("a", 0)
    operation = h.create(("a", 0), ("a", 1), ("b", 0))
    assert h.watch(operation, "a", "b") is False
    h.lead("a", 1, leader=-1)  # known, but no leader yet
    h.lead("b", 0)
    assert h.answers.sent == []
    h.advance(500)
    h.lead("a", 1, leader=2)
    assert operation.is_completed() and not operation.expired
    assert [r.timed_out for r in h.answers.sent] == [()]
    h.advance(1000)  # its timeout was cancelled: one answer only
    assert len(h.answers.sent) == 1


def test_create_already_satisfied_completes_at_once(h: Harness) -> None:
    h.lead("a", 0)
    assert h.watch(h.create(("a", 0)), "a") is True
    assert [r.timed_out for r in h.answers.sent] == [()]
    assert h.purgatory.num_delayed == 0


def test_create_times_out_naming_the_topics_still_without_leaders(h: Harness) -> None:
    operation = h.create(("a", 0), ("b", 0), ("b", 1), timeout_ms=1000)
    h.watch(operation, "a", "b")
    h.lead("a", 0)
    h.lead("b", 0)
    h.advance(999)
    assert h.answers.sent == []
    h.advance(1)
    assert operation.expired
    assert [r.timed_out for r in h.answers.sent] == [("b",)]


def test_delete_completes_once_the_topics_are_gone_from_the_cache(h: Harness) -> None:
    h.lead("a", 0)
    h.lead("b", 0)
    operation = h.delete("a", "b")
    h.watch(operation, "a", "b")
    h.forget("a")
    assert h.answers.sent == []
    h.forget("b")
    assert [r.timed_out for r in h.answers.sent] == [()]


def test_delete_times_out_naming_the_topics_still_there(h: Harness) -> None:
    h.lead("a", 0)
    h.lead("b", 0)
    h.watch(h.delete("a", "b", timeout_ms=300), "a", "b")
    h.forget("b")
    h.advance(300)
    assert [r.timed_out for r in h.answers.sent] == [("a",)]


def test_the_replica_manager_reports_only_what_changed() -> None:
    cache: dict[str, dict[int, PartitionLeaderState]] = {
        "a": {0: PartitionLeaderState(topic="a", partition=0, leader=1)}
    }
    told: dict[str, frozenset[int]] = {}
    first = topic_changes(cache, told)
    assert first is not None and [(t.topic, t.led) for t in first.topics] == [("a", (0,))]
    assert topic_changes(cache, told) is None  # the same UpdateMetadata again: nothing new
    cache["a"][1] = PartitionLeaderState(topic="a", partition=1, leader=-1)
    assert topic_changes(cache, told) is None  # a partition without a leader is not led
    del cache["a"]
    gone = topic_changes(cache, told)
    assert gone is not None and gone.topics == () and gone.gone == ("a",)


def test_an_update_naming_some_topics_is_compared_for_those_alone() -> None:
    cache: dict[str, dict[int, PartitionLeaderState]] = {
        "a": {0: PartitionLeaderState(topic="a", partition=0, leader=1)},
        "b": {0: PartitionLeaderState(topic="b", partition=0, leader=1)},
    }
    told: dict[str, frozenset[int]] = {}
    first = topic_changes(cache, told, ["b"])  # an UpdateMetadata of topic b's partitions
    assert first is not None and [(t.topic, t.led) for t in first.topics] == [("b", (0,))]
    assert told == {"b": frozenset({0})}  # a is left for an update that names it
    del cache["b"]
    gone = topic_changes(cache, told, ["b"])  # b deleted (named with LEADER_DURING_DELETE)
    assert gone is not None and gone.topics == () and gone.gone == ("b",)
    assert topic_changes(cache, told, ["c"]) is None  # a topic it never knew: nothing
