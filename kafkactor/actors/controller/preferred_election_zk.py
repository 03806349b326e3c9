"""Kafka's `/admin/preferred_replica_election` znode: an operator's request (Kafka's
`kafka-preferred-replica-election.sh`, 0.8 to 2.8) that the controller elect the preferred
replica of the partitions it lists, as `{"version":1,"partitions":[{"topic":"t",
"partition":0}]}` (Kafka's PreferredReplicaElectionZNode)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType

from kafkactor.actors.controller.zk_data import MalformedZnodeError
from kafkactor.common import TopicPartition

PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    body = {
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition} for tp in sorted(set(partitions))
        ],
    }
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode_preferred_replica_election(data: bytes) -> set[TopicPartition]:
    """The partitions listed (a set, as Kafka reads them); MalformedZnodeError otherwise."""
    path = PREFERRED_REPLICA_ELECTION
    try:
        body = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MalformedZnodeError(path, f"not JSON ({error})") from None
    if not isinstance(body, dict) or not isinstance(body.get("partitions"), list):
        raise MalformedZnodeError(path, "expected an object with a 'partitions' array")
    found = set()
    for entry in body["partitions"]:
        topic = entry.get("topic") if isinstance(entry, dict) else None
        partition = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(topic, str) or type(partition) is not int:
            raise MalformedZnodeError(
                path, f"{entry!r} is not a {{'topic': string, 'partition': integer}}"
            )
        found.add(TopicPartition(topic=topic, partition=partition))
    return found


class PreferredElectionZk:
    """The controller's side of the znode: an exists watch that fires when it is created, the
    partitions it lists, and its deletion once they are elected (Kafka's
    registerZNodeChangeHandlerAndCheckExistence, getPreferredReplicaElection and
    deletePreferredReplicaElection). `client` gives the ZooKeeper client of the moment."""

    def __init__(self, client: Callable[[], Any], on_created: Callable[[], None]) -> None:
        self._client = client
        self._on_created = on_created

    def _watch(self, event: Any) -> None:
        # one bound method: ZooKeeper keeps a single watch however often it is set
        if getattr(event, "type", None) == EventType.CREATED:
            self._on_created()

    def pending(self) -> bytes | None:
        """Set the watch; the znode's content when it exists (None when it does not)."""
        client = self._client()
        if client.exists(PREFERRED_REPLICA_ELECTION, watch=self._watch) is None:
            return None
        try:
            data, _ = client.get(PREFERRED_REPLICA_ELECTION)
        except NoNodeError:
            return None
        return bytes(data)

    def delete(self) -> None:
        with contextlib.suppress(NoNodeError):
            self._client().delete(PREFERRED_REPLICA_ELECTION)
