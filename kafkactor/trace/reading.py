"""Reading an event log: JSON objects from raw lines, reading past damage."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from kafkactor.trace.model import plural_s

MAX_WARNED_LINES = 10  # bad lines warned about one by one; the rest are only counted


@dataclass(slots=True)
class ReadReport:
    """What reading a log ran into: lines read, unreadable lines, a torn last line."""

    lines: int = 0
    events: int = 0
    bad_count: int = 0  # lines that are not JSON objects, before the last line
    bad_lines: list[int] = field(default_factory=list)  # the first MAX_WARNED_LINES of them
    truncated_line: int | None = None  # the last line, when it is not a JSON object
    read_error: str | None = None  # the stream failed here (the log is read up to it)
    malformed: int = 0  # hops and events with a trace_id whose fields have the wrong types

    def warnings(self) -> list[str]:
        """One message per damage found (at most `MAX_WARNED_LINES` bad lines one by one)."""
        messages = [f"line {number} is not a JSON object; ignored" for number in self.bad_lines]
        if self.bad_count:
            more = self.bad_count - len(self.bad_lines)
            messages.append(
                f"{self.bad_count} unreadable line{plural_s(self.bad_count)} ignored"
                + (f" ({more} more not listed)" if more > 0 else "")
            )
        if self.malformed:
            messages.append(
                f"{self.malformed} event{plural_s(self.malformed)} with missing or mistyped trace "
                "fields ignored"
            )
        if self.truncated_line is not None:
            messages.append(f"truncated last line {self.truncated_line} ignored")
        if self.read_error is not None:
            messages.append(f"read error after line {self.lines}: {self.read_error}")
        return messages


def iter_events(
    lines: Iterable[bytes | str], report: ReadReport | None = None
) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSON-lines log, in order, reading past damage.

    Blank lines are skipped. A line that is not a JSON object is counted in `report` (as
    `truncated_line` when no readable line follows it: a write torn by a killed process) and
    skipped; an I/O error ends the log where it happened. Nothing is raised for bad input.
    """
    report = report if report is not None else ReadReport()
    pending: int | None = None  # a bad line: torn last line, or garbage if anything follows
    source = iter(lines)
    number = 0
    while True:
        try:
            raw = next(source)
        except StopIteration:
            break
        except (OSError, ValueError) as error:  # an unreadable file, a closed stream
            report.read_error = str(error) or type(error).__name__
            break
        number += 1
        report.lines = number
        if not raw.strip():
            continue
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            event = None
        if pending is not None:
            report.bad_count += 1
            if len(report.bad_lines) < MAX_WARNED_LINES:
                report.bad_lines.append(pending)
            pending = None
        if not isinstance(event, dict):
            pending = number
            continue
        report.events += 1
        yield event
    if pending is not None:
        report.truncated_line = pending
