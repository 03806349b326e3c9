"""The exactly-once verdict of `kafkactor nemesis --transactions`: plain functions over what the
consume-transform-produce workload attempted and what a read_committed consumer reads back.

The workload (`kafkactor.testing.txn_workload`) turns each input record into one output
record, `out:<input value>|<input partition>:<input offset>|<transaction>`, and commits the
consumed input offsets in the same transaction (`send_offsets_to_transaction`). Every attempted
transaction is kept with its outcome:

- `committed`: `commit_transaction` returned;
- `aborted`: the commit was never asked (aborted on purpose, on an error, or fenced by a new
  producer with the same transactional id): nothing of it may ever be visible;
- `unknown`: the commit was asked and failed or went unanswered: all of it or nothing.

The anomalies, by kind (`KINDS`):

- `lost`: an input record below the group's committed offset with no output visible;
- `duplicate`: an input record with more than one visible output (each extra copy counts);
- `ahead-of-offsets`: a visible output of an input record at or past the committed offset (the
  output committed without its input offsets: not atomic);
- `aborted-visible`: a visible output of an aborted transaction;
- `partial`: a transaction of which some outputs are visible and some are not;
- `commit-lost`: a transaction whose commit returned, with none of its outputs visible;
- `aborted-offsets`: the group's committed offset is one that only aborted transactions sent;
- `garbage`: a visible output record that no attempted transaction sent;
- `hanging`: a partition whose last stable offset stays below its high watermark after the
  transaction timeout (an open transaction that blocks read_committed consumers forever:
  the bug class of Kafka's KIP-890);
- `unfinished`: an input partition the workers did not finish within the deadline;
- `zombie-commit`: a fenced producer's commit returned instead of failing;
- `offsets-unreadable`: the group's committed offset of an input partition could not be read
  (OffsetFetch with require_stable kept answering UNSTABLE_OFFSET_COMMIT, as it does while a
  transaction's offsets are pending); the checks against that offset are skipped for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from kafkactor.testing.verdict import ScheduleResult

KINDS = (
    "lost",
    "duplicate",
    "ahead-of-offsets",
    "aborted-visible",
    "partial",
    "commit-lost",
    "aborted-offsets",
    "garbage",
    "hanging",
    "unfinished",
    "zombie-commit",
    "offsets-unreadable",
)
EXAMPLES = 5  # examples kept per kind


class Outcome(StrEnum):
    """What the client knows of a transaction's end."""

    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass(slots=True, kw_only=True)
class Attempt:
    """One attempted transaction: the input offsets [first_offset, end_offset) of one input
    partition it consumed, the output values it sent, and its outcome so far."""

    txn: str  # unique name, carried in every output value
    worker: int
    input_partition: int
    first_offset: int
    end_offset: int
    outputs: tuple[bytes, ...] = ()
    outcome: Outcome = Outcome.ABORTED
    zombie: bool = False  # its producer was fenced on purpose before it asked to commit


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """A record read back from the output topic."""

    partition: int
    offset: int
    value: bytes | None


def output_value(input_value: bytes, partition: int, offset: int, txn: str) -> bytes:
    """The output record of an input record, sent in transaction `txn`."""
    return b"out:%s|%d:%d|%s" % (input_value, partition, offset, txn.encode())


def parse_output(value: bytes | None) -> tuple[bytes, int, int, str] | None:
    """(input value, input partition, input offset, transaction) of an output value, or None."""
    if value is None or not value.startswith(b"out:"):
        return None
    try:
        head, where, txn = value[4:].rsplit(b"|", 2)
        partition, offset = where.split(b":")
        return head, int(partition), int(offset), txn.decode()
    except ValueError:
        return None


