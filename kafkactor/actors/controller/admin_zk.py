"""Topic creation and deletion through ZooKeeper alone: Kafka's `AdminZkClient`.

A broker process has no in-process `Cluster` to create topics for it: CreateTopics, automatic
creation and `__consumer_offsets` write the assignment and config znodes, as Kafka's brokers
did, and the controller (in whichever process) elects the leaders. Waiting is done on
ZooKeeper's view too: a partition counts as led once its state znode names a live broker.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.common import TopicExistsError, UnknownTopicError
from kafkactor.storage import LogConfig

__all__ = ["AdminZkClient", "TopicAdminTimeoutError", "assign_replicas"]


class TopicAdminTimeoutError(TimeoutError):
    """The controller did not finish a topic change within the admin's timeout."""


def assign_replicas(
    live: list[int], partitions: int, replication_factor: int
) -> dict[int, tuple[int, ...]]:
    """Partition p's replicas are live[(p + r) % n]: leaders spread round-robin."""
    return {
        p: tuple(live[(p + r) % len(live)] for r in range(replication_factor))
        for p in range(partitions)
    }


class AdminZkClient:
    """Kafka's `AdminZkClient` over a ZooKeeper client (`zk()` gives the current one).

    `create_topic` writes `/config/topics/<t>` (Kafka-named overrides on top of the broker's
    defaults `defaults`) and `/brokers/topics/<t>` (the assignment over the registered
    brokers), then waits until every partition's state znode names a registered leader.
    `delete_topic` marks `/admin/delete_topics/<t>` and waits until the controller removed
    the topic's znodes (or, while a replica's broker is down, until no registered broker
    is waited for). Both raise `TopicAdminTimeoutError` after `timeout_s`; may block.
    """

    def __init__(
        self,
        zk: Callable[[], Any],
        *,
        defaults: LogConfig | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self._zk = zk
        self.defaults = defaults if defaults is not None else LogConfig()
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def registered_brokers(self) -> list[int]:
        try:
            children = self._zk().get_children(zk_data.BROKER_IDS)
        except NoNodeError:
            return []
        return sorted(int(c) for c in children if c.isdigit())

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: Mapping[str, str],
    ) -> dict[int, tuple[int, ...]]:
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition, got {partitions}")
        effective = zk_data.log_config_from(config, base=self.defaults)
        with self._lock:
            zk = self._zk()
            live = self.registered_brokers()
            if not 1 <= replication_factor <= len(live):
                raise ValueError(
                    f"replication factor {replication_factor} needs 1..{len(live)} live brokers"
                )
            if zk.exists(zk_data.topic_path(name)) is not None:
                raise TopicExistsError(f"topic {name!r} already exists")
            assignment = assign_replicas(live, partitions, replication_factor)
            config_path = zk_data.topic_config_path(name)
            config_data = zk_data.encode_topic_config(effective)
            if zk.exists(config_path) is None:
                with contextlib.suppress(NodeExistsError):
                    zk.create(config_path, config_data, makepath=True)
            else:
                zk.set(config_path, config_data)
            try:
                zk.create(
                    zk_data.topic_path(name),
                    zk_data.encode_assignment(assignment),
                    makepath=True,
                )
            except NodeExistsError:
                raise TopicExistsError(f"topic {name!r} already exists") from None
        self._wait(
            lambda: all(self._led(name, p) for p in assignment),
            f"leaders for every partition of {name!r}",
        )
        return assignment

    def _led(self, topic: str, partition: int) -> bool:
        try:
            data, _ = self._zk().get(zk_data.partition_state_path(topic, partition))
        except NoNodeError:
            return False
        leader = zk_data.decode_partition_state(topic, partition, data).leader
        return leader >= 0 and leader in self.registered_brokers()

    def delete_topic(self, name: str) -> None:
        zk = self._zk()
        try:
            data, _ = zk.get(zk_data.topic_path(name))
        except NoNodeError:
            raise UnknownTopicError(f"no topic {name!r}") from None
        try:
            holders = {b for r in zk_data.decode_assignment(name, data).values() for b in r}
        except zk_data.MalformedZnodeError:
            holders = set()
        with contextlib.suppress(NodeExistsError):
            zk.create(zk_data.delete_topic_path(name), b"", makepath=True)

        def deleted() -> bool:
            if holders <= set(self.registered_brokers()):
                return self._zk().exists(zk_data.delete_topic_path(name)) is None
            return True  # a replica waits for its broker to come back: the mark stays

        self._wait(deleted, f"the deletion of topic {name!r}")

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        pause = threading.Event()
        while not condition():
            if time.monotonic() > deadline:
                raise TopicAdminTimeoutError(
                    f"timed out after {self.timeout_s}s waiting for {what}"
                )
            pause.wait(0.02)
