"""Kafka's `AclAuthorizer` (Kafka 2.8, ZooKeeper mode), pure: ACLs in memory, decisions.

An ACL is an `AccessControlEntry` (principal, host, operation, ALLOW or DENY) on a
`ResourcePattern` (a LITERAL name, the LITERAL `*` matching every name of its type, or a
PREFIXED name). `AclAuthorizer.authorize` decides as Kafka's `authorizeAction`:

- a super user (`super.users`) may do anything;
- the ACLs that apply are those of the `*` pattern, the literal name and every prefix of it;
  when there are none at all, `allow.everyone.if.no.acl.found` decides;
- a DENY matching the principal (or `User:*`), the host (or `*`) and the operation (or ALL)
  refuses, whatever allows;
- else an ALLOW must match likewise, where DESCRIBE is also allowed by READ, WRITE, DELETE or
  ALTER, and DESCRIBE_CONFIGS by ALTER_CONFIGS (Kafka's implied operations).

The ACLs are an immutable `AclSnapshot`, replaced whole (under a writer's lock) when they
change: `authorize` reads the current snapshot once and never locks, so KafkaApis' actor thread
is never held up by a ZooKeeper reload. Where ACLs come from (ZooKeeper, `acl_store`) is not
this module's business: the store calls `update` / `replace_all`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Protocol

from kafkactor.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.security.principal import USER_TYPE, KafkaPrincipal
from kafkactor.security.security_config import AuthorizerConfig
from kafkactor.tracing import get_logger

__all__ = [
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AclAuthorizer",
    "AclBindingFilter",
    "AclSnapshot",
    "AclWriter",
    "DeletedBinding",
    "authorized_operations_bits",
]

_log = get_logger("kafkactor.security.authorizer")

WILDCARD_PRINCIPAL: Final = f"{USER_TYPE}:{WILDCARD}"  # `User:*`, every principal

# the operations an ALLOW of which also allows the key (Kafka's ACL inheritance)
_IMPLIED_BY: Final[Mapping[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}

# the operations an ALLOW of which allows the key, ALL included
_ALLOWED_BY: Final[Mapping[AclOperation, frozenset[AclOperation]]] = {
    operation: implied | {AclOperation.ALL} for operation, implied in _IMPLIED_BY.items()
}


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Kafka's `AccessControlEntry`: who (`User:alice`, or `User:*`), from where (an address,
    or `*`), may (ALLOW) or may not (DENY) do which operation (ALL: every one)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def binding(self, pattern: ResourcePattern) -> AclBinding:
        return AclBinding(pattern, self.principal, self.host, self.operation, self.permission)

    @classmethod
    def of(cls, binding: AclBinding) -> AccessControlEntry:
        return cls(binding.principal, binding.host, binding.operation, binding.permission)


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBindingFilter:
    """Kafka's `AclBindingFilter` (DescribeAcls, DeleteAcls): None and ANY match everything;
    pattern type MATCH matches the patterns that would apply to the named resource (its
    literal name, `*` and its prefixes); a specific pattern type the pattern of that name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        """A field Kafka cannot read (`AclBindingFilter.isUnknown`): UNKNOWN anywhere."""
        return any(
            field.name == "UNKNOWN"
            for field in (self.resource_type, self.pattern_type, self.operation, self.permission)
        )

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """Kafka's `ResourcePatternFilter.matches`."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:  # the filter is MATCH
            return pattern.name in (self.name, WILDCARD)
        return self.name.startswith(pattern.name)  # PREFIXED

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        """Kafka's `AccessControlEntryFilter.matches`."""
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (AclPermissionType.ANY, entry.permission)
        )

    def matches_at_most_one_pattern(self) -> bool:
        """Whether the pattern side names one pattern (Kafka's `matchesAtMostOne`)."""
        return (
            self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
            and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
            and self.name is not None
        )


Acls = frozenset[AccessControlEntry]


@dataclass(frozen=True, slots=True)
class DeletedBinding:
    """One ACL a DeleteAcls filter removed; `error` when writing its resource failed."""

    binding: AclBinding
    error: Exception | None = None


