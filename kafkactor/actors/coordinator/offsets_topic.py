"""The `__consumer_offsets` topic: which partition a group lives in, and the bytes stored there.

Kafka's group coordinator keeps committed offsets and group metadata as records of the
compacted internal topic `__consumer_offsets` (`offsets.topic.num.partitions`, 50 by default).
A group belongs to the partition `Utils.abs(groupId.hashCode) % partitions`, and the leader of
that partition is the group's coordinator (`partition_for`).

Each record's key and value is a big-endian int16 version, then a struct of that version
(`MessageUtil.toVersionPrefixedBytes`). The key's version says what the record is:

- 0 or 1: an `OffsetCommitKey` (group, topic, partition); Kafka writes 1. Its value is an
  `OffsetCommitValue` v0-v3; Kafka writes v3, or v1 when the commit carries an expire
  timestamp (`MetadataVersion.offsetCommitValueVersion`).
- 2: a `GroupMetadataKey` (group). Its value is a `GroupMetadataValue` v0-v3 with one
  `MemberMetadata` per member; Kafka writes v3 (`MetadataVersion.groupMetadataValueVersion`).
- 3 and up: the KIP-848 consumer group, share group and streams group records. This
  coordinator does not write them; reading one raises `UnknownRecordTypeError`, which a loader
  may skip, as Kafka's `CoordinatorLoader` skips an `UnknownRecordTypeException`.

A null value is a tombstone: the offset was deleted or expired, or the group was removed.
Values v4 (the first flexible versions, defined but not yet written by Kafka) are refused.

Inside a group's record, each member's subscription and assignment are the consumer protocol's
own version-prefixed structs (`ConsumerProtocolSubscription` in JoinGroup's protocol metadata,
`ConsumerProtocolAssignment` in SyncGroup's assignment), decoded by `decode_subscription` and
`decode_assignment`. As Kafka's `ConsumerProtocol` does, a version newer than v3 is read as v3.
Like Kafka's readers, every decoder here ignores bytes after the struct.

Where the formats come from:

- The consumer protocol structs are kio's entities (`kio.schema.consumer_protocol_*`), read and
  written by kio, as the wire codec (kafkactor/network/codec.py) reads requests.
- The four record schemas are not in kio: kio generates entities from Kafka's
  `clients/src/main/resources/common/message` only, and these live in
  `group-coordinator/src/main/resources/common/message`. kafka-python (3.0) ships JSON
  definitions for the client APIs and the consumer protocol but not these, and no other
  maintained Python library has them. So `_RECORD_SCHEMAS` below transcribes Kafka's four JSON
  definitions (field by field, with the versions each field has), one kio entity class is made
  per schema version from them (`kafkactor.network.transcribed`), and kio's `entity_reader` /
  `entity_writer` do every byte. No field is packed by hand; only the int16 version prefix is,
  as codec.py packs frame prefixes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, TypeAlias

from kafkactor.actors.coordinator.versioned import (
    OffsetsRecordError,
    nested,
    non_null,
    read,
    read_version,
    write,
)
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.network import _kio  # noqa: F401 (first: imports kio without hypothesis)
from kafkactor.network.codec import build
from kafkactor.network.transcribed import EntityType, Field
from kafkactor.network.transcribed import entity as transcribed_entity

__all__ = [
    "DEFAULT_OFFSETS_TOPIC_PARTITIONS",
    "DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR",
    "GROUP_METADATA_KEY_TYPE",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSETS_TOPIC",
    "OFFSET_COMMIT_KEY_TYPE",
    "OFFSET_COMMIT_VALUE_EXPIRE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "GroupKey",
    "GroupValue",
    "MemberValue",
    "OffsetKey",
    "OffsetValue",
    "OffsetsRecord",
    "OffsetsRecordError",
    "UnknownRecordTypeError",
    "decode_key",
    "decode_record",
    "encode_key",
    "encode_value",
    "java_string_hash",
    "kafka_abs",
    "partition_for",
]

DEFAULT_OFFSETS_TOPIC_PARTITIONS: Final = 50
"""`offsets.topic.num.partitions`'s default."""
DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR: Final = 3
"""`offsets.topic.replication.factor`'s default (this project creates the topic with
min(this, live brokers))."""

OFFSET_COMMIT_KEY_TYPE: Final = 1  # the key version Kafka writes (0 is read as the same key)
GROUP_METADATA_KEY_TYPE: Final = 2
OFFSET_COMMIT_VALUE_VERSION: Final = 3  # what Kafka writes unless an expire timestamp is set
OFFSET_COMMIT_VALUE_EXPIRE_VERSION: Final = 1  # the one version that holds an expire timestamp
GROUP_METADATA_VALUE_VERSION: Final = 3


_INT32_MIN: Final = -(2**31)
_VERSION: Final = struct.Struct(">h")


