"""The pure AclAuthorizer against Kafka's AclAuthorizerTest behaviours (Kafka 2.8)."""

from __future__ import annotations

import io
import json
import threading

import jsonschema
import pytest

from kafkactor import tracing
from kafkactor.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.security.authorizer import (
    AccessControlEntry,
    AclAuthorizer,
    AclBindingFilter,
    authorized_operations_bits,
)
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.security_config import AuthorizerConfig
from tests.test_events_schema import load_schema

pytestmark = pytest.mark.timeout(30)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED

ALICE = KafkaPrincipal.user("alice")
BOB = KafkaPrincipal.user("bob")
HOST1, HOST2 = "192.168.1.1", "192.168.1.2"

ALLOW_READ_ALL = AccessControlEntry("User:*", "*", READ, ALLOW)
ALLOW_WRITE_ALL = AccessControlEntry("User:*", "*", WRITE, ALLOW)
DENY_READ_ALL = AccessControlEntry("User:*", "*", READ, DENY)

TOPIC_FOO = ResourcePattern(TOPIC, "foo-1")
WILDCARD_TOPIC = ResourcePattern(TOPIC, WILDCARD)
PREFIXED_FOO = ResourcePattern(TOPIC, "foo", PREFIXED)
CLUSTER_RESOURCE = ResourcePattern(CLUSTER, CLUSTER_NAME)


def authorizer(**config: object) -> AclAuthorizer:
    return AclAuthorizer(AuthorizerConfig(enabled=True, **config))  # type: ignore[arg-type]


def add(auth: AclAuthorizer, pattern: ResourcePattern, *entries: AccessControlEntry) -> None:
    auth.update(pattern, auth.snapshot.get(pattern) | set(entries))


def test_topic_acls_by_principal_host_and_operation() -> None:
    auth = authorizer()
    add(
        auth,
        TOPIC_FOO,
        AccessControlEntry("User:alice", HOST1, READ, ALLOW),
        AccessControlEntry("User:alice", HOST2, READ, ALLOW),
        AccessControlEntry("User:alice", HOST1, READ, DENY),
        AccessControlEntry("User:alice", HOST1, WRITE, ALLOW),
        AccessControlEntry("User:alice", "*", DESCRIBE, ALLOW),
        AccessControlEntry("User:bob", "*", READ, ALLOW),
    )
    assert auth.authorize(ALICE, HOST2, READ, TOPIC, "foo-1")
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")  # the deny
    assert auth.authorize(ALICE, HOST1, WRITE, TOPIC, "foo-1")
    assert not auth.authorize(ALICE, HOST2, WRITE, TOPIC, "foo-1")  # no allow from host2
    assert auth.authorize(ALICE, HOST1, DESCRIBE, TOPIC, "foo-1")
    assert not auth.authorize(ALICE, HOST1, AclOperation.ALTER, TOPIC, "foo-1")
    assert auth.authorize(BOB, HOST1, DESCRIBE, TOPIC, "foo-1")  # implied by READ
    assert not auth.authorize(BOB, HOST1, READ, TOPIC, "foo-2")  # another topic: no ACL


def test_deny_takes_precedence_over_allow() -> None:
    auth = authorizer()
    add(
        auth,
        TOPIC_FOO,
        AccessControlEntry("User:*", "*", AclOperation.ALL, ALLOW),
        AccessControlEntry("User:alice", HOST1, AclOperation.ALL, DENY),
    )
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    assert auth.authorize(ALICE, HOST2, READ, TOPIC, "foo-1")
    assert auth.authorize(BOB, HOST1, READ, TOPIC, "foo-1")


def test_super_users_pass_a_deny_all() -> None:
    auth = authorizer(super_users=("User:superuser1", "User:superuser2"))
    add(auth, TOPIC_FOO, AccessControlEntry("User:*", "*", AclOperation.ALL, DENY))
    assert auth.authorize(KafkaPrincipal.user("superuser1"), HOST1, READ, TOPIC, "foo-1")
    assert auth.authorize(KafkaPrincipal.user("superuser2"), HOST1, WRITE, TOPIC, "foo-1")
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")


def test_no_acl_found_denies_unless_allow_everyone() -> None:
    assert not authorizer().authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    open_auth = authorizer(allow_everyone_if_no_acl_found=True)
    assert open_auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    # an ACL on the resource, even for someone else, means "found": no free pass any more
    add(open_auth, TOPIC_FOO, AccessControlEntry("User:bob", "*", READ, ALLOW))
    assert not open_auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    assert open_auth.authorize(ALICE, HOST1, READ, TOPIC, "other")


def test_wildcard_resource_acls() -> None:
    auth = authorizer()
    add(auth, WILDCARD_TOPIC, AccessControlEntry("User:alice", HOST1, READ, ALLOW))
    assert auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    add(auth, TOPIC_FOO, AccessControlEntry("User:alice", HOST1, WRITE, ALLOW))
    assert auth.authorize(ALICE, HOST1, WRITE, TOPIC, "foo-1")
    add(auth, WILDCARD_TOPIC, AccessControlEntry("User:alice", HOST1, WRITE, DENY))
    assert not auth.authorize(ALICE, HOST1, WRITE, TOPIC, "foo-1")
    # the wildcard of one resource type says nothing of another
    assert not auth.authorize(ALICE, HOST1, READ, GROUP, "foo-1")


