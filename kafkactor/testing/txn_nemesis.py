"""`kafkactor nemesis --transactions`: exactly-once consume-transform-produce under the same
seeded fault schedules as the acks=all nemesis (`kafkactor.testing.nemesis`).

`run_txn_schedule(seed, seconds)` starts 3 brokers, creates an input and an output topic (RF 3,
min ISR 2), fills the input (`txn_workload.fill_input`), runs one transactional worker per input
partition (`txn_workload.TxnWorkload`) while `generate_schedule(seed, seconds)` crashes,
restarts, isolates brokers, expires their sessions and cuts their power, heals everything,
lets the workers finish the input (unpaced, bounded), and checks (`txn_verdict`):

- the replicas of both topics agree below the high watermark and no filled input record is
  lost (the acks=all nemesis's checks, `read_back.check_after`);
- every partition of the input, the output and `__consumer_offsets` reaches a last stable
  offset equal to its high watermark within the transaction timeout plus the coordinator's
  abort interval (ListOffsets latest, read_committed against read_uncommitted);
- the output, read by a read_committed consumer, holds every consumed input record exactly
  once, nothing of an aborted transaction, every transaction whole, and the group's committed
  offsets match (`txn_verdict.check_transactions`).

`read_uncommitted=True` is the control: the output is read with read_uncommitted, so the
records of aborted transactions are read too, and the checker must report them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kafkactor import tracing
from kafkactor.actors.broker import BrokerConfig
from kafkactor.actors.runtime import Client, addresses
from kafkactor.actors.transaction.transaction_config import TransactionConfig
from kafkactor.common import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from kafkactor.messages import ErrorCode
from kafkactor.messages.offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafkactor.testing.cluster import Cluster
from kafkactor.testing.nemesis import (
    BROKERS,
    RECOVERY_SESSIONS,
    SAFE_TOPIC_CONFIG,
    SESSION_TIMEOUT_MS,
    Nemesis,
    apply_schedule,
    nemesis_config,
    partition_healthy,
)
from kafkactor.testing.read_back import check_after, wait_for
from kafkactor.testing.schedule import Schedule, generate_schedule
from kafkactor.testing.txn_verdict import (
    Observed,
    OutputRecord,
    TxnScheduleResult,
    check_transactions,
)
from kafkactor.testing.txn_workload import (
    GROUP,
    INPUT_TOPIC,
    OUTPUT_TOPIC,
    TxnWorkload,
    fill_input,
)
from kafkactor.testing.verdict import Ack

INTERNAL_PARTITIONS = 5  # of __consumer_offsets and __transaction_state (Kafka: 50 each)
TRANSACTION_TIMEOUT_SESSIONS = 5  # the producers' transaction.timeout.ms, in session timeouts
START_S = 60.0  # how long the workers may take to initialize before the faults start
READ_S = 15.0  # how long reading one partition back may take
FINISH_LIMIT_S = 180.0  # how long the workers may take to finish the input after healing


def txn_config(session_timeout_ms: int = SESSION_TIMEOUT_MS) -> BrokerConfig:
    """`nemesis_config`, with few partitions of the internal topics (5 instead of 50: fewer
    replicas to load and elect after every fault, the same code paths) and the coordinator's
    abort of timed-out transactions checked every session timeout (Kafka: every 10 s)."""
    base = nemesis_config(session_timeout_ms)
    return dataclasses.replace(
        base,
        group=dataclasses.replace(base.group, offsets_topic_partitions=INTERNAL_PARTITIONS),
        transaction=TransactionConfig(
            state_log_num_partitions=INTERNAL_PARTITIONS,
            abort_timed_out_transactions_interval_ms=session_timeout_ms,
        ),
    )


class TxnNemesis(Nemesis):
    """A `Nemesis` whose health check covers several topics (the input, the output and the
    internal topics the transactions write), each partition by `partition_healthy`."""

    def __init__(
        self,
        cluster: Cluster,
        topics: Sequence[tuple[str, int]],
        *,
        healthy_timeout_s: float,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        name, partitions = topics[0]
        super().__init__(
            cluster, name, partitions, healthy_timeout_s=healthy_timeout_s, progress=progress
        )
        self.live_cluster = cluster
        self.topics = list(topics)

    def await_healthy(self, timeout_s: float | None = None) -> float | None:
        started = time.monotonic()
        at_least: dict[str, dict[int, int]] = {topic: {} for topic, _ in self.topics}

        def healthy() -> bool:
            try:
                return all(
                    partition_healthy(self.live_cluster, topic, p, at_least[topic])
                    for topic, count in self.topics
                    for p in range(count)
                )
            except Exception:  # mid-fault, any read can fail: not healthy yet
                return False

        limit = self.healthy_timeout_s if timeout_s is None else timeout_s
        if not wait_for(healthy, limit):
            return None
        return time.monotonic() - started


# -- reading back ---------------------------------------------------------------------------------


def latest_offsets(cluster: Cluster, topic: str, partition: int) -> tuple[int, int] | None:
    """(last stable offset, high watermark) from the partition's leader: ListOffsets latest with
    read_committed and with read_uncommitted. None if the leader did not answer both."""
    client = Client("nemesis-offsets", cluster.directory, cluster.clock)
    try:
        leader = cluster.leader(topic, partition)
        if leader < 0:
            return None
        found = []
        for isolation in (1, 0):
            request = ListOffsetsRequest(
                partitions=(
                    ListOffsetsPartition(
                        topic=topic, partition=partition, timestamp=LATEST_TIMESTAMP
                    ),
                ),
                isolation_level=isolation,
            )
            response = client.request(addresses.replica_manager(leader), request).result(5)
            if not isinstance(response, ListOffsetsResponse) or not response.partitions:
                return None
            answer = response.partitions[0]
            if answer.error_code is not ErrorCode.NONE:
                return None
            found.append(answer.offset)
        return found[0], found[1]
    except Exception:  # the leader moved or stopped mid-request: asked again by the caller
        return None
    finally:
        client.close()


def await_stable(
    cluster: Cluster, partitions: Sequence[tuple[str, int]], timeout_s: float, notes: list[str]
) -> dict[str, tuple[int, int]]:
    """Wait until every partition's last stable offset is its high watermark (at most
    `timeout_s`); the last (LSO, HW) read of each, by `topic-partition`."""
    found: dict[str, tuple[int, int]] = {}

    def stable() -> bool:
        for topic, partition in partitions:
            offsets = latest_offsets(cluster, topic, partition)
            if offsets is not None:
                found[f"{topic}-{partition}"] = offsets
        return len(found) == len(partitions) and all(lso >= hw for lso, hw in found.values())

    wait_for(stable, timeout_s, poll_s=0.2)
    for topic, partition in partitions:
        if f"{topic}-{partition}" not in found:
            notes.append(f"{topic}-{partition}: no last stable offset read")
    return found


def read_partition(
    cluster: Cluster, topic: str, partition: int, until: int, isolation_level: str
) -> list[OutputRecord]:
    """Every record of the partition below `until`, read by a consumer of `isolation_level`."""
    consumer = cluster.consumer(max_wait_ms=100, isolation_level=isolation_level)
    consumer.assign([(topic, partition)])
    found: list[OutputRecord] = []

    def read_up() -> bool:
        for record in consumer.poll(100):
            if record.offset < until:
                found.append(OutputRecord(partition, record.offset, record.value))
        return consumer.position(topic, partition) >= until

    wait_for(read_up, READ_S, poll_s=0.01)
    consumer.close()
    return found


def committed_offsets(cluster: Cluster, partitions: int, notes: list[str]) -> dict[int, int | None]:
    """The group's committed offset of each input partition (OffsetFetch, asked again on an
    error for a few seconds: a coordinator may still be loading)."""
    consumer = cluster.consumer(
        group_id=GROUP, enable_auto_commit=False, isolation_level="read_committed"
    )
    found: dict[int, int | None] = {}
    errors: dict[int, str] = {}

    def fetched() -> bool:
        for p in range(partitions):
            if p not in found:
                try:
                    found[p] = consumer.committed((INPUT_TOPIC, p))
                except Exception as error:
                    errors[p] = repr(error)
        return len(found) == partitions

    wait_for(fetched, READ_S, poll_s=0.2)
    notes.extend(f"committed offset of p{p}: {e}" for p, e in errors.items() if p not in found)
    consumer.close()
    return found


# -- one schedule ---------------------------------------------------------------------------------


def run_txn_schedule(
    seed: int,
    seconds: float,
    *,
    read_uncommitted: bool = False,
    events_dir: Path | str | None = None,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    partitions: int = 3,
    per_partition: int | None = None,
    power_loss: bool = True,
    progress: Callable[[str], None] | None = None,
) -> TxnScheduleResult:
    """Run the schedule of `seed` for about `seconds` against transactional workers and check
    exactly-once. `per_partition` input records (default: 25 a second of faults, at least 50).
    With `events_dir`, the event log is kept if the schedule fails (for the control: if it
    found anomalies, as it must)."""
    schedule = generate_schedule(
        seed,
        seconds,
        session_timeout_ms=session_timeout_ms,
        partitions=partitions,
        power_loss=power_loss,
    )
    result = TxnScheduleResult(
        seed=seed, unsafe=False, schedule=schedule.describe(), read_uncommitted=read_uncommitted
    )
    if not power_loss:
        result.notes.append("no power losses in this schedule")
    events_path = None
    if events_dir is not None:
        mode = "control" if read_uncommitted else "txn"
        events_path = Path(events_dir) / f"nemesis-{mode}-seed{seed}.jsonl"
        events_path.unlink(missing_ok=True)
    started = time.monotonic()
    records = per_partition if per_partition is not None else max(50, int(25 * seconds))
    with tracing.configured(path=events_path, enabled=events_path is not None):
        try:
            _run(schedule, result, records, progress)
        except Exception as error:
            result.error = repr(error)
    result.elapsed_s = time.monotonic() - started
    if events_path is not None:
        interesting = bool(result.anomalies) if read_uncommitted else not result.ok
        if interesting or result.error is not None:
            result.events_path = events_path
        else:
            events_path.unlink(missing_ok=True)
    return result


def _run(
    schedule: Schedule,
    result: TxnScheduleResult,
    per_partition: int,
    progress: Callable[[str], None] | None,
) -> None:
    session_s = schedule.session_timeout_ms / 1000
    parts = schedule.partitions
    txn_timeout_ms = TRANSACTION_TIMEOUT_SESSIONS * schedule.session_timeout_ms
    with Cluster(
        BROKERS,
        zookeeper="embedded",
        session_timeout_ms=schedule.session_timeout_ms,
        config=txn_config(schedule.session_timeout_ms),
    ) as cluster:
        for topic in (INPUT_TOPIC, OUTPUT_TOPIC):
            cluster.create_topic(topic, parts, BROKERS, SAFE_TOPIC_CONFIG)
        acked = fill_input(cluster, parts, per_partition, schedule.seed)
        ends = [1 + max(a.offset for a in acked if a.partition == p) for p in range(parts)]
        workload = TxnWorkload(
            cluster,
            ends,
            seed=schedule.seed,
            partitions=parts,
            transaction_timeout_ms=txn_timeout_ms,
            max_block_ms=schedule.session_timeout_ms // 2,
        ).start()
        if not wait_for(lambda: all(w.attempts for w in workload.workers), START_S):
            workload.stop()
            raise RuntimeError(f"the workers did not start transactions within {START_S:.0f}s")
        internal = [
            (topic, INTERNAL_PARTITIONS)
            for topic in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
            if _exists(cluster, topic)
        ]
        nemesis = TxnNemesis(
            cluster,
            [(OUTPUT_TOPIC, parts), (INPUT_TOPIC, parts), *internal],
            healthy_timeout_s=RECOVERY_SESSIONS * session_s,
            progress=progress,
        )

        def stop_workload() -> tuple[list[Ack], dict[bytes, str], int]:
            stall_s = RECOVERY_SESSIONS * session_s + txn_timeout_ms / 1000
            if not workload.finish(stall_s, FINISH_LIMIT_S):
                result.notes.extend(f"unfinished: {w}" for w in workload.unfinished())
            workload.stop()
            return acked, {}, 0

        apply_schedule(nemesis, schedule, result, stop_workload)
        for topic, records in ((INPUT_TOPIC, acked), (OUTPUT_TOPIC, [])):
            check_after(cluster, topic, parts, records, result, settle_s=3 * session_s)
        _check(cluster, schedule, result, workload, txn_timeout_ms / 1000 + 3 * session_s)


def _exists(cluster: Cluster, topic: str) -> bool:
    try:
        return bool(cluster.replicas(topic, 0))
    except Exception:  # no such topic
        return False


def _check(
    cluster: Cluster,
    schedule: Schedule,
    result: TxnScheduleResult,
    workload: TxnWorkload,
    stable_s: float,
) -> None:
    """The transactions' verdict against the healed, settled cluster."""
    parts = schedule.partitions
    stable = await_stable(
        cluster,
        [
            *((topic, p) for topic in (INPUT_TOPIC, OUTPUT_TOPIC) for p in range(parts)),
            *((OFFSETS_TOPIC, p) for p in range(INTERNAL_PARTITIONS)),
        ],
        stable_s,
        result.notes,
    )
    committed = committed_offsets(cluster, parts, result.notes)
    inputs = {
        p: {
            r.offset: r.value
            for r in read_partition(
                cluster, INPUT_TOPIC, p, workload.workers[p].end, "read_committed"
            )
        }
        for p in range(parts)
    }
    isolation = "read_uncommitted" if result.read_uncommitted else "read_committed"
    output: list[OutputRecord] = []
    for p in range(parts):
        lso, hw = stable.get(f"{OUTPUT_TOPIC}-{p}", (0, 0))
        output += read_partition(
            cluster, OUTPUT_TOPIC, p, hw if result.read_uncommitted else lso, isolation
        )
    attempts = workload.attempts()
    result.anomalies = check_transactions(
        attempts,
        Observed(
            inputs=inputs,
            committed=committed,
            output=output,
            stability=stable,
            zombie_commits=workload.zombie_commits(),
        ),
    )
    result.outputs_read = len(output)
    result.transactions = workload.outcomes()
    result.fenced = sum(w.replaced for w in workload.workers)
    result.zombies = sum(w.zombies for w in workload.workers)
    result.worker_errors = workload.errors()
