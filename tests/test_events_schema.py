"""The event log against its published schema (kafkactor/events.schema.json, docs/events.md).

One real run, shared by the module: the demo topology (three brokers on the embedded ZooKeeper,
acks=all and acks=1 producers, a long-poll consumer, a follower that crashes and comes back),
then a second cluster driven through what the demo never does (a topic deleted, malformed
znodes, a deletion mark for no topic, a stale controller, a corrupt batch, an isolated
follower, a dead follower, a controller whose session expires, StopReplica, a topic whose
replicas fail to delete their logs), a Log with tiny segments that rolls, is retained,
truncated and recovered from damage, failing timer, scheduler, ZooKeeper-listener and actor
code, and a cluster with listeners that kafka-python and raw sockets talk to over Kafka's wire
protocol (bad frames, a failed acks=0 produce, a request KafkaApis fails on, a broker
registration that does not decode). Every line it wrote must validate, the run must cover most
event types, and every type the schema names must be seen here or be listed, with a reason, as
not exercised.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.controller import zk_data
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.actors.runtime import Client, Directory, TracedActor, addresses
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.demo import run_demo
from kafkactor.messages.group import (
    GroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
)
from kafkactor.messages.purgatory import DelayOperation
from kafkactor.messages.replication import FetchRequest, StopReplica, UpdateMetadata
from kafkactor.network.api_versions import ApiKey
from kafkactor.network.kafka_apis import KafkaApis, Step
from kafkactor.storage import LEADER_EPOCH_CHECKPOINT, Log, LogConfig, Record
from kafkactor.storage.log_cleaner import LogCleaner
from kafkactor.testing import Cluster
from kafkactor.timer import ManualClock, Scheduler
from kafkactor.timer.system_timer import Timer
from kafkactor.timer.task import CallbackTask
from kafkactor.zk_model.client import EmbeddedClient
from kafkactor.zk_model.embedded import EmbeddedZooKeeper
from tests.controller.support import settled_controller
from tests.network.split_cluster import split_cluster
from tests.network.wire import (
    WireClient,
    api_versions_request,
    raw_header,
    request_frame,
    sample_request,
    sized,
)
from tests.network.wire import batch as wire_batch
from tests.network.wire import produce_request as wire_produce_request
from tests.replication.support import (
    FAST,
    WAIT_S,
    EventLog,
    batch,
    produce_request,
    wait_until,
)

# kafka-python (the wire client of the network scenario) reads its protocol schemas, on import,
# with importlib.resources functions deprecated since Python 3.11: a warning per schema.
pytestmark = pytest.mark.filterwarnings(
    "ignore:read_text is deprecated:DeprecationWarning",
    "ignore:open_text is deprecated:DeprecationWarning",
)

SCHEMA_FILE = "events.schema.json"
DOC = Path(__file__).resolve().parents[1] / "docs" / "events.md"
TOPIC = "schema"
DELETED = "deleted"  # a topic the controller scenario deletes
UNDELETABLE = "undeletable"  # one whose replicas' log directories cannot be deleted

# The run must show at least these: every family, and the events each family exists for.
MUST_SEE = frozenset(
    {
        "msg.send",
        "msg.recv",
        "msg.undeliverable",
        "actor.error",
        "partition.append",
        "partition.append_failed",
        "partition.follower_append",
        "partition.hw_advance",
        "partition.isr_shrink",
        "partition.isr_expand",
        "partition.truncate",
        "partition.become_leader",
        "partition.become_follower",
        "purgatory.watch",
        "purgatory.complete",
        "purgatory.expire",
        "controller.elected",
        "controller.leader_elected",
        "controller.brokers_changed",
        "controller.resend",
        "fetcher.error",
        "cluster.topic_created",
        "controller.topic_deletion_started",
        "controller.topic_deleted",
        "cluster.topic_deleted",
        "broker.start",
        "broker.stop",
        "broker.crash",
        "broker.registered",
        "log_manager.loaded",
        "log_manager.created",
        "log.roll",
        "log.truncated",
        "log.retention",
        "log.flush",
        "log.recovered",
        "produce.request",
        "produce.response",
        "fetch.request",
        "fetch.response",
        "purgatory.purge",
        "timer.add",
        "timer.expire",
        "partition.leo_advance",
        "cluster.broker_healed",
        "network.listening",
        "network.request",
        "network.response",
        "network.bad_request",
        "network.connection_closed",
        # the demo's exactly-once stage: its transactions, their markers, the coordinators'
        # loads of __transaction_state partitions
        "txn.transition",
        "txn.completed",
        "txn.marker.sent",
        "txn.marker.written",
        "txn.load",
        "partition.marker_appended",
    }
)

# Event types the schema names that this run does not produce, and why.
NOT_EXERCISED = {
    "broker.stop_timeout": "needs a slow actor (tests/replication/test_stop_timeout.py)",
    "replica_manager.log_failed": (
        "needs a log that cannot be created (tests/actors/replication/test_storage_errors.py)"
    ),
    "partition.storage_error": (
        "needs log files that cannot be opened or read "
        "(tests/actors/replication/test_storage_errors.py)"
    ),
    "network.tls_handshake_failed": (
        "needs a TLS listener and a client failing its handshake "
        "(tests/network/test_socket_server_security.py)"
    ),
    "security.authenticated": (
        "needs a SASL listener (tests/network/test_socket_server_security.py)"
    ),
    "security.authentication_failed": (
        "needs a SASL listener and a failed exchange (tests/network/test_socket_server_security.py)"
    ),
    "quota.throttled": (
        "needs a client over a byte-rate quota (tests/network/test_socket_server_limits.py)"
    ),
    "network.connection_refused": (
        "needs max.connections reached (tests/network/test_socket_server_limits.py)"
    ),
    "security.authorization_denied": (
        "needs an authorizer and a request it refuses (tests/security/test_authorizer.py)"
    ),
    "security.acl_change_processed": (
        "needs ACLs changed in ZooKeeper while a broker watches them "
        "(tests/security/test_acl_store.py)"
    ),
    "security.acl_change_invalid": (
        "needs a malformed ACL change notification or ACL znode "
        "(tests/security/test_acl_store.py writes one)"
    ),
    "txn.unload": (
        "needs a broker to stop leading a __transaction_state partition it served while it "
        "runs (tests/transaction/test_coordinator_actor.py moves one back to its preferred "
        "leader)"
    ),
    "controller.replica_election": (
        "needs an ElectLeaders request, an /admin/preferred_replica_election znode or a "
        "leader-imbalance check (tests/controller/test_preferred_replica_election.py)"
    ),
    "controller.bad_preferred_replica_election": (
        "needs a malformed /admin/preferred_replica_election (tests/controller/"
        "test_preferred_replica_election.py writes one)"
    ),
    "controller.leader_imbalance_check": (
        "needs leader.imbalance.check.interval.seconds to pass (300 s by default; "
        "tests/controller/test_preferred_replica_election.py sets 1 s)"
    ),
    "controller.request_refused": (
        "needs a broker to refuse a LeaderAndIsr from a controller already deposed that does "
        "not know it yet (a race with its session loss); the refusing side, "
        "replica_manager.stale_controller, is exercised here"
    ),
    "log_cleaner.aborted": (
        "needs a compacted log truncated, closed or deleted while its cleaning builds the "
        "cleaned segments (tests/storage/test_log_cleaner.py aborts one through its hook)"
    ),
    "log_cleaner.failed": (
        "needs a storage error while cleaning a compacted log (a disk failing under it)"
    ),
    "log_cleaner.checkpoint_unreadable": (
        "needs a damaged cleaner-offset-checkpoint in a data dir with compacted logs"
    ),
    "config_change.processed": (
        "needs a topic config changed through ZooKeeper (tests/controller/"
        "test_dynamic_topic_configs.py changes them)"
    ),
    "security.scram_credential_added": (
        "needs a user's SCRAM credential written to ZooKeeper (tests/security/"
        "test_entity_configs.py adds one while a broker runs)"
    ),
    "security.scram_credential_removed": (
        "needs a user's SCRAM credential deleted from ZooKeeper (tests/security/"
        "test_entity_configs.py deletes one)"
    ),
    "config_change.invalid": (
        "needs a malformed notification under /config/changes or an override Kafka refuses "
        "written there by hand (tests/controller/test_dynamic_topic_configs.py writes one)"
    ),
    "controller.partition_reassignment": (
        "needs a partition reassignment (tests/controller/test_partition_reassignment.py and "
        "tests/wire/test_partition_reassignments.py reassign partitions)"
    ),
    "controller.bad_reassign_partitions": (
        "needs a malformed /admin/reassign_partitions written by hand "
        "(tests/controller/test_partition_reassignment.py writes one)"
    ),
    "partition.inconsistent_topic_id": (
        "needs a partition directory whose partition.metadata records another topic id than "
        "the controller's (tests/replication/test_partition_metadata.py writes one)"
    ),
    "broker.zk_register_failed": (
        "needs the broker's re-registration after a session expiry to time out, i.e. an old "
        "session holding /brokers/ids/<id> for longer than registration_timeout_s"
    ),
}

# A follower long-polls for 300 ms; an unanswered fetch is given up 500 ms after that; a silent
# follower leaves the ISR after 400 ms (the config of tests/controller/test_isr.py's LONG_POLL).
LONG_POLL = BrokerConfig(
    fetch_purgatory_purge_interval=5,  # purges often enough to be seen
    replica=ReplicaManagerConfig(
        replica_lag_time_max_ms=400,
        replica_fetch_wait_max_ms=300,
        replica_fetch_backoff_ms=50,
        replica_socket_timeout_ms=500,
    ),
)


# -- the schema ----------------------------------------------------------------------------------


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(
        (files("kafkactor") / SCHEMA_FILE).read_text(encoding="utf-8")
    )
    return schema


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return load_schema()


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


def schema_events(schema: dict[str, Any]) -> list[str]:
    names: list[str] = schema["properties"]["event"]["enum"]
    return names


def test_schema_is_a_valid_draft_2020_12_schema(schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_version_is_the_one_tracing_stamps(schema: dict[str, Any]) -> None:
    assert schema["properties"]["schema"] == {
        "const": tracing.SCHEMA_VERSION,
        "description": schema["properties"]["schema"]["description"],
    }
    assert schema["required"] == ["schema", "ts_ms", "event", "level"]


def test_every_event_name_has_exactly_one_definition(schema: dict[str, Any]) -> None:
    names = schema_events(schema)
    assert names == sorted(set(names))
    selected = [rule["if"]["properties"]["event"]["const"] for rule in schema["allOf"]]
    assert selected == names
    for rule in schema["allOf"]:
        name = rule["if"]["properties"]["event"]["const"]
        assert rule["then"] == {"$ref": f"#/$defs/{name}"}
        assert name in schema["$defs"]
    definitions = {key for key in schema["$defs"] if "." in key}
    assert definitions == set(names), "a $defs entry for an event name not in the enum"


def _json_types(spec: dict[str, Any], defs: dict[str, Any]) -> set[str]:
    """The JSON types (null aside) a property's schema admits."""
    if "$ref" in spec:
        return _json_types(defs[spec["$ref"].rsplit("/", 1)[-1]], defs)
    if "type" in spec:
        types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        return {t for t in types if t != "null"}
    values = spec.get("enum", [spec["const"]] if "const" in spec else [])
    names = {str: "string", bool: "boolean", int: "integer", float: "number"}
    return {names[type(v)] for v in values if v is not None}


