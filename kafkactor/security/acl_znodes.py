"""Kafka's ACL znodes (Kafka 2.x `ZkData`: `ZkAclStore`, `ResourceZNode`, `ZkAclChangeStore`).

Where ACLs live in ZooKeeper and how they are written, byte for byte as a Kafka 2.x broker
(or `kafka-acls.sh --authorizer-properties zookeeper.connect=...`) writes them:

- a LITERAL pattern's ACLs at `/kafka-acl/<ResourceType>/<name>`, a PREFIXED one's at
  `/kafka-acl-extended/prefixed/<ResourceType>/<name>`, with `ResourceType` as Kafka names it
  there (`Topic`, `Group`, `Cluster`, `TransactionalId`, `DelegationToken`, `User`);
- the znode's data: `{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}` (Kafka's `AclEntry` JSON, version 1);
- a change notification, a persistent sequential child `acl_changes_<n>`: under
  `/kafka-acl-changes` for a LITERAL pattern, data `<RESOURCE_TYPE>:<name>` (`TOPIC:orders`);
  under `/kafka-acl-extended-changes` for the others, data
  `{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}`.

Pure: encoding and decoding only; `acl_store` does the ZooKeeper I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

from kafkactor.security.acl import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.security.authorizer import AccessControlEntry
from kafkactor.security.principal import KafkaPrincipal

__all__ = [
    "ACL_CHANGE_PREFIX",
    "EXTENDED_ACL_CHANGES",
    "EXTENDED_ACL_ROOT",
    "LITERAL_ACL_CHANGES",
    "LITERAL_ACL_ROOT",
    "MalformedAclZnodeError",
    "acl_root",
    "change_path",
    "decode_acls",
    "decode_change",
    "encode_acls",
    "encode_change",
    "resource_path",
    "resource_type_from_name",
    "resource_type_name",
]

LITERAL_ACL_ROOT: Final = "/kafka-acl"
EXTENDED_ACL_ROOT: Final = "/kafka-acl-extended"
LITERAL_ACL_CHANGES: Final = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES: Final = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX: Final = "acl_changes_"
ACL_VERSION: Final = 1  # AclEntry.CurrentVersion
CHANGE_EVENT_VERSION: Final = 1  # ExtendedAclChangeEvent.currentVersion

CONCRETE_RESOURCE_TYPES: Final = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
    ResourceType.USER,
)
STORED_PATTERN_TYPES: Final = (PatternType.LITERAL, PatternType.PREFIXED)


class MalformedAclZnodeError(ValueError):
    """An ACL znode or change notification Kafka would not read either."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def _camel(name: str) -> str:
    """Kafka's `SecurityUtils.toPascalCase` of an enum name: CLUSTER_ACTION -> ClusterAction."""
    return "".join(part.capitalize() for part in name.split("_"))


def _enum_name(text: str) -> str:
    """PascalCase or UPPER_SNAKE to the enum's name (Kafka reads either, case aside)."""
    if "_" in text or text.isupper():
        return text.upper()
    return re.sub(r"(?<!^)(?=[A-Z])", "_", text).upper()


def resource_type_name(resource_type: ResourceType) -> str:
    """`Topic`, `TransactionalId`, ... (Kafka's `SecurityUtils.resourceTypeName`)."""
    return _camel(resource_type.name)


def resource_type_from_name(text: str) -> ResourceType:
    """A resource type as Kafka writes it in a path or a notification; ValueError else."""
    try:
        resource_type = ResourceType[_enum_name(text)]
    except KeyError:
        raise ValueError(f"unknown resource type {text!r}") from None
    if resource_type not in CONCRETE_RESOURCE_TYPES:
        raise ValueError(f"not a concrete resource type {text!r}")
    return resource_type


