"""CreateTopics and DeleteTopics answers wait in the broker's topic purgatory (Kafka's
DelayedCreatePartitions and DelayedDeleteTopics): after the ZooKeeper writes, an Ask of the
purgatory keyed by the topics written, for the request's timeout; the topics it reports as
timed out are REQUEST_TIMED_OUT, and a timeout <= 0 answers at once with REQUEST_TIMED_OUT for
every topic written (the writes stand), as Kafka's ZkAdminManager does."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from kafkactor.actors.runtime import addresses
from kafkactor.common import TopicPartition, UnknownTopicError
from kafkactor.messages import ErrorCode
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.topic_purgatory import (
    AwaitPartitionsLed,
    AwaitTopicsDeleted,
    TopicOperationResult,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.kafka_apis import Admin, Ask
from tests.network.test_kafka_apis import BROKER, FakeAdmin, answer, apis, handle
from tests.network.wire import sample_request

pytestmark = pytest.mark.timeout(30)


def _create_topics(*topics: tuple[str, int], timeout_ms: int = 5000) -> Any:
    sample = sample_request(ApiKey.CREATE_TOPICS, 4)
    topic_type = type(sample.topics[0])
    return type(sample)(
        topics=tuple(
            topic_type(name=n, num_partitions=p, replication_factor=1, assignments=(), configs=())
            for n, p in topics
        ),
        timeout=datetime.timedelta(milliseconds=timeout_ms),
        validate_only=False,
    )


def _delete_topics(*names: str, timeout_ms: int = 5000) -> Any:
    sample = sample_request(ApiKey.DELETE_TOPICS, 3)
    return dataclasses.replace(
        sample, topic_names=names, timeout=datetime.timedelta(milliseconds=timeout_ms)
    )


def _written(step: Any) -> Any:
    """The Admin step's writes; what follows them."""
    assert isinstance(step, Admin), f"expected an Admin step, got {step!r}"
    return step.then(step.work())


def _purgatory_wait(step: Any, timeout_ms: int = 5000) -> DelayOperation:
    assert isinstance(step, Ask), f"expected the topic purgatory's Ask, got {step!r}"
    assert step.address == addresses.topic_purgatory(BROKER)
    assert isinstance(step.request, DelayOperation)
    assert step.request.timeout_ms == timeout_ms
    return step.request


def test_create_topics_waits_for_every_partition_of_the_topics_created() -> None:
    admin = FakeAdmin()
    body = _create_topics(("a", 2), ("b", 1), ("bad name", 1))
    step = _written(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 4, body))
    request = _purgatory_wait(step)
    assert request.keys == ("a", "b")  # the refused topic is not waited for
    assert request.operation == AwaitPartitionsLed(
        partitions=(
            TopicPartition(topic="a", partition=0),
            TopicPartition(topic="a", partition=1),
            TopicPartition(topic="b", partition=0),
        )
    )
    response = answer(step.then(TopicOperationResult(timed_out=("b",))), ApiKey.CREATE_TOPICS, 4)
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [
        ("a", ErrorCode.NONE, None),
        ("b", ErrorCode.REQUEST_TIMED_OUT, None),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION, "illegal topic name 'bad name'"),
    ]


def test_create_topics_with_a_zero_timeout_answers_at_once_with_request_timed_out() -> None:
    admin = FakeAdmin()
    body = _create_topics(("a", 2), timeout_ms=0)
    response = answer(
        _written(handle(apis(admin=admin), ApiKey.CREATE_TOPICS, 4, body)), ApiKey.CREATE_TOPICS, 4
    )
    assert [(t.name, t.error_code) for t in response.topics] == [("a", ErrorCode.REQUEST_TIMED_OUT)]
    assert [c[0] for c in admin.created] == ["a"]  # created all the same


def test_delete_topics_waits_until_the_topics_leave_the_metadata_cache() -> None:
    admin = FakeAdmin()
    step = _written(handle(apis(admin=admin), ApiKey.DELETE_TOPICS, 3, _delete_topics("a", "b")))
    request = _purgatory_wait(step)
    assert request.operation == AwaitTopicsDeleted(topics=("a", "b"))
    response = answer(step.then(TopicOperationResult(timed_out=("a",))), ApiKey.DELETE_TOPICS, 3)
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("a", ErrorCode.REQUEST_TIMED_OUT),
        ("b", ErrorCode.NONE),
    ]
    assert admin.deleted == ["a", "b"]


def test_delete_topics_with_a_zero_timeout_or_nothing_deleted_answers_at_once() -> None:
    admin = FakeAdmin()
    body = _delete_topics("a", timeout_ms=0)
    response = answer(
        _written(handle(apis(admin=admin), ApiKey.DELETE_TOPICS, 3, body)), ApiKey.DELETE_TOPICS, 3
    )
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("a", ErrorCode.REQUEST_TIMED_OUT)
    ]
    refusing = FakeAdmin(refuse=UnknownTopicError("no topic 'a'"))
    response = answer(
        _written(handle(apis(admin=refusing), ApiKey.DELETE_TOPICS, 3, _delete_topics("a"))),
        ApiKey.DELETE_TOPICS,
        3,
    )
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("a", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    ]
