"""The exactly-once checker on hand-made histories: each anomaly kind is found, and a clean
history has none."""

from __future__ import annotations

import pytest

from kafkactor.testing.txn_verdict import (
    Attempt,
    Observed,
    Outcome,
    OutputRecord,
    TxnScheduleResult,
    check_transactions,
    format_txn_line,
    format_txn_summary,
    output_value,
    parse_output,
)

pytestmark = pytest.mark.timeout(10)

INPUTS = {0: {o: b"s1-p0-%d" % o for o in range(4)}, 1: {o: b"s1-p1-%d" % o for o in range(2)}}


def attempt(txn: str, partition: int, first: int, end: int, outcome: Outcome) -> Attempt:
    values = tuple(output_value(INPUTS[partition][o], partition, o, txn) for o in range(first, end))
    return Attempt(
        txn=txn,
        worker=partition,
        input_partition=partition,
        first_offset=first,
        end_offset=end,
        outputs=values,
        outcome=outcome,
    )


def visible(*attempts: Attempt, skip: int = 0) -> list[OutputRecord]:
    values = [v for a in attempts for v in a.outputs]
    return [OutputRecord(n % 3, n, v) for n, v in enumerate(values[skip:])]


def clean_history() -> tuple[list[Attempt], dict[int, int | None]]:
    return [
        attempt("w0-0", 0, 0, 2, Outcome.COMMITTED),
        attempt("w0-1", 0, 2, 4, Outcome.ABORTED),
        attempt("w0-2", 0, 2, 4, Outcome.UNKNOWN),
        attempt("w1-0", 1, 0, 2, Outcome.COMMITTED),
    ], {0: 4, 1: 2}


def kinds(attempts: list[Attempt], output: list[OutputRecord], **observed: object) -> set[str]:
    fields: dict[str, object] = {"inputs": INPUTS, "committed": {0: 4, 1: 2}, "output": output}
    fields.update(observed)
    return set(check_transactions(attempts, Observed(**fields)).counts)  # type: ignore[arg-type]


def test_the_output_value_carries_its_input_and_transaction() -> None:
    value = output_value(b"s1-p0-3", 0, 3, "w0-7")
    assert parse_output(value) == (b"s1-p0-3", 0, 3, "w0-7")
    assert parse_output(b"nothing") is None
    assert parse_output(None) is None


def test_a_clean_history_has_no_anomaly() -> None:
    attempts, committed = clean_history()
    output = visible(attempts[0], attempts[2], attempts[3])
    stable = {"nemesis-out-0": (9, 9)}
    assert kinds(attempts, output, committed=committed, stability=stable) == set()


def test_a_visible_aborted_transaction_is_found() -> None:
    attempts, _ = clean_history()
    output = visible(*attempts)  # as read_uncommitted reads it: the aborted w0-1 too
    assert kinds(attempts, output) == {"aborted-visible", "duplicate"}


def test_a_transaction_visible_in_part_is_found() -> None:
    attempts, _ = clean_history()
    output = visible(attempts[0], attempts[2], attempts[3])
    del output[2]  # w0-2's first record
    assert kinds(attempts, output) == {"partial", "lost"}


def test_a_lost_commit_and_an_unfinished_input_are_found() -> None:
    attempts, _ = clean_history()
    output = visible(attempts[2], attempts[3])  # w0-0 committed, not visible
    assert kinds(attempts, output) == {"commit-lost", "lost"}
    assert kinds(attempts, visible(attempts[0], attempts[3]), committed={0: 2, 1: 2}) == {
        "unfinished"
    }


def test_output_ahead_of_the_committed_offsets_is_found() -> None:
    attempts, _ = clean_history()
    output = visible(attempts[0], attempts[2], attempts[3])
    found = kinds(attempts, output, committed={0: 2, 1: 2})
    assert found == {"ahead-of-offsets", "unfinished"}


def test_offsets_only_an_aborted_transaction_sent_are_found() -> None:
    attempts = [
        attempt("w0-0", 0, 0, 2, Outcome.COMMITTED),
        attempt("w0-1", 0, 2, 4, Outcome.ABORTED),
        attempt("w1-0", 1, 0, 2, Outcome.COMMITTED),
    ]
    output = visible(attempts[0], attempts[2])
    assert kinds(attempts, output, committed={0: 4, 1: 2}) == {"aborted-offsets", "lost"}


def test_a_hanging_partition_garbage_and_a_zombie_commit_are_found() -> None:
    attempts, _ = clean_history()
    output = [*visible(attempts[0], attempts[2], attempts[3]), OutputRecord(0, 99, b"x")]
    found = kinds(
        attempts,
        output,
        stability={"nemesis-out-1": (5, 9)},
        zombie_commits=["w0-5"],
    )
    assert found == {"garbage", "hanging", "zombie-commit"}


def test_the_line_and_the_summary_name_the_anomalies() -> None:
    attempts, _ = clean_history()
    result = TxnScheduleResult(seed=7, unsafe=False, schedule="kill-leader(p0)", liveness_ok=True)
    clean = result.ok
    assert clean
    result.anomalies = check_transactions(
        attempts, Observed(inputs=INPUTS, committed={0: 4, 1: 2}, output=visible(*attempts))
    )
    assert not result.ok
    line = format_txn_line(result)
    assert "aborted-visible=2" in line and "ANOMALY" in line and "w0-1" in line
    table, held = format_txn_summary([result])
    assert not held
    assert "aborted-visible 2" in table and "(7)" in table


def test_an_unreadable_committed_offset_is_reported_once_not_as_loss() -> None:
    attempts, _ = clean_history()
    output = visible(attempts[0], attempts[2], attempts[3])
    assert kinds(attempts, output, committed={1: 2}) == {"offsets-unreadable"}
