"""`kafkactor nemesis`: lines, summary and exit status, over a stand-in for the runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafkactor import cli
from kafkactor.testing import nemesis
from kafkactor.testing.verdict import LostRecord, ScheduleResult

pytestmark = pytest.mark.timeout(30)


def fake_runs(
    monkeypatch: pytest.MonkeyPatch,
    *,
    lost_on: frozenset[int] = frozenset(),
    stuck_on: frozenset[int] = frozenset(),
) -> list[tuple[int, dict[str, Any]]]:
    calls: list[tuple[int, dict[str, Any]]] = []

    def run_schedule(
        seed: int,
        seconds: float,
        *,
        progress: Callable[[str], None] | None = None,
        **options: Any,
    ) -> ScheduleResult:
        calls.append((seed, options))
        if progress is not None:
            progress("t=  1.00s kill leader(p0)=1a: broker 2")
        result = ScheduleResult(
            seed=seed, unsafe=options["unsafe"], schedule="kill leader(p0), slow restart 3s"
        )
        result.acked, result.failed = 100, 3
        result.liveness_ok = seed not in stuck_on
        result.recovery_s = None if seed in stuck_on else 0.5 * seed
        if seed in lost_on:
            result.lost = [LostRecord(b"v", 0, 7, None)]
        return result

    monkeypatch.setattr(nemesis, "run_schedule", run_schedule)
    return calls


def test_a_safe_run_that_holds_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = fake_runs(monkeypatch)
    assert cli.main(["nemesis", "--seeds", "1-3", "--seconds", "5", "--no-power-loss"]) == 0
    assert [seed for seed, _ in calls] == [1, 2, 3]
    assert all(not options["unsafe"] and not options["power_loss"] for _, options in calls)
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert [line.split()[1] for line in lines[:3]] == ["1", "2", "3"]
    assert "slowest recovery" in out and "1.5 s (seed 3)" in out
    assert "the claim held" in out
    assert "seed 2: t=  1.00s kill leader(p0)=1a: broker 2" in err  # progress on stderr


def test_a_safe_run_with_loss_or_no_recovery_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_runs(monkeypatch, lost_on=frozenset({2}))
    assert cli.main(["nemesis", "--seeds", "1,2", "--seconds", "5"]) == 1
    assert "THE CLAIM FAILED" in capsys.readouterr().out
    fake_runs(monkeypatch, stuck_on=frozenset({1}))
    assert cli.main(["nemesis", "--seeds", "1,2", "--seconds", "5"]) == 1
    assert "not recovered in time      1 (seeds 1)" in capsys.readouterr().out


def test_the_unsafe_control_exits_0_only_when_loss_was_found(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = fake_runs(monkeypatch, lost_on=frozenset({3}))
    assert cli.main(["nemesis", "--seeds", "1-3", "--seconds", "5", "--unsafe"]) == 0
    assert all(options["unsafe"] for _, options in calls)
    assert "the checker can find loss" in capsys.readouterr().out
    fake_runs(monkeypatch)
    assert cli.main(["nemesis", "--seeds", "1-3", "--seconds", "5", "--unsafe"]) == 1
    assert "CONTROL FAILED" in capsys.readouterr().out


def test_bad_seeds_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["nemesis", "--seeds", "9-3"])
    assert exited.value.code == 2
    assert "an empty range" in capsys.readouterr().err


def test_no_power_loss_leaves_power_losses_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = fake_runs(monkeypatch)
    assert cli.main(["nemesis", "--seeds", "1", "--seconds", "5", "--no-power-loss"]) == 0
    assert calls[0][1]["power_loss"] is False
    assert cli.main(["nemesis", "--seeds", "1", "--seconds", "5"]) == 0
    assert calls[1][1]["power_loss"] is True


def fake_txn_runs(
    monkeypatch: pytest.MonkeyPatch, *, anomalies_on: frozenset[int] = frozenset()
) -> list[tuple[int, dict[str, Any]]]:
    from kafkactor.testing import txn_nemesis
    from kafkactor.testing.txn_verdict import TxnScheduleResult

    calls: list[tuple[int, dict[str, Any]]] = []

    def run_txn_schedule(seed: int, seconds: float, **options: Any) -> TxnScheduleResult:
        calls.append((seed, options))
        result = TxnScheduleResult(seed=seed, unsafe=False, schedule="kill leader(p0)")
        result.acked, result.liveness_ok, result.recovery_s = 600, True, 1.0
        result.transactions.update(committed=40, aborted=5)
        if seed in anomalies_on:
            result.anomalies.add("aborted-visible", "w0-3: 2 of its 2 records visible", 2)
        return result

    monkeypatch.setattr(txn_nemesis, "run_txn_schedule", run_txn_schedule)
    return calls


def test_transactions_run_the_transactional_schedules(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = fake_txn_runs(monkeypatch)
    assert cli.main(["nemesis", "--transactions", "--seeds", "1,2", "--seconds", "5"]) == 0
    assert [seed for seed, _ in calls] == [1, 2]
    assert all(options["read_uncommitted"] is False for _, options in calls)
    out = capsys.readouterr().out
    assert "committed   40 aborted    5" in out and "the claim held" in out
    fake_txn_runs(monkeypatch, anomalies_on=frozenset({2}))
    assert cli.main(["nemesis", "--transactions", "--seeds", "1,2", "--seconds", "5"]) == 1
    out = capsys.readouterr().out
    assert "aborted-visible=2" in out and "THE CLAIM FAILED" in out


def test_the_read_uncommitted_control_exits_0_only_when_anomalies_were_found(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["nemesis", "--transactions", "--read-uncommitted", "--seeds", "1,2", "--seconds", "5"]
    calls = fake_txn_runs(monkeypatch, anomalies_on=frozenset({1}))
    assert cli.main(argv) == 0
    assert all(options["read_uncommitted"] for _, options in calls)
    assert "the checker can fail" in capsys.readouterr().out
    fake_txn_runs(monkeypatch)
    assert cli.main(argv) == 1
    assert "CONTROL FAILED" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags",
    [["--read-uncommitted"], ["--transactions", "--unsafe"], ["--transactions", "--processes"]],
)
def test_transaction_flags_out_of_place_are_usage_errors(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["nemesis", "--seeds", "1", *flags]) == 2
    assert "--read-uncommitted" in capsys.readouterr().err
