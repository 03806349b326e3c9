"""The client interface the controller and brokers use: the part of kazoo's KazooClient used."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from kazoo.protocol.states import WatchedEvent, ZnodeStat

F = TypeVar("F", bound=Callable[..., Any])


class WatchRecipe(Protocol):
    """A kazoo DataWatch / ChildrenWatch made without a function: decorate one to start it."""

    def __call__(self, func: F) -> F: ...


class ZkClient(Protocol):
    """A ZooKeeper client session: kazoo's `KazooClient`, or the embedded model's client."""

    @property
    def connected(self) -> bool: ...

    @property
    def client_id(self) -> tuple[int, bytes] | None: ...

    def start(self, timeout: float = 15) -> None: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...

    def add_listener(self, listener: Callable[[str], object]) -> None: ...

    def remove_listener(self, listener: Callable[[str], object]) -> None: ...

    def create(  # noqa: PLR0917 (kazoo's signature)
        self,
        path: str,
        value: bytes | None = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
    ) -> Any: ...

    def get(
        self, path: str, watch: Callable[[WatchedEvent], object] | None = None
    ) -> tuple[bytes, ZnodeStat]: ...

    def exists(
        self, path: str, watch: Callable[[WatchedEvent], object] | None = None
    ) -> ZnodeStat | None: ...

    def get_children(
        self,
        path: str,
        watch: Callable[[WatchedEvent], object] | None = None,
        include_data: bool = False,
    ) -> Any: ...

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat: ...

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> Any: ...

    def ensure_path(self, path: str, acl: object = None) -> Any: ...

    def DataWatch(  # noqa: N802
        self, path: str, func: Callable[..., Any] | None = None
    ) -> WatchRecipe: ...

    def ChildrenWatch(  # noqa: N802
        self,
        path: str,
        func: Callable[..., Any] | None = None,
        allow_session_lost: bool = True,
        send_event: bool = False,
    ) -> WatchRecipe: ...
