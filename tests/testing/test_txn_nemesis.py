"""`kafkactor nemesis --transactions` against a live cluster: exactly-once holds under a short
seeded fault schedule, and the read_uncommitted control finds the aborted records (so the
checker can fail)."""

from __future__ import annotations

import pytest

from kafkactor.testing.txn_nemesis import run_txn_schedule
from kafkactor.testing.txn_verdict import TxnScheduleResult, format_txn_line

pytestmark = pytest.mark.timeout(90)

SEED = 7
SECONDS = 5.0


def explain(result: TxnScheduleResult) -> str:
    return "\n".join(
        [
            format_txn_line(result),
            *(f"  note: {note}" for note in result.notes),
            *(f"  step: {step}" for step in result.applied),
            f"  worker errors: {dict(result.worker_errors)}",
        ]
    )


def test_exactly_once_holds_under_a_fault_schedule() -> None:
    result = run_txn_schedule(SEED, SECONDS)
    assert result.error is None, explain(result)
    assert result.transactions["committed"] > 0, explain(result)
    assert result.transactions["aborted"] > 0, explain(result)  # the check had aborts to see
    assert result.outputs_read == result.acked, explain(result)  # each input once
    assert not result.anomalies, explain(result)
    assert result.ok, explain(result)


def test_the_read_uncommitted_control_finds_the_aborted_records() -> None:
    result = run_txn_schedule(SEED, 2.0, read_uncommitted=True, per_partition=60)
    assert result.error is None, explain(result)
    assert result.anomalies.counts["aborted-visible"] > 0, explain(result)
    assert not result.ok
