"""scale_bench's child: one cluster size, measured in a fresh interpreter. Run by
``scale_bench.py`` (``python _scale_size.py --partitions N ...``), not by hand.

A fresh process per size, so that the threads, the resident memory and the CPU of one size
never carry over to the next. The actor runtime is the one the environment selects
(``KAFKACTOR_ACTOR_RUNTIME``, set by the parent). It prints ``progress {json}`` lines as it
goes (what the parent reports if this process has to be killed) and one ``result {json}``
line, then stops the cluster and prints ``stopped {json}``.

1. ``Cluster(3)`` on the embedded ZooKeeper, tracing off, started (its start waits for an
   elected controller that sees the three brokers).
2. Creation, timed from the first ``create_topic`` call (``wait=False``: it writes the
   assignment to ZooKeeper, the controller does the rest) until every partition has a
   leader in ZooKeeper *and* every replica's actor answers a ``DescribePartition`` naming
   that leader (the leader's saying it leads). ``--topic-partitions`` partitions per topic.
   The wait polls every 10 ms: ZooKeeper up to the first partition without a leader, then
   the replicas 100 at a time up to the first group with one behind, so that it costs the
   brokers little while they work.
3. Threads (``threading.active_count()``, and the kernel's count from /proc/self/status),
   resident memory (VmRSS, VmHWM), then the idle CPU: ``time.process_time()`` (every thread
   of the process) over ``--idle-s`` s of doing nothing, as % of one core.
4. acks=all produce latency: ``--produces`` sequential single-record sends through the
   in-process producer (``cluster.producer(acks=-1)``), spread evenly over the partitions,
   each waited for before the next; a warm-up of one send per topic first (metadata).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import _harness as h

from kafkactor.actors.runtime import Client, addresses
from kafkactor.common import TopicPartition
from kafkactor.messages.replication import DescribePartition, PartitionDescription
from kafkactor.testing import Cluster
from kafkactor.zk_model import NoNodeError

BROKERS = 3
REPLICATION_FACTOR = 3
VALUE = b"x" * 100
POLL_S = 0.01
ASK_AT_ONCE = 100  # DescribePartition requests out at a time
SWEEP_S = 30.0  # past the deadline: every replica left asked once, answers within this
SEND_TIMEOUT_S = 30.0

Replica = tuple[str, int, int]  # topic, partition, broker


def say(kind: str, **fields: Any) -> None:
    print(kind, json.dumps(h.jsonable(fields)), flush=True)


def proc_status() -> dict[str, int]:
    """VmRSS and VmHWM (KiB) and Threads of this process, from /proc/self/status."""
    wanted = {"VmRSS", "VmHWM", "Threads"}
    found: dict[str, int] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in wanted:
            found[name] = int(value.split()[0])
    return found


def runtime_in_effect(cluster: Cluster) -> str:
    """The actor runtime the brokers run on (`actor.runtime`; threads in a build without)."""
    setting = getattr(cluster.config, "runtime", None)  # an ActorRuntimeConfig
    return str(getattr(setting, "runtime", "threads"))


def topics_for(partitions: int, per_topic: int) -> list[tuple[str, int]]:
    """(name, partition count) of the topics holding `partitions` at most `per_topic` each."""
    full, rest = divmod(partitions, per_topic)
    counts = [per_topic] * full + ([rest] if rest else [])
    return [(f"scale-{k}", n) for k, n in enumerate(counts)]


class Waiter:
    """Waits until every partition is led and every replica's actor acts on it."""

    def __init__(self, cluster: Cluster, assignments: dict[str, dict[int, tuple[int, ...]]]):
        self.cluster = cluster
        self.unled = [(t, p) for t, a in assignments.items() for p in sorted(a)]
        self.leaders: dict[tuple[str, int], int] = {}
        self.replicas = {(t, p): r for t, a in assignments.items() for p, r in a.items()}
        self.down: list[Replica] = []
        self.total = sum(len(r) for r in self.replicas.values())
        self.client = Client("scale-bench", cluster.directory, cluster.clock)

    def leaders_known(self) -> bool:
        """Drop the partitions with a leader in ZooKeeper, in order, up to the first without."""
        while self.unled:
            topic, partition = self.unled[0]
            try:
                leader = self.cluster.leader(topic, partition)
            except NoNodeError:
                return False
            if leader < 0:
                return False
            self.leaders[(topic, partition)] = leader
            self.unled.pop(0)
            key = (topic, partition)
            self.down.extend((topic, partition, b) for b in self.replicas[key])
        return True

    def replicas_up(self, deadline: float) -> bool:
        """Ask the replicas not yet seen acting, `ASK_AT_ONCE` at a time, in order, up to the
        first group with one still behind (kept, with the rest, for the next round; one not
        answering by `deadline` too). A round costs the brokers a few hundred requests at
        most: the wait must not slow down what it waits for."""
        while self.down:
            group = self.down[:ASK_AT_ONCE]
            behind = self._behind(group, deadline)
            if behind:
                self.down[: len(group)] = behind
                return False
            del self.down[: len(group)]
        return True

    def _behind(self, group: Sequence[Replica], deadline: float) -> list[Replica]:
        asked: list[tuple[Replica, Future[Any]]] = []
        for replica in group:
            topic, partition, broker = replica
            key = str(TopicPartition(topic=topic, partition=partition))
            address = addresses.partition(broker, key)
            asked.append((replica, self.client.request(address, DescribePartition())))
        behind: list[Replica] = []
        for replica, future in asked:
            topic, partition, broker = replica
            try:
                answer = future.result(max(0.0, deadline - time.perf_counter()))
            except FutureTimeout:
                answer = None
            leader = self.leaders[(topic, partition)]
            acting = isinstance(answer, PartitionDescription) and answer.leader == leader
            if not acting or (broker == leader and not answer.is_leader):
                behind.append(replica)
        return behind

    def acting_per_topic(self) -> str:
        """`topic acting/replicas, ...` for the topics not all acting."""
        behind: dict[str, int] = {}
        for topic, _, _ in self.down:
            behind[topic] = behind.get(topic, 0) + 1
        for topic, partition in self.unled:
            behind[topic] = behind.get(topic, 0) + len(self.replicas[(topic, partition)])
        sizes: dict[str, int] = {}
        for (topic, _), replicas in self.replicas.items():
            sizes[topic] = sizes.get(topic, 0) + len(replicas)
        return ", ".join(f"{t} {sizes[t] - n:,}/{sizes[t]:,}" for t, n in sorted(behind.items()))

    def up_count(self) -> int:
        unled = sum(len(self.replicas[k]) for k in self.unled)
        return self.total - unled - len(self.down)

    def wait(self, deadline: float, pause: threading.Event) -> tuple[float, float]:
        """(s until every leader is known, s until every replica acts) from now; raises
        TimeoutError past `deadline` (a perf_counter time)."""
        started = time.perf_counter()
        led = 0.0
        while True:
            if self.leaders_known():
                led = led or time.perf_counter() - started
                if self.replicas_up(deadline):
                    return led, time.perf_counter() - started
            if time.perf_counter() > deadline:
                # the rounds stop at the first replica behind: ask every one left, once
                self.down = self._behind(self.down, time.perf_counter() + SWEEP_S)
                raise TimeoutError(
                    f"past the deadline, {len(self.unled):,} partitions without a leader and"
                    f" {self.up_count():,} of {self.total:,} replicas acting (asked once more;"
                    f" behind: {self.acting_per_topic()})"
                )
            pause.wait(POLL_S)


