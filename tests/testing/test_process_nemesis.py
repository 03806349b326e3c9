"""The nemesis against broker processes: the on-disk verdict on crafted data dirs, ZooKeeper's
session password, and one short schedule against three `kafkactor broker` processes on a real
ZooKeeper (skipped when Debian's ZooKeeper or confluent-kafka is missing). Its seed draws a
reassignment (a follower dropped and added back through `/admin/reassign_partitions`), one
broker isolated while the two others crash, a session expiry and a controlled shutdown; the
in-process seeds of tests/testing/test_nemesis_run.py cover the other kinds."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from kafkactor import cli
from kafkactor.actors.replication.high_watermarks import REPLICATION_OFFSET_CHECKPOINT
from kafkactor.common import TopicPartition
from kafkactor.storage import Log, OffsetCheckpoint, Record
from kafkactor.testing import process_nemesis
from kafkactor.testing.disk_verdict import PartitionEnd, check_data_dirs, read_replica
from kafkactor.testing.process_nemesis import (
    missing,
    run_process_schedule,
    zookeeper_session_password,
)
from kafkactor.testing.schedule import Action, generate_schedule
from kafkactor.testing.verdict import Ack, ScheduleResult, format_line

TOPIC = "nemesis"


def replica(
    root: Path, broker: int, batches: Sequence[Sequence[bytes]], high_watermark: int | None
) -> Path:
    """Broker `broker`'s data dir under `root`, holding `batches` (one append each, epoch 0)
    in nemesis-0, and `high_watermark` in its replication-offset-checkpoint."""
    data_dir = root / f"broker-{broker}"
    data_dir.mkdir(parents=True)
    log = Log(data_dir / f"{TOPIC}-0")
    for values in batches:
        log.append_as_leader([Record(None, v, 1_000) for v in values], leader_epoch=0)
    log.close()
    if high_watermark is not None:
        OffsetCheckpoint(data_dir / REPLICATION_OFFSET_CHECKPOINT).write(
            {TopicPartition(topic=TOPIC, partition=0): high_watermark}
        )
    return data_dir


BATCHES = [[b"a0", b"a1"], [b"a2"], [b"a3", b"a4", b"a5"]]  # offsets 0-1, 2, 3-5
ACKED = [Ack(b"a%d" % n, 0, n) for n in range(6)]
FULL = PartitionEnd(leader=1, isr=frozenset({1, 2, 3}), high_watermark=6)


Replica = tuple[Sequence[Sequence[bytes]], int | None]  # batches, checkpointed HW


def dirs(tmp_path: Path, *replicas: Replica) -> dict[int, Path]:
    return {
        broker: replica(tmp_path, broker, batches, hw)
        for broker, (batches, hw) in enumerate(replicas, start=1)
    }


def test_identical_replicas_holding_every_acked_record_pass(tmp_path: Path) -> None:
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6), (BATCHES, 6))
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: FULL})
    assert (verdict.lost, verdict.divergent, verdict.duplicates) == ([], [], 0)
    assert verdict.high_watermarks == {0: 6} and verdict.notes == []


def test_an_acked_record_not_at_its_offset_below_the_hw_is_lost(tmp_path: Path) -> None:
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6), (BATCHES, 6))
    acked = [*ACKED, Ack(b"elsewhere", 0, 4), Ack(b"a5", 0, 6)]  # a wrong value; past the HW
    verdict = check_data_dirs(data_dirs, TOPIC, 1, acked, {0: FULL})
    assert [(r.value, r.offset, r.found) for r in verdict.lost] == [
        (b"elsewhere", 4, b"a4"),
        (b"a5", 6, None),
    ]
    assert verdict.lost[1].elsewhere == ((0, 5),)


def test_an_acked_record_every_replica_lost_is_found_lost(tmp_path: Path) -> None:
    short = BATCHES[:2]  # offsets 0-2 only, everywhere, though a client saw HW 6
    data_dirs = dirs(tmp_path, (short, 3), (short, 3), (short, 3))
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: FULL})
    assert [r.offset for r in verdict.lost] == [3, 4, 5]
    assert verdict.high_watermarks == {0: 6}


def test_an_in_sync_replica_that_differs_below_the_hw_diverges(tmp_path: Path) -> None:
    other = [[b"a0", b"a1"], [b"a2"], [b"a3", b"XX", b"a5"]]
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6), (other, 6))
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: FULL})
    assert [(d.partition, d.offset) for d in verdict.divergent] == [(0, 3)]
    assert "broker 3" in verdict.divergent[0].detail
    assert verdict.lost == []  # the leader's log holds them


def test_an_in_sync_replica_short_of_the_hw_diverges(tmp_path: Path) -> None:
    # broker 3's checkpoint says 3: the HW still is the highest known, 6
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6), (BATCHES[:2], 3))
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: FULL})
    assert [(d.partition, d.offset) for d in verdict.divergent] == [(0, 3)]
    assert any("not settled on disk" in note for note in verdict.notes)


def test_an_in_sync_replica_with_no_log_at_all_diverges(tmp_path: Path) -> None:
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6))
    data_dirs[3] = tmp_path / "broker-3"
    data_dirs[3].mkdir()
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: FULL})
    assert [(d.offset, d.detail) for d in verdict.divergent] == [
        (0, "broker 1: batch 0..1 (79 B), broker 3: no batch")
    ]
    assert any("broker 3 has no log" in note for note in verdict.notes)


def test_a_replica_out_of_the_isr_may_lag_and_hold_an_uncommitted_tail(tmp_path: Path) -> None:
    # broker 3 fell out of the ISR at HW 3; it then appended a tail of its own above it
    tail = [*BATCHES[:2], [b"stale"]]
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6), (tail, 3))
    end = PartitionEnd(leader=1, isr=frozenset({1, 2}), high_watermark=6)
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: end})
    assert (verdict.lost, verdict.divergent) == ([], [])


def test_a_replica_out_of_the_isr_that_differs_below_its_own_hw_diverges(
    tmp_path: Path,
) -> None:
    other = [[b"a0", b"a1"], [b"XX"]]
    data_dirs = dirs(tmp_path, (BATCHES, 6), (BATCHES, 6), (other, 3))
    end = PartitionEnd(leader=1, isr=frozenset({1, 2}), high_watermark=6)
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: end})
    assert [(d.partition, d.offset) for d in verdict.divergent] == [(0, 2)]


def test_the_reference_is_the_last_leader_and_duplicates_are_counted(tmp_path: Path) -> None:
    twice = [*BATCHES, [b"a1"]]  # a retried send written twice, at 1 and at 6
    data_dirs = dirs(tmp_path, (twice, 7), (twice, 7), (twice, 7))
    verdict = check_data_dirs(data_dirs, TOPIC, 1, ACKED, {0: PartitionEnd(leader=2)})
    assert (verdict.lost, verdict.divergent, verdict.duplicates) == ([], [], 1)


def test_reading_a_replica_changes_nothing_in_its_data_dir(tmp_path: Path) -> None:
    data_dir = replica(tmp_path, 1, BATCHES, 6)
    segment = data_dir / f"{TOPIC}-0" / "00000000000000000000.log"
    with segment.open("ab") as torn:  # a torn write past the last batch
        torn.write(b"\x00\x00\x00\x00\x00\x00\x00\x06\x00\x00")
    before = {p: p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}
    notes: list[str] = []
    held = read_replica(data_dir, TOPIC, 0, 1, notes)
    assert (held.high_watermark, held.log_end_offset) == (6, 6)
    assert held.records(6) == {n: b"a%d" % n for n in range(6)}
    assert any("torn tail" in note for note in notes)
    assert {p: p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()} == before


def test_zookeeper_session_passwords_are_java_randoms_first_bytes() -> None:
    # java.util.Random(0): nextInt() is -1155484576 (0xBB20B460), then -723955400 (0xD4D95138);
    # nextBytes takes each int's bytes low first. Session 0xB3415C00 seeds Random(0).
    password = zookeeper_session_password(0xB3415C00)
    assert len(password) == 16
    assert password[:8] == bytes([0x60, 0xB4, 0x20, 0xBB, 0x38, 0x51, 0xD9, 0xD4])
    assert zookeeper_session_password(0x10002B424FD0001) != password


def test_process_schedules_have_no_power_losses() -> None:
    with pytest.raises(ValueError, match="power losses"):
        run_process_schedule(1, 5, power_loss=True)


def test_the_command_runs_process_schedules_without_power_losses(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[int, dict[str, Any]]] = []

    def run(
        seed: int, seconds: float, *, progress: Callable[[str], None] | None = None, **options: Any
    ) -> ScheduleResult:
        calls.append((seed, options))
        if progress is not None:
            progress("t=  1.00s isolate any=1a: broker 2 pid 9 paused (SIGSTOP)")
        result = ScheduleResult(seed=seed, unsafe=False, schedule="isolate any 1.00s")
        result.acked, result.liveness_ok, result.recovery_s = 10, True, 0.5
        return result

    monkeypatch.setattr(process_nemesis, "missing", lambda: None)
    monkeypatch.setattr(process_nemesis, "run_process_schedule", run)
    assert cli.main(["nemesis", "--processes", "--seeds", "1-2", "--seconds", "5"]) == 0
    assert [seed for seed, _ in calls] == [1, 2]
    assert all(options["power_loss"] is False for _, options in calls)
    out, err = capsys.readouterr()
    assert [line.split()[1] for line in out.splitlines()[:2]] == ["1", "2"]
    assert "the claim held" in out
    assert "3 broker processes on ZooKeeper, no power losses" in err
    assert "seed 2: t=  1.00s isolate any=1a: broker 2 pid 9 paused (SIGSTOP)" in err


def test_the_command_exits_2_when_processes_cannot_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(process_nemesis, "missing", lambda: "no ZooKeeper: no java on PATH")
    assert cli.main(["nemesis", "--processes", "--seeds", "1"]) == 2
    assert "--processes cannot run here: no ZooKeeper: no java on PATH" in capsys.readouterr().err


# -- against processes -----------------------------------------------------------------------

# kill and restart (KIP-101's case), isolate (pause) and heal, a controlled shutdown (SIGTERM)
# and restart, expire a session, heal-all a pause
SEED = 16068


def _ours(marker: str) -> list[int]:
    """The pids whose command line names `marker` (a path of this test)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.skipif(missing() is not None, reason=f"cannot run processes: {missing()}")
