"""The `__consumer_offsets` topic: a group's partition is Kafka's (Java's `String.hashCode`,
Kafka's `Utils.abs`), its records read and write byte for byte as Kafka's JSON definitions lay
them out in every version, and the consumer protocol structs agree with kafka-python's.

Sources of the expected values:

- Hash codes and partitions: computed with OpenJDK 17's `String.hashCode` and Kafka's
  `Utils.abs` (`(n == Integer.MIN_VALUE) ? 0 : Math.abs(n)`) by a throwaway `java H.java` when
  this file was written. Three agree with published values: "testgroup" -> partition 27 of 50
  (a comment in a copy of Kafka's GroupMetadataManager.scala), "\U0001f600" -> 1772899 and
  "polygenelubricants" -> Integer.MIN_VALUE (a Java-compatibility test of a Rust port of Flink).
- Record bytes: LinkedIn Burrow's decoder tests (core/internal/consumer/kafka_client_test.go),
  an independent Go reader of `__consumer_offsets`, and `_expected_*` below, which lay out each
  version by hand with `struct` from Kafka's group-coordinator JSON definitions.
- Consumer protocol bytes: kafka-python, which builds its classes from Kafka's JSON files
  (`kafka.protocol.consumer.metadata`) and also has hand-written v0 structs
  (`kafka.protocol.old.consumer_protocol`).
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment as KpAssignment,
)
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolSubscription as KpSubscription,
)
from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0 as KpAssignmentV0,
)
from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberMetadata_v0 as KpSubscriptionV0,
)

from kafkactor.actors.coordinator.consumer_protocol import (
    CONSUMER_PROTOCOL_VERSION,
    Assignment,
    ConsumerProtocolError,
    Subscription,
    TopicPartitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kafkactor.actors.coordinator.offsets_topic import (
    DEFAULT_OFFSETS_TOPIC_PARTITIONS,
    OFFSETS_TOPIC,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsRecordError,
    OffsetValue,
    UnknownRecordTypeError,
    decode_key,
    decode_record,
    encode_key,
    encode_value,
    java_string_hash,
    kafka_abs,
    partition_for,
)

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# -- partition_for ---------------------------------------------------------------------------

# group id, String.hashCode, partition of 50, partition of 7 (OpenJDK 17; see the docstring)
JAVA_VECTORS = [
    ("", 0, 0, 0),
    ("a", 97, 47, 6),
    ("hello", 99162322, 22, 0),
    ("testgroup", -1172783827, 27, 5),
    ("my-group", -1906497762, 12, 1),
    ("console-consumer-12345", 158455506, 6, 6),
    ("connect-cluster", 1440343063, 13, 5),
    ("_confluent-ksql-default_query_CSAS_1", -2013116731, 31, 3),
    ("zzzzzzzzzz", -1580979136, 36, 2),
    ("Aa", 2112, 12, 5),
    ("BB", 2112, 12, 5),  # Java's textbook collision with "Aa"
    ("polygenelubricants", INT32_MIN, 0, 0),
    ("GydZG_", INT32_MIN, 0, 0),
    ("DESIGNING WORKHOUSES", INT32_MIN, 0, 0),
    ("\U0001f600", 1772899, 49, 2),  # beyond the BMP: two UTF-16 code units
    ("groupé", -1237460406, 6, 0),
    ("消费者组", 871131088, 38, 2),
    ("\ufeffbom", 1944824417, 17, 4),
    ("a\x00b", 93315, 15, 5),
    ("x" * 1000, -1715418112, 12, 2),
    ("abcdefghij" * 257, -28796507, 7, 5),
]


@pytest.mark.parametrize(("group_id", "hash_code", "of_50", "of_7"), JAVA_VECTORS)
def test_partition_for_matches_kafka_on_the_jvm(
    group_id: str, hash_code: int, of_50: int, of_7: int
) -> None:
    assert java_string_hash(group_id) == hash_code
    assert partition_for(group_id) == of_50
    assert partition_for(group_id, DEFAULT_OFFSETS_TOPIC_PARTITIONS) == of_50
    assert partition_for(group_id, 7) == of_7


def test_integer_min_value_maps_to_partition_zero() -> None:
    """Kafka's `Utils.abs`, not Java's `Math.abs` (which would give -48) nor Python's `abs`
    (2^31 % 50 == 48)."""
    assert java_string_hash("polygenelubricants") == INT32_MIN
    assert kafka_abs(INT32_MIN) == 0
    assert partition_for("polygenelubricants") == 0
    assert partition_for("polygenelubricants", 3) == 0  # 2^31 % 3 == 2


def test_kafka_abs() -> None:
    assert [kafka_abs(n) for n in (0, 5, -5, INT32_MAX, -INT32_MAX, INT32_MIN)] == [
        0,
        5,
        5,
        INT32_MAX,
        INT32_MAX,
        0,
    ]


def test_a_lone_surrogate_hashes_as_its_code_unit() -> None:
    """A Java string may hold an unpaired surrogate; it counts as one char."""
    assert java_string_hash("\ud800") == 0xD800
    assert java_string_hash("a\udc00") == 97 * 31 + 0xDC00


@given(st.text(max_size=60), st.integers(1, 1000))
def test_partition_for_is_a_partition(group_id: str, partitions: int) -> None:
    assert 0 <= partition_for(group_id, partitions) < partitions
    assert INT32_MIN <= java_string_hash(group_id) <= INT32_MAX


@pytest.mark.parametrize("partitions", [0, -1])
def test_partition_for_needs_a_partition(partitions: int) -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for("g", partitions)


def test_topic_name() -> None:
    assert OFFSETS_TOPIC == "__consumer_offsets"
    assert DEFAULT_OFFSETS_TOPIC_PARTITIONS == 50


# -- an independent layout of every record version, from Kafka's JSON definitions -------------


def _i32(n: int) -> bytes:
    return struct.pack(">i", n)


def _i64(n: int) -> bytes:
    return struct.pack(">q", n)


def _str(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else _i32(len(b)) + b


def _expected_offset_value(v: OffsetValue, version: int) -> bytes:
    out = struct.pack(">hq", version, v.offset)
    if version >= 3:
        out += _i32(v.leader_epoch)
    out += _str(v.metadata) + _i64(v.commit_timestamp_ms)
    if version == 1:
        out += _i64(v.expire_timestamp_ms)
    return out


def _expected_member(m: MemberValue, version: int) -> bytes:
    out = _str(m.member_id)
    if version >= 3:
        out += _str(m.group_instance_id)
    out += _str(m.client_id) + _str(m.client_host)
    if version >= 1:
        out += _i32(m.rebalance_timeout_ms)
    return out + _i32(m.session_timeout_ms) + _bytes(m.subscription) + _bytes(m.assignment)


def _expected_group_value(v: GroupValue, version: int) -> bytes:
    out = struct.pack(">h", version) + _str(v.protocol_type) + _i32(v.generation)
    out += _str(v.protocol) + _str(v.leader)
    if version >= 2:
        out += _i64(v.current_state_timestamp_ms)
    out += _i32(len(v.members))
    return out + b"".join(_expected_member(m, version) for m in v.members)


def _as_read(value: OffsetValue | GroupValue, version: int) -> OffsetValue | GroupValue:
    """What a value reads back as after being written in `version`: the fields the version
    does not hold take their defaults (a v0 member's rebalance timeout is its session's)."""
    if isinstance(value, OffsetValue):
        return OffsetValue(
            value.offset,
            value.leader_epoch if version >= 3 else -1,
            value.metadata,
            value.commit_timestamp_ms,
            value.expire_timestamp_ms if version == 1 else -1,
        )
    return GroupValue(
        value.protocol_type,
        value.generation,
        value.protocol,
        value.leader,
        value.current_state_timestamp_ms if version >= 2 else -1,
        tuple(
            MemberValue(
                m.member_id,
                m.group_instance_id if version >= 3 else None,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms if version >= 1 else m.session_timeout_ms,
                m.session_timeout_ms,
                m.subscription,
                m.assignment,
            )
            for m in value.members
        ),
    )


# -- keys ------------------------------------------------------------------------------------

# Burrow's fixtures: an offset key (record type 1) and a group key (record type 2)
BURROW_OFFSET_KEY = b"\x00\x01\x00\x09testgroup\x00\x09testtopic\x00\x00\x00\x0b"
BURROW_GROUP_KEY = b"\x00\x02\x00\x09testgroup"


def test_keys_are_written_as_kafka_writes_them() -> None:
    assert encode_key(OffsetKey("testgroup", "testtopic", 11)) == BURROW_OFFSET_KEY
    assert encode_key(GroupKey("testgroup")) == BURROW_GROUP_KEY


def test_keys_read_back() -> None:
    assert decode_key(BURROW_OFFSET_KEY) == OffsetKey("testgroup", "testtopic", 11)
    assert decode_key(BURROW_GROUP_KEY) == GroupKey("testgroup")


def test_offset_key_version_0_reads_as_the_same_key() -> None:
    v0 = b"\x00\x00" + BURROW_OFFSET_KEY[2:]
    assert decode_key(v0) == OffsetKey("testgroup", "testtopic", 11)


@given(
    st.text(max_size=40),
    st.text(max_size=40),
    st.integers(INT32_MIN, INT32_MAX),
    st.sampled_from([0, 1]),
)
def test_offset_keys_round_trip(group: str, topic: str, partition: int, key_type: int) -> None:
    key = OffsetKey(group, topic, partition)
    encoded = encode_key(key)
    assert encoded == struct.pack(">h", 1) + _str(group) + _str(topic) + _i32(partition)
    assert decode_key(encoded) == key
    assert decode_key(struct.pack(">h", key_type) + encoded[2:]) == key


@given(st.text(max_size=80))
def test_group_keys_round_trip(group: str) -> None:
    encoded = encode_key(GroupKey(group))
    assert encoded == struct.pack(">h", 2) + _str(group)
    assert decode_key(encoded) == GroupKey(group)


@pytest.mark.parametrize("record_type", [-1, 3, 4, 5, 6, 7, 8, 9, 16, 32767, -32768])
def test_unknown_record_types_are_refused(record_type: int) -> None:
    key = struct.pack(">h", record_type) + BURROW_GROUP_KEY[2:]
    with pytest.raises(UnknownRecordTypeError) as raised:
        decode_record(key, None)
    assert raised.value.record_type == record_type
    assert isinstance(raised.value, OffsetsRecordError)
    assert isinstance(raised.value, ValueError)


# -- values ----------------------------------------------------------------------------------

# Burrow's fixture: an OffsetCommitValue v0 (offset 8372, metadata "testdata", timestamp 1637)
BURROW_OFFSET_VALUE_V0 = (
    b"\x00\x00\x00\x00\x00\x00\x00\x00\x20\xb4\x00\x08testdata\x00\x00\x00\x00\x00\x00\x06\x65"
)
# Burrow's fixture: a GroupMetadataValue v1 of one member. Its assignment field is 22 bytes (a
# v0 assignment cut before its user data) and 4 stray bytes follow the struct: Kafka ignores
# bytes after a record's struct, and so does decode_record
BURROW_ASSIGNMENT_22 = b"\x00\x00\x00\x00\x00\x01\x00\x06topic1\x00\x00\x00\x01\x00\x00\x00\x0b"
BURROW_GROUP_VALUE_V1 = (
    b"\x00\x01\x00\x08testtype\x00\x00\x00\x01\x00\x0ctestprotocol\x00\x0atestleader"
    b"\x00\x00\x00\x01\x00\x0ctestmemberid\x00\x0ctestclientid\x00\x0etestclienthost"
    b"\x00\x00\x00\x04\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00\x16" + BURROW_ASSIGNMENT_22
) + b"\x00\x00\x00\x00"


def test_burrow_offset_commit() -> None:
    assert decode_record(BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE_V0) == (
        OffsetKey("testgroup", "testtopic", 11),
        OffsetValue(8372, -1, "testdata", 1637, -1),
    )


def test_burrow_group_metadata() -> None:
    member = MemberValue(
        "testmemberid", None, "testclientid", "testclienthost", 4, 8, b"", BURROW_ASSIGNMENT_22
    )
    assert decode_record(BURROW_GROUP_KEY, BURROW_GROUP_VALUE_V1) == (
        GroupKey("testgroup"),
        GroupValue("testtype", 1, "testprotocol", "testleader", -1, (member,)),
    )
    # without the stray bytes: the same record, and our v1 bytes are Burrow's
    value = decode_record(BURROW_GROUP_KEY, BURROW_GROUP_VALUE_V1[:-4])[1]
    assert value is not None
    assert encode_value(value, 1) == BURROW_GROUP_VALUE_V1[:-4]


OFFSET = OffsetValue(
    offset=1234567890123, leader_epoch=7, metadata="m", commit_timestamp_ms=1_700_000_000_000
)
MEMBERS = (
    MemberValue(
        "consumer-1-a", "instance-1", "consumer-1", "/10.0.0.1", 300_000, 45_000, b"s", b"a"
    ),
    MemberValue("consumer-2-b", None, "consumer-2", "/10.0.0.2", 60_000, 10_000, b"", b""),
)
GROUP = GroupValue("consumer", 5, "range", "consumer-1-a", 1_700_000_000_123, MEMBERS)
EMPTY_GROUP = GroupValue("", 0, None, None, 1_700_000_000_456, ())  # Kafka's empty group record


@pytest.mark.parametrize("version", range(4))
@pytest.mark.parametrize(
    "value",
    [OFFSET, OffsetValue(0, -1, "", 0, 99), GROUP, EMPTY_GROUP],
    ids=["offset", "offset-expiring", "group", "empty-group"],
)
def test_every_value_version_round_trips(value: OffsetValue | GroupValue, version: int) -> None:
    encoded = encode_value(value, version)
    if isinstance(value, OffsetValue):
        assert encoded == _expected_offset_value(value, version)
        key = encode_key(OffsetKey("g", "t", 0))
    else:
        assert encoded == _expected_group_value(value, version)
        key = encode_key(GroupKey("g"))
    assert decode_record(key, encoded)[1] == _as_read(value, version)


def test_a_v0_member_reads_its_rebalance_timeout_as_its_session_timeout() -> None:
    value = decode_record(encode_key(GroupKey("g")), encode_value(GROUP, 0))[1]
    assert isinstance(value, GroupValue)
    assert [m.rebalance_timeout_ms for m in value.members] == [45_000, 10_000]
    assert [m.group_instance_id for m in value.members] == [None, None]


def test_values_default_to_the_versions_kafka_writes() -> None:
    assert encode_value(OFFSET)[:2] == b"\x00\x03"
    assert encode_value(OffsetValue(1, -1, "", 2, expire_timestamp_ms=3))[:2] == b"\x00\x01"
    assert encode_value(GROUP)[:2] == b"\x00\x03"
    assert encode_value(OFFSET) == _expected_offset_value(OFFSET, 3)
    assert encode_value(GROUP) == _expected_group_value(GROUP, 3)


int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=30)
offset_values = st.builds(OffsetValue, int64s, int32s, st.text(max_size=60), int64s, int64s)
members = st.builds(
    MemberValue,
    names,
    st.none() | names,
    names,
    names,
    int32s,
    int32s,
    st.binary(max_size=40),
    st.binary(max_size=40),
)
group_values = st.builds(
    GroupValue,
    names,
    int32s,
    st.none() | names,
    st.none() | names,
    int64s,
    st.lists(members, max_size=4).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(offset_values, group_values), st.integers(0, 3))
def test_values_round_trip(value: OffsetValue | GroupValue, version: int) -> None:
    encoded = encode_value(value, version)
    if isinstance(value, OffsetValue):
        assert encoded == _expected_offset_value(value, version)
        key = encode_key(OffsetKey("g", "t", 0))
    else:
        assert encoded == _expected_group_value(value, version)
        key = encode_key(GroupKey("g"))
    assert decode_record(key, encoded) == (decode_key(key), _as_read(value, version))


# -- tombstones ------------------------------------------------------------------------------


def test_a_null_value_is_a_tombstone() -> None:
    assert decode_record(BURROW_OFFSET_KEY, None) == (
        OffsetKey("testgroup", "testtopic", 11),
        None,
    )
    assert decode_record(BURROW_GROUP_KEY, None) == (GroupKey("testgroup"), None)


def test_an_empty_value_is_not_a_tombstone() -> None:
    with pytest.raises(OffsetsRecordError, match="too few"):
        decode_record(BURROW_OFFSET_KEY, b"")


# -- what cannot be read or written ----------------------------------------------------------


@pytest.mark.parametrize("version", [4, 5, -1, 32767])
def test_unknown_value_versions_are_refused(version: int) -> None:
    too_new = struct.pack(">h", version) + encode_value(OFFSET, 3)[2:]
    with pytest.raises(
        OffsetsRecordError, match=f"unsupported OffsetCommitValue version {version}"
    ):
        decode_record(BURROW_OFFSET_KEY, too_new)
    too_new = struct.pack(">h", version) + encode_value(GROUP, 3)[2:]
    with pytest.raises(
        OffsetsRecordError, match=f"unsupported GroupMetadataValue version {version}"
    ):
        decode_record(BURROW_GROUP_KEY, too_new)
    with pytest.raises(OffsetsRecordError, match="unsupported"):
        encode_value(OFFSET, version)
    with pytest.raises(OffsetsRecordError, match="unsupported"):
        encode_value(GROUP, version)


def _valid_records() -> list[tuple[bytes, bytes]]:
    records = [
        (BURROW_OFFSET_KEY, BURROW_OFFSET_VALUE_V0),
        (BURROW_GROUP_KEY, BURROW_GROUP_VALUE_V1),
    ]
    for version in range(4):
        records.append((encode_key(OffsetKey("g", "t", 3)), encode_value(OFFSET, version)))
        records.append((encode_key(GroupKey("g")), encode_value(GROUP, version)))
    return records


@pytest.mark.parametrize("record", _valid_records())
def test_every_truncation_is_refused(record: tuple[bytes, bytes]) -> None:
    key, value = record
    decode_record(key, value)
    for cut in range(len(key)):
        with pytest.raises(OffsetsRecordError):
            decode_record(key[:cut], value)
    value_end = len(value) - 4 if value == BURROW_GROUP_VALUE_V1 else len(value)
    for cut in range(value_end):
        with pytest.raises(OffsetsRecordError):
            decode_record(key, value[:cut])


def test_a_null_members_array_is_refused() -> None:
    """kio reads an array length of -1 as None; Kafka refuses null in a non-nullable field."""
    null_members = encode_value(EMPTY_GROUP, 3)[:-4] + b"\xff\xff\xff\xff"
    with pytest.raises(OffsetsRecordError, match="non-nullable field members"):
        decode_record(BURROW_GROUP_KEY, null_members)


def test_null_in_non_nullable_fields_is_refused() -> None:
    null_protocol_type = b"\x00\x03\xff\xff" + encode_value(EMPTY_GROUP, 3)[4:]
    with pytest.raises(OffsetsRecordError, match="malformed GroupMetadataValue v3"):
        decode_record(BURROW_GROUP_KEY, null_protocol_type)
    with pytest.raises(OffsetsRecordError, match="cannot write"):
        encode_value(GroupValue(None, 1, None, None), 3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "value",
    [
        OffsetValue(2**63, -1, "", 0),
        OffsetValue(0, 2**31, "", 0),
        OffsetValue(0, -1, "x" * 40_000, 0),  # beyond an int16 string length
        OffsetValue(0, -1, "\ud800", 0),  # not encodable as UTF-8
        GroupValue("consumer", -(2**31) - 1, None, None),
    ],
)
def test_values_that_do_not_fit_are_refused(value: OffsetValue | GroupValue) -> None:
    with pytest.raises(OffsetsRecordError, match="cannot write"):
        encode_value(value, 3)


def test_keys_that_do_not_fit_are_refused() -> None:
    with pytest.raises(OffsetsRecordError, match="cannot write OffsetCommitKey"):
        encode_key(OffsetKey("g", "t", 2**31))
    with pytest.raises(OffsetsRecordError, match="cannot write GroupMetadataKey"):
        encode_key(GroupKey("g" * 40_000))


def _mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray(data)
    for kind, position, chunk in edits:
        at = position % (len(out) + 1)
        if kind == 0:
            del out[at:]
        elif kind == 1:
            out[at : at + len(chunk)] = chunk
        else:
            out[at:at] = chunk
    return bytes(out)


edits = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.integers(0, 10_000),
        st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00", b"\x00\x05"])
        | st.binary(min_size=1, max_size=6),
    ),
    min_size=1,
    max_size=4,
)


def _decode_everything(key: bytes, value: bytes | None) -> None:
    """Every decoder on the bytes: each either reads them or raises an OffsetsRecordError."""
    for decode in (
        lambda: decode_record(key, value),
        lambda: decode_record(BURROW_OFFSET_KEY, key),
        lambda: decode_record(BURROW_GROUP_KEY, key),
        lambda: decode_subscription(key),
        lambda: decode_assignment(key),
    ):
        with contextlib.suppress(OffsetsRecordError):
            decode()


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=120), st.none() | st.binary(max_size=120))
def test_garbage_raises_only_offsets_record_errors(key: bytes, value: bytes | None) -> None:
    _decode_everything(key, value)


@settings(max_examples=1000, deadline=None)
@given(st.sampled_from(_valid_records()), edits, edits)
def test_damaged_records_raise_only_offsets_record_errors(
    record: tuple[bytes, bytes], key_edits: list[Any], value_edits: list[Any]
) -> None:
    key, value = record
    _decode_everything(_mutate(key, key_edits), _mutate(value, value_edits))
    _decode_everything(value, _mutate(value, value_edits))


# -- the consumer protocol -------------------------------------------------------------------

topic_partitions = st.dictionaries(names, st.lists(int32s, max_size=5), max_size=4)


def _kp_subscription(
    version: int,
    topics: list[str],
    *,
    user_data: bytes | None,
    owned: dict[str, list[int]],
    generation_id: int,
    rack_id: str | None,
) -> bytes:
    tp = KpSubscription.TopicPartition
    data: bytes = KpSubscription(
        version=version,
        topics=topics,
        user_data=user_data,
        owned_partitions=[tp(topic=t, partitions=ps) for t, ps in owned.items()],
        generation_id=generation_id,
        rack_id=rack_id,
    ).encode()
    return data


def _kp_assignment(
    version: int, partitions: dict[str, list[int]], user_data: bytes | None
) -> bytes:
    tp = KpAssignment.TopicPartition
    data: bytes = KpAssignment(
        version=version,
        assigned_partitions=[tp(topic=t, partitions=ps) for t, ps in partitions.items()],
        user_data=user_data,
    ).encode()
    return data


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 3),
    topics=st.lists(names, max_size=5),
    user_data=st.none() | st.binary(max_size=30),
    owned=topic_partitions,
    generation_id=int32s,
    rack_id=st.none() | names,
)
def test_subscriptions_agree_with_kafka_python(
    *,
    version: int,
    topics: list[str],
    user_data: bytes | None,
    owned: dict[str, list[int]],
    generation_id: int,
    rack_id: str | None,
) -> None:
    theirs = _kp_subscription(
        version,
        topics,
        user_data=user_data,
        owned=owned,
        generation_id=generation_id,
        rack_id=rack_id,
    )
    ours = encode_subscription(
        topics,
        user_data,
        owned_partitions=owned,
        generation_id=generation_id,
        rack_id=rack_id,
        version=version,
    )
    assert ours == theirs
    assert decode_subscription(theirs) == Subscription(
        version=version,
        topics=tuple(topics),
        user_data=user_data,
        owned_partitions=tuple(TopicPartitions(t, tuple(ps)) for t, ps in owned.items())
        if version >= 1
        else (),
        generation_id=generation_id if version >= 2 else -1,
        rack_id=rack_id if version >= 3 else None,
    )
    read = KpSubscription.decode(ours)
    assert (read.version, list(read.topics), read.user_data) == (version, topics, user_data)
    if version >= 1:
        assert {tp.topic: list(tp.partitions) for tp in read.owned_partitions} == owned
    if version >= 2:
        assert read.generation_id == generation_id
    if version >= 3:
        assert read.rack_id == rack_id


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3), topic_partitions, st.none() | st.binary(max_size=30))
def test_assignments_agree_with_kafka_python(
    version: int, partitions: dict[str, list[int]], user_data: bytes | None
) -> None:
    theirs = _kp_assignment(version, partitions, user_data)
    ours = encode_assignment(partitions, user_data, version=version)
    assert ours == theirs
    assert decode_assignment(theirs) == Assignment(
        version, tuple(TopicPartitions(t, tuple(ps)) for t, ps in partitions.items()), user_data
    )
    read = KpAssignment.decode(ours)
    assert read.version == version
    assert {tp.topic: list(tp.partitions) for tp in read.assigned_partitions} == partitions
    assert read.user_data == user_data


def test_kafka_pythons_hand_written_v0_structs() -> None:
    subscription = KpSubscriptionV0(0, ["orders", "payments"], b"ud").encode()
    assert decode_subscription(subscription) == Subscription(0, ("orders", "payments"), b"ud")
    assert encode_subscription(["orders", "payments"], b"ud", version=0) == subscription

    assignment = KpAssignmentV0(0, [("orders", [0, 2]), ("payments", [1])], b"").encode()
    assert decode_assignment(assignment) == Assignment(
        0, (TopicPartitions("orders", (0, 2)), TopicPartitions("payments", (1,))), b""
    )
    assert encode_assignment({"orders": [0, 2], "payments": [1]}, version=0) == assignment
    read = KpAssignmentV0.decode(encode_assignment({"orders": [0, 2]}, b"x", version=0))
    assert (read.version, read.partitions()[0].topic, read.user_data) == (0, "orders", b"x")


def test_burrow_assignment() -> None:
    v0 = b"\x00\x00\x00\x00\x00\x01\x00\x06topic1\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"
    assert decode_assignment(v0) == Assignment(0, (TopicPartitions("topic1", (0,)),), b"")
    # the assignment inside Burrow's group record lacks its user data
    with pytest.raises(ConsumerProtocolError, match="malformed"):
        decode_assignment(BURROW_ASSIGNMENT_22)


def test_defaults_write_the_newest_version() -> None:
    assert CONSUMER_PROTOCOL_VERSION == 3
    subscription = encode_subscription(["t"])
    assert subscription[:2] == b"\x00\x03"
    assert decode_subscription(subscription) == Subscription(3, ("t",), b"", (), -1, None)
    assignment = encode_assignment({"t": [0]})
    assert assignment[:2] == b"\x00\x03"
    assert decode_assignment(assignment) == Assignment(3, (TopicPartitions("t", (0,)),), b"")


def test_older_versions_drop_what_they_do_not_hold() -> None:
    def written(version: int) -> Subscription:
        return decode_subscription(
            encode_subscription(
                ["t"],
                None,
                owned_partitions={"t": [1]},
                generation_id=4,
                rack_id="r",
                version=version,
            )
        )

    assert written(0) == Subscription(0, ("t",), None)
    assert written(1) == Subscription(1, ("t",), None, (TopicPartitions("t", (1,)),))
    assert written(2) == Subscription(2, ("t",), None, (TopicPartitions("t", (1,)),), 4)
    assert written(3) == Subscription(3, ("t",), None, (TopicPartitions("t", (1,)),), 4, "r")


@pytest.mark.parametrize("version", [4, 9, 32767])
def test_newer_versions_read_as_the_newest_known(version: int) -> None:
    """Kafka's ConsumerProtocol: newer versions only add fields, so they read as v3."""
    subscription = struct.pack(">h", version) + encode_subscription(["t"], b"u", rack_id="r")[2:]
    assert decode_subscription(subscription + b"future field") == Subscription(
        version, ("t",), b"u", (), -1, "r"
    )
    assignment = struct.pack(">h", version) + encode_assignment({"t": [1]})[2:]
    assert decode_assignment(assignment + b"future field") == Assignment(
        version, (TopicPartitions("t", (1,)),), b""
    )


