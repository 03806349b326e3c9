"""What ``group_bench`` drives the group coordinator with: the cluster it sets up, simulated
group members, the join and commit helpers, and the closed-loop request driver. The script
imports it as ``_group_members`` (it runs from this folder, as with ``_harness``).

Every group is driven with the actor messages of ``kafkactor.messages.group`` sent to a broker's
``GroupCoordinatorActor`` (no wire). A `Member` is a thread that acts as a client's coordinator
code: JoinGroup, SyncGroup (the leader sends every member's assignment), then a Heartbeat every
interval; a heartbeat answered with an error makes it rejoin at once.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import _harness as h

from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.coordinator.coordinator_actor import OFFSETS_COMMIT_TIMEOUT_MS
from kafkactor.actors.coordinator.group_metadata import OffsetAndMetadata
from kafkactor.actors.coordinator.offsets_store import offset_records
from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import Client, Directory
from kafkactor.common import OFFSETS_TOPIC, TopicPartition
from kafkactor.messages import ErrorCode, Response
from kafkactor.messages.group import (
    NO_GENERATION,
    NO_MEMBER_ID,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    GroupProtocol,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafkactor.messages.replication import ProducePartition, ProduceRequest, ProduceResponse
from kafkactor.network.group_apis import OFFSETS_TOPIC_CONFIG
from kafkactor.storage import build_batch
from kafkactor.testing import Cluster

R = TypeVar("R", bound=Response)

BROKERS = 3
COMMIT_TOPIC = "bench"  # the topic whose offsets are committed (it need not exist)
COMMIT_PARTITIONS = 16  # commit k is for partition k % 16
REBALANCE_TIMEOUT_MS = 10_000
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.01  # after an error other than a rebalance (coordinator loading, ...)
STABLE_TIMEOUT_S = 20.0
PROTOCOLS = (GroupProtocol(name="range", metadata=b"bench-subscription"),)
# a member rejoins at once after these (as a client does); after any other error it backs off
_REJOIN_AT_ONCE = frozenset(
    {ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.UNKNOWN_MEMBER_ID}
)


class BenchError(RuntimeError):
    """The coordinator did not do what the measurement needs: that run has no figure."""


def expect(response: Any, kind: type[R], what: str) -> R:
    if not isinstance(response, kind):
        raise BenchError(f"{what}: {response!r}"[:300])
    return response


_client_names = itertools.count(1)


def new_client(directory: Directory, role: str) -> Client:
    return Client(f"group-bench-{role}-{next(_client_names)}", directory)


# --------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    return BrokerConfig(
        group=GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=args.session_ms)
    )


def offsets_partitions(cluster: Cluster) -> int:
    return cluster.config.group.offsets_topic_partitions


def create_offsets_topic(cluster: Cluster) -> None:
    """`__consumer_offsets` as FindCoordinator creates it, RF 3."""
    cluster.create_topic(OFFSETS_TOPIC, offsets_partitions(cluster), BROKERS, OFFSETS_TOPIC_CONFIG)


def coordinator_of(cluster: Cluster, group_id: str) -> int:
    return cluster.leader(OFFSETS_TOPIC, partition_for(group_id, offsets_partitions(cluster)))


# --------------------------------------------------------------------------------------------
# Requests: a lone member's join, offset commits, their produce twins, the closed loop
# --------------------------------------------------------------------------------------------


def join_alone(client: Client, address: str, group_id: str, session_ms: int) -> tuple[str, int]:
    """A single member joins and syncs `group_id` (retried while the coordinator loads); its
    member id and generation."""
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    while True:
        join = expect(
            client.call(
                address,
                JoinGroupRequest(
                    group_id=group_id,
                    client_id="bench",
                    session_timeout_ms=session_ms,
                    rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                    protocol_type="consumer",
                    protocols=PROTOCOLS,
                ),
                REQUEST_TIMEOUT_S,
            ),
            JoinGroupResponse,
            "JoinGroup",
        )
        if join.error_code is ErrorCode.NONE:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"JoinGroup of {group_id}: {join.error_code.name}")
        time.sleep(RETRY_BACKOFF_S)
    sync = expect(
        client.call(
            address,
            SyncGroupRequest(
                group_id=group_id,
                generation_id=join.generation_id,
                member_id=join.member_id,
                assignments=(SyncGroupAssignment(member_id=join.member_id, assignment=b"all"),),
            ),
            REQUEST_TIMEOUT_S,
        ),
        SyncGroupResponse,
        "SyncGroup",
    )
    if sync.error_code is not ErrorCode.NONE:
        raise BenchError(f"SyncGroup of {group_id}: {sync.error_code.name}")
    return join.member_id, join.generation_id


def commit_request(group_id: str, member_id: str, generation: int, k: int) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation,
        member_id=member_id,
        partitions=(
            OffsetCommitPartition(topic=COMMIT_TOPIC, partition=k % COMMIT_PARTITIONS, offset=k),
        ),
    )


def commit_produce_requests(group_id: str, topic: str, partition: int) -> list[ProduceRequest]:
    """acks=all ProduceRequests to `topic` `partition`, the k-th (k < COMMIT_PARTITIONS) with
    exactly the one-record batch the coordinator appends for `commit_request`'s commit k."""
    now_ms = int(time.time() * 1000)
    requests = []
    for p in range(COMMIT_PARTITIONS):
        tp = TopicPartition(topic=COMMIT_TOPIC, partition=p)
        offsets = {tp: OffsetAndMetadata(offset=p, commit_timestamp_ms=now_ms)}
        batch = build_batch(offset_records(group_id, offsets, now_ms), 0)
        requests.append(
            ProduceRequest(
                acks=-1,
                timeout_ms=OFFSETS_COMMIT_TIMEOUT_MS,
                partitions=(ProducePartition(topic=topic, partition=partition, records=batch),),
            )
        )
    return requests


