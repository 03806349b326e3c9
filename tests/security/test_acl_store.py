"""AclStore on the embedded ZooKeeper: Kafka 2.x's znodes and JSON, optimistic writes, and
change notifications reaching another broker's authorizer."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from functools import partial

import jsonschema
import pytest

from kafkactor.security import acl_znodes
from kafkactor.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafkactor.security.acl_store import CHANGE_EXPIRATION_MS, AclStore, InvalidAclBindingError
from kafkactor.security.authorizer import AccessControlEntry, AclAuthorizer, AclBindingFilter
from kafkactor.security.principal import KafkaPrincipal
from kafkactor.security.security_config import AuthorizerConfig
from kafkactor.timer import ManualClock, SystemClock
from kafkactor.zk_model import EmbeddedClient, EmbeddedZooKeeper
from tests.replication.support import captured_events, wait_until
from tests.test_events_schema import load_schema

pytestmark = pytest.mark.timeout(60)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
READ, WRITE = AclOperation.READ, AclOperation.WRITE
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALICE = KafkaPrincipal.user("alice")


def binding(
    name: str,
    principal: str = "User:alice",
    operation: AclOperation = READ,
    permission: AclPermissionType = ALLOW,
    *,
    resource_type: ResourceType = TOPIC,
    pattern_type: PatternType = LITERAL,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type), principal, host, operation, permission
    )


def assert_valid_events(events: list[dict[str, object]]) -> None:
    """Every event against the published schema (kafkactor/events.schema.json)."""
    validator = jsonschema.Draft202012Validator(load_schema())
    for event in events:
        assert list(validator.iter_errors(event)) == [], event


@pytest.fixture
def server() -> Iterator[EmbeddedZooKeeper]:
    with EmbeddedZooKeeper(SystemClock()) as zk:
        yield zk


def new_store(server: EmbeddedZooKeeper, **kwargs: object) -> tuple[AclStore, EmbeddedClient]:
    client = server.connect()
    authorizer = AclAuthorizer(AuthorizerConfig(enabled=True))
    store = AclStore(lambda: client, authorizer, **kwargs)  # type: ignore[arg-type]
    return store.start(), client


@pytest.fixture
def pair(server: EmbeddedZooKeeper) -> Iterator[tuple[AclStore, AclStore, EmbeddedClient]]:
    """Two brokers' stores on one ZooKeeper; the first one's client for raw reads."""
    first, client = new_store(server, broker_id=1)
    second, other = new_store(server, broker_id=2)
    yield first, second, client
    first.stop()
    second.stop()
    client.stop()
    other.stop()


def test_literal_acls_are_kafkas_json_under_kafka_acl(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    store, _, zk = pair
    assert store.create_acls(
        [binding("orders"), binding("orders", "User:bob", WRITE, DENY, host="10.0.0.1")]
    ) == [None, None]
    data, stat = zk.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            },
            {
                "principal": "User:bob",
                "permissionType": "Deny",
                "operation": "Write",
                "host": "10.0.0.1",
            },
        ],
    }
    assert stat.version == 0  # one request's bindings of one resource: one write
    store.create_acls([binding("orders", "User:carol")])
    assert zk.get("/kafka-acl/Topic/orders")[1].version == 1  # a conditional set
    changes = sorted(zk.get_children("/kafka-acl-changes"))
    assert len(changes) == 2 and all(c.startswith("acl_changes_") for c in changes)
    notes = {zk.get(f"/kafka-acl-changes/{c}")[0] for c in changes}
    assert notes == {b"TOPIC:orders"}


def test_prefixed_acls_and_their_extended_notification(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    store, _, zk = pair
    store.create_acls(
        [binding("payments-", resource_type=GROUP, pattern_type=PREFIXED, operation=READ)]
    )
    data, _ = zk.get("/kafka-acl-extended/prefixed/Group/payments-")
    assert json.loads(data)["acls"][0]["operation"] == "Read"
    (change,) = zk.get_children("/kafka-acl-extended-changes")
    assert json.loads(zk.get(f"/kafka-acl-extended-changes/{change}")[0]) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "payments-",
        "patternType": "PREFIXED",
    }
    assert zk.get_children("/kafka-acl-changes") == []


def test_a_change_reaches_the_other_brokers_authorizer(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    first, second, _ = pair
    other = second.authorizer
    assert not other.authorize(ALICE, "h", READ, TOPIC, "orders-1", log_if_denied=False)
    with captured_events() as events:
        first.create_acls([binding("orders-", pattern_type=PREFIXED)])
        wait_until(
            lambda: other.authorize(ALICE, "h", READ, TOPIC, "orders-1", log_if_denied=False),
            message="the prefixed ACL on the second broker",
        )
        (processed,) = wait_until(lambda: events.named("security.acl_change_processed", broker=2))
    assert processed["resource_name"] == "orders-" and processed["pattern_type"] == "PREFIXED"
    assert_valid_events(events.all())
    assert processed["acls"] == 1
    first.create_acls([binding("orders-1", permission=DENY)])
    wait_until(
        lambda: not other.authorize(ALICE, "h", READ, TOPIC, "orders-1", log_if_denied=False),
        message="the literal deny on the second broker",
    )
    # and deletes travel the same way
    [deleted] = first.delete_acls([AclBindingFilter(name="orders-1", pattern_type=LITERAL)])
    assert [d.binding for d in deleted] == [binding("orders-1", permission=DENY)]
    wait_until(
        lambda: other.authorize(ALICE, "h", READ, TOPIC, "orders-1", log_if_denied=False),
        message="the deny removed on the second broker",
    )


def test_a_new_store_loads_what_kafka_wrote(server: EmbeddedZooKeeper) -> None:
    """Znodes written by a Kafka broker (its key order and spacing, PascalCase names)."""
    zk = server.connect()
    zk.create(
        "/kafka-acl/Cluster/kafka-cluster",
        b'{"version": 1, "acls": [{"host": "*", "permissionType": "Allow", '
        b'"operation": "DescribeConfigs", "principal": "User:ops"}]}',
        makepath=True,
    )
    zk.create(
        "/kafka-acl/TransactionalId/txn-1",
        b'{"version":1,"acls":[{"principal":"User:*","permissionType":"Allow",'
        b'"operation":"All","host":"*"}]}',
        makepath=True,
    )
    store, client = new_store(server)
    try:
        auth = store.authorizer
        ops = KafkaPrincipal.user("ops")
        assert auth.authorize(
            ops, "h", AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"
        )
        assert not auth.authorize(
            ops, "h", AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"
        )
        assert auth.authorize(ALICE, "h", WRITE, ResourceType.TRANSACTIONAL_ID, "txn-1")
        # the paths Kafka creates for every resource type
        assert set(zk.get_children("/kafka-acl")) >= {
            "Topic",
            "Group",
            "Cluster",
            "TransactionalId",
            "DelegationToken",
        }
        assert "Topic" in zk.get_children("/kafka-acl-extended/prefixed")
    finally:
        store.stop()
        client.stop()
        zk.stop()


def test_removing_the_last_acl_deletes_the_znode(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    store, _, zk = pair
    store.create_acls([binding("gone"), binding("gone", operation=WRITE)])
    [first] = store.delete_acls([AclBindingFilter(name="gone", operation=READ)])
    assert [d.binding.operation for d in first] == [READ]
    assert zk.exists("/kafka-acl/Topic/gone") is not None
    [second] = store.delete_acls([AclBindingFilter(resource_type=TOPIC)])
    assert [d.binding.operation for d in second] == [WRITE]
    assert zk.exists("/kafka-acl/Topic/gone") is None
    assert store.authorizer.snapshot.get(ResourcePattern(TOPIC, "gone")) == frozenset()


def test_a_binding_two_filters_match_counts_for_the_first(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    store, _, _ = pair
    store.create_acls([binding("t1"), binding("t2")])
    results = store.delete_acls(
        [AclBindingFilter(name="t1"), AclBindingFilter(), AclBindingFilter(name="none")]
    )
    assert [[d.binding.pattern.name for d in r] for r in results] == [["t1"], ["t2"], []]


def test_bindings_kafka_refuses_to_store(pair: tuple[AclStore, AclStore, EmbeddedClient]) -> None:
    store, _, zk = pair
    results = store.create_acls(
        [
            binding("a/b"),
            binding("ok"),
            binding("x", operation=AclOperation.ANY),
            binding("x", pattern_type=PatternType.MATCH),
        ]
    )
    assert isinstance(results[0], InvalidAclBindingError)
    assert "invalid resource name: a/b" in str(results[0])
    assert results[1] is None
    assert all(isinstance(r, InvalidAclBindingError) for r in results[2:])
    assert zk.get_children("/kafka-acl/Topic") == ["ok"]


def test_concurrent_writers_of_one_resource_lose_nothing(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    """Optimistic versioned writes: a writer that lost the race reads again and retries."""
    first, second, _ = pair
    users = [f"User:u{i}" for i in range(30)]

    def add(store: AclStore, mine: list[str]) -> None:
        for user in mine:
            assert store.create_acls([binding("shared", user)]) == [None]

    threads = [
        threading.Thread(target=add, args=(first, users[0::2])),
        threading.Thread(target=add, args=(second, users[1::2])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    pattern = ResourcePattern(TOPIC, "shared")
    expected = {AccessControlEntry(u, "*", READ, ALLOW) for u in users}
    for auth in (first.authorizer, second.authorizer):
        wait_until(partial(lambda a: a.snapshot.get(pattern) == expected, auth))


def test_a_write_that_lost_the_race_reads_again_and_retries(server: EmbeddedZooKeeper) -> None:
    """Another broker writes the resource between this store's read and its conditional set:
    the set fails on the version, the store reads again and keeps both ACLs."""
    client = server.connect()
    rival = server.connect()

    class RacedClient:
        raced = False

        def __getattr__(self, name: str) -> object:
            return getattr(client, name)

        def set(self, path: str, value: bytes, version: int = -1) -> object:
            if not self.raced:  # the rival's write lands first
                self.raced = True
                rival.set(
                    path,
                    acl_znodes.encode_acls(
                        {AccessControlEntry("User:rival", "*", READ, ALLOW)}
                        | acl_znodes.decode_acls(path, rival.get(path)[0])
                    ),
                )
            return client.set(path, value, version=version)

    raced = RacedClient()
    store = AclStore(lambda: raced, AclAuthorizer(AuthorizerConfig(enabled=True)))
    store.start()
    try:
        store.create_acls([binding("raced")])
        store.create_acls([binding("raced", "User:bob")])
        principals = {
            a["principal"] for a in json.loads(client.get("/kafka-acl/Topic/raced")[0])["acls"]
        }
        assert principals == {"User:alice", "User:bob", "User:rival"}
        pattern = ResourcePattern(TOPIC, "raced")
        assert {e.principal for e in store.authorizer.snapshot.get(pattern)} == principals
    finally:
        store.stop()
        client.stop()
        rival.stop()


def test_a_malformed_notification_is_skipped_with_an_event(
    pair: tuple[AclStore, AclStore, EmbeddedClient],
) -> None:
    first, second, zk = pair
    with captured_events() as events:
        zk.create("/kafka-acl-changes/acl_changes_", b"no separator", sequence=True)
        zk.create("/kafka-acl-extended-changes/acl_changes_", b"{not json", sequence=True)
        zk.create(
            "/kafka-acl-extended-changes/acl_changes_",
            b'{"version":2,"resourceType":"TOPIC","name":"x","patternType":"PREFIXED"}',
            sequence=True,
        )
        wait_until(lambda: len(events.named("security.acl_change_invalid")) >= 6)
        invalid = events.named("security.acl_change_invalid")
    assert_valid_events(invalid)
    reasons = " ".join(e["error"] for e in invalid)
    assert "format ResourceType:ResourceName" in reasons
    assert "not JSON" in reasons
    assert "unsupported version: 2" in reasons
    first.create_acls([binding("after")])  # the listener goes on
    wait_until(
        lambda: second.authorizer.authorize(ALICE, "h", READ, TOPIC, "after", log_if_denied=False)
    )


def test_notifications_older_than_15_minutes_are_purged(server: EmbeddedZooKeeper) -> None:
    zk = server.connect()
    path = zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:t", sequence=True, makepath=True)
    stat = zk.exists(path)
    assert stat is not None
    created = stat.ctime
    young, young_client = new_store(server, clock=ManualClock(created + CHANGE_EXPIRATION_MS))
    young.stop()
    young_client.stop()
    assert zk.exists(path) is not None
    clock = ManualClock(created + CHANGE_EXPIRATION_MS + 1)
    store, client = new_store(server, clock=clock)
    try:
        assert zk.get_children("/kafka-acl-changes") == []
    finally:
        store.stop()
        client.stop()
        zk.stop()


def test_the_watch_survives_a_session_expiry(server: EmbeddedZooKeeper) -> None:
    writer, writer_client = new_store(server)
    reader, reader_client = new_store(server)
    try:
        assert reader_client.client_id is not None
        session = reader_client.client_id[0]
        assert server.expire_session(session)
        wait_until(
            lambda: (
                reader_client.connected
                and reader_client.client_id is not None
                and reader_client.client_id[0] != session
            ),
            message="a new session",
        )
        writer.create_acls([binding("after-expiry")])
        wait_until(
            lambda: reader.authorizer.authorize(
                ALICE, "h", READ, TOPIC, "after-expiry", log_if_denied=False
            ),
            message="the change seen through the new session's watch",
        )
    finally:
        for store in (writer, reader):
            store.stop()
        writer_client.stop()
        reader_client.stop()


def test_znode_codec_round_trip() -> None:
    entries = {
        AccessControlEntry("User:alice", "*", op, perm)
        for op in (AclOperation.ALL, AclOperation.IDEMPOTENT_WRITE, AclOperation.CLUSTER_ACTION)
        for perm in (ALLOW, DENY)
    }
    data = acl_znodes.encode_acls(entries)
    assert b'"operation":"IdempotentWrite"' in data and b'"operation":"ClusterAction"' in data
    assert acl_znodes.decode_acls("/p", data) == entries
    for pattern in (
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, "t:1"),
        ResourcePattern(ResourceType.DELEGATION_TOKEN, "tok", PREFIXED),
    ):
        root = acl_znodes.change_path(pattern.pattern_type)
        assert acl_znodes.decode_change(root, "/p", acl_znodes.encode_change(pattern)) == pattern
    assert acl_znodes.resource_path(
        ResourcePattern(ResourceType.TRANSACTIONAL_ID, "t", PREFIXED)
    ) == ("/kafka-acl-extended/prefixed/TransactionalId/t")
    with pytest.raises(acl_znodes.MalformedAclZnodeError, match="unsupported ACL version"):
        acl_znodes.decode_acls("/p", b'{"version":2,"acls":[]}')


def test_starting_before_the_zookeeper_session_says_so() -> None:
    store = AclStore(lambda: None, AclAuthorizer(AuthorizerConfig(enabled=True)))
    with pytest.raises(RuntimeError, match="once the broker's ZooKeeper session is up"):
        store.start()
    store.stop()  # nothing started: nothing to stop
