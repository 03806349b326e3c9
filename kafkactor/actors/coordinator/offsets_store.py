"""What the group coordinator writes to `__consumer_offsets` and how it reads a partition back.

Kafka's `GroupMetadataManager` turns a completed rebalance into a `GroupMetadataKey` /
`GroupMetadataValue` record (`storeGroup`), an OffsetCommit into one `OffsetCommitKey` /
`OffsetCommitValue` record per partition (`storeOffsets`), and a deleted group into tombstones.
When its broker becomes leader of a partition of the topic it replays that partition from the
log start (`loadGroupsAndOffsets`): the last record of a key wins and a tombstone removes the
key, so compaction never changes what a load finds. Pure: records in, values out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from kafkactor.actors.coordinator.group_metadata import (
    GroupMetadataSnapshot,
    MemberSnapshot,
    OffsetAndMetadata,
)
from kafkactor.actors.coordinator.offsets_topic import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsRecordError,
    OffsetValue,
    UnknownRecordTypeError,
    decode_record,
    encode_key,
    encode_value,
)
from kafkactor.actors.coordinator.results import GroupTombstones
from kafkactor.actors.coordinator.txn_offsets import PendingTxnOffset
from kafkactor.common import TopicPartition
from kafkactor.storage import Record, StoredRecord

__all__ = [
    "LoadedGroup",
    "OffsetsReplay",
    "group_record",
    "offset_records",
    "tombstone_records",
]


def group_record(snapshot: GroupMetadataSnapshot, now_ms: int) -> Record:
    """A group's metadata as Kafka's storeGroup writes it (GroupMetadataValue v3)."""
    value = GroupValue(
        protocol_type=snapshot.protocol_type,
        generation=snapshot.generation_id,
        protocol=snapshot.protocol_name,
        leader=snapshot.leader_id,
        current_state_timestamp_ms=(
            -1
            if snapshot.current_state_timestamp_ms is None
            else snapshot.current_state_timestamp_ms
        ),
        members=tuple(_member(MemberValue, m) for m in snapshot.members),
    )
    return Record(encode_key(GroupKey(group=snapshot.group_id)), encode_value(value), now_ms)


_M = TypeVar("_M", MemberValue, MemberSnapshot)


def _member(kind: type[_M], member: MemberValue | MemberSnapshot) -> _M:
    """One member from the record's form to the coordinator's or back: the two name their
    fields alike (`GroupMetadataValue.MemberMetadata`'s fields)."""
    return kind(**{f.name: getattr(member, f.name) for f in dataclasses.fields(kind)})


def offset_records(
    group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata], now_ms: int
) -> list[Record]:
    """One OffsetCommitValue record per partition, as Kafka's storeOffsets writes them."""
    records = []
    for tp, o in offsets.items():
        value = OffsetValue(
            offset=o.offset,
            leader_epoch=-1 if o.leader_epoch is None else o.leader_epoch,
            metadata=o.metadata,
            commit_timestamp_ms=o.commit_timestamp_ms,
            expire_timestamp_ms=-1 if o.expire_timestamp_ms is None else o.expire_timestamp_ms,
        )
        key = OffsetKey(group=group_id, topic=tp.topic, partition=tp.partition)
        records.append(Record(encode_key(key), encode_value(value), now_ms))
    return records


def tombstone_records(tombstones: GroupTombstones, now_ms: int) -> list[Record]:
    """A deleted group: a tombstone for each committed offset, then one for its metadata (when
    `tombstones.metadata`)."""
    group_id = tombstones.group_id
    records = [
        Record(
            encode_key(OffsetKey(group=group_id, topic=tp.topic, partition=tp.partition)),
            None,
            now_ms,
        )
        for tp in tombstones.partitions
    ]
    if tombstones.metadata:
        records.append(Record(encode_key(GroupKey(group=group_id)), None, now_ms))
    return records


@dataclass(frozen=True, slots=True)
class LoadedGroup:
    """One group found by a load: its last metadata record (None when it only committed
    offsets, or its metadata was deleted), its committed offsets with the log offset each was
    written at (`positions`), and the transactions' offsets still pending (by producer id:
    their marker is not in the log yet)."""

    group_id: str
    snapshot: GroupMetadataSnapshot | None
    offsets: Mapping[TopicPartition, OffsetAndMetadata]
    positions: Mapping[TopicPartition, int] = field(default_factory=dict, compare=False)
    pending: Mapping[int, Mapping[TopicPartition, PendingTxnOffset]] = field(default_factory=dict)


