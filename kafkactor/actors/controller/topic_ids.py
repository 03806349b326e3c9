"""Topic ids (KIP-516) as Kafka 2.8's controller keeps them in ZooKeeper mode."""

from __future__ import annotations

from typing import Any, Protocol

from kazoo.exceptions import BadVersionError

from kafkactor.actors.controller import zk_data
from kafkactor.kafka_uuid import random_uuid, uuid_to_string

__all__ = ["TopicIdWriter", "topic_id_of"]

_ATTEMPTS = 3


class TopicIdWriter(Protocol):
    """The ZooKeeper calls `topic_id_of` needs (kazoo's client, the embedded model's)."""

    def get(self, path: str, watch: Any = None) -> tuple[bytes, Any]: ...

    def set(self, path: str, value: bytes, version: int = -1) -> Any: ...


def topic_id_of(zk: TopicIdWriter, topic: str, data: bytes, version: int) -> tuple[str, bool]:
    """The id of `topic` whose `/brokers/topics/<t>` holds `data` (znode version `version`),
    in Kafka's base64 form, and whether it was assigned now.

    Kafka 2.8's controller (`processTopicIds`, on take-over and for every new topic) gives a
    topic znode written without an id (by an older broker or tool) a random one and writes
    it back, its other fields kept (`setTopicIds`). The write is conditional on the version
    read: a writer in between (partitions added, a reassignment) means read again; a writer
    that added an id meanwhile wins. Raises `MalformedZnodeError` or kazoo's `NoNodeError`.
    """
    path = zk_data.topic_path(topic)
    for _ in range(_ATTEMPTS):
        found = zk_data.decode_topic_id(topic, data)
        if found is not None:
            return uuid_to_string(found), False
        fresh = random_uuid()
        try:
            zk.set(path, zk_data.encode_topic_id_over(topic, data, fresh), version)
        except BadVersionError:
            data, stat = zk.get(path)
            version = int(stat.version)
            continue
        return uuid_to_string(fresh), True
    raise zk_data.MalformedZnodeError(path, "kept changing while its topic id was written")
