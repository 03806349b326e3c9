"""Helpers of the wire-protocol tests: sample records, reading back in-process, the checks.

Every client module produces the same kind of records (`samples`), reports what its client
acknowledged as `Delivered` and what its client read back as `Read`, and hands both to the
same checks. Reading back "in-process" goes through kafkactor's own consumer
(`Cluster.consumer()`), which parses every stored batch with kafkactor's record code: a batch
the broker stored but could not serve would fail there.

Nothing here sleeps to wait for the system: waits poll a condition against a deadline
(`wait_until`) or wait on a client's future with a timeout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafkactor.clients import Consumer, ProduceError
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.network.api_versions import MIN_SERVED_PRODUCE_VERSION, SUPPORTED, ApiKey
from kafkactor.storage import CompressionType, RecordBatch
from kafkactor.testing import Cluster
from kafkactor.testing.read_back import stored_batches
from tests.replication.support import EventLog, wait_until

__all__ = [
    "BASE_TIMESTAMP_MS",
    "CODECS",
    "READ_S",
    "Delivered",
    "EventLog",
    "Read",
    "Sample",
    "check_acknowledged",
    "check_negotiated",
    "check_round_trip",
    "headers_of",
    "non_controller_partition",
    "read_in_process",
    "samples",
    "stored_codecs",
    "wait_until",
]

READ_S = 10.0  # reading back what was acknowledged must take less than this
# Explicit create times, well in the past: brokers accept any (Kafka 3.x has no default bound
# on how old a timestamp may be), and none can be mistaken for one the client stamped itself.
BASE_TIMESTAMP_MS = 1_600_000_000_000

# Kafka's codec names, as clients spell them, and the attribute bits a stored batch carries
CODECS: dict[str, CompressionType] = {
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """A record as a test hands it to a client."""

    key: bytes
    value: bytes | None
    headers: Headers
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class Delivered:
    """A record the client reported as acknowledged, and where it said it landed."""

    sample: Sample
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Read:
    """A record as a consumer returned it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def samples(
    count: int, *, tag: str = "r", tombstone: bool = True, null_header: bool = True
) -> list[Sample]:
    """`count` keyed records with distinct keys and ascending create times 1 s apart, and
    headers of every shape Kafka allows: none, one, a repeated name, an empty value, a null
    value (unless not `null_header`: kafka-python refuses one), a non-ASCII name, binary bytes.
    With `tombstone`, record 5 has a null value."""
    shapes: list[Headers] = [
        (),
        (("trace-id", f"{tag}-trace".encode()),),
        (("dup", b"first"), ("dup", b"second"), ("empty", b"")),
        (("null", None if null_header else b"not null"), ("naïve-ünicode", bytes(range(8)))),
    ]
    return [
        Sample(
            key=f"{tag}-key-{i}".encode(),
            value=None if tombstone and i == 5 else f"{tag}-value-{i}-".encode() * (1 + i % 7),
            headers=shapes[i % len(shapes)],
            timestamp_ms=BASE_TIMESTAMP_MS + i * 1000,
        )
        for i in range(count)
    ]


def headers_of(raw: Iterable[Sequence[Any]] | None) -> Headers:
    """A client's headers (a list or tuple of pairs, or None for none) as a tuple of pairs."""
    return tuple((str(name), None if value is None else bytes(value)) for name, value in raw or ())


# -- checks ------------------------------------------------------------------------------------


def check_round_trip(delivered: Sequence[Delivered], read: Sequence[Read]) -> None:
    """Every acknowledged record was read back at the partition and offset of its
    acknowledgement with the same key, value, headers and timestamp; each partition's offsets
    run from 0 without a gap; nothing was read that was not acknowledged."""
    by_position = {(r.partition, r.offset): r for r in read}
    assert len(by_position) == len(read), "a partition and offset was read twice"
    for d in delivered:
        got = by_position.get((d.partition, d.offset))
        assert got is not None, f"{d} was not read back"
        wanted = d.sample
        assert (got.key, got.value, got.headers, got.timestamp_ms) == (
            wanted.key,
            wanted.value,
            wanted.headers,
            wanted.timestamp_ms,
        ), f"read {got} for {d}"
    acked = Counter(d.partition for d in delivered)
    for partition, count in acked.items():
        offsets = sorted(d.offset for d in delivered if d.partition == partition)
        assert offsets == list(range(count)), f"p{partition}: acknowledged at {offsets}"
    assert len(read) == len(delivered), f"read {len(read)} records, {len(delivered)} acknowledged"


