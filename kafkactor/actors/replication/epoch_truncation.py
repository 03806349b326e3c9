"""Where a follower cuts its log when it starts following a leader (KIP-101, KIP-279)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkactor.messages.offsets import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
)


@dataclass(frozen=True, slots=True)
class TruncationPoint:
    """Where to cut the follower's log, whether that ends the truncation, and why.

    `completed` is False when the leader's answer named an epoch the follower does not have:
    the follower cuts to where its own epochs below that one end and asks the leader again
    with its new latest epoch (KIP-279). Each such round removes at least one epoch from the
    follower's cache, so the exchange ends.
    """

    offset: int
    completed: bool
    reason: str


def truncation_point(
    leader_epoch: int,
    leader_end_offset: int,
    *,
    follower_end_offset_for: Callable[[int], tuple[int, int]],
    log_end_offset: int,
    high_watermark: int,
) -> TruncationPoint:
    """Kafka's follower truncation from an OffsetsForLeaderEpoch answer.

    - The leader knows no end offset (no epochs on one side): fall back to the follower's
      high watermark, as Kafka does for logs without epochs. This is the one case where a
      follower still truncates to its high watermark.
    - The leader answered without an epoch: cut to min(its end offset, own log end).
    - The follower has the epoch the leader answered with: cut to min(the leader's end offset
      for it, own log end); done.
    - It does not (KIP-279): cut to where the follower's largest epoch below it ends, and ask
      again.
    """
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationPoint(
            min(high_watermark, log_end_offset),
            completed=True,
            reason="no leader epoch known on one side: high watermark",
        )
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationPoint(
            min(leader_end_offset, log_end_offset),
            completed=True,
            reason="leader's end offset (no epoch in its answer)",
        )
    epoch, end_offset = follower_end_offset_for(leader_epoch)
    if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationPoint(
            min(leader_end_offset, log_end_offset),
            completed=True,
            reason=f"leader's end offset for epoch {leader_epoch}",
        )
    if epoch != leader_epoch:
        return TruncationPoint(
            min(end_offset, log_end_offset),
            completed=False,
            reason=(
                f"leader's latest epoch not above {leader_epoch} is one this replica lacks: "
                f"end of its epoch {epoch}"
            ),
        )
    return TruncationPoint(
        min(leader_end_offset, log_end_offset),
        completed=True,
        reason=f"leader's end offset for epoch {leader_epoch}",
    )
