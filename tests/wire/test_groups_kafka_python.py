"""kafka-python 3 consumer groups against kafkactor's group coordinator, over the wire.

Members are `KafkaConsumer(topic, group_id=...)` with kafka-python's defaults (the range
assignor, auto-commit every 5 s, auto_offset_reset="latest", a 30 s session (its default for a
broker older than Kafka 3.0, as kafkactor's API versions say it is), heartbeats every 3 s from
a background thread) except where a comment says why. Each member is polled on a thread of
its own (`Member`): a KafkaConsumer is not thread-safe, so whatever else a test asks of it
(commit, committed) runs on that thread too. A member killed without leaving runs in a
subprocess and gets SIGKILL.

Why not poll the members in turn from one thread with short timeouts: kafka-python 3.0.12
drops a join that completes between two polls (`join_group_async` starts a new JoinGroup when
its cached join task is done, instead of taking that task's result), and when that member is
the group's leader its JoinGroup rebalances the group again; with JoinGroups parked for
seconds (group.initial.rebalance.delay.ms) a group of three polled in turn (100 ms each)
kept rebalancing for the 30 s we watched, one member holding nothing. A member polling on its
own thread leaves that window microseconds wide.

With auto_offset_reset="latest" a member that has no committed offset starts at the log end
it finds once it holds the partition, so tests produce only after every member's position is
known (`Member.positions`).
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import kafka.errors
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kafkactor.testing import Cluster
from tests.wire.groups import (
    JOIN_S,
    Placed,
    check_read_once,
    check_split,
    coordinator_of,
    ends,
    first_offsets,
    group_of,
    is_split,
    wait_for,
)
from tests.wire.support import READ_S, wait_until

T = TypeVar("T")
POLL_MS = 500  # each member's poll; a stop waits for at most one


class Member:
    """A KafkaConsumer subscribed to `topic` in `group`, polled on its own thread.

    After each poll the thread notes the assignment and each assigned partition's position
    (resolving it: the committed offset, or the reset to the log end), and keeps every record
    returned. `call` runs a function of the consumer on that thread between polls. `stop`
    closes the consumer (auto-commit and LeaveGroup, as kafka-python's close does).
    """

    def __init__(self, name: str, cluster: Cluster, group: str, topic: str, **settings: Any):
        self.name = name
        self.consumer = KafkaConsumer(
            topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group, **settings
        )
        self._lock = threading.Lock()
        self._read: list[Placed] = []
        self._assigned: frozenset[int] = frozenset()
        self._held: set[int] = set()
        self._positions: dict[int, int | None] = {}
        self._calls: queue.Queue[tuple[Callable[[Any], Any], Future[Any]]] = queue.Queue()
        self._stopping = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = self.consumer
        try:
            while not self._stopping.is_set():
                self._serve_calls()
                batch = consumer.poll(timeout_ms=POLL_MS)
                records = [
                    Placed(r.partition, r.offset, r.value) for rs in batch.values() for r in rs
                ]
                positions = {
                    tp.partition: consumer.position(tp, timeout_ms=READ_S * 1000)
                    for tp in consumer.assignment()
                }
                with self._lock:
                    self._read.extend(records)
                    self._assigned = frozenset(positions)
                    self._held |= set(positions)
                    self._positions = positions
        except BaseException as error:  # surfaced by the waits (`check`)
            self.error = error
        finally:
            self._serve_calls()
            consumer.close()

    def _serve_calls(self) -> None:
        while True:
            try:
                function, result = self._calls.get_nowait()
            except queue.Empty:
                return
            try:
                result.set_result(function(self.consumer))
            except BaseException as error:
                result.set_exception(error)

    def call(self, function: Callable[[Any], T]) -> T:
        """`function(consumer)`, run on the member's thread."""
        result: Future[T] = Future()
        self._calls.put((function, result))
        return result.result(timeout=READ_S + POLL_MS / 1000)

    def check(self) -> None:
        assert self.error is None, f"{self.name} failed: {self.error!r}"

    @property
    def assigned(self) -> frozenset[int]:
        with self._lock:
            return self._assigned

    @property
    def held(self) -> set[int]:
        """Every partition the member held at some point."""
        with self._lock:
            return set(self._held)

    @property
    def positions(self) -> dict[int, int] | None:
        """The assigned partitions' positions, or None while one is not known yet."""
        with self._lock:
            positions = dict(self._positions)
        if any(p is None for p in positions.values()):
            return None
        return {p: o for p, o in positions.items() if o is not None}

    def read(self) -> list[Placed]:
        with self._lock:
            return list(self._read)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=READ_S + 2 * POLL_MS / 1000)
        assert not self._thread.is_alive(), f"{self.name} did not stop"
        self.check()


