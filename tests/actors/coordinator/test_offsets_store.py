"""What the coordinator writes to `__consumer_offsets` and reads back (`offsets_store`).

Every record goes through a real magic-2 batch (`build_batch`, then `iter_batches`) before it is
replayed, as a load reads it from the log: the replay sees exactly the bytes the appends
wrote. What a load must find, as Kafka's `loadGroupsAndOffsets` finds it: the last value of a
key wins, a tombstone removes its key, a group with offsets only loads with no metadata, and a
record it cannot read is counted and skipped without stopping the load.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadataSnapshot,
    MemberSnapshot,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.offsets_store import (
    LoadedGroup,
    OffsetsReplay,
    group_record,
    offset_records,
    tombstone_records,
)
from kafkactor.actors.coordinator.offsets_topic import (
    GroupKey,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
)
from kafkactor.actors.coordinator.results import GroupTombstones
from kafkactor.common import TopicPartition
from kafkactor.storage import Record, StoredRecord, build_batch, iter_batches

GROUP = "payments"
NOW = 1_700_000_000_000
TP0 = TopicPartition(topic="orders", partition=0)
TP1 = TopicPartition(topic="orders", partition=1)
TP2 = TopicPartition(topic="refunds", partition=3)


def stored(records: Sequence[Record], base_offset: int = 0) -> list[StoredRecord]:
    """`records` as a load reads them back: one batch written at `base_offset`, then read."""
    data = build_batch(list(records), base_offset)
    return [r for batch in iter_batches(data) for r in batch.records()]


def replay(*appends: Sequence[Record]) -> OffsetsReplay:
    """Replay `appends` (each one batch, as one append writes it) in order, at increasing
    offsets, as a load reads a partition from its log start."""
    replayed = OffsetsReplay()
    offset = 0
    for records in appends:
        replayed.replay(stored(records, offset))
        offset += len(records)
    return replayed


def loaded(replayed: OffsetsReplay) -> dict[str, LoadedGroup]:
    return {g.group_id: g for g in replayed.loaded()}


def snapshot(generation: int = 3, *members: str) -> GroupMetadataSnapshot:
    names = members or ("consumer-1-aaaa", "consumer-2-bbbb")
    return GroupMetadataSnapshot(
        group_id=GROUP,
        generation_id=generation,
        protocol_type="consumer",
        protocol_name="range",
        leader_id=names[0],
        current_state_timestamp_ms=NOW - 5,
        members=tuple(
            MemberSnapshot(
                member_id=name,
                client_id=name.split("-")[0] + "-" + name.split("-")[1],
                client_host="/10.0.0.7",
                rebalance_timeout_ms=30_000 + i,
                session_timeout_ms=10_000 + i,
                subscription=f"subscription of {name}".encode(),
                assignment=f"assignment of {name}".encode(),
            )
            for i, name in enumerate(names)
        ),
    )


def offsets(**by_partition: int) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets keyed tp0 / tp1 / tp2, each with a leader epoch and metadata."""
    tps = {"tp0": TP0, "tp1": TP1, "tp2": TP2}
    return {
        tps[name]: OffsetAndMetadata(
            offset=value, leader_epoch=7, metadata=f"at {value}", commit_timestamp_ms=NOW
        )
        for name, value in by_partition.items()
    }


# -- round trips -------------------------------------------------------------------------------


def test_a_group_record_reads_back_as_the_snapshot_it_was_written_from() -> None:
    written = snapshot()
    record = group_record(written, NOW)
    assert record.timestamp_ms == NOW

    replayed = replay([record])

    assert loaded(replayed) == {GROUP: LoadedGroup(GROUP, written, {})}
    assert (replayed.records, replayed.skipped, replayed.corrupt) == (1, 0, 0)


def test_an_empty_group_record_without_leader_protocol_or_timestamp_reads_back_unchanged() -> None:
    written = GroupMetadataSnapshot(group_id=GROUP, generation_id=4)  # Empty: no members

    assert loaded(replay([group_record(written, NOW)]))[GROUP].snapshot == written


def test_offset_records_read_back_as_the_committed_offsets() -> None:
    committed = {
        TP0: OffsetAndMetadata(offset=42, leader_epoch=5, metadata="m", commit_timestamp_ms=NOW),
        TP1: OffsetAndMetadata(offset=0, leader_epoch=None, metadata="", commit_timestamp_ms=NOW),
        # an OffsetCommit v1 with an expire timestamp is written as OffsetCommitValue v1
        TP2: OffsetAndMetadata(
            offset=9, metadata="v1", commit_timestamp_ms=NOW, expire_timestamp_ms=NOW + 60_000
        ),
    }
    records = offset_records(GROUP, committed, NOW)
    assert len(records) == 3

    found = loaded(replay(records))

    assert found == {GROUP: LoadedGroup(GROUP, None, committed)}


