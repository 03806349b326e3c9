"""Kafka's `AuthHelper` for KafkaApis: what one request may do, asked of the broker's
`Authorizer` with the request's principal and client address, and the pieces every API's check
is made of (`authorization_checks` holds the check of each API).

A check sits in front of an API's handler: it answers a refused request itself, in the
response Kafka 2.8's `KafkaApis` gives, or hands the handler the request with the refused
topics (groups, resources) taken out and adds their refusals to the handler's answer, so that
the client sees one response naming everything it asked for, as Kafka answers it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from kafkactor.messages import ErrorCode
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import NO_THROTTLE, Admin, Answer, Ask, Step
from kafkactor.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    Authorizer,
    ResourceType,
)
from kafkactor.security.principal import KafkaPrincipal

__all__ = [
    "AUTHORIZATION_MESSAGES",
    "Check",
    "RequestAuthorization",
    "ResourceTypeAuthorizer",
    "Serve",
    "TopicsShape",
    "answer_of",
    "in_order",
    "map_answer",
    "map_step",
    "refused_topics",
    "split_topics",
    "with_fields",
]

#: Kafka's `Errors` messages of the authorization errors (what `error_message` carries where
#: Kafka answers `error.message`)
AUTHORIZATION_MESSAGES: Final[Mapping[ErrorCode, str]] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}


@runtime_checkable
class ResourceTypeAuthorizer(Protocol):
    """An authorizer that also answers Kafka's `Authorizer.authorizeByResourceType` (KIP-679):
    may `principal` do `operation` on some resource of `resource_type` (an ALLOW that no DENY
    covers)? InitProducerId of an idempotent producer asks it (WRITE on any TOPIC) when
    IDEMPOTENT_WRITE on the cluster is refused; an authorizer without it is asked only that."""

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class RequestAuthorization:
    """One request's questions to the authorizer (Kafka's `AuthHelper` with the request's
    `RequestContext`): its principal, connected from `host`."""

    authorizer: Authorizer
    principal: KafkaPrincipal
    host: str
    auto_create_topics: bool = False  # the broker's auto.create.topics.enable (Metadata's)

    @classmethod
    def of(
        cls, authorizer: Authorizer, header: RequestHeader, *, auto_create_topics: bool = False
    ) -> RequestAuthorization:
        return cls(authorizer, header.principal, header.client_host, auto_create_topics)

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type, name)

    def visible(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """`allowed`, asked to filter what an answer shows: a denial is no event."""
        return self.authorizer.authorize(
            self.principal, self.host, operation, resource_type, name, log_if_denied=False
        )

    def cluster(self, operation: AclOperation) -> bool:
        """`operation` on the one CLUSTER resource."""
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def denied(
        self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]
    ) -> frozenset[str]:
        """The names refused `operation` (each distinct name asked once: Kafka's
        `filterByAuthorized`)."""
        return frozenset(
            n for n in dict.fromkeys(names) if not self.allowed(operation, resource_type, n)
        )

    def any_allowed(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's `authorizeByResourceType`, when the authorizer answers it (else False)."""
        if isinstance(self.authorizer, ResourceTypeAuthorizer):
            return self.authorizer.authorize_by_resource_type(
                self.principal, self.host, operation, resource_type
            )
        return False

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field: bit `operation` set for each supported operation allowed."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.visible(operation, resource_type, name):
                bits |= 1 << int(operation)
        return bits


Serve = Callable[[Any], Step]  # the API's handler, for a (maybe narrowed) request body
Check = Callable[[RequestAuthorization, RequestHeader, Any, Serve], Step]


def answer_of(schema: type[Any], **values: Any) -> Answer:
    """An Answer of `schema` from `values`, its throttle time 0 (an int32 in the versions
    transcribed from Kafka's JSON, a duration in kio's)."""
    throttle: Any = NO_THROTTLE
    for f in dataclasses.fields(schema):
        if f.name == "throttle_time" and "Timedelta" not in getattr(
            f.type, "__name__", str(f.type)
        ):
            throttle = 0
    return Answer(build(schema, throttle_time=throttle, **values))


# -- steps ---------------------------------------------------------------------------------------


