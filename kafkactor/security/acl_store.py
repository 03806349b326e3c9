"""ACLs in ZooKeeper, as Kafka 2.x's `AclAuthorizer` keeps them, feeding an `AclAuthorizer`.

`AclStore(zookeeper_client_getter, authorizer)` is one broker's side of Kafka's ACL storage:

- `start()` creates the ACL paths, watches both change-notification roots and loads every
  ACL into the authorizer (watch first, then load, as Kafka does, so no change slips between);
  `stop()` ends the watching. That is all a broker calls (`kafkactor/actors/broker.py`).
- `create_acls(bindings)` and `delete_acls(filters)` are CreateAcls' and DeleteAcls' work
  (Kafka's `AclAuthorizer.createAcls` / `deleteAcls`): each resource's znode is rewritten with
  optimistic versioned writes (a conditional set, create or delete, read again and retried
  when another writer got there first: Kafka's `updateResourceAcls`), this broker's snapshot
  is updated at once, and a change notification tells the others. They block on ZooKeeper:
  KafkaApis runs them as `Admin` steps, off its actor thread.
- A change notification (`/kafka-acl-changes/acl_changes_<n>`, or the extended one) makes
  every broker's store read that resource's znode again and put it in its authorizer's
  snapshot (Kafka's `ZkNodeChangeNotificationListener` and `processAclChangeNotification`).
  Notifications older than 15 minutes are deleted by whoever processes them.

As in Kafka, notifications are processed by a thread of the store's own
(`acl-change-listener-<broker>`, blocked on a queue between rounds): the watch callbacks, which
run on the broker's shared ZooKeeper event thread, only queue a round, so a slow reload never
holds up the controller's watches. After a session expiry (LOST, then CONNECTED) a round is
queued for each root: the watches are set again and the notifications missed meanwhile
processed. Rounds and writes are serialized by a lock.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from kafkactor.security import acl_znodes as znodes
from kafkactor.security.acl import AclBinding, ResourcePattern
from kafkactor.security.authorizer import (
    AccessControlEntry,
    AclAuthorizer,
    AclBindingFilter,
    DeletedBinding,
)
from kafkactor.timer import Clock, SystemClock
from kafkactor.tracing import get_logger

__all__ = ["AclStore", "AclUpdateFailedError", "DeletedBinding", "InvalidAclBindingError"]

_log = get_logger("kafkactor.security.acl_store")

CHANGE_EXPIRATION_MS: Final = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's default
MAX_UPDATE_RETRIES: Final = 10  # AclAuthorizer.maxUpdateRetries
UNKNOWN_VERSION: Final = -2  # ZkVersion.UnknownVersion: the znode does not exist


class InvalidAclBindingError(ValueError):
    """A binding the authorizer refuses to store (INVALID_REQUEST, "Failed to create ACL")."""


class AclUpdateFailedError(RuntimeError):
    """A resource's znode could not be rewritten within the retries (UNKNOWN_SERVER_ERROR)."""


@dataclass(slots=True)
class _Versioned:
    acls: frozenset[AccessControlEntry]
    version: int = UNKNOWN_VERSION

    @property
    def exists(self) -> bool:
        return self.version != UNKNOWN_VERSION


@dataclass(slots=True)
class _Watched:
    """One notification root: the last sequence number processed."""

    root: str
    last_executed: int = -1
    watch: Callable[[Any], None] = field(default=lambda _event: None)


