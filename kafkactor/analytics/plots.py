"""PNG plots of the analysis, drawn with matplotlib's Agg backend (no display needed).

Each function draws one figure from a digest and returns its path, or None when the log has
nothing to draw (no responses, no timer expiries, ...): the report then says so instead.
Figures are built with `matplotlib.figure.Figure` on an Agg canvas, never through pyplot, so
nothing global is touched and no GUI backend is ever chosen.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kafkactor.analytics.digest import Digest

PLOT_NAMES = (
    "latency",
    "purgatory",
    "transactions",
    "mailbox_delay",
    "trace_hops",
    "timer_lateness",
)
"""Every plot that can be drawn: `<out>/plots/<name>.png`."""

_DPI = 110


def _save(figure: Figure, path: Path) -> Path:
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=_DPI)
    return path


def _bars(
    axes: Axes,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    horizontal: bool = False,
) -> None:
    """Grouped bars: one group per label, one bar per series."""
    width = 0.8 / max(len(series), 1)
    positions = range(len(labels))
    for i, (name, values) in enumerate(series.items()):
        offsets = [p + (i - (len(series) - 1) / 2) * width for p in positions]
        if horizontal:
            axes.barh(offsets, values, height=width, label=name)
        else:
            axes.bar(offsets, values, width=width, label=name)
    if horizontal:
        axes.set_yticks(list(positions), labels)
        axes.invert_yaxis()
    else:
        axes.set_xticks(list(positions), labels, rotation=20, ha="right")
    axes.legend(fontsize="small")
    axes.grid(axis="x" if horizontal else "y", alpha=0.3)


def _number(value: Any) -> float:
    return float(value) if value is not None else 0.0


def latency_plot(digest: Digest, path: Path) -> Path | None:
    """p50 / p90 / p99 response time per request kind, acks and outcome (produce, fetch)."""
    rows = digest.rows.get("latency", [])
    if not rows:
        return None
    requests = [r for r in ("produce", "fetch") if any(row["request"] == r for row in rows)]
    figure = Figure(figsize=(10, 4.2 * len(requests)), layout="constrained")
    for index, request in enumerate(requests, start=1):
        axes = figure.add_subplot(len(requests), 1, index)
        chosen = [row for row in rows if row["request"] == request]
        labels = [
            (f"acks={row['acks']}" if request == "produce" else str(row["fetcher"]))
            + f" {row['outcome']} (n={row['count']})"
            for row in chosen
        ]
        series = {p: [_number(row[f"{p}_ms"]) for row in chosen] for p in ("p50", "p90", "p99")}
        _bars(axes, labels, series)
        axes.set_title(f"{request} response time ({request}.response latency_ms)")
        axes.set_ylabel("ms")
    return _save(figure, path)


def purgatory_plot(digest: Digest, path: Path) -> Path | None:
    """Per second: operations waiting (peak), completed and expired, per broker's purgatory."""
    windows = digest.rows.get("purgatory_timeline", [])
    if not windows:
        return None
    start = min(int(w["window_start_ms"]) for w in windows)
    lines: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for window in sorted(windows, key=lambda w: int(w["window_start_ms"])):
        name = f"broker {window['broker']} {window['purgatory']}"
        second = (int(window["window_start_ms"]) - start) / 1000
        for column in ("max_delayed", "completed", "expired"):
            lines[column][name].append((second, _number(window[column])))
    titles = {
        "max_delayed": "operations waiting (peak per second)",
        "completed": "operations completed per second",
        "expired": "operations expired per second",
    }
    figure = Figure(figsize=(10, 9), layout="constrained")
    for index, (column, title) in enumerate(titles.items(), start=1):
        axes = figure.add_subplot(3, 1, index)
        for name, points in sorted(lines[column].items()):
            axes.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=name)
        axes.set_title(title)
        axes.grid(alpha=0.3)
        if index == 1:
            axes.legend(fontsize="small", ncol=2)
    figure.axes[-1].set_xlabel("seconds since the first purgatory event")
    return _save(figure, path)


