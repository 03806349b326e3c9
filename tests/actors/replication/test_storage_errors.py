"""A replica whose files cannot be opened (EMFILE: the process is out of file descriptors, or
any other OSError) is Kafka's KafkaStorageException: its partition answers
KAFKA_STORAGE_ERROR to LeaderAndIsr, produce and fetch, an error event says why, the actors go
on serving the other partitions, and `Cluster.create_topic` fails at once naming the cause
instead of waiting out its timeout. An append that fails is not acknowledged.

One cluster for the module (three brokers, embedded ZooKeeper), each test on its own topic;
one test starts a cluster without ZooKeeper, one a cluster in a process of its own whose
open-file limit (RLIMIT_NOFILE) is really lowered. Elsewhere the failures are injected where
the layers above storage meet it (`LogManager.get_or_create_log`, `os.open` under one
partition's directory, `Log.read`, `Log.assign_leader_epoch`), so the tests hold whether a
log opens its files at once or lazily.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kafkactor.actors.coordinator.offsets_loader import load_partition as load_offsets
from kafkactor.actors.replication.storage_failures import OfflinePartitions, StorageFailure
from kafkactor.actors.runtime import Client, addresses
from kafkactor.actors.transaction.transaction_loader import load_partition as load_transactions
from kafkactor.clients import ProduceError
from kafkactor.common import PartitionLeaderState, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import (
    DescribePartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    LeaderAndIsrResponse,
    PartitionDescription,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
)
from kafkactor.network.api_versions import ApiKey
from kafkactor.storage import Log, LogConfig, LogManager, build_value_batch
from kafkactor.testing import Cluster, KafkaStorageError
from tests.network import wire
from tests.network.test_kafka_apis import answer, apis, ask, handle
from tests.replication.support import WAIT_S, EventLog, captured_events, fetch_one, values_of

pytestmark = pytest.mark.timeout(60)  # the subprocess test bounds itself at 50 s

EMFILE = OSError(errno.EMFILE, os.strerror(errno.EMFILE))
STORAGE = ErrorCode.KAFKA_STORAGE_ERROR
NOT_LEADER = ErrorCode.NOT_LEADER_FOR_PARTITION


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(3) as started:
        yield started


@pytest.fixture
def events() -> Iterator[EventLog]:
    with captured_events() as captured:
        yield captured


@pytest.fixture
def client(cluster: Cluster) -> Iterator[Client]:
    raw = Client("storage-errors", cluster.directory)
    yield raw
    raw.close()


def no_logs_for(monkeypatch: pytest.MonkeyPatch, topic: str) -> None:
    """Every broker's log manager fails to create a log of `topic` with EMFILE."""
    create = LogManager.get_or_create_log

    def failing(self: LogManager, tp: TopicPartition, config: Any = None) -> Log:
        if tp.topic == topic:
            path = self.data_dir / f"{tp.topic}-{tp.partition}" / "00000000000000000000.log"
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(path))
        return create(self, tp, config)

    monkeypatch.setattr(LogManager, "get_or_create_log", failing)


def no_files_under(monkeypatch: pytest.MonkeyPatch, directory: str) -> Callable[[], None]:
    """`os.open` fails with EMFILE for any file in a directory named `directory` (a
    partition's, on every broker); the returned function lifts it."""
    real_open = os.open

    def failing(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        if Path(os.fsdecode(path)).parent.name == directory:
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), os.fsdecode(path))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing)
    return lambda: monkeypatch.setattr(os, "open", real_open)


# -- the pure parts -------------------------------------------------------------------------------


def test_a_storage_failure_names_the_errno_its_message_and_the_file() -> None:
    failure = StorageFailure.of(OSError(errno.EMFILE, "Too many open files", "/d/t-0/0.log"))

    assert failure.describe() == "EMFILE (Too many open files): /d/t-0/0.log"
    assert failure.fields() == {
        "errno": "EMFILE",
        "error": "Too many open files",
        "path": "/d/t-0/0.log",
    }
    assert StorageFailure.of(ValueError("bad checkpoint")).describe() == "bad checkpoint"


def test_offline_partitions_are_held_until_cleared() -> None:
    offline = OfflinePartitions()
    offline.mark("t-0", EMFILE)

    assert "t-0" in offline
    assert offline.describe() == {"t-0": "EMFILE (Too many open files)"}
    offline.clear("t-0")
    assert "t-0" not in offline
    assert offline.describe() == {}


