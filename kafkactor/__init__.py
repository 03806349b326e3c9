"""kafkactor: Kafka's broker internals rebuilt as a Python actor system."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafkactor.testing import Cluster

try:
    __version__ = version("kafkactor")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Cluster", "__version__"]


def __getattr__(name: str) -> Any:
    # `kafkactor.Cluster` without importing the actor system for `kafkactor --version`.
    if name == "Cluster":
        from kafkactor.testing import Cluster

        return Cluster
    raise AttributeError(f"module 'kafkactor' has no attribute {name!r}")
