"""Fault schedules: seeded, deterministic, every fault recovered, the power-loss rule kept,
every replica assignment changed by an admin episode restored."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kafkactor.testing.schedule import (
    DOWN,
    SAFE_KINDS,
    UNSAFE_KINDS,
    Action,
    Role,
    Schedule,
    Step,
    generate_schedule,
    parse_seeds,
    validate_schedule,
)

SEEDS = range(300)


def test_the_same_seed_gives_the_same_schedule() -> None:
    for seed in (0, 1, 7, 12345):
        assert generate_schedule(seed, 12) == generate_schedule(seed, 12)
        assert generate_schedule(seed, 12, unsafe=True) == generate_schedule(seed, 12, unsafe=True)


def test_different_seeds_give_different_schedules() -> None:
    schedules = {generate_schedule(seed, 12).steps for seed in range(50)}
    assert len(schedules) == 50


def test_every_schedule_keeps_the_fault_model() -> None:
    for seed in SEEDS:
        for unsafe in (False, True):
            for power_loss in (False, True):
                schedule = generate_schedule(seed, 12, unsafe=unsafe, power_loss=power_loss)
                assert validate_schedule(schedule.steps) == [], (seed, unsafe, power_loss)


def _simulate(steps: tuple[Step, ...]) -> tuple[set[str], set[str], int]:
    """The names down and isolated after the steps, and the most ever down at once."""
    down: set[str] = set()
    isolated: set[str] = set()
    most = 0
    for step in steps:
        if step.action in DOWN:
            down.add(step.name)
        elif step.action is Action.RESTART:
            down.discard(step.name)
        elif step.action is Action.ISOLATE:
            isolated.add(step.name)
        elif step.action is Action.HEAL:
            isolated.discard(step.name)
        elif step.action is Action.HEAL_ALL:
            down.clear()
            isolated.clear()
        most = max(most, len(down))
    return down, isolated, most


def test_every_schedule_heals_everything_at_the_end() -> None:
    for seed in SEEDS:
        schedule = generate_schedule(seed, 12)
        assert schedule.steps[-1].action is Action.HEAL_ALL
        assert [s.action for s in schedule.steps].count(Action.HEAL_ALL) == 1
        down, isolated, most = _simulate(schedule.steps)
        assert (down, isolated) == (set(), set())
        assert most <= 2
        # every episode but the last recovers its own faults before the next begins
        for episode in range(1, len(schedule.episodes)):
            before = tuple(s for s in schedule.steps if s.episode <= episode)
            assert _simulate(before)[:2] == (set(), set()), (seed, episode)


def test_a_power_loss_waits_for_health_before_and_after_and_nothing_runs_meanwhile() -> None:
    seen = 0
    for seed in SEEDS:
        steps = generate_schedule(seed, 12, power_loss=True).steps
        for index, step in enumerate(steps):
            if step.action is not Action.POWER_LOSS:
                continue
            seen += 1
            assert steps[index - 1].action is Action.AWAIT_HEALTHY
            assert _simulate(steps[:index])[:2] == (set(), set())  # nobody else out
            following = steps[index + 1]
            assert following.action in (Action.RESTART, Action.HEAL_ALL)
            if following.action is Action.RESTART:
                assert following.name == step.name
                assert steps[index + 2].action is Action.AWAIT_HEALTHY
    assert seen > 20  # the rule was exercised


def test_power_losses_are_left_out_on_request() -> None:
    for seed in SEEDS:
        steps = generate_schedule(seed, 12, power_loss=False).steps
        assert all(step.action is not Action.POWER_LOSS for step in steps)


def test_the_validator_catches_a_power_loss_next_to_another_fault() -> None:
    steps = [
        Step(after_s=1, action=Action.KILL, role=Role.LEADER, partition=0, name="1a", episode=1),
        Step(after_s=0, action=Action.AWAIT_HEALTHY, episode=1),
        Step(after_s=0, action=Action.POWER_LOSS, role=Role.FOLLOWER, name="1b", episode=1),
        Step(after_s=1, action=Action.KILL, role=Role.ANY, name="1c", episode=1),
        Step(after_s=1, action=Action.RESTART, role=Role.BOUND, name="1b", episode=1),
        Step(after_s=1, action=Action.HEAL_ALL, episode=1),
    ]
    problems = validate_schedule(steps)
    assert any("a power loss while ['1a'] are out" in p for p in problems)
    assert any("down from a power loss" in p for p in problems)
    assert any("3 brokers down" in p for p in problems)
    assert any("restarted without AWAIT_HEALTHY" in p for p in problems)


def test_the_validator_catches_an_unrecovered_fault_and_a_missing_heal_all() -> None:
    steps = [
        Step(after_s=1, action=Action.ISOLATE, role=Role.ANY, name="1a", episode=1),
        Step(after_s=1, action=Action.KILL, role=Role.ANY, name="2a", episode=2),
        Step(after_s=1, action=Action.RESTART, role=Role.BOUND, name="2a", episode=2),
    ]
    problems = validate_schedule(steps)
    assert any("['1a'] not recovered by their episode" in p for p in problems)
    assert "the schedule does not end with HEAL_ALL" in problems


def test_a_schedule_fills_about_its_seconds_with_episodes() -> None:
    for seed in SEEDS:
        schedule = generate_schedule(seed, 12)
        assert len(schedule.episodes) >= 1
        assert schedule.planned_seconds() <= 12 + 5  # the one episode that must run anyway
        assert schedule.describe().count(";") == len(schedule.episodes) - 1


def test_the_unsafe_schedules_move_leadership() -> None:
    roles = set()
    for seed in SEEDS:
        for step in generate_schedule(seed, 12, unsafe=True).steps:
            if step.action in (Action.KILL, Action.ISOLATE):
                roles.add(step.role)
    assert Role.LEADER in roles
    assert set(UNSAFE_KINDS) <= set(SAFE_KINDS)


def test_restarts_are_both_fast_and_slow() -> None:
    session_s = 2.0
    delays = [
        step.after_s
        for seed in SEEDS
        for step in generate_schedule(seed, 12, session_timeout_ms=2000, power_loss=False).steps
        if step.action is Action.RESTART
    ]
    assert any(d < session_s for d in delays)
    assert any(d > session_s for d in delays)


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("1-5", [1, 2, 3, 4, 5]),
        ("3", [3]),
        ("1,4,9", [1, 4, 9]),
        ("1-3,7,2", [1, 2, 3, 7]),
        (" 10 - 12 ", [10, 11, 12]),
    ],
)
def test_seeds_parse(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["", "a", "5-2", "1,,2", "1-x", "-3"])
def test_bad_seeds_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_seeds(text)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        generate_schedule(1, 0)
    with pytest.raises(ValueError):
        generate_schedule(1, 12, partitions=0)


def test_a_controlled_shutdown_is_drawn_and_its_broker_restarted() -> None:
    """A rolling restart's step: a broker stops cleanly (SHUTDOWN counts as down) and the
    same episode starts it again."""
    schedules = [generate_schedule(seed, 12) for seed in range(1, 40)]
    episodes = [
        (schedule, step)
        for schedule in schedules
        for step in schedule.steps
        if step.action is Action.SHUTDOWN
    ]
    assert episodes, "no seed in 1-39 draws a controlled shutdown"
    for schedule, shutdown in episodes:
        assert validate_schedule(schedule.steps) == []
        later = schedule.steps[schedule.steps.index(shutdown) + 1 :]
        assert any(
            (s.action is Action.RESTART and s.name == shutdown.name) or s.action is Action.HEAL_ALL
            for s in later
        )
    with_one = next(s for s in schedules if any("controlled-shutdown" in e for e in s.episodes))
    assert any(e.startswith("controlled-shutdown ") for e in with_one.episodes)


def _admin_episodes(action: Action) -> list[tuple[Schedule, Step]]:
    schedules = [generate_schedule(seed, 12) for seed in range(1, 60)]
    return [
        (schedule, step)
        for schedule in schedules
        for step in schedule.steps
        if step.action is action
    ]


def _restored(schedule: Schedule, change: Step) -> bool:
    """The same episode restores the partition's replicas, or HEAL_ALL does (cut short)."""
    later = schedule.steps[schedule.steps.index(change) + 1 :]
    restore = next(s for s in later if s.action in (Action.RESTORE, Action.HEAL_ALL))
    if restore.action is Action.HEAL_ALL:
        return restore is schedule.steps[-1]
    return (restore.name, restore.partition, restore.episode) == (
        change.name,
        change.partition,
        change.episode,
    )