# Field names that are an integer in some events and a number with a fraction in others (docs/
# events.md, known inconsistencies): a columnar reader must read them as doubles.
INTEGER_OR_NUMBER = {
    "latency_ms": (
        "whole milliseconds in produce.response / fetch.response, a fraction of them in "
        "network.response; kafkactor analyze reads it as a double"
    ),
}


# (field name, event): a field with another type in that event than in all the others (docs/
# events.md, known inconsistencies), with the type it has there. Left out of the check below.
OTHER_TYPE_IN: dict[tuple[str, str], tuple[frozenset[str], str]] = {}


def test_a_field_name_has_one_type_in_every_event(schema: dict[str, Any]) -> None:
    """A columnar reader (Spark, `kafkactor analyze`) gives each field name one type: a name
    that is an integer in one event and a boolean in another would set lines aside. Only the
    names of INTEGER_OR_NUMBER may be an integer in one event and a number in another, and
    only the fields of OTHER_TYPE_IN have another type in the one event named there."""
    defs = schema["$defs"]
    seen: dict[str, dict[frozenset[str], list[str]]] = {}
    excepted: dict[tuple[str, str], frozenset[str]] = {}
    for name, spec in schema["properties"].items():
        seen.setdefault(name, {}).setdefault(frozenset(_json_types(spec, defs)), []).append("*")
    for event in schema_events(schema):
        for name, spec in defs[event].get("properties", {}).items():
            types = frozenset(_json_types(spec, defs))
            if (name, event) in OTHER_TYPE_IN:
                excepted[name, event] = types
                continue
            seen.setdefault(name, {}).setdefault(types, []).append(event)
    expected = {key: types for key, (types, _) in OTHER_TYPE_IN.items()}
    assert excepted == expected, "OTHER_TYPE_IN no longer matches the schema: update it"
    others = {key for key, types in excepted.items() if types in seen.get(key[0], {})}
    assert not others, f"the type of these is the one of every other event now: {others}"
    numeric = {frozenset({"integer"}), frozenset({"number"})}
    mixed = {
        name: by_type
        for name, by_type in seen.items()
        if len(by_type) > 1 and not (name in INTEGER_OR_NUMBER and set(by_type) == numeric)
    }
    assert not mixed, mixed
    still_mixed = {name for name in INTEGER_OR_NUMBER if set(seen.get(name, {})) == numeric}
    assert still_mixed == set(INTEGER_OR_NUMBER), "drop the names no longer mixed"