def test_a_group_with_only_offsets_loads_with_no_snapshot() -> None:
    found = loaded(replay(offset_records(GROUP, offsets(tp0=10), NOW)))

    assert found[GROUP].snapshot is None
    assert found[GROUP].offsets == offsets(tp0=10)


def test_groups_load_independently_of_each_other() -> None:
    other = GroupMetadataSnapshot(group_id="audit", generation_id=1, protocol_type="consumer")
    found = loaded(
        replay(
            [group_record(snapshot(), NOW)],
            offset_records("audit", offsets(tp1=3), NOW),
            [group_record(other, NOW)],
            offset_records(GROUP, offsets(tp0=8), NOW),
        )
    )

    assert found == {
        GROUP: LoadedGroup(GROUP, snapshot(), offsets(tp0=8)),
        "audit": LoadedGroup("audit", other, offsets(tp1=3)),
    }


# -- last value wins, tombstones ---------------------------------------------------------------


def test_the_last_value_of_an_offset_wins() -> None:
    found = loaded(
        replay(
            offset_records(GROUP, offsets(tp0=1, tp1=100), NOW),
            offset_records(GROUP, offsets(tp0=2), NOW),
            offset_records(GROUP, offsets(tp0=3), NOW),
        )
    )

    assert found[GROUP].offsets == offsets(tp0=3, tp1=100)


def test_the_last_group_record_wins() -> None:
    found = loaded(
        replay(
            [group_record(snapshot(1, "a-1", "b-1"), NOW)],
            [group_record(snapshot(2, "b-1"), NOW)],
        )
    )

    assert found[GROUP].snapshot == snapshot(2, "b-1")


def test_an_offset_tombstone_removes_that_offset_only() -> None:
    tombstone = tombstone_records(GroupTombstones(GROUP, (TP1,)), NOW)[0]
    assert tombstone.value is None

    found = loaded(replay(offset_records(GROUP, offsets(tp0=5, tp1=6, tp2=7), NOW), [tombstone]))

    assert found[GROUP].offsets == offsets(tp0=5, tp2=7)


def test_an_offset_committed_again_after_its_tombstone_is_back() -> None:
    tombstone = tombstone_records(GroupTombstones(GROUP, (TP0,)), NOW)[0]

    found = loaded(
        replay(
            offset_records(GROUP, offsets(tp0=5), NOW),
            [tombstone],
            offset_records(GROUP, offsets(tp0=6), NOW),
        )
    )

    assert found[GROUP].offsets == offsets(tp0=6)


def test_tombstone_records_name_every_offset_then_the_group() -> None:
    records = tombstone_records(GroupTombstones(GROUP, (TP0, TP2)), NOW)

    assert [r.value for r in records] == [None, None, None]
    assert [r.key for r in records] == [
        encode_key(OffsetKey(group=GROUP, topic=TP0.topic, partition=TP0.partition)),
        encode_key(OffsetKey(group=GROUP, topic=TP2.topic, partition=TP2.partition)),
        encode_key(GroupKey(group=GROUP)),
    ]


def test_a_deleted_group_is_forgotten_with_its_offsets() -> None:
    found = loaded(
        replay(
            [group_record(snapshot(), NOW)],
            offset_records(GROUP, offsets(tp0=5, tp2=6), NOW),
            tombstone_records(GroupTombstones(GROUP, (TP0, TP2)), NOW),
        )
    )

    assert GROUP not in found


def test_a_group_tombstone_forgets_the_metadata_but_not_offsets_without_tombstones() -> None:
    group_tombstone = Record(encode_key(GroupKey(group=GROUP)), None, NOW)

    found = loaded(
        replay(
            [group_record(snapshot(), NOW)],
            offset_records(GROUP, offsets(tp0=5), NOW),
            [group_tombstone],
        )
    )

    assert found[GROUP] == LoadedGroup(GROUP, None, offsets(tp0=5))


def test_a_group_written_again_after_its_tombstone_is_back() -> None:
    found = loaded(
        replay(
            [group_record(snapshot(1), NOW)],
            tombstone_records(GroupTombstones(GROUP, ()), NOW),
            [group_record(snapshot(2), NOW)],
        )
    )

    assert found[GROUP].snapshot == snapshot(2)