def test_empty_resource_name_is_matched_by_the_wildcard() -> None:
    auth = authorizer()
    assert not auth.authorize(ALICE, HOST1, READ, GROUP, "")
    add(auth, ResourcePattern(GROUP, WILDCARD), ALLOW_READ_ALL)
    assert auth.authorize(ALICE, HOST1, READ, GROUP, "")


def test_prefixed_acls() -> None:
    auth = authorizer()
    for pattern in (
        ResourcePattern(TOPIC, "a_other"),
        ResourcePattern(TOPIC, "a_other", PREFIXED),
        ResourcePattern(TOPIC, "foo-x", PREFIXED),
        ResourcePattern(TOPIC, "fooo-", PREFIXED),
        ResourcePattern(TOPIC, "fo-", PREFIXED),
        ResourcePattern(TOPIC, "fon-", PREFIXED),
        ResourcePattern(TOPIC, "z_other", PREFIXED),
    ):
        add(auth, pattern, DENY_READ_ALL)
    add(auth, PREFIXED_FOO, ALLOW_READ_ALL)
    assert auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-x1")  # the longer deny prefix
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "fo")  # not a prefix of "fo"
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "bar")


def test_single_character_names_and_prefixes() -> None:
    auth = authorizer()
    add(auth, ResourcePattern(TOPIC, "f"), ALLOW_READ_ALL)
    assert auth.authorize(ALICE, HOST1, READ, TOPIC, "f")
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo")
    add(auth, ResourcePattern(TOPIC, "_", PREFIXED), ALLOW_READ_ALL)
    assert auth.authorize(ALICE, HOST1, READ, TOPIC, "_foo")
    assert auth.authorize(ALICE, HOST1, READ, TOPIC, "_")
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo_")


def test_principal_wildcard_is_only_user_star() -> None:
    auth = authorizer()
    add(auth, TOPIC_FOO, AccessControlEntry("User:alice", "*", WRITE, ALLOW))
    assert auth.authorize(ALICE, HOST1, WRITE, TOPIC, "foo-1")
    assert not auth.authorize(KafkaPrincipal("Group", "alice"), HOST1, WRITE, TOPIC, "foo-1")
    add(auth, TOPIC_FOO, AccessControlEntry("User:*", "*", READ, ALLOW))
    assert auth.authorize(BOB, HOST1, READ, TOPIC, "foo-1")


VALID_OPS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


@pytest.mark.parametrize(
    ("parent", "implied"),
    [
        (AclOperation.ALL, set(VALID_OPS)),
        (READ, {DESCRIBE}),
        (WRITE, {DESCRIBE}),
        (AclOperation.DELETE, {DESCRIBE}),
        (AclOperation.ALTER, {DESCRIBE}),
        (DESCRIBE, set()),
        (AclOperation.ALTER_CONFIGS, {AclOperation.DESCRIBE_CONFIGS}),
        (AclOperation.DESCRIBE_CONFIGS, set()),
    ],
)
def test_implications_of_allow(parent: AclOperation, implied: set[AclOperation]) -> None:
    auth = authorizer()
    add(auth, CLUSTER_RESOURCE, AccessControlEntry("User:alice", "*", parent, ALLOW))
    for op in VALID_OPS:
        allowed = auth.authorize(ALICE, HOST1, op, CLUSTER, CLUSTER_NAME, log_if_denied=False)
        assert allowed == (op in implied or op == parent), (parent, op)


@pytest.mark.parametrize(
    ("parent", "denied"),
    [(AclOperation.ALL, set(VALID_OPS)), (DESCRIBE, set()), (AclOperation.DESCRIBE_CONFIGS, set())],
)
def test_implications_of_deny(parent: AclOperation, denied: set[AclOperation]) -> None:
    auth = authorizer()
    add(
        auth,
        CLUSTER_RESOURCE,
        AccessControlEntry("User:alice", "*", parent, DENY),
        AccessControlEntry("User:alice", "*", AclOperation.ALL, ALLOW),
    )
    for op in VALID_OPS:
        allowed = auth.authorize(ALICE, HOST1, op, CLUSTER, CLUSTER_NAME, log_if_denied=False)
        assert allowed == (op not in denied and op != parent), (parent, op)


def test_a_deny_of_read_keeps_describe_allowed_by_write() -> None:
    auth = authorizer()
    add(
        auth,
        TOPIC_FOO,
        AccessControlEntry("User:alice", "*", READ, DENY),
        AccessControlEntry("User:alice", "*", WRITE, ALLOW),
    )
    assert auth.authorize(ALICE, HOST1, DESCRIBE, TOPIC, "foo-1")
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")