def test_docs_describe_every_event_of_the_schema(schema: dict[str, Any]) -> None:
    """docs/events.md has a `### <name>` section for exactly the events of the schema."""
    sections = [
        line.removeprefix("### ").strip("` ")
        for line in DOC.read_text(encoding="utf-8").splitlines()
        if line.startswith("### ")
    ]
    documented = [name for name in sections if "." in name]
    assert sorted(documented) == schema_events(schema)


def _line(event: str, **fields: Any) -> dict[str, Any]:
    return {"schema": tracing.SCHEMA_VERSION, "ts_ms": 1, "event": event, "level": "info", **fields}


def test_schema_refuses_unknown_events_wrong_types_and_missing_fields(
    validator: jsonschema.Draft202012Validator,
) -> None:
    good = _line(
        "cluster.broker_killed", broker=3, note="fields beyond the documented ones are allowed"
    )
    assert list(validator.iter_errors(good)) == []
    refused = {
        "unknown event": _line("partition.exploded", broker=1),
        "no ts_ms": {k: v for k, v in good.items() if k != "ts_ms"},
        "another schema version": {**good, "schema": tracing.SCHEMA_VERSION + 1},
        "a string broker": {**good, "broker": "3"},
        "a null broker where one is named": {**good, "broker": None},
        "a missing own field": _line("broker.registered", broker=1),
        "another level": {**good, "level": "error"},
        "a trace id that is no id": _line(
            "msg.undeliverable", actor="a", broker=1, to="b", msg_type="X", trace_id="t-1"
        ),
    }
    for case, event in refused.items():
        assert list(validator.iter_errors(event)), f"{case} was accepted: {event}"


# -- the run ---------------------------------------------------------------------------------------


class _Crashing(TracedActor):
    """An actor whose failure gets past the base's handler, as a bug in the base would."""

    def on_receive(self, message: Any) -> Any:
        raise RuntimeError(f"crashed on {message!r}")


