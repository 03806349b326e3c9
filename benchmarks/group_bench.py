"""The group coordinator: offset commits, rebalances, coordinator failover.

3 brokers in one process on the embedded ZooKeeper, ``__consumer_offsets`` with the
coordinator's ``offsets_topic_partitions`` (50) partitions, replication factor 3 and the topic
configs FindCoordinator creates it with (compacted, 100 MiB segments). Every group is driven
with the actor messages of ``kafkactor.messages.group`` sent to the broker's
``GroupCoordinatorActor`` (no wire): it appends every commit and every group metadata record
to ``__consumer_offsets`` with acks=all (``ProduceRequest`` to its replica manager, 5 s timeout).
Brokers run ``GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=--session-ms)``.

Part 1, offset commits per second: one member of a Stable group commits one partition's offset
per OffsetCommit (partition k % 16 of topic ``bench``, offset k), in a closed loop with 1 and
N requests in flight. Baseline in the same process, same broker, same concurrency: acks=all
``ProduceRequest``s to that broker's replica manager, each carrying exactly the one-record batch
the coordinator appends for such a commit, to a plain RF 3 topic partition led by the broker that
coordinates the group. Each run measures both (who goes first alternating) over ``--duration`` s
after ``--warmup`` s; rates count completions inside the window, latencies the requests sent in
it. The ratio is commits/s over produce/s of the same run.

Part 2, rebalance after one of 3 members goes: each member is a thread that acts as a client's
coordinator code: JoinGroup, then SyncGroup (the leader sends every member's assignment), then
a Heartbeat every ``--heartbeat-ms`` (counted from the previous one's send); a heartbeat answered
REBALANCE_IN_PROGRESS (or any error) makes it rejoin at once. Each member's first heartbeat
after a SyncGroup comes a random 0-1 interval late (seeded), so the members, answered together,
do not heartbeat in lockstep. A fresh group per run; 2-3 intervals after it is Stable with 3
members, a follower (a) stops and sends LeaveGroup (session 10 s), or (b) simply stops
heartbeating right after a heartbeat was answered (session ``--session-ms``). Measured
from the LeaveGroup's send (a) or that last answered heartbeat (b) until both remaining members
have a SyncGroup answer of a new generation. "join->sync" is the coordinator's own share: from
the later of the two members' last JoinGroup sends to the later SyncGroup answer.

Part 3, coordinator failover: a fresh cluster per run with ZooKeeper session timeout
``--zk-session-ms``; a group whose offsets partition is led by a broker that is not the
controller joins, syncs and commits 10 offsets; that broker is killed (a crash: its ZooKeeper
session just stops). Every 10 ms the two survivors' coordinators are asked OffsetFetch until one
answers the last committed offset (only the partition's leader can); "elected" is when ZooKeeper
first names a surviving leader for the partition (the same polls).

The members, the join and commit helpers and the closed loop are in ``_group_members``; log
compaction, measured against a raw read and write, is ``compaction_bench``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import _group_members as gm
import _harness as h

from kafkactor.actors.coordinator.offsets_topic import partition_for
from kafkactor.actors.coordinator.results import GroupConfig
from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import OFFSETS_TOPIC
from kafkactor.messages import ErrorCode
from kafkactor.messages.group import (
    OffsetFetchPartitionRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from kafkactor.testing import Cluster

BASELINE_TOPIC = "bench-produce"
GROUP_SIZE = 3
LEAVE_SESSION_MS = 10_000  # the members' session in the LeaveGroup case (Kafka 2.x's default)
COMMIT_SESSION_MS = 30_000
FAILOVER_POLL_S = 0.01
FAILOVER_COMMITS = 10
FAILOVER_TIMEOUT_S = 30.0


# --------------------------------------------------------------------------------------------
# Part 1: offset commits against acks=all produce
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommitResult:
    in_flight: int
    commits_per_s: h.Spread
    produce_per_s: h.Spread
    ratio: h.Spread  # per run: commits/s over produce/s
    commit_p50_ms: h.Spread
    commit_p99_ms: h.Spread
    produce_p50_ms: h.Spread
    answered: int  # the fewer of commits and produces answered, in their windows or not
    errors: int
    first_error: str


def run_commits(cluster: Cluster, args: argparse.Namespace) -> tuple[list[CommitResult], int]:
    """Part 1 on a running cluster; the results per in-flight level and the batch size."""
    group_id = "bench-commits"
    coordinator = gm.coordinator_of(cluster, group_id)
    address = addresses.group_coordinator(coordinator)
    client = gm.new_client(cluster.directory, "commits")
    try:
        member_id, generation = gm.join_alone(client, address, group_id, COMMIT_SESSION_MS)
        cluster.create_topic(BASELINE_TOPIC, gm.BROKERS, gm.BROKERS)
        led = [p for p in range(gm.BROKERS) if cluster.leader(BASELINE_TOPIC, p) == coordinator]
        baseline_partition = led[0] if led else 0
        produce_pool = gm.commit_produce_requests(group_id, BASELINE_TOPIC, baseline_partition)
        batch_bytes = len(produce_pool[0].partitions[0].records)
        replica_manager = addresses.replica_manager(coordinator)

        def commit(k: int) -> Future[Any]:
            return client.request(address, gm.commit_request(group_id, member_id, generation, k))

        def produce(k: int) -> Future[Any]:
            return client.request(replica_manager, produce_pool[k % gm.COMMIT_PARTITIONS])

        results = []
        for in_flight in args.in_flight:
            windows: dict[str, list[gm.Window]] = {"commit": [], "produce": []}
            for run in range(args.runs):
                sides = [
                    ("commit", commit, gm.commit_failure),
                    ("produce", produce, gm.produce_failure),
                ]
                for name, send, failure in sides if run % 2 == 0 else sides[::-1]:
                    windows[name].append(
                        gm.closed_loop(send, failure, in_flight, args.warmup, args.duration)
                    )
            commits, produces = windows["commit"], windows["produce"]
            failed = [w.first_error for w in commits + produces if w.first_error]
            results.append(
                CommitResult(
                    in_flight,
                    h.Spread.of(w.rate for w in commits),
                    h.Spread.of(w.rate for w in produces),
                    h.Spread.of(
                        h.ratio(c.rate, p.rate) for c, p in zip(commits, produces, strict=True)
                    ),
                    h.Spread.of(w.p50_ms for w in commits),
                    h.Spread.of(w.p99_ms for w in commits),
                    h.Spread.of(w.p50_ms for w in produces),
                    min(sum(w.answered for w in commits), sum(w.answered for w in produces)),
                    sum(w.errors for w in commits + produces),
                    failed[0] if failed else "",
                )
            )
        return results, batch_bytes
    finally:
        client.close()


def commit_table(
    results: Sequence[CommitResult], batch_bytes: int, args: argparse.Namespace
) -> str:
    head = ["in flight", "commits/s", "produce/s", "commit/produce", "commit p50 ms"]
    head += ["commit p99 ms", "produce p50 ms", "errors"]
    rows = [
        [r.in_flight, r.commits_per_s.format(), r.produce_per_s.format(), r.ratio.format(".2f"),
         r.commit_p50_ms.format(".2f"), r.commit_p99_ms.format(".2f"),
         r.produce_p50_ms.format(".2f"), r.errors]
        for r in results
    ]  # fmt: skip
    notes = [
        f"median (min-max) of {args.runs} run(s), each {args.warmup:g} s warm-up + "
        f"{args.duration:g} s window per side; closed loop, one OffsetCommit = one partition.",
        f"produce: acks=all ProduceRequest to the coordinator broker's replica manager, the same"
        f" {batch_bytes}-byte one-record batch the coordinator appends, to {BASELINE_TOPIC}"
        f" (RF {gm.BROKERS}) led by that broker; commit/produce is per run.",
    ]
    notes += [f"first error: {r.first_error}" for r in results if r.first_error]
    return h.table(head, rows, notes)


# --------------------------------------------------------------------------------------------
# Part 2: rebalances
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RebalanceRun:
    case: str  # "leave" or "crash"
    session_ms: int
    total_ms: float
    join_to_sync_ms: float
    generations: int  # how many the group advanced by
    error: str


def rebalance_run(cluster: Cluster, case: str, run: int, args: argparse.Namespace) -> RebalanceRun:
    session_ms = args.session_ms if case == "crash" else LEAVE_SESSION_MS
    group_id = f"bench-{case}-{run}"
    address = addresses.group_coordinator(gm.coordinator_of(cluster, group_id))
    admin = gm.new_client(cluster.directory, "admin")
    rng = random.Random(f"{args.seed}:{group_id}")
    interval_s = args.heartbeat_ms / 1000
    members = [
        gm.Member(
            cluster.directory,
            address,
            group_id,
            session_ms=session_ms,
            heartbeat_s=interval_s,
            phase_s=rng.uniform(0, interval_s),
        )
        for _ in range(GROUP_SIZE)
    ]
    try:
        for member in members:
            member.start()
        generation = gm.wait_stable(members, admin)
        time.sleep(2 * interval_s + rng.uniform(0, interval_s))  # a random time, heartbeats steady
        going = next(m for m in members if not m.is_leader)
        staying = [m for m in members if m is not going]
        since = going.leave() if case == "leave" else going.crash()
        end, last_join, new_generation = gm.await_resync(
            staying, generation, since, session_ms / 1000 + gm.REBALANCE_TIMEOUT_MS / 1000 + 10
        )
        return RebalanceRun(
            case,
            session_ms,
            (end - since) * 1e3,
            (end - last_join) * 1e3,
            new_generation - generation,
            "",
        )
    except gm.BenchError as error:
        return RebalanceRun(case, session_ms, math.nan, math.nan, 0, str(error))
    finally:
        for member in members:
            member.close()
        admin.close()


def run_rebalances(cluster: Cluster, args: argparse.Namespace) -> list[RebalanceRun]:
    return [
        rebalance_run(cluster, case, run, args)
        for run in range(args.runs)
        for case in ("leave", "crash")
    ]


def rebalance_table(runs: Sequence[RebalanceRun], args: argparse.Namespace) -> str:
    head = ["case", "session ms", "total ms", "beyond session ms", "join->sync ms"]
    head += ["generations", "errors"]
    rows = []
    for case, title in (("leave", "LeaveGroup"), ("crash", "crash (no heartbeat)")):
        ok = [r for r in runs if r.case == case and not r.error]
        session = next((r.session_ms for r in runs if r.case == case), 0)
        total = h.Spread.of(r.total_ms for r in ok)
        beyond = h.Spread.of(r.total_ms - r.session_ms for r in ok) if case == "crash" else None
        rows.append(
            [title, session, total.format(".1f"), beyond.format(".1f") if beyond else "-",
             h.Spread.of(r.join_to_sync_ms for r in ok).format(".1f"),
             "/".join(sorted({str(r.generations) for r in ok})) or "-",
             sum(1 for r in runs if r.case == case and r.error)]
        )  # fmt: skip
    notes = [
        f"median (min-max) of {args.runs} run(s), a fresh group of {GROUP_SIZE} each; a follower"
        f" goes; members heartbeat every {args.heartbeat_ms} ms (each at a random phase of its"
        " own) and rejoin on REBALANCE_IN_PROGRESS;",
        "initial_rebalance_delay_ms=0; the departure comes at a random time (2-3 heartbeat"
        " intervals after the group is Stable), so total holds 0-1 heartbeat interval of waiting"
        " for the next heartbeat.",
        "total: from the LeaveGroup's send (leave) or the departing member's last answered"
        " heartbeat (crash) to the later SyncGroup answer of the new generation;",
        "join->sync: from the later of the remaining members' rejoins to that answer;"
        " beyond session: total - session timeout.",
    ]
    notes += [f"error ({r.case}): {r.error}" for r in runs if r.error][:3]
    return h.table(head, rows, notes)


# --------------------------------------------------------------------------------------------
# Part 3: coordinator failover
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FailoverRun:
    total_ms: float  # the kill to the OffsetFetch answered with the committed offset
    elected_ms: float  # the kill to ZooKeeper naming a surviving leader
    polls: int
    answers: dict[str, int]  # what the survivors' OffsetFetches answered meanwhile
    error: str


def failover_run(run: int, args: argparse.Namespace) -> FailoverRun:
    """A fresh cluster; a group committed at a broker that is not the controller; that broker
    killed; the survivors polled until one serves the group's offset."""
    config = gm.broker_config(args)
    with Cluster(gm.BROKERS, session_timeout_ms=args.zk_session_ms, config=config) as cluster:
        gm.create_offsets_topic(cluster)
        controller = cluster.controller_id()
        names = (f"bench-failover-{run}-{i}" for i in itertools.count())
        group_id = next(g for g in names if gm.coordinator_of(cluster, g) != controller)
        leader = gm.coordinator_of(cluster, group_id)
        client = gm.new_client(cluster.directory, "failover")
        try:
            address = addresses.group_coordinator(leader)
            member_id, generation = gm.join_alone(client, address, group_id, LEAVE_SESSION_MS)
            for k in range(FAILOVER_COMMITS):  # partition 0 gets offsets 0, 16, 32, ...
                commit = gm.commit_request(
                    group_id, member_id, generation, k * gm.COMMIT_PARTITIONS
                )
                problem = gm.commit_failure(client.call(address, commit, gm.REQUEST_TIMEOUT_S))
                if problem:
                    raise gm.BenchError(f"commit: {problem}")
            return await_failover(cluster, client, group_id, leader)
        except gm.BenchError as error:
            return FailoverRun(math.nan, math.nan, 0, {}, str(error))
        finally:
            client.close()