def measure_produce(
    cluster: Cluster, topics: Sequence[tuple[str, int]], produces: int
) -> dict[str, Any]:
    """Sequential acks=all single-record sends, spread over every partition."""
    every = [(t, p) for t, n in topics for p in range(n)]
    step = max(1, len(every) // produces)
    targets = [every[(k * step) % len(every)] for k in range(produces)]
    producer = cluster.producer(acks=-1, timeout_ms=30_000)
    for topic, _ in topics:  # metadata, and a first send through each topic
        producer.send(topic, VALUE, partition=0).result(SEND_TIMEOUT_S)
    latencies: list[float] = []
    errors: list[str] = []
    for topic, partition in targets:
        started = time.perf_counter()
        try:
            producer.send(topic, VALUE, partition=partition).result(SEND_TIMEOUT_S)
        except Exception as error:  # a failed send is counted and named, never fatal
            errors.append(f"{topic}-{partition}: {type(error).__name__}: {error}")
            continue
        latencies.append((time.perf_counter() - started) * 1000)
    return {
        "sent": len(targets),
        "acked": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
        "p50_ms": h.percentile(latencies, 50),
        "p99_ms": h.percentile(latencies, 99),
        "max_ms": max(latencies, default=float("nan")),
    }


def measure(
    args: argparse.Namespace, result: dict[str, Any], stage: Callable[[str], None]
) -> Cluster:
    """Steps 1-4 into `result`; the cluster, still running, for the caller to stop."""
    before = proc_status()
    result.update(threads_before=threading.active_count(), rss_before_kib=before["VmRSS"])
    stage("start")
    started = time.perf_counter()
    cluster = Cluster(BROKERS, data_dir=args.data_dir, request_timeout_s=args.deadline_s)
    cluster.start()
    result.update(start_s=time.perf_counter() - started, runtime=runtime_in_effect(cluster))
    stage("create")
    pause = threading.Event()
    topics = topics_for(args.partitions, args.topic_partitions)
    created = time.perf_counter()
    deadline = created + args.deadline_s
    assignments = {
        name: cluster.create_topic(name, count, REPLICATION_FACTOR, wait=False)
        for name, count in topics
    }
    result["create_calls_s"] = time.perf_counter() - created
    waiter = Waiter(cluster, assignments)
    leaders_s, _ = waiter.wait(deadline, pause)
    result.update(
        leaders_s=result["create_calls_s"] + leaders_s,
        create_s=time.perf_counter() - created,
        replicas=waiter.total,
    )
    waiter.client.close()
    status = proc_status()
    result.update(
        threads=threading.active_count(),
        os_threads=status["Threads"],
        rss_kib=status["VmRSS"],
        hwm_kib=status["VmHWM"],
    )
    stage("idle")
    cpu, wall = time.process_time(), time.perf_counter()
    pause.wait(args.idle_s)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    result["idle_cpu_pct"] = 100 * cpu / wall
    stage("produce")
    result["produce"] = measure_produce(cluster, topics, args.produces)
    result["rss_after_kib"] = proc_status()["VmRSS"]
    return cluster


def exit_with_parent() -> None:
    """Exit at once when the parent goes (its end of our stdin closes), however it went."""

    def watch() -> None:
        while os.read(0, 4096):  # the raw descriptor: no buffer lock held at shutdown
            pass
        os._exit(3)

    threading.Thread(target=watch, name="scale-bench-parent", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    exit_with_parent()
    p = argparse.ArgumentParser(prog="_scale_size.py")
    p.add_argument("--partitions", type=h.positive_int, required=True)
    p.add_argument("--topic-partitions", type=h.positive_int, required=True)
    p.add_argument("--produces", type=h.positive_int, required=True)
    p.add_argument("--idle-s", type=float, required=True)
    p.add_argument("--deadline-s", type=float, required=True)
    p.add_argument("--data-dir", type=Path, required=True)
    args = p.parse_args(argv)
    result: dict[str, Any] = {
        "partitions": args.partitions,
        "env_runtime": os.environ.get("KAFKACTOR_ACTOR_RUNTIME", ""),
        "error": "",
    }
    cluster: Cluster | None = None

    def stage(name: str) -> None:
        result["stage"] = name
        say("progress", **result)

    with h.traced(False):
        try:
            cluster = measure(args, result, stage)
        except Exception as error:  # a size that fails is a row that says why
            where = traceback.extract_tb(error.__traceback__)[-1]
            result["error"] = (
                f"{result.get('stage', '')}: {type(error).__name__}: {error}"
                f" ({Path(where.filename).name}:{where.lineno})"
            )
        say("result", **result)
        if result["error"]:  # a cluster stuck part way: the parent removes its directory
            os._exit(1)
        assert cluster is not None
        stopping = time.perf_counter()
        cluster.stop()
        say("stopped", stop_s=time.perf_counter() - stopping)
    return 0


if __name__ == "__main__":
    sys.exit(main())
