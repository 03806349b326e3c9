"""The nemesis's workload: producers with acks=all that keep every acknowledged record."""

from __future__ import annotations

import functools
import threading
import time
from concurrent.futures import Future

from kafkactor.clients import ProduceError, Producer, RecordMetadata
from kafkactor.testing.cluster import Cluster
from kafkactor.testing.verdict import (
    Ack,
)

DRAIN_S = 5.0  # how long stopped producers wait for answers still out


class Workload:
    """Producers sending unique values (`s<seed>-<producer>-<n>`) round-robin over the
    partitions, at most `in_flight` unanswered sends each (a send unanswered for longer than
    `client_timeout_s` stops counting, as Kafka's request.timeout.ms gives up on a request),
    paced at `rate` sends per second each. Every acknowledged value is kept with its
    partition and offset, every failed one with its error."""

    def __init__(
        self,
        cluster: Cluster,
        topic: str,
        partitions: int,
        *,
        seed: int,
        producers: int,
        acks: int,
        in_flight: int,
        rate: float,
        client_timeout_s: float = 35.0,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.seed = seed
        self.in_flight = in_flight
        self.interval_s = 1.0 / rate if rate > 0 else 0.0
        self.client_timeout_s = client_timeout_s
        # Kafka's defaults but acks: retries=0 sends each value once, so a failed send is
        # simply indeterminate and a duplicate can only come from the brokers; timeout_ms is
        # 30 s, as in Kafka (an acks=all request waits that long at most for the ISR).
        self.producers: list[Producer] = [cluster.producer(acks=acks) for _ in range(producers)]
        self.acked: list[Ack] = []
        self.failed: dict[bytes, str] = {}
        self.sent = 0
        self._outstanding: dict[bytes, tuple[int, float]] = {}  # value -> (producer, sent at)
        self._answers = threading.Condition()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=self._run, args=(index,), name=f"nemesis-producer-{index}", daemon=True
            )
            for index in range(producers)
        ]

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def _busy(self, index: int) -> bool:
        """Whether producer `index` has its fill of sends out (the caller holds the lock)."""
        recent = time.monotonic() - self.client_timeout_s
        out = sum(1 for p, at in self._outstanding.values() if p == index and at > recent)
        return out >= self.in_flight

    def _run(self, index: int) -> None:
        producer, number = self.producers[index], 0
        while not self._stop.is_set():
            with self._answers:
                if self._busy(index):
                    self._answers.wait(0.05)
                    continue
                value = f"s{self.seed}-{index}-{number}".encode()
                self._outstanding[value] = (index, time.monotonic())
                self.sent += 1
            partition = number % self.partitions
            number += 1
            try:
                future = producer.send(self.topic, value, partition=partition)
            except Exception as error:  # closed, or no broker answered the metadata request
                self._record(value, None, error)
            else:
                future.add_done_callback(functools.partial(self._answered, value))
            self._stop.wait(self.interval_s)  # pacing, not a wait for the system

    def _answered(self, value: bytes, future: Future[RecordMetadata]) -> None:
        error = future.exception()
        self._record(value, None if error is not None else future.result(), error)

    def _record(
        self, value: bytes, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        with self._answers:
            self._outstanding.pop(value, None)
            if metadata is not None:
                self.acked.append(Ack(value, metadata.partition, metadata.offset))
            else:
                code = (
                    error.error_code.name
                    if isinstance(error, ProduceError)
                    else type(error).__name__
                )
                self.failed[value] = code
            self._answers.notify_all()

    def stop(self, drain_s: float = DRAIN_S) -> tuple[list[Ack], dict[bytes, str], int]:
        """Stop sending and wait up to `drain_s` for the answers still out. Returns what was
        acknowledged, what failed (value -> error) and how many sends stayed unanswered
        (indeterminate), as they stood before the producers were closed."""
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        with self._answers:
            self._answers.wait_for(lambda: not self._outstanding, timeout=drain_s)
            outcome = list(self.acked), dict(self.failed), len(self._outstanding)
        for producer in self.producers:
            producer.close()
        return outcome


# -- applying a schedule -----------------------------------------------------------------------
