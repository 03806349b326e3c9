"""kazoo's DataWatch and ChildrenWatch recipes, as `client.DataWatch(...)` / `client.ChildrenWatch`.

Each change waits for the recipe's call before the next one: a recipe re-reads the node when its
watch fires, so changes made faster than that are legitimately coalesced.
"""

from __future__ import annotations

from typing import Any

from tests.zk_conformance.support import ZK, Calls


def _data_and_version(call: tuple[Any, ...]) -> tuple[bytes, int]:
    data, stat = call
    return data, stat.version


def test_data_watch_on_existing_node(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"), b"v0")
    calls = Calls()
    watcher.DataWatch(node, calls.data)
    data, stat = calls.next()
    assert data == b"v0"
    assert stat == writer.exists(node)
    writer.set(node, b"v1")
    assert _data_and_version(calls.next()) == (b"v1", 1)
    writer.set(node, b"v2")
    assert _data_and_version(calls.next()) == (b"v2", 2)


def test_data_watch_follows_a_node_through_create_delete_and_recreate(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = zk.path("n")
    calls = Calls()
    watcher.DataWatch(node, calls.data)
    assert calls.next() == (None, None)
    writer.create(node, b"1")
    assert _data_and_version(calls.next()) == (b"1", 0)
    writer.set(node, b"2")
    assert _data_and_version(calls.next()) == (b"2", 1)
    writer.delete(node)
    assert calls.next() == (None, None)
    writer.create(node, b"3")
    assert _data_and_version(calls.next()) == (b"3", 0)
    calls.expect_none()


def test_data_watch_first_call_happens_before_it_returns(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("n"), b"now")
    calls = Calls()
    client.DataWatch(zk.path("n"), calls.data)
    assert [data for data, _stat in calls.made] == [b"now"]


def test_data_watch_as_decorator(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"), b"a")
    calls = Calls()

    @watcher.DataWatch(node)  # type: ignore[untyped-decorator]
    def changed(data: bytes | None, stat: object) -> None:
        calls.data(data, stat)

    assert calls.next()[0] == b"a"
    writer.set(node, b"b")
    assert calls.next()[0] == b"b"


def test_children_watch_sees_children_lists_as_they_change(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    calls = Calls()
    watcher.ChildrenWatch(parent, calls.children)
    assert calls.next() == ([],)
    writer.create(zk.path("p", "b"))
    assert calls.next() == (["b"],)
    writer.create(zk.path("p", "a"))
    (children,) = calls.next()
    assert sorted(children) == ["a", "b"]
    writer.delete(zk.path("p", "b"))
    assert calls.next() == (["a"],)
    writer.set(parent, b"data changes are not child changes")
    calls.expect_none()


def test_children_watch_first_call_happens_before_it_returns(zk: ZK) -> None:
    client = zk.connect()
    client.create(zk.path("p", "c"), makepath=True)
    calls = Calls()
    client.ChildrenWatch(zk.path("p"), calls.children)
    assert calls.made == [(["c"],)]


def test_children_watch_stops_when_the_node_is_deleted(zk: ZK) -> None:
    """kazoo's ChildrenWatch is not called for the deletion and does not follow a new node."""
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    calls = Calls()
    watcher.ChildrenWatch(parent, calls.children)
    assert calls.next() == ([],)
    writer.delete(parent)
    calls.expect_none()  # (this bounded wait also lets the recipe see the deletion first)
    writer.create(parent)
    writer.create(zk.path("p", "c"))
    calls.expect_none()
