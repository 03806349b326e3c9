"""kafkactor: Kafka's broker internals rebuilt as a Python actor system."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkactor.testing import Cluster

    __version__: str

__all__ = ["Cluster", "__version__"]


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kafkactor")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    # `kafkactor.Cluster` without importing the actor system for `kafkactor --version`, and
    # `__version__` read from the installed metadata only when asked (importlib.metadata
    # takes ~60 ms to load: a broker's start does without)
    if name == "Cluster":
        from kafkactor.testing import Cluster

        return Cluster
    if name == "__version__":
        found = _installed_version()
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'kafkactor' has no attribute {name!r}")
