"""Creating, reading, updating and deleting znodes: returned paths, values and errors."""

from __future__ import annotations

import threading

import pytest
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from tests.zk_conformance.support import TIMEOUT_S, ZK, Client


def test_create_returns_the_path_and_stores_the_value(zk: ZK) -> None:
    client = zk.connect()
    assert client.create(zk.path("a"), b"hello") == zk.path("a")
    assert client.create(zk.path("empty")) == zk.path("empty")
    assert client.get(zk.path("a"))[0] == b"hello"
    assert client.get(zk.path("empty"))[0] == b""


def test_create_existing_node_raises_node_exists(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("a"), b"first")
    with pytest.raises(NodeExistsError):
        client.create(zk.path("a"), b"second")
    with pytest.raises(NodeExistsError):
        client.create(zk.path("a"), ephemeral=True)
    assert client.get(zk.path("a"))[0] == b"first"


def test_create_under_missing_parent_raises_no_node(zk: ZK) -> None:
    client = zk.connect()
    with pytest.raises(NoNodeError):
        client.create(zk.path("missing", "child"))
    with pytest.raises(NoNodeError):
        client.create(zk.path("missing", "child-"), sequence=True)
    assert client.exists(zk.path("missing")) is None


def test_makepath_creates_missing_parents(zk: ZK) -> None:
    client = zk.connect()
    assert client.create(zk.path("x", "y", "z"), b"leaf", makepath=True) == zk.path("x", "y", "z")
    assert client.get(zk.path("x", "y", "z"))[0] == b"leaf"
    assert client.get(zk.path("x"))[0] == b""  # parents are created empty
    assert client.get_children(zk.path("x")) == ["y"]
    # makepath over parents that already exist is fine
    assert client.create(zk.path("x", "y", "w"), makepath=True) == zk.path("x", "y", "w")


def test_makepath_with_ephemeral_and_sequential_leaf(zk: ZK) -> None:
    client = zk.connect()
    leaf = client.create(zk.path("m", "n", "e-"), ephemeral=True, sequence=True, makepath=True)
    assert leaf == zk.path("m", "n", "e-0000000000")
    assert client.exists(leaf).ephemeralOwner == client.client_id[0]
    assert client.exists(zk.path("m", "n")).ephemeralOwner == 0  # parents are persistent
    assert client.exists(zk.path("m")).ephemeralOwner == 0


