"""Fixtures of the analytics tests: one SparkSession, one recorded run of a real topology.

`spark` is the one SparkSession of the test session (local[2], two shuffle partitions, no
UI), stopped at the end. `recorded_run` runs a real cluster once per test session, with
tracing to a file, and counts what it did: acks=0, acks=all and acks=1 sends (every Future
resolved), consumer polls, one request with an invalid acks value, and one acks=all send that
expires in the produce purgatory because a follower was killed while still in the ISR. The
test modules analyse that log (once per module) and check the tables against what the run
counted and against the JSON lines themselves. Nothing waits by sleeping: every wait is on a
Future or a condition with a deadline.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.replication import ReplicaManagerConfig
from kafkactor.analytics import spark_session
from kafkactor.clients import ProduceError
from kafkactor.messages import ErrorCode
from kafkactor.storage import LogConfig
from kafkactor.testing import Cluster
from tests.analytics.support import PARTITIONS, TOPIC, RecordedRun

ACKS_ALL_SENDS = 30
ACKS_ONE_SENDS = 20
ACKS_ZERO_SENDS = 5  # never answered: a produce.request each, no produce.response
POLLS = 5
INVALID_ACKS = 2
EXPIRY_MS = 300  # the acks=all send that cannot complete times out after this
# A killed broker's session expires after 2 s, so the controller drops it from the ISRs long
# after the stuck send has expired; a silent follower would stay in the ISR for 10 s.
SESSION_TIMEOUT_MS = 2000
CONFIG = BrokerConfig(
    replica=ReplicaManagerConfig(
        replica_lag_time_max_ms=10_000,
        replica_fetch_wait_max_ms=100,
        replica_fetch_backoff_ms=50,
    )
)
WAIT_S = 10.0


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test session's one SparkSession, stopped at the end."""
    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


def _error_code(future: Future[Any]) -> ErrorCode:
    error = future.exception(timeout=WAIT_S)
    assert isinstance(error, ProduceError), f"expected a ProduceError, got {error!r}"
    return error.error_code


def _record(path: Path) -> RecordedRun:
    with Cluster(3, config=CONFIG, session_timeout_ms=SESSION_TIMEOUT_MS) as cluster:
        cluster.create_topic(
            TOPIC,
            partitions=PARTITIONS,
            replication_factor=3,
            config=LogConfig(min_insync_replicas=2),
        )
        leaders = {p: cluster.wait_for_leader(TOPIC, p) for p in range(PARTITIONS)}
        replicas = {p: cluster.replicas(TOPIC, p) for p in range(PARTITIONS)}

        # acks=0 first: each leader's replica manager has handled them (its mailbox is FIFO)
        # by the time it answers the acks=1 sends behind them
        acks_zero = cluster.producer(acks=0)
        for i in range(ACKS_ZERO_SENDS):
            acks_zero.send(TOPIC, b"zero-%d" % i, partition=i % 3).result(timeout=WAIT_S)
        acks_all = cluster.producer(acks=-1, timeout_ms=10_000)  # retries=0: one request each
        acks_one = cluster.producer(acks=1, timeout_ms=10_000)
        sends = [
            acks_all.send(TOPIC, b"all-%d" % i, partition=i % 3) for i in range(ACKS_ALL_SENDS)
        ]
        sends += [
            acks_one.send(TOPIC, b"one-%d" % i, partition=i % 3) for i in range(ACKS_ONE_SENDS)
        ]
        for send in sends:
            send.result(timeout=WAIT_S)

        consumer = cluster.consumer(max_wait_ms=100)
        consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
        for _ in range(POLLS):
            consumer.poll(200)

        refused = cluster.producer(acks=INVALID_ACKS)
        assert _error_code(refused.send(TOPIC, b"bad acks", partition=0)) is (
            ErrorCode.INVALID_REQUIRED_ACKS
        )

        # Kill a broker that leads a partition but not the controller: it stays in every ISR
        # until its session expires, so an acks=all send elsewhere cannot reach the HW in time.
        controller = cluster.controller_id()
        victim = next(b for b in sorted(set(leaders.values())) if b != controller)
        victim_partition = min(p for p, leader in leaders.items() if leader == victim)
        expired_partition = min(p for p, leader in leaders.items() if leader != victim)
        cluster.kill_broker(victim)
        stuck = cluster.producer(acks=-1, timeout_ms=EXPIRY_MS)
        assert _error_code(stuck.send(TOPIC, b"stuck", partition=expired_partition)) is (
            ErrorCode.REQUEST_TIMED_OUT
        )
        # the controller moves the victim's partition once its session expires
        cluster.wait_for_leader(TOPIC, victim_partition, not_broker=victim)
    return RecordedRun(
        path=path,
        acks_all=ACKS_ALL_SENDS,
        acks_one=ACKS_ONE_SENDS,
        acks_zero=ACKS_ZERO_SENDS,
        polls=POLLS,
        invalid_acks=INVALID_ACKS,
        expired_partition=expired_partition,
        expiry_ms=EXPIRY_MS,
        victim=victim,
        victim_partition=victim_partition,
        leaders=leaders,
        replicas=replicas,
    )


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> RecordedRun:
    """One real run, traced to a file; tracing is put back as it was found afterwards."""
    path = tmp_path_factory.mktemp("recorded") / "events.jsonl"
    with tracing.configured(path=path):  # other test modules configure tracing too
        return _record(path)