def _storage_scenario(root: Path, events: EventLog) -> None:
    """A log of ~200-byte segments: rolls, retention by size, truncation, then a reload after
    damage (a torn tail on the active segment, a corrupt index) that recovers."""
    directory = root / "tiny-0"
    config = LogConfig(segment_bytes=200, retention_bytes=400)
    clock = ManualClock(1_000)
    log = Log(directory, config, clock=clock)
    for i in range(12):
        log.append_as_leader([Record(None, b"value-%02d" % i + b"." * 40, 1_000)], 0)
    assert log.delete_old_segments() > 0
    assert log.maybe_increment_log_start_offset(log.log_start_offset + 1, "ClientRecordDeletion")
    assert log.truncate_to(log.log_end_offset - 1)
    log.flush()
    log.close()
    with sorted(directory.glob("*.log"))[-1].open("ab") as active:
        active.write(b"\x00\x00\x00\x00\x00\x00\x00\x09torn tail")
    with sorted(directory.glob("*.index"))[0].open("ab") as index:
        index.write(b"\x01\x02\x03")  # a length that is not a multiple of 8
    Log(directory, config, clock=clock, recovery_point=0).close()
    for name in ("log.roll", "log.retention", "log.start_offset_incremented", "log.truncated"):
        assert events.named(name), f"the tiny log logged no {name}"
    # a log whose leader epoch checkpoint is gone rebuilds it from its batches; a follower far
    # behind its leader's log start empties its log and starts there
    (directory / LEADER_EPOCH_CHECKPOINT).unlink()
    log = Log(directory, config, clock=clock)
    log.truncate_fully_and_start_at(log.log_end_offset + 10)
    log.close()
    for name in ("log.leader_epochs_rebuilt", "log.truncated_fully"):
        assert events.named(name), f"the tiny log logged no {name}"
    # a compacted log keeps the latest record per key: the cleaner rewrites its dirty segments
    compacted = Log(root / "compacted-0", LogConfig(segment_bytes=200, cleanup_policy="compact"))
    for i in range(12):
        compacted.append_as_leader([Record(b"key-%d" % (i % 3), b"v%02d" % i, 1_000)], 0)
    assert LogCleaner().clean(compacted, clock.now_ms()) is not None
    compacted.close()
    assert events.named("log_cleaner.cleaned"), "the compacted log logged no log_cleaner.cleaned"


def _failing_tasks(events: EventLog) -> None:
    """A timer task, a scheduled task and a ZooKeeper state listener that raise."""
    clock = ManualClock(0)
    timer = Timer(clock)

    def fail() -> None:
        raise RuntimeError("task failed")

    timer.add(CallbackTask(5, fail))
    clock.advance(5)
    timer.advance_clock(0)
    scheduler = Scheduler().startup()
    try:
        scheduler.schedule("failing-task", fail)
        wait_until(lambda: events.named("scheduler.task_error"), message="scheduler.task_error")
    finally:
        scheduler.shutdown()
    with EmbeddedZooKeeper(tick_ms=100) as zookeeper:
        client = EmbeddedClient(zookeeper)

        def listener(_state: str) -> None:
            raise RuntimeError("listener failed")

        client.add_listener(listener)
        client.start()
        try:
            wait_until(
                lambda: events.named("zk_client.listener_error"),
                message="zk_client.listener_error",
            )
        finally:
            client.stop()
            client.close()


def _crashing_actor(events: EventLog) -> None:
    directory = Directory()
    ref = _Crashing.start("test/crashing", directory)
    ref.tell("boom")
    wait_until(lambda: events.named("actor.error", fatal=True), message="a fatal actor.error")
    assert not ref.is_alive()


def _undeletable(delete: Callable[[Log], None]) -> Callable[[Log], None]:
    """Log.delete, failing as a disk error would for the logs of UNDELETABLE (closed first,
    so that no file stays open)."""

    def refuse(log: Log) -> None:
        if log.topic_partition.topic != UNDELETABLE:
            delete(log)
            return
        log.close()
        raise OSError(f"cannot remove {log.dir} (injected by the test)")

    return refuse


