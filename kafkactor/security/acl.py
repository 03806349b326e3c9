"""Kafka's ACL vocabulary (`org.apache.kafka.common.acl` / `resource`), with the wire codes
CreateAcls, DescribeAcls and DeleteAcls carry, and the `Authorizer` protocol KafkaApis asks.

An ACL binding says: `principal` from `host` is ALLOWed (or DENYed) `operation` on the
resources a `ResourcePattern` matches (a LITERAL name, `*` for every name, or a PREFIXED one).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from kafkactor.security.principal import KafkaPrincipal

__all__ = [
    "SUPPORTED_OPERATIONS",
    "WILDCARD",
    "AclBinding",
    "AclOperation",
    "AclPermissionType",
    "Authorizer",
    "PatternType",
    "ResourcePattern",
    "ResourceType",
]

WILDCARD: Final = "*"  # a resource name or host or principal name matching every one
CLUSTER_NAME: Final = "kafka-cluster"  # the one CLUSTER resource's name


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: The operations each resource type has (Kafka's `AclEntry.supportedOperations`): what
#: KIP-430's authorized operations are computed over.
SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, tuple[AclOperation, ...]]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """Kafka's `ResourcePattern`: a resource type, a name (or `*`), LITERAL or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL (Kafka's `AclBinding`): a pattern and an access control entry."""

    pattern: ResourcePattern
    principal: str  # "User:alice", or "User:*"
    host: str  # an address, or "*"
    operation: AclOperation
    permission: AclPermissionType


class Authorizer(Protocol):
    """What KafkaApis asks before serving a request (Kafka's `Authorizer.authorize` for one
    action): may `principal`, connected from `host`, do `operation` on the resource of
    `resource_type` named `name`? Without an authorizer (`authorizer.class.name` unset)
    KafkaApis allows everything, as Kafka does. A question asked to filter what a response
    shows (Metadata's topics, ListGroups' groups) passes `log_if_denied=False`: a denial is then
    not an event, as Kafka logs it at trace level only."""

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool: ...