def test_authorized_operations_kip_430() -> None:
    auth = authorizer()
    add(auth, TOPIC_FOO, AccessControlEntry("User:alice", "*", READ, ALLOW))
    add(
        auth, PREFIXED_FOO, AccessControlEntry("User:alice", "*", AclOperation.ALTER_CONFIGS, ALLOW)
    )
    ops = auth.authorized_operations(ALICE, HOST1, TOPIC, "foo-1")
    assert ops == {READ, DESCRIBE, AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS}
    assert authorized_operations_bits(ops) == (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)
    assert auth.authorized_operations(BOB, HOST1, TOPIC, "foo-1") == frozenset()
    super_auth = authorizer(super_users=("User:bob",))
    assert len(super_auth.authorized_operations(BOB, HOST1, GROUP, "g")) == 3


def test_acls_filter() -> None:
    auth = authorizer()
    foo = ResourcePattern(TOPIC, "foo-1")
    bar = ResourcePattern(TOPIC, "bar-1")
    bar_prefixed = ResourcePattern(TOPIC, "bar-", PREFIXED)
    read_alice = AccessControlEntry("User:alice", "*", READ, ALLOW)
    write_bob = AccessControlEntry("User:bob", "*", WRITE, ALLOW)
    add(auth, foo, read_alice)
    add(auth, bar, write_bob)
    add(auth, bar_prefixed, read_alice)
    add(auth, WILDCARD_TOPIC, write_bob)

    def patterns(acl_filter: AclBindingFilter) -> set[ResourcePattern]:
        return {b.pattern for b in auth.acls(acl_filter)}

    assert patterns(AclBindingFilter()) == {foo, bar, bar_prefixed, WILDCARD_TOPIC}
    assert patterns(AclBindingFilter(name="bar-1", pattern_type=LITERAL)) == {bar}
    # ANY: patterns of exactly that name, whatever their type
    assert patterns(AclBindingFilter(name="bar-")) == {bar_prefixed}
    # MATCH: every pattern that applies to the resource
    assert patterns(AclBindingFilter(name="bar-1", pattern_type=PatternType.MATCH)) == {
        bar,
        bar_prefixed,
        WILDCARD_TOPIC,
    }
    assert patterns(AclBindingFilter(principal="User:bob")) == {bar, WILDCARD_TOPIC}
    # a filter on User:* finds ACLs of User:*, not every principal's
    assert patterns(AclBindingFilter(principal="User:*")) == set()
    assert patterns(AclBindingFilter(operation=READ, permission=ALLOW)) == {foo, bar_prefixed}
    assert patterns(AclBindingFilter(resource_type=GROUP)) == set()
    binding = auth.acls(AclBindingFilter(name="foo-1", pattern_type=LITERAL))
    assert binding == [AclBinding(foo, "User:alice", "*", READ, ALLOW)]


def test_removing_the_last_acl_drops_the_pattern() -> None:
    auth = authorizer()
    add(auth, PREFIXED_FOO, ALLOW_READ_ALL, ALLOW_WRITE_ALL)
    auth.update(PREFIXED_FOO, {ALLOW_WRITE_ALL})
    assert auth.snapshot.get(PREFIXED_FOO) == {ALLOW_WRITE_ALL}
    auth.update(PREFIXED_FOO, ())
    assert list(auth.snapshot.patterns()) == []
    assert not auth.authorize(ALICE, HOST1, WRITE, TOPIC, "foo-1")


def test_readers_see_whole_snapshots_while_a_writer_swaps_them() -> None:
    """authorize never locks: a reader sees the ACLs before or after a change, never half."""
    auth = authorizer()
    allow = AccessControlEntry("User:alice", "*", READ, ALLOW)
    deny = AccessControlEntry("User:alice", "*", READ, DENY)
    stop = threading.Event()
    seen: set[bool] = set()
    auth.update(TOPIC_FOO, {allow})

    def reader() -> None:
        while not stop.is_set():
            snapshot = auth.snapshot
            entries = snapshot.get(TOPIC_FOO)
            seen.add(entries in ({allow}, {allow, deny}))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(300):
            auth.update(TOPIC_FOO, {allow})
            auth.update(TOPIC_FOO, {allow, deny})
    finally:
        stop.set()
        thread.join(timeout=10)
    assert seen == {True}
    assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")


def test_a_denial_is_an_info_event_and_a_filtered_one_is_not() -> None:
    out = io.BytesIO()
    with tracing.configured(stream=out):
        auth = authorizer()
        assert not auth.authorize(ALICE, HOST1, READ, TOPIC, "secret")
        assert not auth.authorize(ALICE, HOST1, WRITE, TOPIC, "quiet", log_if_denied=False)
        add(auth, TOPIC_FOO, ALLOW_READ_ALL)
        assert auth.authorize(ALICE, HOST1, READ, TOPIC, "foo-1")
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    denied = [e for e in events if e["event"] == "security.authorization_denied"]
    assert len(denied) == 1
    assert denied[0]["level"] == "info"
    assert {k: denied[0][k] for k in ("principal", "host", "operation", "resource_type")} == {
        "principal": "User:alice",
        "host": HOST1,
        "operation": "READ",
        "resource_type": "TOPIC",
    }
    assert denied[0]["resource_name"] == "secret"
    validator = jsonschema.Draft202012Validator(load_schema())
    assert list(validator.iter_errors(denied[0])) == []
