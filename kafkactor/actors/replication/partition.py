"""The pure core of a partition replica: leader, ISR, log end offsets and the high watermark."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafkactor.common import NO_LEADER, PartitionLeaderState
from kafkactor.messages import ErrorCode

UNKNOWN_OFFSET = -1  # a remote replica's log end offset before its first fetch


@dataclass(slots=True)
class FollowerProgress:
    """What the leader knows of one follower (Kafka's remote `Replica`)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET  # the leader's LEO at the previous fetch
    last_fetch_ms: int = 0
    log_start_offset: int = UNKNOWN_OFFSET  # as its latest fetch said (Kafka's Replica's)


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingIsrChange:
    """An ISR change the leader decided but has not yet written (Kafka's `PendingExpandIsr` /
    `PendingShrinkIsr`).

    The partition's ISR is what ZooKeeper holds: the caller writes `isr` to the partition's
    state znode at `zk_version` and then calls `PartitionState.commit_isr_change` (or
    `abort_isr_change` when the write failed). Until then the ISR is unchanged, except that
    the high watermark already counts a replica being added (Kafka's "maximal ISR"), so it
    never passes what that replica holds.
    """

    isr: tuple[int, ...]
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    zk_version: int = 0
    reason: str = ""

    @property
    def is_shrink(self) -> bool:
        return bool(self.removed)


@dataclass(frozen=True, slots=True)
class FollowerFetchOutcome:
    """What a follower's fetch changed on the leader: the HW, and an ISR change to write."""

    high_watermark_advanced: bool = False
    isr_change: PendingIsrChange | None = None


class PartitionState:
    """Kafka's `Partition` bookkeeping for one replica, without threads, clocks or a log.

    Holds the assigned replicas, ISR, leader and leader epoch (from the controller's
    LeaderAndIsr), and on the leader the log end offset of every follower as learnt from its
    fetches. The high watermark is the minimum log end offset over the ISR and never moves
    back on a leader; a follower's is min(leader HW, own LEO). A follower that has not caught
    up for `replica_lag_time_max_ms` leaves the ISR; one whose LEO reaches the HW rejoins.
    Times and the local log end offset are passed in, so tests drive it deterministically.
    ISR changes are decided here and come out as a `PendingIsrChange`; the actor writes it
    to ZooKeeper and commits or aborts it (this class does no I/O).

    "Caught up" follows Kafka's rule since 0.10.2 (KAFKA-4485): a fetch at or past the
    leader's current LEO is caught up now; a fetch at or past the LEO the leader had at the
    follower's previous fetch was caught up at that previous fetch. Under steady load a
    follower is therefore never dropped merely because new records keep arriving.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        local_broker: int,
        *,
        replica_lag_time_max_ms: int = 10_000,
        min_insync_replicas: int = 1,
        high_watermark: int = 0,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.local_broker = local_broker
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.min_insync_replicas = min_insync_replicas
        self.high_watermark = high_watermark
        self.leader = NO_LEADER
        self.leader_epoch = -1
        # as leader: the log end offset when this leadership began (everything committed lies
        # below it); as follower: the leader epoch in which it began following this leader
        self.leader_epoch_start_offset = 0
        self.follow_start_epoch = -1
        self.controller_epoch = -1
        self.zk_version = 0
        self.assigned_replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        self.followers: dict[int, FollowerProgress] = {}
        self.pending_isr_change: PendingIsrChange | None = None

    # -- ISR changes: decided here, written by the caller, then committed --------------------

    def _propose_isr(
        self,
        isr: tuple[int, ...],
        *,
        added: tuple[int, ...] = (),
        removed: tuple[int, ...] = (),
        reason: str = "",
    ) -> PendingIsrChange | None:
        """One change in flight at a time, as Kafka's AlterIsr: while one is pending, no other
        is proposed (the next fetch or shrink check proposes again)."""
        if self.pending_isr_change is not None:
            return None
        change = PendingIsrChange(
            isr=isr, added=added, removed=removed, zk_version=self.zk_version, reason=reason
        )
        self.pending_isr_change = change
        return change

    def commit_isr_change(self, change: PendingIsrChange, zk_version: int) -> bool:
        """The change was written (the state znode is now at `zk_version`): the ISR is
        `change.isr`. False when the change is no longer the pending one (a LeaderAndIsr
        replaced the state meanwhile): nothing changes."""
        if self.pending_isr_change is not change:
            return False
        self.pending_isr_change = None
        self.isr = change.isr
        self.zk_version = zk_version
        return True

    def abort_isr_change(self, change: PendingIsrChange) -> None:
        """The write failed (a version conflict, ZooKeeper unreachable): the ISR stays."""
        if self.pending_isr_change is change:
            self.pending_isr_change = None

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark must respect: the ISR plus replicas being added."""
        pending = self.pending_isr_change
        if pending is None or not pending.added:
            return self.isr
        return (*self.isr, *(r for r in pending.added if r not in self.isr))

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_broker

    # -- controller decisions ------------------------------------------------------------------

    def accepts(self, state: PartitionLeaderState) -> bool:
        """Whether `state` is newer than what this replica has applied (its leader epoch)."""
        return state.leader_epoch > self.leader_epoch

    def make_leader(self, state: PartitionLeaderState, now_ms: int, log_end_offset: int) -> None:
        """Become leader: every follower's position is unknown until it fetches; ISR members
        count as caught up now, so none is dropped before it had a chance to fetch."""
        was_leader = self.is_leader
        self._apply(state)
        self.leader_epoch_start_offset = log_end_offset
        self.follow_start_epoch = -1
        known = self.followers if was_leader else {}  # a leader in a newer epoch keeps them
        self.followers = {
            replica: known.get(replica)
            or FollowerProgress(last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
            for replica in self.assigned_replicas
            if replica != self.local_broker
        }
        self.high_watermark = min(self.high_watermark, log_end_offset)
        self.maybe_increment_high_watermark(log_end_offset)

    def make_follower(self, state: PartitionLeaderState, log_end_offset: int) -> bool:
        """Follow `state.leader`. Returns whether that is a new leader for this replica: then
        the caller finds its truncation point from the leader's epochs (KIP-101) before it
        fetches. Following the same leader in a newer epoch (the controller changed the ISR)
        changes only the state, as Kafka's makeFollowers skips such partitions: the log is
        already a prefix of the leader's."""
        new_leader = self.leader != state.leader or self.follow_start_epoch < 0
        self._apply(state)
        if new_leader:
            self.follow_start_epoch = state.leader_epoch
        self.followers = {}
        self.high_watermark = min(self.high_watermark, log_end_offset)
        return new_leader

    def follows_epoch(self, leader_epoch: int) -> bool:
        """Whether data fetched in `leader_epoch` comes from the leader this replica follows
        now (an epoch since it began following it, up to the current one)."""
        return (
            not self.is_leader
            and self.follow_start_epoch >= 0
            and self.follow_start_epoch <= leader_epoch <= self.leader_epoch
        )

    def _apply(self, state: PartitionLeaderState) -> None:
        self.pending_isr_change = None  # the controller's state supersedes an unwritten change
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.controller_epoch = state.controller_epoch
        self.zk_version = state.zk_version
        self.assigned_replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)

    def stop(self) -> None:
        """This replica no longer serves the partition (StopReplica)."""
        self.leader = NO_LEADER
        self.follow_start_epoch = -1
        self.isr = ()
        self.followers = {}
        self.pending_isr_change = None

    # -- the leader's view -----------------------------------------------------------------------

    def append_error(self, acks: int) -> ErrorCode:
        """Why a leader append must be refused (NONE when it may go ahead)."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_FOR_PARTITION
        if acks == -1 and len(self.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def update_follower(
        self,
        replica: int,
        fetch_offset: int,
        leader_log_end: int,
        now_ms: int,
        log_start_offset: int = UNKNOWN_OFFSET,
    ) -> FollowerFetchOutcome:
        """A follower fetched from `fetch_offset`: its LEO; maybe the ISR and the HW move.

        A follower joins the ISR once its log end reaches both the HW and the offset where
        this leadership began (KAFKA-7128: a new leader's HW may lag what was committed, and
        a follower below that start could miss committed records). An ISR member fetching
        below the HW has lost records it acknowledged (a power loss, a restart the controller
        has not seen yet): it leaves the ISR at once, so it can never be elected with a hole.
        Either change comes back as the outcome's pending `isr_change`, to write and commit.
        The follower's `log_start_offset`, when its fetch says it, feeds the low watermark.
        """
        progress = self.followers.get(replica)
        if not self.is_leader or progress is None:
            return FollowerFetchOutcome()
        if log_start_offset >= 0:
            progress.log_start_offset = log_start_offset
        if replica in self.isr and fetch_offset < self.high_watermark:
            shrink = self._propose_isr(
                tuple(r for r in self.isr if r != replica),
                removed=(replica,),
                reason="fetched below the high watermark: it lost acknowledged records",
            )
            if shrink is not None:
                progress.log_end_offset = fetch_offset
                progress.last_fetch_leader_leo = leader_log_end
                progress.last_fetch_ms = now_ms
                return FollowerFetchOutcome(isr_change=shrink)
        progress.log_end_offset = fetch_offset
        if fetch_offset >= leader_log_end:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.last_fetch_leader_leo >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_leo = leader_log_end
        progress.last_fetch_ms = now_ms
        expand = None
        if replica not in self.isr and fetch_offset >= max(
            self.high_watermark, self.leader_epoch_start_offset
        ):
            expand = self._propose_isr((*self.isr, replica), added=(replica,))
        advanced = self.maybe_increment_high_watermark(leader_log_end)
        return FollowerFetchOutcome(high_watermark_advanced=advanced, isr_change=expand)

    def follower_caught_up(self, replica: int, offset: int, at_ms: int) -> None:
        """A fetch at `at_ms` the replica manager did not pass on found `replica` at this
        leader's log end, `offset`, which is where its last fetch passed on left it: it was
        caught up then (what `update_follower` would have recorded for that fetch)."""
        progress = self.followers.get(replica)
        if not self.is_leader or progress is None or progress.log_end_offset != offset:
            return
        progress.last_caught_up_ms = max(progress.last_caught_up_ms, at_ms)
        if at_ms > progress.last_fetch_ms:
            progress.last_fetch_ms = at_ms
            progress.last_fetch_leader_leo = offset

    def maybe_increment_high_watermark(self, leader_log_end: int) -> bool:
        """HW = min LEO over the (maximal) ISR, the leader's own included; it only moves
        forward."""
        if not self.is_leader:
            return False
        new_hw = leader_log_end
        for replica in self.maximal_isr:
            if replica == self.local_broker:
                continue
            progress = self.followers.get(replica)
            offset = progress.log_end_offset if progress is not None else UNKNOWN_OFFSET
            if offset < 0:  # not heard from since this leader took over: HW waits
                return False
            new_hw = min(new_hw, offset)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def out_of_sync_replicas(self, now_ms: int) -> tuple[int, ...]:
        """ISR followers that have not caught up for longer than `replica_lag_time_max_ms`."""
        if not self.is_leader:
            return ()
        lagging = []
        for replica in self.isr:
            progress = self.followers.get(replica)
            if replica == self.local_broker or progress is None:
                continue
            if now_ms - progress.last_caught_up_ms > self.replica_lag_time_max_ms:
                lagging.append(replica)
        return tuple(lagging)

    def maybe_shrink_isr(self, now_ms: int) -> PendingIsrChange | None:
        """The change that drops the lagging followers from the ISR, if any lag. Once it is
        committed, `maybe_increment_high_watermark` may move the HW."""
        lagging = self.out_of_sync_replicas(now_ms)
        if not lagging:
            return None
        return self._propose_isr(tuple(r for r in self.isr if r not in lagging), removed=lagging)

    def low_watermark(self, leader_log_start_offset: int, is_alive: Callable[[int], bool]) -> int:
        """Kafka's `lowWatermarkIfLeader`: the smallest log start offset over the leader and
        every follower on a live broker (ISR or not), as their fetches last said; a follower
        not heard from since this leadership began counts as UNKNOWN_OFFSET (-1). -1 when
        this replica does not lead."""
        if not self.is_leader:
            return UNKNOWN_OFFSET
        low = leader_log_start_offset
        for replica, progress in self.followers.items():
            if progress.log_start_offset < low and is_alive(replica):
                low = progress.log_start_offset
        return low

    def follower_log_end_offsets(self) -> dict[int, int]:
        return {replica: p.log_end_offset for replica, p in self.followers.items()}

    # -- the follower's view ---------------------------------------------------------------------

    def update_follower_high_watermark(self, leader_high_watermark: int, log_end: int) -> bool:
        """A follower's HW: min(leader HW, own LEO). Returns whether it changed."""
        new_hw = min(leader_high_watermark, log_end)
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False
