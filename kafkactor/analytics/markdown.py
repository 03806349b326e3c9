"""The report's Markdown pieces: numbers as text, tables, times, plot links and sections."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

NONE_HERE = "none in this log"
"""What a section or a summary line says when the log lacks its events."""


def format_value(value: Any) -> str:
    """A cell's text: `-` for null, yes / no, integers with thousands separators, two
    decimals below 10 and one above."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def _cell(value: Any) -> str:
    return format_value(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table; numbers right-aligned, text left."""
    body = [list(row) for row in rows]
    align = [
        "---:"
        if body and all(isinstance(r[i], int | float) or r[i] is None for r in body)
        else "---"
        for i in range(len(headers))
    ]
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(_cell(value) for value in row) + " |" for row in body),
    ]
    return "\n".join(lines)


def utc_time(ts_ms: int | None) -> str:
    """An epoch-millisecond timestamp as `YYYY-MM-DD HH:MM:SS.mmm` (UTC), `-` for null."""
    if ts_ms is None:
        return "-"
    return datetime.fromtimestamp(ts_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def plot_link(plots: Mapping[str, Path], name: str, out_dir: Path, caption: str) -> list[str]:
    """The plot embedded, linked relative to `out_dir`; nothing when it was not drawn."""
    path = plots.get(name)
    if path is None:
        return []
    return ["", f"![{caption}]({path.relative_to(out_dir).as_posix()})"]


def section(title: str, table: str, lines: list[str]) -> list[str]:
    """A report section: its title, the table it reads, its lines."""
    return ["", f"## {title}", "", f"Table `{table}.parquet`.", "", *lines]
