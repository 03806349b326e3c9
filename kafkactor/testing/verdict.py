"""The nemesis's verdict: plain functions over what was acknowledged and what the logs hold.

- An acknowledged record is lost unless a consumer reads its value at the partition and offset
  it was acknowledged with. A send whose Future failed (or never answered) is indeterminate: it
  may or may not be in the log, and is never counted as lost.
- A value read more than once is a duplicate (the workload sends each value once, without
  retries, so any copy comes from the brokers).
- A partition diverges when its replicas do not hold the same record batches, byte for byte,
  below the high watermark.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# partition -> offset -> value, as a consumer read them
Consumed = Mapping[int, Mapping[int, bytes | None]]


@dataclass(frozen=True, slots=True)
class Ack:
    """A record the cluster acknowledged: its value, and where the acknowledgement put it."""

    value: bytes
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class LostRecord:
    """An acknowledged record not found at its offset: `found` is what is there (None:
    nothing), `elsewhere` the (partition, offset)s where its value was read instead."""

    value: bytes
    partition: int
    offset: int
    found: bytes | None
    elsewhere: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One record batch of a replica's log: its offsets and its bytes."""

    base_offset: int
    last_offset: int
    data: bytes


@dataclass(frozen=True, slots=True)
class Divergence:
    """A partition whose replicas differ below the high watermark, from `offset` on."""

    partition: int
    high_watermark: int
    offset: int
    detail: str


def find_lost(acked: Iterable[Ack], consumed: Consumed) -> list[LostRecord]:
    """The acknowledged records whose value is not at their (partition, offset)."""
    where: dict[bytes, list[tuple[int, int]]] = {}
    for partition, records in consumed.items():
        for offset, value in records.items():
            if value is not None:
                where.setdefault(value, []).append((partition, offset))
    lost = []
    for ack in acked:
        found = consumed.get(ack.partition, {}).get(ack.offset)
        if found != ack.value:
            elsewhere = tuple(sorted(where.get(ack.value, [])))
            lost.append(LostRecord(ack.value, ack.partition, ack.offset, found, elsewhere))
    return sorted(lost, key=lambda r: (r.partition, r.offset))


def count_duplicates(consumed: Consumed) -> int:
    """Extra copies of values read more than once (a value read 3 times counts 2)."""
    counts = Counter(v for records in consumed.values() for v in records.values() if v is not None)
    return sum(n - 1 for n in counts.values() if n > 1)


def find_divergence(
    partition: int,
    high_watermark: int,
    replicas: Mapping[int, Sequence[StoredBatch]],
    *,
    may_lag: Collection[int] = (),
) -> Divergence | None:
    """Compare the replicas' batches that end below the high watermark; None if identical.

    A replica whose log ends short of the high watermark diverges too (every ISR member holds
    everything below it), unless it is in `may_lag` (out of the ISR): those are compared only
    as far as they reach.
    """
    below = {
        broker: [b for b in batches if b.last_offset < high_watermark]
        for broker, batches in sorted(replicas.items(), key=lambda kv: (kv[0] in may_lag, kv[0]))
    }
    if len(below) < 2:
        return None
    (reference, expected), *others = below.items()
    for broker, batches in others:
        length = max(len(expected), len(batches))
        if broker in may_lag:
            length = len(batches)
        for index in range(length):
            mine = batches[index] if index < len(batches) else None
            theirs = expected[index] if index < len(expected) else None
            if mine == theirs:
                continue
            offset = min(b.base_offset for b in (mine, theirs) if b is not None)
            return Divergence(
                partition,
                high_watermark,
                offset,
                f"broker {reference}: {_describe(theirs)}, broker {broker}: {_describe(mine)}",
            )
    return None


def _describe(batch: StoredBatch | None) -> str:
    if batch is None:
        return "no batch"
    return f"batch {batch.base_offset}..{batch.last_offset} ({len(batch.data)} B)"


@dataclass(slots=True, kw_only=True)
class ScheduleResult:
    """What one schedule did and what the checker found."""

    seed: int
    unsafe: bool
    schedule: str  # the episodes, as `Schedule.describe()` gives them
    applied: list[str] = field(default_factory=list)  # each step as it ran: time, broker
    acked: int = 0
    failed: int = 0  # sends whose Future failed: indeterminate, never counted as lost
    failed_codes: dict[str, int] = field(default_factory=dict)  # error code -> sends
    unanswered: int = 0  # sends still unanswered at the end: indeterminate too
    lost: list[LostRecord] = field(default_factory=list)
    duplicates: int = 0
    divergent: list[Divergence] = field(default_factory=list)
    recovery_s: float | None = None  # heal-all to every leader live and every ISR full
    liveness_ok: bool = False
    events_path: Path | None = None
    notes: list[str] = field(default_factory=list)  # skipped steps, unmet waits, ...
    elapsed_s: float = 0.0
    error: str | None = None  # the run itself failed (e.g. the cluster did not start)

    @property
    def ok(self) -> bool:
        """Nothing acknowledged lost, no divergence, recovered (the safe claim holds)."""
        return self.error is None and not self.lost and not self.divergent and self.liveness_ok