class AclWriter(Protocol):
    """Where an authorizer's ACLs are written (Kafka's `Authorizer.createAcls` / `deleteAcls`):
    `acl_store.AclStore`, which keeps the authorizer's snapshot current."""

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]: ...

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[DeletedBinding]]: ...


class AclSnapshot:
    """Every ACL at one moment, by resource pattern; never changed once built.

    Besides the patterns it keeps what `matching` looks up on every request, built once: the
    literal ACLs by (resource type, name), and per resource type the PREFIXED ACLs by prefix
    with the lengths of those prefixes, so a name is cut only where some prefix could match.
    """

    __slots__ = ("_acls", "_literal", "_prefix_lengths", "_prefixed")

    def __init__(self, acls: Mapping[ResourcePattern, Acls] | None = None) -> None:
        kept = {pattern: entries for pattern, entries in (acls or {}).items() if entries}
        self._acls: Mapping[ResourcePattern, Acls] = MappingProxyType(kept)
        self._literal: dict[tuple[ResourceType, str], tuple[AccessControlEntry, ...]] = {}
        self._prefixed: dict[tuple[ResourceType, str], tuple[AccessControlEntry, ...]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for pattern, entries in kept.items():
            key = (pattern.resource_type, pattern.name)
            if pattern.pattern_type is PatternType.PREFIXED:
                self._prefixed[key] = tuple(entries)
                lengths.setdefault(pattern.resource_type, set()).add(len(pattern.name))
            else:
                self._literal[key] = tuple(entries)
        self._prefix_lengths = {kind: sorted(found) for kind, found in lengths.items()}

    def get(self, pattern: ResourcePattern) -> Acls:
        return self._acls.get(pattern, frozenset())

    def patterns(self) -> Iterator[ResourcePattern]:
        return iter(self._acls)

    def with_acls(
        self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]
    ) -> AclSnapshot:
        """A new snapshot where `pattern` has exactly `entries` (none: the pattern goes)."""
        acls = dict(self._acls)
        acls[pattern] = frozenset(entries)
        return AclSnapshot(acls)

    def matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The ACLs that apply to one resource (Kafka's `matchingAcls`): the `*` pattern's,
        the literal name's and those of every prefix of the name."""
        literal = self._literal
        found = [
            *literal.get((resource_type, WILDCARD), ()),
            *literal.get((resource_type, name), ()),
        ]
        prefixed = self._prefixed
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            found.extend(prefixed.get((resource_type, name[:length]), ()))
        return found

    def bindings(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACL bindings `acl_filter` matches (Kafka's `Authorizer.acls`), sorted."""
        return sorted(
            (
                entry.binding(pattern)
                for pattern, entries in self._acls.items()
                if acl_filter.matches_pattern(pattern)
                for entry in entries
                if acl_filter.matches_entry(entry)
            ),
            key=_binding_order,
        )

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._acls.values())


class AclAuthorizer:
    """Kafka's `kafka.security.authorizer.AclAuthorizer`: decisions over an `AclSnapshot`.

    `config` gives `super.users` and `allow.everyone.if.no.acl.found`. `authorize` is the
    `Authorizer` protocol KafkaApis asks; `authorized_operations` is KIP-430's set;
    `acls(filter)` DescribeAcls' answer. `update(pattern, entries)` and `replace_all` swap in
    a new snapshot: the ACL store calls them after reading ZooKeeper. `writer` is where
    CreateAcls and DeleteAcls write (the `AclStore` made for this authorizer sets itself
    there); None: ACLs cannot be changed through the wire (SECURITY_DISABLED).
    """

    def __init__(self, config: AuthorizerConfig | None = None) -> None:
        config = config if config is not None else AuthorizerConfig(enabled=True)
        self.config = config
        self.super_users: frozenset[KafkaPrincipal] = frozenset(
            KafkaPrincipal.parse(user.strip()) for user in config.super_users if user.strip()
        )
        self.allow_everyone_if_no_acl_found = config.allow_everyone_if_no_acl_found
        self._snapshot = AclSnapshot()
        self._writer = threading.Lock()
        self.writer: AclWriter | None = None

    @property
    def snapshot(self) -> AclSnapshot:
        return self._snapshot

    # -- changes (the ACL store's side) --------------------------------------------------------

    def update(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """`pattern` now has exactly `entries` (Kafka's `updateCache`)."""
        entries = frozenset(entries)
        with self._writer:
            self._snapshot = self._snapshot.with_acls(pattern, entries)

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Every ACL at once (a full load from ZooKeeper)."""
        snapshot = AclSnapshot({p: frozenset(e) for p, e in acls.items()})
        with self._writer:
            self._snapshot = snapshot

    # -- decisions ----------------------------------------------------------------------------

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return principal in self.super_users

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """May `principal` from `host` do `operation` on the resource? A denial of an
        explicitly requested action is an info event (Kafka's authorizer log, `Denied
        Operation`); filters and KIP-430's queries pass `log_if_denied=False`."""
        allowed = self._decide(principal, host, operation, resource_type, name)
        if not allowed and log_if_denied:
            _log.info(
                "security.authorization_denied",
                principal=str(principal),
                host=host,
                operation=operation.name,
                resource_type=resource_type.name,
                resource_name=name,
            )
        return allowed

    def _decide(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self._snapshot.matching(resource_type, name)  # one snapshot for the decision
        if not acls:
            return self.allow_everyone_if_no_acl_found
        who = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        applying = [e for e in acls if e.principal in who and e.host in hosts]
        deny, allow = AclPermissionType.DENY, AclPermissionType.ALLOW
        denied = (operation, AclOperation.ALL)
        if any(e.permission is deny and e.operation in denied for e in applying):
            return False
        allowing = _ALLOWED_BY.get(operation) or (operation, AclOperation.ALL)
        return any(e.permission is allow and e.operation in allowing for e in applying)

    def authorized_operations(
        self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str
    ) -> frozenset[AclOperation]:
        """KIP-430: which of the resource type's operations `principal` may do on it."""
        return frozenset(
            operation
            for operation in SUPPORTED_OPERATIONS.get(resource_type, ())
            if self.authorize(principal, host, operation, resource_type, name, log_if_denied=False)
        )

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        """The ACL bindings the filter matches (DescribeAcls)."""
        return self._snapshot.bindings(acl_filter)

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's `authorizeByResourceType` (KIP-679; InitProducerId's fallback): may
        `principal` do `operation` (or ALL) on some resource of the type, by an ALLOW that no
        DENY covers? A literal `*` DENY refuses all; a DENY prefix refuses the ALLOWs it is a
        prefix of; a literal DENY refuses its name's literal ALLOW."""
        if principal in self.super_users:
            return True
        who = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        ops = (operation, AclOperation.ALL)
        names: dict[tuple[AclPermissionType, PatternType], set[str]] = {}
        snapshot = self._snapshot
        for pattern in snapshot.patterns():
            if pattern.resource_type is not resource_type:
                continue
            for entry in snapshot.get(pattern):
                if entry.principal in who and entry.host in hosts and entry.operation in ops:
                    key = (entry.permission, pattern.pattern_type)
                    names.setdefault(key, set()).add(pattern.name)
        deny_literals = names.get((AclPermissionType.DENY, PatternType.LITERAL), set())
        deny_prefixes = names.get((AclPermissionType.DENY, PatternType.PREFIXED), set())
        allow_literals = names.get((AclPermissionType.ALLOW, PatternType.LITERAL), set())
        allow_prefixes = names.get((AclPermissionType.ALLOW, PatternType.PREFIXED), set())
        if WILDCARD in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def dominated(name: str) -> bool:
            return any(name[:end] in deny_prefixes for end in range(len(name) + 1))

        return any(not dominated(p) for p in allow_prefixes) or any(
            n == WILDCARD or (n not in deny_literals and not dominated(n)) for n in allow_literals
        )


def authorized_operations_bits(operations: Iterable[AclOperation]) -> int:
    """KIP-430's 32-bit field: bit `code` set for each operation (Kafka's `Utils.to32BitField`)."""
    bits = 0
    for operation in operations:
        bits |= 1 << int(operation)
    return bits


def _binding_order(binding: AclBinding) -> tuple[int, int, str, str, str, int, int]:
    pattern = binding.pattern
    return (
        int(pattern.resource_type),
        int(pattern.pattern_type),
        pattern.name,
        binding.principal,
        binding.host,
        int(binding.operation),
        int(binding.permission),
    )
