"""EmbeddedZooKeeper and EmbeddedClient: sessions on a ManualClock, callbacks on the event thread.

Time moves only when a test advances the ManualClock; heartbeats and expiry checks then run on
the test's thread before `advance` returns. Callbacks run on each client's event thread: tests
wait for them on queues and conditions with a timeout, never by sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KazooState, KeeperState, WatchedEvent

from kafkactor.timer import ManualClock, SystemClock
from kafkactor.zk_model import EmbeddedClient, EmbeddedZooKeeper
from tests.zk_model.support import WAIT_S, Events, States, drain

TIMEOUT_MS = 10_000


def event(kind: str, path: str) -> WatchedEvent:
    return WatchedEvent(kind, KeeperState.CONNECTED, path)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def zk(clock: ManualClock) -> Iterator[EmbeddedZooKeeper]:
    server = EmbeddedZooKeeper(clock, tick_ms=2000)
    try:
        yield server
    finally:
        server.close()


def session_id(client: EmbeddedClient) -> int:
    client_id = client.client_id
    assert client_id is not None
    return client_id[0]


# -- connection and sessions --------------------------------------------------------------------


def test_connect_returns_a_started_client_with_a_negotiated_session(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    assert client.connected and client.state == KazooState.CONNECTED
    assert client.client_state == KeeperState.CONNECTED
    sid, password = client.client_id or (0, b"")
    assert zk.sessions() == [sid] and len(password) == 16
    assert client.session_timeout_ms == TIMEOUT_MS
    assert zk.connect(100).session_timeout_ms == 4_000  # clamped to 2 ticks
    assert zk.connect(10**6).session_timeout_ms == 40_000  # and to 20 ticks


def test_an_expired_client_goes_suspended_lost_then_connected_with_a_new_session(
    zk: EmbeddedZooKeeper,
) -> None:
    client = EmbeddedClient(zk, session_timeout_ms=TIMEOUT_MS)
    states = States()
    client.add_listener(states)
    assert client.state == KazooState.LOST  # kazoo's initial state
    client.start()
    assert states.wait_for(1) == [KazooState.CONNECTED]
    old = session_id(client)
    client.create("/e", ephemeral=True)

    assert zk.expire_session(old) is True

    # as kazoo: the dropped connection, the reconnect told the session expired, a new session
    assert states.wait_for(4) == [
        KazooState.CONNECTED,
        KazooState.SUSPENDED,
        KazooState.LOST,
        KazooState.CONNECTED,
    ]
    new = session_id(client)
    assert new != old and zk.sessions() == [new]
    assert client.connected and client.client_state == KeeperState.CONNECTED
    assert client.exists("/e") is None  # the old session's ephemerals are gone for good
    client.create("/e", ephemeral=True)
    stat = client.exists("/e")
    assert stat is not None and stat.ephemeralOwner == new
    assert all(t is states.threads[0] for t in states.threads)
    assert states.threads[0] is not threading.current_thread()
    assert zk.expire_session(old) is False


def test_a_paused_client_stays_lost_and_raises_session_expired_until_resumed(
    zk: EmbeddedZooKeeper,
) -> None:
    client = EmbeddedClient(zk, session_timeout_ms=TIMEOUT_MS)
    states = States()
    client.add_listener(states)
    client.start()
    client.create("/a")
    client.pause_heartbeats()
    old = session_id(client)

    zk.expire_session(old)

    assert states.wait_for(3) == [KazooState.CONNECTED, KazooState.SUSPENDED, KazooState.LOST]
    assert not client.connected and client.state == KazooState.LOST
    assert client.client_state == KeeperState.EXPIRED_SESSION
    assert client.client_id is None and zk.sessions() == []
    for call in (
        lambda: client.get("/a"),
        lambda: client.exists("/a"),
        lambda: client.get_children("/"),
        lambda: client.create("/b"),
        lambda: client.set("/a", b"x"),
        lambda: client.delete("/a"),
        lambda: client.ensure_path("/c"),
    ):
        with pytest.raises(SessionExpiredError):
            call()

    client.resume_heartbeats()  # the partition heals: the client reconnects

    assert states.wait_for(4)[-1] == KazooState.CONNECTED
    assert session_id(client) != old and zk.sessions() == [session_id(client)]
    assert client.get("/a")[0] == b""


def test_start_on_a_paused_expired_client_opens_a_new_session(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.pause_heartbeats()
    zk.expire_session(session_id(client))
    client.start()
    assert client.connected and client.get_children("/") == ["zookeeper"]


def test_heartbeats_keep_live_sessions_alive_however_the_clock_moves(
    zk: EmbeddedZooKeeper, clock: ManualClock
) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.create("/e", ephemeral=True)
    for _ in range(50):
        clock.advance(1_000)
    clock.advance(TIMEOUT_MS)  # exactly one timeout at once
    clock.advance(10 * TIMEOUT_MS)  # a jump over many timeouts
    assert zk.sessions() == [session_id(client)]
    assert client.exists("/e") is not None


def test_paused_heartbeats_expire_the_session_after_its_timeout_not_before(
    zk: EmbeddedZooKeeper, clock: ManualClock
) -> None:
    hung = zk.connect(TIMEOUT_MS)
    other = zk.connect(TIMEOUT_MS)
    hung.create("/brokers/ids/1", ephemeral=True, makepath=True)
    events = Events()
    assert other.exists("/brokers/ids/1", watch=events) is not None
    clock.advance(2_500)  # the clients heartbeat at 3333 ms; the last one heard is at 0
    hung.pause_heartbeats()
    clock.advance(TIMEOUT_MS - 2_500 - 1)
    assert session_id(hung) in zk.sessions()
    clock.advance(1)
    assert zk.sessions() == [session_id(other)]
    assert not hung.connected and hung.state == KazooState.LOST
    assert events.next() == event(EventType.DELETED, "/brokers/ids/1")
    with pytest.raises(SessionExpiredError):
        hung.get("/")


def test_a_heartbeat_before_the_timeout_saves_a_paused_session(
    zk: EmbeddedZooKeeper, clock: ManualClock
) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.pause_heartbeats()
    clock.advance(TIMEOUT_MS - 1)
    client.resume_heartbeats()
    clock.advance(TIMEOUT_MS - 1)
    assert client.connected
    clock.advance(5 * TIMEOUT_MS)
    assert zk.sessions() == [session_id(client)]


def test_stop_ends_the_session_and_deletes_its_ephemerals(zk: EmbeddedZooKeeper) -> None:
    leaving = EmbeddedClient(zk, session_timeout_ms=TIMEOUT_MS)
    states = States()
    leaving.add_listener(states)
    leaving.start()
    watcher = zk.connect(TIMEOUT_MS)
    path = leaving.create("/members/m-", ephemeral=True, sequence=True, makepath=True)
    children, nodes = Events(), Events()
    watcher.get_children("/members", watch=children)
    watcher.exists(path, watch=nodes)
    own = Events()
    leaving.get(path, watch=own)

    leaving.stop()

    assert states.wait_for(2) == [KazooState.CONNECTED, KazooState.LOST]
    assert nodes.next() == event(EventType.DELETED, path)
    assert children.next() == event(EventType.CHILD, "/members")
    assert watcher.get_children("/members") == []
    assert zk.sessions() == [session_id(watcher)]
    with pytest.raises(ConnectionClosedError):
        leaving.get("/")
    own.expect_none(watcher)  # as kazoo: a stopped client's watches are never called
    leaving.stop()  # a second stop does nothing
    leaving.close()


def test_a_client_never_started_is_closed(zk: EmbeddedZooKeeper) -> None:
    client = EmbeddedClient(zk)
    with pytest.raises(ConnectionClosedError):
        client.get("/")
    client.stop()
    assert client.client_id is None


def test_closing_the_server_stops_its_clients(clock: ManualClock) -> None:
    server = EmbeddedZooKeeper(clock)
    client = server.connect()
    server.close()
    assert not client.connected and server.sessions() == []
    with pytest.raises(ConnectionClosedError):
        server.connect()
    server.close()


def test_expiry_on_a_system_clock() -> None:
    server = EmbeddedZooKeeper(SystemClock(), tick_ms=10)
    try:
        live = server.connect(60)  # heartbeats every 20 ms of real time
        hung = EmbeddedClient(server, session_timeout_ms=60)
        states = States()
        hung.add_listener(states)
        hung.start()
        hung.pause_heartbeats()
        assert states.wait_for(3) == [KazooState.CONNECTED, KazooState.SUSPENDED, KazooState.LOST]
        assert live.connected
    finally:
        server.close()


def test_operations_return_what_kazoo_returns(zk: EmbeddedZooKeeper, clock: ManualClock) -> None:
    client = zk.connect(TIMEOUT_MS)
    assert client.create("/a", b"1") == "/a"
    path, stat = client.create("/b", b"22", include_data=True)
    assert path == "/b" and stat.dataLength == 2 and stat.ctime == clock.now_ms()
    data, stat = client.get("/a")
    assert data == b"1" and stat.version == 0
    assert client.set("/a", b"2", version=0).version == 1
    children, stat = client.get_children("/", include_data=True)
    assert children == ["a", "b", "zookeeper"] and stat.numChildren == 3
    assert client.delete("/b") is True
    assert client.exists("/b") is None
    assert client.create("/n", None) == "/n"
    assert client.get("/n")[0] == b""


def test_errors_are_kazoos(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.create("/a/b", makepath=True)
    with pytest.raises(NodeExistsError):
        client.create("/a")
    with pytest.raises(NoNodeError):
        client.create("/x/y")
    with pytest.raises(BadVersionError):
        client.set("/a", b"v", version=3)
    with pytest.raises(NotEmptyError):
        client.delete("/a")
    with pytest.raises(NoNodeError):
        client.get("/zz")
    with pytest.raises(TypeError):
        client.create("/s", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        client.get("/a", watch="not callable")  # type: ignore[arg-type]


def test_paths_are_normalised_as_kazoo_does(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    assert client.create("a") == "/a"  # kazoo makes a relative path absolute
    assert client.create("//a//b/") == "/a/b"
    assert client.exists("/a/b/") is not None
    with pytest.raises(ValueError, match="relative"):
        client.get("/a/../b")
    assert client.create("/q/", sequence=True, makepath=True) == "/q/0000000000"


def test_ensure_path_and_recursive_delete(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    assert client.ensure_path("/x/y/z") == "/x/y/z"
    assert client.ensure_path("/x/y") is True
    client.create("/x/y/z/leaf", b"v")
    client.create("/x/other")
    assert client.delete("/x", recursive=True) is True
    assert client.exists("/x") is None
    assert client.delete("/never", recursive=True) is True  # kazoo ignores a missing node here


def test_get_on_a_missing_node_sets_no_watch_but_exists_does(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    on_get, on_exists = Events(), Events()
    with pytest.raises(NoNodeError):
        client.get("/a", watch=on_get)
    with pytest.raises(NoNodeError):
        client.get_children("/a", watch=on_get)
    assert client.exists("/a", watch=on_exists) is None
    client.create("/a")
    assert on_exists.next() == event(EventType.CREATED, "/a")
    on_get.expect_none(client)


# -- watches and the event thread ---------------------------------------------------------------


def test_watches_of_each_kind_fire_once_on_the_clients_event_thread(
    zk: EmbeddedZooKeeper,
) -> None:
    client = zk.connect(TIMEOUT_MS)
    writer = zk.connect(TIMEOUT_MS)
    client.create("/p/c", makepath=True)
    data, child = Events(), Events()
    client.get("/p/c", watch=data)
    client.get_children("/p", watch=child)
    writer.set("/p/c", b"1")
    writer.set("/p/c", b"2")
    writer.create("/p/d")
    writer.create("/p/e")
    changed, data_thread = data.next_with_thread()
    child_event, child_thread = child.next_with_thread()
    assert changed == event(EventType.CHANGED, "/p/c")
    assert child_event == event(EventType.CHILD, "/p")
    assert data_thread is child_thread is not threading.current_thread()
    data.expect_none(client)
    child.expect_none(client)


def test_the_same_watcher_twice_fires_once(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    client.create("/a")
    events = Events()
    client.get("/a", watch=events)
    client.exists("/a", watch=events)
    client.set("/a", b"x")
    assert events.next() == event(EventType.CHANGED, "/a")
    events.expect_none(client)


def test_a_watch_callback_may_call_the_client_again(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    writer = zk.connect(TIMEOUT_MS)
    client.create("/counter", b"0")
    seen: list[bytes] = []
    done = threading.Event()

    def rewatch(watched: WatchedEvent) -> None:
        if watched.type == EventType.NONE:  # the session ended (the fixture closes the server)
            return
        data, _ = client.get("/counter", watch=rewatch)  # re-registers from the event thread
        seen.append(data)
        client.create(f"/seen-{data.decode()}")  # and writes, with no deadlock
        if data == b"3":
            done.set()

    client.get("/counter", watch=rewatch)
    for value in (b"1", b"2", b"3"):
        writer.set("/counter", value)
        writer.exists(f"/seen-{value.decode()}")
        drain(client)
    assert done.wait(WAIT_S)
    assert seen == [b"1", b"2", b"3"]


def test_a_listener_may_stop_its_own_client(zk: EmbeddedZooKeeper) -> None:
    client = EmbeddedClient(zk, session_timeout_ms=TIMEOUT_MS)
    stopped = threading.Event()

    def on_state(state: str) -> None:
        if state == KazooState.CONNECTED:
            client.stop()  # from the event thread itself
            stopped.set()

    client.add_listener(on_state)
    client.start()
    assert stopped.wait(WAIT_S)
    assert not client.connected and zk.sessions() == []


def test_restart_from_the_event_thread(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    writer = zk.connect(TIMEOUT_MS)
    client.create("/a")
    restarted = threading.Event()

    def restart(_event: WatchedEvent) -> None:
        client.restart()  # stops this very event thread's handler, starts a new one
        restarted.set()

    client.get("/a", watch=restart)
    writer.set("/a", b"x")
    assert restarted.wait(WAIT_S)
    events = Events()
    client.get("/a", watch=events)
    writer.set("/a", b"y")
    assert events.next() == event(EventType.CHANGED, "/a")  # on the new event thread


def test_a_listener_returning_true_is_removed(zk: EmbeddedZooKeeper) -> None:
    client = EmbeddedClient(zk, session_timeout_ms=TIMEOUT_MS)
    once = States()

    def first_only(state: str) -> bool:
        once(state)
        return True

    client.add_listener(first_only)
    client.start()
    assert once.wait_for(1) == [KazooState.CONNECTED]
    zk.expire_session(session_id(client))
    drain(client)
    assert once.seen == [KazooState.CONNECTED]


def test_expiry_drops_the_sessions_watches_with_a_none_event(zk: EmbeddedZooKeeper) -> None:
    client = zk.connect(TIMEOUT_MS)
    writer = zk.connect(TIMEOUT_MS)
    client.create("/a")
    events = Events()
    client.get("/a", watch=events)
    zk.expire_session(session_id(client))
    assert events.next() == WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None)
    writer.set("/a", b"x")  # the new session does not inherit the old one's watches
    events.expect_none(client)


def test_many_clients_on_many_threads_get_distinct_sequential_names(
    zk: EmbeddedZooKeeper,
) -> None:
    clients = [zk.connect(TIMEOUT_MS) for _ in range(8)]
    clients[0].create("/queue")
    names: list[list[str]] = [[] for _ in clients]
    start = threading.Barrier(len(clients))

    def work(i: int) -> None:
        start.wait(WAIT_S)
        for _ in range(50):
            names[i].append(clients[i].create("/queue/item-", sequence=True, ephemeral=i % 2 == 0))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
        assert not thread.is_alive()
    created = [name for per_client in names for name in per_client]
    assert len(created) == len(set(created)) == 400
    assert sorted(created) == [f"/queue/item-{i:010d}" for i in range(400)]
    assert len(clients[1].get_children("/queue")) == 400


def test_clients_leave_no_threads_behind(clock: ManualClock) -> None:
    before = threading.active_count()
    server = EmbeddedZooKeeper(clock)
    stopped, expired, left_open = server.connect(), server.connect(), server.connect()
    stopped.stop()
    server.expire_session(session_id(expired))
    assert left_open.connected
    server.close()  # stops the expired client and the open one too
    assert threading.active_count() == before
