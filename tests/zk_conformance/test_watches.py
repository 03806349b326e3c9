"""One-shot watches: which operation fires which event, for whom, and how often."""

from __future__ import annotations

import pytest
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent

from tests.zk_conformance.support import ZK, Events, event


def test_data_watch_fires_changed_on_set(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"), b"0")
    events = Events()
    assert watcher.get(node, watch=events)[0] == b"0"
    writer.set(node, b"1")
    fired = events.next()
    assert isinstance(fired, WatchedEvent)
    assert fired == event(EventType.CHANGED, node)
    assert watcher.get(node)[0] == b"1"


def test_data_watch_fires_deleted_on_delete(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"))
    events = Events()
    watcher.get(node, watch=events)
    writer.delete(node)
    assert events.next() == event(EventType.DELETED, node)


def test_exists_watch_on_existing_node_fires_changed_then_deleted(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"))
    events = Events()
    assert watcher.exists(node, watch=events) is not None
    writer.set(node, b"x")
    assert events.next() == event(EventType.CHANGED, node)
    assert watcher.exists(node, watch=events) is not None
    writer.delete(node)
    assert events.next() == event(EventType.DELETED, node)


def test_exists_watch_on_missing_node_fires_created(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = zk.path("later")
    events = Events()
    assert watcher.exists(node, watch=events) is None
    writer.create(node, b"now")
    assert events.next() == event(EventType.CREATED, node)
    events.expect_none()  # the one-shot watch is spent


def test_get_on_missing_node_leaves_no_watch(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = zk.path("later")
    events = Events()
    with pytest.raises(NoNodeError):
        watcher.get(node, watch=events)
    writer.create(node)
    writer.set(node, b"x")
    events.expect_none()


def test_get_children_on_missing_node_leaves_no_watch(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = zk.path("later")
    events = Events()
    with pytest.raises(NoNodeError):
        watcher.get_children(node, watch=events)
    writer.create(node)
    writer.create(zk.path("later", "c"))
    events.expect_none()


def test_child_watch_fires_child_on_create_and_delete_then_deleted(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    events = Events()
    assert watcher.get_children(parent, watch=events) == []
    writer.create(zk.path("p", "c"))
    assert events.next() == event(EventType.CHILD, parent)
    assert watcher.get_children(parent, watch=events) == ["c"]
    writer.delete(zk.path("p", "c"))
    assert events.next() == event(EventType.CHILD, parent)
    assert watcher.get_children(parent, watch=events) == []
    writer.delete(parent)
    assert events.next() == event(EventType.DELETED, parent)
    events.expect_none()


def test_child_watch_ignores_data_changes(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    writer.create(zk.path("p", "c"))
    events = Events()
    watcher.get_children(parent, watch=events)
    writer.set(parent, b"parent data")
    writer.set(zk.path("p", "c"), b"child data")
    writer.create(zk.path("p", "c", "grandchild"))
    events.expect_none()
    writer.create(zk.path("p", "d"))  # still armed
    assert events.next() == event(EventType.CHILD, parent)


def test_data_watch_ignores_child_changes(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    data_events, exists_events = Events(), Events()
    watcher.get(parent, watch=data_events)
    watcher.exists(parent, watch=exists_events)
    writer.create(zk.path("p", "c"))
    writer.delete(zk.path("p", "c"))
    data_events.expect_none()
    exists_events.expect_none()


def test_watch_is_one_shot(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"))
    events = Events()
    watcher.get(node, watch=events)
    writer.set(node, b"1")
    assert events.next() == event(EventType.CHANGED, node)
    writer.set(node, b"2")
    writer.delete(node)
    events.expect_none()


def test_child_watch_is_one_shot(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    events = Events()
    watcher.get_children(parent, watch=events)
    writer.create(zk.path("p", "a"))
    assert events.next() == event(EventType.CHILD, parent)
    writer.create(zk.path("p", "b"))
    events.expect_none()


def test_watches_fire_for_the_clients_own_changes(zk: ZK) -> None:
    client = zk.connect()
    node = client.create(zk.path("n"))
    events = Events()
    client.get(node, watch=events)
    client.set(node, b"mine")
    assert events.next() == event(EventType.CHANGED, node)
    client.exists(zk.path("m"), watch=events)
    client.create(zk.path("m"))
    assert events.next() == event(EventType.CREATED, zk.path("m"))


def test_every_watching_client_is_notified(zk: ZK) -> None:
    writer = zk.connect()
    watchers = [zk.connect() for _ in range(3)]
    node = writer.create(zk.path("n"))
    recorders = [Events() for _ in watchers]
    for watcher, events in zip(watchers, recorders, strict=True):
        watcher.get(node, watch=events)
    writer.set(node, b"x")
    for events in recorders:
        assert events.next() == event(EventType.CHANGED, node)


def test_one_change_fires_data_exists_and_parent_child_watches(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    parent = writer.create(zk.path("p"))
    node = writer.create(zk.path("p", "n"))
    data_events, exists_events, child_events, parent_events = Events(), Events(), Events(), Events()
    watcher.get(node, watch=data_events)
    watcher.exists(node, watch=exists_events)
    watcher.get_children(node, watch=child_events)
    watcher.get_children(parent, watch=parent_events)
    writer.delete(node)
    assert data_events.next() == event(EventType.DELETED, node)
    assert exists_events.next() == event(EventType.DELETED, node)
    assert child_events.next() == event(EventType.DELETED, node)
    assert parent_events.next() == event(EventType.CHILD, parent)


def test_same_callback_on_one_path_is_called_once(zk: ZK) -> None:
    """kazoo keeps one set of data watchers per path: get and exists with the same callable share
    one registration."""
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("n"))
    events = Events()
    watcher.get(node, watch=events)
    watcher.exists(node, watch=events)
    writer.set(node, b"x")
    assert events.next() == event(EventType.CHANGED, node)
    events.expect_none()


def test_watch_on_one_node_ignores_its_siblings(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    node = writer.create(zk.path("a"))
    writer.create(zk.path("b"))
    events = Events()
    watcher.get(node, watch=events)
    writer.set(zk.path("b"), b"x")
    writer.create(zk.path("ab"))
    writer.delete(zk.path("b"))
    events.expect_none()


def test_events_arrive_in_the_order_of_the_changes(zk: ZK) -> None:
    watcher, writer = zk.connect(), zk.connect()
    names = ["c", "a", "d", "b"]
    for name in names:
        writer.create(zk.path(name))
    events = Events()
    for name in names:
        watcher.get(zk.path(name), watch=events)
    watcher.get_children(zk.base, watch=events)
    for name in names:
        writer.set(zk.path(name), b"x")
    writer.create(zk.path("e"))
    expected = [event(EventType.CHANGED, zk.path(name)) for name in names]
    expected.append(event(EventType.CHILD, zk.base))
    assert [events.next() for _ in expected] == expected
