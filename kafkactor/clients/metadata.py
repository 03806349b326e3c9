"""What a client knows of the cluster: which broker leads each partition."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from kafkactor.actors.runtime import Client, RequestTimeoutError, addresses
from kafkactor.common import NO_LEADER
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import MetadataRequest, MetadataResponse


class UnknownTopicError(LookupError):
    """No broker knows the topic (Kafka's UNKNOWN_TOPIC_OR_PARTITION)."""


class NoBrokersAvailableError(ConnectionError):
    """None of the bootstrap brokers answered a metadata request."""


class ClientMetadata:
    """Kafka's client-side `Metadata`: partition leaders per topic, refreshed on demand.

    Asks the bootstrap brokers' replica managers in turn (`MetadataRequest`) until one
    answers; blocks the calling thread for at most `timeout_s` per broker. Callers mark a
    topic stale after NOT_LEADER_FOR_PARTITION or a network error and refresh before retrying.
    """

    def __init__(
        self,
        client: Client,
        bootstrap: Callable[[], Sequence[int]],
        *,
        timeout_s: float = 5.0,
    ) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._leaders: dict[str, dict[int, int]] = {}
        self._stale: set[str] = set()

    def refresh(self, topics: Iterable[str]) -> None:
        wanted = tuple(sorted(set(topics)))
        last_error = "no bootstrap brokers"
        for broker in self.bootstrap():
            try:
                response = self.client.call(
                    addresses.replica_manager(broker),
                    MetadataRequest(topics=wanted),
                    self.timeout_s,
                )
            except RequestTimeoutError as timeout:
                last_error = str(timeout)
                continue
            if not isinstance(response, MetadataResponse):
                last_error = repr(response)
                continue
            with self._lock:
                for topic in response.topics:
                    if topic.error_code is ErrorCode.NONE:
                        self._leaders[topic.topic] = {
                            p.partition: p.leader for p in topic.partitions
                        }
                    else:
                        self._leaders.pop(topic.topic, None)
                    self._stale.discard(topic.topic)
            return
        raise NoBrokersAvailableError(f"no broker answered a metadata request: {last_error}")

    def mark_stale(self, topic: str) -> None:
        with self._lock:
            self._stale.add(topic)

    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions, refreshing when unknown or stale."""
        return sorted(self._topic(topic))

    def leader(self, topic: str, partition: int) -> int:
        """The leader's broker id, or -1 when the partition has none (or is unknown)."""
        return self._topic(topic).get(partition, NO_LEADER)

    def _topic(self, topic: str) -> dict[int, int]:
        with self._lock:
            known = self._leaders.get(topic)
            fresh = known is not None and topic not in self._stale
        if not fresh:
            self.refresh([topic])
            with self._lock:
                known = self._leaders.get(topic)
        if known is None:
            raise UnknownTopicError(f"unknown topic {topic!r}")
        return known
