"""Which files an analysis reads: files, directories and globs, resolved before Spark starts."""

from __future__ import annotations

import errno
import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

LOG_SUFFIXES = (".jsonl", ".json", ".log")
"""The files of a directory input that are read: event logs by their usual names."""

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_GLOB_CHARS = frozenset("*?[")

Inputs = str | Path | Sequence[str | Path]
"""One input or several: a file, a directory, a glob, or a URI Spark reads itself."""


def spark_path(path: str) -> str:
    """`path` as Spark should be given it: Spark expands every path it reads as a Hadoop glob,
    so a resolved local file has its glob characters escaped and is read as that one file; a
    remote URI is passed as it is (it may be a pattern on purpose)."""
    if _is_remote(path):
        return path
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def _is_remote(text: str) -> bool:
    """A URI with a scheme other than file: (hdfs://, s3a://, ...): Spark resolves it."""
    return _URI.match(text) is not None and not text.startswith("file:")


def _local_path(text: str) -> str:
    """A `file:` URI as a plain path; any other text unchanged but for a leading `~`."""
    if text.startswith("file://"):
        text = text.removeprefix("file://")
    elif text.startswith("file:"):
        text = text.removeprefix("file:")
    return os.path.expanduser(text)


def _directory_logs(directory: Path) -> list[Path]:
    """The event logs directly inside `directory` (not in its subdirectories), by name."""
    return sorted(
        entry for entry in directory.iterdir() if entry.is_file() and entry.suffix in LOG_SUFFIXES
    )


def _resolve_one(text: str) -> list[str]:
    if _is_remote(text):
        return [text]
    local = _local_path(text)
    path = Path(local)
    if path.is_file():
        return [str(path.resolve())]
    if path.is_dir():
        logs = _directory_logs(path)
        if not logs:
            suffixes = ", ".join(f"*{suffix}" for suffix in LOG_SUFFIXES)
            raise FileNotFoundError(
                errno.ENOENT, f"no event log ({suffixes}) directly inside the directory", text
            )
        return [str(log.resolve()) for log in logs]
    if _GLOB_CHARS.intersection(local):
        found: list[str] = []
        for match in sorted(glob.glob(local, recursive=True)):
            matched = Path(match)
            if matched.is_file():
                found.append(str(matched.resolve()))
            elif matched.is_dir():
                found.extend(str(log.resolve()) for log in _directory_logs(matched))
        if not found:
            raise FileNotFoundError(errno.ENOENT, "no event log matches the pattern", text)
        return found
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)


def resolve_inputs(inputs: Inputs) -> list[str]:
    """The files to read, in order and without repeats.

    A file is read as it is, whatever its name. A directory contributes every `*.jsonl`,
    `*.json` and `*.log` file directly inside it. A pattern with `*`, `?` or `[` is expanded
    (`**` matches any depth), each matching directory as above. A URI of another filesystem
    (`hdfs://...`, `s3a://...`) is passed to Spark unchecked. Raises FileNotFoundError naming
    the input when an input matches nothing (or no input is given).
    """
    items = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    if not items:
        raise FileNotFoundError(errno.ENOENT, "no event log given", "")
    resolved: dict[str, None] = {}
    for item in items:
        for path in _resolve_one(os.fspath(item)):
            resolved.setdefault(path, None)
    return list(resolved)
