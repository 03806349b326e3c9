"""CreatePartitions (API 37) through a hand-run KafkaApis: only the active controller adds
partitions, a topic named twice is INVALID_REQUEST, the topic admin's typed errors come back as
Kafka's codes with their messages, and validate_only reaches the admin as such."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.schema.create_partitions.v0.request import (
    CreatePartitionsAssignment as AssignmentV0,
)
from kio.schema.create_partitions.v0.request import CreatePartitionsRequest as RequestV0
from kio.schema.create_partitions.v0.request import CreatePartitionsTopic as TopicV0
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsAssignment as AssignmentV3,
)
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest as RequestV3
from kio.schema.create_partitions.v3.request import CreatePartitionsTopic as TopicV3

from kafkactor.actors.runtime import addresses
from kafkactor.common import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    TopicPartition,
    TopicQueuedForDeletionError,
    UnknownTopicError,
)
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import MetadataRequest
from kafkactor.messages.topic_purgatory import AwaitPartitionsLed, TopicOperationResult
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.kafka_apis import Admin, Ask, KafkaApis, KafkaApisConfig
from tests.network.test_kafka_apis import BROKER, answer, ask, handle, metadata_of
from tests.network.wire import make

pytestmark = pytest.mark.timeout(30)

REQUESTS = {0: (RequestV0, TopicV0, AssignmentV0), 3: (RequestV3, TopicV3, AssignmentV3)}


@dataclass
class PartitionAdmin:
    """A topic admin that records the partitions it is asked to add, refusing some topics."""

    refuse: dict[str, Exception] = field(default_factory=dict)
    added: list[tuple[str, int, list[list[int]] | None, bool, int | None]] = field(
        default_factory=list
    )

    def create_topic(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("CreatePartitions creates no topic")

    def registered_brokers(self) -> list[int]:
        return [1, 2]

    def delete_topic(self, name: str, *, wait: bool = True) -> None:
        raise AssertionError("CreatePartitions deletes no topic")

    def create_partitions(
        self,
        topic: str,
        total: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
        max_partitions: int | None = None,
        wait: bool = True,
    ) -> Any:
        assert not wait, "the answer waits in the topic purgatory, not in the admin"
        if topic in self.refuse:
            raise self.refuse[topic]
        lists = None if assignments is None else [list(a) for a in assignments]
        self.added.append((topic, total, lists, validate_only, max_partitions))
        return {p: (1,) for p in range(total)}


def request(version: int, *topics: tuple[str, int, list[list[int]] | None], **kw: Any) -> Any:
    schema, topic_type, assignment_type = REQUESTS[version]
    return make(
        schema,
        topics=tuple(
            topic_type(
                name=name,
                count=count,
                assignments=None
                if lists is None
                else tuple(make(assignment_type, broker_ids=tuple(b)) for b in lists),
            )
            for name, count, lists in topics
        ),
        timeout=datetime.timedelta(milliseconds=kw.get("timeout_ms", 5000)),
        validate_only=kw.get("validate_only", False),
    )


def results(step: Any, version: int) -> dict[str, tuple[ErrorCode, str | None]]:
    body = answer(step, ApiKey.CREATE_PARTITIONS, version)
    return {r.name: (ErrorCode(r.error_code), r.error_message) for r in body.results}


def run_admin(step: Any) -> Any:
    """Run an Admin step's work here (the actor runs it on its worker thread)."""
    assert isinstance(step, Admin), f"expected an Admin step, got {step!r}"
    return step.then(step.work())


def waited(step: Any, *, timed_out: tuple[str, ...] = ()) -> Any:
    """The step is the wait in the broker's topic purgatory (Kafka's DelayedCreatePartitions,
    keyed by topic, for the request's timeout); continue with it ended as `timed_out` says."""
    assert isinstance(step, Ask), f"expected the topic purgatory's Ask, got {step!r}"
    assert step.address == addresses.topic_purgatory(BROKER)
    request = step.request
    assert isinstance(request, DelayOperation) and request.timeout_ms == 5000
    assert isinstance(request.operation, AwaitPartitionsLed)
    assert request.keys == tuple(sorted({tp.topic for tp in request.operation.partitions}))
    return step.then(TopicOperationResult(timed_out=timed_out))


def as_controller(apis: KafkaApis, version: int, body: Any, controller_id: int = BROKER) -> Any:
    """Handle the request on a broker whose metadata names `controller_id` the controller."""
    asked = ask(handle(apis, ApiKey.CREATE_PARTITIONS, version, body), MetadataRequest)
    assert asked.request.topics == ("",)  # the brokers and the controller, no topic
    return asked.then(metadata_of(controller_id=controller_id))


def apis_with(admin: PartitionAdmin | None) -> KafkaApis:
    return KafkaApis(BROKER, KafkaApisConfig(max_partitions_per_topic=500), admin=admin)


@pytest.mark.parametrize("version", [0, 3])
def test_the_controller_adds_partitions_through_the_admin(version: int) -> None:
    admin = PartitionAdmin()
    body = request(version, ("a", 3, None), ("b", 4, [[1, 2], [2, 1]]), validate_only=False)
    step = run_admin(as_controller(apis_with(admin), version, body))
    assert isinstance(step, Ask) and isinstance(step.request, DelayOperation)
    assert step.request.operation.partitions == tuple(
        TopicPartition(topic=t, partition=p) for t, n in (("a", 3), ("b", 4)) for p in range(n)
    )
    assert results(waited(step), version) == {
        "a": (ErrorCode.NONE, None),
        "b": (ErrorCode.NONE, None),
    }
    assert admin.added == [("a", 3, None, False, 500), ("b", 4, [[1, 2], [2, 1]], False, 500)]


