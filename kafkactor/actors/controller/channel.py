"""The part of Kafka's ControllerChannelManager that keeps a live broker from missing a decision.

Kafka's controller has a send thread per broker that sends each LeaderAndIsr and UpdateMetadata
again, 100 ms apart, until it gets through, for as long as that broker is live. Without this, a
request lost on a connection that dies under it (a peer that restarted on another address, a
reset) leaves that broker behind until some other decision mentions its partitions: a replica
that never starts fetching, an ISR that stays short.

Here requests to one broker may be answered out of order (a failed one comes back while a
later one, queued behind it, is delivered on a fresh connection), so the request that failed
is not sent again as it was: that could undo a newer decision. The broker is resynchronised
instead: after `RESEND_BACKOFF_MS` the controller sends it LeaderAndIsr for every partition it
holds and an UpdateMetadata, both as they stand then, which are never older than anything sent
before. A broker applies a LeaderAndIsr only for a newer leader epoch, so what it already had
is left as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kafkactor.messages import ErrorCode

__all__ = ["RESEND_BACKOFF_MS", "ControllerChannel"]

RESEND_BACKOFF_MS: Final = 100  # Kafka's RequestSendThread waits this long between attempts

# answers that say the request may never have reached the broker (the network's, not the broker's)
_LOST: Final = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})


class ControllerChannel:
    """Which controller requests are unanswered, and which brokers are due a resend.

    `sent` records a LeaderAndIsr or UpdateMetadata with the broker epoch it was meant for;
    `answered` takes its answer. An answer that says the request was lost makes its broker due,
    if that broker is still live in the same epoch (one that restarted since is sent everything
    as a starting broker anyway). `due` hands out the brokers due by now, each once, however
    many of its requests failed meanwhile.
    """

    def __init__(self, backoff_ms: int = RESEND_BACKOFF_MS) -> None:
        self.backoff_ms = backoff_ms
        self._unanswered: dict[int, tuple[int, int]] = {}  # correlation id -> (broker, epoch)
        self._due_at: dict[int, int] = {}  # broker -> when to resend it (ms)

    def __len__(self) -> int:
        """The requests sent and not answered yet."""
        return len(self._unanswered)

    def sent(self, correlation_id: int, broker: int, broker_epoch: int) -> None:
        self._unanswered[correlation_id] = (broker, broker_epoch)

    def answered(
        self, correlation_id: int, error_code: ErrorCode, live: Mapping[int, int], now_ms: int
    ) -> int | None:
        """Take the answer to a request. When it makes a broker due and none was, the time to
        look again (`due`); None otherwise (not ours, not lost, or a wake-up already set)."""
        sent = self._unanswered.pop(correlation_id, None)
        if sent is None or error_code not in _LOST:
            return None
        broker, epoch = sent
        if live.get(broker) != epoch or broker in self._due_at:
            return None
        first = not self._due_at
        self._due_at[broker] = now_ms + self.backoff_ms
        return self._due_at[broker] if first else None

    def due(self, live: Mapping[int, int], now_ms: int) -> tuple[list[int], int | None]:
        """The live brokers due a resend by `now_ms` (each leaves the set), and when the next
        of the others is due (None: none left)."""
        ready = sorted(b for b, at in self._due_at.items() if at <= now_ms)
        for broker in ready:
            del self._due_at[broker]
        for broker in [b for b in self._due_at if b not in live]:
            del self._due_at[broker]
        return [b for b in ready if b in live], min(self._due_at.values(), default=None)

    def forget(self, broker: int) -> None:
        """`broker` left or restarted: what was sent to it is of no more interest."""
        self._due_at.pop(broker, None)
        for correlation_id in [c for c, (b, _) in self._unanswered.items() if b == broker]:
            del self._unanswered[correlation_id]

    def clear(self) -> None:
        """A new controllership (or none): nothing carries over."""
        self._unanswered.clear()
        self._due_at.clear()
