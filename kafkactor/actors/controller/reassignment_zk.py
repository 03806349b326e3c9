"""Partition reassignment in ZooKeeper: `/admin/reassign_partitions` and the reassignment
fields of `/brokers/topics/<t>` (Kafka 2.8's ReassignPartitionsZNode and TopicZNode)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from kafkactor.actors.controller.replica_assignment import ReplicaAssignment
from kafkactor.actors.controller.zk_data import MalformedZnodeError, topic_path
from kafkactor.common import TopicPartition

REASSIGN_PARTITIONS = "/admin/reassign_partitions"
WRITE_ATTEMPTS = 5  # versioned sets of a topic znode retried when another writer got in first


def _load(path: str, data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedZnodeError(path, f"not JSON ({error})") from None


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _ints(path: str, value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(type(v) is not int for v in value):
        raise MalformedZnodeError(path, f"{what} is {value!r}, not a list of integers")
    return tuple(value)


def _object(path: str, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedZnodeError(path, f"{what} is {value!r}, not a JSON object")
    return value


# -- /admin/reassign_partitions ------------------------------------------------------------------


def encode_reassign_partitions(targets: Mapping[TopicPartition, tuple[int, ...]]) -> bytes:
    """Kafka's ReassignPartitionsZNode: `{"version":1,"partitions":[{"topic":..,
    "partition":..,"replicas":[..]}]}`."""
    return _dump(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in sorted(targets.items())
            ],
        }
    )


def decode_reassign_partitions(data: bytes) -> dict[TopicPartition, tuple[int, ...]]:
    path = REASSIGN_PARTITIONS
    body = _object(path, _load(path, data), "the znode")
    entries = body.get("partitions")
    if not isinstance(entries, list):
        raise MalformedZnodeError(path, f"partitions is {entries!r}, not a list")
    targets: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in entries:
        item = _object(path, entry, "a partition")
        topic, partition = item.get("topic"), item.get("partition")
        if not isinstance(topic, str) or type(partition) is not int:
            raise MalformedZnodeError(path, f"{item!r} names no topic and partition")
        key = TopicPartition(topic=topic, partition=partition)
        targets[key] = _ints(path, item.get("replicas"), f"the replicas of {key}")
    return targets


# -- /brokers/topics/<t>: adding_replicas and removing_replicas ---------------------------------


def decode_replica_assignments(topic: str, data: bytes) -> dict[int, ReplicaAssignment]:
    """Every partition's assignment with the replicas a reassignment adds and removes
    (version 2+; absent fields are no reassignment, as in a version 1 znode)."""
    path = topic_path(topic)
    body = _object(path, _load(path, data), "the znode")
    partitions = _object(path, body.get("partitions"), "partitions")
    adding = _object(path, body.get("adding_replicas") or {}, "adding_replicas")
    removing = _object(path, body.get("removing_replicas") or {}, "removing_replicas")
    found = {}
    for key, replicas in partitions.items():
        if not (key.isascii() and key.isdigit()):
            raise MalformedZnodeError(path, f"partition {key!r} is not a number")
        found[int(key)] = ReplicaAssignment(
            _ints(path, replicas, f"replicas of partition {key}"),
            _ints(path, adding.get(key, []), f"adding_replicas of partition {key}"),
            _ints(path, removing.get(key, []), f"removing_replicas of partition {key}"),
        )
    return found


def encode_replica_assignments(
    topic: str, data: bytes, updates: Mapping[int, ReplicaAssignment]
) -> bytes:
    """`/brokers/topics/<t>` as it was (`data`, every other field such as a topic id kept)
    with these partitions' replicas, adding_replicas and removing_replicas set (Kafka's
    TopicZNode, version 2 or the znode's own when later)."""
    path = topic_path(topic)
    body = dict(_object(path, _load(path, data), "the znode"))
    partitions = dict(_object(path, body.get("partitions"), "partitions"))
    adding = dict(_object(path, body.get("adding_replicas") or {}, "adding_replicas"))
    removing = dict(_object(path, body.get("removing_replicas") or {}, "removing_replicas"))
    for partition, assignment in updates.items():
        key = str(partition)
        partitions[key] = list(assignment.replicas)
        for field, replicas in ((adding, assignment.adding), (removing, assignment.removing)):
            if replicas:
                field[key] = list(replicas)
            else:
                field.pop(key, None)
    version = body.get("version")
    body["version"] = version if type(version) is int and version > 2 else 2
    body["partitions"] = dict(sorted(partitions.items(), key=lambda kv: int(kv[0])))
    body["adding_replicas"] = adding
    body["removing_replicas"] = removing
    return _dump(body)


class ReassignmentZk:
    """The controller's ZooKeeper reads and writes for reassignments (on its own thread)."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client

    @property
    def zk(self) -> Any:
        return self._client()

    def write_assignment(self, key: TopicPartition, assignment: ReplicaAssignment) -> None:
        """Kafka's updateReplicaAssignmentForPartition: a versioned set of the topic znode."""
        path = topic_path(key.topic)
        for _ in range(WRITE_ATTEMPTS):
            data, stat = self.zk.get(path)
            encoded = encode_replica_assignments(key.topic, data, {key.partition: assignment})
            try:
                self.zk.set(path, encoded, version=stat.version)
                return
            except BadVersionError:
                continue
        raise BadVersionError(f"{path} kept changing")

    def read_topic(self, topic: str) -> dict[int, ReplicaAssignment]:
        data, _ = self.zk.get(topic_path(topic))
        return decode_replica_assignments(topic, data)

    def watch_admin(self, watch: Callable[[Any], None]) -> bytes | None:
        """Set the exists watch on `/admin/reassign_partitions`; its data when it is there."""
        if self.zk.exists(REASSIGN_PARTITIONS, watch=watch) is None:
            return None
        try:
            data, _ = self.zk.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return bytes(data)

    def read_admin(self) -> dict[TopicPartition, tuple[int, ...]] | None:
        """The pending ZooKeeper reassignments, None when there is no znode."""
        try:
            data, _ = self.zk.get(REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        return decode_reassign_partitions(data)

    def remove_from_admin(self, drop: Callable[[TopicPartition, tuple[int, ...]], bool]) -> bool:
        """Kafka's maybeRemoveFromZkReassignment: rewrite `/admin/reassign_partitions`
        without the partitions `drop` picks, deleting it when none is left. Returns whether
        it was deleted."""
        for _ in range(WRITE_ATTEMPTS):
            try:
                data, stat = self.zk.get(REASSIGN_PARTITIONS)
            except NoNodeError:
                return False
            try:
                pending = decode_reassign_partitions(data)
            except MalformedZnodeError:
                pending = {}
            kept = {tp: r for tp, r in pending.items() if not drop(tp, r)}
            if kept == pending:
                return False
            try:
                if kept:
                    self.zk.set(
                        REASSIGN_PARTITIONS,
                        encode_reassign_partitions(kept),
                        version=stat.version,
                    )
                    return False
                self.zk.delete(REASSIGN_PARTITIONS, version=stat.version)
                return True
            except (BadVersionError, NoNodeError):
                continue
        return False

    def delete_admin(self) -> None:
        with contextlib.suppress(NoNodeError):
            self.zk.delete(REASSIGN_PARTITIONS)