def test_makepath_under_an_ephemeral_raises_no_children_for_ephemerals(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("eph"), ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        client.create(zk.path("eph", "a", "b"), makepath=True)


def test_ensure_path_creates_parents_and_is_idempotent(zk: ZK) -> None:
    client = zk.connect()
    assert client.ensure_path(zk.path("p", "q", "r")) == zk.path("p", "q", "r")
    assert client.exists(zk.path("p", "q", "r")) is not None
    assert client.ensure_path(zk.path("p", "q", "r")) is True  # kazoo: True when it existed
    assert client.ensure_path(zk.path("p", "q")) is True


def test_ephemeral_node_cannot_have_children(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("eph"), ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        client.create(zk.path("eph", "child"))
    with pytest.raises(NoChildrenForEphemeralsError):
        client.create(zk.path("eph", "child"), ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        client.create(zk.path("eph", "seq-"), sequence=True)
    assert client.get_children(zk.path("eph")) == []


def test_sequential_suffix_is_ten_digits_from_the_parents_counter(zk: ZK) -> None:
    client = zk.connect()
    first = client.create(zk.path("job-"), b"1", sequence=True)
    second = client.create(zk.path("job-"), b"2", sequence=True)
    assert first == zk.path("job-0000000000")
    assert second == zk.path("job-0000000001")
    assert client.get(first)[0] == b"1"
    assert sorted(client.get_children(zk.base)) == ["job-0000000000", "job-0000000001"]


def test_sequence_counter_is_shared_by_every_child_of_the_parent(zk: ZK) -> None:
    client = zk.connect()
    assert client.create(zk.path("a-"), sequence=True) == zk.path("a-0000000000")
    assert client.create(zk.path("b-"), sequence=True) == zk.path("b-0000000001")
    client.create(zk.path("plain"))  # a non-sequential child consumes a number too
    assert client.create(zk.path("a-"), sequence=True) == zk.path("a-0000000003")
    # the counter is per parent: a fresh parent starts at zero
    client.create(zk.path("other"))
    assert client.create(zk.path("other", "a-"), sequence=True) == zk.path("other", "a-0000000000")


def test_sequence_numbers_count_creates_and_are_not_reused_after_delete(zk: ZK) -> None:
    client = zk.connect()
    first = client.create(zk.path("q-"), sequence=True)
    second = client.create(zk.path("q-"), sequence=True)
    client.delete(second)
    client.delete(first)
    # the next number is the number of children ever created (deletes do not count)
    assert client.create(zk.path("q-"), sequence=True) == zk.path("q-0000000002")
    assert client.create(zk.path("q-"), sequence=True) == zk.path("q-0000000003")


def test_sequence_counter_restarts_when_the_parent_is_recreated(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p"))
    client.create(zk.path("p", "s-"), sequence=True)
    client.delete(zk.path("p"), recursive=True)
    client.create(zk.path("p"))
    assert client.create(zk.path("p", "s-"), sequence=True) == zk.path("p", "s-0000000000")


def test_sequential_name_may_be_only_the_number(zk: ZK) -> None:
    client = zk.connect()
    assert client.create(zk.base + "/", sequence=True) == zk.path("0000000000")


def test_ephemeral_sequential(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("plain"))
    path = client.create(zk.path("lock-"), b"me", ephemeral=True, sequence=True)
    assert path == zk.path("lock-0000000001")
    stat = client.exists(path)
    assert stat.ephemeralOwner == client.client_id[0]
    assert client.get(path)[0] == b"me"


def test_only_one_of_racing_creates_wins(zk: ZK) -> None:
    clients = [zk.connect() for _ in range(5)]
    start = threading.Barrier(len(clients))
    outcomes: list[str] = []

    def race(client: Client) -> None:
        start.wait(TIMEOUT_S)
        try:
            client.create(zk.path("controller"), ephemeral=True)
            outcomes.append("won")
        except NodeExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=race, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S)
    assert sorted(outcomes) == ["exists"] * 4 + ["won"]
    owner = clients[0].exists(zk.path("controller")).ephemeralOwner
    assert owner in {client.client_id[0] for client in clients}


def test_racing_sequential_creates_get_distinct_numbers(zk: ZK) -> None:
    clients = [zk.connect() for _ in range(4)]
    start = threading.Barrier(len(clients))
    created: list[str] = []

    def race(client: Client) -> None:
        start.wait(TIMEOUT_S)
        created.extend(client.create(zk.path("lock-"), ephemeral=True, sequence=True) for _ in "ab")

    threads = [threading.Thread(target=race, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT_S)
    assert sorted(created) == [zk.path(f"lock-{n:010d}") for n in range(8)]


def test_get_children_of_a_node(zk: ZK) -> None:
    client = zk.connect()
    assert client.get_children(zk.base) == []
    for name in ["b", "a", "c"]:
        client.create(zk.path(name))
    client.create(zk.path("a", "deep"))  # grandchildren are not listed
    assert sorted(client.get_children(zk.base)) == ["a", "b", "c"]
    with pytest.raises(NoNodeError):
        client.get_children(zk.path("missing"))


def test_root_lists_the_zookeeper_node_and_the_tests_base(zk: ZK) -> None:
    client = zk.connect()
    children = client.get_children("/")
    assert "zookeeper" in children
    assert zk.base.lstrip("/") in children


def test_zookeeper_system_node_has_config_and_quota(zk: ZK) -> None:
    client = zk.connect()
    assert sorted(client.get_children("/zookeeper")) == ["config", "quota"]


def test_missing_node_reads_and_writes(zk: ZK) -> None:
    client = zk.connect()
    missing = zk.path("missing")
    assert client.exists(missing) is None
    with pytest.raises(NoNodeError):
        client.get(missing)
    with pytest.raises(NoNodeError):
        client.set(missing, b"x")
    with pytest.raises(NoNodeError):
        client.delete(missing)


def test_set_with_version(zk: ZK) -> None:
    client = zk.connect()
    node = client.create(zk.path("v"), b"0")
    assert client.set(node, b"1", version=0).version == 1
    with pytest.raises(BadVersionError):
        client.set(node, b"stale", version=0)
    with pytest.raises(BadVersionError):
        client.set(node, b"future", version=5)
    assert client.get(node)[0] == b"1"
    assert client.set(node, b"2", version=-1).version == 2  # -1 matches any version
    assert client.set(node, b"3").version == 3
    assert client.get(node)[0] == b"3"


def test_recreated_node_starts_over(zk: ZK) -> None:
    client = zk.connect()
    node = client.create(zk.path("n"), b"a")
    client.set(node, b"b")
    client.create(zk.path("n", "c"))
    old = client.exists(node)
    client.delete(node, recursive=True)
    client.create(node, b"new")
    stat = client.exists(node)
    assert (stat.version, stat.cversion, stat.numChildren) == (0, 0, 0)
    assert stat.czxid > old.mzxid
    assert stat.czxid == stat.mzxid == stat.pzxid
    with pytest.raises(BadVersionError):
        client.set(node, b"x", version=old.version)


def test_delete_with_version(zk: ZK) -> None:
    client = zk.connect()
    node = client.create(zk.path("v"))
    client.set(node, b"x")
    with pytest.raises(BadVersionError):
        client.delete(node, version=0)
    assert client.exists(node) is not None
    assert client.delete(node, version=1) is True
    assert client.exists(node) is None
    other = client.create(zk.path("w"))
    client.set(other, b"x")
    assert client.delete(other, version=-1) is True
    assert client.exists(other) is None


def test_delete_non_empty_node_raises_not_empty(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p", "c"), makepath=True)
    with pytest.raises(NotEmptyError):
        client.delete(zk.path("p"))
    assert client.get_children(zk.path("p")) == ["c"]


def test_recursive_delete(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p", "a", "x"), makepath=True)
    client.create(zk.path("p", "b"))
    client.create(zk.path("p", "s-"), sequence=True)
    client.delete(zk.path("p"), recursive=True)
    assert client.exists(zk.path("p")) is None
    assert client.get_children(zk.base) == []
    # kazoo's recursive delete of a missing node is not an error
    client.delete(zk.path("missing"), recursive=True)


def test_delete_missing_node_raises_no_node(zk: ZK) -> None:
    client = zk.connect()
    with pytest.raises(NoNodeError):
        client.delete(zk.path("missing"))
    with pytest.raises(NoNodeError):
        client.delete(zk.path("missing"), version=0)


def test_set_and_get_binary_values(zk: ZK) -> None:
    client = zk.connect()
    value = bytes(range(256)) * 4
    client.create(zk.path("bin"), value)
    assert client.get(zk.path("bin"))[0] == value
    client.set(zk.path("bin"), b"")
    assert client.get(zk.path("bin"))[0] == b""


# --- paths -----------------------------------------------------------------------------------


def test_relative_path_is_taken_from_the_root(zk: ZK) -> None:
    """kazoo normalizes "t-x/a" to "/t-x/a" before sending it: not an error."""
    client = zk.connect()
    relative = zk.path("rel").lstrip("/")
    assert client.create(relative, b"r") == zk.path("rel")
    assert client.get(relative)[0] == b"r"
    assert client.exists(zk.path("rel")) is not None


def test_trailing_and_doubled_slashes_are_normalized(zk: ZK) -> None:
    client = zk.connect()
    assert client.create(zk.path("a") + "/", b"t") == zk.path("a")
    assert client.get(zk.path("a") + "/")[0] == b"t"
    assert client.create(zk.base + "//b") == zk.path("b")
    assert sorted(client.get_children(zk.base + "/")) == ["a", "b"]


def test_dot_components_raise_value_error(zk: ZK) -> None:
    client = zk.connect()
    for bad in [zk.path(".", "x"), zk.path("..", "x"), zk.path("x", ".")]:
        with pytest.raises(ValueError, match="relative paths not allowed"):
            client.create(bad)
        with pytest.raises(ValueError, match="relative paths not allowed"):
            client.get(bad)
        with pytest.raises(ValueError, match="relative paths not allowed"):
            client.exists(bad)


def test_unicode_names(zk: ZK) -> None:
    client = zk.connect()
    name = "caf\u00e9-\u65e5\u672c-\u00a0-\uffef"
    assert client.create(zk.path(name), name.encode()) == zk.path(name)
    assert client.get_children(zk.base) == [name]
    assert client.get(zk.path(name))[0] == name.encode()


@pytest.mark.parametrize(
    "char",
    ["\x00", "\x01", "\x1f", "\x7f", "\x9f", "\ue000", "\uf8ff", "\ufff0", "\U0001f600"],
    ids=lambda char: f"U+{ord(char):04X}",
)
def test_disallowed_characters_raise_bad_arguments(zk: ZK, char: str) -> None:
    """The server's PathUtils.validatePath: control characters, U+D800-U+F8FF, U+FFF0 and up
    (checked on UTF-16 units, so any character beyond the BMP is refused via its surrogates)."""
    client = zk.connect()
    with pytest.raises(BadArgumentsError):
        client.create(zk.path(f"a{char}b"))
    with pytest.raises(BadArgumentsError):
        client.create(zk.path(f"s{char}-"), sequence=True)
    assert client.get_children(zk.base) == []


def test_root_cannot_be_created_or_deleted(zk: ZK) -> None:
    client = zk.connect()
    with pytest.raises(NodeExistsError):
        client.create("/")
    with pytest.raises(BadArgumentsError):
        client.delete("/")


def test_zookeeper_system_node_cannot_be_deleted(zk: ZK) -> None:
    client = zk.connect()
    with pytest.raises(BadArgumentsError):
        client.delete("/zookeeper")
    with pytest.raises(BadArgumentsError):
        client.delete("/zookeeper/config")
    assert client.exists("/zookeeper") is not None


def test_wrong_argument_types_raise_type_error(zk: ZK) -> None:
    client = zk.connect()
    with pytest.raises(TypeError):
        client.create(zk.path("s"), "not bytes")
    with pytest.raises(TypeError):
        client.create(42)
    with pytest.raises(TypeError):
        client.set(zk.path("s"), "not bytes")
    assert client.get_children(zk.base) == []