def _controller_scenario(events: EventLog) -> None:
    with Cluster(3, zookeeper="embedded", session_timeout_ms=600, config=LONG_POLL) as cluster:
        controller = settled_controller(cluster)
        cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
        producer = cluster.producer(acks=-1, timeout_ms=2_000)
        for p in (0, 1):
            producer.send(TOPIC, b"first", partition=p).result(WAIT_S)
        # the first UpdateMetadata to a live broker is lost: the controller sends it again
        lost: list[int] = []

        def lose_one(_address: str, message: Any) -> bool:
            payload = getattr(message, "payload", message)
            if lost or not isinstance(payload, UpdateMetadata):
                return False
            lost.append(payload.correlation_id)
            return True

        cluster.directory.drop = lose_one
        # a topic deleted with every broker live
        cluster.create_topic(DELETED, partitions=1, replication_factor=3)
        wait_until(partial(events.named, "controller.resend"), message="controller.resend")
        cluster.directory.drop = None
        cluster.create_partitions(DELETED, 2)  # controller.partitions_added
        cluster.delete_topic(DELETED)
        for name in ("controller.topic_deletion_started", "controller.topic_deleted"):
            wait_until(partial(events.named, name, topic=DELETED), message=name)
        assert events.named("cluster.topic_deleted", topic=DELETED, pending=[])
        leader = cluster.leader(TOPIC, 0)
        raw = Client("raw", cluster.directory)
        try:
            # a request nobody handles, an old controller epoch, bytes that are no batch
            raw.call(addresses.replica_manager(leader), DelayOperation(), WAIT_S)
            raw.call(
                addresses.replica_manager(leader),
                UpdateMetadata(controller_id=9, controller_epoch=0),
                WAIT_S,
            )
            raw.call(  # meant for an earlier registration of this broker (KIP-380)
                addresses.replica_manager(leader),
                UpdateMetadata(
                    controller_id=9,
                    controller_epoch=cluster.current_controller_epoch(),
                    broker_epoch=1,
                ),
                WAIT_S,
            )
            raw.call(
                addresses.replica_manager(leader),
                produce_request(1, (TOPIC, 0, b"garbage")),
                WAIT_S,
            )
            # malformed znodes: a topic, an ISR change notification; a deletion mark for a
            # topic that does not exist
            cluster._zk.create(zk_data.topic_path("garbage"), b"{not json")
            cluster._zk.create(
                f"{zk_data.ISR_CHANGE_NOTIFICATION}/{zk_data.ISR_CHANGE_PREFIX}",
                b"{not json",
                sequence=True,
            )
            cluster._zk.create(zk_data.delete_topic_path("ghost"), b"", makepath=True)
            for name in (
                "controller.bad_topic",
                "controller.bad_isr_notification",
                "controller.topic_deletion_ignored",
            ):
                wait_until(partial(events.named, name), message=name)

            # the leader of partition 0 cannot write the ISR (its znode version moved); a
            # follower it wants to drop is isolated: the write fails, the fetch times out
            follower = next(b for b in (1, 2, 3) if b not in (leader, controller))
            path = zk_data.partition_state_path(TOPIC, 0)
            cluster._zk.set(path, cluster._zk.get(path)[0])
            cluster.isolate_broker(follower)
            for name in ("partition.isr_update_failed", "fetcher.timeout"):
                wait_until(partial(events.named, name), message=name)
            cluster.heal_broker(follower)

            # the follower dies: once its session expires the controller drops it from the ISR
            cluster.kill_broker(follower)
            wait_until(lambda: events.named("controller.isr_changed"), message="isr_changed")

            # a corrupt partition state, then the controller's session expires: a new
            # controller (maybe on the same broker) takes over and finds it
            cluster.create_topic("corrupt", partitions=1, replication_factor=1)
            cluster._zk.set(zk_data.partition_state_path("corrupt", 0), b"{not json")
            epoch = cluster.current_controller_epoch()
            cluster.expire_session(controller)
            wait_until(
                lambda: events.named("controller.bad_partition_state"),
                message="the new controller to find the corrupt partition state",
            )
            assert events.named("controller.resign", epoch=epoch)

            # a replica told to stop serving its partition
            stopping = next(b for b in cluster.live_brokers() if b != cluster.leader(TOPIC, 0))
            raw.call(
                addresses.replica_manager(stopping),
                StopReplica(
                    controller_id=9,
                    controller_epoch=cluster.current_controller_epoch(),
                    partitions=(TopicPartition(topic=TOPIC, partition=0),),
                ),
                WAIT_S,
            )
            assert events.named("partition.stopped", broker=stopping)

            # a topic marked for deletion whose replicas cannot delete their logs: each answers
            # StopReplica with KAFKA_STORAGE_ERROR, and the deletion waits (to the end here)
            cluster.create_topic(UNDELETABLE, partitions=1, replication_factor=2)
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(Log, "delete", _undeletable(Log.delete))
                cluster._zk.create(zk_data.delete_topic_path(UNDELETABLE), b"", makepath=True)
                wait_until(
                    partial(
                        events.named,
                        "controller.replica_deletion_failed",
                        failed_partitions=[f"{UNDELETABLE}-0"],
                        error="KAFKA_STORAGE_ERROR",
                    ),
                    message="a replica to fail to delete its log",
                )
        finally:
            raw.close()


def _divergence_scenario(events: EventLog) -> None:
    """KIP-101 scenario 2 on two brokers without a controller: the old leader comes back with a
    record its successor never had, and cuts it (`partition.truncate`)."""
    with Cluster(2, zookeeper=None, config=FAST) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=2)
        raw = Client("raw", cluster.directory)
        try:
            raw.call(
                addresses.replica_manager(1), produce_request(-1, (TOPIC, 0, batch(b"a"))), WAIT_S
            )
            cluster.isolate_broker(2)
            wait_until(
                lambda: cluster.describe_partition(TOPIC, 0, broker=1).isr == (1,),
                message="the isolated follower to leave the ISR",
            )
            raw.call(
                addresses.replica_manager(1), produce_request(1, (TOPIC, 0, batch(b"b"))), WAIT_S
            )
            cluster.stop_broker(1)
            cluster.kill_broker(2)
            cluster.heal_broker(2)
            state = cluster.partition_states[(TOPIC, 0)]
            cluster.partition_states[(TOPIC, 0)] = dataclasses.replace(state, leader=2, isr=(2,))
            cluster.restart_broker(2)
            raw.call(
                addresses.replica_manager(2), produce_request(1, (TOPIC, 0, batch(b"c"))), WAIT_S
            )
            cluster.restart_broker(1)
            wait_until(
                lambda: events.named("partition.truncate", broker=1),
                message="the old leader to cut the record its successor never had",
            )
            # then it catches up and its leader takes it back into the ISR (this cluster is
            # the run's one place where a follower rejoins for sure, not by the timing of a
            # fault elsewhere)
            wait_until(
                lambda: events.named("partition.isr_expand", broker=2),
                message="the old leader to rejoin the ISR",
            )
        finally:
            raw.close()


