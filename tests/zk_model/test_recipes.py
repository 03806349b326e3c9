"""kazoo's own DataWatch and ChildrenWatch recipes, running on the embedded client."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from kafkactor.timer import ManualClock
from kafkactor.zk_model import EmbeddedClient, EmbeddedZooKeeper
from tests.zk_model.support import Calls


@pytest.fixture
def zk() -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(ManualClock(0))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def client(zk: EmbeddedZooKeeper) -> EmbeddedClient:
    return zk.connect()


@pytest.fixture
def writer(zk: EmbeddedZooKeeper) -> EmbeddedClient:
    return zk.connect()


def test_data_watch_is_called_at_once_then_on_every_change(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/c", b"v0")
    calls = Calls()
    client.DataWatch("/c", calls)  # a function taking *args gets (data, stat, event)
    data, stat, first = calls.next()
    assert data == b"v0" and stat.version == 0 and first is None
    writer.set("/c", b"v1")
    data, stat, changed = calls.next()
    assert data == b"v1" and stat.version == 1
    assert changed == WatchedEvent(EventType.CHANGED, KeeperState.CONNECTED, "/c")
    writer.delete("/c")
    assert calls.next()[:2] == (None, None)
    writer.create("/c", b"again")
    assert calls.next()[0] == b"again"


def test_data_watch_with_a_two_argument_function(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/c", b"v0")
    calls = Calls()

    def on_change(data: bytes | None, stat: Any) -> None:
        calls(data, stat.version if stat else None)

    client.DataWatch("/c", on_change)
    assert calls.next() == (b"v0", 0)
    writer.set("/c", b"v1")
    assert calls.next() == (b"v1", 1)


def test_data_watch_as_a_decorator_with_the_event(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    calls = Calls()

    @client.DataWatch("/controller")
    def on_change(data: bytes | None, stat: Any, event: WatchedEvent | None) -> None:
        calls(data, event)

    assert calls.next() == (None, None)  # a missing node: called with None
    writer.create("/controller", b'{"brokerid":1}')
    assert calls.next() == (
        b'{"brokerid":1}',
        WatchedEvent(EventType.CREATED, KeeperState.CONNECTED, "/controller"),
    )


def test_data_watch_stops_when_its_function_returns_false(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/c", b"0")
    calls = Calls(result=False)
    client.DataWatch("/c", calls)
    assert calls.next()[0] == b"0"
    writer.set("/c", b"1")
    calls.expect_none(client)


def session_id(client: EmbeddedClient) -> int:
    client_id = client.client_id
    assert client_id is not None
    return client_id[0]


def test_data_watch_carries_on_across_session_expiry(
    zk: EmbeddedZooKeeper, client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/c", b"0")
    calls = Calls()
    client.DataWatch("/c", calls)
    assert calls.next()[0] == b"0"
    zk.expire_session(session_id(client))  # the client reconnects with a new session
    calls.expect_none(client)  # the recipe re-read the node: unchanged, so no call
    writer.set("/c", b"1")
    assert calls.next()[0] == b"1"


def test_recipes_of_a_paused_client_wait_for_its_new_session(
    zk: EmbeddedZooKeeper, client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/c", b"0")
    client.create("/t")
    data_calls, children_calls = Calls(), Calls()
    client.DataWatch("/c", data_calls)
    client.ChildrenWatch("/t", children_calls)
    assert data_calls.next()[0] == b"0"
    assert children_calls.next() == ([],)
    client.pause_heartbeats()
    zk.expire_session(session_id(client))
    writer.set("/c", b"1")  # while the client cannot reconnect
    writer.create("/t/x")
    client.resume_heartbeats()
    assert data_calls.next()[0] == b"1"
    assert children_calls.next() == (["x"],)


def test_stop_ends_a_recipe_retrying_for_a_lost_session(
    zk: EmbeddedZooKeeper, client: EmbeddedClient
) -> None:
    client.create("/c", b"0")
    calls = Calls()
    client.DataWatch("/c", calls)
    calls.next()
    client.pause_heartbeats()
    zk.expire_session(session_id(client))  # the recipe's retry now waits on the event thread
    threads = threading.active_count()
    client.stop()  # ends the retry (ConnectionClosedError, which the recipe ignores)
    assert threading.active_count() < threads


def test_children_watch_is_called_at_once_then_on_every_change(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/brokers/ids", makepath=True)
    calls = Calls()
    client.ChildrenWatch("/brokers/ids", calls)
    assert calls.next() == ([],)
    writer.create("/brokers/ids/1", ephemeral=True)
    assert calls.next() == (["1"],)
    writer.create("/brokers/ids/2", ephemeral=True)
    assert calls.next() == (["1", "2"],)
    writer.stop()  # its ephemerals go
    assert calls.next() == ([],)


def test_children_watch_as_a_decorator_with_send_event(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/t")
    calls = Calls()
    on_thread: list[threading.Thread] = []

    @client.ChildrenWatch("/t", send_event=True)
    def on_children(children: list[str], event: WatchedEvent | None) -> None:
        on_thread.append(threading.current_thread())
        calls(children, event)

    assert calls.next() == ([], None)
    writer.create("/t/x")
    assert calls.next() == (["x"], WatchedEvent(EventType.CHILD, KeeperState.CONNECTED, "/t"))
    assert on_thread[0] is threading.current_thread()  # kazoo: the first call is synchronous
    assert on_thread[1] is not threading.current_thread()  # later ones on the event thread


def test_children_watch_stops_when_its_function_returns_false(
    client: EmbeddedClient, writer: EmbeddedClient
) -> None:
    client.create("/t")
    calls = Calls(result=False)
    client.ChildrenWatch("/t", calls)
    assert calls.next() == ([],)
    writer.create("/t/x")
    calls.expect_none(client)