def test_a_replay_may_be_fed_in_several_reads() -> None:
    """The loader (`offsets_loader`) feeds the replay one batch at a time (`LOAD_BUFFER_BYTES`
    per read)."""
    replayed = OffsetsReplay()
    replayed.replay(stored([group_record(snapshot(1), NOW)], 0))
    replayed.replay(stored(offset_records(GROUP, offsets(tp0=1), NOW), 1))
    replayed.replay(stored([group_record(snapshot(2), NOW)], 2))

    assert loaded(replayed) == {GROUP: LoadedGroup(GROUP, snapshot(2), offsets(tp0=1))}
    assert replayed.records == 3


# -- records a load cannot use -----------------------------------------------------------------


def unknown_type_key(record_type: int) -> bytes:
    """A key of a record type this coordinator does not know (KIP-848's, say): the int16
    version prefix, then a struct it never reads."""
    return struct.pack(">h", record_type) + struct.pack(">h", 5) + b"group"


def test_records_of_unknown_types_are_skipped_and_counted() -> None:
    unknown = [
        Record(unknown_type_key(record_type), b"\x00\x00whatever", NOW)
        for record_type in (3, 4, 11, 32767)
    ]

    replayed = replay(offset_records(GROUP, offsets(tp0=1), NOW), unknown)

    assert (replayed.records, replayed.skipped, replayed.corrupt) == (5, 4, 0)
    assert loaded(replayed) == {GROUP: LoadedGroup(GROUP, None, offsets(tp0=1))}


def test_a_corrupt_key_is_counted_and_the_records_after_it_still_load() -> None:
    good = encode_key(OffsetKey(group=GROUP, topic="orders", partition=0))
    value = encode_value(
        OffsetValue(offset=1, leader_epoch=-1, metadata="", commit_timestamp_ms=NOW)
    )
    corrupt_keys = [
        b"\x00",  # too short for the version
        good[:-3],  # truncated inside the partition field
        b"\x00\x01\xff\xf0",  # a negative string length
        b"\x00\x02\x7f\xff" + b"g",  # a group key whose string runs past the end
    ]
    bad = [Record(key, value, NOW) for key in corrupt_keys]

    replayed = replay(
        [group_record(snapshot(1), NOW)],
        bad,
        [group_record(snapshot(2), NOW)],
        offset_records(GROUP, offsets(tp1=9), NOW),
    )

    assert (replayed.records, replayed.skipped, replayed.corrupt) == (7, 0, 4)
    assert loaded(replayed) == {GROUP: LoadedGroup(GROUP, snapshot(2), offsets(tp1=9))}


def test_a_corrupt_value_is_counted_and_does_not_change_what_was_loaded() -> None:
    key = encode_key(OffsetKey(group=GROUP, topic=TP0.topic, partition=TP0.partition))
    corrupt = [
        Record(key, b"\x00\x03\x00", NOW),  # a truncated OffsetCommitValue v3
        Record(key, b"\x00\x09" + bytes(30), NOW),  # a version this coordinator cannot read
        Record(encode_key(GroupKey(group=GROUP)), b"\x00\x03\x00\x08cons", NOW),
    ]

    replayed = replay(
        [group_record(snapshot(1), NOW)], offset_records(GROUP, offsets(tp0=4), NOW), corrupt
    )

    assert (replayed.skipped, replayed.corrupt) == (0, 3)
    assert loaded(replayed) == {GROUP: LoadedGroup(GROUP, snapshot(1), offsets(tp0=4))}


def test_a_null_key_is_counted_as_corrupt() -> None:
    value = encode_value(
        OffsetValue(offset=1, leader_epoch=-1, metadata="", commit_timestamp_ms=NOW)
    )
    replayed = replay([Record(None, value, NOW)], offset_records(GROUP, offsets(tp0=2), NOW))

    assert (replayed.records, replayed.skipped, replayed.corrupt) == (2, 0, 1)
    assert loaded(replayed) == {GROUP: LoadedGroup(GROUP, None, offsets(tp0=2))}


def test_a_null_key_stored_record_is_counted_as_corrupt() -> None:
    """The same, handed over as a `StoredRecord` without going through a batch."""
    replayed = OffsetsReplay()
    replayed.replay([StoredRecord(offset=0, timestamp_ms=NOW, key=None, value=None, headers=())])

    assert (replayed.records, replayed.corrupt, replayed.loaded()) == (1, 1, [])