class AclStore:
    """Kafka 2.x's ZooKeeper ACL storage and change listener for one broker (see the module).

    `zookeeper_client_getter` returns the broker's ZooKeeper client of the moment (kazoo's
    `KazooClient` or the embedded model's client); `authorizer` is the `AclAuthorizer` whose
    snapshot this store keeps current, and whose `writer` this store becomes (CreateAcls and
    DeleteAcls reach it through the authorizer, as through Kafka's `Authorizer`). `broker_id`
    only labels events.
    """

    def __init__(
        self,
        zookeeper_client_getter: Callable[[], Any],
        authorizer: AclAuthorizer,
        *,
        broker_id: int | None = None,
        clock: Clock | None = None,
        expiration_ms: int = CHANGE_EXPIRATION_MS,
        max_update_retries: int = MAX_UPDATE_RETRIES,
    ) -> None:
        self._zk = zookeeper_client_getter
        self.authorizer = authorizer
        authorizer.writer = self
        self.broker_id = broker_id
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.expiration_ms = expiration_ms
        self.max_update_retries = max_update_retries
        self._lock = threading.RLock()  # one writer or notification round at a time
        self._watched = [
            _Watched(znodes.LITERAL_ACL_CHANGES),
            _Watched(znodes.EXTENDED_ACL_CHANGES),
        ]
        for watched in self._watched:
            watched.watch = self._watch_of(watched)
        self._running = False
        self._lost = False
        self._client: Any = None
        self._rounds: queue.SimpleQueue[_Watched | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> AclStore:
        """Create the ACL paths, watch the change roots, load every ACL (blocks on ZooKeeper)."""
        with self._lock:
            zk = self._zk()
            if zk is None:
                raise RuntimeError(
                    "AclStore.start needs a started ZooKeeper client: start the store once "
                    "the broker's ZooKeeper session is up"
                )
            self._client = zk
            self._running = True
            self.create_acl_paths()
            zk.add_listener(self._state_changed)
            for watched in self._watched:
                self._process(watched, initial=True)
            self.load_all()
            self._thread = threading.Thread(
                target=self._run,
                name=f"acl-change-listener-{self.broker_id}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop reacting to notifications (the session itself is the broker's)."""
        with self._lock:
            self._running = False
            client, self._client = self._client, None
            thread, self._thread = self._thread, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.remove_listener(self._state_changed)
        if thread is not None:
            self._rounds.put(None)
            if thread is not threading.current_thread():
                thread.join(timeout=10)

    def _run(self) -> None:
        """The change listener's thread: one round per queued root, until `stop`."""
        while (watched := self._rounds.get()) is not None:
            try:
                self._process(watched)
            except Exception as error:  # a ZooKeeper failure: the next change tries again
                self._invalid(watched.root, f"processing notifications failed: {error!r}")

    def create_acl_paths(self) -> None:
        """Kafka's `createAclPaths`: each store's root, its resource-type children, and the
        two notification roots."""
        zk = self._zk()
        for pattern_type in znodes.STORED_PATTERN_TYPES:
            root = znodes.acl_root(pattern_type)
            for resource_type in znodes.CONCRETE_RESOURCE_TYPES:
                zk.ensure_path(f"{root}/{znodes.resource_type_name(resource_type)}")
        zk.ensure_path(znodes.LITERAL_ACL_CHANGES)
        zk.ensure_path(znodes.EXTENDED_ACL_CHANGES)

    def load_all(self) -> None:
        """Every ACL in ZooKeeper into the authorizer (Kafka's `loadAllAcls`); resource types
        and znodes Kafka would not read are skipped with an event."""
        zk = self._zk()
        loaded: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        with self._lock:
            for pattern_type in znodes.STORED_PATTERN_TYPES:
                root = znodes.acl_root(pattern_type)
                for type_name in _children(zk, root):
                    try:
                        resource_type = znodes.resource_type_from_name(type_name)
                    except ValueError as error:
                        self._invalid(f"{root}/{type_name}", str(error))
                        continue
                    for name in _children(zk, f"{root}/{type_name}"):
                        pattern = ResourcePattern(resource_type, name, pattern_type)
                        try:
                            loaded[pattern] = self._read(pattern).acls
                        except znodes.MalformedAclZnodeError as error:
                            self._invalid(error.path, error.reason)
            self.authorizer.replace_all(loaded)

    # -- CreateAcls / DeleteAcls -------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[Exception | None]:
        """Add each binding (Kafka's `createAcls`); per binding, None or why it failed
        (`InvalidAclBindingError`, `AclUpdateFailedError`)."""
        results: list[Exception | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            error = _validate(binding)
            if error is not None:
                results[index] = error
            else:
                by_pattern.setdefault(binding.pattern, []).append(index)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                added = frozenset(AccessControlEntry.of(bindings[i]) for i in indexes)
                try:
                    self._update(pattern, added.union)
                except Exception as error:  # per resource, as Kafka's result per binding
                    for i in indexes:
                        results[i] = error
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[DeletedBinding]]:
        """Remove what each filter matches (Kafka's `deleteAcls`); per filter, the bindings
        it deleted (a binding two filters match counts for the first)."""
        deleted: list[dict[AclBinding, Exception | None]] = [{} for _ in filters]
        with self._lock:
            patterns = set(self.authorizer.snapshot.patterns())
            for acl_filter in filters:
                if acl_filter.matches_at_most_one_pattern():
                    patterns.update(_exact_patterns(acl_filter))
            for pattern in sorted(patterns, key=_pattern_order):
                matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
                if not matching:
                    continue
                removed: dict[AclBinding, int] = {}

                def remove(
                    current: frozenset[AccessControlEntry],
                    pattern: ResourcePattern = pattern,
                    matching: list[tuple[int, AclBindingFilter]] = matching,
                    removed: dict[AclBinding, int] = removed,
                ) -> frozenset[AccessControlEntry]:
                    removed.clear()  # this attempt's: an attempt retried starts again
                    for entry in current:
                        for index, acl_filter in matching:
                            if acl_filter.matches_entry(entry):
                                removed[entry.binding(pattern)] = index
                                break
                    gone = {AccessControlEntry.of(b) for b in removed}
                    return current - gone

                error: Exception | None = None
                try:
                    self._update(pattern, remove)
                except Exception as failure:
                    error = failure
                for binding, index in removed.items():
                    deleted[index].setdefault(binding, error)
        return [[DeletedBinding(b, e) for b, e in per_filter.items()] for per_filter in deleted]

    # -- ZooKeeper reads and writes --------------------------------------------------------------

    def _read(self, pattern: ResourcePattern) -> _Versioned:
        path = znodes.resource_path(pattern)
        try:
            data, stat = self._zk().get(path)
        except NoNodeError:
            return _Versioned(frozenset())
        return _Versioned(znodes.decode_acls(path, data), int(stat.version))

    def _update(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> bool:
        """Kafka's `updateResourceAcls`: rewrite `pattern`'s znode with `change(its ACLs)`,
        conditionally on the version read; read again and retry when another writer was
        first. Updates this broker's snapshot and notifies the others when the ACLs changed."""
        zk = self._zk()
        path = znodes.resource_path(pattern)
        current = self._read(pattern)
        for _attempt in range(self.max_update_retries + 1):
            wanted = change(current.acls)
            try:
                if wanted and current.exists:
                    zk.set(path, znodes.encode_acls(wanted), version=current.version)
                elif wanted:
                    zk.create(path, znodes.encode_acls(wanted), makepath=True)
                elif current.exists:
                    zk.delete(path, version=current.version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                current = self._read(pattern)  # another writer was first: read and redo
                continue
            if wanted == current.acls:
                self.authorizer.update(pattern, wanted)
                return False
            self.authorizer.update(pattern, wanted)
            zk.create(
                f"{znodes.change_path(pattern.pattern_type)}/{znodes.ACL_CHANGE_PREFIX}",
                znodes.encode_change(pattern),
                sequence=True,
                makepath=True,
            )
            return True
        raise AclUpdateFailedError(
            f"Failed to update ACLs for {pattern} after trying a maximum of "
            f"{self.max_update_retries} times"
        )

    # -- change notifications ------------------------------------------------------------------

    def _watch_of(self, watched: _Watched) -> Callable[[Any], None]:
        def changed(_event: Any) -> None:
            self._rounds.put(watched)  # processed on the store's own thread

        return changed

    def _process(self, watched: _Watched, *, initial: bool = False) -> None:
        """Kafka's `ZkNodeChangeNotificationListener.processNotifications` for one root: the
        notifications numbered above the last processed, in order, then the purge. On start
        (`initial`) the existing ones only set the mark: `load_all` reads everything."""
        with self._lock:
            if not self._running:
                return
            zk = self._zk()
            try:
                children: list[str] = zk.get_children(watched.root, watch=watched.watch)
            except NoNodeError:
                zk.ensure_path(watched.root)
                children = zk.get_children(watched.root, watch=watched.watch)
            for number, name in _numbered(children):
                if number <= watched.last_executed:
                    continue
                if not initial:
                    self._apply_notification(watched.root, f"{watched.root}/{name}")
                watched.last_executed = number
            self._purge(watched.root, children)

    def _apply_notification(self, root: str, path: str) -> None:
        zk = self._zk()
        try:
            data, _ = zk.get(path)
            pattern = znodes.decode_change(root, path, data)
            acls = self._read(pattern).acls
        except NoNodeError:
            return  # purged meanwhile: older than the expiration, already applied by a load
        except znodes.MalformedAclZnodeError as error:
            self._invalid(error.path, error.reason)
            return
        self.authorizer.update(pattern, acls)
        _log.info(
            "security.acl_change_processed",
            broker=self.broker_id,
            notification=path,
            resource_type=pattern.resource_type.name,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type.name,
            acls=len(acls),
        )

    def _purge(self, root: str, children: Iterable[str]) -> None:
        zk = self._zk()
        now = self.clock.now_ms()
        for name in children:
            path = f"{root}/{name}"
            with contextlib.suppress(NoNodeError):  # another broker purged it first
                stat = zk.exists(path)
                if stat is not None and now - int(stat.ctime) > self.expiration_ms:
                    zk.delete(path)

    def _state_changed(self, state: Any) -> None:
        """LOST, then CONNECTED: a new session, whose watches must be set again."""
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            for watched in self._watched:
                self._rounds.put(watched)

    def _invalid(self, path: str, reason: str) -> None:
        _log.warning("security.acl_change_invalid", notification=path, error=reason)


def _validate(binding: AclBinding) -> InvalidAclBindingError | None:
    """Kafka's `validateAclBinding` (and AclBinding's own checks): known elements only, no
    wildcard types, no `/` in the name (it becomes a znode)."""
    pattern = binding.pattern
    unknown = (
        pattern.resource_type.name in ("UNKNOWN", "ANY")
        or pattern.pattern_type not in znodes.STORED_PATTERN_TYPES
        or binding.operation.name in ("UNKNOWN", "ANY")
        or binding.permission.name in ("UNKNOWN", "ANY")
    )
    if unknown:
        return InvalidAclBindingError("ACL binding contains unknown elements")
    if "/" in pattern.name:
        return InvalidAclBindingError(f"ACL binding contains invalid resource name: {pattern.name}")
    return None


def _exact_patterns(acl_filter: AclBindingFilter) -> list[ResourcePattern]:
    assert acl_filter.name is not None
    return [ResourcePattern(acl_filter.resource_type, acl_filter.name, acl_filter.pattern_type)]


def _numbered(children: Iterable[str]) -> list[tuple[int, str]]:
    numbered = []
    for name in children:
        digits = name[len(znodes.ACL_CHANGE_PREFIX) :]
        if name.startswith(znodes.ACL_CHANGE_PREFIX) and digits.isdigit():
            numbered.append((int(digits), name))
    return sorted(numbered)


def _children(zk: Any, path: str) -> list[str]:
    try:
        children: list[str] = zk.get_children(path)
    except NoNodeError:
        return []
    return children


def _pattern_order(pattern: ResourcePattern) -> tuple[int, int, str]:
    return int(pattern.resource_type), int(pattern.pattern_type), pattern.name
