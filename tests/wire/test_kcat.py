"""kcat (librdkafka's command-line client) against kafkactor's brokers.

kcat runs as a subprocess with its defaults (librdkafka's: acks=all, api.version.request)
except where a test is about a setting (`-X prop=value`). It reads records to produce from
stdin (`-P`, keys split off with `-K`) and prints consumed records as JSON lines (`-C -J`).
kcat cannot give a record its own create time, so records with explicit timestamps are
written by kafkactor's in-process producer and read by kcat.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import Any

import pytest

from kafkactor.network.api_versions import ApiKey
from kafkactor.storage import Record
from kafkactor.testing import Cluster
from tests.wire.support import (
    BASE_TIMESTAMP_MS,
    READ_S,
    EventLog,
    Read,
    assert_stored_as_sent,
    check_negotiated,
    non_controller_partition,
    read_in_process,
    wait_until,
)

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (Debian and Ubuntu: apt-get install kcat)"
)
RUN_S = 30.0  # no kcat run may take longer

# The headers every record of a `-P` run carries (-H name=value, in order)
HEADERS = (("trace-id", b"kcat-trace"), ("dup", b"first"), ("dup", b"second"), ("empty", b""))


def command(cluster: Cluster, *args: str) -> list[str]:
    assert KCAT is not None
    return [KCAT, "-b", cluster.bootstrap_servers, *args]


def kcat(
    cluster: Cluster, *args: str, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run kcat against the cluster; its exit code is the caller's to check."""
    return subprocess.run(
        command(cluster, *args),
        input=stdin,
        capture_output=True,
        timeout=RUN_S,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> subprocess.CompletedProcess[bytes]:
    assert result.returncode == 0, result.stderr.decode()
    return result


def consume(cluster: Cluster, topic: str, *args: str) -> list[dict[str, Any]]:
    """`kcat -C -J -e`: every record from the given offset (default: the beginning) to the
    end of each partition, as kcat's JSON envelopes."""
    result = ok(kcat(cluster, "-C", "-J", "-e", "-t", topic, *args))
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line]


def as_read(envelope: dict[str, Any]) -> Read:
    flat = envelope.get("headers") or []
    headers = tuple(
        (str(name), None if value is None else str(value).encode())
        for name, value in zip(flat[::2], flat[1::2], strict=True)
    )
    key, value = envelope["key"], envelope["payload"]
    return Read(
        int(envelope["partition"]),
        int(envelope["offset"]),
        None if key is None else str(key).encode(),
        None if value is None else str(value).encode(),
        headers,
        int(envelope["ts"]),
    )


def write_in_process(cluster: Cluster, topic: str, count: int) -> list[Record]:
    """`count` records with explicit create times (BASE + 0 s, + 1 s, ...) and headers, one
    batch to partition 0 through kafkactor's own producer."""
    records = [
        Record(
            f"key-{i}".encode(),
            f"value-{i}".encode(),
            BASE_TIMESTAMP_MS + i * 1000,
            (("seq", str(i).encode()), ("null", None)),
        )
        for i in range(count)
    ]
    producer = cluster.producer(acks=-1)
    try:
        producer.send_batch(topic, records, partition=0).result(READ_S)
    finally:
        producer.close()
    return records


def lines(values: list[str]) -> bytes:
    return "".join(f"{v}\n" for v in values).encode()


# kcat reads stdin with fread(3) in fixed steps (1024 bytes in kcat 1.7.1; 128 in later
# sources), so a record written to an open pipe is produced only once a whole step has arrived
# (or stdin closes). Records of exactly 1024 bytes with their newline are each produced as
# soon as they are written.
KCAT_READ_SIZE = 1024


def streamed(value: str) -> str:
    """`value` padded so that its line is one of kcat's reads."""
    assert len(value) < KCAT_READ_SIZE
    return value.ljust(KCAT_READ_SIZE - 1, ".")


