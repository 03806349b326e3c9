"""The error of a znode that does not hold what Kafka writes there (shared by the modules that
read Kafka's ZooKeeper payloads: zk_data, broker_registration)."""

from __future__ import annotations

__all__ = ["MalformedZnodeError"]


class MalformedZnodeError(ValueError):
    """A znode holds something that is not the JSON Kafka writes there."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"malformed znode {path}: {reason}")
        self.path = path
        self.reason = reason
