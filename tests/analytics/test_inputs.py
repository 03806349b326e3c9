"""What a user notices at the edges: damaged logs, several files, missing paths, empty logs, and
the command's answer to a path that does not exist.

The damaged, split and empty logs are made from the recorded run's log; each is analysed once
(without plots: the plots are tested on the clean log).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafkactor.analytics import AnalysisResult, analyze
from tests.analytics.support import TABLE_COLUMNS, RecordedRun, counts, read_events

GARBAGE = b"\x00\xff garbage\n"
NOT_JSON = b"this is not JSON at all\n"
TRUNCATED = b'{"event": "msg.se'  # a line cut short by a killed writer: no newline
# Lines a reader must take as events (docs/events.md: skip unknown types and fields), among
# them a ZooKeeper session id above a signed long, which must never make a line corrupt.
UNUSUAL = (
    b'{"event":"future.event","ts_ms":1700000000000,"schema":1,"level":"info",'
    b'"new_field":{"nested":[1,2,{"x":null}]}}\n',
    b'{"broker":1,"session":18446744073709551615,"event":"broker.registered",'
    b'"ts_ms":1700000000001,"schema":1,"level":"info"}\n',
)


def event_counts(spark: Any, result: AnalysisResult) -> Counter[str]:
    rows = spark.read.parquet(str(result.tables["event_counts"])).collect()
    return Counter({row["event"]: row["count"] for row in rows})


@pytest.fixture(scope="module")
def clean_counts(recorded_run: RecordedRun) -> Counter[str]:
    return counts(read_events(recorded_run.path))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_damaged_log_in_several_files_analyses_and_sets_the_damaged_lines_aside(
    spark: Any, recorded_run: RecordedRun, clean_counts: Counter[str], tmp_path: Path
) -> None:
    """One analysis (Spark's runs are what costs) of the recorded log, damaged and cut in three
    files: two in a directory given as such, one matched by a glob; other files beside them
    are not event logs and are not read. A fourth input is a file whose path looks like a glob
    (`logs [old]/events[1].jsonl`), read as that file."""
    lines = recorded_run.path.read_bytes().splitlines(keepends=True)
    third = len(lines) // 3
    directory, other, odd = tmp_path / "logs", tmp_path / "more", tmp_path / "logs [old]"
    for folder in (directory, other, odd):
        folder.mkdir()
    (directory / "part-1.jsonl").write_bytes(b"".join([*lines[:10], NOT_JSON, *lines[10:third]]))
    (directory / "part-2.log").write_bytes(b"".join(lines[third : 2 * third]))
    (directory / "notes.txt").write_text("not an event log\n")
    (other / "part-3.jsonl").write_bytes(
        b"".join([*lines[2 * third :], *UNUSUAL, GARBAGE, TRUNCATED])  # torn: its last line
    )
    (other / "part-3.txt").write_text("not matched by the glob\n")
    bracketed = odd / "events[1].jsonl"
    bracketed.write_bytes(b"".join(lines[:100]))

    result = analyze(
        [directory, str(other / "part-*.jsonl"), bracketed],
        tmp_path / "out",
        spark=spark,
        plots=False,
    )

    assert result.corrupt_lines == 3
    extra = Counter({"future.event": 1, "broker.registered": 1})
    assert result.events == len(lines) + len(UNUSUAL) + 100
    assert result.events == clean_counts.total() + extra.total() + 100
    first_100 = counts(json.loads(line) for line in lines[:100])
    assert event_counts(spark, result) == clean_counts + extra + first_100
    rows = spark.read.parquet(str(result.tables["corrupt_lines"])).collect()
    where = {row["line"][:20]: Path(row["file"]).name for row in rows}
    assert len(rows) == 3, where
    assert sorted(where.values()) == ["part-1.jsonl", "part-3.jsonl", "part-3.jsonl"], where
    kept = sorted(row["line"] for row in rows)
    assert any("garbage" in line for line in kept), kept
    assert any(line.startswith("this is not JSON") for line in kept), kept
    assert any(line.startswith('{"event": "msg.se') for line in kept), kept
    stated = [line for line in result.report.read_text().splitlines() if "corrupt" in line.lower()]
    assert any("3" in line for line in stated), stated  # the report states the count


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["missing.jsonl", "missing-*.jsonl"])
def test_a_path_that_matches_nothing_raises_file_not_found(
    spark: Any, name: str, tmp_path: Path
) -> None:
    missing = str(tmp_path / name)
    with pytest.raises(FileNotFoundError, match="missing"):
        analyze(missing, tmp_path / "out", spark=spark)


@pytest.mark.timeout(60)
def test_the_command_refuses_a_missing_input_in_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("kafkactor")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "kafkactor.cli"]
    missing = tmp_path / "no-such-events.jsonl"
    done = subprocess.run(
        [*command, "analyze", str(missing), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    message = done.stderr.strip().splitlines()
    assert len(message) == 1, done.stderr
    assert "no-such-events.jsonl" in message[0]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_an_empty_log_analyses_to_zero_events_and_empty_tables(spark: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    result = analyze(empty, tmp_path / "out", spark=spark, plots=False)

    assert (result.events, result.corrupt_lines) == (0, 0)
    assert set(result.tables) == set(TABLE_COLUMNS)
    for name, path in result.tables.items():
        frame = spark.read.parquet(str(path))
        assert frame.columns == [column for column, _ in TABLE_COLUMNS[name]], name
        assert frame.count() == 0, name
    assert result.report.is_file()
