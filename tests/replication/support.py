"""Helpers for the replication integration tests: configs, bounded waits, events, raw requests.

Nothing here sleeps to wait for the system: `wait_until` polls a condition against a deadline,
and the barriers (`settle_actor`, `purgatory_state`) send a message through an actor's mailbox
and wait for its answer, so every message queued before it has been handled when they return.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

import pykka

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.actors.runtime import Client, addresses
from kafkactor.messages import ErrorCode
from kafkactor.messages.replication import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    ProducePartition,
    ProducePartitionResult,
    ProduceRequest,
    ProduceResponse,
)
from kafkactor.storage import Log, LogConfig, Record, build_batch, iter_batches
from kafkactor.testing import Cluster

WAIT_S = 5.0  # a generous bound for anything that must happen
TOPIC = "events"

# Followers are dropped from the ISR 400 ms after they stop fetching (checked every 200 ms);
# an idle follower long-polls for 100 ms; a failed fetch backs off for 50 ms; a request lost on
# the way (an isolated broker) is given up 1 s after its long poll would have ended.
FAST = BrokerConfig(
    replica=ReplicaManagerConfig(
        replica_lag_time_max_ms=400,
        replica_fetch_wait_max_ms=100,
        replica_fetch_backoff_ms=50,
        replica_socket_timeout_ms=1_000,
    )
)
# The same, but a dead follower stays in the ISR for 10 s: longer than any test here runs.
STICKY_ISR = BrokerConfig(
    replica=ReplicaManagerConfig(
        replica_lag_time_max_ms=10_000,
        replica_fetch_wait_max_ms=100,
        replica_fetch_backoff_ms=50,
        replica_socket_timeout_ms=1_000,
    )
)
MIN_ISR_2 = LogConfig(min_insync_replicas=2)

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T], timeout_s: float = WAIT_S, message: str = "condition"
) -> T:
    """Poll `condition` until it returns something truthy (returned), or fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {message}")
        pause.wait(0.01)


# -- the event log ---------------------------------------------------------------------------


@contextmanager
def captured_events() -> Iterator[EventLog]:
    """Events go to a stream of their own inside the block; tracing is restored as found."""
    stream = io.BytesIO()
    with tracing.configured(stream=stream):  # other test modules configure tracing too
        yield EventLog(stream, tracing.flush)


class EventLog:
    """The JSON-lines events written to one in-memory stream, in the order they were logged."""

    def __init__(self, stream: io.BytesIO, flush: Callable[[], None]) -> None:
        self.stream = stream
        self._flush = flush

    def all(self) -> list[dict[str, Any]]:
        self._flush()
        return [json.loads(line) for line in self.stream.getvalue().splitlines() if line]

    def named(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        return [
            e
            for e in self.all()
            if e["event"] == event and all(e.get(k) == v for k, v in fields.items())
        ]

    def index_of(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        """The position of the first event matching `predicate` (-1 when none does)."""
        for i, event in enumerate(self.all()):
            if predicate(event):
                return i
        return -1

    def receipt_index(self, client: str, trace_id: str, msg_type: str) -> int:
        """The position of `client`'s receipt of `msg_type` in trace `trace_id` (-1: none)."""
        return self.index_of(
            lambda e: (
                e["event"] == "msg.recv"
                and e["actor"] == client
                and e["trace_id"] == trace_id
                and e["msg_type"] == msg_type
            )
        )

    def trace_of(self, sender: str, msg_type: str) -> str:
        """The trace id of the last `msg_type` that `sender` sent."""
        sends = self.named("msg.send", actor=sender, msg_type=msg_type)
        assert sends, f"{sender} sent no {msg_type}"
        trace_id: str = sends[-1]["trace_id"]
        return trace_id

    def hops(self, trace_id: str) -> list[dict[str, Any]]:
        """Every msg.send / msg.recv of one trace."""
        return [
            e
            for e in self.all()
            if e["event"] in ("msg.send", "msg.recv") and e.get("trace_id") == trace_id
        ]


# -- barriers ----------------------------------------------------------------------------------


def actor_ref(cluster: Cluster, address: str) -> pykka.ActorRef[Any]:
    ref = cluster.directory.resolve(address)
    assert isinstance(ref, pykka.ActorRef), f"no actor at {address}"
    return ref


def settle_actor(cluster: Cluster, address: str) -> None:
    """Return once the actor at `address` has handled every message queued before this call."""
    actor_ref(cluster, address).proxy().address.get(timeout=WAIT_S)


def purgatory_state(cluster: Cluster, broker: int, kind: str) -> dict[str, Any]:
    """A purgatory's `describe()` (delayed operations, watched keys), through its mailbox."""
    address = (
        addresses.produce_purgatory(broker)
        if kind == "produce"
        else addresses.fetch_purgatory(broker)
    )
    state: dict[str, Any] = actor_ref(cluster, address).proxy().describe().get(timeout=WAIT_S)
    return state


# -- raw requests ------------------------------------------------------------------------------


def batch(*values: bytes, timestamp_ms: int = 1_000) -> bytes:
    """One record batch as a producer builds it."""
    return build_batch([Record(None, v, timestamp_ms) for v in values], 0)


def produce_request(
    acks: int, *parts: tuple[str, int, bytes], timeout_ms: int = 5_000
) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        partitions=tuple(
            ProducePartition(topic=topic, partition=partition, records=records)
            for topic, partition, records in parts
        ),
    )


def produce_results(response: Any) -> dict[tuple[str, int], ProducePartitionResult]:
    assert isinstance(response, ProduceResponse), f"not a ProduceResponse: {response!r}"
    return {(r.topic, r.partition): r for r in response.partitions}


def fetch_one(
    client: Client, broker: int, topic: str, partition: int, offset: int, *, max_wait_ms: int = 0
) -> FetchPartitionData:
    """A consumer fetch of one partition from `broker`; its partition data."""
    response = client.call(
        addresses.replica_manager(broker),
        FetchRequest(
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            partitions=(FetchPartition(topic=topic, partition=partition, fetch_offset=offset),),
        ),
        WAIT_S,
    )
    assert isinstance(response, FetchResponse), f"not a FetchResponse: {response!r}"
    (data,) = response.partitions
    return data


def values_of(records: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in some record batches."""
    return [
        (record.offset, record.value)
        for stored in iter_batches(records, deep=True)
        for record in stored.records()
    ]


def log_values(log: Log) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a replica's log (read directly: a Log is thread-safe),
    segment after segment."""
    found: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = values_of(log.read(offset, 64 * 1024 * 1024).records)
        assert chunk, f"nothing read at offset {offset} below the log end {log.log_end_offset}"
        found.extend(chunk)
        offset = chunk[-1][0] + 1
    return found


def result_or_error(future: Future[Any], timeout_s: float = WAIT_S) -> Any:
    """The future's result, or the exception it failed with."""
    try:
        return future.result(timeout_s)
    except Exception as error:
        return error


NO_ERROR = ErrorCode.NONE