class UnknownRecordTypeError(OffsetsRecordError):
    """A key of a record type this coordinator does not know (Kafka's
    `CoordinatorLoader.UnknownRecordTypeException`: the loader logs and skips the record)."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"unknown __consumer_offsets record type (key version) {record_type}")
        self.record_type = record_type


# -- partitioning ----------------------------------------------------------------------------


def java_string_hash(value: str) -> int:
    """Java's `String.hashCode`: `s[0]*31^(n-1) + ... + s[n-1]` over the UTF-16 code units,
    wrapped to a signed 32-bit int. A character beyond the BMP counts as its two surrogates."""
    h = 0
    for (unit,) in struct.iter_unpack(">H", value.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's `Utils.abs`: the absolute value of an int, except that Integer.MIN_VALUE maps to
    0 (Java's `Math.abs` leaves it negative, Python's `abs` makes it 2^31)."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The `__consumer_offsets` partition that holds a group, whose leader coordinates it:
    Kafka's `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`."""
    if partitions < 1:
        raise ValueError(f"the offsets topic needs at least one partition, not {partitions}")
    return kafka_abs(java_string_hash(group_id)) % partitions


# -- the records' decoded form ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetKey:
    """The key of a committed offset (Kafka's `OffsetCommitKey`): group, topic, partition."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """A committed offset (Kafka's `OffsetCommitValue`).

    -1 stands for "none" as on the wire: `leader_epoch` (held from v3), `expire_timestamp_ms`
    (held by v1 alone: a commit of OffsetCommit v1, or v2-v4 with a retention time).
    """

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class GroupKey:
    """The key of a group's metadata record (Kafka's `GroupMetadataKey`)."""

    group: str


@dataclass(frozen=True, slots=True)
class MemberValue:
    """One member in a group's metadata record (Kafka's `GroupMetadataValue.MemberMetadata`).

    `subscription` is the member's metadata for the group's protocol (for consumers a
    `ConsumerProtocolSubscription`), `assignment` what the leader gave it (for consumers a
    `ConsumerProtocolAssignment`). `group_instance_id` is held from v3 (None before), the
    rebalance timeout from v1 (a v0 record reads as the session timeout, as Kafka reads it).
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    """A group's metadata (Kafka's `GroupMetadataValue`): its protocol type ("consumer", or ""
    for a group with no members), generation, chosen protocol and leader (None while it has
    none), the time of its last state change (held from v2; -1 for none) and its members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberValue, ...] = ()


OffsetsRecord: TypeAlias = tuple[OffsetKey, OffsetValue | None] | tuple[GroupKey, GroupValue | None]
"""A decoded record: its key, and its value or None for a tombstone."""


# -- the record schemas, transcribed from Kafka's JSON definitions ---------------------------


# group-coordinator/src/main/resources/common/message/GroupMetadataValue.json, commonStructs
_MEMBER_METADATA: Final = (
    Field("member_id", "string", 0),
    Field("group_instance_id", "string", 3, nullable=True),
    Field("client_id", "string", 0),
    Field("client_host", "string", 0),
    Field("rebalance_timeout", "int32", 1),
    Field("session_timeout", "int32", 0),
    Field("subscription", "bytes", 0),
    Field("assignment", "bytes", 0),
)

#: name -> (versions read and written here, fields), from Kafka's JSON files of that name
_RECORD_SCHEMAS: Final[dict[str, tuple[range, tuple[Field, ...]]]] = {
    "OffsetCommitKey": (
        range(1),  # the key struct has one layout; the key's version is the record type
        (
            Field("group", "string", 0),
            Field("topic", "string", 0),
            Field("partition", "int32", 0),
        ),
    ),
    "GroupMetadataKey": (range(1), (Field("group", "string", 0),)),
    "OffsetCommitValue": (
        range(4),
        (
            Field("offset", "int64", 0),
            Field("leader_epoch", "int32", 3),
            Field("metadata", "string", 0),
            Field("commit_timestamp", "int64", 0),
            Field("expire_timestamp", "int64", 1, last=1),
        ),
    ),
    "GroupMetadataValue": (
        range(4),
        (
            Field("protocol_type", "string", 0),
            Field("generation", "int32", 0),
            Field("protocol", "string", 0, nullable=True),
            Field("leader", "string", 0, nullable=True),
            Field("current_state_timestamp", "int64", 2),
            Field("members", "[]MemberMetadata", 0, nested=("MemberMetadata", _MEMBER_METADATA)),
        ),
    ),
}


@cache
def _entities(name: str) -> tuple[Any, ...]:
    """The entity of each version of record schema `name`, made on first use: a broker whose
    group coordinator reads and writes no `__consumer_offsets` record never makes them."""
    versions, schema = _RECORD_SCHEMAS[name]
    return tuple(
        transcribed_entity(name, v, schema, EntityType.data, module=__name__) for v in versions
    )


# -- reading and writing ---------------------------------------------------------------------


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    """A record key as Kafka writes it: record type 1 and an `OffsetCommitKey`, or record type
    2 and a `GroupMetadataKey`."""
    if isinstance(key, OffsetKey):
        entity = _entities("OffsetCommitKey")[0]
        record = build(entity, group=key.group, topic=key.topic, partition=key.partition)
        return write(OFFSET_COMMIT_KEY_TYPE, entity, record, OffsetsRecordError, "OffsetCommitKey")
    entity = _entities("GroupMetadataKey")[0]
    record = build(entity, group=key.group)
    return write(GROUP_METADATA_KEY_TYPE, entity, record, OffsetsRecordError, "GroupMetadataKey")


def encode_value(value: OffsetValue | GroupValue, version: int | None = None) -> bytes:
    """A record value in the given version, by default the one Kafka writes: `OffsetCommitValue`
    v3 (v1 if the offset has an expire timestamp), `GroupMetadataValue` v3. Fields the version
    does not hold are dropped, as Kafka drops its ignorable fields."""
    if isinstance(value, OffsetValue):
        name = "OffsetCommitValue"
        if version is None:
            expires = value.expire_timestamp_ms != -1
            version = OFFSET_COMMIT_VALUE_EXPIRE_VERSION if expires else OFFSET_COMMIT_VALUE_VERSION
        entity = _value_entity(name, version)
        record = build(
            entity,
            offset=value.offset,
            leader_epoch=value.leader_epoch,
            metadata=value.metadata,
            commit_timestamp=value.commit_timestamp_ms,
            expire_timestamp=value.expire_timestamp_ms,
        )
    else:
        name = "GroupMetadataValue"
        version = GROUP_METADATA_VALUE_VERSION if version is None else version
        entity = _value_entity(name, version)
        member = nested(entity, "members")
        record = build(
            entity,
            protocol_type=value.protocol_type,
            generation=value.generation,
            protocol=value.protocol,
            leader=value.leader,
            current_state_timestamp=value.current_state_timestamp_ms,
            members=tuple(
                build(
                    member,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms,
                    subscription=m.subscription,
                    assignment=m.assignment,
                )
                for m in value.members
            ),
        )
    return write(version, entity, record, OffsetsRecordError, name)


def _value_entity(name: str, version: int) -> Any:
    entities = _entities(name)
    if not 0 <= version < len(entities):
        raise OffsetsRecordError(
            f"unsupported {name} version {version} (supported: 0-{len(entities) - 1})"
        )
    return entities[version]


def decode_key(key: bytes) -> OffsetKey | GroupKey:
    """A record key: an `OffsetKey` (record types 0 and 1) or a `GroupKey` (record type 2)."""
    record_type = read_version(key, OffsetsRecordError, "__consumer_offsets key")
    if record_type in (0, OFFSET_COMMIT_KEY_TYPE):
        k = read(key, _entities("OffsetCommitKey")[0], OffsetsRecordError, "OffsetCommitKey")
        return OffsetKey(group=k.group, topic=k.topic, partition=int(k.partition))
    if record_type == GROUP_METADATA_KEY_TYPE:
        k = read(key, _entities("GroupMetadataKey")[0], OffsetsRecordError, "GroupMetadataKey")
        return GroupKey(group=k.group)
    raise UnknownRecordTypeError(record_type)


def decode_record(key: bytes, value: bytes | None) -> OffsetsRecord:
    """A `__consumer_offsets` record: its key and value, or its key and None for a tombstone."""
    decoded = decode_key(key)
    if isinstance(decoded, OffsetKey):
        return decoded, None if value is None else _decode_offset_value(value)
    return decoded, None if value is None else _decode_group_value(value)


def _decode_offset_value(data: bytes) -> OffsetValue:
    name = "OffsetCommitValue"
    version = read_version(data, OffsetsRecordError, name)
    v = read(data, _value_entity(name, version), OffsetsRecordError, f"{name} v{version}")
    return OffsetValue(
        offset=int(v.offset),
        leader_epoch=int(getattr(v, "leader_epoch", -1)),
        metadata=v.metadata,
        commit_timestamp_ms=int(v.commit_timestamp),
        expire_timestamp_ms=int(getattr(v, "expire_timestamp", -1)),
    )


def _decode_group_value(data: bytes) -> GroupValue:
    name = "GroupMetadataValue"
    version = read_version(data, OffsetsRecordError, name)
    what = f"{name} v{version}"
    v = read(data, _value_entity(name, version), OffsetsRecordError, what)
    members = []
    for m in non_null(v.members, OffsetsRecordError, f"members of a {what}"):
        session_timeout = int(m.session_timeout)
        members.append(
            MemberValue(
                member_id=m.member_id,
                group_instance_id=getattr(m, "group_instance_id", None),
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=int(getattr(m, "rebalance_timeout", session_timeout)),
                session_timeout_ms=session_timeout,
                subscription=bytes(m.subscription),
                assignment=bytes(m.assignment),
            )
        )
    return GroupValue(
        protocol_type=v.protocol_type,
        generation=int(v.generation),
        protocol=v.protocol,
        leader=v.leader,
        current_state_timestamp_ms=int(getattr(v, "current_state_timestamp", -1)),
        members=tuple(members),
    )
