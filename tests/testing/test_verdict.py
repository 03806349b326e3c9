"""The verdict on synthetic data: lost, duplicated and divergent records, lines and summary."""

from __future__ import annotations

from pathlib import Path

from kafkactor.storage import Log, LogConfig, Record, iter_batches
from kafkactor.testing.read_back import stored_batches
from kafkactor.testing.verdict import (
    Ack,
    Divergence,
    LostRecord,
    ScheduleResult,
    StoredBatch,
    count_duplicates,
    find_divergence,
    find_lost,
    format_line,
    format_summary,
    summarize,
)

CONSUMED = {0: {0: b"a", 1: b"b", 2: b"c"}, 1: {0: b"d", 1: b"e"}}


def test_every_acked_record_at_its_offset_is_not_lost() -> None:
    acked = [Ack(b"a", 0, 0), Ack(b"c", 0, 2), Ack(b"e", 1, 1)]
    assert find_lost(acked, CONSUMED) == []


def test_an_acked_value_missing_is_lost() -> None:
    lost = find_lost([Ack(b"a", 0, 0), Ack(b"x", 0, 3)], CONSUMED)
    assert lost == [LostRecord(b"x", 0, 3, None, ())]


def test_an_acked_value_at_another_offset_is_lost() -> None:
    # "b" was acknowledged at offset 2, but offset 2 holds "c" and "b" sits at offset 1
    lost = find_lost([Ack(b"b", 0, 2)], CONSUMED)
    assert lost == [LostRecord(b"b", 0, 2, b"c", ((0, 1),))]
    # and in another partition
    assert find_lost([Ack(b"d", 0, 0)], CONSUMED) == [LostRecord(b"d", 0, 0, b"a", ((1, 0),))]


def test_failed_sends_are_never_lost_because_only_acks_are_checked() -> None:
    assert find_lost([], CONSUMED) == []


def test_duplicates_count_the_extra_copies() -> None:
    assert count_duplicates(CONSUMED) == 0
    consumed: dict[int, dict[int, bytes | None]] = {
        0: {0: b"a", 1: b"a", 2: b"a", 3: None, 4: None},
        1: {0: b"b", 1: b"a"},
    }
    assert count_duplicates(consumed) == 3  # "a" four times; None (no value) does not count


def batch(base: int, last: int, data: bytes = b"") -> StoredBatch:
    return StoredBatch(base, last, data or f"{base}-{last}".encode())


def test_identical_replicas_do_not_diverge() -> None:
    log = [batch(0, 4), batch(5, 9), batch(10, 12)]
    assert find_divergence(0, 13, {1: log, 2: list(log), 3: list(log)}) is None


def test_batches_at_or_above_the_high_watermark_are_not_compared() -> None:
    common = [batch(0, 4), batch(5, 9)]
    replicas = {1: [*common, batch(10, 12, b"x")], 2: [*common, batch(10, 11, b"y")]}
    assert find_divergence(0, 10, replicas) is None
    assert find_divergence(0, 12, replicas) is not None  # 10..11 is below 12 on broker 2


def test_a_replica_with_other_bytes_below_the_high_watermark_diverges() -> None:
    replicas = {
        1: [batch(0, 4), batch(5, 9, b"leader's")],
        2: [batch(0, 4), batch(5, 9, b"leader's")],
        3: [batch(0, 4), batch(5, 9, b"stale one")],
    }
    divergence = find_divergence(2, 10, replicas)
    assert isinstance(divergence, Divergence)
    assert (divergence.partition, divergence.high_watermark, divergence.offset) == (2, 10, 5)
    assert "broker 3" in divergence.detail


def test_other_batch_boundaries_diverge_even_over_the_same_offsets() -> None:
    replicas = {1: [batch(0, 9, b"one")], 2: [batch(0, 4, b"a"), batch(5, 9, b"b")]}
    divergence = find_divergence(0, 10, replicas)
    assert divergence is not None and divergence.offset == 0