@contextmanager
def members(
    cluster: Cluster, group: str, topic: str, count: int, **settings: Any
) -> Iterator[list[Member]]:
    """`count` members joining together; stopped (closed) afterwards."""
    with ExitStack() as stack:
        started = []
        for i in range(count):
            member = Member(f"member-{i}", cluster, group, topic, **settings)
            stack.callback(member.stop)
            started.append(member)
        yield started


def wait_for_split(group: list[Member], partitions: int) -> dict[str, frozenset[int]]:
    """Until the members' assignments split the topic and every position is known."""

    def split() -> dict[str, frozenset[int]] | None:
        for m in group:
            m.check()
        if all(m.positions is not None for m in group) and is_split(
            [m.assigned for m in group], partitions
        ):
            return {m.name: m.assigned for m in group}
        return None

    return wait_for(split, JOIN_S, f"{len(group)} members splitting {partitions} partitions")


def wait_for_reads(group: list[Member], count: int, what: str = "") -> None:
    def enough() -> bool:
        for m in group:
            m.check()
        return sum(len(m.read()) for m in group) >= count

    wait_until(enough, JOIN_S, f"{count} records read by the group {what}")


def produce(
    cluster: Cluster, topic: str, partitions: int, per_partition: int, tag: str
) -> list[Placed]:
    """`per_partition` records to each partition through a KafkaProducer (kafka-python's
    defaults: idempotent, acks=all); where each landed."""
    client = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        sent = [
            (p, value, client.send(topic, value=value, partition=p))
            for i in range(per_partition)
            for p in range(partitions)
            for value in [f"{tag}-p{p}-{i}".encode()]
        ]
        client.flush(timeout=READ_S)
        return [Placed(p, f.get(timeout=READ_S).offset, value) for p, value, f in sent]
    finally:
        client.close(timeout=READ_S)


@contextmanager
def admin_client(cluster: Cluster) -> Iterator[Any]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        yield admin
    finally:
        admin.close()


# -- (a) a group of three splits the partitions ------------------------------------------------


@pytest.mark.timeout(60)
def test_three_members_split_six_partitions_and_read_every_record_once(
    cluster: Cluster, topic: str
) -> None:
    # conftest's cluster: Kafka's default broker settings, so the group's first rebalance
    # waits group.initial.rebalance.delay.ms (3 s, and 3 s more as the others arrive)
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    with members(cluster, group_of(topic), topic, 3) as group:
        split = wait_for_split(group, 6)
        sent = produce(cluster, topic, 6, 10, "split")
        wait_for_reads(group, len(sent))
    check_split(split, 6)
    assert {m.name: m.assigned for m in group} == split, "the group rebalanced while reading"
    check_read_once({m.name: m.read() for m in group}, sent, split)
    assert all(len(split[m.name]) == 2 for m in group), split  # the range assignor: 6 / 3


# -- (b) a member killed without leaving -------------------------------------------------------

