"""KafkaApis' CreateTopics and DeleteTopics: Kafka's `handleCreateTopicsRequest` and
`handleDeleteTopicsRequest` with ZkAdminManager's `createTopics` / `deleteTopics`, as
translation into steps: the checks, an `Admin` step for the ZooKeeper writes, then the wait in
the broker's topic purgatory (`topic_waits`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.admin_zk import (
    BOTH_SIZES_AND_ASSIGNMENTS,
    NOT_CONSECUTIVE,
    validate_replica_assignment,
)
from kafkactor.common import (
    InvalidReplicaAssignmentError,
    TopicExistsError,
    TopicPartition,
    UnknownTopicError,
)
from kafkactor.messages import ErrorCode
from kafkactor.network.admin_apis import KafkaApisConfig, TopicAdmin
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.steps import NO_THROTTLE, Admin, Answer, Step, legal_topic_name, millis
from kafkactor.network.topic_waits import await_deleted, await_led

__all__ = ["TopicAdminApis"]


class TopicAdminApis:
    """CreateTopics and DeleteTopics for one broker, through the cluster's `TopicAdmin`.

    CreateTopics checks each topic as Kafka does (names, sizes, a manual assignment, configs),
    then the admin writes the topics that pass in an `Admin` step (ZooKeeper writes block);
    DeleteTopics marks the topics for deletion there. Either answer then waits in the topic
    purgatory until the metadata cache has the new partitions led or the deleted topics gone
    (REQUEST_TIMED_OUT at the request's timeout; at once for a timeout <= 0).
    """

    def __init__(self, broker_id: int, config: KafkaApisConfig, *, admin: TopicAdmin | None):
        self.broker_id = broker_id
        self.config = config
        self.admin = admin

    # -- CreateTopics ---------------------------------------------------------------------------

    def create_topics(self, version: int, body: Any) -> Step:
        admin = self.admin
        requested = list(body.topics)
        names = [t.name for t in requested]
        duplicated = {n for n in names if names.count(n) > 1}

        def check(topic: Any) -> tuple[ErrorCode, str] | None:
            partitions, factor = int(topic.num_partitions), int(topic.replication_factor)
            refusals = (
                (topic.name in duplicated, ErrorCode.INVALID_REQUEST, "named more than once"),
                (
                    not legal_topic_name(topic.name),
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"illegal topic name {topic.name!r}",
                ),
                (
                    bool(topic.assignments) and (partitions != -1 or factor != -1),
                    ErrorCode.INVALID_REQUEST,
                    BOTH_SIZES_AND_ASSIGNMENTS,
                ),
                (partitions < 1 and partitions != -1, ErrorCode.INVALID_PARTITIONS, "partitions<1"),
                (
                    max(partitions, len(topic.assignments)) > self.config.max_partitions_per_topic,
                    ErrorCode.INVALID_PARTITIONS,
                    f"more than {self.config.max_partitions_per_topic} partitions",
                ),
                (
                    factor < 1 and factor != -1,
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "replication factor < 1",
                ),
                (admin is None, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "no topic admin here"),
            )
            refused = next(((code, why) for bad, code, why in refusals if bad), None)
            return refused if refused is not None else _config_refusal(topic.configs)

        checked = {t.name: check(t) for t in requested}

        def create() -> tuple[dict[str, tuple[ErrorCode, str]], dict[str, int]]:
            outcomes: dict[str, tuple[ErrorCode, str]] = {}
            written: dict[str, int] = {}  # topic -> partitions, of the topics created
            for topic in requested:
                if checked[topic.name] is not None or admin is None:
                    continue
                partitions = int(topic.num_partitions)
                factor = int(topic.replication_factor)
                try:
                    assignments = _assignments(topic.assignments)
                    if body.validate_only:  # Kafka checks a manual assignment here too
                        if assignments is not None:
                            validate_replica_assignment(assignments, admin.registered_brokers())
                        continue
                    if assignments is None:  # Kafka's defaults for -1 (num.partitions, ...)
                        partitions = partitions if partitions > 0 else self.config.num_partitions
                        factor = factor if factor > 0 else self.config.default_replication_factor
                    admin.create_topic(
                        topic.name,
                        partitions if assignments is None else None,
                        factor if assignments is None else None,
                        {c.name: c.value for c in topic.configs if c.value is not None},
                        assignments=assignments,
                        wait=False,  # the answer waits in the topic purgatory instead
                    )
                    written[topic.name] = partitions if assignments is None else len(assignments)
                except TopicExistsError as error:
                    outcomes[topic.name] = (ErrorCode.TOPIC_ALREADY_EXISTS, str(error))
                except InvalidReplicaAssignmentError as error:
                    outcomes[topic.name] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(error))
                except ValueError as error:
                    code = (
                        ErrorCode.INVALID_REPLICATION_FACTOR
                        if "replication factor" in str(error)
                        else ErrorCode.INVALID_CONFIG
                    )
                    outcomes[topic.name] = (code, str(error))
                except Exception as error:  # a ZooKeeper or controller failure: reported
                    outcomes[topic.name] = (ErrorCode.UNKNOWN_SERVER_ERROR, str(error))
            return outcomes, written

        def created(done: Any) -> Step:
            outcomes, written = done if isinstance(done, tuple) else (done, {})
            partitions = [
                TopicPartition(topic=name, partition=p)
                for name, count in written.items()
                for p in range(count)
            ]
            return await_led(
                self.broker_id,
                millis(body.timeout),
                partitions,
                lambda timed_out: self._created(version, requested, checked, outcomes, timed_out),
            )

        return Admin(create, created)

    @staticmethod
    def _created(
        version: int,
        requested: Sequence[Any],
        checked: Mapping[str, tuple[ErrorCode, str] | None],
        outcomes: Any,
        timed_out: frozenset[str],
    ) -> Step:
        """CreateTopics' answer: each topic's refusal, failure, or REQUEST_TIMED_OUT for those
        whose leaders were not in the metadata cache by the request's timeout."""
        schema = response_type(ApiKey.CREATE_TOPICS, version)
        result_type = nested(schema, "CreatableTopicResult")
        failed = outcomes if isinstance(outcomes, dict) else {}
        results = []
        for topic in requested:
            code, message = checked[topic.name] or failed.get(topic.name, (ErrorCode.NONE, None))
            if isinstance(outcomes, TimeoutError):
                code, message = ErrorCode.REQUEST_TIMED_OUT, str(outcomes)
            elif isinstance(outcomes, BaseException):
                code, message = ErrorCode.UNKNOWN_SERVER_ERROR, str(outcomes)
            elif topic.name in timed_out:  # created, its leaders not in the cache in time
                code, message = ErrorCode.REQUEST_TIMED_OUT, None
            results.append(
                build(result_type, name=topic.name, error_code=code, error_message=message)
            )
        return Answer(build(schema, throttle_time=NO_THROTTLE, topics=tuple(results)))

    # -- DeleteTopics ---------------------------------------------------------------------------

    def delete_topics(self, version: int, body: Any) -> Step:
        schema = response_type(ApiKey.DELETE_TOPICS, version)
        result_type = nested(schema, "DeletableTopicResult")
        names = list(dict.fromkeys(body.topic_names))
        admin = self.admin
        enabled = self.config.delete_topic_enable and admin is not None

        def delete() -> dict[str, ErrorCode]:
            outcomes = {}
            for name in names:
                if not enabled or admin is None:
                    outcomes[name] = ErrorCode.TOPIC_DELETION_DISABLED
                    continue
                try:
                    admin.delete_topic(name, wait=False)  # the answer waits in the purgatory
                except UnknownTopicError:
                    outcomes[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                except Exception:  # a ZooKeeper or controller failure, or a timeout
                    outcomes[name] = ErrorCode.REQUEST_TIMED_OUT
                else:
                    outcomes[name] = ErrorCode.NONE
            return outcomes

        def deleted(outcomes: Any) -> Step:
            codes = outcomes if isinstance(outcomes, dict) else {}
            marked = [name for name in names if codes.get(name) is ErrorCode.NONE]

            def waited(timed_out: frozenset[str]) -> Step:
                for name in timed_out:  # still in the metadata cache at the timeout
                    codes[name] = ErrorCode.REQUEST_TIMED_OUT
                return answer(codes)

            return await_deleted(self.broker_id, millis(body.timeout), marked, waited)

        def answer(codes: dict[str, ErrorCode]) -> Step:
            return Answer(
                build(
                    schema,
                    throttle_time=NO_THROTTLE,
                    responses=tuple(
                        build(
                            result_type,
                            name=name,
                            error_code=codes.get(name, ErrorCode.UNKNOWN_SERVER_ERROR),
                        )
                        for name in names
                    ),
                )
            )

        return Admin(delete, deleted)


# -- helpers -------------------------------------------------------------------------------------


def _config_refusal(configs: Sequence[Any]) -> tuple[ErrorCode, str] | None:
    """Kafka's check of a CreateTopics topic's configs, before anything is created (and also
    for `validate_only`): a null value is INVALID_REQUEST; an unknown key or a value Kafka's
    LogConfig refuses is INVALID_CONFIG, its message naming the key and the valid values."""
    nulls = [c.name for c in configs if c.value is None]
    if nulls:
        return (
            ErrorCode.INVALID_REQUEST,
            f"Null value not supported for topic configs : {','.join(nulls)}",
        )
    try:
        zk_data.log_config_from({c.name: c.value for c in configs})
    except ValueError as error:  # UnknownTopicConfigError and TopicConfigError among them
        return ErrorCode.INVALID_CONFIG, str(error)
    return None


def _assignments(entries: Sequence[Any]) -> dict[int, tuple[int, ...]] | None:
    """A CreateTopics topic's manual assignment (CreatableReplicaAssignment entries) as
    partition -> replicas, None when it has none; a partition named twice is refused as
    Kafka refuses ids that are not 0..n-1."""
    if not entries:
        return None
    assignments = {int(e.partition_index): tuple(int(b) for b in e.broker_ids) for e in entries}
    if len(assignments) != len(entries):
        raise InvalidReplicaAssignmentError(NOT_CONSECUTIVE)
    return assignments
