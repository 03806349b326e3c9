"""Pykka's actor registry, made to hold tens of thousands of actors.

Pykka registers every started actor in `pykka.ActorRegistry`, a class-level list, and removes
it when it stops: `actor_ref in list` and `list.remove`, two scans. With a partition replica
per actor, 10,000 partitions at RF 3 in one process are 30,000 actors, so stopping a broker
scanned that list once per partition twice over (stopping 3,000 partitions spent half its time
there). `RegisteredRefs` keeps the refs in an insertion-ordered dict instead and answers the
operations Pykka's registry uses (append, `in`, remove, iteration, a copy by slicing) in O(1)
each, iteration and copies in registration order as before. `install()` puts it in place of
the list, keeping whatever is registered; Pykka's public registry API is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, SupportsIndex, overload

import pykka

__all__ = ["RegisteredRefs", "install"]


class RegisteredRefs:
    """The list of `ActorRef`s Pykka's `ActorRegistry` keeps, as an ordered set: what
    `ActorRegistry.register`, `unregister`, `get_all` and the lookups do to their list."""

    __slots__ = ("_refs",)

    def __init__(self, refs: Iterable[Any] = ()) -> None:
        self._refs: dict[Any, None] = dict.fromkeys(refs)

    def append(self, ref: Any) -> None:
        self._refs[ref] = None

    def remove(self, ref: Any) -> None:
        try:
            del self._refs[ref]
        except KeyError:
            raise ValueError(f"{ref!r} is not registered") from None

    def __contains__(self, ref: object) -> bool:
        return ref in self._refs

    def __iter__(self) -> Iterator[Any]:
        return iter(list(self._refs))

    def __len__(self) -> int:
        return len(self._refs)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        return list(self._refs)[index]


def install() -> None:
    """Put a `RegisteredRefs` in place of Pykka's registry list (once; idempotent)."""
    registry: Any = pykka.ActorRegistry
    with registry._actor_refs_lock:
        if not isinstance(registry._actor_refs, RegisteredRefs):
            registry._actor_refs = RegisteredRefs(registry._actor_refs)
