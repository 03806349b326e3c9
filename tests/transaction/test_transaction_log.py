"""`__transaction_state`'s records, byte for byte as Kafka's `TransactionLog` writes them, the
partition of a transactional id, and the topic's configs (Kafka's TransactionLogTest).

Expected bytes are laid out by hand with `struct` from Kafka's TransactionLogKey /
TransactionLogValue definitions (v0: int16 version, then the fields in order, strings as int16
length + UTF-8, arrays as int32 count), independently of the kio entities the module uses.
"""

from __future__ import annotations

import struct

import pytest

from kafkactor.actors.transaction import (
    TransactionConfig,
    TransactionLogError,
    TransactionState,
    TxnTransitMetadata,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for_transactional_id,
    transaction_state_topic_config,
)
from kafkactor.common import TopicPartition

pytestmark = pytest.mark.timeout(30)


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic=topic, partition=partition)


def _transit(state: TransactionState, partitions: frozenset[TopicPartition]) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=1001,
        last_producer_id=-1,
        producer_epoch=7,
        last_producer_epoch=-1,
        txn_timeout_ms=60_000,
        state=state,
        partitions=partitions,
        txn_start_timestamp=1_700_000_000_000 if partitions else -1,
        txn_last_update_timestamp=1_700_000_000_500,
    )


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def test_key_is_version_0_and_the_transactional_id() -> None:
    assert encode_key("my-txn") == struct.pack(">h", 0) + _string("my-txn")
    assert decode_key(encode_key("änd-ünicode")) == "änd-ünicode"


def test_value_v0_is_laid_out_as_kafka_writes_it() -> None:
    partitions = frozenset({_tp("orders", 1), _tp("orders", 0), _tp("audit", 3)})
    transit = _transit(TransactionState.PREPARE_COMMIT, partitions)
    expected = (
        struct.pack(">hqhib", 0, 1001, 7, 60_000, 2)
        + struct.pack(">i", 2)
        + _string("audit")
        + struct.pack(">ii", 1, 3)
        + _string("orders")
        + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)
    )
    assert encode_value(transit) == expected
    assert decode_value(expected) == transit


def test_an_empty_transaction_writes_null_partitions() -> None:
    transit = _transit(TransactionState.EMPTY, frozenset())
    expected = struct.pack(">hqhibiqq", 0, 1001, 7, 60_000, 0, -1, 1_700_000_000_500, -1)
    assert encode_value(transit) == expected
    assert decode_value(expected) == transit


def test_an_empty_transaction_with_partitions_is_refused() -> None:
    transit = _transit(TransactionState.EMPTY, frozenset({_tp("t", 0)}))
    with pytest.raises(TransactionLogError, match="Empty"):
        encode_value(transit)


@pytest.mark.parametrize("state", list(TransactionState))
def test_every_state_round_trips(state: TransactionState) -> None:
    partitions = frozenset() if state is TransactionState.EMPTY else frozenset({_tp("t", 4)})
    transit = _transit(state, partitions)
    assert decode_value(encode_value(transit)) == transit


def test_a_null_value_is_the_tombstone_of_an_expired_id() -> None:
    assert decode_value(None) is None


def test_unreadable_records_raise_the_log_error() -> None:
    with pytest.raises(TransactionLogError, match="key version 1"):
        decode_key(struct.pack(">h", 1) + _string("x"))
    with pytest.raises(TransactionLogError, match="version 5"):
        decode_value(struct.pack(">h", 5))
    with pytest.raises(TransactionLogError, match="status 9"):
        decode_value(struct.pack(">hqhibiqq", 0, 1, 0, 1000, 9, -1, 0, -1))
    with pytest.raises(TransactionLogError):
        decode_value(b"\x00")


def test_partition_is_the_java_hash_of_the_id() -> None:
    # "abc".hashCode() == 96354 (Java), 96354 % 50 == 4; "polygenelubricants" hashes to
    # Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0
    assert partition_for_transactional_id("abc") == 4
    assert partition_for_transactional_id("abc", 7) == 96354 % 7
    assert partition_for_transactional_id("polygenelubricants") == 0


def test_topic_config_is_kafkas_and_min_isr_fits_the_replication_factor() -> None:
    config = transaction_state_topic_config()
    assert config == {
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "segment.bytes": "104857600",
        "unclean.leader.election.enable": "false",
        "compression.type": "uncompressed",
    }
    assert transaction_state_topic_config(replication_factor=1)["min.insync.replicas"] == "1"
    custom = TransactionConfig(state_log_min_isr=3, state_log_segment_bytes=1024)
    assert (
        transaction_state_topic_config(custom, replication_factor=5)["min.insync.replicas"] == "3"
    )
    assert transaction_state_topic_config(custom)["segment.bytes"] == "1024"
