"""ZkModel, the pure core: tree, stats, transactions, sequential names, watches and sessions.

Every time is given explicitly; nothing here runs a thread.
"""

from __future__ import annotations

import pytest
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

from kafkactor.zk_model import Notification, ZkModel

T0 = 1_000


def event(kind: str, path: str) -> WatchedEvent:
    return WatchedEvent(kind, KeeperState.CONNECTED, path)


class Recorder:
    """A distinct, hashable watcher (the model never calls it: it only hands it back)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, watched: WatchedEvent) -> None:
        raise AssertionError("the pure model must not call watchers")

    def __repr__(self) -> str:
        return self.name


@pytest.fixture
def model() -> ZkModel:
    return ZkModel(tick_ms=2000, first_session_id=0x100)


# -- tree, stats, transactions ------------------------------------------------------------------


def test_a_fresh_model_has_the_nodes_of_a_fresh_server(model: ZkModel) -> None:
    assert model.get_children("/") == ["zookeeper"]
    assert model.get_children("/zookeeper") == ["config", "quota"]
    data, stat = model.get("/")
    assert data == b""
    assert stat == ZnodeStat(0, 0, 0, 0, 0, -1, 0, 0, 0, 1, 0)
    zookeeper = model.exists("/zookeeper")
    config = model.exists("/zookeeper/config")
    assert zookeeper is not None and config is not None
    assert (zookeeper.cversion, zookeeper.numChildren) == (-2, 2)  # as a real 3.8 server
    assert (config.aversion, config.cversion) == (-1, 0)
    assert model.zxid == 0


def test_create_returns_the_path_and_sets_every_stat_field(model: ZkModel) -> None:
    assert model.create("/a", b"hello", now_ms=T0) == "/a"
    data, stat = model.get("/a")
    assert data == b"hello"
    assert stat == ZnodeStat(
        czxid=1,
        mzxid=1,
        ctime=T0,
        mtime=T0,
        version=0,
        cversion=0,
        aversion=0,
        ephemeralOwner=0,
        dataLength=5,
        numChildren=0,
        pzxid=1,
    )
    root = model.exists("/")
    assert root is not None
    assert (root.numChildren, root.cversion, root.pzxid, root.mzxid) == (2, 0, 1, 0)


def test_set_bumps_version_mzxid_and_mtime_only(model: ZkModel) -> None:
    model.create("/a", b"1", now_ms=T0)
    stat = model.set("/a", b"22", now_ms=T0 + 5)
    assert (stat.version, stat.mzxid, stat.mtime, stat.dataLength) == (1, 2, T0 + 5, 2)
    assert (stat.czxid, stat.ctime, stat.cversion, stat.pzxid) == (1, T0, 0, 1)
    assert model.set("/a", b"333", 1, now_ms=T0 + 6).version == 2
    assert model.get("/a")[0] == b"333"


def test_child_changes_move_the_parents_cversion_and_pzxid_not_its_mzxid(model: ZkModel) -> None:
    model.create("/p", now_ms=T0)  # zxid 1
    model.create("/p/a", now_ms=T0)  # zxid 2
    model.create("/p/b", now_ms=T0)  # zxid 3
    model.delete("/p/a")  # zxid 4
    stat = model.exists("/p")
    assert stat is not None
    assert (stat.cversion, stat.pzxid, stat.mzxid) == (3, 4, 1)
    assert (stat.numChildren, stat.version) == (1, 0)


def test_zxids_increase_with_every_write_failed_ones_included(model: ZkModel) -> None:
    model.create("/a", now_ms=T0)
    assert model.zxid == 1
    with pytest.raises(NodeExistsError):
        model.create("/a", now_ms=T0)
    assert model.zxid == 2  # a real server logs a failed write as an error transaction
    model.create("/b", now_ms=T0)
    b = model.exists("/b")
    assert b is not None and b.czxid == 3
    model.get("/a")
    model.exists("/zz")
    model.get_children("/")
    assert model.zxid == 3  # reads are not transactions
    model.open_session(10_000, T0)
    assert model.zxid == 4  # nor is opening a session one


def test_makepath_creates_missing_ancestors_persistent_and_empty(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]  # zxid 1
    path = model.create("/x/y/z", b"v", ephemeral_owner=sid, makepath=True, now_ms=T0)
    assert path == "/x/y/z"
    x, y, z = (model.exists(p) for p in ("/x", "/x/y", "/x/y/z"))
    assert x is not None and y is not None and z is not None
    # kazoo's makepath: the first create fails (zxid 2), the ancestors follow, then the node
    assert (x.czxid, y.czxid, z.czxid) == (3, 4, 5)
    assert (x.ephemeralOwner, y.ephemeralOwner, z.ephemeralOwner) == (0, 0, sid)
    assert model.get("/x/y")[0] == b""
    assert model.create("/x/y/w", makepath=True, now_ms=T0) == "/x/y/w"  # parent exists: 1 txn
    assert model.zxid == 6


def test_create_errors(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    with pytest.raises(NoNodeError):
        model.create("/missing/child", now_ms=T0)
    model.create("/a", now_ms=T0)
    with pytest.raises(NodeExistsError):
        model.create("/a", now_ms=T0)
    with pytest.raises(NodeExistsError):
        model.create("/", now_ms=T0)
    model.create("/e", ephemeral_owner=sid, now_ms=T0)
    with pytest.raises(NoChildrenForEphemeralsError):
        model.create("/e/child", now_ms=T0)
    with pytest.raises(NoChildrenForEphemeralsError):
        model.create("/e/child/deeper", makepath=True, now_ms=T0)
    with pytest.raises(NodeExistsError):  # the server checks existence before the parent's kind
        model.create("/e", now_ms=T0)
    with pytest.raises(SessionExpiredError):
        model.create("/f", ephemeral_owner=sid + 99, now_ms=T0)


@pytest.mark.parametrize(
    "path", ["", "a", "a/b", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/.", "/a\x00b", "/\x7f"]
)
def test_invalid_paths_are_bad_arguments_for_every_operation(model: ZkModel, path: str) -> None:
    model.create("/a", now_ms=T0)
    with pytest.raises(BadArgumentsError):
        model.create(path, now_ms=T0)
    with pytest.raises(BadArgumentsError):
        model.get(path)
    with pytest.raises(BadArgumentsError):
        model.exists(path)
    with pytest.raises(BadArgumentsError):
        model.get_children(path)
    with pytest.raises(BadArgumentsError):
        model.set(path, b"", now_ms=T0)
    with pytest.raises(BadArgumentsError):
        model.delete(path)


def test_set_errors(model: ZkModel) -> None:
    with pytest.raises(NoNodeError):
        model.set("/a", b"x", now_ms=T0)
    model.create("/a", now_ms=T0)
    with pytest.raises(BadVersionError):
        model.set("/a", b"x", 1, now_ms=T0)
    model.set("/a", b"x", 0, now_ms=T0)
    with pytest.raises(BadVersionError):
        model.set("/a", b"y", 0, now_ms=T0)
    assert model.get("/a")[0] == b"x"


def test_delete_errors_in_the_servers_order(model: ZkModel) -> None:
    with pytest.raises(NoNodeError):
        model.delete("/a")
    with pytest.raises(NoNodeError):
        model.delete("/a", 3)
    model.create("/a", now_ms=T0)
    model.create("/a/b", now_ms=T0)
    with pytest.raises(BadVersionError):  # version before emptiness
        model.delete("/a", 5)
    with pytest.raises(NotEmptyError):
        model.delete("/a", 0)
    model.delete("/a/b", 0)
    model.delete("/a", 0)
    assert model.exists("/a") is None


@pytest.mark.parametrize("path", ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"])
def test_system_nodes_cannot_be_deleted(model: ZkModel, path: str) -> None:
    with pytest.raises(BadArgumentsError):
        model.delete(path)


def test_get_and_get_children_of_a_missing_node(model: ZkModel) -> None:
    with pytest.raises(NoNodeError):
        model.get("/nope")
    with pytest.raises(NoNodeError):
        model.get_children("/nope")
    assert model.exists("/nope") is None


def test_children_are_listed_sorted(model: ZkModel) -> None:
    for name in ("c", "a", "b"):
        model.create(f"/p/{name}", makepath=True, now_ms=T0)
    assert model.get_children("/p") == ["a", "b", "c"]


# -- sequential nodes ---------------------------------------------------------------------------


def test_sequence_numbers_are_shared_across_prefixes_and_never_reused(model: ZkModel) -> None:
    model.create("/q", now_ms=T0)
    assert model.create("/q/a-", sequence=True, now_ms=T0) == "/q/a-0000000000"
    assert model.create("/q/b-", sequence=True, now_ms=T0) == "/q/b-0000000001"
    model.create("/q/plain", now_ms=T0)  # a plain child takes a number too
    model.delete("/q/b-0000000001")  # a deletion does not, nor gives one back
    model.delete("/q/a-0000000000")
    assert model.create("/q/a-", sequence=True, now_ms=T0) == "/q/a-0000000003"
    stat = model.exists("/q")
    # the reported cversion counts creations and deletions: 2 * 4 created - 2 children
    assert stat is not None and (stat.cversion, stat.numChildren) == (6, 2)


def test_sequential_name_part_may_be_empty(model: ZkModel) -> None:
    model.create("/q", now_ms=T0)
    assert model.create("/q/", sequence=True, now_ms=T0) == "/q/0000000000"
    assert model.create("/r/", sequence=True, makepath=True, now_ms=T0) == "/r/0000000000"


def test_a_sequential_name_taken_by_hand_is_node_exists(model: ZkModel) -> None:
    model.create("/q/n-0000000001", makepath=True, now_ms=T0)  # cversion 0 -> 1
    with pytest.raises(NodeExistsError):
        model.create("/q/n-", sequence=True, now_ms=T0)


def test_sequential_ephemerals_belong_to_their_session(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/q", now_ms=T0)
    path = model.create("/q/m-", ephemeral_owner=sid, sequence=True, now_ms=T0)
    stat = model.exists(path)
    assert stat is not None and stat.ephemeralOwner == sid
    assert model.ephemerals(sid) == [path]


# -- watches ------------------------------------------------------------------------------------


def test_data_watch_fires_changed_once(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/a", now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/a", "data", w)
    model.set("/a", b"1", now_ms=T0)
    assert model.take_notifications() == [Notification(sid, w, event(EventType.CHANGED, "/a"))]
    model.set("/a", b"2", now_ms=T0)
    assert model.take_notifications() == []  # one-shot


def test_data_watch_fires_deleted(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/a", now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/a", "data", w)
    model.delete("/a")
    assert model.take_notifications() == [Notification(sid, w, event(EventType.DELETED, "/a"))]


def test_exists_watch_on_a_missing_node_fires_created(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    w = Recorder("w")
    model.add_watch(sid, "/a", "exists", w)
    model.create("/a", now_ms=T0)
    assert model.take_notifications() == [Notification(sid, w, event(EventType.CREATED, "/a"))]


def test_exists_watch_on_an_existing_node_is_a_data_watch(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/a", now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/a", "exists", w)
    model.set("/a", b"x", now_ms=T0)
    assert model.take_notifications() == [Notification(sid, w, event(EventType.CHANGED, "/a"))]


def test_data_and_child_watches_need_the_node(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    with pytest.raises(NoNodeError):
        model.add_watch(sid, "/a", "data", Recorder("w"))
    with pytest.raises(NoNodeError):
        model.add_watch(sid, "/a", "child", Recorder("w"))
    assert model.watch_count() == 0


def test_child_watch_fires_child_on_create_and_delete_of_a_child(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/p", now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/p", "child", w)
    model.set("/p", b"data", now_ms=T0)  # data changes do not touch child watches
    assert model.take_notifications() == []
    model.create("/p/c", now_ms=T0)
    assert model.take_notifications() == [Notification(sid, w, event(EventType.CHILD, "/p"))]
    model.add_watch(sid, "/p", "child", w)
    model.delete("/p/c")
    assert model.take_notifications() == [Notification(sid, w, event(EventType.CHILD, "/p"))]


def test_child_watch_fires_deleted_when_the_node_itself_goes(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/p", now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/p", "child", w)
    model.delete("/p")
    assert model.take_notifications() == [Notification(sid, w, event(EventType.DELETED, "/p"))]


def test_create_fires_created_then_the_parents_child(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/p", now_ms=T0)
    on_node, on_parent = Recorder("node"), Recorder("parent")
    model.add_watch(sid, "/p/c", "exists", on_node)
    model.add_watch(sid, "/p", "child", on_parent)
    model.create("/p/c", now_ms=T0)
    assert model.take_notifications() == [
        Notification(sid, on_node, event(EventType.CREATED, "/p/c")),
        Notification(sid, on_parent, event(EventType.CHILD, "/p")),
    ]


def test_one_watcher_registered_twice_fires_once(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/a", now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/a", "data", w)
    model.add_watch(sid, "/a", "data", w)
    model.add_watch(sid, "/a", "exists", w)  # the same table as get's
    model.set("/a", b"x", now_ms=T0)
    assert len(model.take_notifications()) == 1


def test_watches_are_per_session(model: ZkModel) -> None:
    s1 = model.open_session(10_000, T0)[0]
    s2 = model.open_session(10_000, T0)[0]
    model.create("/a", now_ms=T0)
    w = Recorder("w")
    model.add_watch(s1, "/a", "data", w)
    model.add_watch(s2, "/a", "data", w)
    model.set("/a", b"x", now_ms=T0)
    assert [n.session_id for n in model.take_notifications()] == [s1, s2]


def test_failed_writes_fire_nothing(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/a", now_ms=T0)
    model.add_watch(sid, "/a", "data", Recorder("w"))
    with pytest.raises(BadVersionError):
        model.set("/a", b"x", 7, now_ms=T0)
    with pytest.raises(NodeExistsError):
        model.create("/a", now_ms=T0)
    assert model.take_notifications() == []
    assert model.watch_count(sid) == 1


def test_add_watch_needs_a_live_session(model: ZkModel) -> None:
    model.create("/a", now_ms=T0)
    with pytest.raises(SessionExpiredError):
        model.add_watch(0xDEAD, "/a", "data", Recorder("w"))


# -- sessions -----------------------------------------------------------------------------------


def test_sessions_get_increasing_ids_passwords_and_clamped_timeouts(model: ZkModel) -> None:
    a = model.open_session(10_000, T0)
    b = model.open_session(1, T0)
    c = model.open_session(10**9, T0)
    assert (a[0], b[0], c[0]) == (0x100, 0x101, 0x102)
    assert len(a[1]) == 16 and a[1] != b[1]
    assert (a[2], b[2], c[2]) == (10_000, 4_000, 40_000)  # [2, 20] ticks of 2000 ms
    assert model.sessions() == [0x100, 0x101, 0x102]


def test_default_session_ids_look_like_a_servers() -> None:
    sid = ZkModel().open_session(10_000, T0)[0]
    assert sid >> 56 == 1 and sid < 2**63


def test_a_session_expires_once_its_timeout_passes_without_heartbeat(model: ZkModel) -> None:
    sid, _, timeout = model.open_session(10_000, T0)
    assert model.deadline_ms(sid) == T0 + timeout
    assert model.expire_due(T0 + timeout - 1) == []
    assert model.touch(sid, T0 + 4_000) == T0 + 4_000 + timeout
    assert model.expire_due(T0 + timeout) == []
    assert model.expire_due(T0 + 4_000 + timeout) == [sid]
    assert model.sessions() == []
    assert model.deadline_ms(sid) is None
    with pytest.raises(SessionExpiredError):
        model.touch(sid, T0)
    with pytest.raises(SessionExpiredError):
        model.check_session(sid)


def test_expiry_deletes_ephemerals_in_one_transaction_and_fires_others_watches(
    model: ZkModel,
) -> None:
    owner = model.open_session(10_000, T0)[0]
    other = model.open_session(10_000, T0)[0]
    model.touch(other, T0 + 9_000)
    model.create("/brokers/ids/1", b"b1", ephemeral_owner=owner, makepath=True, now_ms=T0)
    model.create("/controller", ephemeral_owner=owner, now_ms=T0)
    on_node, on_parent = Recorder("node"), Recorder("parent")
    model.add_watch(other, "/controller", "exists", on_node)
    model.add_watch(other, "/brokers/ids", "child", on_parent)
    own = Recorder("own")
    model.add_watch(owner, "/controller", "data", own)
    before = model.zxid

    assert model.expire_due(T0 + 10_000) == [owner]

    assert model.exists("/brokers/ids/1") is None and model.exists("/controller") is None
    assert model.ephemerals(owner) == []
    assert model.zxid == before + 1  # the close transaction deletes them all
    ids = model.exists("/brokers/ids")
    assert ids is not None and ids.pzxid == before + 1 and ids.cversion == 2
    assert model.take_notifications() == [
        Notification(other, on_parent, event(EventType.CHILD, "/brokers/ids")),
        Notification(other, on_node, event(EventType.DELETED, "/controller")),
        # the expired session's own watcher is not fired by the deletion; its client's watchers
        # get the NONE event kazoo gives them when the server drops the connection
        Notification(owner, own, WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None)),
    ]
    assert model.watch_count() == 0
    assert model.sessions() == [other]


def test_close_session_ends_it_at_once(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/e", ephemeral_owner=sid, now_ms=T0)
    w = Recorder("w")
    model.add_watch(sid, "/", "child", w)
    assert model.close_session(sid) is True
    assert model.exists("/e") is None
    assert model.take_notifications() == []  # a stopped kazoo client never calls its watchers
    assert model.watch_count() == 0
    assert model.close_session(sid) is False
    assert model.expire_session(sid) is False


def test_expire_session_ends_it_whatever_its_deadline(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/e", ephemeral_owner=sid, now_ms=T0)
    assert model.expire_session(sid) is True
    assert model.exists("/e") is None
    assert model.sessions() == []


def test_sequence_numbers_are_not_reused_after_expiry(model: ZkModel) -> None:
    sid = model.open_session(10_000, T0)[0]
    model.create("/q", now_ms=T0)
    model.create("/q/n-", ephemeral_owner=sid, sequence=True, now_ms=T0)
    model.expire_session(sid)
    assert model.create("/q/n-", sequence=True, now_ms=T0) == "/q/n-0000000001"