def transactions_plot(digest: Digest, path: Path) -> Path | None:
    """Per second: transactions committed and aborted, and the commit latency p50 / p99."""
    windows = digest.rows.get("txn_rate", [])
    if not windows:
        return None
    start = min(int(w["window_start_ms"]) for w in windows)
    ordered = sorted(windows, key=lambda w: int(w["window_start_ms"]))
    seconds = [(int(w["window_start_ms"]) - start) / 1000 for w in ordered]
    figure = Figure(figsize=(10, 6.5), layout="constrained")
    rate = figure.add_subplot(2, 1, 1)
    for column in ("committed", "aborted"):
        rate.plot(seconds, [_number(w[column]) for w in ordered], marker=".", label=column)
    rate.set_title("transactions completed per second (txn.completed)")
    rate.legend(fontsize="small")
    rate.grid(alpha=0.3)
    latency = figure.add_subplot(2, 1, 2, sharex=rate)
    for name in ("p50", "p99"):
        points = [(s, w[f"commit_{name}_ms"]) for s, w in zip(seconds, ordered, strict=True)]
        shown = [(s, float(v)) for s, v in points if v is not None]
        latency.plot([p[0] for p in shown], [p[1] for p in shown], marker=".", label=name)
    latency.set_title("commit latency per second (duration_ms of committed transactions)")
    latency.set_ylabel("ms")
    latency.set_xlabel("seconds since the first completed transaction")
    latency.legend(fontsize="small")
    latency.grid(alpha=0.3)
    return _save(figure, path)


def mailbox_plot(digest: Digest, path: Path) -> Path | None:
    """Mean, p50 and p99 mailbox delay per actor type."""
    rows = digest.rows.get("mailbox_delay", [])
    if not rows:
        return None
    labels = [f"{row['actor_type']} (n={row['count']})" for row in rows]
    series = {
        "mean": [_number(row["mean_ms"]) for row in rows],
        "p50": [_number(row["p50_ms"]) for row in rows],
        "p99": [_number(row["p99_ms"]) for row in rows],
    }
    figure = Figure(figsize=(10, 1.5 + 0.5 * len(rows)), layout="constrained")
    axes = figure.add_subplot()
    _bars(axes, labels, series, horizontal=True)
    axes.set_title("mailbox delay by actor type (msg.recv mailbox_ms)")
    axes.set_xlabel("ms")
    return _save(figure, path)


def hops_plot(digest: Digest, path: Path) -> Path | None:
    """How many traces had each number of hops (log scale: most traces are short)."""
    histogram = digest.hops_histogram
    if not histogram:
        return None
    figure = Figure(figsize=(10, 4), layout="constrained")
    axes = figure.add_subplot()
    axes.bar([hops for hops, _ in histogram], [count for _, count in histogram], width=0.8)
    axes.set_yscale("log")
    axes.set_title("hops per trace (msg.recv events in a trace)")
    axes.set_xlabel("hops")
    axes.set_ylabel("traces")
    axes.grid(axis="y", alpha=0.3)
    return _save(figure, path)


def timer_plot(digest: Digest, path: Path) -> Path | None:
    """p50 / p99 / max lateness of the shared timer's expiries, per broker."""
    rows = digest.rows.get("timer_lateness", [])
    if not rows:
        return None
    labels = [f"broker {row['broker']} (n={row['count']})" for row in rows]
    series = {
        "p50": [_number(row["p50_ms"]) for row in rows],
        "p99": [_number(row["p99_ms"]) for row in rows],
        "max": [_number(row["max_ms"]) for row in rows],
    }
    figure = Figure(figsize=(8, 4), layout="constrained")
    axes = figure.add_subplot()
    _bars(axes, labels, series)
    axes.set_title("timer lateness (timer.expire lateness_ms)")
    axes.set_ylabel("ms")
    return _save(figure, path)


_DRAWERS: dict[str, Callable[[Digest, Path], Path | None]] = {
    "latency": latency_plot,
    "purgatory": purgatory_plot,
    "transactions": transactions_plot,
    "mailbox_delay": mailbox_plot,
    "trace_hops": hops_plot,
    "timer_lateness": timer_plot,
}


def draw_plots(digest: Digest, plot_dir: Path) -> dict[str, Path]:
    """Draw every plot the log has data for into `plot_dir`; a plot left from an earlier run
    that has no data now is removed. Returns plot name -> PNG path."""
    plot_dir.mkdir(parents=True, exist_ok=True)
    drawn: dict[str, Path] = {}
    for name in PLOT_NAMES:
        path = plot_dir / f"{name}.png"
        result = _DRAWERS[name](digest, path)
        if result is None:
            path.unlink(missing_ok=True)
        else:
            drawn[name] = result
    return drawn