@dataclass
class OffsetsReplay:
    """Kafka's loadGroupsAndOffsets over one partition's records, in offset order: the last
    value of each key wins, a tombstone removes it. Records of a kind this coordinator does
    not know (KIP-848's and later record types) are skipped and counted, as Kafka's loader
    skips them; a record that does not decode is counted in `corrupt` and skipped too (a
    load never stops at one bad record: the groups after it must still be served)."""

    groups: dict[str, GroupMetadataSnapshot | None] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0
    corrupt: int = 0
    positions: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    # a transaction's offset records, by producer id, until its marker: (group, partition) ->
    pending: dict[int, dict[tuple[str, TopicPartition], PendingTxnOffset]] = field(
        default_factory=dict
    )
    # while a transactional batch replays: its producer's pending records, its base offset
    _txn: tuple[dict[tuple[str, TopicPartition], PendingTxnOffset], int] | None = field(
        default=None, init=False, repr=False
    )

    def replay(self, records: Iterable[StoredRecord], *, producer_id: int | None = None) -> None:
        """Replay one batch's records; `producer_id` names the producer of a transactional
        batch, whose offset records stay pending until `replay_marker` of that producer."""
        records = list(records)
        self._txn = None
        if producer_id is not None and records:
            self._txn = (self.pending.setdefault(producer_id, {}), records[0].offset)
        for record in records:
            self.records += 1
            if record.key is None:
                self.corrupt += 1
                continue
            try:
                key, value = decode_record(record.key, record.value)
            except UnknownRecordTypeError:
                self.skipped += 1
                continue
            except OffsetsRecordError:
                self.corrupt += 1
                continue
            if isinstance(key, OffsetKey):
                self._offset(key, value if isinstance(value, OffsetValue) else None, record.offset)
            else:
                self._group(key, value if isinstance(value, GroupValue) else None)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        """The producer's transaction marker (Kafka's loader on a control batch): on COMMIT
        its pending offsets become committed where no offset written later in the log is;
        on ABORT (or any other control record) they are dropped."""
        pending = self.pending.pop(producer_id, {})
        if not committed:
            return
        for (group_id, tp), txn in pending.items():
            positions = self.positions.setdefault(group_id, {})
            offsets = self.offsets.setdefault(group_id, {})
            written = positions.get(tp) if tp in offsets else None
            if written is None or txn.log_offset is None or written < txn.log_offset:
                offsets[tp] = txn.offset
                if txn.log_offset is not None:
                    positions[tp] = txn.log_offset

    def _offset(self, key: OffsetKey, value: OffsetValue | None, log_offset: int) -> None:
        tp = TopicPartition(topic=key.topic, partition=key.partition)
        if self._txn is not None:  # a transaction's record: pending for its producer
            pending, batch_offset = self._txn
            if value is None:
                pending.pop((key.group, tp), None)
            else:
                pending[key.group, tp] = PendingTxnOffset(_offset_and_metadata(value), batch_offset)
            return
        offsets = self.offsets.setdefault(key.group, {})
        positions = self.positions.setdefault(key.group, {})
        if value is None:
            offsets.pop(tp, None)
            positions.pop(tp, None)
            return
        offsets[tp] = _offset_and_metadata(value)
        positions[tp] = log_offset

    def _group(self, key: GroupKey, value: GroupValue | None) -> None:
        if value is None:  # the group was deleted: forget it (its offsets had tombstones)
            self.groups[key.group] = None
            return
        self.groups[key.group] = GroupMetadataSnapshot(
            group_id=key.group,
            generation_id=value.generation,
            protocol_type=value.protocol_type,
            protocol_name=value.protocol,
            leader_id=value.leader,
            current_state_timestamp_ms=(
                None if value.current_state_timestamp_ms < 0 else value.current_state_timestamp_ms
            ),
            members=tuple(_member(MemberSnapshot, m) for m in value.members),
        )

    def loaded(self) -> list[LoadedGroup]:
        """Every group with metadata, offsets or a transaction's pending offsets left after
        the replay."""
        pending: dict[str, dict[int, dict[TopicPartition, PendingTxnOffset]]] = {}
        for producer_id, records in self.pending.items():
            for (group_id, tp), txn in records.items():
                pending.setdefault(group_id, {}).setdefault(producer_id, {})[tp] = txn
        names = dict.fromkeys([*self.groups, *self.offsets, *pending])
        found = []
        for name in names:
            snapshot = self.groups.get(name)
            offsets = self.offsets.get(name, {})
            if snapshot is None and not offsets and not pending.get(name):
                continue
            positions = {tp: p for tp, p in self.positions.get(name, {}).items() if tp in offsets}
            found.append(
                LoadedGroup(name, snapshot, dict(offsets), positions, pending.get(name, {}))
            )
        return found


def _offset_and_metadata(value: OffsetValue) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        offset=value.offset,
        leader_epoch=None if value.leader_epoch < 0 else value.leader_epoch,
        metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp_ms,
        expire_timestamp_ms=None if value.expire_timestamp_ms < 0 else value.expire_timestamp_ms,
    )
