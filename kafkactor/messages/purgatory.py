"""Messages of the delayed-operation purgatory and its Reaper."""

from __future__ import annotations

from typing import Any

from kafkactor.messages.base import Request, Response, message


@message
class DelayOperation(Request):
    """Ask a purgatory to complete `operation` (a spec message) now or once a watched key
    changes enough, else at `timeout_ms`. The operation type is chosen by the spec's type."""

    operation: Any = None
    keys: tuple[str, ...] = ()
    timeout_ms: int = 0


@message
class KeyChanged:
    """A watched key's state moved (Kafka: an HW/LEO advance of a partition): re-check the
    operations watching it. `value` is the key's new state as the purgatory keeps it."""

    key: str = ""
    value: int = 0


@message
class CancelForKey:
    """Drop every operation watching `key` without completing it (Kafka's cancelForKey)."""

    key: str = ""


@message
class OperationsExpired:
    """The Reaper's timer expired these operations of the receiving purgatory.

    One message carries every operation of one owner that expired in one advance of the
    timer, so a burst of timeouts costs one mailbox hop, not one per operation.
    """

    operation_ids: tuple[int, ...] = ()


@message
class AwaitValue:
    """The spec of the generic delayed operation: done once `key`'s value reaches `at_least`."""

    key: str = ""
    at_least: int = 1


@message
class OperationResult(Response):
    """How a delayed operation ended: completed by its condition, or expired at its timeout."""

    operation_id: int = 0
    expired: bool = False