@dataclass(slots=True)
class Anomalies:
    """Anomalies found, by kind: a count and the first few examples of each."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, kind: str, example: str, count: int = 1) -> None:
        assert kind in KINDS, kind
        self.counts[kind] += count
        kept = self.examples.setdefault(kind, [])
        if len(kept) < EXAMPLES:
            kept.append(example)

    def __bool__(self) -> bool:
        return bool(+self.counts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Observed:
    """What the checker read from the healed cluster."""

    inputs: Mapping[int, Mapping[int, bytes | None]]  # input partition -> offset -> value
    committed: Mapping[int, int | None]  # input partition -> the group's committed offset
    output: Sequence[OutputRecord]
    stability: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # name -> (LSO, HW)
    zombie_commits: Sequence[str] = ()


def check_transactions(attempts: Iterable[Attempt], observed: Observed) -> Anomalies:
    """Every anomaly of the module docstring's list."""
    found = Anomalies()
    by_txn = {a.txn: a for a in attempts}
    visible: dict[str, list[bytes]] = {}  # transaction -> its visible output values
    per_input: Counter[tuple[int, int]] = Counter()
    for record in observed.output:
        parsed = parse_output(record.value)
        attempt = by_txn.get(parsed[3]) if parsed is not None else None
        if parsed is None or attempt is None or record.value not in attempt.outputs:
            found.add("garbage", f"out p{record.partition}@{record.offset}: {record.value!r}")
            continue
        value, partition, offset, txn = parsed
        if observed.inputs.get(partition, {}).get(offset) != value:
            found.add("garbage", f"{txn}: {value!r} is not input p{partition}@{offset}")
            continue
        visible.setdefault(txn, []).append(record.value)
        per_input[(partition, offset)] += 1
        if partition not in observed.committed:
            continue  # unreadable offsets: reported once, below
        committed = observed.committed[partition] or 0
        if offset >= committed:
            found.add(
                "ahead-of-offsets",
                f"{txn} ({attempt.outcome}): output of input p{partition}@{offset} visible, "
                f"the group's committed offset is {committed}",
            )
    _check_attempts(by_txn, visible, found)
    _check_inputs(observed, per_input, found)
    _check_offsets(list(by_txn.values()), observed, found)
    for name, (lso, hw) in sorted(observed.stability.items()):
        if lso < hw:
            found.add("hanging", f"{name}: last stable offset {lso} < high watermark {hw}")
    for txn in observed.zombie_commits:
        found.add("zombie-commit", f"{txn}: committed after its producer was fenced")
    return found


def _check_attempts(
    by_txn: Mapping[str, Attempt], visible: Mapping[str, Sequence[bytes]], found: Anomalies
) -> None:
    for txn, attempt in by_txn.items():
        seen = set(visible.get(txn, ()))
        if attempt.outcome is Outcome.ABORTED and seen:
            zombie = " (fenced zombie)" if attempt.zombie else ""
            found.add(
                "aborted-visible",
                f"{txn}{zombie}: {len(seen)} of its {len(attempt.outputs)} records visible",
                len(seen),
            )
        elif seen and len(seen) < len(set(attempt.outputs)):
            found.add(
                "partial",
                f"{txn} ({attempt.outcome}): {len(seen)} of its "
                f"{len(attempt.outputs)} records visible",
            )
        elif attempt.outcome is Outcome.COMMITTED and attempt.outputs and not seen:
            found.add(
                "commit-lost",
                f"{txn}: input p{attempt.input_partition}@{attempt.first_offset}.."
                f"{attempt.end_offset - 1} committed, none of it visible",
            )


def _check_inputs(
    observed: Observed, per_input: Mapping[tuple[int, int], int], found: Anomalies
) -> None:
    for partition, records in sorted(observed.inputs.items()):
        if partition not in observed.committed:
            found.add(
                "offsets-unreadable",
                f"input p{partition}: the group's committed offset could not be read "
                "(OffsetFetch kept failing, e.g. UNSTABLE_OFFSET_COMMIT: a transaction's "
                "offsets pending for good)",
            )
            continue
        committed = observed.committed[partition] or 0
        for offset in sorted(records):
            copies = per_input.get((partition, offset), 0)
            if copies > 1:
                found.add("duplicate", f"input p{partition}@{offset}: {copies} outputs", copies - 1)
            elif copies == 0 and offset < committed:
                found.add(
                    "lost",
                    f"input p{partition}@{offset} {records[offset]!r}: below the committed "
                    f"offset {committed}, no output",
                )
        end = max(records, default=-1) + 1
        if committed < end:
            found.add("unfinished", f"input p{partition}: committed offset {committed} of {end}")


def _check_offsets(attempts: Sequence[Attempt], observed: Observed, found: Anomalies) -> None:
    for partition, committed in sorted(observed.committed.items()):
        if not committed:
            continue
        ends = [a for a in attempts if a.input_partition == partition]
        if any(a.end_offset == committed and a.outcome is not Outcome.ABORTED for a in ends):
            continue
        found.add(
            "aborted-offsets",
            f"input p{partition}: committed offset {committed} was sent only by aborted "
            "transactions" + ("" if any(a.end_offset == committed for a in ends) else " (or none)"),
        )


# -- the result of one schedule -------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class TxnScheduleResult(ScheduleResult):
    """A schedule run with `--transactions`: the base result's fields (`acked` counts the input
    records filled, `lost` / `divergent` are the input's and the replicas' checks) and the
    transactions' counts and anomalies. `read_uncommitted` marks the control run."""

    read_uncommitted: bool = False
    transactions: Counter[str] = field(default_factory=Counter)  # outcome -> attempts
    fenced: int = 0  # producers replaced after a fencing or fatal error
    zombies: int = 0  # producers fenced on purpose
    outputs_read: int = 0
    worker_errors: Counter[str] = field(default_factory=Counter)  # error -> times
    anomalies: Anomalies = field(default_factory=Anomalies)

    @property
    def ok(self) -> bool:
        """The base claim (no input record lost, no divergence, recovered) and no anomaly."""
        base = self.error is None and not self.lost and not self.divergent
        return base and self.liveness_ok and not self.anomalies