def format_line(result: ScheduleResult) -> str:
    """One line: seed, counts, verdict, then the schedule."""
    mode = "unsafe" if result.unsafe else "safe"
    recovery = f"{result.recovery_s:5.1f}s" if result.recovery_s is not None else "  none"
    divergent = ",".join(f"p{d.partition}" for d in result.divergent) or "-"
    if result.error is not None:
        verdict = "ERROR"
    elif result.ok:
        verdict = "ok"
    else:
        verdict = "LOSS" if result.lost else ("DIVERGED" if result.divergent else "STUCK")
    line = (
        f"seed {result.seed:4d} {mode:6s} acked {result.acked:6d} failed {result.failed:5d} "
        f"unanswered {result.unanswered:3d} lost {len(result.lost):5d} "
        f"dup {result.duplicates:3d} divergent {divergent:8s} recovery {recovery} "
        f"{verdict:8s} {result.elapsed_s:5.1f}s | {result.schedule}"
    )
    if result.error is not None:
        line += f" | error: {result.error}"
    for d in result.divergent:  # what differs, so a failure can be read without a rerun
        line += (
            f" | p{d.partition} differs from offset {d.offset} below HW {d.high_watermark}: "
            f"{d.detail}"
        )
    if not result.ok and result.notes:
        line += " | notes: " + "; ".join(result.notes)
    if result.events_path is not None:
        line += f" | events {result.events_path}"
    return line


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Totals over a run of schedules."""

    schedules: int
    acked: int
    failed: int
    unanswered: int
    lost: int
    duplicates: int
    divergent: int  # divergent partitions, over all schedules
    unrecovered: int  # schedules that did not recover in time
    errors: int  # schedules that could not run
    slowest_recovery_s: float | None
    slowest_seed: int | None
    seeds_with_loss: tuple[int, ...]
    seeds_divergent: tuple[int, ...]
    seeds_unrecovered: tuple[int, ...]
    failed_codes: tuple[tuple[str, int], ...] = ()  # error code, sends: the most common first

    @property
    def ok(self) -> bool:
        return not (self.lost or self.divergent or self.unrecovered or self.errors)


def summarize(results: Sequence[ScheduleResult]) -> Summary:
    recovered = [r for r in results if r.recovery_s is not None]
    slowest = max(recovered, key=lambda r: r.recovery_s or 0.0, default=None)
    return Summary(
        schedules=len(results),
        acked=sum(r.acked for r in results),
        failed=sum(r.failed for r in results),
        unanswered=sum(r.unanswered for r in results),
        lost=sum(len(r.lost) for r in results),
        duplicates=sum(r.duplicates for r in results),
        divergent=sum(len(r.divergent) for r in results),
        unrecovered=sum(1 for r in results if r.error is None and not r.liveness_ok),
        errors=sum(1 for r in results if r.error is not None),
        slowest_recovery_s=slowest.recovery_s if slowest is not None else None,
        slowest_seed=slowest.seed if slowest is not None else None,
        seeds_with_loss=tuple(r.seed for r in results if r.lost),
        seeds_divergent=tuple(r.seed for r in results if r.divergent),
        seeds_unrecovered=tuple(r.seed for r in results if r.error is None and not r.liveness_ok),
        failed_codes=tuple(
            sum((Counter(r.failed_codes) for r in results), Counter[str]()).most_common()
        ),
    )


def _seeds(seeds: tuple[int, ...]) -> str:
    return ", ".join(str(s) for s in seeds) if seeds else "-"


def format_summary(summary: Summary) -> str:
    """The summary as a two-column table."""
    slowest = (
        f"{summary.slowest_recovery_s:.1f} s (seed {summary.slowest_seed})"
        if summary.slowest_recovery_s is not None
        else "-"
    )
    rows = [
        ("schedules", str(summary.schedules)),
        ("acked records", str(summary.acked)),
        ("failed / unanswered sends", f"{summary.failed} / {summary.unanswered}"),
        (
            "failed sends by error",
            ", ".join(f"{code} {n}" for code, n in summary.failed_codes[:4]) or "-",
        ),
        ("acked records lost", str(summary.lost)),
        (
            "schedules with loss",
            f"{len(summary.seeds_with_loss)} ({_seeds(summary.seeds_with_loss)})",
        ),
        (
            "divergent partitions",
            f"{summary.divergent} (seeds {_seeds(summary.seeds_divergent)})",
        ),
        ("duplicates", str(summary.duplicates)),
        (
            "not recovered in time",
            f"{summary.unrecovered} (seeds {_seeds(summary.seeds_unrecovered)})",
        ),
        ("slowest recovery", slowest),
    ]
    if summary.errors:
        rows.append(("schedules that failed to run", str(summary.errors)))
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