# A member in a process of its own, killed with SIGKILL: no LeaveGroup, no commit, its
# connections just close, so the coordinator removes it only when its session times out.
# Its session is 6 s, the broker's group.min.session.timeout.ms (kafka-python's default
# here, 30 s, would make the test wait 30 s); the survivors keep the default. It commits
# (commit(), synchronously) whatever it read before it prints it, so the survivors resume
# exactly after what it reports; each line it prints is one poll.
VICTIM = """
import json, sys
from kafka import KafkaConsumer

bootstrap, group, topic = sys.argv[1:]
consumer = KafkaConsumer(
    topic, bootstrap_servers=bootstrap, group_id=group, session_timeout_ms=6000
)
reported = None
while True:
    records = [r for rs in consumer.poll(timeout_ms=500).values() for r in rs]
    if records:
        consumer.commit()
    assigned = sorted(tp.partition for tp in consumer.assignment())
    if records or assigned != reported:  # position() only when the assignment moved
        positions = {
            tp.partition: consumer.position(tp, timeout_ms=10000)
            for tp in consumer.assignment()
        }
        line = {
            "assigned": sorted(positions),
            "positioned": None not in positions.values(),
            "read": [[r.partition, r.offset, r.value.decode()] for r in records],
        }
        reported = assigned
        print(json.dumps(line), flush=True)
"""


