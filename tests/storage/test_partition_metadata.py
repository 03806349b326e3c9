"""Kafka 2.8's `partition.metadata` file (KIP-516): its bytes, reading it back, and a log that
records its topic's id once and refuses another."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafkactor.kafka_uuid import ZERO_UUID, uuid_from_string
from kafkactor.storage import (
    PARTITION_METADATA_FILE,
    Log,
    PartitionMetadataError,
    PartitionMetadataFile,
)
from kafkactor.storage.partition_metadata import format_partition_metadata
from kafkactor.storage.records import Record
from tests.storage.held_scheduler import HeldScheduler

pytestmark = pytest.mark.timeout(30)

TOPIC_ID = uuid_from_string("bxqdPCtOTIqecQ1bPyqMRA")
OTHER_ID = uuid_from_string("Xc4ZxOuvRd2cZV0uAE5M-A")


def test_the_file_is_kafkas_two_lines() -> None:
    # PartitionMetadataFileFormatter.toFile: "version: 0\ntopic_id: <id>", no final newline
    assert format_partition_metadata(TOPIC_ID) == b"version: 0\ntopic_id: bxqdPCtOTIqecQ1bPyqMRA"


def test_written_then_read_back(tmp_path: Path) -> None:
    file = PartitionMetadataFile(tmp_path)
    assert file.read() is None  # no file: no id yet
    file.write(TOPIC_ID)
    assert (tmp_path / PARTITION_METADATA_FILE).read_bytes() == format_partition_metadata(TOPIC_ID)
    assert PartitionMetadataFile(tmp_path).read() == TOPIC_ID
    assert not (tmp_path / f"{PARTITION_METADATA_FILE}.tmp").exists()


def test_an_empty_file_is_no_id_yet(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(b"")  # Kafka 2.8 creates it empty
    assert PartitionMetadataFile(tmp_path).read() is None


def test_a_file_kafka_wrote_with_a_final_newline_reads(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(
        b"version: 0\ntopic_id: bxqdPCtOTIqecQ1bPyqMRA\n"
    )
    assert PartitionMetadataFile(tmp_path).read() == TOPIC_ID


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            b"version: 1\ntopic_id: bxqdPCtOTIqecQ1bPyqMRA", "Unrecognized version", id="v1"
        ),
        pytest.param(b"version 0\ntopic_id: x", "Malformed line", id="no-colon"),
        pytest.param(b"version: zero\ntopic_id: x", "Malformed line", id="not-a-number"),
        pytest.param(b"version: 0", "Malformed line", id="no-id-line"),
        pytest.param(b"version: 0\ntopic_id: short", "Malformed line", id="not-an-id"),
        pytest.param(
            b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "Invalid topic ID", id="zero"
        ),
    ],
)
def test_a_file_kafka_could_not_read_is_refused(tmp_path: Path, data: bytes, message: str) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(data)
    with pytest.raises(PartitionMetadataError, match=message) as raised:
        PartitionMetadataFile(tmp_path).read()
    assert PARTITION_METADATA_FILE in str(raised.value)


def test_the_zero_uuid_is_never_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="zero uuid"):
        PartitionMetadataFile(tmp_path).write(ZERO_UUID)
    assert not (tmp_path / PARTITION_METADATA_FILE).exists()


def test_a_log_records_its_topic_id_once_and_refuses_another(tmp_path: Path) -> None:
    directory = tmp_path / "events-0"
    log = Log(directory)
    assert log.topic_id is None
    assert not (directory / PARTITION_METADATA_FILE).exists()  # no id known: nothing written

    assert log.check_or_set_topic_id(TOPIC_ID)
    assert PartitionMetadataFile(directory).read() == TOPIC_ID
    assert log.check_or_set_topic_id(TOPIC_ID)  # the same id again: consistent

    assert not log.check_or_set_topic_id(OTHER_ID)  # another topic's: refused, never rewritten
    assert log.topic_id == TOPIC_ID
    assert PartitionMetadataFile(directory).read() == TOPIC_ID
    log.close()

    reloaded = Log(directory)  # the id is read when the log is loaded
    assert reloaded.topic_id == TOPIC_ID
    assert not reloaded.check_or_set_topic_id(OTHER_ID)
    reloaded.delete()  # the file goes with the directory
    assert not directory.exists()


def test_a_log_whose_file_kafka_could_not_read_does_not_load(tmp_path: Path) -> None:
    directory = tmp_path / "events-0"
    directory.mkdir()
    (directory / PARTITION_METADATA_FILE).write_bytes(b"version: 7\ntopic_id: x")
    with pytest.raises(PartitionMetadataError, match="Unrecognized version"):
        Log(directory)


def test_ids_are_compared_as_uuids(tmp_path: Path) -> None:
    log = Log(tmp_path / "events-0")
    assert log.check_or_set_topic_id(uuid.UUID(bytes=TOPIC_ID.bytes))
    assert log.topic_id == TOPIC_ID
    log.close()


def test_a_topic_id_is_written_off_the_callers_path_and_before_any_record(
    tmp_path: Path,
) -> None:
    # Kafka's assignTopicId + maybeFlushMetadataFile: the id is recorded in memory at once; the
    # file (two fsyncs) is written by the scheduler, or before the first append, whichever is
    # first, so a replica's LeaderAndIsr does not wait for it and no record is on disk without it.
    scheduler = HeldScheduler()
    directory = tmp_path / "events-0"
    log = Log(directory, scheduler=scheduler)
    assert log.check_or_set_topic_id(TOPIC_ID)
    assert log.topic_id == TOPIC_ID
    assert not (directory / PARTITION_METADATA_FILE).exists()  # not written by the caller
    assert not log.check_or_set_topic_id(OTHER_ID)  # the recorded id is already the id
    log.append_as_leader([Record(None, b"v", 1)], leader_epoch=0)
    assert PartitionMetadataFile(directory).read() == TOPIC_ID
    assert scheduler.run_held() == ["flush-metadata-file"]  # finds nothing left to write

    other = Log(tmp_path / "events-1", scheduler=scheduler)
    assert other.check_or_set_topic_id(OTHER_ID)
    assert PartitionMetadataFile(other.dir).read() is None
    assert scheduler.run_held() == ["flush-metadata-file"]
    assert PartitionMetadataFile(other.dir).read() == OTHER_ID
    other.close()
    log.close()


def test_a_topic_id_not_yet_written_is_written_on_close(tmp_path: Path) -> None:
    log = Log(tmp_path / "events-0", scheduler=HeldScheduler())
    assert log.check_or_set_topic_id(TOPIC_ID)
    log.close()
    assert Log(tmp_path / "events-0").topic_id == TOPIC_ID