@pytest.mark.timeout(90)
def test_a_short_schedule_against_broker_processes_loses_nothing(tmp_path: Path) -> None:
    schedule = generate_schedule(SEED, 10, power_loss=False)
    actions = {step.action for step in schedule.steps}
    assert {
        Action.ISOLATE,
        Action.HEAL,
        Action.KILL,
        Action.SHUTDOWN,
        Action.EXPIRE_SESSION,
        Action.DROP_REPLICA,
        Action.RESTORE,
    } <= actions
    started = time.monotonic()
    result = run_process_schedule(SEED, 10, events_dir=tmp_path)
    took = time.monotonic() - started
    line = format_line(result)
    assert result.error is None, line
    assert result.acked > 0, line
    assert (result.lost, result.divergent) == ([], []), line
    assert result.liveness_ok and result.ok, line
    applied = "\n".join(result.applied)
    assert "FAILED" not in applied, applied
    for did in (
        "paused (SIGSTOP)",
        "resumed (SIGCONT)",
        "killed (SIGKILL)",
        "stopped (SIGTERM; exited in",
        "serving on",
    ):
        assert did in applied, applied
    assert " expired" in applied, applied
    assert "(broker " in applied and " dropped), done in" in applied, applied
    assert "restore-replicas" in applied and "NOT DONE" not in applied, applied
    assert "heal-all: restarted" in applied, applied
    # a passing schedule leaves nothing: no directory, no process
    assert list(tmp_path.iterdir()) == []
    assert _ours(str(tmp_path)) == []
    assert took < 60, f"{took:.1f}s: {line}"