def test_a_leader_epoch_that_cannot_be_written_leaves_the_replica_as_it_was(
    cluster: Cluster, client: Client, events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.create_topic("epochless", partitions=1, replication_factor=1)
    leader = cluster.leader("epochless", 0)
    assign = Log.assign_leader_epoch

    def failing(self: Log, epoch: int) -> Any:
        if self.topic_partition.topic == "epochless":
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(self.dir))
        return assign(self, epoch)

    monkeypatch.setattr(Log, "assign_leader_epoch", failing)
    epoch = cluster.current_controller_epoch()
    newer = PartitionLeaderState(
        topic="epochless",
        partition=0,
        controller_epoch=epoch,
        leader=leader,
        leader_epoch=1,
        isr=(leader,),
        replicas=(leader,),
    )
    response = client.call(
        addresses.replica_manager(leader),
        LeaderAndIsr(
            controller_id=cluster.controller_id() or 0,
            controller_epoch=epoch,
            partition_states=(newer,),
        ),
        WAIT_S,
    )

    assert isinstance(response, LeaderAndIsrResponse), response
    assert [p.error_code for p in response.partitions] == [STORAGE]
    replica = cluster.describe_partition("epochless", 0, broker=leader)
    assert (replica.is_leader, replica.leader_epoch) == (True, 0)
    with pytest.raises(ProduceError) as refused:  # offline on its broker, as in Kafka
        cluster.producer().send("epochless", b"x", partition=0).result(WAIT_S)
    assert refused.value.error_code is STORAGE
    (failed,) = events.named("partition.storage_error", topic="epochless", operation="become")
    assert (failed["level"], failed["errno"]) == ("error", "EMFILE")


