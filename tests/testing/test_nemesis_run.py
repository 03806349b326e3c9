"""The nemesis against a live cluster: the claim holds under fixed seeds, and the control fails.

The safe seeds together cover every fault kind: kills of leaders, followers and the
controller with fast and slow restarts; a follower restarted fast just before its leader
crashes (KIP-101's case); two brokers killed at once; an isolated leader that crashes; one
broker isolated while the two others crash; isolation of a leader and of the controller;
session expiries; power loss of a follower and of the controller; a controlled shutdown of
the controller (a rolling restart's step); a reassignment that drops a partition's leader and
adds it back (rebuilt from the new leader under load); a reordering of a partition's replicas
and a preferred election, cut short so that HEAL_ALL restores the order. With the process
target's seed (tests/testing/test_process_nemesis.py: a reassignment through the ZooKeeper
znode) they cover a reassignment of a follower too. Each schedule is about 8 s of faults,
then healing and the checks (about 12-15 s a seed). The unsafe control (acks=1, min ISR 1,
unclean leader election) must lose acknowledged records, or the checker proves nothing.
"""

from __future__ import annotations

import pytest

from kafkactor.testing.nemesis import run_schedule
from kafkactor.testing.verdict import ScheduleResult, format_line

SECONDS = 8.0
SAFE_SEEDS = [62, 993, 1180, 1292, 1751, 2536]
UNSAFE_SEEDS = [9, 7, 4]


def explain(result: ScheduleResult) -> str:
    lost = [f"p{r.partition}@{r.offset} {r.value!r} found {r.found!r}" for r in result.lost[:5]]
    return "\n".join(
        [
            format_line(result),
            *(f"  lost: {line}" for line in lost),
            *(f"  divergent: {d}" for d in result.divergent),
            *(f"  note: {note}" for note in result.notes),
            *(f"  step: {step}" for step in result.applied),
        ]
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", SAFE_SEEDS)
def test_acks_all_loses_nothing_and_recovers_under_the_fault_schedule(seed: int) -> None:
    result = run_schedule(seed, SECONDS)
    assert result.error is None, explain(result)
    assert result.acked > 0, explain(result)  # the workload got through between faults
    assert result.lost == [], explain(result)
    assert result.divergent == [], explain(result)
    assert result.liveness_ok, explain(result)
    assert result.duplicates == 0, explain(result)


@pytest.mark.timeout(90)
def test_the_unsafe_configuration_loses_acknowledged_records() -> None:
    results = []
    for seed in UNSAFE_SEEDS:
        result = run_schedule(seed, SECONDS, unsafe=True)
        assert result.error is None, explain(result)
        results.append(result)
        if result.lost:
            break
    assert any(r.lost for r in results), "\n".join(explain(r) for r in results)
