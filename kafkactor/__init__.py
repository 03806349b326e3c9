"""kafkactor: Kafka's broker internals rebuilt as a Python actor system."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("kafkactor")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
