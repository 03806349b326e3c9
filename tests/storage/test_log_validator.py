"""A leader append under the topic configs Kafka's LogValidator reads: LogAppendTime restamps,
timestamp bounds, keys on compacted logs, `compression.type`; and the rolls and cleaning of
`segment.jitter.ms` and `max.compaction.lag.ms`. Every clock here is a ManualClock."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import crc32c
import pytest

from kafkactor.storage import (
    CompressionType,
    InvalidRecordError,
    InvalidTimestampError,
    Log,
    LogCleanerManager,
    LogConfig,
    Record,
    RecordError,
    TimestampType,
    build_batch,
    iter_batches,
)
from kafkactor.storage.records import LOG_APPEND_TIME, NO_TIMESTAMP
from kafkactor.timer import ManualClock

NOW = 1_700_000_000_000
CREATED = NOW - 60_000  # the producer's create time: a minute before the append
LAT = LogConfig(message_timestamp_type="LogAppendTime")
HEADER = struct.Struct(">qiibIhiqqqhii")


def producer_records() -> list[Record]:
    return [
        Record(b"k0", b"v0", CREATED),
        Record(b"k1", b"v1", CREATED + 5, headers=(("h", b"x"),)),
        Record(None, b"v2", CREATED - 3),  # timestamps need not increase
    ]


def open_log(tmp_path: Path, config: LogConfig, clock: ManualClock, name: str = "t-0") -> Log:
    return Log(tmp_path / name, config, clock=clock)


def stored(log: Log) -> bytes:
    return log.read(0, 1 << 20).records


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_a_log_append_time_leader_restamps_the_header_as_kafka_writes_it(
    tmp_path: Path, codec: CompressionType
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, LAT, clock)
    try:
        log.append_as_leader([Record(b"first", b"x", CREATED)], 4)  # offsets 0, so 1.. next
        produced = build_batch(producer_records(), 0, compression=codec)
        clock.advance(7)
        info = log.append_as_leader(produced, 5)
        assert info.log_append_time == NOW + 7
        assert info.max_timestamp == NOW + 7
        (_, written) = list(iter_batches(stored(log)))  # verify_crc: the CRC is valid
        # byte for byte what Kafka's MemoryRecordsBuilder writes for a LogAppendTime batch
        expected = build_batch(
            producer_records(),
            1,
            5,
            timestamp_type=LOG_APPEND_TIME,
            log_append_time_ms=NOW + 7,
            compression=codec,
        )
        assert bytes(written.buffer) == expected
        assert written.timestamp_type is TimestampType.LOG_APPEND_TIME
        assert written.base_timestamp == CREATED  # Kafka keeps the first record's
        assert written.max_timestamp == NOW + 7
        assert written.compression_codec == codec
        # the records' bytes are the producer's, and every one reads as the append time
        assert bytes(written.buffer)[61:] == produced[61:]
        assert [r.timestamp_ms for r in written.records()] == [NOW + 7] * 3
        crc = HEADER.unpack_from(bytes(written.buffer))[4]
        assert crc == crc32c.crc32c(bytes(written.buffer)[21:])
    finally:
        log.close()


def test_the_restamped_batch_is_found_by_its_append_time_and_kept_by_a_follower(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    leader = open_log(tmp_path, LAT, clock)
    follower = open_log(tmp_path, LAT, clock, name="follower-0")
    try:
        leader.append_as_leader(build_batch(producer_records(), 0), 0)
        clock.advance(1_000)
        follower.append_as_follower(stored(leader))  # a follower keeps the leader's bytes
        assert stored(follower) == stored(leader)
        found = leader.fetch_offset_by_timestamp(NOW)
        assert found is not None and (found.offset, found.timestamp) == (0, NOW)
        assert leader.fetch_offset_by_timestamp(CREATED) is not None  # the first at or after
    finally:
        leader.close()
        follower.close()


def test_records_a_log_append_time_log_builds_itself_carry_the_append_time(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, LAT, clock)
    try:
        info = log.append_as_leader(producer_records(), 0)
        assert info.log_append_time == NOW
        (batch,) = list(iter_batches(stored(log)))
        assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        assert [r.timestamp_ms for r in batch.records()] == [NOW] * 3
    finally:
        log.close()


def test_a_create_time_log_writes_the_producers_bytes_and_reports_no_append_time(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, LogConfig(), clock)
    try:
        produced = build_batch(producer_records(), 0)
        info = log.append_as_leader(produced, 0)
        assert info.log_append_time == NO_TIMESTAMP
        assert stored(log)[16:] == produced[16:]  # only offsets and the epoch were stamped
    finally:
        log.close()


def test_a_retried_batch_answers_its_original_append_time(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, LAT, clock)
    try:
        produced = build_batch(
            producer_records(), 0, producer_id=7, producer_epoch=0, base_sequence=0
        )
        log.append_as_leader(produced, 0)
        clock.advance(500)
        retry = log.append_as_leader(produced, 0)
        assert retry.duplicate and retry.log_append_time == NOW
    finally:
        log.close()


def test_a_producer_batch_that_claims_log_append_time_is_an_invalid_timestamp(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, LogConfig(), clock)
    claimed = build_batch(
        producer_records()[:2], 0, timestamp_type=LOG_APPEND_TIME, log_append_time_ms=NOW
    )
    try:
        with pytest.raises(InvalidTimestampError, match="rejected due to invalid timestamp") as e:
            log.append_as_leader(claimed, 0)
        assert [r.batch_index for r in e.value.record_errors] == [0, 1]
        assert "Producer should not set timestamp type to LogAppendTime" in (
            e.value.record_errors[0].message
        )
        assert log.log_end_offset == 0
    finally:
        log.close()


def test_timestamps_further_than_the_difference_max_are_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    config = LogConfig(message_timestamp_difference_max_ms=1_000)
    log = open_log(tmp_path, config, clock)
    records = [
        Record(b"a", b"1", NOW - 1_000),  # at the bound: accepted
        Record(b"b", b"2", NOW - 1_001),
        Record(b"c", b"3", NO_TIMESTAMP),  # none given: not checked
        Record(b"d", b"4", NOW + 5_000),
    ]
    try:
        with pytest.raises(InvalidTimestampError) as refused:
            log.append_as_leader(build_batch(records, 0), 0)
        assert refused.value.record_errors == (
            RecordError(
                1,
                f"Timestamp {NOW - 1_001} of message with offset 1 is out of range. "
                f"The timestamp should be within [{NOW - 1_000}, {NOW + 1_000}]",
            ),
            RecordError(
                3,
                f"Timestamp {NOW + 5_000} of message with offset 3 is out of range. "
                f"The timestamp should be within [{NOW - 1_000}, {NOW + 1_000}]",
            ),
        )
        with pytest.raises(InvalidTimestampError):
            log.append_as_leader(records, 0)  # the records a log builds itself too
        assert log.log_end_offset == 0
        log.append_as_leader(build_batch(records[:1] + records[2:3], 0), 0)
        assert log.log_end_offset == 2
        # LogAppendTime replaces the timestamps: the bound does not apply
        unbounded = LogConfig(
            message_timestamp_type="LogAppendTime", message_timestamp_difference_max_ms=0
        )
        lat = open_log(tmp_path, unbounded, clock, "lat-0")
        try:
            assert lat.append_as_leader(build_batch(records, 0), 0).log_append_time == NOW
        finally:
            lat.close()
    finally:
        log.close()


def test_a_compacted_log_names_every_keyless_record_and_keys_come_before_timestamps(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    config = LogConfig(cleanup_policy="compact", message_timestamp_difference_max_ms=10)
    log = open_log(tmp_path, config, clock)
    records = [Record(None, b"0", NOW - 100), Record(b"k", b"1", NOW), Record(None, b"2", NOW)]
    try:
        with pytest.raises(InvalidRecordError) as refused:
            log.append_as_leader(build_batch(records, 0), 0)
        # record 0 is keyless and out of bounds: its key is what Kafka reports
        assert refused.value.record_errors == (
            RecordError(0, "Compacted topic cannot accept message without key in topic "
                           "partition t-0."),
            RecordError(2, "Compacted topic cannot accept message without key in topic "
                           "partition t-0."),
        )  # fmt: skip
        assert str(refused.value).startswith(
            "One or more records have been rejected due to 2 record errors in total, and only "
            "showing the first three errors at most: [RecordError(batchIndex=0, message='Compacted"
        )
        assert log.log_end_offset == 0
    finally:
        log.close()


@pytest.mark.parametrize(
    ("sent", "setting", "kept"),
    [
        (CompressionType.NONE, "gzip", CompressionType.GZIP),
        (CompressionType.LZ4, "uncompressed", CompressionType.NONE),
        (CompressionType.SNAPPY, "zstd", CompressionType.ZSTD),
        (CompressionType.SNAPPY, "producer", CompressionType.SNAPPY),
    ],
)
def test_compression_type_recompresses_batches_written_with_another_codec(
    tmp_path: Path, sent: CompressionType, setting: str, kept: CompressionType
) -> None:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, LogConfig(compression_type=setting), clock)
    records = producer_records()
    try:
        produced = build_batch(records, 0, producer_id=3, producer_epoch=1, base_sequence=9,
                               compression=sent)  # fmt: skip
        log.append_as_leader(produced, 2)
        (batch,) = list(iter_batches(stored(log), deep=True))
        assert batch.compression_codec == kept
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (3, 1, 9)
        assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in batch.records()] == [
            (r.key, r.value, r.timestamp_ms, r.headers) for r in records
        ]
        assert batch.leader_epoch == 2
        log.append_as_leader([Record(b"k", b"in-process", NOW)], 2)  # built with the codec
        built = CompressionType.NONE if setting == "producer" else kept
        assert list(iter_batches(stored(log)))[-1].compression_codec == built
    finally:
        log.close()


def test_segment_jitter_rolls_a_segment_that_much_before_segment_ms(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    random.seed(28)
    log = open_log(tmp_path, LogConfig(segment_ms=10_000, segment_jitter_ms=4_000), clock)
    try:
        jitter = log._roll_jitter_ms
        assert 0 <= jitter < 4_000
        log.append_as_leader([Record(b"k", b"v", NOW)], 0)
        log.append_as_leader([Record(b"k", b"v", NOW + 10_000 - jitter - 1)], 0)
        assert log.num_segments == 1
        log.append_as_leader([Record(b"k", b"v", NOW + 10_000 - jitter)], 0)
        assert log.num_segments == 2
        assert 0 <= log._roll_jitter_ms < 4_000  # drawn again for the new segment
    finally:
        log.close()


def test_max_compaction_lag_rolls_a_compacted_log_and_has_it_cleaned_whatever_its_ratio(
    tmp_path: Path,
) -> None:
    clock = ManualClock(NOW)
    config = LogConfig(
        cleanup_policy="compact", max_compaction_lag_ms=5_000, min_cleanable_dirty_ratio=1.0
    )  # a dirty ratio is at most 1.0, and must be above this: never cleaned for its ratio
    log = open_log(tmp_path, config, clock)
    try:
        log.append_as_leader([Record(b"k", b"v", NOW)], 0)
        log.append_as_leader([Record(b"k", b"v", NOW + 5_000)], 0)  # segment.ms is a week
        assert log.num_segments == 2
        manager = LogCleanerManager(tmp_path, lambda: {log.topic_partition: log})
        assert manager.grab_filthiest_compacted_log(NOW + 5_000) is None  # not past the lag
        chosen = manager.grab_filthiest_compacted_log(NOW + 5_001)
        assert chosen is not None and chosen.needs_compaction_now
        assert chosen.max_compaction_delay_ms == 1
    finally:
        log.close()


def empty_batch() -> bytes:
    """A producer batch that reports no records (and holds none), its CRC right."""
    one = build_batch([Record(b"k", b"v", CREATED)], 0)
    fields = list(HEADER.unpack_from(one))
    fields[1] = HEADER.size - 12  # length: from the partition leader epoch on
    fields[12] = 0  # the record count
    header = bytearray(HEADER.pack(*fields))
    struct.pack_into(">I", header, 17, crc32c.crc32c(bytes(header[21:])))
    return bytes(header)


@pytest.mark.parametrize("setting", ["producer", "gzip"])
def test_a_producer_batch_that_reports_no_records_is_an_invalid_record(
    tmp_path: Path, setting: str
) -> None:
    """Kafka's validateBatch refuses a reported count of 0 whatever the codec setting (a
    recompressing log once failed on it with a bare ValueError)."""
    log = open_log(tmp_path, LogConfig(compression_type=setting), ManualClock(NOW))
    try:
        with pytest.raises(InvalidRecordError, match="Invalid reported count for record batch: 0"):
            log.append_as_leader(empty_batch(), 0)
        assert log.log_end_offset == 0
    finally:
        log.close()
