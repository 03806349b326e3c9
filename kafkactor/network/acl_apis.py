"""KafkaApis' ACL APIs, as Kafka 2.8's `AclApis`: DescribeAcls (29), CreateAcls (30) and
DeleteAcls (31), versions 1-2.

Each first checks the cluster as Kafka's `authorizeClusterOperation` does (DESCRIBE for
DescribeAcls, ALTER for the other two; refused: CLUSTER_AUTHORIZATION_FAILED at the top level,
or on every creation / filter), then needs an authorizer that manages ACLs (an `AclAuthorizer`
with its `AclStore`): without one the answer is SECURITY_DISABLED, with Kafka's messages.
DescribeAcls reads the authorizer's snapshot at once; CreateAcls and DeleteAcls write ZooKeeper
in an `Admin` step, off the actor thread.

Bindings and filters are read as Kafka's request classes read them: a creation must name a
concrete resource type, LITERAL or PREFIXED, an operation and ALLOW or DENY; a filter may say
ANY (and MATCH for the pattern type). Where Kafka refuses such a request while parsing it (and
closes the connection), kafkactor answers INVALID_REQUEST for the creation or filter concerned
(docs/security.md, "Departures").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, TypeVar

from kio.static.primitive import i8

from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.codec import build, nested, response_type
from kafkactor.network.request_channel import RequestHeader
from kafkactor.network.steps import NO_THROTTLE, Admin, Answer, Step
from kafkactor.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.security.acl_store import AclUpdateFailedError, InvalidAclBindingError
from kafkactor.security.authorizer import AclAuthorizer, AclBindingFilter, DeletedBinding

__all__ = ["create_acls", "delete_acls", "describe_acls"]

CLUSTER_REFUSED_MESSAGE: Final = "Cluster authorization failed."
NO_AUTHORIZER_DESCRIBE: Final = "No Authorizer is configured on the broker"
NO_AUTHORIZER: Final = "No Authorizer is configured."
FAILED_TO_CREATE: Final = "Failed to create ACL"
CLUSTER_NAME_ONLY: Final = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
EMPTY_NAME: Final = "Invalid empty resource name"

Outcome = tuple[ErrorCode, str | None]
OK: Final[Outcome] = (ErrorCode.NONE, None)


def describe_acls(authorizer: Authorizer | None, header: RequestHeader, body: Any) -> Step:
    """DescribeAcls: the ACL bindings the request's filter matches, by resource pattern."""
    schema = response_type(ApiKey.DESCRIBE_ACLS, header.api_version)

    def answer(outcome: Outcome, resources: tuple[Any, ...] = ()) -> Step:
        code, message = outcome
        return Answer(
            build(
                schema,
                throttle_time=NO_THROTTLE,
                error_code=code,
                error_message=message,
                resources=resources,
            )
        )

    refused = _cluster_refused(authorizer, header, AclOperation.DESCRIBE)
    if refused is not None:
        return answer(refused)
    if not isinstance(authorizer, AclAuthorizer):
        return answer((ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER_DESCRIBE))
    acl_filter = _filter(body)
    if acl_filter is None:
        return answer((ErrorCode.INVALID_REQUEST, "Filter contain UNKNOWN elements"))
    resource = nested(schema, "DescribeAclsResource")
    description = nested(schema, "AclDescription")
    by_pattern: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in authorizer.acls(acl_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding)
    resources = tuple(
        build(
            resource,
            resource_type=i8(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=i8(pattern.pattern_type),
            acls=tuple(
                build(
                    description,
                    principal=b.principal,
                    host=b.host,
                    operation=i8(b.operation),
                    permission_type=i8(b.permission),
                )
                for b in bindings
            ),
        )
        for pattern, bindings in by_pattern.items()
    )
    return answer(OK, resources)


def create_acls(authorizer: Authorizer | None, header: RequestHeader, body: Any) -> Step:
    """CreateAcls: each creation's outcome, in the request's order."""
    schema = response_type(ApiKey.CREATE_ACLS, header.api_version)
    result = nested(schema, "AclCreationResult")

    def answer(outcomes: Sequence[Outcome]) -> Step:
        results = tuple(build(result, error_code=c, error_message=m) for c, m in outcomes)
        return Answer(build(schema, throttle_time=NO_THROTTLE, results=results))

    creations = tuple(body.creations)
    everyone = _refused_whole(authorizer, header, AclOperation.ALTER)
    if everyone is not None:
        return answer([everyone] * len(creations))
    assert isinstance(authorizer, AclAuthorizer) and authorizer.writer is not None
    writer = authorizer.writer
    outcomes: list[Outcome | None] = []
    valid: list[AclBinding] = []
    for creation in creations:
        binding, refusal = _creation(creation)
        outcomes.append(refusal)
        if binding is not None:
            valid.append(binding)

    def written(errors: Any) -> Step:
        if isinstance(errors, Exception):  # ZooKeeper failed under the whole request
            errors = [errors] * len(valid)
        written_outcomes = iter(_outcome(error) for error in errors)
        return answer([o if o is not None else next(written_outcomes) for o in outcomes])

    if not valid:
        return written([])
    return Admin(lambda: writer.create_acls(valid), written)


def delete_acls(authorizer: Authorizer | None, header: RequestHeader, body: Any) -> Step:
    """DeleteAcls: per filter, the ACLs it removed (each with its own outcome)."""
    schema = response_type(ApiKey.DELETE_ACLS, header.api_version)
    filter_result = nested(schema, "DeleteAclsFilterResult")
    matching = nested(schema, "DeleteAclsMatchingAcl")

    def result(outcome: Outcome, deleted: Sequence[DeletedBinding] = ()) -> Any:
        return build(
            filter_result,
            error_code=outcome[0],
            error_message=outcome[1],
            matching_acls=tuple(_matching_acl(matching, d) for d in deleted),
        )

    def answer(results: Sequence[Any]) -> Step:
        return Answer(build(schema, throttle_time=NO_THROTTLE, filter_results=tuple(results)))

    requested = tuple(body.filters)
    everyone = _refused_whole(authorizer, header, AclOperation.ALTER)
    if everyone is not None:
        return answer([result(everyone)] * len(requested))
    assert isinstance(authorizer, AclAuthorizer) and authorizer.writer is not None
    writer = authorizer.writer
    filters = [_filter(f) for f in requested]
    valid = [f for f in filters if f is not None]

    def deleted(outcome: Any) -> Step:
        if isinstance(outcome, Exception):  # ZooKeeper failed under the whole request
            return answer([result(_outcome(outcome)) for _ in requested])
        per_valid = iter(outcome)
        return answer(
            [
                result((ErrorCode.INVALID_REQUEST, "Filters contain UNKNOWN elements"))
                if f is None
                else result(OK, next(per_valid))
                for f in filters
            ]
        )

    if not valid:
        return deleted([])
    return Admin(lambda: writer.delete_acls(valid), deleted)


# -- the pieces ----------------------------------------------------------------------------------


def _cluster_refused(
    authorizer: Authorizer | None, header: RequestHeader, operation: AclOperation
) -> Outcome | None:
    """Kafka's `authorizeClusterOperation`: refused without `operation` on the cluster (any
    request is allowed without an authorizer)."""
    if authorizer is None:
        return None
    if authorizer.authorize(
        header.principal, header.client_host, operation, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return None
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED_MESSAGE


def _refused_whole(
    authorizer: Authorizer | None, header: RequestHeader, operation: AclOperation
) -> Outcome | None:
    """Why every creation / filter of the request fails, if it fails whole."""
    refused = _cluster_refused(authorizer, header, operation)
    if refused is not None:
        return refused
    if not isinstance(authorizer, AclAuthorizer) or authorizer.writer is None:
        return ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER
    return None


E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _enum(kind: type[E], code: Any) -> E:
    """A wire code as Kafka's `fromCode` reads it: a code it does not know is UNKNOWN."""
    try:
        return kind(int(code))
    except ValueError:
        return kind(0)  # UNKNOWN is code 0 in each of the four


def _filter(entity: Any) -> AclBindingFilter | None:
    """A request's filter (DescribeAcls' body, a DeleteAcls filter); None when an element is
    UNKNOWN (or a code Kafka does not know)."""
    acl_filter = AclBindingFilter(
        resource_type=_enum(ResourceType, entity.resource_type_filter),
        name=entity.resource_name_filter,
        pattern_type=_enum(PatternType, getattr(entity, "pattern_type_filter", 3)),
        principal=entity.principal_filter,
        host=entity.host_filter,
        operation=_enum(AclOperation, entity.operation),
        permission=_enum(AclPermissionType, entity.permission_type),
    )
    return None if acl_filter.is_unknown() else acl_filter


def _creation(creation: Any) -> tuple[AclBinding | None, Outcome | None]:
    """A creation's binding, or why it is refused before the authorizer sees it (Kafka's
    `AclApis.handleCreateAcls`: the CLUSTER resource's one name, no empty name)."""
    binding = AclBinding(
        ResourcePattern(
            _enum(ResourceType, creation.resource_type),
            creation.resource_name,
            _enum(PatternType, getattr(creation, "resource_pattern_type", PatternType.LITERAL)),
        ),
        creation.principal,
        creation.host,
        _enum(AclOperation, creation.operation),
        _enum(AclPermissionType, creation.permission_type),
    )
    pattern = binding.pattern
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return None, (ErrorCode.INVALID_REQUEST, CLUSTER_NAME_ONLY)
    if not pattern.name:
        return None, (ErrorCode.INVALID_REQUEST, EMPTY_NAME)
    return binding, None


def _outcome(error: Exception | None) -> Outcome:
    """Kafka's `ApiError.fromThrowable` of an authorizer's result."""
    if error is None:
        return OK
    if isinstance(error, InvalidAclBindingError):
        return ErrorCode.INVALID_REQUEST, FAILED_TO_CREATE
    if isinstance(error, AclUpdateFailedError):
        return ErrorCode.UNKNOWN_SERVER_ERROR, str(error)
    return ErrorCode.UNKNOWN_SERVER_ERROR, None


def _matching_acl(schema: type[Any], deleted: DeletedBinding) -> Any:
    code, message = _outcome(deleted.error)
    b = deleted.binding
    return build(
        schema,
        error_code=code,
        error_message=message,
        resource_type=i8(b.pattern.resource_type),
        resource_name=b.pattern.name,
        pattern_type=i8(b.pattern.pattern_type),
        principal=b.principal,
        host=b.host,
        operation=i8(b.operation),
        permission_type=i8(b.permission),
    )