def commit_failure(response: Any) -> str:
    """Nothing for an OffsetCommit answered NONE for its partition, else what went wrong."""
    if (
        isinstance(response, OffsetCommitResponse)
        and response.partitions
        and all(p.error_code is ErrorCode.NONE for p in response.partitions)
    ):
        return ""
    return repr(response)[:200]


def produce_failure(response: Any) -> str:
    if (
        isinstance(response, ProduceResponse)
        and response.partitions
        and all(p.error_code is ErrorCode.NONE for p in response.partitions)
    ):
        return ""
    return repr(response)[:200]


@dataclass(frozen=True, slots=True)
class Window:
    """One closed-loop window: completions inside it, latencies of the requests sent in it."""

    completed: int
    answered: int  # every answer, in the window or not (a loaded machine may fit none in it)
    rate: float
    p50_ms: float
    p99_ms: float
    errors: int  # failed + unanswered
    first_error: str


def closed_loop(
    send: Callable[[int], Future[Any]],
    failure: Callable[[Any], str],
    in_flight: int,
    warmup_s: float,
    duration_s: float,
) -> Window:
    """At most `in_flight` requests out (a slot freed by each answer's callback); a window of
    `duration_s` after `warmup_s`; then what is still out is waited for."""
    slots = threading.Semaphore(in_flight)
    done: list[tuple[int, int]] = []  # (sent ns, answered ns): list.append is atomic
    failures: list[str] = []

    def answered(sent_ns: int, future: Future[Any]) -> None:
        done.append((sent_ns, time.perf_counter_ns()))
        error = future.exception()
        problem = repr(error) if error is not None else failure(future.result())
        if problem:
            failures.append(problem)
        slots.release()

    now = time.perf_counter_ns()
    window_start = now + int(warmup_s * 1e9)
    end = window_start + int(duration_s * 1e9)
    for k in itertools.count():
        if not slots.acquire(timeout=max(0, end - now) / 1e9):
            break  # everything in flight is stuck: the window ends on time anyway
        now = time.perf_counter_ns()
        if now >= end:
            slots.release()
            break
        send(k).add_done_callback(functools.partial(answered, now))
    drain_until = time.monotonic() + REQUEST_TIMEOUT_S
    returned = sum(
        slots.acquire(timeout=max(0.0, drain_until - time.monotonic())) for _ in range(in_flight)
    )
    completed = sum(1 for _, d in done if window_start <= d <= end)
    latencies = [(d - s) / 1e6 for s, d in done if window_start <= s <= end]
    return Window(
        completed,
        len(done),
        completed / duration_s,
        h.percentile(latencies, 50),
        h.percentile(latencies, 99),
        len(failures) + in_flight - returned,
        failures[0] if failures else "",
    )


