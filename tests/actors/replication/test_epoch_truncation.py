"""Where a follower cuts its log from the leader's epochs (KIP-101, KIP-279), without actors.

Each case plays the exchange out against two real epoch caches: the follower asks with its latest
epoch, the leader answers `end_offset_for`, the follower truncates (its cache with it) and asks
again while the step is not complete. The facts are those of Kafka's epoch tests: a follower
keeps everything the leader has in the same epochs, loses exactly the suffix the leader never
had, never truncates to its high watermark unless neither side knows an epoch, and walks back
over epochs the leader never had one round at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkactor.actors.replication import TruncationPoint, truncation_point
from kafkactor.messages.offsets import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
)
from kafkactor.storage.leader_epoch import EpochEntry, LeaderEpochCache


@dataclass
class Replica:
    """A log reduced to what truncation needs: its end offset, HW and epoch cache."""

    epochs: list[tuple[int, int]]
    log_end_offset: int
    high_watermark: int = 0
    cache: LeaderEpochCache = field(init=False)

    def __post_init__(self) -> None:
        self.cache = LeaderEpochCache(entries=[EpochEntry(e, o) for e, o in self.epochs])

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.cache.end_offset_for(epoch, self.log_end_offset)

    def truncate(self, offset: int) -> None:
        self.log_end_offset = min(self.log_end_offset, offset)
        self.cache.truncate_from_end(self.log_end_offset)


def follow(follower: Replica, leader: Replica) -> list[TruncationPoint]:
    """The whole exchange; returns each step's decision."""
    steps = []
    for _ in range(10):
        asked = follower.cache.latest_epoch
        epoch, end = leader.end_offset_for(asked)
        point = truncation_point(
            epoch,
            end,
            follower_end_offset_for=follower.end_offset_for,
            log_end_offset=follower.log_end_offset,
            high_watermark=follower.high_watermark,
        )
        follower.truncate(point.offset)
        steps.append(point)
        if point.completed:
            return steps
    raise AssertionError(f"truncation did not end: {steps}")


def test_kip101_scenario_1_a_follower_keeps_records_beyond_its_high_watermark() -> None:
    # The follower has both acknowledged records but had not learnt HW 2 when it restarted.
    leader = Replica([(0, 0)], log_end_offset=2, high_watermark=2)
    follower = Replica([(0, 0)], log_end_offset=2, high_watermark=1)

    [step] = follow(follower, leader)

    assert step.offset == 2
    assert follower.log_end_offset == 2  # Kafka 0.9 cut it back to 1 and lost offset 1


def test_kip101_scenario_2_the_suffix_the_new_leader_never_had_is_cut() -> None:
    # Both crashed; the follower came back first and led epoch 1 from offset 1. The old
    # leader still holds offset 1 of epoch 0, which nobody else has.
    new_leader = Replica([(0, 0), (1, 1)], log_end_offset=3)
    old_leader = Replica([(0, 0)], log_end_offset=2, high_watermark=2)

    [step] = follow(old_leader, new_leader)

    assert step.offset == 1  # not its HW (2): that would keep the divergent record
    assert old_leader.cache.entries == (EpochEntry(0, 0),)


def test_a_follower_ahead_in_the_same_epoch_is_cut_to_the_leaders_log_end() -> None:
    leader = Replica([(0, 0), (3, 10)], log_end_offset=14)
    follower = Replica([(0, 0), (3, 10)], log_end_offset=20, high_watermark=12)

    [step] = follow(follower, leader)

    assert (step.offset, step.completed) == (14, True)


def test_a_follower_behind_keeps_all_it_has() -> None:
    leader = Replica([(0, 0), (2, 8), (5, 30)], log_end_offset=40)
    follower = Replica([(0, 0), (2, 8)], log_end_offset=20)

    [step] = follow(follower, leader)

    assert step.offset == 20
    assert follower.log_end_offset == 20


def test_kip279_successive_elections_walk_back_one_epoch_per_round() -> None:
    # The follower led epochs 1 and 3 briefly with writes nobody copied; the leader led 2 and
    # leads 4 now (recorded at its log end when it took over).
    leader = Replica([(0, 0), (2, 5), (4, 10)], log_end_offset=10)
    follower = Replica([(0, 0), (1, 5), (3, 8)], log_end_offset=12)

    steps = follow(follower, leader)

    # round 1: asked for 3, told "2 ends at 10": the follower has no epoch 2, so it cuts to
    # where its epoch 1 ends (8) and asks again; round 2: asked for 1, told "0 ends at 5".
    assert [(s.offset, s.completed) for s in steps] == [(8, False), (5, True)]
    assert follower.log_end_offset == 5
    assert follower.cache.entries == (EpochEntry(0, 0),)


def test_without_kip279_the_first_answer_alone_would_keep_divergent_epochs() -> None:
    leader = Replica([(0, 0), (2, 5), (4, 10)], log_end_offset=10)
    follower = Replica([(0, 0), (1, 5), (3, 8)], log_end_offset=12)
    epoch, end = leader.end_offset_for(follower.cache.latest_epoch)

    # KIP-101 alone: min(leader end 10, own end 12) = 10, keeping epoch 1 and 3 records
    assert (epoch, end) == (2, 10)
    first = truncation_point(
        epoch,
        end,
        follower_end_offset_for=follower.end_offset_for,
        log_end_offset=12,
        high_watermark=0,
    )
    assert first.offset == 8 and not first.completed


def test_no_epochs_on_either_side_falls_back_to_the_high_watermark() -> None:
    leader = Replica([], log_end_offset=10)
    follower = Replica([], log_end_offset=9, high_watermark=4)

    [step] = follow(follower, leader)

    assert (step.offset, step.completed) == (4, True)
    assert "high watermark" in step.reason


def test_an_answer_without_an_epoch_cuts_to_the_leaders_end_offset() -> None:
    point = truncation_point(
        UNDEFINED_EPOCH,
        7,
        follower_end_offset_for=lambda _epoch: (0, 9),
        log_end_offset=9,
        high_watermark=2,
    )
    assert (point.offset, point.completed) == (7, True)


def test_an_epoch_the_follower_cannot_place_ends_the_exchange_at_the_leaders_end() -> None:
    point = truncation_point(
        4,
        6,
        follower_end_offset_for=lambda _epoch: (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
        log_end_offset=9,
        high_watermark=2,
    )
    assert (point.offset, point.completed) == (6, True)


def test_the_truncation_point_never_passes_the_followers_log_end() -> None:
    point = truncation_point(
        3,
        50,
        follower_end_offset_for=lambda epoch: (epoch, 40),
        log_end_offset=12,
        high_watermark=2,
    )
    assert point.offset == 12
