"""Kafka's `DelayedTxnMarker` (0.11 to 2.5): an ended transaction waiting for its markers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from kafkactor.actors.purgatory import DelayedOperation
from kafkactor.actors.transaction.results import MarkerJob

__all__ = ["MARKER_WAIT_MS", "DelayedTxnMarker"]

#: Kafka waits for markers without a bound (its DelayedTxnMarker's timeout is 100 years): a
#: transaction is completed only once every marker is written
MARKER_WAIT_MS: Final = 100 * 365 * 24 * 3600 * 1000


class DelayedTxnMarker(DelayedOperation):
    """One transaction in PrepareCommit / PrepareAbort, watched under its transactional id in
    the coordinator's "txn-marker" purgatory (on the broker's shared timer). It completes when
    `pending` says no marker is left unwritten (False) or the job became moot (None: the
    coordinator resigned the partition, the id moved on); `on_done` is then told whether the
    markers were all written (True: write CompleteCommit / CompleteAbort)."""

    def __init__(
        self,
        job: MarkerJob,
        *,
        pending: Callable[[MarkerJob], bool | None],
        on_done: Callable[[MarkerJob, bool], None],
    ) -> None:
        super().__init__(MARKER_WAIT_MS)
        self.job = job
        self._pending = pending
        self._on_done = on_done
        self.written = False

    def try_complete(self) -> bool:
        pending = self._pending(self.job)
        if pending:
            return False
        self.written = pending is False
        return self.force_complete()

    def on_complete(self) -> None:
        self._on_done(self.job, self.written and not self.expired)
