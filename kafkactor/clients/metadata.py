"""What a client knows of the cluster: which partitions each topic has and who leads them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from kafkactor.actors.runtime import Client, RequestTimeoutError, addresses
from kafkactor.clients.errors import ClientError
from kafkactor.common import NO_LEADER, TopicPartition
from kafkactor.messages import ErrorCode, ErrorResponse
from kafkactor.messages.replication import MetadataRequest, MetadataResponse


class ClientMetadata:
    """Kafka's client-side `Metadata`: partition leaders per topic, refreshed on demand.

    A refresh asks the bootstrap brokers' replica managers in turn (`MetadataRequest`) until
    one knows every topic asked for, so a broker whose metadata cache lags (it restarted, or
    an UpdateMetadata is still on its way) does not make a topic look unknown. A refresh
    blocks the calling thread for at most `timeout_s` in all (Kafka's `max.block.ms`).

    Lookups raise `ClientError`: UNKNOWN_TOPIC_OR_PARTITION when every broker that answered
    said so, NETWORK_EXCEPTION when no broker could be reached, REQUEST_TIMED_OUT when none
    answered in time. Callers mark a topic stale after NOT_LEADER_FOR_PARTITION or a network
    error; the next lookup refreshes it.
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
        """Learn the partitions and leaders of `topics` (forgetting the ones nobody knows)."""
        wanted = set(topics)
        if not wanted:
            return
        deadline = time.monotonic() + self.timeout_s
        learned: dict[str, dict[int, int]] = {}
        answered, timed_out, last_error = False, False, "no broker to ask"
        for broker in self.bootstrap():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            response = self._ask(broker, tuple(sorted(wanted - learned.keys())), remaining)
            if isinstance(response, str):
                last_error = response
                timed_out = timed_out or response.startswith("timeout")
                continue
            answered = True
            for found in response.topics:
                if found.error_code is ErrorCode.NONE:
                    learned[found.topic] = {p.partition: p.leader for p in found.partitions}
            if wanted <= learned.keys():
                break
        if not answered:
            code = ErrorCode.REQUEST_TIMED_OUT if timed_out else ErrorCode.NETWORK_EXCEPTION
            raise ClientError(code, f"no broker answered a metadata request ({last_error})")
        with self._lock:
            for topic in wanted:
                if topic in learned:
                    self._leaders[topic] = learned[topic]
                else:
                    self._leaders.pop(topic, None)
                self._stale.discard(topic)

    def _ask(
        self, broker: int, topics: tuple[str, ...], timeout_s: float
    ) -> MetadataResponse | str:
        """One broker's metadata answer, or why there is none ("timeout: ..." if it was late)."""
        try:
            response = self.client.call(
                addresses.replica_manager(broker), MetadataRequest(topics=topics), timeout_s
            )
        except RequestTimeoutError as timeout:
            return f"timeout: {timeout}"
        if isinstance(response, ErrorResponse):
            return f"broker {broker}: {response.error_code.name} {response.message}"
        if not isinstance(response, MetadataResponse):
            return f"broker {broker}: {response!r}"
        return response

    def mark_stale(self, topic: str) -> None:
        with self._lock:
            self._stale.add(topic)

    def partitions(self, topic: str) -> list[int]:
        """The topic's partitions, refreshing when unknown or stale."""
        return sorted(self._topic(topic))

    def leader(self, tp: TopicPartition) -> int:
        """The leader's broker id, or -1 while the partition has none.

        A partition the cached metadata lacks is looked up again before it is called unknown.
        """
        known = self._topic(tp.topic)
        if tp.partition not in known:
            self.mark_stale(tp.topic)
            known = self._topic(tp.topic)
        if tp.partition not in known:
            raise ClientError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {tp.topic!r} has no partition {tp.partition} (it has {len(known)})",
            )
        return known.get(tp.partition, NO_LEADER)

    def _topic(self, topic: str) -> dict[int, int]:
        with self._lock:
            known = self._leaders.get(topic)
            fresh = known is not None and topic not in self._stale
        if not fresh:
            self.refresh([topic])
            with self._lock:
                known = self._leaders.get(topic)
        if known is None:
            raise ClientError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no broker knows topic {topic!r}"
            )
        return known