def format_txn_line(result: ScheduleResult) -> str:
    """One line per schedule: seed, transactions by outcome, anomalies by kind, verdict."""
    if not isinstance(result, TxnScheduleResult):
        return f"seed {result.seed:4d} transactions ERROR | error: {result.error}"
    mode = "control" if result.read_uncommitted else "txn"
    t = result.transactions
    anomalies = ",".join(f"{k}={n}" for k, n in sorted(result.anomalies.counts.items())) or "-"
    recovery = f"{result.recovery_s:5.1f}s" if result.recovery_s is not None else "  none"
    if result.error is not None:
        verdict = "ERROR"
    elif result.ok:
        verdict = "ok"
    else:
        verdict = "ANOMALY" if result.anomalies else ("LOSS" if result.lost else "STUCK")
    line = (
        f"seed {result.seed:4d} {mode:7s} inputs {result.acked:5d} txns committed "
        f"{t['committed']:4d} aborted {t['aborted']:4d} unknown {t['unknown']:3d} fenced "
        f"{result.fenced:3d} zombies {result.zombies:2d} read {result.outputs_read:5d} "
        f"anomalies {anomalies} recovery {recovery} {verdict:8s} {result.elapsed_s:5.1f}s "
        f"| {result.schedule}"
    )
    if result.error is not None:
        line += f" | error: {result.error}"
    for kind, examples in sorted(result.anomalies.examples.items()):
        line += f" | {kind}: " + "; ".join(examples)
    if not result.ok and result.notes:
        line += " | notes: " + "; ".join(result.notes)
    if result.events_path is not None:
        line += f" | events {result.events_path}"
    return line


def format_txn_summary(results: Sequence[ScheduleResult]) -> tuple[str, bool]:
    """The totals as a two-column table, and whether every schedule held."""
    txn = [r for r in results if isinstance(r, TxnScheduleResult)]
    outcomes = sum((r.transactions for r in txn), Counter[str]())
    anomalies = sum((r.anomalies.counts for r in txn), Counter[str]())
    errors = Counter[str]()
    for r in txn:
        errors.update(r.worker_errors)
    failing = [r.seed for r in results if not r.ok]
    rows = [
        ("schedules", str(len(results))),
        ("input records", str(sum(r.acked for r in results))),
        (
            "transactions",
            f"committed {outcomes['committed']}, aborted {outcomes['aborted']}, "
            f"unknown {outcomes['unknown']}",
        ),
        (
            "producers fenced / zombies",
            f"{sum(r.fenced for r in txn)} / {sum(r.zombies for r in txn)}",
        ),
        ("worker errors", ", ".join(f"{e} {n}" for e, n in errors.most_common(4)) or "-"),
        ("anomalies", ", ".join(f"{k} {n}" for k, n in sorted(anomalies.items())) or "0"),
        ("input records lost", str(sum(len(r.lost) for r in results))),
        ("divergent partitions", str(sum(len(r.divergent) for r in results))),
        (
            "schedules failing",
            f"{len(failing)} ({', '.join(map(str, failing)) if failing else '-'})",
        ),
    ]
    width = max(len(name) for name, _ in rows)
    table = "\n".join(f"{name:<{width}}  {value}" for name, value in rows)
    return table, not failing


def control_found(results: Sequence[ScheduleResult]) -> list[int]:
    """The seeds whose control run found anomalies (aborted records read back)."""
    return [r.seed for r in results if isinstance(r, TxnScheduleResult) and r.anomalies]


def txn_conclusion(results: Sequence[ScheduleResult], *, control: bool) -> tuple[str, int]:
    """The summary table and the last line of `kafkactor nemesis --transactions`, and its exit
    code: 0 when the claim held (for the control, `--read-uncommitted`: when anomalies were
    found), 1 otherwise."""
    table, held = format_txn_summary(results)
    if control:
        found = control_found(results)
        if found:
            return (
                f"{table}\nthe read_uncommitted control found anomalies in {len(found)} of "
                f"{len(results)} schedules: the checker can fail",
                0,
            )
        return (
            f"{table}\nCONTROL FAILED: read_uncommitted found no anomaly; the checker proved "
            "nothing",
            1,
        )
    if held:
        return (
            f"{table}\nthe claim held: every committed transaction visible exactly once and "
            "whole, nothing aborted visible, offsets atomic with the output, no hanging "
            "transaction, every input consumed",
            0,
        )
    return f"{table}\nTHE CLAIM FAILED: see the lines above (--events-dir keeps the event logs)", 1
