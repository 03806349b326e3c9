"""OffsetCheckpoint: Kafka's text format, atomic writes, and every way a file can be malformed."""

from __future__ import annotations

import os
import pathlib
import pickle
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkactor.storage.checkpoint import CheckpointError, OffsetCheckpoint, TopicPartition
from kafkactor.storage.errors import StorageError

TP = TopicPartition


@pytest.fixture
def path(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / "recovery-point-offset-checkpoint"


@pytest.fixture
def checkpoint(path: pathlib.Path) -> OffsetCheckpoint:
    return OffsetCheckpoint(path)


def test_topic_partition() -> None:
    tp = TP(topic="events", partition=3)
    assert str(tp) == "events-3"
    assert (tp.topic, tp.partition) == ("events", 3)


def test_the_exact_text_kafka_writes(checkpoint: OffsetCheckpoint, path: pathlib.Path) -> None:
    checkpoint.write(
        {
            TP(topic="events", partition=1): 17,
            TP(topic="audit", partition=3): 42,
            TP(topic="events", partition=0): 5,
        }
    )
    assert path.read_text() == "0\n3\naudit 3 42\nevents 0 5\nevents 1 17\n"


def test_partitions_sort_numerically(checkpoint: OffsetCheckpoint, path: pathlib.Path) -> None:
    checkpoint.write(
        {
            TP(topic="t", partition=10): 1,
            TP(topic="t", partition=9): 2,
            TP(topic="t", partition=100): 3,
        }
    )
    assert path.read_text() == "0\n3\nt 9 2\nt 10 1\nt 100 3\n"


def test_round_trip(checkpoint: OffsetCheckpoint) -> None:
    offsets = {
        TP(topic="events", partition=0): 5,
        TP(topic="events", partition=1): 0,
        TP(topic="_internal.x-y", partition=7): 2**63 - 1,
    }
    checkpoint.write(offsets)
    read = checkpoint.read()
    assert read == offsets
    assert all(type(key) is TopicPartition for key in read)


def test_round_trip_of_an_empty_mapping(checkpoint: OffsetCheckpoint, path: pathlib.Path) -> None:
    checkpoint.write({})
    assert path.read_text() == "0\n0\n"
    assert checkpoint.read() == {}


def test_keys_other_than_topic_partitions_are_refused(checkpoint: OffsetCheckpoint) -> None:
    with pytest.raises(ValueError, match="not a TopicPartition"):
        checkpoint.write({("a", 0): 1})  # type: ignore[dict-item]
    assert checkpoint.read() == {}


def test_a_missing_file_reads_as_no_offsets(checkpoint: OffsetCheckpoint) -> None:
    assert checkpoint.read() == {}


def test_write_replaces_the_previous_content(checkpoint: OffsetCheckpoint) -> None:
    checkpoint.write({TP(topic="a", partition=0): 1, TP(topic="b", partition=0): 2})
    checkpoint.write({TP(topic="a", partition=0): 3})
    assert checkpoint.read() == {TP(topic="a", partition=0): 3}


def test_reads_a_file_written_with_windows_line_ends(
    checkpoint: OffsetCheckpoint, path: pathlib.Path
) -> None:
    path.write_bytes(b"0\r\n2\r\na 0 1\r\nb 1 2\r\n")
    assert checkpoint.read() == {TP(topic="a", partition=0): 1, TP(topic="b", partition=1): 2}


def test_reads_a_file_without_a_final_line_end(
    checkpoint: OffsetCheckpoint, path: pathlib.Path
) -> None:
    path.write_text("0\n1\na 0 1")
    assert checkpoint.read() == {TP(topic="a", partition=0): 1}


# --------------------------------------------------------------------------------------------
# Atomicity


def test_a_leftover_tmp_file_does_not_affect_read(
    checkpoint: OffsetCheckpoint, path: pathlib.Path
) -> None:
    checkpoint.write({TP(topic="a", partition=0): 10})
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("0\n1\na 0 9")  # a write that crashed half way
    assert checkpoint.read() == {TP(topic="a", partition=0): 10}
    checkpoint.write({TP(topic="a", partition=0): 11})
    assert not tmp.exists()
    assert path.read_text() == "0\n1\na 0 11\n"


def test_a_leftover_tmp_file_without_a_checkpoint(
    checkpoint: OffsetCheckpoint, path: pathlib.Path
) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("garbage")
    assert checkpoint.read() == {}
    checkpoint.write({TP(topic="a", partition=0): 1})
    assert checkpoint.read() == {TP(topic="a", partition=0): 1}
    assert sorted(os.listdir(path.parent)) == [path.name]


def test_write_is_durable_then_atomic(
    checkpoint: OffsetCheckpoint, path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, ...]] = []
    tmp = path.with_name(path.name + ".tmp")
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        if kind == "file":
            events.append(("fsync", kind, tmp.read_text()))
        else:
            events.append(("fsync", kind))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("replace", os.fspath(src), os.fspath(dst)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    checkpoint.write({TP(topic="a", partition=0): 1})
    assert events == [
        ("fsync", "file", "0\n1\na 0 1\n"),  # the complete temp file reaches the disk first
        ("replace", os.fspath(tmp), os.fspath(path)),
        ("fsync", "dir"),  # then the rename itself is made durable
    ]


@pytest.mark.parametrize(
    ("offsets", "message"),
    [
        ({TP(topic="", partition=0): 1}, "non-empty"),
        ({TP(topic="my topic", partition=0): 1}, "whitespace"),
        ({TP(topic="tab\there", partition=0): 1}, "whitespace"),
        ({TP(topic="line\nbreak", partition=0): 1}, "whitespace"),
        ({TP(topic="a", partition=-1): 1}, "invalid partition -1"),
        ({TP(topic="a", partition=2**31): 1}, "invalid partition"),
        ({TP(topic="a", partition=0): -1}, "invalid offset -1"),
        ({TP(topic="a", partition=0): 2**63}, "invalid offset"),
        ({TP(topic="a", partition=True): 1}, "not an int"),
        ({TP(topic="a", partition=0): 1.5}, "not an int"),
    ],
)
def test_write_rejects_invalid_entries_before_touching_the_file(
    checkpoint: OffsetCheckpoint,
    path: pathlib.Path,
    offsets: dict[TopicPartition, int],
    message: str,
) -> None:
    checkpoint.write({TP(topic="kept", partition=0): 7})
    with pytest.raises(ValueError, match=message):
        checkpoint.write({TP(topic="fine", partition=0): 1, **offsets})
    assert checkpoint.read() == {TP(topic="kept", partition=0): 7}
    assert sorted(os.listdir(path.parent)) == [path.name]


# --------------------------------------------------------------------------------------------
# Malformed files


@pytest.mark.parametrize(
    ("content", "line", "reason"),
    [
        (b"", 1, "empty"),
        (b"\n", 1, "version '' is not a decimal integer"),
        (b"x\n0\n", 1, "version 'x' is not a decimal integer"),
        (b"1\n0\n", 1, "unsupported version 1"),
        (b"-1\n0\n", 1, "unsupported version -1"),
        (b"0\n", 2, "missing the entry count line"),
        (b"0\ntwo\n", 2, "entry count 'two' is not a decimal integer"),
        (b"0\n-1\n", 2, "negative entry count -1"),
        (b"0\n 1\na 0 1\n", 2, "entry count ' 1' is not a decimal integer"),
        (b"0\n2\na 0 1\n", 2, "announces 2 entries but the file has 1"),
        (b"0\n1\na 0 1\nb 0 2\n", 4, "unexpected line after the 1 entries"),
        (b"0\n0\n\n", 3, "unexpected line after the 0 entries"),
        (b"0\n1\na 0\n", 3, "expected 3 fields .* found 2"),
        (b"0\n1\na 0 1 2\n", 3, "expected 3 fields .* found 4"),
        (b"0\n1\na  0 1\n", 3, "found 4"),  # double space
        (b"0\n1\n\n", 3, "found 1"),
        (b"0\n1\na\t0 1\n", 3, "found 2"),
        (b"0\n1\n 0 1\n", 3, "invalid topic name ''"),
        (b"0\n1\na x 1\n", 3, "partition 'x' is not a decimal integer"),
        (b"0\n1\na 0 ten\n", 3, "offset 'ten' is not a decimal integer"),
        (b"0\n1\na 0 +1\n", 3, "offset '\\+1' is not a decimal integer"),
        (b"0\n1\na 0 1.0\n", 3, "offset '1.0' is not a decimal integer"),
        (b"0\n1\na -1 1\n", 3, "negative partition -1"),
        (b"0\n1\na 0 -5\n", 3, "negative offset -5"),
        (b"0\n1\na 2147483648 1\n", 3, "partition 2147483648 is out of range"),
        (b"0\n1\na 0 9223372036854775808\n", 3, "offset 9223372036854775808 is out of range"),
        (b"0\n1\na 0 " + b"9" * 5000 + b"\n", 3, "offset 9{30}\\.\\.\\. is out of range"),
        (b"0\n3\na 0 1\nb 0 2\na 0 3\n", 5, "duplicate entry for a-0 \\(first on line 3\\)"),
        (b"0\n1\n\xff 0 1\n", 3, "not valid UTF-8"),
    ],
)
def test_malformed_files(
    checkpoint: OffsetCheckpoint, path: pathlib.Path, content: bytes, line: int, reason: str
) -> None:
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=reason) as raised:
        checkpoint.read()
    err = raised.value
    assert isinstance(err, StorageError)
    assert err.path == path
    assert err.line == line
    assert f"{path}, line {line}: " in str(err)


def test_checkpoint_error_pickles(path: pathlib.Path) -> None:
    err = CheckpointError(path, 4, "bad")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.path, copy.line, copy.reason, str(copy)) == (path, 4, "bad", str(err))
    assert str(CheckpointError(path, None, "bad")) == f"cannot read checkpoint file {path}: bad"


# --------------------------------------------------------------------------------------------
# Property: any valid mapping round-trips

topics = st.text(
    alphabet=st.characters(codec="utf-8").filter(lambda c: not c.isspace()),
    min_size=1,
    max_size=20,
)


@settings(max_examples=100, deadline=None)
@given(
    offsets=st.dictionaries(
        st.builds(TopicPartition, topic=topics, partition=st.integers(0, 2**31 - 1)),
        st.integers(0, 2**63 - 1),
        max_size=20,
    )
)
def test_any_valid_mapping_round_trips(
    tmp_path_factory: pytest.TempPathFactory, offsets: dict[TopicPartition, int]
) -> None:
    checkpoint = OffsetCheckpoint(tmp_path_factory.mktemp("prop") / "checkpoint")
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