def test_an_os_error_no_handler_expected_answers_kafka_storage_error_and_the_actor_lives(
    cluster: Cluster, client: Client, events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.create_topic("surprise", partitions=1, replication_factor=1)
    leader = cluster.leader("surprise", 0)
    address = addresses.partition(leader, "surprise-0")
    stable = Log.last_stable_offset
    monkeypatch.setattr(Log, "last_stable_offset", _failing_read)

    refused = client.call(address, DescribePartition(), WAIT_S)
    monkeypatch.setattr(Log, "last_stable_offset", stable)

    assert isinstance(refused, ErrorResponse), refused
    assert refused.error_code is STORAGE
    assert refused.message.startswith("EMFILE (Too many open files)")
    (failed,) = events.named("partition.storage_error", topic="surprise")
    assert failed["operation"] == "DescribePartition"
    assert isinstance(client.call(address, DescribePartition(), WAIT_S), PartitionDescription)


# -- coordinators loading their partitions ------------------------------------------------------


@pytest.mark.parametrize("load", [load_offsets, load_transactions], ids=["offsets", "txn"])
def test_a_coordinator_partition_that_cannot_be_read_ends_its_load_with_the_error(
    load: Callable[[Log | None], tuple[Any, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load that raised would leave the partition loading for ever (its clients answered
    COORDINATOR_LOAD_IN_PROGRESS); it ends, and its `group.load` / `txn.load` event says why."""
    log = Log(tmp_path / "__consumer_offsets-0", LogConfig())
    log.append_as_leader(build_value_batch([b"v"], 1_000), 0)
    monkeypatch.setattr(Log, "read", _failing_read)

    _replay, error = load(log)
    log.close()

    assert "Too many open files" in error


# -- on the wire: what a client of each version reads --------------------------------------------


@pytest.mark.parametrize(("version", "code"), [(3, NOT_LEADER), (4, STORAGE), (8, STORAGE)])
def test_a_produce_client_reads_kafka_storage_error_from_v4(version: int, code: ErrorCode) -> None:
    """Kafka's ProduceResponse: a v3 client does not know KAFKA_STORAGE_ERROR, so it is told
    NOT_LEADER_FOR_PARTITION, which it retries after a metadata refresh."""
    step = ask(
        handle(apis(), ApiKey.PRODUCE, version, wire.produce_request(version, wire.batch(b"a"))),
        ProduceRequest,
    )
    refused = ProducePartitionResult(topic=wire.TOPIC, partition=0, error_code=STORAGE)
    body = answer(step.then(ProduceResponse(partitions=(refused,))), ApiKey.PRODUCE, version)

    assert body.responses[0].partition_responses[0].error_code == code


@pytest.mark.parametrize(("version", "code"), [(4, NOT_LEADER), (5, NOT_LEADER), (6, STORAGE)])
def test_a_fetch_client_reads_kafka_storage_error_from_v6(version: int, code: ErrorCode) -> None:
    """Kafka's `maybeDownConvertStorageError`: Fetch v5 and older are told
    NOT_LEADER_FOR_PARTITION."""
    step = ask(handle(apis(), ApiKey.FETCH, version, wire.fetch_request(version)), FetchRequest)
    refused = FetchPartitionData(topic=wire.TOPIC, partition=0, error_code=STORAGE)
    body = answer(step.then(FetchResponse(partitions=(refused,))), ApiKey.FETCH, version)

    assert body.responses[0].partitions[0].error_code == code


# -- a log that cannot be created ---------------------------------------------------------------


def test_create_topic_fails_at_once_naming_the_storage_error(
    cluster: Cluster, events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_logs_for(monkeypatch, "no-files")

    with pytest.raises(KafkaStorageError, match=r"no-files-0 on broker \d: EMFILE"):
        cluster.create_topic("no-files", partitions=1, replication_factor=3)

    failed = events.named("replica_manager.log_failed", topic="no-files", partition=0)
    assert {e["broker"] for e in failed} == {1, 2, 3}
    assert {(e["level"], e["errno"], e["error"]) for e in failed} == {
        ("error", "EMFILE", "Too many open files")
    }
    assert all(e["path"].endswith("no-files-0/00000000000000000000.log") for e in failed)


def test_without_zookeeper_create_topic_names_the_storage_error_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without ZooKeeper the Cluster is the controller: the LeaderAndIsr answer it reads
    names the partition, and the replica manager says why."""
    no_logs_for(monkeypatch, "no-zk")
    with (
        Cluster(3, zookeeper=None) as without_zookeeper,
        pytest.raises(KafkaStorageError, match=r"no-zk-0 on broker 1: EMFILE"),
    ):
        without_zookeeper.create_topic("no-zk", partitions=1, replication_factor=3)


def test_the_offline_partition_answers_produce_and_fetch_with_kafka_storage_error(
    cluster: Cluster, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_logs_for(monkeypatch, "offline")
    with pytest.raises(KafkaStorageError):
        cluster.create_topic("offline", partitions=1, replication_factor=3)
    leader = cluster.leader("offline", 0)

    with pytest.raises(ProduceError) as refused:
        cluster.producer().send("offline", b"lost?", partition=0).result(WAIT_S)
    assert refused.value.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert refused.value.retriable  # as Kafka marks it: the partition may come back
    assert fetch_one(client, leader, "offline", 0, 0).error_code is ErrorCode.KAFKA_STORAGE_ERROR


def test_the_brokers_go_on_serving_their_other_partitions(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_logs_for(monkeypatch, "dead-end")
    with pytest.raises(KafkaStorageError):
        cluster.create_topic("dead-end", partitions=3, replication_factor=3)

    cluster.create_topic("alive", partitions=3, replication_factor=3)
    producer = cluster.producer(acks=-1)
    landed = [producer.send("alive", b"v", partition=p).result(WAIT_S) for p in range(3)]
    assert [r.offset for r in landed] == [0, 0, 0]


def test_leader_and_isr_answers_kafka_storage_error_for_that_partition_alone(
    cluster: Cluster, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's makeLeaders/makeFollowers: the partition whose log fails is answered
    KAFKA_STORAGE_ERROR, the others of the same request are applied."""
    cluster.create_topic("mixed-ok", partitions=1, replication_factor=3)
    leader = cluster.leader("mixed-ok", 0)
    no_logs_for(monkeypatch, "mixed-bad")
    epoch = cluster.current_controller_epoch()
    states = tuple(
        PartitionLeaderState(
            topic=topic,
            partition=0,
            controller_epoch=epoch,
            leader=leader,
            leader_epoch=leader_epoch,  # mixed-ok's next: an epoch it has is refused as stale
            isr=(1, 2, 3),
            replicas=(1, 2, 3),
        )
        for topic, leader_epoch in (("mixed-bad", 0), ("mixed-ok", 1))
    )

    response = client.call(
        addresses.replica_manager(leader),
        LeaderAndIsr(
            controller_id=cluster.controller_id() or 0,
            controller_epoch=epoch,
            partition_states=states,
        ),
        WAIT_S,
    )

    assert isinstance(response, LeaderAndIsrResponse), response
    assert response.error_code is ErrorCode.NONE
    assert {p.topic: p.error_code for p in response.partitions} == {
        "mixed-bad": ErrorCode.KAFKA_STORAGE_ERROR,
        "mixed-ok": ErrorCode.NONE,
    }


# -- files that cannot be opened once the log exists --------------------------------------------


def test_an_append_that_cannot_open_its_new_segment_is_not_acknowledged(
    cluster: Cluster, client: Client, events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.create_topic(
        "rolls", partitions=1, replication_factor=1, config={"segment.bytes": "100"}
    )
    leader = cluster.leader("rolls", 0)
    producer = cluster.producer()
    first = producer.send("rolls", b"first " * 20, partition=0).result(WAIT_S)
    lift = no_files_under(monkeypatch, "rolls-0")
    with pytest.raises(ProduceError) as refused:  # the segment is full: a new one is needed
        producer.send("rolls", b"refused " * 20, partition=0).result(WAIT_S)
    lift()
    after = producer.send("rolls", b"after " * 20, partition=0).result(WAIT_S)

    assert refused.value.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    (failed,) = events.named("partition.storage_error", topic="rolls", operation="append")
    assert (failed["level"], failed["errno"], failed["broker"]) == ("error", "EMFILE", leader)
    assert (first.offset, after.offset) == (0, 1)  # the refused records took no offset
    data = fetch_one(client, leader, "rolls", 0, 0)
    read = values_of(data.records)
    while read[-1][0] < after.offset:  # one segment a fetch
        read += values_of(fetch_one(client, leader, "rolls", 0, read[-1][0] + 1).records)
    assert read == [(0, b"first " * 20), (1, b"after " * 20)]


def test_a_read_that_fails_answers_the_fetch_with_kafka_storage_error(
    cluster: Cluster, client: Client, events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.create_topic("unreadable", partitions=1, replication_factor=1)
    leader = cluster.leader("unreadable", 0)
    cluster.producer().send("unreadable", b"kept", partition=0).result(WAIT_S)
    read = Log.read

    def failing(self: Log, *args: Any, **kwargs: Any) -> Any:
        if self.topic_partition.topic == "unreadable":
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(self.dir))
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Log, "read", failing)
    refused = fetch_one(client, leader, "unreadable", 0, 0)
    monkeypatch.setattr(Log, "read", read)

    assert refused.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    (failed,) = events.named("partition.storage_error", topic="unreadable", operation="read")
    assert (failed["level"], failed["errno"]) == ("error", "EMFILE")
    assert values_of(fetch_one(client, leader, "unreadable", 0, 0).records) == [(0, b"kept")]


def test_the_storage_events_are_the_schema_s(
    cluster: Cluster, client: Client, events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_logs_for(monkeypatch, "schema-offline")
    with pytest.raises(KafkaStorageError):
        cluster.create_topic("schema-offline", partitions=1, replication_factor=1)
    cluster.create_topic("schema-read", partitions=1, replication_factor=1)
    leader = cluster.leader("schema-read", 0)
    cluster.producer().send("schema-read", b"x", partition=0).result(WAIT_S)
    monkeypatch.setattr(Log, "read", _failing_read)
    assert (
        fetch_one(client, leader, "schema-read", 0, 0).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    )

    schema = json.loads(files("kafkactor").joinpath("events.schema.json").read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    written = events.named("replica_manager.log_failed") + events.named("partition.storage_error")
    assert {e["event"] for e in written} == {
        "replica_manager.log_failed",
        "partition.storage_error",
    }
    for event in written:
        assert list(validator.iter_errors(event)) == [], event


def _failing_read(self: Log, *args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), str(self.dir))


# -- the real limit -----------------------------------------------------------------------------

# A cluster in a process of its own whose open-file limit is lowered to 60 above what it uses
# once started: 40 partitions at RF 3 need more. Whether its logs open their files at creation
# or at their first append, the files run out somewhere; what it prints is what a user saw.
RUN_OUT_OF_FILES = """
import json, os, resource, time
from kafkactor.testing import Cluster, KafkaStorageError
from kafkactor.clients import ProduceError

seen = {"create": "ok", "produce": []}
with Cluster(3, request_timeout_s=5) as cluster:
    cluster.create_topic("warm", partitions=1, replication_factor=3)
    producer = cluster.producer()
    producer.send("warm", b"w", partition=0).result(5)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 60, hard))
    started = time.monotonic()
    try:
        cluster.create_topic("many", partitions=40, replication_factor=3)
        for p in range(40):
            try:
                producer.send("many", b"v", partition=p).result(5)
            except ProduceError as error:
                seen["produce"].append(error.error_code.name)
    except KafkaStorageError as error:
        seen["create"] = str(error)
    except Exception as error:
        seen["create"] = f"{type(error).__name__}: {error}"
    seen["took_s"] = time.monotonic() - started
    producer.send("warm", b"w", partition=0).result(5)  # the other partitions are served
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
print(json.dumps(seen))
"""


def test_past_the_open_file_limit_a_user_gets_kafka_storage_error_not_a_stall() -> None:
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", RUN_OUT_OF_FILES],
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])

    assert seen["took_s"] < 4.0, seen  # answered, not waited out (request_timeout_s is 5)
    if seen["create"] != "ok":  # the logs open their files at creation
        assert seen["create"].startswith("KAFKA_STORAGE_ERROR: cannot open the log of many-")
        assert "EMFILE (Too many open files)" in seen["create"]
    else:  # at their first append: refused, or every record acknowledged
        assert set(seen["produce"]) <= {"KAFKA_STORAGE_ERROR"}, seen
