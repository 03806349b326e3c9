"""Requests the brokers must refuse, and what the partition looks like afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from kafkactor.actors.runtime import Client, addresses
from kafkactor.clients import ConsumerError, ProduceError
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    MetadataRequest,
    MetadataResponse,
    StopReplica,
    StopReplicaResponse,
    UpdateMetadata,
    UpdateMetadataResponse,
)
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster
from tests.replication.support import (
    TOPIC,
    WAIT_S,
    batch,
    fetch_one,
    produce_request,
    produce_results,
    result_or_error,
    values_of,
    wait_until,
)


@pytest.fixture
def client(cluster: Cluster) -> Iterator[Client]:
    raw = Client("raw", cluster.directory)
    yield raw
    raw.close()


def produce(client: Client, broker: int, *parts: tuple[str, int, bytes], acks: int = 1) -> object:
    return client.call(addresses.replica_manager(broker), produce_request(acks, *parts), WAIT_S)


@pytest.mark.parametrize(("topic", "partition"), [("no-such-topic", 0), (TOPIC, 3), (TOPIC, -1)])
def test_produce_to_an_unknown_topic_or_partition_is_refused(
    cluster: Cluster, client: Client, topic: str, partition: int
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)

    results = produce_results(produce(client, 1, (topic, partition, batch(b"x"))))

    assert results[(topic, partition)].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[(topic, partition)].base_offset == -1
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0


def test_produce_to_a_follower_is_refused_with_not_leader(cluster: Cluster, client: Client) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)

    for follower in (2, 3):
        results = produce_results(produce(client, follower, (TOPIC, 0, batch(b"x"))))
        assert results[(TOPIC, 0)].error_code is ErrorCode.NOT_LEADER_FOR_PARTITION
        assert cluster.describe_partition(TOPIC, 0, broker=follower).log_end_offset == 0
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0
    # A broker with no replica of a partition it knows from metadata does not lead it either.
    cluster.create_topic("single", partitions=1, replication_factor=1)  # on broker 1 only
    results = produce_results(produce(client, 2, ("single", 0, batch(b"x"))))
    assert results[("single", 0)].error_code is ErrorCode.NOT_LEADER_FOR_PARTITION


def _flip(data: bytes, index: int) -> bytes:
    flipped = bytearray(data)
    flipped[index] ^= 0xFF
    return bytes(flipped)


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda _good: b"garbage",
    "flipped-last-byte": lambda good: _flip(good, len(good) - 1),
    "flipped-crc": lambda good: _flip(good, 17),
    "truncated": lambda good: good[:-5],
    "trailing-bytes": lambda good: good + b"\x00\x01",
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_batches_are_refused_and_the_partition_keeps_working(
    cluster: Cluster, client: Client, corruption: str
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    assert (
        produce_results(produce(client, 1, (TOPIC, 0, batch(b"good-0"))))[(TOPIC, 0)].base_offset
        == 0
    )
    bad = CORRUPTIONS[corruption](batch(b"corrupt"))

    results = produce_results(produce(client, 1, (TOPIC, 0, bad)))

    assert results[(TOPIC, 0)].error_code is ErrorCode.CORRUPT_MESSAGE
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 1
    # The partition keeps working: the next good batch gets the next offset, and replicates.
    results = produce_results(produce(client, 1, (TOPIC, 0, batch(b"good-1")), acks=-1))
    assert (results[(TOPIC, 0)].error_code, results[(TOPIC, 0)].base_offset) == (
        ErrorCode.NONE,
        1,
    )
    data = fetch_one(client, 1, TOPIC, 0, 0)
    assert values_of(data.records) == [(0, b"good-0"), (1, b"good-1")]


def test_a_batch_above_max_message_bytes_is_refused(cluster: Cluster, client: Client) -> None:
    cluster.create_topic(
        TOPIC, partitions=1, replication_factor=3, config=LogConfig(max_message_bytes=200)
    )

    results = produce_results(produce(client, 1, (TOPIC, 0, batch(b"x" * 300)), acks=-1))

    assert results[(TOPIC, 0)].error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert cluster.describe_partition(TOPIC, 0).log_end_offset == 0
    results = produce_results(produce(client, 1, (TOPIC, 0, batch(b"x" * 50)), acks=-1))
    assert (results[(TOPIC, 0)].error_code, results[(TOPIC, 0)].base_offset) == (
        ErrorCode.NONE,
        0,
    )


def test_fetch_beyond_the_log_end_is_out_of_range(cluster: Cluster, client: Client) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.producer(acks=-1).send_batch(TOPIC, [b"r0", b"r1"], partition=0).result(WAIT_S)

    beyond = fetch_one(client, 1, TOPIC, 0, 3, max_wait_ms=2_000)
    assert beyond.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert (beyond.log_start_offset, beyond.log_end_offset, beyond.records) == (0, 2, b"")
    negative = fetch_one(client, 1, TOPIC, 0, -1, max_wait_ms=2_000)
    assert negative.error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = fetch_one(client, 1, TOPIC, 0, 2)  # the log end itself is a valid position
    assert (at_end.error_code, at_end.records) == (ErrorCode.NONE, b"")

    tp = TopicPartition(topic=TOPIC, partition=0)
    strict = cluster.consumer(max_wait_ms=100, auto_offset_reset="none")
    strict.assign([tp])
    strict.seek(tp, 10)
    with pytest.raises(ConsumerError) as refused:
        strict.poll(1_000)
    assert (refused.value.error_code, refused.value.topic_partition) == (
        ErrorCode.OFFSET_OUT_OF_RANGE,
        tp,
    )
    assert strict.position(tp) == 10  # the position stays where the user put it
    resetting = cluster.consumer(max_wait_ms=100, auto_offset_reset="earliest")
    resetting.assign([tp])
    resetting.seek(tp, 10)
    got: list[bytes | None] = []

    def both_read() -> bool:
        got.extend(r.value for r in resetting.poll(200))
        return len(got) >= 2

    wait_until(both_read, message="the consumer to reset to the log start and read")
    assert got == [b"r0", b"r1"]


def test_requests_to_a_killed_broker_fail_with_network_exception(
    cluster: Cluster, client: Client
) -> None:
    cluster.create_topic(TOPIC, partitions=3, replication_factor=3)
    assert cluster.leader(TOPIC, 2) == 3
    producer = cluster.producer(acks=1)
    assert producer.send(TOPIC, b"before", partition=2).result(WAIT_S).offset == 0  # metadata

    cluster.kill_broker(3)

    response = client.call(addresses.replica_manager(3), MetadataRequest(), WAIT_S)
    assert isinstance(response, ErrorResponse)
    assert response.error_code is ErrorCode.NETWORK_EXCEPTION
    response = client.call(
        addresses.replica_manager(3), produce_request(1, (TOPIC, 2, batch(b"x"))), WAIT_S
    )
    assert isinstance(response, ErrorResponse)
    assert response.error_code is ErrorCode.NETWORK_EXCEPTION
    # A producer whose metadata still names the dead leader sees the same.
    error = result_or_error(producer.send(TOPIC, b"after", partition=2))
    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.NETWORK_EXCEPTION
    # A producer that asks for metadata now learns that the partition has no leader.
    error = result_or_error(cluster.producer(acks=1).send(TOPIC, b"after", partition=2))
    assert isinstance(error, ProduceError), error
    assert error.error_code is ErrorCode.LEADER_NOT_AVAILABLE


def test_requests_from_a_stale_controller_epoch_are_refused(
    cluster: Cluster, client: Client
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    assert cluster.controller_epoch == 1
    rm = addresses.replica_manager(1)
    coup = PartitionLeaderState(
        topic=TOPIC,
        partition=0,
        controller_epoch=0,
        leader=2,
        leader_epoch=5,
        isr=(2,),
        replicas=(1, 2, 3),
    )

    leader_and_isr = client.call(
        rm, LeaderAndIsr(controller_id=9, controller_epoch=0, partition_states=(coup,)), WAIT_S
    )
    update = client.call(
        rm,
        UpdateMetadata(
            controller_id=9, controller_epoch=0, partition_states=(coup,), live_brokers=(2,)
        ),
        WAIT_S,
    )
    stop = client.call(
        rm,
        StopReplica(
            controller_id=9,
            controller_epoch=0,
            delete_partitions=True,
            partitions=(TopicPartition(topic=TOPIC, partition=0),),
        ),
        WAIT_S,
    )

    assert isinstance(leader_and_isr, LeaderAndIsrResponse)
    assert leader_and_isr.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    assert isinstance(update, UpdateMetadataResponse)
    assert update.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    assert isinstance(stop, StopReplicaResponse)
    assert stop.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    # None of them took effect: broker 1 still leads, its metadata is unchanged, it serves.
    described = cluster.describe_partition(TOPIC, 0)
    assert (described.is_leader, described.leader, described.leader_epoch) == (True, 1, 0)
    metadata = client.call(rm, MetadataRequest(topics=(TOPIC,)), WAIT_S)
    assert isinstance(metadata, MetadataResponse)
    assert metadata.brokers == (1, 2, 3)
    assert [(p.leader, p.isr) for p in metadata.topics[0].partitions] == [(1, (1, 2, 3))]
    assert cluster.producer(acks=-1).send(TOPIC, b"still-here").result(WAIT_S).offset == 0


@pytest.mark.parametrize("acks", [1, -1])
def test_produce_with_one_unknown_partition_fails_only_that_partition(
    cluster: Cluster, client: Client, acks: int
) -> None:
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)

    results = produce_results(
        produce(
            client,
            1,
            (TOPIC, 0, batch(b"kept")),
            ("no-such-topic", 0, batch(b"lost")),
            acks=acks,
        )
    )

    assert (results[(TOPIC, 0)].error_code, results[(TOPIC, 0)].base_offset) == (
        ErrorCode.NONE,
        0,
    )
    assert results[("no-such-topic", 0)].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wait_until(lambda: cluster.describe_partition(TOPIC, 0).high_watermark == 1)
    assert values_of(fetch_one(client, 1, TOPIC, 0, 0).records) == [(0, b"kept")]


def test_a_stop_replica_right_after_a_leader_and_isr_leaves_no_fetcher_behind(
    cluster: Cluster, client: Client
) -> None:
    """The controller may send LeaderAndIsr (follow broker 2) and StopReplica for the same
    replica back to back (a controlled shutdown); the LeaderAndIsr's fan-out to the partition
    finishes after the stop began, and must not give the stopped replica a fetcher again."""
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    rm = addresses.replica_manager(1)
    epoch = cluster.controller_epoch
    follow = PartitionLeaderState(
        topic=TOPIC,
        partition=0,
        controller_epoch=epoch,
        leader=2,
        leader_epoch=7,
        isr=(1, 2, 3),
        replicas=(1, 2, 3),
    )
    moved = client.request(
        rm, LeaderAndIsr(controller_id=1, controller_epoch=epoch, partition_states=(follow,))
    )
    stopped = client.request(
        rm,
        StopReplica(
            controller_id=1,
            controller_epoch=epoch,
            partitions=(TopicPartition(topic=TOPIC, partition=0),),
        ),
    )
    moved.result(WAIT_S)
    stopped.result(WAIT_S)
    ref = cluster.directory.resolve(rm)
    view = ref.proxy().describe().get(timeout=WAIT_S)  # type: ignore[union-attr]
    assert f"{TOPIC}-0" not in view["followers"] + view["leaders"]
    assert not view["fetchers"], view


def test_a_follower_fetch_from_an_older_leader_epoch_is_fenced_and_moves_nothing(
    cluster: Cluster, client: Client
) -> None:
    """KIP-320: a follower's fetch names the leader epoch it follows. One sent before the
    controller's newer epoch (which took the follower out of the ISR, as a controlled shutdown
    does) is answered FENCED_LEADER_EPOCH and neither records the follower's position nor puts
    it back in the ISR; the same fetch in the current epoch does both."""
    cluster.create_topic(TOPIC, partitions=1, replication_factor=3)
    cluster.kill_broker(3)  # its own fetcher must not fetch for it meanwhile
    old_epoch = cluster.describe_partition(TOPIC, 0, broker=1).leader_epoch
    shrunk = PartitionLeaderState(
        topic=TOPIC,
        partition=0,
        controller_epoch=cluster.controller_epoch,
        leader=1,
        leader_epoch=old_epoch + 1,
        isr=(1, 2),
        replicas=(1, 2, 3),
    )
    rm = addresses.replica_manager(1)
    epoch = cluster.controller_epoch
    client.call(
        rm,
        LeaderAndIsr(controller_id=1, controller_epoch=epoch, partition_states=(shrunk,)),
        WAIT_S,
    )
    producer = cluster.producer(acks=1)
    for n in range(5):
        producer.send(TOPIC, b"%d" % n, partition=0).result(WAIT_S)
    end = cluster.describe_partition(TOPIC, 0, broker=1).log_end_offset

    def fetch_as_broker_3(leader_epoch: int) -> FetchResponse:
        part = FetchPartition(
            topic=TOPIC, partition=0, fetch_offset=end, current_leader_epoch=leader_epoch
        )
        response = client.call(
            rm, FetchRequest(replica_id=3, max_wait_ms=0, partitions=(part,)), WAIT_S
        )
        assert isinstance(response, FetchResponse), response
        return response

    stale = fetch_as_broker_3(old_epoch)
    assert stale.partitions[0].error_code is ErrorCode.FENCED_LEADER_EPOCH
    after = cluster.describe_partition(TOPIC, 0, broker=1)
    assert after.isr == (1, 2)
    assert dict(after.follower_log_end_offsets).get(3, -1) < end

    current = fetch_as_broker_3(old_epoch + 1)
    assert current.partitions[0].error_code is ErrorCode.NONE
    wait_until(
        lambda: 3 in cluster.describe_partition(TOPIC, 0, broker=1).isr,
        message="broker 3 back in the ISR by a fetch in the current epoch",
    )