def _failing_translation(_apis: KafkaApis, _version: int, _body: Any) -> Step:
    raise RuntimeError("a translation bug (injected by the test)")


def _group_scenario(events: EventLog) -> None:
    """A group coordinator loads its offsets partition, rebalances a group of two members
    (the second join waits in the Rebalance purgatory for the first member to rejoin), then
    unloads the partition when its replica is told to stop."""
    config = BrokerConfig(
        group=GroupConfig(offsets_topic_partitions=1, initial_rebalance_delay_ms=0)
    )
    with Cluster(1, zookeeper=None, config=config) as cluster:
        cluster.create_topic(OFFSETS_TOPIC, 1, 1, {"cleanup.policy": "compact"})
        wait_until(lambda: events.named("group.load", partition=0), message="group.load")
        coordinator = addresses.group_coordinator(1)
        client = Client("group-member", cluster.directory)
        try:

            def join(member_id: str = "") -> JoinGroupRequest:
                return JoinGroupRequest(
                    group_id="schema-group",
                    member_id=member_id,
                    client_id="member",
                    session_timeout_ms=10_000,
                    rebalance_timeout_ms=10_000,
                    protocol_type="consumer",
                    protocols=(GroupProtocol(name="range", metadata=b""),),
                )

            first = client.call(coordinator, join(), WAIT_S)
            assert isinstance(first, JoinGroupResponse), first
            assignment = SyncGroupAssignment(member_id=first.member_id, assignment=b"")
            client.call(
                coordinator,
                SyncGroupRequest(
                    group_id="schema-group",
                    generation_id=first.generation_id,
                    member_id=first.member_id,
                    assignments=(assignment,),
                ),
                WAIT_S,
            )
            second = client.request(coordinator, join())  # parked: the first must rejoin
            rejoined = client.call(coordinator, join(first.member_id), WAIT_S)
            assert isinstance(rejoined, JoinGroupResponse), rejoined
            assert second.result(WAIT_S).generation_id == rejoined.generation_id
            assert events.named(
                "purgatory.complete", purgatory="Rebalance", completed_by="check_join"
            )
            assert events.named("purgatory.watch", purgatory="Heartbeat")
            client.call(
                addresses.replica_manager(1),
                StopReplica(
                    controller_id=1,
                    controller_epoch=cluster.controller_epoch,
                    partitions=(TopicPartition(topic=OFFSETS_TOPIC, partition=0),),
                ),
                WAIT_S,
            )
            wait_until(lambda: events.named("group.unload", partition=0), message="group.unload")
        finally:
            client.close()


def _network_scenario(events: EventLog) -> None:
    """Two brokers with listeners: kafka-python produces (acks=all, acks=0) and consumes; raw
    sockets send a request without a client id, a frame with an unknown API key, an acks=0
    produce that fails, and a request whose translation raises; a broker registration znode
    that does not decode; a broker that stops with a connection open."""
    # imported here, in the test that warns (kafka-python's import does, see pytestmark)
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition

    with Cluster(2, listen="127.0.0.1", zookeeper="embedded") as cluster:
        cluster.create_topic("wire", partitions=1, replication_factor=2)
        bootstrap = cluster.bootstrap_servers
        producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="schema-producer")
        quiet = KafkaProducer(bootstrap_servers=bootstrap, client_id="schema-acks0", acks=0)
        try:
            for n in range(3):
                producer.send("wire", value=b"wire-%d" % n).get(timeout=WAIT_S)
            quiet.send("wire", value=b"unanswered").get(timeout=WAIT_S)
            quiet.flush(timeout=WAIT_S)
        finally:
            producer.close(timeout=WAIT_S)
            quiet.close(timeout=WAIT_S)
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="schema-consumer")
        try:
            consumer.assign([KafkaTopicPartition("wire", 0)])
            consumer.seek_to_beginning()
            records, deadline = 0, time.monotonic() + WAIT_S
            while records < 4 and time.monotonic() < deadline:
                records += sum(map(len, consumer.poll(timeout_ms=100).values()))
            assert records == 4
        finally:
            consumer.close()
        host, port = cluster.brokers[1].endpoint
        with WireClient(host, port) as client:  # a client that sends no client id
            # an acks=0 produce gets no response; the next request's answer comes after it
            client.send(
                request_frame(
                    ApiKey.PRODUCE,
                    8,
                    wire_produce_request(8, wire_batch(b"raw"), topic="wire", acks=0),
                    client_id=None,
                )
            )
            client.send(
                request_frame(ApiKey.API_VERSIONS, 3, api_versions_request(3), client_id=None)
            )
            client.read_response(ApiKey.API_VERSIONS, 3)
            client.send(sized(raw_header(99, 0)))  # no such API: network.bad_request
            client.read_until_closed()
        with WireClient(host, port) as client:  # acks=0 to no such topic: closed (Kafka's way)
            client.send(
                request_frame(
                    ApiKey.PRODUCE,
                    8,
                    wire_produce_request(8, wire_batch(b"x"), topic="nowhere", acks=0),
                )
            )
            client.read_until_closed()
        with pytest.MonkeyPatch.context() as patch, WireClient(host, port) as client:
            patch.setitem(KafkaApis._handlers, ApiKey.DELETE_TOPICS, _failing_translation)
            client.send(
                request_frame(ApiKey.DELETE_TOPICS, 1, sample_request(ApiKey.DELETE_TOPICS, 1))
            )
            client.read_until_closed()
        assert events.named("network.request_failed", broker=1)

        # a registration the controller cannot decode (a broker id no broker has)
        path = zk_data.broker_path(99)
        cluster._zk.create(path, b"{not json", ephemeral=True)
        wait_until(
            lambda: events.named("controller.bad_broker_registration", path=path),
            message="controller.bad_broker_registration",
        )
        cluster._zk.delete(path)

        # a connection still open when its broker stops
        with WireClient(host, port) as client:
            client.call(ApiKey.API_VERSIONS, 3, api_versions_request(3))
            cluster.stop_broker(1)
            client.read_until_closed()
    closes = Counter(e["reason"] for e in events.named("network.connection_closed"))
    assert "the broker is stopping" in closes, closes