# --------------------------------------------------------------------------------------------
# Simulated members
# --------------------------------------------------------------------------------------------


class Member:
    """One group member run as a client's coordinator code on a thread of its own: JoinGroup,
    SyncGroup, then a Heartbeat every `heartbeat_s` (from the previous send); any heartbeat
    error makes it rejoin at once. Its first heartbeat after a SyncGroup comes `phase_s` late,
    as if the answer had reached it that much later: members answered together then do not
    heartbeat in lockstep. Times are `time.perf_counter()`."""

    def __init__(
        self,
        directory: Directory,
        address: str,
        group_id: str,
        *,
        session_ms: int,
        heartbeat_s: float,
        phase_s: float = 0.0,
    ) -> None:
        self.client = new_client(directory, "member")
        self.address, self.group_id = address, group_id
        self.session_ms, self.heartbeat_s, self.phase_s = session_ms, heartbeat_s, phase_s
        self.member_id = NO_MEMBER_ID
        self.generation = NO_GENERATION
        self.is_leader = False
        self.rejoining = True
        self.synced: list[tuple[int, float]] = []  # (generation, its SyncGroup answered at)
        self.joins: list[float] = []  # each JoinGroup sent at
        self.silent_since = math.nan  # after `crash`: its last heartbeat answered at
        self.error = ""
        self.left = False
        self._stop = threading.Event()
        self._crash = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.client.address, daemon=True)

    def start(self) -> Member:
        self._thread.start()
        return self

    def _call(self, request: Any, kind: type[R]) -> R:
        return expect(self.client.call(self.address, request, REQUEST_TIMEOUT_S), kind, "answer")

    def _run(self) -> None:
        try:
            next_heartbeat = 0.0
            while not self._stop.is_set():
                if self.rejoining:
                    if self._join_and_sync() not in _REJOIN_AT_ONCE:
                        self._stop.wait(RETRY_BACKOFF_S)
                    next_heartbeat = time.perf_counter() + self.heartbeat_s + self.phase_s
                    continue
                if self._stop.wait(max(0.0, next_heartbeat - time.perf_counter())):
                    return
                sent = time.perf_counter()
                answer = self._call(
                    HeartbeatRequest(
                        group_id=self.group_id,
                        generation_id=self.generation,
                        member_id=self.member_id,
                    ),
                    HeartbeatResponse,
                )
                next_heartbeat = sent + self.heartbeat_s
                if answer.error_code is ErrorCode.NONE:
                    if self._crash.is_set():
                        self.silent_since = time.perf_counter()
                        return  # never heard of again
                    continue
                self.rejoining = True
                if answer.error_code is ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = NO_MEMBER_ID
        except Exception as error:  # recorded for the main thread, which reports it
            self.error = repr(error)

    def _join_and_sync(self) -> ErrorCode:
        """One JoinGroup and SyncGroup round: NONE when it ended with an assignment."""
        self.joins.append(time.perf_counter())
        join = self._call(
            JoinGroupRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                client_id=self.client.address,
                session_timeout_ms=self.session_ms,
                rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
                protocol_type="consumer",
                protocols=PROTOCOLS,
            ),
            JoinGroupResponse,
        )
        if join.error_code is not ErrorCode.NONE:
            if join.error_code is ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = NO_MEMBER_ID
            return join.error_code
        self.member_id, self.generation = join.member_id, join.generation_id
        self.is_leader = join.leader_id == join.member_id
        assignments = tuple(
            SyncGroupAssignment(member_id=m.member_id, assignment=m.member_id.encode())
            for m in join.members
        )
        sync = self._call(
            SyncGroupRequest(
                group_id=self.group_id,
                generation_id=join.generation_id,
                member_id=join.member_id,
                assignments=assignments if self.is_leader else (),
            ),
            SyncGroupResponse,
        )
        if sync.error_code is not ErrorCode.NONE:
            if sync.error_code is ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = NO_MEMBER_ID
            return sync.error_code
        self.synced.append((join.generation_id, time.perf_counter()))
        self.rejoining = False
        return ErrorCode.NONE

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT_S + 1)

    def crash(self) -> float:
        """Stop heartbeating right after the next answered heartbeat; when that was."""
        self._crash.set()
        self._thread.join(REQUEST_TIMEOUT_S + 1)
        if math.isnan(self.silent_since):
            raise BenchError(f"the member did not go silent: {self.error or 'still rejoining'}")
        return self.silent_since

    def leave(self) -> float:
        """Stop, then send LeaveGroup; when it was sent."""
        self.stop()
        sent = time.perf_counter()
        self.left = True
        answer = self._call(
            LeaveGroupRequest(group_id=self.group_id, member_ids=(self.member_id,)),
            LeaveGroupResponse,
        )
        if answer.error_code is not ErrorCode.NONE:
            raise BenchError(f"LeaveGroup: {answer.error_code.name}")
        return sent

    def close(self) -> None:
        """Stop, leave the group (unless it left or crashed), unregister the client."""
        self.stop()
        if not self.left and math.isnan(self.silent_since) and self.member_id:
            self.left = True
            self.client.request(
                self.address,
                LeaveGroupRequest(group_id=self.group_id, member_ids=(self.member_id,)),
            )
        self.client.close()


