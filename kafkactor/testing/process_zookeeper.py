"""What ZooKeeper says of a cluster of broker processes, and Kafka 2.8's admin znodes: the
read side and the admin side of the nemesis's `ProcessTarget`
(`kafkactor.testing.process_nemesis`).

Reassignments are written to `/admin/reassign_partitions` (what `kafka-reassign-partitions.sh
--zookeeper` wrote), which the controller watches: it starts each reassignment and removes a
partition from the znode when its reassignment completes, deleting the znode when none is
left. Preferred elections are written to `/admin/preferred_replica_election`
(`kafka-preferred-replica-election.sh`), which the controller processes and deletes. Neither
znode carries an answer: the outcome is read back from `/brokers/topics/<t>` and the
partition's state znode.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkactor.actors.controller import zk_data
from kafkactor.actors.controller.preferred_election_zk import (
    PREFERRED_REPLICA_ELECTION,
    encode_preferred_replica_election,
)
from kafkactor.actors.controller.reassignment_zk import (
    REASSIGN_PARTITIONS,
    decode_replica_assignments,
    encode_reassign_partitions,
)
from kafkactor.common import TopicPartition
from kafkactor.messages import ErrorCode
from kafkactor.messages.controller import PartitionElectionResult
from kafkactor.server.cluster_files import ClusterError
from kafkactor.testing.read_back import wait_for

ADMIN_ZNODE_TIMEOUT_S = 20.0  # how long an earlier admin znode may stay before a new one


class ZooKeeperView:
    """A cluster's leaders, ISRs, controller and assignments read from ZooKeeper (`zk`, a
    started kazoo client), and its reassignments and preferred elections written there."""

    zk: Any

    def partition_state(self, topic: str, partition: int) -> tuple[int, tuple[int, ...]]:
        """(leader, ISR) as the partition's state znode holds them."""
        data, _ = self.zk.get(zk_data.partition_state_path(topic, partition))
        state = zk_data.decode_partition_state(topic, partition, data)
        return state.leader, tuple(state.isr)

    def leader(self, topic: str, partition: int) -> int:
        return self.partition_state(topic, partition)[0]

    def controller_id(self) -> int | None:
        try:
            data, _ = self.zk.get(zk_data.CONTROLLER)
        except NoNodeError:
            return None
        return zk_data.decode_controller(data)

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        data, _ = self.zk.get(zk_data.topic_path(topic))
        return tuple(zk_data.decode_assignment(topic, data)[partition])

    def _write_admin(self, path: str, data: bytes) -> None:
        """Create the admin znode `path` once the controller has deleted an earlier one (as
        Kafka's tools refuse to write over one still being processed)."""
        deadline = time.monotonic() + ADMIN_ZNODE_TIMEOUT_S
        while True:
            try:
                self.zk.create(path, data, makepath=True)
                return
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"{path} still there {ADMIN_ZNODE_TIMEOUT_S:.0f}s on"
                    ) from None
            wait_for(lambda: self.zk.exists(path) is None, 1.0)

    def reassign_partitions(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """Write `/admin/reassign_partitions` with the targets: the controller starts each
        reassignment and removes the partition from the znode when it completes. The znode
        cannot cancel one (None)."""
        if any(replicas is None for replicas in targets.values()):
            raise ValueError("/admin/reassign_partitions cannot cancel a reassignment")
        moves = {
            TopicPartition(topic=t, partition=p): tuple(r or ()) for (t, p), r in targets.items()
        }
        self._write_admin(REASSIGN_PARTITIONS, encode_reassign_partitions(moves))
        return {key: (ErrorCode.NONE, None) for key in targets}

    def _reassigning(self, partitions: list[tuple[str, int]] | None) -> bool:
        if self.zk.exists(REASSIGN_PARTITIONS) is not None:
            return True
        if partitions is None:
            topics = set(self.zk.get_children(zk_data.BROKER_TOPICS))
        else:
            topics = {t for t, _ in partitions}
        for topic in topics:
            data, _ = self.zk.get(zk_data.topic_path(topic))
            for p, assignment in decode_replica_assignments(topic, data).items():
                wanted = partitions is None or (topic, p) in partitions
                if wanted and assignment.being_reassigned:
                    return True
        return False

    def wait_for_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, timeout_s: float = 30.0
    ) -> None:
        """Wait until the znode is gone and no partition of `partitions` (None: any) has
        replicas being added or removed in `/brokers/topics/<t>`; ClusterError after
        `timeout_s`."""
        keys = list(partitions) if partitions is not None else None
        if not wait_for(lambda: not self._reassigning(keys), timeout_s, poll_s=0.05):
            raise ClusterError(f"reassignments still under way after {timeout_s:.0f}s")

    def elect_leaders(
        self, partitions: Iterable[tuple[str, int]] | None = None, election: str = "preferred"
    ) -> dict[tuple[str, int], PartitionElectionResult]:
        """Write `/admin/preferred_replica_election` and wait until the controller has
        processed (deleted) it. The znode has no answer: a partition whose leader is then its
        first replica gets NONE, another PREFERRED_LEADER_NOT_AVAILABLE."""
        if election != "preferred" or partitions is None:
            raise ValueError("the znode elects the preferred replicas of listed partitions")
        keys = [TopicPartition(topic=t, partition=p) for t, p in partitions]
        self._write_admin(PREFERRED_REPLICA_ELECTION, encode_preferred_replica_election(keys))
        gone = wait_for(
            lambda: self.zk.exists(PREFERRED_REPLICA_ELECTION) is None,
            ADMIN_ZNODE_TIMEOUT_S,
            poll_s=0.05,
        )
        if not gone:
            raise ClusterError(f"{PREFERRED_REPLICA_ELECTION} not processed")
        results = {}
        for key in keys:
            leader = self.leader(key.topic, key.partition)
            preferred = self.replicas(key.topic, key.partition)[0]
            code = (
                ErrorCode.NONE if leader == preferred else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            )
            results[(key.topic, key.partition)] = PartitionElectionResult(
                topic=key.topic, partition=key.partition, error_code=code, leader=leader
            )
        return results
