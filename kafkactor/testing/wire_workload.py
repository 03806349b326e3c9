"""The process nemesis's clients over the wire (confluent-kafka, i.e. librdkafka): the topic's
creation (`create_topic`) and the workload (`WireWorkload`), producers with acks=all that keep
what `Workload` keeps in-process: every acknowledged value with its partition and offset, every
failed one with its error, and the sends never answered."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kafkactor.testing.verdict import Ack

DRAIN_S = 5.0  # how long stopped producers wait for answers still out
MESSAGE_TIMEOUT_MS = 30_000  # librdkafka's default is 300000: bounded so that a run ends

# librdkafka's own log lines (a broker down, a connection refused) go nowhere: the library
# prints nothing.
_QUIET = logging.getLogger("kafkactor.testing.librdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def producer_config(bootstrap_servers: str, *, acks: int) -> dict[str, Any]:
    """librdkafka's defaults but for what the check needs: `acks` (all: -1), and a bounded
    `message.timeout.ms` (30 s, as long as Kafka's request timeout) so that every send is
    answered, one way or the other, within a run. Its retries stay on (librdkafka retries a
    failed request until the message times out), so a value may be written twice by the
    client itself: duplicates are no failure of the brokers here."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "acks": acks,
        "message.timeout.ms": MESSAGE_TIMEOUT_MS,
        "logger": _QUIET,
    }


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str],
    *,
    timeout_s: float,
) -> None:
    """Create `topic` over the wire (CreateTopics), once a broker's metadata names every broker
    and the controller. A broker answers metadata before the controller's first UpdateMetadata
    has reached it (no brokers, no controller), as Kafka's do, and an AdminClient that saw such
    an answer may wait a long time for the controller: a slow attempt is given up, and the
    next one made with a new client."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    settings: dict[str, Any] = {"bootstrap.servers": bootstrap_servers, "logger": _QUIET}
    new = NewTopic(topic, partitions, replication_factor, config=dict(config))
    deadline = time.monotonic() + timeout_s
    while True:
        admin = AdminClient(settings)
        try:
            metadata = admin.list_topics(timeout=5)
            if metadata.controller_id >= 0 and len(metadata.brokers) >= replication_factor:
                admin.create_topics([new], request_timeout=10)[topic].result(15)
                return
        except KafkaException as error:
            if error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:  # an earlier attempt's
                return
            if time.monotonic() >= deadline:
                raise
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no metadata naming {replication_factor} brokers and a controller")
        time.sleep(0.2)


class WireWorkload:
    """Producers sending unique values (`s<seed>-<producer>-<n>`) round-robin over the
    partitions, at most `in_flight` unanswered sends each, paced at `rate` sends per second
    each; each producer is a librdkafka instance served by a thread of its own."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        partitions: int,
        *,
        seed: int,
        producers: int,
        acks: int,
        in_flight: int,
        rate: float,
    ) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.partitions = partitions
        self.seed = seed
        self.in_flight = in_flight
        self.interval_s = 1.0 / rate if rate > 0 else 0.0
        config = producer_config(bootstrap_servers, acks=acks)
        self.producers = [Producer(config) for _ in range(producers)]
        self.acked: list[Ack] = []
        self.failed: dict[bytes, str] = {}
        self.sent = 0
        self._outstanding: dict[bytes, int] = {}  # value -> producer
        self._out = [0] * producers
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._run, args=(index,), name=f"nemesis-wire-producer-{index}", daemon=True
            )
            for index in range(producers)
        ]

    def start(self) -> WireWorkload:
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, index: int) -> None:
        producer, number = self.producers[index], 0
        while not self._stop.is_set():
            producer.poll(0)  # delivery reports are served in this thread
            with self._lock:
                busy = self._out[index] >= self.in_flight
            if busy:
                producer.poll(0.05)
                continue
            value = f"s{self.seed}-{index}-{number}".encode()
            with self._lock:
                self._outstanding[value] = index
                self._out[index] += 1
                self.sent += 1
            partition = number % self.partitions
            number += 1
            try:
                producer.produce(
                    self.topic,
                    value,
                    partition=partition,
                    on_delivery=functools.partial(self._delivered, value),
                )
            except Exception as error:  # BufferError, KafkaException: not sent at all
                self._record(value, None, type(error).__name__)
            self._stop.wait(self.interval_s)  # pacing, not a wait for the system

    def _delivered(self, value: bytes, error: Any, message: Any) -> None:
        if error is None:
            self._record(value, Ack(value, message.partition(), message.offset()), None)
        else:
            self._record(value, None, str(error.name()))

    def _record(self, value: bytes, ack: Ack | None, error: str | None) -> None:
        with self._lock:
            index = self._outstanding.pop(value, None)
            if index is None:  # answered after the outcome was taken
                return
            self._out[index] -= 1
            if ack is not None:
                self.acked.append(ack)
            else:
                self.failed[value] = error or "UNKNOWN"

    def stop(self, drain_s: float = DRAIN_S) -> tuple[list[Ack], dict[bytes, str], int]:
        """Stop sending and wait up to `drain_s` for the answers still out (`flush`). Returns
        what was acknowledged, what failed (value -> error) and how many sends stayed
        unanswered (indeterminate), as they stood then; the rest is purged."""
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        deadline = time.monotonic() + drain_s
        for producer in self.producers:
            producer.flush(max(0.0, deadline - time.monotonic()))
        with self._lock:
            outcome = list(self.acked), dict(self.failed), len(self._outstanding)
            self._outstanding.clear()  # later answers (the purge's) are not counted
        for producer in self.producers:
            producer.purge()
            producer.flush(0)
        self.producers.clear()
        return outcome