def wait_stable(members: Sequence[Member], client: Client) -> int:
    """Wait until every member holds an assignment of the same generation and the coordinator
    describes the group Stable with all of them; that generation."""
    deadline = time.monotonic() + STABLE_TIMEOUT_S
    group_id, address = members[0].group_id, members[0].address
    while time.monotonic() < deadline:
        problems = [m.error for m in members if m.error]
        if problems:
            raise BenchError(f"a member failed: {problems[0]}")
        generations = {m.synced[-1][0] if m.synced else None for m in members}
        if (
            len(generations) == 1
            and None not in generations
            and not any(m.rejoining for m in members)
        ):
            described = expect(
                client.call(
                    address, DescribeGroupsRequest(group_ids=(group_id,)), REQUEST_TIMEOUT_S
                ),
                DescribeGroupsResponse,
                "DescribeGroups",
            ).groups[0]
            if described.state == "Stable" and len(described.members) == len(members):
                generation = generations.pop()
                assert generation is not None
                return generation
        time.sleep(0.005)
    raise BenchError(f"{group_id} did not become Stable with {len(members)} members")


def await_resync(
    members: Sequence[Member], generation: int, since: float, timeout_s: float
) -> tuple[float, float, int]:
    """Wait until every member has an assignment of a generation after `generation`; the
    latest such first SyncGroup answer, the latest JoinGroup sent before it, the generation."""
    deadline = since + timeout_s
    while True:
        problems = [m.error for m in members if m.error]
        if problems:
            raise BenchError(f"a member failed: {problems[0]}")
        firsts = [next(((g, t) for g, t in m.synced if g > generation), None) for m in members]
        if all(f is not None for f in firsts):
            break
        if time.perf_counter() > deadline:
            raise BenchError(f"no new assignment within {timeout_s:g} s")
        time.sleep(0.005)
    synced = [f for f in firsts if f is not None]
    if len({g for g, _ in synced}) != 1:
        raise BenchError(f"the members synced different generations: {synced}")
    end = max(t for _, t in synced)
    last_join = max(
        max(j for j in m.joins if j <= t) for m, (_, t) in zip(members, synced, strict=True)
    )
    return end, last_join, synced[0][0]