def test_a_topic_whose_partitions_are_not_all_led_by_the_timeout_is_request_timed_out() -> None:
    admin = PartitionAdmin()
    step = run_admin(as_controller(apis_with(admin), 3, request(3, ("a", 3, None), ("b", 2, None))))
    assert results(waited(step, timed_out=("b",)), 3) == {
        "a": (ErrorCode.NONE, None),
        "b": (ErrorCode.REQUEST_TIMED_OUT, None),
    }


def test_a_timeout_of_zero_answers_at_once_after_the_write_with_request_timed_out() -> None:
    admin = PartitionAdmin(refuse={"b": InvalidPartitionsError("Topic already has 2 partitions.")})
    body = request(3, ("a", 3, None), ("b", 2, None), timeout_ms=0)
    step = run_admin(as_controller(apis_with(admin), 3, body))
    assert results(step, 3) == {
        "a": (ErrorCode.REQUEST_TIMED_OUT, None),
        "b": (ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
    }
    assert [a[0] for a in admin.added] == ["a"]  # written all the same, as in Kafka


def test_validate_only_reaches_the_admin_as_such() -> None:
    admin = PartitionAdmin()
    step = run_admin(
        as_controller(apis_with(admin), 3, request(3, ("a", 3, None), validate_only=True))
    )
    assert results(step, 3) == {"a": (ErrorCode.NONE, None)}
    assert admin.added == [("a", 3, None, True, 500)]


@pytest.mark.parametrize("version", [0, 3])
def test_a_broker_that_is_not_the_controller_answers_not_controller_for_every_topic(
    version: int,
) -> None:
    admin = PartitionAdmin()
    body = request(version, ("a", 3, None), ("b", 2, None))
    step = as_controller(apis_with(admin), version, body, controller_id=2)
    assert results(step, version) == {
        "a": (ErrorCode.NOT_CONTROLLER, None),
        "b": (ErrorCode.NOT_CONTROLLER, None),
    }
    assert admin.added == []


def test_a_metadata_cache_that_fails_answers_its_error() -> None:
    admin = PartitionAdmin()
    asked = ask(
        handle(apis_with(admin), ApiKey.CREATE_PARTITIONS, 3, request(3, ("a", 3, None))),
        MetadataRequest,
    )
    failed = ErrorResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
    assert results(asked.then(failed), 3) == {"a": (ErrorCode.REQUEST_TIMED_OUT, None)}
    assert admin.added == []


def test_a_topic_named_twice_is_invalid_request_and_the_others_go_on() -> None:
    admin = PartitionAdmin()
    body = request(3, ("a", 3, None), ("b", 2, None), ("a", 4, None))
    step = waited(run_admin(as_controller(apis_with(admin), 3, body)))
    assert results(step, 3) == {
        "a": (ErrorCode.INVALID_REQUEST, "Duplicate topic in request."),
        "b": (ErrorCode.NONE, None),
    }
    assert [a[0] for a in admin.added] == ["b"]


REFUSALS = [
    (
        TopicQueuedForDeletionError("The topic is queued for deletion."),
        ErrorCode.INVALID_TOPIC_EXCEPTION,
    ),
    (UnknownTopicError("The topic 'a' does not exist."), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (InvalidPartitionsError("Topic already has 3 partitions."), ErrorCode.INVALID_PARTITIONS),
    (
        InvalidReplicaAssignmentError("Unknown broker(s) in replica assignment: 9."),
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ),
    (
        InvalidReplicationFactorError("Replication factor: 3 larger than available brokers: 2."),
        ErrorCode.INVALID_REPLICATION_FACTOR,
    ),
    (TimeoutError("timed out waiting for leaders"), ErrorCode.REQUEST_TIMED_OUT),
    (RuntimeError("ZooKeeper went away"), ErrorCode.UNKNOWN_SERVER_ERROR),
]


@pytest.mark.parametrize(("refusal", "code"), REFUSALS)
def test_the_admins_refusal_is_kafkas_code_with_its_message(
    refusal: Exception, code: ErrorCode
) -> None:
    admin = PartitionAdmin(refuse={"a": refusal})
    step = run_admin(as_controller(apis_with(admin), 3, request(3, ("a", 3, None), ("b", 2, None))))
    assert results(waited(step), 3) == {"a": (code, str(refusal)), "b": (ErrorCode.NONE, None)}


def test_an_illegal_topic_name_is_an_unknown_topic_and_never_reaches_the_admin() -> None:
    admin = PartitionAdmin()
    step = run_admin(as_controller(apis_with(admin), 3, request(3, ("a/b", 3, None))))
    assert results(step, 3) == {
        "a/b": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'a/b' does not exist.")
    }
    assert admin.added == []


def test_a_broker_without_a_topic_admin_refuses_as_cluster_authorization_failed() -> None:
    step = as_controller(apis_with(None), 3, request(3, ("a", 3, None)))
    assert results(step, 3) == {"a": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)}