def check_acknowledged(acked: dict[bytes, int], stored: dict[int, bytes | None]) -> None:
    """Each acknowledged value (-> its acknowledged offset) is stored at that offset, no two
    records were acknowledged at one offset, and the stored offsets have no gap."""
    offsets = list(acked.values())
    assert len(set(offsets)) == len(offsets), "two records acknowledged at one offset"
    moved = {v: (o, stored.get(o)) for v, o in acked.items() if stored.get(o) != v}
    assert not moved, f"{len(moved)} acknowledged records lost or moved, e.g. {list(moved)[:3]}"
    assert sorted(stored) == list(range(len(stored))), "a gap below the high watermark"


def check_negotiated(events: EventLog) -> Counter[tuple[int, int]]:
    """Every request a client sent was one we serve, at a version we advertise; none was
    refused as unreadable. An ApiVersions request newer than ours is allowed (KIP-511: the
    answer names our range), but then the client must have asked again within it. Returns the
    (api key, version) pairs sent, counted."""
    sent: Counter[tuple[int, int]] = Counter(
        (int(e["api_key"]), int(e["api_version"])) for e in events.named("network.request")
    )
    refused = events.named("network.bad_request")
    assert not refused, f"requests refused as unreadable: {refused}"
    assert sent, "no request reached a broker"
    for (api, version), _count in sent.items():
        low, high = SUPPORTED[ApiKey(api)]
        if api == ApiKey.PRODUCE:
            low = MIN_SERVED_PRODUCE_VERSION
        if api == ApiKey.API_VERSIONS and version > high:
            continue
        assert low <= version <= high, f"{ApiKey(api).name} v{version} outside {low}-{high}"
    api_versions = [v for api, v in sent if api == ApiKey.API_VERSIONS]
    assert any(v <= SUPPORTED[ApiKey.API_VERSIONS][1] for v in api_versions), api_versions
    return sent


# -- reading back in-process -------------------------------------------------------------------


def read_in_process(
    cluster: Cluster, topic: str, partitions: Iterable[int], count: int
) -> list[Read]:
    """`count` records from offset 0 of these partitions, through kafkactor's own consumer."""
    consumer: Consumer = cluster.consumer(max_wait_ms=100)
    consumer.assign([(topic, p) for p in partitions])
    found: list[Read] = []

    def enough() -> bool:
        for r in consumer.poll(100):
            found.append(
                Read(r.partition, r.offset, r.key, r.value, headers_of(r.headers), r.timestamp_ms)
            )
        return len(found) >= count

    try:
        wait_until(enough, READ_S, f"{count} records of {topic} read in-process")
    finally:
        consumer.close()
    return found


def stored_codecs(cluster: Cluster, topic: str, partition: int) -> set[CompressionType]:
    """The codecs of the batches the partition's leader holds below its high watermark."""
    leader = cluster.leader(topic, partition)
    log = cluster.brokers[leader].logs[str(TopicPartition(topic=topic, partition=partition))]
    high_watermark = cluster.describe_partition(topic, partition).high_watermark
    return {
        CompressionType(RecordBatch(batch.data).compression_codec)
        for batch in stored_batches(log, high_watermark)
    }


def assert_stored_as_sent(cluster: Cluster, topic: str, partition: int, codec: str) -> None:
    """The leader kept the producer's codec (compression.type=producer). A batch may also be
    stored uncompressed: kafka-python and librdkafka send a batch as it is when compressing it
    does not make it smaller (a lone small record, say), so NONE beside the codec is the
    client's choice, not the broker's."""
    stored = stored_codecs(cluster, topic, partition)
    assert CODECS[codec] in stored, stored
    assert stored <= {CODECS[codec], CompressionType.NONE}, stored


def non_controller_partition(cluster: Cluster, topic: str, partitions: int) -> tuple[int, int]:
    """A partition of `topic` led by a broker that is not the controller, and its leader, so
    that killing the leader is a partition failover and not also a controller election."""
    controller = cluster.controller_id()
    for p in range(partitions):
        leader = cluster.wait_for_leader(topic, p)
        if leader != controller:
            return p, leader
    raise AssertionError(f"the controller (broker {controller}) leads every partition")


def produce_error_in_process(cluster: Cluster, topic: str, value: bytes) -> ErrorCode | None:
    """What the broker answers kafkactor's own producer for this record, in Kafka's codes."""
    producer = cluster.producer(acks=-1, retries=0)
    try:
        producer.send(topic, value).result(READ_S)
    except ProduceError as error:
        return error.error_code
    finally:
        producer.close()
    return None