def test_a_reassignment_drops_a_replica_and_adds_it_back() -> None:
    """A leader or a follower is dropped (RF 3 -> 2) with nothing else out, and its own
    episode (or HEAL_ALL) reassigns the partition back to all its replicas."""
    episodes = _admin_episodes(Action.DROP_REPLICA)
    assert episodes, "no seed in 1-59 draws a reassignment"
    assert {step.role for _, step in episodes} == {Role.LEADER, Role.FOLLOWER}
    for schedule, drop in episodes:
        assert validate_schedule(schedule.steps) == []
        assert drop.partition is not None
        assert _restored(schedule, drop), schedule.describe()
        before = schedule.steps[: schedule.steps.index(drop)]
        assert _simulate(before)[:2] == (set(), set())  # every broker up and connected
    labels = [e for schedule, _ in episodes for e in schedule.episodes if "reassign" in e]
    assert any(e.startswith("reassign p") and "add it back" in e for e in labels)
    assert any("(heal-all recovers it)" in e for e in labels)  # cut short: HEAL_ALL restores


def test_a_preferred_election_follows_a_reordering_and_the_order_comes_back() -> None:
    """A follower is put first, the partition's preferred replica is elected, then the order
    is restored and every partition's preferred replica elected again."""
    episodes = _admin_episodes(Action.REORDER)
    assert episodes, "no seed in 1-59 draws a preferred election"
    for schedule, reorder in episodes:
        assert validate_schedule(schedule.steps) == []
        assert reorder.role is Role.FOLLOWER
        assert _restored(schedule, reorder), schedule.describe()
        after = schedule.steps[schedule.steps.index(reorder) + 1]
        assert (after.action, after.partition) == (Action.PREFERRED_ELECTION, reorder.partition)
    full = [
        schedule.steps
        for schedule, reorder in episodes
        if any(s.action is Action.RESTORE and s.name == reorder.name for s in schedule.steps)
    ]
    assert full, "every reordering in 1-59 was cut short"
    for steps in full:
        restore = next(i for i, s in enumerate(steps) if s.action is Action.RESTORE)
        assert steps[restore + 1].action is Action.PREFERRED_ELECTION
        assert steps[restore + 1].partition is None  # every partition


def test_the_validator_catches_an_unrestored_or_unsafe_assignment_change() -> None:
    steps = [
        Step(after_s=1, action=Action.KILL, role=Role.ANY, name="1a", episode=1),
        Step(after_s=0, action=Action.DROP_REPLICA, role=Role.LEADER, partition=0, name="1b"),
        Step(after_s=0, action=Action.REORDER, role=Role.FOLLOWER, partition=1, name="1c"),
        Step(after_s=1, action=Action.RESTART, role=Role.BOUND, name="1a", episode=1),
        Step(after_s=1, action=Action.RESTORE, role=Role.BOUND, partition=2, name="2a"),
        Step(after_s=1, action=Action.HEAL_ALL, episode=2),
    ]
    steps[1:3] = [replace(s, episode=1) for s in steps[1:3]]
    steps[4] = replace(steps[4], episode=2)
    problems = validate_schedule(steps)
    assert any("an assignment change while ['1a'] are out" in p for p in problems)
    assert any("a change while ['1b'] is not restored" in p for p in problems)
    assert any("['1b', '1c'] not recovered by their episode" in p for p in problems)
    assert any("restores 2a, which changed nothing" in p for p in problems)
