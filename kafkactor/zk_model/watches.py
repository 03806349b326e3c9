"""One-shot watches: ZooKeeper's data and child WatchManagers joined with kazoo's watcher tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

Watcher = Callable[[WatchedEvent], object]
"""A watch callback, as kazoo takes it: called once with the WatchedEvent that fired it."""

WatchKind = Literal["data", "exists", "child"]
"""Which read set the watch: get ("data"), exists ("exists") or get_children ("child")."""

# session id -> that session's watchers (an insertion-ordered set) on one path
_PathWatches = dict[int, dict[Watcher, None]]


class Notification(NamedTuple):
    """A fired watch for the shell to deliver: call `watcher(event)` on the session's client."""

    session_id: int
    watcher: Watcher
    event: WatchedEvent


class WatchTable:
    """The watches of every session: ZooKeeper's `dataWatches` and `childWatches`.

    The server keeps one entry per (path, session); kazoo keeps, per path, the set of callables
    that asked for it, and hands one server event to all of them. This table keeps both levels at
    once. "data" (get) and "exists" watches share one table, as in ZooKeeper and kazoo: an exists
    watch on a missing node fires CREATED, on an existing node CHANGED or DELETED. Each watch
    fires once and is removed; one callable registered twice for the same path and table fires
    once. DELETED goes to the data and the child watchers of the node (kazoo calls a callable that
    is in both twice, and so does this table).
    """

    __slots__ = ("_child", "_data")

    def __init__(self) -> None:
        self._data: dict[str, _PathWatches] = {}
        self._child: dict[str, _PathWatches] = {}

    def add(self, session_id: int, path: str, kind: WatchKind, watcher: Watcher) -> None:
        table = self._child if kind == "child" else self._data
        table.setdefault(path, {}).setdefault(session_id, {})[watcher] = None

    def trigger(self, path: str, event_type: str) -> list[Notification]:
        """Fire and remove the watches an `event_type` (an EventType) on `path` triggers."""
        if event_type == EventType.CHILD:
            fired = [self._child.pop(path, {})]
        elif event_type == EventType.DELETED:
            fired = [self._data.pop(path, {}), self._child.pop(path, {})]
        else:  # CREATED, CHANGED
            fired = [self._data.pop(path, {})]
        by_session: dict[int, list[Watcher]] = {}
        for watches in fired:
            for session_id, watchers in watches.items():
                by_session.setdefault(session_id, []).extend(watchers)
        event = WatchedEvent(event_type, KeeperState.CONNECTED, path)
        return [
            Notification(session_id, watcher, event)
            for session_id, watchers in by_session.items()
            for watcher in watchers
        ]

    def drop_session(self, session_id: int) -> list[Watcher]:
        """Remove every watch of `session_id`; returns its watchers (data ones first)."""
        dropped: list[Watcher] = []
        for table in (self._data, self._child):
            for path in list(table):
                watchers = table[path].pop(session_id, None)
                if watchers is not None:
                    dropped.extend(watchers)
                    if not table[path]:
                        del table[path]
        return dropped

    def count(self, session_id: int | None = None) -> int:
        """How many watchers are registered (for one session, or for all)."""
        return sum(
            len(watchers)
            for table in (self._data, self._child)
            for watches in table.values()
            for sid, watchers in watches.items()
            if session_id is None or sid == session_id
        )
