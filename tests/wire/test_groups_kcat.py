"""kcat's balanced consumer (`kcat -G <group> <topic>`, librdkafka's KafkaConsumer) against
kafkactor's group coordinator.

kcat -G joins the group, reports each rebalance on stderr ("% Group <g> rebalanced (memberid
<id>): assigned: <topic> [<p>], ..." and "... revoked: ..."), prints the records of the
partitions it holds (`-J`: JSON lines, `-u`: unbuffered) and commits what it printed with
librdkafka's defaults (every 5 s, and when it exits). With `-e` it exits once every partition
it holds is read to its end; without, it runs until it is terminated.

One setting differs from the defaults, `-X auto.offset.reset=earliest`: a member with no
committed offset would otherwise start at the log end it finds some time after joining, which
kcat does not report, so records written meanwhile would be skipped. (kcat's own `-o
beginning` would not do: with -G it makes kcat start every assigned partition at its
beginning, committed offsets or not.) Records are written by kafkactor's in-process producer.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
from contextlib import ExitStack
from typing import IO

import pytest

from kafkactor.testing import Cluster
from tests.wire.groups import (
    JOIN_S,
    Placed,
    check_read_once,
    check_split,
    ends,
    first_offsets,
    group_of,
    is_split,
    produce_in_process,
)
from tests.wire.support import wait_until

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (Debian and Ubuntu: apt-get install kcat)"
)
RUN_S = 30.0  # no kcat run may take longer
EARLIEST = ("-X", "auto.offset.reset=earliest")  # see the module's docstring
REBALANCED = re.compile(r"% Group (\S+) rebalanced \(memberid (\S+)\): (assigned|revoked): (.*)")
PARTITION = re.compile(r"(\S+) \[(\d+)\]")


def command(cluster: Cluster, group: str, topic: str, *args: str) -> list[str]:
    assert KCAT is not None
    return [KCAT, "-b", cluster.bootstrap_servers, "-G", group, "-J", *EARLIEST, *args, topic]


def as_placed(line: str) -> Placed:
    envelope = json.loads(line)
    payload = envelope["payload"]
    return Placed(
        int(envelope["partition"]),
        int(envelope["offset"]),
        None if payload is None else str(payload).encode(),
    )


def consume_to_end(cluster: Cluster, group: str, topic: str) -> tuple[list[Placed], str]:
    """`kcat -G ... -e`: the group's records from its committed offsets to the end; and
    kcat's stderr."""
    done = subprocess.run(
        command(cluster, group, topic, "-e"), capture_output=True, timeout=RUN_S, check=False
    )
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    return [as_placed(line) for line in done.stdout.decode().splitlines() if line], stderr


class Member:
    """A `kcat -G` process that runs until terminated: what it holds (from its rebalance
    reports) and what it printed, followed by two reader threads."""

    def __init__(self, name: str, cluster: Cluster, group: str, topic: str) -> None:
        self.name = name
        self.process = subprocess.Popen(
            command(cluster, group, topic, "-u"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._lock = threading.Lock()
        self._assigned: frozenset[int] = frozenset()
        self._read: list[Placed] = []
        self.stderr: list[str] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        self._readers = [
            threading.Thread(target=self._records, args=(self.process.stdout,), daemon=True),
            threading.Thread(target=self._reports, args=(self.process.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _records(self, stdout: IO[bytes]) -> None:
        for raw in stdout:
            placed = as_placed(raw.decode())
            with self._lock:
                self._read.append(placed)

    def _reports(self, stderr: IO[bytes]) -> None:
        for raw in stderr:
            line = raw.decode().rstrip("\n")
            found = REBALANCED.match(line)
            with self._lock:
                self.stderr.append(line)
                if found is None:
                    continue
                partitions = frozenset(int(p) for _, p in PARTITION.findall(found.group(4)))
                self._assigned = partitions if found.group(3) == "assigned" else frozenset()

    @property
    def assigned(self) -> frozenset[int]:
        with self._lock:
            return self._assigned

    def read(self) -> list[Placed]:
        with self._lock:
            return list(self._read)

    def check(self) -> None:
        code = self.process.poll()
        assert code is None, f"{self.name} exited with {code}: {self.stderr}"

    def terminate(self) -> None:
        """SIGTERM: kcat commits, leaves the group and exits; SIGKILL if it does not."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=RUN_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join(timeout=RUN_S)


# -- -e with -G, and committed offsets ---------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_group_member_reads_to_the_end_and_the_next_run_resumes_after_its_commit(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    group = group_of(topic)
    batch1 = produce_in_process(cluster, topic, 3, 5, "one")

    first, stderr = consume_to_end(cluster, group, topic)

    check_read_once({"first": first}, batch1)
    assert f"% Group {group} rebalanced" in stderr and "assigned:" in stderr, stderr
    # the next run of the group starts after what the first committed as it exited
    batch2 = produce_in_process(cluster, topic, 3, 5, "two")
    second, _ = consume_to_end(cluster, group, topic)
    check_read_once({"second": second}, batch2)
    assert first_offsets(second) == ends(batch1)
    # and a run with nothing new reads nothing
    assert consume_to_end(cluster, group, topic)[0] == []


# -- two members split the partitions ----------------------------------------------------------


@pytest.mark.timeout(60)
def test_two_kcat_members_split_the_partitions_and_read_every_record_once(
    quick: Cluster, topic: str
) -> None:
    cluster = quick
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    group = group_of(topic)
    with ExitStack() as stack:
        group_members = []
        for i in range(2):
            member = Member(f"kcat-{i}", cluster, group, topic)
            stack.callback(member.terminate)
            group_members.append(member)

        def split() -> bool:
            for m in group_members:
                m.check()
            return is_split([m.assigned for m in group_members], 6)

        wait_until(split, JOIN_S, "two kcat members splitting 6 partitions")
        assigned = {m.name: m.assigned for m in group_members}
        sent = produce_in_process(cluster, topic, 6, 10, "split")
        wait_until(
            lambda: sum(len(m.read()) for m in group_members) >= len(sent),
            JOIN_S,
            f"{len(sent)} records printed by the kcat members",
        )
        assert {m.name: m.assigned for m in group_members} == assigned, "rebalanced meanwhile"
    read_by = {m.name: m.read() for m in group_members}  # all they printed, until they exited
    check_split(assigned, 6)
    check_read_once(read_by, sent, assigned)
    # both exited cleanly on SIGTERM, leaving the group
    assert [m.process.returncode for m in group_members] == [0, 0], [
        m.stderr for m in group_members
    ]