def test_a_replica_short_of_the_high_watermark_diverges_unless_it_may_lag() -> None:
    replicas = {1: [batch(0, 4), batch(5, 9)], 2: [batch(0, 4)]}
    divergence = find_divergence(0, 10, replicas)
    assert divergence is not None and divergence.offset == 5
    assert "no batch" in divergence.detail
    assert find_divergence(0, 10, replicas, may_lag={2}) is None  # out of the ISR: behind
    # a lagging replica must still agree as far as it goes
    assert find_divergence(0, 10, {1: replicas[1], 2: [batch(0, 4, b"z")]}, may_lag={2})


def test_a_lone_replica_cannot_diverge() -> None:
    assert find_divergence(0, 10, {1: [batch(0, 9)]}) is None


def test_stored_batches_reads_whole_batches_below_the_high_watermark(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300))  # several segments
    for n in range(20):
        records = [Record(None, f"v{n}-{i}".encode(), 0) for i in range(3)]
        log.append_as_leader(records, leader_epoch=0)
    try:
        batches = stored_batches(log, high_watermark=31)
        assert [(b.base_offset, b.last_offset) for b in batches] == [
            (3 * n, 3 * n + 2) for n in range(10)
        ]
        whole = log.read(0, 1 << 20, max_offset=30).records
        assert b"".join(b.data for b in batches).startswith(whole[: len(batches[0].data)])
        for stored in batches:
            (parsed,) = list(iter_batches(stored.data))
            assert parsed.base_offset == stored.base_offset
        assert stored_batches(log, high_watermark=0) == []
        assert len(stored_batches(log, high_watermark=60)) == 20
    finally:
        log.close()


def result(seed: int, **fields: object) -> ScheduleResult:
    made = ScheduleResult(seed=seed, unsafe=False, schedule="kill leader(p0), fast restart 0.5s")
    made.liveness_ok = True
    made.recovery_s = 1.0
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def test_a_line_per_schedule() -> None:
    line = format_line(result(7, acked=1200, failed=30, recovery_s=2.25))
    assert line.startswith("seed    7 safe ")
    assert "acked   1200" in line and "failed    30" in line and "lost     0" in line
    assert "recovery   2.2s ok" in line or "recovery   2.3s ok" in line
    assert line.endswith("| kill leader(p0), fast restart 0.5s")
    lost = format_line(result(8, lost=[LostRecord(b"x", 0, 3, None)]))
    assert "lost     1" in lost and " LOSS " in lost
    stuck = format_line(result(9, liveness_ok=False, recovery_s=None))
    assert "recovery   none STUCK" in stuck
    diverged = format_line(
        result(10, divergent=[Divergence(2, 10, 5, "broker 1: [5..6], broker 2: none")])
    )
    assert "divergent p2" in diverged and "DIVERGED" in diverged
    assert "| p2 differs from offset 5 below HW 10: broker 1: [5..6], broker 2: none" in diverged
    failed = format_line(result(11, error="RuntimeError('x')"))
    assert "ERROR" in failed and "error: RuntimeError('x')" in failed


def test_the_summary_adds_up() -> None:
    results = [
        result(1, acked=100, failed=5, recovery_s=1.5),
        result(2, acked=200, lost=[LostRecord(b"x", 0, 3, None)] * 2, recovery_s=4.0),
        result(3, acked=50, divergent=[Divergence(1, 9, 0, "")], duplicates=1),
        result(4, liveness_ok=False, recovery_s=None),
    ]
    summary = summarize(results)
    assert (summary.schedules, summary.acked, summary.failed) == (4, 350, 5)
    assert (summary.lost, summary.divergent, summary.duplicates) == (2, 1, 1)
    assert summary.seeds_with_loss == (2,)
    assert summary.seeds_divergent == (3,)
    assert summary.seeds_unrecovered == (4,)
    assert (summary.slowest_recovery_s, summary.slowest_seed) == (4.0, 2)
    assert not summary.ok
    table = format_summary(summary)
    assert "schedules with loss        1 (2)" in table
    assert "slowest recovery           4.0 s (seed 2)" in table
    assert summarize([result(1)]).ok