def wait_for_high_watermark(cluster: Cluster, topic: str, partition: int, count: int) -> None:
    """Until `count` records of the partition are readable (replicated to the ISR)."""
    wait_until(
        lambda: cluster.describe_partition(topic, partition).high_watermark >= count,
        READ_S,
        f"{count} records readable in {topic}-{partition}",
    )


# -- 1. round trip -----------------------------------------------------------------------------


def test_round_trip_of_keyed_records_with_headers(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic, partitions=3)
    keyed = [(f"key-{i}", f"value-{i}") for i in range(30)]
    header_args = [arg for name, value in HEADERS for arg in ("-H", f"{name}={value.decode()}")]
    before_ms = int(time.time() * 1000)
    stdin = lines([f"{key}:{value}" for key, value in keyed])
    ok(kcat(cluster, "-P", "-t", topic, "-K", ":", *header_args, stdin=stdin))
    after_ms = int(time.time() * 1000)

    read = [as_read(e) for e in consume(cluster, topic)]

    assert sorted((r.key, r.value) for r in read) == sorted(
        (k.encode(), v.encode()) for k, v in keyed
    )
    assert {r.headers for r in read} == {HEADERS}
    assert all(before_ms - 1000 <= r.timestamp_ms <= after_ms + 1000 for r in read)
    for p in {r.partition for r in read}:
        in_partition = [r for r in read if r.partition == p]
        assert [r.offset for r in in_partition] == list(range(len(in_partition)))
        # kcat produced in stdin order, and a partition keeps its records' order
        order = [int((r.key or b"").decode().removeprefix("key-")) for r in in_partition]
        assert order == sorted(order)
    assert len({r.partition for r in read}) == 3  # the key hash spread them
    # kafkactor's own consumer reads the same records, with the same create times
    stored = read_in_process(cluster, topic, range(3), len(read))
    assert sorted(stored, key=lambda r: (r.partition, r.offset)) == sorted(
        read, key=lambda r: (r.partition, r.offset)
    )