def acl_root(pattern_type: PatternType) -> str:
    """`/kafka-acl` (LITERAL) or `/kafka-acl-extended/prefixed` (Kafka's ZkAclStore.aclPath)."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_ROOT
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_ROOT}/{pattern_type.name.lower()}"
    raise ValueError(f"ACLs are stored for LITERAL and PREFIXED patterns, not {pattern_type.name}")


def resource_path(pattern: ResourcePattern) -> str:
    kind = resource_type_name(pattern.resource_type)
    return f"{acl_root(pattern.pattern_type)}/{kind}/{pattern.name}"


def change_path(pattern_type: PatternType) -> str:
    """The notification root a pattern's changes go to."""
    return LITERAL_ACL_CHANGES if pattern_type is PatternType.LITERAL else EXTENDED_ACL_CHANGES


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource znode's data (Kafka's `ResourceZNode.encode`)."""
    body = {
        "version": ACL_VERSION,
        "acls": [
            {
                "principal": entry.principal,
                "permissionType": _camel(entry.permission.name),
                "operation": _camel(entry.operation.name),
                "host": entry.host,
            }
            for entry in sorted(entries, key=_entry_order)
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_acls(path: str, data: bytes | None) -> frozenset[AccessControlEntry]:
    """A resource znode's ACLs (Kafka's `AclEntry.fromBytes`: empty data is no ACL)."""
    if not data:
        return frozenset()
    body = _json_object(path, data)
    if body.get("version") != ACL_VERSION:
        raise MalformedAclZnodeError(path, f"unsupported ACL version {body.get('version')!r}")
    acls = body.get("acls")
    if not isinstance(acls, list):
        raise MalformedAclZnodeError(path, "acls is not a list")
    entries = []
    for item in acls:
        if not isinstance(item, dict):
            raise MalformedAclZnodeError(path, "an ACL is not a JSON object")
        try:
            principal = str(KafkaPrincipal.parse(_string(item, "principal")))
            permission = AclPermissionType[_enum_name(_string(item, "permissionType"))]
            operation = AclOperation[_enum_name(_string(item, "operation"))]
            host = _string(item, "host")
        except (KeyError, ValueError) as error:
            raise MalformedAclZnodeError(path, f"invalid ACL {item!r} ({error})") from None
        entries.append(AccessControlEntry(principal, host, operation, permission))
    return frozenset(entries)


def encode_change(pattern: ResourcePattern) -> bytes:
    """A change notification's data for `pattern` (under `change_path(its pattern type)`)."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    body = {
        "version": CHANGE_EVENT_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_change(root: str, path: str, data: bytes | None) -> ResourcePattern:
    """The pattern a notification under `root` names (Kafka's `ZkAclChangeStore.decode`)."""
    if root == LITERAL_ACL_CHANGES:
        text = (data or b"").decode("utf-8", errors="replace")
        kind, sep, name = text.partition(":")
        if not sep:
            raise MalformedAclZnodeError(
                path, f"expected a string in format ResourceType:ResourceName but got {text}"
            )
        try:
            return ResourcePattern(resource_type_from_name(kind), name, PatternType.LITERAL)
        except ValueError as error:
            raise MalformedAclZnodeError(path, str(error)) from None
    body = _json_object(path, data or b"")
    version = body.get("version")
    if not isinstance(version, int) or version > CHANGE_EVENT_VERSION:
        raise MalformedAclZnodeError(
            path, f"Acl change event received for unsupported version: {version}"
        )
    try:
        resource_type = resource_type_from_name(_string(body, "resourceType"))
        pattern_type = PatternType[_enum_name(_string(body, "patternType"))]
        name = _string(body, "name")
    except (KeyError, ValueError) as error:
        raise MalformedAclZnodeError(path, f"Failed to parse ACL change event ({error})") from None
    if pattern_type not in STORED_PATTERN_TYPES:
        raise MalformedAclZnodeError(path, f"not a stored pattern type {pattern_type.name}")
    return ResourcePattern(resource_type, name, pattern_type)


def _json_object(path: str, data: bytes) -> dict[str, Any]:
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedAclZnodeError(path, f"not JSON ({error})") from None
    if not isinstance(body, dict):
        raise MalformedAclZnodeError(path, "not a JSON object")
    return body


def _string(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string")
    return value


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return entry.principal, entry.host, int(entry.operation), int(entry.permission)
