"""The Markdown report (`<out>/report.md`) and the command's few-line summary."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafkactor.analytics.digest import CORRUPT_SAMPLES, LISTED_ROWS, TIMELINE_ROWS, Digest
from kafkactor.analytics.markdown import NONE_HERE, markdown_table
from kafkactor.analytics.markdown import format_value as _format
from kafkactor.analytics.markdown import plot_link as _plot
from kafkactor.analytics.markdown import section as _section
from kafkactor.analytics.markdown import utc_time as _time
from kafkactor.analytics.txn_report import transactions_line, transactions_section


def _overview(digest: Digest) -> list[str]:
    counts = digest.counts
    span = (
        f"{_time(counts.first_ts_ms)} to {_time(counts.last_ts_ms)} UTC "
        f"({(counts.last_ts_ms - counts.first_ts_ms) / 1000:,.1f} s)"
        if counts.first_ts_ms is not None and counts.last_ts_ms is not None
        else NONE_HERE
    )
    return [
        "# kafkactor event-log analysis",
        "",
        "Inputs:",
        "",
        *(f"- `{path}`" for path in digest.inputs),
        "",
        markdown_table(
            ["", ""],
            [
                ["events", counts.events],
                ["corrupt lines (set aside)", counts.corrupt_lines],
                ["event types", digest.totals.get("event_counts", 0)],
                ["time span", span],
            ],
        ),
        "",
        "Every table is a Parquet directory beside this report; docs/analytics.md says how "
        "each number is computed. Times are in milliseconds; percentiles are exact.",
    ]


def _event_counts(digest: Digest) -> list[str]:
    rows = digest.rows.get("event_counts", [])
    if not rows:
        return [f"No events: {NONE_HERE}."]
    return [markdown_table(["event", "count"], [[r["event"], r["count"]] for r in rows])]


def _latency(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> list[str]:
    rows = digest.rows.get("latency", [])
    if not rows:
        return [f"No `produce.response` or `fetch.response` events: {NONE_HERE}."]
    headers = ["request", "fetcher", "acks", "outcome", "count", "mean", "p50", "p90", "p99", "max"]
    keys = ["request", "fetcher", "acks", "outcome", "count"]
    stats = ["mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"]
    return [
        "Response time of each request on the broker that answered it (`latency_ms`), ms:",
        "",
        markdown_table(headers, [[r[k] for k in keys + stats] for r in rows]),
        *_plot(plots, "latency", out_dir, "latency percentiles by request, acks and outcome"),
    ]


def _first_rows(digest: Digest, name: str, shown: int) -> list[str]:
    total = digest.totals.get(name, 0)
    if total > shown:
        return ["", f"The first {LISTED_ROWS} of {total:,} rows; the table has them all."]
    return []


def _api_requests(digest: Digest) -> list[str]:
    rows = digest.rows.get("api_requests", [])
    if not rows:
        return [f"No `network.request` or `network.response` events: {NONE_HERE}."]
    headers = ["api", "key", "version", "requests", "responses", "unanswered", "no bytes"]
    headers += ["mean", "p50", "p99", "max"]
    keys = ["api", "api_key", "api_version", "requests", "responses", "unanswered"]
    keys += ["no_response_bytes", "mean_ms", "p50_ms", "p99_ms", "max_ms"]
    return [
        "Requests the brokers read over the wire, per API and version, and the time from each "
        "request's frame read to its response written (`network.response` `latency_ms`), ms. "
        "Unanswered: no response in the log; no bytes: answered by writing nothing (acks=0, or "
        "the connection closed):",
        "",
        markdown_table(headers, [[r[k] for k in keys] for r in rows]),
    ]


def _client_requests(digest: Digest) -> list[str]:
    rows = digest.rows.get("client_requests", [])
    if not rows:
        return [f"No `network.request` or `network.response` events: {NONE_HERE}."]
    keys = ["client_id", "requests", "responses", "unanswered", "mean_ms", "p50_ms", "p99_ms"]
    keys.append("max_ms")
    return [
        "The same per client id (the request header's; `-`: none sent, or the request is not "
        "in the log), ms:",
        "",
        markdown_table(
            ["client id", "requests", "responses", "unanswered", "mean", "p50", "p99", "max"],
            [[r[k] for k in keys] for r in rows],
        ),
        *_first_rows(digest, "client_requests", len(rows)),
    ]


def _bad_requests(digest: Digest) -> list[str]:
    rows = digest.rows.get("bad_requests", [])
    if not rows:
        return [f"No `network.bad_request` events: {NONE_HERE}."]
    body = [
        [
            r["reason"],
            r["count"],
            ", ".join(str(b) for b in r["brokers"] or []),
            _time(r["first_ts_ms"]),
            _time(r["last_ts_ms"]),
        ]
        for r in rows
    ]
    frames = "1 frame" if digest.bad_requests == 1 else f"{digest.bad_requests:,} frames"
    return [
        f"{frames} could not be served (each closed its connection), by reason:",
        "",
        markdown_table(["reason", "count", "brokers", "first (UTC)", "last (UTC)"], body),
        *_first_rows(digest, "bad_requests", len(rows)),
    ]


def _purgatories(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> list[str]:
    windows = digest.rows.get("purgatory_timeline", [])
    if not windows:
        return [f"No purgatory events: {NONE_HERE}."]
    totals: dict[tuple[Any, Any], dict[str, int]] = {}
    for w in windows:
        entry = totals.setdefault(
            (w["broker"], w["purgatory"]),
            dict.fromkeys(("seconds", "watched", "completed", "expired", "purged", "peak"), 0),
        )
        entry["seconds"] += 1
        for key in ("watched", "completed", "expired", "purged"):
            entry[key] += int(w[key] or 0)
        entry["peak"] = max(entry["peak"], int(w["max_delayed"] or 0))
    headers = ["broker", "purgatory", "seconds with events", "watched", "completed", "expired"]
    headers += ["purged", "peak waiting"]
    ordered = sorted(totals.items(), key=lambda item: (str(item[0][0]), str(item[0][1])))
    return [
        "Operations per broker and purgatory over the whole log (the table has one row per "
        "second):",
        "",
        markdown_table(headers, [[b, p, *e.values()] for (b, p), e in ordered]),
        *_plot(plots, "purgatory", out_dir, "purgatory occupancy, completed and expired"),
    ]


def _timer(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> list[str]:
    rows = digest.rows.get("timer_lateness", [])
    if not rows:
        return [f"No `timer.expire` events: {NONE_HERE}."]
    keys = ["broker", "count", "mean_ms", "p50_ms", "p99_ms", "max_ms"]
    return [
        "How late each broker's timer fired a delayed operation after its deadline, ms:",
        "",
        markdown_table(
            ["broker", "expiries", "mean", "p50", "p99", "max"],
            [[r[k] for k in keys] for r in rows],
        ),
        *_plot(plots, "timer_lateness", out_dir, "timer lateness per broker"),
    ]


def _hw_lag(digest: Digest) -> list[str]:
    rows = digest.rows.get("hw_lag", [])
    if not rows:
        return [f"No `partition.hw_advance` events with followers: {NONE_HERE}."]
    keys = ["topic", "partition", "leader", "follower", "samples", "mean_lag", "p99_lag", "max_lag"]
    return [
        "Messages a follower's log end trailed its leader's when the high watermark advanced:",
        "",
        markdown_table(
            ["topic", "partition", "leader", "follower", "samples", "mean", "p99", "max"],
            [[r[k] for k in keys] for r in rows],
        ),
    ]


def _timeline(digest: Digest) -> list[str]:
    rows = digest.rows.get("timeline", [])
    total = digest.totals.get("timeline", 0)
    if not rows:
        return [f"No broker, controller, leader or ISR changes: {NONE_HERE}."]
    start = digest.counts.first_ts_ms or rows[0]["ts_ms"]
    body = [
        [
            _time(r["ts_ms"])[11:],
            f"+{(r['ts_ms'] - start) / 1000:.3f}",
            r["event"],
            r["broker"],
            (f"{r['topic']}-{r['partition']}" if r["topic"] is not None else None),
            r["detail"],
        ]
        for r in rows
    ]
    more = (
        ["", f"The first {TIMELINE_ROWS} of {total:,} rows; the table has them all."]
        if total > len(rows)
        else []
    )
    return [
        markdown_table(["time (UTC)", "s", "event", "broker", "partition", "detail"], body),
        *more,
    ]


def _mailboxes(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> list[str]:
    rows = digest.rows.get("mailbox_delay", [])
    if not rows:
        return [f"No `msg.recv` events: {NONE_HERE}."]
    keys = ["actor_type", "count", "mean_ms", "p50_ms", "p99_ms", "max_ms"]
    return [
        "How long messages waited in the mailboxes of each actor type, ms:",
        "",
        markdown_table(
            ["actor type", "messages", "mean", "p50", "p99", "max"],
            [[r[k] for k in keys] for r in rows],
        ),
        *_plot(plots, "mailbox_delay", out_dir, "mailbox delay by actor type"),
    ]


def _traces(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> list[str]:
    stats = digest.traces
    if not stats.get("traces"):
        return [f"No traced events: {NONE_HERE}."]
    return [
        markdown_table(
            [
                "traces",
                "hops p50",
                "hops p90",
                "hops p99",
                "hops max",
                "actors max",
                "duration p50 ms",
                "duration p99 ms",
                "duration max ms",
            ],
            [
                [
                    stats["traces"],
                    stats["hops_p50"],
                    stats["hops_p90"],
                    stats["hops_p99"],
                    stats["hops_max"],
                    stats["actors_max"],
                    stats["duration_p50_ms"],
                    stats["duration_p99_ms"],
                    stats["duration_max_ms"],
                ]
            ],
        ),
        "",
        "Traces by root (the message type of the first send):",
        "",
        markdown_table(["root", "traces"], digest.roots),
        *_plot(plots, "trace_hops", out_dir, "hops per trace"),
    ]


def _corrupt(digest: Digest) -> list[str]:
    total = digest.counts.corrupt_lines
    if not total:
        return [f"Every line parsed as an event: {NONE_HERE}."]
    rows = digest.rows.get("corrupt_lines", [])
    shown = [[r["file"], (r["line"] or "")[:120]] for r in rows]
    note = f"The first {CORRUPT_SAMPLES}; the table has all {total:,}." if total > len(rows) else ""
    return [
        f"{total:,} lines were not events (not JSON, cut short, a field of the wrong type, or "
        "no `event` / `ts_ms`) and were set aside:",
        "",
        markdown_table(["file", "line (first 120 characters)"], shown),
        *(["", note] if note else []),
    ]


def render_report(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> str:
    """The whole report as Markdown; plots are linked relative to `out_dir`."""
    lines = _overview(digest)
    lines += _section("Event counts", "event_counts", _event_counts(digest))
    lines += _section("Request latency", "latency", _latency(digest, plots, out_dir))
    lines += _section("Wire requests by API", "api_requests", _api_requests(digest))
    lines += _section("Wire requests by client", "client_requests", _client_requests(digest))
    lines += _section("Bad requests", "bad_requests", _bad_requests(digest))
    lines += _section("Purgatories", "purgatory_timeline", _purgatories(digest, plots, out_dir))
    lines += _section("Transactions", "transactions", transactions_section(digest, plots, out_dir))
    lines += _section("Timer lateness", "timer_lateness", _timer(digest, plots, out_dir))
    lines += _section("High-watermark lag", "hw_lag", _hw_lag(digest))
    lines += _section("Timeline", "timeline", _timeline(digest))
    lines += _section("Mailbox delay", "mailbox_delay", _mailboxes(digest, plots, out_dir))
    lines += _section("Traces", "trace_hops", _traces(digest, plots, out_dir))
    lines += _section("Corrupt lines", "corrupt_lines", _corrupt(digest))
    return "\n".join(lines) + "\n"


def write_report(digest: Digest, plots: Mapping[str, Path], out_dir: Path) -> Path:
    """Write `<out_dir>/report.md` and return its path."""
    path = out_dir / "report.md"
    path.write_text(render_report(digest, plots, out_dir), encoding="utf-8")
    return path


def _acks(acks: Any) -> str:
    return "all" if acks == -1 else str(acks)


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The key numbers in a few lines, for a terminal."""
    lines = [
        f"events {summary['events']:,}, corrupt lines {summary['corrupt_lines']:,}"
        + (f", spanning {summary['span_s']:,.1f} s" if summary["span_s"] is not None else "")
    ]
    latency = summary["latency"]
    if latency:
        lines.append("latency p50 / p99 / max ms:")
        for row in latency:
            who = (
                f"produce acks={_acks(row['acks'])}"
                if row["request"] == "produce"
                else f"fetch {row['fetcher']}"
            )
            lines.append(
                f"  {who:20s} {row['outcome']:9s} n={row['count']:<8,} "
                f"{_format(row['p50_ms'])} / {_format(row['p99_ms'])} / {_format(row['max_ms'])}"
            )
    else:
        lines.append(f"latency: no produce / fetch responses ({NONE_HERE})")
    network = summary["network"]
    if network:
        lines.append(
            f"wire requests {network['requests']:,} ({network['unanswered']:,} unanswered) from "
            f"{network['clients']:,} client ids, bad requests {network['bad_requests']:,}"
            + ("; p50 / p99 / max ms:" if network["apis"] else "")
        )
        for row in network["apis"]:
            who = f"{row['api']} v{row['api_version']}"
            lines.append(
                f"  {who:20s} n={row['requests']:<8,} "
                f"{_format(row['p50_ms'])} / {_format(row['p99_ms'])} / {_format(row['max_ms'])}"
            )
    else:
        lines.append(f"wire requests: {NONE_HERE}")
    if not summary["purgatory"]:
        lines.append(f"purgatories: {NONE_HERE}")
    for name, totals in sorted(summary["purgatory"].items()):
        lines.append(
            f"purgatory {name}: watched {totals['watched']:,}, completed "
            f"{totals['completed']:,}, expired {totals['expired']:,}, purged "
            f"{totals['purged']:,}, peak waiting {totals['peak_delayed']:,}"
        )
    lines.append(transactions_line(summary.get("transactions")))
    timer = summary["timer_lateness"]
    lines.append(
        f"timer lateness: {timer['expired']:,} expiries, worst broker p99 "
        f"{_format(timer['p99_ms_worst_broker'])} ms, max {_format(timer['max_ms'])} ms"
        if timer
        else f"timer lateness: {NONE_HERE}"
    )
    lag = summary["hw_lag"]
    lines.append(
        f"HW lag: max {lag['max_lag']:,} messages ({lag['topic']}-{lag['partition']}, "
        f"follower {lag['follower']} of leader {lag['leader']})"
        if lag
        else f"HW lag: {NONE_HERE}"
    )
    timeline = summary["timeline"]
    lines.append(
        f"timeline: {timeline['events']:,} events"
        + (
            " (" + ", ".join(f"{k} {v}" for k, v in sorted(timeline["by_event"].items())) + ")"
            if timeline["by_event"]
            else ""
        )
    )
    mailbox = summary["mailbox_delay"]
    lines.append(
        f"mailbox delay: worst p99 {_format(mailbox['p99_ms'])} ms ({mailbox['worst_actor_type']})"
        if mailbox
        else f"mailbox delay: {NONE_HERE}"
    )
    traces = summary["traces"]
    lines.append(
        f"traces: {traces['traces']:,}, hops p50 {_format(traces['hops_p50'])}, p99 "
        f"{_format(traces['hops_p99'])}, max {traces['hops_max']:,}"
        if traces.get("traces")
        else f"traces: {NONE_HERE}"
    )
    return lines