class Victim:
    """The subprocess member: what it last said it holds, and what it read."""

    def __init__(self, cluster: Cluster, group: str, topic: str, stderr: IO[bytes]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", VICTIM, cluster.bootstrap_servers, group, topic],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        self._lock = threading.Lock()
        self.assigned: frozenset[int] = frozenset()
        self.positioned = False
        self._read: list[Placed] = []
        self._reader = threading.Thread(target=self._follow, name="victim-stdout", daemon=True)
        self._reader.start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = json.loads(raw)
            with self._lock:
                self.assigned = frozenset(line["assigned"])
                self.positioned = bool(line["positioned"])
                self._read.extend(Placed(p, o, v.encode()) for p, o, v in line["read"])

    def read(self) -> list[Placed]:
        with self._lock:
            return list(self._read)

    def check(self) -> None:
        assert self.process.poll() is None, f"the victim exited with {self.process.returncode}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()  # SIGKILL
        self.process.wait(timeout=READ_S)
        self._reader.join(timeout=READ_S)


@pytest.mark.timeout(90)
def test_a_killed_member_s_partitions_move_to_the_others_after_its_session_times_out(
    quick: Cluster, topic: str, tmp_path: Path
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    group = group_of(topic)
    with open(tmp_path / "victim.stderr", "wb") as stderr, ExitStack() as stack:
        victim = Victim(cluster, group, topic, stderr)
        stack.callback(victim.kill)
        survivors = stack.enter_context(members(cluster, group, topic, 2))

        def split() -> bool:
            victim.check()
            for m in survivors:
                m.check()
            return (
                victim.positioned
                and all(m.positions is not None for m in survivors)
                and is_split([victim.assigned, *(m.assigned for m in survivors)], 6)
            )

        try:
            wait_until(split, JOIN_S, "the victim and two survivors splitting 6 partitions")
        except AssertionError as timed_out:  # say where each member stood
            held = [(victim.assigned, victim.positioned)]
            held += [(m.assigned, m.positions is not None) for m in survivors]
            raise AssertionError(f"{timed_out}; (assigned, positioned): {held}") from None
        victims_partitions = victim.assigned
        before = produce(cluster, topic, 6, 5, "before")
        mine = [r for r in before if r.partition in victims_partitions]
        wait_until(
            lambda: (
                len(victim.read()) == len(mine)
                and sum(len(m.read()) for m in survivors) == len(before) - len(mine)
            ),
            JOIN_S,
            "the records produced before the kill read",
        )

        victim.kill()
        # a crashed member stays in the group until its session times out (a closed
        # connection is no LeaveGroup), so the group is still the three of them
        with admin_client(cluster) as admin:
            described = admin.describe_groups([group])[group]
        assert (described["group_state"], len(described["members"])) == ("Stable", 3)
        after = produce(cluster, topic, 6, 5, "after")
        # the survivors read everything produced after the kill, the victim's partitions
        # too, once its session timed out and the group rebalanced
        wait_for_reads(survivors, len(before) - len(mine) + len(after), "after the kill")
        finals = wait_for(
            lambda: (
                {m.name: m.assigned for m in survivors}
                if is_split([m.assigned for m in survivors], 6)
                else None
            ),
            JOIN_S,
            "the survivors splitting all 6 partitions",
        )
        read_by = {"victim": victim.read(), **{m.name: m.read() for m in survivors}}
    assert {r.partition for r in read_by["victim"]} <= victims_partitions
    check_split(finals, 6)
    # nothing the victim read (and committed) was read again, nothing produced was missed
    check_read_once(read_by, before + after)
    for m in survivors:
        assert {r.partition for r in m.read()} <= m.held
    # the victim's partitions went to the survivors
    assert victims_partitions <= set().union(*(m.held for m in survivors))
    assert "Traceback" not in (tmp_path / "victim.stderr").read_text(errors="replace")


# -- (c) committed offsets: a new member resumes after them ------------------------------------


@pytest.mark.timeout(60)
def test_auto_committed_offsets_are_where_the_next_member_resumes(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    group = group_of(topic)
    tps = [TopicPartition(topic, p) for p in range(3)]

    def committed(consumer: Any) -> dict[int, int | None]:
        return {tp.partition: consumer.committed(tp) for tp in tps}

    with members(cluster, group, topic, 1) as (first,):
        wait_for_split([first], 3)
        batch1 = produce(cluster, topic, 3, 4, "one")
        wait_for_reads([first], len(batch1))
        # the periodic auto-commit (auto_commit_interval_ms, 5 s) stores the positions
        wait_until(lambda: first.call(committed) == ends(batch1), 15, "the periodic auto-commit")
        batch2 = produce(cluster, topic, 3, 4, "two")
        wait_for_reads([first], len(batch1) + len(batch2))
    # closed: kafka-python commits the positions once more as it closes, then leaves
    batch3 = produce(cluster, topic, 3, 4, "three")  # while no member runs
    with members(cluster, group, topic, 1) as (second,):
        wait_for_reads([second], len(batch3))
    # it started at the committed offsets (with none, it would have started at the log end)
    assert first_offsets(second.read()) == ends(batch1 + batch2)
    check_read_once({"first": first.read()}, batch1 + batch2)
    check_read_once({"second": second.read()}, batch3)


@pytest.mark.timeout(60)
def test_commit_stores_the_offsets_given_and_the_next_member_resumes_there(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    group = group_of(topic)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    # auto-commit off: only what commit() sends is stored (close() would commit the
    # positions too, over the offsets this test commits)
    with members(cluster, group, topic, 1, enable_auto_commit=False) as (first,):
        wait_for_split([first], 2)
        sent = produce(cluster, topic, 2, 6, "sent")
        wait_for_reads([first], len(sent))
        first.call(lambda c: c.commit())  # the positions: 6 and 6
        assert first.call(lambda c: (c.committed(tp0), c.committed(tp1))) == (6, 6)
        # and back: partition 0 from offset 4 again, with metadata
        first.call(lambda c: c.commit({tp0: OffsetAndMetadata(4, "again from 4", -1)}))
    with members(cluster, group, topic, 1, enable_auto_commit=False) as (second,):
        wait_for_reads([second], 2)
        stored = second.call(lambda c: c.committed(tp0, metadata=True))
        assert second.positions == {0: 6, 1: 6}
    assert (stored.offset, stored.metadata) == (4, "again from 4")
    check_read_once({"first": first.read()}, sent)
    check_read_once(
        {"second": second.read()}, [r for r in sent if r.partition == 0 and r.offset >= 4]
    )


# -- (d) committed offsets survive the coordinator's broker ------------------------------------


@pytest.mark.timeout(90)
def test_committed_offsets_and_the_group_survive_the_coordinator_being_killed(
    failover_cluster: Cluster, topic: str
) -> None:
    cluster = failover_cluster
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    group = group_of(topic)
    # auto-commit off for the member that lives through the failover: what the new
    # coordinator knows of the group's offsets can then only come from loading its
    # __consumer_offsets partition (a live auto-committing member would commit them again)
    with members(cluster, group, topic, 1, enable_auto_commit=False) as (first,):
        wait_for_split([first], 3)
        batch1 = produce(cluster, topic, 3, 5, "one")
        wait_for_reads([first], len(batch1))
        first.call(lambda c: c.commit())

        # the coordinator, as the client finds it (FindCoordinator) and as the cluster has it
        with admin_client(cluster) as admin:
            found = admin._manager.run(admin._find_coordinator_id, group)
            (before,) = admin.describe_groups([group])[group]["members"]
        old = coordinator_of(cluster, group)
        assert found == old
        cluster.kill_broker(old)
        new = coordinator_of(cluster, group, not_broker=old)
        assert new != old

        # the new coordinator loaded the group (its member, its generation) and its offsets
        def described() -> tuple[dict[str, Any], dict[int, int]] | None:
            try:  # a fresh client each time: the admin client caches coordinators
                with admin_client(cluster) as admin:
                    group_now = admin.describe_groups([group])[group]
                    offsets = admin.list_group_offsets(group)[group]
            except kafka.errors.KafkaError:  # the coordinator moving, or still loading
                return None
            if group_now["error"] is not None:  # describe_groups reports, does not raise
                return None
            return group_now, {tp.partition: meta.offset for tp, meta in offsets.items()}

        group_now, offsets = wait_for(described, JOIN_S, "an answer of the new coordinator")
        assert offsets == ends(batch1)
        assert group_now["group_state"] == "Stable"
        assert [m["member_id"] for m in group_now["members"]] == [before["member_id"]]

        # the live member goes on with the new coordinator: reads and commits there
        batch2 = produce(cluster, topic, 3, 5, "two")
        wait_for_reads([first], len(batch1) + len(batch2), "after the failover")
        first.call(lambda c: c.commit())
    batch3 = produce(cluster, topic, 3, 5, "three")  # while no member runs
    with members(cluster, group, topic, 1) as (second,):
        wait_for_reads([second], len(batch3))
    assert first_offsets(second.read()) == ends(batch1 + batch2)
    check_read_once({"first": first.read()}, batch1 + batch2)
    check_read_once({"second": second.read()}, batch3)


# -- (e) the admin client ----------------------------------------------------------------------


def test_admin_lists_describes_fetches_offsets_of_and_deletes_groups(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    group = group_of(topic)
    tps = [TopicPartition(topic, p) for p in range(2)]
    with admin_client(cluster) as admin, ExitStack() as stack:
        (member,) = stack.enter_context(members(cluster, group, topic, 1))
        wait_for_split([member], 2)
        sent = produce(cluster, topic, 2, 3, "admin")
        wait_for_reads([member], len(sent))
        member.call(lambda c: c.commit())

        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        assert listed[group]["group_state"] == "Stable"
        described = admin.describe_groups([group])[group]
        assert (described["error"], described["group_state"]) == (None, "Stable")
        assert (described["protocol_type"], described["protocol_data"]) == ("consumer", "range")
        (described_member,) = described["members"]
        client_id = member.consumer.config["client_id"]
        assert described_member["client_id"] == client_id
        assert described_member["member_id"].startswith(f"{client_id}-")
        # the subscription and assignment, as kafka-python encoded them, decoded back
        assert described_member["member_metadata"]["topics"] == [topic]
        assert described_member["member_assignment"]["assigned_partitions"] == [
            {"topic": topic, "partitions": [0, 1]}
        ]
        offsets = admin.list_group_offsets(group)[group]
        assert {tp: m.offset for tp, m in offsets.items()} == {tp: 3 for tp in tps}
        # a group with members cannot be deleted: Kafka's NON_EMPTY_GROUP
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}

        stack.close()  # the member leaves: the group is Empty, its offsets stay
        emptied = admin.describe_groups([group])[group]
        assert (emptied["group_state"], emptied["members"]) == ("Empty", [])
        # offsets of an Empty group can be changed from outside it (generation -1)
        admin.alter_group_offsets(group, {tps[0]: OffsetAndMetadata(1, "rewound", -1)})
        offsets = admin.list_group_offsets(group)[group]
        assert (offsets[tps[0]].offset, offsets[tps[0]].metadata) == (1, "rewound")
        assert offsets[tps[1]].offset == 3

        assert admin.delete_groups([group]) == {group: "OK"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.list_group_offsets(group) == {group: {}}
        gone = admin.describe_groups([group])[group]
        assert (gone["error"], gone["group_state"], gone["members"]) == (None, "Dead", [])
        # deleting it again: Kafka's GROUP_ID_NOT_FOUND
        assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