def _split_scenario(events: EventLog) -> None:
    """Brokers sharing only ZooKeeper and TCP (a broker process's wiring): acks=all through
    followers fetching over the wire, a controlled shutdown asked over the wire, and a request
    to a broker that is not registered."""
    with split_cluster(3, config=FAST) as cluster:
        cluster.admin.create_topic("split", 1, 3, {"min.insync.replicas": "2"})
        leader = cluster.state("split", 0).leader
        producer = cluster.producer(
            leader, acks=-1, timeout_ms=5_000, retries=20, retry_backoff_ms=50
        )
        try:
            producer.send("split", b"over the wire", partition=0).result(WAIT_S)
        finally:
            producer.close()
        controller = cluster.controller()
        shutting = next(b for b in (1, 2, 3) if b != controller)
        assert cluster.brokers[shutting].stop(controlled=True)
        wait_until(
            lambda: events.named("controller.controlled_shutdown", replica=shutting),
            message="controller.controlled_shutdown",
        )
        asker = Client("split-asker", cluster.brokers[leader].directory)
        try:  # broker 9 is not registered: the network client cannot connect
            asker.request(addresses.replica_manager(9), FetchRequest(replica_id=leader))
            wait_until(
                lambda: events.named("network.client_connect_failed", peer=9),
                message="network.client_connect_failed",
            )
        finally:
            asker.close()


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[bytes]]:
    """Every line the run wrote: the demo's event file, then the extra scenarios' stream.

    Tracing is process-global: its state is put back as found afterwards.
    """
    root = tmp_path_factory.mktemp("events")
    stream = io.BytesIO()
    with tracing.configured(stream=stream):
        demo_file = root / "demo.jsonl"
        run_demo(seconds=4.5, events_path=demo_file, print_fn=lambda _line: None)
        lines = demo_file.read_bytes().splitlines()
        tracing.configure(stream=stream)  # the demo traced to its own file
        events = EventLog(stream, tracing.flush)
        _storage_scenario(root, events)
        _failing_tasks(events)
        _crashing_actor(events)
        _controller_scenario(events)
        _divergence_scenario(events)
        _network_scenario(events)
        _group_scenario(events)
        _split_scenario(events)
        tracing.flush()
        lines += stream.getvalue().splitlines()
    yield [line for line in lines if line]


@pytest.fixture(scope="module")
def run_events(emitted: list[bytes]) -> list[dict[str, Any]]:
    """The run's lines, parsed: each must be one JSON object."""
    events = []
    for number, line in enumerate(emitted, 1):
        try:
            event = json.loads(line)
        except ValueError as error:
            pytest.fail(f"line {number} is not JSON ({error}): {line[:200]!r}")
        assert isinstance(event, dict), f"line {number} is not an object: {line[:200]!r}"
        events.append(event)
    return events


def narrowed_validators(schema: dict[str, Any]) -> dict[str, jsonschema.Draft202012Validator]:
    """For each event name, a validator of the schema with its `allOf` cut to that name's rule.

    For an event of that name it gives the same verdict and errors as the whole schema: every
    other rule's `if` (event == other name) is false for it, so its `then` never applies. It
    saves evaluating ~50 `if`s per event, which is most of the time of validating the run's
    ~80,000 events (tests/test_events_schema.py checks the equivalence on a sample).
    """
    return {
        rule["if"]["properties"]["event"]["const"]: jsonschema.Draft202012Validator(
            {**schema, "allOf": [rule]}
        )
        for rule in schema["allOf"]
    }


def _broken(event: dict[str, Any]) -> dict[str, Any]:
    """`event` with four fields of the wrong type or value (an invalid copy)."""
    return {**event, "ts_ms": str(event["ts_ms"]), "broker": "1", "level": "debug", "topic": 0}


def _errors(validator: jsonschema.Draft202012Validator, event: dict[str, Any]) -> list[str]:
    return sorted(
        f"{'/'.join(map(str, e.absolute_path)) or '<event>'}: {e.message}"
        for e in validator.iter_errors(event)
    )


@pytest.mark.timeout(120)
def test_narrowed_validation_is_validation_by_the_whole_schema(
    run_events: list[dict[str, Any]],
    schema: dict[str, Any],
    validator: jsonschema.Draft202012Validator,
) -> None:
    narrowed = narrowed_validators(schema)
    per_type: Counter[str] = Counter()
    sample = []
    for event in run_events:
        per_type[event["event"]] += 1
        if per_type[event["event"]] <= 20:
            sample.append(event)
    # and some broken ones, so that the errors are compared too
    sample += [_broken(e) for e in sample[::7]]
    sample.append({**sample[0], "event": "no.such_event"})
    for event in sample:
        chosen = narrowed.get(event["event"]) or validator
        assert _errors(chosen, event) == _errors(validator, event), event


