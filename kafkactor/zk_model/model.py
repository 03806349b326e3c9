"""ZooKeeper's server state in memory: the znode tree, transactions, sessions and watches."""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent, ZnodeStat

from kafkactor.zk_model import paths
from kafkactor.zk_model.sessions import SessionTracker
from kafkactor.zk_model.watches import Notification, Watcher, WatchKind, WatchTable

# The nodes a fresh ZooKeeper 3.5+ server has, which no client may delete.
SYSTEM_NODES = ("/", "/zookeeper", "/zookeeper/config", "/zookeeper/quota")


@dataclass(slots=True)
class _Znode:
    """One znode: its data and the fields of its stat that are not derived.

    Like ZooKeeper's DataNode, it counts child creations (`creates`, the sequence counter) and
    reports cversion as creations plus deletions: 2 * creates - number of children.
    """

    data: bytes
    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    ephemeral_owner: int
    pzxid: int
    version: int = 0
    creates: int = 0
    aversion: int = 0
    children: set[str] = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(
            self.czxid,
            self.mzxid,
            self.ctime,
            self.mtime,
            self.version,
            2 * self.creates - len(self.children),
            self.aversion,
            self.ephemeral_owner,
            len(self.data),
            len(self.children),
            self.pzxid,
        )


class ZkModel:
    """A standalone ZooKeeper server's state: DataTree, transaction ids, sessions and watches.

    Pure: no threads, no locks, no clock. Writes take the time (`now_ms`, for ctime / mtime and
    session heartbeats) from the caller, and the watches they fire are queued as `Notification`s
    that the caller collects with `take_notifications()` and delivers; nothing here calls a
    watcher. Values and errors are kazoo's own types (ZnodeStat, WatchedEvent, NoNodeError, ...),
    so that the model and a real server can be compared field by field.

    Transactions follow ZooKeeper 3.8: every write request (create, set, delete; failed ones
    too, which the server logs as error transactions), every session open and every session
    close takes the next zxid. Ephemerals of an ending session are deleted in its close
    transaction, all with the same zxid. A sequential node's suffix is the number of children
    its parent ever had created, formatted %010d: shared by all prefixes under one parent, never
    reused (deletions do not lower it). The reported cversion counts creations and deletions.
    Children lists are returned sorted (a server returns them in no particular order).
    """

    __slots__ = ("_ephemerals", "_nodes", "_pending", "_sessions", "_watches", "_zxid")

    def __init__(self, *, tick_ms: int = 2000, first_session_id: int | None = None) -> None:
        self._zxid = 0
        self._nodes: dict[str, _Znode] = {}
        self._sessions = SessionTracker(tick_ms=tick_ms, first_session_id=first_session_id)
        self._ephemerals: dict[int, set[str]] = {}
        self._watches = WatchTable()
        self._pending: list[Notification] = []
        for path in SYSTEM_NODES:
            # as a fresh 3.8 server shows them: zxid 0, time 0, no creations counted (so the
            # cversion of "/" is -1 and of "/zookeeper" -2), and aversion -1 on /zookeeper/config
            self._nodes[path] = _Znode(b"", 0, 0, 0, 0, 0, 0)
            if path != "/":
                parent, name = paths.split(path)
                self._nodes[parent].children.add(name)
        self._nodes["/zookeeper/config"].aversion = -1

    @property
    def zxid(self) -> int:
        """The id of the last transaction."""
        return self._zxid

    @property
    def tick_ms(self) -> int:
        return self._sessions.tick_ms

    # -- reads --------------------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        node = self._node(path)
        return node.data, node.stat()

    def exists(self, path: str) -> ZnodeStat | None:
        paths.validate(path)
        node = self._nodes.get(path)
        return None if node is None else node.stat()

    def get_children(self, path: str) -> list[str]:
        return sorted(self._node(path).children)

    # -- writes -------------------------------------------------------------------------------

    def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral_owner: int = 0,
        sequence: bool = False,
        makepath: bool = False,
        now_ms: int,
    ) -> str:
        """Create a znode; returns its path (with the sequence suffix when `sequence`).

        An `ephemeral_owner` (a live session id) makes the node ephemeral. With `makepath`, a
        create that fails for a missing parent creates the missing ancestors (persistent, empty,
        one transaction each) and is tried again, exactly as kazoo's `makepath` does.
        """
        if ephemeral_owner:
            self._sessions.check(ephemeral_owner)
        try:
            return self._create(path, value, ephemeral_owner, sequence, now_ms)
        except NoNodeError:
            if not makepath:
                raise
        for ancestor in paths.ancestors(path):
            if ancestor not in self._nodes:
                self._create(ancestor, b"", 0, False, now_ms)
        return self._create(path, value, ephemeral_owner, sequence, now_ms)

    def set(self, path: str, value: bytes, version: int = -1, *, now_ms: int) -> ZnodeStat:
        """Replace a znode's data if `version` is -1 or its current data version."""
        zxid = self._next_zxid()
        node = self._node(path)
        self._check_version(path, node, version)
        node.data = value
        node.version += 1
        node.mzxid = zxid
        node.mtime = now_ms
        self._pending += self._watches.trigger(path, EventType.CHANGED)
        return node.stat()

    def delete(self, path: str, version: int = -1) -> None:
        """Delete a childless znode if `version` is -1 or its current data version."""
        zxid = self._next_zxid()
        if path in SYSTEM_NODES:
            raise BadArgumentsError(f"cannot delete {path!r}")
        node = self._node(path)
        self._check_version(path, node, version)
        if node.children:
            raise NotEmptyError(path)
        self._remove(path, zxid)

    # -- watches ------------------------------------------------------------------------------

    def add_watch(self, session_id: int, path: str, kind: WatchKind, watcher: Watcher) -> None:
        """Leave a one-shot watch of a live session on `path`.

        "data" (what get leaves) and "child" (get_children) need the node to exist; "exists"
        may watch a missing node and then fires CREATED when it is created.
        """
        self._sessions.check(session_id)
        if kind == "exists":
            paths.validate(path)
        else:
            self._node(path)
        self._watches.add(session_id, path, kind, watcher)

    def take_notifications(self) -> list[Notification]:
        """The watches fired since the last call, in the order they fired."""
        pending, self._pending = self._pending, []
        return pending

    def watch_count(self, session_id: int | None = None) -> int:
        """Registered watchers (of one session, or of all)."""
        return self._watches.count(session_id)

    # -- sessions -----------------------------------------------------------------------------

    def open_session(self, timeout_ms: int, now_ms: int) -> tuple[int, bytes, int]:
        """Open a session (a transaction); returns (session id, password, negotiated timeout)."""
        self._next_zxid()
        session = self._sessions.open(timeout_ms, now_ms)
        return session.session_id, session.password, session.timeout_ms

    def negotiate_timeout(self, timeout_ms: int) -> int:
        """The session timeout this server grants for a requested one ([2, 20] ticks)."""
        return self._sessions.negotiate(timeout_ms)

    def check_session(self, session_id: int) -> None:
        """SessionExpiredError unless `session_id` is a live session."""
        self._sessions.check(session_id)

    def touch(self, session_id: int, now_ms: int) -> int:
        """A heartbeat of a live session at `now_ms`; returns the session's new deadline."""
        return self._sessions.touch(session_id, now_ms)

    def deadline_ms(self, session_id: int) -> int | None:
        """When a live session expires without another heartbeat (None: not live)."""
        session = self._sessions.get(session_id)
        return None if session is None else session.deadline_ms

    def expire_due(self, now_ms: int) -> list[int]:
        """Expire every session whose deadline has passed by `now_ms`; returns their ids."""
        expired = self._sessions.due(now_ms)
        for session_id in expired:
            self._end_session(session_id, expired=True)
        return expired

    def expire_session(self, session_id: int) -> bool:
        """Expire a session now; False when it was not live.

        The session's own watchers are handed back with WatchedEvent(NONE, CONNECTING, None):
        what kazoo calls them with when the server drops the connection of an expired session.
        """
        return self._end_session(session_id, expired=True)

    def close_session(self, session_id: int) -> bool:
        """End a session as its client's close does; False when it was not live.

        The session's own watchers are dropped without a call: a stopped kazoo client has
        stopped its callback thread before it resets them.
        """
        return self._end_session(session_id, expired=False)

    def sessions(self) -> list[int]:
        """The live session ids, oldest first."""
        return self._sessions.ids()

    def ephemerals(self, session_id: int) -> list[str]:
        """The paths of the ephemeral nodes a session owns, sorted."""
        return sorted(self._ephemerals.get(session_id, ()))

    # -- internals ----------------------------------------------------------------------------

    def _next_zxid(self) -> int:
        self._zxid += 1
        return self._zxid

    def _node(self, path: str) -> _Znode:
        paths.validate(path)
        node = self._nodes.get(path)
        if node is None:
            raise NoNodeError(path)
        return node

    @staticmethod
    def _check_version(path: str, node: _Znode, version: int) -> None:
        if version not in (-1, node.version):
            raise BadVersionError(f"{path}: version {version}, current {node.version}")

    def _create(self, path: str, value: bytes, owner: int, sequence: bool, now_ms: int) -> str:
        # the order of checks is the server's: path, parent, sequence suffix, exists, ephemeral
        zxid = self._next_zxid()
        paths.validate(path, sequential=sequence)
        parent_path = paths.split(path)[0]
        parent = self._nodes.get(parent_path)
        if parent is None:
            raise NoNodeError(path)
        if sequence:
            path = f"{path}{parent.creates:010d}"
        if path in self._nodes:
            raise NodeExistsError(path)
        if parent.ephemeral_owner:
            raise NoChildrenForEphemeralsError(path)
        self._nodes[path] = _Znode(value, zxid, zxid, now_ms, now_ms, owner, zxid)
        parent.children.add(paths.split(path)[1])
        parent.creates += 1
        parent.pzxid = zxid
        if owner:
            self._ephemerals.setdefault(owner, set()).add(path)
        self._pending += self._watches.trigger(path, EventType.CREATED)
        self._pending += self._watches.trigger(parent_path, EventType.CHILD)
        return path

    def _remove(self, path: str, zxid: int) -> None:
        node = self._nodes.pop(path)
        parent_path, name = paths.split(path)
        parent = self._nodes[parent_path]
        parent.children.discard(name)
        parent.pzxid = zxid
        owned = self._ephemerals.get(node.ephemeral_owner)
        if owned is not None:
            owned.discard(path)
            if not owned:
                del self._ephemerals[node.ephemeral_owner]
        self._pending += self._watches.trigger(path, EventType.DELETED)
        self._pending += self._watches.trigger(parent_path, EventType.CHILD)

    def _end_session(self, session_id: int, *, expired: bool) -> bool:
        if self._sessions.remove(session_id) is None:
            return False
        zxid = self._next_zxid()  # the closeSession transaction
        # The session's connection is gone first: its own watches do not see its ephemerals go.
        own = self._watches.drop_session(session_id)
        for path in sorted(self._ephemerals.pop(session_id, ())):
            self._remove(path, zxid)
        if expired:  # kazoo calls the watchers it held when the connection was dropped
            dropped = WatchedEvent(EventType.NONE, KeeperState.CONNECTING, None)
            self._pending += [Notification(session_id, watcher, dropped) for watcher in own]
        return True