@pytest.mark.parametrize("version", [-1, -32768])
def test_negative_versions_are_refused(version: int) -> None:
    with pytest.raises(ConsumerProtocolError, match="unsupported subscription version"):
        decode_subscription(struct.pack(">h", version) + encode_subscription(["t"])[2:])
    with pytest.raises(ConsumerProtocolError, match="unsupported assignment version"):
        decode_assignment(struct.pack(">h", version) + encode_assignment({})[2:])


@pytest.mark.parametrize("version", [-1, 4])
def test_unknown_versions_are_not_written(version: int) -> None:
    with pytest.raises(ConsumerProtocolError, match="unsupported subscription version"):
        encode_subscription(["t"], version=version)
    with pytest.raises(ConsumerProtocolError, match="unsupported assignment version"):
        encode_assignment({}, version=version)


def test_consumer_protocol_errors_are_offsets_record_errors() -> None:
    with pytest.raises(OffsetsRecordError):
        decode_subscription(b"\x00")
    with pytest.raises(ConsumerProtocolError, match="too few"):
        decode_assignment(b"")
    with pytest.raises(ConsumerProtocolError, match="cannot write"):
        encode_assignment({"t": [2**31]})
    with pytest.raises(ConsumerProtocolError, match="cannot write"):
        encode_subscription(["t"], owned_partitions={"t": [-(2**31) - 1]})
    with pytest.raises(ConsumerProtocolError, match="cannot write"):
        encode_subscription(["t" * 40_000])


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00", "topics"),
        (b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff", "ownedPartitions"),
        (
            b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff",
            "ownedPartitions",
        ),
    ],
)
def test_null_subscription_arrays_are_refused(data: bytes, field: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=f"non-nullable field {field}"):
        decode_subscription(data)


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\xff\xff\xff\xff\x00\x00\x00\x00",
        b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff\x00\x00\x00\x00",
    ],
)
def test_null_assignment_arrays_are_refused(data: bytes) -> None:
    with pytest.raises(ConsumerProtocolError, match="non-nullable field assignedPartitions"):
        decode_assignment(data)


def test_a_group_record_carries_consumer_protocol_bytes() -> None:
    """How the coordinator stores a consumer group: subscriptions and assignments nested as
    bytes in the members of its GroupMetadataValue."""
    member = MemberValue(
        "c-1",
        None,
        "c",
        "/127.0.0.1",
        300_000,
        45_000,
        encode_subscription(["orders"], None),
        encode_assignment({"orders": [0, 1, 2]}, None),
    )
    group = GroupValue("consumer", 1, "range", "c-1", 1, (member,))
    key = encode_key(GroupKey("billing"))
    _, read = decode_record(key, encode_value(group))
    assert isinstance(read, GroupValue)
    assert decode_subscription(read.members[0].subscription).topics == ("orders",)
    assert decode_assignment(read.members[0].assignment).partitions == (("orders", (0, 1, 2)),)
    assert partition_for("billing") == partition_for("billing", 50)