@pytest.mark.timeout(120)
def test_every_emitted_event_validates_against_the_schema(
    run_events: list[dict[str, Any]],
    schema: dict[str, Any],
    validator: jsonschema.Draft202012Validator,
) -> None:
    """Every event, checked by jsonschema-rs (the run's ~80,000 events in about a second; the
    reference validator took ~25 s of the suite); what it refuses is explained by the reference
    validator, and on a sample the two agree (the test below)."""
    fast = jsonschema_rs.validator_for(schema)
    narrowed = narrowed_validators(schema)
    invalid = []
    for event in run_events:
        if not fast.is_valid(event):
            chosen = narrowed.get(str(event.get("event"))) or validator
            invalid.append((event, _errors(chosen, event) or ["(jsonschema finds it valid)"]))
    shown = "\n".join(
        f"{json.dumps(event)[:400]}\n    " + "\n    ".join(errors) for event, errors in invalid[:5]
    )
    kinds = Counter(str(event.get("event")) for event, _ in invalid)
    assert not invalid, (
        f"{len(invalid)} of {len(run_events)} events are invalid {dict(kinds)}:\n{shown}"
    )


@pytest.mark.timeout(120)
def test_the_fast_validator_agrees_with_the_reference(
    run_events: list[dict[str, Any]],
    schema: dict[str, Any],
    validator: jsonschema.Draft202012Validator,
) -> None:
    """jsonschema-rs and jsonschema give the same verdict on every kind of event the run
    emitted (each distinct set of fields of each type, and every 401st event), and on broken
    copies of them."""
    fast = jsonschema_rs.validator_for(schema)
    shapes: set[tuple[str, ...]] = set()
    sample = []
    for number, event in enumerate(run_events):
        shape = (str(event.get("event")), *sorted(event))
        if shape not in shapes or number % 401 == 0:
            shapes.add(shape)
            sample.append(event)
    broken = [_broken(e) for e in sample[::3]]
    broken += [{**e, "event": "no.such_event"} for e in sample[::11]]
    broken += [{k: v for k, v in e.items() if k != "ts_ms"} for e in sample[::5]]
    assert all(validator.is_valid(e) for e in sample)  # the run's own events are valid
    assert not any(validator.is_valid(e) for e in broken)
    for event in sample + broken:
        assert fast.is_valid(event) == validator.is_valid(event), event


@pytest.mark.timeout(120)
def test_the_run_covers_the_schema(
    run_events: list[dict[str, Any]], schema: dict[str, Any]
) -> None:
    seen = Counter(str(event.get("event")) for event in run_events)
    missing = sorted(MUST_SEE - set(seen))
    assert not missing, f"the run emitted no {missing}; seen: {dict(seen)}"
    known = set(schema_events(schema))
    assert set(NOT_EXERCISED) <= known, "NOT_EXERCISED names an event the schema does not know"
    unexercised = sorted(known - set(seen) - set(NOT_EXERCISED))
    assert not unexercised, f"schema events neither seen nor listed in NOT_EXERCISED: {unexercised}"
    exercised_anyway = sorted(set(NOT_EXERCISED) & set(seen))
    assert not exercised_anyway, f"seen now, drop them from NOT_EXERCISED: {exercised_anyway}"


@pytest.mark.timeout(120)
def test_waited_responses_name_the_span_that_completed_them(
    run_events: list[dict[str, Any]],
) -> None:
    """A request a purgatory completed names what did (`completed_by`) and the span it
    happened in, and that span is in the log: a hop some actor received."""
    received = {(e["trace_id"], e["span_id"]) for e in run_events if e["event"] == "msg.recv"}
    responses = [e for e in run_events if e["event"] in ("produce.response", "fetch.response")]
    named = [e for e in responses if "completed_by" in e]
    kinds = Counter(e["completed_by"] for e in named)
    assert {"high_watermark", "append", "expired"} <= set(kinds), kinds
    unnamed = [
        e for e in responses if e["waited"] and e["outcome"] != "error" and "completed_by" not in e
    ]
    assert not unnamed, f"waited, completed, and not saying by what: {unnamed[:3]}"
    assert all(e["waited"] for e in named), "a response that never waited names a completion"
    dangling = [
        e for e in named if (e["completed_by_trace_id"], e["completed_by_span_id"]) not in received
    ]
    assert not dangling, f"completions naming a span not in the log: {dangling[:3]}"


# -- inconsistencies in what the code emits (reported, not fixed here) ---------------------------


@pytest.mark.timeout(120)
def test_every_actor_event_carries_its_trace(run_events: list[dict[str, Any]]) -> None:
    untraced = Counter(
        event["event"]
        for event in run_events
        if "actor" in event and not {"trace_id", "parent_span_id"} <= event.keys()
    )
    assert not untraced, f"actor events without trace_id / parent_span_id: {dict(untraced)}"


@pytest.mark.timeout(120)
def test_every_broker_side_event_names_its_broker(run_events: list[dict[str, Any]]) -> None:
    """An event of a broker's component names the broker, or a path inside its data dir."""
    anonymous = Counter(
        event["event"]
        for event in run_events
        if event["event"].startswith(
            ("log.", "log_manager.", "partition.", "purgatory.", "network.")
        )
        and event.get("broker") is None
        and not any(isinstance(event.get(k), str) for k in ("dir", "data_dir"))
    )
    assert not anonymous, f"events that name no broker: {dict(anonymous)}"
