"""The report's transactions section, its key numbers and its summary line.

Read from the `transactions` table (kafkactor/analytics/transactions.py): the row of every
transaction (outcome and cause "all"), the committed ones (outcome "committed", cause "all":
the commit latency) and the aborted ones by cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkactor.analytics.digest import Digest
from kafkactor.analytics.markdown import NONE_HERE, format_value, markdown_table, plot_link
from kafkactor.analytics.transactions import ALL, transaction_summary

NO_TRANSACTIONS = f"No `txn.completed` events: no transactions, {NONE_HERE}."

_STATS = ("count", "per_s", "mean_ms", "p50_ms", "p99_ms", "max_ms", "mean_partitions")
_STAT_HEADERS = ["transactions", "per second", "mean", "p50", "p99", "max", "partitions (mean)"]


def transactions_section(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> list[str]:
    """The report's lines on transactions: the rate, the commit latency, aborts by cause."""
    rows = digest.rows.get("transactions", [])
    numbers = transaction_summary(rows)
    if numbers is None:
        return [NO_TRANSACTIONS]
    lines = [
        f"{numbers['transactions']:,} transactions completed ({numbers['committed']:,} "
        f"committed, {numbers['aborted']:,} aborted), {format_value(numbers['per_s'])} per "
        "second from the first completion to the last.",
        "",
        "Per outcome, from the transaction's start to its completion (`duration_ms`), ms: the "
        "committed row is the commit latency.",
        "",
        markdown_table(
            ["outcome", *_STAT_HEADERS],
            [[r["outcome"], *(r[k] for k in _STATS)] for r in rows if r["cause"] == ALL],
        ),
        "",
    ]
    aborts = [r for r in rows if r["outcome"] == "aborted" and r["cause"] != ALL]
    if aborts:
        lines += [
            "Aborts by cause (client: the producer's EndTxn; timeout: the transaction outlived "
            "its timeout; fenced: a newer producer epoch; init: InitProducerId aborted it):",
            "",
            markdown_table(
                ["cause", *_STAT_HEADERS], [[r["cause"], *(r[k] for k in _STATS)] for r in aborts]
            ),
        ]
    else:
        lines.append("No transaction was aborted.")
    return lines + plot_link(plots, "transactions", out_dir, "transactions per second")


def transactions_line(numbers: Mapping[str, Any] | None) -> str:
    """The command's summary line on transactions."""
    if numbers is None:
        return f"transactions: {NONE_HERE}"
    causes = ", ".join(f"{c} {n:,}" for c, n in sorted(numbers["aborts_by_cause"].items()))
    return (
        f"transactions {numbers['transactions']:,} ({format_value(numbers['per_s'])}/s): "
        f"committed {numbers['committed']:,}, commit p50 / p99 "
        f"{format_value(numbers['commit_p50_ms'])} / {format_value(numbers['commit_p99_ms'])} ms; "
        f"aborted {numbers['aborted']:,}" + (f" ({causes})" if causes else "")
    )