def await_failover(cluster: Cluster, client: Client, group_id: str, leader: int) -> FailoverRun:
    """Kill `leader`; every 10 ms ask ZooKeeper for the partition's leader (until it names a
    survivor) and both survivors for the group's offset (until one answers it)."""
    expected = (FAILOVER_COMMITS - 1) * gm.COMMIT_PARTITIONS
    partition = partition_for(group_id, gm.offsets_partitions(cluster))
    fetch = OffsetFetchRequest(
        group_id=group_id,
        partitions=(OffsetFetchPartitionRequest(topic=gm.COMMIT_TOPIC, partition=0),),
    )
    survivors = [b for b in cluster.live_brokers() if b != leader]
    answers: Counter[str] = Counter()
    elected = math.nan
    started = time.perf_counter()
    cluster.kill_broker(leader)
    for polls in itertools.count(1):
        poll = time.perf_counter()
        if poll - started > FAILOVER_TIMEOUT_S:
            raise gm.BenchError(f"no survivor served the offset in {FAILOVER_TIMEOUT_S:g} s")
        if math.isnan(elected):
            with contextlib.suppress(Exception):  # a failed ZooKeeper read: the next poll
                if cluster.leader(OFFSETS_TOPIC, partition) in survivors:
                    elected = time.perf_counter()
        futures = [client.request(addresses.group_coordinator(b), fetch) for b in survivors]
        for future in futures:
            try:
                response = future.result(1.0)
            except TimeoutError:
                client.abandon(future)
                answers["no answer"] += 1
                continue
            if not isinstance(response, OffsetFetchResponse):
                answers[type(response).__name__] += 1
                continue
            found = response.partitions[0] if response.partitions else None
            code = response.error_code
            if code is ErrorCode.NONE and found is not None:
                code = found.error_code
            answers[code.name if found is not None or code is not ErrorCode.NONE else "empty"] += 1
            if code is not ErrorCode.NONE or found is None or found.offset == -1:
                continue
            if found.offset != expected:
                raise gm.BenchError(f"OffsetFetch answered {found.offset}, expected {expected}")
            served = time.perf_counter()
            elected = served if math.isnan(elected) else elected  # elected during this poll
            return FailoverRun(
                (served - started) * 1e3, (elected - started) * 1e3, polls, dict(answers), ""
            )
        time.sleep(max(0.0, poll + FAILOVER_POLL_S - time.perf_counter()))
    raise AssertionError("unreachable")


