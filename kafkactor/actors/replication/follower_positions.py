"""Which follower fetches a leader partition's actor must hear of (Kafka's
`Partition.updateFollowerFetchState`, called for every partition of every follower fetch)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FollowerPositions"]


@dataclass(slots=True)
class _Told:
    """The last position of one follower its leader partition was told, and the latest fetch
    since that found the follower still there, at the leader's log end (not told)."""

    leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    told_ms: int
    caught_up_ms: int = -1
    seen_caught_up_ms: int = -1  # the latest fetch, told or not, at the leader's log end


class FollowerPositions:
    """The replica manager's record, for one leader partition, of what its followers' fetches
    told the partition's actor.

    Kafka's leader updates each follower's fetch state (its log end, when it last caught up)
    for every partition of every follower fetch, a method call there. Here it is a message to
    the partition's actor, so a broker leading thousands of idle partitions would send
    thousands of messages a second that change nothing but a timestamp. A fetch is therefore
    not told when the follower fetched from the offset last told, which is the leader's log
    end now, with the same log start offset, in the same leader epoch, and less than
    `refresh_ms` ago: nothing about the high watermark or the ISR can move. The time of the
    latest such fetch is kept instead (`caught_up`) and handed to the partition with its
    next position and with each ISR-expiration check, so the partition's "last caught up"
    time, and the ISR shrink it decides, are what they would have been had it heard of every
    fetch. `refresh_ms` bounds how long a fetch goes untold, so a follower outside the ISR
    whose ISR expansion failed to be written is proposed again (Kafka does it on its next
    fetch).
    """

    def __init__(self, refresh_ms: int) -> None:
        self.refresh_ms = refresh_ms
        self._told: dict[int, _Told] = {}  # follower broker id -> what its partition knows

    def fetched(
        self,
        replica: int,
        *,
        leader_epoch: int,
        fetch_offset: int,
        log_start_offset: int,
        leader_log_end: int,
        now_ms: int,
    ) -> tuple[int, int] | None:
        """A follower fetch of this partition. None: the partition need not hear of it (the
        follower is caught up as last told; the fetch is remembered). Otherwise it must, with
        (offset, when) to send along: the latest fetch not told found the follower at the
        leader's log end, `offset` (the one told before), at `when` (-1: there was none)."""
        told = self._told.get(replica)
        if (
            told is not None
            and told.leader_epoch == leader_epoch
            and told.fetch_offset == fetch_offset == leader_log_end
            and told.log_start_offset == log_start_offset
            and now_ms - told.told_ms < self.refresh_ms
        ):
            told.caught_up_ms = told.seen_caught_up_ms = now_ms
            return None
        caught_up = (-1, -1)
        if told is not None and told.leader_epoch == leader_epoch:
            caught_up = (told.fetch_offset, told.caught_up_ms)
        seen = told.seen_caught_up_ms if told is not None else -1
        if fetch_offset >= leader_log_end:
            seen = now_ms
        self._told[replica] = _Told(
            leader_epoch, fetch_offset, log_start_offset, now_ms, seen_caught_up_ms=seen
        )
        return caught_up

    def all_caught_up_since(self, followers: Iterable[int], since_ms: int) -> bool:
        """Whether a fetch of each of `followers` found it at the leader's log end at
        `since_ms` or later: then none can be out of sync for `replica.lag.time.max.ms`
        since `since_ms`, and the ISR-expiration check has nothing to find (a fetch the
        partition counts as caught up is one of these or earlier, so this errs on checking)."""
        for replica in followers:
            told = self._told.get(replica)
            if told is None or told.seen_caught_up_ms < since_ms:
                return False
        return True

    def caught_up(self) -> tuple[tuple[int, int, int], ...]:
        """(follower, offset, when) for each follower a fetch not told found at the leader's
        log end, at `offset` (as last told), at `when`: for the ISR-expiration check."""
        return tuple(
            (replica, told.fetch_offset, told.caught_up_ms)
            for replica, told in sorted(self._told.items())
            if told.caught_up_ms >= 0
        )