def test_reads_explicit_timestamps_and_null_headers(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    records = write_in_process(cluster, topic, 10)

    envelopes = consume(cluster, topic)

    assert {e["tstype"] for e in envelopes} == {"create"}
    assert [as_read(e) for e in envelopes] == [
        Read(0, i, r.key, r.value, r.headers, r.timestamp_ms) for i, r in enumerate(records)
    ]


# -- 2. acks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acknowledged_record_is_readable(cluster: Cluster, topic: str, acks: str) -> None:
    cluster.create_topic(topic, replication_factor=3, config={"min.insync.replicas": "2"})
    values = [f"acks-{acks}-{i}" for i in range(30)]

    # kcat exits 0 only when every record was delivered (acknowledged, or sent with acks=0)
    ok(kcat(cluster, "-P", "-t", topic, "-p", "0", "-X", f"acks={acks}", stdin=lines(values)))
    # with acks 0 and 1 a record is acknowledged before the followers have it, and consumers
    # read only below the high watermark (kcat -e stops at it)
    wait_for_high_watermark(cluster, topic, 0, len(values))

    read = [as_read(e) for e in consume(cluster, topic)]
    assert [(r.offset, r.value) for r in read] == [(i, v.encode()) for i, v in enumerate(values)]


# -- 3. compression ----------------------------------------------------------------------------


# librdkafka enables lz4 only for a broker that lists FindCoordinator in ApiVersions.


@pytest.mark.parametrize(
    "codec",
    ["gzip", "lz4", "snappy", "zstd"],
)
def test_compressed_batches_are_stored_valid_and_read_back(
    cluster: Cluster, topic: str, codec: str
) -> None:
    cluster.create_topic(topic)
    keyed = [f"key-{i}:{codec} value {i} " + "padding " * (i % 9) for i in range(50)]

    ok(kcat(cluster, "-P", "-t", topic, "-p", "0", "-K", ":", "-z", codec, stdin=lines(keyed)))

    # the broker kept the producer's codec (compression.type=producer) ...
    assert_stored_as_sent(cluster, topic, 0, codec)
    # ... in batches both kcat and kafkactor's own record code read back
    wanted = [tuple(kv.encode() for kv in line.split(":", 1)) for line in keyed]
    by_kcat = [as_read(e) for e in consume(cluster, topic)]
    assert [(r.offset, (r.key, r.value)) for r in by_kcat] == list(enumerate(wanted))
    in_process = read_in_process(cluster, topic, [0], len(keyed))
    assert in_process == by_kcat


# -- 4. seeking --------------------------------------------------------------------------------


def test_offsets_beginning_end_relative_and_timestamps(cluster: Cluster, topic: str) -> None:
    cluster.create_topic(topic)
    write_in_process(cluster, topic, 10)  # create times BASE + 0 s, + 1 s, ... + 9 s

    def offsets(*args: str) -> list[int]:
        return [int(e["offset"]) for e in consume(cluster, topic, *args)]

    assert offsets("-o", "beginning") == list(range(10))
    assert offsets("-o", "end") == []
    assert offsets("-o", "-3") == [7, 8, 9]
    assert offsets("-o", "4") == list(range(4, 10))
    # Kafka's answer to a timestamp: the first offset whose timestamp is at or after it
    assert offsets("-o", f"s@{BASE_TIMESTAMP_MS + 3000}") == list(range(3, 10))
    assert offsets("-o", f"s@{BASE_TIMESTAMP_MS + 3500}") == list(range(4, 10))
    assert offsets("-o", f"s@{BASE_TIMESTAMP_MS - 10_000}") == list(range(10))
    # and stopping at one (not included)
    assert offsets("-o", "beginning", "-o", f"e@{BASE_TIMESTAMP_MS + 3000}") == [0, 1, 2]
    query = ok(
        kcat(
            cluster,
            "-Q",
            "-t",
            f"{topic}:0:{BASE_TIMESTAMP_MS + 3500}",
        )
    )
    assert query.stdout.decode().split() == [topic, "[0]", "offset", "4"]
    later = ok(kcat(cluster, "-Q", "-t", f"{topic}:0:{BASE_TIMESTAMP_MS + 9001}"))
    assert later.stdout.decode().split() == [topic, "[0]", "offset", "-1"]  # none that late


# -- 5. a leader killed under acks=all ---------------------------------------------------------


def test_leader_killed_while_producing_loses_no_delivered_record(
    failover_cluster: Cluster, topic: str
) -> None:
    cluster = failover_cluster
    cluster.create_topic(
        topic, partitions=3, replication_factor=3, config={"min.insync.replicas": "2"}
    )
    partition, old_leader = non_controller_partition(cluster, topic, 3)
    values = [streamed(f"record-{i}") for i in range(150)]
    process = subprocess.Popen(
        command(cluster, "-P", "-t", topic, "-p", str(partition), "-X", "acks=all"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdin is not None

        def write(chunk: list[str]) -> None:
            assert process.stdin is not None
            process.stdin.write(lines(chunk))
            process.stdin.flush()

        write(values[:50])
        wait_for_high_watermark(cluster, topic, partition, 50)
        write(values[50:100])  # on their way when the leader dies
        cluster.kill_broker(old_leader)
        new_leader = cluster.wait_for_leader(topic, partition, not_broker=old_leader)
        write(values[100:])
        _, stderr = process.communicate(timeout=RUN_S)  # closes stdin: kcat flushes and exits
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    # kcat exits 0 only when every record was delivered
    assert process.returncode == 0, stderr.decode()
    assert new_leader != old_leader

    high_watermark = cluster.describe_partition(topic, partition).high_watermark
    read = read_in_process(cluster, topic, [partition], high_watermark)
    assert [r.offset for r in read] == list(range(high_watermark))
    stored = [r.value for r in read]
    # kcat reports no offsets, and librdkafka without idempotence may write a record twice
    # when it retries: every record is there, first seen in the order written
    assert set(stored) == {v.encode() for v in values}
    assert list(dict.fromkeys(stored)) == [v.encode() for v in values]


# -- 6. errors ---------------------------------------------------------------------------------


def test_unknown_topic_without_auto_creation_fails_the_delivery(
    strict_cluster: Cluster, topic: str
) -> None:
    # the broker answers Metadata with UNKNOWN_TOPIC_OR_PARTITION, and creates nothing
    listed = json.loads(ok(kcat(strict_cluster, "-L", "-J", "-t", topic)).stdout)
    assert listed["topics"] == [
        {"topic": topic, "error": "Broker: Unknown topic or partition", "partitions": []}
    ]
    # librdkafka waits topic.metadata.propagation.max.ms (30 s by default, 1 s here) for a
    # topic the broker says does not exist before failing its records
    produced = kcat(
        strict_cluster,
        "-P",
        "-t",
        topic,
        "-X",
        "topic.metadata.propagation.max.ms=1000",
        stdin=b"nowhere\n",
    )
    assert produced.returncode == 1
    assert b"Delivery failed for message: Broker: Unknown topic or partition" in produced.stderr
    consumed = kcat(strict_cluster, "-C", "-e", "-t", topic)
    assert consumed.returncode == 1
    assert b"Broker: Unknown topic or partition" in consumed.stderr
    listed_all = json.loads(ok(kcat(strict_cluster, "-L", "-J")).stdout)
    assert topic not in {t["topic"] for t in listed_all["topics"]}


def test_record_over_max_message_bytes_fails_with_message_size_too_large(
    strict_cluster: Cluster, topic: str
) -> None:
    strict_cluster.create_topic(topic, config={"max.message.bytes": "1024"})

    produced = kcat(strict_cluster, "-P", "-t", topic, "-p", "0", stdin=b"x" * 2048 + b"\n")

    assert produced.returncode == 1
    assert b"Delivery failed for message: Broker: Message size too large" in produced.stderr
    # nothing of the refused batch was stored: the next record is the first
    ok(kcat(strict_cluster, "-P", "-t", topic, "-p", "0", stdin=b"small\n"))
    assert [(e["offset"], e["payload"]) for e in consume(strict_cluster, topic)] == [(0, "small")]


# -- 7. ApiVersions, and 8. -L -----------------------------------------------------------------


def test_api_versions_negotiation_picks_versions_we_serve(
    cluster: Cluster, topic: str, events: EventLog
) -> None:
    cluster.create_topic(topic)

    ok(kcat(cluster, "-L"))
    ok(kcat(cluster, "-P", "-t", topic, stdin=b"negotiated\n"))
    assert [e["payload"] for e in consume(cluster, topic, "-o", "s@0")] == ["negotiated"]

    sent = check_negotiated(events)
    used = {ApiKey(api) for api, _ in sent}
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA} <= used
    assert {v for api, v in sent if api == ApiKey.API_VERSIONS} == {3}


def test_metadata_listing_names_brokers_topics_leaders_and_replicas(
    cluster: Cluster, topic: str
) -> None:
    cluster.create_topic(topic, partitions=3, replication_factor=2)

    listed = json.loads(ok(kcat(cluster, "-L", "-J")).stdout)
    text = ok(kcat(cluster, "-L", "-t", topic)).stdout.decode()

    endpoints = cluster.bootstrap_servers.split(",")
    assert listed["brokers"] == [
        {"id": b, "name": endpoint}
        for b, endpoint in zip(cluster.broker_ids, endpoints, strict=True)
    ]
    assert listed["controllerid"] == cluster.controller_id()
    [described] = [t for t in listed["topics"] if t["topic"] == topic]
    assert described["partitions"] == [
        {
            "partition": p,
            "leader": cluster.leader(topic, p),
            "replicas": [{"id": r} for r in cluster.replicas(topic, p)],
            "isrs": [{"id": r} for r in cluster.isr(topic, p)],
        }
        for p in range(3)
    ]
    assert " 3 brokers:" in text
    assert f'topic "{topic}" with 3 partitions:' in text