def failover_table(runs: Sequence[FailoverRun], args: argparse.Namespace) -> str:
    ok = [r for r in runs if not r.error]
    session = args.zk_session_ms
    head = ["ZK session ms", "total ms", "beyond session ms", "elected ms"]
    head += ["served after elected ms", "polls", "errors"]
    rows = [
        [
            session,
            h.Spread.of(r.total_ms for r in ok).format(".0f"),
            h.Spread.of(r.total_ms - session for r in ok).format(".0f"),
            h.Spread.of(r.elected_ms for r in ok).format(".0f"),
            h.Spread.of(r.total_ms - r.elected_ms for r in ok).format(".1f"),
            h.Spread.of(r.polls for r in ok).format(".0f"),
            len(runs) - len(ok),
        ]
    ]
    answers: Counter[str] = Counter()
    for r in runs:
        answers.update(r.answers)
    notes = [
        f"median (min-max) of {args.runs} run(s), a fresh cluster each: Cluster(session_timeout_ms="
        f"{session}) (embedded ZooKeeper, tick {max(1, session // 2)} ms); the killed broker leads"
        " the group's offsets partition and is not the controller.",
        f"total: kill_broker to the first OffsetFetch answering the last of {FAILOVER_COMMITS}"
        f" commits, polling both survivors' coordinators every {FAILOVER_POLL_S * 1000:g} ms;"
        " elected: ZooKeeper first names a surviving leader.",
        "beyond session: total - ZK session timeout (the session is counted from the killed"
        " broker's last ping, so it may be negative).",
        "survivors' answers meanwhile: "
        + ", ".join(f"{k} {v}" for k, v in sorted(answers.items())),
    ]
    notes += [f"error: {r.error}" for r in runs if r.error][:3]
    return h.table(head, rows, notes)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = h.parser(
        "group_bench",
        "Group coordinator: offset commits, rebalances, failover.",
        "runs of every measurement (5; --quick 3)",
    )
    p.add_argument("--duration", type=float, help="commit/produce window seconds (2; --quick 1)")
    p.add_argument("--warmup", type=float, help="warm-up seconds before each window (0.25)")
    p.add_argument("--in-flight", type=h.int_list, help="in-flight levels for part 1 (1,16)")
    p.add_argument("--heartbeat-ms", type=h.positive_int, help="members' heartbeat interval (100)")
    p.add_argument("--session-ms", type=h.positive_int, help="crash case's session (1000)")
    p.add_argument("--zk-session-ms", type=h.positive_int, help="part 3's ZK session (1000)")
    p.add_argument("--parts", type=h.int_list, default=(1, 2, 3), help="parts to run (1,2,3)")
    return h.fill(
        p.parse_args(argv),
        runs=(5, 3, 1),
        duration=(2.0, 1.0, 0.1),
        warmup=(0.25, 0.25, 0.05),
        in_flight=((1, 16), (1, 16), (1, 4)),
        heartbeat_ms=(100, 100, 100),
        session_ms=(1000, 1000, 500),
        zk_session_ms=(1000, 1000, 1000),
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    titles = itertools.count()

    def section(title: str) -> None:
        print(title if next(titles) == 0 else f"\n{title}")

    if {1, 2} & set(args.parts):
        with Cluster(gm.BROKERS, config=gm.broker_config(args)) as cluster:
            gm.create_offsets_topic(cluster)
            if 1 in args.parts:
                section("Part 1: offset commits per second against acks=all produce")
                commits, batch_bytes = run_commits(cluster, args)
                print(commit_table(commits, batch_bytes, args), flush=True)
                results["commits"] = commits
                results["commit_batch_bytes"] = batch_bytes
            if 2 in args.parts:
                section("Part 2: rebalance of a 3-member group after one member goes")
                rebalances = run_rebalances(cluster, args)
                print(rebalance_table(rebalances, args), flush=True)
                results["rebalances"] = rebalances
    if 3 in args.parts:
        section("Part 3: coordinator failover (the offsets partition's leader killed)")
        failovers = [failover_run(k, args) for k in range(args.runs)]
        print(failover_table(failovers, args), flush=True)
        results["failovers"] = failovers
    return results


def errors_in(results: dict[str, Any]) -> int:
    return int(
        sum(r.errors for r in results.get("commits", []))
        + sum(1 for r in results.get("rebalances", []) if r.error)
        + sum(1 for r in results.get("failovers", []) if r.error)
    )


def main(argv: Sequence[str] | None = None) -> int:
    started = time.perf_counter()
    args = parse_args(argv)
    h.header(
        f"{gm.BROKERS} brokers in one process, embedded ZooKeeper; {OFFSETS_TOPIC}:"
        f" {GroupConfig().offsets_topic_partitions} partitions, RF {gm.BROKERS}, acks=all appends;"
        f" tracing off; parts {','.join(map(str, args.parts))}; {args.runs} run(s) each",
        "command: benchmarks/group_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
    )
    with h.traced(False):
        results = run(args)
    h.finish(args, started, results)
    errors = errors_in(results)
    if errors:
        print(f"{errors} request(s) or run(s) failed", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