def map_step(step: Step, change: Callable[[Step], Step]) -> Step:
    """`step`, with `change` applied to the step it finally ends in (an Answer, NoAnswer or
    Close), after any Ask or Admin on the way."""
    if isinstance(step, Ask):
        then = step.then
        return Ask(step.address, step.request, lambda r: map_step(then(r), change))
    if isinstance(step, Admin):
        after = step.then
        return Admin(step.work, lambda r: map_step(after(r), change))
    return change(step)


def map_answer(step: Step, change: Callable[[Any], Any]) -> Step:
    """`step`, with `change` applied to the body of the Answer it ends in."""

    def answered(final: Step) -> Step:
        if isinstance(final, Answer):
            return Answer(change(final.body), final.version)
        return final

    return map_step(step, answered)


def with_fields(entity: Any, **values: Any) -> Any:
    """`entity` with `values` replaced, those of its version only."""
    names = {f.name for f in dataclasses.fields(entity)}
    return dataclasses.replace(entity, **{k: v for k, v in values.items() if k in names})


def in_order(
    entries: Iterable[Any], key: Callable[[Any], Any], order: Sequence[Any]
) -> tuple[Any, ...]:
    """`entries` sorted by where their key comes in `order` (the request's), others last."""
    place = {k: i for i, k in reversed(list(enumerate(order)))}
    return tuple(sorted(entries, key=lambda e: place.get(key(e), len(place))))


# -- topics and partitions ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicsShape:
    """Where a request keeps its topics and partitions, and its response their answers."""

    api: int
    topics: str  # the request's topics field
    name: str  # a request topic's name field
    partitions: str  # a request topic's partitions field
    index: str | None  # a request partition's index field (None: the partitions are ints)
    answers: str  # the response's topics field
    topic_entity: str
    answer_name: str
    answer_partitions: str
    partition_entity: str
    answer_index: str


def refused_topics(
    schema: type[Any],
    shape: TopicsShape,
    topics: Iterable[Any],
    error: ErrorCode,
    fields: Mapping[str, Any],
) -> tuple[Any, ...]:
    """The response's entries for `topics` of the request: each partition with `error` and
    `fields` (Kafka's values of a partition nothing was done for)."""
    topic_type = nested(schema, shape.topic_entity)
    partition_type = nested(schema, shape.partition_entity)
    error_field = (
        "partition_error_code" if "partition_error_code" in _names(partition_type) else "error_code"
    )
    entries = []
    for topic in topics:
        partitions = tuple(
            build(
                partition_type,
                **{
                    shape.answer_index: int(p if shape.index is None else getattr(p, shape.index)),
                    error_field: error,
                    **fields,
                },
            )
            for p in getattr(topic, shape.partitions)
        )
        entries.append(
            build(
                topic_type,
                **{
                    shape.answer_name: getattr(topic, shape.name),
                    shape.answer_partitions: partitions,
                },
            )
        )
    return tuple(entries)


def split_topics(
    header: RequestHeader,
    body: Any,
    serve: Serve,
    shape: TopicsShape,
    *,
    denied: frozenset[str],
    error: ErrorCode,
    fields: Mapping[str, Any],
    top: Mapping[str, Any] | None = None,
    serve_empty: bool = False,
    merge: Callable[[Any], bool] | None = None,
) -> Step:
    """Serve the request without its `denied` topics and answer those with `error` (Kafka's
    per-partition authorization: the others are served as if asked alone). Nothing left to
    serve: answered here (`top` the response's other fields), unless `serve_empty` (Kafka
    still asks its coordinator, whose group error wins). `merge(response)` says whether the
    refusals join the handler's answer (not when it failed as a whole)."""
    if not denied:
        return serve(body)
    schema = response_type(shape.api, header.api_version)
    topics = getattr(body, shape.topics)
    refused = refused_topics(
        schema, shape, (t for t in topics if getattr(t, shape.name) in denied), error, fields
    )
    kept = tuple(t for t in topics if getattr(t, shape.name) not in denied)
    if not kept and not serve_empty:
        return answer_of(schema, **(top or {}), **{shape.answers: refused})

    def joined(response: Any) -> Any:
        if merge is not None and not merge(response):
            return response
        answered = tuple(getattr(response, shape.answers))
        return dataclasses.replace(response, **{shape.answers: answered + refused})

    return map_answer(serve(dataclasses.replace(body, **{shape.topics: kept})), joined)


def _names(entity: type[Any]) -> set[str]:
    return {f.name for f in dataclasses.fields(entity)}
